//! Mounting: find the newest superblock, load the metadata, replay the NVLog.
//!
//! 1. Read both superblock copies from every data disk of RAID group 0 and take
//!    the valid one with the highest CP number. Any single surviving copy will
//!    do: every other block of that CP was durable before it was written.
//! 2. Walk the aggregate's files (active map, volume table) and through the
//!    volume table every volume's files, top down; the LUN trees' indirect
//!    blocks too (LUN content stays on disk until read), and through each
//!    snapinfo file every snapshot's inode file and LUN trees. Every block is
//!    verified and repaired like any read. Each snapshot's map is rebuilt from
//!    its trees; their union must be the summary map read from disk.
//! 3. Replay, in sequence order, the NVLog records newer than the superblock,
//!    then run a CP so that they are on disk, and go online. A snapshot in the
//!    log is taken where it stands: replay stops there for a CP of its own
//!    (which leaves the log alone, since it still holds what follows).

use std::collections::{BTreeSet, VecDeque};

use wafer_raid::StripeUnit;

use super::meta::{
    FileRef, MetaFile, Snapshot, Volume, decode_inofile_block, decode_snapinfo_block,
    decode_volume_table,
};
use super::written::LastWrite;
use super::{Filer, IoOp, IoPurpose, IoResult, OfflineMark, Options, Phase};
use crate::Block;
use crate::aggregate::{Layout, SUPERBLOCK_COPIES};
use crate::format::{Superblock, Trailer};
use crate::nvlog::{Change, LoggedOp, NvRecord, scan_half};
use crate::payload::{Bytes, Payload};
use crate::space::Allocator;
use crate::tree::NodeId;
use crate::units::{CpCount, DiskId, Instant};

use super::api::CpReason;
use super::blockio::ReadPurpose;

/// Progress of a mount, over parity units `U`.
#[derive(Clone, Debug)]
pub(super) struct Mount<U: StripeUnit> {
    superblock_copies: Vec<Vec<Option<U>>>,
    reads_left: usize,
    records: Vec<NvRecord>,
    /// Where damage in the NVLog was read past.
    damage: Vec<DamageReadPast>,
    replaying: bool,
    /// Records still to replay after the snapshot CP running now.
    to_replay: VecDeque<NvRecord>,
    /// Whether the last replay CP (the one that releases the log) has started.
    final_cp: bool,
    /// The generation of the last record replayed. A record of a later one
    /// was logged after a CP began, and that CP had taken out the volumes
    /// destroyed before it: replay takes them out there too.
    replayed_generation: Option<CpCount>,
    pub(super) resync: Option<super::resync::Resync<U>>,
    /// The pvbn count the superblock's layout has, where the configured
    /// layout extends it with disks added just before a crash.
    grown_from: Option<u64>,
}

impl Filer<Bytes> {
    /// Mounts an existing aggregate from its disks, replaying the NVLog halves'
    /// contents (as the driver read them back). The filer is online once replay's
    /// CP has committed; [`Filer::mount_error`] tells if it cannot be.
    ///
    /// Only a byte filer mounts: a stamp filer's disks hold digests of its
    /// metadata, not the metadata (see [`crate::payload`]).
    pub fn mount(layout: Layout, options: Options, now: Instant, nvlog: [&[u8]; 2]) -> Filer {
        let mut filer = Filer::empty(layout, options, now);
        let (records, damage) = read_halves(nvlog);
        let group0 = filer.layout.groups()[0];
        let disks: Vec<DiskId> = group0
            .all_disks()
            .iter()
            .map(|d| filer.layout.disk_id(0, d))
            .collect();
        filer.phase = Phase::Mounting(Box::new(Mount {
            superblock_copies: vec![vec![None; group0.group_size()]; SUPERBLOCK_COPIES as usize],
            reads_left: disks.len(),
            records,
            damage,
            replaying: false,
            to_replay: VecDeque::new(),
            final_cp: false,
            replayed_generation: None,
            resync: None,
            grown_from: None,
        }));
        for disk in disks {
            filer.issue(
                IoOp::Read {
                    disk,
                    dbn: wafer_raid::Dbn(0),
                    count: SUPERBLOCK_COPIES as u32,
                },
                IoPurpose::SuperblockRead { disk },
            );
        }
        filer
    }
}

impl<P: Payload> Filer<P> {
    /// What the mount found wrong but could work around (damaged NVLog
    /// records read past), for the driver to report.
    pub fn mount_warnings(&self) -> &[String] {
        &self.mount_warnings
    }

