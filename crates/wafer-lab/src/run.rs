//! The lab's event loop: a workload against arrays, in virtual nanoseconds.
//!
//! Each array runs on its own, one after another, with its own copy of its
//! workload: the workers' streams are seeded from the run's seed alone, so
//! arrays given the same workload see the same I/O sequence. The loop is a
//! discrete-event simulation: at time zero every worker submits its
//! outstanding I/Os; then it repeatedly moves to the earliest of the array's
//! next event and the next sampling boundary, advances the array there, and
//! for each host I/O completed submits the worker's next one at that instant
//! (a closed loop with no think time). It follows the [`Array`] call order,
//! so the array is always advanced to `now` before it is handed an I/O at
//! `now`.
//!
//! Measurement follows IOmeter: I/Os that complete during the ramp-up are
//! not counted; each segment counts the I/Os that complete within it
//! (`start ≤ finished < end`), with latency from submission to completion.
//! At the end of the last segment the loop stops; I/Os still in flight are
//! dropped. The array's disk counters are sampled when measurement starts,
//! at the end of every segment and of every `sysstat` interval.
//!
//! A run may take snapshots on a schedule ([`RunOptions::snapshot_every`]):
//! every N seconds of virtual time from the start of the run (N, 2N, ...,
//! before the end of the last segment), the loop asks the array for one
//! ([`Array::take_snapshot`]) once it has advanced the array to that
//! instant, keeps them all, and samples the array's snapshot counters with
//! its disk counters.
//!
//! A run may instead have its wafer arrays follow ONTAP's `snap sched`
//! ([`RunOptions::snap_sched`]): the loop hands the schedule to the array
//! once it is prepared ([`Array::follow_snap_sched`]), the array's engine
//! takes the snapshots on the hours its clock crosses, and the loop samples
//! their counts as it does a schedule's own, and lists the snapshots held
//! at the end in the report.
//!
//! Nothing here reads a clock: the same arrays, workload and seed give the
//! same report, bit for bit.

use wafer_core::units::{Duration, Instant};

use crate::array::{Array, DiskStats, EngineStats, HostCompletion, HostOp, SnapshotStats};
use crate::histogram::Histogram;
use crate::report::{
    ArrayReport, ClassReport, DirectionReport, IntervalReport, LabReport, PERCENTILES, Percentile,
    SegmentReport, SnapSchedReport,
};
use crate::snap_sched::SnapSched;
use crate::workload::{Timing, WorkerStream, Workload, WorkloadError};

mod host;
mod minutes;

pub use self::host::WAITING_MAX;
use self::host::{Host, InFlight};
use self::minutes::MinuteMeter;

/// Events the loop takes at one instant before it declares the array stuck:
/// far more than a closed loop of [`crate::workload::OUTSTANDING_MAX`] I/Os
/// can need, since every event moves at least one I/O on.
pub(crate) const SAME_INSTANT_EVENTS_MAX: u64 = 1 << 24;

/// Progress reports per array: often enough for a smooth progress bar.
const PROGRESS_STEPS: u64 = 1000;

/// How a run is measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunOptions {
    /// Seed of every workload stream.
    pub seed: u64,
    /// Length of a `sysstat` interval.
    pub sysstat_interval: Duration,
    /// Take a snapshot this often during the run, keeping every one; `None`:
    /// no snapshots.
    pub snapshot_every: Option<Duration>,
    /// Every volume of every wafer array follows this `snap sched`;
    /// `None`: no scheduled snapshots.
    pub snap_sched: Option<SnapSched>,
    /// Report every minute of the run; `None`: segments only.
    pub per_minute: Option<PerMinute>,
}

/// What a run reports per minute besides IOPS, MB/s and latency.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PerMinute {
    /// Report when a minute's mean latency first falls to or below this.
    pub latency_threshold: Option<Duration>,
}

