//! The in-place comparator: a classic RAID-5 array (HP EVA VRAID5, an EMC
//! CLARiiON RAID-5 LUN) behind the lab's [`Array`] interface.
//!
//! Its LUNs lie on one or more alike RAID-5 groups (module `placement`:
//! striped MetaLUNs, or whole LUNs dealt round the groups; module `groups`
//! and `layout`: each group's striping) and are updated in place: every LUN
//! block has a fixed home on one disk, so the array never ages or
//! fragments. The workload addresses the LUNs end to end as one disk; a
//! host I/O that crosses a LUN's end or, on several groups, a stripe's edge
//! (the groups' stripes are dealt round them in one data space) is split
//! into parts, one per stretch of data space, each handled as the
//! I/O it would be alone (a read part is a cache hit if all its blocks are
//! cached), and answered when its last part is. What the model does:
//!
//! - **Reads** go to the disks holding the data, split at stripe-unit
//!   boundaries and merged where adjacent on a disk; a host read completes
//!   when its last disk read does.
//! - **Writes** update each stripe they touch: a *full-stripe write* (new data
//!   and new parity, no reads) when every data block of the stripe is
//!   written, else a *read-modify-write* (read old data and old parity, then
//!   write new data and new parity: two reads and two writes for a small
//!   write). Updates of one stripe run one at a time, in arrival order, as a
//!   controller's stripe lock orders them.
//! - **Write-back cache** (optional, module `cache`): mirrored controller memory
//!   acknowledges a write after a fixed latency and destages it in the
//!   background, coalescing overwrites; a read all of whose blocks are
//!   still in it is answered from it at the same latency (one that is only
//!   partly there goes to the disks whole). When it is full, writes wait for
//!   destages to free room. With no cache a write completes when its last
//!   disk write does.
//! - **Blocks.** The disks move whole 4 KiB blocks, so a host I/O smaller
//!   than 4 KiB or not 4 KiB aligned is rounded out to the blocks that hold
//!   it: a 512-byte read reads one block; a 512-byte write costs the same
//!   read-modify-write as a 4 KiB one (the old block it merges into is the
//!   "old data" the parity update reads anyway).
//!
//! - **Copy-on-first-write snapshots** (optional, module `cow`), as
//!   CLARiiON SnapView makes them: after a snapshot, the first write to each
//!   chunk of a LUN waits while the chunk's old contents are read (as CP
//!   reads: reads a write costs) and written to the reserved LUN pool, a
//!   RAID-5 LUN of its own placed after the LUNs as one more LUN (from the
//!   next stripe on, striped over the groups like them or whole on the
//!   next group round), its room shared equally by the LUNs, each LUN's
//!   share filled in the order its chunks are copied; each LUN keeps its
//!   own sessions.
//!   The copy's write goes through the write-back cache like any write
//!   (admitted, the copy is done; the host's write follows at once), or,
//!   without a cache, to the disks (done when its stripe update is). The old
//!   chunk is read from the cache if every block of it is there. Reads of a
//!   snapshot are not modelled: no workload addresses one.
//!
//! Not modelled: the controllers' CPU and the host link (both are taken as
//! infinitely fast), a read cache and read-ahead in the controller (the
//! drives keep their own), sparing and rebuild. The LUNs occupy the lowest
//! addresses of every disk.
//!
//! The disks are `wafer_devices` models, driven by the devices' call
//! order: inside [`Array::advance`] the array always moves to the earliest
//! event of any disk or of the cache, so a disk is never handed a request
//! while it still has an earlier event pending. Everything is deterministic.

mod block_set;
mod cache;
mod cow;
mod groups;
mod layout;
mod placement;

use std::collections::{BTreeMap, VecDeque};
use std::ops::Range;

use wafer_core::fixed_map::FixedMap;
use wafer_core::units::{Duration, Instant};
use wafer_devices::params::{Catalog, Drive};
use wafer_devices::{BLOCK_BYTES, Completion, Device, DeviceRequest, NextEvents, Op, sooner};

use crate::array::{
    Array, ArrayKind, DiskStats, HostCompletion, HostIo, HostOp, PreparePlan, SnapshotStats,
};
use crate::controller::{Controller, ControllerSpec};

use self::cache::{WaitingWrite, WriteCache};
pub use self::cow::{CHUNK_BYTES_DEFAULT, CowCounters, SESSIONS_PER_LUN_MAX};
use self::cow::{ChunkCopy, CopyOnWrite};
use self::groups::Groups;
use self::layout::{Layout, Piece, StripeWrite, covering_blocks};
use self::placement::{LunBlock, Placement};
pub use self::placement::{LunPlacement, METALUN_MULTIPLIER_DEFAULT};

/// \[INF\] The time a cached write (or read hit) takes to be answered: the
/// controller takes the data over the host link (about 10 µs for 4 KiB at
/// 4 Gb/s FC), processes the command and copies it to its partner's mirror
/// before answering, each of the order of 0.1 ms. No measured EVA figure was
/// found; a scenario may set its own.
pub const CACHE_LATENCY_DEFAULT: Duration = Duration(200_000);

/// Stripe updates the destager keeps in flight per disk of the group. Each
/// update holds at most two commands at a time, on two disks, so four per
/// disk keep every spindle's queue fed with background writes while host
/// reads still find room in the drives' reordering window (64 commands for
/// the lab's 15K drives).
const DESTAGES_PER_DISK: u32 = 4;

