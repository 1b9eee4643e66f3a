//! `sysstat -x` lines (wafl.md §12.1): the lab's `<array>.sysstat.txt`, a
//! line per interval from the start of the run (ramp-up included), and the
//! server's `wafer sysstat -x`, a line per sampling interval, both print
//! them through [`line`] under [`HEADER`], so the two cannot drift apart.
//!
//! The columns are ONTAP's that wafer has, in ONTAP's order: `CPU`, host
//! operations per second by protocol (`NBD` where ONTAP puts NFS, then
//! `Total`), `Net` KiB/s in and out (network traffic: NBD and iSCSI),
//! `Disk` KiB/s read and written, `Cache age` (minutes, `>60` past an
//! hour), `Cache hit`, `CP time` (the interval's share spent in CPs), `CP ty`
//! (the type of most CPs in it), `Disk util` (the busiest disk's busy
//! share), `FCP` and `iSCSI` operations per second and their KiB/s in
//! (written by the host) and out (read by it). After ONTAP's come wafer's
//! own: `NVLog` KiB/s written, and `Time`, when the interval ended, in
//! seconds since the server started or since the run began. Throughputs are
//! in KiB/s (1024 bytes), labelled so where ONTAP's heads say `kB/s`.
//!
//! A column its source cannot measure shows `-`, as ONTAP shows a column
//! with nothing to report. The server has no FCP. The lab's host is one FC
//! initiator, so it has no NBD, iSCSI or network traffic; it does not model
//! CPU, and it counts neither the buffer cache's age, its hits, CPs nor
//! NVLog bytes per interval (its `mechanisms.txt` counts cache hits and CPs
//! per segment), so those columns show `-` in its file.

use std::fmt::Write;

use super::{ArrayReport, IntervalReport};
use wafer_devices::BLOCK_BYTES;

/// The column heads (a string continuation would strip the second line's
/// leading blanks, so the lines are spelled out).
pub const HEADER: &str = concat!(
    " CPU     NBD   Total     Net  KiB/s    Disk  KiB/s  Cache  Cache    CP  CP   Disk",
    "     FCP   iSCSI     FCP  KiB/s   iSCSI  KiB/s   NVLog    Time\n",
    "                          in    out    read  write    age    hit  time  ty   util",
    "                      in    out      in    out   KiB/s       s\n",
);

/// One protocol's host traffic over an interval.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Traffic {
    /// Operations.
    pub ops: u64,
    /// Bytes the host wrote.
    pub in_bytes: u64,
    /// Bytes the host read.
    pub out_bytes: u64,
}

/// What one interval's line shows, as counts over the interval; `None` is
/// a column the source cannot measure.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// The interval's length.
    pub length_ns: u64,
    /// When it ended, from the start of the server or the run.
    pub end_ns: u64,
    /// CPU time used in it.
    pub cpu_ns: Option<u64>,
    /// NBD's traffic.
    pub nbd: Option<Traffic>,
    /// FCP's traffic.
    pub fcp: Option<Traffic>,
    /// iSCSI's traffic.
    pub iscsi: Option<Traffic>,
    /// 4 KiB blocks the disks read (user and CP reads).
    pub disk_read_blocks: u64,
    /// 4 KiB blocks the disks wrote.
    pub disk_write_blocks: u64,
    /// How long ago the cache's oldest block was last used, at the end
    /// (`None` also when there is nothing to age).
    pub cache_age_ns: Option<u64>,
    /// Host reads served from the cache, and those that went to disk.
    pub cache_hits_misses: Option<(u64, u64)>,
    /// Time CPs ran.
    pub cp_ns: Option<u64>,
    /// The type letter of most CPs (`None` also when none ran).
    pub cp_type: Option<String>,
    /// Busy time of the busiest disk.
    pub busiest_disk_busy_ns: u64,
    /// Bytes written to the NVLog.
    pub nvlog_bytes: Option<u64>,
}

/// The interval lines of `report`, under the heads.
pub fn render(report: &ArrayReport) -> String {
    render_intervals(&report.intervals)
}

/// The heads, then a line for each of `intervals`.
fn render_intervals(intervals: &[IntervalReport]) -> String {
    let mut text = String::from(HEADER);
    for interval in intervals {
        text.push_str(&line(&Counts::from(interval)));
        text.push('\n');
    }
    text
}

