//! The simulated world: the filer, in-memory disks and NVRAM, and virtual time.
//!
//! Every I/O the filer asks for completes after a seeded random latency, disk
//! I/Os in any order, NVRAM operations in the order issued (as a real NVLog
//! group-commits). The disks keep the pristine bytes as written, and faults are
//! injected on top of that, within what RAID promises to survive: in no stripe
//! do dead disks plus damaged blocks exceed the group's parity disks. The fault
//! model:
//!
//! - **dead disk**: every later I/O to it fails; the filer puts the spare in
//!   its place (the world honours `AssignSpare` with its last spare) and
//!   rebuilds it, and until the filer says the rebuild is done the new disk
//!   counts as dead against the group's budget;
//! - **latent sector error**: a written block can no longer be read;
//! - **bit rot**: a bit of a written block flips;
//! - **lost write**: a write is acknowledged but never lands;
//! - **misdirected write**: a write lands on another block of the same disk;
//! - **host refusal**: writes to some disks (or all) answer `Unwritable`, as
//!   a full host file system or an immutable disk file does, and land
//!   nothing, until the filer is mounted again (space came back); any number
//!   of disks, beyond the promise too, since no disk has failed. But a
//!   refused write leaves its stripe half written (the rest of the CP's
//!   writes to it may land), which is the write hole a crash leaves: so, as
//!   at a crash, a write to a stripe that already holds a fault (a dead disk,
//!   a damaged block) is not refused but lands;
//! - **crash**: the filer vanishes; writes in flight land whole, torn, or not at
//!   all; NVRAM appends in flight persist as a prefix, the last one possibly
//!   torn. The filer then mounts again from what is there. A stripe left half
//!   written (a write in flight to it did not land whole) has no
//!   redundancy left until the filer writes its parity again (the RAID write
//!   hole, closed by the mount's resync): its parity still covers the old
//!   content of the free blocks the CP overwrote, which is gone. So no fault
//!   touches such a stripe, nor its group's disks, until then, and writes in
//!   flight to a stripe that already holds a fault land whole.
//!
//! A damaged block stops counting against its stripe once it is written again.
//!
//! The world runs either payload of the engine ([`SimPayload`]): real bytes,
//! or one stamp per block. Every fault applies to both (bit rot flips a bit of
//! the bytes or of the stamp) except the crash, which needs a filer that mounts
//! from its disks, and only a byte filer does: a stamp filer's disks hold
//! digests of its metadata, not the metadata. Either way the harness gets its
//! reads as bytes, as a host would.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use wafer_core::aggregate::{Layout, Slot};
use wafer_core::filer::{
    HostError, HostRequest, Io, IoId, IoOp, IoResult, Options, Reply, ReplyData, Sector,
};
use wafer_core::format::Trailer;
use wafer_core::payload::{Bytes, Payload, Stamps};
use wafer_core::units::{DiskId, Duration, Instant};
use wafer_core::{BLOCK_SIZE, Block, Filer};
use wafer_raid::{Stamp, StripeUnit};
use wafer_rng::Rng;

/// A payload the world can run: how bit rot damages a block of it, and
/// whether its filer can crash and mount again.
pub trait SimPayload: Payload {
    /// Flips one bit of `content`, drawn from `rng`.
    fn rot(content: &mut Self::Content, rng: &mut Rng);

    /// The world as one whose filer can crash and mount again from its disks,
    /// if it is one: a byte world is, a stamp world is not.
    fn remountable(world: &mut World<Self>) -> Option<&mut World<Bytes>>;
}

impl SimPayload for Bytes {
    fn rot(content: &mut Box<Block>, rng: &mut Rng) {
        let byte = rng.below(BLOCK_SIZE as u64) as usize;
        let bit = 1u8 << rng.below(8);
        content[byte] ^= bit;
    }

    fn remountable(world: &mut World) -> Option<&mut World> {
        Some(world)
    }
}

impl SimPayload for Stamps {
    fn rot(content: &mut Stamp, rng: &mut Rng) {
        content.0 ^= 1 << rng.below(64);
    }

    fn remountable(_: &mut World<Stamps>) -> Option<&mut World> {
        None
    }
}

