//! The disk section of ONTAP's `statit` (wafl.md §12.2): the lab's
//! `<array>.statit.txt` and the server's `wafer statit -e` both print it
//! through [`table`], so the two cannot drift apart.
//!
//! Per disk, per second: `ut%` (the share of time the disk was busy),
//! `xfers` (commands), and for each kind of command its rate, `chain` (4 KiB
//! blocks per command) and `usecs` (the mean round trip per 4 KiB block, in
//! microseconds): `ureads` fetch host data, `writes` are every write,
//! `cpreads` are the reads a write costs (old data and parity for a parity
//! update; in wafer, a CP's reads). A kind with no commands prints `....`
//! and `.` as ONTAP does. The disks are listed under their RAID group's
//! path, `/aggr0/plex0/rg0:`, as ONTAP lists them.
//!
//! What each source can tell: the lab times every command of every kind;
//! the server times a disk's commands together, so its rows give every kind
//! the disk's mean per block, and its `ut%` is that time's share of the
//! interval (at most 100). `greads` and `gwrites` (RAID's own reconstruction
//! and scrub I/O) are always zero: neither lab array issues such I/O, and
//! the server counts its scrub and reconstruction I/O with the user reads
//! and the writes. The lab names a group by its disks' names: `aggr/rgG.dNN`
//! is RAID group G of aggregate `aggr` (shown as `rgG.dNN`), a plain
//! `rgG.dNN` is a group of the array's one aggregate, `aggr0`, and the
//! in-place comparator's RAID-5 groups are shown as an aggregate of the
//! array's name: its one group's disks `dNN` as `/eva4400/plex0/rg0:`, its
//! disks `rgG.dNN` of several groups under `/eva4400/plex0/rgG:`. The
//! lab's arrays have no spares.

use std::fmt::Write;

use super::ArrayReport;
use crate::array::{ArrayKind, DiskStats};

/// The section's title, legend and column heads.
pub const HEADER: &str = "\
Disk Statistics (per second)
        ut% is the percent of time the disk was busy.
        xfers is the number of data-transfer commands issued per second.
        xfers = ureads + writes + cpreads + greads + gwrites
        chain is the average number of 4K blocks per command.
        usecs is the average disk round-trip time per 4K block.

disk             ut%  xfers  ureads--chain-usecs writes--chain-usecs cpreads-chain-usecs greads--chain-usecs gwrites-chain-usecs
";

/// The aggregate a lab disk named without one belongs to: a scenario's
/// one aggregate declared without `[[array.aggregate]]` tables.
const SOLE_AGGREGATE: &str = "aggr0";

/// One kind of command over the interval.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Kind {
    /// Commands.
    pub commands: u64,
    /// 4 KiB blocks they moved.
    pub blocks: u64,
    /// Their round trips, summed.
    pub latency_ns: u64,
}

/// One disk's counters over the interval.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Row {
    /// The name shown.
    pub name: String,
    /// Time the disk was busy.
    pub busy_ns: u64,
    /// User reads, writes, CP reads, guaranteed reads and writes.
    pub kinds: [Kind; 5],
}

/// One RAID group's disks under its path.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Group {
    /// ONTAP's path of the group, [`group_path`].
    pub path: String,
    /// Its disks, in order.
    pub rows: Vec<Row>,
}

/// ONTAP's path of RAID group `group` of `aggregate`: `/aggr0/plex0/rg0`.
pub fn group_path(aggregate: &str, group: &str) -> String {
    format!("/{aggregate}/plex0/{group}")
}

/// The section for `report`'s disks over its measured time.
pub fn render(report: &ArrayReport) -> String {
    table(
        &groups(&report.name, report.kind, &report.measured_disk_stats()),
        report.measured_ns(),
    )
}

