//! The loop refuses a workload that does not fit an array, a mismatched
//! list of workloads, an array that stops answering and one that refuses a
//! host I/O, with typed errors instead of a hang or a panic.

mod common;

use wafer_core::units::{Duration, Instant};
use wafer_lab::workload::{Region, WorkloadError};
use wafer_lab::{
    Array, ArrayKind, DiskStats, HostCompletion, HostIo, HostOp, PreparePlan, RunError, RunOptions,
    SnapshotStats, run, run_each,
};

const OPTIONS: RunOptions = RunOptions {
    seed: 1,
    sysstat_interval: Duration(1_000_000_000),
    snapshot_every: None,
    snap_sched: None,
    per_minute: None,
};

/// An array that accepts I/Os and never answers them.
struct Silent {
    taken: usize,
}

impl Array for Silent {
    fn name(&self) -> &str {
        "silent"
    }
    fn kind(&self) -> ArrayKind {
        ArrayKind::Wafer
    }
    fn capacity_bytes(&self) -> u64 {
        100 << 30
    }
    fn prepare(&mut self, _plan: &PreparePlan, _progress: &mut dyn FnMut(f64)) {}
    fn submit(&mut self, _now: Instant, _io: HostIo) {
        self.taken += 1;
    }
    fn next_event(&self) -> Option<Instant> {
        None
    }
    fn advance(&mut self, _now: Instant, _done: &mut Vec<HostCompletion>) {}
    fn disk_stats(&self) -> Vec<DiskStats> {
        Vec::new()
    }
    fn take_snapshot(&mut self, _now: Instant) {}
    fn snapshot_stats(&self) -> SnapshotStats {
        SnapshotStats::default()
    }
}

#[test]
fn a_silent_array_is_reported_stuck() {
    let mut arrays: Vec<Box<dyn Array>> = vec![Box::new(Silent { taken: 0 })];
    let error = run(&mut arrays, &common::workload(), &OPTIONS, &mut |_| {}).unwrap_err();
    assert_eq!(
        error,
        RunError::Stuck {
            array: "silent".into(),
            at_ns: 0,
            outstanding: 32
        }
    );
}

/// An array that answers every I/O at once and refuses every write, as a
/// full volume would.
#[derive(Default)]
struct Full {
    waiting: Vec<(Instant, HostIo)>,
}

impl Array for Full {
    fn name(&self) -> &str {
        "full"
    }
    fn kind(&self) -> ArrayKind {
        ArrayKind::Wafer
    }
    fn capacity_bytes(&self) -> u64 {
        100 << 30
    }
    fn prepare(&mut self, _plan: &PreparePlan, _progress: &mut dyn FnMut(f64)) {}
    fn submit(&mut self, now: Instant, io: HostIo) {
        self.waiting.push((now, io));
    }
    fn next_event(&self) -> Option<Instant> {
        self.waiting.first().map(|(at, _)| Instant(at.0 + 1000))
    }
    fn advance(&mut self, now: Instant, done: &mut Vec<HostCompletion>) {
        let (due, later) = self
            .waiting
            .drain(..)
            .partition(|(at, _)| at.0 + 1000 <= now.0);
        self.waiting = later;
        for (at, io) in due {
            let refused = (io.op == HostOp::Write).then(|| "not enough space".to_string());
            done.push(HostCompletion {
                id: io.id,
                submitted_at: at,
                finished_at: now,
                refused,
            });
        }
    }
    fn disk_stats(&self) -> Vec<DiskStats> {
        Vec::new()
    }
    fn take_snapshot(&mut self, _now: Instant) {}
    fn snapshot_stats(&self) -> SnapshotStats {
        SnapshotStats::default()
    }
}

#[test]
fn a_refused_write_stops_the_run_with_the_arrays_reason() {
    let mut arrays: Vec<Box<dyn Array>> = vec![Box::new(Full::default())];
    let error = run(&mut arrays, &common::workload(), &OPTIONS, &mut |_| {}).unwrap_err();
    let RunError::Refused {
        array,
        at_ns,
        op,
        bytes,
        reason,
    } = &error
    else {
        panic!("expected a refusal, got {error}");
    };
    assert_eq!((array.as_str(), *op), ("full", HostOp::Write));
    assert!([4096, 65536].contains(bytes), "{error}");
    assert_eq!(reason, "not enough space");
    assert!(*at_ns >= 1000, "{error}");
    let text = error.to_string();
    assert!(
        text.starts_with("array `full` refused a ") && text.ends_with(": not enough space"),
        "{text}"
    );
}

#[test]
fn a_workload_beyond_the_lun_is_refused() {
    let mut workload = common::workload();
    workload.region = Region {
        offset_bytes: 90 << 30,
        length_bytes: Some(20 << 30),
        ..Region::default()
    };
    let error = run(&mut common::arrays(), &workload, &OPTIONS, &mut |_| {}).unwrap_err();
    assert!(matches!(
        error,
        RunError::Workload { array, source: WorkloadError::OutsideLun { .. } } if array == "plain"
    ));
}

#[test]
fn workloads_are_one_or_one_per_array() {
    let workloads = vec![common::workload(); 3];
    let error = run_each(&mut common::arrays(), &workloads, &OPTIONS, &mut |_| {}).unwrap_err();
    assert_eq!(
        error,
        RunError::WorkloadCount {
            arrays: 2,
            workloads: 3
        }
    );
    let zero = RunOptions {
        sysstat_interval: Duration(0),
        ..OPTIONS
    };
    let error = run(
        &mut common::arrays(),
        &common::workload(),
        &zero,
        &mut |_| {},
    )
    .unwrap_err();
    assert_eq!(error, RunError::Interval);
}
