//! ONTAP's layouts for the admin replies (`docs/research/wafl.md` §12), as pure functions.
//!
//! Columns, headings and wording follow 7-Mode's `aggr status`, `vol status`,
//! `lun show`, `snap list`, `df`, `sysstat -x` and `statit`; the last two are
//! printed by the lab's renderers (`wafer_lab::report::{sysstat, statit}`),
//! so the server's and the lab's are one layout. Where ONTAP shows hardware
//! wafer does not have (shelves, bays, FC channels) the column shows `-`; where
//! wafer has something ONTAP does not (NBD exports) it takes the place of the
//! nearest ONTAP notion (a LUN map). Times are UTC.

use std::fmt::Write;

use wafer_lab::report::{statit, sysstat};
use wafer_server::admin::{
    AdminReply, AggregateStatus, DiskCountersStatus, DiskStatus, RaidGroupStatus, SnapshotStatus,
    SysstatReport, VolumeSpaceStatus, VolumeStatus,
};

const MIB: u64 = 1 << 20;

fn unexpected(reply: &AdminReply) -> String {
    format!("unexpected reply from the server: {reply:?}\n")
}

/// The aggregates of an `aggr status` reply: one, or every one.
fn aggregates_of(reply: &AdminReply) -> Option<Vec<&AggregateStatus>> {
    match reply {
        AdminReply::Aggregate(aggr) => Some(vec![aggr]),
        AdminReply::Aggregates(all) => Some(all.iter().collect()),
        _ => None,
    }
}

/// `aggr status`: one table of every aggregate; a failed aggregate's reason
/// follows the table.
pub fn aggr_status(reply: &AdminReply) -> String {
    let Some(aggregates) = aggregates_of(reply) else {
        return unexpected(reply);
    };
    let mut out = String::new();
    for (n, aggr) in aggregates.iter().enumerate() {
        let options = match aggr.state.as_str() {
            "failed" | "offline" | "going offline" => Vec::new(),
            _ if aggr.hybrid_enabled => vec![
                format!("raidsize={},", raid_size(aggr)),
                "hybrid_enabled=on".into(),
            ],
            _ => vec![format!("raidsize={}", raid_size(aggr))],
        };
        let table = status_table(aggr, &options);
        match n {
            0 => out.push_str(&table),
            _ => out.extend(table.lines().skip(1).map(|l| format!("{l}\n"))),
        }
    }
    out.push_str(&failure_reasons(&aggregates));
    out
}

/// Why each failed aggregate failed, a line each.
fn failure_reasons(aggregates: &[&AggregateStatus]) -> String {
    let mut out = String::new();
    for aggr in aggregates {
        if let Some(reason) = &aggr.failed_reason {
            let _ = writeln!(out, "Aggregate {} failed: {reason}", aggr.name);
        }
    }
    out
}

/// The Aggr/State/Status/Options table, one aggregate, options one per line.
fn status_table(aggr: &AggregateStatus, options: &[String]) -> String {
    let statuses = aggregate_statuses(aggr);
    let mut out = format!("{:>15} {:<15} {:<17} Options\n", "Aggr", "State", "Status");
    for n in 0..options.len().max(statuses.len()) {
        let (name, state) = match n {
            0 => (aggr.name.as_str(), aggr_state(aggr)),
            _ => ("", ""),
        };
        let status = statuses.get(n).map_or("", String::as_str);
        let option = options.get(n).map_or("", String::as_str);
        let line = format!("{name:>15} {state:<15} {status:<17} {option}");
        let _ = writeln!(out, "{}", line.trim_end());
    }
    out
}

/// The aggregate's State: ONTAP's states are online, restricted and
/// offline; degraded is a status, so an aggregate serving while degraded
/// (the server's `degraded`) is online.
fn aggr_state(aggr: &AggregateStatus) -> &str {
    match aggr.state.as_str() {
        "degraded" => "online",
        state => state,
    }
}

/// `degraded` or `double degraded` when RAID groups have failed disks not
/// yet being reconstructed: by the most failed disks of any group.
fn degradation(aggr: &AggregateStatus) -> Option<&'static str> {
    let failed = |g: &RaidGroupStatus| {
        g.disks
            .iter()
            .filter(|d| d.state == wafer_server::DiskState::Failed)
            .count()
    };
    match aggr.raid_groups.iter().map(failed).max().unwrap_or(0) {
        0 if aggr.raid_groups.iter().any(|g| g.state == "degraded") => Some("degraded"),
        0 => None,
        1 => Some("degraded"),
        _ => Some("double degraded"),
    }
}

/// The Status column's lines: type and role, degraded or reconstructing
/// groups, and the block format.
fn aggregate_statuses(aggr: &AggregateStatus) -> Vec<String> {
    let mut lines = vec![format!("{}, aggr", raid_type(aggr))];
    if is_hybrid(aggr) {
        lines.push("hybrid".into());
    }
    if aggr.rebuild.as_ref().is_some_and(|r| r.spare_assigned) {
        lines.push("reconstruct".into());
    } else if let Some(degraded) = degradation(aggr) {
        lines.push(degraded.into());
    }
    lines.push("64-bit".into());
    lines
}

/// Whether the aggregate has SSD RAID groups: a Flash Pool (ONTAP's
/// `hybrid` status).
fn is_hybrid(aggr: &AggregateStatus) -> bool {
    aggr.raid_groups.iter().any(|g| g.tier == "ssd")
}

/// The Type column of a group's disks: `SSD` for a Flash Pool's cache
/// groups, `FILE` for the hard disks (wafer's disks are files).
fn disk_type(group: &RaidGroupStatus) -> &'static str {
    match group.tier.as_str() {
        "ssd" => "SSD",
        _ => "FILE",
    }
}

/// The plex is normal when every RAID group is.
fn plex_state(aggr: &AggregateStatus) -> &'static str {
    match aggr.raid_groups.iter().all(|g| g.state == "normal") {
        true => "normal",
        false => "degraded",
    }
}

fn raid_type(aggr: &AggregateStatus) -> &str {
    aggr.raid_groups
        .first()
        .map_or("raid_dp", |g| g.raid_type.as_str())
}

/// The raidsize the server reports; a server from before it did, the
/// largest group.
fn raid_size(aggr: &AggregateStatus) -> usize {
    match aggr.raid_size {
        0 => aggr
            .raid_groups
            .iter()
            .map(|g| g.disks.len())
            .max()
            .unwrap_or(0),
        size => usize::from(size),
    }
}

/// `aggr status -r`: every aggregate's RAID groups with their disks, then
/// every spare, then broken disks.
pub fn aggr_status_r(reply: &AdminReply) -> String {
    let Some(aggregates) = aggregates_of(reply) else {
        return unexpected(reply);
    };
    let mut out = String::new();
    for aggr in &aggregates {
        out.push_str(&aggregate_groups_r(aggr));
    }
    out.push_str("\nSpare disks\n\n");
    out.push_str(&disk_table_header("RAID Disk"));
    out.push_str("Spare disks for block checksum\n");
    let spares: Vec<&DiskStatus> = aggregates.iter().flat_map(|a| &a.spares).collect();
    if spares.is_empty() {
        out.push_str("(none)\n");
    }
    for spare in spares {
        let _ = writeln!(
            out,
            "{:<9} {:<15} {}",
            "spare",
            spare.name,
            disk_columns(spare.size_bytes, spare.physical_bytes, "FILE")
        );
    }
    for aggr in &aggregates {
        out.push_str(&broken_disks(aggr));
    }
    out
}

/// One aggregate's part of `aggr status -r`: its plex and RAID groups.
fn aggregate_groups_r(aggr: &AggregateStatus) -> String {
    let mut out = format!(
        "Aggregate {} ({}, {}{}) (block checksums)\n",
        aggr.name,
        aggr_state(aggr),
        raid_type(aggr),
        degradation(aggr).map_or(String::new(), |d| format!(", {d}"))
    );
    if let Some(reason) = &aggr.failed_reason {
        let _ = writeln!(out, "  Failed: {reason}");
    }
    let plex_state = plex_state(aggr);
    let plex = aggr_state(aggr);
    let _ = writeln!(
        out,
        "  Plex /{}/plex0 ({plex}, {plex_state}, active, pool0)",
        aggr.name
    );
    for group in &aggr.raid_groups {
        let _ = writeln!(
            out,
            "    RAID group /{}/plex0/rg{} ({})\n",
            aggr.name,
            group.group,
            group_state(aggr, group)
        );
        out.push_str(&disk_table_header("      RAID Disk"));
        for disk in &group.disks {
            out.push_str(&disk_row(aggr, group, disk));
        }
        out.push('\n');
    }
    out
}

