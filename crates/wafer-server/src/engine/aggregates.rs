//! `aggr create`, `aggr add`, `aggr offline`, `aggr online` and `aggr
//! destroy`, on the engine thread.
//!
//! What each writes to `wafer.toml`, and when, is what keeps a crash safe:
//!
//! * `aggr create` makes the new disk files (synced; blank pool spares are
//!   truncated blank again), formats the aggregate on them and waits until
//!   its first CP has committed its superblock; only then does the
//!   configuration name it (saved atomically), and only then is the
//!   administrator answered. A crash before leaves unnamed disk files behind
//!   (`diskN.img` that no aggregate names; new names skip them) and never an
//!   aggregate the next start cannot mount. Pool spares it took stay in the
//!   pool until then.
//! * `aggr add` makes its disks first (pool spares blanked, new sparse
//!   files, synced; the configuration's save syncs the directory), then,
//!   when no CP runs in the aggregate, saves the configuration naming them,
//!   moves the spares' threads up behind the new members' and gives the
//!   node the grown layout, which the idle engine takes up at once. A crash
//!   before the save leaves blank files nothing names; after it, the mount
//!   takes the configured layout over the superblock's, the new blocks free.
//! * `aggr offline`: the engine records it in the aggregate's last
//!   superblock, and the configuration follows once the aggregate has let
//!   go of its engine; a start that finds the disks recording it offline
//!   brings it up offline (and mends the configuration if a crash came
//!   between). A crash before that superblock mounts it online again, which
//!   is harmless.
//! * `aggr online` mounts it and answers once a CP has recorded it online,
//!   then records it online in the configuration too.
//! * `aggr destroy` (offline or failed only) takes it out of the node, then
//!   saves the configuration without it, its in-service disks in the node's
//!   pool of spares, and only then blanks their files (and deletes the files
//!   of its failed and broken disks). A crash between leaves pool spares
//!   with old contents, which `aggr create` blanks before it formats them.

use std::path::PathBuf;
use std::sync::mpsc::Sender;

use wafer_core::node::{AggrState, MAX_AGGREGATES};
use wafer_core::units::AggrId;
use wafer_raid::RaidType;

use super::Engine;
use super::pending::{Addition, Pending};
use crate::admin::{AdminError, AdminErrorKind, AdminReply, AdminResponse};
use crate::config::{AggrConfig, DiskConfig, DiskState, GroupConfig, RaidTypeName, TierName};
use crate::growth::SsdGroups;

/// The default disk size of an aggregate when the node has none to copy.
const DEFAULT_DISK_BYTES: u64 = 768 << 20;

fn refuse(kind: AdminErrorKind, message: String) -> AdminError {
    AdminError { kind, message }
}

fn invalid(message: String) -> AdminError {
    refuse(AdminErrorKind::Invalid, message)
}

/// The sizes of the RAID groups `disks` disks make in groups of at most
/// `raid_size` (ONTAP fills groups in order; the last takes the rest).
fn group_sizes(raid_type: RaidType, raid_size: u16, disks: u16) -> Result<Vec<u16>, String> {
    let limits = raid_type.group_size_limits();
    if !limits.contains(&raid_size) {
        return Err(format!(
            "-r {raid_size}: a {} group holds {} to {} disks",
            raid_type.ontap_name(),
            limits.start(),
            limits.end()
        ));
    }
    let mut sizes = vec![raid_size; usize::from(disks / raid_size)];
    let rest = disks % raid_size;
    if rest > 0 {
        sizes.push(rest);
    }
    if let Some(small) = sizes.iter().find(|s| !limits.contains(s)) {
        return Err(format!(
            "{disks} disks in {} groups of at most {raid_size} leave a group of {small}, and a \
             group holds at least {} (parity included)",
            raid_type.ontap_name(),
            limits.start()
        ));
    }
    Ok(sizes)
}

