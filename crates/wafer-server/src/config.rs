//! The data directory's configuration file, `wafer.toml`.
//!
//! The superblocks describe each aggregate's geometry, but the driver has to
//! open the disks before it can read a superblock, and only the driver knows
//! which file backs which disk and which disks it has given up on. So this
//! file holds, for the node:
//!
//! * the directory's id, which every disk's label names (`crate::labels`:
//!   the labels, not the file names, say which file is which disk);
//! * the NVLog file (in the directory, or an absolute path elsewhere: a
//!   separate NVLog device, `--nvlog`) and the size of each of its halves;
//! * the LUN IDs handed out: the next one, and each LUN's (`crate::lun_ids`);
//! * the pool of spares no aggregate owns (a destroyed aggregate's disks,
//!   blank), which `aggr create` takes first;
//!
//! and for each aggregate (format 3; a format 1 file, of one aggregate, is
//! read as aggregate 0, and one of format 1 or 2 gets a directory id and its
//! disks labelled):
//!
//! * its name, its node id (the engine's `AggrId`, also in its superblock),
//!   whether the administrator took it offline;
//! * its RAID groups: type, blocks per disk, and the disks by position
//!   (dparity, parity, data... for RAID-DP; parity, data... for RAID-4);
//! * its spares, by name (spares are an aggregate's: the engine's layout
//!   numbers them, and a rebuild takes one of its own);
//! * its broken disks, by name: failed disks a spare has replaced in their
//!   group, kept with their files until the operator removes them
//!   (`disk remove`), so a failed disk's file is never left behind unsaid;
//! * every disk of it: its name, its backing file (relative to the
//!   directory), its size in blocks, and its state, in service or failed
//!   (with why).
//!
//! Disk slots (the engine's `DiskId`s, per aggregate) are derived, not
//! stored: group members in group and position order, then spares. A slot is
//! re-pointed to another disk by writing that disk's name in the group's
//! list, which is how a rebuild onto a spare is recorded. Disk names and
//! files are unique across the node.
//!
//! The file is replaced atomically (written beside, synced, renamed, the
//! directory synced), so a crash leaves the old or the new version. It is
//! read and validated completely before anything in the directory is touched,
//! and the mount checks each aggregate's geometry against its superblock.

use std::collections::BTreeSet;
use std::fs;
use std::io::{self, Write};
use std::path::Path;

use serde::{Deserialize, Serialize};
use wafer_core::aggregate::{Layout, Slot, Tier};
use wafer_core::units::DiskId;
use wafer_raid::{RaidGroupGeometry, RaidType};

use crate::error::ServeError;
use crate::labels::{AggrName, DiskPlace, Role};
use crate::lun_ids::{LunNow, LunRecord};
use crate::masking::San;

pub use crate::dir_names::CONFIG_FILE;
pub use crate::labels::SECTOR_BYTES;
/// The version of the data directory's layout this server writes and reads.
pub const FORMAT_VERSION: u32 = 3;
/// The format a data directory of one aggregate had; migrated when read.
const FORMAT_VERSION_V1: u32 = 1;
/// The format before disk labels (`crate::labels`); migrated when read.
const FORMAT_VERSION_V2: u32 = 2;

/// The NVLog half sizes accepted: at least room for a few records, at most
/// 1 GiB (each half is read into memory whole at mount).
const NVLOG_HALF_BYTES: std::ops::RangeInclusive<u64> = (1 << 20)..=(1 << 30);

/// The whole configuration file (format 3): the directory's id, the node's
/// NVLog, LUN IDs and unowned spares, and its aggregates.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct DataConfig {
    /// The data directory layout version, [`FORMAT_VERSION`].
    pub(crate) format_version: u32,
    /// The data directory's id, 32 hex digits, made at random with the
    /// directory: what every disk's label names (`crate::labels`). Absent
    /// before format 3, and made when such a directory is migrated.
    #[serde(default)]
    pub(crate) directory_id: String,
    /// The NVLog file, relative to the directory, or an absolute path for
    /// an NVLog on another device (`--nvlog`).
    pub(crate) nvlog_file: String,
    /// Bytes of each NVLog half (the engine's `Options::nvlog_half_bytes`).
    pub(crate) nvlog_half_bytes: u64,
    /// The LUN ID the next new LUN gets; none is ever handed out twice.
    #[serde(default)]
    pub(crate) next_lun_id: u32,
    /// Every LUN's ID.
    #[serde(default)]
    pub(crate) luns: Vec<LunRecord>,
    /// Blank disks no aggregate owns (a destroyed aggregate's): the first
    /// ones `aggr create` takes.
    #[serde(default)]
    pub(crate) spare_pool: Vec<DiskConfig>,
    /// The aggregates, in id order.
    pub(crate) aggregates: Vec<AggrConfig>,
    /// igroups and LUN maps (`crate::masking`); absent in a directory from
    /// before masking, which gets igroup `default` at its next start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) san: Option<San>,
}

/// One aggregate: its RAID groups, spares and broken disks, and its disks.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct AggrConfig {
    /// The aggregate's name.
    pub(crate) aggregate: String,
    /// Its node id (the engine's `AggrId`, in its superblock).
    pub(crate) id: u32,
    /// Taken offline by the administrator (`aggr offline`): a mirror of
    /// its superblock, which is the record; aggregates whose superblocks
    /// predate the record are taken offline again at start by this flag.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) offline: bool,
    /// The raidsize `aggr create -r` chose: the most disks `aggr add` puts
    /// in a RAID group. Absent (an older file, or `aggr0` of a new
    /// directory): ONTAP's default for its RAID type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) raid_size: Option<u16>,
    /// Spare disks, by name, in slot order.
    pub(crate) spares: Vec<String>,
    /// Failed disks a spare has replaced: no slot, their files kept until
    /// `disk remove`.
    #[serde(default)]
    pub(crate) broken: Vec<String>,
    /// RAID groups, in aggregate order.
    pub(crate) groups: Vec<GroupConfig>,
    /// Every disk the aggregate uses.
    pub(crate) disks: Vec<DiskConfig>,
}

/// The configuration file of format 1: one aggregate (id 0), read to be
/// migrated.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DataConfigV1 {
    format_version: u32,
    aggregate: String,
    nvlog_file: String,
    nvlog_half_bytes: u64,
    spares: Vec<String>,
    #[serde(default)]
    broken: Vec<String>,
    #[serde(default)]
    next_lun_id: u32,
    groups: Vec<GroupConfig>,
    disks: Vec<DiskConfig>,
    #[serde(default)]
    luns: Vec<LunRecord>,
}

