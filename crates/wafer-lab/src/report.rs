//! What a lab run measured, and the forms it is reported in.
//!
//! A [`LabReport`] holds, per array, its measured segments (IOPS, MB/s,
//! average and 99th-percentile latency), read and write totals over the
//! measured time with fio's latency percentiles, `sysstat`-style intervals,
//! and snapshots of every disk's counters at the start of measurement and at
//! the end of each segment. It renders as:
//!
//! - `report.json` ([`LabReport::to_json`]): the whole report, serde's
//!   derivation of these types, so it is byte-identical for the same seed
//!   and scenario (no hash maps anywhere; floats printed by serde_json's
//!   shortest round-trip formatting);
//! - fio's JSON output format, one document per array ([`fio`]);
//! - a `statit` disk table ([`statit`]) and `sysstat -x` lines ([`sysstat`]);
//! - per-segment mechanisms: chains, seeks, CP reads, partial stripes,
//!   unaligned-write reads, cache hits and CPs by type ([`mechanisms`]);
//! - per-minute IOPS, MB/s and latency, and when latency first reached a
//!   threshold, for a run that asks for them ([`minutes`]);
//! - an SVG chart of IOPS and average latency per segment, every array on
//!   it ([`svg`]).
//!
//! Units: MB/s is 10^6 bytes per second; latencies in reports are
//! milliseconds (`_ms`) or nanoseconds (`_ns`) as their names say; KiB is
//! 1024 bytes.

pub mod fio;
pub mod luns;
pub mod mechanisms;
pub mod minutes;
pub mod statit;
pub mod svg;
pub mod sysstat;

use serde::Serialize;

use crate::array::{ArrayKind, DiskStats, EngineStats, SnapshotStats};
use crate::snap_sched::HeldSnapshot;
use crate::workload::Workload;

/// The latency percentiles fio reports by default (its `percentile_list`).
pub const PERCENTILES: [f64; 17] = [
    1.0, 5.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 95.0, 99.0, 99.5, 99.9, 99.95,
    99.99,
];

/// Everything a lab run measured.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LabReport {
    /// The seed every workload stream derives from.
    pub seed: u64,
    /// One entry per array, in the order they ran.
    pub arrays: Vec<ArrayReport>,
}

/// One array's results.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ArrayReport {
    /// The array's name.
    pub name: String,
    /// What kind of array.
    pub kind: ArrayKind,
    /// The LUN's size.
    pub capacity_bytes: u64,
    /// The workload it ran.
    pub workload: Workload,
    /// The measured segments, in order.
    pub segments: Vec<SegmentReport>,
    /// Reads over all segments.
    pub read: DirectionReport,
    /// Writes over all segments.
    pub write: DirectionReport,
    /// `sysstat`-style intervals from the start of the run (ramp-up
    /// included).
    pub intervals: Vec<IntervalReport>,
    /// Every disk's cumulative counters when measurement starts, then at the
    /// end of each segment.
    pub disk_snapshots: Vec<Vec<DiskStats>>,
    /// The engine's cumulative counters at the same instants (empty for
    /// arrays without a write-anywhere engine).
    pub engine_snapshots: Vec<EngineStats>,
    /// How often the run took a snapshot, if it took any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snapshot_every_ns: Option<u64>,
    /// What came of the snapshots, cumulative, at the same instants as
    /// `disk_snapshots` (empty if the run took none).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub snapshot_counts: Vec<SnapshotStats>,
    /// The `snap sched` the run followed, if it followed one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snap_sched: Option<SnapSchedReport>,
    /// Every minute of the run from its start, if the run asked for them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub minutes: Vec<MinuteReport>,
    /// When mean latency first reached the run's threshold, if it set one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency_threshold: Option<LatencyThreshold>,
}

/// The `snap sched` a run followed, and the snapshots it left.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SnapSchedReport {
    /// `1 0 2`, as `snap sched` prints it.
    pub schedule: String,
    /// The weekday and time (UTC) of lab time zero, if the run set them.
    pub clock_start: Option<String>,
    /// The snapshots the array's volumes hold at the end of the run.
    pub held: Vec<HeldSnapshot>,
}

/// One minute of virtual time: the host I/Os that completed within it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MinuteReport {
    /// From 1.
    pub minute: u32,
    /// When it ended, seconds from the start of the run (the last minute
    /// ends with the run, maybe short).
    pub end_s: f64,
    /// I/Os completed.
    pub ios: u64,
    /// I/Os per second.
    pub iops: f64,
    /// 10^6 bytes per second.
    pub mbps: f64,
    /// Mean latency, milliseconds (0 with no I/O).
    pub latency_ms_avg: f64,
    /// 99th-percentile latency (nearest rank), milliseconds.
    pub latency_ms_p99: f64,
}

