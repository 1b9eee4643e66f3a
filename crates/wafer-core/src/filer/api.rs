//! The types that cross the engine's boundary: host requests and replies, disk
//! and NVLog I/Os and their results, options and counters.

use wafer_raid::Dbn;

use crate::fixed_map::{FixedHash, mix_words};
pub use crate::nvlog::{CachePolicy, Change};
use crate::nvlog::{LunId, NvRecord};
use crate::payload::{Bytes, Payload, ReadData};
use crate::units::{Duration, VolumeId};

/// Identifies a host request until its reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RequestId(pub u64);

/// Identifies an I/O the engine asked the driver to perform.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct IoId(pub u64);

impl FixedHash for RequestId {
    fn fixed_hash(&self) -> u64 {
        mix_words(0, self.0)
    }
}

impl FixedHash for IoId {
    fn fixed_hash(&self) -> u64 {
        mix_words(0, self.0)
    }
}

/// What a host (or the administrator) asks of the filer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HostRequest {
    /// Read `length` bytes of a LUN at `offset`.
    Read {
        /// The LUN.
        lun: LunId,
        /// Byte offset.
        offset: u64,
        /// Bytes to read.
        length: u64,
    },
    /// Read `length` bytes at `offset` of a LUN as snapshot `snapshot` of its
    /// volume holds it.
    ReadSnapshot {
        /// The LUN (its inode number in the snapshot).
        lun: LunId,
        /// The snapshot's name.
        snapshot: String,
        /// Byte offset.
        offset: u64,
        /// Bytes to read.
        length: u64,
    },
    /// Complete once every earlier write is in a committed CP.
    Flush,
    /// A change (write, trim, LUN and volume administration), acknowledged
    /// once logged in the NVLog.
    Change(Change),
    /// Rate how contiguously a LUN lies on disk (`reallocate measure`).
    ReallocateMeasure {
        /// The LUN.
        lun: LunId,
    },
    /// Rewrite a LUN contiguously in the background, a batch per CP
    /// (`reallocate start`). It changes no data and is not logged.
    ReallocateStart {
        /// The LUN.
        lun: LunId,
    },
}

impl HostRequest {
    /// The volume a request that is not a change names, if it names one.
    pub fn volume(&self) -> Option<VolumeId> {
        match self {
            HostRequest::Read { lun, .. }
            | HostRequest::ReadSnapshot { lun, .. }
            | HostRequest::ReallocateMeasure { lun }
            | HostRequest::ReallocateStart { lun } => Some(lun.volume),
            HostRequest::Flush => None,
            HostRequest::Change(change) => change.volume(),
        }
    }

    /// The volume the request names, if it names one (a flush and a new
    /// volume do not).
    pub fn volume_mut(&mut self) -> Option<&mut VolumeId> {
        match self {
            HostRequest::Read { lun, .. }
            | HostRequest::ReadSnapshot { lun, .. }
            | HostRequest::ReallocateMeasure { lun }
            | HostRequest::ReallocateStart { lun } => Some(&mut lun.volume),
            HostRequest::Flush => None,
            HostRequest::Change(change) => change.volume_mut(),
        }
    }
}

/// A successful reply's content. `D` is what a read gives back: bytes for a
/// byte filer, stamps for a stamp filer ([`Payload::ReadData`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReplyData<D = Vec<u8>> {
    /// The request is done.
    Done,
    /// What was read.
    Data(D),
    /// The volume created.
    Volume(VolumeId),
    /// The LUN created.
    Lun(LunId),
    /// A reallocation measurement.
    Measure(ReallocMeasure),
}

/// Why a host request failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HostError {
    /// The range lies outside the LUN.
    #[error("offset {offset} + length {length} is outside the LUN of {size} bytes")]
    OutOfRange {
        /// Requested offset.
        offset: u64,
        /// Requested length.
        length: u64,
        /// The LUN's size.
        size: u64,
    },
    /// No such LUN or volume.
    #[error("no such {0}")]
    NotFound(&'static str),
    /// The name is already taken.
    #[error("{0} already exists")]
    Exists(String),
    /// Not enough space for the reservation asked for.
    #[error("not enough space: {needed_blocks} blocks needed, {available_blocks} available")]
    NoSpace {
        /// Blocks the request needs.
        needed_blocks: u64,
        /// Blocks available.
        available_blocks: u64,
    },
    /// The request is malformed.
    #[error("invalid request: {0}")]
    Invalid(String),
    /// The volume is offline (`vol offline`): its LUNs serve nothing.
    #[error("volume {0} is offline")]
    Offline(String),
    /// Data could not be read back intact, even with RAID reconstruction.
    #[error("unrecoverable media error")]
    Io,
}