/// The Broken disks section: failed disks a spare has replaced, with the
/// files they leave in the data directory until `disk remove`.
fn broken_disks(aggr: &AggregateStatus) -> String {
    if aggr.broken.is_empty() {
        return String::new();
    }
    let header = disk_table_header("RAID Disk");
    let width = header.lines().map(str::len).max().unwrap_or(0);
    let mut out = "\nBroken disks\n\n".to_string();
    for (line, file) in header.lines().zip(["File", "----"]) {
        let _ = writeln!(out, "{line:<width$}    {file}");
    }
    for disk in &aggr.broken {
        let columns = disk_columns(disk.size_bytes, disk.physical_bytes, "FILE");
        let row = format!("{:<9} {:<15} {columns}", "failed", disk.name);
        let _ = writeln!(out, "{row:<width$}    {}", disk.file);
    }
    out
}

/// `aggr scrub status -v`: each RAID group's scrub state, then what the scrub
/// found, as ONTAP's scrub summary messages word it.
pub fn aggr_scrub_status(reply: &AdminReply) -> String {
    let Some(aggregates) = aggregates_of(reply) else {
        return unexpected(reply);
    };
    aggregates.into_iter().map(aggregate_scrub_status).collect()
}

fn aggregate_scrub_status(aggr: &AggregateStatus) -> String {
    let mut out = String::new();
    for group in &aggr.raid_groups {
        let state = match &aggr.scrub {
            Some(s) if s.running && s.group == group.group && s.suspended => {
                format!(
                    "scrub suspended (degraded), {}% done",
                    percent(s.stripes_done, s.stripes_total)
                )
            }
            Some(s) if s.running && s.group == group.group => {
                format!(
                    "is being scrubbed, {}% done",
                    percent(s.stripes_done, s.stripes_total)
                )
            }
            _ => "is not being scrubbed".to_string(),
        };
        let _ = writeln!(
            out,
            "\taggr {}, raid group /{}/plex0/rg{}: {state}.",
            aggr.name, aggr.name, group.group
        );
    }
    match &aggr.scrub {
        None => out.push_str("\tNo scrub has run since the server started.\n"),
        Some(s) => {
            let what = match s.running {
                true => "Scrub in progress",
                false if s.stripes_done >= s.stripes_total => "Last full scrub completed",
                false => "Last scrub stopped",
            };
            let _ = writeln!(
                out,
                "\t{what}: {} of {} stripes verified.\n\
                 \tScrub found {} parity inconsistencies in /{}/plex0 (rewritten).\n\
                 \tScrub found {} checksum errors in /{}/plex0 (blocks repaired).\n\
                 \tScrub left {} stripes as found (damage beyond what RAID repairs).",
                s.stripes_verified,
                s.stripes_total,
                s.parity_rewritten,
                aggr.name,
                s.blocks_repaired,
                aggr.name,
                s.stripes_left_alone
            );
        }
    }
    out
}

/// A group's state as `aggr status -r` words it.
fn group_state(aggr: &AggregateStatus, group: &RaidGroupStatus) -> String {
    match &aggr.rebuild {
        Some(r) if r.group == group.group && r.spare_assigned => format!(
            "reconstruction {}% completed",
            percent(r.stripes_done, r.stripes_total)
        ),
        _ => group.state.clone(),
    }
}

fn disk_table_header(first: &str) -> String {
    let pad = " ".repeat(first.len() - "RAID Disk".len());
    format!(
        "{first} Device          HA  SHELF BAY CHAN Pool Type  RPM  Used (MB/blks)    Phys (MB/blks)\n\
         {pad}--------- ------          ------------- ---- ---- ---- ----- --------------    --------------\n"
    )
}

fn disk_row(aggr: &AggregateStatus, group: &RaidGroupStatus, disk: &DiskStatus) -> String {
    let used = group.blocks_per_disk * 4096;
    let rebuilding = aggr
        .rebuild
        .as_ref()
        .filter(|r| r.group == group.group && r.slot == disk.slot && r.spare_assigned);
    let failed = format!("{:?}", disk.state).to_lowercase() == "failed";
    let device = match failed && rebuilding.is_none() {
        true => "FAILED".to_string(),
        false => disk.name.clone(),
    };
    let mut row = format!(
        "      {:<9} {:<15} {}",
        disk.role,
        device,
        disk_columns(used, disk.physical_bytes, disk_type(group))
    );
    if let Some(r) = rebuilding {
        let _ = write!(
            row,
            " (reconstruction {}% completed)",
            percent(r.stripes_done, r.stripes_total)
        );
    }
    row + "\n"
}

/// The columns after Device: no HA, shelf, bay or channel; pool 0; the
/// disk's type (`FILE`, or `SSD` in a Flash Pool's groups).
fn disk_columns(used_bytes: u64, phys_bytes: u64, kind: &str) -> String {
    let used = format!("{}/{}", used_bytes / MIB, used_bytes / 512);
    let phys = format!("{}/{}", phys_bytes / MIB, phys_bytes / 512);
    format!("-   -     -   -    0    {kind:<4}    -  {used:<17} {phys}")
}

/// `disk show`: every disk the filer owns (RAID group members, spares,
/// broken disks), in 7-Mode's ownership layout. The owner and home are the
/// node, `wafer`; the pool is Pool0; the serial number is the disk's file.
pub fn disk_show(reply: &AdminReply) -> String {
    let Some(aggregates) = aggregates_of(reply) else {
        return unexpected(reply);
    };
    let mut out = format!(
        "{:<12} {:<24} {:<6} {:<21} {}\n{} {:<24} {:<6} {:<21} {}\n",
        "  DISK",
        "OWNER",
        "POOL",
        "SERIAL NUMBER",
        "HOME",
        "-".repeat(12),
        "-".repeat(13),
        "-".repeat(5),
        "-".repeat(13),
        "-".repeat(13)
    );
    let disks = aggregates.iter().flat_map(|aggr| {
        let members = aggr.raid_groups.iter().flat_map(|g| &g.disks);
        members
            .chain(&aggr.spares)
            .map(|d| (&d.name, &d.file))
            .chain(aggr.broken.iter().map(|d| (&d.name, &d.file)))
    });
    for (name, file) in disks {
        let _ = writeln!(
            out,
            "{name:<12} {:<24} {:<6} {file:<21} wafer",
            "wafer", "Pool0"
        );
    }
    out
}

/// `reallocate status [PATH]`: the reallocation in progress, in the layout
/// of 7-Mode's `reallocate status -v` (what wafer has of it).
pub fn reallocate_status(reply: &AdminReply, path: Option<&str>) -> String {
    let AdminReply::Reallocation(job) = reply else {
        return unexpected(reply);
    };
    let mut out = "Reallocation scans are on\n".to_string();
    match job.as_ref().filter(|j| path.is_none_or(|p| p == j.path)) {
        Some(job) => {
            let state = if job.quiesced {
                "Quiesced"
            } else {
                "Reallocating"
            };
            let _ = writeln!(
                out,
                "{}:\n        State: {state}: block {} of {}",
                job.path, job.blocks_done, job.blocks_total
            );
        }
        None => out.push_str("No reallocation status.\n"),
    }
    out
}

/// `aggr status -v`: options, volumes, plex and group states.
pub fn aggr_status_v(reply: &AdminReply, volumes: &AdminReply) -> String {
    let (Some(aggregates), AdminReply::Volumes(vols)) = (aggregates_of(reply), volumes) else {
        return unexpected(reply);
    };
    let mut out = String::new();
    for (n, aggr) in aggregates.iter().enumerate() {
        let one = aggregate_status_v(aggr, vols);
        match n {
            0 => out.push_str(&one),
            _ => out.extend(one.lines().skip(1).map(|l| format!("{l}\n"))),
        }
    }
    out.push_str(&failure_reasons(&aggregates));
    out
}

fn aggregate_status_v(
    aggr: &AggregateStatus,
    vols: &[wafer_server::admin::VolumeStatus],
) -> String {
    let options = match aggr_state(aggr) {
        "online" => vec![
            "nosnap=off, raidtype=".to_string() + raid_type(aggr) + ",",
            format!("raidsize={},", raid_size(aggr)),
            "snapshot_autodelete=off,".into(),
            "lost_write_protect=on,".into(),
            format!("hybrid_enabled={}", on_off(aggr.hybrid_enabled)),
        ],
        _ => Vec::new(),
    };
    let mut out = status_table(aggr, &options);
    let names: Vec<&str> = vols
        .iter()
        .filter(|v| v.aggregate.is_empty() || v.aggregate == aggr.name)
        .map(|v| v.name.as_str())
        .collect();
    let listed = match names.is_empty() {
        true => "<none>".to_string(),
        false => names.join(", "),
    };
    let _ = writeln!(out, "                Volumes: {listed}\n");
    let plex_state = plex_state(aggr);
    let _ = writeln!(
        out,
        "                Plex /{}/plex0: {}, {plex_state}, active",
        aggr.name,
        aggr_state(aggr)
    );
    for group in &aggr.raid_groups {
        let _ = writeln!(
            out,
            "                    RAID group /{}/plex0/rg{}: {}",
            aggr.name,
            group.group,
            group_state(aggr, group)
        );
    }
    out
}