/// When a minute's mean latency first reached a threshold, from either
/// side: the first minute at or below it (a cache that has warmed) and the
/// first above it (a load that has worn the array down).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct LatencyThreshold {
    /// The threshold, milliseconds.
    pub threshold_ms: f64,
    /// The first minute at or below it; `None` if none was.
    pub first_at_or_below: Option<MinuteEnd>,
    /// The first minute above it; `None` if none was.
    pub first_above: Option<MinuteEnd>,
}

/// A minute, by number and end.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct MinuteEnd {
    /// From 1.
    pub minute: u32,
    /// When it ended, seconds from the start of the run.
    pub end_s: f64,
}

/// One measured segment: the I/Os that completed within it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SegmentReport {
    /// From 1.
    pub index: u32,
    /// When it started, seconds from the start of the run.
    pub start_s: f64,
    /// When it ended.
    pub end_s: f64,
    /// I/Os completed.
    pub ios: u64,
    /// Of which reads.
    pub read_ios: u64,
    /// I/Os per second.
    pub iops: f64,
    /// 10^6 bytes per second.
    pub mbps: f64,
    /// Mean latency, milliseconds.
    pub latency_ms_avg: f64,
    /// 99th-percentile latency (nearest rank), milliseconds.
    pub latency_ms_p99: f64,
    /// An offered load's I/Os that arrived in the segment, per second
    /// (`iops` is those that completed); absent for a closed loop.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offered_iops: Option<f64>,
    /// With large streams beside the workers: the workers' I/Os alone
    /// (Orion's small I/Os); absent without them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub small: Option<ClassReport>,
    /// With large streams: their I/Os alone; absent without them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub large: Option<ClassReport>,
    /// With several LUNs: each one's I/Os, in address order (an I/O counts
    /// for the LUN its first byte lies in); empty with one LUN.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub luns: Vec<ClassReport>,
}

/// One part of a segment's I/Os (the small or the large ones, or one LUN's),
/// measured apart.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ClassReport {
    /// I/Os completed.
    pub ios: u64,
    /// I/Os per second.
    pub iops: f64,
    /// 10^6 bytes per second, reads and writes.
    pub mbps: f64,
    /// 10^6 bytes per second read.
    pub read_mbps: f64,
    /// Mean latency, milliseconds.
    pub latency_ms_avg: f64,
    /// 99th-percentile latency (nearest rank), milliseconds.
    pub latency_ms_p99: f64,
}

/// Reads or writes over the measured time, as fio reports a direction.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DirectionReport {
    /// I/Os completed.
    pub ios: u64,
    /// Bytes moved.
    pub bytes: u64,
    /// The measured time.
    pub runtime_ns: u64,
    /// Smallest latency.
    pub latency_ns_min: u64,
    /// Largest latency.
    pub latency_ns_max: u64,
    /// Mean latency.
    pub latency_ns_mean: f64,
    /// Standard deviation of the latency.
    pub latency_ns_stddev: f64,
    /// Latency at each of [`PERCENTILES`].
    pub percentiles: Vec<Percentile>,
}

/// One latency percentile.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Percentile {
    /// The percentile, e.g. 99.9.
    pub percent: f64,
    /// The latency below which that share of I/Os finished.
    pub latency_ns: u64,
}

/// One `sysstat` interval.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct IntervalReport {
    /// When the interval ended, nanoseconds from the start of the run.
    pub end_ns: u64,
    /// Its length.
    pub length_ns: u64,
    /// Host I/Os completed.
    pub ops: u64,
    /// Bytes the host read.
    pub host_read_bytes: u64,
    /// Bytes the host wrote.
    pub host_write_bytes: u64,
    /// 4 KiB blocks the disks read (user and CP reads).
    pub disk_read_blocks: u64,
    /// 4 KiB blocks the disks wrote.
    pub disk_write_blocks: u64,
    /// Busy time of the busiest disk.
    pub busiest_disk_busy_ns: u64,
}

impl LabReport {
    /// `report.json`: the whole report, pretty-printed, with a final newline.
    pub fn to_json(&self) -> String {
        let mut json = serde_json::to_string_pretty(self).expect("the report serializes");
        json.push('\n');
        json
    }
}

impl ArrayReport {
    /// Per-disk counters accumulated over the measured time.
    pub fn measured_disk_stats(&self) -> Vec<DiskStats> {
        let (Some(first), Some(last)) = (self.disk_snapshots.first(), self.disk_snapshots.last())
        else {
            return Vec::new();
        };
        last.iter()
            .zip(first)
            .map(|(end, start)| end.since(start))
            .collect()
    }

    /// The measured time, in nanoseconds.
    pub fn measured_ns(&self) -> u64 {
        let timing = &self.workload.timing;
        timing.segment.0 * u64::from(timing.segments)
    }
}
