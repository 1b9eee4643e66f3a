//! The admin protocol: JSON lines over the Unix socket `DIR/admin.sock`.
//!
//! A client writes one [`AdminRequest`] object per line and reads one
//! [`AdminResponse`] object per line, in order, as many as it likes on one
//! connection. Requests are carried out on the engine thread, one at a time,
//! between host I/Os; changes (volume, LUN and snapshot administration) are
//! logged in the NVLog like any write and answered once durable (a snapshot
//! once the CP that takes it has committed).
//!
//! The wire form is serde's: a request is tagged by `command`
//! (`{"command":"snap_create","volume":"vol0","name":"s1"}`), a response is
//! `{"ok":{"kind":...,"data":...}}` or `{"error":{"kind":...,"message":...}}`.
//! Sizes are bytes, times nanoseconds since the Unix epoch. The replies carry
//! complete data, not text: the CLI formats them ONTAP's way.
//!
//! The socket is created with mode 0600 in a directory of mode 0700: only
//! the server's user may administer it.

use std::collections::BTreeMap;
use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;

use serde::{Deserialize, Serialize};

pub use crate::chap_store::{Entry as SecurityEntry, Method};
use crate::config::DiskState;
pub use crate::masking::Protocol;

/// The admin socket's name in the data directory.
pub const ADMIN_SOCKET: &str = "admin.sock";
/// The longest request line the server reads.
pub const REQUEST_LINE_BYTES_MAX: usize = 64 * 1024;

