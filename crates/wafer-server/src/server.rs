//! Starting and stopping: from a data directory to a serving filer.
//!
//! [`Server::start`] first does what changes nothing: it inspects the
//! directory, reads and checks its configuration and takes its lock (if it
//! holds one), and binds the NBD listeners, so that a corrupt configuration,
//! a second server or a port in use is refused with the directory untouched.
//! An absent or empty directory is then created: disk files, the NVLog file, a
//! freshly formatted aggregate, `vol0` and `/vol/vol0/lun0`, and last the
//! configuration, which is what makes the directory a data directory (if
//! creation fails, what it made is removed). Otherwise the disks are opened
//! (a disk file that is missing, unreadable or of the wrong size fails that
//! disk, for good, if its RAID group survives it; if not, nothing is changed
//! and the server refuses) and the aggregate mounted, replaying the NVLog.
//! Then the admin socket binds and every thread starts. A Flash Cache
//! (`--flash-cache`) is checked and opened before creation or mount, and a
//! file made for it is removed if the start fails.
//!
//! [`Server::run`] waits for the engine thread. SIGINT or SIGTERM starts a
//! graceful stop (the engine's final CP); a second one exits at once, which
//! is safe: every acknowledged write is in the NVLog. Any panic in any thread
//! aborts the process, for the same reason and because a server with a dead
//! thread would hang instead.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read};
use std::net::SocketAddr;
use std::os::unix::fs::{DirBuilderExt, FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::{self, Sender};
use std::thread;
use std::time::Duration;

use std::collections::BTreeMap;

use wafer_core::filer::{Change, HostRequest, Options};
use wafer_core::node::Node;
use wafer_core::units::{AggrId, DiskId};

use crate::access::DATA_FILE_MODE;
use crate::admission::{Admission, ConnectionLimits};
use crate::catalogue::SharedCatalogue;
use crate::clock::Clock;
use crate::config::{CONFIG_FILE, CreateOptions, DataConfig, DiskConfig, DiskState};
use crate::disk::DiskHandle;
use crate::engine::{Devices, Engine, Plumbing, Shared};
use crate::error::ServeError;
use crate::events::Event;
use crate::nbd::{Context, NbdCounters};
use crate::stop::StopSignal;
use crate::stream::{ListenAddress, Listener, nbd_uri};
use crate::tls::{TlsOptions, TlsSettings};

/// The lock file's name in the data directory.
pub const LOCK_FILE: &str = "wafer.lock";
/// How long a graceful stop waits for connections to send their last replies.
const CONNECTION_DRAIN_LIMIT: Duration = Duration::from_secs(5);

/// What `wafer serve` was asked to do.
#[derive(Clone, Debug)]
pub struct ServeOptions {
    /// The data directory.
    pub data_dir: PathBuf,
    /// Where to serve NBD.
    pub listen: Vec<ListenAddress>,
    /// Where to serve iSCSI (none: not at all).
    pub iscsi: Vec<SocketAddr>,
    /// The shape of a new data directory (used only if it is absent or empty).
    pub create: CreateOptions,
    /// The mode of the NBD Unix sockets (`--socket-mode`).
    pub socket_mode: u32,
    /// Timeouts and caps on NBD clients.
    pub limits: ConnectionLimits,
    /// The NVLog on another path (`--nvlog`), such as a file on a faster
    /// device: a new directory records it; an existing one must name the
    /// path it recorded.
    pub nvlog: Option<PathBuf>,
    /// NBD over TLS: the credentials, and whether TLS is required.
    pub tls: Option<TlsOptions>,
    /// Where to answer Prometheus scrapes (`--metrics`); none: nowhere.
    pub metrics: Option<SocketAddr>,
    /// The buffer cache's budget in 4 KiB blocks, shared by the node's
    /// aggregates (`--cache-size`).
    pub cache_blocks: usize,
    /// The node's Flash Cache (`--flash-cache`), if it has one: a victim
    /// cache of the buffer cache on a file or block device, empty at every
    /// start.
    pub flash_cache: Option<crate::flash::FlashCacheConfig>,
}

/// What a started server reports.
#[derive(Clone, Debug)]
pub struct StartupReport {
    /// Whether the data directory was created now (else mounted).
    pub created: bool,
    /// Every aggregate, in id order.
    pub aggregates: Vec<AggregateSummary>,
    /// Volumes: name and size.
    pub volumes: Vec<(String, u64)>,
    /// LUNs: path and size.
    pub luns: Vec<(String, u64)>,
    /// The NBD URI of the default export (the first LUN), one per listener.
    pub uris: Vec<String>,
    /// The iSCSI URI of the target (and of its LUN 0 if it lives), one per
    /// `--iscsi` listener.
    pub iscsi_uris: Vec<String>,
    /// The admin socket.
    pub admin_socket: PathBuf,
    /// How NBD is offered over TLS, if it is.
    pub tls: Option<String>,
    /// The URL Prometheus scrapes (`--metrics`), if any.
    pub metrics_url: Option<String>,
    /// The Flash Cache, described in a line, if the node has one.
    pub flash_cache: Option<String>,
}

/// One aggregate in a [`StartupReport`].
#[derive(Clone, Debug)]
pub struct AggregateSummary {
    /// Its name.
    pub name: String,
    /// `online`, `offline`, or `failed`.
    pub state: String,
    /// Why it failed, if it did.
    pub failed_reason: Option<String>,
    /// The newest committed CP after mount or format (0 if not mounted).
    pub committed_cp: u64,
    /// Its RAID groups.
    pub raid_groups: Vec<RaidGroupSummary>,
    /// Spare disks.
    pub spares: usize,
    /// Usable bytes of the aggregate (`df -A` total; 0 if not mounted).
    pub aggregate_bytes: u64,
}

/// One RAID group in a [`StartupReport`].
#[derive(Clone, Debug)]
pub struct RaidGroupSummary {
    /// `raid_dp` or `raid4`.
    pub raid_type: &'static str,
    /// Member disks (parity included).
    pub disks: usize,
    /// Parity disks among them.
    pub parity_disks: usize,
    /// Bytes of each disk the group uses.
    pub disk_bytes: u64,
    /// Failed members, by name: the group is degraded if any.
    pub failed: Vec<String>,
    /// Failures the group survives.
    pub tolerated: usize,
    /// A reconstruction in progress in the group: the disk it rebuilds
    /// (the spare, once it has taken the failed disk's slot), and stripes
    /// done of all.
    pub reconstructing: Option<(String, u64, u64)>,
}

/// A started server: every thread runs; [`Server::run`] waits for the end.
pub struct Server {
    report: StartupReport,
    engine: thread::JoinHandle<Result<(), ServeError>>,
    stop: Arc<StopSignal>,
    _lock: DataLock,
}

impl Server {
    /// Creates or mounts the data directory and starts serving.
    /// It adds `077` to the process's umask first: everything it creates is
    /// owner-only (`crate::access`).
    pub fn start(options: &ServeOptions) -> Result<Server, ServeError> {
        abort_on_panic();
        crate::access::restrict_umask();
        let dir = options.data_dir.clone();
        let tls = options
            .tls
            .as_ref()
            .map(TlsSettings::load)
            .transpose()
            .map_err(|error| {
                ServeError::io("the TLS credentials")(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    error,
                ))
            })?;
        let (events, received) = mpsc::channel();
        handle_signals(events.clone())?;
        let shared = Shared {
            catalogue: Arc::new(SharedCatalogue::default()),
            counters: Arc::new(NbdCounters::default()),
            iscsi: Arc::default(),
            nvlog: Arc::default(),
            stop: Arc::new(StopSignal::default()),
        };
        let context = Arc::new(Context {
            engine: events.clone(),
            catalogue: Arc::clone(&shared.catalogue),
            counters: Arc::clone(&shared.counters),
            iscsi_counters: Arc::clone(&shared.iscsi),
            stop: Arc::clone(&shared.stop),
            limits: options.limits,
            admission: Arc::new(Admission::new(&options.limits)),
            loans: Arc::default(),
            tls,
        });
        let stop = Arc::clone(&shared.stop);
        let mut parts = EngineParts {
            events,
            received,
            shared,
            cache_blocks: options.cache_blocks,
            flash: None,
        };
        // The checks that change nothing come first (the configuration, the
        // lock, the listeners' addresses), then creation or mount.
        let existing = match is_new(&dir)? {
            true => None,
            false => {
                let (config, migrated) = DataConfig::load_migrating(&dir)?;
                check_nvlog_placement(&dir, &config, options.nvlog.as_deref())?;
                Some(((config, migrated), DataLock::acquire(&dir)?))
            }
        };
        let new_nvlog = match (&existing, &options.nvlog) {
            (None, Some(path)) => Some(resolve_new_nvlog(path)?),
            _ => None,
        };
        let flash = open_flash(
            options,
            existing.as_ref().map(|e| &e.0.0),
            new_nvlog.as_deref(),
        )?;
        let made_flash = MadeFlash(flash.as_ref().and_then(|f| f.made_path()));
        parts.flash = flash;
        let guarded = options
            .tls
            .as_ref()
            .is_some_and(|tls| tls.require && tls.ca.is_some());
        let listeners = bind_listeners(&options.listen, options.socket_mode, guarded)?;
        let iscsi = crate::iscsi::bind(&options.iscsi)?;
        let metrics = options.metrics.map(crate::metrics::bind).transpose()?;
        secure(&dir, existing.as_ref().map(|((config, _), _)| config))?;
        let (engine, lock, created) = match existing {
            None => {
                let (engine, lock) = create(&dir, &options.create, new_nvlog, parts)?;
                (engine, lock, true)
            }
            Some(((config, migrated), lock)) => {
                (mount(&dir, config, migrated, parts)?, lock, false)
            }
        };
        let (admin, admin_path) = crate::admin_socket::bind(&dir)?;
        let mut report = report(&engine, created, &listeners, &admin_path)?;
        for listener in listeners {
            crate::nbd::spawn_listener(listener, Arc::clone(&context))
                .map_err(ServeError::io("starting an NBD listener"))?;
        }
        report.tls = options.tls.as_ref().map(TlsOptions::summary);
        report.iscsi_uris = crate::iscsi::spawn(iscsi, &context)
            .map_err(ServeError::io("starting an iSCSI listener"))?;
        crate::admin_socket::spawn(admin, admin_path, context.engine.clone(), &stop)
            .map_err(ServeError::io("starting the admin listener"))?;
        report.metrics_url = metrics
            .map(|listener| crate::metrics::spawn(listener, context.engine.clone(), &stop))
            .transpose()
            .map_err(ServeError::io("starting the metrics listener"))?;
        let engine = thread::Builder::new()
            .name("engine".into())
            .spawn(move || engine.run())
            .map_err(ServeError::io("starting the engine thread"))?;
        crate::notify::ready();
        made_flash.keep();
        Ok(Server {
            report,
            engine,
            stop,
            _lock: lock,
        })
    }

    /// What was created or mounted, and where it is served.
    pub fn report(&self) -> &StartupReport {
        &self.report
    }

    /// Serves until SIGINT or SIGTERM has stopped the server gracefully (or
    /// the NVLog failed).
    pub fn run(self) -> Result<(), ServeError> {
        let outcome = self
            .engine
            .join()
            .expect("a panicking thread aborts the server");
        self.stop.begin();
        self.stop.wait_for_connections(CONNECTION_DRAIN_LIMIT);
        outcome
    }
}

