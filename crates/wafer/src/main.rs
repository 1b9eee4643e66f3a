//! `wafer`: the command-line front end of the wafer filer and performance lab.
//!
//! The binary parses arguments, calls the library crates' public APIs and
//! prints. Subcommands appear here only once they do something real: the RAID
//! layer's tools (`wafer raid layout`, `wafer raid check`), the simulation
//! harness (`wafer check`), the lab's scenario runner, drive models and
//! sizing (`wafer lab run`, `wafer lab disk`, `wafer lab size`), the filer
//! itself (`wafer serve`) and the administrator's commands against it
//! (`aggr`, `vol`, `lun`, `snap`, `df`, `disk`, `sysstat`), which take the
//! data directory as `--data DIR`.

mod admin;
mod check;
mod lab;
mod raid;
mod serve;
mod size;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::error::ErrorKind;
use clap::{CommandFactory, Parser, Subcommand};

/// wafer: a write-anywhere filer in the tradition of WAFL, and a lab that runs
/// the same engine on modelled disks.
#[derive(Debug, Parser)]
#[command(name = "wafer", version, propagate_version = true)]
struct Cli {
    /// The data directory of the filer to serve or administer (default
    /// `$WAFER_DATA`, else `wafer-data` if it exists, else the user's
    /// `~/.local/share/wafer` if it exists): for `serve` and the
    /// administrator's commands only.
    #[arg(long, global = true, value_name = "DIR")]
    data: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// RAID group tools: show a group's layout, verify the parity engine.
    #[command(subcommand)]
    Raid(raid::RaidCommand),
    /// Deterministic simulation: a seeded random workload with injected faults
    /// (crashes, dead disks, bit rot, lost, misdirected and torn writes) against
    /// the real engine, every read checked against a reference model.
    Check(check::CheckArgs),
    /// The performance lab: modelled drives in virtual time.
    #[command(subcommand)]
    Lab(lab::LabCommand),
    /// The filer on file-backed disks, its LUNs served over NBD, administered
    /// over DIR/admin.sock.
    Serve(serve::ServeArgs),
    /// The aggregate: its state, RAID groups, disks and spares.
    #[command(subcommand)]
    Aggr(admin::AggrCommand),
    /// Flexible volumes.
    #[command(subcommand)]
    Vol(admin::VolCommand),
    /// LUNs.
    #[command(subcommand)]
    Lun(admin::LunCommand),
    /// Snapshots.
    #[command(subcommand)]
    Snap(admin::SnapCommand),
    /// Space: volumes, or with -A the aggregate.
    #[command(disable_help_flag = true)]
    Df(admin::DfArgs),
    /// Disks.
    #[command(subcommand)]
    Disk(admin::DiskCommand),
    /// Throughput, cache and CP figures, every INTERVAL seconds.
    Sysstat(admin::SysstatArgs),
    /// The system's configuration: -r, the RAID configuration.
    Sysconfig(admin::SysconfigArgs),
    /// This wafer's release.
    Version(admin::VersionArgs),
    /// Per-disk statistics over a period: -b begins it, -e ends it and
    /// prints them.
    Statit(admin::StatitArgs),
    /// Counters of an object: `stats show ext_cache_obj`, the Flash Cache.
    #[command(subcommand)]
    Stats(admin::StatsCommand),
    /// Reallocation: how contiguously a LUN lies on disk, and laying it out
    /// again.
    #[command(subcommand)]
    Reallocate(admin::ReallocateCommand),
    /// FlexShare: a volume's cache policy.
    #[command(subcommand)]
    Priority(admin::PriorityCommand),
    /// Initiator groups: who sees the LUNs mapped to them.
    #[command(subcommand)]
    Igroup(admin::IgroupCommand),
    /// iSCSI: initiators' authentication (CHAP).
    #[command(subcommand)]
    Iscsi(admin::IscsiCommand),
    /// A completion script for SHELL, on stdout (e.g. `wafer completions
    /// bash > /etc/bash_completion.d/wafer`).
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Man pages: wafer(1) on stdout, or with --dir a page per command
    /// (wafer.1, wafer-aggr.1, wafer-aggr-status.1, ...) written into DIR.
    Man {
        /// The directory to write every page into.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
}

/// mimalloc rather than the system's malloc: the lab frees and allocates
/// small buffers for every host I/O beside gigabytes of long-lived block
/// records, and on a 100 GiB E1 test file that ran 1.2-1.4x faster in the
/// lab's run phase and 1.27x in its preparation, with the same reports.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's `purge_delay` option (`mi_option_purge_delay` in its v3
/// header; the Rust bindings name no constant for it).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// How long `wafer serve` lets freed memory lie before mimalloc returns it
/// (ms). A server under writes frees and reuses its blocks a CP at a time,
/// about once a second under 4 KiB random writes, which mimalloc's default
/// delay of one second just misses: 0.94 minor faults (a page zeroed) per
/// write, against none with the memory kept. Ten seconds keeps it across
/// CPs, and still returns what a burst of clients took once they are gone.
const SERVE_PURGE_DELAY_MS: std::ffi::c_long = 10_000;

/// Tells mimalloc to keep the memory the process frees for `delay_ms` (-1:
/// for good) instead of returning it to the system after a second idle, its
/// default. A lab run frees and reuses megabytes in bursts (each CP's plans,
/// each eviction's candidates); returned, they come back a page fault at a
/// time: on a 100 GiB E1 test file, 120,119 minor faults in a run against
/// 1,981 kept, and a run phase 1.12-1.19x faster, with the same peak memory
/// and the same reports. A `MIMALLOC_PURGE_DELAY` in the environment still
/// has the last word.
fn keep_freed_memory(delay_ms: std::ffi::c_long) {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
        return;
    }
    // SAFETY: mi_option_set stores one number in mimalloc's option table and
    // takes no pointers. The store is a plain one, so no other thread may
    // read the table meanwhile: this runs before the lab or the server
    // starts any thread.
    // mimalloc reads the option afresh whenever it considers purging.
    #[allow(unsafe_code)]
    unsafe {
        libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, delay_ms);
    }
}

