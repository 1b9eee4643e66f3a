//! The administrator's commands against a running `wafer serve`, in ONTAP's
//! words and layouts (`wafl.md` §12): `aggr status`, `vol`, `lun`, `snap`,
//! `df`, `disk fail`, `disk replace`, `disk add`, `disk remove` and
//! `sysstat -x`.
//!
//! Each command sends requests over the data directory's admin socket
//! (`wafer_server::AdminClient`) and prints the answer as ONTAP would, or, with
//! `--json`, the server's structured answer as one JSON document. Errors the
//! server reports end the command with status 1; a server that cannot be
//! reached, status 2. The formatting lives in `ontap`, as pure functions of the
//! replies, so it is tested without a server.

mod ontap;

use std::path::Path;
use std::process::ExitCode;
use std::thread;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use wafer_server::admin::{
    AdminClient, AdminReply, AdminRequest, AdminResponse, SizeChange, SysstatReport,
};

use crate::size::{Size, size_change};

/// Output options every admin command takes.
#[derive(Debug, Args)]
pub struct Output {
    /// Print the server's structured answer as JSON instead of ONTAP's layout.
    #[arg(long)]
    json: bool,
}

/// `wafer aggr`.
#[derive(Debug, Subcommand)]
pub enum AggrCommand {
    /// The aggregate's state; -r lists RAID groups and disks, -v options,
    /// volumes and plexes.
    Status {
        /// RAID groups with every disk's role and state, spares.
        #[arg(short = 'r')]
        raid: bool,
        /// Options, volumes, plex and RAID group states.
        #[arg(short = 'v', conflicts_with = "raid")]
        verbose: bool,
        #[command(flatten)]
        output: Output,
    },
    /// Scrubbing: every stripe read, verified against its checksums and
    /// parity, and repaired, in the background.
    #[command(subcommand)]
    Scrub(ScrubCommand),
}

/// `wafer aggr scrub`.
#[derive(Debug, Subcommand)]
pub enum ScrubCommand {
    /// Starts a scrub of every RAID group.
    Start {
        #[command(flatten)]
        output: Output,
    },
    /// Stops the scrub running.
    Stop {
        #[command(flatten)]
        output: Output,
    },
    /// How the scrub running, or the last one, is doing, and what it found.
    Status {
        #[command(flatten)]
        output: Output,
    },
}

/// `wafer vol`.
#[derive(Debug, Subcommand)]
pub enum VolCommand {
    /// Every volume's state.
    Status {
        #[command(flatten)]
        output: Output,
    },
    /// Creates a flexible volume of SIZE (k, m, g, t suffixes).
    Create {
        /// The volume's name.
        name: String,
        /// Its size.
        size: Size,
        #[command(flatten)]
        output: Output,
    },
}

/// `wafer lun`.
#[derive(Debug, Subcommand)]
pub enum LunCommand {
    /// Creates a space-reserved LUN: `lun create -s SIZE /vol/VOLUME/LUN`.
    Create {
        /// Its size.
        #[arg(short = 's', value_name = "SIZE")]
        size: Size,
        /// `/vol/VOLUME/LUN`.
        path: String,
        #[command(flatten)]
        output: Output,
    },
    /// Every LUN; -m shows how each is exported.
    Show {
        /// The NBD export that serves each LUN.
        #[arg(short = 'm')]
        maps: bool,
        #[command(flatten)]
        output: Output,
    },
    /// Changes a LUN's size: `lun resize [-f] /vol/VOLUME/LUN [+|-]SIZE`.
    Resize {
        /// Shrink even though the data beyond the new size is lost.
        #[arg(short = 'f')]
        force: bool,
        /// `/vol/VOLUME/LUN`.
        path: String,
        /// The new size; +SIZE grows the LUN by SIZE, -SIZE shrinks it by SIZE.
        #[arg(value_parser = size_change, allow_hyphen_values = true)]
        size: SizeChange,
        #[command(flatten)]
        output: Output,
    },
    /// Destroys a LUN (snapshots keep what they hold of it); refused while an
    /// NBD client has it open, unless -f.
    Destroy {
        /// Destroy it even though NBD clients have it open.
        #[arg(short = 'f')]
        force: bool,
        /// `/vol/VOLUME/LUN`.
        path: String,
        #[command(flatten)]
        output: Output,
    },
}

