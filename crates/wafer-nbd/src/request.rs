//! Transmission requests: a decoder that turns received bytes into requests.
//!
//! A request is a 28-byte header (magic, flags, type, handle, offset, length),
//! followed by `length` bytes of data for `NBD_CMD_WRITE` and nothing for any
//! other command. The decoder gathers one header, decides, and then either
//! yields the request, gathers the write's payload, or counts a refused write's
//! payload off without keeping it.
//!
//! Two kinds of trouble are told apart:
//!
//! * **Fatal** ([`DecodeError`]): the byte stream can no longer be trusted. A
//!   bad magic means the decoder has lost the message boundaries. A write
//!   longer than [`BLOCK_SIZE_MAXIMUM`] is also fatal: the specification lets a
//!   server either drop such a client or answer `EINVAL` and skip the payload,
//!   and skipping would have the server read up to 4 GiB for nothing, so this
//!   server drops it. 32 MiB is what the specification says must never be
//!   treated as an attack, and what every client we know keeps to.
//! * **Per request** ([`Rejected`], carrying a [`RequestError`]): the message
//!   is well framed but not acceptable: an unknown command, a flag the command
//!   does not take or the session did not negotiate, a write to a read-only
//!   export, block status without a metadata context, a read over the maximum
//!   block size, a flush with a range. The driver answers with
//!   [`Rejected::error`] and carries on.
//!
//! What the codec does not check: offsets and lengths against the export's size
//! (see [`Request::check_range`]), and alignment (this server advertises a
//! minimum block size of 1, so there is none to enforce). Write-zeroes, trim
//! and block status may exceed the maximum block size: they move no payload,
//! and the engine handles any range.
//!
//! `NBD_CMD_DISC` is yielded whatever its flags: it gets no reply, so there is
//! no way to refuse it, and the client is leaving anyway.
//!
//! The decoder holds at most one header and one write payload:
//! [`REQUEST_BUFFER_BYTES_MAX`].

use crate::consts::{
    NBD_CMD_BLOCK_STATUS, NBD_CMD_CACHE, NBD_CMD_DISC, NBD_CMD_FLAG_DF, NBD_CMD_FLAG_FAST_ZERO,
    NBD_CMD_FLAG_FUA, NBD_CMD_FLAG_NO_HOLE, NBD_CMD_FLAG_REQ_ONE, NBD_CMD_FLUSH, NBD_CMD_READ,
    NBD_CMD_TRIM, NBD_CMD_WRITE, NBD_CMD_WRITE_ZEROES, NBD_FLAG_READ_ONLY, NBD_FLAG_SEND_DF,
    NBD_FLAG_SEND_FAST_ZERO, NBD_REQUEST_MAGIC,
};
use crate::handshake::Negotiated;
use crate::wire::{Reader, discard, gather};
use crate::{BLOCK_SIZE_MAXIMUM, NbdError, TransmissionFlags};

/// Bytes of a request header.
pub const REQUEST_HEADER_BYTES: usize = 28;
/// The most the decoder ever buffers: one header and the largest write payload.
pub const REQUEST_BUFFER_BYTES_MAX: usize = REQUEST_HEADER_BYTES + BLOCK_SIZE_MAXIMUM as usize;

/// One transmission request, well formed and acceptable to the codec.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// The client's opaque handle (the "cookie"), echoed in every reply.
    pub handle: u64,
    /// What to do.
    pub command: Command,
    /// The command flags, already checked against the command and the session.
    pub flags: CommandFlags,
    /// Byte offset into the export.
    pub offset: u64,
    /// Bytes the command covers.
    pub length: u32,
}

/// The command of a [`Request`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    /// `NBD_CMD_READ`: reply with `length` bytes from `offset`.
    Read,
    /// `NBD_CMD_WRITE`: write `data` (exactly `length` bytes) at `offset`.
    Write {
        /// The payload that followed the header.
        data: Vec<u8>,
    },
    /// `NBD_CMD_DISC`: answer what is outstanding, then close; no reply.
    Disconnect,
    /// `NBD_CMD_FLUSH`: reply once every acknowledged write is durable.
    Flush,
    /// `NBD_CMD_TRIM`: the range is no longer needed.
    Trim,
    /// `NBD_CMD_CACHE`: the client will soon read the range.
    Cache,
    /// `NBD_CMD_WRITE_ZEROES`: the range must read back as zeroes.
    WriteZeroes,
    /// `NBD_CMD_BLOCK_STATUS`: report `base:allocation` extents for the range.
    BlockStatus,
}

