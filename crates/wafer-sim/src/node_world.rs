//! A simulated node: the real `wafer_core::node::Node` over in-memory disks
//! (each aggregate its own) and one NVRAM, in virtual time.
//!
//! Disk I/Os complete in a seeded random order; NVRAM operations in the
//! order issued. Its faults are the node's own: a crash (writes in flight
//! land whole or not at all, NVRAM appends in flight persist as a prefix,
//! the last one possibly torn) and disks lost while the node is stopped.
//! The single-aggregate [`crate::world`] keeps the full fault model (bit
//! rot, lost and misdirected writes, host refusals); this world proves what
//! the node adds: one log shared by several aggregates, each replaying its
//! own records, and one aggregate's failure staying its own.

use std::collections::{BTreeMap, BTreeSet};

use wafer_core::aggregate::Layout;
use wafer_core::filer::{HostError, HostRequest, IoOp, IoResult, Options, ReplyData, Sector};
use wafer_core::node::{AggrStatus, Node, NodeIo};
use wafer_core::units::{AggrId, DiskId, Duration, Instant};
use wafer_rng::Rng;

fn blank_sector() -> Sector {
    Sector {
        data: Box::new([0; wafer_core::BLOCK_SIZE]),
        trailer: [0; wafer_core::format::TRAILER_SIZE],
    }
}

/// A disk block's address in the node: aggregate, disk, block.
type BlockAt = (AggrId, DiskId, u64);

/// The node, its disks and NVRAM, and virtual time.
#[derive(Debug)]
pub struct NodeWorld {
    /// The node under test.
    pub node: Node,
    options: Options,
    layouts: BTreeMap<AggrId, Layout>,
    disks: BTreeMap<BlockAt, Sector>,
    lost_disks: BTreeSet<(AggrId, DiskId)>,
    nvram: [Vec<u8>; 2],
    /// Disk I/Os in flight, completed in random order.
    disk_flight: Vec<NodeIo>,
    /// NVRAM operations in flight, completed in order.
    nvram_flight: Vec<NodeIo>,
    replies: BTreeMap<u64, Result<ReplyData, HostError>>,
    now: Instant,
    rng: Rng,
    /// Crashes survived.
    pub crashes: u64,
}

impl NodeWorld {
    /// A node with aggregates `aggregates` (name, layout) formatted on
    /// blank disks, run until every one serves.
    pub fn format(aggregates: Vec<(&str, Layout)>, options: Options, seed: u64) -> NodeWorld {
        let mut world = NodeWorld {
            node: Node::new(options.clone(), Instant(0)),
            options,
            layouts: BTreeMap::new(),
            disks: BTreeMap::new(),
            lost_disks: BTreeSet::new(),
            nvram: [Vec::new(), Vec::new()],
            disk_flight: Vec::new(),
            nvram_flight: Vec::new(),
            replies: BTreeMap::new(),
            now: Instant(0),
            rng: Rng::seeded(seed),
            crashes: 0,
        };
        for (name, layout) in aggregates {
            world.create_aggregate(name, layout);
        }
        world.run_until_settled();
        world
    }

    /// The current virtual time.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// Every aggregate as the node reports it.
    pub fn aggregates(&self) -> Vec<AggrStatus> {
        self.node.aggregates()
    }

    /// Takes the node's new I/Os into flight.
    fn collect_io(&mut self) {
        while let Some(io) = self.node.poll_io() {
            match io.aggregate {
                Some(_) => self.disk_flight.push(io),
                None => self.nvram_flight.push(io),
            }
        }
        while let Some(reply) = self.node.poll_reply() {
            self.replies.insert(reply.id.0, reply.result);
        }
    }

