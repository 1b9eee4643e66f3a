//! Reconstruction onto a spare: a failed disk's content rebuilt from parity,
//! in the background, a bounded number of stripes per CP.
//!
//! When a RAID group has a failed disk and the aggregate a spare, the next CP
//! records the rebuild in its superblock (group, disk, first stripe not yet
//! rebuilt); only once that is on disk does the driver put the spare in the
//! failed disk's slot ([`IoOp::AssignSpare`]), so a crash can never leave a
//! blank disk that the superblock trusts. From then on every write to the
//! group goes to the new disk too, and each CP rebuilds up to
//! [`REBUILD_STRIPES_PER_CP`] stripes past the cursor that nothing has written
//! since: it reads the survivors, reconstructs the disk's block (verified
//! against the checksum last written there, where known), and writes it with
//! the trailer its pointer implies, or, for a free block, a trailer of its own
//! so that parity stays consistent over every block. A free block since a
//! mount has no checksum to check: beside a parity block whose last write was
//! lost it comes back agreeing with that parity and not the other, so the
//! rebuild also writes every parity block the reconstruction shows stale,
//! leaving the stripe consistent. Doing this inside the CP
//! means no CP can write the same stripe meanwhile. Reads keep treating the
//! disk as failed until the last stripe is rebuilt and committed; then the
//! group is normal again, and one more CP records that. A crash resumes at
//! the committed cursor.
//!
//! The throttle is the per-CP batch: host CPs carry a batch each, and when the
//! filer is otherwise idle rebuild CPs (type Z) follow one another.
//!
//! A rebuilt block's trailer needs the identity its pointer implies, and
//! nothing maps a disk block back to its pointer but a walk of every tree.
//! One walk serves many batches: it keeps the identities of the blocks on the
//! rebuilt disk from the cursor on, up to [`Options::rebuild_identities_per_walk`]
//! of them, and the batches use them until they pass the last stripe it
//! covers. They stay right meanwhile because a block's identity is fixed from
//! its write until it is freed: a block freed since the walk is free (its
//! stale identity names a block no pointer reaches), and one allocated since
//! lies in a stripe a CP wrote, which the rebuild no longer visits.
//!
//! A host CP that writes a stripe ahead of the cursor rebuilds the new disk's
//! block there too, named from the window, so the stripe is whole at once. Past
//! the window nothing names that block yet: the CP writes the stripe as if the
//! new disk were still failed, and the rebuild reaches it later.
//!
//! [`Options::rebuild_identities_per_walk`]: super::Options::rebuild_identities_per_walk

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;

use wafer_raid::{DiskIndex, DiskSet};

use super::{Filer, IoOp, IoPurpose, IoResult, Phase, Sector};
use crate::aggregate::SUPERBLOCK_COPIES;
use crate::bitmap::Bitmap;
use crate::format::{AGGREGATE_VOLUME, Identity, RebuildRecord, Trailer};
use crate::payload::Payload;
use crate::units::{CpCount, DiskId, Fbn, Pvbn, Vvbn};

/// Stripes one CP rebuilds at most: with 4 KiB blocks, 1 MiB per disk.
pub const REBUILD_STRIPES_PER_CP: u64 = 256;

/// Pseudo-file named in the trailer of a free block rebuilt onto a spare.
const FREE_FILE: crate::units::FileId = crate::units::FileId(u32::MAX - 1);

/// A reconstruction in progress.
#[derive(Clone, Debug)]
pub(super) struct Rebuild {
    group: usize,
    disk: DiskIndex,
    /// The first stripe not rebuilt yet.
    cursor: u64,
    /// Whether a committed superblock records the rebuild.
    recorded: bool,
    assignment: Assignment,
    /// Stripes whose block on the new disk is valid (written since it came).
    fresh: Bitmap,
    /// What the last walk of the trees found on the disk, once batches begin.
    window: Option<IdentityWindow>,
}

/// The identities of the used blocks on the disk being rebuilt in a run of
/// its stripes, as one walk of every tree found them.
#[derive(Clone, Debug)]
struct IdentityWindow {
    /// Every block in these stripes that a pointer reached at the walk is in
    /// `blocks`.
    stripes: Range<u64>,
    blocks: BTreeMap<u64, Identity>,
}

