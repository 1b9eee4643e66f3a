//! `aggr add`: where an aggregate's new disks go, and its configuration with
//! them.
//!
//! The engine grows an aggregate only at the end of its block space: data
//! disks appended to its last RAID group, or new groups after it
//! (`wafer_core::filer::check_extension`). ONTAP's placement fits that: by
//! default the new disks fill the most recent group up to the aggregate's
//! raidsize, and the rest make new groups of raidsize, the last taking what
//! is left; `-g new` puts them all in new groups, and `-g rgN` all in group N,
//! which here must be the last. New groups take the last group's RAID type
//! and disk size. Every group keeps within its RAID type's size limits.
//!
//! SSD disks (`-T SSD`, a Flash Pool's cache) never join an HDD group: they
//! always make new RAID groups of their own, with their own RAID type and
//! raidsize (`-t`, `-r`; by default the aggregate's), and HDD disks added to
//! a hybrid aggregate whose last group is on SSD make new groups too, like
//! its last HDD group. The engine takes groups of either tier in any order
//! after group 0, which is always on HDD.
//!
//! Disks appended to the last group go before the spares in slot order, so
//! every spare's slot moves up by that many; the configuration derives slots
//! from its lists, so it needs no renumbering, but the driver's per-slot disk
//! threads must move with them (the engine does that as it applies the new
//! layout).

use wafer_raid::RaidType;

use crate::config::{AggrConfig, DiskConfig, GroupConfig, RaidTypeName, TierName};

/// Where the new disks go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Placement {
    /// Disks appended to the last RAID group.
    pub(crate) to_last: u16,
    /// The sizes of the new RAID groups, in order.
    pub(crate) new_groups: Vec<u16>,
    /// What the new groups are: RAID type, blocks per disk and tier (their
    /// `disks` empty).
    pub(crate) kind: GroupConfig,
}

/// What SSD disks added to an aggregate make (`aggr add -T SSD`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SsdGroups {
    /// The RAID type of the new groups.
    pub(crate) raid_type: RaidTypeName,
    /// Disks per group at most.
    pub(crate) raid_size: u16,
    /// Blocks of each new disk.
    pub(crate) blocks_per_disk: u64,
}

/// Where `disks` new SSD disks go in `aggr`: new RAID groups only, of
/// `ssd.raid_size` (the last taking the rest); or why they cannot.
pub(crate) fn place_ssd(
    aggr: &AggrConfig,
    ssd: SsdGroups,
    disks: u16,
) -> Result<Placement, String> {
    if disks == 0 {
        return Err("NDISKS must be at least 1".into());
    }
    let raid_type = ssd.raid_type.raid_type();
    let limits = raid_type.group_size_limits();
    if !limits.contains(&ssd.raid_size) {
        return Err(format!(
            "-r {}: a {} group holds {} to {} disks",
            ssd.raid_size,
            raid_type.ontap_name(),
            limits.start(),
            limits.end()
        ));
    }
    let placement = Placement {
        to_last: 0,
        new_groups: new_groups(raid_type, ssd.raid_size, disks)?,
        kind: GroupConfig {
            raid_type: ssd.raid_type,
            blocks_per_disk: ssd.blocks_per_disk,
            tier: TierName::Ssd,
            disks: Vec::new(),
        },
    };
    check_group_count(aggr, &placement, disks)?;
    Ok(placement)
}

fn check_group_count(aggr: &AggrConfig, placement: &Placement, disks: u16) -> Result<(), String> {
    let groups = aggr.groups.len() + placement.new_groups.len();
    if groups > wafer_core::format::MAX_GROUPS {
        return Err(format!(
            "{disks} disks make {} new RAID groups, and an aggregate holds at most {} \
             ({} now)",
            placement.new_groups.len(),
            wafer_core::format::MAX_GROUPS,
            aggr.groups.len()
        ));
    }
    Ok(())
}

impl Placement {
    /// Disks placed in all.
    pub(crate) fn disks(&self) -> u16 {
        self.to_last + self.new_groups.iter().sum::<u16>()
    }
}