/// A run of a LUN that is all data or all hole (`Filer::extents`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Extent {
    /// Byte offset.
    pub offset: u64,
    /// Bytes.
    pub length: u64,
    /// Whether the run holds data (else it is a hole and reads as zeros).
    pub data: bool,
}

/// A host request's outcome.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reply<D = Vec<u8>> {
    /// The request.
    pub id: RequestId,
    /// Its outcome.
    pub result: Result<ReplyData<D>, HostError>,
}

impl<D: ReadData> Reply<D> {
    /// The same reply with what was read as bytes.
    pub fn into_bytes(self) -> Reply {
        let result = self.result.map(|data| match data {
            ReplyData::Done => ReplyData::Done,
            ReplyData::Data(read) => ReplyData::Data(read.into_bytes()),
            ReplyData::Volume(volume) => ReplyData::Volume(volume),
            ReplyData::Lun(lun) => ReplyData::Lun(lun),
            ReplyData::Measure(measure) => ReplyData::Measure(measure),
        });
        Reply {
            id: self.id,
            result,
        }
    }
}

/// A request was refused for now; the same request may be submitted again
/// later.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Busy {
    /// The filer is mounting or replaying, or it went offline.
    #[error("the filer is not online")]
    NotOnline,
    /// The engine holds [`Options::max_requests`] requests already (waiting
    /// on the NVLog, on indirect blocks, on disk reads or on a CP): one must
    /// be answered before another is taken.
    #[error("the filer holds {0} requests already")]
    Full(usize),
}

/// A block as stored on disk: content plus trailer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sector<P: Payload = Bytes> {
    /// The content: 4 KiB, or a stamp.
    pub data: P::Content,
    /// The 64-byte trailer.
    pub trailer: [u8; crate::format::TRAILER_SIZE],
}

/// An I/O the driver must perform.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Io<P: Payload = Bytes> {
    /// Its identity, echoed in the completion.
    pub id: IoId,
    /// What to do.
    pub op: IoOp<P>,
}

/// The operation of an [`Io`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IoOp<P: Payload = Bytes> {
    /// Read `count` consecutive sectors of a disk.
    Read {
        /// The disk.
        disk: crate::units::DiskId,
        /// First block.
        dbn: Dbn,
        /// Blocks.
        count: u32,
    },
    /// Write consecutive sectors of a disk, durably.
    Write {
        /// The disk.
        disk: crate::units::DiskId,
        /// First block.
        dbn: Dbn,
        /// The sectors, in block order.
        sectors: Vec<Sector<P>>,
    },
    /// Append a record to an NVLog half, durably.
    NvlogAppend {
        /// The half.
        half: u8,
        /// The record. The driver stores [`NvRecord::encode`]'s bytes; the
        /// engine has counted [`NvRecord::encoded_len`] of them against the
        /// half.
        record: NvRecord,
    },
    /// Discard an NVLog half's records (its CP has committed).
    NvlogReset {
        /// The half.
        half: u8,
    },
    /// Put a spare disk in the place of failed disk `member`, durably, so
    /// that from now on I/O to `member` goes to the spare (blank as far as
    /// the filer cares; it rebuilds it). The driver takes its last spare. If
    /// `member` was already replaced (the request is repeated after a
    /// crash), nothing changes and it completes `Done`; with no spare left it
    /// completes `DiskFailed`.
    AssignSpare {
        /// The failed disk's slot.
        member: crate::units::DiskId,
    },
    /// Read a block of the node's Flash Cache device (a node I/O: its
    /// `aggregate` is `None`). It completes `Read` with one sector, or
    /// `DiskFailed` if the device has failed.
    FlashRead {
        /// The slot.
        slot: crate::units::FlashSlot,
        /// Where the block lives on disk, which the copy in the slot must
        /// equal: a driver that keeps no content for the device (the lab)
        /// answers with what that home holds.
        home: FlashHome,
    },
    /// Write a block into a slot of the node's Flash Cache device. It need
    /// not be durable: the cache is empty after a restart.
    FlashWrite {
        /// The slot.
        slot: crate::units::FlashSlot,
        /// The block as its home holds it.
        sector: Sector<P>,
    },
}

