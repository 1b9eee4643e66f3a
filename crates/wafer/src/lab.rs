//! `wafer lab`: the performance lab's tools.
//!
//! `lab run` runs scenario files: every array of every scenario on a pool of
//! threads, each scenario's results printed per segment and written as
//! `report.json`, fio JSON, `statit`, `sysstat` and an SVG chart (see `run`).
//!
//! `lab size` is E5's sizing arithmetic (see `sizing`).
//!
//! `lab disk` is the calibration check of the device models. For each disk and
//! SSD of the built-in `drives.toml` (or the one named with `--drive`) it runs
//! closed-loop random 4 KiB reads, uniform over the whole drive, at each queue
//! depth in virtual time, and prints IOPS and mean and 99th-percentile latency
//! beside the figures the research gives for the drive's class
//! (`docs/research/device-models.md` §1.11): its own queue-depth simulation and, at depth 1,
//! the practitioners' rules of thumb. The drive queue uses its default policy
//! (SPTF for disks). The same seed prints the same table.

use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use wafer_devices::BLOCK_BYTES;
use wafer_devices::params::{Catalog, Drive};
use wafer_devices::reference::{self, ClassReference};
use wafer_devices::single_disk::{RandomReadReport, random_reads};

use crate::size::Size;

mod run;
mod sizing;
mod spill;

/// The lab subcommands.
#[derive(Debug, Subcommand)]
pub enum LabCommand {
    /// Scenario files (scenarios/*.toml) in virtual time: IOPS, MB/s and
    /// latency per segment, and report.json, fio JSON, statit, sysstat and an
    /// SVG chart per scenario.
    ///
    /// Every array of every scenario runs as its own job on a pool of
    /// threads; the reports are the same bytes whatever --jobs is.
    Run(run::RunArgs),
    /// Random 4 KiB reads against modelled drives at several queue depths,
    /// beside the published figures for each drive's class.
    Disk(DiskArgs),
    /// Sizing arithmetic: data disks x per-disk IOPS x I/O size, by rule of
    /// thumb and by the drive model, and the statit throughput formula.
    Size(sizing::SizeArgs),
}

/// Options of `wafer lab disk`.
#[derive(Debug, Args)]
pub struct DiskArgs {
    /// The drive to measure, by its name in drives.toml (default: every disk
    /// and SSD).
    #[arg(long)]
    drive: Option<String>,
    /// Queue depths to measure, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [1, 8, 32])]
    depths: Vec<u32>,
    /// Reads to complete at each queue depth.
    #[arg(long, default_value_t = 4000)]
    ios: u64,
    /// Seed for the read addresses.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

/// Runs one `wafer lab` subcommand.
pub fn run(command: LabCommand) -> anyhow::Result<ExitCode> {
    match command {
        LabCommand::Run(args) => run::run(&args),
        LabCommand::Disk(args) => disk(&args),
        LabCommand::Size(args) => sizing::run(&args),
    }
}

fn disk(args: &DiskArgs) -> anyhow::Result<ExitCode> {
    if args.ios == 0 {
        bail!("--ios must be at least 1");
    }
    if args.depths.is_empty() || args.depths.contains(&0) {
        bail!("--depths needs queue depths of at least 1");
    }
    let catalog = Catalog::builtin().context("the built-in drives.toml")?;
    let drives: Vec<&Drive> = match &args.drive {
        Some(name) => {
            let known: Vec<&str> = catalog.drives().map(Drive::name).collect();
            let drive = catalog.get(name);
            vec![drive.with_context(|| {
                format!("no drive `{name}`; drives.toml has {}", known.join(", "))
            })?]
        }
        None => catalog
            .drives()
            .filter(|d| !matches!(d, Drive::Nvram(_)))
            .collect(),
    };
    for (index, drive) in drives.into_iter().enumerate() {
        if index > 0 {
            println!();
        }
        print_drive(drive, args);
    }
    Ok(ExitCode::SUCCESS)
}

/// The header and table for one drive.
fn print_drive(drive: &Drive, args: &DiskArgs) {
    let bytes = drive.device().capacity_blocks() * BLOCK_BYTES;
    println!(
        "{}  {:.1} GB ({})",
        drive.name(),
        bytes as f64 / 1e9,
        Size(bytes)
    );
    let class = match drive {
        Drive::Hdd(model) => {
            println!("  {model}");
            println!(
                "  drive queue: SPTF over up to {} commands",
                model.queue_depth_max()
            );
            reference::for_rpm(model.rpm())
        }
        Drive::Ssd(model) => {
            println!("  {model}");
            None
        }
        Drive::Nvram(model) => {
            println!("  {model}");
            None
        }
    };
    println!(
        "  random 4 KiB reads over the whole drive, closed loop, {} per depth, seed {}",
        args.ios, args.seed
    );
    println!(
        "  {:>4} {:>10} {:>8} {:>8}   {:>14}   {:>14}",
        "QD", "IOPS", "avg ms", "p99 ms", "§1.11 sim IOPS", "rule of thumb"
    );
    for &depth in &args.depths {
        let report = random_reads(drive.device().as_mut(), depth, args.ios, args.seed);
        println!("  {}", row(&report, class));
    }
    match class {
        Some(class) => println!(
            "  (docs/research/device-models.md §1.11, {}: an SATF simulation by queue depth, an upper envelope; \
             rules of thumb at depth 1)",
            class.class
        ),
        None => println!("  (docs/research/device-models.md §1.11 gives figures for disks only)"),
    }
}

/// One table row: the measurement and, where the research has them, its
/// figures for the same depth.
fn row(report: &RandomReadReport, class: Option<&ClassReference>) -> String {
    let simulated = class
        .and_then(|c| c.simulated_iops_at(report.queue_depth))
        .map_or("-".to_string(), |iops| iops.to_string());
    let rule = match class {
        Some(class) if report.queue_depth == 1 => {
            format!(
                "{}-{}",
                class.rule_of_thumb_iops.0, class.rule_of_thumb_iops.1
            )
        }
        _ => "-".to_string(),
    };
    format!(
        "{:>4} {:>10.1} {:>8.3} {:>8.3}   {:>14}   {:>14}",
        report.queue_depth,
        report.iops,
        report.mean_latency.0 as f64 / 1e6,
        report.p99_latency.0 as f64 / 1e6,
        simulated,
        rule
    )
}
