//! The Flash Cache device: a file or block device the administrator names
//! (`--flash-cache`), and the thread that reads and writes it for the node.
//!
//! The node (`wafer_core::node`'s Flash Cache) decides everything: which
//! blocks the buffer cache lets go of go in, into which slot, and whether a
//! copy read back is the block it put there. The server only gives it a
//! device of `blocks` slots and performs its I/O: slot `n` is the sector at
//! byte `n * 4160`, laid out as a disk file's sector (4096 bytes of content,
//! then the 64-byte trailer), written and read with the disks' own helpers.
//!
//! Nothing on the device is trusted across a start: the node's index of what
//! it holds lives in memory, so every start begins with an empty (cold)
//! cache and the device's old contents are simply overwritten, as ONTAP's
//! Flash Cache card starts empty after a reboot. Writes are not synced: a
//! copy that never reaches the device is one the node cannot verify, and so
//! reads from its home instead.
//!
//! Errors: a read the device cannot serve answers `None` (the node reads the
//! block from disk and drops the copy). A write the host refuses (no room,
//! a quota, a read-only file system: the disks' own test) answers
//! `Unwritable`, and the node keeps serving the copies it has. Any other
//! write error means the device is gone: it answers `DiskFailed`, the node
//! disables its cache, and the thread answers every later I/O so too.
//!
//! The place is checked before anything is created: its directory must
//! exist, it must not be the data directory's or one of its files (a disk,
//! the NVLog, wherever that lives), and its size must hold at least
//! [`FLASH_BYTES_MIN`]. A regular file is created or extended to the size
//! given; a block device is used at its own size unless a smaller one is
//! given. The server holds the device's lock while it runs, so that two
//! servers never share one.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Seek, SeekFrom};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, Sender};
use std::thread;

use wafer_core::filer::{FlashCacheOptions, Io, IoOp, IoResult};

use crate::config::SECTOR_BYTES;
use crate::disk::{is_the_hosts, read_sectors, write_sectors};
use crate::error::ServeError;
use crate::events::Event;

/// The smallest Flash Cache: 1 MiB (252 slots of 4160 bytes).
pub const FLASH_BYTES_MIN: u64 = 1 << 20;

/// What `--flash-cache` and the `flexscale` options ask for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlashCacheConfig {
    /// The file or block device.
    pub path: PathBuf,
    /// Its size in bytes: required for a new file; a block device's own
    /// size if none.
    pub bytes: Option<u64>,
    /// `flexscale.normal_data_blocks`: user data read from disk goes in.
    pub normal_data_blocks: bool,
    /// `flexscale.lopri_blocks`: user data the host wrote goes in too.
    pub lopri_blocks: bool,
}

/// The device, opened and sized.
#[derive(Debug)]
pub(crate) struct FlashDevice {
    /// Its path, as the administrator gave it.
    pub(crate) path: PathBuf,
    file: File,
    /// The node's options for it.
    pub(crate) options: FlashCacheOptions,
    /// Whether this start created the file (removed if the start fails).
    made: bool,
}

impl FlashDevice {
    /// Its path, if this start created the file.
    pub(crate) fn made_path(&self) -> Option<PathBuf> {
        self.made.then(|| self.path.clone())
    }

    /// Removes the file if this start created it: a start that fails
    /// leaves nothing behind.
    pub(crate) fn discard(self) {
        if self.made {
            let _ = fs::remove_file(&self.path);
        }
    }
}

/// The engine's handle on the device's thread, and what it reports.
#[derive(Debug)]
pub(crate) struct FlashHandle {
    io: Sender<Io>,
    /// The device's path.
    pub(crate) path: String,
    /// The node's options for it.
    pub(crate) options: FlashCacheOptions,
}

impl FlashHandle {
    /// Queues one of the node's Flash Cache I/Os.
    pub(crate) fn send(&self, io: Io) {
        self.io
            .send(io)
            .expect("the flash thread runs while the engine does (a panic aborts)");
    }
}

