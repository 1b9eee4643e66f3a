//! Indirect blocks in the buffer cache: faulted in on demand, evicted by age.
//!
//! A LUN's indirect blocks are buffers like its data: they share the cache's
//! budget ([`Options::cache_blocks`](super::Options)), and one that is not in
//! memory costs a verified disk read (repaired from parity like any other)
//! before anything under it can be looked at. Requests are restartable, as
//! WAFL's messages are: a request first names the part of each tree it needs
//! ([`Filer::request_needs`], [`Filer::op_needs`]); if an indirect block there
//! is absent, its read goes out and the request waits, whole, to be started
//! again from the top when a block arrives. Changes wait in the stalled queue,
//! so they still apply in the order they came; reads wait beside them. A
//! request that needs a whole tree (destroying, restoring or snapshotting, a
//! reallocation) faults it in level by level the same way.
//!
//! Eviction runs only between events, never in the middle of applying a
//! request, and never while a CP runs: a CP writes dirty indirect blocks and
//! fills in their parents' checksums, so every tree stays as it is until it
//! commits. A node is evicted only when it is clean, has no resident child and
//! no cached data block under it (dirty data pins its path for the CP). Data
//! goes first: indirect blocks are evicted only when clean data cannot make
//! room, since one indirect block maps a whole region's data. Among them, the
//! volume's cache policy comes first (`reuse` volumes' go first, `keep`
//! volumes' last), then age: that of the newest data block evicted from under
//! the node. Some work needs every tree
//! whole and keeps it so: a rebuild onto a spare (it names each rebuilt block
//! from the pointers), a reallocation, a snapshot waiting for its CP, and the
//! driver's [`Filer::pin_indirect`] (the simulator's final invariant check).
//! Snapshots keep their frozen trees whole: the trees they share with the
//! active file system are complete when the snapshot is taken.
//!
//! A stamp filer's disks hold digests of its metadata, not the metadata, so it
//! keeps the pointers of an evicted node aside and puts them back when the
//! (verified, timed) read of that node completes: the I/O is the same as a
//! byte filer's.

use core::ops::Range;
use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet};

use super::blockio::ReadPurpose;
use super::meta::FileRef;
use super::node_ages::NodeAges;
use super::{CpReason, Filer, HostRequest, Phase, RequestId};
use crate::fixed_map::{FixedHash, FixedMap, mix_words};
use crate::format::{BlockPtr, POINTERS_PER_BLOCK};
use crate::nvlog::{Change, LoggedOp, LunId};
use crate::payload::{Payload, blocks_covered};
use crate::tree::NodeId;
use crate::units::CpCount;

/// The indirect-block cache's own state, private to this module.
#[derive(Debug)]
pub(super) struct IndirectState {
    /// Indirect blocks being read, with the pointer each read follows.
    node_loads: BTreeMap<(LunId, NodeId), (BlockPtr, Vec<RequestId>)>,
    /// Requests waiting for indirect blocks, with how many of their reads
    /// are still out.
    fault_waits: BTreeMap<RequestId, usize>,
    /// Host requests (not changes) waiting for indirect blocks.
    faulting: Vec<(RequestId, HostRequest)>,
    /// Indirect blocks that could not be read, until the requests waiting
    /// for them have been failed.
    unreadable: BTreeSet<(LunId, NodeId)>,
    /// When each resident indirect block of a LUN was last used.
    indirect_use: NodeAges,
    /// A stamp filer's evicted indirect blocks (its disks hold digests).
    evicted_nodes: FixedMap<(LunId, NodeId), crate::tree::Node>,
    /// The driver keeps every indirect block resident.
    pin_indirect: bool,
    /// No indirect block has been evicted since every tree was last seen
    /// whole (while pinned, trees stay whole once they are).
    indirect_whole: bool,
    /// What the cache held after the last eviction of indirect blocks, and
    /// the newest CP then: pinned nodes can keep the cache over its budget,
    /// and scanning them again is futile until it grows by a batch or a CP
    /// unpins some.
    indirect_floor: (CpCount, usize),
}

impl IndirectState {
    pub(super) fn new() -> IndirectState {
        IndirectState {
            node_loads: BTreeMap::new(),
            fault_waits: BTreeMap::new(),
            faulting: Vec::new(),
            unreadable: BTreeSet::new(),
            indirect_use: NodeAges::default(),
            evicted_nodes: FixedMap::default(),
            pin_indirect: false,
            indirect_whole: true,
            indirect_floor: (CpCount(0), 0),
        }
    }

    /// Host request `id` waits for the indirect blocks it needs.
    pub(super) fn park(&mut self, id: RequestId, request: HostRequest) {
        self.faulting.push((id, request));
    }
}

