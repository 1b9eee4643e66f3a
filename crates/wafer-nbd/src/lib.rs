//! The NBD protocol, server side, as a pure codec: no sockets, no threads, no
//! clocks.
//!
//! NBD (the Network Block Device protocol, `doc/proto.md` of the
//! NetworkBlockDevice project) has two phases on one byte stream. In the
//! **handshake** the server greets, the client sends options one at a time and
//! the server answers each, until the client picks an export
//! (`NBD_OPT_GO` or `NBD_OPT_EXPORT_NAME`) or gives up (`NBD_OPT_ABORT`). In
//! **transmission** the client sends requests (read, write, flush, trim,
//! write-zeroes, block status, cache, disconnect), pipelined, and the server
//! replies to each by handle, in any order.
//!
//! This crate turns bytes into typed messages and typed answers into bytes, and
//! nothing else; a driver owns the socket and the threads, in the manner of
//! quinn-proto:
//!
//! * [`Handshake`] is fed received bytes ([`Handshake::handle_input`]), queues
//!   its replies for [`Handshake::poll_transmit`], and ends with a
//!   [`HandshakeEvent`]: [`Negotiated`] settings for transmission, or an abort.
//!   The catalogue of exports comes from the driver through [`Exports`].
//! * [`RequestDecoder`] is fed received bytes and yields whole [`Request`]s,
//!   or [`Rejected`] ones the driver answers with an error and survives.
//! * The [`reply`] encoders append simple replies and structured chunks.
//!
//! Only the fixed newstyle handshake is spoken, with structured replies, the
//! `base:allocation` metadata context and, if the driver offers it, TLS
//! (`NBD_OPT_STARTTLS`: the codec says when to switch, the driver wraps its
//! stream; [`TlsMode`]); extended headers are declined. Every buffer is bounded: the handshake holds at most one option of
//! [`OPTION_DATA_BYTES_MAX`], the decoder at most one write of
//! [`BLOCK_SIZE_MAXIMUM`], and input beyond those limits is either counted off
//! unread and answered with an error, or ends the connection.
//!
//! Errors come in three kinds, mirroring what the protocol lets a server do:
//! answer and go on (error option replies, [`Rejected`] requests), or drop the
//! connection ([`HandshakeError`], [`DecodeError`]). A decoder never panics on
//! any input; a driver that misuses the API (feeding a finished handshake, say)
//! trips an assertion.

mod errno;
mod export;
mod handshake;
mod option;
mod request;
mod tls;
mod wire;

pub mod consts;
pub mod reply;

pub use errno::NbdError;
pub use export::{ExportInfo, Exports, TransmissionFlags};
pub use handshake::{
    CLIENT_FLAGS_BYTES, GREETING_BYTES, HANDSHAKE_BUFFER_BYTES_MAX, Handshake, HandshakeError,
    HandshakeEvent, Negotiated, OPTION_HEADER_BYTES,
};
pub use request::{
    Command, CommandFlags, DecodeError, Decoded, REQUEST_BUFFER_BYTES_MAX, REQUEST_HEADER_BYTES,
    Rejected, Request, RequestDecoder, RequestError,
};
pub use tls::TlsMode;

/// The smallest request length and alignment the server accepts: any. The
/// engine does read-modify-write below its 4 KiB block, so clients that never
/// ask for block sizes (`NBD_OPT_EXPORT_NAME` users) are served as well.
pub const BLOCK_SIZE_MINIMUM: u32 = 1;
/// The size at which aligned requests avoid read-modify-write: one WAFL block.
pub const BLOCK_SIZE_PREFERRED: u32 = 4096;
/// The largest read or write payload: 32 MiB, the size the specification says
/// no server should treat as an attack, and what qemu-nbd advertises.
pub const BLOCK_SIZE_MAXIMUM: u32 = 32 * 1024 * 1024;

/// The protocol's limit on any string (export names, queries, messages).
pub const STRING_BYTES_MAX: usize = 4096;
/// The largest option data the handshake buffers: room for a name and a few
/// queries of the maximal string length. Longer options are counted off
/// unread and answered with `NBD_REP_ERR_TOO_BIG`.
pub const OPTION_DATA_BYTES_MAX: u32 = 16 * 1024;

/// The id this server gives `base:allocation` in `NBD_OPT_SET_META_CONTEXT`.
pub const BASE_ALLOCATION_CONTEXT_ID: u32 = 1;

// The specification's rules for advertised block sizes (`NBD_INFO_BLOCK_SIZE`).
const _: () = assert!(BLOCK_SIZE_MINIMUM.is_power_of_two() && BLOCK_SIZE_MINIMUM <= 65536);
const _: () = assert!(BLOCK_SIZE_PREFERRED.is_power_of_two());
const _: () = assert!(BLOCK_SIZE_PREFERRED >= 512 && BLOCK_SIZE_PREFERRED >= BLOCK_SIZE_MINIMUM);
const _: () =
    assert!(BLOCK_SIZE_MAXIMUM / BLOCK_SIZE_MINIMUM * BLOCK_SIZE_MINIMUM == BLOCK_SIZE_MAXIMUM);
const _: () = assert!(BLOCK_SIZE_MAXIMUM >= BLOCK_SIZE_PREFERRED && BLOCK_SIZE_MAXIMUM >= 1 << 20);
// Option data must hold the longest name, its length and a GO's request count.
const _: () = assert!(OPTION_DATA_BYTES_MAX as usize >= STRING_BYTES_MAX + 4 + 2);
// LIST_META_CONTEXT replies carry the reserved id zero; a distinct SET id
// keeps the two apart in a trace.
const _: () = assert!(BASE_ALLOCATION_CONTEXT_ID != 0);
