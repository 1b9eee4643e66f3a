//! What the engine thread is told, and how it answers host requests.
//!
//! Every other thread talks to the engine through one channel of [`Event`]s:
//! the disk and NVLog threads report completions and failures, NBD
//! connections send requests with a callback for the reply, the admin socket
//! sends requests with a channel for the response. These types sit below the
//! engine and below everything that sends to it, so that the senders (disks,
//! NVLog, NBD) need nothing of the engine itself.

use std::sync::mpsc::Sender;

use wafer_core::filer::{Busy, Extent, HostError, HostRequest, IoId, IoResult, ReplyData};

use crate::admin::{AdminRequest, AdminResponse};
use crate::catalogue::Target;

/// What a host request's sender hears back.
#[derive(Debug)]
pub(crate) enum HostOutcome {
    /// The filer's reply.
    Reply(Result<ReplyData, HostError>),
    /// The server is stopping and did not take the request.
    Refused,
    /// The engine held its most requests and did not take this one.
    Busy(Busy),
}

/// Called once with the outcome of a host request.
pub(crate) type HostCallback = Box<dyn FnOnce(HostOutcome) + Send>;

/// What a COMPARE AND WRITE's sender hears back.
#[derive(Debug)]
pub(crate) enum Compared {
    /// The bytes differed, first at this offset into those compared;
    /// nothing was written.
    Miscompare(u32),
    /// The outcome of the read (if it failed) or of the write.
    Outcome(HostOutcome),
}

/// Where the bytes read first differ from those expected, if they do: what
/// a COMPARE AND WRITE or a VERIFY with data reports as a miscompare.
pub(crate) fn first_difference(read: &[u8], expected: &[u8]) -> Option<usize> {
    if read.len() != expected.len() {
        return Some(read.len().min(expected.len()));
    }
    read.iter().zip(expected).position(|(a, b)| a != b)
}

/// Called once with the outcome of a COMPARE AND WRITE.
pub(crate) type CompareCallback = Box<dyn FnOnce(Compared) + Send>;

/// A COMPARE AND WRITE: if `expected.len()` bytes at `offset` of `target`
/// hold `expected`, they become `data`, with no other write between.
pub(crate) struct CompareRequest {
    pub(crate) target: Target,
    pub(crate) offset: u64,
    pub(crate) expected: Vec<u8>,
    pub(crate) data: Vec<u8>,
    pub(crate) done: CompareCallback,
}

/// Called once with the data and hole runs of a LUN's range.
pub(crate) type ExtentsCallback = Box<dyn FnOnce(Result<Vec<Extent>, HostError>) + Send>;

/// Everything the engine thread is told.
pub(crate) enum Event {
    /// A host request from a connection to `target`, and whom to tell.
    Host {
        target: Target,
        request: HostRequest,
        done: HostCallback,
    },
    /// Which parts of a LUN's range (or of a snapshot's) hold data: answered
    /// at once from the filer's trees, with no I/O.
    Extents {
        target: Target,
        offset: u64,
        length: u64,
        done: ExtentsCallback,
    },
    /// A COMPARE AND WRITE from a connection (`crate::engine` makes it
    /// atomic).
    CompareAndWrite(Box<CompareRequest>),
    /// A disk or NVLog I/O has completed.
    IoDone { id: IoId, result: IoResult },
    /// A disk (by name) failed a write or sync: fail it for good.
    DiskError { disk: String, error: String },
    /// The NVLog cannot be written: stop.
    NvlogFailed(String),
    /// An admin request, and where to send the response.
    Admin {
        request: AdminRequest,
        reply: Sender<AdminResponse>,
    },
    /// Stop gracefully.
    Shutdown,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_difference_is_found() {
        assert_eq!(first_difference(b"abcd", b"abcd"), None);
        assert_eq!(first_difference(b"abcd", b"abXd"), Some(2));
        assert_eq!(first_difference(b"abc", b"abcd"), Some(3));
    }
}
