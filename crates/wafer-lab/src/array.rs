//! The host-facing interface every array in the lab implements.
//!
//! An [`Array`] is a storage array seen from the host: a LUN of
//! [`Array::capacity_bytes`] that takes reads and writes at byte offsets and
//! answers each one later, in virtual time. Like the device models beneath
//! it, an array is a sans-I/O state machine: the lab's event loop
//! ([`crate::run()`]) hands it host I/Os with [`Array::submit`], asks when it
//! next has something to do with [`Array::next_event`], and lets it run up to
//! an instant with [`Array::advance`], which reports the host I/Os finished by
//! then. The call order is the devices' (`wafer_devices::Device`): before
//! `submit(now, ..)` the array has been advanced through every event earlier
//! than `now`; after `submit` or `advance`, `next_event` is read again (a
//! submission may create an event at `now` itself); time never goes backwards.
//!
//! Two arrays sit behind it: the in-place RAID-5 comparator
//! ([`crate::inplace`]) and the wafer filer on modelled disks (plugged in by
//! the lab's driver). [`Array::disk_stats`] exposes each array's per-disk
//! counters, cumulative since the array was built, from which the reports
//! derive `statit` and `sysstat` figures by differences.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use wafer_core::units::Instant;

use crate::snap_sched::{HeldSnapshot, SnapSched};

/// A host-facing storage array in virtual time: the lab's event loop submits
/// host I/Os and advances it.
pub trait Array {
    /// The array's name in the scenario and the reports.
    fn name(&self) -> &str;

    /// What kind of array it is.
    fn kind(&self) -> ArrayKind;

    /// Size of the LUN the workload addresses, in bytes.
    fn capacity_bytes(&self) -> u64;

    /// Sizes of the LUNs that make up [`Array::capacity_bytes`], end to end
    /// in address order, in bytes: by default one LUN.
    fn lun_bytes(&self) -> Vec<u64> {
        vec![self.capacity_bytes()]
    }

    /// Makes the array's state what it would be after the workload's prepare
    /// step (the test file written once, then optionally a full reallocate),
    /// in whatever way is exact for the array, telling `progress` the
    /// fraction done. Called once, at time zero, before the first
    /// [`Array::submit`].
    fn prepare(&mut self, plan: &PreparePlan, progress: &mut dyn FnMut(f64));

    /// Accepts a host I/O at `now`; it completes at some later
    /// [`Array::advance`].
    ///
    /// # Panics
    /// If `io` reaches past [`Array::capacity_bytes`] or moves no bytes, if
    /// `now` is earlier than a previous call's, or if an event before `now` is
    /// still pending: all are bugs in the driving loop, which checks the
    /// workload against the LUN before it starts.
    fn submit(&mut self, now: Instant, io: HostIo);

    /// When the array next changes state on its own, or `None` if it is idle.
    fn next_event(&self) -> Option<Instant>;

    /// Runs the array up to and including `now`, appending the host I/Os that
    /// finish to `done`.
    ///
    /// # Panics
    /// If `now` is earlier than a previous call's.
    fn advance(&mut self, now: Instant, done: &mut Vec<HostCompletion>);

    /// Per-disk counters, cumulative since the array was built, in a fixed
    /// disk order: the raw material of `statit`.
    fn disk_stats(&self) -> Vec<DiskStats>;

    /// The write-anywhere engine's own counters, cumulative since the array
    /// was built; `None` for arrays without one.
    fn engine_stats(&self) -> Option<EngineStats> {
        None
    }

    /// Asks for a snapshot at `now` of everything the workload addresses:
    /// every volume of a wafer array, the LUN of an in-place one. Called as
    /// [`Array::submit`] is, after the array has been advanced to `now`;
    /// what comes of it shows in [`Array::snapshot_stats`].
    fn take_snapshot(&mut self, now: Instant);

    /// What came of the snapshots asked for, cumulative.
    fn snapshot_stats(&self) -> SnapshotStats;

    /// Makes every volume follow `sched` (ONTAP's `snap sched`) and moves
    /// lab time zero to `sched.clock_start`, if it names one (the array
    /// idles until then). Called once, after [`Array::prepare`] and before
    /// the first [`Array::submit`]; the snapshots count in
    /// [`Array::snapshot_stats`]. An array without such schedules (the
    /// in-place comparator's snapshots are copy-on-first-write sessions)
    /// returns false.
    fn follow_snap_sched(&mut self, _sched: &SnapSched) -> bool {
        false
    }

