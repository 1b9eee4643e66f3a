//! A small two-array run shared by the report tests: a 70 % read mix of
//! 4 KiB and 64 KiB I/Os against two 8-disk comparators, with and without
//! a write-back cache, for three one-second segments.

// Each test file compiles this module on its own and uses part of it.
#![allow(dead_code)]

use wafer_core::units::Duration;
use wafer_devices::params::Catalog;
use wafer_lab::inplace::{
    CacheSpec, InPlaceArray, InPlaceSpec, LunPlacement, METALUN_MULTIPLIER_DEFAULT,
};
use wafer_lab::workload::{AccessLine, Distribution, Prepare, Region, Timing, Workload};
use wafer_lab::{Array, LabReport, RunOptions, run};

pub fn workload() -> Workload {
    let line = |size_bytes, percent| AccessLine {
        size_bytes,
        percent,
        read_percent: 70,
        random_percent: 100,
        align_bytes: 4096,
    };
    Workload {
        name: "small mix".into(),
        lines: vec![line(4096, 80), line(65536, 20)],
        workers: 2,
        outstanding_per_worker: 16,
        region: Region {
            offset_bytes: 0,
            length_bytes: Some(20 << 30),
            ..Region::default()
        },
        distribution: Distribution::Uniform,
        timing: Timing {
            ramp: Duration::from_millis(500),
            segment: Duration::from_secs(1),
            segments: 3,
        },
        prepare: Prepare {
            fill: true,
            reallocate: false,
        },
        offered_iops: None,
        large: None,
    }
}

pub fn arrays() -> Vec<Box<dyn Array>> {
    let catalog = Catalog::builtin().unwrap();
    let spec = |name: &str, cache| InPlaceSpec {
        name: name.into(),
        drive: "fc15k-144g".into(),
        disks: 8,
        raid_groups: 1,
        stripe_unit_bytes: 128 << 10,
        stripe_width: None,
        luns: vec![100 << 30],
        placement: LunPlacement::Striped {
            multiplier: METALUN_MULTIPLIER_DEFAULT,
        },
        cache,
        controller: None,
        snapshots: None,
    };
    let cache = CacheSpec {
        capacity_mib: 64,
        latency: Duration(200_000),
    };
    vec![
        Box::new(InPlaceArray::new(&spec("plain", None), &catalog).unwrap()),
        Box::new(InPlaceArray::new(&spec("cached", Some(cache)), &catalog).unwrap()),
    ]
}

pub fn small_run(seed: u64) -> LabReport {
    let options = RunOptions {
        seed,
        sysstat_interval: Duration::from_millis(500),
        snapshot_every: None,
        snap_sched: None,
        per_minute: None,
    };
    run(&mut arrays(), &workload(), &options, &mut |_| {}).unwrap()
}

/// Runs every array of scenario `text`: wafer arrays short-stroked to
/// 2 GiB of each disk (so the engine's maps stay small), in-place arrays
/// as they are.
pub fn run_scenario(text: &str) -> LabReport {
    let catalog = Catalog::builtin().unwrap();
    let scenario = wafer_lab::Scenario::parse(text, &catalog).expect("the scenario parses");
    let mut arrays: Vec<Box<dyn Array>> = (scenario.arrays.iter())
        .map(|entry| -> Box<dyn Array> {
            match &entry.spec {
                wafer_lab::ArraySpec::Wafer(spec) => {
                    Box::new(wafer_lab::WaferArray::short_stroked(spec, &catalog, 1 << 19).unwrap())
                }
                wafer_lab::ArraySpec::InPlace(spec) => {
                    Box::new(InPlaceArray::new(spec, &catalog).unwrap())
                }
            }
        })
        .collect();
    wafer_lab::run_each(
        &mut arrays,
        &scenario.workloads(),
        &scenario.run,
        &mut |_| {},
    )
    .expect("runs")
}

/// Runs scenario `text`'s first array, a wafer array short-stroked to 2 GiB
/// of each disk (so the engine's maps stay small), and returns its report.
pub fn run_first_wafer_array(text: &str) -> wafer_lab::report::ArrayReport {
    let catalog = Catalog::builtin().unwrap();
    let scenario = wafer_lab::Scenario::parse(text, &catalog).expect("parses");
    let wafer_lab::ArraySpec::Wafer(spec) = &scenario.arrays[0].spec else {
        panic!("a wafer array");
    };
    let array = wafer_lab::WaferArray::short_stroked(spec, &catalog, 1 << 19).expect("builds");
    let mut arrays: Vec<Box<dyn Array>> = vec![Box::new(array)];
    let report = wafer_lab::run_each(
        &mut arrays,
        &scenario.workloads(),
        &scenario.run,
        &mut |_| {},
    )
    .expect("runs");
    report.arrays.into_iter().next().expect("one array")
}