    /// Why the filer could not mount, if it could not.
    pub fn mount_error(&self) -> Option<&str> {
        match &self.phase {
            Phase::Failed(reason) => Some(reason),
            _ => None,
        }
    }

    /// The mount in progress (its resync included).
    pub(super) fn mount_state(&mut self) -> &mut Mount<P::Unit> {
        match &mut self.phase {
            Phase::Mounting(mount) => mount,
            _ => unreachable!("mount and resync I/O complete only while mounting"),
        }
    }

    /// Superblock copies from one disk of RAID group 0 have arrived.
    pub(super) fn superblock_read(&mut self, disk: DiskId, result: IoResult<P>) {
        let sectors = match result {
            IoResult::Read(sectors) => sectors,
            IoResult::Done | IoResult::DiskFailed | IoResult::Unwritable => Vec::new(),
        };
        let Some(crate::aggregate::Slot::Member { disk: position, .. }) = self.layout.slot(disk)
        else {
            unreachable!("superblocks are read from RAID group 0")
        };
        let mount = self.mount_state();
        for (slot, sector) in sectors.into_iter().enumerate() {
            let sound = sector.filter(|s| {
                Trailer::decode(&s.trailer).is_ok_and(|t| t.matches(P::checksum(&s.data)))
            });
            mount.superblock_copies[slot][position.as_usize()] = sound.map(|s| P::unit(&s.data));
        }
        mount.reads_left -= 1;
        if mount.reads_left == 0 {
            self.load_superblock();
        }
    }

    /// The newest valid superblock among every copy, and among the copies
    /// rebuilt from each slot's stripe parity: a copy can be missing (dead disk,
    /// latent error) or stale but valid (a lost write, or a spare the last CPs
    /// skipped while it waited to be assigned again), so every set of data
    /// disks' copies the parity can stand in for is also rebuilt from the rest.
    fn newest_superblock(&mut self) -> Option<Superblock> {
        let geometry = self.layout.groups()[0];
        let copies = core::mem::take(&mut self.mount_state().superblock_copies);
        let decoded = |unit: &P::Unit| Superblock::decode(P::unit_bytes(unit)?).ok();
        let mut found: Vec<Superblock> = Vec::new();
        for stripe in copies {
            found.extend(
                geometry
                    .data_set()
                    .iter()
                    .filter_map(|d| stripe[d.as_usize()].as_ref().and_then(decoded)),
            );
            let missing: wafer_raid::DiskSet = geometry
                .all_disks()
                .iter()
                .filter(|d| stripe[d.as_usize()].is_none())
                .collect();
            let blocks: Vec<P::Unit> = stripe
                .iter()
                .map(|b| b.clone().unwrap_or_else(P::Unit::zero))
                .collect();
            for failed in suspect_sets(&geometry, missing) {
                let mut rebuilt = blocks.clone();
                if geometry.reconstruct_stripe(&mut rebuilt, failed).is_ok() {
                    found.extend(
                        failed
                            .intersection(geometry.data_set())
                            .iter()
                            .filter_map(|d| decoded(&rebuilt[d.as_usize()])),
                    );
                }
            }
        }
        found.into_iter().max_by_key(|superblock| superblock.cp)
    }

    fn load_superblock(&mut self) {
        let Some(superblock) = self.newest_superblock() else {
            return self.fail_mount("no valid superblock on any disk of RAID group 0".into());
        };
        // Spares are the driver's to count: one may have taken a failed
        // disk's place since this superblock was written.
        if superblock.groups != self.layout.records() {
            // Disks added whose CP never committed: the configuration names
            // them, the superblock does not yet (see `grow`).
            let on_disk = Layout::from_records(&superblock.groups, self.layout.spares());
            match on_disk.map(|old| (super::check_extension(&old, &self.layout), old)) {
                Ok((Ok(()), old)) => self.mount_state().grown_from = Some(old.total_blocks()),
                _ => {
                    return self.fail_mount(format!(
                        "the disks hold an aggregate of {} RAID groups laid out differently \
                         from the configuration",
                        superblock.groups.len()
                    ));
                }
            }
        }
        if let Some(record) = superblock.rebuild {
            if let Err(reason) = self.resume_rebuild(record) {
                return self.fail_mount(reason);
            }
        }
        self.committed = superblock.cp;
        self.replayed_below = superblock.replayed_below;
        self.offline = OfflineMark {
            marked: superblock.offline,
            committed: superblock.offline,
        };
        // A crash after SSD disks were configured but before the CP that
        // records `hybrid_enabled` leaves SSD groups: they say it is on.
        self.hybrid = superblock.hybrid || self.layout.is_hybrid();
        self.id = superblock.aggregate;
        self.name = superblock.name;
        self.aggregate.activemap_file = MetaFile::from_inode(&superblock.activemap);
        self.aggregate.volume_table = MetaFile::from_inode(&superblock.volumes);
        self.namespace
            .keep_table_blocks(superblock.volumes.size_bytes / crate::BLOCK_SIZE as u64);
        self.read_roots(FileRef::AggregateMap);
        self.read_roots(FileRef::VolumeTable);
        self.maybe_finish_metadata();
    }