    /// The snapshots its volumes hold, volume after volume, each one's
    /// oldest first; empty for an array whose snapshots have no names.
    fn held_snapshots(&self) -> Vec<HeldSnapshot> {
        Vec::new()
    }

    /// The space of the volumes the workload addresses, together, as `df`
    /// shows it; `None` for an array without volumes (the in-place
    /// comparator's LUN has no space to fill but its own).
    fn volume_use(&self) -> Option<VolumeUse> {
        None
    }
}

/// The space of an array's volumes, summed over them, as `df` shows each:
/// its active file system's line and its `.snapshot` line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VolumeUse {
    /// The volumes' nominal sizes.
    pub size_bytes: u64,
    /// `df`'s used of the active file systems: LUN reservations, thin LUN
    /// blocks, the overwrite reserve of blocks snapshots share, and
    /// snapshot use spilled past the reserve.
    pub used_bytes: u64,
    /// `df`'s `.snapshot` used: blocks only snapshots hold.
    pub snapshot_used_bytes: u64,
    /// Of those, the part beyond the snapshot reserve, already in
    /// `used_bytes`.
    pub snapshot_spill_bytes: u64,
}

impl VolumeUse {
    /// The space used inside the volumes, snapshots included (the two
    /// lines of `df` together, spill counted once), in percent of their
    /// size.
    pub fn used_percent(&self) -> f64 {
        let used = self.used_bytes + self.snapshot_used_bytes - self.snapshot_spill_bytes;
        used as f64 * 100.0 / self.size_bytes.max(1) as f64
    }
}

/// What an array made of the snapshots a run asked for, and what they cost
/// it, cumulative.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotStats {
    /// Snapshots asked for: one per volume of a wafer array, one per LUN of
    /// an in-place array.
    pub requested: u64,
    /// Of those, snapshots taken (on a wafer array, when the CP that takes
    /// them commits).
    pub taken: u64,
    /// Of those, snapshots refused: the most a volume or LUN may keep, or
    /// no room for them.
    pub refused: u64,
    /// What copy-on-first-write cost an in-place array; `None` on a wafer
    /// array, which copies nothing.
    pub copy_on_write: Option<crate::inplace::CowCounters>,
}

/// The kinds of array a scenario can name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum ArrayKind {
    /// The wafer filer: write-anywhere, RAID-DP, NVRAM.
    #[serde(rename = "wafer")]
    Wafer,
    /// A classic array that updates its RAID-5 stripes in place.
    #[serde(rename = "in-place")]
    InPlace,
}

impl ArrayKind {
    /// The name a scenario and a report use: `wafer` or `in-place`.
    pub fn as_str(self) -> &'static str {
        match self {
            ArrayKind::Wafer => "wafer",
            ArrayKind::InPlace => "in-place",
        }
    }
}

/// Whether a host I/O reads or writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HostOp {
    /// Data moves from the array to the host.
    Read,
    /// Data moves from the host to the array.
    Write,
}

impl std::fmt::Display for HostOp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            HostOp::Read => "read",
            HostOp::Write => "write",
        })
    }
}

/// One host I/O to the LUN.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostIo {
    /// The caller's name for the I/O, returned in its [`HostCompletion`];
    /// unique among the I/Os in flight.
    pub id: u64,
    /// Read or write.
    pub op: HostOp,
    /// First byte, from the start of the LUN. Need not be block aligned.
    pub offset: u64,
    /// Bytes moved, at least one.
    pub length: u64,
}

impl HostIo {
    /// One past the last byte.
    pub fn end(&self) -> u64 {
        self.offset + self.length
    }
}

/// A finished host I/O.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostCompletion {
    /// The I/O's [`HostIo::id`].
    pub id: u64,
    /// When it was submitted.
    pub submitted_at: Instant,
    /// When the array answered it.
    pub finished_at: Instant,
    /// Why the array refused it (a write to a volume its snapshots have
    /// filled, say); `None` if it was done.
    pub refused: Option<String>,
}

