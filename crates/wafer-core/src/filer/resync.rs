//! Closing the RAID write hole after a crash.
//!
//! A CP writes new blocks and parity into stripes in place. A crash in mid-write
//! can leave a stripe whose parity matches neither its old nor its new content:
//! some of the writes landed, some did not. Write-anywhere keeps the blocks the
//! mounted image uses untouched (they were never overwritten), so the fix is to
//! recompute parity from what is on disk. Before writing, each CP logs its
//! stripes in the NVLog; mounting an image older than that CP resyncs them
//! before anything else is written.
//!
//! A stripe with a dead disk needs the dead disk's block to recompute parity.
//! If the mounted image uses that block, it is reconstructed from the stripe,
//! allowing for one more block left inconsistent by the crash, and accepted only
//! if it matches the checksum its pointer records; a block the image does not use
//! counts as zeros.

use std::collections::BTreeMap;

use wafer_raid::{Dbn, DiskIndex, DiskSet, StripeUnit};

use super::{Filer, IoOp, IoPurpose, IoResult};
use crate::payload::Payload;

/// Stripes being resynced while mounting.
#[derive(Clone, Debug)]
pub(super) struct Resync<U: StripeUnit> {
    stripes: BTreeMap<(usize, u64), StripeRead<U>>,
    writes_left: usize,
}

#[derive(Clone, Debug)]
struct StripeRead<U: StripeUnit> {
    blocks: Vec<Option<U>>,
    reads_left: usize,
}

impl<P: Payload> Filer<P> {
    /// Starts resyncing `stripes`; returns false if there is nothing to do.
    pub(super) fn start_resync(&mut self, stripes: Vec<(usize, u64)>) -> bool {
        let mut resync = Resync {
            stripes: BTreeMap::new(),
            writes_left: 0,
        };
        let mut reads = Vec::new();
        for (group, dbn) in stripes {
            let Some(geometry) = self.layout.groups().get(group).copied() else {
                continue;
            };
            if dbn >= geometry.blocks_per_disk() || resync.stripes.contains_key(&(group, dbn)) {
                continue;
            }
            let live = geometry.all_disks().difference(self.failed[group]);
            resync.stripes.insert(
                (group, dbn),
                StripeRead {
                    blocks: vec![None; geometry.group_size()],
                    reads_left: live.len(),
                },
            );
            reads.extend(live.iter().map(|disk| (group, dbn, disk)));
        }
        if resync.stripes.is_empty() {
            return false;
        }
        self.mount_state().resync = Some(resync);
        for (group, dbn, disk) in reads {
            self.issue(
                IoOp::Read {
                    disk: self.layout.disk_id(group, disk),
                    dbn: Dbn(dbn),
                    count: 1,
                },
                IoPurpose::ResyncRead {
                    stripe: (group, dbn),
                    disk,
                },
            );
        }
        true
    }

    fn resync_state(&mut self) -> &mut Resync<P::Unit> {
        self.mount_state()
            .resync
            .as_mut()
            .expect("a resync in progress")
    }

    /// A block of a stripe being resynced has arrived.
    pub(super) fn resync_read(
        &mut self,
        stripe: (usize, u64),
        disk: DiskIndex,
        result: IoResult<P>,
    ) {
        let block = match result {
            IoResult::Read(mut sectors) => sectors.pop().flatten().map(|s| P::unit(&s.data)),
            IoResult::Done | IoResult::DiskFailed | IoResult::Unwritable => None,
        };
        let read = self
            .resync_state()
            .stripes
            .get_mut(&stripe)
            .expect("a stripe being resynced");
        read.blocks[disk.as_usize()] = block;
        read.reads_left -= 1;
        if read.reads_left > 0 {
            return;
        }
        let read = self
            .resync_state()
            .stripes
            .remove(&stripe)
            .expect("present");
        self.note_write_without_spare(stripe.0, stripe.1);
        let writes = self.resynced_parity(stripe, read.blocks);
        self.resync_state().writes_left += writes.len();
        for (disk, dbn, sector) in writes {
            self.issue(
                IoOp::Write {
                    disk,
                    dbn,
                    sectors: vec![sector],
                },
                IoPurpose::ResyncWrite,
            );
        }
        self.maybe_finish_resync();
    }

