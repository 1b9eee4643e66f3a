//! The E3 scenarios shipped in `scenarios/` parse and say what
//! experiments.md's E3 says: five 15K FC drives in one RAID-DP group, a
//! 20 GiB LUN in a 50 GiB FlexVol, Orion at 30 % writes with 1 MiB
//! sequential streams, the run repeated at 1..10 streams after one more
//! Snapshot copy each time; and the control is the same procedure without
//! the Snapshot copies, so the two cannot drift apart unnoticed.

use wafer_devices::params::Catalog;
use wafer_lab::procedure::Step;
use wafer_lab::scenario::{ArraySpec, Scenario};
use wafer_raid::RaidType;

const E3: &str = include_str!("../../../scenarios/e3-fas3160-orion.toml");
const CONTROL: &str = include_str!("../../../scenarios/e3-no-snapshots.toml");

fn parse(text: &str) -> Scenario {
    Scenario::parse(text, &Catalog::builtin().unwrap()).expect("the scenario parses")
}

/// The run steps' stream counts, and where the snapshot steps fall (as
/// `None`).
fn steps(scenario: &Scenario) -> Vec<Option<u32>> {
    let procedure = scenario.procedure.as_ref().expect("a procedure");
    (procedure.steps.iter())
        .map(|step| match step {
            Step::Run(run) => Some(run.num_large.expect("every run sets num_large")),
            Step::Snapshot => None,
        })
        .collect()
}

#[test]
fn e3_runs_one_to_ten_streams_then_takes_one_more_snapshot_six_times() {
    let scenario = parse(E3);
    let ArraySpec::Wafer(filer) = &scenario.arrays[0].spec else {
        panic!("the array is a wafer node");
    };
    let aggr = &filer.aggregates[0];
    assert_eq!(
        (aggr.drive.as_str(), aggr.raid_type, aggr.disks),
        ("fc15k-144g", RaidType::RaidDp, 5)
    );
    assert_eq!(filer.volumes[0].size_bytes, 50 << 30);
    assert_eq!(filer.luns[0].size_bytes, 20 << 30);
    let large = scenario.workload.large.expect("Orion's large I/Os");
    assert!(large.sequential);
    assert_eq!((large.size_bytes, large.read_percent), (1 << 20, 70));
    assert_eq!(scenario.workload.lines[0].read_percent, 70);
    assert!(scenario.workload.prepare.fill);
    let round: Vec<Option<u32>> = (1..=10).map(Some).chain([None]).collect();
    assert_eq!(steps(&scenario), round.repeat(6));
}

#[test]
fn the_control_is_e3_without_its_snapshots() {
    let e3 = parse(E3);
    let control = parse(CONTROL);
    assert_eq!(control.arrays, e3.arrays);
    assert_eq!(control.workload, e3.workload);
    assert_eq!(control.run, e3.run);
    let without: Vec<Option<u32>> = steps(&e3).into_iter().filter(Option::is_some).collect();
    assert_eq!(steps(&control), without);
}