/// One administrative request. Unknown commands, and unknown or missing
/// fields of a request that has fields, are refused.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "command", rename_all = "snake_case", deny_unknown_fields)]
pub enum AdminRequest {
    /// `vol status`: every volume.
    VolStatus,
    /// `vol create NAME SIZE`.
    VolCreate {
        /// The volume's name.
        name: String,
        /// Its size.
        size_bytes: u64,
    },
    /// `vol create NAME AGGR SIZE`: a volume in aggregate AGGR.
    VolCreateOn {
        /// The volume's name.
        name: String,
        /// The aggregate that holds it.
        aggregate: String,
        /// Its size.
        size_bytes: u64,
    },
    /// `vol offline NAME`: the volume's LUNs serve no I/O until `vol
    /// online`; recorded with the volume, so it stays offline across
    /// restarts.
    VolOffline {
        /// The volume.
        name: String,
    },
    /// `vol online NAME`: an offline volume serves again.
    VolOnline {
        /// The volume.
        name: String,
    },
    /// `vol destroy NAME`: an offline volume, its LUNs and snapshots are
    /// destroyed and its space returns to its aggregate; the maps of its LUNs
    /// go with them.
    VolDestroy {
        /// The volume.
        name: String,
    },
    /// `vol size NAME [[+|-]SIZE]`: the volume's size, or a new one (a
    /// shrink must leave room for what the volume holds and reserves).
    VolSize {
        /// The volume.
        name: String,
        /// The new size, or by how much it grows or shrinks; none: show it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        size: Option<SizeChange>,
    },
    /// `vol options VOLUME NAME VALUE`: sets one of the volume options wafer
    /// has (`read_realloc on|off`; `guarantee`, `fractional_reserve` and
    /// `schedsnapname` only to the one value wafer keeps).
    VolOptionSet {
        /// The volume.
        volume: String,
        /// The option.
        name: String,
        /// Its new value.
        value: String,
    },
    /// `lun create -s SIZE [-t OSTYPE] [-o noreserve] PATH`
    /// (`/vol/VOLUME/LUN`).
    LunCreate {
        /// `/vol/VOLUME/LUN`.
        path: String,
        /// Its size.
        size_bytes: u64,
        /// Its OS type as ONTAP names it (`vmware`, `linux`, ...);
        /// `image` if none.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ostype: Option<String>,
        /// Whether the LUN is thin: no space reserved for it.
        #[serde(default)]
        noreserve: bool,
    },
    /// `lun show`: every LUN of every volume.
    LunShow,
    /// `lun resize [-f] PATH [+|-]SIZE`: a shrink is refused without `force`.
    LunResize {
        /// `/vol/VOLUME/LUN`.
        path: String,
        /// The new size, or by how much it grows or shrinks.
        size: SizeChange,
        /// Shrink even though the data beyond the new size is lost.
        #[serde(default)]
        force: bool,
    },
    /// `lun destroy [-f] PATH`: refused without `force` while an NBD
    /// connection has the LUN open.
    LunDestroy {
        /// `/vol/VOLUME/LUN`.
        path: String,
        /// Destroy it even though clients have it open.
        #[serde(default)]
        force: bool,
    },
    /// `snap create VOLUME NAME`; answered when the snapshot's CP has committed.
    SnapCreate {
        /// The volume.
        volume: String,
        /// The snapshot's name.
        name: String,
    },
    /// `snap list VOLUME`.
    SnapList {
        /// The volume.
        volume: String,
    },
    /// `snap delete VOLUME NAME`.
    SnapDelete {
        /// The volume.
        volume: String,
        /// The snapshot.
        name: String,
    },
    /// `snap restore VOLUME NAME [LUN]`: the whole volume, or one LUN (by name
    /// or path) that exists now.
    SnapRestore {
        /// The volume.
        volume: String,
        /// The snapshot.
        name: String,
        /// The LUN, or none for every LUN of the volume.
        #[serde(default)]
        lun: Option<String>,
    },
    /// `df`: every volume's space.
    Df,
    /// `df -A` of the first aggregate (`aggr0`): its space.
    DfAggregate,
    /// `df -A`: every serving aggregate's space.
    DfAggregates,
    /// The first aggregate's (`aggr0`'s) status: RAID groups, disks with
    /// roles and states, spares.
    AggrStatus,
    /// `aggr status`: every aggregate's status, failed and offline ones
    /// included.
    AggrStatusAll,
    /// `aggr create NAME [-t raid_dp|raid4] [-r RAIDSIZE] NDISKS`: a new
    /// aggregate on NDISKS disks (pool spares first, then new disk files as
    /// large as the node's disks), in RAID groups of at most RAIDSIZE disks.
    AggrCreate {
        /// Its name.
        name: String,
        /// `raid_dp` or `raid4`.
        raid_type: String,
        /// Disks per RAID group at most (ONTAP's default: 16 for RAID-DP,
        /// 8 for RAID-4).
        #[serde(default)]
        raid_size: Option<u16>,
        /// Disks in all (parity included).
        disks: u16,
    },
    /// `aggr add NAME [-g new|rgN] NDISKS`: NDISKS blank disks join an
    /// online aggregate (pool spares first, then new disk files as large as
    /// its disks): by default they fill its last RAID group up to its
    /// raidsize, then make new groups of raidsize; `new` puts them all in
    /// new groups, `rgN` all in the last group, `rgN`.
    AggrAdd {
        /// The aggregate.
        name: String,
        /// `new` or `rgN`; none: fill the last group, then new ones.
        #[serde(default)]
        group: Option<String>,
        /// Disks to add.
        disks: u16,
        /// `-T`: `SAS` (hard disks; none means them too) or `SSD`: a Flash
        /// Pool's cache, in new RAID groups of their own, refused unless
        /// the aggregate's `hybrid_enabled` is on.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        disk_type: Option<String>,
        /// `-t raid_dp|raid4`: the new SSD groups' RAID type (none: the
        /// aggregate's last SSD group's, else its HDD groups').
        #[serde(default, skip_serializing_if = "Option::is_none")]
        raid_type: Option<String>,
        /// `-r RAIDSIZE`: the new SSD groups' size at most (none: the last
        /// SSD group's, else ONTAP's default for the RAID type).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        raid_size: Option<u16>,
        /// `NDISKS@SIZE`: bytes of each new disk (none: as large as the
        /// disks of the groups they join or are made like).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        disk_bytes: Option<u64>,
    },
    /// `aggr options NAME OPTION VALUE`: sets an aggregate option
    /// (`hybrid_enabled on|off`), answered once a CP has recorded it; `aggr
    /// options NAME` is read from `aggr status`.
    AggrOptionSet {
        /// The aggregate.
        name: String,
        /// The option.
        option: String,
        /// Its new value.
        value: String,
    },
    /// `aggr offline NAME`: it serves no more, everything committed.
    AggrOffline {
        /// The aggregate.
        name: String,
    },
    /// `aggr online NAME`: an offline aggregate mounts again.
    AggrOnline {
        /// The aggregate.
        name: String,
    },
    /// `aggr destroy NAME`: an offline (or failed) aggregate leaves the
    /// node; its disk files become blank pool spares.
    AggrDestroy {
        /// The aggregate.
        name: String,
    },
    /// `disk fail [-a AGGR] DISK`: fail a disk for good (by name, or by
    /// slot number: of AGGR's slots, else of the first aggregate's).
    DiskFail {
        /// The disk's name or slot number.
        disk: String,
        /// The aggregate whose disk it is; a slot number needs it but for
        /// the first aggregate.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        aggregate: Option<String>,
    },
    /// `disk replace [-a AGGR] DISK`: a new blank disk file joins as a spare
    /// to take the place of failed disk DISK; the filer rebuilds onto it.
    DiskReplace {
        /// The failed disk's name or slot number.
        disk: String,
        /// The aggregate whose disk it is, as for `DiskFail`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        aggregate: Option<String>,
    },
    /// `disk add`: a new blank disk file, as large as the largest disk a RAID
    /// group uses, joins as a spare; a failed disk waiting for one is rebuilt
    /// onto it.
    DiskAdd,
    /// `disk remove DISK`: a broken disk (failed and replaced by a spare)
    /// leaves the configuration and its file is deleted.
    DiskRemove {
        /// The broken disk's name.
        disk: String,
    },
    /// `aggr scrub start [AGGR]`: verify and repair every stripe of AGGR,
    /// or of every online aggregate, in the background.
    AggrScrubStart {
        /// The aggregate; none: every online one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        aggregate: Option<String>,
    },
    /// `aggr scrub stop [AGGR]`: AGGR's scrub, or every one running.
    AggrScrubStop {
        /// The aggregate; none: every one scrubbing.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        aggregate: Option<String>,
    },
    /// `sysstat`: a snapshot of every counter.
    Sysstat,
    /// `stats show ext_cache_obj`: the Flash Cache's counters.
    StatsShowExtCacheObj,
    /// `stats show wafl_hya_per_aggr`: each hybrid aggregate's Flash Pool
    /// counters.
    StatsShowWaflHyaPerAggr,
    /// `reallocate measure PATH`: how contiguously a LUN lies on disk.
    ReallocateMeasure {
        /// `/vol/VOLUME/LUN`.
        path: String,
    },
    /// `reallocate start PATH`: rewrite a LUN contiguously, a batch per CP,
    /// in the background (replacing any reallocation in progress).
    ReallocateStart {
        /// `/vol/VOLUME/LUN`.
        path: String,
    },
    /// `reallocate status`: the reallocation in progress, if any.
    ReallocateStatus,
    /// `reallocate quiesce [PATH]`: the reallocation in progress marks no
    /// more blocks until restarted.
    ReallocateQuiesce {
        /// The LUN it must be on; none: whichever.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        path: Option<String>,
    },
    /// `reallocate restart [PATH]`: a quiesced reallocation goes on.
    ReallocateRestart {
        /// The LUN it must be on; none: whichever.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        path: Option<String>,
    },
    /// `reallocate stop [PATH]`: the reallocation in progress ends.
    ReallocateStop {
        /// The LUN it must be on; none: whichever.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        path: Option<String>,
    },
    /// `priority set volume VOLUME cache=POLICY`: how the volume's blocks
    /// age in the buffer cache.
    PrioritySetCache {
        /// The volume.
        volume: String,
        /// `keep`, `reuse` or `default`.
        cache: String,
    },
    /// `priority show volume [VOLUME]`: the cache policy of VOLUME, or of
    /// every volume.
    PriorityShowVolume {
        /// The volume; none: every volume.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        volume: Option<String>,
    },
    /// `snap reserve VOLUME PERCENT`: the share of the volume's size set
    /// aside for snapshots.
    SnapReserveSet {
        /// The volume.
        volume: String,
        /// The percentage (at most the engine's maximum).
        percent: u32,
    },
    /// `snap reserve [VOLUME]`: VOLUME's snapshot reserve, or every volume's.
    SnapReserve {
        /// The volume; none: every volume.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        volume: Option<String>,
    },
    /// `snap sched VOLUME WEEKLY NIGHTLY HOURLY[@HOURS]`: how many
    /// snapshots of each kind VOLUME keeps, and the hours (UTC) of the
    /// hourly ones.
    SnapSchedSet {
        /// The volume.
        volume: String,
        /// Weekly snapshots kept.
        weekly: String,
        /// Nightly snapshots kept.
        nightly: String,
        /// Hourly snapshots kept, with `@HOURS` if not every hour.
        hourly: String,
    },
    /// `snap sched [VOLUME]`: VOLUME's snapshot schedule, or every volume's.
    SnapSched {
        /// The volume; none: every volume.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        volume: Option<String>,
    },
    /// `igroup create -i|-n -t OSTYPE NAME [INITIATOR...]`.
    IgroupCreate {
        /// The igroup's name.
        name: String,
        /// Its initiators' protocol.
        protocol: Protocol,
        /// The hosts' operating system type.
        ostype: String,
        /// Its first initiators.
        initiators: Vec<String>,
    },
    /// `igroup add NAME INITIATOR`.
    IgroupAdd {
        /// The igroup.
        name: String,
        /// The initiator.
        initiator: String,
    },
    /// `igroup remove [-f] NAME INITIATOR`.
    IgroupRemove {
        /// The igroup.
        name: String,
        /// The initiator.
        initiator: String,
        /// Even though LUNs are mapped to the igroup.
        force: bool,
    },
    /// `igroup destroy [-f] NAME`.
    IgroupDestroy {
        /// The igroup.
        name: String,
        /// Unmap its LUNs first.
        force: bool,
    },
    /// `igroup show`: every igroup.
    IgroupShow,
    /// `lun map PATH IGROUP [LUN_ID]`.
    LunMap {
        /// `/vol/VOLUME/LUN` or `/vol/VOLUME/LUN@SNAPSHOT` (read-only).
        path: String,
        /// The igroup.
        igroup: String,
        /// The LUN ID; the lowest free one if absent.
        lun_id: Option<u16>,
    },
    /// `lun unmap PATH IGROUP`.
    LunUnmap {
        /// The LUN.
        path: String,
        /// The igroup.
        igroup: String,
    },
    /// `lun show -m`: every map.
    LunMaps,
    /// `lun offline PATH`: no host reads or writes the LUN until `lun
    /// online`; kept in `wafer.toml` across restarts.
    LunOffline {
        /// `/vol/VOLUME/LUN`.
        path: String,
    },
    /// `lun online PATH`: the LUN serves again.
    LunOnline {
        /// `/vol/VOLUME/LUN`.
        path: String,
    },
    /// `iscsi security add -i INITIATOR -s METHOD ...` (`-i default` for
    /// the default).
    IscsiSecurityAdd {
        /// The entry, secrets included.
        entry: SecurityEntry,
    },
    /// `iscsi security show`: user names, never secrets.
    IscsiSecurityShow,
    /// `iscsi security delete -i INITIATOR`.
    IscsiSecurityDelete {
        /// The initiator (or `default`).
        initiator: String,
    },
}