impl Engine {
    /// `aggr create`: checks, makes the disks, formats; answered once the
    /// aggregate is online and named in the configuration.
    pub(super) fn create_aggregate(
        &mut self,
        name: &str,
        raid_type: &str,
        raid_size: Option<u16>,
        disks: u16,
        reply: Sender<AdminResponse>,
    ) -> Result<(), AdminError> {
        if self.config.aggr_named(name).is_some() || self.pending_name(name) {
            return Err(refuse(
                AdminErrorKind::Exists,
                format!("aggr create: An aggregate named '{name}' already exists."),
            ));
        }
        if name.is_empty()
            || name.len() > wafer_core::format::NAME_MAX
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            || name.starts_with(|c: char| c.is_ascii_digit())
        {
            return Err(invalid(format!(
                "aggr create: invalid aggregate name '{name}': 1 to {} letters, digits, _ or -, \
                 not starting with a digit",
                wafer_core::format::NAME_MAX
            )));
        }
        if self.config.aggregates.len() + self.pending.len() >= MAX_AGGREGATES {
            return Err(invalid(format!(
                "aggr create: the node serves {MAX_AGGREGATES} aggregates already"
            )));
        }
        let (type_name, raid) = match raid_type {
            "raid_dp" => (RaidTypeName::RaidDp, RaidType::RaidDp),
            "raid4" => (RaidTypeName::Raid4, RaidType::Raid4),
            other => {
                return Err(invalid(format!(
                    "aggr create: invalid RAID type '{other}' (-t raid_dp or -t raid4)"
                )));
            }
        };
        let raid_size = raid_size.unwrap_or(crate::config::default_raid_size(raid));
        let sizes = group_sizes(raid, raid_size, disks)
            .map_err(|e| invalid(format!("aggr create: {e}")))?;
        let blocks = self
            .config
            .aggregates
            .iter()
            .flat_map(|a| a.groups.iter().map(|g| g.blocks_per_disk))
            .max()
            .unwrap_or(DEFAULT_DISK_BYTES / wafer_core::BLOCK_SIZE as u64);
        let mut stripes = self.config.stripes();
        stripes.extend(self.pending_stripes());
        stripes.extend(sizes.iter().map(|_| blocks));
        if !self.nvlog_layout.holds(&stripes) {
            return Err(invalid(format!(
                "aggr create: the NVLog's halves ({} bytes each) have no room for the CP records \
                 of {} more RAID groups of {} MiB disks; destroy an aggregate, or make fewer or \
                 smaller groups",
                self.nvlog_layout.region_bytes,
                sizes.len(),
                (blocks * wafer_core::BLOCK_SIZE as u64) >> 20
            )));
        }
        let (members, from_pool, made, files) =
            self.gather_disks(usize::from(disks), blocks, "aggr create")?;
        let mut at = 0;
        let groups: Vec<GroupConfig> = sizes
            .iter()
            .map(|size| {
                let group = GroupConfig {
                    raid_type: type_name,
                    blocks_per_disk: blocks,
                    tier: TierName::Hdd,
                    disks: members[at..at + usize::from(*size)]
                        .iter()
                        .map(|d| d.name.clone())
                        .collect(),
                };
                at += usize::from(*size);
                group
            })
            .collect();
        let mut config = AggrConfig {
            aggregate: name.to_string(),
            id: u32::MAX,
            offline: false,
            raid_size: Some(raid_size),
            spares: Vec::new(),
            broken: Vec::new(),
            groups,
            disks: members,
        };
        let layout = config
            .layout()
            .map_err(|e| invalid(format!("aggr create: {e}")))?;
        let now = self.clock.now();
        let id = match self.node.create_aggregate(now, name, layout) {
            Ok(id) => id,
            Err(e) => {
                remove_files(&made);
                return Err(invalid(format!("aggr create: {e}")));
            }
        };
        if self.config.aggr(id.0).is_some() {
            unreachable!("the node gives a new aggregate an id none in the configuration has");
        }
        config.id = id.0;
        let mut handles = Vec::new();
        for (disk, file) in config.disks.iter().zip(files) {
            let handle =
                crate::disk::DiskHandle::spawn(&disk.name, Some(file), self.to_self.clone())
                    .map_err(|e| refuse(AdminErrorKind::Io, e.to_string()))?;
            handles.push(handle);
        }
        self.devices.disks.insert(id, handles);
        tracing::info!(
            "aggr create: formatting aggregate {name} (id {}) on {} disks in {} RAID groups",
            id.0,
            disks,
            sizes.len()
        );
        self.pending.push(Pending::Create {
            id,
            config,
            from_pool,
            made,
            reply,
        });
        self.drain();
        Ok(())
    }

    /// `disks` blank disks of `blocks` sectors: pool spares large enough
    /// first (blanked again), then new files. Returns them, the pool spares
    /// taken, the files made, and every disk's open file.
    #[allow(clippy::type_complexity)]
    fn gather_disks(
        &mut self,
        disks: usize,
        blocks: u64,
        what: &str,
    ) -> Result<
        (
            Vec<DiskConfig>,
            Vec<String>,
            Vec<PathBuf>,
            Vec<std::fs::File>,
        ),
        AdminError,
    > {
        let mut members = Vec::new();
        let mut from_pool = Vec::new();
        let mut made = Vec::new();
        let mut files = Vec::new();
        let io = |e: String| refuse(AdminErrorKind::Io, format!("{what}: {e}"));
        let taken_from_pool: Vec<String> = self.pending_pool();
        for spare in &self.config.spare_pool {
            if members.len() == disks {
                break;
            }
            if spare.blocks < blocks || taken_from_pool.contains(&spare.name) {
                continue;
            }
            let path = self.dir.join(&spare.file);
            let file = blank(&path, spare.blocks)
                .map_err(|e| io(format!("cannot blank {}: {e}", path.display())))?;
            members.push(DiskConfig::blank(&spare.name, spare.blocks));
            members.last_mut().expect("pushed").file = spare.file.clone();
            from_pool.push(spare.name.clone());
            files.push(file);
        }
        while members.len() < disks {
            match self.new_disk_file(blocks) {
                Ok((name, file)) => {
                    made.push(self.dir.join(format!("{name}.img")));
                    members.push(DiskConfig::blank(&name, blocks));
                    files.push(file);
                }
                Err(e) => {
                    remove_files(&made);
                    return Err(e);
                }
            }
        }
        Ok((members, from_pool, made, files))
    }