/// The shape of an I/O the filer issued: everything but the data, so the
/// engine's decisions can be compared between payloads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoShape {
    /// A disk read.
    Read {
        /// The disk.
        disk: DiskId,
        /// First block.
        dbn: u64,
        /// Blocks.
        count: u32,
    },
    /// A disk write.
    Write {
        /// The disk.
        disk: DiskId,
        /// First block.
        dbn: u64,
        /// Blocks.
        count: u32,
    },
    /// A spare put in a failed member's place.
    AssignSpare {
        /// The failed member.
        member: DiskId,
    },
    /// An NVLog append.
    NvlogAppend {
        /// The half.
        half: u8,
        /// The record's length in bytes.
        bytes: usize,
    },
    /// An NVLog half discarded.
    NvlogReset {
        /// The half.
        half: u8,
    },
}

impl IoShape {
    fn of<P: Payload>(op: &IoOp<P>) -> IoShape {
        match op {
            IoOp::Read { disk, dbn, count } => IoShape::Read {
                disk: *disk,
                dbn: dbn.0,
                count: *count,
            },
            IoOp::Write { disk, dbn, sectors } => IoShape::Write {
                disk: *disk,
                dbn: dbn.0,
                count: sectors.len() as u32,
            },
            IoOp::AssignSpare { member } => IoShape::AssignSpare { member: *member },
            IoOp::NvlogAppend { half, record } => IoShape::NvlogAppend {
                half: *half,
                bytes: record.encoded_len(),
            },
            IoOp::NvlogReset { half } => IoShape::NvlogReset { half: *half },
        }
    }
}

/// How often each fault is injected, in parts per million of opportunities.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FaultRates {
    /// Per disk write: the write is acknowledged but lost.
    pub lost_write: u64,
    /// Per disk write: the write lands on another block.
    pub misdirected_write: u64,
    /// Per simulation step: a random written block rots.
    pub bit_rot: u64,
    /// Per simulation step: a random written block becomes unreadable.
    pub latent_error: u64,
}

impl FaultRates {
    /// No faults at all.
    pub const NONE: FaultRates = FaultRates {
        lost_write: 0,
        misdirected_write: 0,
        bit_rot: 0,
        latent_error: 0,
    };
}

#[derive(Clone, Debug)]
enum Pending<P: Payload> {
    Disk(Io<P>),
    Nvram(Io<P>),
}

/// One simulated disk.
#[derive(Clone, Debug, Default)]
struct SimDisk<P: Payload> {
    sectors: BTreeMap<u64, Sector<P>>,
    unreadable: BTreeSet<u64>,
    dead: bool,
    /// A spare put in a dead disk's place, not yet rebuilt.
    rebuilding: bool,
}

impl<P: Payload> SimDisk<P> {
    /// Whether the disk counts as lost to its RAID group.
    fn out_of_service(&self) -> bool {
        self.dead || self.rebuilding
    }
}

/// The filer in its simulated world, over payload `P` (real bytes unless
/// stamps are asked for).
pub struct World<P: SimPayload = Bytes> {
    /// The filer under test.
    pub filer: Filer<P>,
    layout: Layout,
    options: Options,
    disks: Vec<SimDisk<P>>,
    nvram: [Vec<u8>; 2],
    events: BTreeMap<(Instant, u64), Pending<P>>,
    nvram_queue_end: Instant,
    seq: u64,
    now: Instant,
    rng: Rng,
    /// Blocks damaged behind the filer's back, by (disk, dbn).
    damaged: BTreeSet<(DiskId, u64)>,
    /// Stripes a crash left half written, by (group, dbn), until a parity
    /// write lands on them.
    unprotected: BTreeSet<(usize, u64)>,
    /// Disks whose writes the host refuses until the next mount.
    refusing: BTreeSet<DiskId>,
    /// Fault rates in force.
    pub faults: FaultRates,
    replies: VecDeque<Reply>,
    /// Faults injected so far, by kind.
    pub injected: BTreeMap<&'static str, u64>,
    /// The shapes of the I/Os issued since [`World::record_io`], in order.
    io_log: Option<Vec<IoShape>>,
}

impl<P: SimPayload> World<P> {
    /// A world with blank disks and a freshly formatted filer.
    pub fn format(layout: Layout, options: Options, seed: u64) -> World<P> {
        let disks = vec![SimDisk::default(); layout.disk_count() as usize];
        let filer = Filer::format(layout.clone(), options.clone(), Instant(0));
        let mut world = World {
            filer,
            layout,
            options,
            disks,
            nvram: [Vec::new(), Vec::new()],
            events: BTreeMap::new(),
            nvram_queue_end: Instant(0),
            seq: 0,
            now: Instant(0),
            rng: Rng::seeded(seed),
            damaged: BTreeSet::new(),
            unprotected: BTreeSet::new(),
            refusing: BTreeSet::new(),
            faults: FaultRates::NONE,
            replies: VecDeque::new(),
            injected: BTreeMap::new(),
            io_log: None,
        };
        world.drain();
        world
    }

