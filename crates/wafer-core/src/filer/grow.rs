//! Growing an aggregate: disks added as a new RAID group, or as data disks
//! at the end of the last group (`aggr add`).
//!
//! Either way the pvbn space only grows at its end: a group's data blocks
//! are numbered disk-major, so a data disk appended to the last group
//! appends its blocks, and a new group appends its own. No block moves and
//! no pointer changes. The added disks must be blank (zeros): a zeroed data
//! disk in a RAID-DP group replaces a phantom column of zeros, so no parity
//! changes (`docs/FORMAT.md`), and a new group's stripes are consistent as
//! they stand.
//!
//! The new layout takes effect at the start of the next CP, when nothing is
//! being allocated, and is durable when that CP's superblock records the
//! groups. The driver records the disks first (its configuration names
//! them before the engine is told), so a crash before that superblock
//! leaves a configured layout that extends the one on disk: the mount
//! accepts exactly that, and takes the new blocks as free.
//!
//! SSD groups (Flash Pool) come the same way, once `hybrid_enabled` is on;
//! a group never changes tier.

use super::{CpReason, Filer};
use crate::aggregate::Layout;
use crate::bitmap::Bitmap;
use crate::payload::Payload;
use crate::space::Allocator;
use crate::units::{Instant, Pvbn};

/// Why disks cannot be added as asked.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GrowError {
    /// The new layout is not the old one with disks added at its end.
    #[error("{0}")]
    NotAnExtension(String),
    /// The aggregate cannot take disks now.
    #[error("the aggregate cannot grow now: {0}")]
    NotNow(&'static str),
    /// SSD groups need `hybrid_enabled` on.
    #[error("SSD RAID groups can be added only with the option hybrid_enabled on")]
    NotHybrid,
}

/// Why `hybrid_enabled` cannot change as asked.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HybridError {
    /// SSD groups are in use.
    #[error("the aggregate has SSD RAID groups, so hybrid_enabled stays on")]
    HasSsdGroups,
    /// The aggregate is not online.
    #[error("the aggregate is not online")]
    NotOnline,
}

/// Whether `grown` is `old` with data disks added to its last group and/or
/// groups added after it.
pub fn check_extension(old: &Layout, grown: &Layout) -> Result<(), GrowError> {
    let (old_groups, new_groups) = (old.groups(), grown.groups());
    let refuse = |why: String| Err(GrowError::NotAnExtension(why));
    if new_groups.len() < old_groups.len() {
        return refuse(format!(
            "{} RAID groups where the aggregate has {}",
            new_groups.len(),
            old_groups.len()
        ));
    }
    let last = old_groups.len() - 1;
    for (n, (was, now)) in old_groups.iter().zip(new_groups).enumerate() {
        let same_kind = was.raid_type() == now.raid_type()
            && was.blocks_per_disk() == now.blocks_per_disk()
            && old.tier(n) == grown.tier(n);
        if !same_kind || (n < last && was.group_size() != now.group_size()) {
            return refuse(format!(
                "RAID group {n} would change other than by new disks"
            ));
        }
        if now.group_size() < was.group_size() {
            return refuse(format!("RAID group {n} would lose disks"));
        }
    }
    if grown.total_blocks() == old.total_blocks() {
        return refuse("no disk added".into());
    }
    Ok(())
}

impl<P: Payload> Filer<P> {
    /// Adds disks: `grown` is the aggregate's layout with them, which must
    /// extend the current one ([`check_extension`]). It takes effect at the
    /// start of the next CP, which starts now unless one is running.
    pub fn add_disks(&mut self, now: Instant, grown: Layout) -> Result<(), GrowError> {
        self.now = now;
        if !self.is_online() {
            return Err(GrowError::NotNow("it is not online"));
        }
        if self.rebuild.is_some() {
            return Err(GrowError::NotNow("a reconstruction is running"));
        }
        if self.growth.is_some() {
            return Err(GrowError::NotNow("disks it was given are not in use yet"));
        }
        check_extension(&self.layout, &grown)?;
        if grown.is_hybrid() && !self.hybrid {
            return Err(GrowError::NotHybrid);
        }
        self.growth = Some(grown);
        match self.cp {
            None => self.start_cp(CpReason::Sync),
            Some(_) => {
                self.next_cp_reason.get_or_insert(CpReason::Sync);
            }
        }
        Ok(())
    }

    /// `aggr options NAME hybrid_enabled on|off`: whether SSD RAID groups
    /// may be added. Every superblock from the next CP on records it.
    pub fn set_hybrid(&mut self, enabled: bool) -> Result<(), HybridError> {
        if !self.is_online() {
            return Err(HybridError::NotOnline);
        }
        let has_ssd =
            self.layout.is_hybrid() || self.growth.as_ref().is_some_and(|g| g.is_hybrid());
        if !enabled && has_ssd {
            return Err(HybridError::HasSsdGroups);
        }
        self.hybrid = enabled;
        Ok(())
    }

    /// Whether `hybrid_enabled` is on.
    pub fn hybrid_enabled(&self) -> bool {
        self.hybrid
    }

    /// The disks added are taken into use: called as a CP starts.
    pub(super) fn apply_growth(&mut self) {
        let Some(grown) = self.growth.take() else {
            return;
        };
        let old_total = self.layout.total_blocks();
        self.layout = grown;
        let total = self.layout.total_blocks();
        self.aggregate.activemap.grow(total);
        self.committed_map.grow(total);
        self.aggregate.pending.grow(total);
        self.written.grow(&self.layout);
        let disks = self.layout.disk_count() as usize;
        self.counters.disks.resize(disks, Default::default());
        let groups = self.layout.groups().len();
        self.failed.resize(groups, wafer_raid::DiskSet::EMPTY);
        self.claim_blocks_from(old_total);
        let used = self
            .aggregate
            .activemap
            .union(self.aggregate.pending.held());
        self.aggregate.allocator = Allocator::new(&self.layout, &used);
    }

    /// Marks the blocks from `old_total` on as the aggregate's: those the
    /// layout reserves are taken, and every map block covering them is
    /// dirty, so the next CP writes the map at its new size.
    pub(super) fn claim_blocks_from(&mut self, old_total: u64) {
        let reserved: Vec<Pvbn> = self
            .layout
            .reserved_pvbns()
            .filter(|p| p.0 >= old_total)
            .collect();
        for pvbn in reserved {
            self.aggregate.activemap.set(pvbn.0);
        }
        let first = Bitmap::block_of(old_total);
        for block in first..self.aggregate.activemap.blocks() {
            self.aggregate.activemap_file.dirty.insert(block);
        }
    }
}
