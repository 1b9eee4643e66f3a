//! The simulated world: a node of one or more aggregates (or one filer
//! alone), each aggregate on its own in-memory disks, one NVRAM, and
//! virtual time.
//!
//! The world drives an [`Engine`]: a `wafer_core::node::Node` of aggregates
//! over the world's NVRAM, or a `Filer` alone with that NVRAM as its own log
//! (how `wafer check` ran before nodes, kept so that the seeds it found
//! replay as they were). Every I/O the engine asks for completes after a
//! seeded random latency, disk I/Os in any order, NVRAM operations in the
//! order issued (as a real NVLog group-commits). Each aggregate's disks keep
//! the pristine bytes as written, and faults are injected on top of that,
//! on the disks of every aggregate alike, each within what RAID promises its
//! own groups survive: in no stripe do dead disks plus damaged blocks exceed
//! the group's parity disks. The fault model:
//!
//! - **dead disk**: every later I/O to it fails; the aggregate puts its spare
//!   in its place (the world honours `AssignSpare` with the aggregate's last
//!   spare) and rebuilds it, and until the aggregate says the rebuild is done
//!   the new disk counts as dead against the group's budget;
//! - **latent sector error**: a written block can no longer be read;
//! - **bit rot**: a bit of a written block flips;
//! - **lost write**: a write is acknowledged but never lands;
//! - **misdirected write**: a write lands on another block of the same disk;
//! - **host refusal**: writes to some disks (or all) of an aggregate answer
//!   `Unwritable`, as a full host file system or an immutable disk file does,
//!   and land nothing, until the node is mounted again (space came back); any
//!   number of disks, beyond the promise too, since no disk has failed. But a
//!   refused write leaves its stripe half written (the rest of the CP's
//!   writes to it may land), which is the write hole a crash leaves: so, as
//!   at a crash, a write to a stripe that already holds a fault (a dead disk,
//!   a damaged block) is not refused but lands;
//! - **crash**: the node vanishes; writes in flight land whole, torn, or not
//!   at all; NVRAM appends in flight persist as a prefix, the last one
//!   possibly torn. The node then mounts again from what is there, every
//!   aggregate replaying its own records. A stripe left half written (a
//!   write in flight to it did not land whole) has no redundancy left until
//!   the aggregate writes its parity again (the RAID write hole, closed by
//!   the mount's resync): its parity still covers the old content of the
//!   free blocks the CP overwrote, which is gone. So no fault touches such a
//!   stripe, nor its group's disks, until then, and writes in flight to a
//!   stripe that already holds a fault land whole.
//!
//! A damaged block stops counting against its stripe once it is written again.
//! Besides faults the world carries out a node's aggregate administration:
//! aggregates created on blank disks, taken offline and brought back, and
//! grown by blank disks (a data disk in the last group or a new group).
//!
//! The world runs either payload of the engine ([`SimPayload`]): real bytes,
//! or one stamp per block. Every fault applies to both (bit rot flips a bit of
//! the bytes or of the stamp) except the crash, which needs aggregates that
//! mount from their disks, and only byte aggregates do: a stamp aggregate's
//! disks hold digests of its metadata, not the metadata (so a stamp node is
//! never taken offline either: bringing one back is a mount). Either way the
//! harness gets its reads as bytes, as a host would.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use wafer_core::aggregate::{Layout, Slot};
use wafer_core::filer::{
    Busy, HostError, HostRequest, Io, IoId, IoOp, IoResult, Options, Reply, ReplyData, RequestId,
    Sector,
};
use wafer_core::format::Trailer;
use wafer_core::node::{AggrError, AggrState, AggrStatus, Node};
use wafer_core::payload::{Bytes, Payload, Stamps};
use wafer_core::units::{AggrId, DiskId, Duration, Instant};
use wafer_core::{BLOCK_SIZE, Block, Filer};
use wafer_raid::{Stamp, StripeUnit};
use wafer_rng::Rng;

mod flash;

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
    /// A Flash Cache slot read.
    FlashRead {
        /// The slot.
        slot: u64,
    },
    /// A Flash Cache slot written.
    FlashWrite {
        /// The slot.
        slot: u64,
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
            IoOp::FlashRead { slot, .. } => IoShape::FlashRead { slot: slot.0 },
            IoOp::FlashWrite { slot, .. } => IoShape::FlashWrite { slot: slot.0 },
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
    /// Per Flash Cache I/O: a fault of the device (`world::flash`).
    pub flash: u64,
}

impl FaultRates {
    /// No faults at all.
    pub const NONE: FaultRates = FaultRates {
        lost_write: 0,
        misdirected_write: 0,
        bit_rot: 0,
        latent_error: 0,
        flash: 0,
    };
}

/// What the world drives: a node of aggregates, or one filer alone.
#[derive(Debug)]
pub enum Engine<P: Payload> {
    /// A node of aggregates over one NVLog (the world's NVRAM).
    Node(Box<Node<P>>),
    /// One filer, aggregate 0, with the world's NVRAM as its own log: how
    /// the seeded check ran before nodes (`--single-filer`).
    Filer(Box<Filer<P>>),
}

impl<P: Payload> Engine<P> {
    /// The next I/O, with the aggregate whose disks it goes to (`None`: the
    /// NVRAM).
    fn poll_io(&mut self) -> Option<(Option<AggrId>, Io<P>)> {
        match self {
            Engine::Node(node) => node.poll_io().map(|io| (io.aggregate, io.io)),
            Engine::Filer(filer) => filer.poll_io().map(|io| {
                let nvram = matches!(io.op, IoOp::NvlogAppend { .. } | IoOp::NvlogReset { .. });
                ((!nvram).then_some(AggrId(0)), io)
            }),
        }
    }

