//! Per-LUN IOPS, MB/s and latency in each measured segment:
//! `<array>.luns.txt`, for an array of several LUNs.
//!
//! The workload addresses the LUNs end to end; an I/O counts for the LUN
//! its first byte lies in (an I/O across a boundary is rare and counted
//! once). The LUNs are numbered in address order, as the scenario lists
//! them, so the rows of one segment add up to its totals.

use std::fmt::Write;

use super::ArrayReport;

const HEADER: &str = "    seg  lun       IOPS      MB/s    avg ms    p99 ms   share\n";

/// The per-LUN table of `report`, or `None` if it measured one LUN.
pub fn render(report: &ArrayReport) -> Option<String> {
    if report
        .segments
        .iter()
        .all(|segment| segment.luns.is_empty())
    {
        return None;
    }
    let mut text = format!("{} ({}):\n{HEADER}", report.name, report.kind.as_str());
    for segment in &report.segments {
        for (index, lun) in segment.luns.iter().enumerate() {
            let share = 100.0 * lun.ios as f64 / segment.ios.max(1) as f64;
            writeln!(
                text,
                "{:>7}{:>5}{:>11.1}{:>10.2}{:>10.3}{:>10.3}{:>7.1} %",
                segment.index,
                index,
                lun.iops,
                lun.mbps,
                lun.latency_ms_avg,
                lun.latency_ms_p99,
                share
            )
            .expect("writing to a string");
        }
    }
    text.push_str("(LUNs in address order; MB/s in 10^6 bytes per second)\n");
    Some(text)
}
