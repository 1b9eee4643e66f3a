//! Aggregates found on their disks.
//!
//! `wafer.toml` lists the node's aggregates, but the disks describe them
//! too: each member's label gives its aggregate, RAID group and position
//! with the group's RAID type, size and blocks per disk, and each spare's
//! gives its aggregate (`crate::labels`). So an aggregate whose disks carry
//! its labels and that the configuration does not list (an older copy of
//! the file put back, an entry removed by hand) is assembled from the labels,
//! added to the configuration and mounted with the others: the mount finds
//! every aggregate on the disks it is given.
//!
//! A member's label also gives its group's tier (HDD, or SSD for a Flash
//! Pool's cache groups), which the superblock records too: both must agree.
//!
//! Only a whole, committed aggregate is taken: every position of every
//! group on exactly one file, and a valid superblock copy on its first
//! group's data disks that names it with the same groups and spares. A new
//! aggregate's members are labelled by the save that names it, after its
//! format, so one a crash cut short before that save (never acknowledged) has
//! no member labels and is never adopted. An aggregate that cannot be taken
//! is logged with why and its files left as they are.

use std::collections::BTreeMap;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

use wafer_core::aggregate::SUPERBLOCK_COPIES;
use wafer_core::format::Superblock;
use wafer_raid::RaidType;

use crate::config::{
    AggrConfig, DataConfig, DiskConfig, DiskState, GroupConfig, RaidTypeName, TierName,
};
use crate::labels::{AggrName, DiskLabel, Role, SECTOR_BYTES};

/// One aggregate's disks as their labels describe them: members by
/// (group, position), and spares.
#[derive(Default)]
struct Found {
    name: String,
    members: BTreeMap<(u16, u16), Vec<(String, DiskLabel)>>,
    spares: Vec<(String, DiskLabel)>,
}

/// Adds to `config` every aggregate whose disks in `dir` describe it whole
/// and that `config` does not list, as long as `fits` accepts the result
/// (the NVLog has room for its CP records). Returns the names adopted.
pub(crate) fn adopt(
    dir: &Path,
    config: &mut DataConfig,
    fits: impl Fn(&DataConfig) -> bool,
) -> io::Result<Vec<String>> {
    let mut adopted = Vec::new();
    for (id, found) in unlisted(dir, config)? {
        let aggregate = match assemble(dir, id, &found) {
            Ok(aggregate) => aggregate,
            Err(why) => {
                tracing::warn!(
                    "disks of aggregate {} (id {id}) that wafer.toml does not list were found; \
                     not adopted: {why}; their files are left as they are",
                    found.name
                );
                continue;
            }
        };
        let mut trial = config.clone();
        trial.aggregates.push(aggregate);
        trial.aggregates.sort_by_key(|a| a.id);
        let refusal = match trial.validate() {
            Ok(()) if fits(&trial) => None,
            Ok(()) => Some("the NVLog has no room for its CP records".to_string()),
            Err(why) => Some(why),
        };
        match refusal {
            None => {
                adopted.push(found.name.clone());
                *config = trial;
            }
            Some(why) => tracing::warn!(
                "aggregate {} found on its disks is not adopted: {why}",
                found.name
            ),
        }
    }
    Ok(adopted)
}

/// The labelled disks of aggregates `config` does not list, by aggregate
/// id. A label naming a listed aggregate's id or name, or a listed disk or
/// file, is not another aggregate's.
fn unlisted(dir: &Path, config: &DataConfig) -> io::Result<BTreeMap<u32, Found>> {
    let listed = |aggregate: &AggrName| {
        config
            .aggregates
            .iter()
            .any(|a| a.id == aggregate.id || a.aggregate == aggregate.name)
    };
    let mut found: BTreeMap<u32, Found> = BTreeMap::new();
    for (file, label) in crate::labels::labelled_files(dir, config.directory_id())? {
        if config.disk_taken(&label.name, &file) {
            continue;
        }
        let (aggregate, member) = match &label.role {
            Role::Pool => continue,
            Role::Spare(aggregate) => (aggregate.clone(), None),
            Role::Member {
                aggregate,
                group,
                position,
                ..
            } => (aggregate.clone(), Some((*group, *position))),
        };
        if listed(&aggregate) {
            continue;
        }
        let entry = found.entry(aggregate.id).or_default();
        if entry.name.is_empty() {
            entry.name = aggregate.name.clone();
        }
        match member {
            Some(slot) => entry.members.entry(slot).or_default().push((file, label)),
            None => entry.spares.push((file, label)),
        }
    }
    Ok(found)
}

/// The configuration of aggregate `id` from its disks, or why not.
fn assemble(dir: &Path, id: u32, found: &Found) -> Result<AggrConfig, String> {
    let all = found.members.values().flatten().chain(&found.spares);
    if let Some((file, _)) = all
        .clone()
        .find(|(_, l)| aggregate_of(l).name != found.name)
    {
        return Err(format!("{file} names it otherwise"));
    }
    let groups = groups_of(found)?;
    let superblock = newest_superblock(dir, &groups, found)?;
    check_superblock(&superblock, id, found, &groups)?;
    let disks = all
        .map(|(file, label)| DiskConfig {
            name: label.name.clone(),
            file: file.clone(),
            blocks: label.blocks,
            state: DiskState::InService,
            failed_reason: None,
        })
        .collect();
    Ok(AggrConfig {
        aggregate: found.name.clone(),
        id,
        offline: superblock.offline,
        raid_size: None,
        spares: found.spares.iter().map(|(_, l)| l.name.clone()).collect(),
        broken: Vec::new(),
        groups,
        disks,
    })
}