/// Whether a request's indirect blocks are all in memory.
pub(super) enum Fault {
    /// They are: go ahead.
    Ready,
    /// Some are being read; the request waits.
    Waiting,
    /// One could not be read even with RAID.
    Unreadable,
}

impl<P: Payload> Filer<P> {
    /// The parts of LUN trees a host request (other than a change) walks.
    pub(super) fn request_needs(&self, request: &HostRequest) -> Vec<(LunId, Range<u64>)> {
        match request {
            HostRequest::Read {
                lun,
                offset,
                length,
            } => vec![(*lun, blocks_covered(*offset, *length))],
            HostRequest::ReallocateMeasure { lun } | HostRequest::ReallocateStart { lun } => {
                vec![(*lun, 0..u64::MAX)]
            }
            HostRequest::ReadSnapshot { .. } | HostRequest::Flush | HostRequest::Change(_) => {
                Vec::new()
            }
        }
    }

    /// The parts of LUN trees a change walks when it is validated and applied.
    pub(super) fn op_needs(&self, op: &LoggedOp) -> Vec<(LunId, Range<u64>)> {
        let LoggedOp::Change(change) = op else {
            return Vec::new();
        };
        match change {
            Change::Write { lun, offset, data } => {
                vec![(*lun, blocks_covered(*offset, data.len() as u64))]
            }
            Change::Trim {
                lun,
                offset,
                length,
            } => vec![(*lun, blocks_covered(*offset, *length))],
            Change::ResizeLun { lun, size_bytes } => {
                vec![(*lun, blocks_covered(*size_bytes, u64::MAX))]
            }
            Change::DestroyLun { lun } => vec![(*lun, 0..u64::MAX)],
            Change::CreateSnapshot { volume, .. }
            | Change::ScheduledSnapshot { volume, .. }
            | Change::RestoreSnapshot { volume, .. } => self
                .lun_trees()
                .filter(|(lun, _)| lun.volume == *volume)
                .map(|(lun, _)| (lun, 0..u64::MAX))
                .collect(),
            Change::CreateVolume { .. }
            | Change::CreateLun { .. }
            | Change::DeleteSnapshot { .. }
            | Change::SetSnapReserve { .. }
            | Change::SetSnapSchedule { .. }
            | Change::SetVolumeOnline { .. }
            | Change::ResizeVolume { .. }
            | Change::DestroyVolume { .. }
            | Change::SetCachePolicy { .. }
            | Change::SetReadRealloc { .. } => Vec::new(),
        }
    }

    /// Starts reading the absent indirect blocks of `needs` (those not on
    /// their way already) for request `id` and says whether it can go ahead.
    /// A request already waiting for some of its reads goes on waiting
    /// without looking again, so that a request over a whole tree (a
    /// snapshot, a LUN destroyed) scans the tree once per level, not once
    /// per block read: that made snapshotting a LUN with 25,000 absent
    /// level-1 blocks take seconds of CPU. It waits only for the reads it
    /// asked for, so other requests' reads cannot keep it waiting.
    pub(super) fn fault_in(&mut self, id: RequestId, needs: Vec<(LunId, Range<u64>)>) -> Fault {
        if self.indirect.fault_waits.contains_key(&id) {
            return Fault::Waiting;
        }
        let mut absent: Vec<(LunId, NodeId, crate::format::BlockPtr)> = needs
            .into_iter()
            .filter_map(|(lun, range)| {
                let (_, l) = self.namespace.lun(lun).ok()?;
                Some(
                    l.tree
                        .missing(range)
                        .into_iter()
                        .map(move |(n, p)| (lun, n, p)),
                )
            })
            .flatten()
            .collect();
        if absent.is_empty() {
            return Fault::Ready;
        }
        if absent
            .iter()
            .any(|(lun, node, _)| self.indirect.unreadable.contains(&(*lun, *node)))
        {
            return Fault::Unreadable;
        }
        let mut seen = std::collections::BTreeSet::new();
        absent.retain(|(lun, node, _)| seen.insert((*lun, *node)));
        self.indirect.fault_waits.insert(id, absent.len());
        self.read_indirect(absent, Some(id));
        Fault::Waiting
    }

