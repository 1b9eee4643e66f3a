//! `wafer lab run`: runs scenario files (`scenarios/*.toml`) and writes their
//! reports.
//!
//! Every array of every scenario is one job: it is built from its spec (the
//! in-place comparator or the wafer filer on modelled drives), given its own
//! copy of the scenario's workload (with the array's outstanding I/Os), and
//! driven by `wafer_lab::run` alone. The lab is deterministic and an array's
//! run depends only on its spec, its workload and the seed (every workload
//! stream is seeded from the run's seed alone), so the jobs are independent:
//! they run on a pool of `--jobs` threads, and each scenario's array reports
//! are put back in the scenario's array order into one `LabReport`. That
//! report is the one a sequential `wafer_lab::run_each` over the same arrays
//! gives, byte for byte, whatever the number of threads. Each job holds a
//! whole array in memory, so fewer jobs also means less memory.
//!
//! While the jobs run, stderr shows the share of the whole work done (a bar
//! redrawn in place on a terminal, a line every 10 % otherwise). As soon as
//! all of a scenario's arrays are done, its results per measured segment
//! (IOPS, MB/s of 10^6 bytes, mean and 99th-percentile latency in ms) go to
//! stdout and its files to its directory: `report.json`, per array
//! `<array>.fio.json`, `<array>.statit.txt`, `<array>.sysstat.txt` and
//! `<array>.mechanisms.txt` (per segment: chains, seeks, CP reads, partial
//! stripes, unaligned-write reads, cache hits, CPs by type; and the
//! snapshots, if the run takes them), `<array>.minutes.txt` if the run
//! reports per minute (with the first minute at or below a latency
//! threshold, also on stdout), `<array>.luns.txt` if the array has several
//! LUNs (each one's figures per segment), and `chart.svg`. An offered load's stdout
//! table adds the IOPS offered. The first failure stops new jobs from starting; jobs already
//! running finish, and the command then exits with the error.
//!
//! A scenario file with a `[sweep]` table stands for one scenario per point
//! (`wafer_lab::Sweep`): each point's arrays are jobs like any other, its
//! files go to `point-NN/` in the sweep's directory, and once every point is
//! done the sweep's summary goes to stdout and to `sweep.txt`, `sweep.json`
//! and `sweep.svg` there.
//!
//! A scenario with `[[step]]` tables is a procedure (`wafer_lab::procedure`):
//! each array's job runs every step on the one array, and once every array
//! is done each run step's files go to `step-NN/` in the scenario's
//! directory, as a sweep point's do, and the summary, a row per run step and
//! array, to stdout, `procedure.txt` and `procedure.json` there, with its
//! chart in `procedure.svg`.

use std::collections::BTreeSet;
use std::io::IsTerminal;
use std::num::NonZeroUsize;
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex, PoisonError};
use std::{fs, thread};

use anyhow::{Context, bail};
use clap::Args;
use wafer_devices::params::Catalog;
use wafer_lab::report::{ArrayReport, fio, luns, mechanisms, minutes, statit, svg, sysstat};
use wafer_lab::{
    Array, ArrayProcedure, ArraySpec, InPlaceArray, LabReport, ProcedureReport,
    Progress as LabProgress, Scenario, Sweep, SweepReport, WaferArray, Workload,
};

use super::spill::{FileSpill, MemoryBudget};

/// Where scenarios write when `--out` is not given: `lab-out/<file stem>`.
const DEFAULT_OUT_ROOT: &str = "lab-out";
/// Bytes in a GiB.
const GIB: f64 = (1u64 << 30) as f64;
/// Width of the progress bar, in characters.
const BAR_WIDTH: usize = 40;

/// Options of `wafer lab run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Scenario files (TOML), run together.
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
    /// Output directory (default lab-out/<file stem>); with several files,
    /// each scenario writes to DIR/<file stem>.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Seed of every workload stream, instead of the scenarios' own.
    #[arg(long)]
    seed: Option<u64>,
    /// Arrays run at once, each on its own thread (default: the number of
    /// CPUs). The reports do not depend on it.
    #[arg(long, value_name = "N")]
    jobs: Option<NonZeroUsize>,
    /// Memory for the wafer arrays' block records (each block's stamp and
    /// trailer), all arrays together, in GiB (default: half the memory
    /// available at start); past it, records go to a temporary file, which is
    /// slower. The reports do not depend on it.
    #[arg(long, value_name = "GIB")]
    trailer_memory_gib: Option<f64>,
}

