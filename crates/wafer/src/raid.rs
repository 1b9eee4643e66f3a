//! `wafer raid`: look at a RAID group's layout and verify the parity engine.
//!
//! `layout` prints how a group of a given type and size places parity and data
//! and how its group block numbers map onto the disks. `check` is a self-test of
//! the RAID layer as built on this machine: for every group size it encodes
//! random stripes, fails every disk and every pair the RAID type promises to
//! survive, rebuilds them from only the blocks the rebuild plan reads and
//! compares bit for bit, confirms one failure more is refused, and corrupts each
//! block in turn to see scrub name it. `--negative-control` corrupts a surviving
//! block before every rebuild, and the check must then fail: it proves the
//! comparison can see wrong data.

use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::{Subcommand, ValueEnum};
use wafer_raid::{BLOCK_SIZE, Block, DiskRole, DiskSet, RaidGroupGeometry, RaidType};
use wafer_rng::Rng;

use crate::size::Size;

/// The RAID subcommands.
#[derive(Debug, Subcommand)]
pub enum RaidCommand {
    /// Show how a RAID group lays out parity, data and block numbers.
    Layout {
        /// RAID type of the group.
        #[arg(short = 't', long = "type", value_enum, default_value_t = RaidTypeArg::RaidDp)]
        raid_type: RaidTypeArg,
        /// Disks in the group, parity included (ONTAP's raidsize).
        #[arg(short = 'r', long, default_value_t = 16)]
        raidsize: u16,
        /// Usable size of each disk (suffixes k, m, g, t are binary).
        #[arg(long, default_value = "1g")]
        disk_size: Size,
    },
    /// Verify parity: every 1- and 2-disk failure rebuilt bit-exactly, one more
    /// refused, every corrupted block named by scrub, for every group size.
    Check {
        /// Check only this RAID type (default: both).
        #[arg(short = 't', long = "type", value_enum)]
        raid_type: Option<RaidTypeArg>,
        /// Check only this group size (default: every allowed size).
        #[arg(short = 'r', long)]
        raidsize: Option<u16>,
        /// Random stripes per group size.
        #[arg(long, default_value_t = 4)]
        stripes: usize,
        /// Seed for the stripes' contents; the same seed repeats the same check.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Corrupt a surviving block before every rebuild; the check must fail.
        #[arg(long)]
        negative_control: bool,
    },
}

/// RAID types, spelled as ONTAP spells them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum RaidTypeArg {
    /// One parity disk per group.
    #[value(name = "raid4")]
    Raid4,
    /// Row and diagonal parity disks per group.
    #[value(name = "raid_dp")]
    RaidDp,
}

impl From<RaidTypeArg> for RaidType {
    fn from(arg: RaidTypeArg) -> RaidType {
        match arg {
            RaidTypeArg::Raid4 => RaidType::Raid4,
            RaidTypeArg::RaidDp => RaidType::RaidDp,
        }
    }
}

/// Runs one `wafer raid` subcommand.
pub fn run(command: RaidCommand) -> anyhow::Result<ExitCode> {
    match command {
        RaidCommand::Layout {
            raid_type,
            raidsize,
            disk_size,
        } => layout(raid_type.into(), raidsize, disk_size),
        RaidCommand::Check {
            raid_type,
            raidsize,
            stripes,
            seed,
            negative_control,
        } => check(
            raid_type.map(RaidType::from),
            raidsize,
            stripes,
            seed,
            negative_control,
        ),
    }
}

