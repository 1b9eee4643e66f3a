//! The administrator's commands against a running `wafer serve`, in ONTAP's
//! words and layouts (`docs/research/wafl.md` §12): `aggr status`, `aggr create`, `aggr
//! add`, `aggr scrub`, `vol`, `lun`, `snap` (`snap reserve` too),
//! `priority set|show`, `df`, `disk fail`, `disk replace`, `disk add`,
//! `disk remove`, `sysstat -x` and `stats show ext_cache_obj`.
//!
//! Each command sends requests over the data directory's admin socket
//! (`wafer_server::AdminClient`) and prints the answer as ONTAP would, or, with
//! `--json`, the server's structured answer as one JSON document. Errors the
//! server reports end the command with status 1; a server that cannot be
//! reached, status 2. The formatting lives in `ontap`, as pure functions of the
//! replies, so it is tested without a server.

mod ontap;
mod san;

pub use san::{IgroupCommand, IscsiCommand};

use std::path::Path;
use std::process::ExitCode;
use std::thread;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use wafer_server::admin::{
    AdminClient, AdminError, AdminErrorKind, AdminReply, AdminRequest, AdminResponse,
    SNAP_SCHED_USAGE, SizeChange, SysstatReport,
};

use crate::size::{Size, size_change};

/// Output options every admin command takes.
#[derive(Debug, Args)]
pub struct Output {
    /// Print the server's structured answer as JSON instead of ONTAP's layout.
    #[arg(long)]
    json: bool,
}

/// `wafer aggr`.
#[derive(Debug, Subcommand)]
pub enum AggrCommand {
    /// Every aggregate's state (a failed one with why); -r lists RAID
    /// groups and disks, -v options, volumes and plexes.
    Status {
        /// RAID groups with every disk's role and state, spares.
        #[arg(short = 'r')]
        raid: bool,
        /// Options, volumes, plex and RAID group states.
        #[arg(short = 'v', conflicts_with = "raid")]
        verbose: bool,
        /// Only this aggregate.
        aggr: Option<String>,
        #[command(flatten)]
        output: Output,
    },
    /// Creates an aggregate on NDISKS disks: the node's pool spares first
    /// (disks of destroyed aggregates), then new disk files in the data
    /// directory as large as the node's disks. It serves once its first CP
    /// has committed; only then does wafer.toml name it.
    #[command(
        override_usage = "wafer aggr create <NAME> [-t raid_dp|raid4] [-r RAIDSIZE] <NDISKS>"
    )]
    Create {
        /// The aggregate's name.
        name: String,
        /// The RAID type of its groups.
        #[arg(short = 't', default_value = "raid_dp", value_parser = ["raid_dp", "raid4"])]
        raid_type: String,
        /// Disks per RAID group at most, parity included (default 16 for
        /// raid_dp, 8 for raid4); the last group takes the rest.
        #[arg(short = 'r', value_name = "RAIDSIZE")]
        raid_size: Option<u16>,
        /// Disks in all, parity included.
        ndisks: u16,
        #[command(flatten)]
        output: Output,
    },
    /// Takes an aggregate offline: its last CP commits everything, then its
    /// volumes and LUNs are not served until `aggr online`. Recorded in
    /// wafer.toml: it stays offline across restarts.
    Offline {
        /// The aggregate.
        name: String,
        #[command(flatten)]
        output: Output,
    },
    /// Brings an offline aggregate back online (it mounts from its disks).
    Online {
        /// The aggregate.
        name: String,
        #[command(flatten)]
        output: Output,
    },
    /// Destroys an offline (or failed) aggregate: it leaves wafer.toml, its
    /// in-service disk files are blanked and kept as the node's pool spares
    /// (aggr create uses them first), its failed disks' files are deleted.
    /// Asks first, as ONTAP does, unless -f; without a terminal to ask on,
    /// -f is required.
    Destroy {
        /// Destroy without asking.
        #[arg(short = 'f')]
        force: bool,
        /// The aggregate.
        name: String,
        #[command(flatten)]
        output: Output,
    },
    /// Adds NDISKS blank disks to an online aggregate: the node's pool
    /// spares first, then new disk files as large as its disks. They fill
    /// its last HDD RAID group up to its raidsize, then make new groups of
    /// raidsize; its space grows at once (df -A). With -T SSD they are a
    /// Flash Pool's cache (the aggregate's hybrid_enabled must be on): new
    /// RAID groups of their own, of -t's type and -r's size (by default the
    /// aggregate's), outside its size; NDISKS@SIZE makes them SIZE each
    /// (by default as large as its disks).
    #[command(
        override_usage = "wafer aggr add <NAME> [-T SAS|SSD] [-t raid_dp|raid4] [-r RAIDSIZE] [-g new|rgN] <NDISKS[@SIZE]>"
    )]
    Add {
        /// The aggregate.
        name: String,
        /// The disks' type: SAS (hard disks, the default) or SSD.
        #[arg(short = 'T', value_name = "SAS|SSD", value_parser = ["SAS", "SSD", "sas", "ssd"])]
        disk_type: Option<String>,
        /// The RAID type of new SSD groups (default: the aggregate's).
        #[arg(short = 't', value_parser = ["raid_dp", "raid4"])]
        raid_type: Option<String>,
        /// Disks per new SSD group at most, parity included.
        #[arg(short = 'r', value_name = "RAIDSIZE")]
        raid_size: Option<u16>,
        /// `new`: all in new RAID groups; `rgN`: all in group N, which must
        /// be the last.
        #[arg(short = 'g', value_name = "new|rgN")]
        group: Option<String>,
        /// Disks to add, and optionally each one's size (`3@64m`).
        #[arg(value_name = "NDISKS[@SIZE]", value_parser = disk_count)]
        ndisks: (u16, Option<u64>),
        #[command(flatten)]
        output: Output,
    },
    /// Shows an aggregate's options, or sets one: `aggr options AGGR
    /// [OPTION VALUE]`. The option wafer sets is hybrid_enabled on|off:
    /// whether SSD disks may be added (aggr add -T SSD), a Flash Pool;
    /// it cannot be turned off while the aggregate has SSD groups.
    #[command(override_usage = AGGR_OPTIONS_USAGE)]
    Options {
        /// The aggregate.
        name: String,
        /// The option to set.
        option: Option<String>,
        /// Its new value.
        value: Option<String>,
        #[command(flatten)]
        output: Output,
    },
    /// Scrubbing: every stripe read, verified against its checksums and
    /// parity, and repaired, in the background.
    #[command(subcommand)]
    Scrub(ScrubCommand),
}

/// `wafer aggr scrub`.
#[derive(Debug, Subcommand)]
pub enum ScrubCommand {
    /// Starts a scrub of every RAID group of AGGR, or of every online
    /// aggregate.
    Start {
        /// Only this aggregate.
        aggr: Option<String>,
        #[command(flatten)]
        output: Output,
    },
    /// Stops AGGR's scrub, or every scrub running.
    Stop {
        /// Only this aggregate.
        aggr: Option<String>,
        #[command(flatten)]
        output: Output,
    },
    /// How the scrub running, or the last one, is doing, and what it found.
    Status {
        /// Each RAID group's state and the last scrub's findings (the only
        /// layout wafer has; accepted as ONTAP spells it).
        #[arg(short = 'v')]
        verbose: bool,
        /// Only this aggregate.
        aggr: Option<String>,
        #[command(flatten)]
        output: Output,
    },
}