/// Checks `config` against the data directory `dir` (and an NVLog outside
/// it, `nvlog`), then opens or creates the device. Nothing is created if a
/// check fails.
pub(crate) fn open(
    config: &FlashCacheConfig,
    dir: &Path,
    nvlog: Option<&Path>,
) -> Result<FlashDevice, ServeError> {
    let refuse = |reason: String| {
        ServeError::FlashCache(format!("--flash-cache {}: {reason}", config.path.display()))
    };
    let place = resolve(&config.path).map_err(&refuse)?;
    check_not_the_filers(&place, dir, nvlog).map_err(&refuse)?;
    let existing = fs::metadata(&place).ok();
    let block_device = existing
        .as_ref()
        .is_some_and(|m| m.file_type().is_block_device());
    if let Some(metadata) = &existing
        && !block_device
        && !metadata.is_file()
    {
        return Err(refuse(
            "is neither a regular file nor a block device".into(),
        ));
    }
    let bytes = match (config.bytes, block_device) {
        (Some(bytes), _) => bytes,
        (None, true) => 0, // the device's own size, read once it is open
        (None, false) => match existing.as_ref().map(fs::Metadata::len) {
            Some(length) if length > 0 => length,
            _ => return Err(refuse("give its size with --flash-cache-size".into())),
        },
    };
    if config.bytes.is_some() && bytes < FLASH_BYTES_MIN {
        return Err(refuse(format!(
            "--flash-cache-size {bytes} is too small: at least 1m"
        )));
    }
    let made = existing.is_none();
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(made)
        .mode(0o600)
        .open(&place)
        .map_err(|e| refuse(format!("cannot open it: {e}")))?;
    let device = FlashDevice {
        path: config.path.clone(),
        file,
        options: FlashCacheOptions {
            blocks: 0,
            normal_data_blocks: config.normal_data_blocks,
            lopri_blocks: config.lopri_blocks,
        },
        made,
    };
    let sized = lock(device).and_then(|device| size(device, bytes, block_device));
    sized.map_err(|(device, reason)| {
        device.discard();
        refuse(reason)
    })
}

/// Takes the device's lock (`flock`, held while the file is open): two
/// servers given one device would overwrite each other's copies, which
/// each would then read from disk, so the second is refused instead.
fn lock(device: FlashDevice) -> Result<FlashDevice, (FlashDevice, String)> {
    match device.file.try_lock() {
        Ok(()) => Ok(device),
        Err(fs::TryLockError::WouldBlock) => Err((
            device,
            "is in use: another wafer server's Flash Cache holds its lock".into(),
        )),
        Err(fs::TryLockError::Error(e)) => Err((device, format!("cannot lock it: {e}"))),
    }
}

/// Gives the opened device its size in slots: a regular file is extended to
/// `bytes`; a block device holds at least `bytes` (0: all of it).
fn size(
    mut device: FlashDevice,
    bytes: u64,
    block_device: bool,
) -> Result<FlashDevice, (FlashDevice, String)> {
    let usable = match block_device {
        true => match (&device.file).seek(SeekFrom::End(0)) {
            Ok(length) if bytes <= length => Ok(if bytes == 0 { length } else { bytes }),
            Ok(length) => Err(format!(
                "the device holds {length} bytes, less than --flash-cache-size {bytes}"
            )),
            Err(e) => Err(format!("cannot tell its size: {e}")),
        },
        false => extend(&device.file, bytes).map(|()| bytes),
    };
    let usable = match usable {
        Ok(usable) => usable,
        Err(reason) => return Err((device, reason)),
    };
    if usable < FLASH_BYTES_MIN {
        let reason = format!("it holds {usable} bytes, too small: at least 1m");
        return Err((device, reason));
    }
    device.options.blocks = usable / SECTOR_BYTES;
    Ok(device)
}

/// Extends a regular file to `bytes` (sparse); a longer file keeps its
/// length, and only its first `bytes` are used.
fn extend(file: &File, bytes: u64) -> Result<(), String> {
    let length = file
        .metadata()
        .map_err(|e| format!("cannot stat it: {e}"))?
        .len();
    if length < bytes {
        file.set_len(bytes)
            .map_err(|e| format!("cannot extend it to {bytes} bytes: {e}"))?;
    }
    Ok(())
}

/// The path with its directory resolved: the directory must exist.
fn resolve(given: &Path) -> Result<PathBuf, String> {
    let name = given.file_name().ok_or("names no file")?;
    let parent = match given.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let parent = fs::canonicalize(parent)
        .map_err(|e| format!("its directory {} is not usable: {e}", parent.display()))?;
    let path = parent.join(name);
    // A symbolic link is followed: the device it names is checked.
    Ok(fs::canonicalize(&path).unwrap_or(path))
}