/// `vol status`.
pub fn vol_status(reply: &AdminReply) -> String {
    let AdminReply::Volumes(volumes) = reply else {
        return unexpected(reply);
    };
    let mut out = format!(
        "{:>15} {:<15} {:<17} Options\n",
        "Volume", "State", "Status"
    );
    for volume in volumes {
        let status = format!("{}, flex", volume.raid_type);
        let _ = writeln!(
            out,
            "{:>15} {:<15} {status:<17} {}",
            volume.name,
            volume.state,
            volume_options(volume).join(", ")
        );
    }
    out
}

/// The options `vol status` lists: the two every wafer volume has (its LUNs
/// reserve their whole size, overwrites of snapshot-held blocks are
/// reserved in full), and `read_realloc=on` where it is set.
fn volume_options(volume: &VolumeStatus) -> Vec<&'static str> {
    let mut options = vec!["guarantee=volume", "fractional_reserve=100"];
    if volume.read_realloc {
        options.push("read_realloc=on");
    }
    options
}

/// `snap reserve [VOLUME]`: a line per volume, in ONTAP's words.
pub fn snap_reserve(reply: &AdminReply) -> String {
    let AdminReply::SnapReserves(volumes) = reply else {
        return unexpected(reply);
    };
    volumes
        .iter()
        .map(|v| reserve_line("volume", &v.volume, v.percent, v.reserve_bytes))
        .collect()
}

/// `vol options VOLUME`: the options wafer has, in ONTAP's order and
/// words, wrapped as wafl.md §12.3's sample is (each line ends at a comma).
pub fn vol_options(reply: &AdminReply) -> String {
    let AdminReply::Volumes(volumes) = reply else {
        return unexpected(reply);
    };
    volumes.iter().map(volume_option_lines).collect()
}

/// One volume's `vol options` lines.
fn volume_option_lines(volume: &VolumeStatus) -> String {
    const WIDTH: usize = 72;
    let read_realloc = format!("read_realloc={}", on_off(volume.read_realloc));
    let fixed =
        wafer_server::admin::FIXED_VOLUME_OPTIONS.map(|(name, value)| format!("{name}={value}"));
    let options: Vec<String> = fixed.into_iter().chain([read_realloc]).collect();
    let mut out = String::new();
    let mut line = String::new();
    for (n, option) in options.iter().enumerate() {
        let item = match n + 1 == options.len() {
            true => option.clone(),
            false => format!("{option},"),
        };
        if !line.is_empty() && line.len() + 1 + item.len() > WIDTH {
            out.push_str(&line);
            out.push('\n');
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(&item);
    }
    out + &line + "\n"
}

fn on_off(on: bool) -> &'static str {
    match on {
        true => "on",
        false => "off",
    }
}

/// `snap sched [VOLUME]`: a line per volume, as wafl.md §12.4 shows
/// `volume pocvol: 0 2 6@8,12,16,20` (the hours only when not every hour).
pub fn snap_sched(reply: &AdminReply) -> String {
    let AdminReply::SnapScheds(volumes) = reply else {
        return unexpected(reply);
    };
    volumes
        .iter()
        .map(|v| {
            let mut line = format!(
                "volume {}: {} {} {}",
                v.volume, v.weekly, v.nightly, v.hourly
            );
            if v.hours.len() < 24 {
                let hours: Vec<String> = v.hours.iter().map(u8::to_string).collect();
                line.push_str(&format!("@{}", hours.join(",")));
            }
            line + "\n"
        })
        .collect()
}

/// `snap sched -A [AGGR]`: wafer takes no aggregate snapshots, so every
/// aggregate's line says `0 0 0`.
pub fn snap_sched_aggregates(reply: &AdminReply) -> String {
    let AdminReply::AggregateSpaces(aggregates) = reply else {
        return unexpected(reply);
    };
    aggregates
        .iter()
        .map(|a| format!("Aggregate {}: 0 0 0\n", a.aggregate))
        .collect()
}

/// `snap reserve -A [AGGR]`: wafer sets nothing aside for aggregate
/// snapshots, so every aggregate's line says 0%.
pub fn snap_reserve_aggregates(reply: &AdminReply) -> String {
    let AdminReply::AggregateSpaces(aggregates) = reply else {
        return unexpected(reply);
    };
    aggregates
        .iter()
        .map(|a| reserve_line("Aggregate", &a.aggregate, 0, 0))
        .collect()
}

fn reserve_line(what: &str, name: &str, percent: u8, bytes: u64) -> String {
    format!(
        "{what} {name}: current snapshot reserve is {percent}% or {} k-bytes.\n",
        bytes / 1024
    )
}

/// `priority show volume [-v]`: a table of each volume's cache policy, or
/// with -v a block per volume.
pub fn priority_show(reply: &AdminReply, verbose: bool) -> String {
    let AdminReply::VolumePriorities(volumes) = reply else {
        return unexpected(reply);
    };
    match verbose {
        true => volumes
            .iter()
            .map(|v| format!("Volume: {}\n        Cache: {}\n", v.volume, v.cache))
            .collect(),
        false => {
            let mut out = format!("{:<16} {}\n", "Volume", "Cache");
            for v in volumes {
                let _ = writeln!(out, "{:<16} {}", v.volume, v.cache);
            }
            out
        }
    }
}

/// `lun show`.
pub fn lun_show(reply: &AdminReply) -> String {
    let AdminReply::Luns(luns) = reply else {
        return unexpected(reply);
    };
    luns.iter().map(lun_line).collect()
}

/// A LUN's line in `lun show`: path, size and state.
fn lun_line(lun: &wafer_server::admin::LunStatus) -> String {
    let bytes = format!("({})", lun.size_bytes);
    let size = format!("{:>4} {bytes:<14}", ontap_size(lun.size_bytes));
    let state = if lun.offline { "offline" } else { "online" };
    format!("        {:<28} {size}  (r/w, {state})\n", lun.path)
}

/// `lun show -v`: each LUN's line, then its share, space reservation, OS
/// type and occupied size as ONTAP indents them. (ONTAP also prints a
/// serial number and a creation time, which wafer does not keep per LUN.)
pub fn lun_show_v(reply: &AdminReply) -> String {
    let AdminReply::Luns(luns) = reply else {
        return unexpected(reply);
    };
    let mut out = String::new();
    for lun in luns {
        out.push_str(&lun_line(lun));
        let reservation = if lun.space_reserved {
            "enabled"
        } else {
            "disabled"
        };
        let occupied = ontap_size(lun.occupied_bytes);
        let _ = write!(
            out,
            "                Share: none\n\
             \x20               Space Reservation: {reservation}\n\
             \x20               Multiprotocol Type: {}\n\
             \x20               Occupied Size: {occupied:>7} ({})\n",
            lun.ostype, lun.occupied_bytes
        );
    }
    out
}

/// A size as ONTAP's LUN commands print it: the largest of t, g, m, k that
/// divides it, else bytes (`2g`, `512m`, `4100k`).
pub use wafer_server::admin::ontap_size;

/// `lun show -m`: each LUN with the NBD export that serves it.
pub fn lun_show_m(reply: &AdminReply) -> String {
    let AdminReply::Luns(luns) = reply else {
        return unexpected(reply);
    };
    let mut out = format!(
        "{:<35} {:<18} {:>6}  Protocol\n{}\n",
        "LUN path",
        "Mapped to",
        "LUN ID",
        "-".repeat(71)
    );
    for lun in luns {
        let id = lun.lun_id.map_or("-".to_string(), |id| id.to_string());
        let _ = writeln!(out, "{:<35} {:<18} {id:>6}       NBD", lun.path, lun.export);
    }
    out
}

/// `snap list VOLUME`: newest first; %/used against the volume's used space
/// plus the snapshots', %/total against its size. The first figure counts
/// this snapshot and every newer one, the one in parentheses this one alone.
pub fn snap_list(reply: &AdminReply, space: &AdminReply) -> String {
    let (AdminReply::Snapshots { volume, snapshots }, AdminReply::VolumeSpace(volumes)) =
        (reply, space)
    else {
        return unexpected(reply);
    };
    let mut out = format!("volume {volume}\nworking...\n\n");
    if snapshots.is_empty() {
        out.push_str("No snapshots exist.\n");
        return out;
    }
    let df = volumes.iter().find(|v| v.volume == *volume);
    let used = df.map_or(0, |d| d.used_bytes + d.snapshot_used_bytes);
    let total = df.map_or(0, |d| d.size_bytes);
    out.push_str("  %/used       %/total  date          name\n");
    out.push_str("----------  ----------  ------------  --------\n");
    let mut cumulative = 0;
    for snapshot in snapshots.iter().rev() {
        cumulative += snapshot.exclusive_bytes;
        let _ = writeln!(
            out,
            "{:>3}% ({:>2}%)  {:>3}% ({:>2}%)  {}  {}",
            percent(cumulative, used),
            percent(snapshot.exclusive_bytes, used),
            percent(cumulative, total),
            percent(snapshot.exclusive_bytes, total),
            snapshot_date(snapshot),
            snapshot.name
        );
    }
    out
}