/// A scenario ready to run: where it came from and where its files go.
struct ScenarioRun {
    file: PathBuf,
    out_dir: PathBuf,
    scenario: Scenario,
    /// Each array's workload, in array order.
    workloads: Vec<Workload>,
}

/// A sweep file's points, run as scenarios of their own: where its summary
/// goes, and which scenarios are its points.
struct SweepRun {
    out_dir: PathBuf,
    name: String,
    sweep: Sweep,
    /// Its points' indices among the scenarios, in point order.
    first: usize,
}

/// One array of one scenario.
#[derive(Clone, Copy, Debug)]
struct Job {
    scenario: usize,
    array: usize,
}

/// What a job sends back: its index, its array's report and how long it took.
type JobOutcome = (usize, anyhow::Result<(JobReport, WallTime)>);

/// What one array measured: one run, or a procedure's run steps.
#[derive(Clone, Debug)]
enum JobReport {
    Run(Box<ArrayReport>),
    Procedure(ArrayProcedure),
}

impl JobReport {
    /// The runs it measured, in order.
    fn runs(&self) -> Vec<&ArrayReport> {
        match self {
            JobReport::Run(report) => vec![report],
            JobReport::Procedure(procedure) => procedure.runs.iter().map(|r| &r.report).collect(),
        }
    }
}

/// A job's wall-clock time: the lab's speed, which no report file holds
/// (they depend on the seed alone).
#[derive(Clone, Copy, Debug)]
struct WallTime {
    /// Building the array and preparing the test file, until the run loop's
    /// first progress report.
    setup: std::time::Duration,
    /// The whole job.
    total: std::time::Duration,
}

impl WallTime {
    /// The simulated host I/Os per wall-clock second of an array's `runs`,
    /// as a line.
    fn describe(&self, runs: &[&ArrayReport]) -> String {
        let ios: u64 = (runs.iter().flat_map(|run| &run.intervals))
            .map(|i| i.ops)
            .sum();
        let run = self.total.saturating_sub(self.setup).as_secs_f64();
        format!(
            "{}: {} host I/Os simulated in {:.1} s of wall time ({:.0} per second), \
             after {:.1} s building the array and preparing the test file",
            runs.first().map_or("", |array| array.name.as_str()),
            ios,
            run,
            ios as f64 / run.max(1e-9),
            self.setup.as_secs_f64(),
        )
    }
}