    /// `aggr add NAME [-T SAS|SSD] [-t RAIDTYPE] [-r RAIDSIZE] [-g new|rgN]
    /// NDISKS[@SIZE]`: checks, then makes the disks (pool spares blanked, new
    /// files sparse, all synced) before anything names them; they are given
    /// to the aggregate once no CP runs there ([`Engine::give_disks`]), and
    /// the answer waits for that.
    pub(super) fn add_to_aggregate(
        &mut self,
        name: &str,
        addition: &crate::admin::AggrAddition,
        reply: Sender<AdminResponse>,
    ) -> Result<(), AdminError> {
        let disks = addition.disks;
        let id = self.named_aggregate(name, "aggr add")?;
        if self.pending_for(id) {
            return Err(invalid(format!("aggr add: aggregate '{name}' is busy")));
        }
        let (state, reason) = self.aggregate_state(id);
        if state != "online" {
            return Err(invalid(format!(
                "aggr add: aggregate '{name}' is {state}{}; only an online aggregate takes disks",
                reason.map_or_else(String::new, |r| format!(" ({r})"))
            )));
        }
        if (self.node.aggregate(id)).is_some_and(|f| f.rebuild_status().is_some()) {
            return Err(invalid(format!(
                "aggr add: aggregate '{name}' is reconstructing a failed disk; add disks once the \
                 reconstruction is done"
            )));
        }
        let config = self.config.aggr(id.0).expect("named").clone();
        let placement = self.placement(&config, id, addition)?;
        let blocks = placement.kind.blocks_per_disk;
        let placeholders = (0..disks)
            .map(|n| DiskConfig::blank(&format!("new{n}"), blocks))
            .collect();
        let planned = crate::growth::grown(&config, &placement, placeholders);
        let layout = planned
            .layout()
            .map_err(|e| invalid(format!("aggr add: {e}")))?;
        if let Some(filer) = self.node.aggregate(id) {
            wafer_core::filer::check_extension(filer.layout(), &layout)
                .map_err(|e| invalid(format!("aggr add: {e}")))?;
        }
        let mut stripes: Vec<u64> = (self.config.aggregates.iter())
            .map(|a| match a.id == id.0 {
                true => planned.stripes(),
                false => a.stripes(),
            })
            .collect();
        stripes.extend(self.pending_stripes());
        if !self.nvlog_layout.holds(&stripes) {
            return Err(invalid(format!(
                "aggr add: the NVLog's halves ({} bytes each) have no room for the CP records of \
                 {} more RAID groups of {} MiB disks; add fewer disks, or to the last group \
                 (-g rg{})",
                self.nvlog_layout.region_bytes,
                placement.new_groups.len(),
                (blocks * wafer_core::BLOCK_SIZE as u64) >> 20,
                config.groups.len() - 1
            )));
        }
        self.check_host_room(usize::from(disks), blocks)?;
        let (members, from_pool, made, files) =
            self.gather_disks(usize::from(disks), blocks, "aggr add")?;
        let names: Vec<&str> = members.iter().map(|d| d.name.as_str()).collect();
        tracing::info!(
            "aggr add: blank {} disks {} ready for aggregate {name} ({} in rg{}, {} new RAID \
             groups); given to it when no CP runs there",
            match placement.kind.tier {
                TierName::Hdd => "HDD",
                TierName::Ssd => "SSD",
            },
            names.join(", "),
            placement.to_last,
            config.groups.len() - 1,
            placement.new_groups.len()
        );
        let addition = Addition {
            id,
            placement,
            members,
            files,
            from_pool,
            made,
        };
        self.pending.push(Pending::Add { addition, reply });
        self.settle_pending();
        Ok(())
    }