    fn poll_reply(&mut self) -> Option<Reply<P::ReadData>> {
        match self {
            Engine::Node(node) => node.poll_reply(),
            Engine::Filer(filer) => filer.poll_reply(),
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        match self {
            Engine::Node(node) => node.poll_timeout(),
            Engine::Filer(filer) => filer.poll_timeout(),
        }
    }

    fn handle_timeout(&mut self, now: Instant) {
        match self {
            Engine::Node(node) => node.handle_timeout(now),
            Engine::Filer(filer) => filer.handle_timeout(now),
        }
    }

    fn handle_io_done(&mut self, now: Instant, id: IoId, result: IoResult<P>) {
        match self {
            Engine::Node(node) => node.handle_io_done(now, id, result),
            Engine::Filer(filer) => filer.handle_io_done(now, id, result),
        }
    }

    /// Submits `request` to `aggregate`, or where the volume it names lives.
    fn submit(
        &mut self,
        now: Instant,
        aggregate: Option<AggrId>,
        request: HostRequest,
    ) -> Result<RequestId, Busy> {
        match (self, aggregate) {
            (Engine::Node(node), Some(aggregate)) => node.submit_to(now, aggregate, request),
            (Engine::Node(node), None) => node.submit(now, request),
            (Engine::Filer(filer), _) => filer.submit(now, request),
        }
    }

    /// Aggregate `id`'s filer, while it has one.
    fn aggregate(&self, id: AggrId) -> Option<&Filer<P>> {
        match self {
            Engine::Node(node) => node.aggregate(id),
            Engine::Filer(filer) => (id == AggrId(0)).then_some(&**filer),
        }
    }

    /// Acts on aggregate `id`'s filer, and has the engine carry out what it
    /// asked for.
    fn act<R>(
        &mut self,
        now: Instant,
        id: AggrId,
        act: impl FnOnce(&mut Filer<P>) -> R,
    ) -> Option<R> {
        match self {
            Engine::Node(node) => node.with_aggregate(now, id, act),
            Engine::Filer(filer) => (id == AggrId(0)).then(|| act(filer)),
        }
    }
}

#[derive(Clone, Debug)]
enum Pending<P: Payload> {
    Disk(AggrId, Io<P>),
    Nvram(Io<P>),
    Flash(Io<P>),
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

/// One aggregate's disks and what the world did to them.
#[derive(Clone, Debug)]
struct SimAggr<P: Payload> {
    layout: Layout,
    /// By disk id: members in group order, then the spares.
    disks: Vec<SimDisk<P>>,
    /// Blocks damaged behind the aggregate's back, by (disk, dbn).
    damaged: BTreeSet<(DiskId, u64)>,
    /// Stripes a crash left half written, by (group, dbn), until a parity
    /// write lands on them.
    unprotected: BTreeSet<(usize, u64)>,
    /// Disks whose writes the host refuses until the next mount.
    refusing: BTreeSet<DiskId>,
    /// Damaged blocks whose stripe has had a parity block rebuilt onto a
    /// spare since the damage: computed from the blocks on the disks, that
    /// parity holds the damage, while the other parity may hold what the
    /// damaged block should say.
    spread: BTreeSet<(DiskId, u64)>,
}

/// The engine in its simulated world, over payload `P` (real bytes unless
/// stamps are asked for).
pub struct World<P: SimPayload = Bytes> {
    /// The engine under test.
    pub engine: Engine<P>,
    options: Options,
    aggrs: BTreeMap<AggrId, SimAggr<P>>,
    nvram: [Vec<u8>; 2],
    flash: flash::SimFlash<P>,
    events: BTreeMap<(Instant, u64), Pending<P>>,
    nvram_queue_end: Instant,
    seq: u64,
    now: Instant,
    rng: Rng,
    /// Fault rates in force.
    pub faults: FaultRates,
    replies: VecDeque<Reply>,
    /// Faults injected so far, by kind.
    pub injected: BTreeMap<&'static str, u64>,
    /// The shapes of the I/Os issued since [`World::record_io`], in order.
    io_log: Option<Vec<IoShape>>,
}

/// Counts one fault of `kind`.
fn count(injected: &mut BTreeMap<&'static str, u64>, kind: &'static str) {
    *injected.entry(kind).or_default() += 1;
}

fn roll(rng: &mut Rng, parts_per_million: u64) -> bool {
    parts_per_million > 0 && rng.chance(parts_per_million, 1_000_000)
}
impl<P: SimPayload> SimAggr<P> {
    fn new(layout: Layout) -> SimAggr<P> {
        SimAggr {
            disks: vec![SimDisk::default(); layout.disk_count() as usize],
            layout,
            damaged: BTreeSet::new(),
            unprotected: BTreeSet::new(),
            refusing: BTreeSet::new(),
            spread: BTreeSet::new(),
        }
    }

