//! A controller with a time per disk command caps an array at
//! 1 / (time per command x disk commands per host I/O) host I/Os per second,
//! whatever its disks could do, for both kinds of array.
//!
//! The caps here are set well below what the disks deliver on their own, and
//! each test checks that too: without the controller the same run is faster
//! than the cap, so the cap is the controller's doing.

use wafer_core::units::Duration;
use wafer_devices::params::Catalog;
use wafer_lab::controller::ControllerSpec;
use wafer_lab::inplace::{LunPlacement, METALUN_MULTIPLIER_DEFAULT};
use wafer_lab::report::ArrayReport;
use wafer_lab::workload::iometer::IometerSpec;
use wafer_lab::workload::{AccessLine, Region};
use wafer_lab::{
    AggregateSpec, Array, InPlaceArray, InPlaceSpec, RunOptions, WaferArray, WaferSpec, run,
};
use wafer_raid::RaidType;

fn controller(per_command_us: u64) -> ControllerSpec {
    ControllerSpec {
        name: "test".into(),
        model: "a controller for tests".into(),
        per_command: Duration(per_command_us * 1000),
    }
}

fn workload(read_percent: u32, outstanding_ios: u32) -> wafer_lab::Workload {
    let spec = IometerSpec {
        name: "4k random".into(),
        lines: vec![AccessLine {
            size_bytes: 4096,
            percent: 100,
            read_percent,
            random_percent: 100,
            align_bytes: 4096,
        }],
        workers: 1,
        outstanding_ios,
        ramp_up: Duration::from_secs(1),
        run_time: Duration::from_secs(4),
        segments: 1,
        test_file: Region {
            offset_bytes: 0,
            length_bytes: Some(1 << 30),
            ..Region::default()
        },
        reallocate_first: false,
    };
    spec.workload().expect("a valid workload")
}

fn measure(array: Box<dyn Array>, workload: &wafer_lab::Workload) -> ArrayReport {
    let options = RunOptions {
        seed: 3,
        sysstat_interval: Duration::from_secs(1),
        snapshot_every: None,
        snap_sched: None,
        per_minute: None,
    };
    let mut report = run(&mut [array], workload, &options, &mut |_| {}).expect("runs");
    report.arrays.remove(0)
}

/// IOPS, and the IOPS a controller taking `per_command` per disk command
/// allows at the commands per host I/O the run measured.
fn iops_and_cap(report: &ArrayReport, per_command: Duration) -> (f64, f64) {
    let segment = &report.segments[0];
    let commands: u64 = report
        .measured_disk_stats()
        .iter()
        .map(|disk| disk.transfers())
        .sum();
    let per_host_io = commands as f64 / segment.ios as f64;
    let cap = 1e9 / (per_command.0 as f64 * per_host_io);
    (segment.iops, cap)
}

/// Runs `workload` on the array `build` makes, without a controller and
/// with one taking `per_command_us` per disk command: the second must sit at
/// the controller's cap, which the first must beat.
fn assert_the_controller_limits(
    build: fn(Option<ControllerSpec>) -> Box<dyn Array>,
    per_command_us: u64,
    workload: &wafer_lab::Workload,
) {
    let spec = controller(per_command_us);
    let (free_iops, _) = iops_and_cap(&measure(build(None), workload), spec.per_command);
    let capped = measure(build(Some(spec.clone())), workload);
    let (iops, cap) = iops_and_cap(&capped, spec.per_command);
    assert!(
        iops <= cap * 1.01 && iops >= cap * 0.95,
        "{iops:.0} IOPS against a controller cap of {cap:.0}"
    );
    assert!(
        free_iops > iops * 1.2,
        "the disks alone ({free_iops:.0} IOPS) should outrun the controller ({iops:.0})"
    );
}

fn in_place(controller: Option<ControllerSpec>) -> Box<dyn Array> {
    let spec = InPlaceSpec {
        name: "in-place".into(),
        drive: "fc15k-144g".into(),
        disks: 8,
        raid_groups: 1,
        stripe_unit_bytes: 128 << 10,
        stripe_width: None,
        luns: vec![100 << 30],
        placement: LunPlacement::Striped {
            multiplier: METALUN_MULTIPLIER_DEFAULT,
        },
        cache: None,
        controller,
        snapshots: None,
    };
    let catalog = Catalog::builtin().expect("drives.toml");
    Box::new(InPlaceArray::new(&spec, &catalog).expect("builds"))
}

#[test]
fn a_controller_caps_the_in_place_array_at_its_command_rate() {
    assert_the_controller_limits(in_place, 500, &workload(70, 64));
}

fn wafer(controller: Option<ControllerSpec>) -> Box<dyn Array> {
    let aggregate = AggregateSpec {
        name: "aggr0".into(),
        drive: "fc15k-144g".into(),
        raid_type: RaidType::RaidDp,
        raid_size: 8,
        disks: 8,
    };
    let spec = WaferSpec {
        cache_mib: None,
        controller,
        ..WaferSpec::single("wafer", aggregate, 3 << 30, 2 << 30)
    };
    let catalog = Catalog::builtin().expect("drives.toml");
    Box::new(WaferArray::short_stroked(&spec, &catalog, 1 << 19).expect("builds"))
}

#[test]
fn a_controller_caps_the_wafer_array_at_its_command_rate() {
    assert_the_controller_limits(wafer, 400, &workload(80, 48));
}