/// `wafer vol`.
#[derive(Debug, Subcommand)]
pub enum VolCommand {
    /// Every volume's state, or one volume's.
    Status {
        /// Only this volume.
        volume: Option<String>,
        #[command(flatten)]
        output: Output,
    },
    /// Creates a flexible volume: `vol create NAME [AGGR] SIZE` (k, m, g, t
    /// suffixes): in aggregate AGGR, or without it in `aggr0`.
    #[command(override_usage = "wafer vol create <NAME> [AGGR] <SIZE>")]
    Create {
        /// The volume's name.
        name: String,
        /// The containing aggregate, then the size; or the size alone.
        #[arg(num_args = 1..=2, required = true, value_name = "AGGR] [SIZE")]
        rest: Vec<String>,
        #[command(flatten)]
        output: Output,
    },
    /// Shows a volume's size, or sets it: `vol size VOLUME [[+|-]SIZE]`
    /// (k, m, g, t suffixes; +SIZE grows it by SIZE, -SIZE shrinks it). A
    /// volume shrinks only as far as what it holds and its LUNs reserve.
    Size {
        /// The volume.
        name: String,
        /// The new size, or by how much it grows or shrinks.
        #[arg(value_parser = size_change, allow_hyphen_values = true)]
        size: Option<SizeChange>,
        #[command(flatten)]
        output: Output,
    },
    /// Shows a volume's options, or sets one: `vol options VOLUME [NAME
    /// VALUE]`. wafer's are read_realloc (on or off: sequential reads of
    /// scattered blocks rewrite them together in the next CP), and
    /// schedsnapname=ordinal, guarantee=volume and fractional_reserve=100,
    /// which every volume keeps.
    #[command(override_usage = VOL_OPTIONS_USAGE)]
    Options {
        /// The volume.
        name: String,
        /// The option to set.
        option: Option<String>,
        /// Its new value.
        value: Option<String>,
        #[command(flatten)]
        output: Output,
    },
    /// Takes a volume offline: its LUNs answer no I/O (NBD: EIO; iSCSI: NOT
    /// READY) until `vol online`. It stays offline across restarts.
    Offline {
        /// The volume.
        name: String,
        #[command(flatten)]
        output: Output,
    },
    /// Brings an offline volume back online.
    Online {
        /// The volume.
        name: String,
        #[command(flatten)]
        output: Output,
    },
    /// Destroys an offline volume with its LUNs and snapshots; its space
    /// returns to its aggregate (df -A) and the maps of its LUNs go. Asks
    /// first, as ONTAP does, unless -f; without a terminal to ask on, -f is
    /// required.
    Destroy {
        /// Destroy without asking.
        #[arg(short = 'f')]
        force: bool,
        /// The volume.
        name: String,
        #[command(flatten)]
        output: Output,
    },
}

/// `wafer lun`.
#[derive(Debug, Subcommand)]
pub enum LunCommand {
    /// Creates a LUN: `lun create -s SIZE [-t OSTYPE] [-o noreserve]
    /// /vol/VOLUME/LUN`. Its whole size is reserved in the volume unless
    /// `-o noreserve` makes it thin: then it takes space as it is written,
    /// and a write fails (ENOSPC) when the volume is full.
    #[command(
        override_usage = "wafer lun create -s <size> [-t <ostype>] [-o noreserve] <lun_path>"
    )]
    Create {
        /// Its size.
        #[arg(short = 's', value_name = "SIZE")]
        size: Size,
        /// The host's OS type: image (the default), linux, vmware, windows,
        /// windows_gpt, windows_2008, hyper_v, xen, solaris, solaris_efi,
        /// hpux, aix, netware or openvms.
        #[arg(short = 't', value_name = "OSTYPE")]
        ostype: Option<String>,
        /// `noreserve`: reserve no space for the LUN (thin provisioning).
        #[arg(short = 'o', value_name = "noreserve", value_parser = ["noreserve"])]
        option: Option<String>,
        /// `/vol/VOLUME/LUN`.
        path: String,
        #[command(flatten)]
        output: Output,
    },
    /// Every LUN, or the one at PATH; -m shows how each is exported and
    /// mapped.
    Show {
        /// The NBD export that serves each LUN, and its maps.
        #[arg(short = 'm', conflicts_with = "verbose")]
        maps: bool,
        /// Each LUN's space reservation, OS type and occupied size.
        #[arg(short = 'v')]
        verbose: bool,
        /// Only this LUN (`/vol/VOLUME/LUN`).
        path: Option<String>,
        #[command(flatten)]
        output: Output,
    },
    /// Changes a LUN's size: `lun resize [-f] /vol/VOLUME/LUN [+|-]SIZE`.
    Resize {
        /// Shrink even though the data beyond the new size is lost.
        #[arg(short = 'f')]
        force: bool,
        /// `/vol/VOLUME/LUN`.
        path: String,
        /// The new size; +SIZE grows the LUN by SIZE, -SIZE shrinks it by SIZE.
        #[arg(value_parser = size_change, allow_hyphen_values = true)]
        size: SizeChange,
        #[command(flatten)]
        output: Output,
    },
    /// Maps a LUN (or a snapshot's image, `/vol/VOLUME/LUN@SNAPSHOT`,
    /// read-only) to an initiator group at LUN_ID, or the lowest free one.
    Map {
        /// `/vol/VOLUME/LUN` or `/vol/VOLUME/LUN@SNAPSHOT`.
        path: String,
        /// The initiator group.
        igroup: String,
        /// The LUN ID its initiators see it at (0 to 4095).
        lun_id: Option<u16>,
        #[command(flatten)]
        output: Output,
    },
    /// Unmaps a LUN from an initiator group.
    Unmap {
        /// The LUN.
        path: String,
        /// The initiator group.
        igroup: String,
        #[command(flatten)]
        output: Output,
    },
    /// Takes a LUN offline: it keeps its maps, but NBD clients cannot
    /// connect to it and get EIO on connections already open, and iSCSI
    /// commands on it fail NOT READY, until `lun online`; it stays offline
    /// across restarts. Prints nothing, as ONTAP.
    Offline {
        /// `/vol/VOLUME/LUN`.
        path: String,
        #[command(flatten)]
        output: Output,
    },
    /// Brings an offline LUN back online. Prints nothing, as ONTAP.
    Online {
        /// `/vol/VOLUME/LUN`.
        path: String,
        #[command(flatten)]
        output: Output,
    },
    /// Destroys a LUN (snapshots keep what they hold of it); refused while an
    /// NBD client has it open, or it is mapped, unless -f.
    Destroy {
        /// Destroy it even though NBD clients have it open.
        #[arg(short = 'f')]
        force: bool,
        /// `/vol/VOLUME/LUN`.
        path: String,
        #[command(flatten)]
        output: Output,
    },
}

