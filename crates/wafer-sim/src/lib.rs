//! Deterministic simulation of the wafer engine.
//!
//! [`world`] runs the real `wafer_core::node::Node` of one or more
//! aggregates (or one `Filer` alone) against in-memory disks and NVRAM in
//! virtual time, injecting the faults RAID-DP and the NVLog promise to
//! survive on the disks of every aggregate, and carrying out the node's
//! aggregate administration. [`check`] drives it with a seeded random
//! workload and compares every read with a reference model. Same seed, same
//! run, bit for bit. Both run the engine on either payload: real bytes, or
//! the performance lab's one stamp per block, with every fault but the crash
//! (a stamp aggregate does not mount).

pub mod check;
pub mod world;