/// Why a run could not finish.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RunError {
    /// The number of workloads is neither one nor one per array.
    #[error("{arrays} arrays but {workloads} workloads")]
    WorkloadCount {
        /// Arrays given.
        arrays: usize,
        /// Workloads given.
        workloads: usize,
    },
    /// The `sysstat` interval or the snapshot schedule's is zero.
    #[error("the sysstat and snapshot intervals must be longer than zero")]
    Interval,
    /// A `snap sched` for an array that has none.
    #[error("array `{array}` cannot follow a `snap sched`: only a wafer array's volumes can")]
    SnapSched {
        /// The array.
        array: String,
    },
    /// A procedure with a `snap sched`, which runs on the engine's clock
    /// through one run.
    #[error(
        "a procedure takes snapshots by `snapshot` steps or `snapshot_every_s`, not by `snap sched`"
    )]
    SnapSchedInProcedure,
    /// The workload does not fit the array.
    #[error("array `{array}`: {source}")]
    Workload {
        /// The array.
        array: String,
        /// What does not fit.
        source: WorkloadError,
    },
    /// The array stopped answering: idle with I/Os outstanding, or stuck at
    /// one instant.
    #[error("array `{array}` is stuck at {at_ns} ns with {outstanding} I/Os outstanding")]
    Stuck {
        /// The array.
        array: String,
        /// When.
        at_ns: u64,
        /// I/Os it had not answered.
        outstanding: usize,
    },
    /// The array refused a host I/O, as an engine refuses a write to a
    /// volume its snapshots have filled: a real host would see an error and
    /// its benchmark stop (fio's default), so the run stops here, reporting
    /// nothing it could not measure.
    #[error(
        "array `{array}` refused a {bytes}-byte {op} at {:.3} s of virtual time: {reason}",
        *at_ns as f64 / 1e9
    )]
    Refused {
        /// The array.
        array: String,
        /// When.
        at_ns: u64,
        /// Read or write.
        op: HostOp,
        /// Its length.
        bytes: u64,
        /// The array's reason.
        reason: String,
    },
    /// An offered load outran the array so far that the I/Os waiting at the
    /// host passed [`WAITING_MAX`].
    #[error(
        "array `{array}`: the offered load outran it; {waiting} I/Os were waiting at the host at {at_ns} ns"
    )]
    Overrun {
        /// The array.
        array: String,
        /// When.
        at_ns: u64,
        /// I/Os waiting.
        waiting: usize,
    },
}

/// How far a run has got, as its progress callback hears it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Progress {
    /// The array about to run is preparing (filling the test file,
    /// reallocating): the fraction of that work done, from 0 to 1.
    Preparing(f64),
    /// The fraction of the whole run's measured time done, from 0 to 1.
    Running(f64),
}

/// Runs `workload` against every array in turn; `progress` hears how far it
/// has got.
pub fn run(
    arrays: &mut [Box<dyn Array>],
    workload: &Workload,
    options: &RunOptions,
    progress: &mut dyn FnMut(Progress),
) -> Result<LabReport, RunError> {
    run_each(arrays, std::slice::from_ref(workload), options, progress)
}

/// Runs `workloads[i]` against `arrays[i]` (or one workload against all, if
/// only one is given): scenarios give each array its own outstanding I/Os.
pub fn run_each(
    arrays: &mut [Box<dyn Array>],
    workloads: &[Workload],
    options: &RunOptions,
    progress: &mut dyn FnMut(Progress),
) -> Result<LabReport, RunError> {
    if workloads.len() != 1 && workloads.len() != arrays.len() {
        return Err(RunError::WorkloadCount {
            arrays: arrays.len(),
            workloads: workloads.len(),
        });
    }
    if options.sysstat_interval.0 == 0 || options.snapshot_every == Some(Duration(0)) {
        return Err(RunError::Interval);
    }
    let count = arrays.len();
    let mut reports = Vec::with_capacity(count);
    for (index, array) in arrays.iter_mut().enumerate() {
        let workload = &workloads[index.min(workloads.len() - 1)];
        let mut array_progress = |report: Progress| {
            progress(match report {
                Progress::Running(fraction) => {
                    Progress::Running((index as f64 + fraction) / count as f64)
                }
                preparing => preparing,
            })
        };
        reports.push(run_array(
            array.as_mut(),
            workload,
            options,
            &mut array_progress,
        )?);
    }
    progress(Progress::Running(1.0));
    Ok(LabReport {
        seed: options.seed,
        arrays: reports,
    })
}

fn run_array(
    array: &mut dyn Array,
    workload: &Workload,
    options: &RunOptions,
    progress: &mut dyn FnMut(Progress),
) -> Result<ArrayReport, RunError> {
    let luns = array.lun_bytes();
    let streams = workload
        .streams(options.seed, &luns)
        .map_err(misfit(array))?;
    let plan = workload.prepare_plan(&luns).map_err(misfit(array))?;
    array.prepare(&plan, &mut |fraction| {
        progress(Progress::Preparing(fraction))
    });
    if let Some(sched) = &options.snap_sched
        && !array.follow_snap_sched(sched)
    {
        return Err(RunError::SnapSched {
            array: array.name().to_string(),
        });
    }
    Ok(measure(array, workload, streams, options, progress)?.report)
}