fn percent(part: u64, whole: u64) -> u64 {
    match whole {
        0 => 0,
        _ => (part as u128 * 100 / whole as u128) as u64,
    }
}

fn snapshot_date(snapshot: &SnapshotStatus) -> String {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let seconds = snapshot.created_unix_ns / 1_000_000_000;
    let (_, month, day) = civil_from_days((seconds / 86_400) as i64);
    let minutes = seconds % 86_400 / 60;
    format!(
        "{} {day:02} {:02}:{:02}",
        MONTHS[month as usize - 1],
        minutes / 60,
        minutes % 60
    )
}

/// The (year, month, day) of a day count since 1970-01-01 (proleptic
/// Gregorian), by Howard Hinnant's days-to-civil algorithm.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let shifted_month = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * shifted_month + 2) / 5 + 1) as u32;
    let month = if shifted_month < 10 {
        shifted_month + 3
    } else {
        shifted_month - 9
    } as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// `df` (volumes) or `df -A` (the aggregate), in kbytes or, with -h, in
/// binary units.
pub fn df(reply: &AdminReply, human: bool) -> String {
    let unit = |bytes: u64| match human {
        true => human_size(bytes),
        false => (bytes / 1024).to_string(),
    };
    let size_heading = match human {
        true => "total",
        false => "kbytes",
    };
    match reply {
        AdminReply::VolumeSpace(volumes) => {
            let mut out = format!(
                "{:<24} {size_heading:>10} {:>10} {:>10} capacity  Mounted on\n",
                "Filesystem", "used", "avail"
            );
            for volume in volumes {
                out.push_str(&volume_df_rows(volume, &unit));
            }
            out
        }
        AdminReply::AggregateSpace(aggr) => aggregate_df(&[aggr], size_heading, &unit),
        AdminReply::AggregateSpaces(all) => {
            aggregate_df(&all.iter().collect::<Vec<_>>(), size_heading, &unit)
        }
        other => unexpected(other),
    }
}

fn volume_df_rows(volume: &VolumeSpaceStatus, unit: &dyn Fn(u64) -> String) -> String {
    let path = format!("/vol/{}/", volume.volume);
    let snap_path = format!("/vol/{}/.snapshot", volume.volume);
    let reserve = volume.snapshot_reserve_bytes;
    let snap_capacity = match reserve {
        0 => "---%".to_string(),
        _ => format!("{}%", percent(volume.snapshot_used_bytes, reserve)),
    };
    format!(
        "{path:<24} {:>10} {:>10} {:>10} {:>7}%  {path}\n\
         {snap_path:<24} {:>10} {:>10} {:>10} {:>8}  {snap_path}\n",
        unit(volume.active_total_bytes),
        unit(volume.used_bytes),
        unit(volume.available_bytes),
        percent(volume.used_bytes, volume.active_total_bytes),
        unit(reserve),
        unit(volume.snapshot_used_bytes),
        unit(reserve.saturating_sub(volume.snapshot_used_bytes)),
        snap_capacity
    )
}

/// ONTAP's -h: the largest binary unit that keeps three digits, as KB, MB, GB.
fn human_size(bytes: u64) -> String {
    let units = [
        (1u64 << 40, "TB"),
        (1 << 30, "GB"),
        (1 << 20, "MB"),
        (1 << 10, "KB"),
    ];
    units
        .iter()
        .find(|(size, _)| bytes >= *size * 10)
        .map_or(format!("{}KB", bytes / 1024), |(size, name)| {
            format!("{}{name}", bytes / size)
        })
}

/// `statit -e`'s Disk Statistics, the lab's layout ([`statit::table`]):
/// per second between two samples, every aggregate's RAID groups under
/// their paths, each group's disks found in the samples by aggregate and
/// slot.
pub fn statit(before: &AdminReply, after: &AdminReply, aggregates: &AdminReply) -> String {
    let (AdminReply::Sysstat(before), AdminReply::Sysstat(after), Some(aggregates)) =
        (before, after, aggregates_of(aggregates))
    else {
        return unexpected(after);
    };
    let mut groups = Vec::new();
    for aggr in aggregates {
        for group in &aggr.raid_groups {
            let rows = group.disks.iter().filter_map(|disk| {
                let find = |sample| sample_disk(sample, &aggr.name, disk.slot);
                Some(statit_row(find(before), find(after)?))
            });
            groups.push(statit::Group {
                path: statit::group_path(&aggr.name, &format!("rg{}", group.group)),
                rows: rows.collect(),
            });
        }
    }
    statit::table(&groups, after.uptime_ns.saturating_sub(before.uptime_ns))
}

/// The counters of `aggregate`'s disk in `slot` in `sample`.
fn sample_disk<'a>(
    sample: &'a SysstatReport,
    aggregate: &str,
    slot: u32,
) -> Option<&'a DiskCountersStatus> {
    let mut disks = sample.disks.iter();
    disks.find(|d| d.aggregate == aggregate && d.slot == slot)
}

/// One disk's counters between two samples (`before` none: since the
/// start). The server times a disk's I/Os together, not by kind, so each
/// kind gets its share of the time by its blocks: every kind's usecs is the
/// disk's mean per block. Its scrub and reconstruction I/O is counted with
/// the user reads and the writes, so greads and gwrites stay 0.
fn statit_row(before: Option<&DiskCountersStatus>, after: &DiskCountersStatus) -> statit::Row {
    let since = |counter: fn(&DiskCountersStatus) -> u64| {
        counter(after).saturating_sub(before.map_or(0, counter))
    };
    let io_time_ns = since(|d| d.io_time_ns);
    let counted = [
        (since(|d| d.user_reads), since(|d| d.user_read_blocks)),
        (since(|d| d.writes), since(|d| d.write_blocks)),
        (since(|d| d.cp_reads), since(|d| d.cp_read_blocks)),
    ];
    let all_blocks: u64 = counted.iter().map(|(_, blocks)| blocks).sum();
    let mut kinds = [statit::Kind::default(); 5];
    for (kind, (commands, blocks)) in kinds.iter_mut().zip(counted) {
        let share = u128::from(io_time_ns) * u128::from(blocks) / u128::from(all_blocks.max(1));
        *kind = statit::Kind {
            commands,
            blocks,
            latency_ns: u64::try_from(share).expect("a share of a u64"),
        };
    }
    statit::Row {
        name: after.name.clone(),
        busy_ns: io_time_ns,
        kinds,
    }
}

/// `df -A`: each aggregate's line and its `.snapshot` line.
fn aggregate_df(
    aggregates: &[&wafer_server::admin::AggregateSpaceStatus],
    size_heading: &str,
    unit: &dyn Fn(u64) -> String,
) -> String {
    let mut out = format!(
        "{:<24} {size_heading:>10} {:>10} {:>10} capacity\n",
        "Aggregate", "used", "avail"
    );
    for aggr in aggregates {
        let _ = writeln!(
            out,
            "{:<24} {:>10} {:>10} {:>10} {:>7}%",
            aggr.aggregate,
            unit(aggr.total_bytes),
            unit(aggr.used_bytes),
            unit(aggr.available_bytes),
            percent(aggr.used_bytes, aggr.total_bytes)
        );
        let _ = writeln!(
            out,
            "{:<24} {:>10} {:>10} {:>10} {:>8}",
            format!("{}/.snapshot", aggr.aggregate),
            unit(0),
            unit(0),
            unit(0),
            "---%"
        );
    }
    out
}