fn aggregate_of(label: &DiskLabel) -> &AggrName {
    match &label.role {
        Role::Spare(aggregate) | Role::Member { aggregate, .. } => aggregate,
        Role::Pool => unreachable!("pool spares are not gathered"),
    }
}

/// The RAID groups: every position of every group, from 0 on, on exactly
/// one file, and the group's geometry the same on each.
fn groups_of(found: &Found) -> Result<Vec<GroupConfig>, String> {
    let count = found.members.keys().map(|(group, _)| group + 1).max();
    let mut groups = Vec::new();
    for group in 0..count.ok_or("no member disk")? {
        let first = found
            .members
            .get(&(group, 0))
            .and_then(|files| files.first())
            .ok_or(format!("rg{group} position 0 is on no file"))?;
        let Role::Member {
            group_size,
            raid_type,
            blocks_per_disk,
            tier,
            ..
        } = first.1.role
        else {
            unreachable!("gathered as a member");
        };
        let mut disks = Vec::new();
        for position in 0..group_size {
            match found.members.get(&(group, position)).map(Vec::as_slice) {
                Some([(_, label)])
                    if same_group(label, group_size, raid_type, blocks_per_disk, tier) =>
                {
                    disks.push(label.name.clone());
                }
                Some([_]) => return Err(format!("rg{group}'s disks disagree on its geometry")),
                Some(files) if files.len() > 1 => {
                    return Err(format!("rg{group} position {position} is on several files"));
                }
                _ => return Err(format!("rg{group} position {position} is on no file")),
            }
        }
        let raid_type_name = match raid_type {
            RaidType::RaidDp => RaidTypeName::RaidDp,
            RaidType::Raid4 => RaidTypeName::Raid4,
        };
        groups.push(GroupConfig {
            raid_type: raid_type_name,
            blocks_per_disk,
            tier: TierName::of(tier),
            disks,
        });
    }
    if found.members.keys().any(|(group, position)| {
        groups
            .get(usize::from(*group))
            .is_none_or(|g| usize::from(*position) >= g.disks.len())
    }) {
        return Err("a member lies outside its group".into());
    }
    Ok(groups)
}

fn same_group(
    label: &DiskLabel,
    size: u16,
    raid: RaidType,
    blocks: u64,
    on: wafer_core::aggregate::Tier,
) -> bool {
    matches!(label.role, Role::Member { group_size, raid_type, blocks_per_disk, tier, .. }
        if group_size == size && raid_type == raid && blocks_per_disk == blocks && tier == on)
}

/// The valid superblock copy with the highest CP on the first group's data
/// disks.
fn newest_superblock(
    dir: &Path,
    groups: &[GroupConfig],
    found: &Found,
) -> Result<Superblock, String> {
    let group = &groups[0];
    let parity = usize::from(group.raid_type.raid_type().parity_disks());
    let mut newest: Option<Superblock> = None;
    for position in parity..group.disks.len() {
        let position = u16::try_from(position).expect("few disks");
        let (file, _) = &found.members[&(0, position)][0];
        let Ok(file) = File::open(dir.join(file)) else {
            continue;
        };
        for copy in 0..SUPERBLOCK_COPIES {
            let mut block = [0u8; wafer_core::BLOCK_SIZE];
            if file.read_exact_at(&mut block, copy * SECTOR_BYTES).is_err() {
                continue;
            }
            if let Ok(superblock) = Superblock::decode(&block)
                && newest.as_ref().is_none_or(|n| superblock.cp > n.cp)
            {
                newest = Some(superblock);
            }
        }
    }
    newest.ok_or_else(|| "no valid superblock on its first RAID group".into())
}

fn check_superblock(
    superblock: &Superblock,
    id: u32,
    found: &Found,
    groups: &[GroupConfig],
) -> Result<(), String> {
    if superblock.aggregate.0 != id || superblock.name != found.name {
        return Err(format!(
            "its superblock names aggregate {} (id {})",
            superblock.name, superblock.aggregate.0
        ));
    }
    let same_groups = superblock.groups.len() == groups.len()
        && superblock.groups.iter().zip(groups).all(|(record, group)| {
            record.raid_dp == (group.raid_type == RaidTypeName::RaidDp)
                && record.ssd == (group.tier == TierName::Ssd)
                && usize::from(record.group_size) == group.disks.len()
                && record.blocks_per_disk == group.blocks_per_disk
        });
    if !same_groups {
        return Err("its superblock records other RAID groups than its disks' labels".into());
    }
    if superblock.spares as usize != found.spares.len() {
        return Err(format!(
            "its superblock records {} spares and {} disks are labelled its spares",
            superblock.spares,
            found.spares.len()
        ));
    }
    Ok(())
}
