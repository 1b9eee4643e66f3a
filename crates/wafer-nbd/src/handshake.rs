//! The fixed newstyle handshake, server side, as a state machine without I/O.
//!
//! The server speaks first: `NBDMAGIC`, `IHAVEOPT` and its handshake flags
//! (fixed newstyle, no zeroes). The client answers with 32 bits of flags; an
//! unknown bit ends the connection, as the specification demands. A client that
//! leaves out `NBD_FLAG_C_FIXED_NEWSTYLE` is still served fixed newstyle, which
//! the specification allows and which costs old clients nothing: they send only
//! `NBD_OPT_EXPORT_NAME`. Then come options, one at a time, each answered in
//! full before the client may send the next:
//!
//! | option | answer |
//! |---|---|
//! | `EXPORT_NAME` | size, flags, 124 zeroes unless no-zeroes; unknown export closes the connection |
//! | `ABORT` | `ACK`, then the driver closes |
//! | `LIST` | one `SERVER` per export, `ACK` |
//! | `STARTTLS` | `ACK` and the upgrade, or a refusal, as the TLS mode says (`crate::tls`) |
//! | `INFO`, `GO` | `INFO` export, name and description if asked, block size, `ACK`; `GO` then enters transmission |
//! | `STRUCTURED_REPLY` | `ACK` once; a repeat is invalid |
//! | `LIST_META_CONTEXT` | `base:allocation` if it matches, `ACK` |
//! | `SET_META_CONTEXT` | `base:allocation` if asked (structured replies first), `ACK` |
//! | anything else | `ERR_UNSUP`, and the negotiation goes on |
//!
//! Option data longer than [`OPTION_DATA_BYTES_MAX`](crate::OPTION_DATA_BYTES_MAX)
//! is never buffered: it is counted off as it arrives and answered with
//! `ERR_TOO_BIG`, so a hostile client cannot make the handshake hold more than
//! one option header and one bounded option. Where the protocol leaves no way
//! to answer (a bad option magic, unknown client flags, anything wrong with
//! `EXPORT_NAME`) the handshake fails with a [`HandshakeError`] and the driver
//! drops the connection.
//!
//! The driver owns the socket and calls, in a loop:
//! 1. [`Handshake::poll_transmit`], and sends what it appended (the greeting
//!    comes out before any input);
//! 2. [`Handshake::handle_input`] with the bytes received so far. Each call
//!    consumes at most one client message (the flags, or one option), so the
//!    replies to a pipelining client never pile up unsent; call it again while
//!    input remains, draining `poll_transmit` in between.
//!
//! An event ends the handshake, but for one. On [`HandshakeEvent::Transmission`]
//! the driver sends the pending output and hands whatever input is left to a
//! [`RequestDecoder`](crate::RequestDecoder); on [`HandshakeEvent::Aborted`] it
//! sends the pending `ACK` and closes. On [`HandshakeEvent::StartTls`] it sends
//! the pending `ACK` in the clear, gives the input left over to its TLS layer
//! (it can only be the client's first TLS bytes), completes the TLS handshake,
//! calls [`Handshake::tls_started`], and goes on feeding decrypted input.

use crate::consts::{
    BASE_ALLOCATION, BASE_NAMESPACE, EXPORT_NAME_ZERO_PADDING_BYTES, IHAVEOPT,
    NBD_FLAG_C_FIXED_NEWSTYLE, NBD_FLAG_C_NO_ZEROES, NBD_FLAG_FIXED_NEWSTYLE, NBD_FLAG_NO_ZEROES,
    NBD_INFO_BLOCK_SIZE, NBD_INFO_DESCRIPTION, NBD_INFO_EXPORT, NBD_INFO_NAME, NBD_OPT_ABORT,
    NBD_OPT_EXPORT_NAME, NBD_OPT_SET_META_CONTEXT, NBD_OPT_STARTTLS, NBD_REP_ACK,
    NBD_REP_ERR_INVALID, NBD_REP_ERR_POLICY, NBD_REP_ERR_TLS_REQD, NBD_REP_ERR_TOO_BIG,
    NBD_REP_ERR_UNKNOWN, NBD_REP_INFO, NBD_REP_MAGIC, NBD_REP_META_CONTEXT, NBD_REP_SERVER,
    NBDMAGIC,
};
use crate::export::{ExportInfo, Exports, TransmissionFlags};
use crate::option::{self, ClientOption, ExportQuery, MetaContextQuery};
use crate::tls::{TlsMode, TlsState};
use crate::wire::{Reader, discard, gather};
use crate::{
    BASE_ALLOCATION_CONTEXT_ID, BLOCK_SIZE_MAXIMUM, BLOCK_SIZE_MINIMUM, BLOCK_SIZE_PREFERRED,
    OPTION_DATA_BYTES_MAX, STRING_BYTES_MAX,
};