/// `wafer snap`.
#[derive(Debug, Subcommand)]
pub enum SnapCommand {
    /// Takes a snapshot of a volume.
    Create {
        /// The volume.
        volume: String,
        /// The snapshot's name.
        name: String,
        #[command(flatten)]
        output: Output,
    },
    /// A volume's snapshots, newest first, with the space they hold.
    List {
        /// The volume.
        volume: String,
        #[command(flatten)]
        output: Output,
    },
    /// Deletes a snapshot; what only it held becomes free.
    Delete {
        /// The volume.
        volume: String,
        /// The snapshot.
        name: String,
        #[command(flatten)]
        output: Output,
    },
    /// Shows or sets the snapshot reserve: `snap reserve [VOLUME]` shows
    /// VOLUME's (or every volume's), `snap reserve VOLUME PERCENT` sets it
    /// (at most 50%; df's .snapshot row follows). With -A, the aggregates':
    /// wafer sets no space aside for aggregate snapshots (it takes none), so
    /// theirs is always 0% and cannot be set.
    #[command(override_usage = SNAP_RESERVE_USAGE)]
    Reserve {
        /// The aggregates' reserve instead of the volumes'.
        #[arg(short = 'A')]
        aggregate: bool,
        /// The volume (with -A, the aggregate).
        name: Option<String>,
        /// The new reserve, in percent of the volume's size.
        percent: Option<String>,
        #[command(flatten)]
        output: Output,
    },
    /// Shows or sets the snapshot schedule: `snap sched [VOLUME]` shows
    /// VOLUME's (or every volume's); `snap sched VOLUME WEEKLY [NIGHTLY
    /// [HOURLY[@HOURS]]]` sets how many weekly (Sunday 00:00), nightly
    /// (00:00) and hourly snapshots VOLUME keeps, named `weekly.0` (newest)
    /// and so on; HOURS lists the hours of the hourly ones (default: every
    /// hour). Counts left out are 0. Times are UTC. New volumes take no
    /// scheduled snapshots (`0 0 0`), the usual setting for LUN volumes.
    /// With -A, the aggregates': wafer takes no aggregate snapshots.
    #[command(override_usage = SNAP_SCHED_USAGE)]
    Sched {
        /// The aggregates' schedule instead of the volumes'.
        #[arg(short = 'A')]
        aggregate: bool,
        /// The volume (with -A, the aggregate).
        name: Option<String>,
        /// Weekly, nightly and hourly counts, the last with `@HOURS`.
        #[arg(num_args = 0..=3)]
        counts: Vec<String>,
        #[command(flatten)]
        output: Output,
    },
    /// Puts a volume, or one LUN, back as the snapshot holds it:
    /// `snap restore [-t vol|file] -s SNAPSHOT VOLUME|/vol/VOLUME/LUN`.
    #[command(
        override_usage = "wafer snap restore [-f] [-t vol | file] -s <snapshot_name> <vol_name | /vol/vol_name/lun>"
    )]
    Restore {
        /// Restore without asking (wafer never asks; accepted for ONTAP's habit).
        #[arg(short = 'f')]
        force: bool,
        /// What is restored: `vol` (a whole volume) or `file` (one LUN).
        #[arg(short = 't', value_parser = ["vol", "file"])]
        kind: Option<String>,
        /// The snapshot.
        #[arg(short = 's', value_name = "SNAPSHOT", required = true)]
        snapshot: String,
        /// The volume, or `/vol/VOLUME/LUN` for one LUN.
        target: String,
        #[command(flatten)]
        output: Output,
    },
}

/// `wafer df`.
#[derive(Debug, Args)]
pub struct DfArgs {
    /// The aggregate instead of the volumes.
    #[arg(short = 'A')]
    aggregate: bool,
    /// Sizes in KiB, MiB, GiB (ONTAP's -h) instead of kbytes.
    #[arg(short = 'h')]
    human: bool,
    #[command(flatten)]
    output: Output,
    /// Print help (-h is ONTAP's human-readable sizes here).
    #[arg(long, action = clap::ArgAction::Help)]
    help: Option<bool>,
}

/// `wafer disk`.
#[derive(Debug, Subcommand)]
pub enum DiskCommand {
    /// Every disk: RAID group members, spares and broken disks, with their
    /// owner, pool and backing file.
    Show {
        #[command(flatten)]
        output: Output,
    },
    /// Fails a disk for good: its blocks are rebuilt from parity, onto a
    /// spare if there is one.
    Fail {
        /// The aggregate the disk is in: a slot number is its slot (without
        /// -a, the first aggregate's).
        #[arg(short = 'a', value_name = "AGGR")]
        aggr: Option<String>,
        /// The disk's name or slot number.
        disk: String,
        #[command(flatten)]
        output: Output,
    },
    /// Adds a new blank disk file as a spare for a failed disk; it takes the
    /// failed disk's place and is rebuilt in the background.
    Replace {
        /// The aggregate the disk is in, as for disk fail.
        #[arg(short = 'a', value_name = "AGGR")]
        aggr: Option<String>,
        /// The failed disk's name or slot number.
        disk: String,
        #[command(flatten)]
        output: Output,
    },
    /// Adds a new blank disk file as a spare, as large as the aggregate's
    /// disks; a failed disk waiting for a spare is rebuilt onto it.
    Add {
        #[command(flatten)]
        output: Output,
    },
    /// Removes a broken disk (failed, and replaced by a spare): it leaves the
    /// configuration and its file is deleted.
    Remove {
        /// The broken disk's name.
        disk: String,
        #[command(flatten)]
        output: Output,
    },
}

/// `wafer sysstat`.
#[derive(Debug, Args)]
pub struct SysstatArgs {
    /// All columns (the only layout wafer has; accepted for ONTAP's habit).
    #[arg(short = 'x')]
    extended: bool,
    /// Stop after COUNT samples (default: run until interrupted).
    #[arg(short = 'c', value_name = "COUNT")]
    count: Option<u64>,
    /// Seconds between samples.
    #[arg(default_value_t = 15)]
    interval: u64,
    #[command(flatten)]
    output: Output,
}

/// `wafer stats`.
#[derive(Debug, Subcommand)]
pub enum StatsCommand {
    /// `stats show ext_cache_obj`: the Flash Cache's counters (usage,
    /// accesses, hit, miss, hit_percent, inserts, evicts, invalidates,
    /// disk_reads_replaced, and wafer's read_errors and failed), totals
    /// since the server started, as 7-Mode's object:instance:counter:value
    /// lines.
    Show {
        /// The object: `ext_cache_obj` (the Flash Cache) or
        /// `wafl_hya_per_aggr` (each hybrid aggregate's Flash Pool:
        /// ssd_total, ssd_used, ssd_read_cached, ssd_write_cached,
        /// read_ops_replaced(_percent), write_blks_replaced(_percent),
        /// read_cache_ins, evict_destage, evict_remove, wc_write_blks_total).
        #[arg(value_parser = ["ext_cache_obj", "wafl_hya_per_aggr"])]
        object: String,
        #[command(flatten)]
        output: Output,
    },
}

/// `wafer reallocate`.
#[derive(Debug, Subcommand)]
pub enum ReallocateCommand {
    /// Rates how contiguously a LUN lies on disk, from 1 (contiguous) to 10
    /// (not optimal), with the rating of its worst 1%, and prints ONTAP's line.
    Measure {
        /// Once (the only way wafer measures; accepted for ONTAP's habit).
        #[arg(short = 'o')]
        once: bool,
        /// `/vol/VOLUME/LUN`.
        path: String,
        #[command(flatten)]
        output: Output,
    },
    /// Rewrites a LUN contiguously in the background, a batch per CP,
    /// replacing any reallocation in progress.
    Start {
        /// Whatever the measured rating (wafer always reallocates; accepted
        /// for ONTAP's habit).
        #[arg(short = 'f')]
        force: bool,
        /// `/vol/VOLUME/LUN`.
        path: String,
        #[command(flatten)]
        output: Output,
    },
    /// The reallocation in progress, if any.
    Status {
        /// Every field (the only layout wafer has).
        #[arg(short = 'v')]
        verbose: bool,
        /// Only this LUN's.
        path: Option<String>,
        #[command(flatten)]
        output: Output,
    },
    /// Pauses the reallocation in progress: it rewrites no more blocks
    /// (the batch already marked is still written) until restarted.
    Quiesce {
        /// The LUN it must be on.
        path: Option<String>,
        #[command(flatten)]
        output: Output,
    },
    /// Lets a quiesced reallocation go on where it stopped.
    Restart {
        /// The LUN it must be on.
        path: Option<String>,
        #[command(flatten)]
        output: Output,
    },
    /// Ends the reallocation in progress (the batch already marked is
    /// still written); reallocate start begins anew.
    Stop {
        /// The LUN it must be on.
        path: Option<String>,
        #[command(flatten)]
        output: Output,
    },
}