/// A block's place on disk: the aggregate, its disk and the block there.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FlashHome {
    /// The aggregate.
    pub aggregate: crate::units::AggrId,
    /// The disk, by the aggregate's own id.
    pub disk: crate::units::DiskId,
    /// The block.
    pub dbn: Dbn,
}

/// The outcome of an [`Io`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IoResult<P: Payload = Bytes> {
    /// A write or NVLog operation is durable.
    Done,
    /// The sectors read, each `None` where the medium could not return it
    /// (a latent sector error) or where it was never written.
    Read(Vec<Option<Sector<P>>>),
    /// The disk has failed and will not answer again.
    DiskFailed,
    /// The write could not be made durable for a reason outside the disk:
    /// the host's file system is full, or refuses the disk's file. The disk
    /// is not failed, and the write may or may not have landed, in part.
    /// The filer goes offline without committing anything more: the last
    /// committed CP and the NVLog still hold every acknowledged write, for
    /// the next mount once the host can store writes again.
    Unwritable,
}

/// What the buffer cache holds at a moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheUsage {
    /// LUN data blocks, clean, dirty or being read.
    pub data_blocks: usize,
    /// Indirect blocks of the active LUN trees.
    pub indirect_blocks: usize,
}

/// What the administrator has set on a volume, as the volume table records
/// it: the settings `vol status`, `snap reserve` and `priority show` report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VolumeSettings {
    /// How its blocks age in the buffer cache.
    pub cache_policy: CachePolicy,
    /// Whether sequential reads of scattered blocks rewrite them together.
    pub read_realloc: bool,
    /// Percent of its size set aside for snapshots.
    pub snap_reserve_percent: u8,
    /// Its `snap sched`.
    pub snap_schedule: crate::schedule::SnapSchedule,
}

impl<P: Payload> super::Filer<P> {
    /// The use clock's tick at the oldest last use of a block the buffer
    /// cache holds (compare [`super::Filer::cache_uses`], the clock now), or
    /// `None` with the cache empty: what the driver ages the cache by
    /// (`sysstat`'s Cache age), as the engine keeps no time.
    pub fn cache_oldest_use(&self) -> Option<u64> {
        self.cache.oldest_use()
    }

    /// Volume `id`'s settings, or `None` if there is no such volume.
    pub fn volume_settings(&self, id: VolumeId) -> Option<VolumeSettings> {
        self.namespace.volume(id).map(|v| VolumeSettings {
            cache_policy: v.cache_policy,
            read_realloc: v.read_realloc,
            snap_reserve_percent: v.snap_reserve_percent,
            snap_schedule: v.snap_schedule,
        })
    }
}

/// Tunables, each with the reason for its default.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// Blocks the buffer cache keeps: LUN data and LUN indirect blocks, clean
    /// (dirty ones are pinned on top, and so are the indirect blocks waiting
    /// requests need). Default 16384 (64 MiB): enough to absorb a CP's worth of
    /// hot overwrites. A node's budget, which it shares among its
    /// aggregates by their use of it (`Node`).
    pub cache_blocks: usize,
    /// Bytes in each NVLog half. Default 32 MiB, as on mid-range filers whose
    /// NVRAM holds 64 MiB per node.
    pub nvlog_half_bytes: u64,
    /// The CP timer: ONTAP starts a CP at least every 10 seconds.
    pub cp_interval: Duration,
    /// Dirty data blocks that start a CP (type H). Default 8192 (32 MiB),
    /// one NVLog half of 4 KiB writes.
    pub dirty_high_water: usize,
    /// Identities of rebuilt-disk blocks one walk of every tree keeps for a
    /// reconstruction's batches to use (see `rebuild`): the walk costs a
    /// pass over every pointer, the identities about 64 bytes each. Default
    /// 1 Mi (some 64 MiB), 4 GiB of a full disk per walk: 34 walks rebuild a
    /// full 144 GB disk, where a walk per batch of 256 stripes took 137,000.
    pub rebuild_identities_per_walk: usize,
    /// Host requests the engine holds at once, from `submit` until their
    /// replies are polled; beyond it `submit` answers [`Busy::Full`]. It
    /// bounds every queue a request can wait in. Default 65,536: above what
    /// the server admits (64 MiB in flight) and any lab queue depth.
    pub max_requests: usize,
    /// The node's Flash Cache, if it has one: a victim cache of the buffer
    /// cache on a flash device (ONTAP's `flexscale.enable`). Default none.
    pub flash_cache: Option<FlashCacheOptions>,
    /// A deliberate bug, for the simulator's negative controls only: proves
    /// that the checks catch the fault they exist for. Only builds with the
    /// `sabotage` feature (the simulator's tests) have it.
    #[cfg(feature = "sabotage")]
    pub sabotage: Option<Sabotage>,
}

