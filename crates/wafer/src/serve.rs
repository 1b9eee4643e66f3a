//! `wafer serve`: the filer on file-backed disks, its LUNs served over NBD.
//!
//! On an absent or empty data directory it creates a working filer (one
//! RAID-DP group of data disks, two parity disks and a spare, all sparse
//! files; a volume `vol0` and a LUN `/vol/vol0/lun0`); on a data directory it
//! mounts the aggregate and replays the NVLog. It prints what it serves and
//! the NBD URI, then serves until SIGINT or SIGTERM, when it finishes the
//! requests in flight, writes a final CP and exits 0. `docs/SERVER.md` has
//! the details.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, ValueEnum};
use wafer_server::logging::LogFormat;
use wafer_server::{
    ConnectionLimits, CreateOptions, FlashCacheConfig, ISCSI_PORT, ListenAddress, NBD_PORT,
    ServeOptions, Server, StartupReport, TlsOptions,
};

use crate::size::Size;

/// The server's default limits on NBD clients, which the flags' defaults show.
const DEFAULTS: ConnectionLimits = ConnectionLimits::DEFAULT;

/// Options of `wafer serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Serve NBD over TCP on this address (repeatable); the default is
    /// 127.0.0.1:10809 unless --socket is given. Without --tls-require and
    /// --tls-ca TCP has no access control: an address other hosts can reach
    /// is served with a warning.
    #[arg(long, value_name = "ADDR")]
    listen: Vec<SocketAddr>,
    /// Serve NBD on this Unix socket (repeatable).
    #[arg(long, value_name = "PATH")]
    socket: Vec<PathBuf>,
    /// Serve the node's iSCSI target on this address (repeatable). Without
    /// any address flag the server takes both well-known loopback ports
    /// (NBD 10809, iSCSI 3260); once --listen or --socket names where to
    /// serve, iSCSI is served only where --iscsi says, so every port the
    /// server opens is one it was given.
    #[arg(long, value_name = "ADDR", conflicts_with = "no_iscsi")]
    iscsi: Vec<SocketAddr>,
    /// Serve no iSCSI.
    #[arg(long)]
    no_iscsi: bool,
    /// The mode of the --socket files, in octal: 0600 lets only this user
    /// connect; 0660 lets the socket's group in too.
    #[arg(long, value_name = "MODE", default_value = "0600", value_parser = parse_mode)]
    socket_mode: u32,
    /// Seconds an NBD client has for its whole handshake; while it
    /// negotiates, or once it has been idle that long, a new client that
    /// needs its place takes it.
    #[arg(long, value_name = "SECONDS", default_value_t = DEFAULTS.handshake_timeout.as_secs(),
          value_parser = clap::value_parser!(u64).range(1..))]
    handshake_timeout: u64,
    /// Seconds an NBD connection may send no request (with none in flight),
    /// or leave its replies unread, before it is closed; 0: never (for
    /// clients that sit idle for long and cannot reconnect).
    #[arg(long, value_name = "SECONDS", default_value_t = DEFAULTS.idle_timeout.map_or(0, |t| t.as_secs()))]
    idle_timeout: u64,
    /// NBD connections one IP address may hold at once (of 64); Unix-socket
    /// clients count towards the 64 only.
    #[arg(long, value_name = "N", default_value_t = DEFAULTS.per_address as u64,
          value_parser = clap::value_parser!(u64).range(1..=64))]
    connections_per_address: u64,
    /// The NVLog on this path instead of in the data directory: a file on a
    /// faster device (an SSD, an NVDIMM), like a ZFS SLOG. A new data
    /// directory creates it and records it in wafer.toml; an existing one
    /// must be given the path it recorded (the NVLog holds acknowledged
    /// writes, so a start without it is refused).
    #[arg(long, value_name = "PATH")]
    nvlog: Option<PathBuf>,
    /// Offer NBD over TLS (NBD_OPT_STARTTLS) with this certificate chain
    /// (PEM, the server's certificate first). Plain clients are still served
    /// unless --tls-require.
    #[arg(long, value_name = "PEM", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM); its file must be readable by its
    /// owner only.
    #[arg(long, value_name = "PEM", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Require every TLS client to present a certificate signed by one of
    /// these CA certificates (PEM); its subject CN names the client.
    #[arg(long, value_name = "PEM", requires = "tls_cert")]
    tls_ca: Option<PathBuf>,
    /// Refuse NBD clients that do not start TLS: every option before
    /// STARTTLS is answered NBD_REP_ERR_TLS_REQD.
    #[arg(long, requires = "tls_cert")]
    tls_require: bool,
    /// Serve Prometheus metrics over plain HTTP on this address (GET
    /// /metrics): the counters of sysstat and statit. Off unless given; it
    /// has no access control, so give it a loopback or trusted address.
    #[arg(long, value_name = "ADDR")]
    metrics: Option<SocketAddr>,
    /// How the log on standard error is written: text lines, or one JSON
    /// object a line. RUST_LOG filters it by level and module (default
    /// info).
    #[arg(long, value_enum, value_name = "FORMAT", default_value_t = LogFormatArg::Text)]
    log_format: LogFormatArg,
    /// The buffer cache: LUN data and indirect blocks kept in memory, shared
    /// by the node's aggregates (at least 1m; dirty blocks are pinned on
    /// top until their CP).
    #[arg(long, value_name = "SIZE", default_value = "64m")]
    cache_size: Size,
    /// A Flash Cache on this file or block device (ONTAP's flexscale.enable
    /// on): a read-only victim cache of the buffer cache, blocks it evicts
    /// written round and round (FIFO), read back and verified instead of
    /// the disk. It is not persistent: every start begins with it empty and
    /// overwrites what the device held. It must not be in the data
    /// directory nor be the NVLog. The flexscale options are set at start
    /// only.
    #[arg(long, value_name = "PATH")]
    flash_cache: Option<PathBuf>,
    /// The Flash Cache's size (at least 1m): a regular file is created or
    /// extended to it (sparse); a block device is used whole unless this is
    /// given. Required for a new file.
    #[arg(long, value_name = "SIZE", requires = "flash_cache")]
    flash_cache_size: Option<Size>,
    /// flexscale.normal_data_blocks: LUN data read from disk goes into the
    /// Flash Cache as the buffer cache evicts it.
    #[arg(long, value_name = "on|off", default_value = "on", value_parser = parse_on_off,
          action = clap::ArgAction::Set, requires = "flash_cache")]
    flexscale_normal_data_blocks: bool,
    /// flexscale.lopri_blocks: LUN data the host wrote goes in too (metadata
    /// always does).
    #[arg(long, value_name = "on|off", default_value = "off", value_parser = parse_on_off,
          action = clap::ArgAction::Set, requires = "flash_cache")]
    flexscale_lopri_blocks: bool,
    /// New data directory only: the size of each disk file (sparse).
    #[arg(long, value_name = "SIZE", default_value = "768m")]
    disk_size: Size,
    /// New data directory only: data disks in the RAID-DP group (two parity
    /// disks and one spare are added).
    #[arg(long, value_name = "N", default_value_t = 6)]
    data_disks: u16,
    /// New data directory only: the size of volume vol0.
    #[arg(long, value_name = "SIZE", default_value = "3g")]
    vol_size: Size,
    /// New data directory only: the size of LUN /vol/vol0/lun0.
    #[arg(long, value_name = "SIZE", default_value = "2g")]
    lun_size: Size,
}