/// `wafer priority`.
#[derive(Debug, Subcommand)]
pub enum PriorityCommand {
    /// `priority set volume VOLUME cache=keep|reuse|default`: how long the
    /// volume's blocks stay in the buffer cache (FlexShare's cache policy).
    #[command(override_usage = PRIORITY_SET_USAGE)]
    Set {
        /// What is set: `volume`.
        #[arg(value_parser = ["volume"])]
        object: String,
        /// The volume.
        volume: String,
        /// `cache=keep`, `cache=reuse` or `cache=default`.
        #[arg(required = true, value_name = "cache=keep|reuse|default")]
        settings: Vec<String>,
        #[command(flatten)]
        output: Output,
    },
    /// `priority show volume [-v] [VOLUME]`: the cache policy `priority
    /// set` gave VOLUME, or every volume. The table has the columns wafer
    /// has, Volume and Cache (no FlexShare service priority, level or
    /// limits); -v prints each volume as a block.
    #[command(override_usage = PRIORITY_SHOW_USAGE)]
    Show {
        /// What is shown: `volume`.
        #[arg(value_parser = ["volume"])]
        object: String,
        /// Each volume as a block of settings.
        #[arg(short = 'v')]
        verbose: bool,
        /// Only this volume.
        volume: Option<String>,
        #[command(flatten)]
        output: Output,
    },
}

/// `priority show`'s usage, as much of ONTAP's as wafer has.
const PRIORITY_SHOW_USAGE: &str = "wafer priority show volume [-v] [<vol_name>]";

/// `aggr options`'s usage, as ONTAP prints it.
const AGGR_OPTIONS_USAGE: &str = "aggr options <aggr-name> [ <option-name> <option-val> ]";

/// `NDISKS[@SIZE]`, as ONTAP's `aggr add` takes it.
fn disk_count(text: &str) -> Result<(u16, Option<u64>), String> {
    let (count, size) = match text.split_once('@') {
        Some((count, size)) => (count, Some(size.parse::<Size>()?.0)),
        None => (text, None),
    };
    let count = count
        .parse::<u16>()
        .map_err(|_| format!("'{count}' is not a number of disks"))?;
    Ok((count, size))
}

/// `vol options`'s usage, as ONTAP prints it.
const VOL_OPTIONS_USAGE: &str = "vol options <vol-name> [ <option-name> <option-val> ]";

/// `snap reserve`'s usage, as ONTAP prints it.
const SNAP_RESERVE_USAGE: &str = "snap reserve [-A | -V] [<vol_name> | <aggr_name>] [percent]";

/// `priority set`'s usage, as much of ONTAP's as wafer has.
const PRIORITY_SET_USAGE: &str = "wafer priority set volume <vol_name> cache=keep|reuse|default";

/// `wafer statit`.
#[derive(Debug, Args)]
#[command(group = clap::ArgGroup::new("phase").required(true))]
pub struct StatitArgs {
    /// Begins collecting: the counters now are kept (in DIR/statit.json).
    #[arg(short = 'b', group = "phase")]
    begin: bool,
    /// Ends collecting and prints the per-second rates since -b.
    #[arg(short = 'e', group = "phase")]
    end: bool,
    #[command(flatten)]
    output: Output,
}

/// Where `statit -b` keeps the counters it begins with.
const STATIT_FILE: &str = "statit.json";

/// `wafer sysconfig`.
#[derive(Debug, Args)]
pub struct SysconfigArgs {
    /// The RAID configuration: every aggregate's groups, spares and broken
    /// disks (the only report wafer has; ONTAP requires -r for it).
    #[arg(short = 'r', required = true)]
    raid: bool,
    #[command(flatten)]
    output: Output,
}

/// `wafer version`.
#[derive(Debug, Args)]
pub struct VersionArgs {
    #[command(flatten)]
    output: Output,
}

/// `version`: the release of this wafer, as ONTAP's `version` words its
/// own. It asks no server: the CLI and the server are one binary.
pub fn version(args: &VersionArgs) -> anyhow::Result<ExitCode> {
    let release = env!("CARGO_PKG_VERSION");
    match args.output.json {
        true => {
            let reply = serde_json::json!({ "kind": "version", "data": { "release": release } });
            println!("{reply:#}");
        }
        false => println!("wafer Release {release} 7-Mode"),
    }
    Ok(ExitCode::SUCCESS)
}

/// An admin command, with the data directory of the server it talks to.
#[derive(Debug)]
pub enum AdminCommand {
    /// `aggr …`.
    Aggr(AggrCommand),
    /// `vol …`.
    Vol(VolCommand),
    /// `lun …`.
    Lun(LunCommand),
    /// `snap …`.
    Snap(SnapCommand),
    /// `df`.
    Df(DfArgs),
    /// `disk …`.
    Disk(DiskCommand),
    /// `sysstat`.
    Sysstat(SysstatArgs),
    /// `sysconfig -r`.
    Sysconfig(SysconfigArgs),
    /// `reallocate …`.
    Reallocate(ReallocateCommand),
    /// `priority …`.
    Priority(PriorityCommand),
    /// `statit -b | -e`.
    Statit(StatitArgs),
    /// `stats show …`.
    Stats(StatsCommand),
    /// `igroup …`.
    Igroup(IgroupCommand),
    /// `iscsi …`.
    Iscsi(IscsiCommand),
}

impl AdminCommand {
    /// Whether the answer, or the error, is to be JSON.
    pub fn json(&self) -> bool {
        let output = match self {
            AdminCommand::Aggr(
                AggrCommand::Status { output, .. }
                | AggrCommand::Create { output, .. }
                | AggrCommand::Offline { output, .. }
                | AggrCommand::Online { output, .. }
                | AggrCommand::Destroy { output, .. }
                | AggrCommand::Add { output, .. }
                | AggrCommand::Options { output, .. },
            )
            | AdminCommand::Aggr(AggrCommand::Scrub(
                ScrubCommand::Start { output, .. }
                | ScrubCommand::Stop { output, .. }
                | ScrubCommand::Status { output, .. },
            ))
            | AdminCommand::Vol(
                VolCommand::Status { output, .. }
                | VolCommand::Create { output, .. }
                | VolCommand::Size { output, .. }
                | VolCommand::Options { output, .. }
                | VolCommand::Offline { output, .. }
                | VolCommand::Online { output, .. }
                | VolCommand::Destroy { output, .. },
            )
            | AdminCommand::Lun(
                LunCommand::Create { output, .. }
                | LunCommand::Show { output, .. }
                | LunCommand::Resize { output, .. }
                | LunCommand::Map { output, .. }
                | LunCommand::Unmap { output, .. }
                | LunCommand::Offline { output, .. }
                | LunCommand::Online { output, .. }
                | LunCommand::Destroy { output, .. },
            )
            | AdminCommand::Snap(
                SnapCommand::Create { output, .. }
                | SnapCommand::List { output, .. }
                | SnapCommand::Delete { output, .. }
                | SnapCommand::Restore { output, .. }
                | SnapCommand::Reserve { output, .. }
                | SnapCommand::Sched { output, .. },
            )
            | AdminCommand::Disk(
                DiskCommand::Show { output }
                | DiskCommand::Fail { output, .. }
                | DiskCommand::Replace { output, .. }
                | DiskCommand::Add { output }
                | DiskCommand::Remove { output, .. },
            ) => output,
            AdminCommand::Reallocate(
                ReallocateCommand::Measure { output, .. }
                | ReallocateCommand::Start { output, .. }
                | ReallocateCommand::Status { output, .. }
                | ReallocateCommand::Quiesce { output, .. }
                | ReallocateCommand::Restart { output, .. }
                | ReallocateCommand::Stop { output, .. },
            )
            | AdminCommand::Priority(
                PriorityCommand::Set { output, .. } | PriorityCommand::Show { output, .. },
            ) => output,
            AdminCommand::Df(args) => &args.output,
            AdminCommand::Sysstat(args) => &args.output,
            AdminCommand::Sysconfig(args) => &args.output,
            AdminCommand::Statit(args) => &args.output,
            AdminCommand::Stats(StatsCommand::Show { output, .. }) => output,
            AdminCommand::Igroup(command) => command.output(),
            AdminCommand::Iscsi(command) => command.output(),
        };
        output.json
    }
}