/// Runs `wafer lab run`.
pub fn run(args: &RunArgs) -> anyhow::Result<ExitCode> {
    let catalog = Catalog::builtin().context("the built-in drives.toml")?;
    let (scenarios, sweeps) = load_all(args, &catalog)?;
    let jobs: Vec<Job> = scenarios
        .iter()
        .enumerate()
        .flat_map(|(scenario, run)| {
            (0..run.scenario.arrays.len()).map(move |array| Job { scenario, array })
        })
        .collect();
    let threads = args
        .jobs
        .or_else(|| thread::available_parallelism().ok())
        .map_or(1, NonZeroUsize::get)
        .min(jobs.len());
    let names = jobs
        .iter()
        .map(|job| {
            scenarios[job.scenario].scenario.arrays[job.array]
                .spec
                .name()
                .to_string()
        })
        .collect();
    let budget = match args.trailer_memory_gib {
        Some(gib) if gib.is_finite() && gib >= 0.0 => MemoryBudget::new((gib * GIB) as u64),
        Some(gib) => bail!("--trailer-memory-gib {gib}: expected a size of 0 or more"),
        None => MemoryBudget::half_of_available(),
    };
    let progress = Progress::new(names);
    let outcome = run_jobs(&scenarios, &jobs, threads, &catalog, &progress, &budget);
    progress.hidden_while(|| {});
    let reports = outcome?;
    for sweep in &sweeps {
        let points = &reports[sweep.first..sweep.first + sweep.sweep.points.len()];
        let points: Vec<LabReport> = (points.iter().cloned())
            .map(|report| report.expect("a sweep's points are single runs"))
            .collect();
        finish_sweep(sweep, &points)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Writes a sweep's summary (`sweep.txt`, `sweep.json`, `sweep.svg`) into
/// its directory and prints its table; `points` are its points' reports.
fn finish_sweep(run: &SweepRun, points: &[LabReport]) -> anyhow::Result<()> {
    let report = SweepReport::new(&run.name, &run.sweep, points);
    let table = report.render();
    let files = [
        ("sweep.txt", table.clone()),
        ("sweep.json", report.to_json()),
        ("sweep.svg", svg::render_sweep(&report)),
    ];
    write_summary(&run.out_dir, &table, &files)
}

/// Writes a summary's `files` into `dir` and prints its `table`.
fn write_summary(dir: &Path, table: &str, files: &[(&str, String)]) -> anyhow::Result<()> {
    fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    for (name, text) in files {
        let path = dir.join(name);
        fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    }
    print!("{table}");
    let names: Vec<&str> = files.iter().map(|(name, _)| *name).collect();
    println!("  written to {}: {}", dir.display(), names.join(", "));
    Ok(())
}

/// Reads and checks every scenario file and gives each its output directory,
/// before anything runs; a sweep's points become scenarios of their own,
/// each writing to `point-NN` in the sweep's directory.
fn load_all(
    args: &RunArgs,
    catalog: &Catalog,
) -> anyhow::Result<(Vec<ScenarioRun>, Vec<SweepRun>)> {
    let mut out_dirs = BTreeSet::new();
    let mut runs = Vec::with_capacity(args.files.len());
    let mut sweeps = Vec::new();
    for file in &args.files {
        let out_dir = out_dir(file, args.out.as_deref(), args.files.len() > 1)?;
        if !out_dirs.insert(out_dir.clone()) {
            bail!(
                "two scenarios would write to {}: give files with different names",
                out_dir.display()
            );
        }
        let points = match load(file, catalog)? {
            Loaded::Scenario(scenario) => vec![(*scenario, out_dir)],
            Loaded::Sweep(sweep) => {
                let name = sweep.points[0].scenario.name.clone();
                let points = (sweep.points.iter().enumerate())
                    .map(|(index, point)| {
                        let mut scenario = point.scenario.clone();
                        scenario.name = format!("{name} [{}]", sweep.label(index));
                        (scenario, out_dir.join(format!("point-{:02}", index + 1)))
                    })
                    .collect();
                sweeps.push(SweepRun {
                    out_dir,
                    name,
                    sweep,
                    first: runs.len(),
                });
                points
            }
        };
        for (mut scenario, out_dir) in points {
            check_array_names(file, &scenario)?;
            if let Some(seed) = args.seed {
                scenario.run.seed = seed;
            }
            runs.push(ScenarioRun {
                file: file.clone(),
                out_dir,
                workloads: scenario.workloads(),
                scenario,
            });
        }
    }
    Ok((runs, sweeps))
}

/// What a scenario file holds: one scenario, or a sweep of them.
enum Loaded {
    Scenario(Box<Scenario>),
    Sweep(Sweep),
}

/// One scenario file, parsed and checked; the files it names (`job_file`,
/// `icf_file`) are read relative to its directory, unless absolute.
fn load(file: &Path, catalog: &Catalog) -> anyhow::Result<Loaded> {
    let text = fs::read_to_string(file)
        .with_context(|| format!("cannot read scenario {}", file.display()))?;
    let dir = file.parent().unwrap_or(Path::new(""));
    let read = |path: &str| {
        let full = dir.join(path);
        fs::read_to_string(&full).map_err(|error| format!("{}: {error}", full.display()))
    };
    let named = || file.display().to_string();
    if let Some(sweep) = Sweep::parse_with_files(&text, catalog, &read).with_context(named)? {
        return Ok(Loaded::Sweep(sweep));
    }
    let scenario = Scenario::parse_with_files(&text, catalog, &read).with_context(named)?;
    Ok(Loaded::Scenario(Box::new(scenario)))
}

/// Refuses array names that cannot name report files.
fn check_array_names(file: &Path, scenario: &Scenario) -> anyhow::Result<()> {
    for entry in &scenario.arrays {
        let name = entry.spec.name();
        if !is_plain_file_name(name) {
            bail!(
                "scenario {}: array name `{name}` cannot name its report files \
                 (no `/`, `\\`, empty, `.` or `..`)",
                file.display()
            );
        }
    }
    Ok(())
}

/// Whether `name` can stand in a file name without leaving the directory.
fn is_plain_file_name(name: &str) -> bool {
    !matches!(name, "" | "." | "..") && !name.contains(['/', '\\', '\0'])
}

/// Where the scenario in `file` writes: `out` itself for a single file,
/// `out/<stem>` for one of several, `lab-out/<stem>` without `out`.
fn out_dir(file: &Path, out: Option<&Path>, several: bool) -> anyhow::Result<PathBuf> {
    let stem = file
        .file_stem()
        .with_context(|| format!("scenario {} has no file name", file.display()))?;
    Ok(match out {
        Some(out) if !several => out.to_path_buf(),
        Some(out) => out.join(stem),
        None => Path::new(DEFAULT_OUT_ROOT).join(stem),
    })
}

/// Runs every job on `threads` worker threads and reports each scenario as
/// soon as its last array is done; the first error stops new jobs starting.
/// Returns every scenario's report, in order (`None` for a procedure, whose
/// run steps have a report each).
fn run_jobs(
    scenarios: &[ScenarioRun],
    jobs: &[Job],
    threads: usize,
    catalog: &Catalog,
    progress: &Progress,
    budget: &Arc<MemoryBudget>,
) -> anyhow::Result<Vec<Option<LabReport>>> {
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let pool = Pool {
        scenarios,
        jobs,
        catalog,
        budget,
        progress,
        next: &next,
        stop: &stop,
    };
    thread::scope(|scope| {
        let (sender, receiver) = mpsc::channel();
        for _ in 0..threads {
            let sender = sender.clone();
            scope.spawn(move || pool.work(&sender));
        }
        drop(sender);
        collect(scenarios, jobs, &receiver, &stop, progress)
    })
}

/// What the worker threads share.
#[derive(Clone, Copy)]
struct Pool<'a> {
    scenarios: &'a [ScenarioRun],
    jobs: &'a [Job],
    catalog: &'a Catalog,
    budget: &'a Arc<MemoryBudget>,
    progress: &'a Progress,
    next: &'a AtomicUsize,
    stop: &'a AtomicBool,
}

impl Pool<'_> {
    /// One worker: takes the next job until none is left or `stop` is set.
    fn work(self, results: &Sender<JobOutcome>) {
        while !self.stop.load(Ordering::Relaxed) {
            let index = self.next.fetch_add(1, Ordering::Relaxed);
            let Some(&job) = self.jobs.get(index) else {
                return;
            };
            let started = std::time::Instant::now();
            let mut setup = None;
            let report = self.run_caught(job, &mut |report| match report {
                LabProgress::Preparing(fraction) => self.progress.preparing(index, fraction),
                LabProgress::Running(fraction) => {
                    setup.get_or_insert_with(|| started.elapsed());
                    self.progress.update(index, fraction);
                }
            });
            let total = started.elapsed();
            let wall = WallTime {
                setup: setup.unwrap_or(total),
                total,
            };
            if results.send((index, report.map(|r| (r, wall)))).is_err() {
                return;
            }
        }
    }

    /// [`Pool::run_job`], a panic (a bug in the lab, its message already
    /// printed) turned into that job's error so that the run stops cleanly.
    fn run_caught(
        &self,
        job: Job,
        progress: &mut dyn FnMut(LabProgress),
    ) -> anyhow::Result<JobReport> {
        panic::catch_unwind(AssertUnwindSafe(|| self.run_job(job, progress))).unwrap_or_else(|_| {
            let spec = &self.scenarios[job.scenario].scenario.arrays[job.array].spec;
            bail!(
                "array `{}`: the run panicked (a bug in the lab)",
                spec.name()
            )
        })
    }

    /// Builds `job`'s array and runs its workload (or its procedure)
    /// against it alone.
    fn run_job(
        &self,
        job: Job,
        progress: &mut dyn FnMut(LabProgress),
    ) -> anyhow::Result<JobReport> {
        let run = &self.scenarios[job.scenario];
        let spec = &run.scenario.arrays[job.array].spec;
        let workload = &run.workloads[job.array];
        let mut arrays = [build_array(spec, self.catalog, self.budget)?];
        if let Some(procedure) = &run.scenario.procedure {
            let [array] = &mut arrays;
            let steps = wafer_lab::run_procedure(
                array.as_mut(),
                workload,
                &run.scenario.run,
                procedure,
                progress,
            )?;
            return Ok(JobReport::Procedure(steps));
        }
        let mut report = wafer_lab::run(&mut arrays, workload, &run.scenario.run, progress)?;
        let report = report.arrays.pop().context("the run reported no array")?;
        Ok(JobReport::Run(Box::new(report)))
    }
}