/// The engine's channel and shared state, before there is an engine.
struct EngineParts {
    events: Sender<Event>,
    received: mpsc::Receiver<Event>,
    shared: Shared,
    /// The buffer cache's budget, in blocks.
    cache_blocks: usize,
    /// The Flash Cache device, opened (its thread starts with the disks').
    flash: Option<crate::flash::FlashDevice>,
}

/// A Flash Cache file this start created, removed unless the start succeeds.
struct MadeFlash(Option<PathBuf>);

impl MadeFlash {
    fn keep(mut self) {
        self.0 = None;
    }
}

impl Drop for MadeFlash {
    fn drop(&mut self) {
        if let Some(path) = self.0.take() {
            let _ = fs::remove_file(path);
        }
    }
}

/// Checks and opens `--flash-cache`, against the data directory and the
/// NVLog it has (`config`) or is to have (`new_nvlog`).
fn open_flash(
    options: &ServeOptions,
    config: Option<&DataConfig>,
    new_nvlog: Option<&str>,
) -> Result<Option<crate::flash::FlashDevice>, ServeError> {
    let Some(flash) = &options.flash_cache else {
        return Ok(None);
    };
    let dir = &options.data_dir;
    let nvlog = match config {
        Some(config) => dir.join(&config.nvlog_file),
        None => new_nvlog.map_or_else(|| dir.join("nvlog"), PathBuf::from),
    };
    crate::flash::open(flash, dir, Some(&nvlog)).map(Some)
}

