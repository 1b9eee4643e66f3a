//! One Orion data point (`scenarios/orion-streams.toml`): small random
//! I/Os beside large sequential streams, each kind measured apart. The
//! two kinds add up to the segment's totals, and each slows the other: the
//! large streams alone move more MB/s than beside the small I/Os, and the
//! small I/Os alone do more IOPS than beside the streams.

use wafer_devices::params::Catalog;
use wafer_lab::report::SegmentReport;
use wafer_lab::workload::Workload;
use wafer_lab::{Array, ArraySpec, Scenario, WaferArray, run_each};

const SCENARIO: &str = include_str!("../../../scenarios/orion-streams.toml");

fn scenario() -> Scenario {
    Scenario::parse(SCENARIO, &Catalog::builtin().unwrap()).expect("the example parses")
}

/// The scenario's node under `workload`: its segments.
fn segments(scenario: &Scenario, workload: Workload) -> Vec<SegmentReport> {
    let catalog = Catalog::builtin().unwrap();
    let ArraySpec::Wafer(spec) = &scenario.arrays[0].spec else {
        panic!("a wafer array");
    };
    // 2 GiB of each disk: the engine's maps stay small.
    let array = WaferArray::short_stroked(spec, &catalog, 1 << 19).expect("builds");
    let mut arrays: Vec<Box<dyn Array>> = vec![Box::new(array)];
    let report = run_each(&mut arrays, &[workload], &scenario.run, &mut |_| {}).expect("runs");
    report.arrays.into_iter().next().unwrap().segments
}

#[test]
fn small_and_large_ios_are_measured_apart_and_slow_each_other() {
    let scenario = scenario();
    let mixed = segments(&scenario, scenario.workload.clone());
    let seconds = scenario.workload.timing.segment.0 as f64 / 1e9;
    for segment in &mixed {
        let (small, large) = (
            segment.small.clone().unwrap(),
            segment.large.clone().unwrap(),
        );
        assert_eq!(small.ios + large.ios, segment.ios, "{segment:?}");
        let large_bytes = (large.ios << 20) as f64;
        assert!((large.mbps - large_bytes / 1e6 / seconds).abs() < 1e-6);
        assert!((small.mbps - (small.ios * 8192) as f64 / 1e6 / seconds).abs() < 1e-6);
        assert!((segment.mbps - small.mbps - large.mbps).abs() < 1e-6);
        // 30 % writes in both kinds.
        assert!(large.read_mbps < large.mbps * 0.85 && large.read_mbps > large.mbps * 0.5);
        assert!(small.iops > 0.0 && large.mbps > 0.0);
    }
    let mut streams_alone = scenario.workload.clone();
    streams_alone.workers = 0;
    let alone = segments(&scenario, streams_alone);
    let mut small_alone = scenario.workload.clone();
    small_alone.large = None;
    let small_only = segments(&scenario, small_alone);
    for ((mixed, alone), small_only) in mixed.iter().zip(&alone).zip(&small_only) {
        let (large_mixed, large_alone) =
            (mixed.large.as_ref().unwrap(), alone.large.as_ref().unwrap());
        assert!(
            large_alone.mbps > large_mixed.mbps,
            "streams alone {:.1} MB/s, beside small I/O {:.1}",
            large_alone.mbps,
            large_mixed.mbps
        );
        assert!(alone.small.as_ref().unwrap().ios == 0);
        assert!(small_only.small.is_none(), "no split without streams");
        let small_mixed = mixed.small.as_ref().unwrap();
        assert!(
            small_only.iops > small_mixed.iops * 1.5,
            "small alone {:.1} IOPS, beside streams {:.1}",
            small_only.iops,
            small_mixed.iops
        );
    }
}
