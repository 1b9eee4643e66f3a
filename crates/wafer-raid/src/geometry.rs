//! RAID group geometry: which disk plays which role, and where a block lives.
//!
//! A RAID group is a row of disks at positions `0..group_size`. Parity disks come
//! first, in the order ONTAP's `aggr status -r` prints them: for RAID-DP position 0
//! is the dparity (diagonal parity) disk and position 1 the parity (row parity)
//! disk; for RAID-4 position 0 is the parity disk. Data disks follow. Parity is
//! dedicated, never rotated: WAFL writes full stripes, so the parity disks do not
//! become a hot spot, and a data disk can be appended without moving anything.
//!
//! A *stripe* is the set of blocks at one disk block number ([`Dbn`]) across every
//! disk of the group. The group's data blocks are numbered disk-major by group
//! block numbers ([`Gbn`]): data disk `k` holds `k * blocks_per_disk ..
//! (k + 1) * blocks_per_disk`. Consecutive group block numbers therefore sit next to
//! each other on one disk, which is what lets the write allocator lay a file's
//! consecutive blocks out as a chain on one disk, and appending a data disk appends
//! a range without renumbering any existing block.

use core::fmt;
use core::ops::RangeInclusive;

use crate::DiskSet;

/// The protection scheme of a RAID group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RaidType {
    /// One dedicated row-parity disk; survives any single disk failure.
    Raid4,
    /// Row parity plus row-diagonal parity (RDP); survives any two disk failures.
    RaidDp,
}

impl RaidType {
    /// Number of parity disks in every group of this type.
    pub const fn parity_disks(self) -> u16 {
        match self {
            RaidType::Raid4 => 1,
            RaidType::RaidDp => 2,
        }
    }

    /// How many disks of one group may be missing while every block stays readable.
    pub const fn tolerated_failures(self) -> usize {
        self.parity_disks() as usize
    }

    /// Allowed group sizes (disks per group, parity included), as ONTAP enforces
    /// for `raidsize`: RAID-4 2..=14, RAID-DP 3..=28.
    pub const fn group_size_limits(self) -> RangeInclusive<u16> {
        match self {
            RaidType::Raid4 => 2..=14,
            RaidType::RaidDp => 3..=28,
        }
    }

    /// ONTAP's spelling, as `aggr status` prints it.
    pub const fn ontap_name(self) -> &'static str {
        match self {
            RaidType::Raid4 => "raid4",
            RaidType::RaidDp => "raid_dp",
        }
    }
}

impl fmt::Display for RaidType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.ontap_name())
    }
}

/// A disk's position within its RAID group, `0..group_size`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DiskIndex(pub u16);

impl DiskIndex {
    /// The position as an index into a stripe slice.
    pub const fn as_usize(self) -> usize {
        self.0 as usize
    }
}

/// Disk block number: a 4 KiB block's index on one disk. It also names the
/// stripe made of the blocks at that number on every disk of the group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Dbn(pub u64);

/// Group block number: a data block's index within one RAID group's data space
/// (disk-major, see the module documentation). Parity blocks have none.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Gbn(pub u64);

/// What a disk at a given position is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DiskRole {
    /// RAID-DP's diagonal parity disk.
    DParity,
    /// Row parity (RAID-4's only parity disk).
    Parity,
    /// The `n`th data disk of the group, counted from 0.
    Data(u16),
}

impl DiskRole {
    /// ONTAP's word for the role, as in the `RAID Disk` column of `aggr status -r`.
    pub const fn ontap_name(self) -> &'static str {
        match self {
            DiskRole::DParity => "dparity",
            DiskRole::Parity => "parity",
            DiskRole::Data(_) => "data",
        }
    }
}

/// Why a geometry was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GeometryError {
    /// The group size lies outside what the RAID type supports.
    #[error("{raid_type} group size {group_size} is out of range {min}..={max}")]
    GroupSizeOutOfRange {
        /// The RAID type asked for.
        raid_type: RaidType,
        /// The group size asked for.
        group_size: u16,
        /// Smallest allowed size.
        min: u16,
        /// Largest allowed size.
        max: u16,
    },
    /// A group of disks that hold no blocks is of no use.
    #[error("a RAID group needs at least one block per disk")]
    EmptyDisks,
    /// The group's data space would not fit the 64-bit group block numbers.
    #[error("{data_disks} data disks of {blocks_per_disk} blocks overflow the group block numbers")]
    TooManyBlocks {
        /// Data disks in the group.
        data_disks: u16,
        /// Blocks on each disk.
        blocks_per_disk: u64,
    },
}

/// The shape of one RAID group: its type, its width and the size of its disks.
///
/// All disks of a group are used up to the same number of blocks (the smallest
/// disk's), as in ONTAP where larger disks are right-sized down.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RaidGroupGeometry {
    raid_type: RaidType,
    group_size: u16,
    blocks_per_disk: u64,
}