/// How a comparator array is built.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InPlaceSpec {
    /// The array's name in reports.
    pub name: String,
    /// The drive, by its name in the lab's drive catalog.
    pub drive: String,
    /// Disks in each RAID-5 group.
    pub disks: u32,
    /// RAID-5 groups, alike.
    pub raid_groups: u32,
    /// Bytes per chunk (the stripe unit), a multiple of 4 KiB.
    pub stripe_unit_bytes: u64,
    /// Data chunks per stripe; `None` for `disks - 1` (classic RAID-5).
    pub stripe_width: Option<u32>,
    /// Sizes of the LUNs in bytes, in address order.
    pub luns: Vec<u64>,
    /// How the LUNs lie on the groups.
    pub placement: LunPlacement,
    /// The write-back cache, if any.
    pub cache: Option<CacheSpec>,
    /// The controller in front of the disks (none: infinitely fast).
    pub controller: Option<ControllerSpec>,
    /// The reserved LUN pool of copy-on-first-write snapshots, if any.
    pub snapshots: Option<ReservedPoolSpec>,
}

/// The reserved LUN pool that copy-on-first-write snapshots copy old chunks
/// into, and the chunk they copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReservedPoolSpec {
    /// The pool's size, in bytes.
    pub pool_bytes: u64,
    /// Bytes per chunk, a multiple of 4 KiB ([`CHUNK_BYTES_DEFAULT`]).
    pub chunk_bytes: u64,
}

/// A write-back cache's size and answer time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CacheSpec {
    /// Room for dirty data, in MiB (the mirror's copy is not counted).
    pub capacity_mib: u32,
    /// How long the controller takes to answer from the cache.
    pub latency: Duration,
}

/// Why a comparator array cannot be built.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum InPlaceError {
    /// The drive is not in the catalog.
    #[error("array `{array}`: no drive `{drive}` in the catalog")]
    UnknownDrive {
        /// The array.
        array: String,
        /// The drive asked for.
        drive: String,
    },
    /// The drive is an NVRAM card, not a disk or SSD.
    #[error("array `{array}`: `{drive}` is an NVRAM card, not a disk")]
    NotADisk {
        /// The array.
        array: String,
        /// The drive asked for.
        drive: String,
    },
    /// A field has a value no array can have.
    #[error("array `{array}`, `{field}`: {reason}")]
    Invalid {
        /// The array.
        array: String,
        /// The field.
        field: &'static str,
        /// What is wrong with it.
        reason: String,
    },
}

/// Who a disk command works for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Owner {
    /// A host read.
    Read(u64),
    /// A stripe update.
    Update(u64),
}

/// Which `statit` column a disk command counts in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    UserRead,
    CpRead,
    Write,
}

/// Who asked for a stripe update.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Origin {
    /// A host write that went to the disks directly.
    Host(u64),
    /// The destager, writing out cached blocks `first..end`.
    Destage(u64, u64),
}

/// Host I/O ids at or above this are the array's own chunk copies (the
/// LUN's index shifted by [`COPY_LUN_SHIFT`] and the chunk's number added to
/// it): reads of old chunks, writes to the pool.
const COPY_ID_BASE: u64 = 1 << 63;

/// Where a copy's id holds its LUN's index: chunk numbers stay below 2^40.
const COPY_LUN_SHIFT: u32 = 40;

/// Ids from this up to [`COPY_ID_BASE`] are parts of host I/Os split at a
/// LUN's end or an element's edge; the host's own ids stay below it.
const PART_ID_BASE: u64 = 1 << 62;

/// The id of the copy of LUN `lun`'s `chunk`.
fn copy_id(lun: usize, chunk: u64) -> u64 {
    COPY_ID_BASE | (lun as u64) << COPY_LUN_SHIFT | chunk
}

/// The LUN and chunk whose copy `id` is, if it is one.
fn copied_chunk(id: u64) -> Option<(usize, u64)> {
    let key = id.checked_sub(COPY_ID_BASE)?;
    Some((
        (key >> COPY_LUN_SHIFT) as usize,
        key & ((1 << COPY_LUN_SHIFT) - 1),
    ))
}

/// True if `id` is a part of a split host I/O.
fn is_part(id: u64) -> bool {
    (PART_ID_BASE..COPY_ID_BASE).contains(&id)
}

/// A LUN as the workload sees it: a stretch of the array's address space.
#[derive(Clone, Copy, Debug)]
struct HostLun {
    start: u64,
    bytes: u64,
}

/// A stretch of a host I/O that one LUN holds contiguously in the data
/// space: its LUN blocks `lun_first..` and their data blocks `data`.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Part {
    lun: usize,
    lun_first: u64,
    data: Range<u64>,
}

impl Part {
    /// One past its last LUN block.
    fn lun_end(&self) -> u64 {
        self.lun_first + (self.data.end - self.data.start)
    }
}

/// A host I/O split into parts: the parts not yet answered.
#[derive(Clone, Copy, Debug)]
struct SplitIo {
    submitted_at: Instant,
    parts_left: usize,
}

/// A host write waiting for chunk copies before it may go ahead.
#[derive(Clone, Copy, Debug)]
struct HeldWrite {
    submitted_at: Instant,
    first: u64,
    end: u64,
    copies_left: usize,
}

/// One stripe's update: waiting for the stripe, reading, or writing.
#[derive(Clone, Debug)]
struct Update {
    write: StripeWrite,
    origin: Origin,
    writes_pending: Vec<Piece>,
    commands_left: usize,
}

/// A host I/O waiting for its disk commands or stripe updates.
#[derive(Clone, Copy, Debug)]
struct Pending {
    submitted_at: Instant,
    parts_left: usize,
}

