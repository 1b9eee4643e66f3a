//! Every magic number and code point of the NBD protocol this crate speaks,
//! named as `doc/proto.md` of the NetworkBlockDevice project names it.
//!
//! All of them travel in network byte order (big-endian). Widths follow the
//! fields that carry them: handshake flags and transmission flags are 16 bits,
//! client flags 32, option numbers and option reply types 32, command types and
//! command flags 16, structured reply types and flags 16, errors 32. Bits are
//! counted from the least significant one, as the specification counts them.
//!
//! Experimental extensions (extended headers, resize) are left out on purpose:
//! this server does not negotiate them, and an unknown option is answered with
//! [`NBD_REP_ERR_UNSUP`] whatever its number.

/// The IANA port for NBD's newstyle negotiation.
pub const NBD_DEFAULT_PORT: u16 = 10809;

// Magic numbers.

/// ASCII `NBDMAGIC`: the first eight bytes the server sends (`INIT_PASSWD`).
pub const NBDMAGIC: u64 = 0x4e42_444d_4147_4943;
/// ASCII `IHAVEOPT`: sent by the server after [`NBDMAGIC`], and by the client
/// before every option.
pub const IHAVEOPT: u64 = 0x4948_4156_454f_5054;
/// Starts every option reply of the fixed newstyle negotiation.
pub const NBD_REP_MAGIC: u64 = 0x0003_e889_0455_65a9;
/// Starts every transmission request.
pub const NBD_REQUEST_MAGIC: u32 = 0x2560_9513;
/// Starts every simple reply.
pub const NBD_SIMPLE_REPLY_MAGIC: u32 = 0x6744_6698;
/// Starts every structured reply chunk.
pub const NBD_STRUCTURED_REPLY_MAGIC: u32 = 0x668e_33ef;

// Handshake flags (server, 16 bits).

/// The server speaks the fixed newstyle negotiation.
pub const NBD_FLAG_FIXED_NEWSTYLE: u16 = 1 << 0;
/// The server can leave out the 124 zero bytes after `NBD_OPT_EXPORT_NAME`.
pub const NBD_FLAG_NO_ZEROES: u16 = 1 << 1;

// Client flags (32 bits).

/// The client speaks the fixed newstyle negotiation.
pub const NBD_FLAG_C_FIXED_NEWSTYLE: u32 = 1 << 0;
/// The client does not want the 124 zero bytes after `NBD_OPT_EXPORT_NAME`.
pub const NBD_FLAG_C_NO_ZEROES: u32 = 1 << 1;

/// Zero bytes that follow the export size and flags in the reply to
/// `NBD_OPT_EXPORT_NAME`, unless the client set [`NBD_FLAG_C_NO_ZEROES`].
pub const EXPORT_NAME_ZERO_PADDING_BYTES: usize = 124;

// Transmission flags (16 bits).

/// Always set: the other transmission flags are meaningful.
pub const NBD_FLAG_HAS_FLAGS: u16 = 1 << 0;
/// The export is read-only; writes fail with `NBD_EPERM`.
pub const NBD_FLAG_READ_ONLY: u16 = 1 << 1;
/// The server understands `NBD_CMD_FLUSH`.
pub const NBD_FLAG_SEND_FLUSH: u16 = 1 << 2;
/// The server understands `NBD_CMD_FLAG_FUA`.
pub const NBD_FLAG_SEND_FUA: u16 = 1 << 3;
/// The export behaves like a rotational medium.
pub const NBD_FLAG_ROTATIONAL: u16 = 1 << 4;
/// The server understands `NBD_CMD_TRIM`.
pub const NBD_FLAG_SEND_TRIM: u16 = 1 << 5;
/// The server understands `NBD_CMD_WRITE_ZEROES` and `NBD_CMD_FLAG_NO_HOLE`.
pub const NBD_FLAG_SEND_WRITE_ZEROES: u16 = 1 << 6;
/// The server honours `NBD_CMD_FLAG_DF` (needs structured replies).
pub const NBD_FLAG_SEND_DF: u16 = 1 << 7;
/// Flushes and FUA writes are visible on every connection to the export.
pub const NBD_FLAG_CAN_MULTI_CONN: u16 = 1 << 8;
/// The server understands `NBD_CMD_CACHE`.
pub const NBD_FLAG_SEND_CACHE: u16 = 1 << 10;
/// The server honours `NBD_CMD_FLAG_FAST_ZERO`.
pub const NBD_FLAG_SEND_FAST_ZERO: u16 = 1 << 11;