/// The error of `workload` not fitting `array`.
pub(crate) fn misfit(array: &dyn Array) -> impl Fn(WorkloadError) -> RunError + use<> {
    let array = array.name().to_string();
    move |source| RunError::Workload {
        array: array.clone(),
        source,
    }
}

/// What one run measured, and the host I/Os it left in flight at its end
/// (dropped from the measurement, still the array's to answer).
pub(crate) struct Measured {
    /// The run's report.
    pub report: ArrayReport,
    /// Host I/Os submitted and not answered when the last segment ended.
    pub in_flight: usize,
}

/// Runs `workload`, as `streams`, on `array`, prepared, from the array's
/// time zero to the end of the last segment.
pub(crate) fn measure(
    array: &mut dyn Array,
    workload: &Workload,
    streams: Vec<WorkerStream>,
    options: &RunOptions,
    progress: &mut dyn FnMut(Progress),
) -> Result<Measured, RunError> {
    let luns = array.lun_bytes();
    let arrivals = workload.arrivals(options.seed);
    let mut host = Host::new(streams, workload.depths(), &luns, arrivals);
    host.start(array);
    let snapshots = (options.snapshot_every.is_some() || options.snap_sched.is_some())
        .then(|| array.snapshot_stats());
    let mut meter = Meter::new(
        workload.timing,
        options.sysstat_interval,
        array.disk_stats(),
        array.engine_stats(),
        snapshots,
        host.is_open(),
    )
    .with_large_streams_from(workload.large.map(|_| workload.workers as usize))
    .with_luns(luns.len());
    meter.minutes = (options.per_minute)
        .map(|per_minute| MinuteMeter::new(meter.end, per_minute.latency_threshold));
    let mut schedule = SnapshotSchedule::new(options.snapshot_every, meter.end);
    drive(array, &mut host, &mut meter, &mut schedule, progress)?;
    Ok(Measured {
        report: meter.finish(array, workload, options),
        in_flight: host.in_flight(),
    })
}

/// When the run's next snapshot falls, if it takes any more.
struct SnapshotSchedule {
    every: Duration,
    next: Instant,
    end: Instant,
}

impl SnapshotSchedule {
    /// The schedule of a run that ends at `end`; `None` without snapshots.
    fn new(every: Option<Duration>, end: Instant) -> Option<SnapshotSchedule> {
        every.map(|every| SnapshotSchedule {
            every,
            next: Instant(0) + every,
            end,
        })
    }

    /// The next snapshot's instant, if one falls before the end.
    fn due(&self) -> Option<Instant> {
        (self.next < self.end).then_some(self.next)
    }

    /// The snapshot due has been asked for.
    fn taken(&mut self) {
        self.next = self.next + self.every;
    }
}

/// The loop proper: from time zero to the end of the last segment.
fn drive(
    array: &mut dyn Array,
    host: &mut Host,
    meter: &mut Meter,
    schedule: &mut Option<SnapshotSchedule>,
    progress: &mut dyn FnMut(Progress),
) -> Result<(), RunError> {
    let end = meter.end;
    let mut done: Vec<HostCompletion> = Vec::new();
    let mut same_instant = 0u64;
    let mut last = Instant(0);
    let mut next_progress: u64 = 1;
    loop {
        let boundary = meter.next_boundary();
        let snapshot = schedule.as_ref().and_then(SnapshotSchedule::due);
        let arrival = host.next_arrival(end);
        let stuck = || RunError::Stuck {
            array: array.name().to_string(),
            at_ns: last.0,
            outstanding: host.in_flight(),
        };
        // An open loop's array may idle until the next arrival; with I/Os in
        // flight it never may.
        let next_event = match array.next_event() {
            Some(at) => at,
            None if host.in_flight() == 0 => boundary,
            None => return Err(stuck()),
        };
        let now = [snapshot, arrival]
            .into_iter()
            .flatten()
            .fold(next_event.min(boundary), Instant::min);
        same_instant = if now == last { same_instant + 1 } else { 0 };
        if same_instant > SAME_INSTANT_EVENTS_MAX {
            return Err(stuck());
        }
        last = now;
        array.advance(now, &mut done);
        for completion in done.drain(..) {
            let (io, completion) = host.finished(array, now, completion, end);
            if let Some(reason) = completion.refused {
                return Err(RunError::Refused {
                    array: array.name().to_string(),
                    at_ns: now.0,
                    op: io.op,
                    bytes: io.length,
                    reason,
                });
            }
            meter.record(&completion, &io);
        }
        if Some(now) == arrival {
            meter.arrived(now, host.arrive(array, now));
            if host.waiting() > WAITING_MAX {
                return Err(RunError::Overrun {
                    array: array.name().to_string(),
                    at_ns: now.0,
                    waiting: host.waiting(),
                });
            }
        }
        if let Some(schedule) = schedule.as_mut().filter(|_| Some(now) == snapshot) {
            array.take_snapshot(now);
            schedule.taken();
        }
        if now == boundary {
            let counted = !meter.snapshot_counts.is_empty();
            meter.sample(
                now,
                array.disk_stats(),
                || array.engine_stats(),
                || counted.then(|| array.snapshot_stats()),
            );
        }
        if now >= end {
            return Ok(());
        }
        while u128::from(now.0) * u128::from(PROGRESS_STEPS)
            >= u128::from(end.0) * u128::from(next_progress)
        {
            progress(Progress::Running(
                next_progress as f64 / PROGRESS_STEPS as f64,
            ));
            next_progress += 1;
        }
    }
}