/// One disk of the array, its counters and its next event.
struct Disk {
    device: Box<dyn Device>,
    outstanding: u32,
    busy_since: Instant,
    stats: DiskStats,
}

/// The in-place RAID-5 comparator array.
pub struct InPlaceArray {
    name: String,
    luns: Vec<HostLun>,
    placement: Placement,
    groups: Groups,
    disks: Vec<Disk>,
    next_events: NextEvents,
    clock: Instant,
    commands: FixedMap<u64, (Owner, Kind)>,
    reads: FixedMap<u64, Pending>,
    writes: FixedMap<u64, Pending>,
    updates: FixedMap<u64, Update>,
    /// Stripe → its updates in arrival order; the first is running.
    stripe_queues: FixedMap<u64, VecDeque<u64>>,
    cache: Option<WriteCache>,
    destages_running: u32,
    answers: BTreeMap<(Instant, u64), HostCompletion>,
    next_id: u64,
    controller: Option<Controller>,
    /// Copy-on-first-write snapshots, one per LUN, if the array has a
    /// reserved LUN pool (else empty).
    cows: Vec<CopyOnWrite>,
    /// Host I/Os split into parts, by the host's id.
    split_ios: FixedMap<u64, SplitIo>,
    /// Each part's host I/O, by the part's id.
    part_owners: FixedMap<u64, u64>,
    next_part: u64,
    /// Host writes waiting for chunk copies, by id.
    held_writes: FixedMap<u64, HeldWrite>,
    /// Snapshots asked for that a LUN could not take (no reserved LUN
    /// pool, or it had its most).
    snapshots_refused: u64,
}

impl InPlaceSpec {
    /// Checks that the array can be built from `catalog`'s drives.
    pub fn check(&self, catalog: &Catalog) -> Result<(), InPlaceError> {
        self.geometry(catalog).map(|_| ())
    }

    /// The drive, the LUNs' placement and the groups, checked.
    fn geometry<'a>(
        &self,
        catalog: &'a Catalog,
    ) -> Result<(&'a Drive, Placement, Groups), InPlaceError> {
        let drive = find_drive(self, catalog)?;
        let width = check_geometry(self)?;
        let chunk_blocks = self.stripe_unit_bytes / BLOCK_BYTES;
        let stripe_blocks = u64::from(width) * chunk_blocks;
        check_reserved_pool(self, stripe_blocks)?;
        let placed = self.placed_blocks();
        let placement = Placement::new(self.raid_groups, stripe_blocks, self.placement, &placed);
        let group_blocks = placement.group_blocks();
        let layout = Layout::new(self.disks, width, chunk_blocks, group_blocks);
        check_capacity(self, &layout, drive.device().capacity_blocks())?;
        let groups = Groups::new(layout, self.raid_groups);
        Ok((drive, placement, groups))
    }

    /// Blocks of each LUN.
    fn lun_blocks(&self) -> Vec<u64> {
        (self.luns.iter())
            .map(|bytes| bytes.div_ceil(BLOCK_BYTES))
            .collect()
    }

    /// Blocks the groups hold: each LUN's, then the pool's as one more LUN.
    fn placed_blocks(&self) -> Vec<u64> {
        let mut blocks = self.lun_blocks();
        if let Some(pool) = self.snapshots {
            blocks.push(self.pool_share_blocks(pool) * self.luns.len() as u64);
        }
        blocks
    }

    /// Each LUN's share of the reserved LUN pool, in blocks: an equal part,
    /// in whole chunks.
    fn pool_share_blocks(&self, pool: ReservedPoolSpec) -> u64 {
        let chunk_blocks = pool.chunk_bytes / BLOCK_BYTES;
        let luns = self.luns.len() as u64;
        pool.pool_bytes / BLOCK_BYTES / luns / chunk_blocks * chunk_blocks
    }

    /// The copy-on-first-write state of each LUN, if the array has a
    /// reserved LUN pool: LUN `i`'s share is the pool's `i`-th, in the pool's
    /// own blocks.
    fn copies_on_write(&self) -> Vec<CopyOnWrite> {
        let Some(pool) = self.snapshots else {
            return Vec::new();
        };
        let share = self.pool_share_blocks(pool);
        (self.lun_blocks().into_iter().enumerate())
            .map(|(index, blocks)| {
                let chunk_blocks = pool.chunk_bytes / BLOCK_BYTES;
                CopyOnWrite::new(chunk_blocks, blocks, index as u64 * share, share)
            })
            .collect()
    }
}

impl InPlaceArray {
    /// Builds the array of `spec` from `catalog`'s drives, idle at time 0.
    pub fn new(spec: &InPlaceSpec, catalog: &Catalog) -> Result<InPlaceArray, InPlaceError> {
        let (drive, placement, groups) = spec.geometry(catalog)?;
        let disks: Vec<Disk> = (0..groups.disks())
            .map(|index| new_disk(drive, index, spec))
            .collect();
        let mut start = 0;
        let luns = (spec.luns.iter())
            .map(|&bytes| {
                start += bytes;
                HostLun {
                    start: start - bytes,
                    bytes,
                }
            })
            .collect();
        Ok(InPlaceArray {
            name: spec.name.clone(),
            luns,
            cache: spec.cache.map(|c| new_cache(c, placement.data_blocks())),
            placement,
            groups,
            next_events: NextEvents::new(disks.len()),
            disks,
            clock: Instant(0),
            commands: FixedMap::default(),
            reads: FixedMap::default(),
            writes: FixedMap::default(),
            updates: FixedMap::default(),
            stripe_queues: FixedMap::default(),
            destages_running: 0,
            answers: BTreeMap::new(),
            next_id: 0,
            controller: spec
                .controller
                .as_ref()
                .map(|c| Controller::new(c.per_command)),
            cows: spec.copies_on_write(),
            split_ios: FixedMap::default(),
            part_owners: FixedMap::default(),
            next_part: 0,
            held_writes: FixedMap::default(),
            snapshots_refused: 0,
        })
    }