impl EngineParts {
    fn plumbing(self, devices: Devices, dir: &Path) -> Plumbing {
        Plumbing {
            events: self.received,
            to_self: self.events,
            devices,
            dir: dir.to_path_buf(),
            shared: self.shared,
        }
    }
}

/// Whether `dir` is absent or empty (to be created); a directory with
/// anything in it must hold a configuration.
fn is_new(dir: &Path) -> Result<bool, ServeError> {
    let mut entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(true),
        Err(error) => return Err(ServeError::io(format!("reading {}", dir.display()))(error)),
    };
    if dir.join(CONFIG_FILE).exists() {
        return Ok(false);
    }
    match entries.next() {
        None => Ok(true),
        Some(_) => Err(ServeError::NotADataDirectory {
            dir: dir.to_path_buf(),
        }),
    }
}

/// Where `--nvlog` puts a new NVLog: the path to record, its directory
/// resolved (it must exist), so that a restart's `--nvlog` can be compared
/// with it.
fn resolve_nvlog(given: &Path) -> Result<String, ServeError> {
    let refuse = |reason: String| {
        ServeError::NvlogPlacement(format!("--nvlog {}: {reason}", given.display()))
    };
    let name = given
        .file_name()
        .ok_or_else(|| refuse("names no file".into()))?;
    let parent = match given.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let parent = fs::canonicalize(parent).map_err(|e| {
        refuse(format!(
            "its directory {} is not usable: {e}",
            parent.display()
        ))
    })?;
    let path = parent.join(name);
    path.to_str()
        .map(str::to_string)
        .ok_or_else(|| refuse("the path is not UTF-8, which wafer.toml cannot record".into()))
}

/// [`resolve_nvlog`] for a new data directory, whose NVLog must not exist
/// yet: a file there may be another data directory's.
fn resolve_new_nvlog(given: &Path) -> Result<String, ServeError> {
    let path = resolve_nvlog(given)?;
    match fs::symlink_metadata(&path) {
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(path),
        _ => Err(ServeError::NvlogPlacement(format!(
            "--nvlog {}: {path} exists (another data directory's NVLog?); a new data \
             directory's NVLog is a new file: remove it or name another path",
            given.display()
        ))),
    }
}

