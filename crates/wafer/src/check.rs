//! `wafer check`: run seeds of the deterministic simulation.
//!
//! Each seed builds a small aggregate, runs a random workload against the real
//! engine with faults injected, and checks every read against a model; the exit
//! status is 0 only if every check of every seed held. A failure prints the seed
//! and the one command that replays it exactly. The filer runs on real bytes,
//! or with `--payload stamps` on one stamp per block, as the performance lab
//! runs it; a stamp filer cannot mount, so it is never crashed.

use std::collections::BTreeMap;
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use wafer_sim::check::{CheckConfig, CheckFailure, CheckReport, PayloadKind, run as run_seed};
use wafer_sim::node_check::{NodeCheckConfig, NodeCheckReport, run as run_node_seed};

/// Options of `wafer check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The first seed to run.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// How many consecutive seeds to run, starting at --seed.
    #[arg(long, default_value_t = 1)]
    seeds: u64,
    /// Host operations per seed.
    #[arg(long, default_value_t = 2000)]
    ops: u64,
    /// Run without injected faults (the workload and model only).
    #[arg(long)]
    no_faults: bool,
    /// What the filer's blocks hold: real bytes, or one stamp per block (as
    /// the performance lab runs it). A stamp filer cannot mount, so stamps get
    /// every fault but crashes.
    #[arg(long, value_enum, default_value_t = PayloadArg::Bytes)]
    payload: PayloadArg,
    /// Bound the engine to 1-8 requests (drawn per seed), below the
    /// workload's eight in flight, so that it refuses some as busy.
    #[arg(long)]
    bound_requests: bool,
    /// Run nodes of 1 to 3 aggregates over one NVLog instead: --ops writes
    /// spread over every aggregate's LUN, a crash and a full read-back every
    /// 40, aggregates taken offline and back and disks lost between.
    #[arg(long, conflicts_with_all = ["payload", "bound_requests"])]
    node: bool,
    /// Print one line per passing seed, not just a summary.
    #[arg(short, long)]
    verbose: bool,
}

/// The payloads, as `--payload` spells them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum PayloadArg {
    /// Real 4 KiB blocks.
    Bytes,
    /// One 64-bit stamp per block.
    Stamps,
}

impl From<PayloadArg> for PayloadKind {
    fn from(arg: PayloadArg) -> PayloadKind {
        match arg {
            PayloadArg::Bytes => PayloadKind::Bytes,
            PayloadArg::Stamps => PayloadKind::Stamps,
        }
    }
}

impl PayloadArg {
    /// How a summary names the payload after the seeds (the default, bytes,
    /// goes unsaid).
    fn label(self) -> &'static str {
        match self {
            PayloadArg::Bytes => "",
            PayloadArg::Stamps => " on stamps",
        }
    }

    /// The option a replay command needs for it.
    fn replay_option(self) -> &'static str {
        match self {
            PayloadArg::Bytes => "",
            PayloadArg::Stamps => " --payload stamps",
        }
    }

    /// What became of the crashes: `count` of them, or why there were none.
    fn crashes(self, count: u64, outcome: &str) -> String {
        match PayloadKind::from(self).crashes() {
            true => format!("{count} crashes{outcome}"),
            false => "crashes not injected (a stamp filer does not mount)".into(),
        }
    }
}

/// Runs the seeds; exit status 1 on the first failure.
pub fn run(args: &CheckArgs) -> anyhow::Result<ExitCode> {
    if args.node {
        return Ok(run_nodes(args));
    }
    let mut totals = Totals::default();
    for seed in args.seed..args.seed.saturating_add(args.seeds) {
        match run_one(args, seed) {
            Ok(report) => {
                if args.verbose {
                    print_seed(args, seed, &report);
                }
                totals.add(&report);
            }
            Err(failure) => {
                println!("check FAILED at {failure}");
                let faults = if args.no_faults { " --no-faults" } else { "" };
                let bound = if args.bound_requests {
                    " --bound-requests"
                } else {
                    ""
                };
                println!(
                    "replay: wafer check --seed {seed} --ops {}{faults}{bound}{}",
                    args.ops,
                    args.payload.replay_option()
                );
                return Ok(ExitCode::FAILURE);
            }
        }
    }
    print_summary(args, &totals);
    Ok(ExitCode::SUCCESS)
}