    fn fresh_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// The earliest pending event of any disk, cache answer or command the
    /// controller releases.
    fn earliest_event(&self) -> Option<Instant> {
        let answers = self.answers.keys().next().map(|&(at, _)| at);
        let released = self.controller.as_ref().and_then(Controller::next_release);
        sooner(sooner(self.next_events.earliest(), answers), released)
    }

    /// Sends `piece` to its disk at `now`, through the controller if the
    /// array has one.
    fn issue(&mut self, now: Instant, piece: Piece, kind: Kind, owner: Owner) {
        let id = self.fresh_id();
        self.commands.insert(id, (owner, kind));
        let op = match kind {
            Kind::UserRead | Kind::CpRead => Op::Read,
            Kind::Write => Op::Write,
        };
        let request = DeviceRequest {
            id,
            op,
            block: piece.block,
            blocks: piece.blocks,
        };
        match self.controller.as_mut() {
            Some(controller) => controller.take(now, piece.disk as usize, request),
            None => self.submit_to_disk(now, piece.disk as usize, request),
        }
    }

    /// Hands `request` to disk `index` at `now`.
    fn submit_to_disk(&mut self, now: Instant, index: usize, request: DeviceRequest) {
        let disk = &mut self.disks[index];
        disk.device
            .submit(now, request)
            .expect("the layout keeps every command on its disk");
        self.next_events.set(index, disk.device.next_event());
        if disk.outstanding == 0 {
            disk.busy_since = now;
        }
        disk.outstanding += 1;
    }

    /// Answers a host I/O at `at` from the controller.
    fn answer_at(&mut self, at: Instant, id: u64, submitted_at: Instant) {
        let sequence = self.fresh_id();
        let completion = HostCompletion {
            id,
            submitted_at,
            finished_at: at,
            refused: None,
        };
        self.answers.insert((at, sequence), completion);
    }

    /// The parts of host I/O `io`: per LUN it touches, the 4 KiB blocks
    /// that hold its bytes there, cut where the data space is not
    /// contiguous.
    fn parts_of(&self, io: &HostIo) -> Vec<Part> {
        let mut parts = Vec::new();
        let first_lun = self
            .luns
            .partition_point(|lun| lun.start + lun.bytes <= io.offset);
        for (index, lun) in self.luns.iter().enumerate().skip(first_lun) {
            if lun.start >= io.end() {
                break;
            }
            let offset = io.offset.max(lun.start) - lun.start;
            let end = io.end().min(lun.start + lun.bytes) - lun.start;
            let (first, end) = covering_blocks(offset, end - offset);
            let mut lun_first = first;
            for data in (self.placement).data_ranges(index, LunBlock(first), LunBlock(end)) {
                let blocks = data.end - data.start;
                parts.push(Part {
                    lun: index,
                    lun_first,
                    data,
                });
                lun_first += blocks;
            }
        }
        parts
    }

    /// Starts host I/O `io` at `now`: whole if it is one part, else part by
    /// part, each under an id of its own.
    fn start_host_io(&mut self, now: Instant, io: &HostIo) {
        let parts = self.parts_of(io);
        if let [part] = parts.as_slice() {
            self.start_part(now, io.id, io.op, part);
            return;
        }
        let split = SplitIo {
            submitted_at: now,
            parts_left: parts.len(),
        };
        self.split_ios.insert(io.id, split);
        for part in &parts {
            let id = PART_ID_BASE + self.next_part;
            self.next_part += 1;
            self.part_owners.insert(id, io.id);
            self.start_part(now, id, io.op, part);
        }
    }

    /// Starts one part of a host I/O under `id`.
    fn start_part(&mut self, now: Instant, id: u64, op: HostOp, part: &Part) {
        match op {
            HostOp::Read => self.submit_read(now, id, part.data.clone()),
            HostOp::Write => self.submit_write(now, id, part),
        }
    }

    /// Turns the answers to parts among `done[from..]` into answers to
    /// their host I/Os, each when its last part is answered.
    fn join_parts(&mut self, from: usize, done: &mut Vec<HostCompletion>) {
        if self.part_owners.is_empty() {
            return;
        }
        let answered: Vec<HostCompletion> = done.drain(from..).collect();
        for completion in answered {
            if !is_part(completion.id) {
                done.push(completion);
                continue;
            }
            let host = (self.part_owners)
                .remove(&completion.id)
                .expect("a part of a split I/O");
            let split = self.split_ios.get_mut(&host).expect("a split I/O");
            split.parts_left -= 1;
            if split.parts_left == 0 {
                let split = self.split_ios.remove(&host).expect("a split I/O");
                done.push(HostCompletion {
                    id: host,
                    submitted_at: split.submitted_at,
                    ..completion
                });
            }
        }
    }

    /// A read of data blocks `blocks` for `id`: from the cache if it holds
    /// them all, else from the disks.
    fn submit_read(&mut self, now: Instant, id: u64, blocks: Range<u64>) {
        let (first, end) = (blocks.start, blocks.end);
        if let Some(cache) = &self.cache
            && cache.holds(first, end)
        {
            let latency = cache.latency();
            self.answer_at(now + latency, id, now);
            return;
        }
        self.read_from_disks(now, id, first, end, Kind::UserRead);
    }

