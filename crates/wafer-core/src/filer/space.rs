//! Space accounting, as `df` (per volume) and `df -A` (per aggregate) report it.
//!
//! Volumes are thick (ONTAP's guarantee=volume): creating one takes its whole
//! footprint from the aggregate (its vvbn space, which adds metadata room and
//! room for two CPs of new copies, and its container map). LUNs are
//! space-reserved: creating one takes its whole size from the volume, so writes
//! to it never run out of space. A volume's *used* space is therefore its LUN
//! reservations plus the metadata it holds (indirect blocks, inode file, map);
//! *available* is what is left for new LUNs. Snapshot reserve and snapshot use
//! are reported and are zero until snapshots exist.

use super::Filer;
use crate::BLOCK_SIZE;
use crate::units::{Fbn, VolumeId};

/// One volume's space, in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VolumeSpace {
    /// Nominal size.
    pub size_bytes: u64,
    /// Space reserved by its LUNs.
    pub lun_reserved_bytes: u64,
    /// LUN blocks actually written.
    pub lun_written_bytes: u64,
    /// Metadata blocks: indirect blocks, inode file, active map.
    pub metadata_bytes: u64,
    /// `df` used: reservations plus metadata.
    pub used_bytes: u64,
    /// `df` avail: what a new LUN could reserve.
    pub available_bytes: u64,
    /// Snapshot reserve (none yet).
    pub snapshot_reserve_bytes: u64,
    /// Space held only by snapshots (none yet).
    pub snapshot_used_bytes: u64,
}

/// The aggregate's space, in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AggregateSpace {
    /// Data blocks of all RAID groups, less the superblock pair.
    pub total_bytes: u64,
    /// Promised to volumes, plus the aggregate's own metadata and CP room.
    pub used_bytes: u64,
    /// What a new volume could take.
    pub available_bytes: u64,
    /// Blocks actually allocated (volumes' blocks and all metadata).
    pub allocated_bytes: u64,
}

impl Filer {
    /// A volume's space, or `None` if there is no such volume.
    pub fn volume_space(&self, id: VolumeId) -> Option<VolumeSpace> {
        let volume = self.volumes.get(&id)?;
        let block = BLOCK_SIZE as u64;
        let lun_reserved_bytes = volume.reserved_bytes();
        let lun_written_blocks: u64 = volume
            .luns
            .values()
            .map(|lun| {
                let blocks = lun.size_bytes.div_ceil(block);
                (0..blocks)
                    .filter(|&fbn| !lun.tree.get(Fbn(fbn)).is_null())
                    .count() as u64
            })
            .sum();
        let active_blocks = volume.activemap.count_ones() - 1; // vvbn 0 is never used
        let metadata_bytes = (active_blocks - lun_written_blocks) * block;
        let used_bytes = lun_reserved_bytes + metadata_bytes;
        Some(VolumeSpace {
            size_bytes: volume.size_bytes,
            lun_reserved_bytes,
            lun_written_bytes: lun_written_blocks * block,
            metadata_bytes,
            used_bytes,
            available_bytes: volume.size_bytes.saturating_sub(lun_reserved_bytes),
            snapshot_reserve_bytes: 0,
            snapshot_used_bytes: 0,
        })
    }

    /// The aggregate's space.
    pub fn aggregate_space(&self) -> AggregateSpace {
        let block = BLOCK_SIZE as u64;
        let reserved = self.layout.reserved_blocks();
        let total = self.layout.total_blocks() - reserved;
        let available = self.aggregate_available();
        AggregateSpace {
            total_bytes: total * block,
            used_bytes: (total - available) * block,
            available_bytes: available * block,
            allocated_bytes: (self.aggregate.activemap.count_ones() - reserved) * block,
        }
    }
}