impl DataConfigV1 {
    fn migrate(self) -> DataConfig {
        DataConfig {
            format_version: FORMAT_VERSION_V2,
            directory_id: String::new(),
            nvlog_file: self.nvlog_file,
            nvlog_half_bytes: self.nvlog_half_bytes,
            next_lun_id: self.next_lun_id,
            luns: self.luns,
            spare_pool: Vec::new(),
            aggregates: vec![AggrConfig {
                aggregate: self.aggregate,
                id: 0,
                offline: false,
                raid_size: None,
                spares: self.spares,
                broken: self.broken,
                groups: self.groups,
                disks: self.disks,
            }],
            san: None,
        }
    }
}

/// One RAID group.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct GroupConfig {
    /// `raid_dp` or `raid4`.
    pub(crate) raid_type: RaidTypeName,
    /// Blocks of each member disk the group uses.
    pub(crate) blocks_per_disk: u64,
    /// `hdd` (the aggregate's capacity) or `ssd` (a Flash Pool cache
    /// group, `aggr add -T SSD`). Absent (an older file, or an HDD group):
    /// `hdd`.
    #[serde(default, skip_serializing_if = "TierName::is_hdd")]
    pub(crate) tier: TierName,
    /// Member disks by position.
    pub(crate) disks: Vec<String>,
}

/// A RAID group's tier as the file spells it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum TierName {
    /// Hard disks.
    #[default]
    Hdd,
    /// SSDs: a Flash Pool's cache.
    Ssd,
}

impl TierName {
    /// The engine's tier.
    pub(crate) fn tier(self) -> Tier {
        match self {
            TierName::Hdd => Tier::Hdd,
            TierName::Ssd => Tier::Ssd,
        }
    }

    /// The name of the engine's `tier`.
    pub(crate) fn of(tier: Tier) -> TierName {
        match tier {
            Tier::Hdd => TierName::Hdd,
            Tier::Ssd => TierName::Ssd,
        }
    }

    fn is_hdd(&self) -> bool {
        *self == TierName::Hdd
    }
}

/// A RAID type as the file spells it (ONTAP's names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum RaidTypeName {
    /// RAID-DP: row and diagonal parity.
    RaidDp,
    /// RAID-4: row parity.
    Raid4,
}

impl RaidTypeName {
    /// The RAID layer's type.
    pub(crate) fn raid_type(self) -> RaidType {
        match self {
            RaidTypeName::RaidDp => RaidType::RaidDp,
            RaidTypeName::Raid4 => RaidType::Raid4,
        }
    }
}

/// One disk and its backing file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct DiskConfig {
    /// Its name (what `disk fail` and `aggr status` use).
    pub(crate) name: String,
    /// Its backing file, relative to the directory.
    pub(crate) file: String,
    /// Its size in blocks; the file holds `blocks * 4160` bytes, then its
    /// two label sectors (`crate::labels`).
    pub(crate) blocks: u64,
    /// In service, or failed.
    pub(crate) state: DiskState,
    /// Why it failed, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) failed_reason: Option<String>,
}

/// Whether the driver uses a disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DiskState {
    /// Its I/O goes to its backing file.
    InService,
    /// Failed for good: every I/O to it fails, and its blocks are rebuilt from
    /// parity. A failed disk never rejoins (its content is stale).
    Failed,
}

/// A disk slot as the engine numbers it, with its disk.
#[derive(Clone, Debug)]
pub(crate) struct SlotDisk<'a> {
    /// The engine's id for the slot.
    pub(crate) id: DiskId,
    /// What the slot is in the layout.
    pub(crate) slot: Slot,
    /// The disk in it.
    pub(crate) disk: &'a DiskConfig,
}

/// How a new data directory is shaped (`wafer serve` on an empty directory).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CreateOptions {
    /// Data disks in the one RAID-DP group (two parity disks and a spare are added).
    pub data_disks: u16,
    /// Bytes of each disk (a sparse file of `bytes / 4096 * 4160` bytes).
    pub disk_bytes: u64,
    /// Bytes of the volume `vol0`.
    pub volume_bytes: u64,
    /// Bytes of the LUN `/vol/vol0/lun0`.
    pub lun_bytes: u64,
}

impl Default for CreateOptions {
    /// Six 768 MiB data disks (4.5 GiB of data blocks) hold a 3 GiB `vol0`
    /// with its metadata and CP room (about 3.2 GiB); a 2 GiB LUN in it leaves
    /// 1 GiB for snapshots to hold overwritten blocks, and 1.3 GiB of the
    /// aggregate stays free for `vol create`.
    fn default() -> CreateOptions {
        CreateOptions {
            data_disks: 6,
            disk_bytes: 768 << 20,
            volume_bytes: 3 << 30,
            lun_bytes: 2 << 30,
        }
    }
}

impl DataConfig {
    /// The configuration of a new data directory: aggregate `aggr0` (id 0),
    /// one RAID-DP group of `data_disks` plus two parity disks, and one
    /// spare; `directory_id` is the new directory's id.
    pub(crate) fn new(
        options: &CreateOptions,
        nvlog_half_bytes: u64,
        directory_id: u128,
    ) -> DataConfig {
        let blocks = options.disk_bytes / wafer_core::BLOCK_SIZE as u64;
        let members = usize::from(options.data_disks) + 2;
        let disks: Vec<DiskConfig> = (0..=members)
            .map(|n| DiskConfig::blank(&format!("disk{n}"), blocks))
            .collect();
        DataConfig {
            format_version: FORMAT_VERSION,
            directory_id: format!("{directory_id:032x}"),
            nvlog_file: "nvlog".into(),
            nvlog_half_bytes,
            next_lun_id: 0,
            luns: Vec::new(),
            spare_pool: Vec::new(),
            aggregates: vec![AggrConfig {
                aggregate: "aggr0".into(),
                id: 0,
                offline: false,
                raid_size: None,
                spares: vec![disks[members].name.clone()],
                broken: Vec::new(),
                groups: vec![GroupConfig {
                    raid_type: RaidTypeName::RaidDp,
                    blocks_per_disk: blocks,
                    tier: TierName::Hdd,
                    disks: disks[..members].iter().map(|d| d.name.clone()).collect(),
                }],
                disks,
            }],
            san: Some(San::new_directory()),
        }
    }

