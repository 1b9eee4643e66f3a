//! `wafer lab size`: the sizing arithmetic storage engineers do on a napkin
//! (`docs/research/experiments.md` E5), with the drive model's own figure beside the rule of
//! thumb.
//!
//! Worst case for random I/O: every I/O costs each data disk one seek, so an
//! aggregate delivers data disks × per-disk IOPS, and that times the I/O size
//! is its throughput. The per-disk figure is the practitioners' rule of thumb
//! for the drive's spindle speed (15K ~220, 10K ~120, 7.2K SATA 50-60) and,
//! beside it, what the lab's model of the named drive does for random 4 KiB
//! reads at queue depth 1. The `statit` formula turns per-disk operation rates
//! and chain lengths into the throughput the disks moved: the sum over data
//! disks of (reads × chain + writes × chain + CP reads × chain) × 4.096 KB.
//! KB and MB are decimal (10^3 and 10^6 bytes), as in E5.

use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::Args;
use wafer_devices::params::{Catalog, Drive};
use wafer_devices::single_disk::random_reads;
use wafer_raid::RaidType;

/// Bytes a `statit` chain element moves: one 4 KiB block.
const BLOCK_BYTES: f64 = 4096.0;
/// Random reads the model runs for its per-disk figure.
const MODEL_IOS: u64 = 2000;

/// Options of `wafer lab size`.
#[derive(Debug, Args)]
pub struct SizeArgs {
    /// Data disks; with --raid-size, all disks (parity is then taken out).
    #[arg(long)]
    disks: u32,
    /// The drive, by its name in drives.toml.
    #[arg(long, default_value = "fc15k-144g")]
    drive: String,
    /// I/O sizes in bytes, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [4096u64, 65536, 131072])]
    io_size: Vec<u64>,
    /// RAID group size: --disks then counts every disk, in groups of this
    /// size (the last may be smaller), and each group's parity disks are not
    /// counted as data disks.
    #[arg(long)]
    raid_size: Option<u32>,
    /// RAID type of those groups: raid_dp or raid4.
    #[arg(long, default_value = "raid_dp", value_parser = parse_raid_type)]
    raid_type: RaidType,
    /// Per-disk `statit` figures, as reads/s@chain,writes/s@chain,cpreads/s@chain
    /// (e.g. 203@1.98,1.37@2.4,0.58@2.09): prints the throughput they add up to.
    #[arg(long, value_parser = parse_statit)]
    statit: Option<Statit>,
}

/// One disk's `statit` rates and chain lengths.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Statit {
    reads: (f64, f64),
    writes: (f64, f64),
    cp_reads: (f64, f64),
}

impl Statit {
    /// Bytes per second one disk moved.
    fn bytes_per_second(&self) -> f64 {
        let blocks = [self.reads, self.writes, self.cp_reads]
            .iter()
            .map(|(rate, chain)| rate * chain)
            .sum::<f64>();
        blocks * BLOCK_BYTES
    }
}

fn parse_statit(text: &str) -> Result<Statit, String> {
    let pairs: Vec<(f64, f64)> = text
        .split(',')
        .map(|pair| {
            let (rate, chain) = pair
                .split_once('@')
                .ok_or_else(|| format!("'{pair}' is not RATE@CHAIN"))?;
            let number = |s: &str| {
                s.trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|v| v.is_finite() && *v >= 0.0)
                    .ok_or_else(|| format!("'{s}' is not a non-negative number"))
            };
            Ok((number(rate)?, number(chain)?))
        })
        .collect::<Result<_, String>>()?;
    match pairs[..] {
        [reads, writes, cp_reads] => Ok(Statit {
            reads,
            writes,
            cp_reads,
        }),
        _ => Err("give three RATE@CHAIN pairs: reads, writes, CP reads".into()),
    }
}