/// The array `spec` describes, idle at time zero.
fn build_array(
    spec: &ArraySpec,
    catalog: &Catalog,
    budget: &Arc<MemoryBudget>,
) -> anyhow::Result<Box<dyn Array>> {
    Ok(match spec {
        ArraySpec::InPlace(spec) => Box::new(InPlaceArray::new(spec, catalog)?),
        ArraySpec::Wafer(spec) => {
            let spill =
                FileSpill::new(Arc::clone(budget)).context("cannot make the lab's spill file")?;
            Box::new(WaferArray::new(spec, catalog, Box::new(spill))?)
        }
    })
}

/// Gathers the jobs' reports, in each scenario's array order, and finishes
/// each scenario when its last report arrives. Returns every scenario's
/// report, or the first error.
fn collect(
    scenarios: &[ScenarioRun],
    jobs: &[Job],
    receiver: &Receiver<JobOutcome>,
    stop: &AtomicBool,
    progress: &Progress,
) -> anyhow::Result<Vec<Option<LabReport>>> {
    let mut finished: Vec<Option<LabReport>> = vec![None; scenarios.len()];
    let mut reports: Vec<Vec<Option<(JobReport, WallTime)>>> = scenarios
        .iter()
        .map(|run| vec![None; run.scenario.arrays.len()])
        .collect();
    let mut first_error = None;
    for (index, outcome) in receiver {
        let job = jobs[index];
        let run = &scenarios[job.scenario];
        let finished = outcome.and_then(|report| {
            let slots = &mut reports[job.scenario];
            slots[job.array] = Some(report);
            if !slots.iter().all(Option::is_some) {
                return Ok(());
            }
            let arrays = slots.iter_mut().filter_map(Option::take).collect();
            finished[job.scenario] = finish_scenario(run, arrays, progress)?;
            Ok(())
        });
        if let Err(error) = finished {
            stop.store(true, Ordering::Relaxed);
            if first_error.is_none() {
                first_error = Some(error.context(run.file.display().to_string()));
            }
        }
    }
    match first_error {
        Some(error) => Err(error),
        None => Ok(finished),
    }
}

