//! Space accounting, as `df` (per volume) and `df -A` (per aggregate) report it.
//!
//! Volumes are thick (ONTAP's guarantee=volume): creating one takes its whole
//! footprint from the aggregate (its vvbn space, which adds metadata room and
//! room for two CPs of new copies, and its container map). LUNs are
//! space-reserved by default: creating one takes its whole size from the
//! volume, so writes to it never run out of space. A thin LUN (`lun create -o
//! noreserve`) takes nothing when created and a block for each block it
//! comes to hold, so its size may exceed the volume's; a write that would
//! fill a hole in it when the volume has no block left is refused before it
//! is logged (`thin`), never acknowledged and lost.
//!
//! Snapshots keep that promise with ONTAP's fractional reserve at 100%: every
//! block a snapshot shares with the active file system may be overwritten, and
//! the overwrite needs a new block while the snapshot keeps the old one, so
//! shared blocks are counted as used (the *overwrite reserve*). Blocks only
//! snapshots hold are the *snapshot used* space; they fill the snapshot reserve
//! (a percentage of the volume set aside for them) and beyond it *spill* into
//! the active file system's space. So, for a volume of size `S` with reserve
//! `R`:
//!
//! ```text
//! used      = LUN reservations + thin LUN blocks + overwrite reserve + spill
//! available = (S - R) - used
//! ```
//!
//! A change is refused if it would make `available` negative. That keeps the
//! blocks snapshots hold plus every LUN written in full within `S`, and the
//! volume's vvbn space adds room for metadata (indirect blocks, maps) and CPs.

use super::Filer;
use super::meta::Volume;
use crate::BLOCK_SIZE;
use crate::bitmap::Bitmap;
use crate::payload::Payload;
use crate::units::VolumeId;

/// The largest snapshot reserve, in percent of a volume.
pub const MAX_SNAP_RESERVE_PERCENT: u8 = 50;

/// One volume's space, in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VolumeSpace {
    /// Nominal size.
    pub size_bytes: u64,
    /// Set aside for snapshots (`df`'s `.snapshot` total).
    pub snapshot_reserve_bytes: u64,
    /// Space reserved by its space-reserved LUNs.
    pub lun_reserved_bytes: u64,
    /// Space its thin LUNs hold (and, in a check before a change, the
    /// blocks written to their holes that no CP has allocated yet).
    pub thin_lun_bytes: u64,
    /// LUN blocks actually written.
    pub lun_written_bytes: u64,
    /// Metadata blocks of the active file system: indirect blocks, inode file,
    /// maps, snapinfo. They live in the room the vvbn space adds.
    pub metadata_bytes: u64,
    /// Blocks shared by the active file system and snapshots: a full overwrite
    /// would need as many new ones.
    pub overwrite_reserve_bytes: u64,
    /// Blocks only snapshots hold (`df`'s `.snapshot` used).
    pub snapshot_used_bytes: u64,
    /// Snapshot use beyond the reserve, taken from the active file system.
    pub snapshot_spill_bytes: u64,
    /// `df` used: reservations, thin LUN blocks, overwrite reserve and spill.
    pub used_bytes: u64,
    /// `df` avail: what a new LUN or snapshot could take.
    pub available_bytes: u64,
}

impl VolumeSpace {
    /// `df` total for the active file system: the size less the reserve.
    pub fn active_total_bytes(&self) -> u64 {
        self.size_bytes - self.snapshot_reserve_bytes
    }

    /// Whether the volume keeps its promises: used fits the active total.
    pub fn fits(&self) -> bool {
        self.used_bytes <= self.active_total_bytes()
    }

