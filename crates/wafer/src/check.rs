//! `wafer check`: run seeds of the deterministic simulation.
//!
//! Each seed builds a small aggregate, runs a random workload against the real
//! engine with faults injected, and checks every read against a model; the exit
//! status is 0 only if every check of every seed held. A failure prints the seed
//! and the one command that replays it exactly.

use std::process::ExitCode;

use clap::Args;
use wafer_sim::check::{CheckConfig, run as run_seed};

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
    /// Print one line per passing seed, not just a summary.
    #[arg(short, long)]
    verbose: bool,
}

/// Runs the seeds; exit status 1 on the first failure.
pub fn run(args: &CheckArgs) -> anyhow::Result<ExitCode> {
    let mut totals = Totals::default();
    let mut faults: std::collections::BTreeMap<&'static str, u64> =
        std::collections::BTreeMap::new();
    for seed in args.seed..args.seed.saturating_add(args.seeds) {
        let config = CheckConfig {
            seed,
            ops: args.ops,
            faults: !args.no_faults,
            sabotage: None,
        };
        let outcome = std::panic::catch_unwind(|| run_seed(&config)).unwrap_or_else(|panic| {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            Err(wafer_sim::check::CheckFailure {
                seed,
                reason: format!("engine assertion failed: {message}"),
            })
        });
        match outcome {
            Ok(report) => {
                totals.ops += report.ops;
                totals.reads += report.reads_checked;
                totals.snapshot_reads += report.snapshot_reads_checked;
                totals.snapshots += report.snapshots as u64;
                totals.crashes += report.crashes;
                for (kind, count) in &report.faults {
                    *faults.entry(kind).or_default() += count;
                }
                if args.verbose {
                    println!(
                        "seed {seed}: ok: {} ops, {} reads checked ({} of snapshots), {} crashes, \
                         {} stripes verified, {} volumes, {} LUNs and {} snapshots at the end, \
                         faults {:?}",
                        report.ops,
                        report.reads_checked,
                        report.snapshot_reads_checked,
                        report.crashes,
                        report.stripes_verified,
                        report.volumes,
                        report.luns,
                        report.snapshots,
                        report.faults
                    );
                }
            }
            Err(failure) => {
                println!("check FAILED at {failure}");
                let faults = if args.no_faults { " --no-faults" } else { "" };
                println!(
                    "replay: wafer check --seed {seed} --ops {}{faults}",
                    args.ops
                );
                return Ok(ExitCode::FAILURE);
            }
        }
    }
    println!(
        "check passed: {} seeds from {}, {} ops, {} reads checked ({} of snapshots), \
         {} crashes survived, {} snapshots left at the ends",
        args.seeds,
        args.seed,
        totals.ops,
        totals.reads,
        totals.snapshot_reads,
        totals.crashes,
        totals.snapshots
    );
    if !faults.is_empty() {
        let list: Vec<String> = faults
            .iter()
            .map(|(kind, count)| format!("{kind} {count}"))
            .collect();
        println!("faults injected: {}", list.join(", "));
    }
    Ok(ExitCode::SUCCESS)
}

/// Sums over the seeds of a run.
#[derive(Default)]
struct Totals {
    ops: u64,
    reads: u64,
    snapshot_reads: u64,
    snapshots: u64,
    crashes: u64,
}
