//! `wafer check`: run seeds of the deterministic simulation.
//!
//! Each seed builds a node of 1 to 3 small aggregates, runs a random workload
//! against the real engine with faults injected on every aggregate's disks and
//! the aggregates administered, and checks every read against a model; the
//! exit status is 0 only if every check of every seed held. A failure prints
//! the seed and the one command that replays it exactly. The engine runs on
//! real bytes, or with `--payload stamps` on one stamp per block, as the
//! performance lab runs it; a stamp aggregate cannot mount, so it is never
//! crashed. `--single-filer` runs one filer alone, as the check did before
//! nodes, to replay the seeds found then.

use std::collections::BTreeMap;
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use wafer_sim::check::{
    CheckConfig, CheckFailure, CheckReport, FlashCounters, HyaCounters, PayloadKind,
    run as run_seed,
};

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
    /// Run one filer alone (its own NVLog, no aggregate administration)
    /// instead of a node of 1 to 3 aggregates: how the check ran before
    /// nodes, which replays the seeds found then (scripts/regression-seeds).
    #[arg(long)]
    single_filer: bool,
    /// Also administer volumes on a node: grow and shrink them, take them
    /// offline and back, destroy them, with crashes. Off, every seed runs as
    /// it did before volumes could be destroyed, so the regression seeds
    /// replay what they found.
    #[arg(long, conflicts_with = "single_filer")]
    volume_admin: bool,
    /// Also set `snap sched` schedules and take scheduled snapshots (their
    /// names rotating), with crashes; the end compares every volume's
    /// snapshot names and schedule with the model. Off, every seed runs as
    /// it did before schedules existed.
    #[arg(long)]
    snap_sched: bool,
    /// Also give each volume a thin LUN (`-o noreserve`) larger than the
    /// space left for it, and make new LUNs thin half the time: writes fill
    /// the volumes and some are refused for want of space, which only a
    /// thin LUN's may be. Off, every seed runs as it did before thin LUNs
    /// existed.
    #[arg(long)]
    thin: bool,
    /// Also give the node a Flash Cache (16 to 511 blocks) on a device with
    /// faults of its own, and hold every copy it serves against the block
    /// its home holds on disk. Off, every seed runs as it did before the
    /// Flash Cache existed.
    #[arg(long, conflicts_with = "single_filer")]
    flash_cache: bool,
    /// Also make every aggregate the node starts with hybrid (Flash Pool):
    /// an SSD RAID group small enough that the write cache fills and its
    /// eviction scanner destages, with faults like every other disk. Off,
    /// every seed runs as it did before hybrid aggregates existed.
    #[arg(long)]
    hybrid: bool,
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
                let single = if args.single_filer {
                    " --single-filer"
                } else {
                    ""
                };
                let volumes = if args.volume_admin {
                    " --volume-admin"
                } else {
                    ""
                };
                let sched = if args.snap_sched { " --snap-sched" } else { "" };
                let thin = if args.thin { " --thin" } else { "" };
                let flash = if args.flash_cache {
                    " --flash-cache"
                } else {
                    ""
                };
                let hybrid = if args.hybrid { " --hybrid" } else { "" };
                println!(
                    "replay: wafer check --seed {seed} --ops {}{faults}{bound}{single}{volumes}{sched}{thin}{flash}{hybrid}{}",
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
        single_filer: args.single_filer,
        volume_admin: args.volume_admin,
        snap_sched: args.snap_sched,
        thin: args.thin,
        flash_cache: args.flash_cache,
        hybrid: args.hybrid,
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
         {} stripes verified, {} aggregates, {} volumes, {} LUNs and {} snapshots \
         at the end, faults {:?}, administration {:?}",
        report.ops,
        report.reads_checked,
        report.snapshot_reads_checked,
        args.payload.crashes(report.crashes, ""),
        report.stripes_verified,
        report.aggregates,
        report.volumes,
        report.luns,
        report.snapshots,
        report.faults,
        report.administration
    );
}

fn print_summary(args: &CheckArgs, totals: &Totals) {
    let engine = match args.single_filer {
        true => " (one filer alone)".to_string(),
        false => format!(" ({} aggregates at the ends)", totals.aggregates),
    };
    println!(
        "check passed: {} seeds from {}{}{engine}, {} ops, {} reads checked ({} of snapshots), \
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
    if args.thin {
        println!(
            "thin LUNs: {} writes refused for want of space",
            totals.thin_refusals
        );
    }
    if args.flash_cache {
        println!(
            "Flash Cache: {} inserts, {} hits of {} lookups, {} disk reads replaced, \
             {} copies failed their check and were read from disk",
            totals.flash.inserts,
            totals.flash.hits,
            totals.flash.accesses,
            totals.flash.disk_reads_replaced,
            totals.flash.read_errors
        );
    }
    if args.hybrid {
        let hya = &totals.hya;
        println!(
            "Flash Pool: {} blocks write-cached on SSD ({} to HDD), {} read from SSD, \
             {} destaged by {} scanner passes, {} put on HDD for want of SSD room",
            hya.wc_write_blks_total,
            hya.hdd_write_blks_total,
            hya.read_blks_replaced,
            hya.evict_destage,
            hya.scanner_passes,
            hya.ssd_full_rejects
        );
    }
    if !totals.faults.is_empty() {
        let list: Vec<String> = totals
            .faults
            .iter()
            .map(|(kind, count)| format!("{kind} {count}"))
            .collect();
        println!("faults injected: {}", list.join(", "));
    }
    if !totals.administration.is_empty() {
        let list: Vec<String> = totals
            .administration
            .iter()
            .map(|(kind, count)| format!("{kind} {count}"))
            .collect();
        println!("aggregate administration: {}", list.join(", "));
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
    thin_refusals: u64,
    aggregates: u64,
    /// The last node's Flash Cache counters, summed over the seeds.
    flash: FlashCounters,
    /// Flash Pool's counters, summed over aggregates and seeds.
    hya: HyaCounters,
    faults: BTreeMap<&'static str, u64>,
    administration: BTreeMap<&'static str, u64>,
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
        self.thin_refusals += report.thin_refusals;
        if let Some(flash) = &report.flash {
            self.flash.inserts += flash.inserts;
            self.flash.hits += flash.hits;
            self.flash.accesses += flash.accesses;
            self.flash.disk_reads_replaced += flash.disk_reads_replaced;
            self.flash.read_errors += flash.read_errors;
        }
        if let Some(hya) = &report.hya {
            self.hya.add(hya);
        }
        self.aggregates += report.aggregates as u64;
        for (kind, count) in &report.faults {
            *self.faults.entry(kind).or_default() += count;
        }
        for (kind, count) in &report.administration {
            *self.administration.entry(kind).or_default() += count;
        }
    }
}
