//! A snapshot every N seconds during a run (`scenarios/snapshot-schedule.toml`)
//! shows in each array's mechanisms report: one snapshot asked for per
//! segment boundary, taken by the wafer node's CPs (type S) and by the
//! in-place array's copy-on-first-write sessions, whose first writes copy
//! chunks to the reserved LUN pool.

mod common;

use wafer_lab::report::mechanisms;

const SCENARIO: &str = include_str!("../../../scenarios/snapshot-schedule.toml");

/// The snapshot table's rows: (segment, asked, taken, refused, the rest).
fn snapshot_rows(text: &str) -> Vec<Vec<String>> {
    let table = text
        .split_once("snapshots, one every 2 s:\n")
        .expect("a snapshot table")
        .1;
    (table.lines().skip(1))
        .map(|line| line.split_whitespace().map(str::to_string).collect())
        .collect()
}

#[test]
fn a_snapshot_every_two_seconds_shows_in_the_mechanisms_report() {
    let report = common::run_scenario(SCENARIO);
    let [node, cow] = &report.arrays[..] else {
        panic!("two arrays");
    };
    // Snapshots at 2, 4 and 6 s: asked for at the end of segments 1-3 (the
    // sample at a segment's end follows the snapshot due then).
    let node_text = mechanisms::render(node);
    let rows = snapshot_rows(&node_text);
    let asked: Vec<&str> = rows.iter().map(|row| row[1].as_str()).collect();
    assert_eq!(asked, ["1", "1", "1", "0"], "{node_text}");
    let taken: u64 = rows.iter().map(|row| row[2].parse::<u64>().unwrap()).sum();
    assert_eq!(taken, 3, "the node takes every one: {node_text}");
    assert!(rows.iter().all(|row| row[4] == "-"), "wafer copies nothing");
    assert!(node_text.contains("S:"), "CPs of type S: {node_text}");

    let cow_text = mechanisms::render(cow);
    let rows = snapshot_rows(&cow_text);
    let asked: Vec<&str> = rows.iter().map(|row| row[1].as_str()).collect();
    assert_eq!(asked, ["1", "1", "1", "0"], "{cow_text}");
    let copies: Vec<f64> = rows.iter().map(|row| row[4].parse().unwrap()).collect();
    assert_eq!(copies[0], 0.0, "nothing to copy before the first snapshot");
    assert!(copies[1..].iter().all(|&c| c > 0.0), "{cow_text}");
    let json = report.to_json();
    assert!(json.contains("\"snapshot_every_ns\": 2000000000"));
}