/// What a node's Flash Cache holds, as ONTAP's `flexscale` options set it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlashCacheOptions {
    /// Blocks of the flash device it uses, at least 1.
    pub blocks: u64,
    /// Whether user data read in from disk is inserted when the buffer
    /// cache evicts it (`flexscale.normal_data_blocks`, on by default).
    pub normal_data_blocks: bool,
    /// Whether low-priority user data is inserted too: blocks the host
    /// wrote (`flexscale.lopri_blocks`, off by default). Metadata (indirect
    /// blocks) is always inserted.
    pub lopri_blocks: bool,
}

impl FlashCacheOptions {
    /// A cache of `blocks` with ONTAP's defaults for what goes in.
    pub fn new(blocks: u64) -> FlashCacheOptions {
        FlashCacheOptions {
            blocks,
            normal_data_blocks: true,
            lopri_blocks: false,
        }
    }
}

/// Deliberate bugs the simulator's negative controls switch on. Without the
/// `sabotage` feature nothing can switch them on, and the code they would
/// take is compiled out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sabotage {
    /// Mounting skips NVLog replay.
    SkipReplay,
    /// A freed block is reusable at once, a CP too early.
    EarlyFree,
    /// Partial-stripe writes leave parity as it was.
    SkipParityUpdate,
    /// Reads accept a block whatever its checksum and identity say.
    IgnoreTrailer,
    /// Blocks the active file system lets go of are freed even when a
    /// snapshot still holds them.
    IgnoreSnapshots,
    /// A scrub counts the damage it finds but writes no repair.
    SkipScrubRepair,
    /// A scrub checks a block against only the content the filer last wrote
    /// there, not the trailer: a lost write of the same content under a new
    /// identity leaves a stale trailer that it passes.
    ScrubTrustsStaleIdentity,
    /// A read retried after its repair overlapped a CP waits for that CP to
    /// commit even while the CP is still capturing, and so perhaps waiting
    /// for the very block: a deadlock the stall detector must report.
    ParkRetriesBehindCapture,
    /// A CP commits whatever its writes met: a write the host refused counts
    /// as done and a RAID group past its promise does not stop it.
    CommitRegardless,
    /// A block the aggregate lets go of stays marked in use: a leak, which
    /// no read notices and the invariants checked at the CP's commit must.
    LeakFreedBlocks,
    /// Mounting replays every record of the node's shared NVLog newer than
    /// the aggregate's CP, its own and other aggregates' alike.
    ReplayForeignRecords,
    /// A node resets an NVLog half as soon as it is not the active one,
    /// whether or not every aggregate has committed the records in it.
    EarlyLogReset,
    /// A scheduled snapshot deletes the oldest of its kind and takes the new
    /// `kind.0`, but renames none of the others one up.
    RotationRenamesNothing,
    /// A write to a thin LUN is logged without asking whether its volume
    /// has room for the holes it fills.
    ThinWritesAdmittedBlindly,
    /// The node's Flash Cache keeps its copy of a block when the block's
    /// home is written: a stale copy, which a read may be given.
    FlashKeepsOverwrittenCopies,
    /// Flash Pool's eviction scanner frees a cold write-cached block instead
    /// of destaging it: the only copy of the data, given back to the free
    /// space while the tree still points at it.
    WriteCacheDropsColdBlocks,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            cache_blocks: 16384,
            nvlog_half_bytes: 32 << 20,
            cp_interval: Duration::from_secs(10),
            dirty_high_water: 8192,
            rebuild_identities_per_walk: 1 << 20,
            max_requests: 1 << 16,
            flash_cache: None,
            #[cfg(feature = "sabotage")]
            sabotage: None,
        }
    }
}

/// Why a CP started, with ONTAP's `sysstat` letter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CpReason {
    /// `T`: the 10-second timer.
    Timer,
    /// `F`: an NVLog half filled.
    NvlogFull,
    /// `B`: the other half filled while a CP ran; writes waited.
    BackToBack,
    /// `H`: dirty data reached the high-water mark.
    HighWater,
    /// `U`: a flush asked for it.
    Flush,
    /// `S`: a snapshot is being taken.
    Snapshot,
    /// `Z`: the filer is formatting, mounting or shutting down.
    Sync,
}

