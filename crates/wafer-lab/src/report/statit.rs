//! The disk section of ONTAP's `statit`, over the measured time (wafl.md
//! §12.2).
//!
//! Per disk, per second: `ut%` (the share of time at least one command was
//! outstanding), `xfers` (commands), and for each kind of command its rate,
//! `chain` (4 KiB blocks per command) and `usecs` (the mean round trip per
//! 4 KiB block, in microseconds): `ureads` fetch host data, `writes` are
//! every write, `cpreads` are the reads a write costs (old data and parity
//! for a parity update; in wafer, a CP's reads). `greads` and `gwrites`
//! (RAID's own reconstruction and scrub I/O) are shown and are zero: neither
//! array's model issues them. A column with no commands prints `....` and
//! `.` as ONTAP does.

use std::fmt::Write;

use super::ArrayReport;
use crate::array::DiskStats;

const HEADER: &str = "\
Disk Statistics (per second)
        ut% is the percent of time the disk was busy.
        xfers is the number of data-transfer commands issued per second.
        xfers = ureads + writes + cpreads + greads + gwrites
        chain is the average number of 4K blocks per command.
        usecs is the average disk round-trip time per 4K block.

disk             ut%  xfers ureads--chain-usecs writes--chain-usecs cpreads-chain-usecs greads--chain-usecs gwrites-chain-usecs
";

/// The table for `report`'s disks over its measured time.
pub fn render(report: &ArrayReport) -> String {
    table(
        &report.name,
        &report.measured_disk_stats(),
        report.measured_ns(),
    )
}

/// The table for counters `disks` accumulated over `elapsed_ns`, under the
/// group heading `/group:`; disks named `aggr/rgG.dNN` (an array of several
/// aggregates) go instead under ONTAP's heading for their RAID group,
/// `/aggr/plex0/rgG:`, as `rgG.dNN`.
pub fn table(group: &str, disks: &[DiskStats], elapsed_ns: u64) -> String {
    let seconds = elapsed_ns.max(1) as f64 / 1e9;
    let mut text = String::from(HEADER);
    let mut heading = None;
    if disks.iter().all(|disk| !disk.name.contains('/')) {
        writeln!(text, "/{group}:").expect("writing to a string");
    }
    for disk in disks {
        let name = match disk.name.split_once('/') {
            Some((aggregate, own)) => {
                let raid_group = own.split('.').next().unwrap_or(own);
                let this = format!("/{aggregate}/plex0/{raid_group}:");
                if heading.as_ref() != Some(&this) {
                    writeln!(text, "{this}").expect("writing to a string");
                    heading = Some(this);
                }
                own
            }
            None => &disk.name,
        };
        let utilisation = (disk.busy_ns as f64 / elapsed_ns.max(1) as f64 * 100.0).min(100.0);
        write!(
            text,
            "{:<16}{:>4.0}{:>7.2}",
            name,
            utilisation,
            disk.transfers() as f64 / seconds
        )
        .expect("writing to a string");
        let columns = [
            (disk.user_reads, disk.user_read_blocks, disk.read_latency_ns),
            (disk.writes, disk.write_blocks, disk.write_latency_ns),
            (disk.cp_reads, disk.cp_read_blocks, disk.cp_read_latency_ns),
            (0, 0, 0),
            (0, 0, 0),
        ];
        for (commands, blocks, latency_ns) in columns {
            text.push_str(&column(commands, blocks, latency_ns, seconds));
        }
        text.push('\n');
    }
    text
}

/// One `rate chain usecs` group.
fn column(commands: u64, blocks: u64, latency_ns: u64, seconds: f64) -> String {
    let rate = commands as f64 / seconds;
    if commands == 0 {
        return format!("{rate:>7.2}{:>7}{:>6}", "....", ".");
    }
    let chain = blocks as f64 / commands as f64;
    let usecs = latency_ns as f64 / 1000.0 / blocks as f64;
    format!("{rate:>7.2}{chain:>7.2}{usecs:>6.0}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_chains_and_usecs_per_block() {
        let disk = DiskStats {
            name: "d00".into(),
            busy_ns: 500_000_000,
            user_reads: 200,
            user_read_blocks: 400,
            read_latency_ns: 400 * 7_000_000,
            writes: 10,
            write_blocks: 10,
            write_latency_ns: 10 * 5_000_000,
            ..DiskStats::default()
        };
        let text = table("eva/dg0", &[disk], 2_000_000_000);
        let row = text.lines().last().unwrap();
        let fields: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(
            fields[..12],
            [
                "d00", "25", "105.00", "100.00", "2.00", "7000", "5.00", "1.00", "5000", "0.00",
                "....", "."
            ]
        );
        assert!(text.contains("\n/eva/dg0:\n"));
        let heads = text.lines().find(|l| l.starts_with("disk ")).unwrap();
        assert_eq!(heads.len(), row.len(), "the heads line up with the columns");
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
        let text = table("node", &disks.map(several), 1_000_000_000);
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
}