    /// Starts keeping the shape of every I/O the filer issues from now on.
    pub fn record_io(&mut self) {
        self.io_log.get_or_insert_with(Vec::new);
    }

    /// The shapes of the I/Os issued since [`World::record_io`] (none if it
    /// was never called), oldest first.
    pub fn io_log(&self) -> &[IoShape] {
        self.io_log.as_deref().unwrap_or_default()
    }

    /// Runs until the filer is online, or says why it cannot be.
    pub fn wait_online(&mut self) -> Result<(), String> {
        loop {
            if self.filer.is_online() {
                return Ok(());
            }
            if let Some(error) = self.filer.mount_error() {
                return Err(format!("mount failed: {error}"));
            }
            if !self.step() {
                return Err("the filer stalled before coming online".into());
            }
        }
    }

    /// Virtual time now.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// The aggregate's layout.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The seeded generator the world uses (workloads draw from it too).
    pub fn rng(&mut self) -> &mut Rng {
        &mut self.rng
    }

    /// Whether anything is still in flight.
    pub fn is_idle(&self) -> bool {
        self.events.is_empty()
    }

    /// Replies received so far, oldest first.
    pub fn take_replies(&mut self) -> Vec<Reply> {
        self.replies.drain(..).collect()
    }

    /// Moves the filer's output into the world: I/Os become events, replies
    /// are kept for the harness.
    pub fn drain(&mut self) {
        while let Some(io) = self.filer.poll_io() {
            self.schedule(io);
        }
        while let Some(reply) = self.filer.poll_reply() {
            self.replies.push_back(reply.into_bytes());
        }
    }

    fn schedule(&mut self, io: Io<P>) {
        if let Some(log) = &mut self.io_log {
            log.push(IoShape::of(&io.op));
        }
        self.seq += 1;
        match io.op {
            IoOp::NvlogAppend { .. } | IoOp::NvlogReset { .. } => {
                let start = self.now.max(self.nvram_queue_end);
                self.nvram_queue_end = start + Duration(10_000 + self.rng.below(20_000));
                self.events
                    .insert((self.nvram_queue_end, self.seq), Pending::Nvram(io));
            }
            _ => {
                let latency = Duration(50_000 + self.rng.below(2_000_000));
                self.events
                    .insert((self.now + latency, self.seq), Pending::Disk(io));
            }
        }
    }

    /// Runs the next event (or the filer's timer if it comes first). Returns
    /// false when nothing at all is pending.
    pub fn step(&mut self) -> bool {
        let next_event = self.events.keys().next().map(|(t, _)| *t);
        let timer = self.filer.poll_timeout();
        match (next_event, timer) {
            (_, Some(t)) if next_event.is_none_or(|e| t < e) => {
                self.now = self.now.max(t);
                self.filer.handle_timeout(self.now);
            }
            (Some(_), _) => {
                let ((time, _), pending) = self.events.pop_first().expect("an event");
                self.now = self.now.max(time);
                self.inject_background_faults();
                let (id, result) = self.perform(pending);
                self.filer.handle_io_done(self.now, id, result);
                self.note_rebuilds();
            }
            (None, None) => return false,
            (None, Some(_)) => unreachable!("covered by the first arm"),
        }
        self.drain();
        true
    }

    /// Submits a host request and runs the world until the filer answers it.
    ///
    /// # Panics
    /// If the filer is not online or never answers.
    pub fn request(&mut self, request: HostRequest) -> Result<ReplyData, HostError> {
        let id = self.filer.submit(self.now, request).expect("online");
        self.drain();
        loop {
            if let Some(reply) = self.take_replies().into_iter().find(|r| r.id == id) {
                return reply.result;
            }
            assert!(self.step(), "the request never completed");
        }
    }

    /// Has the filer bring every indirect block into memory and keep it
    /// there, and runs until it has (what a whole-tree invariant check needs).
    pub fn pin_indirect(&mut self) -> Result<(), String> {
        self.filer.pin_indirect(true);
        self.drain();
        while self.step() {}
        match self.filer.indirect_complete() {
            true => Ok(()),
            false => Err("indirect blocks still absent after pinning them".into()),
        }
    }