    fn fail_mount(&mut self, reason: String) {
        self.phase = Phase::Failed(reason);
    }

    /// Whether the mount has failed: a read may fail at once, while the
    /// reads that issued it are still on the stack.
    fn mount_failed(&self) -> bool {
        matches!(self.phase, Phase::Failed(_))
    }

    /// Reads the blocks a file's root pointers name.
    fn read_roots(&mut self, file: FileRef) {
        let tree = self.tree_mut(file);
        let level = tree.level();
        let roots: Vec<(u64, crate::format::BlockPtr)> = tree
            .root()
            .iter()
            .enumerate()
            .filter(|(_, ptr)| !ptr.is_null())
            .map(|(slot, ptr)| (slot as u64, *ptr))
            .collect();
        for (slot, ptr) in roots {
            self.read_for_mount(file, (level, slot), ptr);
        }
    }

    fn read_for_mount(
        &mut self,
        file: FileRef,
        (level, index): NodeId,
        ptr: crate::format::BlockPtr,
    ) {
        if level == 0 && matches!(file, FileRef::Lun(_) | FileRef::SnapshotLun(..)) {
            return; // LUN content is read on demand
        }
        if self.mount_failed() {
            return; // an earlier block was unreadable: the mount is over
        }
        self.mount_state().reads_left += 1;
        let read = self.block_read(
            file,
            level,
            index,
            ptr,
            ReadPurpose::Mount(file, (level, index)),
        );
        self.read_blocks(vec![read]);
    }

    /// A metadata or indirect block has been read for the mount.
    pub(super) fn mount_block(&mut self, file: FileRef, node: NodeId, block: Option<P::Content>) {
        if self.mount_failed() {
            return;
        }
        let Some(block) = block.as_ref().and_then(P::bytes) else {
            return self.fail_mount(format!(
                "metadata block {node:?} of {file:?} is unreadable even with RAID"
            ));
        };
        match node {
            (0, fbn) => {
                if let Err(reason) = self.load_content(file, fbn, block) {
                    return self.fail_mount(reason);
                }
            }
            (level, index) => {
                self.tree_mut(file).load_node((level, index), block);
                for (child, ptr) in self.tree_mut(file).children((level, index)) {
                    self.read_for_mount(file, (level - 1, child), ptr);
                }
            }
        }
        if self.mount_failed() {
            return; // a child could not be read even at once (too many disks gone)
        }
        self.mount_state().reads_left -= 1;
        self.maybe_finish_metadata();
    }