/// The section for `groups`' counters, accumulated over `elapsed_ns`.
pub fn table(groups: &[Group], elapsed_ns: u64) -> String {
    let mut text = String::from(HEADER);
    for group in groups {
        writeln!(text, "{}:", group.path).expect("writing to a string");
        for row in &group.rows {
            text.push_str(&disk_row(row, elapsed_ns));
        }
    }
    text
}

/// A lab array's disks by RAID group, in their order.
pub fn groups(array: &str, kind: ArrayKind, disks: &[DiskStats]) -> Vec<Group> {
    let mut groups: Vec<Group> = Vec::new();
    for disk in disks {
        let (path, name) = lab_place(array, kind, &disk.name);
        if groups.last().is_none_or(|g| g.path != path) {
            groups.push(Group {
                path,
                rows: Vec::new(),
            });
        }
        let row = Row {
            name: name.to_string(),
            ..Row::from(disk)
        };
        groups.last_mut().expect("pushed").rows.push(row);
    }
    groups
}

/// A lab disk's group path and the name shown for it.
fn lab_place<'a>(array: &str, kind: ArrayKind, name: &'a str) -> (String, &'a str) {
    if kind == ArrayKind::InPlace {
        let raid_group = name.split_once('.').map_or("rg0", |(group, _)| group);
        return (group_path(array, raid_group), name);
    }
    let (aggregate, own) = name.split_once('/').unwrap_or((SOLE_AGGREGATE, name));
    let raid_group = own.split('.').next().unwrap_or(own);
    (group_path(aggregate, raid_group), own)
}

impl From<&DiskStats> for Row {
    fn from(disk: &DiskStats) -> Row {
        let kind = |commands, blocks, latency_ns| Kind {
            commands,
            blocks,
            latency_ns,
        };
        Row {
            name: disk.name.clone(),
            busy_ns: disk.busy_ns,
            kinds: [
                kind(disk.user_reads, disk.user_read_blocks, disk.read_latency_ns),
                kind(disk.writes, disk.write_blocks, disk.write_latency_ns),
                kind(disk.cp_reads, disk.cp_read_blocks, disk.cp_read_latency_ns),
                Kind::default(),
                Kind::default(),
            ],
        }
    }
}

/// One disk's line.
fn disk_row(row: &Row, elapsed_ns: u64) -> String {
    let seconds = elapsed_ns.max(1) as f64 / 1e9;
    let utilisation = (row.busy_ns as f64 / elapsed_ns.max(1) as f64 * 100.0).min(100.0);
    let commands: u64 = row.kinds.iter().map(|k| k.commands).sum();
    let mut text = format!(
        "{:<15} {utilisation:>3.0} {:>6.2}",
        row.name,
        commands as f64 / seconds
    );
    for (n, kind) in row.kinds.iter().enumerate() {
        // ureads' rate is a column wider than the others', as in ONTAP's.
        let width = if n == 0 { 8 } else { 7 };
        text.push_str(&kind_columns(kind, seconds, width));
    }
    text.push('\n');
    text
}