    /// Where `aggr add`'s disks go in aggregate `id` (`config`): SSD disks
    /// in new groups of their own, refused unless `hybrid_enabled` is on;
    /// HDD disks as `crate::growth::place` puts them.
    fn placement(
        &self,
        config: &AggrConfig,
        id: AggrId,
        addition: &crate::admin::AggrAddition,
    ) -> Result<crate::growth::Placement, AdminError> {
        let name = &config.aggregate;
        let ssd = match addition.disk_type.as_deref() {
            None | Some("SAS" | "sas" | "HDD" | "hdd") => false,
            Some("SSD" | "ssd") => true,
            Some(other) => {
                return Err(invalid(format!(
                    "aggr add: invalid disk type '{other}': wafer's disks are SAS (hard disks, \
                     the default) or SSD (a Flash Pool's cache, -T SSD)"
                )));
            }
        };
        let bytes_to_blocks = |bytes: u64| bytes / wafer_core::BLOCK_SIZE as u64;
        if !ssd {
            if addition.raid_type.is_some() || addition.raid_size.is_some() {
                return Err(invalid(format!(
                    "aggr add: -t and -r choose the RAID type and size of new SSD groups (-T \
                     SSD); HDD disks join groups like aggregate '{name}''s own (aggr create \
                     chose them)"
                )));
            }
            if let Some(bytes) = addition.disk_bytes {
                let blocks = config.last_hdd_group().blocks_per_disk;
                if bytes_to_blocks(bytes) != blocks {
                    return Err(invalid(format!(
                        "aggr add: @{} does not match aggregate '{name}''s HDD disks ({} MiB); \
                         its HDD disks are all one size",
                        crate::admin::ontap_size(bytes),
                        (blocks * wafer_core::BLOCK_SIZE as u64) >> 20
                    )));
                }
            }
            return crate::growth::place(config, addition.group.as_deref(), addition.disks)
                .map_err(|e| invalid(format!("aggr add: {e}")));
        }
        let hybrid = self.node.aggregate(id).is_some_and(|f| f.hybrid_enabled());
        if !hybrid {
            return Err(invalid(format!(
                "aggr add: SSD disks can be added to aggregate '{name}' only when its option \
                 hybrid_enabled is on (aggr options {name} hybrid_enabled on)"
            )));
        }
        if let Some(group) = &addition.group
            && group != "new"
        {
            return Err(invalid(format!(
                "aggr add: -g {group}: SSD disks always make new RAID groups of their own (-g \
                 new, or no -g)"
            )));
        }
        // By default like the aggregate's last SSD group, else like its HDD
        // groups: RAID type, raidsize and disk size.
        let like = config.last_ssd_group().unwrap_or(config.last_hdd_group());
        let raid_type = match addition.raid_type.as_deref() {
            None => like.raid_type,
            Some("raid_dp") => RaidTypeName::RaidDp,
            Some("raid4") => RaidTypeName::Raid4,
            Some(other) => {
                return Err(invalid(format!(
                    "aggr add: invalid RAID type '{other}' (-t raid_dp or -t raid4)"
                )));
            }
        };
        let raid_size = match addition.raid_size {
            Some(size) => size,
            None => match config.last_ssd_group() {
                Some(group) if group.raid_type == raid_type => {
                    u16::try_from(group.disks.len()).unwrap_or(u16::MAX)
                }
                _ => crate::config::default_raid_size(raid_type.raid_type()),
            },
        };
        let blocks = match addition.disk_bytes {
            Some(bytes) if bytes_to_blocks(bytes) < 64 => {
                return Err(invalid(format!(
                    "aggr add: @{}: an SSD disk holds at least 256 KiB",
                    crate::admin::ontap_size(bytes)
                )));
            }
            Some(bytes) => bytes_to_blocks(bytes),
            None => like.blocks_per_disk,
        };
        let groups = SsdGroups {
            raid_type,
            raid_size,
            blocks_per_disk: blocks,
        };
        crate::growth::place_ssd(config, groups, addition.disks)
            .map_err(|e| invalid(format!("aggr add: {e}")))
    }

    /// Refuses an addition whose new disk files the host's file system has
    /// no room for: they are sparse, but the aggregate would count on every
    /// block of them, and a write the host refused later would take it
    /// offline. Pool spares the addition takes need no room.
    fn check_host_room(&self, disks: usize, blocks: u64) -> Result<(), AdminError> {
        let taken = self.pending_pool();
        let from_pool = (self.config.spare_pool.iter())
            .filter(|d| d.blocks >= blocks && !taken.contains(&d.name))
            .count()
            .min(disks);
        let files = (disks - from_pool) as u64;
        let needed = files * blocks * crate::config::SECTOR_BYTES;
        if needed == 0 {
            return Ok(());
        }
        let free = rustix::fs::statvfs(&self.dir)
            .map(|s| s.f_bavail.saturating_mul(s.f_frsize))
            .map_err(|e| {
                refuse(
                    AdminErrorKind::Io,
                    format!(
                        "aggr add: cannot ask the file system of {} for its room: {e}",
                        self.dir.display()
                    ),
                )
            })?;
        host_room(files, needed, free).map_err(|e| {
            refuse(
                AdminErrorKind::NoSpace,
                format!("aggr add: {e} (in {})", self.dir.display()),
            )
        })
    }

