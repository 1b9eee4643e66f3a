//! Reply encoders: simple replies and structured reply chunks.
//!
//! Every encoder appends one complete message to the caller's buffer, so the
//! driver decides how to batch and when to write. Two encoders write only a
//! header, for data the driver would rather send from its own buffer without a
//! copy ([`encode_simple_reply_header`], [`encode_offset_data_header`]).
//!
//! Which form to use is the driver's choice within the specification's rules:
//! without structured replies every reply is simple, and a successful read is
//! the simple header followed by exactly `length` bytes. With structured
//! replies a read must be answered with chunks (data, holes, errors), the last
//! one flagged done; other commands may still get a simple reply.
//! [`encode_error_reply`] picks the right form for an error.
//!
//! The encoders check what the specification requires of a chunk (a hole is
//! not empty, a block status has extents, `NONE` is always last) with
//! assertions: a malformed reply is a bug in the server, never the client's
//! doing. Error messages, which may quote client input, are cut to the
//! protocol's 4096-byte string limit instead.

use crate::consts::{
    NBD_REPLY_FLAG_DONE, NBD_REPLY_TYPE_BLOCK_STATUS, NBD_REPLY_TYPE_ERROR,
    NBD_REPLY_TYPE_ERROR_OFFSET, NBD_REPLY_TYPE_NONE, NBD_REPLY_TYPE_OFFSET_DATA,
    NBD_REPLY_TYPE_OFFSET_HOLE, NBD_SIMPLE_REPLY_MAGIC, NBD_STATE_HOLE, NBD_STATE_ZERO,
    NBD_STRUCTURED_REPLY_MAGIC,
};
use crate::wire::truncate_str;
use crate::{NbdError, STRING_BYTES_MAX};

/// Bytes of a simple reply header: magic, error, handle.
pub const SIMPLE_REPLY_HEADER_BYTES: usize = 16;
/// Bytes of a structured chunk header: magic, flags, type, handle, length.
pub const STRUCTURED_REPLY_HEADER_BYTES: usize = 20;

/// Whether a structured chunk is the last of its reply (`NBD_REPLY_FLAG_DONE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Done {
    /// More chunks for the same handle follow.
    No,
    /// This chunk completes the reply.
    Yes,
}

/// One run of `base:allocation` status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Extent {
    /// Bytes the status covers; never zero.
    pub length: u32,
    /// `NBD_STATE_HOLE`: not allocated.
    pub hole: bool,
    /// `NBD_STATE_ZERO`: reads as zeroes.
    pub zero: bool,
}

impl Extent {
    /// The status flags on the wire.
    pub const fn flags(self) -> u32 {
        let hole = if self.hole { NBD_STATE_HOLE } else { 0 };
        let zero = if self.zero { NBD_STATE_ZERO } else { 0 };
        hole | zero
    }
}

/// The payload of one structured reply chunk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Chunk<'a> {
    /// `NBD_REPLY_TYPE_OFFSET_DATA`: `data` (not empty) read at `offset`.
    OffsetData {
        /// Export offset of the first byte.
        offset: u64,
        /// The bytes read.
        data: &'a [u8],
    },
    /// `NBD_REPLY_TYPE_OFFSET_HOLE`: `length` (not zero) bytes of zeroes at `offset`.
    OffsetHole {
        /// Export offset of the hole.
        offset: u64,
        /// Bytes of zeroes.
        length: u32,
    },
    /// `NBD_REPLY_TYPE_NONE`: ends a reply; only with [`Done::Yes`].
    None,
    /// `NBD_REPLY_TYPE_ERROR`: the request failed as a whole.
    Error {
        /// The error value.
        error: NbdError,
        /// A message for humans (may be empty).
        message: &'a str,
    },
    /// `NBD_REPLY_TYPE_ERROR_OFFSET`: the request failed at `offset`.
    ErrorOffset {
        /// The error value.
        error: NbdError,
        /// A message for humans (may be empty).
        message: &'a str,
        /// Where the failure happened, within the request's range.
        offset: u64,
    },
    /// `NBD_REPLY_TYPE_BLOCK_STATUS`: consecutive extents (at least one) of
    /// the metadata context `context_id`.
    BlockStatus {
        /// The id the handshake assigned (`Negotiated::base_allocation`).
        context_id: u32,
        /// The extents, starting at the request's offset.
        extents: &'a [Extent],
    },
}

/// Appends a simple reply header; after a successful read, the driver sends
/// exactly the request's `length` bytes of data right behind it.
pub fn encode_simple_reply_header(out: &mut Vec<u8>, handle: u64, error: Option<NbdError>) {
    let code = error.map_or(0, NbdError::code);
    out.extend_from_slice(&NBD_SIMPLE_REPLY_MAGIC.to_be_bytes());
    out.extend_from_slice(&code.to_be_bytes());
    out.extend_from_slice(&handle.to_be_bytes());
}