/// One `rate chain usecs` group, its rate `width` wide.
fn kind_columns(kind: &Kind, seconds: f64, width: usize) -> String {
    let rate = kind.commands as f64 / seconds;
    if kind.commands == 0 {
        return format!("{rate:>width$.2} {:>6} {:>5}", "....", ".");
    }
    let chain = kind.blocks as f64 / kind.commands as f64;
    let usecs = kind.latency_ns as f64 / 1000.0 / kind.blocks.max(1) as f64;
    format!("{rate:>width$.2} {chain:>6.2} {usecs:>5.0}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// wafl.md §12.2's column heads and first row.
    const SAMPLE: &str = "disk             ut%  xfers  ureads--chain-usecs writes--chain-usecs cpreads-chain-usecs greads--chain-usecs gwrites-chain-usecs\n\
        0a.01.0           9  15.21    0.00   ....     .   8.42  14.37   412   6.79   8.11   398   0.00   ....     .   0.00   ....     .\n";

    #[test]
    fn rates_chains_and_usecs_per_block() {
        let disk = DiskStats {
            name: "rg0.d00".into(),
            busy_ns: 500_000_000,
            user_reads: 200,
            user_read_blocks: 400,
            read_latency_ns: 400 * 7_000_000,
            writes: 10,
            write_blocks: 10,
            write_latency_ns: 10 * 5_000_000,
            ..DiskStats::default()
        };
        let groups = groups("fas2050", ArrayKind::Wafer, &[disk]);
        let text = table(&groups, 2_000_000_000);
        let row = text.lines().last().unwrap();
        let fields: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(
            fields[..12],
            [
                "rg0.d00", "25", "105.00", "100.00", "2.00", "7000", "5.00", "1.00", "5000",
                "0.00", "....", "."
            ]
        );
        assert!(text.contains("\n/aggr0/plex0/rg0:\nrg0.d00 "), "{text}");
    }

    #[test]
    fn the_heads_and_a_row_are_ontaps_to_the_column() {
        let sample: Vec<&str> = SAMPLE.lines().collect();
        let heads = HEADER.lines().last().unwrap();
        assert_eq!(heads, sample[0]);
        let disk = DiskStats {
            name: "0a.01.0".into(),
            busy_ns: 9_000_000_000,
            writes: 842,
            write_blocks: 842 * 1437 / 100,
            write_latency_ns: 842 * 1437 / 100 * 412_000,
            cp_reads: 679,
            cp_read_blocks: 679 * 811 / 100,
            cp_read_latency_ns: 679 * 811 / 100 * 398_000,
            ..DiskStats::default()
        };
        let row = disk_row(&Row::from(&disk), 100_000_000_000);
        assert_eq!(
            row.trim_end(),
            sample[1],
            "the sample's row, to the character"
        );
    }

    #[test]
    fn several_aggregates_disks_go_under_their_raid_groups() {
        let several = |name: &str| DiskStats {
            name: name.into(),
            ..DiskStats::default()
        };
        let disks = [
            "aggr0/rg0.d00",
            "aggr0/rg0.d01",
            "aggr0/rg1.d00",
            "aggr1/rg0.d00",
        ];
        let groups = groups("node", ArrayKind::Wafer, &disks.map(several));
        let text = table(&groups, 1_000_000_000);
        let headings: Vec<&str> = text.lines().filter(|l| l.starts_with('/')).collect();
        assert_eq!(
            headings,
            [
                "/aggr0/plex0/rg0:",
                "/aggr0/plex0/rg1:",
                "/aggr1/plex0/rg0:"
            ],
            "several aggregates' disks go under ONTAP's RAID group headings"
        );
        assert!(text.lines().any(|l| l.starts_with("rg1.d00 ")), "{text}");
    }

    #[test]
    fn the_comparators_disks_go_under_one_group_named_after_the_array() {
        let disk = |name: &str| DiskStats {
            name: name.into(),
            ..DiskStats::default()
        };
        let groups = groups("eva4400", ArrayKind::InPlace, &[disk("d00"), disk("d01")]);
        let paths: Vec<&str> = groups.iter().map(|g| g.path.as_str()).collect();
        assert_eq!(paths, ["/eva4400/plex0/rg0"]);
        assert_eq!(groups[0].rows.len(), 2);
    }

    #[test]
    fn a_comparator_of_several_groups_lists_each_under_its_own_path() {
        let disk = |name: &str| DiskStats {
            name: name.into(),
            ..DiskStats::default()
        };
        let disks = ["rg0.d00", "rg0.d01", "rg1.d00", "rg1.d01"].map(disk);
        let groups = groups("cx3", ArrayKind::InPlace, &disks);
        let paths: Vec<&str> = groups.iter().map(|g| g.path.as_str()).collect();
        assert_eq!(paths, ["/cx3/plex0/rg0", "/cx3/plex0/rg1"]);
        assert_eq!(groups[1].rows[1].name, "rg1.d01");
    }
}