    /// Advances virtual time by `span` with nothing happening but timers.
    pub fn idle(&mut self, span: Duration) {
        let until = self.now + span;
        while let Some(t) = self.filer.poll_timeout().filter(|t| *t <= until) {
            self.now = self.now.max(t);
            self.filer.handle_timeout(self.now);
            self.drain();
            while self.events.keys().next().is_some() && self.step() {}
        }
        self.now = self.now.max(until);
    }

    fn perform(&mut self, pending: Pending<P>) -> (IoId, IoResult<P>) {
        match pending {
            Pending::Nvram(io) => {
                match io.op {
                    IoOp::NvlogAppend { half, record } => {
                        self.nvram[usize::from(half)].extend_from_slice(&record.encode())
                    }
                    IoOp::NvlogReset { half } => self.nvram[usize::from(half)].clear(),
                    _ => unreachable!("NVRAM queue holds NVRAM operations"),
                }
                (io.id, IoResult::Done)
            }
            Pending::Disk(io) => {
                let result = self.disk_io(&io.op);
                (io.id, result)
            }
        }
    }

    fn disk_io(&mut self, op: &IoOp<P>) -> IoResult<P> {
        match op {
            IoOp::Read { disk, dbn, count } => {
                let d = &self.disks[disk.0 as usize];
                if d.dead {
                    return IoResult::DiskFailed;
                }
                IoResult::Read(
                    (dbn.0..dbn.0 + u64::from(*count))
                        .map(|n| match d.unreadable.contains(&n) {
                            true => None,
                            false => Some(d.sectors.get(&n).cloned().unwrap_or_else(blank_sector)),
                        })
                        .collect(),
                )
            }
            IoOp::Write { disk, dbn, sectors } => {
                if self.disks[disk.0 as usize].dead {
                    return IoResult::DiskFailed;
                }
                let count = sectors.len() as u64;
                if self.refusing.contains(disk) && !self.holds_fault(*disk, dbn.0, count) {
                    self.refuse(*disk, dbn.0, count);
                    return IoResult::Unwritable;
                }
                for (n, sector) in sectors.iter().enumerate() {
                    self.land_write(*disk, dbn.0 + n as u64, sector.clone());
                }
                IoResult::Done
            }
            IoOp::AssignSpare { member } => self.assign_spare(*member),
            IoOp::NvlogAppend { .. } | IoOp::NvlogReset { .. } => {
                unreachable!("NVRAM operations queue apart")
            }
        }
    }

    /// Puts the last spare in a dead member's place (the layout loses a
    /// spare); a member already replaced stays as it is.
    fn assign_spare(&mut self, member: DiskId) -> IoResult<P> {
        if !self.disks[member.0 as usize].dead {
            return IoResult::Done;
        }
        let spares = self.layout.spares();
        if spares == 0 {
            return IoResult::DiskFailed;
        }
        let spare = self.disks.pop().expect("a spare disk");
        self.disks[member.0 as usize] = SimDisk {
            rebuilding: true,
            ..spare
        };
        self.damaged.retain(|(d, _)| *d != member);
        self.layout = Layout::new(self.layout.groups().to_vec(), spares - 1)
            .expect("the same groups make a valid layout");
        self.count("spare assigned");
        IoResult::Done
    }

    /// A disk the filer has finished rebuilding is back in service.
    fn note_rebuilds(&mut self) {
        if !self.filer.is_online() {
            return;
        }
        for id in 0..self.disks.len() {
            let Some(Slot::Member { group, disk }) = self.layout.slot(DiskId(id as u32)) else {
                continue;
            };
            if self.disks[id].rebuilding && !self.filer.failed_disks()[group].contains(disk) {
                self.disks[id].rebuilding = false;
                self.count("disk rebuilt");
            }
        }
    }

    /// Writes one sector, perhaps losing or misdirecting it.
    fn land_write(&mut self, disk: DiskId, dbn: u64, sector: Sector<P>) {
        if self.roll(self.faults.lost_write) && self.may_damage(disk, dbn) {
            self.count("lost write");
            // Losing a write of what the block already holds damages nothing.
            if self.disks[disk.0 as usize].sectors.get(&dbn) != Some(&sector) {
                self.damaged.insert((disk, dbn));
            }
            return;
        }
        if self.roll(self.faults.misdirected_write) {
            let blocks = self.blocks_on(disk);
            let victim = self.rng.below(blocks);
            if victim != dbn && self.may_damage(disk, dbn) && self.may_damage(disk, victim) {
                self.count("misdirected write");
                // As with a lost write: missing a block that already holds
                // what was meant for it damages nothing there.
                if self.disks[disk.0 as usize].sectors.get(&dbn) != Some(&sector) {
                    self.damaged.insert((disk, dbn));
                }
                self.store(disk, victim, sector);
                self.damaged.insert((disk, victim));
                return;
            }
        }
        self.store(disk, dbn, sector);
        self.damaged.remove(&(disk, dbn));
        self.note_parity_written(disk, dbn);
    }

