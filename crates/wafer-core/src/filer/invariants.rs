//! Invariants of the in-memory file systems, checked at quiescent points.
//!
//! - Every block pointer of every file names a block the aggregate's active map
//!   marks used, and no two pointers of the active file system name the same
//!   block.
//! - The aggregate's active map marks exactly those blocks and the snapshots'
//!   blocks, plus the superblock pair: nothing leaks, nothing referenced is free.
//! - For a volume's files, the vvbn is marked in the volume's active map, the
//!   container map sends it to the pointer's pvbn, and the volume's map holds
//!   nothing else. Each snapshot's map marks exactly its trees' vvbns, the
//!   summary map is their union, and the container map holds exactly what the
//!   active and summary maps mark.
//! - Blocks held for a later CP are marked free and not used; the allocator's
//!   count of free blocks is exact.
//! - No pointer is born after the newest committed CP.
//! - Space adds up, for the aggregate and for each volume.
//! - Flash Pool: only LUN data blocks live on SSD, each of the active file
//!   system's is in the write cache under its own name, and every block the
//!   write cache holds is marked used.
//!
//! Debug and test builds also check them at every CP commit, as TigerBeetle
//! asserts at its checkpoints, whenever the trees are whole (no indirect
//! block evicted) and the aggregate is small enough for a walk of every block
//! per CP: the simulator's and the server tests' filers, not the lab's.

use std::collections::BTreeSet;

use super::Filer;
use super::meta::FileRef;
use crate::format::{BlockPtr, Identity};
use crate::nvlog::LunId;
use crate::payload::Payload;
use crate::units::{Fbn, Pvbn};

/// The largest aggregate, in blocks (1 GiB), whose invariants debug builds
/// check at every CP commit.
const CHECKED_AT_COMMIT_MAX_BLOCKS: u64 = 1 << 18;

impl<P: Payload> Filer<P> {
    /// Checks every invariant; call only when no I/O is in flight.
    pub fn check_invariants(&self) -> Result<(), String> {
        if self.cp.is_some() || !self.outbox.nothing_pending() {
            return Err("invariants are checked only when the filer is quiescent".into());
        }
        self.invariants_hold()
    }

    /// At a CP's commit, before the next CP starts, in debug builds: the
    /// maps, trees and space must agree as they do at a quiescent point
    /// (I/Os still in flight are reads, appends and repairs, which change no
    /// map).
    pub(super) fn check_invariants_at_commit(&self) {
        if cfg!(debug_assertions)
            && self.layout.total_blocks() <= CHECKED_AT_COMMIT_MAX_BLOCKS
            && self.indirect_complete()
        {
            if let Err(broken) = self.invariants_hold() {
                panic!(
                    "CP {} committed with an invariant broken: {broken}",
                    self.committed.0
                );
            }
        }
    }

    fn invariants_hold(&self) -> Result<(), String> {
        self.cache.check()?;
        let mut pvbns = BTreeSet::new();
        for (file, ptr) in self.every_pointer() {
            if !pvbns.insert(ptr.pvbn.0) {
                return Err(format!(
                    "pvbn {} is referenced twice (again by {file:?})",
                    ptr.pvbn
                ));
            }
            if !self.aggregate.activemap.get(ptr.pvbn.0) {
                return Err(format!("pvbn {} of {file:?} is marked free", ptr.pvbn));
            }
            if u64::from(ptr.birth) > self.committed.0 {
                return Err(format!(
                    "pvbn {} of {file:?} was born after CP {}",
                    ptr.pvbn, self.committed.0
                ));
            }
            match file.volume() {
                Some(v) => {
                    let volume = &self.namespace[v];
                    if !volume.activemap.get(ptr.vvbn.0)
                        || volume.container.get(ptr.vvbn.0) != ptr.pvbn.0
                    {
                        return Err(format!(
                            "vvbn {} of {file:?} is not mapped to pvbn {}",
                            ptr.vvbn, ptr.pvbn
                        ));
                    }
                }
                None if ptr.vvbn.0 != ptr.pvbn.0 => {
                    return Err(format!(
                        "aggregate file {file:?} has vvbn {} != pvbn {}",
                        ptr.vvbn, ptr.pvbn
                    ));
                }
                None => {}
            }
        }
        for (file, ptr) in self.snapshot_pointers() {
            let volume = &self.namespace[file.volume().expect("snapshots are of volumes")];
            if volume.container.get(ptr.vvbn.0) != ptr.pvbn.0 {
                return Err(format!(
                    "vvbn {} of {file:?} is not mapped to pvbn {}",
                    ptr.vvbn, ptr.pvbn
                ));
            }
            pvbns.insert(ptr.pvbn.0);
        }
        self.check_aggregate_map(&pvbns)?;
        self.check_volume_maps()?;
        self.check_snapshot_maps()?;
        self.check_write_cache()?;
        self.check_space()
    }