/// Bytes of the server's greeting: `NBDMAGIC`, `IHAVEOPT`, handshake flags.
pub const GREETING_BYTES: usize = 18;
/// Bytes of the client's flags.
pub const CLIENT_FLAGS_BYTES: usize = 4;
/// Bytes of an option header: `IHAVEOPT`, option, data length.
pub const OPTION_HEADER_BYTES: usize = 16;
/// The most the handshake ever buffers: one header and the largest option it
/// accepts.
pub const HANDSHAKE_BUFFER_BYTES_MAX: usize = OPTION_HEADER_BYTES + OPTION_DATA_BYTES_MAX as usize;

/// The handshake flags this server sends.
const HANDSHAKE_FLAGS: u16 = NBD_FLAG_FIXED_NEWSTYLE | NBD_FLAG_NO_ZEROES;
/// The client flags this server understands.
const CLIENT_FLAGS_KNOWN: u32 = NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES;

/// The server side of one connection's handshake.
#[derive(Debug)]
pub struct Handshake {
    stage: Stage,
    /// The client message being gathered.
    message: Vec<u8>,
    /// Bytes for the driver to send, oldest first.
    output: Vec<u8>,
    /// The client set `NBD_FLAG_C_NO_ZEROES`.
    no_zeroes: bool,
    /// The client negotiated `NBD_OPT_STRUCTURED_REPLY`.
    structured_replies: bool,
    /// The export name of the last successful `NBD_OPT_SET_META_CONTEXT` that
    /// selected `base:allocation`.
    base_allocation_export: Option<String>,
    /// The TLS mode, and whether TLS is on.
    tls: TlsState,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    ClientFlags,
    OptionHeader,
    OptionData {
        option: u32,
        length: u32,
    },
    /// Data over the limit, counted off unread, then refused as too big.
    OversizedOption {
        option: u32,
        length: u32,
        remaining: u32,
    },
    /// STARTTLS was acknowledged: no input until the driver has started TLS.
    StartingTls,
    Finished,
}

/// How a handshake ended, when it ends without an error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HandshakeEvent {
    /// The client chose an export: send the pending output, then serve
    /// requests; leftover input belongs to the request decoder.
    Transmission(Negotiated),
    /// The client sent `NBD_OPT_ABORT`: send the pending `ACK`, then close.
    Aborted,
    /// The client sent `NBD_OPT_STARTTLS` and it was granted: send the pending
    /// `ACK` in the clear, then run the TLS handshake on the connection (the
    /// input left over is its first bytes), then call
    /// [`Handshake::tls_started`] and go on with decrypted input. The
    /// handshake has not ended.
    StartTls,
}

/// What a successful handshake agreed on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Negotiated {
    /// The export the client chose, as the driver's catalogue described it
    /// (its canonical name, even when the client asked for the default "").
    pub export: ExportInfo,
    /// The transmission flags sent to the client.
    pub transmission_flags: TransmissionFlags,
    /// Replies to `NBD_CMD_READ` must be structured; other replies may be.
    pub structured_replies: bool,
    /// The context id of `base:allocation` for `NBD_CMD_BLOCK_STATUS`, if the
    /// client selected it for this export.
    pub base_allocation: Option<u32>,
    /// The client set `NBD_FLAG_C_NO_ZEROES`.
    pub no_zeroes: bool,
}

