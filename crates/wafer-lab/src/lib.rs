//! The wafer performance lab: host workloads against modelled arrays, in
//! virtual time.
//!
//! An [`array::Array`] is a storage array seen from the host, a sans-I/O
//! state machine over modelled disks (`wafer_devices`). The lab has an
//! in-place RAID-5 comparator ([`inplace`]) and the wafer filer itself, the
//! engine unchanged on modelled drives ([`wafer`]). A [`workload::Workload`] (from an IOmeter
//! access specification or a fio job file) drives arrays through
//! [`run::run`], a discrete-event loop in nanoseconds that measures IOPS,
//! MB/s and latency per segment, and [`report`] renders the results as
//! `report.json`, fio JSON, `statit`, `sysstat -x` and an SVG chart. A
//! [`scenario::Scenario`] describes a whole run in TOML, or a
//! [`procedure`] of runs and snapshots in order on the same arrays.
//!
//! Like the engine, the lab is pure: no clock, no threads, no files, no
//! unseeded randomness. The same scenario and seed give the same bytes.

pub mod array;
pub mod controller;
mod histogram;
pub mod inplace;
pub mod procedure;
pub mod report;
pub mod run;
pub mod scenario;
pub mod snap_sched;
pub mod sweep;
pub mod wafer;
pub mod workload;

pub use array::{
    Array, ArrayKind, DiskStats, Extent, HostCompletion, HostIo, HostOp, PreparePlan,
    SnapshotStats, VolumeUse,
};
pub use inplace::{InPlaceArray, InPlaceSpec};
pub use procedure::{ArrayProcedure, Procedure, ProcedureReport, run_procedure};
pub use report::LabReport;
pub use run::{PerMinute, Progress, RunError, RunOptions, run, run_each};
pub use scenario::{
    AggregateSpec, ArraySpec, LunSpec, Scenario, ScenarioError, VolumeSpec, WaferSpec,
};
pub use snap_sched::{HeldSnapshot, SnapSched, WeekTime};
pub use sweep::{Sweep, SweepReport};
pub use wafer::{WaferArray, WaferArrayError};
pub use workload::Workload;