/// Where `disks` new disks go in `aggr`, as `-g` (`new`, `rgN`, or none)
/// asks; or why they cannot be placed so.
pub(crate) fn place(
    aggr: &AggrConfig,
    group: Option<&str>,
    disks: u16,
) -> Result<Placement, String> {
    if disks == 0 {
        return Err("NDISKS must be at least 1".into());
    }
    let last = aggr.groups.len() - 1;
    let last_group = aggr.last_group();
    let on_ssd = last_group.tier == TierName::Ssd;
    let like = aggr.last_hdd_group();
    let raid_type = like.raid_type.raid_type();
    let limits = raid_type.group_size_limits();
    let raid_size = aggr.raid_size().min(*limits.end());
    let last_size = u16::try_from(last_group.disks.len()).unwrap_or(u16::MAX);
    // HDD disks never join an SSD group.
    let room = match on_ssd {
        true => 0,
        false => raid_size.saturating_sub(last_size),
    };
    let kind = GroupConfig {
        disks: Vec::new(),
        ..like.clone()
    };
    let placement = match group {
        None => {
            let to_last = disks.min(room);
            Placement {
                to_last,
                new_groups: new_groups(raid_type, raid_size, disks - to_last)?,
                kind,
            }
        }
        Some("new") => Placement {
            to_last: 0,
            new_groups: new_groups(raid_type, raid_size, disks)?,
            kind,
        },
        Some(name) => {
            let n = name
                .strip_prefix("rg")
                .and_then(|n| n.parse::<usize>().ok())
                .ok_or_else(|| format!("-g {name}: name a RAID group (rg0, rg1, ...) or new"))?;
            if n > last {
                return Err(format!(
                    "-g {name}: aggregate '{}' has no RAID group rg{n} (rg0 to rg{last})",
                    aggr.aggregate
                ));
            }
            if n != last {
                return Err(format!(
                    "-g {name}: only the last RAID group, rg{last}, takes disks (its data disks \
                     are appended at the end of the aggregate's blocks); use -g rg{last} or -g new"
                ));
            }
            if on_ssd {
                return Err(format!(
                    "-g {name}: rg{last} is an SSD RAID group (Flash Pool), and HDD disks do not \
                     join it; use -g new"
                ));
            }
            if disks > room {
                return Err(format!(
                    "-g {name}: rg{last} has {last_size} disks and room for {room} more \
                     (raidsize {raid_size}), not {disks}; use -g new for new RAID groups"
                ));
            }
            Placement {
                to_last: disks,
                new_groups: Vec::new(),
                kind,
            }
        }
    };
    check_group_count(aggr, &placement, disks)?;
    Ok(placement)
}

/// New groups of `raid_size` for `disks` disks, the last taking the rest.
fn new_groups(raid_type: RaidType, raid_size: u16, disks: u16) -> Result<Vec<u16>, String> {
    let mut sizes = vec![raid_size; usize::from(disks / raid_size)];
    let rest = disks % raid_size;
    if rest > 0 {
        sizes.push(rest);
    }
    let least = *raid_type.group_size_limits().start();
    match sizes.last() {
        Some(small) if *small < least => Err(format!(
            "{disks} disks for new RAID groups of at most {raid_size} leave a group of {small}, \
             and a {} group holds at least {least} (parity included)",
            raid_type.ontap_name()
        )),
        _ => Ok(sizes),
    }
}

/// `aggr` with `disks` (the new disks, in the order `placement` takes them)
/// appended to its last group and in its new groups.
pub(crate) fn grown(
    aggr: &AggrConfig,
    placement: &Placement,
    disks: Vec<DiskConfig>,
) -> AggrConfig {
    assert_eq!(
        usize::from(placement.disks()),
        disks.len(),
        "a disk for each place"
    );
    let mut grown = aggr.clone();
    let mut names = disks.iter().map(|d| d.name.clone());
    let to_last = usize::from(placement.to_last);
    grown
        .groups
        .last_mut()
        .expect("a group")
        .disks
        .extend(names.by_ref().take(to_last));
    for size in &placement.new_groups {
        grown.groups.push(GroupConfig {
            disks: names.by_ref().take(usize::from(*size)).collect(),
            ..placement.kind.clone()
        });
    }
    grown.disks.extend(disks);
    grown
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{CreateOptions, DataConfig, RaidTypeName};

    /// `aggr0` of a new directory: one RAID-DP group of 8, a spare.
    fn aggr0() -> AggrConfig {
        DataConfig::new(&CreateOptions::default(), 32 << 20, 0x5eed)
            .aggregates
            .remove(0)
    }

    fn blank(n: u16) -> Vec<DiskConfig> {
        (0..n)
            .map(|i| DiskConfig::blank(&format!("new{i}"), 196_608))
            .collect()
    }

    #[test]
    fn disks_fill_the_last_group_to_its_raidsize_then_make_new_groups() {
        let aggr = aggr0();
        assert_eq!(aggr.raid_size(), 16);
        let fill = |n, g| place(&aggr, g, n).map(|p| (p.to_last, p.new_groups));
        assert_eq!(fill(3, None), Ok((3, vec![])));
        assert_eq!(fill(8, None), Ok((8, vec![])));
        assert_eq!(fill(27, None), Ok((8, vec![16, 3])));
        assert!(fill(10, None).unwrap_err().contains("a group of 2"));
        assert_eq!(fill(4, Some("new")), Ok((0, vec![4])));
        assert_eq!(fill(2, Some("rg0")).map(|p| p.0), Ok(2));
    }

    #[test]
    fn wrong_placements_are_refused_with_a_reason() {
        let mut aggr = aggr0();
        assert!(place(&aggr, None, 0).unwrap_err().contains("at least 1"));
        assert!(
            place(&aggr, Some("rg1"), 1)
                .unwrap_err()
                .contains("no RAID group rg1")
        );
        assert!(
            place(&aggr, Some("rgx"), 1)
                .unwrap_err()
                .contains("name a RAID group")
        );
        assert!(
            place(&aggr, Some("rg0"), 9)
                .unwrap_err()
                .contains("room for 8 more")
        );
        assert!(
            place(&aggr, Some("new"), 2)
                .unwrap_err()
                .contains("at least 3")
        );
        aggr.groups.push(aggr.groups[0].clone());
        assert!(
            place(&aggr, Some("rg0"), 1)
                .unwrap_err()
                .contains("only the last")
        );
        assert!(
            place(&aggr, Some("new"), 16 * 64)
                .unwrap_err()
                .contains("at most 64")
        );
    }

    #[test]
    fn a_raid_4_aggregate_grows_in_raid_4_groups_of_its_raidsize() {
        let mut aggr = aggr0();
        aggr.groups[0].raid_type = RaidTypeName::Raid4;
        aggr.groups[0].disks.truncate(3);
        aggr.raid_size = Some(4);
        let placement = place(&aggr, None, 7).expect("placed");
        assert_eq!(placement.to_last, 1);
        assert_eq!(placement.new_groups, vec![4, 2]);
        let grown = grown(&aggr, &placement, blank(7));
        assert_eq!(grown.groups.len(), 3);
        assert_eq!(grown.groups[0].disks.len(), 4);
        assert!(
            grown
                .groups
                .iter()
                .all(|g| g.raid_type == RaidTypeName::Raid4)
        );
    }

    #[test]
    fn the_grown_configuration_extends_the_layout_and_moves_spares_up() {
        let aggr = aggr0();
        let placement = place(&aggr, None, 11).expect("placed");
        let grown = grown(&aggr, &placement, blank(11));
        grown
            .validate("nvlog", &mut Default::default())
            .expect("a valid aggregate");
        let (old, new) = (aggr.layout().expect("old"), grown.layout().expect("new"));
        wafer_core::filer::check_extension(&old, &new).expect("an extension");
        let spare = |a: &AggrConfig| {
            a.slots()
                .into_iter()
                .find(|s| s.disk.name == "disk8")
                .map(|s| s.id.0)
        };
        assert_eq!(spare(&aggr), Some(8));
        assert_eq!(spare(&grown), Some(8 + 11), "the spare's slot moves up");
        assert_eq!(grown.groups[0].disks[8], "new0");
        assert_eq!(grown.groups[1].disks, ["new8", "new9", "new10"]);
    }
}