    /// A parity block of a stripe a crash left half written has been written
    /// again: its parity covers what is on its disks once more.
    fn note_parity_written(&mut self, disk: DiskId, dbn: u64) {
        if let Some(Slot::Member { group, disk }) = self.layout.slot(disk)
            && self.layout.groups()[group].parity_set().contains(disk)
        {
            self.unprotected.remove(&(group, dbn));
        }
    }

    /// From now until the next mount, the host refuses every write to
    /// `disks` (a full file system, or disk files made immutable).
    pub fn refuse_writes(&mut self, disks: impl IntoIterator<Item = DiskId>) {
        self.refusing.extend(disks);
        self.count("host refused writes");
    }

    /// Whether the host refuses writes to some disk.
    pub fn is_refusing_writes(&self) -> bool {
        !self.refusing.is_empty()
    }

    /// The host can store writes again.
    pub fn accept_writes(&mut self) {
        self.refusing.clear();
    }

    /// A refused write landed nothing, but the rest of its stripes' writes
    /// may have: they are half written until their parity is written again.
    fn refuse(&mut self, disk: DiskId, dbn: u64, count: u64) {
        if let Some(Slot::Member { group, .. }) = self.layout.slot(disk) {
            self.unprotected
                .extend((dbn..dbn + count).map(|at| (group, at)));
        }
    }

    /// Whether a stripe of the `count` blocks from `dbn` of `disk` holds a
    /// fault already: a disk out of service or a damaged block. Such a stripe
    /// has no redundancy to spare for a write hole too: with its parity
    /// rewritten and a block of it not (or the reverse), a block that lives
    /// only in parity, or stands in for a damaged one, cannot be rebuilt.
    fn holds_fault(&self, disk: DiskId, dbn: u64, count: u64) -> bool {
        (dbn..dbn + count).any(|at| self.stripe_faults(disk, at) > 0)
    }

    /// Whether a crash left the stripe of (`disk`, `dbn`) half written.
    fn is_unprotected(&self, disk: DiskId, dbn: u64) -> bool {
        match self.layout.slot(disk) {
            Some(Slot::Member { group, .. }) => self.unprotected.contains(&(group, dbn)),
            _ => false,
        }
    }

    fn store(&mut self, disk: DiskId, dbn: u64, sector: Sector<P>) {
        let d = &mut self.disks[disk.0 as usize];
        d.unreadable.remove(&dbn);
        d.sectors.insert(dbn, sector);
    }

    fn blocks_on(&self, disk: DiskId) -> u64 {
        match self.layout.slot(disk) {
            Some(Slot::Member { group, .. }) => self.layout.groups()[group].blocks_per_disk(),
            _ => 1,
        }
    }

    fn roll(&mut self, parts_per_million: u64) -> bool {
        parts_per_million > 0 && self.rng.chance(parts_per_million, 1_000_000)
    }

    fn count(&mut self, kind: &'static str) {
        *self.injected.entry(kind).or_default() += 1;
    }

    /// Whether one more damaged block at (`disk`, `dbn`) stays within what the
    /// stripe survives.
    fn may_damage(&self, disk: DiskId, dbn: u64) -> bool {
        let Some(Slot::Member { group, .. }) = self.layout.slot(disk) else {
            return false;
        };
        if self.damaged.contains(&(disk, dbn)) || self.unprotected.contains(&(group, dbn)) {
            return false;
        }
        let geometry = &self.layout.groups()[group];
        let (members, dead) = self.members_and_dead(group);
        let damaged = members
            .iter()
            .filter(|d| self.damaged.contains(&(**d, dbn)))
            .count();
        !self.disks[disk.0 as usize].out_of_service()
            && dead + damaged < geometry.raid_type().tolerated_failures()
    }