impl From<&IntervalReport> for Counts {
    /// What the lab measured in an interval: its host's FCP traffic and
    /// its disks.
    fn from(interval: &IntervalReport) -> Counts {
        Counts {
            length_ns: interval.length_ns,
            end_ns: interval.end_ns,
            fcp: Some(Traffic {
                ops: interval.ops,
                in_bytes: interval.host_write_bytes,
                out_bytes: interval.host_read_bytes,
            }),
            disk_read_blocks: interval.disk_read_blocks,
            disk_write_blocks: interval.disk_write_blocks,
            busiest_disk_busy_ns: interval.busiest_disk_busy_ns,
            ..Counts::default()
        }
    }
}

/// Each column's width; heads and figures are right-aligned in it.
const WIDTHS: [usize; 20] = [4, 8, 8, 8, 7, 8, 7, 7, 7, 6, 4, 7, 8, 8, 8, 7, 8, 7, 8, 8];

/// One interval's line, without its newline.
pub fn line(counts: &Counts) -> String {
    let mut text = String::new();
    for (width, shown) in WIDTHS.into_iter().zip(figures(counts)) {
        let shown = shown.as_deref().unwrap_or("-");
        write!(text, "{shown:>width$}").expect("writing to a string");
    }
    text
}

/// A line's figures, column by column; `None` shows as `-`.
fn figures(counts: &Counts) -> [Option<String>; 20] {
    let rates = Rates(counts.length_ns.max(1) as f64 / 1e9);
    let network = network(counts);
    [
        counts.cpu_ns.map(|ns| rates.percent(ns)),
        counts.nbd.map(|t| rates.per_second(t.ops)),
        total_ops(counts).map(|ops| rates.per_second(ops)),
        network.map(|(written, _)| rates.kib(written)),
        network.map(|(_, read)| rates.kib(read)),
        Some(rates.kib(counts.disk_read_blocks * BLOCK_BYTES)),
        Some(rates.kib(counts.disk_write_blocks * BLOCK_BYTES)),
        counts.cache_age_ns.map(cache_age),
        counts.cache_hits_misses.and_then(cache_hit),
        counts.cp_ns.map(|ns| rates.percent(ns)),
        counts.cp_type.clone(),
        Some(rates.percent(counts.busiest_disk_busy_ns)),
        counts.fcp.map(|t| rates.per_second(t.ops)),
        counts.iscsi.map(|t| rates.per_second(t.ops)),
        counts.fcp.map(|t| rates.kib(t.in_bytes)),
        counts.fcp.map(|t| rates.kib(t.out_bytes)),
        counts.iscsi.map(|t| rates.kib(t.in_bytes)),
        counts.iscsi.map(|t| rates.kib(t.out_bytes)),
        counts.nvlog_bytes.map(|bytes| rates.kib(bytes)),
        Some(format!("{:.0}", counts.end_ns as f64 / 1e9)),
    ]
}

/// Every protocol's operations, if any protocol was measured.
fn total_ops(counts: &Counts) -> Option<u64> {
    let protocols = [counts.nbd, counts.fcp, counts.iscsi];
    let measured = protocols.iter().any(Option::is_some);
    measured.then(|| protocols.iter().flatten().map(|t| t.ops).sum())
}

/// The network's bytes in and out, NBD's and iSCSI's, if either was
/// measured.
fn network(counts: &Counts) -> Option<(u64, u64)> {
    let both = [counts.nbd, counts.iscsi];
    both.iter().any(Option::is_some).then(|| {
        let sum = |bytes: fn(&Traffic) -> u64| both.iter().flatten().map(bytes).sum();
        (sum(|t| t.in_bytes), sum(|t| t.out_bytes))
    })
}

/// Counts over an interval of this many seconds, as shown.
struct Rates(f64);

impl Rates {
    /// Per second, whole.
    fn per_second(&self, count: u64) -> String {
        format!("{:.0}", count as f64 / self.0)
    }

    /// KiB per second, whole.
    fn kib(&self, bytes: u64) -> String {
        format!("{:.0}", bytes as f64 / self.0 / 1024.0)
    }

