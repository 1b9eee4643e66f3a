//! A wafer node follows `snap sched` in the lab (`scenarios/snap-sched.toml`,
//! issue 37): its engine takes the snapshots on the hours its clock crosses,
//! from the weekday and time the scenario gives lab time zero, the larger
//! kind at midnight, and rotates their names; a schedule of no snapshots
//! takes none.

mod common;

use wafer_core::units::Instant;
use wafer_lab::WeekTime;
use wafer_lab::report::mechanisms;
use wafer_lab::report::{ArrayReport, SnapSchedReport};

const SCENARIO: &str = include_str!("../../../scenarios/snap-sched.toml");
const SECOND: u64 = 1_000_000_000;
const HOUR: u64 = 3600 * SECOND;

/// The scenario's one array, run with each `from` replaced by its `to`.
fn run_with(edits: &[(&str, &str)]) -> ArrayReport {
    let mut text = SCENARIO.to_string();
    for (from, to) in edits {
        assert!(text.contains(from), "the test edits `{from}`");
        text = text.replacen(from, to, 1);
    }
    common::run_first_wafer_array(&text)
}

/// The snapshot table's rows: (segment, asked, taken, refused, the rest).
fn snapshot_rows(text: &str, heading: &str) -> Vec<Vec<String>> {
    let table = text.split_once(heading).expect("a snapshot table").1;
    (table.lines().skip(1))
        .take_while(|line| !line.starts_with("snapshots held"))
        .map(|line| line.split_whitespace().map(str::to_string).collect())
        .collect()
}

fn column_sum(rows: &[Vec<String>], column: usize) -> u64 {
    rows.iter()
        .map(|row| row[column].parse::<u64>().unwrap())
        .sum()
}

fn held(report: &ArrayReport) -> &SnapSchedReport {
    report
        .snap_sched
        .as_ref()
        .expect("the run followed a snap sched")
}

#[test]
fn snapshots_fall_on_the_hours_the_larger_kind_at_midnight_and_rotate() {
    let report = run_with(&[]);
    let sched = held(&report);
    assert_eq!(sched.schedule, "1 0 2");
    // Every snapshot was asked for on the hour of engine time, and lab time
    // zero fell at 22:59:50: 10 s before an hour.
    for snapshot in &sched.held {
        assert_eq!(snapshot.engine_ns % HOUR, 0, "{snapshot:?}");
        assert_eq!(snapshot.lab_ns.rem_euclid(HOUR as i64), 10 * SECOND as i64);
        assert_eq!(snapshot.volume, "vol0");
    }
    let listed: Vec<(String, String)> = (sched.held.iter())
        .map(|s| {
            (
                WeekTime::of(Instant(s.engine_ns)).to_string(),
                s.name.clone(),
            )
        })
        .collect();
    let expected = [
        // Sunday's midnight: a weekly, not an hourly.
        ("Sun 00:00:00", "weekly.0"),
        // 01:00's hourly renamed when 02:00's was taken; 23:00's, the
        // oldest of two kept, deleted then.
        ("Sun 01:00:00", "hourly.1"),
        ("Sun 02:00:00", "hourly.0"),
    ];
    let expected: Vec<(String, String)> = (expected.iter())
        .map(|(at, name)| (at.to_string(), name.to_string()))
        .collect();
    assert_eq!(listed, expected);

    // Four asked for (23:00, 00:00, 01:00, 02:00), one per segment, all
    // taken, each by a CP of type S.
    let text = mechanisms::render(&report);
    let rows = snapshot_rows(&text, "snapshots, snap sched 1 0 2 from Sat 22:59:50:\n");
    let asked: Vec<&str> = rows.iter().map(|row| row[1].as_str()).collect();
    assert_eq!(asked, ["1", "1", "1", "1"], "{text}");
    assert_eq!(column_sum(&rows, 2), 4, "{text}");
    assert_eq!(column_sum(&rows, 3), 0, "{text}");
    assert!(text.contains("S:"), "CPs of type S: {text}");
    assert!(
        text.contains("vol0  Sun 00:00:00  lab 3610.000 s  weekly.0"),
        "{text}"
    );
}

#[test]
fn a_schedule_of_no_snapshots_takes_none() {
    // The first two segments cross 23:00 and midnight.
    let report = run_with(&[
        ("segments = 4", "segments = 2"),
        ("snap_sched = \"1 0 2\"", "snap_sched = \"0 0 0\""),
    ]);
    assert!(held(&report).held.is_empty(), "{:?}", held(&report).held);
    let text = mechanisms::render(&report);
    let rows = snapshot_rows(&text, "snapshots, snap sched 0 0 0 from Sat 22:59:50:\n");
    assert_eq!(column_sum(&rows, 1), 0, "{text}");
    assert!(!text.contains("S:"), "no CP of type S: {text}");
}