/// The 16 command flags of a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CommandFlags(pub u16);

impl CommandFlags {
    /// `NBD_CMD_FLAG_FUA`: reply only once the command's writes are durable.
    pub const fn fua(self) -> bool {
        self.0 & NBD_CMD_FLAG_FUA != 0
    }

    /// `NBD_CMD_FLAG_NO_HOLE`: write-zeroes must allocate, not punch a hole.
    pub const fn no_hole(self) -> bool {
        self.0 & NBD_CMD_FLAG_NO_HOLE != 0
    }

    /// `NBD_CMD_FLAG_DF`: a read's data must come in a single chunk.
    pub const fn dont_fragment(self) -> bool {
        self.0 & NBD_CMD_FLAG_DF != 0
    }

    /// `NBD_CMD_FLAG_REQ_ONE`: block status wants a single extent.
    pub const fn request_one(self) -> bool {
        self.0 & NBD_CMD_FLAG_REQ_ONE != 0
    }

    /// `NBD_CMD_FLAG_FAST_ZERO`: write-zeroes must fail fast unless it is fast.
    pub const fn fast_zero(self) -> bool {
        self.0 & NBD_CMD_FLAG_FAST_ZERO != 0
    }
}

impl Request {
    /// Checks the request's range against an export of `size_bytes`: a range
    /// that ends beyond it is `NBD_ENOSPC` for writes and write-zeroes and
    /// `NBD_EINVAL` for the rest, as the specification assigns them. Flush and
    /// disconnect have no range.
    pub fn check_range(&self, size_bytes: u64) -> Result<(), NbdError> {
        let beyond_end = match self.offset.checked_add(u64::from(self.length)) {
            Some(end) => end > size_bytes,
            None => true,
        };
        match self.command {
            Command::Flush | Command::Disconnect => Ok(()),
            _ if !beyond_end => Ok(()),
            Command::Write { .. } | Command::WriteZeroes => Err(NbdError::NoSpace),
            _ => Err(NbdError::InvalidArgument),
        }
    }
}

/// What the decoder yields for each request the client sent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decoded {
    /// Carry it out and reply (except to [`Command::Disconnect`]).
    Request(Request),
    /// Reply with [`Rejected::error`] (in the form
    /// [`reply::encode_error_reply`](crate::reply::encode_error_reply) picks)
    /// and go on.
    Rejected(Rejected),
}

/// A well-framed request the codec refuses to pass on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rejected {
    /// The client's handle, to reply to.
    pub handle: u64,
    /// The command type as received (an `NBD_CMD_*` value, or an unknown one).
    pub command_type: u16,
    /// Why it was refused.
    pub reason: RequestError,
}

impl Rejected {
    /// The error value to reply with.
    pub fn error(&self) -> NbdError {
        self.reason.nbd_error()
    }
}

/// Why a single request is refused; the connection goes on.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RequestError {
    /// A command type NBD does not define.
    #[error("unknown command type {command_type}")]
    UnknownCommand {
        /// The type as received.
        command_type: u16,
    },
    /// Flags the command does not take, or that the session did not negotiate.
    #[error("command flags {flags:#06x} are not allowed on this command")]
    FlagsNotAllowed {
        /// The offending bits.
        flags: u16,
    },
    /// A write, trim or write-zeroes on a read-only export.
    #[error("the export is read-only")]
    ReadOnly,
    /// `NBD_CMD_BLOCK_STATUS` without `base:allocation` selected for this export.
    #[error("block status needs the base:allocation metadata context")]
    NoMetaContext,
    /// A read or cache request over the advertised maximum block size.
    #[error("length {length} exceeds the maximum block size {maximum}")]
    TooLong {
        /// The requested length.
        length: u32,
        /// The advertised maximum.
        maximum: u32,
    },
    /// `NBD_CMD_FLUSH` with a nonzero offset or length.
    #[error("a flush must have zero offset and length")]
    FlushWithRange,
}