// Options (32 bits).

/// Choose an export and enter transmission; cannot be answered with an error.
pub const NBD_OPT_EXPORT_NAME: u32 = 1;
/// End the negotiation.
pub const NBD_OPT_ABORT: u32 = 2;
/// List the exports.
pub const NBD_OPT_LIST: u32 = 3;
/// Upgrade to TLS (offered when the server is configured for it).
pub const NBD_OPT_STARTTLS: u32 = 5;
/// Describe one export.
pub const NBD_OPT_INFO: u32 = 6;
/// Describe one export and enter transmission.
pub const NBD_OPT_GO: u32 = 7;
/// Use structured replies during transmission.
pub const NBD_OPT_STRUCTURED_REPLY: u32 = 8;
/// List metadata contexts.
pub const NBD_OPT_LIST_META_CONTEXT: u32 = 9;
/// Select metadata contexts for `NBD_CMD_BLOCK_STATUS`.
pub const NBD_OPT_SET_META_CONTEXT: u32 = 10;
/// Extended headers (experimental; not offered by this server).
pub const NBD_OPT_EXTENDED_HEADERS: u32 = 11;

// Option reply types (32 bits).

/// The option succeeded, or its list of replies is complete.
pub const NBD_REP_ACK: u32 = 1;
/// One export, in reply to `NBD_OPT_LIST`.
pub const NBD_REP_SERVER: u32 = 2;
/// One piece of information, in reply to `NBD_OPT_INFO` or `NBD_OPT_GO`.
pub const NBD_REP_INFO: u32 = 3;
/// One metadata context.
pub const NBD_REP_META_CONTEXT: u32 = 4;
/// Set in every error reply type.
pub const NBD_REP_FLAG_ERROR: u32 = 1 << 31;
/// The option is unknown to this server.
pub const NBD_REP_ERR_UNSUP: u32 = NBD_REP_FLAG_ERROR + 1;
/// Server policy forbids the option.
pub const NBD_REP_ERR_POLICY: u32 = NBD_REP_FLAG_ERROR + 2;
/// The option is syntactically or semantically invalid.
pub const NBD_REP_ERR_INVALID: u32 = NBD_REP_FLAG_ERROR + 3;
/// The option is not supported on this platform.
pub const NBD_REP_ERR_PLATFORM: u32 = NBD_REP_FLAG_ERROR + 4;
/// TLS must be negotiated first.
pub const NBD_REP_ERR_TLS_REQD: u32 = NBD_REP_FLAG_ERROR + 5;
/// The requested export is not available.
pub const NBD_REP_ERR_UNKNOWN: u32 = NBD_REP_FLAG_ERROR + 6;
/// The server is shutting down.
pub const NBD_REP_ERR_SHUTDOWN: u32 = NBD_REP_FLAG_ERROR + 7;
/// The client must ask for `NBD_INFO_BLOCK_SIZE` first.
pub const NBD_REP_ERR_BLOCK_SIZE_REQD: u32 = NBD_REP_FLAG_ERROR + 8;
/// The request or the reply is too large to process.
pub const NBD_REP_ERR_TOO_BIG: u32 = NBD_REP_FLAG_ERROR + 9;

// Information types of NBD_REP_INFO (16 bits).

/// Export size and transmission flags; always sent.
pub const NBD_INFO_EXPORT: u16 = 0;
/// The export's canonical name.
pub const NBD_INFO_NAME: u16 = 1;
/// A description for humans.
pub const NBD_INFO_DESCRIPTION: u16 = 2;
/// Minimum, preferred and maximum block sizes.
pub const NBD_INFO_BLOCK_SIZE: u16 = 3;

// Command types (16 bits).

