//! Consistency points: everything dirty goes to new places, then the superblock.
//!
//! A CP runs in four steps.
//!
//! 1. **Capture.** Freeze the active NVLog half; take a copy of every dirty
//!    cached block. Blocks still being read for a partial write are waited for
//!    (only their changes of this CP's generation are taken). Operations that
//!    change trees wait until capture ends.
//! 2. **Allocate.** Give every captured block, then every dirty indirect block
//!    and metadata block, a new address from the write allocator, bottom up.
//!    Allocating changes the maps, which dirties map blocks, which need
//!    addresses in turn: repeat until nothing new is dirty (ONTAP's ALLOC_LOOP).
//!    Blocks this frees stay held until this CP commits. Then encode every block.
//! 3. **Write.** Group the blocks by stripe. Whole stripes get parity computed in
//!    memory; partial stripes read what the cheaper parity update needs first.
//! 4. **Commit.** When every write is durable, write the superblock copy for this
//!    CP (A for even, B for odd). When that is durable the CP is committed: held
//!    blocks become free, the frozen NVLog half is released, flushes complete.
//!
//! A crash anywhere before the superblock lands leaves the previous CP intact,
//! since nothing it references was overwritten; recovery replays the log.

use std::collections::{BTreeMap, BTreeSet};

use wafer_raid::{
    Dbn, DiskIndex, DiskSet, ParityDelta, ParityUpdateMethod, ParityUpdatePlan, StripeUnit,
};

use super::meta::{FileRef, MetaFile, SUPERBLOCK_FILE, Volume};
use super::{Filer, IoOp, IoPurpose, IoResult, PREFETCH_AHEAD, Phase, ReplyData, Sector};
use crate::BLOCK_SIZE;
use crate::bitmap::Bitmap;
use crate::fixed_map::{FixedHash, FixedMap, mix_words};
use crate::format::{AGGREGATE_VOLUME, BlockPtr, Identity, Superblock, Trailer};
use crate::nvlog::LunId;
use crate::payload::Payload;
use crate::tree::{BlockTree, NodeId};
use crate::units::{CpCount, DiskId, Fbn, Pvbn, Vvbn};

use super::api::CpReason;

/// A block of a file at a tree level, by index: (file, level, index).
type LevelBlock = (FileRef, u8, u64);

/// The blocks a CP has given new addresses so far: a block dirtied again by
/// the cleaning of another (a map block that records its own move) keeps the
/// address it got. Only asked "seen before?", for every metadata block a CP
/// writes: some thousands a CP under E1.
type Cleaned = FixedMap<LevelBlock, ()>;

impl FixedHash for LevelBlock {
    fn fixed_hash(&self) -> u64 {
        let (volume, file) = self.0.ids();
        let level_and_index = u64::from(self.1) << 56 ^ self.2;
        mix_words(
            u64::from(volume.0) << 32 | u64::from(file.0),
            level_and_index,
        )
    }
}

/// Where a block's content comes from when the CP encodes it.
#[derive(Debug)]
enum Content<P: Payload> {
    Data(P::Content),
    Node(FileRef, NodeId),
    Meta(FileRef, u64),
}

#[derive(Debug)]
struct PlannedWrite<P: Payload> {
    ptr: BlockPtr,
    file: FileRef,
    level: u8,
    index: u64,
    content: Content<P>,
}

/// What a CP does with one stripe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum StripeWork {
    /// Writes the CP's new blocks there, parity updated to match.
    Write,
    /// Writes the CP's new blocks there, if any, and the stripe's block of
    /// the failed disk `onto` the spare that replaces it.
    Rebuild { onto: DiskIndex },
    /// Reads the whole stripe for the scrub, which writes only repairs.
    Scrub,
}

/// One stripe's share of the CP.
#[derive(Clone, Debug)]
struct StripeJob<P: Payload> {
    work: StripeWork,
    new: BTreeMap<DiskIndex, Sector<P>>,
    plan: ParityUpdatePlan,
    failed: DiskSet,
    old: BTreeMap<DiskIndex, Option<Sector<P>>>,
    reads_left: usize,
}

/// A consistency point in progress.
#[derive(Clone, Debug)]
pub(super) struct Cp<P: Payload> {
    pub(super) number: CpCount,
    reason: CpReason,
    started: crate::units::Instant,
    half: u8,
    staged: BTreeMap<(usize, u64), BTreeMap<DiskIndex, Sector<P>>>,
    image_map: Option<Bitmap>,
    capturing: bool,
    awaiting: BTreeSet<(LunId, Fbn)>,
    /// The blocks it writes, with their content as of its generation: the
    /// dirty ones when it began, then those it awaited as they arrive.
    captured: Vec<((LunId, Fbn), P::Content)>,
    pinned: Vec<(LunId, Fbn)>,
    stripes: BTreeMap<(usize, u64), StripeJob<P>>,
    writes_left: usize,
    superblock: bool,
    flushes: Vec<super::RequestId>,
    snapshot_waiters: Vec<super::RequestId>,
    /// The stripes this CP rebuilds onto a spare.
    pub(super) rebuild: Option<super::rebuild::RebuildBatch>,
    /// The stripes this CP scrubs.
    pub(super) scrub: Option<super::scrub::ScrubBatch>,
    /// Whether this CP's superblock records the rebuild in progress.
    records_rebuild: bool,
    /// Whether this CP's superblock records the aggregate offline.
    records_offline: bool,
    /// A CP in the middle of replay: the NVLog halves still hold records to
    /// replay, so this CP neither freezes nor releases one.
    keeps_log: bool,
}

impl<P: Payload> Cp<P> {
    /// Whether the CP is waiting for `key`'s old content before it can capture it.
    pub(super) fn awaits(&self, key: (LunId, Fbn)) -> bool {
        self.capturing && self.awaiting.contains(&key)
    }

    /// The blocks it is capturing and has not allocated yet: none once
    /// capture is over.
    pub(super) fn capturing_keys(&self) -> impl Iterator<Item = (LunId, Fbn)> + '_ {
        let captured = self.captured.iter().map(|(key, _)| *key);
        let keys = captured.chain(self.awaiting.iter().copied());
        keys.filter(|_| self.capturing)
    }

    /// Whether the CP is still capturing (tree changes must wait).
    pub(super) fn is_capturing(&self) -> bool {
        self.capturing
    }
}