/// Where the rebuild's spare stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Assignment {
    /// Not asked for yet (the rebuild is not recorded yet).
    Pending,
    /// Asked for; the driver has not answered.
    Requested,
    /// Asked for, and a spare was added since: a refusal may have been
    /// decided before the driver had that spare, so it is asked again.
    RequestedBeforeNewSpare,
    /// The spare is in the failed disk's place.
    Assigned,
}

/// How a reconstruction onto a spare is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RebuildStatus {
    /// The RAID group.
    pub group: usize,
    /// The disk slot being rebuilt.
    pub disk: DiskId,
    /// Stripes rebuilt (committed).
    pub stripes_done: u64,
    /// Stripes in all.
    pub stripes_total: u64,
    /// Whether the spare has taken the failed disk's slot yet.
    pub spare_assigned: bool,
}

/// The stripes a CP rebuilds.
#[derive(Clone, Debug, Default)]
pub(super) struct RebuildBatch {
    pub(super) group: usize,
    pub(super) stripes: BTreeSet<u64>,
    pub(super) cursor_after: u64,
}

impl RebuildBatch {
    /// The batch of a rebuild whose cursor is past the last stripe: nothing.
    fn past_the_end(group: usize, cursor: u64) -> RebuildBatch {
        RebuildBatch {
            group,
            stripes: BTreeSet::new(),
            cursor_after: cursor,
        }
    }
}

impl<P: Payload> Filer<P> {
    /// The reconstruction in progress, if any.
    pub fn rebuild_status(&self) -> Option<RebuildStatus> {
        self.rebuild.as_ref().map(|r| RebuildStatus {
            group: r.group,
            disk: self.layout.disk_id(r.group, r.disk),
            stripes_done: r.cursor,
            stripes_total: self.layout.groups()[r.group].blocks_per_disk(),
            spare_assigned: r.assignment == Assignment::Assigned,
        })
    }

    /// What the next superblock records about the rebuild.
    pub(super) fn rebuild_record(&self) -> Option<RebuildRecord> {
        self.rebuild.as_ref().map(|r| RebuildRecord {
            group: r.group as u16,
            disk: r.disk.0,
            cursor: r.cursor,
        })
    }

    /// Takes up a rebuild the mounted superblock records: the disk is failed
    /// for reads, its stripes below the cursor are valid.
    pub(super) fn resume_rebuild(&mut self, record: RebuildRecord) -> Result<(), String> {
        let group = usize::from(record.group);
        let geometry =
            self.layout.groups().get(group).ok_or_else(|| {
                format!("the superblock rebuilds RAID group {group}, which is not")
            })?;
        let blocks = geometry.blocks_per_disk();
        if usize::from(record.disk) >= geometry.group_size() || record.cursor > blocks {
            return Err(format!(
                "the superblock's rebuild record is out of range: {record:?}"
            ));
        }
        let disk = DiskIndex(record.disk);
        self.failed[group] = self.failed[group].with(disk);
        let mut fresh = Bitmap::new(blocks);
        (0..record.cursor).for_each(|dbn| {
            fresh.set(dbn);
        });
        self.rebuild = Some(Rebuild {
            group,
            disk,
            cursor: record.cursor,
            recorded: true,
            assignment: Assignment::Pending,
            fresh,
            window: None,
        });
        Ok(())
    }

    /// A CP has committed, having recorded the rebuild or not and rebuilt up
    /// to `rebuilt_to`: the spare is asked for once the rebuild is on disk,
    /// the rebuild finishes when every stripe is, and a new one starts when a
    /// group has a failed disk and a spare may be left.
    pub(super) fn rebuild_after_commit(&mut self, recorded: bool, rebuilt_to: Option<u64>) {
        if !recorded {
            self.rebuild_done_unrecorded = false;
        }
        if let Some(r) = self.rebuild.as_mut() {
            r.recorded |= recorded;
            if let Some(cursor) = rebuilt_to {
                r.cursor = cursor;
            }
        }
        if self.rebuild_complete() {
            let r = self.rebuild.take().expect("complete");
            self.failed[r.group] = self.failed[r.group].difference(DiskSet::of([r.disk]));
            self.counters.rebuilds_completed += 1;
            self.rebuild_done_unrecorded = true;
        }
        self.request_spare();
        if self.rebuild.is_none() && !self.spares_exhausted {
            self.rebuild = self.first_failed_disk().map(|(group, disk)| Rebuild {
                group,
                disk,
                cursor: 0,
                recorded: false,
                assignment: Assignment::Pending,
                fresh: Bitmap::new(self.layout.groups()[group].blocks_per_disk()),
                window: None,
            });
        }
    }