impl CpReason {
    /// ONTAP's `CP ty` letter.
    pub fn letter(self) -> char {
        match self {
            CpReason::Timer => 'T',
            CpReason::NvlogFull => 'F',
            CpReason::BackToBack => 'B',
            CpReason::HighWater => 'H',
            CpReason::Flush => 'U',
            CpReason::Snapshot => 'S',
            CpReason::Sync => 'Z',
        }
    }
}

/// Per-disk counters, the raw material of a `statit` disk section.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DiskCounters {
    /// Read I/Os for host data, metadata at mount and repairs ("user reads").
    pub user_reads: u64,
    /// Blocks those reads moved (their ratio is the chain length).
    pub user_read_blocks: u64,
    /// Read I/Os a CP issued for partial-stripe parity ("CP reads").
    pub cp_reads: u64,
    /// Blocks those reads moved.
    pub cp_read_blocks: u64,
    /// Write I/Os.
    pub writes: u64,
    /// Blocks written (their ratio to writes is the write chain length).
    pub write_blocks: u64,
    /// Sum over the user reads of the time from issue to completion, in
    /// nanoseconds (statit's `usecs` per user read, times the reads).
    pub user_read_time_ns: u64,
    /// The same for CP reads.
    pub cp_read_time_ns: u64,
    /// The same for writes.
    pub write_time_ns: u64,
}

/// Which of a disk's counters an I/O belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DiskIoKind {
    UserRead,
    CpRead,
    Write,
}

impl DiskCounters {
    /// Sum over this disk's I/Os of the time from issue to completion, in
    /// nanoseconds: with one I/O at a time, the disk's busy time.
    pub fn io_time_ns(&self) -> u64 {
        self.user_read_time_ns + self.cp_read_time_ns + self.write_time_ns
    }

    /// Counts an I/O of `blocks` blocks issued to this disk.
    pub(crate) fn count_issued(&mut self, kind: DiskIoKind, blocks: u64) {
        let (ios, total) = match kind {
            DiskIoKind::UserRead => (&mut self.user_reads, &mut self.user_read_blocks),
            DiskIoKind::CpRead => (&mut self.cp_reads, &mut self.cp_read_blocks),
            DiskIoKind::Write => (&mut self.writes, &mut self.write_blocks),
        };
        *ios += 1;
        *total += blocks;
    }

    /// Takes back an I/O counted at issue that the disk never saw.
    pub(crate) fn uncount_issued(&mut self, kind: DiskIoKind, blocks: u64) {
        let (ios, total) = match kind {
            DiskIoKind::UserRead => (&mut self.user_reads, &mut self.user_read_blocks),
            DiskIoKind::CpRead => (&mut self.cp_reads, &mut self.cp_read_blocks),
            DiskIoKind::Write => (&mut self.writes, &mut self.write_blocks),
        };
        *ios -= 1;
        *total -= blocks;
    }

    /// Adds a completed I/O's time from issue to completion.
    pub(crate) fn add_latency(&mut self, kind: DiskIoKind, latency: crate::units::Duration) {
        let total = match kind {
            DiskIoKind::UserRead => &mut self.user_read_time_ns,
            DiskIoKind::CpRead => &mut self.cp_read_time_ns,
            DiskIoKind::Write => &mut self.write_time_ns,
        };
        *total += latency.0;
    }
}