/// Refuses the data directory, anything in it (its disks, spares, NVLog,
/// configuration), and the NVLog kept elsewhere.
fn check_not_the_filers(place: &Path, dir: &Path, nvlog: Option<&Path>) -> Result<(), String> {
    if let Ok(dir) = fs::canonicalize(dir)
        && place.starts_with(&dir)
    {
        return Err(format!(
            "is in the data directory {}, whose files are the filer's disks, NVLog and \
             configuration: name a path outside it",
            dir.display()
        ));
    }
    if let Some(nvlog) = nvlog
        && same_file(place, nvlog)
    {
        return Err(format!(
            "is the NVLog ({}), which holds acknowledged writes: name another path",
            nvlog.display()
        ));
    }
    Ok(())
}

/// Whether two paths name one file (by device and inode, or by path if
/// either is absent).
fn same_file(a: &Path, b: &Path) -> bool {
    match (fs::metadata(a), fs::metadata(b)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => fs::canonicalize(b).is_ok_and(|b| b == a) || a == b,
    }
}

/// Starts the device's thread.
pub(crate) fn spawn(device: FlashDevice, events: Sender<Event>) -> io::Result<FlashHandle> {
    let (io, received) = mpsc::channel();
    let path = device.path.display().to_string();
    let thread = FlashThread {
        path: path.clone(),
        file: Some(device.file),
        events,
        refused: false,
    };
    thread::Builder::new()
        .name("flash".into())
        .spawn(move || thread.run(&received))?;
    Ok(FlashHandle {
        io,
        path,
        options: device.options,
    })
}

/// The state of the device's thread.
struct FlashThread {
    path: String,
    /// `None` once the device has failed.
    file: Option<File>,
    events: Sender<Event>,
    /// Whether the host has refused a write yet (logged once).
    refused: bool,
}

impl FlashThread {
    fn run(mut self, received: &Receiver<Io>) {
        for io in received {
            let result = self.perform(io.op);
            // Once the engine has stopped nobody waits for the answer.
            let _ = self.events.send(Event::IoDone { id: io.id, result });
        }
    }

    fn perform(&mut self, op: IoOp) -> IoResult {
        let Some(file) = &self.file else {
            return IoResult::DiskFailed;
        };
        match op {
            IoOp::FlashRead { slot, .. } => IoResult::Read(read_sectors(file, slot.0, 1)),
            IoOp::FlashWrite { slot, sector } => {
                match write_sectors(file, &[sector], slot.0 * SECTOR_BYTES) {
                    Ok(()) => IoResult::Done,
                    Err(error) => self.write_failed(&error),
                }
            }
            _ => unreachable!("the engine sends the flash thread only Flash Cache I/O"),
        }
    }

