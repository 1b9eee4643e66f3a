//! The aggregate's physical layout: RAID groups, their disks, and the pvbn space.
//!
//! An aggregate concatenates the data spaces of its RAID groups: group 0's group
//! block numbers come first, then group 1's, and so on, so a [`Pvbn`] names one
//! data block of one group. Disks get aggregate-wide [`DiskId`]s, group members
//! in group and position order, spares after them.
//!
//! A group is on hard disks or on SSDs ([`Tier`]). A hybrid aggregate (Flash
//! Pool) adds SSD groups to HDD ones: their pvbns follow the same numbering,
//! but they hold the write cache, not the aggregate's capacity, so
//! [`Layout::hdd_blocks`] is the aggregate's size and group 0 is always on
//! hard disks.
//!
//! The superblock pair is the one fixed address: copy A at disk block 0 and copy
//! B at disk block 1 of every data disk of group 0 (each data disk holds the
//! whole superblock, so any one surviving disk can mount the aggregate). Those
//! pvbns are never allocated to anything else.

use wafer_raid::{Dbn, DiskIndex, Gbn, GeometryError, RaidGroupGeometry, RaidType};

use crate::format::{GroupRecord, MAX_GROUPS};
use crate::units::{DiskId, Pvbn};

/// Disk blocks at the start of every disk of group 0 that hold the superblock pair.
pub const SUPERBLOCK_COPIES: u64 = 2;

/// Why a layout was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LayoutError {
    /// An aggregate needs at least one RAID group, and at most [`MAX_GROUPS`].
    #[error("an aggregate holds 1..={MAX_GROUPS} RAID groups, not {0}")]
    GroupCount(usize),
    /// A RAID group's geometry is invalid.
    #[error("RAID group {group}: {source}")]
    Group {
        /// Which group.
        group: usize,
        /// What was wrong with it.
        source: GeometryError,
    },
    /// Group 0's disks are too small to hold the superblock pair and any data.
    #[error("RAID group 0 needs more than {SUPERBLOCK_COPIES} blocks per disk")]
    TooSmall,
    /// Group 0 holds the superblock and the aggregate's capacity: never SSDs.
    #[error("RAID group 0 must be on hard disks (SSD groups are added to an HDD aggregate)")]
    SsdFirst,
}

/// What a RAID group's disks are: capacity (hard disks) or Flash Pool cache (SSDs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Tier {
    /// Hard disks: the aggregate's capacity.
    #[default]
    Hdd,
    /// SSDs of a hybrid aggregate: the Flash Pool cache, outside its size.
    Ssd,
}

impl Tier {
    /// ONTAP's disk type column.
    pub fn disk_type(self) -> &'static str {
        match self {
            Tier::Hdd => "SAS",
            Tier::Ssd => "SSD",
        }
    }
}

/// Where a pvbn lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Location {
    /// The RAID group.
    pub group: usize,
    /// The disk's position in the group.
    pub disk: DiskIndex,
    /// The block on that disk (and the stripe).
    pub dbn: Dbn,
}

/// What an aggregate disk slot is used for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slot {
    /// A member of a RAID group.
    Member {
        /// The group.
        group: usize,
        /// Its position in the group.
        disk: DiskIndex,
    },
    /// The `n`th spare disk.
    Spare(u32),
}

/// The RAID groups of an aggregate and how its pvbn space maps onto them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    groups: Vec<RaidGroupGeometry>,
    tiers: Vec<Tier>,
    pvbn_bases: Vec<u64>,
    disk_bases: Vec<u32>,
    spares: u32,
}

impl Layout {
    /// A layout of HDD `groups` plus `spares` spare disks.
    pub fn new(groups: Vec<RaidGroupGeometry>, spares: u32) -> Result<Layout, LayoutError> {
        let tiers = vec![Tier::Hdd; groups.len()];
        Layout::tiered(groups, tiers, spares)
    }

    /// A layout whose group `n` is on `tiers[n]`.
    pub fn tiered(
        groups: Vec<RaidGroupGeometry>,
        tiers: Vec<Tier>,
        spares: u32,
    ) -> Result<Layout, LayoutError> {
        assert_eq!(groups.len(), tiers.len(), "a tier per group");
        if groups.is_empty() || groups.len() > MAX_GROUPS {
            return Err(LayoutError::GroupCount(groups.len()));
        }
        if groups[0].blocks_per_disk() <= SUPERBLOCK_COPIES {
            return Err(LayoutError::TooSmall);
        }
        if tiers[0] == Tier::Ssd {
            return Err(LayoutError::SsdFirst);
        }
        let mut pvbn_bases = Vec::with_capacity(groups.len());
        let mut disk_bases = Vec::with_capacity(groups.len());
        let (mut pvbn, mut disk) = (0u64, 0u32);
        for group in &groups {
            pvbn_bases.push(pvbn);
            disk_bases.push(disk);
            pvbn += group.data_blocks();
            disk += group.group_size() as u32;
        }
        Ok(Layout {
            groups,
            tiers,
            pvbn_bases,
            disk_bases,
            spares,
        })
    }

