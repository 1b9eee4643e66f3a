//! The progress callback hears each array's preparation end, and a rising
//! run fraction that ends at exactly 1, across all the arrays of a run.

mod common;

use wafer_core::units::Duration;
use wafer_lab::{Progress, RunOptions, run};

#[test]
fn progress_rises_to_one() {
    let mut heard = Vec::new();
    let mut prepared = Vec::new();
    let options = RunOptions {
        seed: 1,
        sysstat_interval: Duration::from_secs(1),
        snapshot_every: None,
        snap_sched: None,
        per_minute: None,
    };
    run(
        &mut common::arrays(),
        &common::workload(),
        &options,
        &mut |p| match p {
            Progress::Running(f) => heard.push(f),
            Progress::Preparing(f) => prepared.push(f),
        },
    )
    .unwrap();
    assert_eq!(prepared, [1.0, 1.0], "each in-place array prepares at once");
    assert!(
        heard.windows(2).all(|w| w[0] <= w[1]),
        "progress went backwards"
    );
    assert_eq!(heard.last(), Some(&1.0));
    assert!(
        heard.iter().any(|&f| f > 0.4 && f < 0.6),
        "halfway is reported between the two arrays"
    );
    assert!(
        heard.len() > 100,
        "a smooth bar needs many steps, heard {}",
        heard.len()
    );
}