    /// Issues reads of indirect blocks for request `waiter` (none when the
    /// filer keeps trees whole for itself); one already on its way gets the
    /// waiter and is not read twice.
    fn read_indirect(
        &mut self,
        nodes: Vec<(LunId, NodeId, crate::format::BlockPtr)>,
        waiter: Option<RequestId>,
    ) {
        let mut reads = Vec::new();
        for (lun, node, ptr) in nodes {
            match self.indirect.node_loads.entry((lun, node)) {
                Entry::Occupied(mut load) => {
                    load.get_mut().1.extend(waiter);
                    continue;
                }
                Entry::Vacant(load) => {
                    load.insert((ptr, waiter.into_iter().collect()));
                }
            }
            self.counters.indirect_reads += 1;
            let purpose = ReadPurpose::Indirect(lun, node);
            reads.push(self.block_read(FileRef::Lun(lun), node.0, node.1, ptr, purpose));
        }
        self.read_blocks(reads);
    }

    /// An indirect block has arrived (or could not be recovered). It is
    /// installed if its tree still wants it, and the waiting requests start
    /// again.
    pub(super) fn indirect_arrived(
        &mut self,
        lun: LunId,
        node: NodeId,
        content: Option<P::Content>,
    ) {
        let (ptr, waiters) = self
            .indirect
            .node_loads
            .remove(&(lun, node))
            .expect("an indirect read that was issued");
        for waiter in waiters {
            let left = self
                .indirect
                .fault_waits
                .get_mut(&waiter)
                .expect("a waiting request");
            *left -= 1;
            if *left == 0 {
                self.indirect.fault_waits.remove(&waiter);
            }
        }
        match content {
            Some(content) if self.still_wanted(lun, node, ptr) => {
                match P::bytes(&content) {
                    Some(bytes) => self.namespace.lun_tree_mut(lun).load_node(node, bytes),
                    None => {
                        let pointers = self
                            .indirect
                            .evicted_nodes
                            .remove(&(lun, node))
                            .expect("a stamp filer keeps what it evicts");
                        assert_eq!(
                            P::checksum(&P::from_node(&pointers)),
                            ptr.checksum,
                            "the indirect block kept aside is the one on disk"
                        );
                        self.namespace
                            .lun_tree_mut(lun)
                            .restore_node(node, pointers);
                    }
                }
                self.indirect.indirect_use.set(lun, node, self.use_clock);
            }
            Some(_) => {}
            None => {
                self.counters.unrecoverable_blocks += 1;
                self.indirect.unreadable.insert((lun, node));
            }
        }
        self.restart_faulting();
        self.indirect.unreadable.clear();
        self.rebuild_when_whole();
    }

    /// Whether `node` is still absent from the LUN's tree, its parent
    /// resident, and its pointer the one that was read.
    fn still_wanted(&self, lun: LunId, node: NodeId, ptr: crate::format::BlockPtr) -> bool {
        let Ok((_, l)) = self.namespace.lun(lun) else {
            return false;
        };
        let tree = &l.tree;
        let parent_resident = node.0 >= tree.level()
            || tree.is_resident((
                node.0 + 1,
                node.1 / crate::format::POINTERS_PER_BLOCK as u64,
            ));
        parent_resident && !tree.is_resident(node) && tree.node_ptr(node) == ptr
    }

    /// Starts again every request that waited for indirect blocks.
    fn restart_faulting(&mut self) {
        for (id, request) in core::mem::take(&mut self.indirect.faulting) {
            self.dispatch(id, request);
        }
        self.resume_stalled();
    }

    /// A rebuild, and a scrub naming damaged blocks, wait for whole trees;
    /// once they are, their CP can start.
    fn rebuild_when_whole(&mut self) {
        let idle = self.cp.is_none() && matches!(self.phase, Phase::Online);
        let wanted = self.rebuild_wants_cp() || self.scrub_wants_cp();
        if idle && self.indirect.node_loads.is_empty() && wanted {
            self.start_cp(CpReason::Sync);
        }
    }

    /// Whether every tree must stay whole: a rebuild, a reallocation, a
    /// snapshot or a scrub naming damaged blocks in progress, or the driver
    /// asked.
    fn indirect_pinned(&self) -> bool {
        self.indirect.pin_indirect
            || self.rebuild.is_some()
            || self.realloc.is_some()
            || self.scrub_needs_names()
    }

    /// Every active LUN's tree, with the LUN.
    fn lun_trees(&self) -> impl Iterator<Item = (LunId, &crate::tree::BlockTree)> {
        self.namespace.volumes().flat_map(|(volume, v)| {
            v.luns
                .iter()
                .map(move |(&file, l)| (LunId { volume, file }, &l.tree))
        })
    }

    /// Whether every LUN tree is whole in memory.
    pub fn indirect_complete(&self) -> bool {
        self.lun_trees().all(|(_, tree)| tree.is_complete())
    }