/// One `sysstat -x` line, the lab's layout ([`sysstat::line`]): the rates
/// between two samples. CPU is the server's CPU time over the interval, at
/// most 100% (ONTAP's is the share of the interval at least one CPU was
/// busy; the server's threads mostly take turns), `-` where the server
/// cannot say. NBD's and iSCSI's operations and bytes are their requests
/// (the network is theirs); the server has no FCP. Disk util is the
/// busiest disk's I/O time. Cache age is the minutes since the oldest
/// cached block was last used (`-` with nothing to age: an empty cache, or
/// every block used in the server's last sampling period of 10 s).
pub fn sysstat_line(before: &SysstatReport, after: &SysstatReport) -> String {
    let since = |counter: fn(&SysstatReport) -> u64| counter(after).saturating_sub(counter(before));
    let busiest = after
        .disks
        .iter()
        .zip(&before.disks)
        .map(|(a, b)| a.io_time_ns.saturating_sub(b.io_time_ns))
        .max()
        .unwrap_or(0);
    sysstat::line(&sysstat::Counts {
        length_ns: since(|r| r.uptime_ns),
        end_ns: after.uptime_ns,
        cpu_ns: (after.cpu_time_ns != 0).then(|| since(|r| r.cpu_time_ns)),
        nbd: Some(sysstat::Traffic {
            ops: since(|r| r.nbd.reads + r.nbd.writes + r.nbd.trims + r.nbd.flushes),
            in_bytes: since(|r| r.nbd.write_bytes),
            out_bytes: since(|r| r.nbd.read_bytes),
        }),
        fcp: None,
        iscsi: Some(sysstat::Traffic {
            ops: since(iscsi_ops),
            in_bytes: since(|r| r.iscsi.write_bytes),
            out_bytes: since(|r| r.iscsi.read_bytes),
        }),
        disk_read_blocks: since(disk_read_blocks),
        disk_write_blocks: since(|r| r.disks.iter().map(|d| d.write_blocks).sum()),
        cache_age_ns: after.cache_age_ns,
        cache_hits_misses: Some((since(|r| r.cache_hits), since(|r| r.cache_misses))),
        cp_ns: Some(since(|r| r.cp_time_ns)),
        cp_type: cp_type(before, after),
        busiest_disk_busy_ns: busiest,
        nvlog_bytes: Some(since(|r| r.nvlog.bytes_written)),
    })
}

/// The blocks every disk read, for users and for CPs.
fn disk_read_blocks(report: &SysstatReport) -> u64 {
    let disks = report.disks.iter();
    disks.map(|d| d.user_read_blocks + d.cp_read_blocks).sum()
}

/// Every iSCSI command the server counts.
fn iscsi_ops(report: &SysstatReport) -> u64 {
    let i = &report.iscsi;
    i.reads
        + i.writes
        + i.trims
        + i.allocation_queries
        + i.verifies
        + i.compare_and_writes
        + i.reservations
}

/// The type letter of most CPs between the samples, if any ran.
fn cp_type(before: &SysstatReport, after: &SysstatReport) -> Option<String> {
    after
        .cps_by_type
        .iter()
        .map(|(letter, count)| {
            let earlier = before.cps_by_type.get(letter).copied().unwrap_or(0);
            (count.saturating_sub(earlier), letter)
        })
        .filter(|(count, _)| *count > 0)
        .max()
        .map(|(_, letter)| letter.clone())
}

/// `stats show ext_cache_obj`: 7-Mode's `object:instance:counter:value`
/// lines for the Flash Cache, instance `ec0`. The counters are totals since
/// the server started (ONTAP shows most as rates); `read_errors` and
/// `failed` are wafer's own.
pub fn ext_cache_obj(reply: &AdminReply) -> String {
    let AdminReply::ExtCacheObj(f) = reply else {
        return unexpected(reply);
    };
    let percent = |part: u64, whole: u64| match whole {
        0 => 0,
        _ => part * 100 / whole,
    };
    let lines: [(&str, String); 13] = [
        ("device", f.device.clone()),
        ("blocks", f.blocks.to_string()),
        ("usage", format!("{}%", percent(f.used, f.blocks))),
        ("accesses", f.accesses.to_string()),
        ("hit", f.hits.to_string()),
        ("miss", f.misses.to_string()),
        ("hit_percent", format!("{}%", percent(f.hits, f.accesses))),
        ("inserts", f.inserts.to_string()),
        ("evicts", f.evicts.to_string()),
        ("invalidates", f.invalidates.to_string()),
        ("disk_reads_replaced", f.disk_reads_replaced.to_string()),
        ("read_errors", f.read_errors.to_string()),
        ("failed", yes_no(f.failed).to_string()),
    ];
    let mut out = String::new();
    for (counter, value) in lines {
        let _ = writeln!(out, "ext_cache_obj:ec0:{counter}:{value}");
    }
    out
}

/// `aggr options AGGR`: its options as `aggr status -v` lists them, on
/// ONTAP's comma-separated lines.
pub fn aggr_options(reply: &AdminReply) -> String {
    let Some(aggregates) = aggregates_of(reply) else {
        return unexpected(reply);
    };
    let mut out = String::new();
    for aggr in aggregates {
        let _ = writeln!(
            out,
            "nosnap=off, raidtype={}, raidsize={}, snapshot_autodelete=off,\n\
             lost_write_protect=on, hybrid_enabled={}",
            raid_type(aggr),
            raid_size(aggr),
            on_off(aggr.hybrid_enabled)
        );
    }
    out
}

/// `stats show wafl_hya_per_aggr`: 7-Mode's `object:instance:counter:value`
/// lines, an instance per hybrid aggregate. Capacities are 4 KiB blocks with
/// their MiB; counters are totals since the aggregate mounted, where ONTAP
/// shows most as rates.
pub fn wafl_hya_per_aggr(reply: &AdminReply) -> String {
    let AdminReply::WaflHyaPerAggr(pools) = reply else {
        return unexpected(reply);
    };
    let blocks = |n: u64| format!("{n} blocks ({} MiB)", n * 4096 / MIB);
    let mut out = String::new();
    for p in pools {
        let lines: [(&str, String); 12] = [
            ("ssd_total", blocks(p.ssd_total)),
            ("ssd_used", blocks(p.ssd_used)),
            ("ssd_read_cached", blocks(p.ssd_read_cached)),
            ("ssd_write_cached", blocks(p.ssd_write_cached)),
            ("read_ops_replaced", p.read_ops_replaced.to_string()),
            (
                "read_ops_replaced_percent",
                format!("{}%", p.read_ops_replaced_percent),
            ),
            ("write_blks_replaced", p.wc_write_blks_total.to_string()),
            (
                "write_blks_replaced_percent",
                format!("{}%", p.write_blks_replaced_percent),
            ),
            ("read_cache_ins", p.read_cache_ins.to_string()),
            ("evict_destage", p.evict_destage.to_string()),
            ("evict_remove", p.evict_remove.to_string()),
            ("wc_write_blks_total", p.wc_write_blks_total.to_string()),
        ];
        for (counter, value) in lines {
            let _ = writeln!(out, "wafl_hya_per_aggr:{}:{counter}:{value}", p.aggregate);
        }
    }
    out
}