#[cfg(test)]
mod ssd_tests {
    use super::*;
    use crate::config::{CreateOptions, DataConfig};

    fn aggr0() -> AggrConfig {
        DataConfig::new(&CreateOptions::default(), 32 << 20, 0x5eed)
            .aggregates
            .remove(0)
    }

    fn blank(prefix: &str, n: u16, blocks: u64) -> Vec<DiskConfig> {
        (0..n)
            .map(|i| DiskConfig::blank(&format!("{prefix}{i}"), blocks))
            .collect()
    }

    const SSD: SsdGroups = SsdGroups {
        raid_type: RaidTypeName::Raid4,
        raid_size: 4,
        blocks_per_disk: 8192,
    };

    #[test]
    fn ssd_disks_make_groups_of_their_own_and_hdd_disks_never_join_them() {
        let aggr = aggr0();
        let placement = place_ssd(&aggr, SSD, 6).expect("placed");
        assert_eq!(
            (placement.to_last, placement.new_groups.clone()),
            (0, vec![4, 2])
        );
        let hybrid = grown(&aggr, &placement, blank("ssd", 6, 8192));
        hybrid
            .validate("nvlog", &mut Default::default())
            .expect("a valid aggregate");
        assert!(hybrid.is_hybrid());
        let layout = hybrid.layout().expect("a layout");
        assert_eq!(
            layout.tiers(),
            [
                wafer_core::aggregate::Tier::Hdd,
                wafer_core::aggregate::Tier::Ssd,
                wafer_core::aggregate::Tier::Ssd
            ]
        );
        assert_eq!(layout.groups()[1].blocks_per_disk(), 8192);
        wafer_core::filer::check_extension(&aggr.layout().expect("old"), &layout)
            .expect("an extension");
        // The raidsize is still the HDD groups', and HDD disks added now
        // make a new HDD group like rg0, never joining rg2.
        assert_eq!(hybrid.raid_size(), 16);
        let hdd = place(&hybrid, None, 3).expect("placed");
        assert_eq!((hdd.to_last, hdd.new_groups.clone()), (0, vec![3]));
        assert_eq!(hdd.kind.tier, TierName::Hdd);
        assert_eq!(hdd.kind.raid_type, RaidTypeName::RaidDp);
        let again = grown(&hybrid, &hdd, blank("hdd", 3, 196_608));
        assert_eq!(again.groups[3].blocks_per_disk, 196_608);
        assert!(
            place(&hybrid, Some("rg2"), 1)
                .unwrap_err()
                .contains("SSD RAID group")
        );
        assert!(place_ssd(&aggr, SSD, 1).unwrap_err().contains("at least 2"));
        let wide = SsdGroups {
            raid_size: 40,
            ..SSD
        };
        assert!(place_ssd(&aggr, wide, 4).unwrap_err().contains("-r 40"));
    }
}