/// Prints a finished scenario's results and writes its files; returns its
/// report, or `None` for a procedure (see [`finish_procedure`]).
fn finish_scenario(
    run: &ScenarioRun,
    arrays: Vec<(JobReport, WallTime)>,
    progress: &Progress,
) -> anyhow::Result<Option<LabReport>> {
    let walls: Vec<String> = (arrays.iter())
        .map(|(report, wall)| wall.describe(&report.runs()))
        .collect();
    let (mut runs, mut procedures) = (Vec::new(), Vec::new());
    for (report, _) in arrays {
        match report {
            JobReport::Run(report) => runs.push(*report),
            JobReport::Procedure(procedure) => procedures.push(procedure),
        }
    }
    if !procedures.is_empty() {
        finish_procedure(run, &procedures, &walls, progress)?;
        return Ok(None);
    }
    let report = LabReport {
        seed: run.scenario.run.seed,
        arrays: runs,
    };
    report_run(&run.scenario.name, &run.out_dir, &report, &walls, progress)?;
    Ok(Some(report))
}

/// Writes one run's files into `dir` and prints its results, with the
/// arrays' `walls` lines.
fn report_run(
    name: &str,
    dir: &Path,
    report: &LabReport,
    walls: &[String],
    progress: &Progress,
) -> anyhow::Result<()> {
    let written = write_outputs(dir, report)?;
    progress.hidden_while(|| {
        print_results(name, report);
        for wall in walls {
            println!("  {wall}");
        }
        let files = written.join(", ");
        println!("  written to {}: {files}", dir.display());
        println!();
    });
    Ok(())
}