    fn rebuild_complete(&self) -> bool {
        self.rebuild.as_ref().is_some_and(|r| {
            let blocks = self.layout.groups()[r.group].blocks_per_disk();
            let superblocks_fresh =
                r.group != 0 || (0..SUPERBLOCK_COPIES).all(|dbn| r.fresh.get(dbn));
            r.assignment == Assignment::Assigned && r.cursor >= blocks && superblocks_fresh
        })
    }

    /// Asks the driver for the spare once a committed superblock records the
    /// rebuild.
    fn request_spare(&mut self) {
        let Some(r) = self.rebuild.as_mut() else {
            return;
        };
        if !r.recorded || r.assignment != Assignment::Pending {
            return;
        }
        r.assignment = Assignment::Requested;
        let member = self.layout.disk_id(r.group, r.disk);
        self.issue(IoOp::AssignSpare { member }, IoPurpose::AssignSpare);
    }

    fn first_failed_disk(&self) -> Option<(usize, DiskIndex)> {
        self.failed
            .iter()
            .enumerate()
            .find_map(|(group, failed)| failed.iter().next().map(|disk| (group, disk)))
    }

    /// The driver has a new spare: a failed disk waiting for one gets it
    /// (after a CP, started now if the filer is idle). A spare asked for and
    /// not answered yet is asked for again should the answer be a refusal:
    /// the driver may have decided it before it had this spare, and the
    /// failed disk would otherwise wait for ever.
    pub fn spare_added(&mut self) {
        self.spares_exhausted = false;
        if let Some(r) = (self.rebuild.as_mut()).filter(|r| r.assignment == Assignment::Requested) {
            r.assignment = Assignment::RequestedBeforeNewSpare;
        }
        let waiting = self.rebuild.is_none() && self.first_failed_disk().is_some();
        if waiting && self.cp.is_none() && matches!(self.phase, Phase::Online) {
            self.start_cp(super::CpReason::Sync);
        }
    }

    /// The driver has answered [`IoOp::AssignSpare`].
    pub(super) fn spare_assigned(&mut self, result: IoResult<P>) {
        match result {
            IoResult::Done => {
                let r = self
                    .rebuild
                    .as_mut()
                    .expect("a rebuild asked for the spare");
                r.assignment = Assignment::Assigned;
                if self.cp.is_none() && matches!(self.phase, Phase::Online) {
                    self.start_cp(super::CpReason::Sync);
                }
            }
            IoResult::DiskFailed | IoResult::Unwritable | IoResult::Read(_) => {
                let r = self
                    .rebuild
                    .as_mut()
                    .expect("a rebuild asked for the spare");
                if r.assignment == Assignment::RequestedBeforeNewSpare {
                    r.assignment = Assignment::Pending;
                    return self.request_spare();
                }
                self.spares_exhausted = true;
                self.rebuild = None;
            }
        }
    }

    /// The rebuilding disk failed in turn: the rebuild is over, the disk
    /// stays failed.
    pub(super) fn rebuild_disk_failed(&mut self, disk: DiskId) {
        let rebuilding = self
            .rebuild
            .as_ref()
            .is_some_and(|r| self.layout.disk_id(r.group, r.disk) == disk);
        if rebuilding {
            self.rebuild = None;
        }
    }

    /// Whether the rebuild needs a CP to go on: to be recorded, to rebuild
    /// stripes, or to record that it is over.
    pub(super) fn rebuild_wants_cp(&self) -> bool {
        let going = self.rebuild.as_ref().is_some_and(|r| {
            let batch_due = r.assignment == Assignment::Assigned && !self.rebuild_complete();
            // A batch names its blocks from the pointers: it waits for whole trees.
            !r.recorded || (batch_due && self.indirect_complete())
        });
        going || self.rebuild_done_unrecorded
    }

