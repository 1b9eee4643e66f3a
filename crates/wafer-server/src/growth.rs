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
//! Disks appended to the last group go before the spares in slot order, so
//! every spare's slot moves up by that many; the configuration derives slots
//! from its lists, so it needs no renumbering, but the driver's per-slot disk
//! threads must move with them (the engine does that as it applies the new
//! layout).

use wafer_raid::RaidType;

use crate::config::{AggrConfig, DiskConfig, GroupConfig};

/// Where the new disks go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Placement {
    /// Disks appended to the last RAID group.
    pub(crate) to_last: u16,
    /// The sizes of the new RAID groups, in order.
    pub(crate) new_groups: Vec<u16>,
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
    let raid_type = last_group.raid_type.raid_type();
    let limits = raid_type.group_size_limits();
    let raid_size = aggr.raid_size().min(*limits.end());
    let last_size = u16::try_from(last_group.disks.len()).unwrap_or(u16::MAX);
    let room = raid_size.saturating_sub(last_size);
    let placement = match group {
        None => {
            let to_last = disks.min(room);
            Placement {
                to_last,
                new_groups: new_groups(raid_type, raid_size, disks - to_last)?,
            }
        }
        Some("new") => Placement {
            to_last: 0,
            new_groups: new_groups(raid_type, raid_size, disks)?,
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
            if disks > room {
                return Err(format!(
                    "-g {name}: rg{last} has {last_size} disks and room for {room} more \
                     (raidsize {raid_size}), not {disks}; use -g new for new RAID groups"
                ));
            }
            Placement {
                to_last: disks,
                new_groups: Vec::new(),
            }
        }
    };
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
    let last = grown.last_group().clone();
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
            raid_type: last.raid_type,
            blocks_per_disk: last.blocks_per_disk,
            disks: names.by_ref().take(usize::from(*size)).collect(),
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
        let fill = |n, g| place(&aggr, g, n);
        assert_eq!(
            fill(3, None),
            Ok(Placement {
                to_last: 3,
                new_groups: vec![]
            })
        );
        assert_eq!(
            fill(8, None),
            Ok(Placement {
                to_last: 8,
                new_groups: vec![]
            })
        );
        assert_eq!(
            fill(27, None),
            Ok(Placement {
                to_last: 8,
                new_groups: vec![16, 3]
            })
        );
        assert!(fill(10, None).unwrap_err().contains("a group of 2"));
        assert_eq!(
            fill(4, Some("new")),
            Ok(Placement {
                to_last: 0,
                new_groups: vec![4]
            })
        );
        assert_eq!(fill(2, Some("rg0")).map(|p| p.to_last), Ok(2));
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
