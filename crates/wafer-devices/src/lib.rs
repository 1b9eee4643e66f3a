//! Device models for the performance lab: hard disks, SSDs and NVRAM in virtual
//! time.
//!
//! The models stand beside the engine, not inside it or its simulator: the lab
//! (`wafer-lab`) and the `wafer` command drive them, the filer engine never
//! sees them, and they take only the core's units of time from `wafer-core`.
//! Like the engine they are pure (no clock, thread, file or socket), so the
//! lab's reports depend on nothing but the scenario and its seed.
//!
//! A device is a sans-I/O state machine that the lab's discrete-event loop
//! drives through [`Device`]: it hands the device requests with
//! [`Device::submit`], asks when the device next has something to do with
//! [`Device::next_event`], and lets it run up to an instant with
//! [`Device::advance`], which reports every request finished by then. A device
//! never reads a clock or draws a random number, so the same requests submitted
//! at the same instants give the same completions, bit for bit.
//!
//! Requests address 4 KiB blocks ([`BLOCK_BYTES`]), the unit in which the filer
//! does all its disk I/O. Every [`Completion`] carries a [`Service`] breakdown of
//! where its time went (queueing, command overhead, seek, rotation, transfer,
//! and whether the on-drive cache served it); the parts add up to the latency
//! exactly, which is what per-disk `statit`-style counters are made of.
//!
//! The models: [`hdd`] (seek curve, spindle phase, zones, read-ahead cache and
//! a reordering command queue, after DiskSim and Ruemmler & Wilkes), [`ssd`]
//! (flash dies and channels working in parallel, in steady state) and [`nvram`]
//! (a fixed latency plus bandwidth). [`params`] reads the named drives of
//! `drives.toml`, where every number carries its source; [`single_disk`] runs
//! the closed-loop calibration check against one drive, and
//! [`reference`](mod@reference) holds the published figures to hold it
//! against.

pub mod hdd;
mod next_events;
pub mod nvram;
pub mod params;
pub mod reference;
pub mod single_disk;
pub mod ssd;

use wafer_core::units::{Duration, Instant};

pub use self::next_events::{NextEvents, sooner};

/// Bytes in one device block: every request addresses whole 4 KiB blocks.
pub const BLOCK_BYTES: u64 = 4096;

/// Whether a request reads or writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Op {
    /// Data moves from the device to the host.
    Read,
    /// Data moves from the host to the device.
    Write,
}

/// One I/O request to a device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceRequest {
    /// The caller's name for the request, returned in its [`Completion`]. The
    /// device does not interpret it.
    pub id: u64,
    /// Read or write.
    pub op: Op,
    /// First block, in 4 KiB blocks from the start of the device.
    pub block: u64,
    /// Number of consecutive blocks, at least one.
    pub blocks: u32,
}

impl DeviceRequest {
    /// One past the last block the request touches.
    pub fn end_block(&self) -> u64 {
        self.block + u64::from(self.blocks)
    }
}

/// Where a request's time went. The parts add up to the request's latency
/// (`finished_at - submitted_at`) exactly.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Service {
    /// Waiting: in the command queue, behind other requests for the same
    /// resource, or for a full write buffer to drain.
    pub queue: Duration,
    /// Fixed command processing in the device's controller.
    pub overhead: Duration,
    /// Arm movement: seeks, head switches and write settling (disks only).
    pub seek: Duration,
    /// Cylinders the arm crossed for the request (disks only): the seek
    /// distance, summed over the tracks the request spans.
    pub seek_cylinders: u64,
    /// Waiting for the data to rotate under the head (disks only).
    pub rotation: Duration,
    /// Moving the data: media transfer on a disk, flash array and channel time
    /// on an SSD, the interface for cache hits.
    pub transfer: Duration,
    /// The device's cache served the request without a media access of its
    /// own (a read-ahead hit, or a write acknowledged into write-back cache).
    pub cache_hit: bool,
}

impl Service {
    /// The sum of the parts: the request's latency.
    pub fn total(&self) -> Duration {
        Duration(self.queue.0 + self.overhead.0 + self.seek.0 + self.rotation.0 + self.transfer.0)
    }
}

/// A finished request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Completion {
    /// The request's [`DeviceRequest::id`].
    pub id: u64,
    /// Read or write.
    pub op: Op,
    /// Number of blocks moved.
    pub blocks: u32,
    /// When the request was submitted.
    pub submitted_at: Instant,
    /// When the device finished it.
    pub finished_at: Instant,
    /// Where the time went.
    pub service: Service,
}