    /// Installs a metadata file's content block.
    fn load_content(&mut self, file: FileRef, fbn: u64, block: &Block) -> Result<(), String> {
        match file {
            FileRef::AggregateMap => self.aggregate.activemap.load_block(fbn, block),
            FileRef::VolumeMap(v) => self.volume_mut(v)?.activemap.load_block(fbn, block),
            FileRef::Container(v) => self.volume_mut(v)?.container.load_block(fbn, block),
            FileRef::Inofile(v) => {
                let luns = decode_inofile_block(fbn, block)
                    .map_err(|e| format!("inode file of volume {}: {e}", v.0))?;
                for (file, lun) in luns {
                    self.volume_mut(v)?.luns.insert(file, lun);
                    self.read_roots(FileRef::Lun(crate::nvlog::LunId { volume: v, file }));
                }
            }
            FileRef::SnapshotInofile(v, id) => {
                let luns = decode_inofile_block(fbn, block).map_err(|e| {
                    format!("inode file of snapshot {} of volume {}: {e}", id.0, v.0)
                })?;
                for (file, lun) in luns {
                    let volume = self.volume_mut(v)?;
                    let snapshot = volume.snapshots.get_mut(&id).expect("loaded first");
                    snapshot.luns.insert(file, lun);
                    let lun = crate::nvlog::LunId { volume: v, file };
                    self.read_roots(FileRef::SnapshotLun(lun, id));
                }
            }
            FileRef::SnapInfo(v) => {
                let entries = decode_snapinfo_block(fbn, block)
                    .map_err(|e| format!("snapinfo of volume {}: {e}", v.0))?;
                for entry in entries {
                    let volume = self.volume_mut(v)?;
                    let snapshot = Snapshot {
                        name: entry.name,
                        cp: entry.cp,
                        created: entry.created,
                        inofile: crate::tree::BlockTree::from_inode(&entry.inofile),
                        luns: Default::default(),
                        map: crate::bitmap::Bitmap::new(volume.vvbn_blocks),
                    };
                    volume.snapshots.insert(entry.id, snapshot);
                    self.read_roots(FileRef::SnapshotInofile(v, entry.id));
                }
            }
            FileRef::SummaryMap(v) => self.volume_mut(v)?.summary.load_block(fbn, block),
            FileRef::VolumeTable => {
                let records = decode_volume_table(fbn, block).map_err(|e| e.to_string())?;
                for (id, record) in records {
                    let mut volume =
                        Volume::new(record.name, record.size_bytes, record.vvbn_blocks);
                    volume.inofile = MetaFile::from_inode(&record.inofile);
                    volume.activemap_file = MetaFile::from_inode(&record.activemap);
                    volume.container_file = MetaFile::from_inode(&record.container);
                    volume.snapinfo = MetaFile::from_inode(&record.snapinfo);
                    volume.summary_file = MetaFile::from_inode(&record.summary);
                    volume.cache_policy = record.cache_policy;
                    volume.read_realloc = record.read_realloc;
                    volume.snap_reserve_percent = record.snap_reserve_percent;
                    volume.snap_schedule = record.snap_schedule;
                    volume.state = record.state;
                    self.namespace.load_volume(id, volume);
                    for file in [
                        FileRef::Inofile(id),
                        FileRef::VolumeMap(id),
                        FileRef::Container(id),
                        FileRef::SnapInfo(id),
                        FileRef::SummaryMap(id),
                    ] {
                        self.read_roots(file);
                    }
                }
            }
            FileRef::Lun(_) | FileRef::SnapshotLun(..) => {
                unreachable!("LUN content is not read at mount")
            }
        }
        Ok(())
    }

    fn volume_mut(&mut self, id: crate::units::VolumeId) -> Result<&mut Volume, String> {
        self.namespace
            .volume_mut(id)
            .ok_or_else(|| format!("metadata names volume {} that the volume table lacks", id.0))
    }

    /// When every metadata block is in: rebuild the allocator and replay.
    fn maybe_finish_metadata(&mut self) {
        if self.mount_failed() {
            return;
        }
        let mount = self.mount_state();
        if mount.reads_left > 0 || mount.replaying {
            return;
        }
        mount.replaying = true;
        for (_, volume) in self.namespace.volumes_mut() {
            let snapshot_luns = volume
                .snapshots
                .values_mut()
                .flat_map(|s| s.luns.values_mut());
            for lun in volume.luns.values_mut().chain(snapshot_luns) {
                lun.tree.recount();
            }
        }
        if let Err(reason) = self.rebuild_snapshot_maps() {
            return self.fail_mount(reason);
        }
        if let Some(old_total) = self.mount_state().grown_from {
            self.claim_blocks_from(old_total);
        }
        let activemap = &self.aggregate.activemap;
        self.aggregate.allocator = Allocator::new(&self.layout, activemap);
        self.committed_map = self.aggregate.activemap.clone();
        self.rebuild_write_cache();
        self.namespace
            .count_reservations(self.options.dirty_high_water);
        self.learn_from_pointers();
        let committed = self.committed;
        let stripes: Vec<(usize, u64)> = self
            .mount_state()
            .records
            .iter()
            .filter(|r| r.generation > committed)
            .filter_map(|r| match &r.op {
                LoggedOp::DirtyStripes { stripes } => Some(stripes.clone()),
                _ => None,
            })
            .flatten()
            .map(|(group, dbn)| (group as usize, dbn))
            .collect();
        if !self.start_resync(stripes) {
            self.replay();
        }
    }

