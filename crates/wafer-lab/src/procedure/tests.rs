use wafer_core::units::Duration;
use wafer_devices::params::Catalog;

use super::*;
use crate::scenario::Scenario;
use crate::sweep::Sweep;

const BASE: &str = r#"
name = "steps"

[run]
seed = 1
segment_s = 2
segments = 3

[workload]
kind = "orion"
num_small = 4
num_large = 1
type = "seq"

[[array]]
name = "node"
kind = "wafer"
drive = "fc15k-144g"
raid_type = "raid_dp"
raid_size = 5
disks = 5
volume_gib = 2
lun_gib = 1
"#;

fn parse(steps: &str) -> Result<Scenario, ScenarioError> {
    Scenario::parse(&format!("{BASE}\n{steps}\n"), &Catalog::builtin().unwrap())
}

/// The field and reason of a refusal.
fn refusal(steps: &str) -> (String, String) {
    match parse(steps).expect_err("refused") {
        ScenarioError::Invalid { field, reason } => (field, reason),
        ScenarioError::Unknown { field } | ScenarioError::Missing { field } => {
            (field, String::new())
        }
        other => panic!("{other}"),
    }
}

const E3_SHAPE: &str = r#"
[[step]]
kind = "fill"

[[step]]
kind = "run"

[[step]]
kind = "repeat"
times = 3
steps = ["snapshot", { kind = "run", segments = 1 }]
"#;

#[test]
fn a_repeat_expands_in_order_and_runs_are_labelled_by_the_snapshots_before_them() {
    let scenario = parse(E3_SHAPE).unwrap();
    let procedure = scenario.procedure.expect("a procedure");
    let kinds: Vec<&str> = (procedure.steps.iter())
        .map(|step| match step {
            Step::Snapshot => "snapshot",
            Step::Run(_) => "run",
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "run", "snapshot", "run", "snapshot", "run", "snapshot", "run"
        ]
    );
    let labels: Vec<&str> = procedure.runs().map(|run| run.label.as_str()).collect();
    assert_eq!(
        labels,
        [
            "no snapshot yet",
            "after 1 snapshot",
            "after 2 snapshots",
            "after 3 snapshots"
        ]
    );
    assert_eq!(procedure.snapshots(), 3);
    assert!(scenario.workload.prepare.fill && !scenario.workload.prepare.reallocate);
}

#[test]
fn a_run_step_overrides_the_timing_it_names_and_keeps_the_rest() {
    let scenario = parse(E3_SHAPE).unwrap();
    let procedure = scenario.procedure.unwrap();
    let timings: Vec<Timing> = procedure.runs().map(|run| run.timing).collect();
    assert_eq!(timings[0], scenario.workload.timing);
    assert_eq!(timings[0].segments, 3);
    assert_eq!(timings[1].segments, 1);
    assert_eq!(timings[1].segment, Duration::from_secs(2));
}

#[test]
fn without_a_fill_step_the_preparation_fills_nothing_whatever_the_workload_defaults_to() {
    let scenario = parse("[[step]]\nkind = \"run\"").unwrap();
    assert!(!scenario.workload.prepare.fill, "Orion fills by default");
    assert!(parse("").unwrap().workload.prepare.fill);
    assert_eq!(parse("").unwrap().procedure, None);
}

#[test]
fn fill_then_reallocate_is_the_preparation() {
    let scenario = parse(
        "[[step]]\nkind = \"fill\"\n[[step]]\nkind = \"reallocate\"\n[[step]]\nkind = \"run\"",
    )
    .unwrap();
    assert!(scenario.workload.prepare.fill && scenario.workload.prepare.reallocate);
}

#[test]
fn an_unknown_step_kind_is_refused_by_its_path() {
    let (field, reason) = refusal("[[step]]\nkind = \"run\"\n[[step]]\nkind = \"defragment\"");
    assert_eq!(field, "step[1].kind");
    assert!(reason.contains("`defragment`"), "{reason}");
    let (field, _) = refusal("[[step]]\nkind = \"repeat\"\ntimes = 2\nsteps = [\"run\", \"nap\"]");
    assert_eq!(field, "step[0].steps[1].kind");
}

#[test]
fn an_unknown_key_in_a_step_is_refused() {
    let (field, _) = refusal("[[step]]\nkind = \"run\"\nsegmnts = 2");
    assert_eq!(field, "step[0].segmnts");
    let (field, _) =
        refusal("[[step]]\nkind = \"snapshot\"\nsegments = 2\n[[step]]\nkind = \"run\"");
    assert_eq!(field, "step[0].segments");
}

#[test]
fn a_fill_or_reallocate_after_a_run_or_snapshot_is_refused() {
    let (field, reason) = refusal("[[step]]\nkind = \"run\"\n[[step]]\nkind = \"reallocate\"");
    assert_eq!(field, "step[1]");
    assert!(reason.contains("only in their preparation"), "{reason}");
    let (field, _) = refusal(
        "[[step]]\nkind = \"snapshot\"\n[[step]]\nkind = \"fill\"\n[[step]]\nkind = \"run\"",
    );
    assert_eq!(field, "step[1]");
}