impl<P: Payload> Filer<P> {
    /// Starts a CP.
    pub(super) fn start_cp(&mut self, reason: CpReason) {
        self.start_cp_logging(reason, false);
    }

    /// Starts a CP; `keeps_log` for one that replay runs before it is done.
    pub(super) fn start_cp_logging(&mut self, reason: CpReason, keeps_log: bool) {
        assert!(self.cp.is_none(), "one CP at a time");
        self.apply_growth();
        // A snapshot's CP in the middle of replay comes where no CP began
        // the first time: replay takes volumes out between generations.
        if !keeps_log {
            self.destroy_volumes();
        }
        for volume in self.namespace.grow_vvbn_spaces() {
            self.volume_record_dirty(volume);
        }
        let number = CpCount(self.committed.0 + 1);
        let half = match keeps_log {
            true => self.log.active_half(),
            false => self.log.freeze(),
        };
        let mut cp = Cp {
            number,
            reason,
            started: self.now,
            half,
            staged: BTreeMap::new(),
            image_map: None,
            capturing: true,
            awaiting: BTreeSet::new(),
            captured: Vec::with_capacity(self.dirty.len()),
            pinned: Vec::with_capacity(self.dirty.len()),
            stripes: BTreeMap::new(),
            writes_left: 0,
            superblock: false,
            flushes: core::mem::take(&mut self.flush_waiting),
            snapshot_waiters: Vec::new(),
            rebuild: None,
            scrub: None,
            records_rebuild: false,
            records_offline: false,
            keeps_log,
        };
        let mut dirty: Vec<(LunId, Fbn)> = self.dirty.iter().map(|(key, ())| *key).collect();
        // In (LUN, fbn) order, compared as one number (a LUN's word is its
        // volume above its file, so it orders LUNs as `LunId` does): cheaper
        // than comparing the tuple field by field, over thousands a CP.
        dirty.sort_unstable_by_key(|&(lun, fbn)| {
            u128::from(super::cache::lun_word(lun)) << 64 | u128::from(fbn.0)
        });
        // Emptied, not replaced: the next CP's dirty blocks come in as many.
        self.dirty.clear();
        for key in dirty {
            let entry = self.cache.get_mut(&key).expect("dirty blocks are cached");
            let content = entry.content().expect("dirty blocks have content");
            cp.captured.push((key, content.clone()));
            entry.dirty = false;
            entry.pinned = true;
            cp.pinned.push(key);
        }
        for (key, filling) in self.cache.filling() {
            if filling.queue.iter().any(|op| op.generation <= number) {
                cp.awaiting.insert(key);
                cp.pinned.push(key);
            }
        }
        let ready = cp.awaiting.is_empty();
        self.cp = Some(cp);
        if ready {
            self.allocate_and_write();
        }
    }

    /// The CP has the content it waited for.
    pub(super) fn cp_captured(&mut self, key: (LunId, Fbn), content: P::Content) {
        let cp = self.cp.as_mut().expect("a CP awaits this block");
        cp.awaiting.remove(&key);
        cp.captured.push((key, content));
        if cp.awaiting.is_empty() {
            self.allocate_and_write();
        }
    }

    /// The block the CP waited for cannot be read even with RAID (damage
    /// beyond the group's promise): the CP goes on without it, leaving the
    /// block as the last CP wrote it, rather than waiting for ever.
    pub(super) fn cp_capture_lost(&mut self, key: (LunId, Fbn)) {
        let cp = self.cp.as_mut().expect("a CP awaits this block");
        cp.awaiting.remove(&key);
        if cp.awaiting.is_empty() {
            self.allocate_and_write();
        }
    }

    fn allocate_and_write(&mut self) {
        let mut cp = self.cp.take().expect("a CP");
        cp.capturing = false;
        let number = cp.number;
        self.aggregate
            .allocator
            .begin_cp(cp.captured.len() as u64 + 16);
        // The captured blocks, and room for about as many metadata blocks.
        let mut writes = Vec::with_capacity(2 * cp.captured.len());
        let mut captured = core::mem::take(&mut cp.captured);
        // In key order already but for blocks that were being read when the
        // CP began, appended at the end: a stable sort finds that one run
        // and merges the tail in, where an unstable one starts over.
        captured.sort_by_key(|&(key, _)| key);
        assert!(
            captured.windows(2).all(|pair| pair[0].0 != pair[1].0),
            "a block captured twice"
        );
        // Each block's new pointer goes into a level-1 node that is, at
        // scale, cold: the node is hinted at two strides ahead, then (found
        // by then) its pointer one stride ahead.
        let keys: Vec<(LunId, Fbn)> = captured.iter().map(|&(key, _)| key).collect();
        for (at, ((lun, fbn), data)) in captured.into_iter().enumerate() {
            // A captured block's LUN may be gone by now (see `live` below).
            if let Some(&(lun, fbn)) = keys.get(at + 2 * PREFETCH_AHEAD)
                && let Ok((_, l)) = self.namespace.lun(lun)
            {
                l.tree.prefetch_node(fbn);
            }
            if let Some(&(lun, fbn)) = keys.get(at + PREFETCH_AHEAD)
                && let Ok((_, l)) = self.namespace.lun(lun)
            {
                l.tree.prefetch_pointer(fbn);
            }
            let live = self
                .namespace
                .volume(lun.volume)
                .and_then(|v| v.luns.get(&lun.file))
                .is_some_and(|l| fbn.0 * (BLOCK_SIZE as u64) < l.size_bytes);
            if !live {
                continue;
            }
            let file = FileRef::Lun(lun);
            let ptr = match self.layout.is_hybrid() {
                true => self.allocate_data_block(lun, fbn, number),
                false => self.allocate_block(file, number),
            };
            let old = self.namespace.lun_tree_mut(lun).set(fbn, ptr);
            if self.layout.is_hybrid() {
                self.note_data_placed(lun, fbn, ptr.pvbn, old);
            }
            self.free_block(file, old, number);
            writes.push(PlannedWrite {
                ptr,
                file,
                level: 0,
                index: fbn.0,
                content: Content::Data(data),
            });
        }
        let mut cleaned = Cleaned::default();
        loop {
            let mut progress = false;
            for file in self.files_to_clean() {
                progress |= self.clean_file(file, number, &mut cleaned, &mut writes);
            }
            // Once the volumes' images are allocated, snapshots taken by this
            // CP join the summary maps, whose blocks then need addresses.
            if !progress && !self.map_pending_snapshots(number) {
                break;
            }
        }
        cp.image_map = Some(self.aggregate.activemap.clone());
        self.cp = Some(cp);
        self.write_blocks(writes, number);
        self.resume_stalled();
    }

