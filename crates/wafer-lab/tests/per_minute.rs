//! Per-minute reports (`scenarios/per-minute.toml`): every minute of the run
//! is reported, its I/Os add up to the run's, and the minutes at which mean
//! latency first reaches the threshold from each side are the ones the
//! table shows.

mod common;

use wafer_lab::report::minutes;

const SCENARIO: &str = include_str!("../../../scenarios/per-minute.toml");

#[test]
fn five_minutes_are_reported_and_the_threshold_is_found_in_them() {
    let array = &common::run_first_wafer_array(SCENARIO);
    let ends: Vec<f64> = array.minutes.iter().map(|m| m.end_s).collect();
    assert_eq!(ends, [60.0, 120.0, 180.0, 240.0, 300.0]);
    let ios: u64 = array.minutes.iter().map(|m| m.ios).sum();
    assert_eq!(ios, array.segments[0].ios, "one segment, the whole run");
    for minute in &array.minutes {
        assert!((minute.iops / 2000.0 - 1.0).abs() < 0.05, "{minute:?}");
        assert!((minute.mbps / (minute.iops * 4096.0 / 1e6) - 1.0).abs() < 1e-9);
    }
    // The file fills, so fewer reads find holes: latency rises.
    let latency: Vec<f64> = array.minutes.iter().map(|m| m.latency_ms_avg).collect();
    assert!(
        latency.windows(2).all(|pair| pair[1] > pair[0]),
        "{latency:?}"
    );
    let threshold = array.latency_threshold.expect("the scenario sets one");
    assert_eq!(threshold.threshold_ms, 0.5);
    let below = threshold
        .first_at_or_below
        .expect("the first minute is fast");
    assert_eq!(below.minute, 1);
    let above = threshold.first_above.expect("latency passes 0.5 ms");
    let index = above.minute as usize - 1;
    assert!(latency[index] > 0.5 && latency[..index].iter().all(|&ms| ms <= 0.5));
    assert_eq!(above.end_s, array.minutes[index].end_s);
    let table = minutes::render(array).expect("a table");
    assert_eq!(table.lines().count(), 2 + 5 + 1, "{table}");
}