fn yes_no(set: bool) -> &'static str {
    if set { "yes" } else { "no" }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wafer_server::admin::FlashCacheStatus;

    #[test]
    fn ext_cache_obj_prints_ontaps_counter_lines_with_percentages() {
        let reply = AdminReply::ExtCacheObj(Box::new(FlashCacheStatus {
            device: "/ssd/flash".into(),
            blocks: 400,
            used: 100,
            accesses: 30,
            hits: 10,
            misses: 20,
            disk_reads_replaced: 9,
            read_errors: 1,
            ..FlashCacheStatus::default()
        }));
        let text = ext_cache_obj(&reply);
        for line in [
            "ext_cache_obj:ec0:device:/ssd/flash",
            "ext_cache_obj:ec0:usage:25%",
            "ext_cache_obj:ec0:hit:10",
            "ext_cache_obj:ec0:miss:20",
            "ext_cache_obj:ec0:hit_percent:33%",
            "ext_cache_obj:ec0:disk_reads_replaced:9",
            "ext_cache_obj:ec0:read_errors:1",
            "ext_cache_obj:ec0:failed:no",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing:\n{text}");
        }
    }
    use wafer_lab::array::DiskStats;

    #[test]
    fn days_become_dates_across_leap_years() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(20_779), (2026, 11, 22));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
    }

    #[test]
    fn snapshot_dates_read_like_ontap() {
        let snapshot = SnapshotStatus {
            id: 1,
            name: "snap1".into(),
            cp: 3,
            // 2026-05-17 10:32:07 UTC
            created_unix_ns: 1_779_013_927 * 1_000_000_000,
            held_bytes: 0,
            exclusive_bytes: 0,
        };
        assert_eq!(snapshot_date(&snapshot), "May 17 10:32");
    }

    #[test]
    fn broken_disks_are_listed_with_their_files_under_the_file_heading() {
        let broken = |name: &str| wafer_server::admin::BrokenDiskStatus {
            name: name.into(),
            failed_reason: Some("failed by the administrator (disk fail)".into()),
            file: format!("{name}.img"),
            size_bytes: 64 << 20,
            physical_bytes: 65 << 20,
        };
        let mut aggr = AggregateStatus {
            name: "aggr0".into(),
            id: 0,
            state: "online".into(),
            failed_reason: None,
            committed_cp: 1,
            raid_size: 0,
            hybrid_enabled: false,
            raid_groups: Vec::new(),
            spares: Vec::new(),
            broken: Vec::new(),
            rebuild: None,
            scrub: None,
        };
        assert_eq!(broken_disks(&aggr), "", "no section without broken disks");
        aggr.broken = vec![broken("disk3"), broken("disk12")];
        let text = broken_disks(&aggr);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[1], "Broken disks");
        let column = lines[3].find("File").expect("a File heading");
        for (row, file) in lines[5..].iter().zip(["disk3.img", "disk12.img"]) {
            assert!(row.starts_with("failed    disk"), "{row}");
            assert_eq!(row.find(file), Some(column), "{text}");
        }
    }

    #[test]
    fn sizes_and_percentages_round_down() {
        assert_eq!(human_size(808 << 20), "808MB");
        assert_eq!(human_size(5 << 30), "5120MB");
        assert_eq!(human_size(50 << 30), "50GB");
        assert_eq!(human_size(0), "0KB");
        assert_eq!(ontap_size(2 << 30), "2g");
        assert_eq!(ontap_size(4100 << 10), "4100k");
        assert_eq!(ontap_size(1000), "1000");
        assert_eq!(percent(1, 3), 33);
        assert_eq!(percent(5, 0), 0);
    }

    /// An aggregate `name` of one RAID-DP group of `disks` disks of `mib`
    /// MiB, the group using all of each, with spare disk `spare`.
    fn aggregate(name: &str, disks: u32, mib: u64) -> AggregateStatus {
        let disk = |slot: u32, role: &str| DiskStatus {
            name: format!("disk{slot}"),
            slot,
            role: role.into(),
            position: None,
            state: wafer_server::DiskState::InService,
            failed_reason: None,
            file: format!("disk{slot}.img"),
            size_bytes: mib << 20,
            physical_bytes: (mib + 1) << 20,
        };
        let roles = ["dparity", "parity"]
            .into_iter()
            .chain(std::iter::repeat("data"));
        AggregateStatus {
            name: name.into(),
            id: 0,
            state: "online".into(),
            failed_reason: None,
            committed_cp: 1,
            raid_size: 0,
            hybrid_enabled: false,
            raid_groups: vec![RaidGroupStatus {
                group: 0,
                raid_type: "raid_dp".into(),
                state: "normal".into(),
                blocks_per_disk: (mib << 20) / 4096,
                tolerated_failures: 2,
                tier: "hdd".into(),
                disks: (0..disks).zip(roles).map(|(s, r)| disk(s, r)).collect(),
            }],
            spares: vec![disk(disks, "spare")],
            broken: Vec::new(),
            rebuild: None,
            scrub: None,
        }
    }

    fn reply(aggr: AggregateStatus) -> AdminReply {
        AdminReply::Aggregate(Box::new(aggr))
    }

    /// wafl.md §12.3, `aggr status` (S-ELATOV12).
    const AGGR_STATUS_SAMPLE: &str = "           Aggr State           Status            Options\n\
        \x20         aggr1 online          raid_dp, aggr     raidsize=16\n\
        \x20                               64-bit\n";

    /// `aggregate`'s with an SSD RAID-4 group of 3 disks after its HDD one.
    fn hybrid(name: &str) -> AggregateStatus {
        let mut aggr = aggregate(name, 8, 64);
        let mut ssd = aggr.raid_groups[0].clone();
        ssd.group = 1;
        ssd.raid_type = "raid4".into();
        ssd.tier = "ssd".into();
        ssd.disks.truncate(3);
        for (n, disk) in ssd.disks.iter_mut().enumerate() {
            disk.name = format!("ssd{n}");
        }
        aggr.raid_groups.push(ssd);
        aggr.hybrid_enabled = true;
        aggr
    }

    #[test]
    fn a_hybrid_aggregate_says_so_in_its_status_options_and_disk_types() {
        let status = aggr_status(&reply(hybrid("aggr0")));
        let lines: Vec<&str> = status.lines().collect();
        assert!(
            lines[1].ends_with("raid_dp, aggr     raidsize=8,"),
            "{status}"
        );
        assert!(
            lines[2].ends_with("hybrid            hybrid_enabled=on"),
            "{status}"
        );
        assert!(lines[3].trim() == "64-bit", "{status}");
        // Enabled but with no SSD group yet: the option, not the status.
        let mut enabled = aggregate("aggr0", 8, 64);
        enabled.hybrid_enabled = true;
        let status = aggr_status(&reply(enabled));
        assert!(!status.contains("hybrid\n") && status.contains("hybrid_enabled=on"));
        let raid = aggr_status_r(&reply(hybrid("aggr0")));
        let row = |disk: &str| {
            raid.lines()
                .find(|l| l.split_whitespace().nth(1) == Some(disk))
                .unwrap_or_else(|| panic!("{disk} in {raid}"))
                .to_string()
        };
        let column = |row: &str| row.split_whitespace().nth(7).map(str::to_string);
        assert_eq!(column(&row("disk3")).as_deref(), Some("FILE"), "{raid}");
        assert_eq!(column(&row("ssd1")).as_deref(), Some("SSD"), "{raid}");
        assert_eq!(
            row("ssd1").find("SSD"),
            row("disk3").find("FILE"),
            "one column"
        );
        assert!(
            raid.contains("RAID group /aggr0/plex0/rg1 (normal)"),
            "{raid}"
        );
        let options = aggr_options(&reply(hybrid("aggr0")));
        assert!(
            options.contains("raidtype=raid_dp, raidsize=8"),
            "{options}"
        );
        assert!(
            options.trim_end().ends_with("hybrid_enabled=on"),
            "{options}"
        );
        assert!(aggr_options(&reply(aggregate("a", 8, 64))).contains("hybrid_enabled=off"));
    }

    #[test]
    fn wafl_hya_per_aggr_prints_ontaps_counter_lines_per_aggregate() {
        let pool = wafer_server::admin::FlashPoolStats {
            aggregate: "aggr1".into(),
            ssd_total: 16384,
            ssd_used: 300,
            ssd_write_cached: 256,
            read_ops_replaced: 30,
            hdd_read_blks: 70,
            read_ops_replaced_percent: 30,
            wc_write_blks_total: 256,
            write_blks_replaced_percent: 12,
            evict_destage: 4,
            ..Default::default()
        };
        let text = wafl_hya_per_aggr(&AdminReply::WaflHyaPerAggr(vec![pool]));
        for line in [
            "wafl_hya_per_aggr:aggr1:ssd_total:16384 blocks (64 MiB)",
            "wafl_hya_per_aggr:aggr1:ssd_write_cached:256 blocks (1 MiB)",
            "wafl_hya_per_aggr:aggr1:ssd_read_cached:0 blocks (0 MiB)",
            "wafl_hya_per_aggr:aggr1:read_ops_replaced_percent:30%",
            "wafl_hya_per_aggr:aggr1:write_blks_replaced_percent:12%",
            "wafl_hya_per_aggr:aggr1:evict_destage:4",
            "wafl_hya_per_aggr:aggr1:wc_write_blks_total:256",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
        }
        assert_eq!(text.lines().count(), 12);
    }

    #[test]
    fn aggr_status_is_ontaps_sample_to_the_column() {
        assert_eq!(
            aggr_status(&reply(aggregate("aggr1", 16, 64))),
            AGGR_STATUS_SAMPLE
        );
    }

    #[test]
    fn aggr_status_lists_every_aggregate_in_one_table_and_why_one_failed() {
        let mut failed = aggregate("aggr1", 5, 64);
        failed.state = "failed".into();
        failed.failed_reason = Some("disk9 is missing".into());
        let mut offline = aggregate("aggr2", 3, 64);
        offline.state = "offline".into();
        let all = AdminReply::Aggregates(vec![aggregate("aggr0", 8, 64), failed, offline]);
        let text = aggr_status(&all);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.iter().filter(|l| l.contains("Aggr State")).count(), 1);
        assert!(
            lines
                .iter()
                .any(|l| l.trim_start().starts_with("aggr1 failed"))
        );
        assert!(
            lines
                .iter()
                .any(|l| l.trim_start().starts_with("aggr2 offline"))
        );
        assert_eq!(
            lines.last(),
            Some(&"Aggregate aggr1 failed: disk9 is missing")
        );
        let raid = aggr_status_r(&all);
        assert!(raid.contains("Aggregate aggr1 (failed, raid_dp)"), "{raid}");
        assert!(raid.contains("  Failed: disk9 is missing"), "{raid}");
        assert_eq!(raid.matches("Spare disks\n").count(), 1, "{raid}");
    }

    #[test]
    fn a_degraded_aggregate_is_online_with_degraded_as_its_status() {
        let mut aggr = aggregate("aggr1", 16, 64);
        aggr.state = "degraded".into();
        aggr.raid_groups[0].state = "degraded".into();
        aggr.raid_groups[0].disks[3].state = wafer_server::DiskState::Failed;
        let text = aggr_status(&reply(aggr.clone()));
        let sample: Vec<&str> = AGGR_STATUS_SAMPLE.lines().collect();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[1], sample[1], "State stays online");
        let status = sample[0].find("Status").expect("a Status heading");
        assert_eq!(lines[2].find("degraded"), Some(status), "{text}");
        assert_eq!(lines[3].trim(), "64-bit");
        let raid = aggr_status_r(&reply(aggr.clone()));
        assert!(
            raid.starts_with("Aggregate aggr1 (online, raid_dp, degraded) (block checksums)\n"),
            "{raid}"
        );
        aggr.raid_groups[0].disks[4].state = wafer_server::DiskState::Failed;
        assert!(aggr_status(&reply(aggr)).contains("double degraded"));
    }

    /// wafl.md §12.3, `aggr status -r` (S-ELATOV12): the lines up to the
    /// first disk, and that disk's row.
    const AGGR_STATUS_R_SAMPLE: &str = "Aggregate aggr1 (online, raid_dp) (block checksums)\n\
        \x20 Plex /aggr1/plex0 (online, normal, active, pool0)\n\
        \x20   RAID group /aggr1/plex0/rg0 (normal)\n\
        \n\
        \x20     RAID Disk Device          HA  SHELF BAY CHAN Pool Type  RPM  Used (MB/blks)    Phys (MB/blks)\n\
        \x20     --------- ------          ------------- ---- ---- ---- ----- --------------    --------------\n\
        \x20     dparity   0a.01.0         0a    1   0   SA:A   0  BSAS  7200 847555/1735794176 847884/1736466816\n";

    #[test]
    fn aggr_status_r_has_ontaps_headings_and_columns() {
        let text = aggr_status_r(&reply(aggregate("aggr1", 16, 64)));
        let lines: Vec<&str> = text.lines().collect();
        let sample: Vec<&str> = AGGR_STATUS_R_SAMPLE.lines().collect();
        assert_eq!(lines[..6], sample[..6], "{text}");
        let row = lines[6];
        for (field, ours) in [
            ("dparity", "dparity"),
            ("0a.01.0", "disk0"),
            ("847555/", "64/"),
        ] {
            assert_eq!(row.find(ours), sample[6].find(field), "{field}: {row}");
        }
        assert_eq!(row.find("64/131072 "), sample[6].find("847555/"));
        assert!(
            row.ends_with(" 65/133120"),
            "Phys, the file's length: {row}"
        );
        // Spare and broken disks are listed from the first column, as ONTAP
        // lists them (S-JPNOTES), under headings of their own.
        let spares = lines
            .iter()
            .position(|l| *l == "Spare disks")
            .expect("Spare disks");
        assert!(lines[spares + 2].starts_with("RAID Disk Device"), "{text}");
        assert_eq!(lines[spares + 4], "Spare disks for block checksum");
        let spare = lines[spares + 5];
        assert!(spare.starts_with("spare     disk16 "), "{spare}");
        assert_eq!(spare.find("64/"), lines[spares + 2].find("Used"));
    }

    /// wafl.md §12.5, `lun show PATH` and `lun show -v`'s first line.
    #[test]
    fn lun_show_is_ontaps_sample_to_the_column() {
        let lun = |path: &str, size_bytes: u64| wafer_server::admin::LunStatus {
            ostype: "vmware".into(),
            space_reserved: true,
            occupied_bytes: 0,
            path: path.into(),
            volume: String::new(),
            name: String::new(),
            size_bytes,
            file_id: 64,
            lun_id: Some(0),
            export: String::new(),
            offline: false,
        };
        let luns = AdminReply::Luns(vec![
            lun("/vol/pocvol3/poclun3", 2 << 30),
            lun("/vol/karim_vol/my_lun", 100 << 30),
        ]);
        assert_eq!(
            lun_show(&luns),
            "        /vol/pocvol3/poclun3           2g (2147483648)    (r/w, online)\n\
             \x20       /vol/karim_vol/my_lun        100g (107374182400)  (r/w, online)\n"
        );
    }

    /// wafl.md §12.4, `snap list pocvol` (S-JPNOTES).
    #[test]
    fn snap_list_is_ontaps_sample_to_the_column() {
        let snapshots = AdminReply::Snapshots {
            volume: "pocvol".into(),
            snapshots: vec![SnapshotStatus {
                id: 1,
                name: "snap1".into(),
                cp: 3,
                created_unix_ns: 1_779_013_927 * 1_000_000_000,
                held_bytes: 10 << 20,
                exclusive_bytes: 1 << 20,
            }],
        };
        let space = AdminReply::VolumeSpace(vec![VolumeSpaceStatus {
            volume: "pocvol".into(),
            size_bytes: 1000 << 20,
            active_total_bytes: 800 << 20,
            snapshot_reserve_bytes: 200 << 20,
            lun_reserved_bytes: 0,
            lun_written_bytes: 0,
            metadata_bytes: 0,
            overwrite_reserve_bytes: 0,
            snapshot_used_bytes: 1 << 20,
            snapshot_spill_bytes: 0,
            used_bytes: 99 << 20,
            available_bytes: 0,
        }]);
        assert_eq!(
            snap_list(&snapshots, &space),
            "volume pocvol\n\
             working...\n\
             \n\
             \x20 %/used       %/total  date          name\n\
             ----------  ----------  ------------  --------\n\
             \x20 1% ( 1%)    0% ( 0%)  May 17 10:32  snap1\n"
        );
    }

    #[test]
    fn disk_show_lists_every_disk_under_7_modes_headings() {
        let mut aggr = aggregate("aggr0", 3, 64);
        aggr.broken.push(wafer_server::admin::BrokenDiskStatus {
            name: "disk9".into(),
            failed_reason: None,
            file: "disk9.img".into(),
            size_bytes: 64 << 20,
            physical_bytes: 65 << 20,
        });
        let text = disk_show(&reply(aggr));
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "  DISK       OWNER                    POOL   SERIAL NUMBER         HOME"
        );
        let names: Vec<&str> = lines[2..]
            .iter()
            .map(|l| l.split_whitespace().next().expect("a name"))
            .collect();
        assert_eq!(names, ["disk0", "disk1", "disk2", "disk3", "disk9"]);
        for line in &lines[2..] {
            assert_eq!(line.find("Pool0"), lines[0].find("POOL"), "{line}");
            assert_eq!(line.find(".img"), lines[0].find("SERIAL").map(|c| c + 5));
        }
    }

    #[test]
    fn sysstat_shows_the_servers_cpu_under_the_cpu_heading() {
        let before = SysstatReport {
            uptime_ns: 1_000_000_000,
            cpu_time_ns: 200_000_000,
            ..SysstatReport::default()
        };
        let after = SysstatReport {
            uptime_ns: 3_000_000_000,
            cpu_time_ns: 900_000_000,
            ..SysstatReport::default()
        };
        let line = sysstat_line(&before, &after);
        let heading = sysstat::HEADER.lines().next().expect("a heading");
        let end = heading.find("CPU").expect("CPU") + 3;
        assert_eq!(&line[..end], " 35%", "0.7 s of CPU in 2 s: {line}");
        let unknown = SysstatReport {
            cpu_time_ns: 0,
            ..after
        };
        assert_eq!(&sysstat_line(&before, &unknown)[..end], "   -");
    }

    #[test]
    fn sysstat_shows_nvlog_kilobytes_per_second_under_their_heading() {
        let before = SysstatReport {
            uptime_ns: 1_000_000_000,
            ..SysstatReport::default()
        };
        let mut after = SysstatReport {
            uptime_ns: 3_000_000_000,
            ..SysstatReport::default()
        };
        after.nvlog.bytes_written = 2 * 1024 * 1000;
        let line = sysstat_line(&before, &after);
        let heading = sysstat::HEADER.lines().next().expect("a heading");
        let column = heading.find("NVLog").expect("NVLog") + "NVLog".len();
        assert!(
            columns(&line).contains(&(column - 1)),
            "the column ends where its heading does: {line}"
        );
        assert_eq!(
            line[column - 8..column].trim(),
            "1000",
            "2,048,000 bytes in 2 s: {line}"
        );
    }

    #[test]
    fn sysstat_shows_the_cache_age_in_minutes_under_its_heading() {
        let before = SysstatReport::default();
        let age = |minutes: u64| {
            let after = SysstatReport {
                uptime_ns: 1_000_000_000,
                cache_age_ns: Some(minutes * 60_000_000_000 + 59_000_000_000),
                ..SysstatReport::default()
            };
            let line = sysstat_line(&before, &after);
            let heading = sysstat::HEADER.lines().nth(1).expect("a second heading");
            let end = heading.find("age").expect("age") + "age".len();
            line[end - 6..end].trim().to_string()
        };
        assert_eq!(age(0), "0");
        assert_eq!(age(7), "7");
        assert_eq!(age(60), "60");
        assert_eq!(age(61), ">60");
        let empty = sysstat_line(&before, &SysstatReport::default());
        let heading = sysstat::HEADER.lines().nth(1).expect("a second heading");
        let end = heading.find("age").expect("age") + "age".len();
        assert_eq!(empty[end - 6..end].trim(), "-");
    }

    /// wafl.md §12.2's Disk Statistics header and a row, whose columns a
    /// wafer row must keep.
    const STATIT_SAMPLE: &str = "disk             ut%  xfers  ureads--chain-usecs writes--chain-usecs cpreads-chain-usecs greads--chain-usecs gwrites-chain-usecs\n\
        0a.01.0           9  15.21    0.00   ....     .   8.42  14.37   412   6.79   8.11   398   0.00   ....     .   0.00   ....     .\n";

    #[test]
    fn statit_rows_keep_ontaps_columns() {
        let disk =
            |user_reads, writes, cp_reads, io_time_ns| wafer_server::admin::DiskCountersStatus {
                aggregate: "aggr1".into(),
                name: "0a.01.0".into(),
                slot: 0,
                user_reads,
                user_read_blocks: 0,
                cp_reads,
                cp_read_blocks: cp_reads * 811 / 100,
                writes,
                write_blocks: writes * 1437 / 100,
                io_time_ns,
            };
        let before = SysstatReport {
            uptime_ns: 0,
            disks: vec![disk(0, 0, 0, 0)],
            ..SysstatReport::default()
        };
        let after = SysstatReport {
            uptime_ns: 100_000_000_000,
            disks: vec![disk(0, 842, 679, 9_000_000_000)],
            ..SysstatReport::default()
        };
        let aggr = aggregate("aggr1", 1, 64);
        let text = statit(
            &AdminReply::Sysstat(Box::new(before)),
            &AdminReply::Sysstat(Box::new(after)),
            &reply(aggr),
        );
        let lines: Vec<&str> = text.lines().collect();
        let sample: Vec<&str> = STATIT_SAMPLE.lines().collect();
        let header = lines
            .iter()
            .position(|l| l.starts_with("disk "))
            .expect("a header");
        assert_eq!(lines[header], sample[0]);
        assert_eq!(lines[header + 1], "/aggr1/plex0/rg0:");
        let row = lines[header + 2];
        let ours: Vec<usize> = columns(row);
        assert_eq!(ours, columns(sample[1]), "{row}\n{}", sample[1]);
        assert!(
            row.starts_with("0a.01.0           9  15.21    0.00   ....     .   8.42  14.37"),
            "{row}"
        );
    }

    /// The same disk counters as the server samples them (slot 0 of
    /// `aggr1`, `disk0`) and as the lab counts them (`aggr1/rg0.d00`), over
    /// 100 s; the server times the disk's I/Os as one, the lab by kind.
    fn one_disk_both_ways() -> (AdminReply, AdminReply, DiskStats) {
        let server = |uptime_ns, scale: u64| {
            AdminReply::Sysstat(Box::new(SysstatReport {
                uptime_ns,
                disks: vec![DiskCountersStatus {
                    aggregate: "aggr1".into(),
                    name: "disk0".into(),
                    slot: 0,
                    user_reads: 300 * scale,
                    user_read_blocks: 600 * scale,
                    cp_reads: 10 * scale,
                    cp_read_blocks: 40 * scale,
                    writes: 50 * scale,
                    write_blocks: 800 * scale,
                    io_time_ns: 7_200_000_000 * scale,
                }],
                ..SysstatReport::default()
            }))
        };
        let per_block = 7_200_000_000 / 1440;
        let lab = DiskStats {
            name: "aggr1/rg0.d00".into(),
            busy_ns: 7_200_000_000,
            user_reads: 300,
            user_read_blocks: 600,
            read_latency_ns: 600 * per_block,
            writes: 50,
            write_blocks: 800,
            write_latency_ns: 800 * per_block,
            cp_reads: 10,
            cp_read_blocks: 40,
            cp_read_latency_ns: 40 * per_block,
            ..DiskStats::default()
        };
        (server(0, 0), server(100_000_000_000, 1), lab)
    }

    #[test]
    fn the_servers_statit_and_the_labs_are_one_layout() {
        let (before, after, lab) = one_disk_both_ways();
        let server = statit(&before, &after, &reply(aggregate("aggr1", 1, 64)));
        let groups = statit::groups("node", wafer_lab::ArrayKind::Wafer, &[lab]);
        let lab = statit::table(&groups, 100_000_000_000);
        let (server, lab): (Vec<&str>, Vec<&str>) =
            (server.lines().collect(), lab.lines().collect());
        assert_eq!(server.len(), lab.len(), "{server:#?}\n{lab:#?}");
        let (server_row, lab_row) = (server[server.len() - 1], lab[lab.len() - 1]);
        assert_eq!(
            server[..server.len() - 1],
            lab[..lab.len() - 1],
            "the same title, legend, heads and group path"
        );
        assert_eq!(
            columns(server_row)[1..],
            columns(lab_row)[1..],
            "every column after the disk's name: {server_row}\n{lab_row}"
        );
        let figures = |row: &str| {
            row.split_whitespace()
                .skip(1)
                .map(String::from)
                .collect::<Vec<_>>()
        };
        assert_eq!(figures(server_row), figures(lab_row), "the same figures");
    }

    #[test]
    fn statit_shows_every_aggregate_and_each_disk_by_its_own_counters() {
        let disk = |aggregate: &str, writes| DiskCountersStatus {
            aggregate: aggregate.into(),
            name: format!("{aggregate}-disk0"),
            slot: 0,
            user_reads: 0,
            user_read_blocks: 0,
            cp_reads: 0,
            cp_read_blocks: 0,
            writes,
            write_blocks: writes,
            io_time_ns: 0,
        };
        let sample = |uptime_ns, scale: u64| {
            AdminReply::Sysstat(Box::new(SysstatReport {
                uptime_ns,
                disks: vec![disk("aggr0", 100 * scale), disk("aggr1", 300 * scale)],
                ..SysstatReport::default()
            }))
        };
        let all =
            AdminReply::Aggregates(vec![aggregate("aggr0", 1, 64), aggregate("aggr1", 1, 64)]);
        let text = statit(&sample(0, 0), &sample(1_000_000_000, 1), &all);
        let after_heading = |heading: &str| {
            let mut lines = text.lines().skip_while(|l| *l != heading).skip(1);
            let row = lines
                .next()
                .unwrap_or_else(|| panic!("no row under {heading}: {text}"));
            row.split_whitespace().map(String::from).collect::<Vec<_>>()
        };
        let aggr0 = after_heading("/aggr0/plex0/rg0:");
        let aggr1 = after_heading("/aggr1/plex0/rg0:");
        assert_eq!(
            (aggr0[0].as_str(), aggr0[6].as_str()),
            ("aggr0-disk0", "100.00"),
            "{text}"
        );
        assert_eq!(
            (aggr1[0].as_str(), aggr1[6].as_str()),
            ("aggr1-disk0", "300.00"),
            "{text}"
        );
    }

    #[test]
    fn the_servers_sysstat_and_the_labs_are_one_layout() {
        let (before, after, _) = one_disk_both_ways();
        let (AdminReply::Sysstat(before), AdminReply::Sysstat(after)) = (before, after) else {
            unreachable!("samples")
        };
        let server = sysstat_line(&before, &after);
        let lab = sysstat::line(&sysstat::Counts::from(&wafer_lab::report::IntervalReport {
            end_ns: 100_000_000_000,
            length_ns: 100_000_000_000,
            ops: 1000,
            host_read_bytes: 1 << 20,
            host_write_bytes: 1 << 20,
            disk_read_blocks: 640,
            disk_write_blocks: 800,
            busiest_disk_busy_ns: 7_200_000_000,
        }));
        let heads = columns(sysstat::HEADER.lines().next().expect("heads"));
        assert_eq!(columns(&server), heads, "{server}");
        assert_eq!(columns(&lab), heads, "{lab}");
        let field = |line: &str, head: &str| {
            let heading = sysstat::HEADER.lines().next().expect("heads");
            let end = heading.find(head).expect(head) + head.len();
            let start = heads
                .iter()
                .rev()
                .find(|&&e| e < end - 1)
                .map_or(0, |e| e + 1);
            line[start..end].trim().to_string()
        };
        for head in ["Disk", "Time"] {
            assert_eq!(
                field(&server, head),
                field(&lab, head),
                "{head}\n{server}\n{lab}"
            );
        }
        assert_eq!(
            field(&server, "Disk"),
            "26",
            "640 blocks in 100 s: {server}"
        );
        assert_eq!(field(&server, "NBD"), "0");
        assert_eq!(field(&lab, "NBD"), "-", "the lab has no NBD: {lab}");
        assert_eq!(field(&lab, "CPU"), "-");
    }

    /// Where each field of a row ends.
    fn columns(row: &str) -> Vec<usize> {
        let bytes = row.as_bytes();
        (0..bytes.len())
            .filter(|&i| bytes[i] != b' ' && bytes.get(i + 1).is_none_or(|b| *b == b' '))
            .collect()
    }
}