#[test]
fn the_preparation_fills_once_and_before_it_reallocates() {
    let (field, _) = refusal(
        "[[step]]\nkind = \"reallocate\"\n[[step]]\nkind = \"fill\"\n[[step]]\nkind = \"run\"",
    );
    assert_eq!(field, "step[1]");
    let (field, reason) = refusal(
        "[[step]]\nkind = \"repeat\"\ntimes = 2\nsteps = [\"fill\"]\n[[step]]\nkind = \"run\"",
    );
    assert_eq!(field, "step[0].steps[0]");
    assert!(reason.contains("fills once"), "{reason}");
}

#[test]
fn a_procedure_without_a_run_is_refused() {
    let (field, reason) = refusal("[[step]]\nkind = \"fill\"\n[[step]]\nkind = \"snapshot\"");
    assert_eq!(field, "step");
    assert!(reason.contains("at least once"), "{reason}");
}

#[test]
fn an_empty_or_endless_repeat_is_refused() {
    let (field, _) = refusal("[[step]]\nkind = \"repeat\"\ntimes = 0\nsteps = [\"run\"]");
    assert_eq!(field, "step[0].times");
    let (field, _) = refusal("[[step]]\nkind = \"repeat\"\ntimes = 2\nsteps = []");
    assert_eq!(field, "step[0].steps");
    let (field, reason) = refusal(
        "[[step]]\nkind = \"repeat\"\ntimes = 600\nsteps = [\"snapshot\", { kind = \"run\", segments = 1 }]",
    );
    assert_eq!(field, "step[0]");
    assert!(reason.contains("1024"), "{reason}");
    let (field, _) = refusal("[[step]]\nkind = \"repeat\"\ntimes = 2\nsteps = [3]");
    assert_eq!(field, "step[0].steps[0]");
}

#[test]
fn a_run_step_timing_the_workload_refuses_is_refused() {
    let (field, reason) = refusal("[[step]]\nkind = \"run\"\nsegment_s = 0");
    assert_eq!(field, "step");
    assert!(reason.starts_with("run 1 (no snapshot yet)"), "{reason}");
}

#[test]
fn the_workload_may_not_prepare_itself_beside_steps() {
    let text = BASE.replace("type = \"seq\"", "type = \"seq\"\nfill = true");
    let error = Scenario::parse(
        &format!("{text}\n[[step]]\nkind = \"run\""),
        &Catalog::builtin().unwrap(),
    )
    .unwrap_err();
    assert!(
        matches!(&error, ScenarioError::Invalid { field, .. } if field == "workload.fill"),
        "{error}"
    );
}

#[test]
fn a_snap_sched_beside_steps_is_refused() {
    let text = BASE.replace("segments = 3", "segments = 3\nsnap_sched = \"0 0 1\"");
    let error = Scenario::parse(
        &format!("{text}\n[[step]]\nkind = \"run\""),
        &Catalog::builtin().unwrap(),
    )
    .unwrap_err();
    assert!(
        matches!(&error, ScenarioError::Invalid { field, .. } if field == "run.snap_sched"),
        "{error}"
    );
}

#[test]
fn a_sweep_beside_steps_is_refused() {
    let text =
        format!("{BASE}\n[[step]]\nkind = \"run\"\n[sweep]\n\"workload.num_large\" = [1, 2]\n");
    let error = Sweep::parse(&text, &Catalog::builtin().unwrap()).unwrap_err();
    assert!(
        matches!(&error, ScenarioError::Invalid { field, reason } if field == "step" && reason.contains("sweep")),
        "{error}"
    );
}

#[test]
fn a_run_step_sets_orions_num_large_for_itself_alone_and_says_so_in_its_label() {
    let scenario = parse(
        "[[step]]\nkind = \"run\"\n[[step]]\nkind = \"run\"\nnum_large = 3\n\
         [[step]]\nkind = \"snapshot\"\n[[step]]\nkind = \"run\"\nnum_large = 2",
    )
    .unwrap();
    let procedure = scenario.procedure.unwrap();
    let depths: Vec<Vec<u32>> = (procedure.runs())
        .map(|run| run.workload(&scenario.workload).depths())
        .collect();
    assert_eq!(depths, [vec![4, 4], vec![4, 4, 4, 4], vec![4, 4, 4]]);
    let labels: Vec<&str> = procedure.runs().map(|run| run.label.as_str()).collect();
    assert_eq!(
        labels,
        [
            "no snapshot yet",
            "no snapshot yet, num_large 3",
            "after 1 snapshot, num_large 2"
        ]
    );
}

#[test]
fn num_large_is_refused_at_zero_and_on_a_workload_without_large_ios() {
    let (field, reason) = refusal("[[step]]\nkind = \"run\"\nnum_large = 0");
    assert_eq!(field, "step[0].num_large");
    assert!(reason.contains("at least one"), "{reason}");
    let without = BASE.replace("num_large = 1", "num_large = 0");
    let refused = Scenario::parse(
        &format!("{without}\n[[step]]\nkind = \"run\"\nnum_large = 2\n"),
        &Catalog::builtin().unwrap(),
    );
    match refused {
        Err(ScenarioError::Invalid { field, reason }) => {
            assert_eq!(field, "step[0].num_large");
            assert!(reason.contains("no large I/Os"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
}
