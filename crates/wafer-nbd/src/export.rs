//! What the server exports, as the handshake needs to know it.
//!
//! The codec owns no catalogue: the driver answers [`Exports::lookup`] and
//! [`Exports::list`] from whatever it serves (LUNs of the filer, in wafer's
//! case). The empty name is the protocol's "default export"; which export that
//! is, if any, is the driver's decision, made inside its `lookup`.
//!
//! [`TransmissionFlags::for_export`] is the one place that decides what the
//! server advertises. Every export gets flush, FUA, trim and write-zeroes, since
//! the engine implements them all; a read-only export drops the three that write
//! (trim, write-zeroes, fast-zero) instead of advertising commands that can only
//! fail. `NBD_FLAG_SEND_DF` depends on structured replies, which is why the flags
//! are computed per session, not stored with the export.

use crate::consts::{
    NBD_FLAG_CAN_MULTI_CONN, NBD_FLAG_HAS_FLAGS, NBD_FLAG_READ_ONLY, NBD_FLAG_SEND_DF,
    NBD_FLAG_SEND_FAST_ZERO, NBD_FLAG_SEND_FLUSH, NBD_FLAG_SEND_FUA, NBD_FLAG_SEND_TRIM,
    NBD_FLAG_SEND_WRITE_ZEROES,
};

/// One export, as the driver describes it to the handshake.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExportInfo {
    /// The canonical name, sent back as `NBD_INFO_NAME` and in `NBD_OPT_LIST`.
    /// At most 4096 bytes of UTF-8 without NUL (the protocol's string rules).
    pub name: String,
    /// A description for humans, sent as `NBD_INFO_DESCRIPTION` when the client
    /// asks and the description is not empty.
    pub description: String,
    /// The export's size in bytes.
    pub size_bytes: u64,
    /// Writes, trims and write-zeroes are refused with `NBD_EPERM`.
    pub read_only: bool,
    /// Flushes and FUA writes are visible on every connection to this export
    /// (one shared NVLog and cache per volume), so clients may open several.
    pub multi_conn: bool,
    /// Write-zeroes with `NBD_CMD_FLAG_FAST_ZERO` is honoured: the driver either
    /// zeroes fast or fails fast with `NBD_ENOTSUP`.
    pub fast_zero: bool,
}

/// The driver's catalogue of exports.
pub trait Exports {
    /// The export a client names. The empty name asks for the default export.
    fn lookup(&self, name: &str) -> Option<ExportInfo>;

    /// The names `NBD_OPT_LIST` presents, in order.
    fn list(&self) -> Vec<String>;
}

/// A fixed list of exports; the first one is the default.
impl Exports for [ExportInfo] {
    fn lookup(&self, name: &str) -> Option<ExportInfo> {
        if name.is_empty() {
            return self.first().cloned();
        }
        self.iter().find(|export| export.name == name).cloned()
    }

    fn list(&self) -> Vec<String> {
        self.iter().map(|export| export.name.clone()).collect()
    }
}

/// The 16 transmission flags the server sends with an export.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TransmissionFlags(pub u16);

impl TransmissionFlags {
    /// What this server advertises for `export` in a session that did or did
    /// not negotiate structured replies.
    pub fn for_export(export: &ExportInfo, structured_replies: bool) -> TransmissionFlags {
        let mut flags = NBD_FLAG_HAS_FLAGS | NBD_FLAG_SEND_FLUSH | NBD_FLAG_SEND_FUA;
        if export.read_only {
            flags |= NBD_FLAG_READ_ONLY;
        } else {
            flags |= NBD_FLAG_SEND_TRIM | NBD_FLAG_SEND_WRITE_ZEROES;
            if export.fast_zero {
                flags |= NBD_FLAG_SEND_FAST_ZERO;
            }
        }
        if structured_replies {
            flags |= NBD_FLAG_SEND_DF;
        }
        if export.multi_conn {
            flags |= NBD_FLAG_CAN_MULTI_CONN;
        }
        TransmissionFlags(flags)
    }

    /// Whether every bit of `flag` is set.
    pub const fn contains(self, flag: u16) -> bool {
        self.0 & flag == flag
    }
}
