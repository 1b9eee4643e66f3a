//! The in-place comparator: a classic RAID-5 array (HP EVA VRAID5, an EMC
//! CLARiiON RAID-5 LUN) behind the lab's [`Array`] interface.
//!
//! One LUN is striped over a disk group (module `layout`) and updated in place:
//! every LUN block has a fixed home on one disk, so the array never ages or
//! fragments. What the model does:
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
//!   chunk of the LUN waits while the chunk's old contents are read (as CP
//!   reads: reads a write costs) and written to the reserved LUN pool, a
//!   RAID-5 LUN of its own on the same disk group, right after the source
//!   LUN (from the next stripe on), filled in the order chunks are copied.
//!   The copy's write goes through the write-back cache like any write
//!   (admitted, the copy is done; the host's write follows at once), or,
//!   without a cache, to the disks (done when its stripe update is). The old
//!   chunk is read from the cache if every block of it is there. Reads of a
//!   snapshot are not modelled: no workload addresses one.
//!
//! Not modelled: the controllers' CPU and the host link (both are taken as
//! infinitely fast), a read cache and read-ahead in the controller (the
//! drives keep their own), sparing and rebuild. The LUN occupies the lowest
//! addresses of every disk.
//!
//! The disks are `wafer_devices` models, driven by the devices' call
//! order: inside [`Array::advance`] the array always moves to the earliest
//! event of any disk or of the cache, so a disk is never handed a request
//! while it still has an earlier event pending. Everything is deterministic.

mod block_set;
mod cache;
mod cow;
mod layout;

use std::collections::{BTreeMap, VecDeque};

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
use self::layout::{Layout, Piece, StripeWrite, covering_blocks};

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
    /// Disks in the group.
    pub disks: u32,
    /// Bytes per chunk (the stripe unit), a multiple of 4 KiB.
    pub stripe_unit_bytes: u64,
    /// Data chunks per stripe; `None` for `disks - 1` (classic RAID-5).
    pub stripe_width: Option<u32>,
    /// Size of the LUN in bytes.
    pub lun_bytes: u64,
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
/// chunk's number added to it): reads of old chunks, writes to the pool.
const COPY_ID_BASE: u64 = 1 << 63;

/// The id of `chunk`'s copy.
fn copy_id(chunk: u64) -> u64 {
    COPY_ID_BASE | chunk
}

/// The chunk whose copy `id` is, if it is one.
fn copied_chunk(id: u64) -> Option<u64> {
    id.checked_sub(COPY_ID_BASE)
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

/// One disk of the group, its counters and its next event.
struct Disk {
    device: Box<dyn Device>,
    outstanding: u32,
    busy_since: Instant,
    stats: DiskStats,
}

/// The in-place RAID-5 comparator array.
pub struct InPlaceArray {
    name: String,
    lun_bytes: u64,
    layout: Layout,
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
    /// Copy-on-first-write snapshots, if the array has a reserved LUN pool.
    cow: Option<CopyOnWrite>,
    /// Host writes waiting for chunk copies, by id.
    held_writes: FixedMap<u64, HeldWrite>,
    /// Snapshots asked for that the LUN could not take (no reserved LUN
    /// pool, or it had its most).
    snapshots_refused: u64,
}

impl InPlaceSpec {
    /// Checks that the array can be built from `catalog`'s drives.
    pub fn check(&self, catalog: &Catalog) -> Result<(), InPlaceError> {
        self.layout(catalog).map(|_| ())
    }

    /// The drive and the layout, checked.
    fn layout<'a>(&self, catalog: &'a Catalog) -> Result<(&'a Drive, Layout), InPlaceError> {
        let drive = find_drive(self, catalog)?;
        let width = check_geometry(self)?;
        check_reserved_pool(self)?;
        let chunk_blocks = self.stripe_unit_bytes / BLOCK_BYTES;
        let stripe_blocks = u64::from(width) * chunk_blocks;
        let layout = Layout::new(self.disks, width, chunk_blocks, self.blocks(stripe_blocks));
        check_capacity(self, &layout, drive.device().capacity_blocks())?;
        Ok((drive, layout))
    }

    /// Blocks of the LUN.
    fn lun_blocks(&self) -> u64 {
        self.lun_bytes.div_ceil(BLOCK_BYTES)
    }

    /// Where the reserved LUN pool starts: the first stripe after the LUN's
    /// (stripes of `stripe_blocks`).
    fn pool_first(&self, stripe_blocks: u64) -> u64 {
        self.lun_blocks().next_multiple_of(stripe_blocks)
    }

    /// Blocks the group holds: the LUN's, and the pool's after them.
    fn blocks(&self, stripe_blocks: u64) -> u64 {
        match self.snapshots {
            None => self.lun_blocks(),
            Some(pool) => self.pool_first(stripe_blocks) + pool.pool_bytes / BLOCK_BYTES,
        }
    }

    /// The copy-on-first-write state, if the array has a reserved LUN pool.
    fn copy_on_write(&self, stripe_blocks: u64) -> Option<CopyOnWrite> {
        self.snapshots.map(|pool| {
            CopyOnWrite::new(
                pool.chunk_bytes / BLOCK_BYTES,
                self.lun_blocks(),
                self.pool_first(stripe_blocks),
                pool.pool_bytes / BLOCK_BYTES,
            )
        })
    }
}