    /// A write failed: the host's refusal leaves the device in service; any
    /// other error fails it.
    fn write_failed(&mut self, error: &io::Error) -> IoResult {
        if is_the_hosts(error) {
            if !self.refused {
                tracing::error!(
                    "Flash Cache {}: the host refused a write: {error}; blocks that cannot be \
                     written are not cached",
                    self.path
                );
                self.refused = true;
            }
            return IoResult::Unwritable;
        }
        tracing::error!(
            "Flash Cache {} FAILED: write failed: {error}; every read goes to disk from now on",
            self.path
        );
        self.file = None;
        IoResult::DiskFailed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wafer_core::filer::{FlashHome, IoId, Sector};
    use wafer_core::format::TRAILER_SIZE;
    use wafer_core::units::{AggrId, DiskId, FlashSlot};
    use wafer_core::{BLOCK_SIZE, Block};

    fn sector(fill: u8) -> Sector {
        let data: Box<Block> = Box::new([fill; BLOCK_SIZE]);
        Sector {
            data,
            trailer: [fill ^ 0x5a; TRAILER_SIZE],
        }
    }

    fn home() -> FlashHome {
        FlashHome {
            aggregate: AggrId(0),
            disk: DiskId(0),
            dbn: wafer_raid::Dbn(9),
        }
    }

    fn config(path: &Path, bytes: Option<u64>) -> FlashCacheConfig {
        FlashCacheConfig {
            path: path.to_path_buf(),
            bytes,
            normal_data_blocks: true,
            lopri_blocks: false,
        }
    }

    /// Runs `ops` through a thread on `device`; their results in order.
    fn run(device: FlashDevice, ops: Vec<IoOp>) -> Vec<IoResult> {
        let (events, received) = mpsc::channel();
        let handle = spawn(device, events).expect("a thread");
        let count = ops.len();
        for (n, op) in ops.into_iter().enumerate() {
            handle.send(Io {
                id: IoId(n as u64),
                op,
            });
        }
        (0..count)
            .map(|_| match received.recv().expect("an answer") {
                Event::IoDone { result, .. } => result,
                _ => panic!("not an I/O completion"),
            })
            .collect()
    }

    #[test]
    fn a_slot_lands_at_its_4160_byte_stride_and_reads_back() {
        let dir = tempfile::tempdir().expect("a scratch directory");
        let path = dir.path().join("flash");
        let device = open(
            &config(&path, Some(2 << 20)),
            &dir.path().join("data"),
            None,
        )
        .expect("opened");
        assert_eq!(device.options.blocks, (2 << 20) / SECTOR_BYTES);
        let results = run(
            device,
            vec![
                IoOp::FlashWrite {
                    slot: FlashSlot(3),
                    sector: sector(7),
                },
                IoOp::FlashRead {
                    slot: FlashSlot(3),
                    home: home(),
                },
            ],
        );
        assert_eq!(results[0], IoResult::Done);
        assert_eq!(results[1], IoResult::Read(vec![Some(sector(7))]));
        let raw = fs::read(&path).expect("readable");
        assert_eq!(raw.len() as u64, 2 << 20, "extended to its size");
        assert_eq!(raw[3 * SECTOR_BYTES as usize], 7);
        assert_eq!(raw[3 * SECTOR_BYTES as usize - 1], 0, "slot 2 untouched");
    }

    #[test]
    fn a_write_error_not_the_hosts_fails_the_device_for_good() {
        let dir = tempfile::tempdir().expect("a scratch directory");
        let path = dir.path().join("flash");
        let device = open(
            &config(&path, Some(1 << 20)),
            &dir.path().join("data"),
            None,
        )
        .expect("opened");
        // A descriptor open for reading only: writes fail with EBADF, an
        // error of the device's, not the host's.
        let device = FlashDevice {
            file: File::open(&path).expect("readable"),
            ..device
        };
        let write = IoOp::FlashWrite {
            slot: FlashSlot(0),
            sector: sector(1),
        };
        let read = IoOp::FlashRead {
            slot: FlashSlot(0),
            home: home(),
        };
        let results = run(device, vec![write, read]);
        assert_eq!(results, vec![IoResult::DiskFailed, IoResult::DiskFailed]);
    }

    #[test]
    fn places_that_are_not_the_caches_are_refused_and_nothing_is_made() {
        let dir = tempfile::tempdir().expect("a scratch directory");
        let data = dir.path().join("data");
        fs::create_dir(&data).expect("a data directory");
        let refused = |path: &Path, bytes: Option<u64>, nvlog: Option<&Path>| {
            open(&config(path, bytes), &data, nvlog)
                .expect_err("refused")
                .to_string()
        };
        let missing = dir.path().join("absent/flash");
        assert!(refused(&missing, Some(1 << 20), None).contains("is not usable"));
        let inside = data.join("disk0.img");
        assert!(refused(&inside, Some(1 << 20), None).contains("in the data directory"));
        let nvlog = dir.path().join("nvlog");
        fs::write(&nvlog, b"records").expect("written");
        assert!(refused(&nvlog, Some(1 << 20), Some(&nvlog)).contains("is the NVLog"));
        assert_eq!(fs::read(&nvlog).expect("readable"), b"records");
        let new = dir.path().join("flash");
        assert!(refused(&new, Some(4096), None).contains("too small"));
        assert!(refused(&new, None, None).contains("--flash-cache-size"));
        assert!(refused(dir.path(), Some(1 << 20), None).contains("neither"));
        assert!(!new.exists(), "a refused start makes no file");
    }
}