    /// The disk of `group` whose block in stripe `dbn` a CP must rebuild:
    /// the new disk, where its block there is not valid yet and the identity
    /// window says what that block is. A CP writing a stripe past the window
    /// leaves the new disk's block there to the rebuild, as it would for a
    /// failed disk.
    pub(super) fn rebuild_target(&self, group: usize, dbn: u64) -> Option<DiskIndex> {
        self.assigned_rebuild(group)
            .filter(|r| !r.fresh.get(dbn))
            .filter(|r| r.window.as_ref().is_some_and(|w| w.stripes.contains(&dbn)))
            .map(|r| r.disk)
    }

    /// Stripe `dbn` of `group` is written while the disk being rebuilt there
    /// is not assigned (yet again, after a remount): the write skips it, so
    /// its block there goes stale even if the rebuild had passed it. The
    /// rebuild must visit the stripe again, and the superblock of the CP
    /// writing it records the lowered cursor.
    pub(super) fn note_write_without_spare(&mut self, group: usize, dbn: u64) {
        let Some(r) = self
            .rebuild
            .as_mut()
            .filter(|r| r.group == group && r.assignment != Assignment::Assigned)
        else {
            return;
        };
        r.fresh.clear(dbn);
        let superblock_stripe = group == 0 && dbn < SUPERBLOCK_COPIES;
        if !superblock_stripe {
            r.cursor = r.cursor.min(dbn);
        }
    }

    /// Disks of `group` whose block in stripe `dbn` cannot be trusted.
    pub(super) fn untrusted(&self, group: usize, dbn: u64) -> DiskSet {
        match self.assigned_rebuild(group).filter(|r| r.fresh.get(dbn)) {
            Some(r) => self.failed[group].difference(DiskSet::of([r.disk])),
            None => self.failed[group],
        }
    }

    /// Disks of `group` that writes skip: the failed ones, except a disk
    /// being rebuilt.
    pub(super) fn unwritable(&self, group: usize) -> DiskSet {
        match self.assigned_rebuild(group) {
            Some(r) => self.failed[group].difference(DiskSet::of([r.disk])),
            None => self.failed[group],
        }
    }

    fn assigned_rebuild(&self, group: usize) -> Option<&Rebuild> {
        self.rebuild
            .as_ref()
            .filter(|r| r.group == group && r.assignment == Assignment::Assigned)
    }

    /// Notes a write issued to `disk`: blocks of a disk being rebuilt become
    /// valid.
    pub(super) fn note_rebuild_write(&mut self, disk: DiskId, dbn: u64, count: u64) {
        let Some(r) = self.rebuild.as_mut() else {
            return;
        };
        if r.assignment == Assignment::Assigned && self.layout.disk_id(r.group, r.disk) == disk {
            (dbn..dbn + count).for_each(|n| {
                r.fresh.set(n);
            });
        }
    }

    /// The stripes the CP now encoding rebuilds: up to the batch size of those
    /// past the cursor that nothing has written since the spare came, within
    /// the stripes the current identity window covers (walking the trees
    /// again once the cursor has passed them). The superblock stripes are left
    /// to the superblock writes, which include the new disk.
    pub(super) fn rebuild_batch(&mut self) -> Option<RebuildBatch> {
        let r = self
            .rebuild
            .as_ref()
            .filter(|r| r.assignment == Assignment::Assigned)?;
        if !self.indirect_complete() {
            return None; // faulted in meanwhile; a CP follows once they are whole
        }
        let first = match r.group {
            0 => r.cursor.max(SUPERBLOCK_COPIES),
            _ => r.cursor,
        };
        if first >= self.layout.groups()[r.group].blocks_per_disk() {
            return Some(RebuildBatch::past_the_end(r.group, first));
        }
        let covered = r
            .window
            .as_ref()
            .is_some_and(|w| w.stripes.contains(&first));
        if !covered {
            let window = self.walk_identities(r.group, r.disk, first);
            self.counters.rebuild_walks += 1;
            self.rebuild.as_mut().expect("a rebuild").window = Some(window);
        }
        let r = self.rebuild.as_ref().expect("a rebuild");
        let window = r.window.as_ref().expect("a window covering the cursor");
        let mut stripes = BTreeSet::new();
        let mut next = first;
        while next < window.stripes.end && (stripes.len() as u64) < REBUILD_STRIPES_PER_CP {
            if !r.fresh.get(next) {
                stripes.insert(next);
            }
            next += 1;
        }
        Some(RebuildBatch {
            group: r.group,
            stripes,
            cursor_after: next,
        })
    }