/// Why a handshake ended in a dropped connection.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HandshakeError {
    /// The client set flags this server never offered.
    #[error("client flags {flags:#010x} include unknown bits")]
    UnknownClientFlags {
        /// The flags as received.
        flags: u32,
    },
    /// An option did not start with `IHAVEOPT`.
    #[error("option magic {magic:#018x} is not IHAVEOPT")]
    BadOptionMagic {
        /// The magic as received.
        magic: u64,
    },
    /// `NBD_OPT_EXPORT_NAME` with a name over the protocol's limit.
    #[error("NBD_OPT_EXPORT_NAME of {length} bytes exceeds the 4096-byte limit")]
    ExportNameTooLong {
        /// The option's data length.
        length: u32,
    },
    /// `NBD_OPT_EXPORT_NAME` with a name that is not UTF-8 or contains NUL.
    #[error("NBD_OPT_EXPORT_NAME carries a malformed name")]
    ExportNameMalformed,
    /// `NBD_OPT_EXPORT_NAME` for an export that does not exist; the option
    /// cannot be answered with an error, so the connection is closed.
    #[error("NBD_OPT_EXPORT_NAME names no export: {name:?}")]
    UnknownExport {
        /// The name the client asked for.
        name: String,
    },
    /// The connection closed in the middle of a client message.
    #[error("connection closed after {received} of {expected} bytes of a handshake message")]
    Truncated {
        /// Bytes of the message that arrived.
        received: u64,
        /// Bytes the message should have had.
        expected: u64,
    },
    /// The connection closed between messages, before an export was chosen.
    #[error("connection closed before the handshake finished")]
    Closed,
    /// `NBD_OPT_EXPORT_NAME` before TLS where TLS is required; the option
    /// cannot be answered with an error, so the connection is closed.
    #[error("NBD_OPT_EXPORT_NAME before NBD_OPT_STARTTLS, and this server requires TLS")]
    ExportNameWithoutTls,
    /// A client without fixed newstyle cannot start TLS, which is required.
    #[error(
        "the client did not set NBD_FLAG_C_FIXED_NEWSTYLE, so it cannot start the TLS this server requires"
    )]
    TlsImpossible,
}

impl Default for Handshake {
    fn default() -> Self {
        Handshake::new()
    }
}

impl Handshake {
    /// A handshake without TLS whose greeting is waiting in
    /// [`Handshake::poll_transmit`].
    pub fn new() -> Handshake {
        Handshake::with_tls(TlsMode::Off)
    }

    /// A handshake in the TLS mode `mode` (`crate::tls`) whose greeting is
    /// waiting in [`Handshake::poll_transmit`].
    pub fn with_tls(mode: TlsMode) -> Handshake {
        let mut output = Vec::with_capacity(GREETING_BYTES);
        output.extend_from_slice(&NBDMAGIC.to_be_bytes());
        output.extend_from_slice(&IHAVEOPT.to_be_bytes());
        output.extend_from_slice(&HANDSHAKE_FLAGS.to_be_bytes());
        assert_eq!(output.len(), GREETING_BYTES);
        Handshake {
            stage: Stage::ClientFlags,
            message: Vec::new(),
            output,
            no_zeroes: false,
            structured_replies: false,
            base_allocation_export: None,
            tls: TlsState::new(mode),
        }
    }

    /// Appends the bytes waiting to be sent to `buffer`; returns how many.
    pub fn poll_transmit(&mut self, buffer: &mut Vec<u8>) -> usize {
        let count = self.output.len();
        buffer.append(&mut self.output);
        count
    }