    /// Every file that may hold dirt: LUNs with dirty indirect blocks, then the
    /// metadata files in the order their cleaning dirties the next.
    fn files_to_clean(&self) -> Vec<FileRef> {
        let mut files = Vec::new();
        for (volume, v) in self.namespace.volumes() {
            for (&file, lun) in &v.luns {
                if lun.tree.has_dirty_nodes() || lun.tree.root_changed() {
                    files.push(FileRef::Lun(LunId { volume, file }));
                }
            }
            files.extend([
                FileRef::Inofile(volume),
                FileRef::VolumeMap(volume),
                FileRef::Container(volume),
                FileRef::SnapInfo(volume),
                FileRef::SummaryMap(volume),
            ]);
        }
        files.extend([FileRef::VolumeTable, FileRef::AggregateMap]);
        files
    }

    /// Gives new addresses to a file's dirty blocks, bottom up. Returns whether
    /// anything was allocated.
    fn clean_file(
        &mut self,
        file: FileRef,
        number: CpCount,
        cleaned: &mut Cleaned,
        writes: &mut Vec<PlannedWrite<P>>,
    ) -> bool {
        let mut progress = false;
        let dirty_content = match self.meta_file_mut(file) {
            Some(meta) => meta.dirty.take(),
            None => Vec::new(),
        };
        for fbn in dirty_content {
            if cleaned.insert((file, 0, fbn), ()).is_some() {
                continue;
            }
            let ptr = self.allocate_block(file, number);
            let old = self.tree_mut(file).set(Fbn(fbn), ptr);
            self.free_block(file, old, number);
            writes.push(PlannedWrite {
                ptr,
                file,
                level: 0,
                index: fbn,
                content: Content::Meta(file, fbn),
            });
            progress = true;
        }
        for level in 1..=self.tree_mut(file).level() {
            for node in self.tree_mut(file).dirty_nodes(level) {
                self.tree_mut(file).mark_clean(node);
                if cleaned.insert((file, node.0, node.1), ()).is_some() {
                    continue;
                }
                let ptr = self.allocate_block(file, number);
                let old = self.tree_mut(file).set_node_ptr(node, ptr);
                self.free_block(file, old, number);
                writes.push(PlannedWrite {
                    ptr,
                    file,
                    level: node.0,
                    index: node.1,
                    content: Content::Node(file, node),
                });
                progress = true;
            }
        }
        // A root change, here or since the last CP (a trim, a resize), is a
        // change of the inode that holds the root.
        if self.tree_mut(file).take_root_changed() {
            self.mark_owner_dirty(file);
        }
        progress
    }

    /// Marks the block holding `file`'s inode dirty.
    fn mark_owner_dirty(&mut self, file: FileRef) {
        match file {
            FileRef::Lun(lun) => {
                let volume = self
                    .namespace
                    .volume_mut(lun.volume)
                    .expect("volume of a LUN");
                volume.inofile.dirty.insert(Volume::inofile_block(lun.file));
            }
            FileRef::Inofile(v)
            | FileRef::VolumeMap(v)
            | FileRef::Container(v)
            | FileRef::SnapInfo(v)
            | FileRef::SummaryMap(v) => self.volume_record_dirty(v),
            // Their inodes live in the superblock, written by every CP.
            FileRef::AggregateMap | FileRef::VolumeTable => {}
            FileRef::SnapshotInofile(..) | FileRef::SnapshotLun(..) => {
                unreachable!("snapshots are never written")
            }
        }
    }

    pub(super) fn tree_mut(&mut self, file: FileRef) -> &mut BlockTree {
        match file {
            FileRef::Lun(lun) => self.namespace.lun_tree_mut(lun),
            FileRef::SnapshotInofile(v, id) => &mut self.snapshot_mut(v, id).inofile,
            FileRef::SnapshotLun(lun, id) => {
                &mut self
                    .snapshot_mut(lun.volume, id)
                    .luns
                    .get_mut(&lun.file)
                    .expect("a snapshot's LUN")
                    .tree
            }
            _ => &mut self.meta_file_mut(file).expect("a metadata file").tree,
        }
    }

    fn snapshot_mut(
        &mut self,
        volume: crate::units::VolumeId,
        id: crate::units::SnapshotId,
    ) -> &mut super::meta::Snapshot {
        self.namespace
            .volume_mut(volume)
            .and_then(|v| v.snapshots.get_mut(&id))
            .expect("a snapshot")
    }

    pub(super) fn meta_file_mut(&mut self, file: FileRef) -> Option<&mut MetaFile> {
        match file {
            FileRef::Lun(_) | FileRef::SnapshotInofile(..) | FileRef::SnapshotLun(..) => None,
            FileRef::Inofile(v) => self.namespace.volume_mut(v).map(|v| &mut v.inofile),
            FileRef::SnapInfo(v) => self.namespace.volume_mut(v).map(|v| &mut v.snapinfo),
            FileRef::SummaryMap(v) => self.namespace.volume_mut(v).map(|v| &mut v.summary_file),
            FileRef::VolumeMap(v) => self.namespace.volume_mut(v).map(|v| &mut v.activemap_file),
            FileRef::Container(v) => self.namespace.volume_mut(v).map(|v| &mut v.container_file),
            FileRef::AggregateMap => Some(&mut self.aggregate.activemap_file),
            FileRef::VolumeTable => Some(&mut self.aggregate.volume_table),
        }
    }

