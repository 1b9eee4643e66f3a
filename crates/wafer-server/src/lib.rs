//! wafer's server: the real-time driver of the filer engine. It runs the
//! sans-I/O [`wafer_core::node::Node`] (1 to 16 aggregates, each a
//! [`wafer_core::Filer`], over one NVLog) against files, the clock and
//! sockets, and serves its LUNs over NBD and iSCSI and its administration
//! over a Unix socket.
//!
//! # The data directory
//!
//! ```text
//! DIR/                 mode 0700, its files 0600 (`access`)
//!   wafer.toml         the configuration: each aggregate's name, id, RAID
//!                      groups by position, spares, each disk's backing file
//!                      and state (in service or failed); the node's pool of
//!                      spares and NVLog half size; replaced atomically
//!   disk0.img ...      one sparse file per disk: sector n at byte n * 4160
//!                      (4096 bytes of content, then the 64-byte trailer)
//!   nvlog              the NVLog: two halves, each a region of the file
//!                      (or on another path, `--nvlog`, recorded in wafer.toml)
//!   wafer.lock         held (flock) by the running server; holds its pid
//!   admin.sock         the admin socket (mode 0600): JSON lines
//! ```
//!
//! `wafer serve` on an absent or empty directory creates a working filer
//! there (by default: aggregate `aggr0`, one RAID-DP group of 6 data and 2
//! parity disks of 768 MiB plus a spare, volume `vol0` of 3 GiB, LUN
//! `/vol/vol0/lun0` of 2 GiB); on a data directory it mounts every aggregate
//! and replays the NVLog (an aggregate that cannot mount is reported failed,
//! and the others serve). `aggr create` adds aggregates. `docs/SERVER.md` is the administrator's guide.
//!
//! # Threads
//!
//! * one **engine** thread owns the node and is its only caller (`engine`);
//! * per disk, an **I/O** thread (`pread`/`pwritev`) and a **sync** thread that
//!   completes writes after one `fdatasync` per batch (`disk`);
//! * one **NVLog** thread that group-commits appends (`nvlog`);
//! * with `--flash-cache`, one **flash** thread that reads and writes the
//!   node's Flash Cache device, never synced, never trusted across a start
//!   (`flash`);
//! * per NBD listener an accept thread, per connection a reader and a writer
//!   (`nbd`), admitted under caps and timeouts (`admission`); per iSCSI
//!   listener an accept thread, per connection a reader and a worker
//!   (`iscsi`), under the same caps; an admin accept
//!   thread and a thread per admin connection (`admin_socket`); with
//!   `--metrics`, a thread answering Prometheus scrapes (`metrics`); a
//!   signal thread.
//!
//! They talk over channels; the engine thread never blocks on any of them.
//! Every acknowledged write is durable in the NVLog first, so a SIGKILL at any
//! moment loses nothing a client was told about: the next start replays it.

/// An info-level log event (`logging`); the NBD and iSCSI connections'
/// lines use it, the rest of the server names its level with `tracing`'s
/// own macros.
macro_rules! log {
    ($($arg:tt)*) => { ::tracing::info!($($arg)*) };
}
pub(crate) use log;

mod access;
pub mod admin;
mod admin_socket;
mod admission;
mod adoption;
mod budget;
mod catalogue;
mod chap_store;
mod clock;
mod config;
mod dir_names;
mod disk;
mod engine;
mod error;
mod events;
mod exposition;
mod flash;
mod growth;
mod iscsi;
mod iscsi_counters;
pub mod labels;
pub mod logging;
mod lun_ids;
mod lun_state;
pub mod masking;
mod metrics;
mod nbd;
mod nbd_masking;
mod notify;
mod nvlog;
mod server;
mod stop;
mod stream;
mod tls;

pub use admin::{AdminClient, AdminClientError, AdminRequest, AdminResponse, NvlogCountersStatus};
pub use admission::{CONNECTIONS_MAX, ConnectionLimits};
pub use budget::{BYTES_IN_FLIGHT_MAX, LOANS_BYTES, REQUESTS_IN_FLIGHT_MAX};
pub use config::{CONFIG_FILE, CreateOptions, DiskState, SECTOR_BYTES};
pub use error::ServeError;
pub use flash::{FLASH_BYTES_MIN, FlashCacheConfig};
pub use iscsi::ISCSI_PORT;
pub use server::{
    AggregateSummary, LOCK_FILE, RaidGroupSummary, ServeOptions, Server, StartupReport,
};
pub use stream::ListenAddress;
pub use tls::{TlsConfigError, TlsOptions};

/// The NBD port (IANA-assigned), where `wafer serve` listens by default.
pub const NBD_PORT: u16 = wafer_nbd::consts::NBD_DEFAULT_PORT;