/// What `aggr add` asks for, as the engine thread takes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AggrAddition {
    /// `-g`: `new` or `rgN`.
    pub group: Option<String>,
    /// NDISKS.
    pub disks: u16,
    /// `-T`: `SAS` or `SSD`.
    pub disk_type: Option<String>,
    /// `-t`: the new SSD groups' RAID type.
    pub raid_type: Option<String>,
    /// `-r`: the new SSD groups' size at most.
    pub raid_size: Option<u16>,
    /// `@SIZE`: bytes of each new disk.
    pub disk_bytes: Option<u64>,
}

/// One hybrid aggregate's Flash Pool, as ONTAP's `wafl_hya_per_aggr`
/// object counts it: 4 KiB blocks; counters are totals since the aggregate
/// mounted (the cache's contents persist, its counters start again at 0);
/// percentages are whole.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlashPoolStats {
    /// The aggregate.
    pub aggregate: String,
    /// Data blocks of its SSD groups (`ssd_total`).
    pub ssd_total: u64,
    /// SSD blocks in use (`ssd_used`).
    pub ssd_used: u64,
    /// Copies in the read cache (`ssd_read_cached`).
    pub ssd_read_cached: u64,
    /// Blocks in the write cache, their only copy (`ssd_write_cached`).
    pub ssd_write_cached: u64,
    /// Data blocks read from SSD instead of HDD (`read_ops_replaced`).
    pub read_ops_replaced: u64,
    /// Data blocks read from HDD.
    pub hdd_read_blks: u64,
    /// Of the data blocks read from disk, the share SSD served, in percent.
    pub read_ops_replaced_percent: u64,
    /// Data blocks CPs wrote to the write cache (`wc_write_blks_total`).
    pub wc_write_blks_total: u64,
    /// Data blocks CPs wrote to HDD.
    pub hdd_write_blks_total: u64,
    /// Of the data blocks CPs wrote, the share the write cache took, in
    /// percent (`write_blks_replaced_percent`).
    pub write_blks_replaced_percent: u64,
    /// Copies inserted into the read cache (`read_cache_ins`).
    pub read_cache_ins: u64,
    /// Write-cached blocks the eviction scanner sent to HDD (`evict_destage`).
    pub evict_destage: u64,
    /// Read-cached copies the scanner dropped (`evict_remove`).
    pub evict_remove: u64,
    /// Eviction scanner passes.
    pub scanner_passes: u64,
    /// Write-cache candidates put on HDD because the SSDs were full.
    pub ssd_full_rejects: u64,
}

