//! The wafer filer as a lab array: the real engine on modelled drives.
//!
//! The engine runs unchanged, as a `Node` of one or more aggregates (each a
//! `Filer`) over one NVLog, on stamps (`wafer_core::Stamps`: one 64-bit
//! digest per block, so a block costs the lab 8 bytes, not 4 KiB, and parity
//! is XORs of words). Its disk I/Os go to one modelled drive per
//! disk slot, its NVLog appends to a modelled NVRAM card, and its completions
//! come back when the models say, all in virtual time. Host I/Os become the
//! engine's own requests: reads as reads, writes as logged writes of zeros.
//!
//! Content is kept so that the engine reads back what it wrote (it verifies
//! every block and computes parity from what it reads), compactly: see
//! `content`. The I/O pattern does not depend on the bytes: the engine is
//! the same code on bytes or stamps.
//!
//! The workload addresses the node's LUNs laid end to end, in the order the
//! scenario lists them, as one disk: a host I/O that crosses from one LUN
//! into the next is split in two, answered when both parts are.
//!
//! Time: the array builds its aggregates, volumes and LUNs, and runs the
//! workload's prepare step (the sequential fill of the test file and the full
//! reallocate), on its own clock before the lab's time zero; lab time is that
//! clock less the preparation's length. The prepare step is simulated I/O by
//! I/O (on the same models), which is exact, at the price of wall time.
//!
//! A run may have every volume follow a `snap sched` (see
//! [`crate::snap_sched`]): the array sets each volume's schedule once it is
//! prepared, moves lab time zero to the scenario's weekday and time if it
//! names one (the engine sees an idle gap), and from then on wakes at the
//! node's next scheduled snapshot and submits those due, as the server
//! does, counting them with the run's other snapshots.
//!
//! A read the engine answers without a disk (every block in the buffer
//! cache, or a hole: a block never written reads as zeros, as from a real
//! LUN, and no disk is asked for it) is answered [`MEMORY_READ_LATENCY`]
//! after it came, as an event of its own: the lab's loop is closed, so an
//! answer at the very instant of the request would let a workload of such
//! reads run forever without time passing.

mod compact;
mod content;

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use thiserror::Error;
use wafer_core::aggregate::{Layout, Slot};
use wafer_core::filer::{
    Change, Counters, DiskCounters, FlashCacheOptions, HostError, HostRequest, IoId, IoOp,
    IoResult, Options, Reply, ReplyData, RequestId, Sector,
};
use wafer_core::fixed_map::FixedMap;
use wafer_core::node::{AggrState, Node, NodeIo};
use wafer_core::nvlog::{CachePolicy, LoggedOp, LunId};
use wafer_core::payload::StampRead;
use wafer_core::units::{AggrId, DiskId, Duration, Instant, Pvbn, VolumeId};
use wafer_core::{BLOCK_SIZE, Stamps};
use wafer_devices::params::{Catalog, Drive};
use wafer_devices::{Completion, Device, DeviceRequest, NextEvents, Op, sooner};
use wafer_raid::{Dbn, RaidGroupGeometry};

use crate::array::{
    Array, ArrayKind, DiskStats, EngineStats, FlashStats, HostCompletion, HostIo, HostOp,
    PreparePlan, SnapshotStats, VolumeUse,
};
use crate::controller::Controller;
use crate::scenario::{AggregateSpec, WaferSpec};
use crate::snap_sched::{HeldSnapshot, SnapSched};
use content::{Content, ContentDisk};
pub use content::{MemorySpill, PAGE_BYTES, PagePiece, Spill, page_pieces};

/// The NVRAM card every wafer array logs to.
pub const NVRAM_DRIVE: &str = "nvram-512m";
/// Bytes per host write while filling the test file.
const FILL_WRITE_BYTES: u64 = 1 << 20;
/// Fill writes kept in flight.
const FILL_DEPTH: usize = 16;
/// \[INF\] The time a read answered from the controller's memory takes (a
/// cache hit, or a hole): a DMA from memory and its completion, the few
/// microseconds the NVRAM card's write takes (`drives.toml`); like the
/// logged writes, it leaves out the host link.
pub const MEMORY_READ_LATENCY: Duration = Duration(10_000);

/// Why a wafer array cannot be built.
#[derive(Debug, Error)]
pub enum WaferArrayError {
    /// The spec names a drive the catalog lacks, or not a disk.
    #[error("array {array}: no disk drive `{drive}` in the catalog")]
    Drive {
        /// The array.
        array: String,
        /// The drive named.
        drive: String,
    },
    /// The RAID groups are not valid.
    #[error("array {array}: {reason}")]
    Layout {
        /// The array.
        array: String,
        /// Why.
        reason: String,
    },
    /// The engine refused an aggregate, a volume or a LUN.
    #[error("array {array}: creating {what} failed: {reason}")]
    Create {
        /// The array.
        array: String,
        /// The aggregate, volume or LUN.
        what: String,
        /// The engine's answer.
        reason: String,
    },
}

/// What a device request is doing for the engine.
#[derive(Debug)]
enum Pending {
    Read {
        io: IoId,
        disk: usize,
        dbn: u64,
        count: u32,
    },
    Write {
        io: IoId,
        disk: usize,
        dbn: u64,
        sectors: Vec<Sector<Stamps>>,
    },
    Nvram {
        io: IoId,
    },
    /// A Flash Cache read: the copy of the block at `disk`/`dbn` (the lab
    /// keeps no content for the cache: the node's copies are, by its own
    /// check in the simulator, what their homes hold).
    FlashRead {
        io: IoId,
        disk: usize,
        dbn: u64,
    },
    FlashWrite {
        io: IoId,
    },
}

/// Which device an I/O goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Target {
    Disk(usize),
    Nvram,
    Flash,
}

/// One disk slot: its model, its content and its counters.
struct Disk {
    device: Box<dyn Device>,
    name: String,
    outstanding: usize,
    busy_since: Instant,
    busy_ns: u64,
    seek_ns: u64,
    seek_cylinders: u64,
}