    /// Reads data blocks `first..end` for `id` from the disks.
    fn read_from_disks(&mut self, now: Instant, id: u64, first: u64, end: u64, kind: Kind) {
        let pieces = self.groups.read_pieces(first, end);
        let pending = Pending {
            submitted_at: now,
            parts_left: pieces.len(),
        };
        self.reads.insert(id, pending);
        for piece in pieces {
            self.issue(now, piece, kind, Owner::Read(id));
        }
    }

    /// A write of `part` for `id`: held while the chunks it overwrites are
    /// copied for its LUN's snapshots, if any must be, else under way at
    /// once.
    fn submit_write(&mut self, now: Instant, id: u64, part: &Part) {
        let (first, end) = (part.data.start, part.data.end);
        let Some(cow) = self.cows.get_mut(part.lun) else {
            self.write(now, id, now, first, end);
            return;
        };
        let (copies_left, starts) = cow.before_write(id, part.lun_first, part.lun_end());
        if copies_left == 0 {
            self.write(now, id, now, first, end);
            return;
        }
        let held = HeldWrite {
            submitted_at: now,
            first,
            end,
            copies_left,
        };
        self.held_writes.insert(id, held);
        for copy in starts {
            self.start_copy(now, part.lun, copy);
        }
    }

    /// Writes data blocks `first..end` for `id` (submitted at
    /// `submitted_at`): into the cache if it has one and they fit it, else
    /// to the disks.
    fn write(&mut self, now: Instant, id: u64, submitted_at: Instant, first: u64, end: u64) {
        let Some(cache) = &mut self.cache else {
            self.write_through(now, id, submitted_at, first, end);
            return;
        };
        if cache.too_large(first, end) {
            cache.forget(first, end);
            self.write_through(now, id, submitted_at, first, end);
            return;
        }
        cache.enqueue(WaitingWrite {
            id,
            submitted_at,
            first,
            end,
        });
        self.admit_cached_writes(now);
        self.start_destages(now);
    }

    /// The data blocks of LUN `lun`'s blocks `blocks`: one range, since a
    /// chunk never straddles a stripe's edge on several groups (checked with
    /// the spec), and one group's data space is contiguous.
    fn chunk_data(&self, lun: usize, blocks: Range<u64>) -> Range<u64> {
        let ranges =
            (self.placement).data_ranges(lun, LunBlock(blocks.start), LunBlock(blocks.end));
        let [range] = ranges.as_slice() else {
            panic!("a chunk lies within a stripe");
        };
        range.clone()
    }

    /// Starts the copy of LUN `lun`'s chunk: its read, from the cache if
    /// every block of it is there, else from the disks.
    fn start_copy(&mut self, now: Instant, lun: usize, copy: ChunkCopy) {
        let source = self.chunk_data(lun, copy.source);
        let cached = (self.cache.as_ref()).is_some_and(|c| c.holds(source.start, source.end));
        match cached {
            true => self.chunk_read(now, lun, copy.chunk),
            false => {
                let id = copy_id(lun, copy.chunk);
                self.read_from_disks(now, id, source.start, source.end, Kind::CpRead);
            }
        }
    }

    /// LUN `lun`'s `chunk`'s old contents are read: write them to its share
    /// of the pool, the last LUN the placement holds.
    fn chunk_read(&mut self, now: Instant, lun: usize, chunk: u64) {
        let target = self.cows[lun].target(chunk);
        let target = self.chunk_data(self.luns.len(), target);
        self.write(now, copy_id(lun, chunk), now, target.start, target.end);
    }

    /// LUN `lun`'s `chunk`'s copy is in the pool: the writes that waited
    /// for it and for no other go ahead.
    fn chunk_copied(&mut self, now: Instant, lun: usize, chunk: u64) {
        for id in self.cows[lun].copied(chunk) {
            let held = self.held_writes.get_mut(&id).expect("a held write");
            held.copies_left -= 1;
            if held.copies_left == 0 {
                let held = self.held_writes.remove(&id).expect("a held write");
                self.write(now, id, held.submitted_at, held.first, held.end);
            }
        }
    }

    /// Sends a write to the disks: one update per stripe it touches.
    fn write_through(
        &mut self,
        now: Instant,
        id: u64,
        submitted_at: Instant,
        first: u64,
        end: u64,
    ) {
        let stripe_writes = self.groups.stripe_writes(first, end);
        let pending = Pending {
            submitted_at,
            parts_left: stripe_writes.len(),
        };
        self.writes.insert(id, pending);
        for write in stripe_writes {
            self.queue_update(now, write, Origin::Host(id));
        }
    }

    /// Admits the cached writes that now fit and answers them; a chunk copy
    /// admitted is done.
    fn admit_cached_writes(&mut self, now: Instant) {
        let Some(cache) = &mut self.cache else {
            return;
        };
        let latency = cache.latency();
        let mut copied = Vec::new();
        for write in cache.admit() {
            match copied_chunk(write.id) {
                Some(copy) => copied.push(copy),
                None => self.answer_at(now + latency, write.id, write.submitted_at),
            }
        }
        for (lun, chunk) in copied {
            self.chunk_copied(now, lun, chunk);
        }
    }