/// A LUN's new size: `{"to": BYTES}`, `{"grow": BYTES}` or `{"shrink": BYTES}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SizeChange {
    /// Becomes this many bytes (`SIZE`).
    To(u64),
    /// Grows by this many bytes (`+SIZE`).
    Grow(u64),
    /// Shrinks by this many bytes (`-SIZE`).
    Shrink(u64),
}

impl SizeChange {
    /// The size a LUN of `from` bytes takes, or why it cannot.
    pub fn applied_to(self, from: u64) -> Result<u64, String> {
        match self {
            SizeChange::To(bytes) => Ok(bytes),
            SizeChange::Grow(by) => from
                .checked_add(by)
                .ok_or_else(|| format!("{from} bytes grown by {by} is too large")),
            SizeChange::Shrink(by) => from
                .checked_sub(by)
                .ok_or_else(|| format!("{from} bytes cannot shrink by {by}")),
        }
    }
}

/// A size as ONTAP writes it: in the largest of t, g, m and k it is a whole
/// number of, else in bytes.
pub fn ontap_size(bytes: u64) -> String {
    [(40, 't'), (30, 'g'), (20, 'm'), (10, 'k')]
        .iter()
        .find(|(shift, _)| bytes != 0 && bytes.is_multiple_of(1u64 << shift))
        .map_or(bytes.to_string(), |(shift, unit)| {
            format!("{}{unit}", bytes >> shift)
        })
}

/// The answer to one request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AdminResponse {
    /// It was done; here is what it returns.
    Ok(AdminReply),
    /// It was refused or failed.
    Error(AdminError),
}

/// What a successful request returns.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "data", rename_all = "snake_case")]
pub enum AdminReply {
    /// A change is done (and durable).
    Done {
        /// What was done, in a sentence.
        message: String,
    },
    /// `vol status`.
    Volumes(Vec<VolumeStatus>),
    /// `vol size NAME`.
    VolumeSize {
        /// The volume.
        volume: String,
        /// Its size.
        size_bytes: u64,
    },
    /// `lun show`.
    Luns(Vec<LunStatus>),
    /// `snap list`.
    Snapshots {
        /// The volume.
        volume: String,
        /// Its snapshots, oldest first.
        snapshots: Vec<SnapshotStatus>,
    },
    /// `df`.
    VolumeSpace(Vec<VolumeSpaceStatus>),
    /// `df -A` of one aggregate.
    AggregateSpace(AggregateSpaceStatus),
    /// `df -A`: every serving aggregate.
    AggregateSpaces(Vec<AggregateSpaceStatus>),
    /// `aggr status` of one aggregate.
    Aggregate(Box<AggregateStatus>),
    /// `aggr status`: every aggregate.
    Aggregates(Vec<AggregateStatus>),
    /// `sysstat`.
    Sysstat(Box<SysstatReport>),
    /// `stats show ext_cache_obj`.
    ExtCacheObj(Box<FlashCacheStatus>),
    /// `stats show wafl_hya_per_aggr`: each hybrid aggregate's Flash Pool.
    WaflHyaPerAggr(Vec<FlashPoolStats>),
    /// `reallocate measure`.
    ReallocateMeasure(ReallocationMeasure),
    /// `reallocate status`: the reallocation in progress, if any.
    Reallocation(Option<ReallocationStatus>),
    /// `igroup show`.
    Igroups(Vec<IgroupStatus>),
    /// `lun show -m`: the maps.
    LunMaps(Vec<LunMapStatus>),
    /// `iscsi security show`.
    IscsiSecurity(Vec<SecurityStatus>),
    /// `priority show volume`: each volume's cache policy.
    VolumePriorities(Vec<VolumePriorityStatus>),
    /// `snap reserve`: each volume's snapshot reserve.
    SnapReserves(Vec<SnapReserveStatus>),
    /// `snap sched`: each volume's snapshot schedule.
    SnapScheds(Vec<SnapSchedStatus>),
}

/// The volume options every wafer volume holds at one value, in `vol
/// options`'s order: scheduled snapshots are numbered (`hourly.0`), a
/// volume's size is taken from its aggregate when it is created, and
/// overwrites of blocks snapshots hold are reserved in full.
pub const FIXED_VOLUME_OPTIONS: [(&str, &str); 3] = [
    ("schedsnapname", "ordinal"),
    ("guarantee", "volume"),
    ("fractional_reserve", "100"),
];

/// `snap sched`'s usage, as ONTAP prints it: the CLI's, and the server's
/// refusal of a schedule it cannot read ends with it.
pub const SNAP_SCHED_USAGE: &str =
    "snap sched [-A | -V] [<vol_name> [weeks [days [hours[@list]]]]]";

/// One volume in `snap sched`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapSchedStatus {
    /// The volume.
    pub volume: String,
    /// Weekly snapshots kept (taken at 00:00 UTC each Sunday).
    pub weekly: u8,
    /// Nightly snapshots kept (taken at 00:00 UTC on the other days).
    pub nightly: u8,
    /// Hourly snapshots kept.
    pub hourly: u8,
    /// The hours (UTC) hourly snapshots are taken at.
    pub hours: Vec<u8>,
}

/// One volume in `priority show volume`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VolumePriorityStatus {
    /// The volume.
    pub volume: String,
    /// `keep`, `reuse` or `default`.
    pub cache: String,
}

/// One volume in `snap reserve`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapReserveStatus {
    /// The volume.
    pub volume: String,
    /// Percent of its size set aside for snapshots.
    pub percent: u8,
    /// What that comes to.
    pub reserve_bytes: u64,
}