/// One disk's counters, cumulative. Reads are split as `statit` splits them:
/// user reads fetch data a host asked for; CP reads are the reads a write
/// costs (old data and old parity for a parity update; in wafer, the reads of
/// a consistency point).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiskStats {
    /// The disk's name, e.g. `dg0.d07`.
    pub name: String,
    /// Nanoseconds during which at least one command was outstanding at the
    /// disk (ONTAP's `disk_busy`).
    pub busy_ns: u64,
    /// Read commands for host data.
    pub user_reads: u64,
    /// 4 KiB blocks those commands moved.
    pub user_read_blocks: u64,
    /// Write commands of every origin.
    pub writes: u64,
    /// 4 KiB blocks those commands moved.
    pub write_blocks: u64,
    /// Read commands a write costs.
    pub cp_reads: u64,
    /// 4 KiB blocks those commands moved.
    pub cp_read_blocks: u64,
    /// Sum of the user reads' latencies (submission to completion at the
    /// disk).
    pub read_latency_ns: u64,
    /// Sum of the writes' latencies.
    pub write_latency_ns: u64,
    /// Sum of the CP reads' latencies.
    pub cp_read_latency_ns: u64,
    /// Arm movement time over all commands (seeks, head switches, settling).
    pub seek_ns: u64,
    /// Cylinders the arm crossed over all commands: the seek distance.
    pub seek_cylinders: u64,
}

impl DiskStats {
    /// Commands of every kind.
    pub fn transfers(&self) -> u64 {
        self.user_reads + self.writes + self.cp_reads
    }

    /// The counters accumulated between `earlier` and `self`.
    ///
    /// # Panics
    /// If `earlier` is a later snapshot or another disk's.
    pub fn since(&self, earlier: &DiskStats) -> DiskStats {
        assert_eq!(self.name, earlier.name, "counters of two different disks");
        let minus = |now: u64, then: u64| {
            now.checked_sub(then)
                .expect("cumulative counters never decrease")
        };
        DiskStats {
            name: self.name.clone(),
            busy_ns: minus(self.busy_ns, earlier.busy_ns),
            user_reads: minus(self.user_reads, earlier.user_reads),
            user_read_blocks: minus(self.user_read_blocks, earlier.user_read_blocks),
            writes: minus(self.writes, earlier.writes),
            write_blocks: minus(self.write_blocks, earlier.write_blocks),
            cp_reads: minus(self.cp_reads, earlier.cp_reads),
            cp_read_blocks: minus(self.cp_read_blocks, earlier.cp_read_blocks),
            read_latency_ns: minus(self.read_latency_ns, earlier.read_latency_ns),
            write_latency_ns: minus(self.write_latency_ns, earlier.write_latency_ns),
            cp_read_latency_ns: minus(self.cp_read_latency_ns, earlier.cp_read_latency_ns),
            seek_ns: minus(self.seek_ns, earlier.seek_ns),
            seek_cylinders: minus(self.seek_cylinders, earlier.seek_cylinders),
        }
    }

    /// Adds a finished command's arm movement.
    pub fn count_seek(&mut self, service: &wafer_devices::Service) {
        self.seek_ns += service.seek.0;
        self.seek_cylinders += service.seek_cylinders;
    }
}

/// What a write-anywhere engine counted, cumulative: its consistency points,
/// RAID stripes, the reads its writes cost, and its buffer cache. The
/// mechanisms behind its performance, reported per segment.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngineStats {
    /// CPs completed, by ONTAP's type letter (T timer, F NVLog half full,
    /// B back to back, H high water, U flush, S snapshot, Z sync).
    pub cps: BTreeMap<String, u64>,
    /// Nanoseconds CPs ran.
    pub cp_time_ns: u64,
    /// Host changes that waited for a CP because the NVLog was full.
    pub back_to_back_waits: u64,
    /// Stripes written whole, parity computed in memory.
    pub full_stripes: u64,
    /// Stripes written in part (parity by subtraction, addition or after
    /// reconstruction).
    pub partial_stripes: u64,
    /// Data blocks CPs wrote.
    pub data_blocks_written: u64,
    /// Metadata blocks CPs wrote.
    pub meta_blocks_written: u64,
    /// Parity blocks written.
    pub parity_blocks_written: u64,
    /// Disk reads partial-stripe writes cost (statit's CP reads).
    pub parity_reads: u64,
    /// Disk reads of old blocks that host writes not aligned to 4 KiB had to
    /// merge with.
    pub unaligned_write_reads: u64,
    /// Host reads of blocks in the buffer cache.
    pub cache_hits: u64,
    /// Host reads of blocks that went to disk.
    pub cache_misses: u64,
    /// Indirect blocks read because the buffer cache had evicted them.
    pub indirect_reads: u64,
    /// Disk read commands for host data.
    pub read_chains: u64,
    /// Blocks those commands read.
    pub read_chain_blocks: u64,
    /// The node's Flash Cache, if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flash: Option<FlashStats>,
}

