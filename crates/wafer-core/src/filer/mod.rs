//! The `Filer`: one aggregate with its flexible volumes and LUNs, as a state
//! machine.
//!
//! Call order after any `submit` or `handle_*`: drain [`Filer::poll_io`], then
//! [`Filer::poll_reply`], then read [`Filer::poll_timeout`].
//!
//! Writes go to the buffer cache and the NVLog and are acknowledged once the
//! log append is durable. Consistency points (`cp`) write everything dirty to
//! new places as full stripes where possible and commit by writing the
//! superblock. Reads come from the cache or from disk, every block verified
//! against its trailer and repaired from parity when it fails (`blockio`).
//! Mounting walks the metadata from the newest superblock and replays the NVLog
//! (`mount`). Invariants that must hold at every quiescent point are checked by
//! [`Filer::check_invariants`].
//!
//! At the lab's scale (a 100 GiB LUN, gigabytes of maps and nodes) nearly
//! every lookup a host I/O makes misses the CPU's cache, and one miss waits
//! for the last. So where the engine knows early which lines it will need
//! (a read's cache buckets and level-1 nodes, the CP's next blocks, the
//! eviction's next victims), it asks for them first with prefetch hints,
//! and their misses overlap. A hint changes no state: only time.

pub mod api;
mod blockio;
mod cache;
mod container;
mod cp;
mod destroy;
mod grow;
mod hya;
mod indirect;
pub mod meta;
mod mount;
mod namespace;
mod node_ages;
mod outbox;
mod realloc;
mod rebuild;
mod resync;
mod scrub;
mod sectors;
mod slot_index;
mod snapshot;
mod space;
mod thin;
mod victim;
mod written;

use std::borrow::Cow;
use std::collections::{BTreeMap, VecDeque};

use wafer_raid::DiskSet;

pub use api::*;
use blockio::{BlockRead, ReadPurpose};
use cache::{BlockState, BufferCache, CacheEntry};
use cp::Cp;
pub use grow::{GrowError, HybridError, check_extension};
pub use hya::{FlashPoolStatus, HOT, NEUTRAL, SCAN_FILL_PERCENT, WRITE_CACHE_MAX_BYTES};
pub use meta::VolumeState;
use meta::{FileRef, MetaFile, VOLUMES_PER_BLOCK};
use mount::Mount;
use namespace::{AggregateRoom, Namespace, check_in_range};
pub use realloc::REALLOC_BLOCKS_PER_CP;
pub use rebuild::{REBUILD_STRIPES_PER_CP, RebuildStatus};
pub use scrub::{SCRUB_STRIPES_PER_CP, ScrubError, ScrubStatus, ScrubTally};
pub use snapshot::SnapshotInfo;
pub use space::{AggregateSpace, MAX_SNAP_RESERVE_PERCENT, VolumeSpace};
pub use victim::Victim;
use written::WrittenSums;

use crate::BLOCK_SIZE;
use crate::aggregate::Layout;
use crate::bitmap::Bitmap;
use crate::fixed_map::FixedMap;
use crate::format::{BlockPtr, LunAttributes, NAME_MAX};
use crate::nvlog::{LogPort, LoggedOp, LunId};
use crate::payload::{Bytes, Payload, blocks_covered};
use crate::space::{Allocator, PendingFrees};
use crate::units::{AggrId, CpCount, Fbn, Instant, Pvbn, VolumeId};

/// The aggregate-level state: its map, its volume table and its allocator.
#[derive(Clone, Debug)]
struct Aggregate {
    activemap: Bitmap,
    activemap_file: MetaFile,
    volume_table: MetaFile,
    pending: PendingFrees,
    allocator: Allocator,
}

/// A change to one cached block. It borrows the write's bytes while it is
/// applied at once, and owns a copy only when it must wait in a block's
/// queue while the old content is read ([`QueuedOp::into_owned`]).
#[derive(Clone, Debug)]
struct QueuedOp<'a> {
    generation: CpCount,
    at: usize,
    bytes: Option<Cow<'a, [u8]>>,
    len: usize,
}

impl QueuedOp<'_> {
    /// A change of nothing: the block becomes dirty as it is, so the next CP
    /// writes it somewhere new (reallocation).
    fn touch(generation: CpCount) -> QueuedOp<'static> {
        QueuedOp {
            generation,
            at: 0,
            bytes: Some(Cow::Borrowed(&[])),
            len: 0,
        }
    }

    /// The change with its own copy of the bytes, to keep in a queue.
    fn into_owned(self) -> QueuedOp<'static> {
        QueuedOp {
            generation: self.generation,
            at: self.at,
            bytes: self.bytes.map(|bytes| Cow::Owned(bytes.into_owned())),
            len: self.len,
        }
    }

    fn apply<P: Payload>(&self, content: &mut P::Content) {
        P::write(content, self.at, self.bytes.as_deref(), self.len);
    }
}

/// A read waiting for blocks to arrive.
#[derive(Clone, Debug)]
struct PendingRead<D> {
    lun: LunId,
    offset: u64,
    length: u64,
    data: D,
    missing: usize,
    failed: bool,
    /// A read of a snapshot (it does not trigger read reallocation).
    snapshot: bool,
}

/// Where the filer is in its life.
#[derive(Clone, Debug)]
enum Phase<U: wafer_raid::StripeUnit> {
    Mounting(Box<Mount<U>>),
    Online,
    Failed(String),
    /// Once online, the filer could not make a CP durable within its RAID
    /// promise: it commits nothing more, releases no log and takes no
    /// requests; the next mount starts from the last committed CP.
    Offline(String),
}

/// Why an I/O was issued.
#[derive(Clone, Debug)]
enum IoPurpose<D> {
    Blocks(Vec<BlockRead>),
    Repair {
        job: u64,
        disk: wafer_raid::DiskIndex,
    },
    RepairWrite,
    CpRead {
        stripe: (usize, u64),
        disk: wafer_raid::DiskIndex,
    },
    CpWrite,
    SuperblockRead {
        disk: crate::units::DiskId,
    },
    SuperblockWrite,
    Append {
        request: Option<(RequestId, Result<ReplyData<D>, HostError>)>,
    },
    StripesLogged,
    Reset,
    ResyncRead {
        stripe: (usize, u64),
        disk: wafer_raid::DiskIndex,
    },
    ResyncWrite,
    AssignSpare,
}

/// An I/O issued and not yet complete: why, the disk and kind it counts
/// against (none for the NVLog), and when it was issued.
type PendingIo<D> = (
    IoPurpose<D>,
    Option<(crate::units::DiskId, DiskIoKind)>,
    Instant,
);