/// One igroup in `igroup show`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IgroupStatus {
    /// Its name.
    pub name: String,
    /// Its initiators' protocol.
    pub protocol: Protocol,
    /// The hosts' operating system type.
    pub ostype: String,
    /// Its initiators, with whether each has a session now.
    pub initiators: Vec<InitiatorStatus>,
}

/// One initiator of an igroup.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InitiatorStatus {
    /// Its name.
    pub name: String,
    /// Whether it has a session now.
    pub logged_in: bool,
}

/// One map in `lun show -m`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LunMapStatus {
    /// The LUN.
    pub path: String,
    /// The igroup.
    pub igroup: String,
    /// The LUN ID.
    pub lun_id: u16,
    /// The igroup's protocol.
    pub protocol: Protocol,
}

/// One entry in `iscsi security show`: no secrets.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SecurityStatus {
    /// The initiator, or `default`.
    pub initiator: String,
    /// `chap`, `none` or `deny`.
    pub method: Method,
    /// CHAP: the initiator's user name.
    pub inbound_user: Option<String>,
    /// Mutual CHAP: the target's user name.
    pub outbound_user: Option<String>,
}

/// What `reallocate measure` found.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReallocationMeasure {
    /// The LUN.
    pub path: String,
    /// Optimization rating, 1 (contiguous) to 10 (not optimal).
    pub rating: u8,
    /// The rating of the worst 1% of the LUN.
    pub hotspot: u8,
    /// The rating above which ONTAP reallocates.
    pub threshold: u8,
    /// ONTAP's line for it (`Allocation check on '…' is …`).
    pub message: String,
}

/// A reallocation in progress (`reallocate status`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReallocationStatus {
    /// The LUN.
    pub path: String,
    /// Blocks rewritten so far.
    pub blocks_done: u64,
    /// Blocks of the LUN.
    pub blocks_total: u64,
    /// Whether it is quiesced (`reallocate quiesce`).
    #[serde(default)]
    pub quiesced: bool,
}

/// Why a request failed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdminError {
    /// The kind of failure.
    pub kind: AdminErrorKind,
    /// What happened, in a sentence.
    pub message: String,
}

/// Kinds of admin failure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AdminErrorKind {
    /// The request is malformed or not allowed.
    Invalid,
    /// No such volume, LUN, snapshot or disk.
    NotFound,
    /// The name is taken.
    Exists,
    /// Not enough space.
    NoSpace,
    /// Data or a file could not be read or written.
    Io,
    /// The server is stopping.
    ShuttingDown,
}

/// One volume in `vol status`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VolumeStatus {
    /// Its name.
    pub name: String,
    /// Its id in the aggregate.
    pub id: u32,
    /// Always `online` while the server serves it.
    pub state: String,
    /// Its nominal size.
    pub size_bytes: u64,
    /// How many LUNs it holds.
    pub luns: usize,
    /// How many snapshots it holds.
    pub snapshots: usize,
    /// The aggregate that holds it.
    #[serde(default)]
    pub aggregate: String,
    /// Its RAID type: its aggregate's groups'.
    #[serde(default)]
    pub raid_type: String,
    /// Whether sequential reads of scattered blocks rewrite them together
    /// (`read_realloc`).
    #[serde(default)]
    pub read_realloc: bool,
}

/// One LUN in `lun show`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LunStatus {
    /// `/vol/VOLUME/LUN`.
    pub path: String,
    /// Its volume.
    pub volume: String,
    /// Its name.
    pub name: String,
    /// Its size.
    pub size_bytes: u64,
    /// Its inode number in the volume.
    pub file_id: u32,
    /// Its LUN ID: handed out once, kept for its life, never reused; the
    /// empty NBD export name reaches LUN ID 0. None only for a LUN the
    /// server has not yet recorded.
    pub lun_id: Option<u32>,
    /// The NBD export name that serves it.
    pub export: String,
    /// Whether it was taken offline (`lun offline`).
    #[serde(default)]
    pub offline: bool,
    /// Its OS type (`Multiprotocol Type`).
    #[serde(default)]
    pub ostype: String,
    /// Whether its size is reserved in its volume (`Space Reservation`).
    #[serde(default)]
    pub space_reserved: bool,
    /// Bytes it holds in its volume (`Occupied Size`), as of the last CP.
    #[serde(default)]
    pub occupied_bytes: u64,
}

/// One snapshot in `snap list`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotStatus {
    /// Its number in the volume (1..=255).
    pub id: u8,
    /// Its name.
    pub name: String,
    /// The CP whose image it is.
    pub cp: u64,
    /// When it was taken, in nanoseconds since the Unix epoch.
    pub created_unix_ns: u64,
    /// Bytes it holds in all.
    pub held_bytes: u64,
    /// Bytes only it holds: what deleting it frees.
    pub exclusive_bytes: u64,
}

/// One volume in `df`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VolumeSpaceStatus {
    /// The volume.
    pub volume: String,
    /// Nominal size.
    pub size_bytes: u64,
    /// Size less the snapshot reserve: `df`'s total for the active file system.
    pub active_total_bytes: u64,
    /// Set aside for snapshots.
    pub snapshot_reserve_bytes: u64,
    /// Reserved by LUNs.
    pub lun_reserved_bytes: u64,
    /// LUN blocks actually written.
    pub lun_written_bytes: u64,
    /// Metadata of the active file system.
    pub metadata_bytes: u64,
    /// Blocks shared with snapshots, which an overwrite would need again.
    pub overwrite_reserve_bytes: u64,
    /// Blocks only snapshots hold.
    pub snapshot_used_bytes: u64,
    /// Snapshot use beyond the reserve.
    pub snapshot_spill_bytes: u64,
    /// `df` used.
    pub used_bytes: u64,
    /// `df` avail.
    pub available_bytes: u64,
}

/// The aggregate in `df -A`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AggregateSpaceStatus {
    /// The aggregate.
    pub aggregate: String,
    /// Data blocks of every RAID group, less the superblocks.
    pub total_bytes: u64,
    /// Promised to volumes, plus the aggregate's own metadata and CP room.
    pub used_bytes: u64,
    /// What a new volume could take.
    pub available_bytes: u64,
    /// Blocks actually allocated.
    pub allocated_bytes: u64,
}

