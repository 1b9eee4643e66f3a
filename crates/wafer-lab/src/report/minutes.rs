//! Per-minute IOPS, MB/s and latency, and when latency first reached a
//! threshold: `<array>.minutes.txt`, for a run that asks for them.
//!
//! One line per minute of virtual time from the start of the run (ramp-up
//! included), each counting the host I/Os that completed within it; then,
//! if the run set a latency threshold, the first minute whose mean latency
//! was at or below it and the first whose mean was above it, or that none
//! was.

use std::fmt::Write;

use super::{ArrayReport, LatencyThreshold, MinuteEnd};

const HEADER: &str = " minute     end s       IOPS      MB/s    avg ms    p99 ms\n";

/// The per-minute table of `report`, or `None` if the run kept none.
pub fn render(report: &ArrayReport) -> Option<String> {
    if report.minutes.is_empty() {
        return None;
    }
    let mut text = format!("{} ({}):\n{HEADER}", report.name, report.kind.as_str());
    for minute in &report.minutes {
        writeln!(
            text,
            "{:>7}{:>10.0}{:>11.1}{:>10.2}{:>10.3}{:>10.3}",
            minute.minute,
            minute.end_s,
            minute.iops,
            minute.mbps,
            minute.latency_ms_avg,
            minute.latency_ms_p99,
        )
        .expect("writing to a string");
    }
    if let Some(threshold) = &report.latency_threshold {
        text.push_str(&threshold_line(threshold));
        text.push('\n');
    }
    Some(text)
}

/// When mean latency first reached the threshold, from each side, in
/// words.
pub fn threshold_line(threshold: &LatencyThreshold) -> String {
    let when = |first: Option<MinuteEnd>| match first {
        Some(first) => format!("first in minute {} (by {:.0} s)", first.minute, first.end_s),
        None => "in no minute".to_string(),
    };
    format!(
        "mean latency at or below {} ms {}; above it {}",
        threshold.threshold_ms,
        when(threshold.first_at_or_below),
        when(threshold.first_above),
    )
}