/// Counts for one segment.
#[derive(Clone, Debug, Default)]
struct SegmentMeter {
    ios: u64,
    read_ios: u64,
    bytes: u64,
    latency: Histogram,
    /// With large streams: the workers' I/Os, then the streams'.
    classes: Option<[ClassMeter; 2]>,
    /// With several LUNs: each one's I/Os, in address order.
    luns: Vec<ClassMeter>,
}

/// Counts for one kind of a segment's I/Os.
#[derive(Clone, Debug, Default)]
struct ClassMeter {
    ios: u64,
    bytes: u64,
    read_bytes: u64,
    latency: Histogram,
}

impl ClassMeter {
    fn record(&mut self, op: HostOp, length: u64, latency_ns: u64) {
        self.ios += 1;
        self.bytes += length;
        if op == HostOp::Read {
            self.read_bytes += length;
        }
        self.latency.record(latency_ns);
    }

    fn report(&self, seconds: f64) -> ClassReport {
        ClassReport {
            ios: self.ios,
            iops: self.ios as f64 / seconds,
            mbps: self.bytes as f64 / 1e6 / seconds,
            read_mbps: self.read_bytes as f64 / 1e6 / seconds,
            latency_ms_avg: self.latency.mean() / 1e6,
            latency_ms_p99: self.latency.percentile(99.0) as f64 / 1e6,
        }
    }
}

/// Counts for one `sysstat` interval.
#[derive(Clone, Copy, Debug, Default)]
struct IntervalMeter {
    ops: u64,
    read_bytes: u64,
    write_bytes: u64,
}

/// Everything measured during one array's run.
struct Meter {
    timing: Timing,
    end: Instant,
    interval: Duration,
    segment: SegmentMeter,
    segment_index: u32,
    segments: Vec<SegmentReport>,
    read: (Histogram, u64),
    write: (Histogram, u64),
    counts: IntervalMeter,
    last_tick: Instant,
    last_disks: Vec<DiskStats>,
    intervals: Vec<IntervalReport>,
    disk_snapshots: Vec<Vec<DiskStats>>,
    engine_snapshots: Vec<EngineStats>,
    snapshot_counts: Vec<SnapshotStats>,
    /// An open loop's arrivals per segment; `None` for a closed loop.
    offered: Option<Vec<u64>>,
    /// Per-minute counts, if the run reports them.
    minutes: Option<MinuteMeter>,
    /// The first large stream's worker index, if the workload has any.
    large_from: Option<usize>,
    /// LUNs measured apart: 0 with one LUN.
    luns: usize,
}