/// Starts the server and serves until it is stopped.
///
/// `data` is the data directory (`--data`, default `./wafer-data`): created
/// with a working filer if absent or empty, mounted (replaying the NVLog) if
/// it holds one.
pub fn run(data: &Path, args: &ServeArgs) -> anyhow::Result<ExitCode> {
    wafer_server::logging::init(args.log_format.into())?;
    let options = ServeOptions {
        data_dir: data.to_path_buf(),
        listen: listen_addresses(args),
        iscsi: iscsi_addresses(args),
        create: CreateOptions {
            data_disks: args.data_disks,
            disk_bytes: args.disk_size.0,
            volume_bytes: args.vol_size.0,
            lun_bytes: args.lun_size.0,
        },
        socket_mode: args.socket_mode,
        limits: ConnectionLimits {
            handshake_timeout: Duration::from_secs(args.handshake_timeout),
            idle_timeout: (args.idle_timeout > 0).then(|| Duration::from_secs(args.idle_timeout)),
            per_address: usize::try_from(args.connections_per_address)
                .expect("clap keeps it within 1 to 64"),
        },
        nvlog: args.nvlog.clone(),
        tls: tls_options(args),
        metrics: args.metrics,
        cache_blocks: cache_blocks(args.cache_size)?,
        flash_cache: args.flash_cache.clone().map(|path| FlashCacheConfig {
            path,
            bytes: args.flash_cache_size.map(|size| size.0),
            normal_data_blocks: args.flexscale_normal_data_blocks,
            lopri_blocks: args.flexscale_lopri_blocks,
        }),
    };
    let server =
        Server::start(&options).with_context(|| format!("cannot serve {}", data.display()))?;
    print_report(data, server.report());
    server.run().context("the server stopped")?;
    Ok(ExitCode::SUCCESS)
}

/// `--log-format`'s values.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum LogFormatArg {
    /// Text lines: time, level, module, message.
    Text,
    /// One JSON object a line.
    Json,
}