    /// A hybrid aggregate's data block: on SSD if Flash Pool's write cache
    /// wants it and has room, else on HDD.
    fn allocate_data_block(&mut self, lun: LunId, fbn: Fbn, number: CpCount) -> BlockPtr {
        let old = self.namespace[lun.volume].luns[&lun.file].tree.get(fbn);
        if self.wants_ssd(lun, fbn, old) {
            let aggregate = &mut self.aggregate;
            let (activemap, pending) = (&aggregate.activemap, &aggregate.pending);
            let ssd = aggregate.allocator.allocate_ssd(&self.layout, |p| {
                !activemap.get(p.0) && !pending.is_held(p.0)
            });
            match ssd {
                Some(pvbn) => return self.take_block(FileRef::Lun(lun), pvbn, number),
                None => self.counters.hya.ssd_full_rejects += 1,
            }
        }
        self.allocate_block(FileRef::Lun(lun), number)
    }

    /// Takes an HDD pvbn (and, for volume files, a vvbn) for a block of `file`.
    fn allocate_block(&mut self, file: FileRef, number: CpCount) -> BlockPtr {
        let aggregate = &mut self.aggregate;
        let (activemap, pending) = (&aggregate.activemap, &aggregate.pending);
        let pvbn = aggregate
            .allocator
            .allocate(&self.layout, |p| {
                !activemap.get(p.0) && !pending.is_held(p.0)
            })
            .expect("the aggregate ran out of blocks: space reservations must prevent this");
        self.take_block(file, pvbn, number)
    }

    /// Marks `pvbn` used by a block of `file` (with a vvbn for volume files).
    fn take_block(&mut self, file: FileRef, pvbn: Pvbn, number: CpCount) -> BlockPtr {
        assert!(
            !self.committed_map.get(pvbn.0),
            "pvbn {pvbn} belongs to committed CP {} and was allocated before it was released",
            self.committed.0
        );
        let aggregate = &mut self.aggregate;
        aggregate.activemap.set(pvbn.0);
        aggregate
            .activemap_file
            .dirty
            .insert(Bitmap::block_of(pvbn.0));
        let vvbn = match file.volume() {
            Some(v) => {
                let volume = self
                    .namespace
                    .volume_mut(v)
                    .expect("volume of a volume file");
                let vvbn = volume.allocate_vvbn();
                volume.container.set(vvbn, pvbn.0);
                volume
                    .container_file
                    .dirty
                    .insert(vvbn / super::container::CONTAINER_ENTRIES_PER_BLOCK);
                Vvbn(vvbn)
            }
            None => Vvbn(pvbn.0),
        };
        // The checksum is filled in once the content is encoded.
        BlockPtr {
            pvbn,
            vvbn,
            birth: number.0 as u32,
            checksum: 0,
        }
    }

    /// Encodes the CP's blocks, children before parents so each parent records
    /// its children's final checksums, and hands them to RAID stripe by stripe.
    fn write_blocks(&mut self, mut writes: Vec<PlannedWrite<P>>, number: CpCount) {
        writes.sort_by_key(|w| (encode_order(w.file), w.file, w.level, w.index));
        let mut by_stripe: BTreeMap<(usize, u64), BTreeMap<DiskIndex, Sector<P>>> = BTreeMap::new();
        let mut snapshots_taken = false;
        for write in writes {
            if !snapshots_taken && encode_order(write.file) >= SNAPSHOT_ORDER {
                self.take_snapshots_into_cp(number);
                snapshots_taken = true;
            }
            let content = match write.content {
                Content::Data(data) => {
                    self.counters.data_blocks_written += 1;
                    data
                }
                Content::Node(file, node) => {
                    self.counters.meta_blocks_written += 1;
                    self.tree_mut(file)
                        .node(node)
                        .map_or_else(P::zero, P::from_node)
                }
                Content::Meta(file, fbn) => {
                    self.counters.meta_blocks_written += 1;
                    self.meta_content(file, fbn)
                }
            };
            let checksum = P::checksum(&content);
            self.tree_mut(write.file)
                .set_checksum((write.level, write.index), checksum);
            let (volume, file_id) = write.file.ids();
            let identity = Identity {
                pvbn: write.ptr.pvbn,
                vvbn: write.ptr.vvbn,
                volume,
                file: file_id,
                fbn: Fbn(write.index),
                level: write.level,
                cp: number,
            };
            let trailer = Trailer::new(checksum, identity).encode();
            let at = self
                .layout
                .locate(write.ptr.pvbn)
                .expect("allocated inside the aggregate");
            by_stripe.entry((at.group, at.dbn.0)).or_default().insert(
                at.disk,
                Sector {
                    data: content,
                    trailer,
                },
            );
        }
        if !snapshots_taken {
            self.take_snapshots_into_cp(number);
        }
        if let Some(batch) = self.rebuild_batch() {
            for &dbn in &batch.stripes {
                by_stripe.entry((batch.group, dbn)).or_default();
            }
            self.cp.as_mut().expect("a CP").rebuild = Some(batch);
        }
        self.cp.as_mut().expect("a CP").scrub = self.scrub_batch(&by_stripe);
        if by_stripe.is_empty() {
            self.issue_scrub_stripes();
            return self.maybe_write_superblock();
        }
        // The stripes go in the NVLog first, so that a crash in mid-write can be
        // made good (see `resync`).
        let stripes = by_stripe
            .keys()
            .map(|&(group, dbn)| (group as u32, dbn))
            .collect();
        let op = crate::nvlog::LoggedOp::DirtyStripes { stripes };
        let record = self.log.cp_record(number, self.id, op);
        let cp = self.cp.as_mut().expect("a CP");
        cp.staged = by_stripe;
        let half = cp.half;
        self.issue(IoOp::NvlogAppend { half, record }, IoPurpose::StripesLogged);
    }