/// A LUN as the workload sees it: a stretch of the array's address space.
#[derive(Clone, Copy, Debug)]
struct HostLun {
    lun: LunId,
    /// Where it starts in the array's address space.
    start: u64,
    bytes: u64,
}

impl HostLun {
    fn end(&self) -> u64 {
        self.start + self.bytes
    }
}

/// A host I/O split over LUNs: its parts not yet answered, when the
/// latest answered part finished (array clock), and why a part was
/// refused, if one was.
#[derive(Clone, Debug)]
struct Split {
    left: u32,
    finished: Instant,
    refused: Option<String>,
}

/// The wafer filer on modelled drives.
pub struct WaferArray {
    name: String,
    node: Node<Stamps>,
    /// When the node's timer falls, as of the last [`drain`](Self::drain):
    /// the lab asks when its next event is twice an instant or more, and
    /// the node's state changes only in the calls the lab makes, each of
    /// which it follows with a drain.
    node_timer: Option<Instant>,
    /// Every aggregate's disks, aggregate after aggregate.
    disks: Vec<Disk>,
    /// Where each aggregate's disks start in `disks`, by aggregate id.
    disk_base: Vec<usize>,
    /// The disk models' next events, kept so an instant costs a look at the
    /// disks that have one due rather than a call into every model.
    next_events: NextEvents,
    content: Content,
    nvram: Box<dyn Device>,
    /// The Flash Cache's SSD, if the node has one.
    flash: Option<Disk>,
    luns: Vec<HostLun>,
    lun_bytes: u64,
    /// Host I/Os split over LUNs, by the lab's id.
    split: BTreeMap<u64, Split>,
    pending: FixedMap<u64, Pending>,
    next_request: u64,
    controller: Option<Controller>,
    /// Host I/Os in flight: the lab's id and when (array clock) it came.
    host: FixedMap<RequestId, (u64, Instant)>,
    answered: Vec<HostCompletion>,
    /// Host reads answered from memory, in the order they fall due, each
    /// with when (array clock) it does.
    from_memory: VecDeque<(Instant, HostCompletion)>,
    /// Replies to the array's own requests (creation, preparation).
    replies: FixedMap<RequestId, Result<ReplyData<StampRead>, HostError>>,
    /// The array's clock (lab time plus `epoch`).
    now: Instant,
    /// Where the lab's time zero falls on the array's clock.
    epoch: Duration,
    /// The buffers of logged writes, given back for the next writes.
    zero_buffers: ZeroBuffers,
    /// The device completions of an instant, kept between instants so that
    /// each does not allocate its own list.
    completions: Vec<Completion>,
    /// The node's volumes, in the scenario's order: what a snapshot covers.
    volumes: Vec<VolumeId>,
    /// Snapshot creations asked for and not yet answered.
    snapshots_pending: BTreeSet<RequestId>,
    /// What came of the snapshots asked for.
    snapshot_stats: SnapshotStats,
    /// With a `snap sched`: the array clock up to which the node has been
    /// asked for the snapshots due, and when the next one falls.
    snap_sched: Option<ScheduleWatch>,
}

/// How far a wafer array has followed its volumes' schedules.
#[derive(Clone, Copy, Debug)]
struct ScheduleWatch {
    /// The snapshots due up to here have been submitted.
    seen: Instant,
    /// When the next one falls (`Node::next_snapshot_due`), if ever.
    next: Option<Instant>,
}

/// Zeroed write buffers that logged writes have given back, by length, for
/// the next writes of that length: every lab write is zeros, and zeroing a
/// fresh buffer per write cost a tenth of the fill and a few hundredths of a
/// random-write run.
#[derive(Debug, Default)]
struct ZeroBuffers(BTreeMap<usize, Vec<Vec<u8>>>);

impl ZeroBuffers {
    /// Bytes kept per length, at most: sixteen fill writes, or hundreds of
    /// small writes.
    const BYTES_PER_LENGTH: usize = 16 << 20;

    /// A zeroed buffer of `len` bytes.
    fn take(&mut self, len: usize) -> Vec<u8> {
        self.0
            .get_mut(&len)
            .and_then(Vec::pop)
            .unwrap_or_else(|| vec![0; len])
    }

    /// Keeps `data`, which must be zeros, unless its length has enough kept
    /// (an empty buffer costs nothing to make, so none is kept).
    fn give_back(&mut self, data: Vec<u8>) {
        debug_assert!(data.iter().all(|&byte| byte == 0), "lab writes are zeros");
        if data.is_empty() {
            return;
        }
        let kept = self.0.entry(data.len()).or_default();
        if (kept.len() + 1) * data.len() <= Self::BYTES_PER_LENGTH {
            kept.push(data);
        }
    }
}

impl WaferArray {
    /// Builds the aggregate, volume and LUN `spec` describes, on drives from
    /// `catalog`, each disk used whole; the disks' trailers go to `spill`.
    pub fn new(
        spec: &WaferSpec,
        catalog: &Catalog,
        spill: Box<dyn Spill>,
    ) -> Result<WaferArray, WaferArrayError> {
        WaferArray::build(spec, catalog, u64::MAX, spill)
    }

    /// As [`WaferArray::new`], using only the first `blocks_per_disk` blocks
    /// of each disk (the outer tracks, as a short-stroked aggregate would),
    /// and keeping every trailer in memory: small aggregates for tests.
    pub fn short_stroked(
        spec: &WaferSpec,
        catalog: &Catalog,
        blocks_per_disk: u64,
    ) -> Result<WaferArray, WaferArrayError> {
        WaferArray::build(
            spec,
            catalog,
            blocks_per_disk,
            Box::new(MemorySpill::default()),
        )
    }