/// `wafer snap`.
#[derive(Debug, Subcommand)]
pub enum SnapCommand {
    /// Takes a snapshot of a volume.
    Create {
        /// The volume.
        volume: String,
        /// The snapshot's name.
        name: String,
        #[command(flatten)]
        output: Output,
    },
    /// A volume's snapshots, newest first, with the space they hold.
    List {
        /// The volume.
        volume: String,
        #[command(flatten)]
        output: Output,
    },
    /// Deletes a snapshot; what only it held becomes free.
    Delete {
        /// The volume.
        volume: String,
        /// The snapshot.
        name: String,
        #[command(flatten)]
        output: Output,
    },
    /// Puts a volume (or, with -s, one LUN) back as the snapshot holds it.
    Restore {
        /// The volume.
        volume: String,
        /// The snapshot.
        name: String,
        /// Restore only this LUN (its name or `/vol/VOLUME/LUN`).
        #[arg(short = 's', value_name = "LUN")]
        lun: Option<String>,
        #[command(flatten)]
        output: Output,
    },
}

/// `wafer df`.
#[derive(Debug, Args)]
pub struct DfArgs {
    /// The aggregate instead of the volumes.
    #[arg(short = 'A')]
    aggregate: bool,
    /// Sizes in KiB, MiB, GiB (ONTAP's -h) instead of kbytes.
    #[arg(short = 'h')]
    human: bool,
    #[command(flatten)]
    output: Output,
    /// Print help (-h is ONTAP's human-readable sizes here).
    #[arg(long, action = clap::ArgAction::Help)]
    help: Option<bool>,
}

/// `wafer disk`.
#[derive(Debug, Subcommand)]
pub enum DiskCommand {
    /// Fails a disk for good: its blocks are rebuilt from parity, onto a
    /// spare if there is one.
    Fail {
        /// The disk's name or slot number.
        disk: String,
        #[command(flatten)]
        output: Output,
    },
    /// Adds a new blank disk file as a spare for a failed disk; it takes the
    /// failed disk's place and is rebuilt in the background.
    Replace {
        /// The failed disk's name or slot number.
        disk: String,
        #[command(flatten)]
        output: Output,
    },
    /// Adds a new blank disk file as a spare, as large as the aggregate's
    /// disks; a failed disk waiting for a spare is rebuilt onto it.
    Add {
        #[command(flatten)]
        output: Output,
    },
    /// Removes a broken disk (failed, and replaced by a spare): it leaves the
    /// configuration and its file is deleted.
    Remove {
        /// The broken disk's name.
        disk: String,
        #[command(flatten)]
        output: Output,
    },
}

/// `wafer sysstat`.
#[derive(Debug, Args)]
pub struct SysstatArgs {
    /// All columns (the only layout wafer has; accepted for ONTAP's habit).
    #[arg(short = 'x')]
    extended: bool,
    /// Stop after COUNT samples (default: run until interrupted).
    #[arg(short = 'c', value_name = "COUNT")]
    count: Option<u64>,
    /// Seconds between samples.
    #[arg(default_value_t = 15)]
    interval: u64,
    #[command(flatten)]
    output: Output,
}

/// An admin command, with the data directory of the server it talks to.
#[derive(Debug)]
pub enum AdminCommand {
    /// `aggr …`.
    Aggr(AggrCommand),
    /// `vol …`.
    Vol(VolCommand),
    /// `lun …`.
    Lun(LunCommand),
    /// `snap …`.
    Snap(SnapCommand),
    /// `df`.
    Df(DfArgs),
    /// `disk …`.
    Disk(DiskCommand),
    /// `sysstat`.
    Sysstat(SysstatArgs),
}