    /// Consumes bytes from the front of `input` until one client message is
    /// handled or `input` runs out.
    ///
    /// Returns an event when the handshake ends or TLS must start; afterwards
    /// the rest of `input` is not the handshake's. An error means the
    /// connection must be dropped. Calling this again after an event or an
    /// error (but for [`HandshakeEvent::StartTls`] once
    /// [`Handshake::tls_started`] has been called) is a bug in the driver and
    /// panics.
    pub fn handle_input<E: Exports + ?Sized>(
        &mut self,
        input: &mut &[u8],
        exports: &E,
    ) -> Result<Option<HandshakeEvent>, HandshakeError> {
        assert_ne!(
            self.stage,
            Stage::Finished,
            "handshake input after it ended"
        );
        assert_ne!(
            self.stage,
            Stage::StartingTls,
            "handshake input before tls_started"
        );
        let result = self.step(input, exports);
        if !matches!(result, Ok(None) | Ok(Some(HandshakeEvent::StartTls))) {
            self.stage = Stage::Finished;
        }
        assert!(self.message.len() <= HANDSHAKE_BUFFER_BYTES_MAX);
        result
    }

    /// Tells the handshake that the driver has completed the TLS handshake
    /// after [`HandshakeEvent::StartTls`]: the negotiation starts again inside
    /// TLS, every option granted before forgotten, as the specification
    /// demands. Calling it at any other time is a bug in the driver and panics.
    pub fn tls_started(&mut self) {
        assert_eq!(self.stage, Stage::StartingTls, "TLS started unasked");
        assert!(self.message.is_empty(), "STARTTLS left no partial message");
        self.stage = Stage::OptionHeader;
        self.tls.on = true;
        self.structured_replies = false;
        self.base_allocation_export = None;
    }

    /// The error to report when the connection closes before the handshake ended.
    pub fn handle_eof(&self) -> HandshakeError {
        let received = self.message.len() as u64;
        match self.stage {
            Stage::ClientFlags if received == 0 => HandshakeError::Closed,
            Stage::OptionHeader if received == 0 => HandshakeError::Closed,
            Stage::ClientFlags => truncated(received, CLIENT_FLAGS_BYTES as u64),
            Stage::OptionHeader => truncated(received, OPTION_HEADER_BYTES as u64),
            Stage::OptionData { length, .. } => truncated(received, u64::from(length)),
            Stage::OversizedOption {
                length, remaining, ..
            } => truncated(u64::from(length - remaining), u64::from(length)),
            Stage::StartingTls => HandshakeError::Closed,
            Stage::Finished => panic!("end of input reported after the handshake ended"),
        }
    }

    /// Bytes of a partly received client message held by the handshake; never
    /// more than [`HANDSHAKE_BUFFER_BYTES_MAX`].
    pub fn buffered_bytes(&self) -> usize {
        self.message.len()
    }

    fn step<E: Exports + ?Sized>(
        &mut self,
        input: &mut &[u8],
        exports: &E,
    ) -> Result<Option<HandshakeEvent>, HandshakeError> {
        // At most two rounds: an option header, then that option's data, which
        // may be empty and so complete without further input.
        loop {
            match self.stage {
                Stage::ClientFlags => {
                    if gather(&mut self.message, CLIENT_FLAGS_BYTES, input) {
                        self.handle_client_flags()?;
                    }
                    return Ok(None);
                }
                Stage::OptionHeader => {
                    if !gather(&mut self.message, OPTION_HEADER_BYTES, input) {
                        return Ok(None);
                    }
                    self.handle_option_header()?;
                }
                Stage::OptionData { option, length } => {
                    if !gather(&mut self.message, length as usize, input) {
                        return Ok(None);
                    }
                    let data = core::mem::take(&mut self.message);
                    self.stage = Stage::OptionHeader;
                    return self.handle_option(option, &data, exports);
                }
                Stage::OversizedOption {
                    option,
                    length,
                    mut remaining,
                } => {
                    if discard(&mut remaining, input) {
                        self.stage = Stage::OptionHeader;
                        if self.refuses_before_tls(option) {
                            self.reply_tls_required(option);
                        } else {
                            self.reply_error(option, NBD_REP_ERR_TOO_BIG, "option data too large");
                        }
                    } else {
                        self.stage = Stage::OversizedOption {
                            option,
                            length,
                            remaining,
                        };
                    }
                    return Ok(None);
                }
                Stage::StartingTls | Stage::Finished => unreachable!("checked by handle_input"),
            }
        }
    }