/// Checks `--nvlog` against where the configuration keeps the NVLog. The
/// NVLog holds acknowledged writes: a start that would not find it (or find
/// another) is refused rather than served with an empty log.
fn check_nvlog_placement(
    dir: &Path,
    config: &DataConfig,
    given: Option<&Path>,
) -> Result<(), ServeError> {
    let refuse = |reason: String| {
        ServeError::NvlogPlacement(format!("the NVLog of {} {reason}", dir.display()))
    };
    match (config.external_nvlog(), given) {
        (None, None) => Ok(()),
        (None, Some(given)) => Err(refuse(format!(
            "is {} in the data directory, and an NVLog is not moved: start without --nvlog {}",
            config.nvlog_file,
            given.display()
        ))),
        (Some(recorded), None) => Err(refuse(format!(
            "is {} ({CONFIG_FILE}) and holds acknowledged writes: start with --nvlog {0}",
            recorded.display()
        ))),
        (Some(recorded), Some(given)) => {
            let resolved = resolve_nvlog(given).ok();
            let same_file = fs::canonicalize(given)
                .ok()
                .is_some_and(|g| fs::canonicalize(recorded).is_ok_and(|r| r == g));
            match resolved.as_deref().map(Path::new) == Some(recorded) || same_file {
                true => Ok(()),
                false => Err(refuse(format!(
                    "is {} ({CONFIG_FILE}), not {}, and holds acknowledged writes: start with \
                     --nvlog {0} (to move the NVLog, stop the server, copy the file and change \
                     nvlog_file in {CONFIG_FILE})",
                    recorded.display(),
                    given.display()
                ))),
            }
        }
    }
}

/// Makes an existing data directory and the files its configuration names
/// owner-only (an absent one is created so).
fn secure(dir: &Path, config: Option<&DataConfig>) -> Result<(), ServeError> {
    if !dir.exists() {
        return Ok(());
    }
    let mut files = vec![CONFIG_FILE, LOCK_FILE];
    if let Some(config) = config {
        files.push(&config.nvlog_file);
        let disks = config.aggregates.iter().flat_map(|a| a.disks.iter());
        files.extend(
            disks
                .chain(&config.spare_pool)
                .map(|disk| disk.file.as_str()),
        );
    }
    crate::access::secure_data_dir(dir, &files).map_err(ServeError::io(format!(
        "making {} owner-only",
        dir.display()
    )))
}

/// Creates a new data directory, formats it, makes `vol0` and its LUN.
fn create(
    dir: &Path,
    options: &CreateOptions,
    nvlog: Option<String>,
    mut parts: EngineParts,
) -> Result<(Engine, DataLock), ServeError> {
    check_create_options(options)?;
    let mut made = Made::default();
    if !dir.exists() {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(ServeError::io(format!("creating {}", dir.display())))?;
        made.directory = Some(dir.to_path_buf());
    }
    let lock = DataLock::acquire(dir)?;
    made.files.push(dir.join(LOCK_FILE));
    let directory_id = crate::labels::new_directory_id().map_err(ServeError::io(
        "making the directory's id from /dev/urandom",
    ))?;
    let mut config = DataConfig::new(options, Options::default().nvlog_half_bytes, directory_id);
    if let Some(nvlog) = nvlog {
        config.nvlog_file = nvlog;
    }
    let mut files = Vec::new();
    for disk in &config.aggregates[0].disks {
        let path = dir.join(&disk.file);
        let file = create_disk_file(&path, disk)?;
        made.files.push(path);
        files.push(Some(file));
    }
    let nvlog_path = dir.join(&config.nvlog_file);
    let room = crate::nvlog::roomy(config.nvlog_half_bytes, config.aggregates[0].stripes());
    crate::nvlog::create(&nvlog_path, room)
        .map_err(ServeError::io(format!("creating {}", nvlog_path.display())))?;
    made.files.push(nvlog_path.clone());
    if let Some(elsewhere) = config.external_nvlog().and_then(Path::parent) {
        // Its name must be durable before wafer.toml records it (the data
        // directory's own entries are synced with the configuration).
        File::open(elsewhere)
            .and_then(|directory| directory.sync_all())
            .map_err(ServeError::io(format!("syncing {}", elsewhere.display())))?;
    }
    let (nvlog_file, halves, nvlog_layout) =
        crate::nvlog::open(&nvlog_path, crate::nvlog::NvlogLayout::of(&config))?;
    let layout = config.aggregates[0]
        .layout()
        .expect("a new configuration is valid");
    let options_for_engine = engine_options(&config, &parts);
    let files = BTreeMap::from([(AggrId(0), files)]);
    let devices = start_devices(
        &config,
        files,
        (nvlog_file, halves, nvlog_layout),
        &mut parts,
    )?;
    let clock = Clock::start()?;
    let mut node = Node::new(options_for_engine, clock.now());
    let id = node
        .create_aggregate(clock.now(), "aggr0", layout)
        .map_err(|e| ServeError::Mount(e.to_string()))?;
    debug_assert_eq!(id, AggrId(0));
    let plumbing = parts.plumbing(devices, dir);
    let mut engine = Engine::new(node, clock, plumbing, config, nvlog_layout, BTreeMap::new());
    engine.wait_online()?;
    make(
        &mut engine,
        "volume vol0",
        Change::CreateVolume {
            name: "vol0".into(),
            size_bytes: options.volume_bytes,
        },
    )?;
    let volume = engine.node().volumes()[0].0;
    make(
        &mut engine,
        "LUN /vol/vol0/lun0",
        Change::CreateLun {
            volume,
            name: "lun0".into(),
            size_bytes: options.lun_bytes,
            attributes: wafer_core::format::LunAttributes::DEFAULT,
        },
    )?;
    engine.config().save(dir).map_err(ServeError::io(format!(
        "writing {}",
        dir.join(CONFIG_FILE).display()
    )))?;
    made.keep();
    tracing::info!("created aggregate aggr0 in {}", dir.display());
    Ok((engine, lock))
}