    /// Nanoseconds as a whole share of the interval, at most 100%.
    fn percent(&self, ns: u64) -> String {
        format!("{:.0}%", (ns as f64 / 1e9 / self.0 * 100.0).min(100.0))
    }
}

/// Cache age in whole minutes, `>60` past an hour.
fn cache_age(age_ns: u64) -> String {
    const MINUTE_NS: u64 = 60_000_000_000;
    match age_ns / MINUTE_NS {
        minutes if minutes > 60 => ">60".to_string(),
        minutes => minutes.to_string(),
    }
}

/// The share of host reads the cache served, none without reads.
fn cache_hit((hits, misses): (u64, u64)) -> Option<String> {
    match hits + misses {
        0 => None,
        all => Some(format!("{}%", hits * 100 / all)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Where each field of a line ends.
    fn field_ends(line: &str) -> Vec<usize> {
        let bytes = line.as_bytes();
        (0..bytes.len())
            .filter(|&i| bytes[i] != b' ' && bytes.get(i + 1).is_none_or(|b| *b == b' '))
            .collect()
    }

    /// Where each column ends.
    fn column_ends() -> Vec<usize> {
        WIDTHS
            .iter()
            .scan(0, |end, width| {
                *end += width;
                Some(*end - 1)
            })
            .collect()
    }

    fn interval() -> IntervalReport {
        IntervalReport {
            end_ns: 60_000_000_000,
            length_ns: 10_000_000_000,
            ops: 50_000,
            host_read_bytes: 1024 * 10_000,
            host_write_bytes: 1024 * 20_000,
            disk_read_blocks: 25_000,
            disk_write_blocks: 5_000,
            busiest_disk_busy_ns: 9_700_000_000,
        }
    }

    #[test]
    fn every_head_ends_where_its_column_does() {
        let ends = column_ends();
        let heads: Vec<&str> = HEADER.lines().collect();
        assert_eq!(field_ends(heads[0]), ends, "a head over every column");
        for end in field_ends(heads[1]) {
            assert!(ends.contains(&end), "{end}: {}", heads[1]);
        }
        assert_eq!(heads[0].len(), heads[1].len());
    }

    #[test]
    fn a_lab_line_fills_every_column_and_marks_what_it_cannot_measure() {
        let text = line(&Counts::from(&interval()));
        assert_eq!(field_ends(&text), column_ends(), "{text}");
        let fields: Vec<&str> = text.split_whitespace().collect();
        assert_eq!(
            fields,
            [
                "-", "-", "5000", "-", "-", "10000", "2000", "-", "-", "-", "-", "97%", "5000",
                "-", "2000", "1000", "-", "-", "-", "60"
            ]
        );
    }

    #[test]
    fn the_network_is_nbd_and_iscsi_and_the_total_every_protocol() {
        let traffic = |ops, in_bytes, out_bytes| Traffic {
            ops,
            in_bytes,
            out_bytes,
        };
        let counts = Counts {
            length_ns: 2_000_000_000,
            nbd: Some(traffic(10, 2048, 0)),
            iscsi: Some(traffic(30, 2048, 4096)),
            cache_hits_misses: Some((3, 1)),
            cp_ns: Some(500_000_000),
            cp_type: Some("T".into()),
            ..Counts::default()
        };
        let text = line(&counts);
        let fields: Vec<&str> = text.split_whitespace().collect();
        assert_eq!(fields[1..5], ["5", "20", "2", "2"], "{text}");
        assert_eq!(fields[8..11], ["75%", "25%", "T"], "{text}");
        assert_eq!(fields[13], "15", "iSCSI's ops: {text}");
        assert_eq!(fields[16..18], ["1", "2"], "iSCSI's KiB/s: {text}");
    }

    #[test]
    fn cache_age_is_in_whole_minutes_to_an_hour() {
        let minutes = |m: u64| cache_age(m * 60_000_000_000 + 59_000_000_000);
        assert_eq!([minutes(0), minutes(60), minutes(61)], ["0", "60", ">60"]);
    }

    #[test]
    fn a_file_is_the_heads_then_a_line_per_interval() {
        let text = render_intervals(&[interval(), interval()]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4);
        assert_eq!(format!("{}\n{}\n", lines[0], lines[1]), HEADER);
        assert_eq!(lines[2], line(&Counts::from(&interval())));
    }
}