/// The administrator's offline as the aggregate's superblocks record it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct OfflineMark {
    /// What the next superblock records.
    marked: bool,
    /// What the newest committed superblock records.
    committed: bool,
}

/// One aggregate, its volumes and LUNs: the filer engine, over payload `P`
/// (real bytes unless the lab asks for stamps).
#[derive(Debug)]
pub struct Filer<P: Payload = Bytes> {
    /// The aggregate's identifier and name within its node.
    id: AggrId,
    name: String,
    layout: Layout,
    options: Options,
    phase: Phase<P::Unit>,
    committed: CpCount,
    aggregate: Aggregate,
    /// The volumes and LUNs, and the pvbns they reserve.
    namespace: Namespace,
    cache: BufferCache<P>,
    /// The LUN blocks changed since the last CP began: a set that every
    /// write adds to, and that a CP sorts once when it takes it.
    dirty: FixedMap<(LunId, Fbn), ()>,
    /// Per volume, a lower bound on the blocks its thin LUNs may still
    /// fill (`thin`); a volume without one has its figure computed anew.
    thin_room: BTreeMap<VolumeId, u64>,
    use_clock: u64,
    log: LogPort,
    /// What mounting worked around, for the driver to report.
    mount_warnings: Vec<String>,
    stalled: VecDeque<(RequestId, LoggedOp)>,
    reads: FixedMap<RequestId, PendingRead<P::ReadData>>,
    flush_waiting: Vec<RequestId>,
    cp: Option<Cp<P>>,
    next_cp_reason: Option<CpReason>,
    last_cp_end: Instant,
    now: Instant,
    failed: Vec<DiskSet>,
    repairs: blockio::Repairs<P>,
    next_fill: u64,
    parked_reads: Vec<BlockRead>,
    /// Blocks evicted for the node's Flash Cache, until it takes them.
    victims: Vec<Victim<P>>,
    /// The indirect-block cache: reads in flight, waiters, ages.
    indirect: indirect::IndirectState,
    /// The same for data blocks.
    data_floor: (CpCount, usize),
    written: WrittenSums,
    /// The aggregate's active map as of the newest committed CP: no block it
    /// marks may be written until a newer CP has committed without it.
    committed_map: Bitmap,
    realloc: Option<realloc::ReallocJob>,
    /// Disks added, to take into use when the next CP starts.
    growth: Option<Layout>,
    rebuild: Option<rebuild::Rebuild>,
    scrub: Option<scrub::Scrub>,
    /// The driver said it has no spare left.
    spares_exhausted: bool,
    /// A rebuild finished and no committed superblock says so yet.
    rebuild_done_unrecorded: bool,
    /// One past the NVLog sequence number of the last record a mount
    /// replayed (or found so in the superblock it mounted): every
    /// superblock records it, and replay takes only records from it on.
    replayed_below: u64,
    /// Whether the administrator's offline is recorded on the disks.
    offline: OfflineMark,
    /// `hybrid_enabled`: SSD RAID groups may be added.
    hybrid: bool,
    /// Flash Pool's write cache.
    flash_pool: hya::FlashPool,
    outbox: outbox::Outbox<P, PendingIo<P::ReadData>>,
    counters: Counters,
}

impl<P: Payload> Filer<P> {
    fn empty(layout: Layout, options: Options, now: Instant) -> Filer<P> {
        let total = layout.total_blocks();
        let mut activemap = Bitmap::map_file(total);
        for pvbn in layout.reserved_pvbns() {
            activemap.set(pvbn.0);
        }
        activemap.set(0);
        let allocator = Allocator::new(&layout, &activemap);
        let groups = layout.groups().len();
        let log = LogPort::new(options.nvlog_half_bytes);
        let written = WrittenSums::new(&layout);
        let no_spares = layout.spares() == 0;
        let layout_is_hybrid = layout.is_hybrid();
        let counters = Counters {
            disks: vec![DiskCounters::default(); layout.disk_count() as usize],
            ..Counters::default()
        };
        Filer {
            id: AggrId(0),
            name: crate::format::DEFAULT_AGGREGATE_NAME.to_string(),
            aggregate: Aggregate {
                activemap,
                activemap_file: MetaFile::default(),
                volume_table: MetaFile::default(),
                pending: PendingFrees::new(total),
                allocator,
            },
            layout,
            options,
            phase: Phase::Online,
            committed: CpCount(0),
            namespace: Namespace::default(),
            cache: BufferCache::default(),
            dirty: FixedMap::default(),
            thin_room: BTreeMap::new(),
            use_clock: 0,
            log,
            mount_warnings: Vec::new(),
            stalled: VecDeque::new(),
            reads: FixedMap::default(),
            flush_waiting: Vec::new(),
            cp: None,
            next_cp_reason: None,
            last_cp_end: now,
            now,
            failed: vec![DiskSet::EMPTY; groups],
            written,
            committed_map: Bitmap::new(total),
            realloc: None,
            growth: None,
            rebuild: None,
            scrub: None,
            spares_exhausted: no_spares,
            rebuild_done_unrecorded: false,
            replayed_below: 0,
            offline: OfflineMark::default(),
            hybrid: layout_is_hybrid,
            flash_pool: hya::FlashPool::default(),
            repairs: blockio::Repairs::default(),
            next_fill: 0,
            parked_reads: Vec::new(),
            victims: Vec::new(),
            indirect: indirect::IndirectState::new(),
            data_floor: (CpCount(0), 0),
            outbox: outbox::Outbox::default(),
            counters,
        }
    }

    /// Creates a new, empty aggregate on blank disks. The filer is online once
    /// the first CP (which writes the superblock) has committed.
    pub fn format(layout: Layout, options: Options, now: Instant) -> Filer<P> {
        let name = crate::format::DEFAULT_AGGREGATE_NAME;
        Filer::format_aggregate(AggrId(0), name, layout, options, now)
    }

    /// Creates a new, empty aggregate `id` called `name` on blank disks,
    /// as a node does for each aggregate it serves: its superblock and its
    /// NVLog records carry `id`.
    ///
    /// # Panics
    /// If `name` is longer than [`NAME_MAX`] bytes.
    pub fn format_aggregate(
        id: AggrId,
        name: &str,
        layout: Layout,
        options: Options,
        now: Instant,
    ) -> Filer<P> {
        assert!(name.len() <= NAME_MAX, "aggregate name too long");
        let mut filer = Filer::empty(layout, options, now);
        filer.id = id;
        filer.name = name.to_string();
        // Every map block is dirty so that the first image is complete.
        for block in 0..filer.aggregate.activemap.blocks() {
            filer.aggregate.activemap_file.dirty.insert(block);
        }
        filer.start_cp(CpReason::Sync);
        filer
    }