fn check_create_options(options: &CreateOptions) -> Result<(), ServeError> {
    let refuse = |reason: String| ServeError::Create {
        what: "the data directory".into(),
        reason,
    };
    if !(1..=26).contains(&options.data_disks) {
        return Err(refuse(format!(
            "a RAID-DP group holds 1 to 26 data disks, not {}",
            options.data_disks
        )));
    }
    if options.disk_bytes < 1 << 20 || !options.disk_bytes.is_multiple_of(4096) {
        return Err(refuse(format!(
            "a disk is at least 1 MiB, in 4 KiB steps, not {} bytes",
            options.disk_bytes
        )));
    }
    Ok(())
}

/// Submits a change of the server's own during creation.
fn make(engine: &mut Engine, what: &str, change: Change) -> Result<(), ServeError> {
    engine
        .execute(AggrId(0), HostRequest::Change(change))?
        .map(|_| ())
        .map_err(|refusal| ServeError::Create {
            what: what.into(),
            reason: refusal.to_string(),
        })
}

/// A sparse disk file of the disk's size.
fn create_disk_file(path: &Path, disk: &DiskConfig) -> Result<File, ServeError> {
    let make = || -> io::Result<File> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(DATA_FILE_MODE)
            .open(path)?;
        file.set_len(crate::labels::disk_file_bytes(disk.blocks))?;
        file.sync_all()?;
        Ok(file)
    };
    make().map_err(ServeError::io(format!("creating {}", path.display())))
}

/// What creation made, removed again unless creation succeeds.
#[derive(Default)]
struct Made {
    directory: Option<PathBuf>,
    files: Vec<PathBuf>,
}

impl Made {
    fn keep(&mut self) {
        self.directory = None;
        self.files.clear();
    }
}

impl Drop for Made {
    fn drop(&mut self) {
        for file in &self.files {
            let _ = fs::remove_file(file);
        }
        if let Some(directory) = &self.directory {
            let _ = fs::remove_dir(directory);
        }
    }
}