impl Meter {
    fn new(
        timing: Timing,
        interval: Duration,
        disks: Vec<DiskStats>,
        engine: Option<EngineStats>,
        snapshots: Option<SnapshotStats>,
        open: bool,
    ) -> Meter {
        let mut disk_snapshots = Vec::new();
        let mut engine_snapshots = Vec::new();
        let mut snapshot_counts = Vec::new();
        if timing.ramp.0 == 0 {
            disk_snapshots.push(disks.clone());
            engine_snapshots.extend(engine);
            snapshot_counts.extend(snapshots);
        }
        Meter {
            timing,
            end: Instant(0) + timing.total(),
            interval,
            segment: SegmentMeter::default(),
            segment_index: 0,
            segments: Vec::new(),
            read: (Histogram::default(), 0),
            write: (Histogram::default(), 0),
            counts: IntervalMeter::default(),
            last_tick: Instant(0),
            last_disks: disks,
            intervals: Vec::new(),
            disk_snapshots,
            engine_snapshots,
            snapshot_counts,
            offered: open.then(|| vec![0; timing.segments as usize]),
            minutes: None,
            large_from: None,
            luns: 0,
        }
    }

    /// Measures each of `luns` LUNs apart, if there are several.
    fn with_luns(mut self, luns: usize) -> Meter {
        self.luns = if luns > 1 { luns } else { 0 };
        self.segment = self.fresh_segment();
        self
    }

    /// Measures the I/Os of workers from `first` on apart, as large
    /// streams.
    fn with_large_streams_from(mut self, first: Option<usize>) -> Meter {
        self.large_from = first;
        self.segment = self.fresh_segment();
        self
    }

    fn fresh_segment(&self) -> SegmentMeter {
        SegmentMeter {
            classes: self.large_from.map(|_| Default::default()),
            luns: vec![ClassMeter::default(); self.luns],
            ..SegmentMeter::default()
        }
    }

    /// `count` I/Os of an open loop arrived at `now`.
    fn arrived(&mut self, now: Instant, count: u64) {
        let start = self.measure_start();
        let Some(offered) = self.offered.as_mut().filter(|_| now >= start) else {
            return;
        };
        let index = (now - start).0 / self.timing.segment.0;
        if let Some(segment) = offered.get_mut(index as usize) {
            *segment += count;
        }
    }

    /// When measurement starts.
    fn measure_start(&self) -> Instant {
        Instant(0) + self.timing.ramp
    }

    /// When segment `index` (from 0) ends.
    fn segment_end(&self, index: u32) -> Instant {
        self.measure_start() + Duration(self.timing.segment.0 * (u64::from(index) + 1))
    }

    /// The next instant the loop must stop at: a `sysstat` tick, the start
    /// of measurement, or a segment's end.
    fn next_boundary(&self) -> Instant {
        let tick = (self.last_tick + self.interval).min(self.end);
        let snapshot = match self.disk_snapshots.len() {
            0 => self.measure_start(),
            taken => self.segment_end(taken as u32 - 1),
        };
        tick.min(snapshot)
    }

    fn record(&mut self, completion: &HostCompletion, io: &InFlight) {
        let (op, length) = (io.op, io.length);
        let finished = completion.finished_at;
        self.counts.ops += 1;
        match op {
            HostOp::Read => self.counts.read_bytes += length,
            HostOp::Write => self.counts.write_bytes += length,
        }
        if finished >= self.end {
            return;
        }
        if let Some(minutes) = self.minutes.as_mut() {
            minutes.record(finished, length, finished - completion.submitted_at);
        }
        if finished < self.measure_start() {
            return;
        }
        while finished >= self.segment_end(self.segment_index) {
            self.close_segment();
        }
        let latency_ns = (finished - completion.submitted_at).0;
        let large = self.large_from.is_some_and(|first| io.worker >= first);
        let segment = &mut self.segment;
        if let Some(classes) = segment.classes.as_mut() {
            classes[usize::from(large)].record(op, length, latency_ns);
        }
        if let Some(lun) = segment.luns.get_mut(io.lun) {
            lun.record(op, length, latency_ns);
        }
        segment.ios += 1;
        segment.bytes += length;
        segment.latency.record(latency_ns);
        let direction = match op {
            HostOp::Read => {
                segment.read_ios += 1;
                &mut self.read
            }
            HostOp::Write => &mut self.write,
        };
        direction.0.record(latency_ns);
        direction.1 += length;
    }