    /// Snapshots this CP takes keep their trees now (every checksum in them is
    /// final); their requests are answered when the CP commits.
    fn take_snapshots_into_cp(&mut self, number: CpCount) {
        let waiters = self.take_pending_snapshots(number);
        self.cp
            .as_mut()
            .expect("a CP")
            .snapshot_waiters
            .extend(waiters);
    }

    /// The CP's stripes are logged: plan each, and write or read what it needs.
    pub(super) fn issue_stripes(&mut self) {
        let staged = core::mem::take(&mut self.cp.as_mut().expect("a CP").staged);
        // Room for every block of every stripe, so the list never moves.
        let stripe_blocks = self.layout.groups().iter().map(|g| g.group_size()).max();
        let mut ready = Vec::with_capacity(staged.len() * stripe_blocks.unwrap_or(0));
        for ((group, dbn), new) in staged {
            self.note_write_without_spare(group, dbn);
            let geometry = self.layout.groups()[group];
            let written = DiskSet::of(new.keys().copied());
            let failed = self.untrusted(group, dbn);
            let work = match self.rebuild_target(group, dbn) {
                Some(onto) => StripeWork::Rebuild { onto },
                None => StripeWork::Write,
            };
            let plan = match work {
                StripeWork::Rebuild { onto } => {
                    super::rebuild::rebuild_plan(&geometry, written, failed, onto)
                }
                StripeWork::Write | StripeWork::Scrub => self.verifiable_plan(
                    group,
                    dbn,
                    geometry.plan_parity_update(written, failed),
                    failed,
                ),
            };
            self.count_plan(plan.method);
            let job = StripeJob {
                work,
                new,
                plan,
                failed,
                old: BTreeMap::new(),
                reads_left: plan.reads.len(),
            };
            if plan.reads.is_empty() {
                ready.extend(self.finish_stripe(group, dbn, &job));
            } else {
                self.counters.parity_reads += plan.reads.len() as u64;
                self.issue_stripe_reads(group, dbn, plan.reads);
                self.cp
                    .as_mut()
                    .expect("a CP")
                    .stripes
                    .insert((group, dbn), job);
            }
        }
        self.issue_scrub_stripes();
        self.issue_writes(ready);
        self.maybe_write_superblock();
    }

    /// Reads every block of each stripe the CP scrubs.
    fn issue_scrub_stripes(&mut self) {
        let stripes = self
            .cp
            .as_mut()
            .and_then(|cp| cp.scrub.as_mut())
            .map(|batch| core::mem::take(&mut batch.stripes))
            .unwrap_or_default();
        for (group, dbn) in stripes {
            let reads = self.layout.groups()[group].all_disks();
            let job = StripeJob {
                work: StripeWork::Scrub,
                new: BTreeMap::new(),
                plan: ParityUpdatePlan {
                    method: ParityUpdateMethod::ReconstructFirst,
                    reads,
                    writes: DiskSet::EMPTY,
                },
                failed: DiskSet::EMPTY,
                old: BTreeMap::new(),
                reads_left: reads.len(),
            };
            self.counters.scrub_reads += reads.len() as u64;
            self.issue_stripe_reads(group, dbn, reads);
            let cp = self.cp.as_mut().expect("a CP");
            cp.stripes.insert((group, dbn), job);
        }
    }

    /// Subtraction trusts old parity and old content it cannot verify unless
    /// their checksums are known; where they are not, add instead (which reads
    /// only untouched blocks, verifiable or free), or reconstruct first.
    fn verifiable_plan(
        &self,
        group: usize,
        dbn: u64,
        plan: ParityUpdatePlan,
        failed: DiskSet,
    ) -> ParityUpdatePlan {
        if plan.method != ParityUpdateMethod::Subtraction {
            return plan;
        }
        let known = plan
            .reads
            .iter()
            .all(|disk| self.written.is_known(self.layout.disk_id(group, disk), dbn));
        if known {
            return plan;
        }
        let geometry = self.layout.groups()[group];
        let written = plan.writes.intersection(geometry.data_set());
        let untouched = geometry.data_set().difference(written);
        let (method, reads) = match untouched.intersection(failed).is_empty() {
            true => (ParityUpdateMethod::Addition, untouched),
            false => (
                ParityUpdateMethod::ReconstructFirst,
                geometry.all_disks().difference(failed),
            ),
        };
        ParityUpdatePlan {
            method,
            reads,
            writes: plan.writes,
        }
    }

    fn count_plan(&mut self, method: ParityUpdateMethod) {
        let counter = match method {
            ParityUpdateMethod::FullStripe | ParityUpdateMethod::DataOnly => {
                &mut self.counters.full_stripes
            }
            ParityUpdateMethod::Subtraction => &mut self.counters.partial_stripes_subtraction,
            ParityUpdateMethod::Addition => &mut self.counters.partial_stripes_addition,
            ParityUpdateMethod::ReconstructFirst => &mut self.counters.partial_stripes_reconstruct,
        };
        *counter += 1;
    }

    fn issue_stripe_reads(&mut self, group: usize, dbn: u64, reads: DiskSet) {
        for disk in reads.iter() {
            let id = self.layout.disk_id(group, disk);
            self.issue(
                IoOp::Read {
                    disk: id,
                    dbn: Dbn(dbn),
                    count: 1,
                },
                IoPurpose::CpRead {
                    stripe: (group, dbn),
                    disk,
                },
            );
        }
    }

