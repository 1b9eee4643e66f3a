//! Per-segment mechanisms: what each segment's host I/Os cost the disks, and
//! why.
//!
//! A write-anywhere array ages when its layout loses locality: reads of a
//! file's consecutive blocks stop being one chain on one disk, the arm
//! travels further between them, free space breaks into pieces so CPs write
//! partial stripes and read old blocks for parity, and host writes not
//! aligned to 4 KiB read the blocks they merge into. This table measures each
//! of those per segment, from the disks' and the engine's counters at the
//! segment's start and end:
//!
//! - `disk/op`: disk commands per host I/O;
//! - `rchain`: blocks per user-read command (a host read of n blocks laid out
//!   together costs one command; scattered, up to n);
//! - `wchain`: blocks per write command;
//! - `seek cyl`, `seek ms`: the arm's travel per disk command, in cylinders
//!   and in milliseconds of arm movement;
//! - `cpread/s`: reads the array's writes cost, per second (parity reads of
//!   partial stripes; the comparator's read-modify-write reads);
//! - `partial%`: partial stripes among the stripes CPs wrote;
//! - `unal/s`: disk reads caused by host writes not aligned to 4 KiB;
//! - `hit%`: host block reads served by the buffer cache;
//! - `ind/s`: indirect blocks read because the cache had evicted them, per
//!   second (a lookup through an absent indirect block costs a read first);
//! - `CPs`: CPs by type (T timer, F NVLog half full, B back to back, ...).
//!
//! Engine columns are `-` for an array without a write-anywhere engine.
//!
//! A run that takes snapshots on a schedule adds a second table, per
//! segment: snapshots asked for, taken and refused (a wafer array's are
//! taken when the CP that takes them commits, so one asked for near a
//! segment's end may count as taken in the next; its CPs of type S are in
//! the first table), and for copy-on-first-write what they cost: chunks
//! copied to the reserved LUN pool per second, host writes held for a copy
//! per second, and times the pool filled and the sessions ended.
//!
//! An array with a Flash Cache adds a table per segment: blocks of disk
//! reads looked up in it per second, the share it held (`hit%`), blocks it
//! answered instead of the disks per second (`replaced/s`, ONTAP's
//! `disk_reads_replaced`), blocks the buffer cache evicted into it and it
//! dropped to make room per second, and how full it was at the segment's
//! end. `disk/op` and `rchain` above count only what reached the disks.
//! Under it, the warm-up: the first segment from which `replaced/s` stays
//! within 5 % of the last segment's, and the time by its end.
//!
//! A run that follows a `snap sched` counts its snapshots in that table too,
//! and ends with the snapshots each volume holds at the end of the run, with
//! when each was asked for in engine time (weekday and time, UTC) and in lab
//! time: the rotation of `hourly.0`, `hourly.1`, ... as `snap list` would
//! show it.

use std::fmt::Write;

use super::{ArrayReport, SnapSchedReport};
use crate::array::{DiskStats, EngineStats};

const HEADER: &str = concat!(
    "    seg     IOPS  disk/op  rchain  wchain  seek cyl  seek ms  cpread/s",
    "  partial%  unal/s   hit%   ind/s  CPs\n",
);

/// The mechanisms table of `report`, one line per measured segment.
pub fn render(report: &ArrayReport) -> String {
    let mut text = format!("{} ({}):\n{HEADER}", report.name, report.kind.as_str());
    let seconds = report.workload.timing.segment.0 as f64 / 1e9;
    for (index, segment) in report.segments.iter().enumerate() {
        let (Some(start), Some(end)) = (
            report.disk_snapshots.get(index),
            report.disk_snapshots.get(index + 1),
        ) else {
            break;
        };
        let disks = total(end, start);
        let engine = match (
            report.engine_snapshots.get(index),
            report.engine_snapshots.get(index + 1),
        ) {
            (Some(start), Some(end)) => Some(end.since(start)),
            _ => None,
        };
        let line = Line {
            index: segment.index,
            iops: segment.iops,
            host_ios: segment.ios,
            seconds,
            disks: &disks,
            engine: engine.as_ref(),
        };
        text.push_str(&line.render());
    }
    if let Some(flash) = render_flash(report, seconds) {
        text.push_str(&flash);
    }
    if let Some(heading) = snapshot_heading(report) {
        text.push_str(&render_snapshots(report, &heading, seconds));
    }
    if let Some(sched) = &report.snap_sched {
        text.push_str(&render_held(sched));
    }
    text
}