    /// Starts destages while the cache has dirty stripes that are not busy and
    /// the destager has room.
    fn start_destages(&mut self, now: Instant) {
        let destages_max = DESTAGES_PER_DISK * self.groups.disks();
        while self.destages_running < destages_max {
            let Some(cache) = &mut self.cache else {
                return;
            };
            let queues = &self.stripe_queues;
            let busy = |stripe: u64| queues.contains_key(&stripe);
            let stripe_blocks = self.groups.stripe_blocks();
            let Some((first, end)) = cache.take_run(stripe_blocks, busy, queues.len()) else {
                return;
            };
            let mut writes = self.groups.stripe_writes(first, end);
            assert_eq!(writes.len(), 1, "a run stays within its stripe");
            self.destages_running += 1;
            self.queue_update(now, writes.remove(0), Origin::Destage(first, end));
        }
    }

    /// Queues a stripe update behind any others of its stripe, and starts it
    /// if it is first.
    fn queue_update(&mut self, now: Instant, write: StripeWrite, origin: Origin) {
        let id = self.fresh_id();
        let stripe = write.stripe;
        let update = Update {
            write,
            origin,
            writes_pending: Vec::new(),
            commands_left: 0,
        };
        self.updates.insert(id, update);
        let queue = self.stripe_queues.get_or_insert_with(stripe, VecDeque::new);
        queue.push_back(id);
        if queue.len() == 1 {
            self.start_update(now, id);
        }
    }

    /// Issues an update's reads, or its writes if it needs none.
    fn start_update(&mut self, now: Instant, id: u64) {
        let update = self.updates.get_mut(&id).expect("a queued update");
        let plan = self.groups.plan(&update.write);
        if plan.reads.is_empty() {
            update.commands_left = plan.writes.len();
            self.issue_all(now, plan.writes, Kind::Write, id);
        } else {
            update.commands_left = plan.reads.len();
            update.writes_pending = plan.writes;
            self.issue_all(now, plan.reads, Kind::CpRead, id);
        }
    }

    fn issue_all(&mut self, now: Instant, pieces: Vec<Piece>, kind: Kind, update: u64) {
        for piece in pieces {
            self.issue(now, piece, kind, Owner::Update(update));
        }
    }

    /// One of an update's commands finished at `now`.
    fn update_command_done(&mut self, now: Instant, id: u64, done: &mut Vec<HostCompletion>) {
        let update = self.updates.get_mut(&id).expect("a running update");
        update.commands_left -= 1;
        if update.commands_left > 0 {
            return;
        }
        let writes = std::mem::take(&mut update.writes_pending);
        if !writes.is_empty() {
            update.commands_left = writes.len();
            self.issue_all(now, writes, Kind::Write, id);
            return;
        }
        let update = self.updates.remove(&id).expect("a running update");
        self.next_on_stripe(now, update.write.stripe, id);
        match update.origin {
            Origin::Host(host) => self.part_done(now, host, HostOp::Write, done),
            Origin::Destage(first, end) => {
                self.destages_running -= 1;
                let cache = self.cache.as_mut().expect("destages come from the cache");
                cache.destaged(first, end);
                self.admit_cached_writes(now);
                self.start_destages(now);
            }
        }
    }

    /// Releases `stripe` from finished update `id` and starts the next.
    fn next_on_stripe(&mut self, now: Instant, stripe: u64, id: u64) {
        let queue = self.stripe_queues.get_mut(&stripe).expect("a busy stripe");
        assert_eq!(queue.pop_front(), Some(id), "the running update is first");
        match queue.front().copied() {
            Some(next) => self.start_update(now, next),
            None => {
                self.stripe_queues.remove(&stripe);
            }
        }
    }

    /// One part of a host I/O finished at `now`; the I/O completes with its
    /// last.
    fn part_done(&mut self, now: Instant, id: u64, op: HostOp, done: &mut Vec<HostCompletion>) {
        let table = match op {
            HostOp::Read => &mut self.reads,
            HostOp::Write => &mut self.writes,
        };
        let pending = table.get_mut(&id).expect("a host I/O in flight");
        pending.parts_left -= 1;
        if pending.parts_left > 0 {
            return;
        }
        let pending = table.remove(&id).expect("a host I/O in flight");
        match (copied_chunk(id), op) {
            (Some((lun, chunk)), HostOp::Read) => self.chunk_read(now, lun, chunk),
            (Some((lun, chunk)), HostOp::Write) => self.chunk_copied(now, lun, chunk),
            (None, _) => done.push(HostCompletion {
                id,
                submitted_at: pending.submitted_at,
                finished_at: now,
                refused: None,
            }),
        }
    }

    /// A disk command finished: count it, then move its owner on.
    fn command_done(
        &mut self,
        disk: usize,
        completion: &Completion,
        done: &mut Vec<HostCompletion>,
    ) {
        let now = completion.finished_at;
        let (owner, kind) = self
            .commands
            .remove(&completion.id)
            .expect("every completion answers a command");
        count(&mut self.disks[disk], kind, completion);
        match owner {
            Owner::Read(host) => self.part_done(now, host, HostOp::Read, done),
            Owner::Update(update) => self.update_command_done(now, update, done),
        }
    }

    /// Runs every disk whose next event is at `at`, handling what finishes.
    fn run_disks_at(&mut self, at: Instant, done: &mut Vec<HostCompletion>) {
        let mut finished = Vec::new();
        for index in 0..self.disks.len() {
            if !self.next_events.due(index, at) {
                continue;
            }
            let disk = &mut self.disks[index];
            disk.device.advance(at, &mut finished);
            self.next_events.set(index, disk.device.next_event());
            for completion in finished.drain(..) {
                self.command_done(index, &completion, done);
            }
        }
    }

    /// Hands the disks the commands the controller has finished with by `at`.
    fn release_commands(&mut self, at: Instant) {
        while let Some(held) = self.controller.as_mut().and_then(|c| c.release(at)) {
            self.submit_to_disk(held.release_at, held.disk, held.request);
        }
    }