/// Runs the node seeds; exit status 1 on the first failure.
fn run_nodes(args: &CheckArgs) -> ExitCode {
    let mut totals = NodeCheckReport::default();
    for seed in args.seed..args.seed.saturating_add(args.seeds) {
        let config = NodeCheckConfig {
            rounds: args.ops.div_ceil(40).max(1),
            faults: !args.no_faults,
            ..NodeCheckConfig::for_seed(seed)
        };
        let outcome = std::panic::catch_unwind(|| run_node_seed(&config))
            .unwrap_or_else(|panic| Err(format!("engine assertion failed: {}", message(&panic))));
        match outcome {
            Ok(report) => {
                if args.verbose {
                    println!(
                        "seed {seed}: ok: {} aggregates, {report:?}",
                        config.aggregates
                    );
                }
                totals.crashes += report.crashes;
                totals.writes += report.writes;
                totals.blocks_checked += report.blocks_checked;
                totals.offlines += report.offlines;
                totals.disks_lost += report.disks_lost;
                totals.disks_added += report.disks_added;
            }
            Err(reason) => {
                println!(
                    "check FAILED at seed {seed} ({} aggregates): {reason}",
                    config.aggregates
                );
                let faults = if args.no_faults { " --no-faults" } else { "" };
                println!(
                    "replay: wafer check --node --seed {seed} --ops {}{faults}",
                    args.ops
                );
                return ExitCode::FAILURE;
            }
        }
    }
    println!(
        "check passed: {} node seeds from {} (1 to 3 aggregates), {} writes acknowledged, \
         {} crashes survived, {} blocks read back, {} aggregates taken offline and back, \
         {} disks lost, disks added {} times",
        args.seeds,
        args.seed,
        totals.writes,
        totals.crashes,
        totals.blocks_checked,
        totals.offlines,
        totals.disks_lost,
        totals.disks_added
    );
    ExitCode::SUCCESS
}

/// A panic's message.
fn message(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

/// Runs one seed; an engine assertion is a failure of that seed.
fn run_one(args: &CheckArgs, seed: u64) -> Result<CheckReport, CheckFailure> {
    let config = CheckConfig {
        seed,
        ops: args.ops,
        faults: !args.no_faults,
        payload: args.payload.into(),
        bound_requests: args.bound_requests,
        ..CheckConfig::default()
    };
    std::panic::catch_unwind(|| run_seed(&config)).unwrap_or_else(|panic| {
        Err(CheckFailure {
            seed,
            reason: format!("engine assertion failed: {}", message(&panic)),
        })
    })
}

fn print_seed(args: &CheckArgs, seed: u64, report: &CheckReport) {
    println!(
        "seed {seed}: ok: {} ops, {} reads checked ({} of snapshots), {}, \
         {} stripes verified, {} volumes, {} LUNs and {} snapshots at the end, \
         faults {:?}",
        report.ops,
        report.reads_checked,
        report.snapshot_reads_checked,
        args.payload.crashes(report.crashes, ""),
        report.stripes_verified,
        report.volumes,
        report.luns,
        report.snapshots,
        report.faults
    );
}

fn print_summary(args: &CheckArgs, totals: &Totals) {
    println!(
        "check passed: {} seeds from {}{}, {} ops, {} reads checked ({} of snapshots), \
         {}, {} snapshots left at the ends, {} indirect blocks read on cache misses, \
         {} final scrubs rewrote {} blocks, {} requests refused busy",
        args.seeds,
        args.seed,
        args.payload.label(),
        totals.ops,
        totals.reads,
        totals.snapshot_reads,
        args.payload.crashes(
            totals.crashes,
            &format!(
                " survived ({} after going offline on refused writes)",
                totals.offline_recoveries
            )
        ),
        totals.snapshots,
        totals.indirect_reads,
        totals.scrubs,
        totals.scrub_rewrites,
        totals.busy_refusals
    );
    if !totals.faults.is_empty() {
        let list: Vec<String> = totals
            .faults
            .iter()
            .map(|(kind, count)| format!("{kind} {count}"))
            .collect();
        println!("faults injected: {}", list.join(", "));
    }
}

/// Sums over the seeds of a run.
#[derive(Default)]
struct Totals {
    ops: u64,
    reads: u64,
    snapshot_reads: u64,
    snapshots: u64,
    crashes: u64,
    offline_recoveries: u64,
    indirect_reads: u64,
    scrubs: u64,
    scrub_rewrites: u64,
    busy_refusals: u64,
    faults: BTreeMap<&'static str, u64>,
}

impl Totals {
    fn add(&mut self, report: &CheckReport) {
        self.ops += report.ops;
        self.reads += report.reads_checked;
        self.snapshot_reads += report.snapshot_reads_checked;
        self.snapshots += report.snapshots as u64;
        self.indirect_reads += report.indirect_reads;
        self.crashes += report.crashes;
        self.offline_recoveries += report.offline_recoveries;
        self.scrubs += report.scrubs;
        self.scrub_rewrites += report.scrub_rewrites;
        self.busy_refusals += report.busy_refusals;
        for (kind, count) in &report.faults {
            *self.faults.entry(kind).or_default() += count;
        }
    }
}