    /// Completes one I/O in flight (or fires the timer); false if nothing
    /// is left to do.
    pub fn step(&mut self) -> bool {
        self.now = self.now + Duration(1_000 + self.rng.below(50_000));
        let nvram_first = self.disk_flight.is_empty() || self.rng.chance(1, 3);
        if !self.nvram_flight.is_empty() && nvram_first {
            let io = self.nvram_flight.remove(0);
            self.apply_nvram(&io);
            self.node.handle_io_done(self.now, io.io.id, IoResult::Done);
        } else if !self.disk_flight.is_empty() {
            let at = self.rng.below(self.disk_flight.len() as u64) as usize;
            let io = self.disk_flight.swap_remove(at);
            let result = self.apply_disk(&io);
            self.node.handle_io_done(self.now, io.io.id, result);
        } else if let Some(deadline) = self.node.poll_timeout() {
            self.now = self.now.max(deadline);
            self.node.handle_timeout(self.now);
        } else {
            return false;
        }
        self.collect_io();
        true
    }

    /// Steps until nothing is in flight and no timer is due.
    pub fn run_until_settled(&mut self) {
        for _ in 0..10_000_000 {
            if self.disk_flight.is_empty() && self.nvram_flight.is_empty() {
                return;
            }
            self.step();
        }
        panic!("the node never settled");
    }

    fn apply_nvram(&mut self, io: &NodeIo) {
        match &io.io.op {
            IoOp::NvlogAppend { half, record } => {
                self.nvram[usize::from(*half)].extend_from_slice(&record.encode());
            }
            IoOp::NvlogReset { half } => self.nvram[usize::from(*half)].clear(),
            other => panic!("not an NVRAM operation: {other:?}"),
        }
    }

    fn apply_disk(&mut self, io: &NodeIo) -> IoResult {
        let aggregate = io.aggregate.expect("a disk I/O names its aggregate");
        match &io.io.op {
            IoOp::Read { disk, dbn, count } => {
                if self.lost_disks.contains(&(aggregate, *disk)) {
                    return IoResult::DiskFailed;
                }
                // A block never written reads as zeros, as a new disk's do.
                let sectors = (dbn.0..dbn.0 + u64::from(*count))
                    .map(|block| {
                        let sector = self.disks.get(&(aggregate, *disk, block)).cloned();
                        Some(sector.unwrap_or_else(blank_sector))
                    })
                    .collect();
                IoResult::Read(sectors)
            }
            IoOp::Write { disk, dbn, sectors } => {
                if self.lost_disks.contains(&(aggregate, *disk)) {
                    return IoResult::DiskFailed;
                }
                for (n, sector) in sectors.iter().enumerate() {
                    let at = (aggregate, *disk, dbn.0 + n as u64);
                    self.disks.insert(at, sector.clone());
                }
                IoResult::Done
            }
            // No spares in this world.
            IoOp::AssignSpare { .. } => IoResult::DiskFailed,
            other => panic!("not a disk operation: {other:?}"),
        }
    }

    /// Submits `request` routed by the volume it names (or to `aggregate`)
    /// and runs until it is answered.
    pub fn request(
        &mut self,
        aggregate: Option<AggrId>,
        request: HostRequest,
    ) -> Result<ReplyData, HostError> {
        let id = self.submit(aggregate, request);
        loop {
            if let Some(result) = self.replies.remove(&id) {
                return result;
            }
            assert!(self.step(), "request {id} was never answered");
        }
    }

    /// Submits `request` and returns its id without waiting (see
    /// [`NodeWorld::take_reply`]).
    pub fn submit(&mut self, aggregate: Option<AggrId>, request: HostRequest) -> u64 {
        let submitted = match aggregate {
            Some(aggregate) => self.node.submit_to(self.now, aggregate, request),
            None => self.node.submit(self.now, request),
        };
        let id = submitted.expect("the node takes the request").0;
        self.collect_io();
        id
    }

    /// The reply to request `id`, if it has come.
    pub fn take_reply(&mut self, id: u64) -> Option<Result<ReplyData, HostError>> {
        self.replies.remove(&id)
    }