    pub(super) fn resync_write_done(&mut self) {
        self.resync_state().writes_left -= 1;
        self.maybe_finish_resync();
    }

    fn maybe_finish_resync(&mut self) {
        let resync = self.resync_state();
        if resync.stripes.is_empty() && resync.writes_left == 0 {
            self.mount_state().resync = None;
            self.replay();
        }
    }

    /// The parity blocks that make a stripe consistent with what is on disk.
    fn resynced_parity(
        &mut self,
        (group, dbn): (usize, u64),
        blocks: Vec<Option<P::Unit>>,
    ) -> Vec<(crate::units::DiskId, Dbn, super::Sector<P>)> {
        let geometry = self.layout.groups()[group];
        let id = |disk: DiskIndex| self.layout.disk_id(group, disk);
        let data = geometry.data_set();
        let used = |disk: DiskIndex| data.contains(disk) && self.written.is_known(id(disk), dbn);
        let sound = |disk: DiskIndex| match &blocks[disk.as_usize()] {
            Some(block) => {
                let sum = P::unit_checksum(block);
                !used(disk) || self.written.matches(id(disk), dbn, sum) == Some(true)
            }
            None => false,
        };
        let lost: DiskSet = geometry.all_disks().iter().filter(|&d| !sound(d)).collect();
        let lost_used: DiskSet = lost.iter().filter(|&d| used(d)).collect();
        let mut stripe: Vec<P::Unit> = blocks
            .into_iter()
            .map(|b| b.unwrap_or_else(P::Unit::zero))
            .collect();
        if !lost_used.is_empty() {
            match self.reconstruct_used(&geometry, group, dbn, &stripe, lost) {
                Some(rebuilt) => stripe = rebuilt,
                None => {
                    self.counters.unrecoverable_blocks += lost_used.len() as u64;
                    return Vec::new();
                }
            }
        }
        for disk in lost.intersection(data).difference(lost_used).iter() {
            stripe[disk.as_usize()] = P::Unit::zero();
        }
        geometry.encode_stripe(&mut stripe);
        geometry
            .parity_set()
            .difference(self.failed[group])
            .iter()
            .map(|disk| {
                (
                    id(disk),
                    Dbn(dbn),
                    super::sectors::parity_sector::<P>(&stripe[disk.as_usize()], dbn),
                )
            })
            .collect()
    }

    /// Rebuilds the blocks of `lost`, allowing one more silently bad block
    /// (say, stale parity) if the RAID type can; every rebuilt block whose
    /// checksum is known must match it.
    pub(super) fn reconstruct_used(
        &self,
        geometry: &wafer_raid::RaidGroupGeometry,
        group: usize,
        dbn: u64,
        stripe: &[P::Unit],
        lost: DiskSet,
    ) -> Option<Vec<P::Unit>> {
        let tolerated = geometry.raid_type().tolerated_failures();
        let extras = geometry.all_disks().difference(lost).iter().map(Some);
        core::iter::once(None).chain(extras).find_map(|extra| {
            let failed = extra.map_or(lost, |d| lost.with(d));
            if failed.len() > tolerated {
                return None;
            }
            let mut attempt = stripe.to_vec();
            geometry.reconstruct_stripe(&mut attempt, failed).ok()?;
            let verified = lost.intersection(geometry.data_set()).iter().all(|disk| {
                let id = self.layout.disk_id(group, disk);
                let sum = P::unit_checksum(&attempt[disk.as_usize()]);
                self.written.matches(id, dbn, sum) != Some(false)
            });
            verified.then_some(attempt)
        })
    }
}