    /// A block a partial-stripe write needed has been read.
    pub(super) fn cp_read_done(
        &mut self,
        stripe: (usize, u64),
        disk: DiskIndex,
        result: IoResult<P>,
    ) {
        let sector = match result {
            IoResult::Read(mut sectors) => sectors.pop().flatten(),
            IoResult::Done | IoResult::DiskFailed | IoResult::Unwritable => None,
        };
        let untrusted = self.untrusted(stripe.0, stripe.1);
        let cp = self.cp.as_mut().expect("a CP reads only while it runs");
        let job = cp.stripes.get_mut(&stripe).expect("a stripe job");
        job.old.insert(disk, sector);
        job.reads_left -= 1;
        if job.reads_left > 0 {
            return;
        }
        let (group, dbn) = stripe;
        if job.work == StripeWork::Scrub {
            let job = cp.stripes.remove(&stripe).expect("a stripe job");
            let writes = self.scrub_stripe_read(group, dbn, &job.old);
            self.issue_writes(writes);
            return self.maybe_write_superblock();
        }
        let geometry = self.layout.groups()[group];
        let suspects: DiskSet = job
            .old
            .iter()
            .filter(|(disk, sector)| {
                let at = (group, **disk, dbn);
                !super::sectors::read_back_is_sound(
                    &self.layout,
                    &self.written,
                    at,
                    sector.as_ref(),
                )
            })
            .map(|(disk, _)| *disk)
            .collect();
        let failed = job.failed.union(suspects).union(untrusted);
        let tolerable = failed.len() <= geometry.raid_type().tolerated_failures();
        if failed != job.failed && tolerable {
            // Something read back damaged (or a disk died): rebuild the stripe
            // from every survivor first, treating the damaged blocks as lost.
            let reads = geometry.all_disks().difference(failed);
            let missing = reads.difference(DiskSet::of(job.old.keys().copied()));
            job.failed = failed;
            let target = match job.work {
                StripeWork::Rebuild { onto } => DiskSet::of([onto]),
                StripeWork::Write | StripeWork::Scrub => DiskSet::EMPTY,
            };
            job.plan = ParityUpdatePlan {
                method: ParityUpdateMethod::ReconstructFirst,
                reads,
                writes: job.plan.writes.difference(failed).union(target),
            };
            job.reads_left = missing.len();
            job.old.retain(|disk, _| !failed.contains(*disk));
            if !missing.is_empty() {
                self.counters.parity_reads += missing.len() as u64;
                self.issue_stripe_reads(group, dbn, missing);
                return;
            }
        }
        let job = self
            .cp
            .as_mut()
            .expect("a CP")
            .stripes
            .remove(&stripe)
            .expect("a stripe job");
        let writes = self.finish_stripe(group, dbn, &job);
        self.issue_writes(writes);
        self.maybe_write_superblock();
    }

    /// Computes a stripe's parity by its plan and returns the sectors to write.
    fn finish_stripe(
        &mut self,
        group: usize,
        dbn: u64,
        job: &StripeJob<P>,
    ) -> Vec<(DiskId, Dbn, Sector<P>)> {
        let geometry = self.layout.groups()[group];
        let mut stripe: Vec<P::Unit> = vec![P::Unit::zero(); geometry.group_size()];
        for (disk, sector) in &job.old {
            if let Some(sector) = sector {
                stripe[disk.as_usize()] = P::unit(&sector.data);
            }
        }
        let sabotaged = self.sabotaged(super::Sabotage::SkipParityUpdate);
        let mut repaired_parity = DiskSet::EMPTY;
        match job.plan.method {
            _ if sabotaged && !job.plan.reads.is_empty() => {}
            ParityUpdateMethod::Subtraction => {
                let mut delta = ParityDelta::new(geometry);
                for (disk, sector) in &job.new {
                    delta.add_change(*disk, &stripe[disk.as_usize()], &P::unit(&sector.data));
                }
                match &mut stripe[..geometry.parity_disks()] {
                    [row] => delta.apply(row, None),
                    [dparity, row] => delta.apply(row, Some(dparity)),
                    _ => unreachable!("one or two parity disks"),
                }
            }
            ParityUpdateMethod::ReconstructFirst => {
                let rebuilt = self.reconstruct_used(&geometry, group, dbn, &stripe, job.failed);
                let reconstructed = rebuilt.is_some();
                match rebuilt {
                    Some(rebuilt) => stripe = rebuilt,
                    None => self.counters.unrecoverable_blocks += 1,
                }
                self.overlay_and_encode(&geometry, &mut stripe, job);
                if reconstructed {
                    repaired_parity = Self::stale_parity(&geometry, &stripe, job);
                }
            }
            ParityUpdateMethod::FullStripe | ParityUpdateMethod::Addition => {
                self.overlay_and_encode(&geometry, &mut stripe, job)
            }
            ParityUpdateMethod::DataOnly => {}
        }
        // Blocks for failed disks live only in parity now; that is what a later
        // reconstruction must reproduce.
        for (disk, sector) in job
            .new
            .iter()
            .filter(|(d, _)| !job.plan.writes.contains(**d))
        {
            self.written.learn(
                self.layout.disk_id(group, *disk),
                dbn,
                super::sectors::last_write_of(sector),
            );
        }
        let mut out = Vec::with_capacity(job.plan.writes.len());
        let parity = self.layout.groups()[group].parity_set();
        for disk in job
            .plan
            .writes
            .union(repaired_parity)
            .iter()
            .filter(|d| !(sabotaged && !job.plan.reads.is_empty() && parity.contains(*d)))
        {
            let sector = match job.new.get(&disk) {
                Some(sector) => sector.clone(),
                None if parity.contains(disk) => {
                    self.counters.parity_blocks_written += 1;
                    super::sectors::parity_sector(&stripe[disk.as_usize()], dbn)
                }
                None => self.rebuilt_sector(group, disk, dbn, &stripe[disk.as_usize()]),
            };
            out.push((self.layout.disk_id(group, disk), Dbn(dbn), sector));
        }
        out
    }

    /// The parity blocks a reconstruction found stale: read, trusted, not
    /// written by the plan, and other than the parity of the stripe it
    /// rebuilt. A rebuild onto a spare writes only the new disk; if a parity
    /// block's last write was lost, the block it rebuilds agrees with one
    /// parity and not the other, and unless that one is written too the
    /// stripe is left inconsistent, so that losing one more disk later would
    /// rebuild it wrong (seed 100073).
    fn stale_parity(
        geometry: &wafer_raid::RaidGroupGeometry,
        stripe: &[P::Unit],
        job: &StripeJob<P>,
    ) -> DiskSet {
        geometry
            .parity_set()
            .intersection(job.plan.reads)
            .difference(job.plan.writes)
            .iter()
            .filter(|disk| {
                let read = job.old.get(disk).and_then(Option::as_ref);
                read.is_none_or(|sector| P::unit(&sector.data) != stripe[disk.as_usize()])
            })
            .collect()
    }