impl RequestError {
    /// The error value NBD assigns to this refusal.
    pub fn nbd_error(&self) -> NbdError {
        match self {
            RequestError::ReadOnly => NbdError::PermissionDenied,
            RequestError::UnknownCommand { .. }
            | RequestError::FlagsNotAllowed { .. }
            | RequestError::NoMetaContext
            | RequestError::TooLong { .. }
            | RequestError::FlushWithRange => NbdError::InvalidArgument,
        }
    }
}

/// Why the connection must be dropped.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// A header did not start with `NBD_REQUEST_MAGIC`: framing is lost.
    #[error("request magic {magic:#010x} is not NBD_REQUEST_MAGIC")]
    BadMagic {
        /// The magic as received.
        magic: u32,
    },
    /// A write whose payload exceeds the maximum block size.
    #[error("write of {length} bytes exceeds the maximum block size {maximum}")]
    WriteTooLong {
        /// The requested length.
        length: u32,
        /// The advertised maximum.
        maximum: u32,
    },
    /// The connection closed in the middle of a request.
    #[error("connection closed after {received} of {expected} bytes of a request")]
    Truncated {
        /// Bytes of the request (header and payload) that arrived.
        received: u64,
        /// Bytes the request should have had.
        expected: u64,
    },
}

/// Decodes the requests of one connection in transmission.
///
/// Feed it with [`RequestDecoder::decode`] until that returns `Ok(None)`, which
/// it does only once the input is used up; call [`RequestDecoder::handle_eof`]
/// when the connection closes.
#[derive(Debug)]
pub struct RequestDecoder {
    session: Session,
    stage: Stage,
    /// The header being gathered.
    header: Vec<u8>,
}

/// What the session negotiated that decides whether a request is acceptable.
#[derive(Clone, Copy, Debug)]
struct Session {
    transmission_flags: TransmissionFlags,
    base_allocation: bool,
}

#[derive(Debug)]
enum Stage {
    Header,
    Payload {
        header: Header,
        data: Vec<u8>,
    },
    DiscardPayload {
        rejected: Rejected,
        length: u32,
        remaining: u32,
    },
    Failed,
}

/// A request header, as received.
#[derive(Clone, Copy, Debug)]
struct Header {
    flags: u16,
    command_type: u16,
    handle: u64,
    offset: u64,
    length: u32,
}

/// The commands NBD defines, without their payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Read,
    Write,
    Disconnect,
    Flush,
    Trim,
    Cache,
    WriteZeroes,
    BlockStatus,
}

impl Kind {
    fn from_wire(command_type: u16) -> Option<Kind> {
        Some(match command_type {
            NBD_CMD_READ => Kind::Read,
            NBD_CMD_WRITE => Kind::Write,
            NBD_CMD_DISC => Kind::Disconnect,
            NBD_CMD_FLUSH => Kind::Flush,
            NBD_CMD_TRIM => Kind::Trim,
            NBD_CMD_CACHE => Kind::Cache,
            NBD_CMD_WRITE_ZEROES => Kind::WriteZeroes,
            NBD_CMD_BLOCK_STATUS => Kind::BlockStatus,
            _ => return None,
        })
    }

    /// The flags this command accepts in `session`. FUA is accepted on every
    /// command, as the specification requires once `NBD_FLAG_SEND_FUA` is sent.
    fn allowed_flags(self, session: Session) -> u16 {
        let negotiated = |flag: u16, transmission_flag: u16| {
            if session.transmission_flags.contains(transmission_flag) {
                flag
            } else {
                0
            }
        };
        NBD_CMD_FLAG_FUA
            | match self {
                Kind::Read => negotiated(NBD_CMD_FLAG_DF, NBD_FLAG_SEND_DF),
                Kind::WriteZeroes => {
                    NBD_CMD_FLAG_NO_HOLE
                        | negotiated(NBD_CMD_FLAG_FAST_ZERO, NBD_FLAG_SEND_FAST_ZERO)
                }
                Kind::BlockStatus => NBD_CMD_FLAG_REQ_ONE,
                _ => 0,
            }
    }