    fn build(
        spec: &WaferSpec,
        catalog: &Catalog,
        blocks_per_disk: u64,
        spill: Box<dyn Spill>,
    ) -> Result<WaferArray, WaferArrayError> {
        let nvram = catalog
            .get(NVRAM_DRIVE)
            .expect("the built-in catalog has the NVRAM card")
            .device();
        let mut layouts = Vec::with_capacity(spec.aggregates.len());
        let mut disks: Vec<Disk> = Vec::new();
        let mut disk_base = Vec::with_capacity(spec.aggregates.len());
        let mut content_disks: Vec<ContentDisk> = Vec::new();
        for aggregate in &spec.aggregates {
            let drive = match catalog.get(&aggregate.drive) {
                Some(drive @ (Drive::Hdd(_) | Drive::Ssd(_))) => drive,
                _ => {
                    return Err(WaferArrayError::Drive {
                        array: spec.name.clone(),
                        drive: aggregate.drive.clone(),
                    });
                }
            };
            let blocks = drive.device().capacity_blocks().min(blocks_per_disk);
            let layout = layout(&spec.name, aggregate, blocks)?;
            // One aggregate's disks are named as they always were; several
            // aggregates' carry their aggregate's name.
            let prefix = match spec.aggregates.len() {
                1 => String::new(),
                _ => format!("{}/", aggregate.name),
            };
            disk_base.push(disks.len());
            for id in 0..layout.disk_count() {
                disks.push(Disk::new(drive, disk_name(&prefix, &layout, DiskId(id))));
                content_disks.push(ContentDisk {
                    blocks,
                    first_pvbn: first_pvbn(&layout, DiskId(id)),
                });
            }
            layouts.push(layout);
        }
        let content = Content::new(&content_disks, spill);
        let defaults = Options::default();
        let options = Options {
            cache_blocks: spec.cache_mib.map_or(defaults.cache_blocks, |mib| {
                mib as usize * (1 << 20) / wafer_core::BLOCK_SIZE
            }),
            flash_cache: spec.flash_cache.as_ref().map(|flash| FlashCacheOptions {
                blocks: u64::from(flash.mib) * (1 << 20) / BLOCK_SIZE as u64,
                normal_data_blocks: true,
                lopri_blocks: flash.lopri_blocks,
            }),
            ..defaults
        };
        let flash = match &spec.flash_cache {
            None => None,
            Some(flash) => match catalog.get(&flash.drive) {
                Some(drive @ Drive::Ssd(_)) => Some(Disk::new(drive, "flash".to_string())),
                _ => {
                    return Err(WaferArrayError::Drive {
                        array: spec.name.clone(),
                        drive: flash.drive.clone(),
                    });
                }
            },
        };
        let mut array = WaferArray {
            name: spec.name.clone(),
            node: Node::new(options, Instant(0)),
            node_timer: None,
            next_events: NextEvents::new(disks.len()),
            disks,
            disk_base,
            content,
            nvram,
            flash,
            luns: Vec::new(),
            lun_bytes: 0,
            split: BTreeMap::new(),
            pending: FixedMap::default(),
            next_request: 0,
            controller: spec
                .controller
                .as_ref()
                .map(|c| Controller::new(c.per_command)),
            host: FixedMap::default(),
            answered: Vec::new(),
            from_memory: VecDeque::new(),
            replies: FixedMap::default(),
            now: Instant(0),
            epoch: Duration(0),
            zero_buffers: ZeroBuffers::default(),
            completions: Vec::new(),
            volumes: Vec::new(),
            snapshots_pending: BTreeSet::new(),
            snapshot_stats: SnapshotStats::default(),
            snap_sched: None,
        };
        for (index, (aggregate, layout)) in spec.aggregates.iter().zip(layouts).enumerate() {
            let id = (array.node)
                .create_aggregate(array.now, &aggregate.name, layout)
                .map_err(|error| WaferArrayError::Create {
                    array: spec.name.clone(),
                    what: format!("aggregate {}", aggregate.name),
                    reason: error.to_string(),
                })?;
            assert_eq!(
                id.0 as usize, index,
                "a new node numbers its aggregates in order"
            );
        }
        array.drain();
        array.run_while(|a| {
            (a.node.aggregates().iter()).any(|status| status.state != AggrState::Online)
        });
        array.create(spec)?;
        Ok(array)
    }

    /// Every volume's name and buffer-cache policy, as the engine holds
    /// them.
    pub fn cache_policies(&self) -> Vec<(String, CachePolicy)> {
        let policy = |volume: VolumeId, aggregate: AggrId| {
            let local = wafer_core::node::split_volume(volume).1;
            let filer = self.node.aggregate(aggregate)?;
            filer.volume_settings(local).map(|s| s.cache_policy)
        };
        (self.node.volumes().into_iter())
            .filter_map(|(volume, name, aggregate)| Some((name, policy(volume, aggregate)?)))
            .collect()
    }

    /// Creates the volumes and the LUNs.
    fn create(&mut self, spec: &WaferSpec) -> Result<(), WaferArrayError> {
        let failed = |what: String, reason: String| WaferArrayError::Create {
            array: spec.name.clone(),
            what,
            reason,
        };
        let mut volumes = Vec::with_capacity(spec.volumes.len());
        for volume in &spec.volumes {
            let request = HostRequest::Change(Change::CreateVolume {
                name: volume.name.clone(),
                size_bytes: volume.size_bytes,
            });
            let id = match self.call(Some(AggrId(volume.aggregate as u32)), request) {
                Ok(ReplyData::Volume(id)) => id,
                other => {
                    return Err(failed(
                        format!("volume {}", volume.name),
                        format!("{other:?}"),
                    ));
                }
            };
            if volume.cache_policy != CachePolicy::Default {
                let policy = volume.cache_policy;
                let request = HostRequest::Change(Change::SetCachePolicy { volume: id, policy });
                if let Err(error) = self.call(None, request) {
                    return Err(failed(
                        format!("the cache policy of volume {}", volume.name),
                        error,
                    ));
                }
            }
            volumes.push(id);
        }
        for lun in &spec.luns {
            let request = HostRequest::Change(Change::CreateLun {
                volume: volumes[lun.volume],
                name: lun.name.clone(),
                size_bytes: lun.size_bytes,
                attributes: wafer_core::format::LunAttributes::DEFAULT,
            });
            match self.call(None, request) {
                Ok(ReplyData::Lun(id)) => self.luns.push(HostLun {
                    lun: id,
                    start: self.lun_bytes,
                    bytes: lun.size_bytes,
                }),
                other => return Err(failed(format!("LUN {}", lun.name), format!("{other:?}"))),
            }
            self.lun_bytes += lun.size_bytes;
        }
        self.volumes = volumes;
        Ok(())
    }