/// Runs an admin command against the server of data directory `data`.
pub fn run(data: &Path, command: AdminCommand) -> anyhow::Result<ExitCode> {
    let mut client = AdminClient::connect(data)
        .with_context(|| format!("no server to administer in {}", data.display()))?;
    let mut ask = |request: AdminRequest| -> anyhow::Result<Result<AdminReply, String>> {
        match client.request(&request)? {
            AdminResponse::Ok(reply) => Ok(Ok(reply)),
            AdminResponse::Error(error) => Ok(Err(error.message)),
        }
    };
    let (json, answer) = match command {
        AdminCommand::Aggr(AggrCommand::Status {
            raid,
            verbose,
            output,
        }) => {
            let aggregate = ask(AdminRequest::AggrStatus)?;
            let volumes = match verbose {
                true => Some(ask(AdminRequest::VolStatus)?),
                false => None,
            };
            let text = aggregate.clone().and_then(|a| match (raid, volumes) {
                (true, _) => Ok(ontap::aggr_status_r(&a)),
                (false, Some(volumes)) => Ok(ontap::aggr_status_v(&a, &volumes?)),
                (false, None) => Ok(ontap::aggr_status(&a)),
            });
            (output.json, aggregate.map(|a| (a, text)))
        }
        AdminCommand::Aggr(AggrCommand::Scrub(ScrubCommand::Start { output })) => {
            (output.json, done(ask(AdminRequest::AggrScrubStart)?))
        }
        AdminCommand::Aggr(AggrCommand::Scrub(ScrubCommand::Stop { output })) => {
            (output.json, done(ask(AdminRequest::AggrScrubStop)?))
        }
        AdminCommand::Aggr(AggrCommand::Scrub(ScrubCommand::Status { output })) => (
            output.json,
            formatted(ask(AdminRequest::AggrStatus)?, ontap::aggr_scrub_status),
        ),
        AdminCommand::Vol(VolCommand::Status { output }) => (
            output.json,
            formatted(ask(AdminRequest::VolStatus)?, ontap::vol_status),
        ),
        AdminCommand::Vol(VolCommand::Create { name, size, output }) => {
            let request = AdminRequest::VolCreate {
                name: name.clone(),
                size_bytes: size.0,
            };
            let reply = ask(request)?;
            let text = format!(
                "Creation of volume '{name}' with size {size} on containing aggregate has completed."
            );
            (output.json, reply.map(|r| (r, Ok(text))))
        }
        AdminCommand::Lun(command) => lun(&mut ask, command)?,
        AdminCommand::Snap(command) => snap(&mut ask, command)?,
        AdminCommand::Df(args) => {
            let request = match args.aggregate {
                true => AdminRequest::DfAggregate,
                false => AdminRequest::Df,
            };
            let human = args.human;
            let reply = ask(request)?;
            (args.output.json, formatted(reply, |r| ontap::df(r, human)))
        }
        AdminCommand::Disk(DiskCommand::Fail { disk, output }) => {
            (output.json, done(ask(AdminRequest::DiskFail { disk })?))
        }
        AdminCommand::Disk(DiskCommand::Replace { disk, output }) => {
            (output.json, done(ask(AdminRequest::DiskReplace { disk })?))
        }
        AdminCommand::Disk(DiskCommand::Add { output }) => {
            (output.json, done(ask(AdminRequest::DiskAdd)?))
        }
        AdminCommand::Disk(DiskCommand::Remove { disk, output }) => {
            (output.json, done(ask(AdminRequest::DiskRemove { disk })?))
        }
        AdminCommand::Sysstat(args) => return sysstat(&mut ask, &args),
    };
    print_answer(json, answer)
}

type Answer = Result<(AdminReply, Result<String, String>), String>;

/// A reply and its ONTAP rendering.
fn formatted(reply: Result<AdminReply, String>, render: impl Fn(&AdminReply) -> String) -> Answer {
    reply.map(|r| {
        let text = render(&r);
        (r, Ok(text))
    })
}

/// A change's reply: ONTAP says what was done in a sentence.
fn done(reply: Result<AdminReply, String>) -> Answer {
    formatted(reply, |r| match r {
        AdminReply::Done { message } => message.clone(),
        other => format!("{other:?}"),
    })
}