/// What the server answered: a reply, or its refusal with its kind.
type Asked = Result<AdminReply, AdminError>;

/// Runs an admin command against the server of data directory `data`.
/// With `--json`, a failure is JSON too: `{"error":{"kind":…,"message":…}}`,
/// the server's kinds plus `unreachable` when there is no server.
pub fn run(data: &Path, command: AdminCommand) -> anyhow::Result<ExitCode> {
    let json = command.json();
    let mut client = match AdminClient::connect(data) {
        Ok(client) => client,
        Err(error) if json => {
            let message = format!("no server to administer in {}: {error}", data.display());
            print_error("unreachable", &message);
            return Ok(ExitCode::from(2));
        }
        Err(error) => {
            return Err(anyhow::Error::new(error))
                .with_context(|| format!("no server to administer in {}", data.display()));
        }
    };
    let mut ask = |request: AdminRequest| -> anyhow::Result<Asked> {
        match client.request(&request)? {
            AdminResponse::Ok(reply) => Ok(Ok(reply)),
            AdminResponse::Error(error) => Ok(Err(error)),
        }
    };
    let answer = match command {
        AdminCommand::Aggr(AggrCommand::Status {
            raid,
            verbose,
            aggr: name,
            ..
        }) => {
            let aggregate = named_aggregate(ask(AdminRequest::AggrStatusAll)?, name.as_deref());
            let volumes = match verbose {
                true => Some(ask(AdminRequest::VolStatus)?),
                false => None,
            };
            aggregate.and_then(|a| {
                let text = match (raid, volumes) {
                    (true, _) => ontap::aggr_status_r(&a),
                    (false, Some(volumes)) => ontap::aggr_status_v(&a, &volumes?),
                    (false, None) => ontap::aggr_status(&a),
                };
                Ok((a, text))
            })
        }
        AdminCommand::Aggr(AggrCommand::Create {
            name,
            raid_type,
            raid_size,
            ndisks,
            ..
        }) => done(ask(AdminRequest::AggrCreate {
            name,
            raid_type,
            raid_size,
            disks: ndisks,
        })?),
        AdminCommand::Aggr(AggrCommand::Offline { name, .. }) => {
            done(ask(AdminRequest::AggrOffline { name })?)
        }
        AdminCommand::Aggr(AggrCommand::Online { name, .. }) => {
            done(ask(AdminRequest::AggrOnline { name })?)
        }
        AdminCommand::Aggr(AggrCommand::Destroy { force, name, .. }) => {
            let question = "Are you sure you want to destroy this aggregate?";
            match force || confirmed(question)? {
                true => done(ask(AdminRequest::AggrDestroy { name })?),
                false => Err(unconfirmed("aggr destroy", &format!("aggregate '{name}'"))),
            }
        }
        AdminCommand::Aggr(AggrCommand::Add {
            name,
            disk_type,
            raid_type,
            raid_size,
            group,
            ndisks: (disks, disk_bytes),
            ..
        }) => done(ask(AdminRequest::AggrAdd {
            name,
            group,
            disks,
            disk_type: disk_type.map(|t| t.to_ascii_uppercase()),
            raid_type,
            raid_size,
            disk_bytes,
        })?),
        AdminCommand::Aggr(AggrCommand::Options {
            name,
            option,
            value,
            ..
        }) => match (option, value) {
            (Some(option), Some(value)) => silent(ask(AdminRequest::AggrOptionSet {
                name,
                option,
                value,
            })?),
            (Some(option), None) => Err(refusal(
                AdminErrorKind::Invalid,
                format!("aggr options: '{option}' needs a value\nusage: {AGGR_OPTIONS_USAGE}"),
            )),
            (None, _) => formatted(
                named_aggregate(ask(AdminRequest::AggrStatusAll)?, Some(&name)),
                ontap::aggr_options,
            ),
        },
        AdminCommand::Aggr(AggrCommand::Scrub(ScrubCommand::Start { aggr, .. })) => {
            done(ask(AdminRequest::AggrScrubStart { aggregate: aggr })?)
        }
        AdminCommand::Aggr(AggrCommand::Scrub(ScrubCommand::Stop { aggr, .. })) => {
            done(ask(AdminRequest::AggrScrubStop { aggregate: aggr })?)
        }
        AdminCommand::Aggr(AggrCommand::Scrub(ScrubCommand::Status { aggr, .. })) => formatted(
            named_aggregate(ask(AdminRequest::AggrStatusAll)?, aggr.as_deref()),
            ontap::aggr_scrub_status,
        ),
        AdminCommand::Vol(VolCommand::Status { volume, .. }) => formatted(
            named_volume(ask(AdminRequest::VolStatus)?, volume.as_deref(), "status"),
            ontap::vol_status,
        ),
        AdminCommand::Vol(VolCommand::Options {
            name,
            option,
            value,
            ..
        }) => vol_options(&mut ask, name, option, value)?,
        AdminCommand::Vol(VolCommand::Create { name, rest, .. }) => {
            vol_create(&mut ask, name, &rest)?
        }
        AdminCommand::Vol(VolCommand::Size { name, size, .. }) => {
            let reply = ask(AdminRequest::VolSize { name, size })?;
            formatted(reply, |r| match r {
                AdminReply::VolumeSize { volume, size_bytes } => format!(
                    "vol size: Flexible volume '{volume}' has size {}.",
                    ontap::ontap_size(*size_bytes)
                ),
                AdminReply::Done { message } => message.clone(),
                other => format!("{other:?}"),
            })
        }
        AdminCommand::Vol(VolCommand::Offline { name, .. }) => {
            done(ask(AdminRequest::VolOffline { name })?)
        }
        AdminCommand::Vol(VolCommand::Online { name, .. }) => {
            done(ask(AdminRequest::VolOnline { name })?)
        }
        AdminCommand::Vol(VolCommand::Destroy { force, name, .. }) => {
            let question = format!("Are you sure you want to destroy volume '{name}'?");
            match force || confirmed(&question)? {
                true => done(ask(AdminRequest::VolDestroy { name })?),
                false => Err(unconfirmed("vol destroy", &format!("volume '{name}'"))),
            }
        }
        AdminCommand::Lun(command) => lun(&mut ask, command)?,
        AdminCommand::Snap(command) => snap(&mut ask, command)?,
        AdminCommand::Df(args) => {
            let request = match args.aggregate {
                true => AdminRequest::DfAggregates,
                false => AdminRequest::Df,
            };
            let human = args.human;
            formatted(ask(request)?, |r| ontap::df(r, human))
        }
        AdminCommand::Disk(DiskCommand::Show { .. }) => {
            formatted(ask(AdminRequest::AggrStatusAll)?, ontap::disk_show)
        }
        AdminCommand::Disk(DiskCommand::Fail { disk, aggr, .. }) => {
            done(ask(AdminRequest::DiskFail {
                disk,
                aggregate: aggr,
            })?)
        }
        AdminCommand::Disk(DiskCommand::Replace { disk, aggr, .. }) => {
            done(ask(AdminRequest::DiskReplace {
                disk,
                aggregate: aggr,
            })?)
        }
        AdminCommand::Disk(DiskCommand::Add { .. }) => done(ask(AdminRequest::DiskAdd)?),
        AdminCommand::Disk(DiskCommand::Remove { disk, .. }) => {
            done(ask(AdminRequest::DiskRemove { disk })?)
        }
        AdminCommand::Sysconfig(_) => {
            formatted(ask(AdminRequest::AggrStatusAll)?, ontap::aggr_status_r)
        }
        AdminCommand::Reallocate(ReallocateCommand::Measure { path, .. }) => formatted(
            ask(AdminRequest::ReallocateMeasure { path })?,
            |r| match r {
                AdminReply::ReallocateMeasure(m) => m.message.clone(),
                other => format!("{other:?}"),
            },
        ),
        AdminCommand::Reallocate(ReallocateCommand::Start { path, .. }) => {
            done(ask(AdminRequest::ReallocateStart { path })?)
        }
        AdminCommand::Reallocate(ReallocateCommand::Quiesce { path, .. }) => {
            done(ask(AdminRequest::ReallocateQuiesce { path })?)
        }
        AdminCommand::Reallocate(ReallocateCommand::Restart { path, .. }) => {
            done(ask(AdminRequest::ReallocateRestart { path })?)
        }
        AdminCommand::Reallocate(ReallocateCommand::Stop { path, .. }) => {
            done(ask(AdminRequest::ReallocateStop { path })?)
        }
        AdminCommand::Reallocate(ReallocateCommand::Status { path, .. }) => {
            formatted(ask(AdminRequest::ReallocateStatus)?, |r| {
                ontap::reallocate_status(r, path.as_deref())
            })
        }
        AdminCommand::Priority(PriorityCommand::Set {
            volume, settings, ..
        }) => match cache_setting(&settings) {
            Ok(cache) => silent(ask(AdminRequest::PrioritySetCache { volume, cache })?),
            Err(error) => Err(error),
        },
        AdminCommand::Priority(PriorityCommand::Show {
            verbose, volume, ..
        }) => formatted(ask(AdminRequest::PriorityShowVolume { volume })?, |r| {
            ontap::priority_show(r, verbose)
        }),
        AdminCommand::Sysstat(args) => return sysstat(&mut ask, &args),
        AdminCommand::Statit(args) => statit(&mut ask, data, &args)?,
        AdminCommand::Stats(StatsCommand::Show { object, .. }) => match object.as_str() {
            "wafl_hya_per_aggr" => formatted(
                ask(AdminRequest::StatsShowWaflHyaPerAggr)?,
                ontap::wafl_hya_per_aggr,
            ),
            _ => formatted(
                ask(AdminRequest::StatsShowExtCacheObj)?,
                ontap::ext_cache_obj,
            ),
        },
        AdminCommand::Igroup(command) => san::igroup(&mut ask, command)?,
        AdminCommand::Iscsi(command) => san::iscsi(&mut ask, command)?,
    };
    print_answer(json, answer)
}