    /// Reads and validates `dir`'s configuration, changing nothing. A
    /// configuration of format 1 (one aggregate) is read as aggregate 0, and
    /// one of format 1 or 2 (before disk labels) gets a new directory id;
    /// `migrated` says so, for the caller to save it (which labels the
    /// disks).
    pub(crate) fn load_migrating(dir: &Path) -> Result<(DataConfig, bool), ServeError> {
        let path = dir.join(CONFIG_FILE);
        let refuse = |reason: String| ServeError::Config {
            path: path.clone(),
            reason,
        };
        let text = fs::read_to_string(&path).map_err(|e| refuse(format!("cannot read: {e}")))?;
        let value: toml::Value =
            toml::from_str(&text).map_err(|e| refuse(format!("malformed: {e}")))?;
        let version = value
            .get("format_version")
            .and_then(toml::Value::as_integer);
        let (config, migrated) = match version {
            Some(v) if v == i64::from(FORMAT_VERSION_V1) => {
                let old: DataConfigV1 =
                    toml::from_str(&text).map_err(|e| refuse(format!("malformed: {e}")))?;
                debug_assert_eq!(old.format_version, FORMAT_VERSION_V1);
                (old.migrate(), true)
            }
            _ => {
                let config: DataConfig =
                    toml::from_str(&text).map_err(|e| refuse(format!("malformed: {e}")))?;
                let before_labels = config.format_version == FORMAT_VERSION_V2;
                (config, before_labels)
            }
        };
        let config = match migrated {
            true => config
                .labelled(dir)
                .map_err(|e| refuse(format!("cannot give it a directory id: {e}")))?,
            false => config,
        };
        let config = with_masking(config);
        config.validate().map_err(refuse)?;
        Ok((config, migrated))
    }

    /// Reads and validates `dir`'s configuration, changing nothing.
    #[cfg(test)]
    pub(crate) fn load(dir: &Path) -> Result<DataConfig, ServeError> {
        Self::load_migrating(dir).map(|(config, _)| config)
    }

    /// Writes the configuration atomically into `dir`: a temporary file,
    /// synced, renamed over the old one, and the directory synced. On any
    /// failure the old configuration stays as it was and no temporary file
    /// is left behind.
    pub(crate) fn save(&self, dir: &Path) -> io::Result<()> {
        crate::labels::follow(dir, self.directory_id(), self.disk_places())?;
        let text = toml::to_string(self).map_err(io::Error::other)?;
        let header = "# wafer data directory: written by `wafer serve`. Edit only while no \
                      server runs;\n# a failed disk never rejoins its RAID group.\n\n";
        let temporary = dir.join(format!("{CONFIG_FILE}.new"));
        let written = write_synced(&temporary, &[header.as_bytes(), text.as_bytes()])
            .and_then(|()| fs::rename(&temporary, dir.join(CONFIG_FILE)));
        if let Err(error) = written {
            // Best effort: the error that matters is the one returned.
            let _ = fs::remove_file(&temporary);
            return Err(error);
        }
        fs::File::open(dir)?.sync_all()
    }

    /// Checks everything a server relies on before it opens a file.
    pub(crate) fn validate(&self) -> Result<(), String> {
        if self.format_version != FORMAT_VERSION {
            return Err(format!(
                "format_version {} is not {FORMAT_VERSION} (nor {FORMAT_VERSION_V1} or \
                 {FORMAT_VERSION_V2}, which are migrated), the only ones this server reads",
                self.format_version
            ));
        }
        if self.directory_id.len() != 32 || u128::from_str_radix(&self.directory_id, 16).is_err() {
            return Err(format!(
                "directory_id {:?} is not 32 hex digits",
                self.directory_id
            ));
        }
        if let Some(path) = self.external_nvlog() {
            check_external_nvlog(path)?;
        } else {
            check_file_name("nvlog_file", &self.nvlog_file)?;
        }
        if !NVLOG_HALF_BYTES.contains(&self.nvlog_half_bytes)
            || !self.nvlog_half_bytes.is_multiple_of(4096)
        {
            return Err(format!(
                "nvlog_half_bytes {} is not a multiple of 4096 between 1 MiB and 1 GiB",
                self.nvlog_half_bytes
            ));
        }
        if self.aggregates.len() > wafer_core::node::MAX_AGGREGATES {
            return Err(format!(
                "{} aggregates: a node serves at most {}",
                self.aggregates.len(),
                wafer_core::node::MAX_AGGREGATES
            ));
        }
        let mut files = BTreeSet::new();
        let mut names = BTreeSet::new();
        let mut ids = BTreeSet::new();
        let mut disk_names = BTreeSet::new();
        for aggr in &self.aggregates {
            let refuse = |e: String| format!("aggregate {}: {e}", aggr.aggregate);
            if aggr.aggregate.is_empty() || !names.insert(aggr.aggregate.as_str()) {
                return Err(format!(
                    "aggregate name {:?} is empty or repeated",
                    aggr.aggregate
                ));
            }
            if aggr.id as usize >= wafer_core::node::MAX_AGGREGATES || !ids.insert(aggr.id) {
                return Err(refuse(format!(
                    "id {} is repeated or not below {}",
                    aggr.id,
                    wafer_core::node::MAX_AGGREGATES
                )));
            }
            aggr.validate(&self.nvlog_file, &mut files)
                .map_err(refuse)?;
            for disk in &aggr.disks {
                if !disk_names.insert(disk.name.as_str()) {
                    return Err(format!("disk name {} is used by two aggregates", disk.name));
                }
            }
        }
        for disk in &self.spare_pool {
            check_file_name(&format!("disk {}'s file", disk.name), &disk.file)?;
            if !disk_names.insert(disk.name.as_str())
                || disk.file == self.nvlog_file
                || !files.insert(disk.file.clone())
            {
                return Err(format!(
                    "pool spare {} repeats a disk's name or file",
                    disk.name
                ));
            }
        }
        crate::lun_ids::validate(self.next_lun_id, &self.luns)?;
        self.san.as_ref().map_or(Ok(()), San::validate)
    }

    /// The configuration of format 3 that one of an older format in `dir`
    /// becomes: a directory id, the one a migration cut short by a crash
    /// already labelled disks with, or a new one (its disks are labelled when
    /// it is saved).
    fn labelled(self, dir: &Path) -> io::Result<DataConfig> {
        let id = match crate::labels::id_in_use(dir, &self.disk_places())? {
            Some(id) => id,
            None => crate::labels::new_directory_id()?,
        };
        Ok(DataConfig {
            format_version: FORMAT_VERSION,
            directory_id: format!("{id:032x}"),
            ..self
        })
    }

    /// The data directory's id, as every disk's label names it.
    pub(crate) fn directory_id(&self) -> u128 {
        u128::from_str_radix(&self.directory_id, 16).expect("validated")
    }