/// A count rounded to a whole number, with thousands separators, as E5
/// writes them: 3,520.
fn grouped(value: f64) -> String {
    let digits = format!("{:.0}", value.max(0.0).round());
    let mut out = String::new();
    for (n, digit) in digits.chars().enumerate() {
        if n > 0 && (digits.len() - n) % 3 == 0 {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

fn raid_name(raid_type: RaidType) -> &'static str {
    match raid_type {
        RaidType::RaidDp => "raid_dp",
        RaidType::Raid4 => "raid4",
    }
}

fn parse_raid_type(text: &str) -> Result<RaidType, String> {
    match text {
        "raid_dp" => Ok(RaidType::RaidDp),
        "raid4" => Ok(RaidType::Raid4),
        other => Err(format!("unknown RAID type '{other}' (raid_dp or raid4)")),
    }
}

/// The practitioners' random IOPS per disk for a spindle speed (E5).
fn rule_of_thumb_iops(rpm: u32) -> Option<(u32, &'static str)> {
    match rpm {
        15_000 => Some((220, "15K rpm ~220")),
        10_000 => Some((120, "10K rpm ~120")),
        7_200 => Some((55, "7.2K SATA 50-60")),
        _ => None,
    }
}

/// Data disks among `disks` in groups of `size` of `raid_type`.
fn data_disks(disks: u32, size: u32, raid_type: RaidType) -> anyhow::Result<u32> {
    let parity = raid_type.tolerated_failures() as u32;
    if size <= parity {
        bail!(
            "a {} group needs more than {parity} disks",
            raid_name(raid_type)
        );
    }
    let (full, rest) = (disks / size, disks % size);
    if rest != 0 && rest <= parity {
        bail!(
            "{disks} disks leave a last group of {rest}, too small for {}",
            raid_name(raid_type)
        );
    }
    Ok(full * (size - parity) + rest.saturating_sub(parity))
}

/// Runs `wafer lab size`.
pub fn run(args: &SizeArgs) -> anyhow::Result<ExitCode> {
    if args.disks == 0 || args.io_size.contains(&0) {
        bail!("--disks and --io-size must be positive");
    }
    let catalog = Catalog::builtin().context("the built-in drives.toml")?;
    let drive = catalog.get(&args.drive).with_context(|| {
        let known: Vec<&str> = catalog.drives().map(Drive::name).collect();
        format!(
            "no drive `{}`; drives.toml has {}",
            args.drive,
            known.join(", ")
        )
    })?;
    let data = match args.raid_size {
        Some(size) => {
            let data = data_disks(args.disks, size, args.raid_type)?;
            println!(
                "{} disks in {} groups of {size}: {data} data disks",
                args.disks,
                raid_name(args.raid_type)
            );
            data
        }
        None => args.disks,
    };
    let model = random_reads(drive.device().as_mut(), 1, MODEL_IOS, 1).iops;
    let rule = match drive {
        Drive::Hdd(hdd) => rule_of_thumb_iops(hdd.rpm()),
        _ => None,
    };
    println!("{data} data disks of {}", drive.name());
    let mut figures = Vec::new();
    if let Some((iops, label)) = rule {
        figures.push((format!("rule of thumb ({label})"), f64::from(iops)));
    }
    figures.push((
        format!("model (random 4 KiB reads, QD 1, {MODEL_IOS} I/Os)"),
        model,
    ));
    for (label, per_disk) in figures {
        let iops = per_disk * f64::from(data);
        println!(
            "  {label}: {per_disk:.1} IOPS per disk, {} IOPS",
            grouped(iops)
        );
        for &size in &args.io_size {
            let kb_per_s = iops * size as f64 / 1e3;
            println!(
                "    {size:>7} B I/Os: {:>10} KB/s = {:>6.0} MB/s",
                grouped(kb_per_s),
                kb_per_s / 1e3
            );
        }
    }
    if let Some(statit) = args.statit {
        let kb_per_s = statit.bytes_per_second() * f64::from(data) / 1e3;
        println!(
            "statit: (reads x chain + writes x chain + cpreads x chain) x 4.096 KB x {data} disks \
             = {} KB/s ({:.2} MB/s)",
            grouped(kb_per_s),
            kb_per_s / 1e3
        );
    }
    Ok(ExitCode::SUCCESS)
}