    /// Submits a request (to `aggregate`, or where the node routes it)
    /// and runs until its reply.
    fn call(
        &mut self,
        aggregate: Option<AggrId>,
        request: HostRequest,
    ) -> Result<ReplyData<StampRead>, String> {
        let id = match aggregate {
            Some(aggregate) => self.node.submit_to(self.now, aggregate, request),
            None => self.node.submit(self.now, request),
        }
        .map_err(|e| e.to_string())?;
        self.drain();
        let mut reply = None;
        while reply.is_none() {
            assert!(self.step(), "the engine stopped before answering");
            reply = self.replies.remove(&id);
        }
        reply.expect("answered").map_err(|e| e.to_string())
    }
}

impl WaferArray {
    /// When the next device completion, command release, engine timer or
    /// answer from memory falls, on the array's clock.
    fn next_internal_event(&self) -> Option<Instant> {
        let disks = sooner(self.next_events.earliest(), self.nvram.next_event());
        let disks = sooner(
            disks,
            self.flash.as_ref().and_then(|f| f.device.next_event()),
        );
        let released = self.controller.as_ref().and_then(Controller::next_release);
        let from_memory = self.from_memory.front().map(|(at, _)| *at);
        let engine = sooner(self.node_timer, from_memory);
        let snapshot = self.snap_sched.and_then(|watch| watch.next);
        sooner(sooner(disks, released), sooner(engine, snapshot))
    }

    /// The Flash Cache's SSD, which a Flash Cache I/O implies.
    fn flash_device(&mut self) -> &mut Disk {
        self.flash
            .as_mut()
            .expect("Flash Cache I/O with a Flash Cache")
    }

    /// Hands disk `index` a request at `at`.
    fn submit_to_disk(&mut self, index: usize, at: Instant, request: DeviceRequest) {
        let disk = &mut self.disks[index];
        disk.submit(at, request);
        self.next_events.set(index, disk.device.next_event());
    }

    /// Runs the next event; false if nothing is pending.
    fn step(&mut self) -> bool {
        match self.next_internal_event() {
            Some(at) => {
                self.run_at(at);
                true
            }
            None => false,
        }
    }

    /// Runs events while `busy` holds.
    fn run_while(&mut self, busy: impl Fn(&WaferArray) -> bool) {
        while busy(self) {
            assert!(self.step(), "the engine went idle while still busy");
        }
    }

    /// Everything due at `at`: device completions (in time order) and the
    /// commands the controller releases, then the engine's timer, then what
    /// the engine asks for in turn.
    fn run_at(&mut self, at: Instant) {
        self.now = self.now.max(at);
        let now = self.now;
        let mut completions = core::mem::take(&mut self.completions);
        // Many instants are the NVRAM's, the controller's or the engine's:
        // no disk need be asked then.
        if self.next_events.earliest().is_some_and(|at| at <= now) {
            for (index, disk) in self.disks.iter_mut().enumerate() {
                if self.next_events.due(index, now) {
                    disk.device.advance(now, &mut completions);
                    self.next_events.set(index, disk.device.next_event());
                    // A read the disk has just started finishes milliseconds
                    // later: its records can be on their way until then.
                    if let Some(read) = disk.device.in_service().filter(|r| r.op == Op::Read) {
                        self.content.prefetch(index, read.block, read.blocks);
                    }
                }
            }
        }
        self.nvram.advance(now, &mut completions);
        if let Some(flash) = self.flash.as_mut() {
            flash.device.advance(now, &mut completions);
        }
        while let Some(held) = self.controller.as_mut().and_then(|c| c.release(now)) {
            self.submit_to_disk(held.disk, held.release_at, held.request);
        }
        completions.sort_by_key(|c| (c.finished_at, c.id));
        for completion in completions.drain(..) {
            self.complete(&completion);
        }
        self.completions = completions;
        // A spurious call is a no-op for a filer, but costs a node a pass
        // over its aggregates and its log: only a due timer is handed on.
        if self.node.poll_timeout().is_some_and(|due| due <= now) {
            self.node.handle_timeout(now);
        }
        if (self.snap_sched)
            .and_then(|watch| watch.next)
            .is_some_and(|due| due <= now)
        {
            self.take_scheduled_snapshots(now);
        }
        self.drain();
        while self.from_memory.front().is_some_and(|(at, _)| *at <= now) {
            let (_, answer) = self.from_memory.pop_front().expect("a front");
            self.answered.push(answer);
        }
    }

    /// A device has finished a request: its result goes to the engine.
    fn complete(&mut self, completion: &Completion) {
        let (io, result) = match self.pending.remove(&completion.id) {
            Some(Pending::Read {
                io,
                disk,
                dbn,
                count,
            }) => {
                self.disks[disk].finished(completion);
                (io, IoResult::Read(self.content.read(disk, dbn, count)))
            }
            Some(Pending::Write {
                io,
                disk,
                dbn,
                sectors,
            }) => {
                self.disks[disk].finished(completion);
                self.content.write(disk, dbn, &sectors);
                (io, IoResult::Done)
            }
            Some(Pending::Nvram { io }) => (io, IoResult::Done),
            Some(Pending::FlashRead { io, disk, dbn }) => {
                self.flash_device().finished(completion);
                (io, IoResult::Read(self.content.read(disk, dbn, 1)))
            }
            Some(Pending::FlashWrite { io }) => {
                self.flash_device().finished(completion);
                (io, IoResult::Done)
            }
            None => unreachable!("a completion for request {} nobody made", completion.id),
        };
        self.node.handle_io_done(self.now, io, result);
    }