/// `snapshots, one every 2 s:` or `snapshots, snap sched 1 0 2 from Sat
/// 22:59:50:`, as the run took them; `None` if it took none.
fn snapshot_heading(report: &ArrayReport) -> Option<String> {
    let every =
        (report.snapshot_every_ns).map(|every_ns| format!("one every {} s", every_ns as f64 / 1e9));
    let sched = report
        .snap_sched
        .as_ref()
        .map(|sched| match &sched.clock_start {
            Some(start) => format!("snap sched {} from {start}", sched.schedule),
            None => format!("snap sched {}", sched.schedule),
        });
    let parts: Vec<String> = every.into_iter().chain(sched).collect();
    (!parts.is_empty()).then(|| format!("snapshots, {}:\n", parts.join(", ")))
}

/// The snapshots held at the end of a run that followed a `snap sched`.
fn render_held(sched: &SnapSchedReport) -> String {
    let mut text = String::from("snapshots held at the end (asked for at, engine time UTC):\n");
    for held in &sched.held {
        text.push_str(&format!("  {}\n", held.render()));
    }
    if sched.held.is_empty() {
        text.push_str("  none\n");
    }
    text
}

const SNAPSHOT_HEADER: &str = "    seg  asked  taken  refused  copies/s  held/s  pool full\n";

/// The snapshot table under `heading`: one line per measured segment.
fn render_snapshots(report: &ArrayReport, heading: &str, seconds: f64) -> String {
    let mut text = format!("{heading}{SNAPSHOT_HEADER}");
    for (segment, pair) in report
        .segments
        .iter()
        .zip(report.snapshot_counts.windows(2))
    {
        let (start, end) = (&pair[0], &pair[1]);
        let mut line = format!(
            "{:>7}{:>7}{:>7}{:>9}",
            segment.index,
            end.requested - start.requested,
            end.taken - start.taken,
            end.refused - start.refused,
        );
        let cow = match (start.copy_on_write, end.copy_on_write) {
            (Some(start), Some(end)) => format!(
                "{:>10.1}{:>8.1}{:>11}",
                (end.chunks_copied - start.chunks_copied) as f64 / seconds,
                (end.writes_held - start.writes_held) as f64 / seconds,
                end.pool_exhausted - start.pool_exhausted,
            ),
            _ => format!("{:>10}{:>8}{:>11}", "-", "-", "-"),
        };
        line.push_str(&cow);
        line.push('\n');
        text.push_str(&line);
    }
    text
}

const FLASH_HEADER: &str = "    seg  lookups/s    hit%  replaced/s  inserts/s  evicts/s  used%\n";

/// The Flash Cache table, one line per measured segment; `None` for an
/// array without one.
fn render_flash(report: &ArrayReport, seconds: f64) -> Option<String> {
    let size = report.engine_snapshots.first()?.flash?.blocks;
    let mib = (size * wafer_core::BLOCK_SIZE as u64) >> 20;
    let mut text = format!("Flash Cache, {mib} MiB:\n{FLASH_HEADER}");
    let mut replaced = Vec::new();
    for (segment, pair) in report
        .segments
        .iter()
        .zip(report.engine_snapshots.windows(2))
    {
        let (Some(start), Some(end)) = (pair[0].flash, pair[1].flash) else {
            continue;
        };
        let delta = end.since(&start);
        replaced.push((segment.index, delta.disk_reads_replaced));
        let per_second = |n: u64| n as f64 / seconds;
        let hit = match delta.accesses {
            0 => "-".to_string(),
            n => format!("{:.1}", delta.hits as f64 * 100.0 / n as f64),
        };
        let _ = writeln!(
            text,
            "{:>7}{:>11.0}{:>8}{:>12.0}{:>11.0}{:>10.0}{:>7.1}",
            segment.index,
            per_second(delta.accesses),
            hit,
            per_second(delta.disk_reads_replaced),
            per_second(delta.inserts),
            per_second(delta.evicts),
            end.used as f64 * 100.0 / end.blocks as f64,
        );
    }
    text.push_str(&warm_from(&replaced, seconds));
    Some(text)
}

/// Within how much of its last value, in percent, a segment's `replaced/s`
/// counts as steady.
const STEADY_PERCENT: u64 = 5;

/// The line naming the first segment from which `replaced` (segment
/// number, blocks replaced) stays within [`STEADY_PERCENT`] of the last
/// segment's.
fn warm_from(replaced: &[(u32, u64)], seconds: f64) -> String {
    let Some(&(_, last)) = replaced.last() else {
        return String::new();
    };
    let steady = |n: u64| n.abs_diff(last) * 100 <= last * STEADY_PERCENT;
    let from = replaced.len()
        - replaced
            .iter()
            .rev()
            .take_while(|(_, n)| steady(*n))
            .count();
    match (last, replaced.get(from)) {
        (0, _) => "warm: no read was answered from it in the last segment\n".to_string(),
        (_, Some(&(index, _))) => format!(
            "warm: replaced/s within {STEADY_PERCENT} % of the last segment's from segment {index} on (by {:.0} s)\n",
            f64::from(index) * seconds
        ),
        (_, None) => unreachable!("the last segment is within its own value"),
    }
}