    fn inject_background_faults(&mut self) {
        for (rate, rot) in [
            (self.faults.bit_rot, true),
            (self.faults.latent_error, false),
        ] {
            if !self.roll(rate) {
                continue;
            }
            let disk = DiskId(self.rng.below(u64::from(self.layout.disk_count())) as u32);
            let written: Vec<u64> = self.disks[disk.0 as usize]
                .sectors
                .keys()
                .copied()
                .collect();
            if written.is_empty() {
                continue;
            }
            let dbn = written[self.rng.below(written.len() as u64) as usize];
            if !self.may_damage(disk, dbn) {
                continue;
            }
            self.damaged.insert((disk, dbn));
            if rot {
                self.count("bit rot");
                let sector = self.disks[disk.0 as usize]
                    .sectors
                    .get_mut(&dbn)
                    .expect("written");
                P::rot(&mut sector.data, &mut self.rng);
            } else {
                self.count("latent sector error");
                self.disks[disk.0 as usize].unreadable.insert(dbn);
            }
        }
    }

    /// The disks of a RAID group, and how many of them are dead.
    fn members_and_dead(&self, group: usize) -> (Vec<DiskId>, usize) {
        let members: Vec<DiskId> = self.layout.groups()[group]
            .all_disks()
            .iter()
            .map(|d| self.layout.disk_id(group, d))
            .collect();
        let dead = members
            .iter()
            .filter(|d| self.disks[d.0 as usize].out_of_service())
            .count();
        (members, dead)
    }

    /// Dead disks plus damaged blocks in the stripe of (`disk`, `dbn`).
    fn stripe_faults(&self, disk: DiskId, dbn: u64) -> usize {
        let Some(Slot::Member { group, .. }) = self.layout.slot(disk) else {
            return 0;
        };
        self.layout.groups()[group]
            .all_disks()
            .iter()
            .map(|d| self.layout.disk_id(group, d))
            .filter(|d| {
                self.disks[d.0 as usize].out_of_service() || self.damaged.contains(&(*d, dbn))
            })
            .count()
    }

    /// Kills a disk if its group can lose one more without any stripe going
    /// past what RAID survives. Returns whether it did.
    pub fn kill_disk(&mut self, disk: DiskId) -> bool {
        let Some(Slot::Member { group, .. }) = self.layout.slot(disk) else {
            return false;
        };
        let geometry = &self.layout.groups()[group];
        let (members, dead) = self.members_and_dead(group);
        let worst_stripe = self
            .damaged
            .iter()
            .filter(|(d, _)| members.contains(d) && *d != disk)
            .fold(BTreeMap::<u64, usize>::new(), |mut per, (_, dbn)| {
                *per.entry(*dbn).or_default() += 1;
                per
            })
            .into_values()
            .max()
            .unwrap_or(0);
        let half_written = self.unprotected.iter().any(|(g, _)| *g == group);
        if self.disks[disk.0 as usize].out_of_service()
            || half_written
            || dead + 1 + worst_stripe > geometry.raid_type().tolerated_failures()
        {
            return false;
        }
        self.kill_disk_regardless(disk);
        true
    }

    /// Flips a bit of written block `dbn` of `disk`, behind the filer's back,
    /// whatever the stripe survives. Returns whether the block was written.
    pub fn rot_block(&mut self, disk: DiskId, dbn: u64) -> bool {
        let d = &mut self.disks[disk.0 as usize];
        let Some(sector) = d.sectors.get_mut(&dbn) else {
            return false;
        };
        P::rot(&mut sector.data, &mut self.rng);
        self.damaged.insert((disk, dbn));
        true
    }

    /// Blanks the trailer of written block `dbn` of `disk`, its content left
    /// as it is: what a lost write leaves when it would have written the same
    /// content with a new trailer. Returns whether the block was written.
    pub fn stale_trailer(&mut self, disk: DiskId, dbn: u64) -> bool {
        let Some(sector) = self.disks[disk.0 as usize].sectors.get_mut(&dbn) else {
            return false;
        };
        sector.trailer = [0; wafer_core::format::TRAILER_SIZE];
        self.damaged.insert((disk, dbn));
        true
    }

    /// Makes block `dbn` of `disk` unreadable (a latent sector error).
    pub fn lose_block(&mut self, disk: DiskId, dbn: u64) {
        self.disks[disk.0 as usize].unreadable.insert(dbn);
        self.damaged.insert((disk, dbn));
    }

    /// Lays a copy of block `from` of `disk` over its block `onto`, as a
    /// misdirected write would. Returns whether `from` was written.
    pub fn misdirect_block(&mut self, disk: DiskId, from: u64, onto: u64) -> bool {
        let d = &mut self.disks[disk.0 as usize];
        let Some(sector) = d.sectors.get(&from).cloned() else {
            return false;
        };
        d.sectors.insert(onto, sector);
        self.damaged.insert((disk, onto));
        true
    }