    /// Hands over the controller's answers due at `at`.
    fn answer_due(&mut self, at: Instant, done: &mut Vec<HostCompletion>) {
        while let Some(entry) = self.answers.first_entry() {
            if entry.key().0 > at {
                return;
            }
            done.push(entry.remove());
        }
    }
}

/// The drive `spec` names, if it is a disk or an SSD.
fn find_drive<'a>(spec: &InPlaceSpec, catalog: &'a Catalog) -> Result<&'a Drive, InPlaceError> {
    match catalog.get(&spec.drive) {
        None => Err(InPlaceError::UnknownDrive {
            array: spec.name.clone(),
            drive: spec.drive.clone(),
        }),
        Some(Drive::Nvram(_)) => Err(InPlaceError::NotADisk {
            array: spec.name.clone(),
            drive: spec.drive.clone(),
        }),
        Some(drive) => Ok(drive),
    }
}

/// Checks groups, disks, stripe unit, width, LUNs and cache; returns the
/// width.
fn check_geometry(spec: &InPlaceSpec) -> Result<u32, InPlaceError> {
    let invalid = |field, reason: String| InPlaceError::Invalid {
        array: spec.name.clone(),
        field,
        reason,
    };
    if spec.raid_groups == 0 {
        return Err(invalid("raid_groups", "an array needs a group".into()));
    }
    if spec.disks < 3 {
        return Err(invalid(
            "disks",
            format!("{} disks: RAID-5 needs at least 3", spec.disks),
        ));
    }
    let unit = spec.stripe_unit_bytes;
    if unit == 0 || unit % BLOCK_BYTES != 0 {
        return Err(invalid(
            "stripe_unit",
            format!("{unit} bytes is not a whole number of 4 KiB blocks"),
        ));
    }
    let width = spec.stripe_width.unwrap_or(spec.disks - 1);
    if width == 0 || width >= spec.disks {
        let reason = format!(
            "{width} data chunks and parity do not fit on {} disks",
            spec.disks
        );
        return Err(invalid("stripe_width", reason));
    }
    if let Some(empty) = spec.luns.iter().position(|&bytes| bytes == 0) {
        return Err(invalid("lun", format!("LUN {empty} is empty")));
    }
    if spec.luns.is_empty() {
        return Err(invalid("lun", "an array needs a LUN".into()));
    }
    if spec.placement == (LunPlacement::Striped { multiplier: 0 }) {
        let reason = "a meta stripe element of no stripes".into();
        return Err(invalid("metalun_multiplier", reason));
    }
    if let Some(cache) = spec.cache {
        if cache.capacity_mib == 0 {
            return Err(invalid(
                "cache_mib",
                "0 MiB: leave the cache out to turn it off".into(),
            ));
        }
        if cache.latency.0 == 0 {
            let reason = "an answer in no time would let a closed loop run forever at one instant";
            return Err(invalid("cache_latency_us", reason.into()));
        }
    }
    Ok(width)
}

/// Checks the reserved LUN pool: whole 4 KiB blocks per chunk, room for a
/// chunk per LUN at least, and, on several groups, chunks that never
/// straddle a data stripe's edge (of `stripe_blocks`): a LUN's stripes lie
/// apart in the data space there.
fn check_reserved_pool(spec: &InPlaceSpec, stripe_blocks: u64) -> Result<(), InPlaceError> {
    let Some(pool) = spec.snapshots else {
        return Ok(());
    };
    let invalid = |field, reason: String| InPlaceError::Invalid {
        array: spec.name.clone(),
        field,
        reason,
    };
    let chunk = pool.chunk_bytes;
    if chunk == 0 || chunk % BLOCK_BYTES != 0 {
        let reason = format!("{chunk} bytes is not a whole number of 4 KiB blocks");
        return Err(invalid("cow_chunk", reason));
    }
    let luns = spec.luns.len() as u64;
    if pool.pool_bytes / luns < chunk {
        let reason = format!(
            "{} bytes hold no {chunk}-byte chunk for each of {luns} LUNs",
            pool.pool_bytes
        );
        return Err(invalid("reserved_lun_pool", reason));
    }
    let stripe_bytes = stripe_blocks * BLOCK_BYTES;
    if spec.raid_groups > 1 && stripe_bytes % chunk != 0 {
        let reason = format!(
            "a {chunk}-byte chunk does not divide the groups' {stripe_bytes}-byte data stripe"
        );
        return Err(invalid("cow_chunk", reason));
    }
    Ok(())
}

/// Checks that the LUNs fit on the disks.
fn check_capacity(
    spec: &InPlaceSpec,
    layout: &Layout,
    disk_blocks: u64,
) -> Result<(), InPlaceError> {
    if layout.disk_blocks_needed() <= disk_blocks {
        return Ok(());
    }
    let width = spec.stripe_width.unwrap_or(spec.disks - 1);
    let usable_gb = disk_blocks * BLOCK_BYTES * u64::from(spec.disks) / u64::from(width + 1)
        * u64::from(width)
        / 1_000_000_000;
    let lun_bytes: u64 = spec.luns.iter().sum();
    let pool = match spec.snapshots {
        Some(pool) => format!(" and its {}-byte reserved LUN pool", pool.pool_bytes),
        None => String::new(),
    };
    Err(InPlaceError::Invalid {
        array: spec.name.clone(),
        field: "lun",
        reason: format!(
            "{lun_bytes} bytes{pool} do not fit in the group's {usable_gb} GB of data space \
             (the LUNs' components placed on their groups)"
        ),
    })
}