    /// Keeps every indirect block in memory (reading the absent ones) while
    /// `pinned`; [`indirect_complete`](Self::indirect_complete) tells when
    /// they all are. The simulator pins before it checks invariants.
    pub fn pin_indirect(&mut self, pinned: bool) {
        self.indirect.pin_indirect = pinned;
        self.tend_indirect();
    }

    /// What the buffer cache holds now.
    pub fn cache_usage(&self) -> super::CacheUsage {
        super::CacheUsage {
            data_blocks: self.cache.len(),
            indirect_blocks: self.resident_indirect(),
        }
    }

    /// Resident indirect blocks of the active LUN trees: what they take of the
    /// cache's budget.
    pub(super) fn resident_indirect(&self) -> usize {
        // Summed volume by volume: asked for on every block delivered or
        // written, and a flattened walk costs more than the sums.
        self.namespace
            .volumes()
            .map(|(_, v)| {
                v.luns
                    .values()
                    .map(|l| l.tree.resident_nodes())
                    .sum::<usize>()
            })
            .sum()
    }

    /// Between events: reads every absent indirect block while trees must
    /// stay whole, else evicts indirect blocks while the cache is over its
    /// budget.
    pub(super) fn tend_indirect(&mut self) {
        if !matches!(self.phase, Phase::Online) {
            return;
        }
        if self.indirect_pinned() {
            if self.indirect.indirect_whole {
                return;
            }
            let absent: Vec<_> = self
                .lun_trees()
                .flat_map(|(lun, tree)| {
                    tree.missing(0..u64::MAX)
                        .into_iter()
                        .map(move |(node, ptr)| (lun, node, ptr))
                })
                .collect();
            self.indirect.indirect_whole = absent.is_empty() && self.indirect.node_loads.is_empty();
            return self.read_indirect(absent, None);
        }
        if self.cp.is_none() {
            self.evict_indirect();
        }
    }

    /// Sets the blocks this aggregate's buffer cache keeps
    /// ([`Options::cache_blocks`]): its share of its node's budget, at
    /// least [`MIN_CACHE_SHARE`](super::MIN_CACHE_SHARE). A serving
    /// aggregate whose share shrank evicts down to it at once, so that the
    /// node's aggregates together keep within the budget.
    pub fn set_cache_share(&mut self, blocks: usize) {
        let blocks = blocks.max(super::MIN_CACHE_SHARE);
        let shrunk = blocks < self.options.cache_blocks;
        self.options.cache_blocks = blocks;
        if !(shrunk && self.is_online()) {
            return;
        }
        // How far the last evictions got under the old size says nothing
        // of the new one.
        self.data_floor = (self.committed, 0);
        self.indirect.indirect_floor = (self.committed, 0);
        // Indirect blocks stay while a CP runs or trees must stay whole (a
        // rebuild, a scrub, a reallocation or the simulator walks them:
        // seed 110050 of --thin, where the node shrank a scrubbing
        // aggregate's share and three level-1 blocks went).
        match self.cp.is_none() && !self.indirect_pinned() {
            true => self.evict_indirect(),
            false => self.evict(),
        }
    }

    /// Evicts the oldest evictable indirect blocks while data and indirect
    /// blocks together are over the cache's budget.
    fn evict_indirect(&mut self) {
        let resident = self.resident_indirect();
        self.evict_data(resident); // data first
        let limit = self.options.cache_blocks + self.dirty.len();
        let total = self.cache.len() + resident;
        let batch = self.options.cache_blocks / 16;
        if !super::eviction_due(
            self.indirect.indirect_floor,
            self.committed,
            total,
            limit,
            batch,
        ) {
            return;
        }
        let excess = total - limit + batch;
        let waiting = self.waiting_ranges();
        let mut victims: Vec<(super::CachePolicy, u64, LunId, NodeId)> = Vec::new();
        for (volume, v) in self.namespace.volumes() {
            if v.pending_snapshot.is_some() {
                continue;
            }
            for (&file, l) in &v.luns {
                let lun = LunId { volume, file };
                for node in l.tree.resident() {
                    let busy = || {
                        self.caches_under(lun, node)
                            || self.loading_under(lun, node)
                            || waited_for(&waiting, lun, node)
                    };
                    if l.tree.is_evictable(node) && !busy() {
                        let age = self.indirect.indirect_use.age(lun, node);
                        victims.push((v.cache_policy, age, lun, node));
                    }
                }
            }
        }
        if excess < victims.len() {
            victims.select_nth_unstable(excess);
        }
        self.indirect.indirect_floor = (self.committed, total - excess.min(victims.len()));
        for (_, _, lun, node) in victims.into_iter().take(excess) {
            self.indirect.indirect_whole = false;
            let tree = self.namespace.lun_tree_mut(lun);
            let ptr = tree.node_ptr(node);
            let pointers = tree.evict(node);
            self.offer_indirect(lun, node, ptr, &pointers);
            self.indirect.indirect_use.forget(lun, node);
            self.counters.indirect_evictions += 1;
            if !P::READS_METADATA {
                self.indirect.evicted_nodes.insert((lun, node), pointers);
            }
        }
    }

