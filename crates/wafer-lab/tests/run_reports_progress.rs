//! The progress callback hears a rising fraction that ends at exactly 1,
//! across all the arrays of a run.

mod common;

use wafer_core::units::Duration;
use wafer_lab::{RunOptions, run};

#[test]
fn progress_rises_to_one() {
    let mut heard = Vec::new();
    let options = RunOptions {
        seed: 1,
        sysstat_interval: Duration::from_secs(1),
    };
    run(
        &mut common::arrays(),
        &common::workload(),
        &options,
        &mut |f| heard.push(f),
    )
    .unwrap();
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