    /// Every disk in service: its file, and the role its label gives.
    pub(crate) fn disk_places(&self) -> Vec<DiskPlace> {
        let pool = (self.spare_pool.iter()).filter_map(|disk| disk.place(Role::Pool));
        (self.aggregates.iter())
            .flat_map(AggrConfig::disk_places)
            .chain(pool)
            .collect()
    }

    /// Points each disk in service at the file that carries its label
    /// (`crate::labels::locate`), logging each move. Returns the disks whose
    /// label is on no file (or on several), with why.
    pub(crate) fn find_disk_files(&mut self, dir: &Path) -> io::Result<Vec<(String, String)>> {
        let located = crate::labels::locate(dir, self.directory_id(), &self.disk_places())?;
        for (name, file) in located.moved {
            let all = self.aggregates.iter_mut().flat_map(|a| a.disks.iter_mut());
            let disk = (all.chain(self.spare_pool.iter_mut()))
                .find(|d| d.name == name)
                .expect("a configured disk");
            tracing::warn!(
                "disk {name} is in {file}, not {} as wafer.toml said: the configuration now \
                 names {file}",
                disk.file
            );
            disk.file = file;
        }
        Ok(located.unlabelled)
    }

    /// The igroups and LUN maps.
    pub(crate) fn san(&self) -> &San {
        self.san.as_ref().expect("given at load or creation")
    }

    /// The NVLog's path when it lies outside the data directory.
    pub(crate) fn external_nvlog(&self) -> Option<&Path> {
        Some(Path::new(&self.nvlog_file)).filter(|path| path.is_absolute())
    }

    /// The stripes of each aggregate: what the NVLog's halves must have
    /// room for in their CP records.
    pub(crate) fn stripes(&self) -> Vec<u64> {
        self.aggregates.iter().map(AggrConfig::stripes).collect()
    }

    /// The aggregate with id `id`.
    pub(crate) fn aggr(&self, id: u32) -> Option<&AggrConfig> {
        self.aggregates.iter().find(|a| a.id == id)
    }

    /// The aggregate with id `id`, to change.
    pub(crate) fn aggr_mut(&mut self, id: u32) -> Option<&mut AggrConfig> {
        self.aggregates.iter_mut().find(|a| a.id == id)
    }

    /// The aggregate called `name`.
    pub(crate) fn aggr_named(&self, name: &str) -> Option<&AggrConfig> {
        self.aggregates.iter().find(|a| a.aggregate == name)
    }

    /// The aggregate owning disk `name`, if any.
    pub(crate) fn aggr_of_disk(&self, name: &str) -> Option<&AggrConfig> {
        self.aggregates.iter().find(|a| a.disk(name).is_some())
    }

    /// Whether any aggregate or the pool names disk `name` or file `file`.
    pub(crate) fn disk_taken(&self, name: &str, file: &str) -> bool {
        self.aggregates
            .iter()
            .flat_map(|a| a.disks.iter())
            .chain(&self.spare_pool)
            .any(|d| d.name == name || d.file == file)
    }

    /// Records the LUN IDs of the LUNs `present` (`lun_ids::reconcile`);
    /// returns whether anything changed.
    pub(crate) fn record_luns(&mut self, present: &[LunNow]) -> bool {
        crate::lun_ids::reconcile(&mut self.next_lun_id, &mut self.luns, present)
    }

    /// The ID recorded for the LUN at `path` with `inode`.
    pub(crate) fn lun_id(&self, path: &str, inode: u32) -> Option<u32> {
        crate::lun_ids::id_of(&self.luns, path, inode)
    }
}

impl DiskConfig {
    /// Where the disk is and the role its label gives, if it is in service.
    fn place(&self, role: Role) -> Option<DiskPlace> {
        (self.state == DiskState::InService).then(|| DiskPlace {
            name: self.name.clone(),
            file: self.file.clone(),
            blocks: self.blocks,
            role,
        })
    }

    /// A blank, in-service disk of `blocks` sectors in file `NAME.img`.
    pub(crate) fn blank(name: &str, blocks: u64) -> DiskConfig {
        DiskConfig {
            name: name.to_string(),
            file: format!("{name}.img"),
            blocks,
            state: DiskState::InService,
            failed_reason: None,
        }
    }
}

impl AggrConfig {
    /// Checks the aggregate on its own; `files` collects the files of every
    /// aggregate, none of which backs two disks.
    pub(crate) fn validate(
        &self,
        nvlog_file: &str,
        files: &mut BTreeSet<String>,
    ) -> Result<(), String> {
        self.check_disks(nvlog_file, files)?;
        self.layout()?;
        for (group, config) in self.groups.iter().enumerate() {
            for name in &config.disks {
                let disk = self.disk(name).expect("checked by check_disks");
                if disk.blocks < config.blocks_per_disk {
                    return Err(format!(
                        "disk {name} has {} blocks, fewer than RAID group {group}'s {}",
                        disk.blocks, config.blocks_per_disk
                    ));
                }
            }
        }
        Ok(())
    }

    /// Its stripes: the sum of its RAID groups' blocks per disk.
    pub(crate) fn stripes(&self) -> u64 {
        self.groups.iter().map(|g| g.blocks_per_disk).sum()
    }

    /// Its raidsize (of its HDD groups; SSD groups are sized when added):
    /// the one recorded, else ONTAP's default for the type of its last HDD
    /// group (16 disks for RAID-DP, 8 for RAID-4); never below its largest
    /// HDD group.
    pub(crate) fn raid_size(&self) -> u16 {
        let raid_type = self.last_hdd_group().raid_type.raid_type();
        let hdd = self.groups.iter().filter(|g| g.tier == TierName::Hdd);
        let largest = hdd.map(|g| g.disks.len()).max().unwrap_or(0);
        let largest = u16::try_from(largest).unwrap_or(u16::MAX);
        self.raid_size
            .unwrap_or_else(|| default_raid_size(raid_type))
            .max(largest)
    }

    /// Its last RAID group: the one `aggr add` can widen.
    pub(crate) fn last_group(&self) -> &GroupConfig {
        self.groups
            .last()
            .expect("a validated configuration has a RAID group")
    }

    /// Its last HDD RAID group: what new HDD groups are made like (group 0
    /// is always on HDD).
    pub(crate) fn last_hdd_group(&self) -> &GroupConfig {
        (self.groups.iter().rev())
            .find(|g| g.tier == TierName::Hdd)
            .expect("a validated configuration's first group is on HDD")
    }

    /// Its last SSD RAID group, if it is a hybrid aggregate.
    pub(crate) fn last_ssd_group(&self) -> Option<&GroupConfig> {
        self.groups.iter().rev().find(|g| g.tier == TierName::Ssd)
    }

