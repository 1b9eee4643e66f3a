//! `sysstat -x`-style interval lines (wafl.md §12.1), one per interval from
//! the start of the run, ramp-up included.
//!
//! The columns are those of ONTAP's that the lab measures for every array:
//! the interval's end in seconds of virtual time, host operations per second
//! (all FCP: the lab's host is one FC initiator), FCP KiB/s in (written by
//! the host) and out (read by it), disk KiB/s read and written, and `Disk
//! util`, the busy share of the busiest disk. Throughputs are in KiB/s
//! (1024 bytes), labelled so; CPU, network and CP columns are left out
//! because the comparator has none to report.

use std::fmt::Write;

use super::{ArrayReport, IntervalReport};
use wafer_devices::BLOCK_BYTES;

/// The column heads (a string continuation would strip the first line's
/// leading blanks, so the lines are spelled out).
const HEADER: &str = concat!(
    "   Time    Total    FCP     FCP  KiB/s    Disk  KiB/s    Disk\n",
    "      s    ops/s  ops/s      in    out    read  write    util\n",
);

/// The interval lines of `report`, under a header.
pub fn render(report: &ArrayReport) -> String {
    let mut text = format!("{}:\n{HEADER}", report.name);
    for interval in &report.intervals {
        text.push_str(&line(interval));
    }
    text
}

/// One interval's line.
fn line(interval: &IntervalReport) -> String {
    let seconds = interval.length_ns.max(1) as f64 / 1e9;
    let per_second = |count: u64| count as f64 / seconds;
    let kib = |bytes: u64| per_second(bytes) / 1024.0;
    let blocks_kib = |blocks: u64| kib(blocks * BLOCK_BYTES);
    let utilisation = interval.busiest_disk_busy_ns as f64 / interval.length_ns.max(1) as f64;
    let mut line = String::new();
    writeln!(
        line,
        "{:>7.0}{:>9.0}{:>7.0}{:>8.0}{:>7.0}{:>8.0}{:>7.0}{:>7.0}%",
        interval.end_ns as f64 / 1e9,
        per_second(interval.ops),
        per_second(interval.ops),
        kib(interval.host_write_bytes),
        kib(interval.host_read_bytes),
        blocks_kib(interval.disk_read_blocks),
        blocks_kib(interval.disk_write_blocks),
        (utilisation * 100.0).min(100.0),
    )
    .expect("writing to a string");
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_heads_line_up_with_the_figures() {
        let heads: Vec<usize> = HEADER.lines().map(str::len).collect();
        assert_eq!(heads, [61, 61]);
        let interval = IntervalReport {
            end_ns: 60_000_000_000,
            length_ns: 60_000_000_000,
            ..IntervalReport::default()
        };
        assert_eq!(line(&interval).trim_end().len(), 61);
    }

    #[test]
    fn a_line_gives_rates_per_second() {
        let interval = IntervalReport {
            end_ns: 60_000_000_000,
            length_ns: 10_000_000_000,
            ops: 50_000,
            host_read_bytes: 1024 * 10_000,
            host_write_bytes: 1024 * 20_000,
            disk_read_blocks: 25_000,
            disk_write_blocks: 5_000,
            busiest_disk_busy_ns: 9_700_000_000,
        };
        let fields: Vec<String> = line(&interval)
            .split_whitespace()
            .map(str::to_string)
            .collect();
        assert_eq!(
            fields,
            ["60", "5000", "5000", "2000", "1000", "10000", "2000", "97%"]
        );
    }
}