/// Read `length` bytes at `offset`.
pub const NBD_CMD_READ: u16 = 0;
/// Write the `length` bytes that follow the request.
pub const NBD_CMD_WRITE: u16 = 1;
/// Disconnect once outstanding requests are answered; no reply.
pub const NBD_CMD_DISC: u16 = 2;
/// Make every acknowledged write durable.
pub const NBD_CMD_FLUSH: u16 = 3;
/// The range is no longer needed (advisory).
pub const NBD_CMD_TRIM: u16 = 4;
/// The client will soon access the range.
pub const NBD_CMD_CACHE: u16 = 5;
/// Write zeroes over the range.
pub const NBD_CMD_WRITE_ZEROES: u16 = 6;
/// Report the allocation status of the range.
pub const NBD_CMD_BLOCK_STATUS: u16 = 7;

// Command flags (16 bits).

/// Force unit access: reply only once the command's writes are durable.
pub const NBD_CMD_FLAG_FUA: u16 = 1 << 0;
/// `NBD_CMD_WRITE_ZEROES` must not leave a hole.
pub const NBD_CMD_FLAG_NO_HOLE: u16 = 1 << 1;
/// `NBD_CMD_READ` must not be fragmented into several content chunks.
pub const NBD_CMD_FLAG_DF: u16 = 1 << 2;
/// `NBD_CMD_BLOCK_STATUS` wants one extent only.
pub const NBD_CMD_FLAG_REQ_ONE: u16 = 1 << 3;
/// `NBD_CMD_WRITE_ZEROES` must fail fast with `NBD_ENOTSUP` unless it is fast.
pub const NBD_CMD_FLAG_FAST_ZERO: u16 = 1 << 4;

// Structured replies (16-bit flags and types).

/// The last chunk of a structured reply.
pub const NBD_REPLY_FLAG_DONE: u16 = 1 << 0;
/// No payload; ends a reply.
pub const NBD_REPLY_TYPE_NONE: u16 = 0;
/// Data at an offset.
pub const NBD_REPLY_TYPE_OFFSET_DATA: u16 = 1;
/// A range that reads as zeroes.
pub const NBD_REPLY_TYPE_OFFSET_HOLE: u16 = 2;
/// Extents of one metadata context.
pub const NBD_REPLY_TYPE_BLOCK_STATUS: u16 = 5;
/// Set in every error chunk type.
pub const NBD_REPLY_TYPE_FLAG_ERROR: u16 = 1 << 15;
/// An error for the whole request.
pub const NBD_REPLY_TYPE_ERROR: u16 = NBD_REPLY_TYPE_FLAG_ERROR + 1;
/// An error at an offset within the request.
pub const NBD_REPLY_TYPE_ERROR_OFFSET: u16 = NBD_REPLY_TYPE_FLAG_ERROR + 2;

// Metadata contexts.

/// The one metadata context the specification defines.
pub const BASE_ALLOCATION: &str = "base:allocation";
/// The namespace wildcard that lists every `base:` context.
pub const BASE_NAMESPACE: &str = "base:";
/// `base:allocation`: the extent is not allocated.
pub const NBD_STATE_HOLE: u32 = 1 << 0;
/// `base:allocation`: the extent reads as zeroes.
pub const NBD_STATE_ZERO: u32 = 1 << 1;

// Errors (32 bits), the errno values NBD defines.

/// Operation not permitted (a write to a read-only export).
pub const NBD_EPERM: u32 = 1;
/// Input/output error.
pub const NBD_EIO: u32 = 5;
/// Cannot allocate memory.
pub const NBD_ENOMEM: u32 = 12;
/// Invalid argument.
pub const NBD_EINVAL: u32 = 22;
/// No space left (a write beyond the end of the export).
pub const NBD_ENOSPC: u32 = 28;
/// Value too large (an unfragmented read that cannot be sent unfragmented).
pub const NBD_EOVERFLOW: u32 = 75;
/// Not supported (a fast zero that would not be fast).
pub const NBD_ENOTSUP: u32 = 95;
/// The server is shutting down; the client disconnects.
pub const NBD_ESHUTDOWN: u32 = 108;