    /// Blocks damaged behind the filer's back that no write has replaced
    /// since, by (disk, dbn).
    pub fn damaged_blocks(&self) -> &BTreeSet<(DiskId, u64)> {
        &self.damaged
    }

    /// Forgets the damage of block `dbn` of `disk`: a free block whose
    /// stripe a scrub has made consistent with it is harmless.
    pub fn forget_damage(&mut self, disk: DiskId, dbn: u64) {
        self.damaged.remove(&(disk, dbn));
    }

    /// Whether every member disk is in service: none dead, none being rebuilt.
    pub fn all_disks_in_service(&self) -> bool {
        (0..self.layout.disk_count()).all(|id| match self.layout.slot(DiskId(id)) {
            Some(Slot::Member { .. }) => !self.disks[id as usize].out_of_service(),
            _ => true,
        })
    }

    /// Kills a disk whatever its group survives (a negative control's fault).
    pub fn kill_disk_regardless(&mut self, disk: DiskId) {
        self.disks[disk.0 as usize].dead = true;
        self.damaged.retain(|(d, _)| *d != disk);
        self.count("dead disk");
    }

    /// Checks that every stripe's parity matches its blocks, except stripes
    /// holding damaged blocks and groups with no redundancy left; with one
    /// RAID-DP disk dead, its blocks are rebuilt by one parity and checked
    /// against the other. Call only when idle. Returns the stripes checked.
    pub fn check_parity(&self) -> Result<usize, String> {
        (0..self.layout.groups().len()).try_fold(0, |checked, group| {
            Ok(checked + self.check_group_parity(group)?)
        })
    }

    fn check_group_parity(&self, group: usize) -> Result<usize, String> {
        let geometry = &self.layout.groups()[group];
        let (members, _) = self.members_and_dead(group);
        // With one disk dead, RAID-DP still has one parity to spare: the dead
        // disk's block comes back by one parity, and the scrub checks the
        // other against it.
        let dead: wafer_raid::DiskSet = geometry
            .all_disks()
            .iter()
            .filter(|d| self.disks[members[d.as_usize()].0 as usize].out_of_service())
            .collect();
        if dead.len() >= geometry.raid_type().tolerated_failures() {
            return Ok(0);
        }
        let written: BTreeSet<u64> = members
            .iter()
            .flat_map(|d| self.disks[d.0 as usize].sectors.keys().copied())
            .collect();
        let mut checked = 0;
        for dbn in written {
            // The superblock stripes are rewritten whole every other CP and
            // may be torn by a crash in between; their copies carry them.
            if group == 0 && dbn < wafer_core::aggregate::SUPERBLOCK_COPIES {
                continue;
            }
            if members.iter().any(|d| self.damaged.contains(&(*d, dbn))) {
                continue;
            }
            let mut stripe = self.stripe(&members, dbn);
            if !dead.is_empty() && geometry.reconstruct_stripe(&mut stripe, dead).is_err() {
                return Err(format!(
                    "RAID group {group} stripe {dbn}: cannot rebuild {dead:?}"
                ));
            }
            let report = geometry.scrub_stripe(&stripe);
            if !report.is_consistent() {
                return Err(format!(
                    "RAID group {group} stripe {dbn}: parity inconsistent ({report:?})"
                ));
            }
            checked += 1;
        }
        Ok(checked)
    }

    /// Checks that every block a pointer reaches carries, on its disk, the
    /// content sum and identity the pointer expects, wherever that disk is in
    /// service and the world has not damaged the block behind the filer's
    /// back. Reads cannot see a wrong trailer: they heal it from parity.
    pub fn check_trailers(&self) -> Result<(), String> {
        for (ptr, identity) in self.filer.reachable_blocks() {
            let at = self
                .layout
                .locate(ptr.pvbn)
                .ok_or_else(|| format!("pvbn {} is outside the aggregate", ptr.pvbn))?;
            let disk = self.layout.disk_id(at.group, at.disk);
            let sim = &self.disks[disk.0 as usize];
            if sim.out_of_service() || self.damaged.contains(&(disk, at.dbn.0)) {
                continue;
            }
            let sound = sim.sectors.get(&at.dbn.0).is_some_and(|sector| {
                let sum = P::checksum(&sector.data);
                ptr.matches(sum)
                    && Trailer::decode(&sector.trailer)
                        .is_ok_and(|trailer| trailer.verify(sum, &identity).is_ok())
            });
            if !sound {
                return Err(format!(
                    "{disk:?} block {}: not the block its pointer expects ({identity:?})",
                    at.dbn.0
                ));
            }
        }
        Ok(())
    }