    /// Gives the disks of an `aggr add` to aggregate `id`, which runs no CP:
    /// their threads start, the configuration naming them is saved, the
    /// threads take their slots (the new members' before the spares', whose
    /// slots move up), and the node is given the new layout, which the
    /// engine takes up at once with the CP it starts. A crash after the save
    /// mounts the configured layout over the old superblock, its new blocks
    /// free; one before it leaves blank files no configuration names.
    fn give_disks(&mut self, addition: Addition) -> AdminResponse {
        let Addition {
            id,
            placement,
            members: disks,
            files,
            from_pool,
            made,
        } = addition;
        let config = self.config.aggr(id.0).expect("configured");
        let name = config.aggregate.clone();
        let members: usize = config.groups.iter().map(|g| g.disks.len()).sum();
        let names: Vec<String> = disks.iter().map(|d| d.name.clone()).collect();
        let grown = crate::growth::grown(config, &placement, disks);
        let filer = self.node.aggregate(id).expect("online");
        let layout = match grown
            .layout()
            .map_err(|e| e.to_string())
            .and_then(|layout| {
                wafer_core::filer::check_extension(filer.layout(), &layout)
                    .map(|()| layout)
                    .map_err(|e| e.to_string())
            }) {
            Ok(layout) => layout,
            Err(e) => {
                remove_files(&made);
                return AdminResponse::Error(invalid(format!("aggr add: {e}; no disk was added")));
            }
        };
        let count = names.len();
        let mut handles = Vec::new();
        for (disk, file) in names.iter().zip(files) {
            match crate::disk::DiskHandle::spawn(disk, Some(file), self.to_self.clone()) {
                Ok(handle) => handles.push(handle),
                Err(e) => {
                    remove_files(&made);
                    return AdminResponse::Error(refuse(
                        AdminErrorKind::Io,
                        format!(
                            "aggr add: disk {disk}'s threads cannot start: {e}; no disk was added"
                        ),
                    ));
                }
            }
        }
        let before = self.config.clone();
        *self.config.aggr_mut(id.0).expect("configured") = grown;
        self.config
            .spare_pool
            .retain(|d| !from_pool.contains(&d.name));
        if let Err(e) = self.config.save(&self.dir) {
            self.config = before;
            remove_files(&made);
            return AdminResponse::Error(refuse(
                AdminErrorKind::Io,
                format!("aggr add: the configuration cannot be saved: {e}; no disk was added"),
            ));
        }
        let slots = self.devices.disks.get_mut(&id).expect("its disks");
        slots.splice(members..members, handles);
        let now = self.clock.now();
        if let Err(e) = self.node.add_disks(now, id, layout.clone()) {
            // Checked before: the aggregate was online, idle and not
            // rebuilding. Put everything back as it was.
            let slots = self.devices.disks.get_mut(&id).expect("its disks");
            slots.drain(members..members + count);
            self.config = before;
            match self.config.save(&self.dir) {
                Ok(()) => remove_files(&made),
                Err(save) => tracing::warn!(
                    "aggr add: {} keeps naming the new disks ({save}); the next start mounts \
                     aggregate {name} with them, blank",
                    crate::config::CONFIG_FILE
                ),
            }
            return AdminResponse::Error(invalid(format!(
                "aggr add: {}; no disk was added",
                self.state_error(id, e)
            )));
        }
        let filer = self.node.aggregate(id).expect("online");
        assert_eq!(
            filer.layout(),
            &layout,
            "an idle aggregate takes up its new layout at once, as the disk threads did"
        );
        self.watches.insert(id, super::watch::Watch::of(filer));
        self.drain();
        let message = format!(
            "Addition of {count} disk{} to the aggregate has completed.",
            if count == 1 { "" } else { "s" }
        );
        tracing::info!("aggr add {name}: {message}");
        AdminResponse::Ok(AdminReply::Done { message })
    }

    fn pending_name(&self, name: &str) -> bool {
        self.pending
            .iter()
            .any(|p| matches!(p, Pending::Create { config, .. } if config.aggregate == name))
    }

    fn pending_stripes(&self) -> Vec<u64> {
        self.pending
            .iter()
            .filter_map(|p| match p {
                Pending::Create { config, .. } => Some(config.stripes()),
                Pending::Add { .. } | Pending::Offline { .. } | Pending::Online { .. } => None,
            })
            .collect()
    }

    fn pending_pool(&self) -> Vec<String> {
        self.pending
            .iter()
            .flat_map(|p| match p {
                Pending::Create { from_pool, .. } => from_pool.clone(),
                Pending::Add { addition, .. } => addition.from_pool.clone(),
                Pending::Offline { .. } | Pending::Online { .. } => Vec::new(),
            })
            .collect()
    }