impl Completion {
    /// Time from submission to completion.
    pub fn latency(&self) -> Duration {
        self.finished_at - self.submitted_at
    }
}

/// A request the device refuses. The device's state is unchanged.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// The request moves no blocks.
    #[error("request {id} moves no blocks")]
    Empty {
        /// The request's id.
        id: u64,
    },
    /// The request reaches past the end of the device.
    #[error(
        "request {id} for blocks {block}..{end} reaches past the device's {capacity_blocks} blocks"
    )]
    OutOfRange {
        /// The request's id.
        id: u64,
        /// Its first block.
        block: u64,
        /// One past its last block.
        end: u64,
        /// The device's size in blocks.
        capacity_blocks: u64,
    },
}

/// A modelled device, driven by a discrete-event loop in virtual time.
///
/// Call order: before `submit(now, ..)`, advance the device through every event
/// earlier than `now` (that is, until `next_event()` is `None` or at least
/// `now`). After `submit` or `advance`, read `next_event()` again: a submission
/// can create an event at `now` itself (a dispatch decision), which the next
/// `advance(now)` carries out, so requests submitted at one instant are
/// considered together. Time never goes backwards across calls.
pub trait Device {
    /// The device's size in 4 KiB blocks.
    fn capacity_blocks(&self) -> u64;

    /// Accepts a request at `now`. It finishes at some later `advance`.
    ///
    /// # Panics
    /// If `now` is earlier than a previous call's, or an event before `now` is
    /// still pending: both are bugs in the driving loop.
    fn submit(&mut self, now: Instant, request: DeviceRequest) -> Result<(), RequestError>;

    /// When the device next changes state on its own (a request finishes, or
    /// the command queue picks its next request), or `None` if it is idle.
    fn next_event(&self) -> Option<Instant>;

    /// Runs the device up to and including `now`, appending the requests that
    /// finish to `completions` in the order they finish.
    ///
    /// # Panics
    /// If `now` is earlier than a previous call's.
    fn advance(&mut self, now: Instant, completions: &mut Vec<Completion>);

    /// The request whose media access is under way, for a device that has
    /// one at a time and says: a driver may get ready for its completion.
    fn in_service(&self) -> Option<&DeviceRequest> {
        None
    }
}

/// Checks a request against a device of `capacity_blocks` blocks.
fn check_request(request: &DeviceRequest, capacity_blocks: u64) -> Result<(), RequestError> {
    if request.blocks == 0 {
        return Err(RequestError::Empty { id: request.id });
    }
    let end = request.block.checked_add(u64::from(request.blocks));
    match end {
        Some(end) if end <= capacity_blocks => Ok(()),
        _ => Err(RequestError::OutOfRange {
            id: request.id,
            block: request.block,
            end: end.unwrap_or(u64::MAX),
            capacity_blocks,
        }),
    }
}

/// Asserts the driving loop's side of the call order.
fn check_call_order(last: Instant, now: Instant, next_event: Option<Instant>) {
    assert!(
        now >= last,
        "device driven backwards in time: {now:?} after {last:?}"
    );
    if let Some(event) = next_event {
        assert!(
            event >= now,
            "submit at {now:?} with an event still pending at {event:?}: advance the device first"
        );
    }
}

/// Nanoseconds to transfer one block at `mb_per_s` (SI megabytes per second).
fn block_transfer_ns(mb_per_s: f64) -> u64 {
    (BLOCK_BYTES as f64 * 1e3 / mb_per_s).round() as u64
}

/// Milliseconds (a datasheet's unit) to nanoseconds.
fn ms_to_ns(ms: f64) -> u64 {
    (ms * 1e6).round() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_checks_refuse_empty_and_out_of_range() {
        let request = |block, blocks| DeviceRequest {
            id: 7,
            op: Op::Read,
            block,
            blocks,
        };
        assert_eq!(check_request(&request(0, 1), 10), Ok(()));
        assert_eq!(check_request(&request(9, 1), 10), Ok(()));
        assert_eq!(
            check_request(&request(0, 0), 10),
            Err(RequestError::Empty { id: 7 })
        );
        assert!(matches!(
            check_request(&request(9, 2), 10),
            Err(RequestError::OutOfRange { end: 11, .. })
        ));
        assert!(matches!(
            check_request(&request(u64::MAX, 2), 10),
            Err(RequestError::OutOfRange { .. })
        ));
    }

    #[test]
    fn transfer_times_use_si_megabytes() {
        // 4096 bytes at 409.6 MB/s take 10 µs.
        assert_eq!(block_transfer_ns(409.6), 10_000);
        assert_eq!(ms_to_ns(0.2), 200_000);
    }
}
