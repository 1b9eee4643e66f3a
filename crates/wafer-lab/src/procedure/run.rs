//! A procedure's steps on one array, on one clock.
//!
//! The array is prepared once, at lab time zero, as for any run. From there
//! a clock (the array's own lab time) moves forward step by step: a run
//! step drives the array through [`Shifted`], which adds the clock to every
//! instant the run loop hands the array and takes it off every instant the
//! array reports, so the loop counts from its own zero while the array's
//! time never goes back; after the run, and after a snapshot step, the
//! array [`settle`]s until it has answered what it was asked, and the clock
//! moves to that instant.

use wafer_core::units::{Duration, Instant};

use super::{Procedure, RunStep, RunStepReport, Step};
use crate::array::{
    Array, ArrayKind, DiskStats, EngineStats, HostCompletion, HostIo, PreparePlan, SnapshotStats,
    VolumeUse,
};
use crate::procedure::ArrayProcedure;
use crate::run::{Progress, RunError, RunOptions, SAME_INSTANT_EVENTS_MAX, measure, misfit};
use crate::snap_sched::HeldSnapshot;
use crate::workload::Workload;

/// Runs `procedure` on `array` with `workload`, prepared as the workload
/// says (its `prepare` holds the procedure's fill and reallocate);
/// `progress` hears the preparation, then the share of the run steps' time
/// done.
pub fn run_procedure(
    array: &mut dyn Array,
    workload: &Workload,
    options: &RunOptions,
    procedure: &Procedure,
    progress: &mut dyn FnMut(Progress),
) -> Result<ArrayProcedure, RunError> {
    if options.snap_sched.is_some() {
        return Err(RunError::SnapSchedInProcedure);
    }
    let luns = array.lun_bytes();
    let plan = workload.prepare_plan(&luns).map_err(misfit(array))?;
    array.prepare(&plan, &mut |fraction| {
        progress(Progress::Preparing(fraction))
    });
    let total: u64 = procedure.runs().map(|run| run.timing.total().0).sum();
    let mut clock = Instant(0);
    let mut done_ns = 0;
    let mut runs = Vec::new();
    for step in &procedure.steps {
        let Step::Run(step) = step else {
            array.take_snapshot(clock);
            clock = settle(array, clock, 0)?;
            continue;
        };
        let workload = step.workload(workload);
        let streams = workload
            .streams(options.seed, &luns)
            .map_err(misfit(array))?;
        let before = Before::of(array);
        let mut shifted = Shifted {
            array,
            offset: Duration(clock.0),
        };
        let length = step.timing.total().0;
        let mut run_progress = |report: Progress| {
            progress(match report {
                Progress::Running(fraction) => Progress::Running(
                    (done_ns as f64 + fraction * length as f64) / total.max(1) as f64,
                ),
                preparing => preparing,
            })
        };
        let measured = measure(&mut shifted, &workload, streams, options, &mut run_progress)?;
        done_ns += length;
        runs.push(before.report(step, clock, measured.report));
        clock = settle(array, clock + step.timing.total(), measured.in_flight)?;
    }
    Ok(ArrayProcedure { runs })
}

/// What a run step reports of the array as it found it.
struct Before {
    volume: Option<VolumeUse>,
    snapshots: SnapshotStats,
    held: Option<usize>,
}

impl Before {
    fn of(array: &dyn Array) -> Before {
        Before {
            volume: array.volume_use(),
            snapshots: array.snapshot_stats(),
            held: (array.kind() == ArrayKind::Wafer).then(|| array.held_snapshots().len()),
        }
    }

    fn report(
        self,
        step: &RunStep,
        start: Instant,
        report: crate::report::ArrayReport,
    ) -> RunStepReport {
        RunStepReport {
            label: step.label.clone(),
            num_large: step.num_large,
            start_ns: start.0,
            volume: self.volume,
            snapshots: self.snapshots,
            snapshots_held: self.held,
            report,
        }
    }
}

/// Runs `array` on from `now` (to which it has been advanced) until it has
/// answered `outstanding` more host I/Os and every snapshot asked for;
/// returns that instant. The answers are no run's: they are dropped.
fn settle(
    array: &mut dyn Array,
    mut now: Instant,
    mut outstanding: usize,
) -> Result<Instant, RunError> {
    let mut done: Vec<HostCompletion> = Vec::new();
    let mut same_instant = 0u64;
    while outstanding > 0 || !snapshots_answered(&array.snapshot_stats()) {
        let stuck = || RunError::Stuck {
            array: array.name().to_string(),
            at_ns: now.0,
            outstanding,
        };
        let at = array.next_event().ok_or_else(stuck)?.max(now);
        same_instant = if at == now { same_instant + 1 } else { 0 };
        if same_instant > SAME_INSTANT_EVENTS_MAX {
            return Err(stuck());
        }
        array.advance(at, &mut done);
        outstanding = outstanding
            .checked_sub(done.len())
            .expect("the array answers only the I/Os it was given");
        done.clear();
        now = at;
    }
    Ok(now)
}

/// Whether every snapshot asked for has been taken or refused.
fn snapshots_answered(stats: &SnapshotStats) -> bool {
    stats.taken + stats.refused == stats.requested
}

/// An array seen from a run that starts at `offset` on its clock: the run
/// loop's instant `t` is the array's `offset + t`.
struct Shifted<'a> {
    array: &'a mut dyn Array,
    offset: Duration,
}

impl Shifted<'_> {
    fn to_array(&self, at: Instant) -> Instant {
        at + self.offset
    }
}

impl Array for Shifted<'_> {
    fn name(&self) -> &str {
        self.array.name()
    }

    fn kind(&self) -> ArrayKind {
        self.array.kind()
    }

    fn capacity_bytes(&self) -> u64 {
        self.array.capacity_bytes()
    }

    fn lun_bytes(&self) -> Vec<u64> {
        self.array.lun_bytes()
    }

    fn prepare(&mut self, plan: &PreparePlan, progress: &mut dyn FnMut(f64)) {
        self.array.prepare(plan, progress);
    }

    fn submit(&mut self, now: Instant, io: HostIo) {
        let at = self.to_array(now);
        self.array.submit(at, io);
    }

    /// The array's next event on the run's clock; one the array left at the
    /// run's start (it has been advanced there) falls at the run's zero.
    fn next_event(&self) -> Option<Instant> {
        (self.array.next_event()).map(|at| Instant(at.0.saturating_sub(self.offset.0)))
    }

    fn advance(&mut self, now: Instant, done: &mut Vec<HostCompletion>) {
        let at = self.to_array(now);
        let first = done.len();
        self.array.advance(at, done);
        for completion in &mut done[first..] {
            completion.submitted_at = Instant(completion.submitted_at.0 - self.offset.0);
            completion.finished_at = Instant(completion.finished_at.0 - self.offset.0);
        }
    }

    fn disk_stats(&self) -> Vec<DiskStats> {
        self.array.disk_stats()
    }

    fn engine_stats(&self) -> Option<EngineStats> {
        self.array.engine_stats()
    }

    fn take_snapshot(&mut self, now: Instant) {
        let at = self.to_array(now);
        self.array.take_snapshot(at);
    }

    fn snapshot_stats(&self) -> SnapshotStats {
        self.array.snapshot_stats()
    }

    fn held_snapshots(&self) -> Vec<HeldSnapshot> {
        self.array.held_snapshots()
    }

    fn volume_use(&self) -> Option<VolumeUse> {
        self.array.volume_use()
    }
}