    fn pending_for(&self, id: AggrId) -> bool {
        self.pending.iter().any(|p| match p {
            Pending::Create { id: i, .. }
            | Pending::Offline { id: i, .. }
            | Pending::Online { id: i, .. } => *i == id,
            Pending::Add { addition, .. } => addition.id == id,
        })
    }

    /// `aggr offline NAME`: answered once it is offline.
    pub(super) fn offline_aggregate(
        &mut self,
        name: &str,
        reply: Sender<AdminResponse>,
    ) -> Result<(), AdminError> {
        let id = self.named_aggregate(name, "aggr offline")?;
        if self.pending_for(id) {
            return Err(invalid(format!("aggr offline: aggregate '{name}' is busy")));
        }
        let now = self.clock.now();
        self.node
            .offline_aggregate(now, id)
            .map_err(|e| invalid(format!("aggr offline: {}", self.state_error(id, e))))?;
        self.pending.push(Pending::Offline { id, reply });
        self.publish_catalogue();
        self.drain();
        Ok(())
    }

    /// `aggr online NAME`: answered once it is online.
    pub(super) fn online_aggregate(
        &mut self,
        name: &str,
        reply: Sender<AdminResponse>,
    ) -> Result<(), AdminError> {
        let id = self.named_aggregate(name, "aggr online")?;
        if self.pending_for(id) {
            return Err(invalid(format!("aggr online: aggregate '{name}' is busy")));
        }
        let now = self.clock.now();
        self.node
            .online_aggregate(now, id)
            .map_err(|e| invalid(format!("aggr online: {}", self.state_error(id, e))))?;
        self.pending.push(Pending::Online { id, reply });
        self.drain();
        Ok(())
    }

    /// The node's refusal in the administrator's words.
    fn state_error(&self, id: AggrId, error: wafer_core::node::AggrError) -> String {
        match error {
            wafer_core::node::AggrError::WrongState { state, needed, .. } => {
                format!("aggregate '{}' is {state}; {needed}", self.aggr_name(id))
            }
            other => other.to_string(),
        }
    }