    fn handle_client_flags(&mut self) -> Result<(), HandshakeError> {
        let flags = Reader::new(&self.message)
            .u32()
            .expect("four bytes gathered");
        self.message.clear();
        if flags & !CLIENT_FLAGS_KNOWN != 0 {
            return Err(HandshakeError::UnknownClientFlags { flags });
        }
        if flags & NBD_FLAG_C_FIXED_NEWSTYLE == 0 {
            // The specification: NOTLS unless both sides said fixed newstyle.
            if self.tls.mode == TlsMode::Required {
                return Err(HandshakeError::TlsImpossible);
            }
            self.tls = TlsState::new(TlsMode::Off);
        }
        self.no_zeroes = flags & NBD_FLAG_C_NO_ZEROES != 0;
        self.stage = Stage::OptionHeader;
        Ok(())
    }

    fn handle_option_header(&mut self) -> Result<(), HandshakeError> {
        let mut reader = Reader::new(&self.message);
        let header = (reader.u64(), reader.u32(), reader.u32());
        let (Some(magic), Some(option), Some(length)) = header else {
            unreachable!("sixteen bytes gathered");
        };
        self.message.clear();
        if magic != IHAVEOPT {
            return Err(HandshakeError::BadOptionMagic { magic });
        }
        if option == NBD_OPT_EXPORT_NAME && length as usize > STRING_BYTES_MAX {
            return Err(HandshakeError::ExportNameTooLong { length });
        }
        self.stage = if length > OPTION_DATA_BYTES_MAX {
            Stage::OversizedOption {
                option,
                length,
                remaining: length,
            }
        } else {
            Stage::OptionData { option, length }
        };
        Ok(())
    }

    fn handle_option<E: Exports + ?Sized>(
        &mut self,
        option: u32,
        data: &[u8],
        exports: &E,
    ) -> Result<Option<HandshakeEvent>, HandshakeError> {
        if option == NBD_OPT_SET_META_CONTEXT {
            // The specification: a SET replaces the selection even when it fails.
            self.base_allocation_export = None;
        }
        if self.refuses_before_tls(option) {
            if option == NBD_OPT_EXPORT_NAME {
                return Err(HandshakeError::ExportNameWithoutTls);
            }
            self.reply_tls_required(option);
            return Ok(None);
        }
        let parsed = match option::parse(option, data) {
            Ok(parsed) => parsed,
            Err(_) if option == NBD_OPT_EXPORT_NAME => {
                return Err(HandshakeError::ExportNameMalformed);
            }
            Err(refusal) => {
                self.reply_error(option, refusal.reply_type, refusal.message);
                return Ok(None);
            }
        };
        match parsed {
            ClientOption::ExportName { name } => self.export_name(name, exports).map(Some),
            ClientOption::Abort => {
                self.reply(option, NBD_REP_ACK, &[]);
                Ok(Some(HandshakeEvent::Aborted))
            }
            ClientOption::List => {
                self.list(option, exports);
                Ok(None)
            }
            ClientOption::StartTls => Ok(self.start_tls(option)),
            ClientOption::Info(query) => {
                self.describe_export(option, &query, exports);
                Ok(None)
            }
            ClientOption::Go(query) => Ok(self.go(option, &query, exports)),
            ClientOption::StructuredReply => {
                self.structured_reply(option);
                Ok(None)
            }
            ClientOption::ListMetaContext(query) => {
                self.list_meta_context(option, &query, exports);
                Ok(None)
            }
            ClientOption::SetMetaContext(query) => {
                self.set_meta_context(option, query, exports);
                Ok(None)
            }
        }
    }

    /// Whether `option` is refused because TLS is required and not on yet.
    fn refuses_before_tls(&self, option: u32) -> bool {
        self.tls.refuses_plain_options() && option != NBD_OPT_STARTTLS && option != NBD_OPT_ABORT
    }

    fn reply_tls_required(&mut self, option: u32) {
        self.reply_error(
            option,
            NBD_REP_ERR_TLS_REQD,
            "this server requires TLS: send NBD_OPT_STARTTLS first",
        );
    }