    /// Whether the filer accepts host requests.
    pub fn is_online(&self) -> bool {
        matches!(self.phase, Phase::Online) && self.committed.0 > 0
    }

    /// Why the filer went offline after it came online, if it did: a write
    /// the host refused, or a RAID group that lost more disks than it
    /// survives. The driver stops it; a new mount recovers every
    /// acknowledged write from the last committed CP and the NVLog.
    pub fn offline_reason(&self) -> Option<&str> {
        match &self.phase {
            Phase::Offline(reason) => Some(reason),
            _ => None,
        }
    }

    /// Takes the filer offline (or fails its mount) for `reason`: from now on
    /// no completion is acted on, so no CP commits and no log is released.
    fn go_offline(&mut self, reason: String) {
        match self.phase {
            Phase::Online => self.phase = Phase::Offline(reason),
            Phase::Mounting(_) => self.phase = Phase::Failed(reason),
            Phase::Failed(_) | Phase::Offline(_) => {}
        }
    }

    pub(super) fn commits_regardless(&self) -> bool {
        self.sabotaged(Sabotage::CommitRegardless)
    }

    /// Whether deliberate bug `bug` is switched on: never outside builds
    /// with the `sabotage` feature, which alone give `Options` the field.
    fn sabotaged(&self, bug: Sabotage) -> bool {
        #[cfg(feature = "sabotage")]
        let on = self.options.sabotage == Some(bug);
        #[cfg(not(feature = "sabotage"))]
        let on = {
            let _ = bug;
            false
        };
        on
    }

    /// Uses of the buffer cache so far (its use clock): what the node
    /// shares its cache budget by.
    pub fn cache_uses(&self) -> u64 {
        self.use_clock
    }

    /// The blocks this aggregate's buffer cache keeps now.
    pub fn cache_share(&self) -> usize {
        self.options.cache_blocks
    }

    /// The newest committed CP.
    pub fn committed_cp(&self) -> CpCount {
        self.committed
    }

    /// The aggregate's identifier within its node (as its superblock says,
    /// once mounted).
    pub fn aggregate_id(&self) -> AggrId {
        self.id
    }

    /// The aggregate's name.
    pub fn aggregate_name(&self) -> &str {
        &self.name
    }

    /// Marks the aggregate taken offline by the administrator (or no
    /// longer): every superblock from the next CP on records it, so that a
    /// mount brings the aggregate up offline. The aggregate goes on serving
    /// meanwhile; not serving it is the node's part.
    pub fn mark_offline(&mut self, offline: bool) {
        self.offline.marked = offline;
    }

    /// Whether the next superblock records the aggregate offline (as the
    /// mounted one did, until [`mark_offline`](Self::mark_offline) says
    /// otherwise).
    pub fn marked_offline(&self) -> bool {
        self.offline.marked
    }

    /// Whether the newest committed superblock records the aggregate
    /// offline.
    pub fn offline_committed(&self) -> bool {
        self.offline.committed
    }

    /// Whether a CP is running.
    pub fn cp_running(&self) -> bool {
        self.cp.is_some()
    }

    /// Whether anything changed since the last CP began: dirty blocks, or
    /// records in the NVLog's active half.
    pub fn has_uncommitted(&self) -> bool {
        !self.dirty.is_empty() || self.log.active_used() > 0
    }

    /// Starts a CP for `reason` now, if the filer is online and none is
    /// running: a node starts one in every aggregate when any of them starts
    /// one, so that the log they share is released together.
    pub fn start_cp_now(&mut self, now: Instant, reason: CpReason) {
        self.now = now;
        if self.is_online() && self.cp.is_none() {
            self.start_cp(reason);
            self.tend_indirect();
        }
    }

    /// The aggregate's layout.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Counters since start.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Disks known failed, per RAID group.
    pub fn failed_disks(&self) -> &[DiskSet] {
        &self.failed
    }

    /// Volumes by id, with their names; not those destroyed and waiting
    /// for a CP to free them.
    pub fn volumes(&self) -> Vec<(VolumeId, String)> {
        self.namespace
            .volumes()
            .filter(|(_, v)| v.state != VolumeState::Destroying)
            .map(|(id, v)| (id, v.name.clone()))
            .collect()
    }

    /// Whether volume `id` is online or offline (or being destroyed).
    pub fn volume_state(&self, id: VolumeId) -> Option<VolumeState> {
        self.namespace.volume(id).map(|v| v.state)
    }

    /// Which parts of `offset..offset + length` of a LUN (or of the LUN as
    /// `snapshot` holds it) hold data, as runs of whole 4 KiB blocks clipped
    /// to the range: the rest is a hole and reads as zeros. A block written
    /// and not yet in a CP counts as data.
    pub fn extents(
        &self,
        lun: LunId,
        snapshot: Option<&str>,
        offset: u64,
        length: u64,
    ) -> Result<Vec<Extent>, HostError> {
        let l = match snapshot {
            None => self.namespace.lun(lun)?.1,
            Some(name) => self.namespace.snapshot_lun(lun, name)?.1,
        };
        let tree = &l.tree;
        check_in_range(offset, length, l.size_bytes)?;
        let block = BLOCK_SIZE as u64;
        let end = offset + length;
        let mut out: Vec<Extent> = Vec::new();
        for fbn in (offset / block..end.div_ceil(block)).map(Fbn) {
            let cached = snapshot.is_none() && self.cache.contains_key(&(lun, fbn));
            // An absent indirect block hides whether there is data: say there is.
            let data = cached || tree.try_get(fbn).is_none_or(|ptr| !ptr.is_null());
            let start = (fbn.0 * block).max(offset);
            let stop = ((fbn.0 + 1) * block).min(end);
            match out.last_mut() {
                Some(last) if last.data == data => last.length += stop - start,
                _ => out.push(Extent {
                    offset: start,
                    length: stop - start,
                    data,
                }),
            }
        }
        Ok(out)
    }

    /// LUN `lun`'s space reservation and OS type, and the bytes it occupies
    /// (the blocks the active file system's tree holds, as of the last CP);
    /// `None` if there is no such LUN.
    pub fn lun_details(&self, lun: LunId) -> Option<(LunAttributes, u64)> {
        let (_, l) = self.namespace.lun(lun).ok()?;
        Some((l.attributes, l.tree.content_blocks() * BLOCK_SIZE as u64))
    }

    /// LUNs of a volume: id, name and size in bytes.
    pub fn luns(&self, volume: VolumeId) -> Vec<(LunId, String, u64)> {
        self.namespace.volume(volume).map_or_else(Vec::new, |v| {
            v.luns
                .iter()
                .map(|(file, lun)| {
                    (
                        LunId {
                            volume,
                            file: *file,
                        },
                        lun.name.clone(),
                        lun.size_bytes,
                    )
                })
                .collect()
        })
    }