impl InPlaceArray {
    /// Builds the array of `spec` from `catalog`'s drives, idle at time 0.
    pub fn new(spec: &InPlaceSpec, catalog: &Catalog) -> Result<InPlaceArray, InPlaceError> {
        let (drive, layout) = spec.layout(catalog)?;
        let blocks = spec.blocks(layout.stripe_blocks());
        let disks: Vec<Disk> = (0..spec.disks)
            .map(|index| new_disk(drive, index))
            .collect();
        Ok(InPlaceArray {
            name: spec.name.clone(),
            lun_bytes: spec.lun_bytes,
            layout,
            next_events: NextEvents::new(disks.len()),
            disks,
            clock: Instant(0),
            commands: FixedMap::default(),
            reads: FixedMap::default(),
            writes: FixedMap::default(),
            updates: FixedMap::default(),
            stripe_queues: FixedMap::default(),
            cache: spec.cache.map(|cache| new_cache(cache, blocks)),
            destages_running: 0,
            answers: BTreeMap::new(),
            next_id: 0,
            controller: spec
                .controller
                .as_ref()
                .map(|c| Controller::new(c.per_command)),
            cow: spec.copy_on_write(layout.stripe_blocks()),
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

    fn submit_read(&mut self, now: Instant, io: &HostIo) {
        let (first, end) = covering_blocks(io.offset, io.length);
        if let Some(cache) = &self.cache
            && cache.holds(first, end)
        {
            let latency = cache.latency();
            self.answer_at(now + latency, io.id, now);
            return;
        }
        self.read_from_disks(now, io.id, first, end, Kind::UserRead);
    }

    /// Reads blocks `first..end` for `id` from the disks.
    fn read_from_disks(&mut self, now: Instant, id: u64, first: u64, end: u64, kind: Kind) {
        let pieces = self.layout.read_pieces(first, end);
        let pending = Pending {
            submitted_at: now,
            parts_left: pieces.len(),
        };
        self.reads.insert(id, pending);
        for piece in pieces {
            self.issue(now, piece, kind, Owner::Read(id));
        }
    }

    /// A host write: held while the chunks it overwrites are copied for the
    /// snapshots, if any must be, else under way at once.
    fn submit_write(&mut self, now: Instant, io: &HostIo) {
        let (first, end) = covering_blocks(io.offset, io.length);
        let Some(cow) = &mut self.cow else {
            self.write(now, io.id, now, first, end);
            return;
        };
        let (copies_left, starts) = cow.before_write(io.id, first, end);
        if copies_left == 0 {
            self.write(now, io.id, now, first, end);
            return;
        }
        let held = HeldWrite {
            submitted_at: now,
            first,
            end,
            copies_left,
        };
        self.held_writes.insert(io.id, held);
        for copy in starts {
            self.start_copy(now, copy);
        }
    }

    /// Writes blocks `first..end` for `id` (submitted at `submitted_at`):
    /// into the cache if it has one and they fit it, else to the disks.
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

    /// Starts a chunk copy: its read, from the cache if every block of it
    /// is there, else from the disks.
    fn start_copy(&mut self, now: Instant, copy: ChunkCopy) {
        let cached =
            (self.cache.as_ref()).is_some_and(|c| c.holds(copy.source.start, copy.source.end));
        match cached {
            true => self.chunk_read(now, copy.chunk),
            false => {
                let id = copy_id(copy.chunk);
                self.read_from_disks(now, id, copy.source.start, copy.source.end, Kind::CpRead);
            }
        }
    }

    /// `chunk`'s old contents are read: write them to the pool.
    fn chunk_read(&mut self, now: Instant, chunk: u64) {
        let cow = self.cow.as_ref().expect("copies come from snapshots");
        let target = cow.target(chunk);
        self.write(now, copy_id(chunk), now, target.start, target.end);
    }

    /// `chunk`'s copy is in the pool: the writes that waited for it and
    /// for no other go ahead.
    fn chunk_copied(&mut self, now: Instant, chunk: u64) {
        let cow = self.cow.as_mut().expect("copies come from snapshots");
        for id in cow.copied(chunk) {
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
        let stripe_writes = self.layout.stripe_writes(first, end);
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
                Some(chunk) => copied.push(chunk),
                None => self.answer_at(now + latency, write.id, write.submitted_at),
            }
        }
        for chunk in copied {
            self.chunk_copied(now, chunk);
        }
    }

    /// Starts destages while the cache has dirty stripes that are not busy and
    /// the destager has room.
    fn start_destages(&mut self, now: Instant) {
        let destages_max = DESTAGES_PER_DISK * self.layout.disks();
        while self.destages_running < destages_max {
            let Some(cache) = &mut self.cache else {
                return;
            };
            let queues = &self.stripe_queues;
            let busy = |stripe: u64| queues.contains_key(&stripe);
            let stripe_blocks = self.layout.stripe_blocks();
            let Some((first, end)) = cache.take_run(stripe_blocks, busy, queues.len()) else {
                return;
            };
            let mut writes = self.layout.stripe_writes(first, end);
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
        let plan = self.layout.plan(&update.write);
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
            (Some(chunk), HostOp::Read) => self.chunk_read(now, chunk),
            (Some(chunk), HostOp::Write) => self.chunk_copied(now, chunk),
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

/// Checks disks, stripe unit and width; returns the width.
fn check_geometry(spec: &InPlaceSpec) -> Result<u32, InPlaceError> {
    let invalid = |field, reason: String| InPlaceError::Invalid {
        array: spec.name.clone(),
        field,
        reason,
    };
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
    if spec.lun_bytes == 0 {
        return Err(invalid("lun", "the LUN is empty".to_string()));
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
/// chunk at least.
fn check_reserved_pool(spec: &InPlaceSpec) -> Result<(), InPlaceError> {
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
    if pool.pool_bytes < chunk {
        let reason = format!("{} bytes hold no {chunk}-byte chunk", pool.pool_bytes);
        return Err(invalid("reserved_lun_pool", reason));
    }
    Ok(())
}

/// Checks that the LUN fits on the disks.
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
    let pool = match spec.snapshots {
        Some(pool) => format!(" and its {}-byte reserved LUN pool", pool.pool_bytes),
        None => String::new(),
    };
    Err(InPlaceError::Invalid {
        array: spec.name.clone(),
        field: "lun",
        reason: format!(
            "{} bytes{pool} do not fit in the group's {usable_gb} GB of data space",
            spec.lun_bytes
        ),
    })
}

fn new_disk(drive: &Drive, index: u32) -> Disk {
    Disk {
        device: drive.device(),
        outstanding: 0,
        busy_since: Instant(0),
        stats: DiskStats {
            name: format!("d{index:02}"),
            ..DiskStats::default()
        },
    }
}

fn new_cache(spec: CacheSpec, lun_blocks: u64) -> WriteCache {
    let blocks = u64::from(spec.capacity_mib) * (1 << 20) / BLOCK_BYTES;
    WriteCache::new(blocks, lun_blocks, spec.latency)
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
        self.lun_bytes
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
        assert!(
            io.length > 0 && io.end() <= self.lun_bytes,
            "host I/O {io:?} outside the {}-byte LUN",
            self.lun_bytes
        );
        assert!(io.id < COPY_ID_BASE, "host I/O ids below 2^63");
        self.clock = now;
        match io.op {
            HostOp::Read => self.submit_read(now, &io),
            HostOp::Write => self.submit_write(now, &io),
        }
    }

    fn next_event(&self) -> Option<Instant> {
        self.earliest_event()
    }

    fn advance(&mut self, now: Instant, done: &mut Vec<HostCompletion>) {
        assert!(now >= self.clock, "array driven backwards in time");
        while let Some(at) = self.earliest_event().filter(|&at| at <= now) {
            self.clock = at;
            self.answer_due(at, done);
            self.run_disks_at(at, done);
            self.release_commands(at);
        }
        self.clock = now;
    }

    /// Starts a SnapView session, if the array has a reserved LUN pool and
    /// the LUN fewer than [`SESSIONS_PER_LUN_MAX`].
    fn take_snapshot(&mut self, now: Instant) {
        assert!(now >= self.clock, "array driven backwards in time");
        self.clock = now;
        let taken = self.cow.as_mut().is_some_and(CopyOnWrite::take_snapshot);
        if !taken {
            self.snapshots_refused += 1;
        }
    }

    fn snapshot_stats(&self) -> SnapshotStats {
        let taken = self.cow.as_ref().map_or(0, CopyOnWrite::snapshots);
        SnapshotStats {
            requested: taken + self.snapshots_refused,
            taken,
            refused: self.snapshots_refused,
            copy_on_write: self.cow.as_ref().map(CopyOnWrite::counters),
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