    /// `aggr destroy NAME`: an offline or failed aggregate leaves the node.
    pub(super) fn destroy_aggregate(&mut self, name: &str) -> Result<AdminReply, AdminError> {
        let id = self.named_aggregate(name, "aggr destroy")?;
        if self.pending_for(id) {
            return Err(invalid(format!("aggr destroy: aggregate '{name}' is busy")));
        }
        let out = self.io_aggregates.values().filter(|a| **a == id).count();
        if out > 0 {
            return Err(invalid(format!(
                "aggr destroy: aggregate '{name}' still has {out} disk I/Os out; try again"
            )));
        }
        let (state, _) = self.aggregate_state(id);
        if !matches!(
            self.node_state(id),
            Some(AggrState::Offline | AggrState::Failed(_))
        ) {
            return Err(invalid(format!(
                "aggr destroy: aggregate '{name}' is {state}; take it offline first (aggr \
                 offline {name})"
            )));
        }
        let before = self.config.clone();
        let config = self.config.aggr(id.0).expect("named").clone();
        self.config.aggregates.retain(|a| a.id != id.0);
        let mut pooled = Vec::new();
        let mut deleted = Vec::new();
        for disk in &config.disks {
            match disk.state {
                DiskState::InService => {
                    self.config.spare_pool.push(disk.clone());
                    pooled.push(disk.clone());
                }
                DiskState::Failed => deleted.push(disk.clone()),
            }
        }
        if let Err(e) = self.config.save(&self.dir) {
            self.config = before;
            return Err(refuse(
                AdminErrorKind::Io,
                format!("aggr destroy: the configuration cannot be saved: {e}"),
            ));
        }
        self.node
            .destroy_aggregate(id)
            .expect("offline or failed, checked");
        self.devices.disks.remove(&id);
        self.watches.remove(&id);
        self.states.remove(&id);
        self.unmountable.remove(&id);
        for disk in &pooled {
            let path = self.dir.join(&disk.file);
            if let Err(e) = blank(&path, disk.blocks) {
                tracing::warn!(
                    "aggr destroy: {} not blanked ({e}); aggr create blanks it before use",
                    path.display()
                );
            }
        }
        for disk in &deleted {
            let _ = std::fs::remove_file(self.dir.join(&disk.file));
        }
        self.publish_catalogue();
        let names = |disks: &[DiskConfig]| {
            disks
                .iter()
                .map(|d| d.name.clone())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut message = format!("Aggregate '{name}' destroyed.");
        if !pooled.is_empty() {
            message += &format!(
                " Its disks {} are blank spares in the node's pool (aggr create uses them first).",
                names(&pooled)
            );
        }
        if !deleted.is_empty() {
            message += &format!(" Its failed disks {} were deleted.", names(&deleted));
        }
        tracing::info!("{message}");
        Ok(AdminReply::Done { message })
    }

    /// A stop refuses the additions still waiting for their aggregate's CP
    /// to end: nothing names their disks yet, so the files made for them
    /// are removed (pool spares they took stay in the pool, blank).
    pub(super) fn abandon_additions(&mut self) {
        for one in std::mem::take(&mut self.pending) {
            match one {
                Pending::Add { addition, reply } => {
                    remove_files(&addition.made);
                    let _ = reply.send(AdminResponse::Error(refuse(
                        AdminErrorKind::ShuttingDown,
                        format!(
                            "aggr add: the server is stopping; no disk was added to aggregate \
                             '{}'",
                            self.aggr_name(addition.id)
                        ),
                    )));
                }
                other => self.pending.push(other),
            }
        }
    }

    /// Answers the aggregate administrations the node has carried out.
    pub(super) fn settle_pending(&mut self) {
        let pending = std::mem::take(&mut self.pending);
        for one in pending {
            if let Some(one) = self.settle_one(one) {
                self.pending.push(one);
            }
        }
    }

    fn settle_one(&mut self, pending: Pending) -> Option<Pending> {
        match pending {
            Pending::Create {
                id,
                config,
                from_pool,
                made,
                reply,
            } => match self.node_state(id) {
                Some(AggrState::Online) => {
                    let name = config.aggregate.clone();
                    let before = self.config.clone();
                    self.config
                        .spare_pool
                        .retain(|d| !from_pool.contains(&d.name));
                    self.config.aggregates.push(config);
                    self.config.aggregates.sort_by_key(|a| a.id);
                    let answer = match self.config.save(&self.dir) {
                        Ok(()) => {
                            let filer = self.node.aggregate(id).expect("online");
                            self.watches.insert(id, super::watch::Watch::of(filer));
                            self.states.insert(id, AggrState::Online);
                            let message = format!("Creation of aggregate '{name}' has completed.");
                            tracing::info!("{message}");
                            AdminResponse::Ok(AdminReply::Done { message })
                        }
                        Err(e) => {
                            // Not named: the next start does not know it;
                            // this run takes it out of service.
                            self.config = before;
                            let now = self.clock.now();
                            let _ = self.node.offline_aggregate(now, id);
                            AdminResponse::Error(refuse(
                                AdminErrorKind::Io,
                                format!(
                                    "aggr create: aggregate '{name}' is formatted but the \
                                     configuration cannot be saved: {e}"
                                ),
                            ))
                        }
                    };
                    self.publish_catalogue();
                    let _ = reply.send(answer);
                    None
                }
                Some(AggrState::Failed(_)) if self.io_aggregates.values().any(|a| *a == id) => {
                    // Its I/Os out must come back before it leaves the node.
                    Some(Pending::Create {
                        id,
                        config,
                        from_pool,
                        made,
                        reply,
                    })
                }
                Some(AggrState::Failed(reason)) => {
                    let _ = self.node.destroy_aggregate(id);
                    self.devices.disks.remove(&id);
                    remove_files(&made);
                    let _ = reply.send(AdminResponse::Error(invalid(format!(
                        "aggr create: aggregate '{}' could not be formatted: {reason}",
                        config.aggregate
                    ))));
                    None
                }
                _ => Some(Pending::Create {
                    id,
                    config,
                    from_pool,
                    made,
                    reply,
                }),
            },
            Pending::Add { addition, reply } => self.settle_addition(addition, reply),
            Pending::Offline { id, reply } => match self.node_state(id) {
                Some(AggrState::Offline) => {
                    let answer = self.record_offline(id, true);
                    let name = self.aggr_name(id);
                    // Published before the answer: a client told it is
                    // offline finds its exports so.
                    self.publish_catalogue();
                    let _ = reply.send(answer.map_or_else(AdminResponse::Error, |()| {
                        let message = format!("Aggregate '{name}' is now offline.");
                        tracing::info!("{message}");
                        AdminResponse::Ok(AdminReply::Done { message })
                    }));
                    None
                }
                Some(AggrState::GoingOffline) => Some(Pending::Offline { id, reply }),
                _ => {
                    let (state, reason) = self.aggregate_state(id);
                    let _ = reply.send(AdminResponse::Error(invalid(format!(
                        "aggr offline: aggregate '{}' is {state}{}",
                        self.aggr_name(id),
                        reason.map_or_else(String::new, |r| format!(": {r}"))
                    ))));
                    None
                }
            },
            Pending::Online { id, reply } => match self.node_state(id) {
                Some(AggrState::Online) => {
                    let answer = self.record_offline(id, false);
                    let name = self.aggr_name(id);
                    if let Some(filer) = self.node.aggregate(id) {
                        self.watches.insert(id, super::watch::Watch::of(filer));
                    }
                    self.states.insert(id, AggrState::Online);
                    // Published before the answer: a client told it is
                    // online finds its exports so.
                    self.publish_catalogue();
                    let _ = reply.send(answer.map_or_else(AdminResponse::Error, |()| {
                        let message = format!("Aggregate '{name}' is now online.");
                        tracing::info!("{message}");
                        AdminResponse::Ok(AdminReply::Done { message })
                    }));
                    None
                }
                Some(AggrState::Mounting) => Some(Pending::Online { id, reply }),
                _ => {
                    let (state, reason) = self.aggregate_state(id);
                    let _ = reply.send(AdminResponse::Error(invalid(format!(
                        "aggr online: aggregate '{}' is {state}{}",
                        self.aggr_name(id),
                        reason.map_or_else(String::new, |r| format!(": {r}"))
                    ))));
                    None
                }
            },
        }
    }

    /// Gives an addition its disks once no CP runs in its aggregate, or
    /// refuses it if the aggregate can no longer take them.
    fn settle_addition(
        &mut self,
        addition: Addition,
        reply: Sender<AdminResponse>,
    ) -> Option<Pending> {
        let id = addition.id;
        let why_not = match (self.node_state(id), self.node.aggregate(id)) {
            (Some(AggrState::Online), Some(filer)) if filer.cp_running() => {
                return Some(Pending::Add { addition, reply });
            }
            (Some(AggrState::Online), Some(filer)) if filer.rebuild_status().is_some() => {
                Some("it started reconstructing a failed disk".to_string())
            }
            (Some(AggrState::Online), Some(_)) => None,
            _ => Some(format!("it is {}", self.aggregate_state(id).0)),
        };
        let answer = match why_not {
            Some(why) => {
                remove_files(&addition.made);
                AdminResponse::Error(invalid(format!(
                    "aggr add: no disk was added to aggregate '{}': {why}",
                    self.aggr_name(id)
                )))
            }
            None => self.give_disks(addition),
        };
        let _ = reply.send(answer);
        None
    }

    /// Records aggregate `id` offline (or online) in the configuration.
    pub(super) fn record_offline(&mut self, id: AggrId, offline: bool) -> Result<(), AdminError> {
        let before = self.config.clone();
        if let Some(aggr) = self.config.aggr_mut(id.0) {
            aggr.offline = offline;
        }
        self.config.save(&self.dir).map_err(|e| {
            self.config = before;
            refuse(
                AdminErrorKind::Io,
                format!("the configuration cannot be saved: {e}"),
            )
        })
    }
}

/// Makes the disk file at `path` blank: truncated to nothing and extended
/// again (sparse), synced; returns it open.
fn blank(path: &std::path::Path, blocks: u64) -> std::io::Result<std::fs::File> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)?;
    file.set_len(0)?;
    file.set_len(crate::labels::disk_file_bytes(blocks))?;
    file.sync_all()?;
    Ok(file)
}