    /// Accepts a host request.
    pub fn submit(&mut self, now: Instant, request: HostRequest) -> Result<RequestId, Busy> {
        self.now = now;
        if !self.is_online() {
            return Err(Busy::NotOnline);
        }
        let id = self
            .outbox
            .admit(self.options.max_requests)
            .inspect_err(|_| self.counters.busy_refusals += 1)?;
        self.dispatch(id, request);
        self.tend_indirect();
        Ok(id)
    }

    /// The next I/O for the driver to perform.
    pub fn poll_io(&mut self) -> Option<Io<P>> {
        self.outbox.poll_io()
    }

    /// The next reply to a host request.
    pub fn poll_reply(&mut self) -> Option<Reply<P::ReadData>> {
        self.outbox.poll_reply()
    }

    /// When [`handle_timeout`](Self::handle_timeout) should next be called.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let idle = self.dirty.is_empty() && self.log.active_used() == 0;
        (self.is_online() && self.cp.is_none() && !idle)
            .then(|| self.last_cp_end + self.options.cp_interval)
    }

    /// Time has passed: starts the timer CP when it is due. Spurious calls are no-ops.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.now = now;
        if self.poll_timeout().is_some_and(|deadline| now >= deadline) {
            self.start_cp(CpReason::Timer);
        }
        self.tend_indirect();
    }

    /// An I/O has completed.
    pub fn handle_io_done(&mut self, now: Instant, id: IoId, result: IoResult<P>) {
        self.now = now;
        let (purpose, disk, issued) = self.outbox.complete(id);
        if let Some((disk, kind)) = disk {
            self.counters.disks[disk.0 as usize].add_latency(kind, now - issued);
        }
        if matches!(self.phase, Phase::Offline(_) | Phase::Failed(_)) {
            return;
        }
        let result = match result {
            IoResult::Unwritable if self.commits_regardless() => IoResult::Done,
            IoResult::Unwritable => return self.host_refused(disk.map(|(d, _)| d)),
            result => result,
        };
        if let (IoResult::DiskFailed, Some((disk, _))) = (&result, disk) {
            self.mark_failed(disk);
            if matches!(self.phase, Phase::Offline(_) | Phase::Failed(_)) {
                return;
            }
            self.rebuild_disk_failed(disk);
        }
        match purpose {
            IoPurpose::Blocks(reads) => self.blocks_read(reads, result),
            IoPurpose::Repair { job, disk } => self.repair_read(job, disk, result),
            IoPurpose::RepairWrite | IoPurpose::Reset => {}
            IoPurpose::CpRead { stripe, disk } => self.cp_read_done(stripe, disk, result),
            IoPurpose::CpWrite | IoPurpose::SuperblockWrite => self.cp_write_done(),
            IoPurpose::SuperblockRead { disk } => self.superblock_read(disk, result),
            IoPurpose::Append { request } => {
                if let Some((id, result)) = request {
                    self.outbox.reply(id, result);
                }
            }
            IoPurpose::StripesLogged => self.issue_stripes(),
            IoPurpose::ResyncRead { stripe, disk } => self.resync_read(stripe, disk, result),
            IoPurpose::ResyncWrite => self.resync_write_done(),
            IoPurpose::AssignSpare => self.spare_assigned(result),
        }
        self.tend_indirect();
    }

    fn host_refused(&mut self, disk: Option<crate::units::DiskId>) {
        let what = disk.map_or_else(
            || "the NVLog or the configuration".into(),
            |d| format!("disk slot {}", d.0),
        );
        self.go_offline(format!(
            "the host could not store a write to {what} (its file system is full, or refuses \
             the file): no CP commits from here on"
        ));
    }

    /// Marks a disk failed; its blocks are reconstructed from parity from now
    /// on. A CP follows (if none is running) so that a rebuild onto a spare
    /// can begin without waiting for host writes.
    pub fn mark_failed(&mut self, disk: crate::units::DiskId) {
        let Some(crate::aggregate::Slot::Member { group, disk }) = self.layout.slot(disk) else {
            return;
        };
        let newly = !self.failed[group].contains(disk);
        self.failed[group] = self.failed[group].with(disk);
        let lost = self.failed[group].len();
        let survives = self.layout.groups()[group].raid_type().tolerated_failures();
        if lost > survives && !self.commits_regardless() {
            return self.go_offline(format!(
                "RAID group {group} has lost {lost} disks, more than the {survives} it survives: \
                 no CP commits from here on"
            ));
        }
        if newly && self.cp.is_none() && matches!(self.phase, Phase::Online) {
            self.start_cp(CpReason::Sync);
        }
    }

    fn issue(&mut self, op: IoOp<P>, purpose: IoPurpose<P::ReadData>) {
        let disk = match &op {
            IoOp::Write { disk, dbn, sectors } => {
                for (n, sector) in sectors.iter().enumerate() {
                    let write = sectors::last_write_of(sector);
                    self.written.learn(*disk, dbn.0 + n as u64, write);
                }
                self.note_rebuild_write(*disk, dbn.0, sectors.len() as u64);
                Some((*disk, DiskIoKind::Write, sectors.len() as u64))
            }
            IoOp::Read { disk, count, .. } => {
                let kind = match purpose {
                    IoPurpose::CpRead { .. } => DiskIoKind::CpRead,
                    _ => DiskIoKind::UserRead,
                };
                Some((*disk, kind, u64::from(*count)))
            }
            IoOp::NvlogAppend { .. } | IoOp::NvlogReset { .. } | IoOp::AssignSpare { .. } => None,
            IoOp::FlashRead { .. } | IoOp::FlashWrite { .. } => {
                unreachable!("the Flash Cache is the node's")
            }
        };
        if let Some((id, kind, blocks)) = disk {
            self.counters.disks[id.0 as usize].count_issued(kind, blocks);
        }
        let disk = disk.map(|(id, kind, _)| (id, kind));
        self.outbox.issue(op, (purpose, disk, self.now));
    }

    fn reply(&mut self, id: RequestId, result: Result<ReplyData<P::ReadData>, HostError>) {
        self.outbox.reply(id, result);
    }

    fn dispatch(&mut self, id: RequestId, request: HostRequest) {
        if let HostRequest::Change(change) = request {
            return self.modify(id, LoggedOp::Change(change));
        }
        if let Some(volume) = request.volume()
            && let Err(refused) = self.namespace.serving_volume(volume)
        {
            return self.reply(id, Err(refused));
        }
        if let HostRequest::Read {
            lun,
            offset,
            length,
        } = request
        {
            self.prefetch_lookups(lun, offset, length);
        }
        match self.fault_in(id, self.request_needs(&request)) {
            indirect::Fault::Ready => {}
            indirect::Fault::Waiting => return self.indirect.park(id, request),
            indirect::Fault::Unreadable => return self.reply(id, Err(HostError::Io)),
        }
        match request {
            HostRequest::Read {
                lun,
                offset,
                length,
            } => {
                self.prefetch_pointers(lun, offset, length);
                self.read(id, lun, offset, length)
            }
            HostRequest::ReadSnapshot {
                lun,
                snapshot,
                offset,
                length,
            } => self.read_snapshot(id, lun, &snapshot, offset, length),
            HostRequest::Flush => self.flush(id),
            HostRequest::ReallocateMeasure { lun } => {
                let result = self.measure(lun).map(ReplyData::Measure);
                self.reply(id, result);
            }
            HostRequest::ReallocateStart { lun } => {
                let result = self.start_realloc(lun).map(|()| ReplyData::Done);
                self.reply(id, result);
            }
            HostRequest::Change(_) => unreachable!("changes are modified above"),
        }
    }

    fn generation(&self) -> CpCount {
        CpCount(self.committed.0 + 1 + u64::from(self.cp.is_some()))
    }

    /// Validates, logs and applies a modifying operation; the reply goes out
    /// when the log append is durable.
    fn modify(&mut self, id: RequestId, op: LoggedOp) {
        match self.fault_in(id, self.op_needs(&op)) {
            indirect::Fault::Ready => {}
            indirect::Fault::Waiting => return self.stalled.push_back((id, op)),
            indirect::Fault::Unreadable => return self.reply(id, Err(HostError::Io)),
        }
        if let Err(error) = self.validate(&op) {
            return self.reply(id, Err(error));
        }
        let fills = match self.admit_fills(&op) {
            Ok(fills) => fills,
            Err(error) => return self.reply(id, Err(error)),
        };
        // Changes wait, in order, behind earlier waiting ones, while a CP is
        // capturing (briefly), and while a CP runs with twice the high water
        // already dirty (the dirty-buffer suspend: new copies must not outrun
        // the space set aside for them).
        let capturing = self.cp.as_ref().is_some_and(Cp::is_capturing);
        let over_dirty = self.cp.is_some() && self.dirty.len() >= 2 * self.options.dirty_high_water;
        let waits = !self.stalled.is_empty() || capturing || self.snapshot_pending();
        if waits || over_dirty {
            if over_dirty {
                self.counters.back_to_back_waits += 1;
            }
            return self.stalled.push_back((id, op));
        }
        let (half, record) = match self.log.append(self.generation(), self.id, op) {
            Ok(logged) => logged,
            Err(op) if self.cp.is_some() => {
                self.counters.back_to_back_waits += 1;
                self.next_cp_reason = Some(CpReason::BackToBack);
                return self.stalled.push_back((id, op));
            }
            Err(op) => {
                self.start_cp(CpReason::NvlogFull);
                return self.modify(id, op);
            }
        };
        let result = Ok(self.apply(record.generation, &record.op));
        if let LoggedOp::Change(Change::Write { lun, .. } | Change::Trim { lun, .. }) = &record.op {
            self.spend_thin_room(lun.volume, fills);
        }
        // A snapshot is answered when the CP that takes it commits.
        let snapshot = match (&record.op, &result) {
            (
                LoggedOp::Change(
                    Change::CreateSnapshot { volume, .. }
                    | Change::ScheduledSnapshot { volume, .. },
                ),
                Ok(_),
            ) => Some(*volume),
            _ => None,
        };
        let request = match snapshot {
            Some(volume) => {
                self.wait_for_snapshot(volume, id);
                None
            }
            None => Some((id, result)),
        };
        self.issue(
            IoOp::NvlogAppend { half, record },
            IoPurpose::Append { request },
        );
        if snapshot.is_some() {
            match self.cp {
                None => self.start_cp(CpReason::Snapshot),
                Some(_) => self.next_cp_reason = Some(CpReason::Snapshot),
            }
        } else if self.cp.is_none() && self.dirty.len() >= self.options.dirty_high_water {
            self.start_cp(CpReason::HighWater);
        }
    }

    /// Checks `op` against the namespace, with what it needs of the
    /// aggregate.
    fn validate(&self, op: &LoggedOp) -> Result<(), HostError> {
        self.namespace
            .validate(op, self.aggregate_room(), |volume| self.unwritten(volume))
    }

    /// What the namespace may promise volumes: the pvbns less the superblock
    /// pair, the aggregate's own metadata (its map, twice for a CP's new copy,
    /// and the volume table) and its share of CP room.
    fn aggregate_room(&self) -> AggregateRoom {
        let high_water = self.options.dirty_high_water;
        let own = 2 * self.aggregate.activemap.blocks() + 64 + 2 * high_water as u64;
        let outside = self.layout.reserved_blocks() + own;
        AggregateRoom {
            promisable_blocks: self.layout.hdd_blocks().saturating_sub(outside),
            dirty_high_water: high_water,
        }
    }

    /// Applies an operation [`validate`](Self::validate) has passed to the
    /// in-memory state (after logging it, or when replaying the log).
    /// Returns the reply it earns.
    fn apply(&mut self, generation: CpCount, op: &LoggedOp) -> ReplyData<P::ReadData> {
        if !matches!(
            op,
            LoggedOp::Change(Change::Write { .. } | Change::Trim { .. })
        ) {
            // Only thin fills make used space grow between other changes.
            self.thin_room.clear();
        }
        match op {
            LoggedOp::Change(Change::Write { lun, offset, data }) => {
                self.apply_write(generation, *lun, *offset, Some(data), data.len() as u64);
                ReplyData::Done
            }
            LoggedOp::Change(Change::Trim {
                lun,
                offset,
                length,
            }) => {
                self.apply_write(generation, *lun, *offset, None, *length);
                ReplyData::Done
            }
            LoggedOp::Change(Change::CreateVolume { name, size_bytes }) => {
                let high_water = self.options.dirty_high_water;
                let id = self.namespace.create_volume(name, *size_bytes, high_water);
                self.volume_record_dirty(id);
                ReplyData::Volume(id)
            }
            LoggedOp::Change(Change::CreateLun {
                volume,
                name,
                size_bytes,
                attributes,
            }) => {
                ReplyData::Lun(
                    self.namespace
                        .create_lun(*volume, name, *size_bytes, *attributes),
                )
            }
            LoggedOp::Change(Change::ResizeLun { lun, size_bytes }) => {
                self.resize_lun(*lun, *size_bytes);
                ReplyData::Done
            }
            LoggedOp::Change(Change::DestroyLun { lun }) => {
                self.replace_lun(*lun, None);
                ReplyData::Done
            }
            LoggedOp::Change(Change::CreateSnapshot { volume, name }) => {
                self.request_snapshot(generation, *volume, name);
                ReplyData::Done
            }
            LoggedOp::Change(Change::DeleteSnapshot { volume, name }) => {
                self.delete_snapshot(*volume, name);
                ReplyData::Done
            }
            LoggedOp::Change(Change::ScheduledSnapshot { volume, kind, keep }) => {
                self.take_scheduled_snapshot(generation, *volume, *kind, *keep);
                ReplyData::Done
            }
            LoggedOp::Change(Change::SetSnapSchedule { volume, schedule }) => {
                self.namespace
                    .volume_mut(*volume)
                    .expect("validated")
                    .snap_schedule = *schedule;
                self.volume_record_dirty(*volume);
                ReplyData::Done
            }
            LoggedOp::Change(Change::RestoreSnapshot { volume, name, lun }) => {
                self.restore_snapshot(*volume, name, *lun);
                ReplyData::Done
            }
            LoggedOp::Change(Change::SetSnapReserve { volume, percent }) => {
                self.namespace
                    .volume_mut(*volume)
                    .expect("validated")
                    .snap_reserve_percent = *percent;
                self.volume_record_dirty(*volume);
                ReplyData::Done
            }
            LoggedOp::Change(Change::SetVolumeOnline { volume, online }) => {
                self.namespace.set_online(*volume, *online);
                self.volume_record_dirty(*volume);
                ReplyData::Done
            }
            LoggedOp::Change(Change::DestroyVolume { volume }) => {
                self.namespace.destroy_volume(*volume);
                ReplyData::Done
            }
            LoggedOp::Change(Change::ResizeVolume { volume, size_bytes }) => {
                let high_water = self.options.dirty_high_water;
                self.namespace
                    .resize_volume(*volume, *size_bytes, high_water);
                self.volume_record_dirty(*volume);
                ReplyData::Done
            }
            LoggedOp::Change(Change::SetCachePolicy { volume, policy }) => {
                self.namespace
                    .volume_mut(*volume)
                    .expect("validated")
                    .cache_policy = *policy;
                self.volume_record_dirty(*volume);
                ReplyData::Done
            }
            LoggedOp::Change(Change::SetReadRealloc { volume, enabled }) => {
                self.namespace
                    .volume_mut(*volume)
                    .expect("validated")
                    .read_realloc = *enabled;
                self.volume_record_dirty(*volume);
                ReplyData::Done
            }
            // Handled by the mount's resync before replay.
            LoggedOp::DirtyStripes { .. } => ReplyData::Done,
        }
    }

    /// Marks the volume-table block holding `volume`'s record for the next CP.
    fn volume_record_dirty(&mut self, volume: VolumeId) {
        let block = u64::from(volume.0) / VOLUMES_PER_BLOCK as u64;
        self.aggregate.volume_table.dirty.insert(block);
    }

    /// Sets a LUN's size, discarding cached and stored blocks past the new end.
    fn resize_lun(&mut self, lun: LunId, size_bytes: u64) {
        let old_size = self.namespace[lun.volume].luns[&lun.file].size_bytes;
        let first_gone = size_bytes.div_ceil(BLOCK_SIZE as u64);
        let last = old_size.div_ceil(BLOCK_SIZE as u64);
        for key in self.cache.keys_of(lun, Fbn(first_gone)) {
            let entry = self.cache.remove(&key).expect("listed");
            self.dirty.remove(&key);
            // Reads waiting for a discarded block get zeros, as the range now reads.
            let waiters = match entry.state {
                BlockState::Filling(filling) => filling.waiters,
                BlockState::Present(_) => Default::default(),
            };
            for waiter in waiters {
                if let Some(read) = self.reads.get_mut(&waiter) {
                    read.missing -= 1;
                }
                self.finish_read(waiter);
            }
        }
        let release_after = self.release_point();
        let pointers: Vec<(Fbn, BlockPtr)> = {
            let tree = &self.namespace[lun.volume].luns[&lun.file].tree;
            (first_gone..last)
                .map(Fbn)
                .map(|fbn| (fbn, tree.get(fbn)))
                .filter(|(_, ptr)| !ptr.is_null())
                .collect()
        };
        for (fbn, _) in pointers {
            let old = self.namespace.lun_tree_mut(lun).set(fbn, BlockPtr::NULL);
            self.free_block(FileRef::Lun(lun), old, release_after);
        }
        self.namespace.resize_lun(lun, size_bytes);
    }

    /// The CP after which a block freed now is no longer in any on-disk image:
    /// the next CP, or the one after it if a CP is already writing.
    fn release_point(&self) -> CpCount {
        CpCount(self.committed.0 + 1 + u64::from(self.cp.is_some()))
    }

    /// Applies a write (or, with `data` None, a trim) block by block.
    fn apply_write(
        &mut self,
        generation: CpCount,
        lun: LunId,
        offset: u64,
        data: Option<&Vec<u8>>,
        length: u64,
    ) {
        let block = BLOCK_SIZE as u64;
        let write_cached = data.is_some() && self.write_cache_wanted(lun, offset, length);
        let mut done = 0u64;
        while done < length {
            let position = offset + done;
            let fbn = Fbn(position / block);
            let at = (position % block) as usize;
            let len = (block - at as u64).min(length - done) as usize;
            let op = QueuedOp {
                generation,
                at,
                bytes: data.map(|d| Cow::Borrowed(&d[done as usize..done as usize + len])),
                len,
            };
            self.apply_block(lun, fbn, op);
            if self.layout.is_hybrid()
                && let Some(entry) = self.cache.get_mut(&(lun, fbn))
            {
                entry.write_cached = write_cached;
            }
            done += len as u64;
        }
    }

    fn apply_block(&mut self, lun: LunId, fbn: Fbn, op: QueuedOp<'_>) {
        let key = (lun, fbn);
        let whole = op.len == BLOCK_SIZE;
        if whole && op.bytes.is_none() {
            if let Some(entry) = self.cache.get(&key) {
                if entry.content().is_some() {
                    self.cache.remove(&key);
                    self.dirty.remove(&key);
                }
            }
            if !self.cache.contains_key(&key) {
                let release_after = self.release_point();
                let old = self.namespace.lun_tree_mut(lun).set(fbn, BlockPtr::NULL);
                self.free_block(FileRef::Lun(lun), old, release_after);
                return;
            }
        }
        self.use_clock += 1;
        let stamp = self.use_clock;
        if self.cache.touch(key, stamp).is_none() {
            let ptr = self.namespace[lun.volume].luns[&lun.file].tree.get(fbn);
            match whole || ptr.is_null() {
                true => self
                    .cache
                    .insert(key, CacheEntry::present(P::zero(), stamp)),
                false => {
                    if op.len > 0 {
                        self.counters.partial_write_reads += 1;
                    }
                    let fill = self.fill(lun, fbn, ptr);
                    self.cache.insert(
                        key,
                        CacheEntry::filling(fill, Vec::new(), Vec::new(), stamp),
                    );
                }
            }
        }
        let entry = self.cache.get_mut(&key).expect("present");
        match &mut entry.state {
            BlockState::Present(content) => {
                op.apply::<P>(content);
                entry.dirty = true;
                entry.written = true;
                self.dirty.insert(key, ());
            }
            BlockState::Filling(filling) => filling.queue.push(op.into_owned()),
        }
        self.evict();
    }

    /// Starts reading a LUN block into the cache; returns the read's token.
    fn fill(&mut self, lun: LunId, fbn: Fbn, ptr: BlockPtr) -> u64 {
        let (read, fill) = self.fill_read(lun, fbn, ptr);
        self.read_blocks(vec![read]);
        fill
    }

    /// A read that fills a cache entry, and the token the entry must carry.
    fn fill_read(&mut self, lun: LunId, fbn: Fbn, ptr: BlockPtr) -> (BlockRead, u64) {
        self.next_fill += 1;
        let fill = self.next_fill;
        let purpose = ReadPurpose::Fill(lun, fbn, fill);
        (
            self.block_read(FileRef::Lun(lun), 0, fbn.0, ptr, purpose),
            fill,
        )
    }

    /// A block of a LUN has arrived (or could not be recovered). Queued
    /// changes are applied in order; if the running CP waits for this block, it
    /// takes the content as of its own generation.
    fn filled(&mut self, lun: LunId, fbn: Fbn, fill: u64, content: Option<P::Content>) {
        let key = (lun, fbn);
        let Some(entry) = self.cache.filling_mut(&key) else {
            return; // the entry is gone
        };
        let filling = entry.in_flight_mut().expect("being read in");
        if filling.fill != fill {
            return; // the entry was refilled for a newer LUN
        }
        let waiters = core::mem::take(&mut filling.waiters);
        let queue = core::mem::take(&mut filling.queue);
        let Some(mut content) = content else {
            self.counters.unrecoverable_blocks += 1;
            self.cache.remove(&key);
            for waiter in waiters {
                if let Some(read) = self.reads.get_mut(&waiter) {
                    read.failed = true;
                    read.missing -= 1;
                }
                self.finish_read(waiter);
            }
            if self.cp.as_ref().is_some_and(|cp| cp.awaits(key)) {
                self.cp_capture_lost(key);
            }
            return;
        };
        let awaited = self
            .cp
            .as_ref()
            .filter(|cp| cp.awaits(key))
            .map(|cp| cp.number);
        let (now, later): (Vec<QueuedOp<'static>>, Vec<_>) = match awaited {
            Some(cp) => queue.into_iter().partition(|op| op.generation <= cp),
            None => (Vec::new(), queue),
        };
        now.iter().for_each(|op| op.apply::<P>(&mut content));
        let snapshot = awaited.map(|_| content.clone());
        later.iter().for_each(|op| op.apply::<P>(&mut content));
        if snapshot.is_some() {
            entry.pinned = true;
        }
        if !later.is_empty() {
            entry.dirty = true;
            entry.written = true;
            self.dirty.insert(key, ());
        }
        for waiter in waiters {
            if let Some(read) = self.reads.get_mut(&waiter) {
                P::put_block(&mut read.data, read.offset, fbn, &content);
                read.missing -= 1;
            }
            self.finish_read(waiter);
        }
        self.cache.fill_in(&key, content);
        if let Some(snapshot) = snapshot {
            self.cp_captured(key, snapshot);
        }
        self.evict();
    }

    /// Hints at what a read of `length` bytes at `offset` looks up first: the
    /// buffer cache's buckets and the level-1 nodes of its first and last
    /// blocks.
    fn prefetch_lookups(&self, lun: LunId, offset: u64, length: u64) {
        if let Ok((_, l)) = self.namespace.lun(lun) {
            for fbn in ends_of(offset, length) {
                self.cache.prefetch(&(lun, fbn));
                l.tree.prefetch_node(fbn);
            }
        }
    }

    /// Hints at the pointers to a read's first and last blocks, once their
    /// level-1 nodes are resident.
    fn prefetch_pointers(&self, lun: LunId, offset: u64, length: u64) {
        if let Ok((_, l)) = self.namespace.lun(lun) {
            for fbn in ends_of(offset, length) {
                l.tree.prefetch_pointer(fbn);
            }
        }
    }

    fn read(&mut self, id: RequestId, lun: LunId, offset: u64, length: u64) {
        let checked = self
            .namespace
            .lun(lun)
            .and_then(|(_, l)| check_read_range(offset, length, l.size_bytes));
        if let Err(error) = checked {
            return self.reply(id, Err(error));
        }
        self.reads.insert(
            id,
            PendingRead {
                lun,
                offset,
                length,
                data: P::read_data(offset, length as usize),
                missing: 0,
                failed: false,
                snapshot: false,
            },
        );
        let blocks = blocks_covered(offset, length);
        let mut disk_reads = Vec::with_capacity((blocks.end - blocks.start) as usize);
        for fbn in blocks.map(Fbn) {
            let key = (lun, fbn);
            self.use_clock += 1;
            let stamp = self.use_clock;
            let read = self.reads.get_mut(&id).expect("inserted");
            if let Some(entry) = self.cache.touch(key, stamp) {
                match &mut entry.state {
                    BlockState::Present(content) => {
                        self.counters.cache_hits += 1;
                        P::put_block(&mut read.data, read.offset, fbn, content);
                    }
                    BlockState::Filling(filling) => {
                        filling.waiters.push(id);
                        read.missing += 1;
                    }
                }
                continue;
            }
            let ptr = self.namespace[lun.volume].luns[&lun.file].tree.get(fbn);
            if ptr.is_null() {
                continue;
            }
            self.counters.cache_misses += 1;
            read.missing += 1;
            let (read, fill) = self.fill_read(lun, fbn, ptr);
            self.cache
                .insert(key, CacheEntry::filling(fill, Vec::new(), [id], stamp));
            disk_reads.push(read);
        }
        self.read_blocks(disk_reads);
        self.finish_read(id);
    }

    fn finish_read(&mut self, id: RequestId) {
        if self.reads.get(&id).is_some_and(|r| r.missing == 0) {
            let read = self.reads.remove(&id).expect("present");
            if !read.failed && !read.snapshot {
                self.read_realloc(read.lun, read.offset, read.length);
            }
            let result = match read.failed {
                true => Err(HostError::Io),
                false => Ok(ReplyData::Data(read.data)),
            };
            self.reply(id, result);
        }
    }

    fn flush(&mut self, id: RequestId) {
        self.flush_waiting.push(id);
        match self.cp {
            None => self.start_cp(CpReason::Flush),
            Some(_) => {
                self.next_cp_reason.get_or_insert(CpReason::Flush);
            }
        }
    }

    /// Evicts clean, unpinned, unwatched blocks once the cache is over its size:
    /// `reuse` volumes' blocks first, then by age, `keep` volumes' last. It
    /// evicts down to 15/16 of the size, so the scan is paid once per batch.
    fn evict(&mut self) {
        self.evict_data(self.resident_indirect());
    }

    /// [`evict`](Self::evict), told how many indirect blocks are resident.
    fn evict_data(&mut self, resident_indirect: usize) {
        let limit = self.options.cache_blocks + self.dirty.len();
        let total = self.cache.len() + resident_indirect;
        let batch = self.options.cache_blocks / 16;
        if !eviction_due(self.data_floor, self.committed, total, limit, batch) {
            return;
        }
        let excess = total - limit + batch;
        let namespace = &self.namespace;
        let victims = self.cache.evict_oldest(excess, |volume| {
            namespace
                .volume(volume)
                .map_or_else(Default::default, |v| v.cache_policy)
        });
        self.data_floor = (self.committed, total - victims.len());
        self.note_data_evicted(&victims);
        self.offer_data(victims);
    }

    /// The active file system lets go of a block. It is freed (reusable once
    /// the image that uses it is superseded) unless a snapshot holds it.
    fn free_block(&mut self, file: FileRef, old: BlockPtr, release_after: CpCount) {
        if old.is_null() {
            return;
        }
        match file.volume() {
            Some(v) => {
                let volume = self.namespace.volume_mut(v).expect("the volume of a file");
                let vvbn = old.vvbn.0;
                volume.activemap.clear(vvbn);
                volume.activemap_file.dirty.insert(Bitmap::block_of(vvbn));
                let held = volume.summary.get(vvbn) && !self.sabotaged(Sabotage::IgnoreSnapshots);
                if !held {
                    self.release_vvbn(v, vvbn, release_after);
                }
            }
            None => self.release_pvbn(old.pvbn, release_after),
        }
    }

    /// Frees a vvbn no image uses any more, and the pvbn it maps to.
    fn release_vvbn(&mut self, volume_id: VolumeId, vvbn: u64, release_after: CpCount) {
        let volume = self.namespace.volume_mut(volume_id).expect("a volume");
        let pvbn = volume.container.set(vvbn, 0);
        volume.pending.hold(vvbn, release_after);
        volume
            .container_file
            .dirty
            .insert(vvbn / container::CONTAINER_ENTRIES_PER_BLOCK);
        self.release_pvbn(Pvbn(pvbn), release_after);
    }

    fn release_pvbn(&mut self, pvbn: Pvbn, release_after: CpCount) {
        let early = self.sabotaged(Sabotage::EarlyFree);
        if self.sabotaged(Sabotage::LeakFreedBlocks) {
            return;
        }
        if self.layout.tier_of(pvbn) == crate::aggregate::Tier::Ssd {
            self.forget_ssd_block(pvbn);
        }
        let aggregate = &mut self.aggregate;
        aggregate.activemap.clear(pvbn.0);
        aggregate
            .activemap_file
            .dirty
            .insert(Bitmap::block_of(pvbn.0));
        if early {
            aggregate.allocator.note_released(&self.layout, pvbn);
        } else {
            aggregate.pending.hold(pvbn.0, release_after);
        }
    }

    /// Retries writes that waited for NVLog space or a CP.
    fn resume_stalled(&mut self) {
        let stalled = core::mem::take(&mut self.stalled);
        for (id, op) in stalled {
            self.modify(id, op);
        }
    }
}