/// `aggr status`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AggregateStatus {
    /// The aggregate's name.
    pub name: String,
    /// Its node id.
    #[serde(default)]
    pub id: u32,
    /// `online`, or `degraded` while a group has failed disks or is being
    /// reconstructed; `offline`, `failed` (with `failed_reason`), or
    /// `mounting`.
    pub state: String,
    /// Why it failed, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_reason: Option<String>,
    /// The newest committed CP.
    pub committed_cp: u64,
    /// Its raidsize: the most disks `aggr add` puts in a RAID group.
    #[serde(default)]
    pub raid_size: u16,
    /// The option `hybrid_enabled`: SSD RAID groups may be added (from the
    /// engine; false while the aggregate has none: offline or failed).
    #[serde(default)]
    pub hybrid_enabled: bool,
    /// Its RAID groups.
    pub raid_groups: Vec<RaidGroupStatus>,
    /// Its spare disks.
    pub spares: Vec<DiskStatus>,
    /// Its broken disks: failed, replaced by a spare, their files kept until
    /// `disk remove`.
    pub broken: Vec<BrokenDiskStatus>,
    /// The reconstruction onto a spare in progress, if any.
    pub rebuild: Option<RebuildProgress>,
    /// The scrub running, or the last one since the server started.
    pub scrub: Option<ScrubProgress>,
}

/// A scrub (`aggr scrub status`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScrubProgress {
    /// Whether it is still going.
    pub running: bool,
    /// Whether it waits for a failed disk to be rebuilt.
    pub suspended: bool,
    /// The RAID group it is in.
    pub group: usize,
    /// Stripes visited, over every group.
    pub stripes_done: u64,
    /// Stripes in every group.
    pub stripes_total: u64,
    /// Stripes verified (and repaired where needed).
    pub stripes_verified: u64,
    /// Parity blocks rewritten because they disagreed with their stripe.
    pub parity_rewritten: u64,
    /// Data blocks reconstructed and written back.
    pub blocks_repaired: u64,
    /// Stripes left as found: damage beyond what RAID locates and repairs.
    pub stripes_left_alone: u64,
}

/// A reconstruction onto a spare (`aggr status -r`'s "reconstruction N% done").
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RebuildProgress {
    /// The RAID group.
    pub group: usize,
    /// The disk in the slot being rebuilt (the spare, once assigned).
    pub disk: String,
    /// The slot.
    pub slot: u32,
    /// Stripes rebuilt and committed.
    pub stripes_done: u64,
    /// Stripes in all.
    pub stripes_total: u64,
    /// Whether the spare has taken the failed disk's slot yet.
    pub spare_assigned: bool,
}

/// One RAID group in `aggr status`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RaidGroupStatus {
    /// Its number (`rg0` is 0).
    pub group: usize,
    /// `raid_dp` or `raid4`.
    pub raid_type: String,
    /// `normal`, `degraded` with failed disks, or `reconstructing` while a
    /// spare is rebuilt in one of its slots.
    pub state: String,
    /// Blocks of each disk the group uses.
    pub blocks_per_disk: u64,
    /// Failures the group survives.
    pub tolerated_failures: usize,
    /// `hdd`, or `ssd` for a Flash Pool's cache group.
    #[serde(default = "hdd")]
    pub tier: String,
    /// Its disks by position.
    pub disks: Vec<DiskStatus>,
}

/// One disk in `aggr status`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiskStatus {
    /// Its name.
    pub name: String,
    /// The engine's slot number.
    pub slot: u32,
    /// `dparity`, `parity`, `data` or `spare`.
    pub role: String,
    /// Its position in the group (none for a spare).
    pub position: Option<u16>,
    /// In service or failed.
    pub state: DiskState,
    /// Why it failed.
    pub failed_reason: Option<String>,
    /// Its backing file.
    pub file: String,
    /// Its size.
    pub size_bytes: u64,
    /// Its backing file's length: the blocks with their trailers, then the
    /// labels (`aggr status -r`'s Phys).
    #[serde(default)]
    pub physical_bytes: u64,
}

/// A broken disk in `aggr status`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokenDiskStatus {
    /// Its name.
    pub name: String,
    /// Why it failed.
    pub failed_reason: Option<String>,
    /// Its backing file, kept in the data directory until `disk remove`.
    pub file: String,
    /// Its size.
    pub size_bytes: u64,
    /// Its backing file's length: the blocks with their trailers, then the
    /// labels (`aggr status -r`'s Phys).
    #[serde(default)]
    pub physical_bytes: u64,
}

