//! What a procedure measured: each run step's report, as a sweep point's,
//! and one summary of them all.
//!
//! Each array runs the procedure alone ([`ArrayProcedure`]: a
//! [`RunStepReport`] per run step, with the usual run report and what the
//! array was like when the run started: the procedure's clock, its
//! volumes' space, its snapshots). [`ProcedureReport`] puts the arrays side
//! by side, a row per run step and array, with a sweep point's figures
//! ([`crate::sweep::PointFigures`]: the run's segments together) beside the
//! volume used % (`df`'s two lines together: snapshots included) and the
//! snapshots so far, for `procedure.txt` and `procedure.json`.

use serde::Serialize;

use crate::array::{SnapshotStats, VolumeUse};
use crate::report::ArrayReport;
use crate::sweep::{PointFigures, figures, write_aligned};

/// One array's procedure: its run steps, in order.
#[derive(Clone, Debug, PartialEq)]
pub struct ArrayProcedure {
    /// A report per run step.
    pub runs: Vec<RunStepReport>,
}

/// One run step on one array.
#[derive(Clone, Debug, PartialEq)]
pub struct RunStepReport {
    /// The step's label (`after 3 snapshots`).
    pub label: String,
    /// Orion's `num_large` if the step set its own.
    pub num_large: Option<u32>,
    /// When it started on the procedure's clock (lab time since the
    /// preparation), in nanoseconds.
    pub start_ns: u64,
    /// The volumes' space when it started; `None` for an array without
    /// volumes.
    pub volume: Option<VolumeUse>,
    /// The snapshots asked for, taken and refused before it, all steps'.
    pub snapshots: SnapshotStats,
    /// The snapshots the volumes held when it started, by the engine's
    /// list; `None` for an array whose snapshots have no names (the
    /// in-place comparator's sessions).
    pub snapshots_held: Option<usize>,
    /// The run's own report.
    pub report: ArrayReport,
}

/// The figures of a whole procedure: per run step, per array.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ProcedureReport {
    /// The scenario's name.
    pub name: String,
    /// Every run step, in order.
    pub runs: Vec<RunSummary>,
}

/// One run step of a procedure.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunSummary {
    /// Its number among the run steps, from 1 (its directory is
    /// `step-NN`).
    pub run: usize,
    /// Its label.
    pub label: String,
    /// Orion's `num_large` if the step set its own.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub num_large: Option<u32>,
    /// Every array's figures, in the scenario's order.
    pub arrays: Vec<RunFigures>,
}

/// One array's figures for one run step.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunFigures {
    /// When the run started on the procedure's clock, seconds.
    pub start_s: f64,
    /// The space used inside the volumes, snapshots included, in percent
    /// of their size, when the run started; absent for an array without
    /// volumes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub volume_used_percent: Option<f64>,
    /// The space behind that figure.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub volume: Option<VolumeUse>,
    /// Snapshots taken before the run.
    pub snapshots_taken: u64,
    /// Snapshots refused before the run.
    pub snapshots_refused: u64,
    /// Snapshots the volumes held when the run started, if the array's
    /// snapshots have names.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snapshots_held: Option<usize>,
    /// The run's figures, its segments together.
    #[serde(flatten)]
    pub figures: PointFigures,
}

impl ProcedureReport {
    /// The summary of `arrays`, each the same procedure's run steps.
    ///
    /// # Panics
    /// If the arrays ran different numbers of steps.
    pub fn new(name: &str, arrays: &[ArrayProcedure]) -> ProcedureReport {
        let count = arrays.first().map_or(0, |array| array.runs.len());
        assert!(
            arrays.iter().all(|array| array.runs.len() == count),
            "every array runs the same procedure"
        );
        let runs = (0..count)
            .map(|index| RunSummary {
                run: index + 1,
                label: arrays[0].runs[index].label.clone(),
                num_large: arrays[0].runs[index].num_large,
                arrays: arrays.iter().map(|a| run_figures(&a.runs[index])).collect(),
            })
            .collect();
        ProcedureReport {
            name: name.to_string(),
            runs,
        }
    }

    /// The report as indented JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a procedure report serializes") + "\n"
    }

    /// A table: a row per run step and array.
    pub fn render(&self) -> String {
        let large = (self.runs.iter().flat_map(|run| &run.arrays))
            .any(|array| array.figures.large_mbps.is_some());
        let mut header: Vec<String> = [
            "run",
            "label",
            "array",
            "start s",
            "vol used %",
            "snaps",
            "refused",
        ]
        .map(String::from)
        .to_vec();
        header.extend(PointFigures::headings(large));
        let mut rows = vec![header];
        for run in &self.runs {
            for array in &run.arrays {
                rows.push(row(run, array, large));
            }
        }
        let mut text = format!(
            "{}: {} runs on the same arrays\n",
            self.name,
            self.runs.len()
        );
        write_aligned(&mut text, &rows);
        text.push_str(
            "  (vol used %: space used inside the volumes, snapshots included, at the run's \
             start; snaps and refused: snapshots before it; MB/s in 10^6 bytes per second, \
             segments averaged, p99 the highest segment's)\n",
        );
        text
    }
}

/// One row of the table.
fn row(run: &RunSummary, array: &RunFigures, large: bool) -> Vec<String> {
    let figures = &array.figures;
    let mut row = vec![
        run.run.to_string(),
        run.label.clone(),
        figures.array.clone(),
        format!("{:.3}", array.start_s),
        (array.volume_used_percent).map_or("-".into(), |percent| format!("{percent:.1}")),
        array.snapshots_taken.to_string(),
        array.snapshots_refused.to_string(),
    ];
    row.extend(figures.cells(large));
    row
}

/// A run step's figures.
fn run_figures(step: &RunStepReport) -> RunFigures {
    RunFigures {
        start_s: step.start_ns as f64 / 1e9,
        volume_used_percent: step.volume.as_ref().map(VolumeUse::used_percent),
        volume: step.volume,
        snapshots_taken: step.snapshots.taken,
        snapshots_refused: step.snapshots.refused,
        snapshots_held: step.snapshots_held,
        figures: figures(&step.report),
    }
}