/// Whether `files` new disk files of `needed` bytes in all fit in `free`
/// bytes of the host's file system, and if not, why.
fn host_room(files: u64, needed: u64, free: u64) -> Result<(), String> {
    match needed <= free {
        true => Ok(()),
        false => Err(format!(
            "not enough space for {files} new disk files: they need {} MiB and the file system \
             has {} MiB free",
            needed >> 20,
            free >> 20
        )),
    }
}

fn remove_files(paths: &[PathBuf]) {
    for path in paths {
        let _ = std::fs::remove_file(path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disks_fill_groups_of_the_raid_size_in_order() {
        assert_eq!(group_sizes(RaidType::RaidDp, 16, 5), Ok(vec![5]));
        assert_eq!(group_sizes(RaidType::RaidDp, 4, 11), Ok(vec![4, 4, 3]));
        assert!(
            group_sizes(RaidType::RaidDp, 4, 10).is_err(),
            "a group of 2"
        );
        assert_eq!(group_sizes(RaidType::Raid4, 3, 6), Ok(vec![3, 3]));
        assert!(group_sizes(RaidType::RaidDp, 2, 6).is_err());
        assert!(group_sizes(RaidType::RaidDp, 16, 2).is_err());
    }

    #[test]
    fn new_disk_files_must_fit_in_the_file_system() {
        assert!(host_room(2, 200 << 20, 200 << 20).is_ok());
        let refused = host_room(3, 300 << 20, 100 << 20).unwrap_err();
        assert!(
            refused.contains("not enough space for 3 new disk files")
                && refused.contains("300 MiB")
                && refused.contains("100 MiB free"),
            "{refused}"
        );
    }
}
