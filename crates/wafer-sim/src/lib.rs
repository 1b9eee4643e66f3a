//! Deterministic simulation of the wafer filer.
//!
//! [`world`] runs the real `wafer_core::Filer` against in-memory disks and
//! NVRAM in virtual time, injecting the faults RAID-DP and the NVLog promise to
//! survive. [`check`] drives it with a seeded random workload and compares every
//! read with a reference model. Same seed, same run, bit for bit. Both run the
//! filer on either payload: real bytes, or the performance lab's one stamp per
//! block, with every fault but the crash (a stamp filer does not mount).

pub mod check;
pub mod node_check;
pub mod node_world;
pub mod world;