    /// Whether it has SSD RAID groups (a Flash Pool).
    pub(crate) fn is_hybrid(&self) -> bool {
        self.last_ssd_group().is_some()
    }

    /// Its engine id.
    pub(crate) fn aggr_id(&self) -> wafer_core::units::AggrId {
        wafer_core::units::AggrId(self.id)
    }

    /// Every disk is defined once, used once (in a group, as a spare or
    /// broken), and has its own file; a broken disk has failed.
    fn check_disks(&self, nvlog_file: &str, files: &mut BTreeSet<String>) -> Result<(), String> {
        let mut names = BTreeSet::new();
        for disk in &self.disks {
            if disk.name.is_empty() || !names.insert(disk.name.as_str()) {
                return Err(format!("disk name {:?} is empty or repeated", disk.name));
            }
            check_file_name(&format!("disk {}'s file", disk.name), &disk.file)?;
            if disk.file == nvlog_file || !files.insert(disk.file.clone()) {
                return Err(format!("file {:?} backs more than one disk", disk.file));
            }
        }
        let mut used = BTreeSet::new();
        let members = self.groups.iter().flat_map(|g| g.disks.iter());
        for name in members.chain(&self.spares).chain(&self.broken) {
            if !names.contains(name.as_str()) {
                return Err(format!(
                    "disk {name} is used but not defined under [[disks]]"
                ));
            }
            if !used.insert(name.as_str()) {
                return Err(format!("disk {name} is used twice"));
            }
        }
        if let Some(unused) = names.difference(&used).next() {
            return Err(format!(
                "disk {unused} is defined but neither a group member, a spare nor broken"
            ));
        }
        let in_service = |name: &&String| {
            self.disk(name)
                .is_some_and(|d| d.state == DiskState::InService)
        };
        if let Some(name) = self.broken.iter().find(in_service) {
            return Err(format!("disk {name} is listed as broken but is in service"));
        }
        Ok(())
    }

    /// Its disks in service, in slot order, with the roles their labels
    /// give.
    fn disk_places(&self) -> Vec<DiskPlace> {
        let aggregate = AggrName {
            id: self.id,
            name: self.aggregate.clone(),
        };
        let mut places = Vec::new();
        for (group, config) in self.groups.iter().enumerate() {
            for (position, name) in config.disks.iter().enumerate() {
                let role = Role::Member {
                    aggregate: aggregate.clone(),
                    group: u16::try_from(group).expect("few groups"),
                    position: u16::try_from(position).expect("few disks"),
                    group_size: u16::try_from(config.disks.len()).expect("few disks"),
                    raid_type: config.raid_type.raid_type(),
                    blocks_per_disk: config.blocks_per_disk,
                    tier: config.tier.tier(),
                };
                places.extend(self.disk(name).expect("validated").place(role));
            }
        }
        for name in &self.spares {
            let role = Role::Spare(aggregate.clone());
            places.extend(self.disk(name).expect("validated").place(role));
        }
        places
    }

    /// The engine's layout of the aggregate.
    pub(crate) fn layout(&self) -> Result<Layout, String> {
        let geometries = self
            .groups
            .iter()
            .enumerate()
            .map(|(group, config)| {
                let size = u16::try_from(config.disks.len()).unwrap_or(u16::MAX);
                RaidGroupGeometry::new(config.raid_type.raid_type(), size, config.blocks_per_disk)
                    .map_err(|e| format!("RAID group {group}: {e}"))
            })
            .collect::<Result<Vec<_>, String>>()?;
        let tiers = self.groups.iter().map(|g| g.tier.tier()).collect();
        let spares = u32::try_from(self.spares.len()).map_err(|e| e.to_string())?;
        Layout::tiered(geometries, tiers, spares).map_err(|e| e.to_string())
    }

    /// Every slot in engine order, with its disk.
    pub(crate) fn slots(&self) -> Vec<SlotDisk<'_>> {
        let layout = self
            .layout()
            .expect("a validated configuration has a layout");
        let members = self.groups.iter().flat_map(|g| g.disks.iter());
        members
            .chain(self.spares.iter())
            .enumerate()
            .map(|(n, name)| {
                let id = DiskId(u32::try_from(n).expect("fewer than 2^32 disks"));
                SlotDisk {
                    id,
                    slot: layout.slot(id).expect("every listed disk has a slot"),
                    disk: self.disk(name).expect("every listed disk is defined"),
                }
            })
            .collect()
    }

    /// The disk named `name`.
    pub(crate) fn disk(&self, name: &str) -> Option<&DiskConfig> {
        self.disks.iter().find(|d| d.name == name)
    }

    /// Marks a disk failed, with the reason.
    pub(crate) fn mark_failed(&mut self, name: &str, reason: &str) {
        let disk = self
            .disks
            .iter_mut()
            .find(|d| d.name == name)
            .expect("only a configured disk is failed");
        disk.state = DiskState::Failed;
        disk.failed_reason = Some(reason.to_string());
    }

    /// Adds a blank, in-service disk of `blocks` sectors as the last spare
    /// (its file is `NAME.img`).
    pub(crate) fn add_spare(&mut self, name: &str, blocks: u64) {
        self.disks.push(DiskConfig {
            name: name.to_string(),
            file: format!("{name}.img"),
            blocks,
            state: DiskState::InService,
            failed_reason: None,
        });
        self.spares.push(name.to_string());
        debug_assert!(
            self.validate("", &mut BTreeSet::new()).is_ok(),
            "a new spare keeps the configuration valid"
        );
    }

    /// Puts spare `spare` in place of the member at `position` of `group`;
    /// the disk it replaces is broken: out of the aggregate, kept with its
    /// file until removed.
    pub(crate) fn replace_member(&mut self, group: usize, position: usize, spare: &str) {
        let old = std::mem::replace(&mut self.groups[group].disks[position], spare.to_string());
        self.spares.retain(|s| s != spare);
        self.broken.push(old);
        debug_assert!(
            self.validate("", &mut BTreeSet::new()).is_ok(),
            "a spare assignment keeps the configuration valid"
        );
    }

    /// Forgets broken disk `name` (its file is the caller's business).
    pub(crate) fn remove_broken(&mut self, name: &str) {
        self.broken.retain(|b| b != name);
        self.disks.retain(|d| d.name != name);
        debug_assert!(
            self.validate("", &mut BTreeSet::new()).is_ok(),
            "removing a broken disk keeps the configuration valid"
        );
    }

    /// The largest disk a RAID group uses, in blocks: what a new spare needs
    /// to take any member's place.
    pub(crate) fn largest_group_disk(&self) -> u64 {
        self.groups
            .iter()
            .map(|g| g.blocks_per_disk)
            .max()
            .expect("a validated configuration has a RAID group")
    }

    /// The names of a group's failed members if `also` failed as well.
    pub(crate) fn failed_members(&self, group: usize, also: &[&str]) -> Vec<String> {
        self.groups[group]
            .disks
            .iter()
            .filter(|name| {
                also.contains(&name.as_str())
                    || self
                        .disk(name)
                        .is_some_and(|d| d.state == DiskState::Failed)
            })
            .cloned()
            .collect()
    }

    /// Checks that no RAID group would lose more disks than its parity rebuilds
    /// if the disks named in `also` failed too.
    pub(crate) fn check_survivable(&self, also: &[&str]) -> Result<(), ServeError> {
        for (group, config) in self.groups.iter().enumerate() {
            let raid_type = config.raid_type.raid_type();
            let failed = self.failed_members(group, also);
            if failed.len() > raid_type.tolerated_failures() {
                return Err(ServeError::TooManyFailedDisks {
                    group,
                    raid_type: raid_type.ontap_name(),
                    failed,
                    tolerated: raid_type.tolerated_failures(),
                });
            }
        }
        Ok(())
    }
}