    /// The space of `volume` as it stands.
    pub(super) fn of(volume: &Volume) -> VolumeSpace {
        let lun_written_blocks: u64 = volume
            .luns
            .values()
            .map(|lun| lun.tree.content_blocks())
            .sum();
        SpaceInputs::of(volume).space(volume.size_bytes, lun_written_blocks)
    }
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

/// The inputs of a volume's accounting that changes move: which vvbns the
/// active file system and the snapshots hold, what the LUNs reserve, the
/// blocks thin LUNs hold, and the reserve percentage.
pub(super) struct SpaceInputs<'a> {
    pub(super) active: &'a Bitmap,
    pub(super) summary: &'a Bitmap,
    pub(super) lun_reserved_bytes: u64,
    pub(super) thin_blocks: u64,
    pub(super) snap_reserve_percent: u8,
}

impl SpaceInputs<'_> {
    /// The volume as it stands.
    pub(super) fn of(volume: &Volume) -> SpaceInputs<'_> {
        SpaceInputs {
            active: &volume.activemap,
            summary: &volume.summary,
            lun_reserved_bytes: volume.reserved_bytes(),
            thin_blocks: volume.thin_blocks(),
            snap_reserve_percent: volume.snap_reserve_percent,
        }
    }

    /// The volume as it stands, with `fills` more blocks its thin LUNs will
    /// hold once a CP writes them: what a check before a change counts.
    pub(super) fn with_fills(volume: &Volume, fills: u64) -> SpaceInputs<'_> {
        let mut inputs = SpaceInputs::of(volume);
        inputs.thin_blocks += fills;
        inputs
    }

    /// The accounting these inputs give a volume of `size_bytes`, with
    /// `lun_written_blocks` blocks of LUN content in the active file system.
    pub(super) fn space(&self, size_bytes: u64, lun_written_blocks: u64) -> VolumeSpace {
        let block = BLOCK_SIZE as u64;
        let snapshot_reserve_bytes =
            size_bytes / block * u64::from(self.snap_reserve_percent) / 100 * block;
        let shared = self.active.count_common(self.summary);
        let snapshot_only = self.summary.count_ones() - shared;
        let snapshot_used_bytes = snapshot_only * block;
        let snapshot_spill_bytes = snapshot_used_bytes.saturating_sub(snapshot_reserve_bytes);
        let overwrite_reserve_bytes = shared * block;
        let thin_lun_bytes = self.thin_blocks * block;
        let used_bytes = self.lun_reserved_bytes
            + thin_lun_bytes
            + overwrite_reserve_bytes
            + snapshot_spill_bytes;
        let active_blocks = self.active.count_ones() - 1; // vvbn 0 is never used
        VolumeSpace {
            size_bytes,
            snapshot_reserve_bytes,
            lun_reserved_bytes: self.lun_reserved_bytes,
            thin_lun_bytes,
            lun_written_bytes: lun_written_blocks * block,
            metadata_bytes: (active_blocks - lun_written_blocks) * block,
            overwrite_reserve_bytes,
            snapshot_used_bytes,
            snapshot_spill_bytes,
            used_bytes,
            available_bytes: (size_bytes - snapshot_reserve_bytes).saturating_sub(used_bytes),
        }
    }
}

impl<P: Payload> Filer<P> {
    /// A volume's space, or `None` if there is no such volume.
    pub fn volume_space(&self, id: VolumeId) -> Option<VolumeSpace> {
        self.namespace.volume(id).map(VolumeSpace::of)
    }

    /// The aggregate's space.
    pub fn aggregate_space(&self) -> AggregateSpace {
        let block = BLOCK_SIZE as u64;
        let reserved = self.layout.reserved_blocks();
        let total = self.layout.hdd_blocks() - reserved;
        let available = self.namespace.aggregate_available(self.aggregate_room());
        // SSD blocks in use are Flash Pool's, outside the aggregate's size.
        let ssd_in_use = self.flash_pool_status().map_or(0, |s| s.ssd_used_blocks);
        let in_map = self.aggregate.activemap.count_ones() - reserved;
        AggregateSpace {
            total_bytes: total * block,
            used_bytes: (total - available) * block,
            available_bytes: available * block,
            allocated_bytes: in_map.saturating_sub(ssd_in_use) * block,
        }
    }
}