    /// Answers `NBD_OPT_STARTTLS`: `ACK` and [`HandshakeEvent::StartTls`] if
    /// the mode allows an upgrade now, else an error and the negotiation goes on.
    fn start_tls(&mut self, option: u32) -> Option<HandshakeEvent> {
        if self.tls.mode == TlsMode::Off {
            self.reply_error(
                option,
                NBD_REP_ERR_POLICY,
                "TLS is not offered on this server",
            );
            return None;
        }
        if self.tls.on {
            self.reply_error(option, NBD_REP_ERR_INVALID, "TLS is already on");
            return None;
        }
        self.reply(option, NBD_REP_ACK, &[]);
        self.stage = Stage::StartingTls;
        Some(HandshakeEvent::StartTls)
    }

    fn export_name<E: Exports + ?Sized>(
        &mut self,
        name: String,
        exports: &E,
    ) -> Result<HandshakeEvent, HandshakeError> {
        let Some(export) = exports.lookup(&name) else {
            return Err(HandshakeError::UnknownExport { name });
        };
        let negotiated = self.negotiated(export, &name);
        self.output
            .extend_from_slice(&negotiated.export.size_bytes.to_be_bytes());
        self.output
            .extend_from_slice(&negotiated.transmission_flags.0.to_be_bytes());
        if !self.no_zeroes {
            self.output
                .extend_from_slice(&[0; EXPORT_NAME_ZERO_PADDING_BYTES]);
        }
        Ok(HandshakeEvent::Transmission(negotiated))
    }

    fn list<E: Exports + ?Sized>(&mut self, option: u32, exports: &E) {
        for name in exports.list() {
            assert!(
                name.len() <= STRING_BYTES_MAX,
                "export names are protocol strings"
            );
            let mut data = Vec::with_capacity(4 + name.len());
            data.extend_from_slice(&(name.len() as u32).to_be_bytes());
            data.extend_from_slice(name.as_bytes());
            self.reply(option, NBD_REP_SERVER, &data);
        }
        self.reply(option, NBD_REP_ACK, &[]);
    }

    /// Answers `NBD_OPT_INFO` or the first part of `NBD_OPT_GO`; the export
    /// when the answer ended in `ACK`.
    fn describe_export<E: Exports + ?Sized>(
        &mut self,
        option: u32,
        query: &ExportQuery,
        exports: &E,
    ) -> Option<ExportInfo> {
        let Some(export) = exports.lookup(&query.name) else {
            self.reply_error(option, NBD_REP_ERR_UNKNOWN, "no such export");
            return None;
        };
        let flags = TransmissionFlags::for_export(&export, self.structured_replies);
        let mut info = NBD_INFO_EXPORT.to_be_bytes().to_vec();
        info.extend_from_slice(&export.size_bytes.to_be_bytes());
        info.extend_from_slice(&flags.0.to_be_bytes());
        self.reply(option, NBD_REP_INFO, &info);
        if query.asks_for(NBD_INFO_NAME) {
            self.reply_info_string(option, NBD_INFO_NAME, &export.name);
        }
        if query.asks_for(NBD_INFO_DESCRIPTION) && !export.description.is_empty() {
            self.reply_info_string(option, NBD_INFO_DESCRIPTION, &export.description);
        }
        let mut sizes = NBD_INFO_BLOCK_SIZE.to_be_bytes().to_vec();
        for size in [BLOCK_SIZE_MINIMUM, BLOCK_SIZE_PREFERRED, BLOCK_SIZE_MAXIMUM] {
            sizes.extend_from_slice(&size.to_be_bytes());
        }
        self.reply(option, NBD_REP_INFO, &sizes);
        self.reply(option, NBD_REP_ACK, &[]);
        Some(export)
    }

    fn go<E: Exports + ?Sized>(
        &mut self,
        option: u32,
        query: &ExportQuery,
        exports: &E,
    ) -> Option<HandshakeEvent> {
        let export = self.describe_export(option, query, exports)?;
        Some(HandshakeEvent::Transmission(
            self.negotiated(export, &query.name),
        ))
    }

    fn structured_reply(&mut self, option: u32) {
        if self.structured_replies {
            self.reply_error(
                option,
                NBD_REP_ERR_INVALID,
                "structured replies are already on",
            );
            return;
        }
        self.structured_replies = true;
        self.reply(option, NBD_REP_ACK, &[]);
    }

