//! Procedures: steps in order on the same arrays, in one scenario.
//!
//! An experiment is often not one run but a sequence on one array: fill the
//! LUN, reallocate it, run the load, take a snapshot, run the load again
//! (E3: "repeat the run after creating one more Snapshot copy each time, so
//! that the space used inside the FlexVol grows"). A scenario's `[[step]]`
//! tables say so, and every step finds the array as the previous one left
//! it: the data written, the snapshots held, the fragmentation. Kinds:
//!
//! - `fill` and `reallocate`: the workload's preparation (the test file
//!   written once, sequentially; then a full reallocate), which the arrays
//!   do before lab time zero ([`crate::Array::prepare`]). They come first,
//!   each at most once, the fill before the reallocate; the workload's own
//!   `fill` and `reallocate` keys then give way to them and are refused.
//! - `run`: the scenario's workload for its timing, or with `segments`,
//!   `segment_s` or `ramp_s` of its own; reported as a run of its own. A
//!   workload with Orion's large I/Os may set `num_large` per run (streams,
//!   or large I/Os in flight), so one procedure walks E3's 1..10 streams
//!   at every fullness.
//! - `snapshot`: one snapshot of everything the workload addresses
//!   ([`crate::Array::take_snapshot`]); an array that cannot take it
//!   counts it refused, as it does a schedule's.
//! - `repeat`: `times = N` repetitions of `steps`, a list of step kinds
//!   (`["snapshot", "run"]`) or of step tables (`[{ kind = "run",
//!   segments = 2 }]`), which may repeat in turn.
//!
//! Virtual time runs on from step to step: the arrays hold time in their
//! state (a CP timer, a snapshot's creation time), so each step starts
//! where the previous one ended. A run's loop counts from its own zero,
//! and the array sees it shifted to the procedure's clock (a run's report
//! reads as any run's; its start on the procedure's clock is reported
//! beside it). Between steps the array settles: a run's I/Os still in
//! flight at its end (not measured, as in any run) are answered, and a
//! snapshot is taken (its CP committed) before the next step starts, as a
//! host's `snap create` returns when the snapshot exists. Every run
//! replays the same workload streams from the run's seed: the same test,
//! repeated on an array that has changed.

mod report;
mod run;

use toml::{Table, Value};

use crate::scenario::ScenarioError;
use crate::scenario::fields::Fields;
use crate::workload::{Prepare, Timing, Workload};

pub use self::report::{ArrayProcedure, ProcedureReport, RunFigures, RunStepReport, RunSummary};
pub use self::run::run_procedure;

/// Most steps a procedure expands to, repetitions included: a bound on a
/// typo's cost, far above E3's dozen snapshots and runs.
pub const STEPS_MAX: usize = 1024;

/// A scenario's steps after the preparation, repetitions expanded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Procedure {
    /// The steps, in order; at least one run.
    pub steps: Vec<Step>,
}

/// One step after the preparation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// A snapshot of everything the workload addresses.
    Snapshot,
    /// A run of the workload, measured and reported apart.
    Run(RunStep),
}

/// A run step: its label, its timing and its large I/Os.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunStep {
    /// What came before it, for the reports: `no snapshot yet`, `after 1
    /// snapshot`, `after 3 snapshots, num_large 4`.
    pub label: String,
    /// Its ramp-up and segments.
    pub timing: Timing,
    /// Orion's `-num_large` for this run, if it sets its own.
    pub num_large: Option<u32>,
}

impl RunStep {
    /// The workload this step runs: `base` with the step's timing and
    /// large I/Os.
    pub fn workload(&self, base: &Workload) -> Workload {
        let large = match (base.large, self.num_large) {
            (Some(large), Some(num_large)) => Some(large.with_num_large(num_large)),
            (large, _) => large,
        };
        Workload {
            timing: self.timing,
            large,
            ..base.clone()
        }
    }
}

impl Procedure {
    /// The run steps, in order.
    pub fn runs(&self) -> impl Iterator<Item = &RunStep> {
        self.steps.iter().filter_map(|step| match step {
            Step::Run(run) => Some(run),
            Step::Snapshot => None,
        })
    }

    /// Snapshot steps in all.
    pub fn snapshots(&self) -> usize {
        (self.steps.iter())
            .filter(|step| **step == Step::Snapshot)
            .count()
    }
}

/// A step as written, before the preparation is split off: where it was
/// written (for errors) and what it does.
#[derive(Clone, Debug)]
struct Written {
    field: String,
    kind: Kind,
}

#[derive(Clone, Debug)]
enum Kind {
    Fill,
    Reallocate,
    Snapshot,
    Run(Timing, Option<u32>),
}

/// The `[[step]]` tables: the preparation they ask for and the procedure
/// after it. `base` is the workload, whose timing run steps start from.
pub(crate) fn parse(
    tables: &[&Table],
    base: &Workload,
) -> Result<(Prepare, Procedure), ScenarioError> {
    let mut written = Vec::new();
    for (index, table) in tables.iter().enumerate() {
        expand_table(table, &format!("step[{index}]"), base, &mut written)?;
    }
    split(written)
}

/// One step given as a string (a kind and nothing else) or a table.
fn expand(
    value: &Value,
    field: &str,
    base: &Workload,
    out: &mut Vec<Written>,
) -> Result<(), ScenarioError> {
    match value {
        Value::String(kind) => {
            let mut table = Table::new();
            table.insert("kind".into(), Value::String(kind.clone()));
            expand_table(&table, field, base, out)
        }
        Value::Table(table) => expand_table(table, field, base, out),
        other => Err(ScenarioError::Invalid {
            field: field.to_string(),
            reason: format!(
                "expected a step kind or a step table, found {}",
                other.type_str()
            ),
        }),
    }
}

