//! The E1 scenario shipped in `scenarios/` parses, and says what
//! experiments.md's E1 says.

use wafer_core::units::Duration;
use wafer_devices::params::Catalog;
use wafer_lab::scenario::{ArraySpec, Scenario};
use wafer_raid::RaidType;

const E1: &str = include_str!("../../../scenarios/e1-fas2050-iometer.toml");

#[test]
fn the_e1_scenario_parses_as_published() {
    let scenario = Scenario::parse(E1, &Catalog::builtin().unwrap()).expect("E1 parses");
    let timing = scenario.workload.timing;
    assert_eq!(
        (timing.segments, timing.segment),
        (14, Duration::from_secs(20 * 60))
    );
    let workload = &scenario.workload;
    assert_eq!(
        (workload.workers, workload.outstanding_per_worker),
        (1, 150)
    );
    assert_eq!(workload.region.length_bytes, Some(100 << 30));
    assert_eq!(workload.region.offset_bytes, 0);
    assert!(workload.prepare.fill && workload.prepare.reallocate);
    let sizes: Vec<(u64, u32)> = workload
        .lines
        .iter()
        .map(|l| (l.size_bytes, l.percent))
        .collect();
    assert_eq!(
        sizes,
        [
            (512, 10),
            (1024, 5),
            (2048, 5),
            (4096, 60),
            (8192, 2),
            (16384, 4),
            (32768, 4),
            (65536, 10)
        ]
    );
    assert!(
        workload
            .lines
            .iter()
            .all(|l| l.align_bytes == 512 && l.read_percent == 80 && l.random_percent == 100)
    );

    let ArraySpec::Wafer(fas) = &scenario.arrays[0].spec else {
        panic!("the first array is the FAS2050");
    };
    let [aggr] = &fas.aggregates[..] else {
        panic!("one aggregate");
    };
    assert_eq!(
        (
            aggr.drive.as_str(),
            aggr.raid_type,
            aggr.raid_size,
            aggr.disks
        ),
        ("fc15k-144g", RaidType::RaidDp, 20, 20)
    );
    assert_eq!(
        (fas.volumes[0].size_bytes, fas.luns[0].size_bytes),
        (1 << 40, 1 << 40)
    );
    let ArraySpec::InPlace(eva) = &scenario.arrays[1].spec else {
        panic!("the second array is the EVA4400");
    };
    assert_eq!(
        (
            eva.drive.as_str(),
            eva.disks,
            eva.raid_groups,
            eva.luns.as_slice()
        ),
        ("fc15k-144g", 20, 1, [500 << 30].as_slice())
    );
    let depths: Vec<u32> = scenario
        .workloads()
        .iter()
        .map(|w| w.outstanding_per_worker)
        .collect();
    assert_eq!(depths, [150, 170]);
}