/// Opens every aggregate's disks, fails the ones that cannot be used, mounts
/// and replays. An aggregate that lost more disks than its RAID groups
/// survive is left as it was (its disks' states unchanged, so that putting
/// the files back and starting again brings it back) and mounted with none
/// of its disks, so that it fails at once, reported with why; the others
/// serve.
fn mount(
    dir: &Path,
    mut config: DataConfig,
    migrated: bool,
    mut parts: EngineParts,
) -> Result<Engine, ServeError> {
    let nvlog_path = dir.join(&config.nvlog_file);
    let (mut nvlog_file, halves, mut nvlog_layout) =
        crate::nvlog::open(&nvlog_path, crate::nvlog::NvlogLayout::of(&config))?;
    if migrated {
        // A directory of format 1 (one aggregate): its NVLog had room for
        // that one's CP records only; it grows (rewritten beside and
        // renamed) before the new configuration is saved, and either opens
        // with either. A format 2 NVLog has the room already.
        let stripes = config.aggregates.iter().map(|a| a.stripes()).max();
        let room = crate::nvlog::roomy(config.nvlog_half_bytes, stripes.unwrap_or(0));
        if room.region_bytes > nvlog_layout.region_bytes {
            nvlog_file = crate::nvlog::grow(&nvlog_path, room, &halves)
                .map_err(ServeError::io(format!("growing {}", nvlog_path.display())))?;
            nvlog_layout = room;
        }
        // The save labels every disk, before any is opened.
        config.save(dir).map_err(ServeError::io(format!(
            "writing {}",
            dir.join(CONFIG_FILE).display()
        )))?;
        tracing::info!(
            "{} migrated to format {} (its disks labelled; aggregate {} is aggregate 0 of the \
             node)",
            dir.join(CONFIG_FILE).display(),
            crate::config::FORMAT_VERSION,
            config.aggregates[0].aggregate
        );
    }
    adopt_aggregates(dir, &mut config, nvlog_layout)?;
    let unlabelled = find_disks(dir, &mut config)?;
    let mut files: BTreeMap<AggrId, Vec<Option<File>>> = BTreeMap::new();
    let mut unmountable: BTreeMap<AggrId, String> = BTreeMap::new();
    let mut lost_all: Vec<(u32, String, String)> = Vec::new();
    for aggr in &config.aggregates {
        let mut opened = Vec::new();
        let mut lost = Vec::new();
        for slot in aggr.slots() {
            let not_its = unlabelled.iter().find(|(disk, _)| *disk == slot.disk.name);
            let file = match (slot.disk.state, not_its) {
                (DiskState::Failed, _) => None,
                (DiskState::InService, Some((_, reason))) => {
                    lost.push((slot.disk.name.clone(), reason.clone()));
                    None
                }
                (DiskState::InService, None) => match open_disk(dir, slot.disk) {
                    Ok(file) => Some(file),
                    Err(reason) => {
                        lost.push((slot.disk.name.clone(), reason));
                        None
                    }
                },
            };
            opened.push(file);
        }
        let lost_names: Vec<&str> = lost.iter().map(|(name, _)| name.as_str()).collect();
        match aggr.check_survivable(&lost_names) {
            Ok(()) => lost_all.extend(lost.into_iter().map(|(n, r)| (aggr.id, n, r))),
            Err(refusal) => {
                let why = lost
                    .iter()
                    .map(|(name, reason)| format!("disk {name}: {reason}"))
                    .collect::<Vec<_>>()
                    .join("; ");
                let reason = format!("{refusal} ({why})");
                tracing::error!(
                    "aggregate {} cannot be mounted, and is reported failed: {reason}; its \
                     disks' states are left as they were",
                    aggr.aggregate
                );
                unmountable.insert(aggr.aggr_id(), reason);
                opened = opened.into_iter().map(|_| None).collect();
            }
        }
        files.insert(aggr.aggr_id(), opened);
    }
    // The failures are saved before the mount writes anything, so that a disk
    // missing now is never taken back stale.
    if !lost_all.is_empty() {
        for (id, name, reason) in &lost_all {
            tracing::warn!("disk {name} failed: {reason}");
            config
                .aggr_mut(*id)
                .expect("listed")
                .mark_failed(name, reason);
        }
        config.save(dir).map_err(ServeError::io(format!(
            "writing {}",
            dir.join(CONFIG_FILE).display()
        )))?;
    }
    let mut failed: Vec<(AggrId, DiskId)> = Vec::new();
    let mut layouts = Vec::new();
    for aggr in &config.aggregates {
        layouts.push((
            aggr.aggr_id(),
            aggr.layout().expect("a loaded configuration is valid"),
        ));
        if unmountable.contains_key(&aggr.aggr_id()) {
            continue;
        }
        let slots = aggr.slots();
        let down = slots.iter().filter(|s| s.disk.state == DiskState::Failed);
        failed.extend(down.map(|s| (aggr.aggr_id(), s.id)));
    }
    let options = engine_options(&config, &parts);
    let clock = Clock::start()?;
    let mut node = Node::mount(options, clock.now(), layouts, [&halves[0], &halves[1]]);
    let devices = start_devices(
        &config,
        files,
        (nvlog_file, halves, nvlog_layout),
        &mut parts,
    )?;
    for (aggr, disk) in failed {
        node.with_aggregate(clock.now(), aggr, |filer| filer.mark_failed(disk));
    }
    let plumbing = parts.plumbing(devices, dir);
    let mut engine = Engine::new(node, clock, plumbing, config, nvlog_layout, unmountable);
    engine.wait_online()?;
    // An aggregate that failed to mount after its missing disks were
    // recorded failed gets them back: the count above does not know what a
    // rebuild under way has yet to write, and restoring the files and
    // starting again must work.
    let mut failed_aggregates = Vec::new();
    for aggr in engine.config().aggregates.clone() {
        let (state, reason) = engine.aggregate_state(aggr.aggr_id());
        if state != "failed" {
            continue;
        }
        failed_aggregates.push(format!(
            "aggregate {}: {}",
            aggr.aggregate,
            reason.unwrap_or_default()
        ));
        let lost: Vec<String> = lost_all
            .iter()
            .filter(|(id, ..)| *id == aggr.id)
            .map(|(_, name, _)| name.clone())
            .collect();
        if !lost.is_empty() {
            match engine.unfail_disks(aggr.aggr_id(), &lost) {
                Ok(()) => tracing::error!(
                    "aggregate {} failed to mount: its disks' states are as they were",
                    aggr.aggregate
                ),
                Err(e) => tracing::error!(
                    "aggregate {} failed to mount, and its disk failures stay saved: {e}",
                    aggr.aggregate
                ),
            }
        }
    }
    // A node with nothing to serve refuses to start, as a one-aggregate
    // server always did.
    if failed_aggregates.len() == engine.config().aggregates.len() {
        return Err(ServeError::Mount(failed_aggregates.join("; ")));
    }
    Ok(engine)
}

