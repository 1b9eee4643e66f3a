//! The error values a reply can carry.
//!
//! NBD borrows a handful of Linux errno numbers and fixes them in the
//! specification, so they mean the same on every platform; a server must not
//! send its host's errno values. [`NbdError`] is that closed set, and
//! [`NbdError::code`] is the number on the wire. Which one fits which failure
//! follows the specification: writes beyond the end are [`NbdError::NoSpace`],
//! reads, trims and malformed requests [`NbdError::InvalidArgument`], writes to a
//! read-only export [`NbdError::PermissionDenied`].

use crate::consts::{
    NBD_EINVAL, NBD_EIO, NBD_ENOMEM, NBD_ENOSPC, NBD_ENOTSUP, NBD_EOVERFLOW, NBD_EPERM,
    NBD_ESHUTDOWN,
};

/// An error value of a simple reply or of a structured error chunk.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, thiserror::Error)]
pub enum NbdError {
    /// `NBD_EPERM`: operation not permitted, e.g. a write to a read-only export.
    #[error("operation not permitted (NBD_EPERM)")]
    PermissionDenied,
    /// `NBD_EIO`: the storage failed.
    #[error("input/output error (NBD_EIO)")]
    Io,
    /// `NBD_ENOMEM`: the server ran out of memory.
    #[error("cannot allocate memory (NBD_ENOMEM)")]
    OutOfMemory,
    /// `NBD_EINVAL`: a malformed request, a read or trim beyond the end, an
    /// unknown command or flag.
    #[error("invalid argument (NBD_EINVAL)")]
    InvalidArgument,
    /// `NBD_ENOSPC`: no space left, or a write beyond the end of the export.
    #[error("no space left (NBD_ENOSPC)")]
    NoSpace,
    /// `NBD_EOVERFLOW`: a read with `NBD_CMD_FLAG_DF` too large to send whole.
    #[error("value too large (NBD_EOVERFLOW)")]
    Overflow,
    /// `NBD_ENOTSUP`: not supported, e.g. a fast zero that would be slow.
    #[error("not supported (NBD_ENOTSUP)")]
    NotSupported,
    /// `NBD_ESHUTDOWN`: the server is shutting down; the client must disconnect.
    #[error("server shutting down (NBD_ESHUTDOWN)")]
    ShuttingDown,
}

impl NbdError {
    /// Every error value, in the order of their codes.
    pub const ALL: [NbdError; 8] = [
        NbdError::PermissionDenied,
        NbdError::Io,
        NbdError::OutOfMemory,
        NbdError::InvalidArgument,
        NbdError::NoSpace,
        NbdError::Overflow,
        NbdError::NotSupported,
        NbdError::ShuttingDown,
    ];

    /// The number that goes on the wire.
    pub const fn code(self) -> u32 {
        match self {
            NbdError::PermissionDenied => NBD_EPERM,
            NbdError::Io => NBD_EIO,
            NbdError::OutOfMemory => NBD_ENOMEM,
            NbdError::InvalidArgument => NBD_EINVAL,
            NbdError::NoSpace => NBD_ENOSPC,
            NbdError::Overflow => NBD_EOVERFLOW,
            NbdError::NotSupported => NBD_ENOTSUP,
            NbdError::ShuttingDown => NBD_ESHUTDOWN,
        }
    }

    /// The error a wire code names, if it is one NBD defines.
    pub fn from_code(code: u32) -> Option<NbdError> {
        NbdError::ALL.into_iter().find(|error| error.code() == code)
    }
}