/// Writes each run step of a procedure to `step-NN/` as a run of its own,
/// then its summary (`procedure.txt`, `procedure.json`, `procedure.svg`);
/// the arrays' `walls` lines, for the whole procedure, follow the summary.
fn finish_procedure(
    run: &ScenarioRun,
    arrays: &[ArrayProcedure],
    walls: &[String],
    progress: &Progress,
) -> anyhow::Result<()> {
    let summary = ProcedureReport::new(&run.scenario.name, arrays);
    for step in &summary.runs {
        let report = LabReport {
            seed: run.scenario.run.seed,
            arrays: (arrays.iter())
                .map(|array| array.runs[step.run - 1].report.clone())
                .collect(),
        };
        let name = format!("{} [run {}: {}]", run.scenario.name, step.run, step.label);
        let dir = run.out_dir.join(format!("step-{:02}", step.run));
        report_run(&name, &dir, &report, &[], progress)?;
    }
    let table = summary.render();
    let files = [
        ("procedure.txt", table.clone()),
        ("procedure.json", summary.to_json()),
        ("procedure.svg", svg::render_procedure(&summary)),
    ];
    let mut written = Ok(());
    progress.hidden_while(|| {
        written = write_summary(&run.out_dir, &table, &files);
        for wall in walls {
            println!("  {wall}");
        }
        println!();
    });
    written
}

/// The scenario's name and, per array, a table of its measured segments;
/// an offered load adds the IOPS offered beside those achieved, and large
/// streams (Orion's) the small I/Os' IOPS and the large I/Os' MB/s apart.
fn print_results(name: &str, report: &LabReport) {
    println!("{name} (seed {})", report.seed);
    let open =
        (report.arrays.iter()).any(|array| array.segments.iter().any(|s| s.offered_iops.is_some()));
    let classes =
        (report.arrays.iter()).any(|array| array.segments.iter().any(|s| s.large.is_some()));
    for array in &report.arrays {
        println!("  {} ({})", array.name, array.kind.as_str());
        let offered = match open {
            true => format!(" {:>10}", "offered"),
            false => String::new(),
        };
        let split = match classes {
            true => format!(
                " {:>10} {:>9} {:>10} {:>9}",
                "small IOPS", "small ms", "large MB/s", "large ms"
            ),
            false => String::new(),
        };
        println!(
            "    {:>7}{offered} {:>10} {:>9} {:>9} {:>9}{split}",
            "segment", "IOPS", "MB/s", "avg ms", "p99 ms"
        );
        for segment in &array.segments {
            let offered = match segment.offered_iops {
                Some(iops) => format!(" {iops:>10.1}"),
                None => String::new(),
            };
            let split = match (&segment.small, &segment.large) {
                (Some(small), Some(large)) => format!(
                    " {:>10.1} {:>9.3} {:>10.2} {:>9.3}",
                    small.iops, small.latency_ms_avg, large.mbps, large.latency_ms_avg
                ),
                _ => String::new(),
            };
            println!(
                "    {:>7}{offered} {:>10.1} {:>9.2} {:>9.3} {:>9.3}{split}",
                segment.index,
                segment.iops,
                segment.mbps,
                segment.latency_ms_avg,
                segment.latency_ms_p99
            );
        }
        if let Some(threshold) = &array.latency_threshold {
            println!("    {}", minutes::threshold_line(threshold));
        }
    }
    let latency = match open {
        true => "latency from arrival to completion",
        false => "latency from submission to completion",
    };
    println!("  (MB/s in 10^6 bytes per second; {latency})");
}