/// All disks' counters over one segment, summed.
fn total(end: &[DiskStats], start: &[DiskStats]) -> DiskStats {
    let mut sum = DiskStats::default();
    for disk in end.iter().zip(start).map(|(e, s)| e.since(s)) {
        sum.user_reads += disk.user_reads;
        sum.user_read_blocks += disk.user_read_blocks;
        sum.writes += disk.writes;
        sum.write_blocks += disk.write_blocks;
        sum.cp_reads += disk.cp_reads;
        sum.seek_ns += disk.seek_ns;
        sum.seek_cylinders += disk.seek_cylinders;
    }
    sum
}

/// One segment's figures.
struct Line<'a> {
    index: u32,
    iops: f64,
    host_ios: u64,
    seconds: f64,
    disks: &'a DiskStats,
    engine: Option<&'a EngineStats>,
}

impl Line<'_> {
    fn render(&self) -> String {
        let ratio = |a: u64, b: u64| match b {
            0 => "-".to_string(),
            _ => format!("{:.2}", a as f64 / b as f64),
        };
        let commands = self.disks.transfers();
        let seek_ms = match commands {
            0 => "-".to_string(),
            n => format!("{:.2}", self.disks.seek_ns as f64 / n as f64 / 1e6),
        };
        let seek_cylinders = match commands {
            0 => "-".to_string(),
            n => format!("{:.0}", self.disks.seek_cylinders as f64 / n as f64),
        };
        let mut line = String::new();
        write!(
            line,
            "{:>7}{:>9.0}{:>9}{:>8}{:>8}{:>10}{:>9}{:>10.0}",
            self.index,
            self.iops,
            ratio(commands, self.host_ios),
            ratio(self.disks.user_read_blocks, self.disks.user_reads),
            ratio(self.disks.write_blocks, self.disks.writes),
            seek_cylinders,
            seek_ms,
            self.disks.cp_reads as f64 / self.seconds,
        )
        .expect("writing to a string");
        line.push_str(&self.engine_columns());
        line.push('\n');
        line
    }

    fn engine_columns(&self) -> String {
        let Some(engine) = self.engine else {
            return format!("{:>10}{:>8}{:>7}{:>8}  -", "-", "-", "-", "-");
        };
        let percent = |part: u64, whole: u64| match whole {
            0 => "-".to_string(),
            _ => format!("{:.1}", part as f64 * 100.0 / whole as f64),
        };
        let stripes = engine.full_stripes + engine.partial_stripes;
        let lookups = engine.cache_hits + engine.cache_misses;
        let cps: Vec<String> = engine
            .cps
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(kind, n)| format!("{kind}:{n}"))
            .collect();
        format!(
            "{:>10}{:>8.1}{:>7}{:>8.1}  {}",
            percent(engine.partial_stripes, stripes),
            engine.unaligned_write_reads as f64 / self.seconds,
            percent(engine.cache_hits, lookups),
            engine.indirect_reads as f64 / self.seconds,
            match cps.is_empty() {
                true => "-".to_string(),
                false => cps.join(" "),
            }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn disks(user_reads: u64, blocks: u64, cylinders: u64) -> Vec<DiskStats> {
        vec![DiskStats {
            name: "d0".into(),
            user_reads,
            user_read_blocks: blocks,
            seek_cylinders: cylinders,
            ..DiskStats::default()
        }]
    }

    #[test]
    fn a_segment_line_divides_the_segment_deltas() {
        let (start, end) = (disks(10, 40, 1000), disks(110, 340, 6000));
        let sum = total(&end, &start);
        let line = Line {
            index: 1,
            iops: 100.0,
            host_ios: 50,
            seconds: 1.0,
            disks: &sum,
            engine: None,
        }
        .render();
        let fields: Vec<&str> = line.split_whitespace().collect();
        // 100 reads for 50 host I/Os; 300 blocks in 100 reads; 5000
        // cylinders over 100 commands.
        assert_eq!(&fields[..6], ["1", "100", "2.00", "3.00", "-", "50"]);
    }

    #[test]
    fn the_flash_cache_is_warm_from_the_first_segment_that_stays_near_the_last() {
        // Segment 3 comes within 5 % of 1000 but segment 4 falls out again.
        let replaced = [(1, 100), (2, 500), (3, 960), (4, 900), (5, 990), (6, 1000)];
        assert_eq!(
            warm_from(&replaced, 30.0),
            "warm: replaced/s within 5 % of the last segment's from segment 5 on (by 150 s)\n"
        );
        let cold = [(1, 0), (2, 0)];
        assert!(warm_from(&cold, 30.0).contains("no read was answered"));
    }
}