    /// Rebuilds a layout from the superblock's records.
    pub fn from_records(records: &[GroupRecord], spares: u32) -> Result<Layout, LayoutError> {
        let tiers = records
            .iter()
            .map(|r| if r.ssd { Tier::Ssd } else { Tier::Hdd })
            .collect();
        let groups = records
            .iter()
            .enumerate()
            .map(|(group, record)| {
                let raid_type = if record.raid_dp {
                    RaidType::RaidDp
                } else {
                    RaidType::Raid4
                };
                RaidGroupGeometry::new(raid_type, record.group_size, record.blocks_per_disk)
                    .map_err(|source| LayoutError::Group { group, source })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Layout::tiered(groups, tiers, spares)
    }

    /// This layout with `group` added after its groups, on `tier`.
    pub fn with_group(
        &self,
        group: RaidGroupGeometry,
        tier: Tier,
        spares: u32,
    ) -> Result<Layout, LayoutError> {
        let mut groups = self.groups.clone();
        let mut tiers = self.tiers.clone();
        groups.push(group);
        tiers.push(tier);
        Layout::tiered(groups, tiers, spares)
    }

    /// The records the superblock keeps.
    pub fn records(&self) -> Vec<GroupRecord> {
        self.groups
            .iter()
            .zip(&self.tiers)
            .map(|(g, &tier)| GroupRecord {
                ssd: tier == Tier::Ssd,
                raid_dp: g.raid_type() == RaidType::RaidDp,
                group_size: g.group_size() as u16,
                blocks_per_disk: g.blocks_per_disk(),
            })
            .collect()
    }

    /// The RAID groups.
    pub fn groups(&self) -> &[RaidGroupGeometry] {
        &self.groups
    }

    /// What each group is on, in group order.
    pub fn tiers(&self) -> &[Tier] {
        &self.tiers
    }

    /// This layout with `spares` spare disks.
    pub fn with_spares(&self, spares: u32) -> Layout {
        Layout {
            spares,
            ..self.clone()
        }
    }

    /// What group `group` is on.
    pub fn tier(&self, group: usize) -> Tier {
        self.tiers[group]
    }

    /// What the group holding `pvbn` is on (HDD past the end).
    pub fn tier_of(&self, pvbn: Pvbn) -> Tier {
        self.locate(pvbn)
            .map_or(Tier::Hdd, |at| self.tiers[at.group])
    }

    /// Whether any group is on SSDs.
    pub fn is_hybrid(&self) -> bool {
        self.tiers.contains(&Tier::Ssd)
    }

    /// Data blocks of the groups on `tier`.
    pub fn tier_blocks(&self, tier: Tier) -> u64 {
        self.groups
            .iter()
            .zip(&self.tiers)
            .filter(|&(_, &t)| t == tier)
            .map(|(g, _)| g.data_blocks())
            .sum()
    }

    /// The aggregate's capacity in pvbns: its HDD groups' data blocks.
    pub fn hdd_blocks(&self) -> u64 {
        self.tier_blocks(Tier::Hdd)
    }

    /// Spare disks.
    pub fn spares(&self) -> u32 {
        self.spares
    }

    /// Number of pvbns: the data blocks of every group.
    pub fn total_blocks(&self) -> u64 {
        let last = self.groups.len() - 1;
        self.pvbn_bases[last] + self.groups[last].data_blocks()
    }

    /// Disk slots in the aggregate, members and spares.
    pub fn disk_count(&self) -> u32 {
        let last = self.groups.len() - 1;
        self.disk_bases[last] + self.groups[last].group_size() as u32 + self.spares
    }

    /// Where `pvbn` lives, or `None` past the end of the aggregate.
    pub fn locate(&self, pvbn: Pvbn) -> Option<Location> {
        let group = self
            .pvbn_bases
            .partition_point(|&base| base <= pvbn.0)
            .checked_sub(1)?;
        let (disk, dbn) = self.groups[group].locate(Gbn(pvbn.0 - self.pvbn_bases[group]))?;
        Some(Location { group, disk, dbn })
    }

    /// The pvbn of a data block, or `None` for a parity disk.
    pub fn pvbn(&self, group: usize, disk: DiskIndex, dbn: Dbn) -> Option<Pvbn> {
        let gbn = self.groups.get(group)?.gbn(disk, dbn)?;
        Some(Pvbn(self.pvbn_bases[group] + gbn.0))
    }

    /// The aggregate-wide id of a group member.
    pub fn disk_id(&self, group: usize, disk: DiskIndex) -> DiskId {
        assert!(
            disk.as_usize() < self.groups[group].group_size(),
            "{disk:?} outside group {group}"
        );
        DiskId(self.disk_bases[group] + u32::from(disk.0))
    }

    /// What a disk slot is.
    pub fn slot(&self, id: DiskId) -> Option<Slot> {
        let group = self.disk_bases.partition_point(|&base| base <= id.0) - 1;
        let position = id.0 - self.disk_bases[group];
        if (position as usize) < self.groups[group].group_size() {
            return Some(Slot::Member {
                group,
                disk: DiskIndex(position as u16),
            });
        }
        let last = self.groups.len() - 1;
        let spare = id.0 - self.disk_bases[last] - self.groups[last].group_size() as u32;
        (group == last && spare < self.spares).then_some(Slot::Spare(spare))
    }

    /// The disks holding superblock copy `copy` (0 = A, 1 = B): every data disk of group 0.
    pub fn superblock_disks(&self) -> impl Iterator<Item = DiskId> + '_ {
        self.groups[0]
            .data_set()
            .iter()
            .map(|disk| self.disk_id(0, disk))
    }

    /// How many pvbns the superblock pair takes.
    pub fn reserved_blocks(&self) -> u64 {
        SUPERBLOCK_COPIES * self.groups[0].data_disks() as u64
    }

    /// The pvbns of the superblock pair: the first blocks of group 0's data
    /// disks.
    pub fn reserved_pvbns(&self) -> impl Iterator<Item = Pvbn> + '_ {
        let group = &self.groups[0];
        (0..group.data_disks()).flat_map(move |n| {
            (0..SUPERBLOCK_COPIES).map(move |dbn| {
                self.pvbn(0, group.data_disk(n), Dbn(dbn))
                    .expect("a data disk")
            })
        })
    }