fn print_answer(json: bool, answer: Answer) -> anyhow::Result<ExitCode> {
    match answer {
        Ok((reply, text)) => {
            match json {
                true => println!("{}", serde_json::to_string_pretty(&reply)?),
                false => print!("{}", with_newline(text.map_err(anyhow::Error::msg)?)),
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(message) => {
            eprintln!("wafer: {message}");
            Ok(ExitCode::FAILURE)
        }
    }
}

fn with_newline(text: String) -> String {
    match text.is_empty() || text.ends_with('\n') {
        true => text,
        false => text + "\n",
    }
}

fn lun(
    ask: &mut impl FnMut(AdminRequest) -> anyhow::Result<Result<AdminReply, String>>,
    command: LunCommand,
) -> anyhow::Result<(bool, Answer)> {
    Ok(match command {
        LunCommand::Create { size, path, output } => (
            output.json,
            done(ask(AdminRequest::LunCreate {
                path,
                size_bytes: size.0,
            })?),
        ),
        LunCommand::Show { maps, output } => (
            output.json,
            formatted(ask(AdminRequest::LunShow)?, |r| match maps {
                true => ontap::lun_show_m(r),
                false => ontap::lun_show(r),
            }),
        ),
        LunCommand::Resize {
            force,
            path,
            size,
            output,
        } => (
            output.json,
            done(ask(AdminRequest::LunResize { path, size, force })?),
        ),
        LunCommand::Destroy {
            force,
            path,
            output,
        } => (
            output.json,
            done(ask(AdminRequest::LunDestroy { path, force })?),
        ),
    })
}

fn snap(
    ask: &mut impl FnMut(AdminRequest) -> anyhow::Result<Result<AdminReply, String>>,
    command: SnapCommand,
) -> anyhow::Result<(bool, Answer)> {
    Ok(match command {
        SnapCommand::Create {
            volume,
            name,
            output,
        } => (
            output.json,
            done(ask(AdminRequest::SnapCreate { volume, name })?),
        ),
        SnapCommand::List { volume, output } => {
            let list = ask(AdminRequest::SnapList { volume })?;
            let space = ask(AdminRequest::Df)?;
            let answer = list.map(|l| {
                let text = space.map(|s| ontap::snap_list(&l, &s));
                (l, text)
            });
            (output.json, answer)
        }
        SnapCommand::Delete {
            volume,
            name,
            output,
        } => (
            output.json,
            done(ask(AdminRequest::SnapDelete { volume, name })?),
        ),
        SnapCommand::Restore {
            volume,
            name,
            lun,
            output,
        } => (
            output.json,
            done(ask(AdminRequest::SnapRestore { volume, name, lun })?),
        ),
    })
}

/// `sysstat -x`: a line per interval of rates between two counter samples,
/// with the header again every 20 lines, as ONTAP prints it.
fn sysstat(
    ask: &mut impl FnMut(AdminRequest) -> anyhow::Result<Result<AdminReply, String>>,
    args: &SysstatArgs,
) -> anyhow::Result<ExitCode> {
    if args.interval == 0 {
        bail!("the interval is at least 1 second");
    }
    let mut sample = || -> anyhow::Result<Box<SysstatReport>> {
        match ask(AdminRequest::Sysstat)? {
            Ok(AdminReply::Sysstat(report)) => Ok(report),
            Ok(other) => bail!("unexpected sysstat reply {other:?}"),
            Err(message) => bail!("{message}"),
        }
    };
    let mut previous = sample()?;
    let mut lines = 0u64;
    while args.count.is_none_or(|count| lines < count) {
        thread::sleep(Duration::from_secs(args.interval));
        let current = sample()?;
        match args.output.json {
            true => println!("{}", serde_json::to_string(&current)?),
            false => {
                if lines % 20 == 0 {
                    print!("{}", ontap::SYSSTAT_HEADER);
                }
                println!("{}", ontap::sysstat_line(&previous, &current));
            }
        }
        previous = current;
        lines += 1;
    }
    Ok(ExitCode::SUCCESS)
}