    /// Walks every tree for the blocks on (`group`, `disk`) from stripe
    /// `from` on, keeping the identities their pointers imply for the lowest
    /// [`Options::rebuild_identities_per_walk`](super::Options) stripes that
    /// hold any; the window ends where the blocks kept end, or at the end of
    /// the disk if they are all there.
    fn walk_identities(&self, group: usize, disk: DiskIndex, from: u64) -> IdentityWindow {
        let limit = self.options.rebuild_identities_per_walk.max(1);
        let mut blocks = BTreeMap::new();
        let mut end = self.layout.groups()[group].blocks_per_disk();
        self.for_each_reachable_block(|ptr, identity| {
            let at = self.layout.locate(ptr.pvbn).expect("inside the aggregate");
            let wanted = at.group == group && at.disk == disk;
            if !wanted || !(from..end).contains(&at.dbn.0) {
                return;
            }
            blocks.insert(at.dbn.0, identity);
            if blocks.len() > limit {
                let (last, _) = blocks.pop_last().expect("over the limit");
                end = last;
            }
        });
        IdentityWindow {
            stripes: from..end,
            blocks,
        }
    }

    /// The sector a rebuilt data block is written as: with the identity its
    /// pointer implies, or, if nothing points at it, as a free block.
    pub(super) fn rebuilt_sector(
        &mut self,
        group: usize,
        disk: DiskIndex,
        dbn: u64,
        content: &P::Unit,
    ) -> Sector<P> {
        self.counters.rebuilt_blocks += 1;
        // Without a rebuild, the new disk died in the middle of this CP and
        // the write goes nowhere.
        let window = self.rebuild.as_ref().map(|r| {
            r.window
                .as_ref()
                .filter(|w| w.stripes.contains(&dbn))
                .expect("a block is rebuilt only inside the identity window")
        });
        let known = window.and_then(|w| w.blocks.get(&dbn).copied());
        let identity = known.unwrap_or_else(|| {
            let home = self.layout.pvbn(group, disk, wafer_raid::Dbn(dbn));
            free_identity(home.expect("a data disk"), dbn)
        });
        Sector {
            data: P::from_unit(content.clone()),
            trailer: Trailer::new(P::unit_checksum(content), identity).encode(),
        }
    }
}

/// The identity written in the trailer of free block `pvbn` (stripe `dbn`)
/// when it is rebuilt or repaired, so that parity stays consistent over every
/// block.
pub(super) fn free_identity(pvbn: Pvbn, dbn: u64) -> Identity {
    Identity {
        pvbn,
        vvbn: Vvbn(0),
        volume: AGGREGATE_VOLUME,
        file: FREE_FILE,
        fbn: Fbn(dbn),
        level: 0,
        cp: CpCount(0),
    }
}

/// The plan for a stripe whose block on `target` must be rebuilt: read every
/// trusted disk, reconstruct, then write the target and, if the CP changes
/// the stripe too, its new blocks and parity.
pub(super) fn rebuild_plan(
    geometry: &wafer_raid::RaidGroupGeometry,
    written: DiskSet,
    untrusted: DiskSet,
    target: DiskIndex,
) -> wafer_raid::ParityUpdatePlan {
    let changed = match written.is_empty() {
        true => DiskSet::EMPTY,
        false => written.union(geometry.parity_set()),
    };
    wafer_raid::ParityUpdatePlan {
        method: wafer_raid::ParityUpdateMethod::ReconstructFirst,
        reads: geometry.all_disks().difference(untrusted),
        writes: changed.difference(untrusted).with(target),
    }
}