/// A reply and its ONTAP rendering, or the refusal.
type Answer = Result<(AdminReply, String), AdminError>;

/// A reply and its ONTAP rendering.
fn formatted(reply: Asked, render: impl Fn(&AdminReply) -> String) -> Answer {
    reply.map(|r| {
        let text = render(&r);
        (r, text)
    })
}

/// Asks `question` on the terminal and says whether the answer was yes;
/// without a terminal on standard input, nobody can say yes.
fn confirmed(question: &str) -> anyhow::Result<bool> {
    use std::io::IsTerminal;
    if !std::io::stdin().is_terminal() {
        return Ok(false);
    }
    eprint!("{question} ");
    let mut answer = String::new();
    std::io::stdin().read_line(&mut answer)?;
    Ok(matches!(answer.trim(), "y" | "yes" | "Y" | "YES"))
}

/// The refusal of `command` when nobody confirmed destroying `what`.
fn unconfirmed(command: &str, what: &str) -> AdminError {
    let message =
        format!("{command}: {what} not destroyed: not confirmed (-f destroys without asking)");
    refusal(AdminErrorKind::Invalid, message)
}

/// A change's reply: the server's sentence saying what was done.
fn done(reply: Asked) -> Answer {
    formatted(reply, |r| match r {
        AdminReply::Done { message } => message.clone(),
        other => format!("{other:?}"),
    })
}

/// A change ONTAP carries out without a word (`lun create`, `snap create`,
/// `snap delete`): nothing is printed, but `--json` still has the reply.
fn silent(reply: Asked) -> Answer {
    formatted(reply, |_| String::new())
}

/// The cache policy of `priority set`'s settings: `cache=` is the one
/// wafer has.
fn cache_setting(settings: &[String]) -> Result<String, AdminError> {
    let mut cache = None;
    for setting in settings {
        match setting.split_once('=') {
            Some(("cache", policy @ ("keep" | "reuse" | "default"))) => {
                cache = Some(policy.to_string());
            }
            _ => {
                let message = format!(
                    "priority set: invalid setting '{setting}'\nusage: {PRIORITY_SET_USAGE}"
                );
                return Err(refusal(AdminErrorKind::Invalid, message));
            }
        }
    }
    cache.ok_or_else(|| refusal(AdminErrorKind::Invalid, PRIORITY_SET_USAGE.into()))
}

/// A client-side refusal, of the same schema as the server's.
fn refusal(kind: AdminErrorKind, message: String) -> AdminError {
    AdminError { kind, message }
}

/// Every aggregate's status, or only aggregate `name`'s.
fn named_aggregate(reply: Asked, name: Option<&str>) -> Asked {
    match (reply?, name) {
        (AdminReply::Aggregates(all), Some(name)) => {
            match all.into_iter().find(|a| a.name == name) {
                Some(one) => Ok(AdminReply::Aggregate(Box::new(one))),
                None => Err(refusal(
                    AdminErrorKind::NotFound,
                    format!("aggr status: No aggregate named '{name}' exists."),
                )),
            }
        }
        (AdminReply::Aggregate(a), Some(name)) if a.name != name => Err(refusal(
            AdminErrorKind::NotFound,
            format!("aggr status: No aggregate named '{name}' exists."),
        )),
        (reply, _) => Ok(reply),
    }
}

/// Every volume's status, or only volume `name`'s (refused in `vol
/// COMMAND`'s words if there is none).
fn named_volume(reply: Asked, name: Option<&str>, command: &str) -> Asked {
    match (reply?, name) {
        (AdminReply::Volumes(volumes), Some(name)) => only(
            volumes,
            |v| v.name == name,
            AdminReply::Volumes,
            format!("vol {command}: No volume named '{name}' exists."),
        ),
        (reply, _) => Ok(reply),
    }
}

/// `vol options VOLUME [NAME VALUE]`: the volume's options, or sets one
/// without a word, as ONTAP does.
fn vol_options(
    ask: &mut impl FnMut(AdminRequest) -> anyhow::Result<Asked>,
    volume: String,
    option: Option<String>,
    value: Option<String>,
) -> anyhow::Result<Answer> {
    Ok(match (option, value) {
        (Some(name), Some(value)) => silent(ask(AdminRequest::VolOptionSet {
            volume,
            name,
            value,
        })?),
        (Some(name), None) => Err(refusal(
            AdminErrorKind::Invalid,
            format!("vol options: '{name}' needs a value\nusage: {VOL_OPTIONS_USAGE}"),
        )),
        (None, _) => formatted(
            named_volume(ask(AdminRequest::VolStatus)?, Some(&volume), "options"),
            ontap::vol_options,
        ),
    })
}