/// Counters for `sysstat` and `statit` style reports.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// CPs completed, by reason.
    pub cps: std::collections::BTreeMap<CpReason, u64>,
    /// Nanoseconds CPs ran, from start to commit (`sysstat`'s CP time).
    pub cp_time_ns: u64,
    /// Requests refused because the engine held `Options::max_requests`.
    pub busy_refusals: u64,
    /// Host changes that waited for a running CP because the other NVLog half
    /// filled, or dirty data reached twice the high-water mark.
    pub back_to_back_waits: u64,
    /// Stripes written whole, parity computed in memory.
    pub full_stripes: u64,
    /// Stripes written in part, parity updated by subtraction.
    pub partial_stripes_subtraction: u64,
    /// Stripes written in part, parity recomputed by addition.
    pub partial_stripes_addition: u64,
    /// Stripes that had to be reconstructed before a write.
    pub partial_stripes_reconstruct: u64,
    /// Data blocks written by CPs.
    pub data_blocks_written: u64,
    /// Metadata blocks (indirect, inode file, maps, volume table) written by CPs.
    pub meta_blocks_written: u64,
    /// Parity blocks written.
    pub parity_blocks_written: u64,
    /// Disk reads caused by partial-stripe writes.
    pub parity_reads: u64,
    /// Disk reads of blocks merged into a partial write that was not cached.
    pub partial_write_reads: u64,
    /// Host reads served from the buffer cache.
    pub cache_hits: u64,
    /// Host reads that went to disk.
    pub cache_misses: u64,
    /// Indirect blocks of LUNs read because they were not in the cache.
    pub indirect_reads: u64,
    /// Indirect blocks of LUNs evicted from the cache.
    pub indirect_evictions: u64,
    /// Disk read I/Os (chains) issued for data.
    pub read_chains: u64,
    /// Blocks read for data in those chains.
    pub read_chain_blocks: u64,
    /// Blocks whose checksum or identity failed and that RAID repaired.
    pub blocks_repaired: u64,
    /// Blocks reconstructed because their disk is failed.
    pub degraded_reads: u64,
    /// Blocks that could not be recovered.
    pub unrecoverable_blocks: u64,
    /// Blocks a reallocation job marked for rewriting.
    pub realloc_blocks: u64,
    /// Blocks written onto a spare by reconstruction.
    pub rebuilt_blocks: u64,
    /// Reconstructions onto a spare completed.
    pub rebuilds_completed: u64,
    /// Walks of every tree for the identities of blocks to rebuild.
    pub rebuild_walks: u64,
    /// Disk reads of stripes a scrub verified.
    pub scrub_reads: u64,
    /// Walks of every tree for the identities of blocks a scrub repairs.
    pub scrub_walks: u64,
    /// Flash Pool's counters (zero unless the aggregate is hybrid).
    pub hya: HyaCounters,
    /// Per-disk counters, indexed by disk id.
    pub disks: Vec<DiskCounters>,
}

/// Flash Pool counters, named after ONTAP's `wafl_hya_per_aggr`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HyaCounters {
    /// Data blocks CPs wrote to the write cache (`wc_write_blks_total`).
    pub wc_write_blks_total: u64,
    /// Data blocks CPs wrote to HDD.
    pub hdd_write_blks_total: u64,
    /// Data blocks read from SSD rather than HDD (`read_ops_replaced`, in blocks).
    pub read_blks_replaced: u64,
    /// Data blocks read from HDD (`hya_hdd`): with the above, the hit rate.
    pub hdd_read_blks: u64,
    /// Copies of blocks read at random inserted into the read cache
    /// (`read_cache_ins`).
    pub read_cache_ins: u64,
    /// Read-cached copies the scanner dropped (`evict_remove`).
    pub evict_remove: u64,
    /// Write-cached blocks the scanner sent back to HDD (`evict_destage`).
    pub evict_destage: u64,
    /// Eviction scanner passes.
    pub scanner_passes: u64,
    /// Write-cache candidates the CP put on HDD because the SSDs were full.
    pub ssd_full_rejects: u64,
}

impl HyaCounters {
    /// Adds `other`'s counts to these (over aggregates or runs).
    pub fn add(&mut self, other: &HyaCounters) {
        self.wc_write_blks_total += other.wc_write_blks_total;
        self.hdd_write_blks_total += other.hdd_write_blks_total;
        self.read_blks_replaced += other.read_blks_replaced;
        self.hdd_read_blks += other.hdd_read_blks;
        self.read_cache_ins += other.read_cache_ins;
        self.evict_remove += other.evict_remove;
        self.evict_destage += other.evict_destage;
        self.scanner_passes += other.scanner_passes;
        self.ssd_full_rejects += other.ssd_full_rejects;
    }
}

/// What `reallocate measure` found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReallocMeasure {
    /// Optimization rating, 1 (contiguous) to 10 (not optimal).
    pub rating: u8,
    /// Rating of the worst 1% of the LUN.
    pub hotspot: u8,
    /// Windows measured.
    pub windows: u64,
}

impl ReallocMeasure {
    /// ONTAP's log line for a measurement of `path` against `threshold`.
    pub fn log_line(&self, path: &str, threshold: u8) -> String {
        let verdict = match self.rating > threshold {
            true => ", so will reallocate.",
            false => ".",
        };
        format!(
            "Allocation check on '{path}' is {}, hotspot {} (threshold {threshold}){verdict}",
            self.rating, self.hotspot
        )
    }
}