/// Opens an in-service disk's file and checks its size and first sector.
/// Adds the aggregates found whole on their disks that the configuration
/// does not list (`crate::adoption`), and saves it if any was.
fn adopt_aggregates(
    dir: &Path,
    config: &mut DataConfig,
    nvlog: crate::nvlog::NvlogLayout,
) -> Result<(), ServeError> {
    let adopted =
        crate::adoption::adopt(dir, config, |trial| nvlog.holds(&trial.stripes())).map_err(
            ServeError::io(format!("reading the disk labels in {}", dir.display())),
        )?;
    for name in &adopted {
        tracing::warn!(
            "aggregate {name} was found whole on its disks and {CONFIG_FILE} did not list it: \
             added"
        );
    }
    if !adopted.is_empty() {
        config.save(dir).map_err(ServeError::io(format!(
            "writing {}",
            dir.join(CONFIG_FILE).display()
        )))?;
    }
    Ok(())
}

/// Points each disk in service at the file that carries its label
/// (`crate::labels::locate`), saving the configuration if a file moved, and
/// takes pool spares found nowhere out of the pool. Returns the aggregates'
/// disks found nowhere, with why: the mount fails them.
fn find_disks(dir: &Path, config: &mut DataConfig) -> Result<Vec<(String, String)>, ServeError> {
    let before = config.clone();
    let mut unlabelled = config.find_disk_files(dir).map_err(ServeError::io(format!(
        "reading the disk labels in {}",
        dir.display()
    )))?;
    unlabelled.retain(|(disk, reason)| match config.aggr_of_disk(disk) {
        Some(_) => true,
        None => {
            tracing::error!(
                "pool spare {disk} taken out of the pool, its file left as it is: {reason}"
            );
            config.spare_pool.retain(|d| d.name != *disk);
            false
        }
    });
    if *config != before {
        config.save(dir).map_err(ServeError::io(format!(
            "writing {}",
            dir.join(CONFIG_FILE).display()
        )))?;
    }
    Ok(unlabelled)
}

fn open_disk(dir: &Path, disk: &DiskConfig) -> Result<File, String> {
    let path = dir.join(&disk.file);
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    let length = file
        .metadata()
        .map_err(|e| format!("cannot stat {}: {e}", path.display()))?
        .len();
    let expected = crate::labels::disk_file_bytes(disk.blocks);
    if length != expected {
        return Err(format!(
            "{} holds {length} bytes, not {expected}",
            path.display()
        ));
    }
    let mut first = [0u8; 1];
    file.read_exact_at(&mut first, 0)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    Ok(file)
}

fn engine_options(config: &DataConfig, parts: &EngineParts) -> Options {
    Options {
        nvlog_half_bytes: config.nvlog_half_bytes,
        cache_blocks: parts.cache_blocks,
        flash_cache: parts.flash.as_ref().map(|flash| flash.options),
        ..Options::default()
    }
}

/// Starts every disk's threads, the NVLog thread (which appends after the
/// records `nvlog`'s halves hold) and the Flash Cache's thread.
fn start_devices(
    config: &DataConfig,
    mut files: BTreeMap<AggrId, Vec<Option<File>>>,
    nvlog: (File, [Vec<u8>; 2], crate::nvlog::NvlogLayout),
    parts: &mut EngineParts,
) -> Result<Devices, ServeError> {
    let events = &parts.events;
    let mut disks = BTreeMap::new();
    for aggr in &config.aggregates {
        let opened = files.remove(&aggr.aggr_id()).unwrap_or_default();
        let mut handles = Vec::new();
        for (slot, file) in aggr.slots().iter().zip(opened) {
            let handle = DiskHandle::spawn(&slot.disk.name, file, events.clone())
                .map_err(ServeError::io("starting disk threads"))?;
            handles.push(handle);
        }
        disks.insert(aggr.aggr_id(), handles);
    }
    let (file, halves, layout) = nvlog;
    let counters = Arc::clone(&parts.shared.nvlog);
    let nvlog = crate::nvlog::spawn(file, &halves, layout, events.clone(), counters)
        .map_err(ServeError::io("starting the NVLog thread"))?;
    let flash = (parts.flash.take())
        .map(|device| crate::flash::spawn(device, events.clone()))
        .transpose()
        .map_err(ServeError::io("starting the Flash Cache thread"))?;
    Ok(Devices {
        disks,
        nvlog,
        flash,
    })
}