    /// What every block a pointer reaches was last written with, as the
    /// pointer and its place in the tree say: its content's checksum, and
    /// the trailer's for the identity it must carry, born in the latest CP
    /// up to this image's with the birth the pointer records.
    fn learn_from_pointers(&mut self) {
        let committed = self.committed;
        let mut writes = Vec::new();
        self.for_each_reachable_block(|ptr, mut identity| {
            identity.cp = ptr.birth_cp(committed);
            let write = LastWrite {
                content: ptr.checksum,
                trailer: Trailer::new(ptr.checksum, identity).sum(),
            };
            writes.push((ptr.pvbn, write));
        });
        for (pvbn, write) in writes {
            let at = self
                .layout
                .locate(pvbn)
                .expect("pointers stay inside the aggregate");
            let disk = self.layout.disk_id(at.group, at.disk);
            self.written.learn(disk, at.dbn.0, write);
        }
    }

    /// Each snapshot's map from its trees; their union must be the summary
    /// map on disk.
    fn rebuild_snapshot_maps(&mut self) -> Result<(), String> {
        for (_, volume) in self.namespace.volumes_mut() {
            let mut union = crate::bitmap::Bitmap::new(volume.vvbn_blocks);
            for snapshot in volume.snapshots.values_mut() {
                snapshot.map = snapshot.trees_map(volume.vvbn_blocks);
                union = union.union(&snapshot.map);
            }
            if union != volume.summary {
                return Err(format!(
                    "the summary map of volume {} marks {} blocks, its snapshots hold {}",
                    volume.name,
                    volume.summary.count_ones(),
                    union.count_ones()
                ));
            }
        }
        Ok(())
    }

    /// Replays the operations newer than the mounted CP, then commits them.
    pub(super) fn replay(&mut self) {
        let records = core::mem::take(&mut self.mount_state().records);
        let below = self.replayed_below;
        self.log.resume_after(&records, below);
        let skip = self.sabotaged(super::Sabotage::SkipReplay);
        let foreign_too = self.sabotaged(super::Sabotage::ReplayForeignRecords);
        let (committed, id) = (self.committed, self.id);
        // A node's aggregates share the log: each replays its own records.
        // A record is newer than the image when its generation says so and
        // no earlier mount replayed it: a replay CP takes records of a
        // generation above its own number, and a crash before the log is
        // reset must not replay them again over later changes.
        let newer: VecDeque<NvRecord> = records
            .into_iter()
            .filter(|r| r.generation > committed && r.seq >= below && !skip)
            .filter(|r| r.aggregate == id || foreign_too)
            .collect();
        self.warn_of_damage(&newer);
        self.mount_state().to_replay = newer;
        self.replay_some();
    }

    /// Says where replay read past a damaged record to records it replays:
    /// the damaged one is lost, and unless the crash tore a group commit
    /// (then nothing behind it was acknowledged either) it may have been
    /// acknowledged. Damage with nothing to replay behind it, a torn append
    /// at the tail, is not news.
    fn warn_of_damage(&mut self, newer: &VecDeque<NvRecord>) {
        let replayed: BTreeSet<u64> = newer.iter().map(|r| r.seq).collect();
        for damage in core::mem::take(&mut self.mount_state().damage) {
            let DamageReadPast { half, offset, seqs } = damage;
            let behind: Vec<u64> = seqs.into_iter().filter(|s| replayed.contains(s)).collect();
            if let (Some(first), Some(last)) = (behind.first(), behind.last()) {
                self.mount_warnings.push(format!(
                    "NVLog half {half}: the record at byte {offset} is damaged and lost; \
                     the {} intact records behind it (operations {first} to {last}) \
                     are replayed",
                    behind.len()
                ));
            }
        }
    }

    /// Replays up to the next snapshot, and starts the CP that takes it; or,
    /// with nothing left, the final replay CP.
    fn replay_some(&mut self) {
        let generation = CpCount(self.committed.0 + 1);
        while let Some(record) = self.mount_state().to_replay.pop_front() {
            let previous = self
                .mount_state()
                .replayed_generation
                .replace(record.generation);
            if previous.is_some_and(|g| g < record.generation) {
                self.destroy_volumes();
            }
            // The CP that follows holds this record, applied or not.
            self.replayed_below = record.seq + 1;
            // An operation that no longer applies (say, a LUN created twice) was
            // already in the on-disk image; it is skipped, as it was then.
            let applied = self.validate(&record.op).is_ok();
            if applied {
                self.apply(generation, &record.op);
            }
            let snapshot = matches!(
                record.op,
                LoggedOp::Change(Change::CreateSnapshot { .. } | Change::ScheduledSnapshot { .. })
            );
            if applied && snapshot {
                return self.start_cp_logging(CpReason::Snapshot, true);
            }
        }
        self.mount_state().final_cp = true;
        self.start_cp(CpReason::Sync);
    }

