//! wafer's filer engine: a deterministic, sans-I/O write-anywhere file system.
//!
//! The engine is a state machine in the style of quinn-proto: drivers hand it
//! host requests, disk completions and the current time, and poll from it the
//! disk I/Os to perform, the replies to send and the next timer. It never reads
//! a clock, spawns a thread or touches a device, so one engine runs under the
//! real-time server and under the virtual-time lab and simulator alike.
//!
//! Layering inside the crate, bottom up: [`format`](mod@format) (on-disk encodings),
//! [`word_sum`] (metadata digests kept up to date as blocks change),
//! [`aggregate`] (RAID groups and the pvbn space), [`bitmap`] and [`space`]
//! (maps, delayed frees, the write allocator), [`tree`] (block trees), [`nvlog`]
//! (the operation log), [`payload`] (what a block holds: bytes, or stamps for
//! the lab).

pub mod aggregate;
pub mod bitmap;
pub mod filer;
pub mod fixed_map;
pub mod format;
pub mod node;
pub mod nvlog;
pub mod payload;
pub mod schedule;
pub mod space;
pub mod tree;
pub mod units;
pub mod word_sum;

pub use filer::Filer;
pub use payload::{Bytes, Payload, Stamps};
pub use wafer_raid::{BLOCK_SIZE, Block};