fn layout(raid_type: RaidType, raidsize: u16, disk_size: Size) -> anyhow::Result<ExitCode> {
    let blocks_per_disk = disk_size.0 / BLOCK_SIZE as u64;
    let geometry =
        RaidGroupGeometry::new(raid_type, raidsize, blocks_per_disk).with_context(|| {
            format!("cannot lay out a {raid_type} group of {raidsize} disks of {disk_size}")
        })?;
    let disk_bytes = Size(blocks_per_disk * BLOCK_SIZE as u64);
    println!(
        "RAID group rg0 ({raid_type}): {} disks, {} data + {} parity, {} ({blocks_per_disk} blocks of 4 KiB) per disk",
        geometry.group_size(),
        geometry.data_disks(),
        geometry.parity_disks(),
        disk_bytes,
    );
    println!();
    println!("      RAID Disk Position Group blocks (gbn)");
    println!("      --------- -------- ------------------");
    for disk in geometry.all_disks().iter() {
        let role = geometry.role(disk);
        let blocks = match role {
            DiskRole::Data(n) => {
                let first = u64::from(n) * blocks_per_disk;
                format!("{first}..={}", first + blocks_per_disk - 1)
            }
            DiskRole::Parity | DiskRole::DParity => "-".to_string(),
        };
        println!("      {:<9} {:<8} {blocks}", role.ontap_name(), disk.0);
    }
    println!();
    println!(
        "Data capacity: {} ({} blocks); a stripe is {} data blocks ({}) at one disk block number.",
        Size(geometry.data_blocks() * BLOCK_SIZE as u64),
        geometry.data_blocks(),
        geometry.data_disks(),
        Size((geometry.data_disks() * BLOCK_SIZE) as u64),
    );
    match raid_type {
        RaidType::RaidDp => println!(
            "Parity: row parity plus row-diagonal parity over the prime 257: each block is 256 symbols\n\
             of 16 bytes; survives any two failed disks; a zeroed data disk joins without parity changes."
        ),
        RaidType::Raid4 => {
            println!("Parity: row parity (XOR of the data blocks); survives any one failed disk.")
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn check(
    only_type: Option<RaidType>,
    only_size: Option<u16>,
    stripes: usize,
    seed: u64,
    negative_control: bool,
) -> anyhow::Result<ExitCode> {
    if stripes == 0 {
        bail!("--stripes must be at least 1");
    }
    let geometries = geometries_to_check(only_type, only_size)?;
    let mut rng = Rng::seeded(seed);
    let mut mismatches = 0usize;
    println!(
        "{:<8} {:>5} {:>9} {:>9} {:>8}  result",
        "type", "disks", "rebuilt", "refused", "scrubbed"
    );
    for geometry in &geometries {
        let tally = check_geometry(geometry, stripes, &mut rng, negative_control);
        println!(
            "{:<8} {:>5} {:>9} {:>9} {:>8}  {}",
            geometry.raid_type().ontap_name(),
            geometry.group_size(),
            tally.rebuilt,
            tally.refused,
            tally.scrubbed,
            match tally.problems.first() {
                None => "ok".to_string(),
                Some(first) =>
                    format!("FAILED ({} problems; first: {first})", tally.problems.len()),
            }
        );
        mismatches += tally.problems.len();
    }
    if mismatches > 0 {
        let mut replay = format!("wafer raid check --seed {seed} --stripes {stripes}");
        if let Some(raid_type) = only_type {
            replay += &format!(" -t {raid_type}");
        }
        if let Some(size) = only_size {
            replay += &format!(" -r {size}");
        }
        if negative_control {
            replay += " --negative-control";
        }
        println!("raid check FAILED: {mismatches} problems; replay: {replay}");
        return Ok(ExitCode::FAILURE);
    }
    println!(
        "raid check passed: {} group geometries, seed {seed}",
        geometries.len()
    );
    Ok(ExitCode::SUCCESS)
}

fn geometries_to_check(
    only_type: Option<RaidType>,
    only_size: Option<u16>,
) -> anyhow::Result<Vec<RaidGroupGeometry>> {
    const BLOCKS_PER_DISK: u64 = 1 << 20;
    let types = match only_type {
        Some(raid_type) => vec![raid_type],
        None => vec![RaidType::Raid4, RaidType::RaidDp],
    };
    let mut geometries = Vec::new();
    for raid_type in types {
        let sizes: Vec<u16> = match only_size {
            Some(size) => vec![size],
            None => raid_type.group_size_limits().collect(),
        };
        for size in sizes {
            geometries.push(RaidGroupGeometry::new(raid_type, size, BLOCKS_PER_DISK)?);
        }
    }
    Ok(geometries)
}

#[derive(Default)]
struct Tally {
    rebuilt: usize,
    refused: usize,
    scrubbed: usize,
    problems: Vec<String>,
}

fn check_geometry(
    geometry: &RaidGroupGeometry,
    stripes: usize,
    rng: &mut Rng,
    negative_control: bool,
) -> Tally {
    let mut tally = Tally::default();
    for _ in 0..stripes {
        let stripe = random_stripe(geometry, rng);
        for failures in 1..=geometry.raid_type().tolerated_failures() {
            for failed in geometry.all_disks().subsets_of_size(failures) {
                check_rebuild(geometry, &stripe, failed, negative_control, &mut tally);
            }
        }
        check_scrub(geometry, &stripe, &mut tally);
    }
    let stripe = random_stripe(geometry, rng);
    let beyond = geometry.raid_type().tolerated_failures() + 1;
    for failed in geometry.all_disks().subsets_of_size(beyond) {
        let mut attempt = stripe.clone();
        match geometry.reconstruct_stripe(&mut attempt, failed) {
            Err(_) if attempt == stripe => tally.refused += 1,
            Err(_) => tally
                .problems
                .push(format!("refusing {failed:?} still wrote to the stripe")),
            Ok(()) => tally
                .problems
                .push(format!("losing {failed:?} was not refused")),
        }
    }
    tally
}

fn check_rebuild(
    geometry: &RaidGroupGeometry,
    stripe: &[Block],
    failed: DiskSet,
    negative_control: bool,
    tally: &mut Tally,
) {
    let reads = match geometry.reconstruction_reads(failed) {
        Ok(reads) => reads,
        Err(error) => return tally.problems.push(format!("losing {failed:?}: {error}")),
    };
    let mut degraded = stripe.to_vec();
    for unread in geometry.all_disks().difference(reads).iter() {
        degraded[unread.as_usize()] = [0xdb; BLOCK_SIZE];
    }
    if let Some(victim) = reads.iter().next().filter(|_| negative_control) {
        degraded[victim.as_usize()][0] ^= 0x01;
    }
    if let Err(error) = geometry.reconstruct_stripe(&mut degraded, failed) {
        return tally.problems.push(format!("losing {failed:?}: {error}"));
    }
    match failed
        .iter()
        .find(|disk| degraded[disk.as_usize()] != stripe[disk.as_usize()])
    {
        None => tally.rebuilt += 1,
        Some(wrong) => tally
            .problems
            .push(format!("losing {failed:?} rebuilt disk {} wrong", wrong.0)),
    }
}

fn check_scrub(geometry: &RaidGroupGeometry, stripe: &[Block], tally: &mut Tally) {
    if !geometry.scrub_stripe(stripe).is_consistent() {
        return tally
            .problems
            .push("an intact stripe failed scrub".to_string());
    }
    for disk in geometry.all_disks().iter() {
        let mut corrupt = stripe.to_vec();
        corrupt[disk.as_usize()][BLOCK_SIZE / 2] ^= 0x20;
        let report = geometry.scrub_stripe(&corrupt);
        let named = match geometry.role(disk) {
            DiskRole::Parity | DiskRole::DParity => {
                report.inconsistent_parity == DiskSet::of([disk])
            }
            DiskRole::Data(_) if geometry.raid_type() == RaidType::RaidDp => {
                report.suspect_data_disk == Some(disk)
            }
            DiskRole::Data(_) => report.inconsistent_parity == geometry.parity_set(),
        };
        match named {
            true => tally.scrubbed += 1,
            false => tally.problems.push(format!(
                "scrub missed a corrupt block on disk {}: {report:?}",
                disk.0
            )),
        }
    }
}

fn random_stripe(geometry: &RaidGroupGeometry, rng: &mut Rng) -> Vec<Block> {
    let mut stripe = vec![[0u8; BLOCK_SIZE]; geometry.group_size()];
    for block in &mut stripe[geometry.parity_disks()..] {
        rng.fill(block);
    }
    geometry.encode_stripe(&mut stripe);
    stripe
}