/// Binds every listener (Unix sockets with `socket_mode`), warning about TCP
/// addresses other hosts can reach unless NBD is `guarded` (TLS with client
/// certificates required).
fn bind_listeners(
    addresses: &[ListenAddress],
    socket_mode: u32,
    guarded: bool,
) -> Result<Vec<Listener>, ServeError> {
    let listeners = addresses
        .iter()
        .map(|address| {
            Listener::bind(address, socket_mode).map_err(|error| ServeError::Listen {
                address: address.to_string(),
                error,
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    for address in addresses {
        if let ListenAddress::Tcp(address) = address
            && !guarded
        {
            crate::access::warn_if_exposed(address);
        }
    }
    Ok(listeners)
}

fn report(
    engine: &Engine,
    created: bool,
    listeners: &[Listener],
    admin_socket: &Path,
) -> Result<StartupReport, ServeError> {
    let node = engine.node();
    let config = engine.config();
    let mut aggregates = Vec::new();
    for aggr in &config.aggregates {
        let filer = node.aggregate(aggr.aggr_id());
        let (state, failed_reason) = engine.aggregate_state(aggr.aggr_id());
        let raid_groups = aggr
            .groups
            .iter()
            .enumerate()
            .map(|(group, g)| {
                let raid_type = g.raid_type.raid_type();
                RaidGroupSummary {
                    raid_type: raid_type.ontap_name(),
                    disks: g.disks.len(),
                    parity_disks: usize::from(raid_type.parity_disks()),
                    disk_bytes: g.blocks_per_disk * wafer_core::BLOCK_SIZE as u64,
                    failed: engine.failed_at_start(aggr.aggr_id(), group),
                    tolerated: raid_type.tolerated_failures(),
                    reconstructing: filer
                        .and_then(|f| f.rebuild_status())
                        .filter(|r| r.group == group)
                        .map(|r| {
                            let name = aggr.slots()[r.disk.0 as usize].disk.name.clone();
                            (name, r.stripes_done, r.stripes_total)
                        }),
                }
            })
            .collect();
        let online = state == "online";
        aggregates.push(AggregateSummary {
            name: aggr.aggregate.clone(),
            state,
            failed_reason,
            committed_cp: filer.map_or(0, |f| f.committed_cp().0),
            raid_groups,
            spares: aggr.spares.len(),
            aggregate_bytes: filer
                .filter(|_| online)
                .map_or(0, |f| f.aggregate_space().total_bytes),
        });
    }
    let mut volumes = Vec::new();
    let mut luns = Vec::new();
    for (id, name) in crate::engine::view::volumes(node) {
        volumes.push((
            name.clone(),
            crate::engine::view::volume_space(node, id).map_or(0, |s| s.size_bytes),
        ));
        for (_, lun, size) in node.luns(id) {
            luns.push((format!("/vol/{name}/{lun}"), size));
        }
    }
    let default_export = luns.first().map_or_else(String::new, |(path, _)| {
        path.trim_start_matches("/vol/").to_string()
    });
    let uris = listeners
        .iter()
        .map(|l| l.address().map(|a| nbd_uri(&a, &default_export)))
        .collect::<io::Result<Vec<_>>>()
        .map_err(ServeError::io("reading a listener's address"))?;
    Ok(StartupReport {
        created,
        aggregates,
        volumes,
        luns,
        uris,
        iscsi_uris: Vec::new(),
        admin_socket: admin_socket.to_path_buf(),
        tls: None,
        metrics_url: None,
        flash_cache: engine.flash_summary(),
    })
}

/// The data directory's lock: held for the server's life, so that two
/// servers never drive the same disks.
struct DataLock {
    _file: File,
}

impl DataLock {
    fn acquire(dir: &Path) -> Result<DataLock, ServeError> {
        let path = dir.join(LOCK_FILE);
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(DATA_FILE_MODE)
            .open(&path)
            .map_err(ServeError::io(format!("opening {}", path.display())))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(fs::TryLockError::WouldBlock) => {
                return Err(ServeError::Locked {
                    dir: dir.to_path_buf(),
                    lock: path,
                    holder: holder_of(&mut file),
                });
            }
            Err(fs::TryLockError::Error(error)) => {
                return Err(ServeError::io(format!("locking {}", path.display()))(error));
            }
        }
        // Say who holds it, for the message a second server prints.
        let record = || -> io::Result<()> {
            file.set_len(0)?;
            file.write_all_at(format!("{}\n", std::process::id()).as_bytes(), 0)
        };
        record().map_err(ServeError::io(format!("writing {}", path.display())))?;
        Ok(DataLock { _file: file })
    }
}

/// The process id a lock holder wrote into the lock file, if readable.
fn holder_of(file: &mut File) -> Option<u32> {
    let mut text = String::new();
    file.read_to_string(&mut text).ok()?;
    text.trim().parse().ok()
}

/// Turns any panic into an abort, after the usual message.
fn abort_on_panic() {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        report(info);
        tracing::error!(
            "a server thread panicked: stopping at once (the next start replays the NVLog)"
        );
        std::process::abort();
    }));
}

/// SIGINT and SIGTERM: the first stops gracefully, a second at once.
fn handle_signals(events: Sender<Event>) -> Result<(), ServeError> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM])
        .map_err(ServeError::io("installing signal handlers"))?;
    thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            let mut received = signals.forever();
            if let Some(signal) = received.next() {
                tracing::info!("signal {signal} received: stopping gracefully");
                crate::notify::stopping();
                let _ = events.send(Event::Shutdown);
            }
            if received.next().is_some() {
                tracing::warn!("second signal: stopping at once; the next start replays the NVLog");
                std::process::exit(1);
            }
        })
        .map_err(ServeError::io("starting the signal thread"))?;
    Ok(())
}