/// The data directory when `--data` is not given.
const DEFAULT_DATA: &str = "wafer-data";

/// The environment variable naming the data directory when `--data` is not
/// given, so that admin commands find their server from any directory.
const DATA_ENV: &str = "WAFER_DATA";

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => usage_error(error),
    };
    let data_given = cli.data.is_some();
    let data = cli
        .data
        .or_else(|| std::env::var_os(DATA_ENV).map(PathBuf::from))
        .unwrap_or_else(default_data);
    let outcome = match cli.command {
        Command::Raid(_)
        | Command::Check(_)
        | Command::Lab(_)
        | Command::Completions { .. }
        | Command::Man { .. }
            if data_given =>
        {
            refuse_data_dir()
        }
        Command::Completions { shell } => {
            clap_complete::generate(shell, &mut Cli::command(), "wafer", &mut std::io::stdout());
            Ok(ExitCode::SUCCESS)
        }
        Command::Man { dir } => man(dir.as_deref()),
        Command::Raid(command) => raid::run(command),
        Command::Check(args) => check::run(&args),
        Command::Lab(command) => {
            keep_freed_memory(-1);
            lab::run(command)
        }
        Command::Serve(args) => {
            keep_freed_memory(SERVE_PURGE_DELAY_MS);
            serve::run(&data, &args)
        }
        Command::Aggr(command) => admin::run(&data, admin::AdminCommand::Aggr(command)),
        Command::Vol(command) => admin::run(&data, admin::AdminCommand::Vol(command)),
        Command::Lun(command) => admin::run(&data, admin::AdminCommand::Lun(command)),
        Command::Snap(command) => admin::run(&data, admin::AdminCommand::Snap(command)),
        Command::Df(args) => admin::run(&data, admin::AdminCommand::Df(args)),
        Command::Disk(command) => admin::run(&data, admin::AdminCommand::Disk(command)),
        Command::Sysstat(args) => admin::run(&data, admin::AdminCommand::Sysstat(args)),
        Command::Sysconfig(args) => admin::run(&data, admin::AdminCommand::Sysconfig(args)),
        Command::Version(args) => admin::version(&args),
        Command::Statit(args) => admin::run(&data, admin::AdminCommand::Statit(args)),
        Command::Stats(command) => admin::run(&data, admin::AdminCommand::Stats(command)),
        Command::Reallocate(command) => admin::run(&data, admin::AdminCommand::Reallocate(command)),
        Command::Priority(command) => admin::run(&data, admin::AdminCommand::Priority(command)),
        Command::Igroup(command) => admin::run(&data, admin::AdminCommand::Igroup(command)),
        Command::Iscsi(command) => admin::run(&data, admin::AdminCommand::Iscsi(command)),
    };
    match outcome {
        Ok(code) => code,
        Err(error) => {
            eprintln!("wafer: {error:#}");
            ExitCode::from(2)
        }
    }
}