/// Every LUN, or only the one at `path`.
fn named_lun(reply: Asked, path: Option<&str>) -> Asked {
    match (reply?, path) {
        (AdminReply::Luns(luns), Some(path)) => only(
            luns,
            |l| l.path == path,
            AdminReply::Luns,
            format!("lun show: {path}: No such LUN exists"),
        ),
        (reply, _) => Ok(reply),
    }
}

/// The items `keep` keeps, as a reply; refused as not found if none.
fn only<T>(
    items: Vec<T>,
    keep: impl Fn(&T) -> bool,
    reply: impl Fn(Vec<T>) -> AdminReply,
    missing: String,
) -> Asked {
    let kept: Vec<T> = items.into_iter().filter(|i| keep(i)).collect();
    match kept.is_empty() {
        true => Err(refusal(AdminErrorKind::NotFound, missing)),
        false => Ok(reply(kept)),
    }
}

fn print_error(kind: &str, message: &str) {
    let error = serde_json::json!({ "error": { "kind": kind, "message": message } });
    println!("{error:#}");
}

fn print_answer(json: bool, answer: Answer) -> anyhow::Result<ExitCode> {
    let code = match answer.is_ok() {
        true => ExitCode::SUCCESS,
        false => ExitCode::FAILURE,
    };
    match (answer, json) {
        (Ok((reply, _)), true) => println!("{}", serde_json::to_string_pretty(&reply)?),
        (Ok((_, text)), false) => print!("{}", with_newline(text)),
        (Err(error), true) => println!(
            "{}",
            serde_json::to_string_pretty(&AdminResponse::Error(error))?
        ),
        (Err(error), false) => eprintln!("wafer: {}", error.message),
    }
    Ok(code)
}

fn with_newline(text: String) -> String {
    match text.is_empty() || text.ends_with('\n') {
        true => text,
        false => text + "\n",
    }
}

/// `vol create NAME [AGGR] SIZE`: in aggregate AGGR, or without it in the
/// first one (`aggr0`).
fn vol_create(
    ask: &mut impl FnMut(AdminRequest) -> anyhow::Result<Asked>,
    name: String,
    rest: &[String],
) -> anyhow::Result<Answer> {
    let (aggr, size) = match rest {
        [size] => (None, size),
        [aggr, size] => (Some(aggr), size),
        _ => unreachable!("clap takes one or two values"),
    };
    let size: Size = match size.parse() {
        Ok(size) => size,
        Err(error) => {
            let message = format!("vol create: invalid size '{size}': {error}");
            return Ok(Err(refusal(AdminErrorKind::Invalid, message)));
        }
    };
    let aggregates = match ask(AdminRequest::AggrStatusAll)? {
        Ok(AdminReply::Aggregates(all)) => all,
        Ok(other) => bail!("unexpected aggr status reply {other:?}"),
        Err(error) => return Ok(Err(error)),
    };
    let (aggregate, request) = match aggr {
        Some(aggr) => {
            if !aggregates.iter().any(|a| a.name == **aggr) {
                let message = format!("vol create: No aggregate named '{aggr}' exists.");
                return Ok(Err(refusal(AdminErrorKind::NotFound, message)));
            }
            let request = AdminRequest::VolCreateOn {
                name: name.clone(),
                aggregate: aggr.clone(),
                size_bytes: size.0,
            };
            (aggr.clone(), request)
        }
        None => {
            let first = aggregates
                .iter()
                .find(|a| a.id == 0 && (a.state == "online" || a.state == "degraded"))
                .or_else(|| aggregates.first());
            let request = AdminRequest::VolCreate {
                name: name.clone(),
                size_bytes: size.0,
            };
            (first.map_or_else(String::new, |a| a.name.clone()), request)
        }
    };
    Ok(formatted(ask(request)?, |_| {
        format!(
            "Creation of volume '{name}' with size {} on containing aggregate\n\
             '{aggregate}' has completed.",
            ontap::ontap_size(size.0)
        )
    }))
}

fn lun(
    ask: &mut impl FnMut(AdminRequest) -> anyhow::Result<Asked>,
    command: LunCommand,
) -> anyhow::Result<Answer> {
    Ok(match command {
        LunCommand::Create {
            size,
            path,
            ostype,
            option,
            ..
        } => silent(ask(AdminRequest::LunCreate {
            path,
            size_bytes: size.0,
            ostype,
            noreserve: option.is_some(),
        })?),
        LunCommand::Show {
            maps: true, path, ..
        } => {
            let luns = named_lun(ask(AdminRequest::LunShow)?, path.as_deref());
            let maps = ask(AdminRequest::LunMaps)?;
            luns.and_then(|luns| {
                let Ok(AdminReply::LunMaps(maps)) = maps else {
                    return maps.map(|m| (m, String::new()));
                };
                let text = ontap::lun_show_m(&luns) + &san::map_rows(&maps, path.as_deref());
                Ok((AdminReply::LunMaps(maps), text))
            })
        }
        LunCommand::Show {
            verbose: true,
            path,
            ..
        } => formatted(
            named_lun(ask(AdminRequest::LunShow)?, path.as_deref()),
            ontap::lun_show_v,
        ),
        LunCommand::Show { path, .. } => formatted(
            named_lun(ask(AdminRequest::LunShow)?, path.as_deref()),
            ontap::lun_show,
        ),
        LunCommand::Map {
            path,
            igroup,
            lun_id,
            ..
        } => san::lun_map(ask, path, igroup, lun_id)?,
        LunCommand::Unmap { path, igroup, .. } => san::lun_unmap(ask, path, igroup)?,
        LunCommand::Offline { path, .. } => silent(ask(AdminRequest::LunOffline { path })?),
        LunCommand::Online { path, .. } => silent(ask(AdminRequest::LunOnline { path })?),
        LunCommand::Resize {
            force, path, size, ..
        } => done(ask(AdminRequest::LunResize { path, size, force })?),
        LunCommand::Destroy { force, path, .. } => {
            done(ask(AdminRequest::LunDestroy { path, force })?)
        }
    })
}

fn snap(
    ask: &mut impl FnMut(AdminRequest) -> anyhow::Result<Asked>,
    command: SnapCommand,
) -> anyhow::Result<Answer> {
    Ok(match command {
        SnapCommand::Create { volume, name, .. } => {
            silent(ask(AdminRequest::SnapCreate { volume, name })?)
        }
        SnapCommand::List { volume, .. } => {
            let list = ask(AdminRequest::SnapList { volume })?;
            let space = ask(AdminRequest::Df)?;
            list.and_then(|l| {
                let text = ontap::snap_list(&l, &space?);
                Ok((l, text))
            })
        }
        SnapCommand::Delete { volume, name, .. } => {
            silent(ask(AdminRequest::SnapDelete { volume, name })?)
        }
        SnapCommand::Reserve {
            aggregate,
            name,
            percent,
            ..
        } => snap_reserve(ask, aggregate, name, percent)?,
        SnapCommand::Sched {
            aggregate,
            name,
            counts,
            ..
        } => snap_sched(ask, aggregate, name, counts)?,
        SnapCommand::Restore {
            kind,
            snapshot,
            target,
            ..
        } => match restore_target(kind.as_deref(), &target) {
            Ok((volume, None)) => {
                let request = AdminRequest::SnapRestore {
                    volume: volume.clone(),
                    name: snapshot,
                    lun: None,
                };
                formatted(ask(request)?, |_| {
                    format!("Volume {volume}: revert successful.")
                })
            }
            Ok((volume, lun)) => done(ask(AdminRequest::SnapRestore {
                volume,
                name: snapshot,
                lun,
            })?),
            Err(error) => Err(error),
        },
    })
}