    fn check_write_cache(&self) -> Result<(), String> {
        if !self.layout.is_hybrid() {
            return Ok(());
        }
        let mut failure = None;
        for (file, tree) in self.active_trees() {
            tree.for_each_pointer(|(level, index), ptr| {
                if self.layout.tier_of(ptr.pvbn) != crate::aggregate::Tier::Ssd {
                    return;
                }
                let owner = self.flash_pool.owner(ptr.pvbn);
                let broken = match file {
                    FileRef::Lun(lun) if level == 0 => owner != Some((lun, Fbn(index))),
                    _ => true,
                };
                if broken {
                    failure.get_or_insert(format!(
                        "level-{level} block {index} of {file:?} is on SSD at pvbn {}, where \
                         the write cache records {owner:?}",
                        ptr.pvbn
                    ));
                }
            });
        }
        if let Some(failure) = failure {
            return Err(failure);
        }
        match self
            .flash_pool
            .pvbns()
            .find(|p| !self.aggregate.activemap.get(p.0))
        {
            Some(free) => Err(format!("the write cache holds pvbn {free}, which is free")),
            None => Ok(()),
        }
    }

    fn check_snapshot_maps(&self) -> Result<(), String> {
        for (_, volume) in self.namespace.volumes() {
            let mut union = crate::bitmap::Bitmap::new(volume.vvbn_blocks);
            for (id, snapshot) in &volume.snapshots {
                let map = snapshot.trees_map(volume.vvbn_blocks);
                if map != snapshot.map {
                    return Err(format!(
                        "snapshot {} of volume {} maps {} blocks, its trees hold {}",
                        id.0,
                        volume.name,
                        snapshot.map.count_ones(),
                        map.count_ones()
                    ));
                }
                union = union.union(&map);
            }
            if union != volume.summary {
                return Err(format!(
                    "volume {}'s summary map marks {} blocks, its snapshots {}",
                    volume.name,
                    volume.summary.count_ones(),
                    union.count_ones()
                ));
            }
        }
        Ok(())
    }

    fn check_aggregate_map(&self, referenced: &BTreeSet<u64>) -> Result<(), String> {
        let map = &self.aggregate.activemap;
        let mut free = 0u64;
        for pvbn in 0..map.len() {
            let reserved = pvbn == 0 || self.layout.is_reserved(Pvbn(pvbn));
            let used = map.get(pvbn);
            if used != (reserved || referenced.contains(&pvbn)) {
                return Err(format!(
                    "pvbn {pvbn} is marked {} but is {}referenced",
                    used,
                    if used { "not " } else { "" }
                ));
            }
            let held = self.aggregate.pending.is_held(pvbn);
            if held && used {
                return Err(format!("pvbn {pvbn} is both in use and held for release"));
            }
            free += u64::from(!used && !held);
        }
        let allocator = &self.aggregate.allocator;
        let counted = allocator.free_blocks() + allocator.ssd_free_blocks();
        if counted != free {
            return Err(format!(
                "the allocator counts {counted} free blocks, the maps {free}"
            ));
        }
        Ok(())
    }

    fn check_volume_maps(&self) -> Result<(), String> {
        for (id, volume) in self.namespace.volumes() {
            let mut vvbns: BTreeSet<u64> = BTreeSet::new();
            for (file, ptr) in self.every_pointer() {
                if file.volume() == Some(id) {
                    vvbns.insert(ptr.vvbn.0);
                }
            }
            for vvbn in 0..volume.vvbn_blocks {
                let used = volume.activemap.get(vvbn);
                let expected = vvbn == 0 || vvbns.contains(&vvbn);
                if used != expected {
                    return Err(format!(
                        "volume {} vvbn {vvbn} is marked {used}, referenced {expected}",
                        volume.name
                    ));
                }
                let mapped = volume.container.get(vvbn) != 0;
                let held = expected || volume.summary.get(vvbn);
                if mapped != (vvbn != 0 && held) {
                    return Err(format!(
                        "volume {} container entry {vvbn} is stale",
                        volume.name
                    ));
                }
            }
        }
        Ok(())
    }