/// ONTAP's default raidsize: 16 disks for RAID-DP, 8 for RAID-4.
pub(crate) fn default_raid_size(raid_type: RaidType) -> u16 {
    match raid_type {
        RaidType::RaidDp => 16,
        RaidType::Raid4 => 8,
    }
}

/// Files named in the configuration live in the data directory itself.
fn check_file_name(what: &str, name: &str) -> Result<(), String> {
    let plain = !name.is_empty()
        && name != "."
        && name != ".."
        && !name.contains('/')
        && name != CONFIG_FILE
        && !name.starts_with(CONFIG_FILE);
    match plain {
        true => Ok(()),
        false => Err(format!(
            "{what} {name:?} must be a plain file name inside the data directory"
        )),
    }
}

/// An NVLog elsewhere is named by a normal absolute path, so that the one
/// recorded can be compared with the one `--nvlog` names.
fn check_external_nvlog(path: &Path) -> Result<(), String> {
    use std::path::Component;
    let normal = path
        .components()
        .skip(1)
        .all(|part| matches!(part, Component::Normal(_)));
    match normal && path.file_name().is_some() {
        true => Ok(()),
        false => Err(format!(
            "nvlog_file {path:?} must be a plain file name inside the data directory or an \
             absolute path without . or .."
        )),
    }
}

/// Creates `path` (replacing it) with `parts` written one after another,
/// and syncs it.
/// A configuration from before masking (no `[san]`) gets igroup `default`
/// with every LUN mapped at its LUN ID and no initiator in it: iSCSI
/// initiators see nothing until added (`igroup add default IQN`). The
/// result is the same at every start until the next save records it.
fn with_masking(mut config: DataConfig) -> DataConfig {
    if config.san.is_none() {
        let luns: Vec<(String, u32)> = config.luns.iter().map(|l| (l.path.clone(), l.id)).collect();
        config.san = Some(San::default_for(&luns));
        tracing::warn!(
            "no igroups recorded (a data directory from before LUN masking): every LUN is \
             mapped to igroup default, which holds no initiator yet; `wafer igroup add default \
             IQN` lets an iSCSI initiator see them"
        );
    }
    config
}