/// Whether the cache, holding `total` blocks against `limit`, should evict
/// now. Pinned blocks can keep it over its limit; `floor` is what it held
/// after the last eviction and the newest CP then, and scanning again is
/// futile until it grows by a `batch` or a CP commits and unpins blocks.
fn eviction_due(
    (floor_cp, floor): (CpCount, usize),
    committed: CpCount,
    total: usize,
    limit: usize,
    batch: usize,
) -> bool {
    total > limit && (floor_cp != committed || total > floor + batch)
}

/// A read's range must lie inside the LUN and be at most 32 MiB.
fn check_read_range(offset: u64, length: u64, size: u64) -> Result<(), HostError> {
    check_in_range(offset, length, size)?;
    match length > 32 << 20 {
        true => Err(HostError::Invalid("reads are at most 32 MiB".into())),
        false => Ok(()),
    }
}

/// How many blocks ahead of its work a loop over many blocks (the CP's, the
/// eviction's) hints at the lines it will need: enough for the misses to
/// overlap, few enough that the lines are still in the cache when used.
const PREFETCH_AHEAD: usize = 8;

/// The smallest share of a node's cache budget an aggregate keeps: room for
/// the blocks one request pins, and an eviction batch of at least one.
pub const MIN_CACHE_SHARE: usize = 16;

/// The first and last blocks of bytes `offset..offset + length` (one block
/// if they are the same, none if the range is empty): where a hint for a
/// read of many blocks starts and ends, the rest being streamed in between.
fn ends_of(offset: u64, length: u64) -> impl Iterator<Item = Fbn> {
    let blocks = blocks_covered(offset, length);
    let last = blocks
        .end
        .checked_sub(1)
        .filter(|&last| last > blocks.start);
    (!blocks.is_empty())
        .then_some(blocks.start)
        .into_iter()
        .chain(last)
        .map(Fbn)
}

mod invariants;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reads_ends_are_its_first_and_last_blocks() {
        let ends = |offset, length| ends_of(offset, length).map(|f| f.0).collect::<Vec<_>>();
        assert_eq!(ends(0, 0), [0; 0], "an empty read has none");
        assert_eq!(ends(0, 4096), [0]);
        assert_eq!(ends(4000, 200), [0, 1], "straddling a block boundary");
        assert_eq!(ends(8192, 65536), [2, 17]);
        assert_eq!(ends(8192 + 512, 512), [2]);
    }
}