    fn overlay_and_encode(
        &self,
        geometry: &wafer_raid::RaidGroupGeometry,
        stripe: &mut [P::Unit],
        job: &StripeJob<P>,
    ) {
        for (disk, sector) in &job.new {
            stripe[disk.as_usize()] = P::unit(&sector.data);
        }
        geometry.encode_stripe(stripe);
    }

    /// Issues writes disk by disk in block order, merging runs of adjacent
    /// blocks on a disk into one I/O.
    ///
    /// The writes come stripe after stripe in block order, so each disk's
    /// share is already in order: dealing them out to their disks is one pass
    /// (and the stable sort of a sorted share one more, moving nothing), where
    /// sorting the whole batch moved every sector many times.
    fn issue_writes(&mut self, writes: Vec<(DiskId, Dbn, Sector<P>)>) {
        // Disk ids are dense: one list per disk slot, counted first so that
        // each is allocated once.
        let mut counts = vec![0usize; self.layout.disk_count() as usize];
        for (disk, _, _) in &writes {
            counts[disk.0 as usize] += 1;
        }
        let mut by_disk: Vec<Vec<(Dbn, Sector<P>)>> =
            counts.into_iter().map(Vec::with_capacity).collect();
        for (disk, dbn, sector) in writes {
            by_disk[disk.0 as usize].push((dbn, sector));
        }
        let by_disk = (0..)
            .map(DiskId)
            .zip(by_disk)
            .filter(|(_, b)| !b.is_empty());
        for (disk, mut blocks) in by_disk {
            blocks.sort_by_key(|(dbn, _)| *dbn);
            for (dbn, sectors) in adjacent_runs(blocks) {
                self.cp.as_mut().expect("a CP").writes_left += 1;
                self.issue(IoOp::Write { disk, dbn, sectors }, IoPurpose::CpWrite);
            }
        }
    }

    /// A CP write is durable.
    pub(super) fn cp_write_done(&mut self) {
        let cp = self.cp.as_mut().expect("a CP");
        cp.writes_left -= 1;
        if cp.superblock && cp.writes_left == 0 {
            self.commit();
        } else {
            self.maybe_write_superblock();
        }
    }

    fn maybe_write_superblock(&mut self) {
        let cp = self.cp.as_ref().expect("a CP");
        if cp.superblock || cp.writes_left > 0 || !cp.stripes.is_empty() || !cp.staged.is_empty() {
            return;
        }
        let number = cp.number;
        let rebuild = self.rebuild_record();
        let superblock = Superblock {
            aggregate: self.id,
            name: self.name.clone(),
            replayed_below: self.replayed_below,
            offline: self.offline.marked,
            hybrid: self.hybrid,
            cp: number,
            rebuild,
            groups: self.layout.records(),
            spares: self.layout.spares(),
            activemap: self
                .aggregate
                .activemap_file
                .inode(self.aggregate.activemap.blocks()),
            volumes: self
                .aggregate
                .volume_table
                .inode(self.namespace.volume_table_blocks()),
        }
        .encode();
        let superblock = P::from_bytes(Box::new(superblock));
        let geometry = self.layout.groups()[0];
        let dbn = Dbn(number.0 % crate::aggregate::SUPERBLOCK_COPIES);
        self.note_write_without_spare(0, dbn.0);
        let mut stripe: Vec<P::Unit> = vec![P::unit(&superblock); geometry.group_size()];
        geometry.encode_stripe(&mut stripe);
        let mut writes = Vec::new();
        for disk in geometry.all_disks().difference(self.unwritable(0)).iter() {
            let sector = match self.layout.pvbn(0, disk, dbn) {
                Some(pvbn) => superblock_sector::<P>(&superblock, pvbn, number),
                None => super::sectors::parity_sector::<P>(&stripe[disk.as_usize()], dbn.0),
            };
            writes.push((self.layout.disk_id(0, disk), dbn, sector));
        }
        let cp = self.cp.as_mut().expect("a CP");
        cp.superblock = true;
        cp.records_rebuild = rebuild.is_some();
        cp.records_offline = self.offline.marked;
        let count = writes.len();
        for (disk, dbn, sector) in writes {
            self.cp.as_mut().expect("a CP").writes_left += 1;
            self.issue(
                IoOp::Write {
                    disk,
                    dbn,
                    sectors: vec![sector],
                },
                IoPurpose::SuperblockWrite,
            );
        }
        if count == 0 {
            // Only a group past its promise has no disk left to take the
            // superblock, and such a group takes the filer offline first.
            assert!(
                self.commits_regardless(),
                "a superblock with no disk to write it to"
            );
            self.commit();
        }
    }

    /// The superblock is durable: the CP is the new on-disk image.
    fn commit(&mut self) {
        let mut cp = self.cp.take().expect("a CP");
        self.committed = cp.number;
        self.offline.committed = cp.records_offline;
        self.committed_map = cp.image_map.take().expect("a committed CP has allocated");
        *self.counters.cps.entry(cp.reason).or_default() += 1;
        self.counters.cp_time_ns += (self.now - cp.started).0;
        for pvbn in self.aggregate.pending.release(cp.number) {
            self.aggregate
                .allocator
                .note_released(&self.layout, Pvbn(pvbn));
        }
        for (_, volume) in self.namespace.volumes_mut() {
            volume.pending.release(cp.number);
        }
        // A snapshot this CP took shares what thin LUNs hold: their bounds
        // are computed again (`thin`).
        self.thin_room.clear();
        self.check_invariants_at_commit();
        if !cp.keeps_log {
            let half = self.log.release();
            self.issue(IoOp::NvlogReset { half }, IoPurpose::Reset);
        }
        for key in &cp.pinned {
            if let Some(entry) = self.cache.get_mut(key) {
                entry.pinned = false;
            }
        }
        for id in cp.flushes.into_iter().chain(cp.snapshot_waiters) {
            self.reply(id, Ok(ReplyData::Done));
        }
        self.last_cp_end = self.now;
        for read in core::mem::take(&mut self.parked_reads) {
            self.read_again(read);
        }
        if matches!(self.phase, Phase::Mounting(_)) {
            self.replay_cp_committed();
        }
        self.rebuild_after_commit(cp.records_rebuild, cp.rebuild.map(|b| b.cursor_after));
        self.scrub_after_commit(cp.scrub);
        self.advance_realloc();
        self.scan_write_cache();
        self.evict();
        if self.cp.is_none() {
            let online = matches!(self.phase, Phase::Online);
            if let Some(reason) = self.next_cp_reason.take() {
                self.start_cp(reason);
            } else if self.dirty.len() >= self.options.dirty_high_water {
                self.start_cp(CpReason::HighWater);
            } else if online && (self.rebuild_wants_cp() || self.scrub_wants_cp()) {
                self.start_cp(CpReason::Sync);
            }
        }
        self.resume_stalled();
    }