/// Writes `report`'s files into `dir`, creating it; returns their names.
fn write_outputs(dir: &Path, report: &LabReport) -> anyhow::Result<Vec<String>> {
    fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut files = vec![("report.json".to_string(), report.to_json())];
    for array in &report.arrays {
        files.push((format!("{}.fio.json", array.name), fio::render(array)));
        files.push((format!("{}.statit.txt", array.name), statit::render(array)));
        files.push((
            format!("{}.sysstat.txt", array.name),
            sysstat::render(array),
        ));
        files.push((
            format!("{}.mechanisms.txt", array.name),
            mechanisms::render(array),
        ));
        if let Some(table) = minutes::render(array) {
            files.push((format!("{}.minutes.txt", array.name), table));
        }
        if let Some(table) = luns::render(array) {
            files.push((format!("{}.luns.txt", array.name), table));
        }
    }
    files.push(("chart.svg".to_string(), svg::render(report)));
    for (name, contents) in &files {
        let path = dir.join(name);
        fs::write(&path, contents).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(files.into_iter().map(|(name, _)| name).collect())
}

/// The share of all jobs done, on stderr: a bar redrawn in place on a
/// terminal, a line every 10 % otherwise. Arrays still preparing (filling and
/// reallocating before time zero, which can take longer than the run) are
/// named beside the bar, or get lines of their own.
struct Progress {
    terminal: bool,
    names: Vec<String>,
    state: Mutex<ProgressState>,
}

struct ProgressState {
    /// Each job's fraction done, 0 to 1.
    fractions: Vec<f64>,
    /// Each job's preparation in tenths of a percent, while it prepares.
    preparing: Vec<Option<u32>>,
    /// What stderr shows: tenths of a percent on a terminal, tens of
    /// percent otherwise; `None` when nothing is shown.
    shown: Option<u32>,
}

impl Progress {
    fn new(names: Vec<String>) -> Progress {
        let terminal = std::io::stderr().is_terminal();
        let jobs = names.len();
        Progress {
            terminal,
            names,
            state: Mutex::new(ProgressState {
                fractions: vec![0.0; jobs],
                preparing: vec![None; jobs],
                // Plain lines start at 10 %; the bar shows from the start.
                shown: (!terminal).then_some(0),
            }),
        }
    }

    /// Job `job` has prepared `fraction` of its array; a line every 10 %
    /// without a terminal, the bar redrawn with it on one.
    fn preparing(&self, job: usize, fraction: f64) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let tenths = (fraction.clamp(0.0, 1.0) * 1000.0).floor() as u32;
        let before = state.preparing[job].replace(tenths);
        if self.terminal {
            if before != Some(tenths) {
                state.shown = None;
                self.draw(&mut state);
            }
        } else if before.is_none_or(|b| b / 100 != tenths / 100) {
            eprintln!(
                "wafer lab run: {} preparing, {} % done",
                self.names[job],
                tenths / 10
            );
        }
    }

    /// Job `job` is `fraction` done; redraws if the figure shown changes.
    fn update(&self, job: usize, fraction: f64) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.fractions[job] = fraction.clamp(0.0, 1.0);
        state.preparing[job] = None;
        self.draw(&mut state);
    }

    fn draw(&self, state: &mut ProgressState) {
        let jobs = state.fractions.len();
        let overall = (state.fractions.iter().sum::<f64>() / jobs as f64).min(1.0);
        let done = state.fractions.iter().filter(|&&f| f >= 1.0).count();
        let steps = if self.terminal { 1000.0 } else { 10.0 };
        let step = (overall * steps).floor() as u32;
        if state.shown == Some(step) {
            return;
        }
        state.shown = Some(step);
        if self.terminal {
            let filled = (overall * BAR_WIDTH as f64).floor() as usize;
            let preparing: Vec<String> = state
                .preparing
                .iter()
                .zip(&self.names)
                .filter_map(|(tenths, name)| {
                    tenths.map(|t| format!(", {name} preparing {:.1} %", f64::from(t) / 10.0))
                })
                .collect();
            eprint!(
                "\r\x1b[K[{}{}] {:5.1} %  {done} of {jobs} arrays done{}",
                "#".repeat(filled),
                "-".repeat(BAR_WIDTH - filled),
                overall * 100.0,
                preparing.concat()
            );
        } else {
            eprintln!("wafer lab run: {} % done", step * 10);
        }
    }

    /// Runs `print` (which writes to stdout) with the bar off the terminal
    /// line and no redraw meanwhile; the next update draws it again.
    fn hidden_while(&self, print: impl FnOnce()) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if self.terminal && state.shown.take().is_some() {
            eprint!("\r\x1b[K");
        }
        print();
    }
}