/// `sysstat`: every counter, since the server started.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SysstatReport {
    /// Nanoseconds since the server started.
    pub uptime_ns: u64,
    /// CPU time the server's process has used, user and system, in
    /// nanoseconds (0 where the system does not say).
    #[serde(default)]
    pub cpu_time_ns: u64,
    /// The newest committed CP.
    pub committed_cp: u64,
    /// CPs completed, by `sysstat`'s type letter (T, F, B, H, U, S, Z).
    pub cps_by_type: BTreeMap<String, u64>,
    /// Host changes that waited for a CP (back-to-back).
    pub back_to_back_waits: u64,
    /// Nanoseconds CPs ran, from start to commit.
    pub cp_time_ns: u64,
    /// Stripes written whole.
    pub full_stripes: u64,
    /// Stripes written in part, parity by subtraction.
    pub partial_stripes_subtraction: u64,
    /// Stripes written in part, parity by addition.
    pub partial_stripes_addition: u64,
    /// Stripes reconstructed before a write.
    pub partial_stripes_reconstruct: u64,
    /// Data blocks written by CPs.
    pub data_blocks_written: u64,
    /// Metadata blocks written by CPs.
    pub meta_blocks_written: u64,
    /// Parity blocks written.
    pub parity_blocks_written: u64,
    /// Disk reads for partial-stripe parity.
    pub parity_reads: u64,
    /// Disk reads to merge partial-block writes.
    pub partial_write_reads: u64,
    /// Host reads served from the buffer cache.
    pub cache_hits: u64,
    /// Host reads that went to disk.
    pub cache_misses: u64,
    /// Disk read chains issued for data.
    pub read_chains: u64,
    /// Blocks read in those chains.
    pub read_chain_blocks: u64,
    /// Blocks whose checksum or identity failed on a read and that RAID
    /// repaired (what a scrub repairs is counted in `aggr status`'s scrub).
    pub blocks_repaired: u64,
    /// Blocks reconstructed because their disk is failed.
    pub degraded_reads: u64,
    /// Blocks that could not be recovered.
    pub unrecoverable_blocks: u64,
    /// Blocks written onto a spare by reconstruction.
    pub rebuilt_blocks: u64,
    /// Reconstructions onto a spare completed.
    pub rebuilds_completed: u64,
    /// Per disk, in slot order.
    pub disks: Vec<DiskCountersStatus>,
    /// The NBD front end.
    pub nbd: NbdCountersStatus,
    /// The iSCSI front end (zero from a server before it was counted).
    #[serde(default)]
    pub iscsi: IscsiCountersStatus,
    /// The NVLog file or device.
    #[serde(default)]
    pub nvlog: NvlogCountersStatus,
    /// How long ago the buffer cache's oldest block was last used, at least
    /// (to within the server's 10 s sampling); none while the cache is
    /// empty or every block was used in the last seconds.
    #[serde(default)]
    pub cache_age_ns: Option<u64>,
    /// Each aggregate's CPs (the sums above are theirs).
    #[serde(default)]
    pub aggregates: Vec<AggregateCpStatus>,
    /// The node's Flash Cache, if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flash_cache: Option<FlashCacheStatus>,
    /// Each hybrid aggregate's Flash Pool (`wafl_hya_per_aggr`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flash_pool: Vec<FlashPoolStats>,
}

/// A group's tier where a reply from an older server has none.
fn hdd() -> String {
    "hdd".into()
}

/// The node's Flash Cache: ONTAP's `ext_cache_obj` counters, in 4 KiB
/// blocks since the server started (the cache starts empty at every start),
/// and the `flexscale` options it runs with.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlashCacheStatus {
    /// The file or block device.
    pub device: String,
    /// Its size in blocks (slots).
    pub blocks: u64,
    /// Blocks it holds copies of (`usage` is this over `blocks`).
    pub used: u64,
    /// `flexscale.normal_data_blocks`.
    pub normal_data_blocks: bool,
    /// `flexscale.lopri_blocks`.
    pub lopri_blocks: bool,
    /// Blocks of disk reads looked up (`accesses`).
    pub accesses: u64,
    /// Blocks found (`hit`).
    pub hits: u64,
    /// Blocks not found (`miss`).
    pub misses: u64,
    /// Blocks written into it (`inserts`).
    pub inserts: u64,
    /// Blocks dropped for their slot (`evicts`).
    pub evicts: u64,
    /// Blocks dropped because their home was written (`invalidates`).
    pub invalidates: u64,
    /// Blocks answered from flash instead of disk (`disk_reads_replaced`).
    pub disk_reads_replaced: u64,
    /// Copies that failed their check or could not be read, read from disk
    /// instead.
    pub read_errors: u64,
    /// Whether the device has failed: every read goes to disk since.
    pub failed: bool,
}

/// One aggregate's consistency points, in `sysstat`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AggregateCpStatus {
    /// The aggregate.
    pub aggregate: String,
    /// Its newest committed CP.
    pub committed_cp: u64,
    /// Its CPs completed, by `sysstat`'s type letter.
    pub cps_by_type: BTreeMap<String, u64>,
    /// Host changes to it that waited for a CP (back-to-back).
    pub back_to_back_waits: u64,
    /// Nanoseconds its CPs ran, from start to commit.
    pub cp_time_ns: u64,
}

/// The NVLog thread's counters at one moment: what `sysstat` reports of the
/// NVLog.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NvlogCountersStatus {
    /// Bytes written to the NVLog file (records, terminators, resets).
    pub bytes_written: u64,
    /// Records appended.
    pub appends: u64,
    /// `pwrite` calls.
    pub writes: u64,
    /// `fdatasync` calls: one per group commit.
    pub syncs: u64,
}

/// One disk's counters (`statit`'s raw material).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiskCountersStatus {
    /// The aggregate the disk belongs to (empty from a server before it was
    /// reported).
    #[serde(default)]
    pub aggregate: String,
    /// The disk in the slot.
    pub name: String,
    /// The slot.
    pub slot: u32,
    /// Read I/Os for host data, metadata and repairs.
    pub user_reads: u64,
    /// Blocks those moved.
    pub user_read_blocks: u64,
    /// Read I/Os for partial-stripe parity.
    pub cp_reads: u64,
    /// Blocks those moved.
    pub cp_read_blocks: u64,
    /// Write I/Os.
    pub writes: u64,
    /// Blocks written.
    pub write_blocks: u64,
    /// Sum of the I/Os' times from issue to completion, in nanoseconds.
    pub io_time_ns: u64,
}

/// The NBD front end's counters.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NbdCountersStatus {
    /// Connections open now.
    pub connections_open: u64,
    /// Connections accepted since start.
    pub connections_accepted: u64,
    /// Connections dropped for breaking the protocol.
    pub protocol_errors: u64,
    /// Read requests.
    pub reads: u64,
    /// Bytes read.
    pub read_bytes: u64,
    /// Write requests.
    pub writes: u64,
    /// Bytes written.
    pub write_bytes: u64,
    /// Trim and write-zeroes requests.
    pub trims: u64,
    /// Flush requests.
    pub flushes: u64,
    /// Block-status requests.
    pub block_status: u64,
    /// Requests answered with an error.
    pub errors: u64,
}

