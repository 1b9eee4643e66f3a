//! TLS in the handshake: which of the specification's modes a server runs, and
//! what each lets a client do before it has upgraded.
//!
//! NBD starts TLS inside the connection (`NBD_OPT_STARTTLS`, an in-session
//! upgrade like SMTP's STARTTLS): the client asks, the server answers `ACK` in
//! the clear, and from the next byte on both sides speak TLS, the negotiation
//! going on inside it from a clean slate (options granted before the upgrade,
//! structured replies and metadata contexts, are forgotten, so that nothing a
//! man in the middle said in the clear survives). The codec never sees TLS
//! bytes: it reports [`HandshakeEvent::StartTls`](crate::HandshakeEvent) after
//! queueing the `ACK`, the driver sends it, wraps its stream in TLS, and calls
//! [`Handshake::tls_started`](crate::Handshake::tls_started) before feeding it
//! the decrypted bytes.
//!
//! The specification names three modes; this server runs one per connection,
//! chosen by its configuration:
//!
//! | mode | STARTTLS before TLS | other options before TLS |
//! |---|---|---|
//! | [`TlsMode::Off`] (NOTLS) | `ERR_POLICY` | served |
//! | [`TlsMode::Optional`] (SELECTIVETLS with no TLS-only export) | `ACK`, upgrade | served |
//! | [`TlsMode::Required`] (FORCEDTLS) | `ACK`, upgrade | `ERR_TLS_REQD`, but `ABORT`; `EXPORT_NAME` (which cannot be refused) drops the connection |
//!
//! Once TLS is on, a second STARTTLS is `ERR_INVALID` and nothing is ever
//! answered `ERR_TLS_REQD`. A client that did not reply with
//! `NBD_FLAG_C_FIXED_NEWSTYLE` cannot upgrade (the specification keeps such a
//! session in NOTLS mode), so a server that requires TLS drops it at once.
//!
//! `NBD_FLAG_C_NO_ZEROES` comes with the client flags, in the clear, before any
//! upgrade, and it is not negotiation state: it still governs the padding of an
//! `EXPORT_NAME` answered inside TLS. A man in the middle can flip it, which
//! desynchronises `EXPORT_NAME` (but not `GO`); that is why the specification
//! tells TLS clients to use `NBD_OPT_GO`.

/// How a server offers TLS.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TlsMode {
    /// No TLS (the specification's NOTLS): STARTTLS is refused by policy.
    #[default]
    Off,
    /// TLS at the client's choice: plain clients are served, and any client
    /// may upgrade (SELECTIVETLS, with every export available either way).
    Optional,
    /// TLS before anything else (FORCEDTLS): every option but STARTTLS and
    /// ABORT is refused until the client has upgraded.
    Required,
}

/// Where a connection stands with TLS.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TlsState {
    /// The mode this connection runs in (NOTLS for a client that cannot
    /// upgrade).
    pub mode: TlsMode,
    /// TLS has started.
    pub on: bool,
}

impl TlsState {
    pub(crate) fn new(mode: TlsMode) -> TlsState {
        TlsState { mode, on: false }
    }

    /// Whether options other than STARTTLS and ABORT must be refused with
    /// `NBD_REP_ERR_TLS_REQD`.
    pub(crate) fn refuses_plain_options(self) -> bool {
        self.mode == TlsMode::Required && !self.on
    }
}