    /// Hands the engine's I/Os to the devices and collects its replies;
    /// notes when its timer falls now.
    fn drain(&mut self) {
        while let Some(io) = self.node.poll_io() {
            self.start(io);
        }
        while let Some(reply) = self.node.poll_reply() {
            self.answer(reply);
        }
        self.node_timer = self.node.poll_timeout();
    }

    fn start(&mut self, node_io: NodeIo<Stamps>) {
        let (io, op) = (node_io.io.id, node_io.io.op);
        // A disk I/O names its aggregate's own disk: its place in `disks`
        // is past the earlier aggregates' disks.
        let base = node_io
            .aggregate
            .map_or(0, |aggregate| self.disk_base[aggregate.0 as usize]);
        let id = self.next_request;
        self.next_request += 1;
        let (device_op, block, blocks, pending, target) = match op {
            IoOp::Read { disk, dbn, count } => {
                let disk = base + disk.0 as usize;
                let pending = Pending::Read {
                    io,
                    disk,
                    dbn: dbn.0,
                    count,
                };
                (Op::Read, dbn.0, count, pending, Target::Disk(disk))
            }
            IoOp::Write { disk, dbn, sectors } => {
                let count = sectors.len() as u32;
                let disk = base + disk.0 as usize;
                let pending = Pending::Write {
                    io,
                    disk,
                    dbn: dbn.0,
                    sectors,
                };
                (Op::Write, dbn.0, count, pending, Target::Disk(disk))
            }
            IoOp::NvlogAppend { record, .. } => {
                let blocks = (record.encoded_len() as u64)
                    .div_ceil(BLOCK_SIZE as u64)
                    .max(1);
                self.keep_write_buffer(record.op);
                (
                    Op::Write,
                    0,
                    blocks as u32,
                    Pending::Nvram { io },
                    Target::Nvram,
                )
            }
            IoOp::NvlogReset { .. } => (Op::Write, 0, 1, Pending::Nvram { io }, Target::Nvram),
            IoOp::FlashRead { slot, home } => {
                let pending = Pending::FlashRead {
                    io,
                    disk: self.disk_base[home.aggregate.0 as usize] + home.disk.0 as usize,
                    dbn: home.dbn.0,
                };
                (Op::Read, slot.0, 1, pending, Target::Flash)
            }
            IoOp::FlashWrite { slot, .. } => {
                let pending = Pending::FlashWrite { io };
                (Op::Write, slot.0, 1, pending, Target::Flash)
            }
            // A lab aggregate has no spares.
            IoOp::AssignSpare { .. } => {
                return self.node.handle_io_done(self.now, io, IoResult::DiskFailed);
            }
        };
        let request = DeviceRequest {
            id,
            op: device_op,
            block,
            blocks,
        };
        match (target, self.controller.as_mut()) {
            (Target::Disk(disk), Some(controller)) => controller.take(self.now, disk, request),
            (Target::Disk(disk), None) => self.submit_to_disk(disk, self.now, request),
            (Target::Nvram, _) => self
                .nvram
                .submit(self.now, request)
                .expect("the log fits the NVRAM card"),
            // The Flash Cache is a card in the controller, not a disk
            // behind it.
            (Target::Flash, _) => {
                let now = self.now;
                self.flash_device().submit(now, request);
            }
        }
        self.pending.insert(id, pending);
    }

    /// A reply: a host I/O's, a snapshot's, or one of the array's own
    /// requests'.
    fn answer(&mut self, reply: Reply<StampRead>) {
        if self.snapshots_pending.remove(&reply.id) {
            self.snapshot_answered(reply.result.is_ok());
            return;
        }
        match self.host.remove(&reply.id) {
            Some((id, submitted)) => {
                let refused = reply.result.err().map(|error| error.to_string());
                self.answer_host(id, submitted, refused);
            }
            None => {
                self.replies.insert(reply.id, reply.result);
            }
        }
    }

    /// Host I/O `id`, which came at `submitted`, is answered: now, or, if
    /// the engine answered it as it came (from memory, no device involved),
    /// [`MEMORY_READ_LATENCY`] later.
    ///
    /// A host I/O split over LUNs is answered when its last part is, as
    /// late as its latest part, and refused if any part was.
    fn answer_host(&mut self, id: u64, submitted: Instant, mut refused: Option<String>) {
        let from_memory = submitted == self.now;
        let mut finished = match from_memory {
            true => self.now + MEMORY_READ_LATENCY,
            false => self.now,
        };
        if let Some(split) = self.split.get_mut(&id) {
            split.left -= 1;
            split.finished = split.finished.max(finished);
            split.refused = split.refused.take().or(refused.take());
            if split.left > 0 {
                return;
            }
            finished = split.finished;
            refused = self.split.remove(&id).and_then(|split| split.refused);
        }
        let answer = HostCompletion {
            id,
            submitted_at: self.lab_time(submitted),
            finished_at: self.lab_time(finished),
            refused,
        };
        if finished == self.now {
            self.answered.push(answer);
        } else if self
            .from_memory
            .back()
            .is_none_or(|(at, _)| *at <= finished)
        {
            self.from_memory.push_back((finished, answer));
        } else {
            // Only a split I/O's answer can fall before one already queued.
            let at = self.from_memory.partition_point(|(at, _)| *at <= finished);
            self.from_memory.insert(at, (finished, answer));
        }
    }