/// The iSCSI front end's counters: the block operations its commands
/// asked for.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IscsiCountersStatus {
    /// Read operations.
    pub reads: u64,
    /// Bytes they asked for.
    pub read_bytes: u64,
    /// Write operations.
    pub writes: u64,
    /// Bytes written.
    pub write_bytes: u64,
    /// Deallocations (UNMAP, WRITE SAME with UNMAP).
    pub trims: u64,
    /// Allocation queries (GET LBA STATUS).
    pub allocation_queries: u64,
    /// Verifications (VERIFY, WRITE AND VERIFY's check).
    #[serde(default)]
    pub verifies: u64,
    /// COMPARE AND WRITEs.
    #[serde(default)]
    pub compare_and_writes: u64,
    /// Persistent reservation commands (PERSISTENT RESERVE IN and OUT).
    #[serde(default)]
    pub reservations: u64,
}

/// The CPU time this process has used, user and system, in nanoseconds:
/// `/proc/self/stat`'s utime and stime, in Linux's USER_HZ of 100 ticks a
/// second. None where there is no such file.
pub fn process_cpu_time_ns() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    cpu_time_from_stat(&stat)
}

/// utime + stime of a `/proc/PID/stat` line, in nanoseconds. The fields are
/// counted after the command name's closing parenthesis, since the name may
/// hold spaces.
fn cpu_time_from_stat(stat: &str) -> Option<u64> {
    const NS_PER_TICK: u64 = 1_000_000_000 / 100;
    let after_name = &stat[stat.rfind(')')? + 1..];
    let mut fields = after_name.split_whitespace().skip(11);
    let user: u64 = fields.next()?.parse().ok()?;
    let system: u64 = fields.next()?.parse().ok()?;
    Some((user + system) * NS_PER_TICK)
}

/// Why an admin client's request got no response.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AdminClientError {
    /// The socket could not be reached (is the server running?).
    #[error("cannot connect to {path}: {error} (is `wafer serve` running on that directory?)")]
    Connect {
        /// The socket's path.
        path: String,
        /// The operating system's error.
        error: io::Error,
    },
    /// Sending or receiving failed.
    #[error("admin socket: {0}")]
    Io(io::Error),
    /// The server closed the connection without answering.
    #[error("the server closed the admin connection without answering")]
    Closed,
    /// The answer was not a response this client understands.
    #[error("malformed admin response: {0}")]
    Malformed(serde_json::Error),
}

/// A connection to a running server's admin socket.
#[derive(Debug)]
pub struct AdminClient {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

impl AdminClient {
    /// Connects to the server serving data directory `dir`.
    pub fn connect(dir: &Path) -> Result<AdminClient, AdminClientError> {
        let path = dir.join(ADMIN_SOCKET);
        let stream = UnixStream::connect(&path).map_err(|error| AdminClientError::Connect {
            path: path.display().to_string(),
            error,
        })?;
        Ok(AdminClient {
            reader: BufReader::new(stream.try_clone().map_err(AdminClientError::Io)?),
            writer: stream,
        })
    }

    /// Sends one request and waits for its response.
    pub fn request(&mut self, request: &AdminRequest) -> Result<AdminResponse, AdminClientError> {
        let mut line = serde_json::to_vec(request).expect("an admin request always encodes");
        line.push(b'\n');
        self.writer.write_all(&line).map_err(AdminClientError::Io)?;
        let mut answer = String::new();
        match self.reader.read_line(&mut answer) {
            Ok(0) => Err(AdminClientError::Closed),
            Ok(_) => serde_json::from_str(&answer).map_err(AdminClientError::Malformed),
            Err(error) => Err(AdminClientError::Io(error)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_and_responses_have_a_readable_wire_form() {
        let request = AdminRequest::SnapCreate {
            volume: "vol0".into(),
            name: "s1".into(),
        };
        let text = serde_json::to_string(&request).expect("encodes");
        assert_eq!(
            text,
            r#"{"command":"snap_create","volume":"vol0","name":"s1"}"#
        );
        let parsed: AdminRequest =
            serde_json::from_str(r#"{"command":"snap_restore","volume":"v","name":"s"}"#)
                .expect("lun is optional");
        assert_eq!(
            parsed,
            AdminRequest::SnapRestore {
                volume: "v".into(),
                name: "s".into(),
                lun: None
            }
        );
        let response = AdminResponse::Error(AdminError {
            kind: AdminErrorKind::NotFound,
            message: "no such volume".into(),
        });
        let text = serde_json::to_string(&response).expect("encodes");
        assert_eq!(
            text,
            r#"{"error":{"kind":"not_found","message":"no such volume"}}"#
        );
        let done = AdminResponse::Ok(AdminReply::Done {
            message: "ok".into(),
        });
        let text = serde_json::to_string(&done).expect("encodes");
        assert_eq!(text, r#"{"ok":{"kind":"done","data":{"message":"ok"}}}"#);
    }

    #[test]
    fn cpu_time_is_utime_plus_stime_after_the_name() {
        let stat = "4242 (wafer (x) y) S 1 4242 4242 0 -1 4194560 900 0 0 0 250 50 0 0 20 0";
        assert_eq!(cpu_time_from_stat(stat), Some(300 * 10_000_000));
        assert_eq!(cpu_time_from_stat("garbage"), None);
        assert!(process_cpu_time_ns().is_some(), "Linux has /proc/self/stat");
    }

    #[test]
    fn unknown_commands_and_fields_are_refused() {
        assert!(serde_json::from_str::<AdminRequest>(r#"{"command":"format_disks"}"#).is_err());
        let extra = r#"{"command":"lun_destroy","path":"/vol/v/l","now":true}"#;
        assert!(serde_json::from_str::<AdminRequest>(extra).is_err());
        let missing = r#"{"command":"vol_create","name":"v"}"#;
        assert!(serde_json::from_str::<AdminRequest>(missing).is_err());
    }
}