    /// Whether a cached data block (in any state) lies under `node`: such a
    /// node stays, since the CP or a fill needs its path. A higher node is
    /// evicted only with no child resident, so what it covers in the cache
    /// lies under its holes: blocks written where no level-1 node exists
    /// yet, whose path the CP builds down from this node (seed 5 of
    /// `--thin`, the first check whose LUNs have trees of level 2).
    fn caches_under(&self, lun: LunId, (level, index): NodeId) -> bool {
        if level == 1 {
            return self.cache.caches_under_l1(lun, index);
        }
        let Ok((_, l)) = self.namespace.lun(lun) else {
            return false;
        };
        let written: BTreeSet<u64> = (l.tree.children((level, index)).into_iter())
            .map(|(child, _)| child)
            .collect();
        let per_node = POINTERS_PER_BLOCK as u64;
        let level_ones_per_child = per_node.pow(u32::from(level) - 2);
        let first = index * per_node;
        (first..first + per_node)
            .filter(|child| !written.contains(child))
            .flat_map(|child| child * level_ones_per_child..(child + 1) * level_ones_per_child)
            .any(|l1| self.cache.caches_under_l1(lun, l1))
    }

    /// The parts of LUN trees that waiting requests need, merged per LUN: their
    /// resident nodes stay, or a request needing more of a tree than the
    /// cache holds would never find it all in memory at once.
    fn waiting_ranges(&self) -> BTreeMap<LunId, Vec<Range<u64>>> {
        let requests = self
            .indirect
            .faulting
            .iter()
            .map(|(_, r)| self.request_needs(r));
        let changes = self.stalled.iter().map(|(_, op)| self.op_needs(op));
        let mut out: BTreeMap<LunId, Vec<Range<u64>>> = BTreeMap::new();
        for (lun, range) in requests.chain(changes).flatten() {
            out.entry(lun).or_default().push(range);
        }
        for ranges in out.values_mut() {
            ranges.sort_by_key(|r| r.start);
            let mut merged: Vec<Range<u64>> = Vec::new();
            for range in ranges.drain(..) {
                match merged.last_mut() {
                    Some(last) if range.start <= last.end => last.end = last.end.max(range.end),
                    _ => merged.push(range),
                }
            }
            *ranges = merged;
        }
        out
    }

    /// Whether a child of `node` is being read: the node stays, so that the
    /// child finds its parent when it arrives.
    fn loading_under(&self, lun: LunId, (level, index): NodeId) -> bool {
        let first = index * crate::format::POINTERS_PER_BLOCK as u64;
        let last = first + crate::format::POINTERS_PER_BLOCK as u64;
        self.indirect
            .node_loads
            .range((lun, (level - 1, first))..(lun, (level - 1, last)))
            .next()
            .is_some()
    }

    /// Data blocks leave the cache, each as ((LUN, fbn), last use): the
    /// indirect block over each is as recently used as the block was.
    pub(super) fn note_data_evicted(&mut self, evicted: &[super::cache::Evicted<P>]) {
        let per_node = crate::format::POINTERS_PER_BLOCK as u64;
        self.indirect.indirect_use.raise_level1(
            evicted
                .iter()
                .map(|block| (block.key.0, block.key.1.0 / per_node, block.last_use)),
        );
    }
}

/// A LUN's indirect block.
impl FixedHash for (LunId, NodeId) {
    fn fixed_hash(&self) -> u64 {
        let (lun, (level, index)) = *self;
        mix_words(super::cache::lun_word(lun) ^ u64::from(level) << 56, index)
    }
}

/// Whether node `(level, index)` of `lun` covers content blocks a waiting
/// request needs (`waiting` holds sorted, disjoint ranges per LUN).
fn waited_for(
    waiting: &BTreeMap<LunId, Vec<Range<u64>>>,
    lun: LunId,
    (level, index): NodeId,
) -> bool {
    let Some(ranges) = waiting.get(&lun) else {
        return false;
    };
    let span = (crate::format::POINTERS_PER_BLOCK as u64).pow(u32::from(level));
    let (first, end) = (index * span, (index + 1) * span);
    let after = ranges.partition_point(|r| r.end <= first);
    ranges.get(after).is_some_and(|r| r.start < end)
}
