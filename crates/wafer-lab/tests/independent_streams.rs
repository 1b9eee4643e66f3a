//! Four sequential 1 MiB readers (fio's `numjobs=4`) on a small wafer array
//! of two data disks. With `offset_increment` each reader has its own range
//! and position, so every byte comes off the disks and the array cannot
//! deliver more than its data disks' media rate. Without it the four clones
//! read the same blocks, as fio's do on one file, and the array's buffer
//! cache serves most of them: more than the media rate, which is why a
//! scenario of independent streams must say so.

use wafer_devices::params::{Catalog, Drive};
use wafer_lab::scenario::ArraySpec;
use wafer_lab::{Array, LabReport, Scenario, WaferArray, run_each};

/// Data disks of the array below: RAID-DP of four.
const DATA_DISKS: f64 = 2.0;

/// Four clones of a 1 MiB sequential reader, 128 MiB each, `extra` added.
fn scenario(extra: &str) -> Scenario {
    let text = format!(
        r#"
[run]
seed = 5
sysstat_interval_s = 1

[workload]
kind = "fio"
fill = true
job = """
[streams]
rw=read
bs=1m
iodepth=2
numjobs=4
size=128m
{extra}
time_based=1
runtime=2s
"""

[[array]]
name = "filer"
kind = "wafer"
drive = "fc15k-144g"
raid_type = "raid_dp"
raid_size = 4
disks = 4
cache_mib = 16
volume_gib = 3
lun_mib = 512
"#
    );
    let catalog = Catalog::builtin().expect("drives.toml");
    Scenario::parse(&text, &catalog).expect("the scenario parses")
}

/// Host MB/s of the scenario's one array, on 2 GiB of each disk.
fn host_mb_s(scenario: &Scenario) -> f64 {
    let catalog = Catalog::builtin().expect("drives.toml");
    let mut arrays: Vec<Box<dyn Array>> = scenario
        .arrays
        .iter()
        .map(|entry| match &entry.spec {
            ArraySpec::Wafer(spec) => {
                Box::new(WaferArray::short_stroked(spec, &catalog, 1 << 19).expect("builds"))
                    as Box<dyn Array>
            }
            ArraySpec::InPlace(_) => unreachable!("one wafer array"),
        })
        .collect();
    let report: LabReport = run_each(
        &mut arrays,
        &scenario.workloads(),
        &scenario.run,
        &mut |_| {},
    )
    .expect("the run finishes");
    report.arrays[0].segments[0].mbps
}

/// The outermost zone's media rate of one disk, MB/s.
fn media_mb_s() -> f64 {
    match Catalog::builtin().unwrap().get("fc15k-144g") {
        Some(Drive::Hdd(model)) => {
            let geometry = model.geometry();
            geometry.media_rate_mb_s(&geometry.zones()[0])
        }
        other => panic!("not a disk: {other:?}"),
    }
}

#[test]
fn four_independent_streams_cannot_exceed_the_data_disks_media_rate() {
    let ceiling = DATA_DISKS * media_mb_s();
    let independent = host_mb_s(&scenario("offset_increment=128m"));
    assert!(
        independent <= ceiling,
        "four streams of their own: {independent:.1} MB/s, media {ceiling:.1} MB/s"
    );
    assert!(
        independent > 0.5 * ceiling,
        "four streams of their own: {independent:.1} MB/s, media {ceiling:.1} MB/s"
    );
    let shared = host_mb_s(&scenario(""));
    assert!(
        shared > ceiling,
        "four clones of one range: {shared:.1} MB/s, media {ceiling:.1} MB/s"
    );
}