    /// Submits the scheduled snapshots due since the last look, and notes
    /// when the next falls.
    fn take_scheduled_snapshots(&mut self, now: Instant) {
        let Some(watch) = self.snap_sched.as_mut() else {
            return;
        };
        let due = self.node.snapshots_due(watch.seen, now);
        *watch = ScheduleWatch {
            seen: now,
            next: self.node.next_snapshot_due(now),
        };
        for request in due {
            self.submit_snapshot(request);
        }
    }

    /// Submits a snapshot request, counting it as asked for, and as
    /// refused if the node will not take it.
    fn submit_snapshot(&mut self, request: HostRequest) {
        self.snapshot_stats.requested += 1;
        match self.node.submit(self.now, request) {
            Ok(id) => {
                self.snapshots_pending.insert(id);
            }
            Err(_) => self.snapshot_answered(false),
        }
    }

    /// A snapshot creation was answered: taken, or refused.
    fn snapshot_answered(&mut self, taken: bool) {
        match taken {
            true => self.snapshot_stats.taken += 1,
            false => self.snapshot_stats.refused += 1,
        }
    }

    /// The LUN holding byte `offset` of the array's address space.
    fn lun_at(&self, offset: u64) -> HostLun {
        match self.luns.as_slice() {
            [only] => *only,
            luns => luns[luns.partition_point(|lun| lun.end() <= offset)],
        }
    }

    /// Disks of the aggregate with id `index`.
    fn disk_count(&self, index: usize) -> usize {
        let end = self.disk_base.get(index + 1).copied();
        end.unwrap_or(self.disks.len()) - self.disk_base[index]
    }

    fn lab_time(&self, at: Instant) -> Instant {
        Instant(at.0 - self.epoch.0)
    }

    /// Submits the part of host I/O `io` at `offset` (of the array's
    /// address space), `length` bytes inside `lun`.
    fn submit_part(&mut self, io: HostIo, lun: HostLun, offset: u64, length: u64) {
        let offset = offset - lun.start;
        let lun = lun.lun;
        let request = match io.op {
            HostOp::Read => HostRequest::Read {
                lun,
                offset,
                length,
            },
            HostOp::Write => HostRequest::Change(Change::Write {
                lun,
                offset,
                data: self.zero_buffers.take(length as usize),
            }),
        };
        let id = (self.node.submit(self.now, request))
            .expect("an online node takes the lab's queue depths, far under max_requests");
        self.host.insert(id, (io.id, self.now));
    }

    /// Keeps the bytes of a logged write for a later write of its length.
    fn keep_write_buffer(&mut self, op: LoggedOp) {
        if let LoggedOp::Change(Change::Write { data, .. }) = op {
            self.zero_buffers.give_back(data);
        }
    }

    /// Writes zeros over `extent` sequentially, a few writes in flight;
    /// `written` hears the bytes acknowledged so far.
    fn fill(&mut self, offset: u64, length: u64, written: &mut dyn FnMut(u64)) {
        let mut next = offset;
        let end = offset + length;
        let mut in_flight: Vec<RequestId> = Vec::new();
        while next < end || !in_flight.is_empty() {
            while next < end && in_flight.len() < FILL_DEPTH {
                let lun = self.lun_at(next);
                let bytes = FILL_WRITE_BYTES.min(end - next).min(lun.end() - next);
                let request = HostRequest::Change(Change::Write {
                    lun: lun.lun,
                    offset: next - lun.start,
                    data: self.zero_buffers.take(bytes as usize),
                });
                let id = (self.node.submit(self.now, request))
                    .expect("an online filer takes the lab's queue depths, far under max_requests");
                in_flight.push(id);
                next += bytes;
                self.drain();
            }
            assert!(self.step(), "the engine stopped during the fill");
            let before = in_flight.len();
            in_flight.retain(|id| match self.replies.remove(id) {
                Some(result) => {
                    result.expect("fill writes stay inside the LUN");
                    false
                }
                None => true,
            });
            if in_flight.len() < before {
                let issued = next - offset;
                written(issued.saturating_sub(in_flight.len() as u64 * FILL_WRITE_BYTES));
            }
        }
    }
}

