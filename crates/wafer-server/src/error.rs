//! Why the server cannot start, or had to stop.
//!
//! Every refusal names the directory or file at fault and what to do, since
//! the person reading it is an administrator at a prompt. Each message is
//! complete in itself (operating-system errors are part of it, not a source
//! chain), so it reads the same whichever way it is printed. Refusals that are
//! checked before anything is written (a corrupt configuration, a directory
//! that is not wafer's, a held lock, too many failed disks) leave the data
//! directory exactly as it was.

use std::io;
use std::path::PathBuf;

/// Why `wafer serve` could not start or keep serving.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// The configuration file is unreadable, malformed or inconsistent.
    #[error("{}: {reason}; nothing in the data directory was changed", path.display())]
    Config {
        /// The configuration file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The directory holds files but no configuration.
    #[error(
        "{} is not empty and holds no {}: it is not a wafer data directory (if an earlier \
         `wafer serve` was interrupted while creating it, remove it and start again)",
        dir.display(),
        crate::dir_names::CONFIG_FILE
    )]
    NotADataDirectory {
        /// The directory.
        dir: PathBuf,
    },
    /// Another server holds the directory's lock.
    #[error(
        "{} is in use by another wafer server{} (it holds the lock on {}); stop that server first",
        dir.display(),
        holder.map_or_else(String::new, |pid| format!(", process {pid}")),
        lock.display()
    )]
    Locked {
        /// The data directory.
        dir: PathBuf,
        /// Its lock file.
        lock: PathBuf,
        /// The process id the holder recorded, if it could be read.
        holder: Option<u32>,
    },
    /// A RAID group has lost more disks than its parity can rebuild.
    #[error(
        "RAID group {group} ({raid_type}) has {} failed disks ({}), more than the {tolerated} it \
         survives: refusing to serve; restore the missing disk files and start again",
        failed.len(),
        failed.join(", ")
    )]
    TooManyFailedDisks {
        /// The RAID group.
        group: usize,
        /// Its RAID type's name.
        raid_type: &'static str,
        /// The failed disks' names.
        failed: Vec<String>,
        /// Failures the group survives.
        tolerated: usize,
    },
    /// The NVLog file is missing or has the wrong size.
    #[error(
        "{}: {reason}; acknowledged writes since the last CP live there, so the server will not \
         start without it",
        path.display()
    )]
    Nvlog {
        /// The NVLog file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// `--nvlog` names no usable place, or not the one the configuration
    /// records: the NVLog holds acknowledged writes, so a start that would not
    /// find it is refused.
    #[error("{0}; nothing was changed")]
    NvlogPlacement(String),
    /// `--flash-cache` names no usable place or size: checked before
    /// anything is created or mounted.
    #[error("{0}; the server did not start and nothing was changed")]
    FlashCache(String),
    /// The aggregate went offline while serving: a CP could not be made
    /// durable within the RAID promise. Nothing acknowledged is lost.
    #[error(
        "the aggregate went offline: {0}. Every acknowledged write is in the last committed CP \
         or the NVLog: once the host can store writes again (room in the file system, disk files \
         writable), start wafer serve again; it mounts the last CP and replays the log"
    )]
    Offline(String),
    /// A disk failed, and its failure could not be recorded in the
    /// configuration: the server stops before anything trusts the disk's
    /// absence, since the next start would otherwise trust its stale content.
    #[error(
        "disk {disk} failed ({failure}), and the failure cannot be recorded in {}: {save}; \
         stopped before anything was committed without the disk. Make room for the \
         configuration and start again (the disk is tried again, and recorded failed if it \
         still fails)",
        crate::dir_names::CONFIG_FILE
    )]
    FailureUnrecorded {
        /// The disk's name.
        disk: String,
        /// What failed on it.
        failure: String,
        /// Why the configuration could not be saved.
        save: io::Error,
    },
    /// The NVLog could no longer be written durably while serving.
    #[error("the NVLog failed: {0}; stopped so that no write is acknowledged without it")]
    NvlogFailed(String),
    /// The engine could not mount the aggregate.
    #[error("cannot mount the aggregate: {0}")]
    Mount(String),
    /// The clock's anchor in the environment is not a Unix time.
    #[error("{0}")]
    Clock(String),
    /// Creating the first volume or LUN of a new data directory failed.
    #[error("cannot create {what}: {reason}")]
    Create {
        /// What was being created.
        what: String,
        /// The engine's answer.
        reason: String,
    },
    /// A listening socket could not be opened.
    #[error("cannot listen on {address}: {error}")]
    Listen {
        /// The address or socket path.
        address: String,
        /// The operating system's error.
        error: io::Error,
    },
    /// A file operation failed.
    #[error("{what}: {error}")]
    Io {
        /// What was being done, and to which path.
        what: String,
        /// The operating system's error.
        error: io::Error,
    },
}

impl ServeError {
    /// An I/O failure while doing `what`.
    pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(io::Error) -> ServeError {
        let what = what.into();
        move |error| ServeError::Io { what, error }
    }
}