    /// Block `dbn` of each of `members`, as the parity arithmetic sees it.
    fn stripe(&self, members: &[DiskId], dbn: u64) -> Vec<P::Unit> {
        members
            .iter()
            .map(|d| {
                self.disks[d.0 as usize]
                    .sectors
                    .get(&dbn)
                    .map_or_else(P::Unit::zero, |s| P::unit(&s.data))
            })
            .collect()
    }
}

/// Crashes: only a byte filer mounts again.
impl World<Bytes> {
    /// Crashes the filer: in-flight writes land whole, torn or not at all, the
    /// NVRAM keeps a prefix of what was in flight. Then mounts a new filer.
    pub fn crash_and_remount(&mut self) {
        self.count("crash");
        let pending: Vec<Pending<Bytes>> =
            core::mem::take(&mut self.events).into_values().collect();
        let mut nvram_alive = true;
        let mut fates = StripeFates::new();
        for event in pending {
            match event {
                Pending::Disk(io) => self.crash_disk_io(io, &mut fates),
                Pending::Nvram(_) if !nvram_alive => {}
                Pending::Nvram(io) => {
                    nvram_alive = self.rng.chance(1, 2);
                    if nvram_alive {
                        self.perform(Pending::Nvram(io));
                    } else if let IoOp::NvlogAppend { half, record } = io.op {
                        // The first lost append may leave a torn prefix behind;
                        // NVRAM operations after it are lost (they complete in order).
                        let record = record.encode();
                        let keep = self.rng.below(record.len() as u64) as usize;
                        self.nvram[usize::from(half)].extend_from_slice(&record[..keep]);
                    }
                }
            }
        }
        self.unprotected.extend(
            fates
                .into_iter()
                .filter(|(_, missed)| *missed)
                .map(|(stripe, _)| stripe),
        );
        self.replies.clear();
        self.refusing.clear();
        self.nvram_queue_end = self.now;
        self.filer = Filer::mount(
            self.layout.clone(),
            self.options.clone(),
            self.now,
            [&self.nvram[0], &self.nvram[1]],
        );
        self.drain();
    }

    fn crash_disk_io(&mut self, io: Io, fates: &mut StripeFates) {
        let IoOp::Write { disk, dbn, sectors } = io.op else {
            return;
        };
        if self.disks[disk.0 as usize].dead {
            return;
        }
        let at_risk = |world: &World, n: u64| {
            world.stripe_faults(disk, dbn.0 + n) > 0 || world.is_unprotected(disk, dbn.0 + n)
        };
        if (0..sectors.len() as u64).any(|n| at_risk(self, n)) {
            // A half-written stripe is itself a fault of that stripe (the write
            // hole, which the mount's resync closes); it is injected only into
            // stripes that hold no other fault.
            for (n, sector) in sectors.into_iter().enumerate() {
                self.land_whole(disk, dbn.0 + n as u64, sector);
            }
            return;
        }
        let Some(Slot::Member { group, .. }) = self.layout.slot(disk) else {
            return;
        };
        for (n, sector) in sectors.into_iter().enumerate() {
            let at = dbn.0 + n as u64;
            let missed = fates.entry((group, at)).or_default();
            match self.rng.below(3) {
                0 => *missed = true,
                1 => self.land_whole(disk, at, sector),
                _ if self.may_damage(disk, at) => {
                    *missed = true;
                    self.count("torn write");
                    let mut torn = sector;
                    let cut = self.rng.below(BLOCK_SIZE as u64) as usize;
                    torn.data[cut..].fill(0xee);
                    self.store(disk, at, torn);
                    self.damaged.insert((disk, at));
                }
                _ => self.land_whole(disk, at, sector),
            }
        }
    }

    /// A write in flight at the crash lands whole: whatever damage the block
    /// held is gone.
    fn land_whole(&mut self, disk: DiskId, dbn: u64, sector: Sector) {
        self.store(disk, dbn, sector);
        self.damaged.remove(&(disk, dbn));
    }
}

/// Whether a write a crash caught in flight did not land whole, stripe by
/// stripe, by (group, dbn). A CP issues a stripe's writes together, so the
/// rest of them may have landed before, or with it: the stripe is taken to
/// be half written (its parity may not match, and a missed write alone may
/// leave it whole, which the world does not tell apart).
type StripeFates = BTreeMap<(usize, u64), bool>;

fn blank_sector<P: Payload>() -> Sector<P> {
    Sector {
        data: P::zero(),
        trailer: [0; wafer_core::format::TRAILER_SIZE],
    }
}
