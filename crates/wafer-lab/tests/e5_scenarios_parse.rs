//! The E5 scenarios shipped in `scenarios/` parse, and say what
//! experiments.md's E5 says: SQLIO's 8 KiB reads, random and sequential, on
//! 16 data disks of 15K rpm.

use wafer_devices::params::Catalog;
use wafer_lab::scenario::{ArraySpec, Scenario};
use wafer_raid::RaidType;

const RANDOM: &str = include_str!("../../../scenarios/e5-sqlio-8k-random.toml");
const SEQUENTIAL: &str = include_str!("../../../scenarios/e5-sqlio-8k-sequential.toml");

/// Checks what both E5 scenarios share (the array, the depth, the test
/// file, one line of 8 KiB reads) and returns the line's random percentage.
fn random_percent_of(text: &str) -> u32 {
    let scenario = Scenario::parse(text, &Catalog::builtin().unwrap()).expect("E5 parses");
    assert_eq!(scenario.arrays.len(), 1);
    let ArraySpec::Wafer(filer) = &scenario.arrays[0].spec else {
        panic!("the array is a wafer aggregate");
    };
    let aggr = &filer.aggregates[0];
    assert_eq!(
        (
            aggr.drive.as_str(),
            aggr.raid_type,
            aggr.raid_size,
            aggr.disks
        ),
        ("fc15k-144g", RaidType::RaidDp, 18, 18),
        "16 data disks of 15K in one RAID-DP group"
    );
    assert!(
        filer.controller.is_some(),
        "E1's controller model stands in"
    );
    let workload = &scenario.workload;
    assert_eq!((workload.workers, workload.outstanding_per_worker), (1, 64));
    assert_eq!(workload.region.length_bytes, Some(100 << 30));
    assert!(workload.prepare.fill && !workload.prepare.reallocate);
    let [line] = workload.lines.as_slice() else {
        panic!("one access line: {:?}", workload.lines);
    };
    assert_eq!(
        (line.size_bytes, line.percent, line.read_percent),
        (8192, 100, 100)
    );
    line.random_percent
}

#[test]
fn the_e5_scenarios_parse_as_published() {
    assert_eq!(random_percent_of(RANDOM), 100, "8 KiB random reads");
    assert_eq!(random_percent_of(SEQUENTIAL), 0, "8 KiB sequential reads");
}