/// `snap reserve [-A] [NAME] [PERCENT]`: shows the reserve, or sets a
/// volume's without a word, as ONTAP does. An aggregate's is always 0%.
fn snap_reserve(
    ask: &mut impl FnMut(AdminRequest) -> anyhow::Result<Asked>,
    aggregate: bool,
    name: Option<String>,
    percent: Option<String>,
) -> anyhow::Result<Answer> {
    let usage = || format!("usage: {SNAP_RESERVE_USAGE}");
    Ok(match (aggregate, name, percent) {
        (true, _, Some(_)) => Err(refusal(
            AdminErrorKind::Invalid,
            format!(
                "snap reserve: wafer keeps no aggregate snapshot reserve; it stays 0%\n{}",
                usage()
            ),
        )),
        (true, name, None) => formatted(
            named_aggregate_space(ask(AdminRequest::DfAggregates)?, name.as_deref(), "reserve"),
            ontap::snap_reserve_aggregates,
        ),
        (false, Some(volume), Some(percent)) => match percent.parse::<u32>() {
            Ok(percent) => silent(ask(AdminRequest::SnapReserveSet { volume, percent })?),
            Err(_) => Err(refusal(
                AdminErrorKind::Invalid,
                format!("snap reserve: '{percent}' is not a percentage\n{}", usage()),
            )),
        },
        (false, volume, _) => formatted(
            ask(AdminRequest::SnapReserve { volume })?,
            ontap::snap_reserve,
        ),
    })
}

/// `snap sched [-A] [NAME [WEEKLY [NIGHTLY [HOURLY]]]]`: shows schedules,
/// or sets a volume's without a word, as ONTAP does. An aggregate's is
/// always `0 0 0`.
fn snap_sched(
    ask: &mut impl FnMut(AdminRequest) -> anyhow::Result<Asked>,
    aggregate: bool,
    name: Option<String>,
    counts: Vec<String>,
) -> anyhow::Result<Answer> {
    Ok(match (aggregate, name) {
        (true, _) if !counts.is_empty() => Err(refusal(
            AdminErrorKind::Invalid,
            format!(
                "snap sched: wafer takes no aggregate snapshots; their schedule stays 0 0 0
                 usage: {SNAP_SCHED_USAGE}"
            ),
        )),
        (true, name) => formatted(
            named_aggregate_space(ask(AdminRequest::DfAggregates)?, name.as_deref(), "sched"),
            ontap::snap_sched_aggregates,
        ),
        (false, Some(volume)) if !counts.is_empty() => {
            let count = |n: usize| counts.get(n).cloned().unwrap_or_else(|| "0".into());
            silent(ask(AdminRequest::SnapSchedSet {
                volume,
                weekly: count(0),
                nightly: count(1),
                hourly: count(2),
            })?)
        }
        (false, volume) => formatted(ask(AdminRequest::SnapSched { volume })?, ontap::snap_sched),
    })
}

/// Every serving aggregate's space, or only aggregate `name`'s (refused
/// in `snap COMMAND`'s words if there is none).
fn named_aggregate_space(reply: Asked, name: Option<&str>, command: &str) -> Asked {
    match (reply?, name) {
        (AdminReply::AggregateSpaces(all), Some(name)) => only(
            all,
            |a| a.aggregate == name,
            AdminReply::AggregateSpaces,
            format!("snap {command}: No aggregate named '{name}' exists."),
        ),
        (reply, _) => Ok(reply),
    }
}

/// What `snap restore [-t vol|file] TARGET` restores: a volume, or with a
/// `/vol/VOLUME/LUN` path one LUN (`-t file`, or no -t).
fn restore_target(
    kind: Option<&str>,
    target: &str,
) -> Result<(String, Option<String>), AdminError> {
    let lun = target
        .strip_prefix("/vol/")
        .and_then(|rest| rest.split_once('/'));
    match (kind, lun) {
        (Some("vol"), Some(_)) | (Some("file"), None) => Err(refusal(
            AdminErrorKind::Invalid,
            format!(
                "snap restore: '{target}' is not a {}\n{SNAP_RESTORE_USAGE}",
                match kind {
                    Some("vol") => "volume name",
                    _ => "path /vol/VOLUME/LUN",
                }
            ),
        )),
        (_, Some((volume, _))) => Ok((volume.to_string(), Some(target.to_string()))),
        (_, None) => Ok((target.to_string(), None)),
    }
}

/// `statit -b` keeps a sample of every counter; `statit -e` takes another
/// and prints the rates between them (its reply, with --json, is the `-e`
/// sample; the `-b` one is in the data directory's statit.json until then).
fn statit(
    ask: &mut impl FnMut(AdminRequest) -> anyhow::Result<Asked>,
    data: &Path,
    args: &StatitArgs,
) -> anyhow::Result<Answer> {
    let file = data.join(STATIT_FILE);
    let sample = ask(AdminRequest::Sysstat)?;
    if args.begin {
        if let Ok(reply) = &sample {
            std::fs::write(&file, serde_json::to_vec(reply)?)
                .with_context(|| format!("statit -b: cannot write {}", file.display()))?;
        }
        return Ok(silent(sample));
    }
    let Ok(begun) = std::fs::read(&file) else {
        let message = "statit -e: statistics collection has not begun (statit -b)".to_string();
        return Ok(Err(refusal(AdminErrorKind::Invalid, message)));
    };
    let begun: AdminReply = serde_json::from_slice(&begun)
        .with_context(|| format!("statit -e: {} is not a statit sample", file.display()))?;
    let aggregates = ask(AdminRequest::AggrStatusAll)?;
    let answer = sample.and_then(|now| {
        let text = ontap::statit(&begun, &now, &aggregates?);
        Ok((now, text))
    });
    if answer.is_ok() {
        std::fs::remove_file(&file)?;
    }
    Ok(answer)
}

/// `snap restore`'s usage line, as ONTAP prints it.
const SNAP_RESTORE_USAGE: &str = "usage: snap restore [-f] [-t vol | file] [-s <snapshot_name>] \
    [-r <restore_as_path>] <vol_name | restore_from_path>";

/// `sysstat -x`: a line per interval of rates between two counter samples,
/// with the header again every 20 lines, as ONTAP prints it. With `--json`,
/// a line per sample: `{"kind":"sysstat","data":{…}}`, as `--json` wraps
/// every other reply.
fn sysstat(
    ask: &mut impl FnMut(AdminRequest) -> anyhow::Result<Asked>,
    args: &SysstatArgs,
) -> anyhow::Result<ExitCode> {
    if args.interval == 0 {
        bail!("the interval is at least 1 second");
    }
    let json = args.output.json;
    let mut sample = || -> anyhow::Result<Result<Box<SysstatReport>, AdminError>> {
        Ok(match ask(AdminRequest::Sysstat)? {
            Ok(AdminReply::Sysstat(report)) => Ok(report),
            Ok(other) => bail!("unexpected sysstat reply {other:?}"),
            Err(error) => Err(error),
        })
    };
    let mut previous = match sample()? {
        Ok(report) => report,
        Err(error) => return print_answer(json, Err(error)),
    };
    let mut lines = 0u64;
    while args.count.is_none_or(|count| lines < count) {
        thread::sleep(Duration::from_secs(args.interval));
        let current = match sample()? {
            Ok(report) => report,
            Err(error) => return print_answer(json, Err(error)),
        };
        match json {
            true => println!(
                "{}",
                serde_json::to_string(&AdminReply::Sysstat(current.clone()))?
            ),
            false => {
                if lines % 20 == 0 {
                    print!("{}", wafer_lab::report::sysstat::HEADER);
                }
                println!("{}", ontap::sysstat_line(&previous, &current));
            }
        }
        previous = current;
        lines += 1;
    }
    Ok(ExitCode::SUCCESS)
}