impl From<LogFormatArg> for LogFormat {
    fn from(arg: LogFormatArg) -> LogFormat {
        match arg {
            LogFormatArg::Text => LogFormat::Text,
            LogFormatArg::Json => LogFormat::Json,
        }
    }
}

/// `--cache-size` in 4 KiB blocks: a whole number of them, at least 256
/// (1 MiB), so that a CP's indirect blocks and a request's always fit.
fn cache_blocks(size: Size) -> anyhow::Result<usize> {
    const BLOCK: u64 = 4096;
    anyhow::ensure!(
        size.0 >= 256 * BLOCK,
        "--cache-size {} is too small: at least 1m",
        size.0
    );
    Ok(usize::try_from(size.0 / BLOCK)?)
}

fn tls_options(args: &ServeArgs) -> Option<TlsOptions> {
    let (cert, key) = (args.tls_cert.clone()?, args.tls_key.clone()?);
    Some(TlsOptions {
        cert,
        key,
        ca: args.tls_ca.clone(),
        require: args.tls_require,
    })
}

/// An ONTAP option's `on` or `off`.
fn parse_on_off(text: &str) -> Result<bool, String> {
    match text {
        "on" => Ok(true),
        "off" => Ok(false),
        _ => Err(format!("{text:?} is neither on nor off")),
    }
}

/// An octal file mode such as `0660`.
fn parse_mode(text: &str) -> Result<u32, String> {
    u32::from_str_radix(text, 8)
        .ok()
        .filter(|mode| *mode <= 0o777)
        .ok_or_else(|| format!("{text:?} is not an octal mode from 0000 to 0777"))
}

fn listen_addresses(args: &ServeArgs) -> Vec<ListenAddress> {
    let mut addresses: Vec<ListenAddress> = args
        .listen
        .iter()
        .copied()
        .map(ListenAddress::Tcp)
        .collect();
    addresses.extend(args.socket.iter().cloned().map(ListenAddress::Unix));
    if addresses.is_empty() {
        addresses.push(ListenAddress::Tcp(SocketAddr::from((
            [127, 0, 0, 1],
            NBD_PORT,
        ))));
    }
    addresses
}

fn iscsi_addresses(args: &ServeArgs) -> Vec<SocketAddr> {
    let defaults = args.listen.is_empty() && args.socket.is_empty();
    match (args.no_iscsi, args.iscsi.is_empty(), defaults) {
        (true, _, _) | (false, true, false) => Vec::new(),
        (false, true, true) => vec![SocketAddr::from(([127, 0, 0, 1], ISCSI_PORT))],
        (false, false, _) => args.iscsi.clone(),
    }
}

fn print_report(dir: &std::path::Path, report: &StartupReport) {
    let verb = if report.created { "created" } else { "mounted" };
    for aggr in &report.aggregates {
        if aggr.state != "online" {
            let why = aggr
                .failed_reason
                .as_deref()
                .map_or_else(String::new, |r| format!(": {r}"));
            println!(
                "aggregate {} in {} is {}{why}",
                aggr.name,
                dir.display(),
                aggr.state.to_uppercase()
            );
            continue;
        }
        println!(
            "{verb} aggregate {} in {} (CP {}): {} usable",
            aggr.name,
            dir.display(),
            aggr.committed_cp,
            Size(aggr.aggregate_bytes)
        );
        for (group, g) in aggr.raid_groups.iter().enumerate() {
            println!(
                "  rg{group}: {} of {} disks ({} data, {} parity), {} each, sparse files",
                g.raid_type,
                g.disks,
                g.disks - g.parity_disks,
                g.parity_disks,
                Size(g.disk_bytes)
            );
            if !g.failed.is_empty() {
                println!(
                    "  rg{group} is DEGRADED: failed {} ({} survives {}); data is rebuilt from \
                     parity",
                    g.failed.join(", "),
                    g.raid_type,
                    g.tolerated
                );
            }
            if let Some((disk, done, total)) = &g.reconstructing {
                println!(
                    "  rg{group} is reconstructing {disk}: {done} of {total} stripes done; it \
                     goes on in the background"
                );
            }
        }
        println!("  spares: {}", aggr.spares);
    }
    for (volume, size) in &report.volumes {
        println!("  volume {volume}: {}", Size(*size));
    }
    for (lun, size) in &report.luns {
        println!("  LUN {lun}: {}", Size(*size));
    }
    if let Some(flash) = &report.flash_cache {
        println!("{flash}");
    }
    println!("admin socket: {}", report.admin_socket.display());
    if let Some(url) = &report.metrics_url {
        println!("serving metrics: {url}");
    }
    for uri in &report.iscsi_uris {
        println!("serving iSCSI: {uri}");
    }
    if let Some(tls) = &report.tls {
        println!("NBD over TLS: {tls}");
    }
    for uri in &report.uris {
        println!("serving NBD: {uri}");
    }
}