impl RaidGroupGeometry {
    /// A group of `group_size` disks (parity included) of `blocks_per_disk` blocks each.
    pub fn new(
        raid_type: RaidType,
        group_size: u16,
        blocks_per_disk: u64,
    ) -> Result<Self, GeometryError> {
        let limits = raid_type.group_size_limits();
        if !limits.contains(&group_size) {
            return Err(GeometryError::GroupSizeOutOfRange {
                raid_type,
                group_size,
                min: *limits.start(),
                max: *limits.end(),
            });
        }
        if blocks_per_disk == 0 {
            return Err(GeometryError::EmptyDisks);
        }
        let data_disks = group_size - raid_type.parity_disks();
        if u64::from(data_disks).checked_mul(blocks_per_disk).is_none() {
            return Err(GeometryError::TooManyBlocks {
                data_disks,
                blocks_per_disk,
            });
        }
        Ok(RaidGroupGeometry {
            raid_type,
            group_size,
            blocks_per_disk,
        })
    }

    /// The same group with one more data disk appended at the end. When the new
    /// disk is zeroed, every existing parity block stays valid (see `rdp`).
    pub fn with_added_data_disk(&self) -> Result<Self, GeometryError> {
        RaidGroupGeometry::new(self.raid_type, self.group_size + 1, self.blocks_per_disk)
    }

    /// The protection scheme.
    pub const fn raid_type(&self) -> RaidType {
        self.raid_type
    }

    /// Disks in the group, parity included.
    pub const fn group_size(&self) -> usize {
        self.group_size as usize
    }

    /// Parity disks in the group (1 or 2).
    pub const fn parity_disks(&self) -> usize {
        self.raid_type.parity_disks() as usize
    }

    /// Data disks in the group.
    pub const fn data_disks(&self) -> usize {
        self.group_size() - self.parity_disks()
    }

    /// Blocks on each disk, which is also the number of stripes.
    pub const fn blocks_per_disk(&self) -> u64 {
        self.blocks_per_disk
    }

    /// Data blocks in the whole group: the size of its group block number space.
    pub const fn data_blocks(&self) -> u64 {
        self.data_disks() as u64 * self.blocks_per_disk
    }

    /// The role of the disk at `disk`.
    ///
    /// # Panics
    /// If `disk` is not a position of this group.
    pub fn role(&self, disk: DiskIndex) -> DiskRole {
        assert!(
            disk.as_usize() < self.group_size(),
            "{disk:?} outside the group"
        );
        match (self.raid_type, disk.0) {
            (RaidType::RaidDp, 0) => DiskRole::DParity,
            (RaidType::RaidDp, 1) | (RaidType::Raid4, 0) => DiskRole::Parity,
            (_, position) => DiskRole::Data(position - self.raid_type.parity_disks()),
        }
    }

    /// Position of the row-parity disk.
    pub const fn parity_disk(&self) -> DiskIndex {
        match self.raid_type {
            RaidType::Raid4 => DiskIndex(0),
            RaidType::RaidDp => DiskIndex(1),
        }
    }

    /// Position of the diagonal-parity disk, for RAID-DP.
    pub const fn dparity_disk(&self) -> Option<DiskIndex> {
        match self.raid_type {
            RaidType::Raid4 => None,
            RaidType::RaidDp => Some(DiskIndex(0)),
        }
    }

    /// Position of the `n`th data disk.
    ///
    /// # Panics
    /// If the group has no such data disk.
    pub fn data_disk(&self, n: usize) -> DiskIndex {
        assert!(n < self.data_disks(), "data disk {n} outside the group");
        DiskIndex((self.parity_disks() + n) as u16)
    }

    /// Every disk position of the group.
    pub fn all_disks(&self) -> DiskSet {
        DiskSet::first(self.group_size())
    }

    /// The parity disks of the group.
    pub fn parity_set(&self) -> DiskSet {
        DiskSet::first(self.parity_disks())
    }

    /// The data disks of the group.
    pub fn data_set(&self) -> DiskSet {
        self.all_disks().difference(self.parity_set())
    }

    /// Where a data block lives, or `None` if the group has no such block.
    pub fn locate(&self, gbn: Gbn) -> Option<(DiskIndex, Dbn)> {
        if gbn.0 >= self.data_blocks() {
            return None;
        }
        let data_disk = (gbn.0 / self.blocks_per_disk) as usize;
        Some((self.data_disk(data_disk), Dbn(gbn.0 % self.blocks_per_disk)))
    }

    /// The group block number of the block at (`disk`, `dbn`), or `None` for a
    /// parity disk or a block number past the end of the disks.
    pub fn gbn(&self, disk: DiskIndex, dbn: Dbn) -> Option<Gbn> {
        if dbn.0 >= self.blocks_per_disk || disk.as_usize() >= self.group_size() {
            return None;
        }
        match self.role(disk) {
            DiskRole::Data(n) => Some(Gbn(u64::from(n) * self.blocks_per_disk + dbn.0)),
            DiskRole::Parity | DiskRole::DParity => None,
        }
    }

    /// The data blocks of stripe `dbn`, in data-disk order.
    pub fn stripe_gbns(&self, dbn: Dbn) -> impl Iterator<Item = Gbn> + '_ {
        assert!(
            dbn.0 < self.blocks_per_disk,
            "{dbn:?} past the end of the disks"
        );
        (0..self.data_disks() as u64).map(move |n| Gbn(n * self.blocks_per_disk + dbn.0))
    }
}