    /// The content of metadata block `fbn` of `file`, as of now.
    fn meta_content(&self, file: FileRef, fbn: u64) -> P::Content {
        match file {
            FileRef::Inofile(v) => P::from_bytes(self.namespace[v].inofile_bytes(fbn)),
            FileRef::VolumeMap(v) => map_content::<P>(&self.namespace[v].activemap, fbn),
            FileRef::Container(v) => {
                let container = &self.namespace[v].container;
                P::from_words(&container.block_words(fbn), container.block_sum(fbn))
            }
            FileRef::AggregateMap => map_content::<P>(&self.aggregate.activemap, fbn),
            FileRef::VolumeTable => P::from_bytes(self.namespace.volume_table_bytes(fbn)),
            FileRef::SnapInfo(v) => P::from_bytes(self.namespace[v].snapinfo_bytes(fbn)),
            FileRef::SummaryMap(v) => map_content::<P>(&self.namespace[v].summary, fbn),
            FileRef::Lun(_) | FileRef::SnapshotInofile(..) | FileRef::SnapshotLun(..) => {
                unreachable!("LUN content is captured, not generated")
            }
        }
    }
}

/// The content of block `fbn` of a map file.
fn map_content<P: Payload>(map: &Bitmap, fbn: u64) -> P::Content {
    P::from_words(map.block_words(fbn), map.block_sum(fbn))
}

/// Blocks of one disk, in block order, as runs of adjacent blocks: each run's
/// first block and its sectors.
fn adjacent_runs<P: Payload>(blocks: Vec<(Dbn, Sector<P>)>) -> Vec<(Dbn, Vec<Sector<P>>)> {
    let mut lengths: Vec<(Dbn, usize)> = Vec::new();
    for (dbn, _) in &blocks {
        match lengths.last_mut() {
            Some((start, length)) if start.0 + *length as u64 == dbn.0 => *length += 1,
            _ => lengths.push((*dbn, 1)),
        }
    }
    // Each run's sectors move once, into a list of exactly its length.
    let mut sectors = blocks.into_iter().map(|(_, sector)| sector);
    lengths
        .into_iter()
        .map(|(start, length)| (start, sectors.by_ref().take(length).collect()))
        .collect()
}

/// Files whose blocks hold other files' roots are encoded after them: LUNs,
/// then the inode files holding LUN inodes, then the other volume files (the
/// snapinfo file holds snapshots' inode-file roots), then the volume table
/// holding volume roots. The aggregate's map holds no pointers.
fn encode_order(file: FileRef) -> u8 {
    match file {
        FileRef::Lun(_) => 0,
        FileRef::Inofile(_) => 1,
        FileRef::VolumeMap(_)
        | FileRef::Container(_)
        | FileRef::SnapInfo(_)
        | FileRef::SummaryMap(_) => SNAPSHOT_ORDER,
        FileRef::VolumeTable | FileRef::AggregateMap => 3,
        FileRef::SnapshotInofile(..) | FileRef::SnapshotLun(..) => {
            unreachable!("snapshots are never written")
        }
    }
}

/// The first encode order after the volumes' images: snapshots are taken
/// before it.
const SNAPSHOT_ORDER: u8 = 2;

fn superblock_sector<P: Payload>(content: &P::Content, pvbn: Pvbn, number: CpCount) -> Sector<P> {
    let identity = Identity {
        pvbn,
        vvbn: Vvbn(pvbn.0),
        volume: AGGREGATE_VOLUME,
        file: SUPERBLOCK_FILE,
        fbn: Fbn(number.0 % crate::aggregate::SUPERBLOCK_COPIES),
        level: 0,
        cp: number,
    };
    Sector {
        data: content.clone(),
        trailer: Trailer::new(P::checksum(content), identity).encode(),
    }
}

impl Volume {
    /// Takes the next free vvbn (never one still held by an on-disk image).
    pub(super) fn allocate_vvbn(&mut self) -> u64 {
        let blocks = self.vvbn_blocks;
        for step in 0..blocks {
            let vvbn = (self.cursor + step) % blocks;
            if !self.activemap.get(vvbn) && !self.summary.get(vvbn) && !self.pending.is_held(vvbn) {
                self.activemap.set(vvbn);
                self.activemap_file.dirty.insert(Bitmap::block_of(vvbn));
                self.cursor = vvbn + 1;
                return vvbn;
            }
        }
        panic!(
            "volume {} ran out of vvbns: space reservations must prevent this",
            self.name
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_disks_blocks_go_out_as_runs_of_adjacent_blocks_each_with_its_own_sectors() {
        let sector = |stamp| Sector::<crate::Stamps> {
            data: wafer_raid::Stamp(stamp),
            trailer: [0; crate::format::TRAILER_SIZE],
        };
        let blocks = [3, 4, 5, 9, 10, 12].map(|dbn| (Dbn(dbn), sector(100 + dbn)));
        let runs: Vec<(u64, Vec<u64>)> = adjacent_runs(blocks.to_vec())
            .into_iter()
            .map(|(start, sectors)| (start.0, sectors.iter().map(|s| s.data.0).collect()))
            .collect();
        assert_eq!(
            runs,
            [
                (3, vec![103, 104, 105]),
                (9, vec![109, 110]),
                (12, vec![112])
            ]
        );
    }
}