fn write_synced(path: &Path, parts: &[&[u8]]) -> io::Result<()> {
    let mut file = fs::File::create(path)?;
    for part in parts {
        file.write_all(part)?;
    }
    file.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> DataConfig {
        DataConfig::new(&CreateOptions::default(), 32 << 20, 0x5eed)
    }

    #[test]
    fn a_new_configuration_is_valid_and_round_trips_through_the_file() {
        let dir = tempfile::tempdir().expect("a scratch directory");
        let config = config();
        config.validate().expect("valid");
        config.save(dir.path()).expect("saved");
        assert_eq!(DataConfig::load(dir.path()).expect("loaded"), config);
        let text = fs::read_to_string(dir.path().join(CONFIG_FILE)).expect("readable");
        assert!(text.contains("raid_type = \"raid_dp\""), "{text}");
    }

    #[test]
    fn an_ssd_group_keeps_its_tier_through_the_file_and_the_layout() {
        let dir = tempfile::tempdir().expect("a scratch directory");
        let mut config = config();
        let aggr = &mut config.aggregates[0];
        let ssd: Vec<DiskConfig> = (0..3)
            .map(|n| DiskConfig::blank(&format!("ssd{n}"), 8192))
            .collect();
        aggr.groups.push(GroupConfig {
            raid_type: RaidTypeName::Raid4,
            blocks_per_disk: 8192,
            tier: TierName::Ssd,
            disks: ssd.iter().map(|d| d.name.clone()).collect(),
        });
        aggr.disks.extend(ssd);
        config.validate().expect("valid");
        config.save(dir.path()).expect("saved");
        let text = fs::read_to_string(dir.path().join(CONFIG_FILE)).expect("readable");
        assert_eq!(text.matches("tier = \"ssd\"").count(), 1, "{text}");
        assert!(
            !text.contains("tier = \"hdd\""),
            "HDD is left implicit: {text}"
        );
        let loaded = DataConfig::load(dir.path()).expect("loaded");
        assert_eq!(loaded, config);
        let layout = loaded.aggregates[0].layout().expect("a layout");
        assert_eq!(layout.tiers(), [Tier::Hdd, Tier::Ssd]);
        assert_eq!(layout.hdd_blocks(), layout.groups()[0].data_blocks());
        assert!(loaded.aggregates[0].is_hybrid());
        // An SSD group first is refused: group 0 holds the superblocks.
        let mut first = config.clone();
        first.aggregates[0].groups.swap(0, 1);
        assert!(first.validate().unwrap_err().contains("hard disks"));
    }

    #[test]
    fn a_save_that_fails_leaves_the_old_configuration_and_no_temporary_file() {
        let dir = tempfile::tempdir().expect("a scratch directory");
        let config = config();
        // A directory where the configuration goes: the rename over it fails.
        fs::create_dir(dir.path().join(CONFIG_FILE)).expect("an obstacle");
        assert!(config.save(dir.path()).is_err());
        assert!(!dir.path().join(format!("{CONFIG_FILE}.new")).exists());
        assert!(dir.path().join(CONFIG_FILE).is_dir(), "left as it was");
    }

    #[test]
    fn a_configuration_from_before_lun_ids_loads_with_none_recorded() {
        let mut config = config();
        config.record_luns(&[LunNow {
            path: "/vol/vol0/lun0".into(),
            inode: 64,
        }]);
        let text = toml::to_string(&config).expect("encodes");
        assert!(text.contains("next_lun_id = 1") && text.contains("[[luns]]"));
        let mut table: toml::Table = toml::from_str(&text).expect("a table");
        table.remove("luns");
        table.remove("next_lun_id");
        let before_ids = toml::to_string(&table).expect("encodes");
        let old: DataConfig = toml::from_str(&before_ids).expect("still read");
        assert_eq!((old.next_lun_id, old.luns.len()), (0, 0));
    }

    #[test]
    fn slots_number_members_then_spares() {
        let config = config();
        let slots = config.aggregates[0].slots();
        assert_eq!(slots.len(), 9);
        assert_eq!(slots[2].disk.name, "disk2");
        assert_eq!(slots[8].slot, Slot::Spare(0));
        assert_eq!(slots[8].disk.name, "disk8");
    }

    #[test]
    fn inconsistent_configurations_are_refused_with_a_reason() {
        let mut twice = config();
        twice.aggregates[0].spares.push("disk1".into());
        assert!(twice.validate().unwrap_err().contains("used twice"));
        let mut escape = config();
        escape.aggregates[0].disks[0].file = "../elsewhere".into();
        assert!(escape.validate().unwrap_err().contains("plain file name"));
        let mut small = config();
        small.aggregates[0].disks[3].blocks -= 1;
        assert!(small.validate().unwrap_err().contains("fewer than"));
        let mut outside = config();
        outside.nvlog_file = "/ssd/../nvlog".into();
        assert!(outside.validate().unwrap_err().contains("absolute path"));
        outside.nvlog_file = "/ssd/wafer-nvlog".into();
        outside
            .validate()
            .expect("an NVLog on another device is valid");
        assert_eq!(
            outside.external_nvlog(),
            Some(Path::new("/ssd/wafer-nvlog"))
        );
        let mut version = config();
        version.format_version = 9;
        assert!(version.validate().unwrap_err().contains("format_version"));
        let mut id = config();
        id.directory_id = "not hex".into();
        assert!(id.validate().unwrap_err().contains("directory_id"));
    }

    #[test]
    fn a_format_2_configuration_gets_a_directory_id() {
        let dir = tempfile::tempdir().expect("a scratch directory");
        let text = toml::to_string(&config()).expect("encodes");
        let v2 = text
            .replace("format_version = 3", "format_version = 2")
            .replace(&format!("directory_id = \"{:032x}\"\n", 0x5eed), "");
        assert_ne!(v2, text);
        fs::write(dir.path().join(CONFIG_FILE), v2).expect("written");
        let (loaded, migrated) = DataConfig::load_migrating(dir.path()).expect("migrated");
        assert!(migrated);
        assert_eq!(loaded.format_version, FORMAT_VERSION);
        assert_eq!(loaded.directory_id.len(), 32);
        assert_ne!(loaded.directory_id(), 0x5eed);
    }

    #[test]
    fn garbage_is_refused_without_touching_the_directory() {
        let dir = tempfile::tempdir().expect("a scratch directory");
        fs::write(dir.path().join(CONFIG_FILE), "aggregates = [").expect("written");
        let error = DataConfig::load(dir.path()).unwrap_err().to_string();
        assert!(error.contains("malformed"), "{error}");
        assert!(error.contains("nothing in the data directory was changed"));
        let entries = fs::read_dir(dir.path()).expect("listable").count();
        assert_eq!(entries, 1);
    }

    #[test]
    fn a_replaced_member_is_kept_as_a_broken_disk_until_removed() {
        let mut config = config();
        config.aggregates[0].mark_failed("disk3", "test");
        config.aggregates[0].replace_member(0, 3, "disk8");
        assert_eq!(config.aggregates[0].groups[0].disks[3], "disk8");
        assert_eq!(config.aggregates[0].broken, ["disk3"]);
        config.validate().expect("valid");
        assert_eq!(
            config.aggregates[0].slots().len(),
            8,
            "a broken disk has no slot"
        );
        config.aggregates[0].remove_broken("disk3");
        let aggr = &config.aggregates[0];
        assert!(aggr.broken.is_empty() && aggr.disk("disk3").is_none());
        let mut wrong = self::config();
        wrong.aggregates[0].spares.clear();
        wrong.aggregates[0].broken.push("disk8".into());
        assert!(wrong.validate().unwrap_err().contains("in service"));
    }

    #[test]
    fn a_configuration_from_before_masking_maps_its_luns_to_igroup_default() {
        let dir = tempfile::tempdir().expect("a scratch directory");
        let mut old = config();
        old.record_luns(&[LunNow {
            path: "/vol/vol0/lun0".into(),
            inode: 64,
        }]);
        old.san = None;
        old.save(dir.path()).expect("saved");
        let text = fs::read_to_string(dir.path().join(CONFIG_FILE)).expect("written");
        assert!(!text.contains("san"), "{text}");
        let loaded = DataConfig::load(dir.path()).expect("loaded");
        let san = loaded.san();
        assert_eq!(san.igroups[0].name, "default");
        assert!(san.igroups[0].initiators.is_empty());
        assert_eq!(san.maps.len(), 1);
        assert_eq!(
            (san.maps[0].path.as_str(), san.maps[0].lun_id),
            ("/vol/vol0/lun0", 0)
        );
    }

    #[test]
    fn a_format_1_configuration_is_migrated_to_aggregate_0_with_a_directory_id() {
        let dir = tempfile::tempdir().expect("a scratch directory");
        let v3 = config();
        let aggr = toml::to_string(&v3.aggregates[0]).expect("encodes");
        let v1 = format!(
            "format_version = 1\nnvlog_file = \"nvlog\"\nnvlog_half_bytes = {}\n{}",
            v3.nvlog_half_bytes,
            aggr.replace("id = 0\n", "")
        );
        fs::write(dir.path().join(CONFIG_FILE), v1).expect("written");
        let (loaded, migrated) = DataConfig::load_migrating(dir.path()).expect("migrated");
        assert!(migrated);
        assert_ne!(loaded.directory_id, v3.directory_id, "a new id, at random");
        // It had no LUN records, so igroup default maps nothing.
        let v3 = DataConfig {
            san: Some(San::default_for(&[])),
            directory_id: loaded.directory_id.clone(),
            ..v3
        };
        assert_eq!(loaded, v3);
        let mut newer = config();
        newer.format_version = 4;
        newer.save(dir.path()).expect("saved");
        let error = DataConfig::load(dir.path()).unwrap_err().to_string();
        assert!(error.contains("format_version 4"), "{error}");
    }

    #[test]
    fn aggregates_are_named_numbered_and_disked_once() {
        let mut config = config();
        let mut second = config.aggregates[0].clone();
        second.aggregate = "aggr1".into();
        config.aggregates.push(second.clone());
        assert!(
            config.validate().unwrap_err().contains("repeated"),
            "same id"
        );
        config.aggregates[1].id = 1;
        assert!(
            config
                .validate()
                .unwrap_err()
                .contains("backs more than one disk")
        );
        for disk in &mut config.aggregates[1].disks {
            disk.file = format!("a1-{}", disk.file);
        }
        assert!(config.validate().unwrap_err().contains("two aggregates"));
        config.aggregates[1].aggregate = "aggr0".into();
        assert!(config.validate().unwrap_err().contains("empty or repeated"));
    }

    #[test]
    fn survivability_counts_failed_disks_per_group() {
        let mut config = config().aggregates.remove(0);
        config.mark_failed("disk3", "test");
        assert!(config.check_survivable(&["disk4"]).is_ok());
        let refused = config.check_survivable(&["disk4", "disk5"]).unwrap_err();
        assert!(refused.to_string().contains("3 failed disks"), "{refused}");
        // A spare's failure costs no group anything.
        assert!(config.check_survivable(&["disk4", "disk8"]).is_ok());
    }

    /// Disk labels as the configuration drives them (`crate::labels`).
    mod labels {
        use std::fs::{File, OpenOptions};

        use super::*;
        use crate::labels::{DiskLabel, disk_file_bytes, read, write};

        const BLOCKS: u64 = 64;

        /// A directory of the default shape with 64-block disks, files made
        /// and labelled by a save.
        fn directory() -> (tempfile::TempDir, DataConfig) {
            let dir = tempfile::tempdir().expect("a scratch directory");
            let options = CreateOptions {
                disk_bytes: BLOCKS * 4096,
                ..CreateOptions::default()
            };
            let config = DataConfig::new(&options, 32 << 20, 0xd1d1);
            for disk in &config.aggregates[0].disks {
                File::create(dir.path().join(&disk.file)).expect("made");
            }
            config.save(dir.path()).expect("saved");
            (dir, config)
        }

        fn label_of(dir: &Path, file: &str) -> Option<DiskLabel> {
            read(&File::open(dir.join(file)).expect("a file"), BLOCKS).expect("readable")
        }

        #[test]
        fn a_save_labels_every_disk_with_its_role() {
            let (dir, _) = directory();
            let member = label_of(dir.path(), "disk3.img").expect("labelled");
            assert_eq!((member.name.as_str(), member.directory), ("disk3", 0xd1d1));
            assert_eq!(member.role.to_string(), "aggr0 rg0 position 3");
            let spare = label_of(dir.path(), "disk8.img").expect("labelled");
            assert_eq!(spare.role.to_string(), "a spare of aggr0");
            let length = fs::metadata(dir.path().join("disk8.img"))
                .expect("stat")
                .len();
            assert_eq!(length, disk_file_bytes(BLOCKS));
        }

        #[test]
        fn swapped_and_renamed_files_are_found_by_their_labels() {
            let (dir, mut config) = directory();
            let d = dir.path();
            fs::rename(d.join("disk2.img"), d.join("swap")).expect("moved");
            fs::rename(d.join("disk5.img"), d.join("disk2.img")).expect("moved");
            fs::rename(d.join("swap"), d.join("disk5.img")).expect("moved");
            fs::rename(d.join("disk7.img"), d.join("elsewhere.img")).expect("moved");
            assert_eq!(config.find_disk_files(d).expect("found"), vec![]);
            let file = |name: &str| {
                config.aggregates[0]
                    .disk(name)
                    .expect("a disk")
                    .file
                    .clone()
            };
            assert_eq!(file("disk2"), "disk5.img");
            assert_eq!(file("disk5"), "disk2.img");
            assert_eq!(file("disk7"), "elsewhere.img");
            assert_eq!(file("disk3"), "disk3.img");
        }

        #[test]
        fn a_foreign_or_blank_file_is_refused_and_never_relabelled() {
            let (dir, mut config) = directory();
            let mut foreign = label_of(dir.path(), "disk4.img").expect("labelled");
            foreign.directory = 0xf0f0;
            let path = dir.path().join("disk4.img");
            let file = OpenOptions::new().write(true).open(&path).expect("opens");
            write(&file, BLOCKS, &foreign).expect("written");
            let blank = (OpenOptions::new().write(true))
                .open(dir.path().join("disk6.img"))
                .expect("opens");
            blank.set_len(0).expect("truncated");
            blank.set_len(disk_file_bytes(BLOCKS)).expect("extended");
            let unlabelled = config.find_disk_files(dir.path()).expect("looked");
            assert_eq!(unlabelled.len(), 2, "{unlabelled:?}");
            assert!(
                unlabelled[0].0 == "disk4"
                    && unlabelled[0]
                        .1
                        .contains("disk disk4 of another data directory (000"),
                "{unlabelled:?}"
            );
            assert!(
                unlabelled[1].0 == "disk6" && unlabelled[1].1.contains("holds no disk label"),
                "{unlabelled:?}"
            );
            config.save(dir.path()).expect("saved");
            assert_eq!(
                label_of(dir.path(), "disk4.img"),
                Some(foreign),
                "left alone"
            );
        }

        #[test]
        fn a_label_on_two_files_is_not_guessed_between() {
            let (dir, mut config) = directory();
            let d = dir.path();
            fs::copy(d.join("disk1.img"), d.join("copy.img")).expect("copied");
            fs::rename(d.join("disk1.img"), d.join("moved.img")).expect("moved");
            let unlabelled = config.find_disk_files(d).expect("looked");
            assert_eq!(unlabelled.len(), 1);
            assert!(
                unlabelled[0].1.contains("on 2 files (copy.img, moved.img)"),
                "{unlabelled:?}"
            );
        }

        #[test]
        fn a_migration_cut_short_keeps_the_id_it_labelled_disks_with() {
            let (dir, config) = directory();
            let text = toml::to_string(&config).expect("encodes");
            let v2 = text
                .replace("format_version = 3", "format_version = 2")
                .replace(&format!("directory_id = \"{:032x}\"\n", 0xd1d1), "");
            fs::write(dir.path().join(CONFIG_FILE), v2).expect("written");
            let (migrated, _) = DataConfig::load_migrating(dir.path()).expect("loads");
            assert_eq!(migrated.directory_id(), 0xd1d1);
        }
    }
}