/// The array's disk `index`: `dNN` in an array of one group, else `rgG.dNN`
/// (disk NN of group G), as `statit` groups them.
fn new_disk(drive: &Drive, index: u32, spec: &InPlaceSpec) -> Disk {
    let (group, within) = (index / spec.disks, index % spec.disks);
    let name = match spec.raid_groups {
        1 => format!("d{within:02}"),
        _ => format!("rg{group}.d{within:02}"),
    };
    Disk {
        device: drive.device(),
        outstanding: 0,
        busy_since: Instant(0),
        stats: DiskStats {
            name,
            ..DiskStats::default()
        },
    }
}

fn new_cache(spec: CacheSpec, data_blocks: u64) -> WriteCache {
    let blocks = u64::from(spec.capacity_mib) * (1 << 20) / BLOCK_BYTES;
    WriteCache::new(blocks, data_blocks, spec.latency)
}

/// The counters of every LUN's copy-on-first-write, added up.
fn counters_summed(cows: &[CopyOnWrite]) -> CowCounters {
    cows.iter()
        .map(CopyOnWrite::counters)
        .fold(CowCounters::default(), |sum, lun| CowCounters {
            chunks_copied: sum.chunks_copied + lun.chunks_copied,
            writes_held: sum.writes_held + lun.writes_held,
            pool_exhausted: sum.pool_exhausted + lun.pool_exhausted,
        })
}

/// Counts a finished command in its disk's counters.
fn count(disk: &mut Disk, kind: Kind, completion: &Completion) {
    let stats = &mut disk.stats;
    let blocks = u64::from(completion.blocks);
    let latency_ns = completion.latency().0;
    stats.count_seek(&completion.service);
    match kind {
        Kind::UserRead => {
            stats.user_reads += 1;
            stats.user_read_blocks += blocks;
            stats.read_latency_ns += latency_ns;
        }
        Kind::CpRead => {
            stats.cp_reads += 1;
            stats.cp_read_blocks += blocks;
            stats.cp_read_latency_ns += latency_ns;
        }
        Kind::Write => {
            stats.writes += 1;
            stats.write_blocks += blocks;
            stats.write_latency_ns += latency_ns;
        }
    }
    disk.outstanding -= 1;
    if disk.outstanding == 0 {
        stats.busy_ns += (completion.finished_at - disk.busy_since).0;
    }
}

impl Array for InPlaceArray {
    fn name(&self) -> &str {
        &self.name
    }

    fn kind(&self) -> ArrayKind {
        ArrayKind::InPlace
    }

    fn capacity_bytes(&self) -> u64 {
        self.luns.iter().map(|lun| lun.bytes).sum()
    }

    fn lun_bytes(&self) -> Vec<u64> {
        self.luns.iter().map(|lun| lun.bytes).collect()
    }

    /// Nothing to do: every block has a fixed home, so writing the test file
    /// once changes no layout, a reallocate has nothing to move, and the
    /// model keeps no data.
    fn prepare(&mut self, _plan: &PreparePlan, progress: &mut dyn FnMut(f64)) {
        progress(1.0);
    }

    fn submit(&mut self, now: Instant, io: HostIo) {
        assert!(now >= self.clock, "array driven backwards in time");
        assert!(
            self.earliest_event().is_none_or(|event| event >= now),
            "submit at {now:?} with an earlier event pending: advance the array first"
        );
        let capacity = self.capacity_bytes();
        assert!(
            io.length > 0 && io.end() <= capacity,
            "host I/O {io:?} outside the LUNs' {capacity} bytes",
        );
        assert!(io.id < PART_ID_BASE, "host I/O ids below 2^62");
        self.clock = now;
        self.start_host_io(now, &io);
    }

    fn next_event(&self) -> Option<Instant> {
        self.earliest_event()
    }

    fn advance(&mut self, now: Instant, done: &mut Vec<HostCompletion>) {
        assert!(now >= self.clock, "array driven backwards in time");
        let from = done.len();
        while let Some(at) = self.earliest_event().filter(|&at| at <= now) {
            self.clock = at;
            self.answer_due(at, done);
            self.run_disks_at(at, done);
            self.release_commands(at);
        }
        self.join_parts(from, done);
        self.clock = now;
    }

    /// Starts a SnapView session on every LUN that can take one: the array
    /// has a reserved LUN pool and the LUN fewer than
    /// [`SESSIONS_PER_LUN_MAX`]; the others refuse theirs.
    fn take_snapshot(&mut self, now: Instant) {
        assert!(now >= self.clock, "array driven backwards in time");
        self.clock = now;
        if self.cows.is_empty() {
            self.snapshots_refused += self.luns.len() as u64;
        }
        for cow in &mut self.cows {
            if !cow.take_snapshot() {
                self.snapshots_refused += 1;
            }
        }
    }

    fn snapshot_stats(&self) -> SnapshotStats {
        let taken = self.cows.iter().map(CopyOnWrite::snapshots).sum();
        SnapshotStats {
            requested: taken + self.snapshots_refused,
            taken,
            refused: self.snapshots_refused,
            copy_on_write: (!self.cows.is_empty()).then(|| counters_summed(&self.cows)),
        }
    }

    fn disk_stats(&self) -> Vec<DiskStats> {
        self.disks
            .iter()
            .map(|disk| {
                let mut stats = disk.stats.clone();
                if disk.outstanding > 0 {
                    stats.busy_ns += (self.clock - disk.busy_since).0;
                }
                stats
            })
            .collect()
    }
}

#[cfg(test)]
mod tests;