    /// A CP started by replay has committed: replay goes on, or the filer is
    /// online.
    pub(super) fn replay_cp_committed(&mut self) {
        match self.mount_state().final_cp {
            true => self.mount_cp_committed(),
            false => self.replay_some(),
        }
    }

    /// The replay CP has committed: the filer is online.
    fn mount_cp_committed(&mut self) {
        self.phase = Phase::Online;
        // The CP released the half it froze; the other may still hold replayed
        // records, and new records go there next, after this reset.
        let active = self.log.active_half();
        self.issue(IoOp::NvlogReset { half: active }, IoPurpose::Reset);
    }
}

/// A damaged NVLog record that replay read past.
#[derive(Clone, Debug)]
struct DamageReadPast {
    half: usize,
    /// Where the damaged record starts in its half.
    offset: usize,
    /// The sequence numbers of the intact records found behind it.
    seqs: Vec<u64>,
}

/// Every intact record of the two halves, in sequence order, and where
/// damage was read past.
fn read_halves(nvlog: [&[u8]; 2]) -> (Vec<NvRecord>, Vec<DamageReadPast>) {
    let mut records = Vec::new();
    let mut damage = Vec::new();
    for (half, bytes) in nvlog.iter().enumerate() {
        let scan = scan_half(bytes);
        records.extend(scan.chain);
        for behind in scan.past_damage.chunk_by(|a, b| a.0 == b.0) {
            damage.push(DamageReadPast {
                half,
                offset: behind[0].0,
                seqs: behind.iter().map(|(_, record)| record.seq).collect(),
            });
        }
        records.extend(scan.past_damage.into_iter().map(|(_, record)| record));
    }
    records.sort_by_key(|r| r.seq);
    (records, damage)
}

/// The sets of disks a superblock stripe can be rebuilt without: the missing
/// ones, plus any data disks whose copies may be stale, up to what the
/// group's parity recovers.
fn suspect_sets(
    geometry: &wafer_raid::RaidGroupGeometry,
    missing: wafer_raid::DiskSet,
) -> Vec<wafer_raid::DiskSet> {
    let tolerated = geometry.raid_type().tolerated_failures();
    let mut sets = vec![missing];
    for first in geometry.data_set().iter() {
        let one = missing.with(first);
        sets.push(one);
        sets.extend(
            geometry
                .data_set()
                .iter()
                .filter(|second| second.0 > first.0)
                .map(|second| one.with(second)),
        );
    }
    sets.retain(|set| set.len() <= tolerated);
    sets
}

#[cfg(test)]
mod tests {
    use wafer_raid::{DiskIndex, DiskSet, RaidGroupGeometry, RaidType};

    use super::suspect_sets;

    #[test]
    fn a_superblock_stripe_is_rebuilt_without_any_two_data_copies_raid_dp_can_spare() {
        // Disks 0 and 1 hold parity, 2 and 3 the superblock copies: a spare
        // the last CPs skipped and a lost write can leave both copies stale.
        let geometry = RaidGroupGeometry::new(RaidType::RaidDp, 4, 64).expect("valid");
        let sets = suspect_sets(&geometry, DiskSet::EMPTY);
        let both = DiskSet::of([DiskIndex(2), DiskIndex(3)]);
        assert!(sets.contains(&both), "{sets:?}");
        assert!(sets.contains(&DiskSet::of([DiskIndex(3)])));
        let one_missing = suspect_sets(&geometry, DiskSet::of([DiskIndex(2)]));
        assert!(
            one_missing.iter().all(|set| set.len() <= 2),
            "never more than RAID-DP recovers: {one_missing:?}"
        );
        let raid4 = RaidGroupGeometry::new(RaidType::Raid4, 4, 64).expect("valid");
        assert!(
            suspect_sets(&raid4, DiskSet::EMPTY)
                .iter()
                .all(|set| set.len() <= 1)
        );
    }
}