/// The data directory when neither `--data` nor `$WAFER_DATA` names one:
/// `./wafer-data` if it exists, else the user's own, `wafer` in
/// `$XDG_DATA_HOME` (by default `~/.local/share`), if that exists, else
/// `./wafer-data`, where `serve` creates a new filer.
fn default_data() -> PathBuf {
    let here = PathBuf::from(DEFAULT_DATA);
    if here.exists() {
        return here;
    }
    let env = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    let user_data = env("XDG_DATA_HOME")
        .map(PathBuf::from)
        .or_else(|| env("HOME").map(|home| PathBuf::from(home).join(".local/share")));
    user_data
        .map(|dir| dir.join("wafer"))
        .filter(|dir| dir.exists())
        .unwrap_or(here)
}

/// `wafer man`: the top page on stdout, or every page into `dir`.
fn man(dir: Option<&std::path::Path>) -> anyhow::Result<ExitCode> {
    match dir {
        None => clap_mangen::Man::new(Cli::command()).render(&mut std::io::stdout())?,
        Some(dir) => {
            std::fs::create_dir_all(dir)?;
            clap_mangen::generate_to(Cli::command(), dir)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// A command line clap refuses: its message and usage as clap prints them,
/// or, when `--json` was asked for, `{"error":{"kind":"usage",…}}` on
/// stdout; exit status 2 either way. Help and version requests are no
/// errors and print as usual.
fn usage_error(error: clap::Error) -> ! {
    let json = std::env::args().skip(1).any(|arg| arg == "--json");
    let usage = !matches!(
        error.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    );
    if json && usage {
        let message = error.render().to_string();
        let reply =
            serde_json::json!({ "error": { "kind": "usage", "message": message.trim_end() } });
        println!("{reply:#}");
        std::process::exit(2);
    }
    error.exit()
}

/// `--data` given to a command that has no data directory: a usage error, as
/// clap reports its own, rather than a flag silently ignored.
fn refuse_data_dir() -> ! {
    Cli::command()
        .error(
            ErrorKind::ArgumentConflict,
            "--data names a filer's data directory: only `serve` and the administrator's \
             commands take it",
        )
        .exit()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_purge_delay_option_is_the_one_set() {
        let read = || {
            // SAFETY: mi_option_get reads one number from mimalloc's option
            // table; this test is the only one in the binary that touches it.
            #[allow(unsafe_code)]
            unsafe {
                libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY)
            }
        };
        assert_eq!(read(), 1000, "mimalloc's default purge delay, in ms");
        keep_freed_memory(SERVE_PURGE_DELAY_MS);
        assert_eq!(read(), 10_000, "the server's delay");
        keep_freed_memory(-1);
        assert_eq!(read(), -1, "never purge");
    }
}