    /// The node crashes: disk writes in flight land whole or not at all,
    /// NVRAM appends in flight persist as a prefix (the last one perhaps
    /// torn), replies not yet taken are lost. Then it mounts again from what
    /// is there and runs until every aggregate has mounted or failed.
    pub fn crash_and_remount(&mut self) {
        self.crashes += 1;
        for io in core::mem::take(&mut self.disk_flight) {
            // A stripe left half written has no redundancy until the mount's
            // resync writes its parity again: in an aggregate already short
            // of a disk that is a second fault, beyond the promise, so there
            // the writes in flight land whole.
            let degraded = self
                .lost_disks
                .iter()
                .any(|(a, _)| Some(*a) == io.aggregate);
            if matches!(io.io.op, IoOp::Write { .. }) && (degraded || self.rng.chance(1, 2)) {
                self.apply_disk(&io);
            }
        }
        for io in core::mem::take(&mut self.nvram_flight) {
            if !self.rng.chance(3, 4) {
                if let IoOp::NvlogAppend { half, record } = &io.io.op {
                    let bytes = record.encode();
                    let keep = self.rng.below(bytes.len() as u64) as usize;
                    self.nvram[usize::from(*half)].extend_from_slice(&bytes[..keep]);
                }
                break;
            }
            self.apply_nvram(&io);
        }
        self.replies.clear();
        self.remount();
    }

    /// Mounts the node again from its disks and NVRAM, as after a stop.
    pub fn remount(&mut self) {
        assert!(
            self.disk_flight.is_empty() && self.nvram_flight.is_empty(),
            "remount after a crash or once settled"
        );
        let layouts = self
            .layouts
            .iter()
            .map(|(id, l)| (*id, l.clone()))
            .collect();
        let nvlog = [self.nvram[0].as_slice(), self.nvram[1].as_slice()];
        self.node = Node::mount(self.options.clone(), self.now, layouts, nvlog);
        self.collect_io();
        while !self.node.is_online() {
            assert!(
                self.step(),
                "the mount stopped before every aggregate settled: {:?}",
                self.node.aggregates()
            );
        }
    }

    /// Loses disk `disk` of aggregate `aggregate` for good: what it held is
    /// gone and every I/O to it fails.
    pub fn lose_disk(&mut self, aggregate: AggrId, disk: DiskId) {
        self.disks
            .retain(|(a, d, _), _| !(*a == aggregate && *d == disk));
        self.lost_disks.insert((aggregate, disk));
    }

    /// Forgets an aggregate the node destroyed: its disks are blank again.
    pub fn forget_aggregate(&mut self, aggregate: AggrId) {
        self.layouts.remove(&aggregate);
        self.disks.retain(|(a, _, _), _| *a != aggregate);
        self.lost_disks.retain(|(a, _)| *a != aggregate);
    }

    /// Creates an aggregate on blank disks while the node serves.
    pub fn create_aggregate(&mut self, name: &str, layout: Layout) -> AggrId {
        let id = self
            .node
            .create_aggregate(self.now, name, layout.clone())
            .expect("a valid aggregate");
        self.layouts.insert(id, layout);
        self.collect_io();
        id
    }

    /// Takes an aggregate offline and runs until it is.
    pub fn offline(&mut self, aggregate: AggrId) -> Result<(), wafer_core::node::AggrError> {
        self.node.offline_aggregate(self.now, aggregate)?;
        self.collect_io();
        self.run_until_settled();
        Ok(())
    }

    /// Brings an offline aggregate back and runs until it has mounted.
    pub fn online(&mut self, aggregate: AggrId) -> Result<(), wafer_core::node::AggrError> {
        self.node.online_aggregate(self.now, aggregate)?;
        self.collect_io();
        self.run_until_settled();
        Ok(())
    }

    /// Adds blank disks to an aggregate: recorded first, as a driver's
    /// configuration does, then given to the node.
    pub fn add_disks(
        &mut self,
        aggregate: AggrId,
        grown: Layout,
    ) -> Result<(), wafer_core::node::AggrError> {
        let now = self.now;
        self.node.add_disks(now, aggregate, grown.clone())?;
        self.layouts.insert(aggregate, grown);
        self.collect_io();
        Ok(())
    }

    /// Collects what a node call outside the world issued.
    pub fn after_node_call(&mut self) {
        self.collect_io();
    }
}