    /// Reports the current segment and starts the next.
    fn close_segment(&mut self) {
        let fresh = self.fresh_segment();
        let segment = std::mem::replace(&mut self.segment, fresh);
        let seconds = self.timing.segment.0 as f64 / 1e9;
        let start = self.segment_end(self.segment_index).0 - self.timing.segment.0;
        let latency = &segment.latency;
        self.segments.push(SegmentReport {
            index: self.segment_index + 1,
            start_s: start as f64 / 1e9,
            end_s: self.segment_end(self.segment_index).0 as f64 / 1e9,
            ios: segment.ios,
            read_ios: segment.read_ios,
            iops: segment.ios as f64 / seconds,
            mbps: segment.bytes as f64 / 1e6 / seconds,
            latency_ms_avg: latency.mean() / 1e6,
            latency_ms_p99: latency.percentile(99.0) as f64 / 1e6,
            offered_iops: (self.offered.as_ref())
                .map(|offered| offered[self.segment_index as usize] as f64 / seconds),
            small: (segment.classes.as_ref()).map(|classes| classes[0].report(seconds)),
            large: (segment.classes.as_ref()).map(|classes| classes[1].report(seconds)),
            luns: segment.luns.iter().map(|lun| lun.report(seconds)).collect(),
        });
        self.segment_index += 1;
    }

    /// Takes the samples due at boundary `now`.
    fn sample(
        &mut self,
        now: Instant,
        disks: Vec<DiskStats>,
        engine: impl FnOnce() -> Option<EngineStats>,
        snapshots: impl FnOnce() -> Option<SnapshotStats>,
    ) {
        let snapshot_due = match self.disk_snapshots.len() {
            0 => self.measure_start(),
            taken => self.segment_end(taken as u32 - 1),
        };
        if now == snapshot_due {
            self.disk_snapshots.push(disks.clone());
            self.engine_snapshots.extend(engine());
            self.snapshot_counts.extend(snapshots());
        }
        if now == (self.last_tick + self.interval).min(self.end) {
            self.close_interval(now, disks);
        }
    }

    fn close_interval(&mut self, now: Instant, disks: Vec<DiskStats>) {
        let deltas: Vec<DiskStats> = disks
            .iter()
            .zip(&self.last_disks)
            .map(|(now, then)| now.since(then))
            .collect();
        let counts = std::mem::take(&mut self.counts);
        self.intervals.push(IntervalReport {
            end_ns: now.0,
            length_ns: (now - self.last_tick).0,
            ops: counts.ops,
            host_read_bytes: counts.read_bytes,
            host_write_bytes: counts.write_bytes,
            disk_read_blocks: deltas
                .iter()
                .map(|d| d.user_read_blocks + d.cp_read_blocks)
                .sum(),
            disk_write_blocks: deltas.iter().map(|d| d.write_blocks).sum(),
            busiest_disk_busy_ns: deltas.iter().map(|d| d.busy_ns).max().unwrap_or(0),
        });
        self.last_tick = now;
        self.last_disks = disks;
    }

    fn finish(
        mut self,
        array: &dyn Array,
        workload: &Workload,
        options: &RunOptions,
    ) -> ArrayReport {
        while self.segments.len() < self.timing.segments as usize {
            self.close_segment();
        }
        let runtime_ns = self.timing.segment.0 * u64::from(self.timing.segments);
        let (minutes, latency_threshold) = (self.minutes.take())
            .map(MinuteMeter::finish)
            .unwrap_or_default();
        ArrayReport {
            name: array.name().to_string(),
            kind: array.kind(),
            capacity_bytes: array.capacity_bytes(),
            workload: workload.clone(),
            segments: self.segments,
            read: direction_report(&self.read.0, self.read.1, runtime_ns),
            write: direction_report(&self.write.0, self.write.1, runtime_ns),
            intervals: self.intervals,
            disk_snapshots: self.disk_snapshots,
            engine_snapshots: self.engine_snapshots,
            snapshot_every_ns: options.snapshot_every.map(|every| every.0),
            snap_sched: options.snap_sched.map(|sched| SnapSchedReport {
                schedule: sched.schedule.to_string(),
                clock_start: sched.clock_start.map(|start| start.to_string()),
                held: array.held_snapshots(),
            }),
            snapshot_counts: self.snapshot_counts,
            minutes,
            latency_threshold,
        }
    }
}

fn direction_report(latency: &Histogram, bytes: u64, runtime_ns: u64) -> DirectionReport {
    DirectionReport {
        ios: latency.count(),
        bytes,
        runtime_ns,
        latency_ns_min: latency.min(),
        latency_ns_max: latency.max(),
        latency_ns_mean: latency.mean(),
        latency_ns_stddev: latency.stddev(),
        percentiles: PERCENTILES
            .iter()
            .map(|&percent| Percentile {
                percent,
                latency_ns: latency.percentile(percent),
            })
            .collect(),
    }
}