    fn list_meta_context<E: Exports + ?Sized>(
        &mut self,
        option: u32,
        query: &MetaContextQuery,
        exports: &E,
    ) {
        if exports.lookup(&query.export_name).is_none() {
            self.reply_error(option, NBD_REP_ERR_UNKNOWN, "no such export");
            return;
        }
        let matches = query.queries.is_empty()
            || query
                .queries
                .iter()
                .any(|query| query == BASE_NAMESPACE || query == BASE_ALLOCATION);
        if matches {
            // Context ids in a LIST reply are reserved and sent as zero.
            self.reply_meta_context(option, 0);
        }
        self.reply(option, NBD_REP_ACK, &[]);
    }

    fn set_meta_context<E: Exports + ?Sized>(
        &mut self,
        option: u32,
        query: MetaContextQuery,
        exports: &E,
    ) {
        if !self.structured_replies {
            self.reply_error(
                option,
                NBD_REP_ERR_INVALID,
                "negotiate structured replies first",
            );
            return;
        }
        if exports.lookup(&query.export_name).is_none() {
            self.reply_error(option, NBD_REP_ERR_UNKNOWN, "no such export");
            return;
        }
        // `base:` selects nothing in a SET, and unknown namespaces are ignored.
        if query.queries.iter().any(|query| query == BASE_ALLOCATION) {
            self.reply_meta_context(option, BASE_ALLOCATION_CONTEXT_ID);
            self.base_allocation_export = Some(query.export_name);
        }
        self.reply(option, NBD_REP_ACK, &[]);
    }

    /// The settings for transmission with `export`, which the client asked
    /// for as `requested_name`.
    fn negotiated(&self, export: ExportInfo, requested_name: &str) -> Negotiated {
        // BLOCK_STATUS is allowed only if the last SET_META_CONTEXT named the
        // export (as the client spelled it) that GO or EXPORT_NAME enters.
        let base_allocation = self.base_allocation_export.as_deref() == Some(requested_name);
        if base_allocation {
            assert!(
                self.structured_replies,
                "SET_META_CONTEXT needs structured replies"
            );
        }
        Negotiated {
            transmission_flags: TransmissionFlags::for_export(&export, self.structured_replies),
            export,
            structured_replies: self.structured_replies,
            base_allocation: base_allocation.then_some(BASE_ALLOCATION_CONTEXT_ID),
            no_zeroes: self.no_zeroes,
        }
    }

    fn reply_info_string(&mut self, option: u32, info: u16, text: &str) {
        assert!(
            text.len() <= STRING_BYTES_MAX,
            "export strings are protocol strings"
        );
        let mut data = info.to_be_bytes().to_vec();
        data.extend_from_slice(text.as_bytes());
        self.reply(option, NBD_REP_INFO, &data);
    }

    fn reply_meta_context(&mut self, option: u32, context_id: u32) {
        let mut data = context_id.to_be_bytes().to_vec();
        data.extend_from_slice(BASE_ALLOCATION.as_bytes());
        self.reply(option, NBD_REP_META_CONTEXT, &data);
    }

    fn reply_error(&mut self, option: u32, reply_type: u32, message: &'static str) {
        self.reply(option, reply_type, message.as_bytes());
    }

    /// One option reply: magic, option, reply type, data length, data.
    fn reply(&mut self, option: u32, reply_type: u32, data: &[u8]) {
        let length = u32::try_from(data.len()).expect("option replies are small");
        self.output.extend_from_slice(&NBD_REP_MAGIC.to_be_bytes());
        self.output.extend_from_slice(&option.to_be_bytes());
        self.output.extend_from_slice(&reply_type.to_be_bytes());
        self.output.extend_from_slice(&length.to_be_bytes());
        self.output.extend_from_slice(data);
    }
}

fn truncated(received: u64, expected: u64) -> HandshakeError {
    assert!(received < expected, "a complete message is never pending");
    HandshakeError::Truncated { received, expected }
}
