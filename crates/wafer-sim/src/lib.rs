//! Deterministic simulation of the wafer filer.
//!
//! [`world`] runs the real `wafer_core::Filer` against in-memory disks and
//! NVRAM in virtual time, injecting the faults RAID-DP and the NVLog promise to
//! survive. [`check`] drives it with a seeded random workload and compares every
//! read with a reference model. Same seed, same run, bit for bit.

pub mod check;
pub mod device;
pub mod world;