    /// Whether `pvbn` is part of the superblock pair and never allocatable.
    pub fn is_reserved(&self, pvbn: Pvbn) -> bool {
        matches!(self.locate(pvbn), Some(Location { group: 0, dbn, .. }) if dbn.0 < SUPERBLOCK_COPIES)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout() -> Layout {
        let dp = RaidGroupGeometry::new(RaidType::RaidDp, 5, 100).expect("valid");
        let r4 = RaidGroupGeometry::new(RaidType::Raid4, 3, 50).expect("valid");
        Layout::new(vec![dp, r4], 2).expect("valid layout")
    }

    #[test]
    fn pvbns_cover_each_group_in_turn_and_map_back() {
        let layout = layout();
        assert_eq!(layout.total_blocks(), 300 + 100);
        for pvbn in 0..layout.total_blocks() {
            let at = layout.locate(Pvbn(pvbn)).expect("inside");
            assert_eq!(layout.pvbn(at.group, at.disk, at.dbn), Some(Pvbn(pvbn)));
        }
        assert_eq!(layout.locate(Pvbn(400)), None);
        assert_eq!(layout.locate(Pvbn(300)).map(|l| l.group), Some(1));
    }

    #[test]
    fn disk_ids_number_members_then_spares() {
        let layout = layout();
        assert_eq!(layout.disk_count(), 5 + 3 + 2);
        assert_eq!(layout.disk_id(1, DiskIndex(2)), DiskId(7));
        assert_eq!(
            layout.slot(DiskId(7)),
            Some(Slot::Member {
                group: 1,
                disk: DiskIndex(2)
            })
        );
        assert_eq!(layout.slot(DiskId(9)), Some(Slot::Spare(1)));
        assert_eq!(layout.slot(DiskId(10)), None);
    }

    #[test]
    fn only_the_superblock_stripes_of_group_0_are_reserved() {
        let layout = layout();
        let reserved: Vec<u64> = (0..layout.total_blocks())
            .filter(|&p| layout.is_reserved(Pvbn(p)))
            .collect();
        assert_eq!(reserved, [0, 1, 100, 101, 200, 201]);
        let listed: Vec<u64> = layout.reserved_pvbns().map(|p| p.0).collect();
        assert_eq!(listed, reserved);
        assert_eq!(layout.superblock_disks().count(), 3);
    }

    #[test]
    fn records_round_trip_through_the_superblock_form() {
        let layout = layout();
        assert_eq!(Layout::from_records(&layout.records(), 2), Ok(layout));
        assert!(Layout::from_records(&[], 0).is_err());
    }

    #[test]
    fn ssd_groups_follow_in_pvbn_order_but_not_in_capacity() {
        let ssd = RaidGroupGeometry::new(RaidType::Raid4, 3, 40).expect("valid");
        let hybrid = layout().with_group(ssd, Tier::Ssd, 2).expect("valid");
        assert!(hybrid.is_hybrid() && !layout().is_hybrid());
        assert_eq!(hybrid.total_blocks(), 400 + 80);
        assert_eq!(hybrid.hdd_blocks(), 400);
        assert_eq!(hybrid.tier_blocks(Tier::Ssd), 80);
        assert_eq!(hybrid.tier_of(Pvbn(399)), Tier::Hdd);
        assert_eq!(hybrid.tier_of(Pvbn(400)), Tier::Ssd);
        assert_eq!(Layout::from_records(&hybrid.records(), 2), Ok(hybrid));
        assert_eq!(
            Layout::tiered(vec![ssd], vec![Tier::Ssd], 0),
            Err(LayoutError::SsdFirst)
        );
    }
}
