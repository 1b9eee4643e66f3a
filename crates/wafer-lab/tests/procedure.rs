//! A procedure's steps carry the arrays' state from one to the next
//! (`scenarios/e3-style-procedure.toml`): on the wafer node every snapshot
//! step adds a snapshot its volume still holds at the next run, the blocks
//! each run writes stay held, so the space used inside the volume rises
//! strictly from run to run; the procedure's clock only moves forward; and
//! the in-place array, which has no reserved LUN pool, refuses every
//! snapshot step, counted.

use wafer_devices::params::Catalog;
use wafer_lab::{
    Array, ArrayProcedure, ArraySpec, InPlaceArray, ProcedureReport, Scenario, WaferArray,
    run_procedure,
};

const SCENARIO: &str = include_str!("../../../scenarios/e3-style-procedure.toml");

fn run_scenario() -> (Scenario, Vec<ArrayProcedure>, Vec<Box<dyn Array>>) {
    let catalog = Catalog::builtin().unwrap();
    let scenario = Scenario::parse(SCENARIO, &catalog).expect("the example parses");
    let procedure = scenario.procedure.clone().expect("a procedure");
    let mut arrays: Vec<Box<dyn Array>> = (scenario.arrays.iter())
        .map(|entry| -> Box<dyn Array> {
            match &entry.spec {
                // 2 GiB of each disk: the engine's maps stay small.
                ArraySpec::Wafer(spec) => {
                    Box::new(WaferArray::short_stroked(spec, &catalog, 1 << 19).unwrap())
                }
                ArraySpec::InPlace(spec) => Box::new(InPlaceArray::new(spec, &catalog).unwrap()),
            }
        })
        .collect();
    let workloads = scenario.workloads();
    let reports = (arrays.iter_mut().zip(&workloads))
        .map(|(array, workload)| {
            run_procedure(
                array.as_mut(),
                workload,
                &scenario.run,
                &procedure,
                &mut |_| {},
            )
            .expect("runs")
        })
        .collect();
    (scenario, reports, arrays)
}

#[test]
fn snapshots_and_written_blocks_carry_over_from_step_to_step() {
    let (scenario, reports, arrays) = run_scenario();
    let procedure = scenario.procedure.as_ref().unwrap();
    let [node, raid5] = &reports[..] else {
        panic!("two arrays");
    };
    assert_eq!(node.runs.len(), 4, "a run, then three of snapshot and run");

    // The node: every snapshot step's snapshot held at the next run, none
    // refused, and the volume fuller at every run's start.
    let held: Vec<Option<usize>> = node.runs.iter().map(|run| run.snapshots_held).collect();
    assert_eq!(held, [Some(0), Some(1), Some(2), Some(3)]);
    assert_eq!(arrays[0].held_snapshots().len(), procedure.snapshots());
    assert!(node.runs.iter().all(|run| run.snapshots.refused == 0));
    let used: Vec<f64> = (node.runs.iter())
        .map(|run| {
            run.volume
                .expect("a wafer array has volumes")
                .used_percent()
        })
        .collect();
    assert!(
        (used[0] - 40.0).abs() < 0.5,
        "the LUN's reservation alone: {used:?}"
    );
    assert!(
        used.windows(2).all(|pair| pair[1] > pair[0]),
        "used % rises strictly: {used:?}"
    );

    // The procedure's clock runs on: each run starts after the previous
    // one's end (its I/Os in flight answered, its snapshot committed).
    for array in [node, raid5] {
        for pair in array.runs.windows(2) {
            let end = pair[0].start_ns + pair[0].report.intervals.last().unwrap().end_ns;
            assert!(pair[1].start_ns > end, "{} > {end}", pair[1].start_ns);
        }
        assert!(array.runs.iter().all(|run| run.report.segments[0].ios > 0));
    }

    // The in-place array has no volumes and, without a pool, refuses every
    // snapshot step.
    assert!(raid5.runs.iter().all(|run| run.volume.is_none()));
    assert_eq!(arrays[1].snapshot_stats().refused, 3);
    assert_eq!(raid5.runs[3].snapshots.refused, 3);

    let summary = ProcedureReport::new(&scenario.name, &reports);
    let table = summary.render();
    assert!(table.contains("after 3 snapshots"), "{table}");
    assert!(summary.to_json().contains("\"volume_used_percent\""));
}
