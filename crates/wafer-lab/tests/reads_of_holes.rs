//! A fio workload on a fresh LUN, with no fill: every read is of blocks
//! never written. The wafer array answers them as holes, from memory, with
//! no disk read, after its memory latency; the in-place comparator, which
//! knows nothing of holes, reads its disks. Both finish the run and count
//! the reads.

use wafer_core::units::Duration;
use wafer_devices::params::Catalog;
use wafer_lab::scenario::ArraySpec;
use wafer_lab::wafer::MEMORY_READ_LATENCY;
use wafer_lab::{Array, InPlaceArray, LabReport, Scenario, WaferArray, run_each};

/// A scenario of 4 KiB random I/O over the first GiB of a 2 GiB LUN, one
/// 200 ms segment, with `rw` and `extra` as fio options.
fn scenario(rw: &str, extra: &str) -> Scenario {
    let text = format!(
        r#"
[run]
seed = 3
sysstat_interval_s = 1

[workload]
kind = "fio"
job = """
[fresh]
rw={rw}
{extra}
bs=4k
iodepth=16
size=1g
time_based=1
runtime=200ms
"""

[[array]]
name = "filer"
kind = "wafer"
drive = "fc15k-144g"
raid_type = "raid_dp"
raid_size = 8
disks = 8
volume_gib = 3
lun_gib = 2

[[array]]
name = "inplace"
kind = "in-place"
drive = "fc15k-144g"
disks = 8
stripe_unit_kib = 64
lun_gib = 2
cache_mib = 64
"#
    );
    let catalog = Catalog::builtin().expect("drives.toml");
    Scenario::parse(&text, &catalog).expect("the scenario parses")
}

/// The scenario's arrays, the wafer one on 2 GiB of each disk.
fn arrays(scenario: &Scenario) -> Vec<Box<dyn Array>> {
    let catalog = Catalog::builtin().expect("drives.toml");
    let array = |spec: &ArraySpec| -> Box<dyn Array> {
        match spec {
            ArraySpec::Wafer(spec) => {
                Box::new(WaferArray::short_stroked(spec, &catalog, 1 << 19).expect("builds"))
            }
            ArraySpec::InPlace(spec) => {
                Box::new(InPlaceArray::new(spec, &catalog).expect("builds"))
            }
        }
    };
    scenario
        .arrays
        .iter()
        .map(|entry| array(&entry.spec))
        .collect()
}

fn report(scenario: &Scenario) -> LabReport {
    let options = scenario.run;
    run_each(
        &mut arrays(scenario),
        &scenario.workloads(),
        &options,
        &mut |_| {},
    )
    .expect("a run with no fill finishes")
}

fn user_reads(report: &LabReport, array: usize) -> u64 {
    let disks = report.arrays[array].measured_disk_stats();
    disks.iter().map(|disk| disk.user_reads).sum()
}

#[test]
fn random_reads_of_a_fresh_lun_are_answered_as_holes_without_disk_reads() {
    let report = report(&scenario("randread", ""));
    let filer = &report.arrays[0];
    let latency = MEMORY_READ_LATENCY.0;
    assert!(filer.read.ios > 0, "the reads are counted");
    assert_eq!(filer.write.ios, 0);
    assert_eq!(filer.read.latency_ns_min, latency);
    assert_eq!(filer.read.latency_ns_max, latency);
    assert_eq!(user_reads(&report, 0), 0, "a hole is not read from disk");
    // A closed loop of 16 I/Os, each taking the memory latency.
    let expected = 16 * Duration::from_millis(200).0 / latency;
    assert!(
        filer.read.ios.abs_diff(expected) <= 16,
        "{}",
        filer.read.ios
    );

    let inplace = &report.arrays[1];
    assert!(inplace.read.ios > 0, "the comparator answers them too");
    assert!(user_reads(&report, 1) > 0, "from its disks");
}

#[test]
fn a_mix_on_a_fresh_lun_reads_holes_without_disks_and_written_blocks_with_them() {
    let report = report(&scenario("randrw", "rwmixread=70"));
    for array in &report.arrays {
        assert!(array.read.ios > 0 && array.write.ios > 0, "{}", array.name);
    }
    let filer = &report.arrays[0];
    assert_eq!(filer.read.latency_ns_min, MEMORY_READ_LATENCY.0);
}