/// Appends a whole simple reply: success with `data` (the read's bytes, empty
/// for every other command), or an error without data.
pub fn encode_simple_reply(out: &mut Vec<u8>, handle: u64, result: Result<&[u8], NbdError>) {
    match result {
        Ok(data) => {
            encode_simple_reply_header(out, handle, None);
            out.extend_from_slice(data);
        }
        Err(error) => encode_simple_reply_header(out, handle, Some(error)),
    }
}

/// Appends the header and offset of an `OFFSET_DATA` chunk whose `data_bytes`
/// bytes of data the driver sends right behind it.
pub fn encode_offset_data_header(
    out: &mut Vec<u8>,
    handle: u64,
    done: Done,
    offset: u64,
    data_bytes: usize,
) {
    assert!(
        data_bytes > 0,
        "an OFFSET_DATA chunk carries at least one byte"
    );
    let length = u32::try_from(data_bytes + 8).expect("chunk length fits 32 bits");
    encode_chunk_header(out, handle, done, NBD_REPLY_TYPE_OFFSET_DATA, length);
    out.extend_from_slice(&offset.to_be_bytes());
}

/// Appends one complete structured reply chunk.
pub fn encode_chunk(out: &mut Vec<u8>, handle: u64, done: Done, chunk: &Chunk<'_>) {
    match *chunk {
        Chunk::OffsetData { offset, data } => {
            encode_offset_data_header(out, handle, done, offset, data.len());
            out.extend_from_slice(data);
        }
        Chunk::OffsetHole { offset, length } => {
            assert!(length > 0, "a hole covers at least one byte");
            encode_chunk_header(out, handle, done, NBD_REPLY_TYPE_OFFSET_HOLE, 12);
            out.extend_from_slice(&offset.to_be_bytes());
            out.extend_from_slice(&length.to_be_bytes());
        }
        Chunk::None => {
            assert_eq!(done, Done::Yes, "NBD_REPLY_TYPE_NONE always ends a reply");
            encode_chunk_header(out, handle, done, NBD_REPLY_TYPE_NONE, 0);
        }
        Chunk::Error { error, message } => {
            let message = truncate_str(message, STRING_BYTES_MAX);
            let length = 6 + message.len() as u32;
            encode_chunk_header(out, handle, done, NBD_REPLY_TYPE_ERROR, length);
            encode_error_fields(out, error, message);
        }
        Chunk::ErrorOffset {
            error,
            message,
            offset,
        } => {
            let message = truncate_str(message, STRING_BYTES_MAX);
            let length = 14 + message.len() as u32;
            encode_chunk_header(out, handle, done, NBD_REPLY_TYPE_ERROR_OFFSET, length);
            encode_error_fields(out, error, message);
            out.extend_from_slice(&offset.to_be_bytes());
        }
        Chunk::BlockStatus {
            context_id,
            extents,
        } => {
            assert!(!extents.is_empty(), "a block status chunk has extents");
            let length = u32::try_from(4 + 8 * extents.len()).expect("chunk length fits 32 bits");
            encode_chunk_header(out, handle, done, NBD_REPLY_TYPE_BLOCK_STATUS, length);
            out.extend_from_slice(&context_id.to_be_bytes());
            for extent in extents {
                assert!(extent.length > 0, "an extent covers at least one byte");
                out.extend_from_slice(&extent.length.to_be_bytes());
                out.extend_from_slice(&extent.flags().to_be_bytes());
            }
        }
    }
}

/// Appends the complete error reply for a request: a structured `ERROR` chunk
/// that ends the reply if the session negotiated structured replies (required
/// for reads, preferred for the rest), a simple reply otherwise.
pub fn encode_error_reply(
    out: &mut Vec<u8>,
    handle: u64,
    error: NbdError,
    message: &str,
    structured_replies: bool,
) {
    if structured_replies {
        encode_chunk(out, handle, Done::Yes, &Chunk::Error { error, message });
    } else {
        encode_simple_reply_header(out, handle, Some(error));
    }
}

fn encode_chunk_header(out: &mut Vec<u8>, handle: u64, done: Done, chunk_type: u16, length: u32) {
    let flags = match done {
        Done::No => 0,
        Done::Yes => NBD_REPLY_FLAG_DONE,
    };
    out.extend_from_slice(&NBD_STRUCTURED_REPLY_MAGIC.to_be_bytes());
    out.extend_from_slice(&flags.to_be_bytes());
    out.extend_from_slice(&chunk_type.to_be_bytes());
    out.extend_from_slice(&handle.to_be_bytes());
    out.extend_from_slice(&length.to_be_bytes());
}

/// The fields every error chunk starts with: error, message length, message.
fn encode_error_fields(out: &mut Vec<u8>, error: NbdError, message: &str) {
    assert!(message.len() <= STRING_BYTES_MAX);
    out.extend_from_slice(&error.code().to_be_bytes());
    out.extend_from_slice(&(message.len() as u16).to_be_bytes());
    out.extend_from_slice(message.as_bytes());
}