/// One step table, a repetition expanded into `out`.
fn expand_table(
    table: &Table,
    field: &str,
    base: &Workload,
    out: &mut Vec<Written>,
) -> Result<(), ScenarioError> {
    let mut fields = Fields::new(table, field);
    let kind = match fields.required_string("kind")? {
        "fill" => Kind::Fill,
        "reallocate" => Kind::Reallocate,
        "snapshot" => Kind::Snapshot,
        "run" => Kind::Run(
            Timing {
                ramp: fields.seconds("ramp_s")?.unwrap_or(base.timing.ramp),
                segment: fields.seconds("segment_s")?.unwrap_or(base.timing.segment),
                segments: fields.count("segments")?.unwrap_or(base.timing.segments),
            },
            num_large(&mut fields, base)?,
        ),
        "repeat" => return expand_repeat(fields, field, base, out),
        other => {
            return Err(fields.invalid(
                "kind",
                format!("`{other}`: expected `fill`, `reallocate`, `run`, `snapshot` or `repeat`"),
            ));
        }
    };
    fields.finish()?;
    push(
        out,
        field,
        Written {
            field: field.to_string(),
            kind,
        },
    )
}

/// A run step's `num_large`: at least 1, and only for a workload with
/// large I/Os (Orion's `num_large` above 0).
fn num_large(fields: &mut Fields, base: &Workload) -> Result<Option<u32>, ScenarioError> {
    let Some(num_large) = fields.count("num_large")? else {
        return Ok(None);
    };
    if base.large.is_none() {
        return Err(fields.invalid(
            "num_large",
            "the workload has no large I/Os to set (an Orion data point with num_large above 0)",
        ));
    }
    if num_large == 0 {
        return Err(fields.invalid(
            "num_large",
            "a run keeps at least one large stream or I/O (set num_large = 0 in [workload] \
             for none)",
        ));
    }
    Ok(Some(num_large))
}

/// `kind = "repeat"`: `times` copies of `steps`.
fn expand_repeat(
    mut fields: Fields<'_>,
    field: &str,
    base: &Workload,
    out: &mut Vec<Written>,
) -> Result<(), ScenarioError> {
    let times = fields.required_count("times")?;
    if times == 0 {
        return Err(fields.invalid("times", "a repetition runs its steps at least once"));
    }
    let steps = fields.list("steps")?.unwrap_or_default();
    if steps.is_empty() {
        return Err(fields.invalid("steps", "a repetition repeats at least one step"));
    }
    fields.finish()?;
    let mut once = Vec::new();
    for (index, step) in steps.iter().enumerate() {
        expand(step, &format!("{field}.steps[{index}]"), base, &mut once)?;
    }
    for _ in 0..times {
        for step in &once {
            push(out, field, step.clone())?;
        }
    }
    Ok(())
}

/// Appends a step, refusing a procedure past [`STEPS_MAX`].
fn push(out: &mut Vec<Written>, field: &str, step: Written) -> Result<(), ScenarioError> {
    if out.len() == STEPS_MAX {
        return Err(ScenarioError::Invalid {
            field: field.to_string(),
            reason: format!("the procedure expands to over {STEPS_MAX} steps"),
        });
    }
    out.push(step);
    Ok(())
}

/// Splits the leading fill and reallocate off as the preparation, and
/// labels the runs by the snapshots before them.
fn split(written: Vec<Written>) -> Result<(Prepare, Procedure), ScenarioError> {
    let mut prepare = Prepare::default();
    let mut steps = Vec::new();
    let mut snapshots = 0;
    for step in written {
        let refuse = |reason: &str| ScenarioError::Invalid {
            field: step.field.clone(),
            reason: reason.to_string(),
        };
        match step.kind {
            Kind::Fill | Kind::Reallocate if !steps.is_empty() => {
                return Err(refuse(
                    "a fill or reallocate after a run or snapshot: the arrays fill and \
                     reallocate only in their preparation, before lab time zero",
                ));
            }
            Kind::Fill if prepare.fill || prepare.reallocate => {
                return Err(refuse("the preparation fills once, before it reallocates"));
            }
            Kind::Reallocate if prepare.reallocate => {
                return Err(refuse("the preparation reallocates once"));
            }
            Kind::Fill => prepare.fill = true,
            Kind::Reallocate => prepare.reallocate = true,
            Kind::Snapshot => {
                snapshots += 1;
                steps.push(Step::Snapshot);
            }
            Kind::Run(timing, num_large) => steps.push(Step::Run(RunStep {
                label: label(snapshots, num_large),
                timing,
                num_large,
            })),
        }
    }
    let procedure = Procedure { steps };
    if procedure.runs().next().is_none() {
        return Err(ScenarioError::Invalid {
            field: "step".into(),
            reason: "a procedure runs the workload at least once (a `run` step)".into(),
        });
    }
    Ok((prepare, procedure))
}

/// A run's label: the snapshots taken before it, and its `num_large` if
/// it sets one.
fn label(snapshots: usize, num_large: Option<u32>) -> String {
    let before = match snapshots {
        0 => "no snapshot yet".into(),
        1 => "after 1 snapshot".into(),
        n => format!("after {n} snapshots"),
    };
    match num_large {
        Some(num_large) => format!("{before}, num_large {num_large}"),
        None => before,
    }
}

#[cfg(test)]
mod tests;