/// An aggregate's RAID groups: `raid_size` disks each, the last maybe
/// fewer; no spares.
fn layout(
    array: &str,
    spec: &AggregateSpec,
    blocks_per_disk: u64,
) -> Result<Layout, WaferArrayError> {
    let invalid = |reason: String| WaferArrayError::Layout {
        array: array.to_string(),
        reason: format!("aggregate {}: {reason}", spec.name),
    };
    let groups = spec
        .group_sizes()
        .into_iter()
        .map(|size| {
            RaidGroupGeometry::new(spec.raid_type, size as u16, blocks_per_disk)
                .map_err(|e| invalid(e.to_string()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Layout::new(groups, 0).map_err(|e| invalid(e.to_string()))
}

/// The pvbn of disk `id`'s block 0, if it is a data disk.
fn first_pvbn(layout: &Layout, id: DiskId) -> Option<Pvbn> {
    match layout.slot(id) {
        Some(Slot::Member { group, disk }) => layout.pvbn(group, disk, Dbn(0)),
        _ => None,
    }
}

/// `rgG.dP`: the disk at position P of RAID group G, after `prefix` (the
/// aggregate's name and a slash, where the array has several).
fn disk_name(prefix: &str, layout: &Layout, id: DiskId) -> String {
    match layout.slot(id) {
        Some(Slot::Member { group, disk }) => format!("{prefix}rg{group}.d{:02}", disk.0),
        _ => format!("{prefix}spare{}", id.0),
    }
}

impl Array for WaferArray {
    fn name(&self) -> &str {
        &self.name
    }

    fn kind(&self) -> ArrayKind {
        ArrayKind::Wafer
    }

    fn capacity_bytes(&self) -> u64 {
        self.lun_bytes
    }

    fn lun_bytes(&self) -> Vec<u64> {
        self.luns.iter().map(|lun| lun.bytes).collect()
    }

    /// Fills the test file and reallocates, I/O by I/O, then lets the CPs
    /// settle; the lab's time zero is where that ends. Progress counts bytes
    /// filled, then bytes of the fill the reallocation has passed (it rewrites
    /// what was written and skips the holes at once).
    fn prepare(&mut self, plan: &PreparePlan, progress: &mut dyn FnMut(f64)) {
        let fill_bytes: u64 = plan.fill.iter().map(|extent| extent.length).sum();
        let work = match plan.reallocate {
            true => 2 * fill_bytes,
            false => fill_bytes,
        };
        let fraction = |bytes: u64| bytes as f64 / work.max(1) as f64;
        let mut filled = 0;
        for extent in &plan.fill {
            self.fill(extent.offset, extent.length, &mut |bytes| {
                progress(fraction(filled + bytes));
            });
            filled += extent.length;
        }
        self.zero_buffers = ZeroBuffers::default();
        if plan.reallocate {
            // One LUN after another: the bytes of the fill passed are those
            // before the current LUN's start plus what it has done.
            let mut shown = 0;
            for index in 0..self.luns.len() {
                let lun = self.luns[index];
                self.call(None, HostRequest::ReallocateStart { lun: lun.lun })
                    .expect("the LUN exists");
                let aggregate = wafer_core::node::split_volume(lun.lun.volume).0;
                while let Some((_, done, _)) =
                    (self.node.aggregate(aggregate)).and_then(|filer| filer.realloc_status())
                {
                    let reached = lun.start + (done * BLOCK_SIZE as u64).min(lun.bytes);
                    let passed = plan
                        .fill
                        .iter()
                        .map(|extent| reached.clamp(extent.offset, extent.end()) - extent.offset)
                        .sum();
                    if passed != shown {
                        shown = passed;
                        progress(fraction(fill_bytes + passed));
                    }
                    assert!(self.step(), "the engine went idle while reallocating");
                }
            }
        }
        self.call(None, HostRequest::Flush)
            .expect("a flush succeeds");
        self.epoch = Duration(self.now.0);
        progress(1.0);
    }

    fn submit(&mut self, now: Instant, io: HostIo) {
        assert!(
            io.length > 0 && io.end() <= self.lun_bytes,
            "host I/O outside the LUN"
        );
        self.now = self.now.max(Instant(now.0 + self.epoch.0));
        let lun = self.lun_at(io.offset);
        if io.end() <= lun.end() {
            self.submit_part(io, lun, io.offset, io.length);
        } else {
            let mut offset = io.offset;
            let mut left = 0;
            while offset < io.end() {
                let lun = self.lun_at(offset);
                let length = lun.end().min(io.end()) - offset;
                self.submit_part(io, lun, offset, length);
                offset += length;
                left += 1;
            }
            let split = Split {
                left,
                finished: Instant(0),
                refused: None,
            };
            self.split.insert(io.id, split);
        }
        self.drain();
    }

    /// Asks the node for a snapshot of every volume, named `lab.N` (the
    /// N-th asked for); each is answered when the CP that takes it commits.
    fn take_snapshot(&mut self, now: Instant) {
        self.now = self.now.max(Instant(now.0 + self.epoch.0));
        for index in 0..self.volumes.len() {
            let request = HostRequest::Change(Change::CreateSnapshot {
                volume: self.volumes[index],
                name: format!("lab.{}", self.snapshot_stats.requested + 1),
            });
            self.submit_snapshot(request);
        }
        self.drain();
    }

    /// Sets every volume's schedule, then moves lab time zero to the next
    /// instant of `clock_start` (the engine idles until then) and watches
    /// the schedule from there.
    fn follow_snap_sched(&mut self, sched: &SnapSched) -> bool {
        for volume in self.volumes.clone() {
            let request = HostRequest::Change(Change::SetSnapSchedule {
                volume,
                schedule: sched.schedule,
            });
            self.call(None, request)
                .expect("a prepared volume takes a checked schedule");
        }
        let start = sched
            .clock_start
            .map_or(self.now, |start| start.next_at_or_after(self.now));
        self.epoch = Duration(start.0);
        self.snap_sched = Some(ScheduleWatch {
            seen: start,
            next: self.node.next_snapshot_due(start),
        });
        true
    }

    /// Every volume's snapshots, with when each was asked for.
    fn held_snapshots(&self) -> Vec<HeldSnapshot> {
        let mut held = Vec::new();
        for (volume, name, aggregate) in self.node.volumes() {
            let Some(filer) = self.node.aggregate(aggregate) else {
                continue;
            };
            let local = wafer_core::node::split_volume(volume).1;
            held.extend(
                filer
                    .snapshots(local)
                    .into_iter()
                    .map(|snapshot| HeldSnapshot {
                        volume: name.clone(),
                        name: snapshot.name,
                        engine_ns: snapshot.created.0,
                        lab_ns: snapshot.created.0 as i64 - self.epoch.0 as i64,
                    }),
            );
        }
        held
    }

    fn snapshot_stats(&self) -> SnapshotStats {
        self.snapshot_stats
    }

    /// Every volume's space as the engine accounts it
    /// (`Filer::volume_space`), summed.
    fn volume_use(&self) -> Option<VolumeUse> {
        let mut total = VolumeUse::default();
        for (volume, _, aggregate) in self.node.volumes() {
            let local = wafer_core::node::split_volume(volume).1;
            let space = self.node.aggregate(aggregate)?.volume_space(local)?;
            total.size_bytes += space.size_bytes;
            total.used_bytes += space.used_bytes;
            total.snapshot_used_bytes += space.snapshot_used_bytes;
            total.snapshot_spill_bytes += space.snapshot_spill_bytes;
        }
        Some(total)
    }

    fn next_event(&self) -> Option<Instant> {
        self.next_internal_event()
            .map(|at| self.lab_time(at.max(Instant(self.epoch.0))))
    }

    fn advance(&mut self, now: Instant, done: &mut Vec<HostCompletion>) {
        let until = Instant(now.0 + self.epoch.0);
        while let Some(at) = self.next_internal_event().filter(|at| *at <= until) {
            self.run_at(at);
        }
        self.now = self.now.max(until);
        done.append(&mut self.answered);
    }

    /// The engine's per-disk counts and latencies (it times every I/O from
    /// issue to completion, by kind) with the models' busy time, every
    /// aggregate's disks in turn.
    fn disk_stats(&self) -> Vec<DiskStats> {
        let none = &DiskCounters::default();
        let counters = self.disk_base.iter().enumerate().flat_map(|(index, _)| {
            let disks = self.disk_count(index);
            let own = self
                .node
                .aggregate(AggrId(index as u32))
                .map_or(&[][..], |filer| &filer.counters().disks[..]);
            (0..disks).map(move |disk| own.get(disk).unwrap_or(none))
        });
        self.disks
            .iter()
            .zip(counters)
            .map(|(disk, c)| {
                let busy_now = match disk.outstanding {
                    0 => 0,
                    _ => (self.now - disk.busy_since).0,
                };
                DiskStats {
                    name: disk.name.clone(),
                    busy_ns: disk.busy_ns + busy_now,
                    user_reads: c.user_reads,
                    user_read_blocks: c.user_read_blocks,
                    writes: c.writes,
                    write_blocks: c.write_blocks,
                    cp_reads: c.cp_reads,
                    cp_read_blocks: c.cp_read_blocks,
                    read_latency_ns: c.user_read_time_ns,
                    write_latency_ns: c.write_time_ns,
                    cp_read_latency_ns: c.cp_read_time_ns,
                    seek_ns: disk.seek_ns,
                    seek_cylinders: disk.seek_cylinders,
                }
            })
            .collect()
    }

    /// Every aggregate's counters summed, but CP time: the longest
    /// aggregate's (the node runs its aggregates' CPs together). The
    /// back-to-back waits are the aggregates' own, as a filer alone counts
    /// them; the node's shared half fills at the same moments for one
    /// aggregate, and its count (`NodeCounters::log_waits`) would count
    /// those waits twice.
    fn engine_stats(&self) -> Option<EngineStats> {
        let mut stats = EngineStats::default();
        let filers =
            (0..self.disk_base.len()).filter_map(|id| self.node.aggregate(AggrId(id as u32)));
        for filer in filers {
            add_counters(&mut stats, filer.counters());
        }
        stats.flash = self.node.flash_cache().map(|flash| {
            let c = flash.counters();
            FlashStats {
                accesses: c.accesses,
                hits: c.hits,
                disk_reads_replaced: c.disk_reads_replaced,
                inserts: c.inserts,
                evicts: c.evicts,
                used: flash.used(),
                blocks: flash.blocks(),
            }
        });
        Some(stats)
    }
}

/// Adds one aggregate's counters to `stats`.
fn add_counters(stats: &mut EngineStats, c: &Counters) {
    for (reason, &n) in &c.cps {
        *stats.cps.entry(reason.letter().to_string()).or_default() += n;
    }
    stats.cp_time_ns = stats.cp_time_ns.max(c.cp_time_ns);
    stats.back_to_back_waits += c.back_to_back_waits;
    stats.full_stripes += c.full_stripes;
    stats.partial_stripes +=
        c.partial_stripes_subtraction + c.partial_stripes_addition + c.partial_stripes_reconstruct;
    stats.data_blocks_written += c.data_blocks_written;
    stats.meta_blocks_written += c.meta_blocks_written;
    stats.parity_blocks_written += c.parity_blocks_written;
    stats.parity_reads += c.parity_reads;
    stats.unaligned_write_reads += c.partial_write_reads;
    stats.cache_hits += c.cache_hits;
    stats.cache_misses += c.cache_misses;
    stats.indirect_reads += c.indirect_reads;
    stats.read_chains += c.read_chains;
    stats.read_chain_blocks += c.read_chain_blocks;
}

impl Disk {
    fn new(drive: &Drive, name: String) -> Disk {
        Disk {
            device: drive.device(),
            name,
            outstanding: 0,
            busy_since: Instant(0),
            busy_ns: 0,
            seek_ns: 0,
            seek_cylinders: 0,
        }
    }

    /// Hands the model a request from the engine.
    fn submit(&mut self, now: Instant, request: DeviceRequest) {
        self.started(now);
        self.device
            .submit(now, request)
            .expect("the engine addresses blocks inside its disks");
    }

    fn started(&mut self, now: Instant) {
        if self.outstanding == 0 {
            self.busy_since = now;
        }
        self.outstanding += 1;
    }

    fn finished(&mut self, completion: &Completion) {
        self.seek_ns += completion.service.seek.0;
        self.seek_cylinders += completion.service.seek_cylinders;
        self.outstanding -= 1;
        if self.outstanding == 0 {
            self.busy_ns += (completion.finished_at - self.busy_since).0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ZeroBuffers;

    #[test]
    fn a_given_back_buffer_serves_the_next_write_of_its_length() {
        let mut buffers = ZeroBuffers::default();
        let buffer = buffers.take(4096);
        assert_eq!(buffer, vec![0; 4096]);
        let at = buffer.as_ptr();
        buffers.give_back(buffer);
        let other = buffers.take(512);
        assert_ne!(other.as_ptr(), at, "another length gets its own");
        let again = buffers.take(4096);
        assert_eq!(again.as_ptr(), at, "the same length reuses it");
    }

    #[test]
    fn buffers_are_kept_up_to_a_bound_per_length() {
        let mut buffers = ZeroBuffers::default();
        let len = 1 << 20;
        let limit = ZeroBuffers::BYTES_PER_LENGTH / len;
        for _ in 0..limit + 5 {
            buffers.give_back(vec![0; len]);
        }
        assert_eq!(buffers.0[&len].len(), limit);
        for _ in 0..5 {
            buffers.give_back(Vec::new());
        }
        assert!(!buffers.0.contains_key(&0), "empty buffers are not kept");
    }
}