    fn disk_io(
        &mut self,
        op: &IoOp<P>,
        rng: &mut Rng,
        faults: &FaultRates,
        injected: &mut BTreeMap<&'static str, u64>,
    ) -> IoResult<P> {
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
                    self.land_write(
                        *disk,
                        dbn.0 + n as u64,
                        sector.clone(),
                        rng,
                        faults,
                        injected,
                    );
                }
                IoResult::Done
            }
            IoOp::AssignSpare { member } => self.assign_spare(*member, injected),
            IoOp::NvlogAppend { .. } | IoOp::NvlogReset { .. } => {
                unreachable!("NVRAM operations queue apart")
            }
            IoOp::FlashRead { .. } | IoOp::FlashWrite { .. } => {
                unreachable!("Flash Cache I/Os queue apart")
            }
        }
    }

    /// Puts the last spare in a dead member's place (the layout loses a
    /// spare); a member already replaced stays as it is.
    fn assign_spare(
        &mut self,
        member: DiskId,
        injected: &mut BTreeMap<&'static str, u64>,
    ) -> IoResult<P> {
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
        self.layout = self.layout.with_spares(spares - 1);
        count(injected, "spare assigned");
        IoResult::Done
    }

    /// Disks the aggregate has finished rebuilding are back in service; a
    /// disk it takes for failed again (a crash came before the CP that
    /// records a rebuild's end, so the mount resumes it) is out of service
    /// again.
    fn note_rebuilds(&mut self, filer: &Filer<P>, injected: &mut BTreeMap<&'static str, u64>) {
        for id in 0..self.disks.len() {
            let Some(Slot::Member { group, disk }) = self.layout.slot(DiskId(id as u32)) else {
                continue;
            };
            let failed = (filer.failed_disks().get(group)).is_some_and(|set| set.contains(disk));
            let sim = &mut self.disks[id];
            if filer.is_online() && sim.rebuilding && !failed {
                sim.rebuilding = false;
                count(injected, "disk rebuilt");
            } else if failed && !sim.out_of_service() {
                sim.rebuilding = true;
            }
        }
    }

    /// Writes one sector, perhaps losing or misdirecting it.
    fn land_write(
        &mut self,
        disk: DiskId,
        dbn: u64,
        sector: Sector<P>,
        rng: &mut Rng,
        faults: &FaultRates,
        injected: &mut BTreeMap<&'static str, u64>,
    ) {
        if roll(rng, faults.lost_write) && self.may_damage(disk, dbn) {
            count(injected, "lost write");
            // Losing a write of what the block already holds damages nothing.
            if self.disks[disk.0 as usize].sectors.get(&dbn) != Some(&sector) {
                self.damaged.insert((disk, dbn));
            }
            return;
        }
        if roll(rng, faults.misdirected_write) {
            let blocks = self.blocks_on(disk);
            let victim = rng.below(blocks);
            if victim != dbn && self.may_damage(disk, dbn) && self.may_damage(disk, victim) {
                count(injected, "misdirected write");
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
    /// again: its parity covers what is on its disks once more. A parity
    /// block rebuilt onto a spare takes in the stripe's damaged blocks.
    fn note_parity_written(&mut self, id: DiskId, dbn: u64) {
        if let Some(Slot::Member { group, disk }) = self.layout.slot(id)
            && self.layout.groups()[group].parity_set().contains(disk)
        {
            self.unprotected.remove(&(group, dbn));
            if self.disks[id.0 as usize].rebuilding {
                let (members, _) = self.members_and_dead(group);
                for member in members {
                    if self.damaged.contains(&(member, dbn)) {
                        self.spread.insert((member, dbn));
                    }
                }
            }
        }
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

    /// A bit flips in, or a latent error strikes, a random written block of
    /// a random disk, if its stripe survives one more damaged block.
    fn damage_random_block(
        &mut self,
        rot: bool,
        rng: &mut Rng,
        injected: &mut BTreeMap<&'static str, u64>,
    ) {
        let disk = DiskId(rng.below(u64::from(self.layout.disk_count())) as u32);
        let written: Vec<u64> = self.disks[disk.0 as usize]
            .sectors
            .keys()
            .copied()
            .collect();
        if written.is_empty() {
            return;
        }
        let dbn = written[rng.below(written.len() as u64) as usize];
        if !self.may_damage(disk, dbn) {
            return;
        }
        self.damaged.insert((disk, dbn));
        if rot {
            count(injected, "bit rot");
            let sector = self.disks[disk.0 as usize]
                .sectors
                .get_mut(&dbn)
                .expect("written");
            P::rot(&mut sector.data, rng);
        } else {
            count(injected, "latent sector error");
            self.disks[disk.0 as usize].unreadable.insert(dbn);
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

    /// Whether `disk` can die without any stripe of its group going past
    /// what RAID survives.
    fn may_kill(&self, disk: DiskId) -> bool {
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
        // Its own damage goes with it, unless a rebuilt parity took it in:
        // then the stripe's parities disagree about the dead disk's block, a
        // second fault its death does not remove.
        let spread =
            (self.spread.iter()).any(|block| block.0 == disk && self.damaged.contains(block));
        !self.disks[disk.0 as usize].out_of_service()
            && !half_written
            && !spread
            && dead + 1 + worst_stripe <= geometry.raid_type().tolerated_failures()
    }

    /// Whether every member disk is in service: none dead, none being rebuilt.
    fn all_disks_in_service(&self) -> bool {
        (0..self.layout.disk_count()).all(|id| match self.layout.slot(DiskId(id)) {
            Some(Slot::Member { .. }) => !self.disks[id as usize].out_of_service(),
            _ => true,
        })
    }

    /// The aggregate grown to `grown` by blank disks: members keep their
    /// ids, the new ones come after their group's, the spares after all.
    fn grow(&mut self, grown: Layout) {
        let old = &self.layout;
        let members = old.disk_count() - old.spares();
        let added = grown.disk_count() - old.disk_count();
        let mut disks: Vec<SimDisk<P>> = Vec::with_capacity(grown.disk_count() as usize);
        for (group, geometry) in grown.groups().iter().enumerate() {
            for index in geometry.all_disks().iter() {
                let before = (group < old.groups().len()
                    && index.as_usize() < old.groups()[group].group_size())
                .then(|| old.disk_id(group, index));
                disks.push(
                    before.map_or_else(SimDisk::default, |d| self.disks[d.0 as usize].clone()),
                );
            }
        }
        disks.extend(self.disks.drain(members as usize..));
        let moved = |d: DiskId| match d.0 < members {
            true => d,
            false => DiskId(d.0 + added),
        };
        self.refusing = self.refusing.iter().map(|d| moved(*d)).collect();
        self.disks = disks;
        self.layout = grown;
    }

    /// Checks every stripe's parity in group `group` (see
    /// [`World::check_parity`]).
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

    /// Checks that every block `filer`'s pointers reach is sound on its disk
    /// (see [`World::check_trailers`]).
    fn check_trailers(&self, filer: &Filer<P>) -> Result<(), String> {
        for (ptr, identity) in filer.reachable_blocks() {
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
}
impl<P: SimPayload> World<P> {
    /// A world with blank disks and a freshly formatted filer alone on them
    /// (aggregate 0, the world's NVRAM its own log).
    pub fn format(layout: Layout, options: Options, seed: u64) -> World<P> {
        let filer = Filer::format(layout.clone(), options.clone(), Instant(0));
        let mut world = World::empty(Engine::Filer(Box::new(filer)), options, seed);
        world.aggrs.insert(AggrId(0), SimAggr::new(layout));
        world.drain();
        world
    }

    /// A world with a node of aggregates `aggregates` (name, layout), each
    /// formatted on blank disks of its own, over one NVRAM.
    pub fn format_node(aggregates: &[(&str, Layout)], options: Options, seed: u64) -> World<P> {
        let node = Node::new(options.clone(), Instant(0));
        let mut world = World::empty(Engine::Node(Box::new(node)), options, seed);
        for (name, layout) in aggregates {
            world
                .create_aggregate(name, layout.clone())
                .expect("a valid aggregate");
        }
        world
    }

    fn empty(engine: Engine<P>, options: Options, seed: u64) -> World<P> {
        World {
            engine,
            options,
            aggrs: BTreeMap::new(),
            nvram: [Vec::new(), Vec::new()],
            flash: flash::SimFlash::default(),
            events: BTreeMap::new(),
            nvram_queue_end: Instant(0),
            seq: 0,
            now: Instant(0),
            rng: Rng::seeded(seed),
            faults: FaultRates::NONE,
            replies: VecDeque::new(),
            injected: BTreeMap::new(),
            io_log: None,
        }
    }

    /// Starts keeping the shape of every I/O the engine issues from now on.
    pub fn record_io(&mut self) {
        self.io_log.get_or_insert_with(Vec::new);
    }

    /// The shapes of the I/Os issued since [`World::record_io`] (none if it
    /// was never called), oldest first.
    pub fn io_log(&self) -> &[IoShape] {
        self.io_log.as_deref().unwrap_or_default()
    }

    /// Runs until the engine serves (a node: every aggregate has mounted, or
    /// is offline at the administrator's request), or says why it cannot.
    pub fn wait_online(&mut self) -> Result<(), String> {
        loop {
            if let Some(error) = self.mount_error() {
                return Err(format!("mount failed: {error}"));
            }
            if self.is_serving() {
                return Ok(());
            }
            if !self.step() {
                return Err("the engine stalled before coming online".into());
            }
        }
    }

    fn is_serving(&self) -> bool {
        match &self.engine {
            Engine::Filer(filer) => filer.is_online(),
            Engine::Node(node) => {
                node.is_online()
                    && node
                        .aggregates()
                        .iter()
                        .all(|s| matches!(s.state, AggrState::Online | AggrState::Offline))
            }
        }
    }

    /// Why an aggregate could not mount, if one could not.
    fn mount_error(&self) -> Option<String> {
        match &self.engine {
            Engine::Filer(filer) => filer.mount_error().map(str::to_string),
            Engine::Node(node) => node.aggregates().into_iter().find_map(|s| match s.state {
                AggrState::Failed(reason) => Some(format!("{}: {reason}", s.name)),
                _ => None,
            }),
        }
    }

    /// Why an aggregate went offline on its own (the host refused its
    /// writes), if one did: it serves no more until the next mount.
    pub fn offline_reason(&self) -> Option<String> {
        self.aggrs.keys().find_map(|id| {
            let reason = self.engine.aggregate(*id)?.offline_reason()?;
            Some(format!("aggregate {}: {reason}", id.0))
        })
    }

    /// Virtual time now.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// The aggregates the world holds disks of, in id order.
    pub fn aggregate_ids(&self) -> Vec<AggrId> {
        self.aggrs.keys().copied().collect()
    }

    /// Aggregate `id`'s layout as the world has its disks.
    ///
    /// # Panics
    /// If the world holds no such aggregate.
    pub fn layout(&self, id: AggrId) -> &Layout {
        &self.aggr(id).layout
    }

    fn aggr(&self, id: AggrId) -> &SimAggr<P> {
        self.aggrs.get(&id).expect("an aggregate of the world")
    }

    fn aggr_mut(&mut self, id: AggrId) -> &mut SimAggr<P> {
        self.aggrs.get_mut(&id).expect("an aggregate of the world")
    }

    /// Aggregate `id`'s filer, while it has one.
    pub fn filer_of(&self, id: AggrId) -> Option<&Filer<P>> {
        self.engine.aggregate(id)
    }

    /// Aggregate 0's filer: the filer of a one-aggregate world.
    ///
    /// # Panics
    /// If aggregate 0 has no filer (it is offline, or gone).
    pub fn filer(&self) -> &Filer<P> {
        self.filer_of(AggrId(0)).expect("aggregate 0 has a filer")
    }

    /// The node under test.
    ///
    /// # Panics
    /// If the world drives a filer alone.
    pub fn node(&self) -> &Node<P> {
        match &self.engine {
            Engine::Node(node) => node,
            Engine::Filer(_) => panic!("the world drives a filer alone, not a node"),
        }
    }

    fn node_mut(&mut self) -> &mut Node<P> {
        match &mut self.engine {
            Engine::Node(node) => node,
            Engine::Filer(_) => panic!("the world drives a filer alone, not a node"),
        }
    }

    /// Acts on aggregate `id`'s filer (start a scrub, ...), then takes in
    /// what it asked for. `None` if it has no filer.
    pub fn act<R>(&mut self, id: AggrId, act: impl FnOnce(&mut Filer<P>) -> R) -> Option<R> {
        let result = self.engine.act(self.now, id, act);
        self.drain();
        result
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

    /// The reply to request `id`, if it has come.
    pub fn take_reply(&mut self, id: RequestId) -> Option<Result<ReplyData, HostError>> {
        let at = self.replies.iter().position(|r| r.id == id)?;
        self.replies.remove(at).map(|r| r.result)
    }

    /// Moves the engine's output into the world: I/Os become events, replies
    /// are kept for the harness.
    pub fn drain(&mut self) {
        while let Some((aggregate, io)) = self.engine.poll_io() {
            self.schedule(aggregate, io);
        }
        while let Some(reply) = self.engine.poll_reply() {
            self.replies.push_back(reply.into_bytes());
        }
    }

    fn schedule(&mut self, aggregate: Option<AggrId>, io: Io<P>) {
        if let Some(log) = &mut self.io_log {
            log.push(IoShape::of(&io.op));
        }
        self.seq += 1;
        let flash = matches!(io.op, IoOp::FlashRead { .. } | IoOp::FlashWrite { .. });
        match aggregate {
            None if flash => {
                let latency = flash::flash_latency(&mut self.rng);
                self.events
                    .insert((self.now + latency, self.seq), Pending::Flash(io));
            }
            None => {
                let start = self.now.max(self.nvram_queue_end);
                self.nvram_queue_end = start + Duration(10_000 + self.rng.below(20_000));
                self.events
                    .insert((self.nvram_queue_end, self.seq), Pending::Nvram(io));
            }
            Some(aggregate) => {
                let latency = Duration(50_000 + self.rng.below(2_000_000));
                self.events
                    .insert((self.now + latency, self.seq), Pending::Disk(aggregate, io));
            }
        }
    }

    /// Runs the next event (or the engine's timer if it comes first).
    /// Returns false when nothing at all is pending.
    pub fn step(&mut self) -> bool {
        let next_event = self.events.keys().next().map(|(t, _)| *t);
        let timer = self.engine.poll_timeout();
        match (next_event, timer) {
            (_, Some(t)) if next_event.is_none_or(|e| t < e) => {
                self.now = self.now.max(t);
                self.engine.handle_timeout(self.now);
            }
            (Some(_), _) => {
                let ((time, _), pending) = self.events.pop_first().expect("an event");
                self.now = self.now.max(time);
                self.inject_background_faults();
                let (id, result) = self.perform(pending);
                self.engine.handle_io_done(self.now, id, result);
                self.note_rebuilds();
            }
            (None, None) => return false,
            (None, Some(_)) => unreachable!("covered by the first arm"),
        }
        self.drain();
        true
    }

    /// Submits a host request to `aggregate`, or to where the volume it
    /// names lives (a filer alone takes everything itself).
    pub fn submit(
        &mut self,
        aggregate: Option<AggrId>,
        request: HostRequest,
    ) -> Result<RequestId, Busy> {
        let id = self.engine.submit(self.now, aggregate, request)?;
        self.drain();
        Ok(id)
    }

    /// Submits a host request and runs the world until the engine answers it.
    ///
    /// # Panics
    /// If the engine is not online or never answers.
    pub fn request(&mut self, request: HostRequest) -> Result<ReplyData, HostError> {
        self.request_to(None, request)
    }

    /// [`World::request`] to aggregate `aggregate` (how a node creates a
    /// volume there).
    ///
    /// # Panics
    /// If the engine is not online or never answers.
    pub fn request_to(
        &mut self,
        aggregate: Option<AggrId>,
        request: HostRequest,
    ) -> Result<ReplyData, HostError> {
        let id = self.submit(aggregate, request).expect("online");
        loop {
            if let Some(result) = self.take_reply(id) {
                return result;
            }
            assert!(self.step(), "the request never completed");
        }
    }

    /// Has every aggregate bring every indirect block into memory and keep
    /// it there, and runs until they have (what a whole-tree invariant check
    /// needs).
    pub fn pin_indirect(&mut self) -> Result<(), String> {
        for id in self.aggregate_ids() {
            self.act(id, |filer| filer.pin_indirect(true));
        }
        while self.step() {}
        let absent = (self.aggrs.keys()).any(|id| {
            self.engine
                .aggregate(*id)
                .is_some_and(|f| !f.indirect_complete())
        });
        match absent {
            false => Ok(()),
            true => Err("indirect blocks still absent after pinning them".into()),
        }
    }

    /// Checks every serving aggregate's invariants.
    pub fn check_invariants(&self) -> Result<(), String> {
        match &self.engine {
            Engine::Node(node) => node.check_invariants(),
            Engine::Filer(filer) => filer.check_invariants(),
        }
    }

    /// Advances virtual time by `span` with nothing happening but timers.
    pub fn idle(&mut self, span: Duration) {
        let until = self.now + span;
        while let Some(t) = self.engine.poll_timeout().filter(|t| *t <= until) {
            self.now = self.now.max(t);
            self.engine.handle_timeout(self.now);
            self.drain();
            while self.events.keys().next().is_some() && self.step() {}
        }
        self.now = self.now.max(until);
    }

    /// Steps until nothing is in flight.
    ///
    /// # Panics
    /// If the engine never stops issuing I/O.
    pub fn run_until_settled(&mut self) {
        for _ in 0..10_000_000 {
            if self.events.is_empty() {
                return;
            }
            self.step();
        }
        panic!("the engine never settled");
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
            Pending::Flash(io) => (io.id, self.flash_io(io.op)),
            Pending::Disk(aggregate, io) => {
                let World {
                    aggrs,
                    rng,
                    faults,
                    injected,
                    ..
                } = self;
                let result = match aggrs.get_mut(&aggregate) {
                    Some(aggr) => aggr.disk_io(&io.op, rng, faults, injected),
                    // Its disks are gone (the aggregate was destroyed).
                    None => IoResult::DiskFailed,
                };
                (io.id, result)
            }
        }
    }

    /// Disks the aggregates have finished rebuilding are back in service.
    fn note_rebuilds(&mut self) {
        let World {
            engine,
            aggrs,
            injected,
            ..
        } = self;
        for (id, aggr) in aggrs.iter_mut() {
            if let Some(filer) = engine.aggregate(*id) {
                aggr.note_rebuilds(filer, injected);
            }
        }
    }

    fn inject_background_faults(&mut self) {
        for (rate, rot) in [
            (self.faults.bit_rot, true),
            (self.faults.latent_error, false),
        ] {
            if !roll(&mut self.rng, rate) {
                continue;
            }
            // One aggregate's disks draw no aggregate: a one-aggregate world
            // draws what a filer alone drew before nodes.
            let id = match self.aggrs.len() {
                1 => *self.aggrs.keys().next().expect("one"),
                n => self.aggregate_ids()[self.rng.below(n as u64) as usize],
            };
            let World {
                aggrs,
                rng,
                injected,
                ..
            } = self;
            if let Some(aggr) = aggrs.get_mut(&id) {
                aggr.damage_random_block(rot, rng, injected);
            }
        }
    }

    /// Kills disk `disk` of aggregate `aggregate` if its group can lose one
    /// more without any stripe going past what RAID survives. Returns
    /// whether it did.
    pub fn kill_disk(&mut self, aggregate: AggrId, disk: DiskId) -> bool {
        if !self.aggr(aggregate).may_kill(disk) {
            return false;
        }
        self.kill_disk_regardless(aggregate, disk);
        true
    }

    /// Kills a disk whatever its group survives (a negative control's fault).
    pub fn kill_disk_regardless(&mut self, aggregate: AggrId, disk: DiskId) {
        let aggr = self.aggr_mut(aggregate);
        aggr.disks[disk.0 as usize].dead = true;
        aggr.damaged.retain(|(d, _)| *d != disk);
        count(&mut self.injected, "dead disk");
    }

    /// Flips a bit of written block `dbn` of `disk`, behind the aggregate's
    /// back, whatever the stripe survives. Returns whether the block was
    /// written.
    pub fn rot_block(&mut self, aggregate: AggrId, disk: DiskId, dbn: u64) -> bool {
        let World { aggrs, rng, .. } = self;
        let aggr = aggrs
            .get_mut(&aggregate)
            .expect("an aggregate of the world");
        let Some(sector) = aggr.disks[disk.0 as usize].sectors.get_mut(&dbn) else {
            return false;
        };
        P::rot(&mut sector.data, rng);
        aggr.damaged.insert((disk, dbn));
        true
    }

    /// Blanks the trailer of written block `dbn` of `disk`, its content left
    /// as it is: what a lost write leaves when it would have written the same
    /// content with a new trailer. Returns whether the block was written.
    pub fn stale_trailer(&mut self, aggregate: AggrId, disk: DiskId, dbn: u64) -> bool {
        let aggr = self.aggr_mut(aggregate);
        let Some(sector) = aggr.disks[disk.0 as usize].sectors.get_mut(&dbn) else {
            return false;
        };
        sector.trailer = [0; wafer_core::format::TRAILER_SIZE];
        aggr.damaged.insert((disk, dbn));
        true
    }

    /// Gives written block `dbn` of `disk` the trailer of another write of
    /// the same content there, in the CP before and under another vvbn: what
    /// a torn CP and a lost redo of the same content leave (seed 100530).
    /// Content and parity are right, so the block is not counted damaged, but
    /// its identity is stale. Returns whether the block had a trailer.
    pub fn stale_identity(&mut self, aggregate: AggrId, disk: DiskId, dbn: u64) -> bool {
        let aggr = self.aggr_mut(aggregate);
        let Some(sector) = aggr.disks[disk.0 as usize].sectors.get_mut(&dbn) else {
            return false;
        };
        let Ok(Trailer { mut identity, .. }) = Trailer::decode(&sector.trailer) else {
            return false;
        };
        identity.vvbn.0 += 1;
        identity.cp.0 = identity.cp.0.saturating_sub(1);
        sector.trailer = Trailer::new(P::checksum(&sector.data), identity).encode();
        true
    }

    /// Gives written block `dbn` of `disk` other content under a trailer
    /// that agrees with it: what a lost write leaves, an older version of
    /// the block, whole and consistent in itself, which only the stripe's
    /// parity or a pointer's checksum tells from the last write. Returns
    /// whether the block had a trailer.
    pub fn stale_content(&mut self, aggregate: AggrId, disk: DiskId, dbn: u64) -> bool {
        let written = self.aggr(aggregate).disks[disk.0 as usize]
            .sectors
            .get(&dbn);
        let Some(Ok(Trailer { identity, .. })) = written.map(|s| Trailer::decode(&s.trailer))
        else {
            return false;
        };
        self.rot_block(aggregate, disk, dbn);
        let aggr = self.aggr_mut(aggregate);
        let sector = (aggr.disks[disk.0 as usize].sectors.get_mut(&dbn)).expect("written");
        sector.trailer = Trailer::new(P::checksum(&sector.data), identity).encode();
        true
    }

    /// Makes block `dbn` of `disk` unreadable (a latent sector error).
    pub fn lose_block(&mut self, aggregate: AggrId, disk: DiskId, dbn: u64) {
        let aggr = self.aggr_mut(aggregate);
        aggr.disks[disk.0 as usize].unreadable.insert(dbn);
        aggr.damaged.insert((disk, dbn));
    }

    /// Lays a copy of block `from` of `disk` over its block `onto`, as a
    /// misdirected write would. Returns whether `from` was written.
    pub fn misdirect_block(
        &mut self,
        aggregate: AggrId,
        disk: DiskId,
        from: u64,
        onto: u64,
    ) -> bool {
        let aggr = self.aggr_mut(aggregate);
        let d = &mut aggr.disks[disk.0 as usize];
        let Some(sector) = d.sectors.get(&from).cloned() else {
            return false;
        };
        d.sectors.insert(onto, sector);
        aggr.damaged.insert((disk, onto));
        true
    }

    /// Blocks of `aggregate` damaged behind its back that no write has
    /// replaced since, by (disk, dbn).
    pub fn damaged_blocks(&self, aggregate: AggrId) -> &BTreeSet<(DiskId, u64)> {
        &self.aggr(aggregate).damaged
    }

    /// Forgets the damage of block `dbn` of `disk`: a free block whose
    /// stripe a scrub has made consistent with it is harmless.
    pub fn forget_damage(&mut self, aggregate: AggrId, disk: DiskId, dbn: u64) {
        self.aggr_mut(aggregate).damaged.remove(&(disk, dbn));
    }

    /// Whether every member disk of `aggregate` is in service: none dead,
    /// none being rebuilt.
    pub fn all_disks_in_service(&self, aggregate: AggrId) -> bool {
        self.aggr(aggregate).all_disks_in_service()
    }

    /// From now until the next mount, the host refuses every write to
    /// `disks` of `aggregate` (a full file system, or disk files made
    /// immutable).
    pub fn refuse_writes(&mut self, aggregate: AggrId, disks: impl IntoIterator<Item = DiskId>) {
        self.aggr_mut(aggregate).refusing.extend(disks);
        count(&mut self.injected, "host refused writes");
    }

    /// Whether the host refuses writes to some disk.
    pub fn is_refusing_writes(&self) -> bool {
        self.aggrs.values().any(|a| !a.refusing.is_empty())
    }

    /// The host can store writes again.
    pub fn accept_writes(&mut self) {
        for aggr in self.aggrs.values_mut() {
            aggr.refusing.clear();
        }
    }

    /// Checks that every stripe's parity matches its blocks, except stripes
    /// holding damaged blocks and groups with no redundancy left; with one
    /// RAID-DP disk dead, its blocks are rebuilt by one parity and checked
    /// against the other. Call only when idle. Returns the stripes checked.
    pub fn check_parity(&self) -> Result<usize, String> {
        self.aggrs.iter().try_fold(0, |checked, (id, aggr)| {
            (0..aggr.layout.groups().len()).try_fold(checked, |checked, group| {
                let stripes = aggr
                    .check_group_parity(group)
                    .map_err(|e| format!("aggregate {}: {e}", id.0))?;
                Ok(checked + stripes)
            })
        })
    }

    /// Checks that every block a pointer reaches carries, on its disk, the
    /// content sum and identity the pointer expects, wherever that disk is in
    /// service and the world has not damaged the block behind the aggregate's
    /// back. Reads cannot see a wrong trailer: they heal it from parity.
    pub fn check_trailers(&self) -> Result<(), String> {
        for (id, aggr) in &self.aggrs {
            if let Some(filer) = self.engine.aggregate(*id) {
                aggr.check_trailers(filer)
                    .map_err(|e| format!("aggregate {}: {e}", id.0))?;
            }
        }
        Ok(())
    }

    /// Every aggregate of the node as it reports it.
    pub fn aggregates(&self) -> Vec<AggrStatus> {
        self.node().aggregates()
    }

    /// Creates aggregate `name` on blank disks of `layout` while the node
    /// serves; it serves once its first CP has committed.
    pub fn create_aggregate(&mut self, name: &str, layout: Layout) -> Result<AggrId, AggrError> {
        let now = self.now;
        let id = self
            .node_mut()
            .create_aggregate(now, name, layout.clone())?;
        self.aggrs.insert(id, SimAggr::new(layout));
        self.drain();
        Ok(id)
    }

    /// Takes an aggregate offline and runs until it is (or fails, or ten
    /// minutes of virtual time have passed with it still going offline).
    pub fn offline(&mut self, aggregate: AggrId) -> Result<(), AggrError> {
        let now = self.now;
        self.node_mut().offline_aggregate(now, aggregate)?;
        self.drain();
        let going = |world: &World<P>| {
            let status = world.aggregates().into_iter().find(|s| s.id == aggregate);
            status.is_some_and(|s| s.state == AggrState::GoingOffline)
        };
        while going(self) && self.now - now < Duration::from_secs(600) && self.step() {}
        Ok(())
    }

    /// Adds blank disks to an aggregate: `grown` is its layout with them,
    /// with as many spares as the world has left it.
    pub fn add_disks(&mut self, aggregate: AggrId, grown: Layout) -> Result<(), AggrError> {
        let now = self.now;
        self.node_mut().add_disks(now, aggregate, grown.clone())?;
        self.aggr_mut(aggregate).grow(grown);
        self.drain();
        Ok(())
    }

    /// Removes an offline aggregate from the node; its disks go with it.
    pub fn destroy_aggregate(&mut self, aggregate: AggrId) -> Result<(), AggrError> {
        self.node_mut().destroy_aggregate(aggregate)?;
        self.aggrs.remove(&aggregate);
        self.events
            .retain(|_, pending| !matches!(pending, Pending::Disk(a, _) if *a == aggregate));
        Ok(())
    }
}
/// Crashes and mounts: only byte aggregates mount again.
impl World<Bytes> {
    /// Crashes the engine: in-flight writes land whole, torn or not at all,
    /// the NVRAM keeps a prefix of what was in flight. Then mounts it again
    /// from the disks and the NVRAM.
    pub fn crash_and_remount(&mut self) {
        count(&mut self.injected, "crash");
        let pending: Vec<Pending<Bytes>> =
            core::mem::take(&mut self.events).into_values().collect();
        let mut nvram_alive = true;
        let mut fates = StripeFates::new();
        for event in pending {
            match event {
                Pending::Disk(aggregate, io) => self.crash_disk_io(aggregate, io, &mut fates),
                Pending::Flash(io) => self.crash_flash_io(io.op),
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
        for ((aggregate, group, dbn), missed) in fates {
            if missed && let Some(aggr) = self.aggrs.get_mut(&aggregate) {
                aggr.unprotected.insert((group, dbn));
            }
        }
        self.replies.clear();
        self.accept_writes();
        self.remount();
    }

    /// Mounts the engine again from the disks and the NVRAM, as after a
    /// stop; nothing may be in flight.
    pub fn remount(&mut self) {
        assert!(
            self.events.is_empty(),
            "remount after a crash or once settled"
        );
        self.nvram_queue_end = self.now;
        let nvlog = [self.nvram[0].as_slice(), self.nvram[1].as_slice()];
        self.engine = match &self.engine {
            Engine::Filer(_) => {
                let layout = self.aggr(AggrId(0)).layout.clone();
                Engine::Filer(Box::new(Filer::mount(
                    layout,
                    self.options.clone(),
                    self.now,
                    nvlog,
                )))
            }
            Engine::Node(_) => {
                let layouts = (self.aggrs.iter())
                    .map(|(id, aggr)| (*id, aggr.layout.clone()))
                    .collect();
                Engine::Node(Box::new(Node::mount(
                    self.options.clone(),
                    self.now,
                    layouts,
                    nvlog,
                )))
            }
        };
        self.drain();
    }

    /// Brings an offline aggregate back: it mounts from its disks.
    pub fn online(&mut self, aggregate: AggrId) -> Result<(), AggrError> {
        let now = self.now;
        self.node_mut().online_aggregate(now, aggregate)?;
        self.drain();
        Ok(())
    }

    fn crash_disk_io(&mut self, aggregate: AggrId, io: Io, fates: &mut StripeFates) {
        let IoOp::Write { disk, dbn, sectors } = io.op else {
            return;
        };
        let World {
            aggrs,
            rng,
            injected,
            ..
        } = self;
        let Some(aggr) = aggrs.get_mut(&aggregate) else {
            return;
        };
        if aggr.disks[disk.0 as usize].dead {
            return;
        }
        let at_risk = |aggr: &SimAggr<Bytes>, n: u64| {
            aggr.stripe_faults(disk, dbn.0 + n) > 0 || aggr.is_unprotected(disk, dbn.0 + n)
        };
        if (0..sectors.len() as u64).any(|n| at_risk(aggr, n)) {
            // A half-written stripe is itself a fault of that stripe (the write
            // hole, which the mount's resync closes); it is injected only into
            // stripes that hold no other fault.
            for (n, sector) in sectors.into_iter().enumerate() {
                aggr.land_whole(disk, dbn.0 + n as u64, sector);
            }
            return;
        }
        let Some(Slot::Member { group, .. }) = aggr.layout.slot(disk) else {
            return;
        };
        for (n, sector) in sectors.into_iter().enumerate() {
            let at = dbn.0 + n as u64;
            let missed = fates.entry((aggregate, group, at)).or_default();
            match rng.below(3) {
                0 => *missed = true,
                1 => aggr.land_whole(disk, at, sector),
                _ if aggr.may_damage(disk, at) => {
                    *missed = true;
                    count(injected, "torn write");
                    let mut torn = sector;
                    let cut = rng.below(BLOCK_SIZE as u64) as usize;
                    torn.data[cut..].fill(0xee);
                    aggr.store(disk, at, torn);
                    aggr.damaged.insert((disk, at));
                }
                _ => aggr.land_whole(disk, at, sector),
            }
        }
    }
}

impl SimAggr<Bytes> {
    /// A write in flight at the crash lands whole: whatever damage the block
    /// held is gone.
    fn land_whole(&mut self, disk: DiskId, dbn: u64, sector: Sector) {
        self.store(disk, dbn, sector);
        self.damaged.remove(&(disk, dbn));
    }
}

/// Whether a write a crash caught in flight did not land whole, stripe by
/// stripe, by (aggregate, group, dbn). A CP issues a stripe's writes
/// together, so the rest of them may have landed before, or with it: the
/// stripe is taken to be half written (its parity may not match, and a
/// missed write alone may leave it whole, which the world does not tell
/// apart).
type StripeFates = BTreeMap<(AggrId, usize, u64), bool>;

fn blank_sector<P: Payload>() -> Sector<P> {
    Sector {
        data: P::zero(),
        trailer: [0; wafer_core::format::TRAILER_SIZE],
    }
}