/// What a node's Flash Cache counted, cumulative, in blocks (ONTAP's
/// `ext_cache_obj`), and how full it is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlashStats {
    /// Blocks of disk reads looked up in it.
    pub accesses: u64,
    /// Of those, blocks it held.
    pub hits: u64,
    /// Blocks answered from it instead of disk.
    pub disk_reads_replaced: u64,
    /// Blocks the buffer cache evicted into it.
    pub inserts: u64,
    /// Blocks it dropped to make room.
    pub evicts: u64,
    /// Blocks it holds now (a level, not a count).
    pub used: u64,
    /// Its size in blocks.
    pub blocks: u64,
}

impl FlashStats {
    /// The counts accumulated between `earlier` and `self`; `used` and
    /// `blocks` are `self`'s.
    pub fn since(&self, earlier: &FlashStats) -> FlashStats {
        FlashStats {
            accesses: self.accesses - earlier.accesses,
            hits: self.hits - earlier.hits,
            disk_reads_replaced: self.disk_reads_replaced - earlier.disk_reads_replaced,
            inserts: self.inserts - earlier.inserts,
            evicts: self.evicts - earlier.evicts,
            used: self.used,
            blocks: self.blocks,
        }
    }
}

impl EngineStats {
    /// The counters accumulated between `earlier` and `self`.
    ///
    /// # Panics
    /// If `earlier` is a later snapshot.
    pub fn since(&self, earlier: &EngineStats) -> EngineStats {
        let minus = |now: u64, then: u64| {
            now.checked_sub(then)
                .expect("cumulative counters never decrease")
        };
        let cps = self
            .cps
            .iter()
            .map(|(kind, &n)| {
                let before = earlier.cps.get(kind).copied().unwrap_or(0);
                (kind.clone(), minus(n, before))
            })
            .collect();
        EngineStats {
            cps,
            cp_time_ns: minus(self.cp_time_ns, earlier.cp_time_ns),
            back_to_back_waits: minus(self.back_to_back_waits, earlier.back_to_back_waits),
            full_stripes: minus(self.full_stripes, earlier.full_stripes),
            partial_stripes: minus(self.partial_stripes, earlier.partial_stripes),
            data_blocks_written: minus(self.data_blocks_written, earlier.data_blocks_written),
            meta_blocks_written: minus(self.meta_blocks_written, earlier.meta_blocks_written),
            parity_blocks_written: minus(self.parity_blocks_written, earlier.parity_blocks_written),
            parity_reads: minus(self.parity_reads, earlier.parity_reads),
            unaligned_write_reads: minus(self.unaligned_write_reads, earlier.unaligned_write_reads),
            cache_hits: minus(self.cache_hits, earlier.cache_hits),
            cache_misses: minus(self.cache_misses, earlier.cache_misses),
            indirect_reads: minus(self.indirect_reads, earlier.indirect_reads),
            read_chains: minus(self.read_chains, earlier.read_chains),
            read_chain_blocks: minus(self.read_chain_blocks, earlier.read_chain_blocks),
            flash: match (&self.flash, &earlier.flash) {
                (Some(now), Some(then)) => Some(now.since(then)),
                (now, _) => *now,
            },
        }
    }
}

/// A byte range of the LUN.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Extent {
    /// First byte.
    pub offset: u64,
    /// Bytes.
    pub length: u64,
}

impl Extent {
    /// One past the last byte.
    pub fn end(&self) -> u64 {
        self.offset + self.length
    }
}

/// What the workload's prepare step leaves behind, for [`Array::prepare`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PreparePlan {
    /// Ranges written once, sequentially, in this order (IOmeter's test-file
    /// preparation). Empty if the workload measures a fresh LUN.
    pub fill: Vec<Extent>,
    /// Whether a full reallocate (defragmentation) runs after the fill.
    pub reallocate: bool,
}