    const fn writes(self) -> bool {
        matches!(self, Kind::Write | Kind::Trim | Kind::WriteZeroes)
    }

    fn into_command(self, data: Vec<u8>) -> Command {
        assert!(
            self == Kind::Write || data.is_empty(),
            "only writes carry data"
        );
        match self {
            Kind::Read => Command::Read,
            Kind::Write => Command::Write { data },
            Kind::Disconnect => Command::Disconnect,
            Kind::Flush => Command::Flush,
            Kind::Trim => Command::Trim,
            Kind::Cache => Command::Cache,
            Kind::WriteZeroes => Command::WriteZeroes,
            Kind::BlockStatus => Command::BlockStatus,
        }
    }
}

impl Header {
    fn parse(bytes: &[u8]) -> Result<Header, DecodeError> {
        let mut reader = Reader::new(bytes);
        let magic = reader.u32().expect("a whole header");
        if magic != NBD_REQUEST_MAGIC {
            return Err(DecodeError::BadMagic { magic });
        }
        let fields = (
            reader.u16(),
            reader.u16(),
            reader.u64(),
            reader.u64(),
            reader.u32(),
        );
        let (Some(flags), Some(command_type), Some(handle), Some(offset), Some(length)) = fields
        else {
            unreachable!("a whole header");
        };
        Ok(Header {
            flags,
            command_type,
            handle,
            offset,
            length,
        })
    }

    fn into_request(self, kind: Kind, data: Vec<u8>) -> Request {
        Request {
            handle: self.handle,
            command: kind.into_command(data),
            flags: CommandFlags(self.flags),
            offset: self.offset,
            length: self.length,
        }
    }

    fn reject(self, reason: RequestError) -> Rejected {
        Rejected {
            handle: self.handle,
            command_type: self.command_type,
            reason,
        }
    }
}

impl RequestDecoder {
    /// A decoder for a session that negotiated `negotiated`.
    pub fn new(negotiated: &Negotiated) -> RequestDecoder {
        RequestDecoder {
            session: Session {
                transmission_flags: negotiated.transmission_flags,
                base_allocation: negotiated.base_allocation.is_some(),
            },
            stage: Stage::Header,
            header: Vec::with_capacity(REQUEST_HEADER_BYTES),
        }
    }

    /// Consumes bytes from the front of `input` until one request is complete
    /// (and returns it) or `input` runs out (and returns `Ok(None)`). Partial
    /// requests are kept for the next call.
    ///
    /// An error means the connection must be dropped; calling again after one
    /// is a bug in the driver and panics.
    pub fn decode(&mut self, input: &mut &[u8]) -> Result<Option<Decoded>, DecodeError> {
        assert!(
            !matches!(self.stage, Stage::Failed),
            "decode after a fatal error"
        );
        let result = self.step(input);
        match &result {
            Err(_) => self.stage = Stage::Failed,
            Ok(None) => assert!(input.is_empty(), "stopped before the input ran out"),
            Ok(Some(_)) => {}
        }
        assert!(self.buffered_bytes() <= REQUEST_BUFFER_BYTES_MAX);
        result
    }

    /// Checks the end of the input: clean between requests, an error inside one.
    pub fn handle_eof(&self) -> Result<(), DecodeError> {
        let header_bytes = REQUEST_HEADER_BYTES as u64;
        let (received, expected) = match &self.stage {
            Stage::Header if self.header.is_empty() => return Ok(()),
            Stage::Header => (self.header.len() as u64, header_bytes),
            Stage::Payload { header, data } => (
                header_bytes + data.len() as u64,
                header_bytes + u64::from(header.length),
            ),
            Stage::DiscardPayload {
                length, remaining, ..
            } => (
                header_bytes + u64::from(length - remaining),
                header_bytes + u64::from(*length),
            ),
            Stage::Failed => panic!("end of input reported after a fatal error"),
        };
        assert!(received < expected, "a complete request is never pending");
        Err(DecodeError::Truncated { received, expected })
    }