    /// Space adds up: the aggregate's used and available make its total and
    /// cover what is allocated; each volume's used and available make its
    /// active total, and its blocks fit its vvbn space.
    fn check_space(&self) -> Result<(), String> {
        let aggregate = self.aggregate_space();
        if aggregate.used_bytes + aggregate.available_bytes != aggregate.total_bytes
            || aggregate.allocated_bytes > aggregate.total_bytes
        {
            return Err(format!("aggregate space does not add up: {aggregate:?}"));
        }
        for (id, volume) in self.namespace.volumes() {
            let space = self.volume_space(id).expect("a volume");
            let blocks = volume.activemap.union(&volume.summary).count_ones();
            if !space.fits()
                || space.used_bytes + space.available_bytes != space.active_total_bytes()
                || space.lun_written_bytes > space.lun_reserved_bytes + space.thin_lun_bytes
                || blocks > volume.vvbn_blocks
            {
                return Err(format!(
                    "volume {} space does not add up: {space:?}",
                    volume.name
                ));
            }
        }
        Ok(())
    }

    /// Every file of the active file systems (aggregate files included).
    pub(super) fn active_trees(&self) -> Vec<(FileRef, &crate::tree::BlockTree)> {
        let mut out = Vec::new();
        for (v, volume) in self.namespace.volumes() {
            for (&file, lun) in &volume.luns {
                out.push((FileRef::Lun(LunId { volume: v, file }), &lun.tree));
            }
            out.extend([
                (FileRef::Inofile(v), &volume.inofile.tree),
                (FileRef::VolumeMap(v), &volume.activemap_file.tree),
                (FileRef::Container(v), &volume.container_file.tree),
                (FileRef::SnapInfo(v), &volume.snapinfo.tree),
                (FileRef::SummaryMap(v), &volume.summary_file.tree),
            ]);
        }
        out.push((FileRef::AggregateMap, &self.aggregate.activemap_file.tree));
        out.push((FileRef::VolumeTable, &self.aggregate.volume_table.tree));
        out
    }

    /// Every file of every snapshot (shared blocks appear in many).
    pub(super) fn snapshot_trees(&self) -> Vec<(FileRef, &crate::tree::BlockTree)> {
        let mut out = Vec::new();
        for (v, volume) in self.namespace.volumes() {
            for (&id, snapshot) in &volume.snapshots {
                out.push((FileRef::SnapshotInofile(v, id), &snapshot.inofile));
                for (&file, lun) in &snapshot.luns {
                    out.push((
                        FileRef::SnapshotLun(LunId { volume: v, file }, id),
                        &lun.tree,
                    ));
                }
            }
        }
        out
    }

    /// Every non-null pointer of every active file, with the file it belongs to.
    pub(super) fn every_pointer(&self) -> Vec<(FileRef, BlockPtr)> {
        pointers_of(self.active_trees())
    }

    /// Every block a pointer reaches, in the active file systems or a
    /// snapshot, with the identity it must carry on disk: what a checker of
    /// the disks' trailers compares them with. The trees must be whole.
    pub fn reachable_blocks(&self) -> Vec<(BlockPtr, Identity)> {
        let mut out = Vec::new();
        self.for_each_reachable_block(|ptr, identity| out.push((ptr, identity)));
        out
    }

    /// Visits what [`reachable_blocks`](Self::reachable_blocks) lists,
    /// without gathering it. The trees must be whole.
    pub(super) fn for_each_reachable_block(&self, mut visit: impl FnMut(BlockPtr, Identity)) {
        for (file, tree) in self.active_trees().into_iter().chain(self.snapshot_trees()) {
            let (volume, file_id) = file.ids();
            tree.for_each_pointer(|(level, index), ptr| {
                visit(
                    ptr,
                    ptr.expected_identity(volume, file_id, level, Fbn(index)),
                );
            });
        }
    }

    /// Every non-null pointer of every snapshot.
    pub(super) fn snapshot_pointers(&self) -> Vec<(FileRef, BlockPtr)> {
        pointers_of(self.snapshot_trees())
    }
}

fn pointers_of(trees: Vec<(FileRef, &crate::tree::BlockTree)>) -> Vec<(FileRef, BlockPtr)> {
    trees
        .into_iter()
        .flat_map(|(file, tree)| tree.all_pointers().into_iter().map(move |(_, p)| (file, p)))
        .collect()
}