    /// Bytes of a partly received request held by the decoder; never more than
    /// [`REQUEST_BUFFER_BYTES_MAX`].
    pub fn buffered_bytes(&self) -> usize {
        match &self.stage {
            Stage::Payload { data, .. } => REQUEST_HEADER_BYTES + data.len(),
            _ => self.header.len(),
        }
    }

    fn step(&mut self, input: &mut &[u8]) -> Result<Option<Decoded>, DecodeError> {
        // At most two rounds: a header, then the payload it announced, which
        // may be empty and so complete without further input.
        loop {
            match &mut self.stage {
                Stage::Header => {
                    if !gather(&mut self.header, REQUEST_HEADER_BYTES, input) {
                        return Ok(None);
                    }
                    let header = Header::parse(&self.header)?;
                    self.header.clear();
                    if let Some(decoded) = self.handle_header(header)? {
                        return Ok(Some(decoded));
                    }
                }
                Stage::Payload { header, data } => {
                    if !gather(data, header.length as usize, input) {
                        return Ok(None);
                    }
                    let (header, data) = (*header, core::mem::take(data));
                    self.stage = Stage::Header;
                    let request = header.into_request(Kind::Write, data);
                    return Ok(Some(Decoded::Request(request)));
                }
                Stage::DiscardPayload {
                    rejected,
                    remaining,
                    ..
                } => {
                    if !discard(remaining, input) {
                        return Ok(None);
                    }
                    let rejected = rejected.clone();
                    self.stage = Stage::Header;
                    return Ok(Some(Decoded::Rejected(rejected)));
                }
                Stage::Failed => unreachable!("checked by decode"),
            }
        }
    }

    /// Decides what a complete header leads to: a finished request, or a
    /// payload stage (`None`).
    fn handle_header(&mut self, header: Header) -> Result<Option<Decoded>, DecodeError> {
        let kind = Kind::from_wire(header.command_type);
        if kind == Some(Kind::Write) && header.length > BLOCK_SIZE_MAXIMUM {
            return Err(DecodeError::WriteTooLong {
                length: header.length,
                maximum: BLOCK_SIZE_MAXIMUM,
            });
        }
        let verdict = match kind {
            Some(kind) => self.check(kind, header).map(|()| kind),
            None => Err(RequestError::UnknownCommand {
                command_type: header.command_type,
            }),
        };
        let carries_payload = kind == Some(Kind::Write);
        match verdict {
            Ok(Kind::Write) => {
                // Reserved whole, so the payload is never copied while it
                // arrives and never takes more than its length.
                self.stage = Stage::Payload {
                    header,
                    data: Vec::with_capacity(header.length as usize),
                };
                Ok(None)
            }
            Ok(kind) => Ok(Some(Decoded::Request(
                header.into_request(kind, Vec::new()),
            ))),
            Err(reason) if carries_payload => {
                self.stage = Stage::DiscardPayload {
                    rejected: header.reject(reason),
                    length: header.length,
                    remaining: header.length,
                };
                Ok(None)
            }
            Err(reason) => Ok(Some(Decoded::Rejected(header.reject(reason)))),
        }
    }

    /// The per-request checks, in the order their errors take precedence.
    fn check(&self, kind: Kind, header: Header) -> Result<(), RequestError> {
        if kind == Kind::Disconnect {
            return Ok(());
        }
        let refused_flags = header.flags & !kind.allowed_flags(self.session);
        if refused_flags != 0 {
            return Err(RequestError::FlagsNotAllowed {
                flags: refused_flags,
            });
        }
        if kind.writes() && self.session.transmission_flags.contains(NBD_FLAG_READ_ONLY) {
            return Err(RequestError::ReadOnly);
        }
        if kind == Kind::BlockStatus && !self.session.base_allocation {
            return Err(RequestError::NoMetaContext);
        }
        if matches!(kind, Kind::Read | Kind::Cache) && header.length > BLOCK_SIZE_MAXIMUM {
            return Err(RequestError::TooLong {
                length: header.length,
                maximum: BLOCK_SIZE_MAXIMUM,
            });
        }
        if kind == Kind::Flush && (header.offset != 0 || header.length != 0) {
            return Err(RequestError::FlushWithRange);
        }
        Ok(())
    }
}
