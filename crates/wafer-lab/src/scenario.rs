//! Scenarios: a lab run described in one TOML file (`scenarios/*.toml`).
//!
//! A scenario has a `[run]` table (`seed`, and optionally `segments`,
//! `segment_s`, `ramp_s`, which override the workload's own timing,
//! `sysstat_interval_s`, `snapshot_every_s`: a snapshot every N seconds of
//! virtual time, all kept, at most 255 per wafer volume and 8 per in-place
//! LUN over the run, and `per_minute = true`: IOPS, MB/s and latency for
//! every minute of the run, with `latency_threshold_us`: the first minute
//! whose mean latency is at or below it; `snap_sched = "0 2 6@8,12,16,20"`:
//! every volume of every wafer array follows ONTAP's `snap sched` with
//! these counts, refused beside `snapshot_every_s` or an in-place array,
//! with `clock_start = "Sun 07:59:50"`: the weekday and UTC time of lab
//! time zero), a `[workload]` table, and one or
//! more `[[array]]` tables, run one after another against the same
//! workload:
//!
//! - `[workload] kind = "iometer"`: `name`, `workers` (default 1),
//!   `outstanding_ios` (per worker), the test file (`test_file_<unit>`,
//!   default the whole LUN; `test_file_offset_<unit>`, default 0;
//!   `worker_offset_increment_<unit>`, default 0: each worker's test file
//!   starts this much after the previous worker's), `fill`
//!   (default true: IOmeter writes its test file first), `reallocate`
//!   (default false), `ramp_s`, `run_s` (one segment), `segments`, and
//!   `lines = [{ size_<unit>, percent, read_percent, random_percent,
//!   align_<unit> }, ...]` (align 0 or absent: one sector); or, instead of
//!   `lines`, `icf_file = "path.icf"`: an IOmeter configuration file (see
//!   [`crate::workload::icf`]) giving the lines of one access
//!   specification (`icf_spec = "name"`, else the one its workers are
//!   assigned, else its only one), the run and ramp-up times, and its disk
//!   workers' count, outstanding I/Os, Maximum Disk Size and Starting Disk
//!   Sectors (stepping evenly: a worker offset increment); any of these
//!   keys in the scenario overrides the file.
//! - `[workload] kind = "fio"`: a job file in `job = """..."""`, by path in
//!   `job_file = "path.fio"`, or its options inline in
//!   `[workload.options]` (exactly one of the three); `fill` and
//!   `reallocate` (default false).
//! - `[workload] kind = "orion"`: one data point of Oracle Orion's matrix,
//!   by Orion's option names: `num_small` (small I/Os outstanding),
//!   `num_large` (large I/Os outstanding, or streams with `type = "seq"`),
//!   `size_small_<unit>` (default 8 KiB), `size_large_<unit>` (default
//!   1 MiB), `type` (`rand`, the default, or `seq`), `num_streamIO`
//!   (default 4, `seq` only), `write` (percent, both kinds), `duration_s`
//!   (one segment), `ramp_s`, `segments`, `fill` (default true), `matrix`
//!   (`point` only), `name`. Segments report small and large I/Os apart.
//! - Either kind may set `lun_active_percent = X`: every worker addresses
//!   the first X % of each of the array's LUNs (the active data set) instead
//!   of one range (see [`crate::workload`]); and `offered_iops = N`: an open
//!   loop, N I/Os a second arriving as a Poisson process, at most
//!   `outstanding_ios` per worker in flight, the rest waiting at the host;
//!   and a moving working set (OLTP): `working_set_percent = P` with
//!   `working_set_sweep_s = T`, the random I/Os falling in a window of P %
//!   of the range that crosses it once every T seconds, and optionally
//!   `working_set_share_percent` (default 100) of them in the window, the
//!   rest anywhere.
//! - `[[array]] kind = "in-place"`: `name`, `drive`, `disks` (one RAID-5
//!   group), or `raid_groups` with `disks_per_group` (several alike; `disks`
//!   beside `raid_groups` is refused as ambiguous), `raid = "raid5"` (the
//!   default and only choice), `stripe_unit_<unit>`, `stripe_width` (data
//!   chunks per stripe, default `disks - 1`), `lun_<unit>` or
//!   `[[array.lun]]` tables (`size_<unit>`; the workload addresses the LUNs
//!   end to end), `metalun` (default true: each LUN a MetaLUN striped over
//!   every group; false: LUN `i` whole on group `i mod G`),
//!   `metalun_multiplier` (full stripes per meta stripe element, default
//!   4), `cache_mib` (absent: no write-back cache),
//!   `cache_latency_us`, `reserved_lun_pool_<unit>` (copy-on-first-write
//!   snapshots into a reserved LUN pool of that size; needed with a
//!   snapshot schedule) and `cow_chunk_<unit>` (default 64 KiB).
//! - `[[array]] kind = "wafer"`: a node of one or more aggregates. `name`,
//!   `cache_mib` (the node's buffer cache for data and indirect blocks,
//!   shared by its aggregates by their use of it; absent: the engine's
//!   default), and either one aggregate's keys,
//!   `drive`, `raid_type` (`raid_dp` or `raid4`), `raid_size` and `disks`
//!   (the aggregate `aggr0`), or `[[array.aggregate]]` tables with `name`
//!   and those four keys each (at most 16). Volumes and LUNs: either
//!   `volume_<unit>` and `lun_<unit>` (`vol0` on the first aggregate holding
//!   `lun0`, with `volume_cache`), or `[[array.volume]]` tables (`name`,
//!   `aggregate`: its name, needed with several, `size_<unit>`, `cache`: the
//!   volume's buffer-cache policy, `keep`, `default` or `reuse`) and `[[array.lun]]` tables (`name`,
//!   `volume`, needed with several, `size_<unit>`). The workload addresses
//!   the LUNs end to end, in the order listed. `flash_cache_mib` gives the
//!   node a Flash Cache of that size on an SSD of the catalog
//!   (`flash_cache_drive`, default `ssd-200g`), inserting data the host
//!   wrote too if `flash_cache_lopri` is true (default false). The lab checks these and
//!   hands them to the driver, which builds the node.
//!
//! `[[step]]` tables make the scenario a procedure (see [`crate::procedure`]):
//! `fill`, `reallocate`, `run` (with its own `segments`, `segment_s`,
//! `ramp_s`), `snapshot` and `repeat` (`times`, `steps`), in order on the
//! same arrays; the fill and reallocate steps replace the workload's own
//! `fill` and `reallocate` keys, which are then refused, as is `snap_sched`.
//!
//! A file a scenario names lies relative to the scenario file's directory
//! (or is absolute). The lab reads no files: [`Scenario::parse_with_files`]
//! takes a reader from its caller (the CLI), and [`Scenario::parse`]
//! refuses a scenario that names one.
//!
//! Either kind may name a `controller` of `controllers.toml`, whose time per
//! disk command then limits the array (absent: an infinitely fast one).
//!
//! Any array may set `outstanding_ios` to override the workload's per-worker
//! figure (E1 ran each array at the depth that gave it about 30 ms). Sizes
//! carry their unit in the key (`lun_gib = 500`, `stripe_unit_kib = 128`). Unknown keys are refused,
//! and every error names its field by path, e.g. `array[1].disks`.

pub(crate) mod fields;

use std::collections::{BTreeMap, BTreeSet};

use toml::{Table, Value};
use wafer_core::nvlog::CachePolicy;
use wafer_core::units::Duration;
use wafer_devices::BLOCK_BYTES;
use wafer_devices::params::{Catalog, Drive};
use wafer_raid::RaidType;

use self::fields::Fields;
use crate::controller::{ControllerCatalog, ControllerSpec};
use crate::inplace::{
    CACHE_LATENCY_DEFAULT, CHUNK_BYTES_DEFAULT, CacheSpec, InPlaceError, InPlaceSpec, LunPlacement,
    METALUN_MULTIPLIER_DEFAULT, ReservedPoolSpec, SESSIONS_PER_LUN_MAX,
};
use crate::procedure::{self, Procedure};
use crate::run::{PerMinute, RunOptions};
use crate::snap_sched::{SnapSched, WeekTime, parse_schedule};
use crate::workload::fio::{FioError, FioJob};
use crate::workload::icf::{IcfError, IcfFile, IcfSpec};
use crate::workload::iometer::IometerSpec;
use crate::workload::orion::{self, LargeType, OrionSpec};
use crate::workload::{
    AccessLine, Distribution, MovingSet, Region, Timing, Workload, WorkloadError,
};

/// Reads a file a scenario names: its path as written, to its text or why
/// it cannot be read.
pub type Files<'a> = dyn Fn(&str) -> Result<String, String> + 'a;

/// The `sysstat` interval when a scenario names none: a minute, so a
/// run of hours prints a few hundred lines (ONTAP's own default is 15 s,
/// sized for a console, not for hours of simulated load).
pub const SYSSTAT_INTERVAL_DEFAULT: Duration = Duration::from_secs(60);

/// Most arrays in one scenario.
pub const ARRAYS_MAX: usize = 16;

/// A parsed and checked scenario.
#[derive(Clone, Debug, PartialEq)]
pub struct Scenario {
    /// What the scenario reproduces.
    pub name: String,
    /// Seed and sampling.
    pub run: RunOptions,
    /// The workload, timing resolved.
    pub workload: Workload,
    /// The arrays, in order.
    pub arrays: Vec<ArrayEntry>,
    /// With `[[step]]` tables: the steps after the preparation, which the
    /// workload's `prepare` holds; `None`: one run.
    pub procedure: Option<Procedure>,
}

/// One `[[array]]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArrayEntry {
    /// How to build it.
    pub spec: ArraySpec,
    /// Outstanding I/Os per worker for this array, if not the workload's.
    pub outstanding_ios: Option<u32>,
}

/// How to build an array.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ArraySpec {
    /// The in-place comparator.
    InPlace(InPlaceSpec),
    /// The wafer filer.
    Wafer(WaferSpec),
}

impl ArraySpec {
    /// The array's name.
    pub fn name(&self) -> &str {
        match self {
            ArraySpec::InPlace(spec) => &spec.name,
            ArraySpec::Wafer(spec) => &spec.name,
        }
    }
}

/// A wafer array: a node serving one or more aggregates of RAID groups,
/// with volumes and LUNs on them. The workload addresses the LUNs laid end
/// to end, in order, as one disk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WaferSpec {
    /// The array's name in reports.
    pub name: String,
    /// The aggregates, in order (the node's aggregate ids 0, 1, ...).
    pub aggregates: Vec<AggregateSpec>,
    /// The flexible volumes, in order.
    pub volumes: Vec<VolumeSpec>,
    /// The LUNs, in the order the workload addresses them.
    pub luns: Vec<LunSpec>,
    /// The buffer cache, in MiB, for data and indirect blocks alike, of
    /// each aggregate (absent: the engine's default).
    pub cache_mib: Option<u32>,
    /// The controller in front of the disks (absent: infinitely fast).
    pub controller: Option<ControllerSpec>,
    /// The node's Flash Cache (absent: none).
    pub flash_cache: Option<FlashCacheSpec>,
}

/// A wafer array's Flash Cache: a victim cache of the buffer cache on one
/// SSD of the catalog, in the controller (not behind it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlashCacheSpec {
    /// Its size in MiB, at most the drive's capacity.
    pub mib: u32,
    /// The SSD, by its name in the catalog.
    pub drive: String,
    /// Whether data the host wrote goes in too (ONTAP's
    /// `flexscale.lopri_blocks`, off by default).
    pub lopri_blocks: bool,
}

/// The SSD a Flash Cache is modelled on unless the scenario names one.
pub const FLASH_CACHE_DRIVE: &str = "ssd-200g";

/// One aggregate of a wafer array: RAID groups of one drive model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AggregateSpec {
    /// Its name (`aggr0` for the one a scenario declares without tables).
    pub name: String,
    /// The drive, by its name in the catalog.
    pub drive: String,
    /// RAID-DP or RAID-4.
    pub raid_type: RaidType,
    /// Disks per RAID group, parity included (ONTAP's `raidsize`).
    pub raid_size: u32,
    /// Disks in the aggregate; groups fill to `raid_size`, the last may be
    /// smaller.
    pub disks: u32,
}

/// A flexible volume of a wafer array.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VolumeSpec {
    /// Its name, unique in the array.
    pub name: String,
    /// Its aggregate: an index into [`WaferSpec::aggregates`].
    pub aggregate: usize,
    /// Its size.
    pub size_bytes: u64,
    /// How its blocks age in the buffer cache (ONTAP's `priority set
    /// volume VOL cache=`).
    pub cache_policy: CachePolicy,
}

/// A LUN of a wafer array.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LunSpec {
    /// Its name, unique in its volume.
    pub name: String,
    /// Its volume: an index into [`WaferSpec::volumes`].
    pub volume: usize,
    /// Its size.
    pub size_bytes: u64,
}

impl WaferSpec {
    /// One aggregate (`aggr0`), one volume (`vol0`) on it and one LUN
    /// (`lun0`) in that, no cache size and no controller: the array a
    /// scenario declares without `aggregate`, `volume` or `lun` tables.
    pub fn single(
        name: &str,
        aggregate: AggregateSpec,
        volume_bytes: u64,
        lun_bytes: u64,
    ) -> WaferSpec {
        WaferSpec {
            name: name.to_string(),
            aggregates: vec![aggregate],
            volumes: vec![VolumeSpec {
                name: "vol0".into(),
                aggregate: 0,
                size_bytes: volume_bytes,
                cache_policy: CachePolicy::Default,
            }],
            luns: vec![LunSpec {
                name: "lun0".into(),
                volume: 0,
                size_bytes: lun_bytes,
            }],
            cache_mib: None,
            controller: None,
            flash_cache: None,
        }
    }

    /// The bytes the workload addresses: every LUN's, end to end.
    pub fn lun_bytes(&self) -> u64 {
        self.luns.iter().map(|lun| lun.size_bytes).sum()
    }
}

impl AggregateSpec {
    /// Disks in each RAID group, in order.
    pub fn group_sizes(&self) -> Vec<u32> {
        let full = self.disks / self.raid_size;
        let rest = self.disks % self.raid_size;
        let mut sizes = vec![self.raid_size; full as usize];
        if rest > 0 {
            sizes.push(rest);
        }
        sizes
    }
}

/// Why a scenario was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ScenarioError {
    /// The text is not TOML.
    #[error("scenario line {line}: {message}")]
    Syntax {
        /// Line of the error, from 1.
        line: usize,
        /// The parser's message.
        message: String,
    },
    /// A required field is absent.
    #[error("scenario field `{field}` is missing")]
    Missing {
        /// The field's path.
        field: String,
    },
    /// A field the scenario format does not have.
    #[error("scenario field `{field}` is not known")]
    Unknown {
        /// The field's path.
        field: String,
    },
    /// A field's value cannot be used.
    #[error("scenario field `{field}`: {reason}")]
    Invalid {
        /// The field's path.
        field: String,
        /// Why.
        reason: String,
    },
}

impl Scenario {
    /// Parses and checks a scenario against `catalog`'s drives; a scenario
    /// that names a file (`job_file`, `icf_file`) is refused.
    pub fn parse(text: &str, catalog: &Catalog) -> Result<Scenario, ScenarioError> {
        Scenario::parse_with_files(text, catalog, &|_| {
            Err("this caller reads no files besides the scenario".into())
        })
    }

    /// Parses and checks a scenario, reading the files it names through
    /// `files`: given the path as the scenario writes it, the file's text
    /// or why it cannot be read. The caller resolves the path (the CLI
    /// takes it from the scenario file's directory); the lab does no I/O.
    pub fn parse_with_files(
        text: &str,
        catalog: &Catalog,
        files: &Files<'_>,
    ) -> Result<Scenario, ScenarioError> {
        let table: Table = toml::from_str(text).map_err(|error| syntax(text, &error))?;
        Scenario::from_table(&table, catalog, files)
    }

    /// [`Scenario::parse_with_files`] of a TOML table already read.
    pub(crate) fn from_table(
        table: &Table,
        catalog: &Catalog,
        files: &Files<'_>,
    ) -> Result<Scenario, ScenarioError> {
        if table.contains_key("sweep") {
            return Err(ScenarioError::Invalid {
                field: "sweep".into(),
                reason: "a sweep stands for several runs: expand it first (`wafer lab run` \
                         does; `wafer_lab::Sweep::parse`)"
                    .into(),
            });
        }
        let mut top = Fields::new(table, "");
        let name = top.string("name")?.unwrap_or("scenario").to_string();
        let run_table = top.table("run")?.ok_or(ScenarioError::Missing {
            field: "run".into(),
        })?;
        let (run, overrides) = parse_run(run_table)?;
        let workload_table = top.table("workload")?.ok_or(ScenarioError::Missing {
            field: "workload".into(),
        })?;
        let mut workload = parse_workload(workload_table, &overrides, files)?;
        let array_tables = top.tables("array")?;
        let step_tables = top.tables("step")?;
        top.finish()?;
        let arrays = parse_arrays(&array_tables, catalog)?;
        let procedure = match step_tables.is_empty() {
            true => None,
            false => Some(parse_procedure(
                &step_tables,
                workload_table,
                &run,
                &mut workload,
            )?),
        };
        let runs: Vec<Timing> = match &procedure {
            Some(procedure) => procedure.runs().map(|run| run.timing).collect(),
            None => vec![workload.timing],
        };
        for timing in &runs {
            check_snapshot_schedule(&run, timing, &arrays)?;
        }
        check_snap_sched(&run, &arrays)?;
        Ok(Scenario {
            name,
            run,
            workload,
            arrays,
            procedure,
        })
    }

    /// The workload each array runs, in order: the scenario's, with the
    /// array's own outstanding I/Os if it sets them.
    pub fn workloads(&self) -> Vec<Workload> {
        self.arrays
            .iter()
            .map(|entry| Workload {
                outstanding_per_worker: entry
                    .outstanding_ios
                    .unwrap_or(self.workload.outstanding_per_worker),
                ..self.workload.clone()
            })
            .collect()
    }
}

/// The `[[step]]` tables as a procedure: its fill and reallocate steps
/// become the workload's preparation, so the workload may not set its own,
/// and a `snap sched` (the engine's clock through one run) is refused.
fn parse_procedure(
    tables: &[&Table],
    workload_table: &Table,
    run: &RunOptions,
    workload: &mut Workload,
) -> Result<Procedure, ScenarioError> {
    if let Some(key) = ["fill", "reallocate"]
        .into_iter()
        .find(|key| workload_table.contains_key(*key))
    {
        return Err(ScenarioError::Invalid {
            field: format!("workload.{key}"),
            reason: "with `[[step]]` tables the preparation is the steps': write a \
                     `fill` or `reallocate` step"
                .into(),
        });
    }
    if run.snap_sched.is_some() {
        return Err(ScenarioError::Invalid {
            field: "run.snap_sched".into(),
            reason: "a procedure takes snapshots by `snapshot` steps or `snapshot_every_s`; \
                     a `snap sched` runs on the engine's clock through one run"
                .into(),
        });
    }
    let (prepare, procedure) = procedure::parse(tables, workload)?;
    workload.prepare = prepare;
    for (index, step) in procedure.runs().enumerate() {
        (step.workload(workload).check()).map_err(|error| ScenarioError::Invalid {
            field: "step".into(),
            reason: format!("run {} ({}): {error}", index + 1, step.label),
        })?;
    }
    Ok(procedure)
}

/// Checks that every array can keep every snapshot the schedule takes in a
/// run of `timing`: a wafer volume keeps at most 255, an in-place LUN 8
/// (SnapView sessions), and only with a reserved LUN pool.
fn check_snapshot_schedule(
    run: &RunOptions,
    timing: &Timing,
    arrays: &[ArrayEntry],
) -> Result<(), ScenarioError> {
    let Some(every) = run.snapshot_every else {
        return Ok(());
    };
    let taken = (timing.total().0.saturating_sub(1) / every.0) as usize;
    for (index, entry) in arrays.iter().enumerate() {
        let most = match &entry.spec {
            ArraySpec::Wafer(_) => wafer_core::filer::meta::MAX_SNAPSHOTS,
            ArraySpec::InPlace(spec) if spec.snapshots.is_none() => {
                return Err(ScenarioError::Missing {
                    field: format!("array[{index}].reserved_lun_pool_gib"),
                });
            }
            ArraySpec::InPlace(_) => usize::from(SESSIONS_PER_LUN_MAX),
        };
        if taken > most {
            let reason = format!(
                "{taken} snapshots in the run; array `{}` keeps at most {most} per {}",
                entry.spec.name(),
                match entry.spec {
                    ArraySpec::Wafer(_) => "volume",
                    ArraySpec::InPlace(_) => "LUN",
                }
            );
            return Err(ScenarioError::Invalid {
                field: "run.snapshot_every_s".into(),
                reason,
            });
        }
    }
    Ok(())
}

/// Refuses a `snap sched` beside an in-place array: its snapshots are
/// copy-on-first-write sessions, taken every `snapshot_every_s`, and it has
/// no volumes to schedule.
fn check_snap_sched(run: &RunOptions, arrays: &[ArrayEntry]) -> Result<(), ScenarioError> {
    let in_place = arrays
        .iter()
        .find(|entry| matches!(entry.spec, ArraySpec::InPlace(_)));
    match (run.snap_sched, in_place) {
        (Some(_), Some(entry)) => Err(ScenarioError::Invalid {
            field: "run.snap_sched".into(),
            reason: format!(
                "array `{}` is in-place: `snap sched` is a wafer volume's (an in-place array takes copy-on-first-write snapshots every `snapshot_every_s`)",
                entry.spec.name()
            ),
        }),
        _ => Ok(()),
    }
}

/// A TOML error, located by line.
pub(crate) fn syntax(text: &str, error: &toml::de::Error) -> ScenarioError {
    let at = error.span().map_or(0, |span| span.start).min(text.len());
    ScenarioError::Syntax {
        line: text[..at].matches('\n').count() + 1,
        message: error.message().to_string(),
    }
}

/// `[run]`'s overrides of the workload's timing.
#[derive(Clone, Copy, Debug, Default)]
struct TimingOverrides {
    ramp: Option<Duration>,
    segment: Option<Duration>,
    segments: Option<u32>,
}

impl TimingOverrides {
    /// The timing: each part from `[run]` if set there, else the workload's,
    /// else the default (no ramp-up, one segment); the segment length must
    /// come from one of them.
    fn resolve(&self, own: &TimingOverrides) -> Result<Timing, ScenarioError> {
        let segment = self.segment.or(own.segment).ok_or(ScenarioError::Missing {
            field: "run.segment_s".into(),
        })?;
        Ok(Timing {
            ramp: self.ramp.or(own.ramp).unwrap_or_default(),
            segment,
            segments: self.segments.or(own.segments).unwrap_or(1),
        })
    }
}

fn parse_run(table: &Table) -> Result<(RunOptions, TimingOverrides), ScenarioError> {
    let mut fields = Fields::new(table, "run");
    let seed = fields.integer("seed")?.ok_or(ScenarioError::Missing {
        field: "run.seed".into(),
    })?;
    let interval = fields
        .seconds("sysstat_interval_s")?
        .unwrap_or(SYSSTAT_INTERVAL_DEFAULT);
    if interval.0 == 0 {
        return Err(fields.invalid("sysstat_interval_s", "the interval must last"));
    }
    let overrides = TimingOverrides {
        ramp: fields.seconds("ramp_s")?,
        segment: fields.seconds("segment_s")?,
        segments: fields.count("segments")?,
    };
    let snapshot_every = fields.seconds("snapshot_every_s")?;
    if snapshot_every == Some(Duration(0)) {
        return Err(fields.invalid("snapshot_every_s", "snapshots must be some time apart"));
    }
    let per_minute = parse_per_minute(&mut fields)?;
    let snap_sched = parse_snap_sched(&mut fields)?;
    if snap_sched.is_some() && snapshot_every.is_some() {
        return Err(fields.invalid(
            "snap_sched",
            "a run takes snapshots on one schedule: `snapshot_every_s` or `snap_sched`, not both",
        ));
    }
    fields.finish()?;
    let run = RunOptions {
        seed,
        sysstat_interval: interval,
        snapshot_every,
        snap_sched,
        per_minute,
    };
    Ok((run, overrides))
}

/// `per_minute = true`, and with it, optionally, `latency_threshold_us`.
fn parse_per_minute(fields: &mut Fields) -> Result<Option<PerMinute>, ScenarioError> {
    let threshold = fields.microseconds("latency_threshold_us")?;
    if !fields.boolean("per_minute")?.unwrap_or(false) {
        return match threshold {
            Some(_) => Err(fields.invalid(
                "latency_threshold_us",
                "it is watched for minute by minute: set `per_minute = true`",
            )),
            None => Ok(None),
        };
    }
    if threshold == Some(Duration(0)) {
        return Err(fields.invalid("latency_threshold_us", "no I/O takes no time"));
    }
    Ok(Some(PerMinute {
        latency_threshold: threshold,
    }))
}

/// `snap_sched = "1 0 2"`, and with it, optionally, `clock_start = "Sat
/// 22:59:50"`.
fn parse_snap_sched(fields: &mut Fields) -> Result<Option<SnapSched>, ScenarioError> {
    let clock_start = (fields.string("clock_start")?)
        .map(|text| WeekTime::parse(text).map_err(|reason| fields.invalid("clock_start", reason)))
        .transpose()?;
    let Some(text) = fields.string("snap_sched")? else {
        return match clock_start {
            Some(_) => Err(fields.invalid(
                "clock_start",
                "it places the hours of a schedule: set `snap_sched`",
            )),
            None => Ok(None),
        };
    };
    let schedule = parse_schedule(text).map_err(|reason| fields.invalid("snap_sched", reason))?;
    Ok(Some(SnapSched {
        schedule,
        clock_start,
    }))
}

fn parse_workload(
    table: &Table,
    overrides: &TimingOverrides,
    files: &Files<'_>,
) -> Result<Workload, ScenarioError> {
    let mut fields = Fields::new(table, "workload");
    let kind = fields.required_string("kind")?;
    let mut workload = match kind {
        "iometer" => parse_iometer(&mut fields, overrides, files)?,
        "fio" => parse_fio(&mut fields, overrides, files)?,
        "orion" => parse_orion(&mut fields, overrides)?,
        other => {
            return Err(fields.invalid(
                "kind",
                format!("`{other}`: expected `iometer`, `fio` or `orion`"),
            ));
        }
    };
    if let Some(offered) = fields.count("offered_iops")? {
        if workload.offered_iops.is_some() {
            return Err(fields.invalid("offered_iops", "the fio job sets rate_iops already"));
        }
        workload.offered_iops = Some(offered);
    }
    if let Some(set) = parse_moving_set(&mut fields)? {
        if workload.distribution != Distribution::Uniform {
            return Err(fields.invalid(
                "working_set_percent",
                "the fio job names a random_distribution already",
            ));
        }
        workload.distribution = Distribution::Moving(set);
    }
    workload.check().map_err(|error| workload_error(&error))?;
    fields.finish()?;
    Ok(workload)
}

/// A moving working set: `working_set_percent` with `working_set_sweep_s`,
/// and `working_set_share_percent` (default 100).
fn parse_moving_set(fields: &mut Fields) -> Result<Option<MovingSet>, ScenarioError> {
    let percent = fields.count("working_set_percent")?;
    let sweep = fields.seconds("working_set_sweep_s")?;
    let share = fields.count("working_set_share_percent")?;
    match (percent, sweep) {
        (Some(percent), Some(sweep)) => Ok(Some(MovingSet {
            percent,
            share_percent: share.unwrap_or(100),
            sweep,
        })),
        (Some(_), None) => Err(fields.invalid(
            "working_set_sweep_s",
            "a moving working set needs the time it takes to cross the LUNs",
        )),
        (None, _) if sweep.is_some() || share.is_some() => Err(fields.invalid(
            "working_set_percent",
            "the working set's size is needed with its sweep or share",
        )),
        (None, _) => Ok(None),
    }
}

fn parse_iometer(
    fields: &mut Fields,
    overrides: &TimingOverrides,
    files: &Files<'_>,
) -> Result<Workload, ScenarioError> {
    let icf = parse_icf(fields, files)?;
    let (file, icf_spec) = match &icf {
        Some((file, spec)) => (Some(file), Some(spec)),
        None => (None, None),
    };
    let own = TimingOverrides {
        ramp: fields.seconds("ramp_s")?.or(file.and_then(|f| f.ramp_up)),
        segment: fields.seconds("run_s")?.or(file.and_then(|f| f.run_time)),
        segments: fields.count("segments")?,
    };
    let line_tables = fields.tables("lines")?;
    let lines = match icf_spec {
        Some(spec) if line_tables.is_empty() => spec.lines.clone(),
        Some(_) => {
            return Err(fields.invalid("icf_file", "give `icf_file` or `lines`, not both"));
        }
        None => line_tables
            .iter()
            .enumerate()
            .map(|(index, table)| parse_line(table, index))
            .collect::<Result<Vec<AccessLine>, ScenarioError>>()?,
    };
    let timing = overrides.resolve(&own)?;
    // Each setting from the scenario if it sets it, else from the .icf
    // file's workers, else the default.
    let outstanding_ios = match (fields.count("outstanding_ios")?, file) {
        (Some(depth), _) => depth,
        (None, Some(file)) => from_file(fields, file.outstanding_ios())?.unwrap_or(1),
        (None, None) => fields.required_count("outstanding_ios")?,
    };
    let length_bytes = match (fields.size("test_file")?, file) {
        (Some(length), _) => Some(length),
        (None, Some(file)) => from_file(fields, file.test_file_bytes())?,
        (None, None) => None,
    };
    let offset = fields.size("test_file_offset")?;
    let increment = fields.size("worker_offset_increment")?;
    let (file_offset, file_increment) = match (file, offset.is_some() && increment.is_some()) {
        (Some(file), false) => from_file(fields, file.starts_bytes())?,
        _ => (0, 0),
    };
    let default_name = icf_spec.map_or("iometer", |spec| spec.name.as_str());
    let spec = IometerSpec {
        name: fields.string("name")?.unwrap_or(default_name).to_string(),
        lines,
        workers: (fields.count("workers")?)
            .or(file.and_then(IcfFile::disk_workers))
            .unwrap_or(1),
        outstanding_ios,
        ramp_up: timing.ramp,
        run_time: timing.segment,
        segments: timing.segments,
        test_file: Region {
            offset_bytes: offset.unwrap_or(file_offset),
            length_bytes,
            offset_increment_bytes: increment.unwrap_or(file_increment),
            lun_active_percent: fields.count("lun_active_percent")?,
        },
        reallocate_first: fields.boolean("reallocate")?.unwrap_or(false),
    };
    let mut workload = spec.workload().map_err(|error| workload_error(&error))?;
    workload.prepare.fill = fields.boolean("fill")?.unwrap_or(true);
    Ok(workload)
}

/// A value from the `.icf` file, its error named by `icf_file`.
fn from_file<T>(fields: &Fields, value: Result<T, IcfError>) -> Result<T, ScenarioError> {
    value.map_err(|error| fields.invalid("icf_file", error.to_string()))
}

/// A file the scenario names under `key`, read through `files`.
fn read_file(
    fields: &mut Fields,
    key: &str,
    files: &Files<'_>,
) -> Result<Option<String>, ScenarioError> {
    let Some(path) = fields.string(key)? else {
        return Ok(None);
    };
    files(path)
        .map(Some)
        .map_err(|reason| fields.invalid(key, format!("cannot read `{path}`: {reason}")))
}

/// An IOmeter `.icf` file (`icf_file`) and the access specification of it
/// to run (`icf_spec`, or the one its workers are assigned).
fn parse_icf(
    fields: &mut Fields,
    files: &Files<'_>,
) -> Result<Option<(IcfFile, IcfSpec)>, ScenarioError> {
    let wanted = fields.string("icf_spec")?;
    let Some(text) = read_file(fields, "icf_file", files)? else {
        return match wanted {
            Some(_) => Err(fields.invalid("icf_spec", "it names a specification of `icf_file`")),
            None => Ok(None),
        };
    };
    let file =
        IcfFile::parse(&text).map_err(|error| fields.invalid("icf_file", error.to_string()))?;
    let spec = file.spec(wanted).map_err(|error| match (&error, wanted) {
        (IcfError::UnknownSpec { .. }, Some(_)) => fields.invalid("icf_spec", error.to_string()),
        _ => fields.invalid("icf_file", error.to_string()),
    })?;
    let spec = spec.clone();
    Ok(Some((file, spec)))
}

/// One data point of Orion's matrix, by Orion's own option names.
fn parse_orion(
    fields: &mut Fields,
    overrides: &TimingOverrides,
) -> Result<Workload, ScenarioError> {
    if let Some(matrix) = fields.string("matrix")?
        && matrix != "point"
    {
        return Err(fields.invalid(
            "matrix",
            format!(
                "`{matrix}`: the lab runs one data point per scenario (`point`); write one \
                 scenario per point of a matrix"
            ),
        ));
    }
    let large_type = match fields.string("type")?.unwrap_or("rand") {
        "rand" => LargeType::Random,
        "seq" => LargeType::Sequential,
        other => return Err(fields.invalid("type", format!("`{other}`: expected `rand` or `seq`"))),
    };
    let num_stream_io = fields.count("num_streamIO")?;
    if num_stream_io.is_some() && large_type == LargeType::Random {
        return Err(fields.invalid("num_streamIO", "streams are `type = \"seq\"`'s"));
    }
    let own = TimingOverrides {
        ramp: fields.seconds("ramp_s")?,
        segment: fields.seconds("duration_s")?,
        segments: fields.count("segments")?,
    };
    let timing = overrides.resolve(&own)?;
    let spec = OrionSpec {
        name: fields.string("name")?.unwrap_or("orion").to_string(),
        num_small: fields.count("num_small")?.unwrap_or(0),
        num_large: fields.count("num_large")?.unwrap_or(0),
        size_small: fields.size("size_small")?.unwrap_or(8 << 10),
        size_large: fields.size("size_large")?.unwrap_or(1 << 20),
        large_type,
        num_stream_io: num_stream_io.unwrap_or(orion::STREAM_IOS_DEFAULT),
        write_percent: fields.count("write")?.unwrap_or(0),
        ramp: timing.ramp,
        duration: timing.segment,
        segments: timing.segments,
    };
    let mut workload = spec.workload().map_err(|error| workload_error(&error))?;
    workload.prepare.fill = fields.boolean("fill")?.unwrap_or(true);
    Ok(workload)
}

fn parse_line(table: &Table, index: usize) -> Result<AccessLine, ScenarioError> {
    let mut fields = Fields::new(table, &format!("workload.lines[{index}]"));
    let line = AccessLine {
        size_bytes: fields.required_size("size")?,
        percent: fields.required_count("percent")?,
        read_percent: fields.required_count("read_percent")?,
        random_percent: fields.required_count("random_percent")?,
        align_bytes: fields.size("align")?.unwrap_or(0),
    };
    fields.finish()?;
    Ok(line)
}

fn parse_fio(
    fields: &mut Fields,
    overrides: &TimingOverrides,
    files: &Files<'_>,
) -> Result<Workload, ScenarioError> {
    let job_file = read_file(fields, "job_file", files)?;
    let (job, source) = match (fields.string("job")?, fields.table("options")?, job_file) {
        (Some(text), None, None) => (
            FioJob::parse(text).map_err(|error| fio_error(fields, "job", &error))?,
            "job",
        ),
        (None, None, Some(text)) => (
            FioJob::parse(&text).map_err(|error| fio_error(fields, "job_file", &error))?,
            "job_file",
        ),
        (None, Some(options), None) => (inline_job(fields, options)?, "options"),
        (_, _, Some(_)) => {
            return Err(fields.invalid(
                "job_file",
                "give one of `job_file`, `job` or `options`, not several",
            ));
        }
        (Some(_), Some(_), None) => {
            return Err(fields.invalid("options", "give `job` or `options`, not both"));
        }
        (None, None, None) => {
            return Err(ScenarioError::Missing {
                field: fields.name("job"),
            });
        }
    };
    let own = TimingOverrides {
        ramp: job
            .ramp_time()
            .map_err(|error| fio_error(fields, source, &error))?,
        segment: job
            .runtime()
            .map_err(|error| fio_error(fields, source, &error))?,
        segments: None,
    };
    let timing = overrides.resolve(&own)?;
    let mut workload = job
        .workload_timed(timing)
        .map_err(|error| fio_error(fields, source, &error))?;
    workload.prepare.fill = fields.boolean("fill")?.unwrap_or(false);
    workload.prepare.reallocate = fields.boolean("reallocate")?.unwrap_or(false);
    workload.region.lun_active_percent = fields.count("lun_active_percent")?;
    workload.check().map_err(|error| workload_error(&error))?;
    Ok(workload)
}

/// A fio job from `[workload.options]`: strings as written, numbers in
/// decimal, booleans as fio's 1 and 0.
fn inline_job(fields: &Fields, options: &Table) -> Result<FioJob, ScenarioError> {
    let mut values = BTreeMap::new();
    for (key, value) in options {
        let text = match value {
            Value::String(text) => text.clone(),
            Value::Integer(number) => number.to_string(),
            Value::Float(number) => number.to_string(),
            Value::Boolean(flag) => u8::from(*flag).to_string(),
            other => {
                let reason = format!(
                    "expected a string, number or boolean, found {}",
                    other.type_str()
                );
                return Err(fields.invalid(&format!("options.{key}"), reason));
            }
        };
        values.insert(key.clone(), text);
    }
    FioJob::from_options("workload", values).map_err(|error| fio_error(fields, "options", &error))
}

/// A fio error, named by the option it is about where it names one.
fn fio_error(fields: &Fields, key: &str, error: &FioError) -> ScenarioError {
    match error {
        FioError::Workload(inner) => workload_error(inner),
        FioError::Value { option, .. }
        | FioError::Unsupported { option }
        | FioError::Missing { option, .. }
            if key == "options" =>
        {
            fields.invalid(&format!("options.{option}"), error.to_string())
        }
        _ => fields.invalid(key, error.to_string()),
    }
}

fn workload_error(error: &WorkloadError) -> ScenarioError {
    match error {
        WorkloadError::Invalid { field, reason } => ScenarioError::Invalid {
            field: format!("workload.{field}"),
            reason: reason.clone(),
        },
        other => ScenarioError::Invalid {
            field: "workload".into(),
            reason: other.to_string(),
        },
    }
}

fn parse_arrays(tables: &[&Table], catalog: &Catalog) -> Result<Vec<ArrayEntry>, ScenarioError> {
    if tables.is_empty() {
        return Err(ScenarioError::Missing {
            field: "array".into(),
        });
    }
    if tables.len() > ARRAYS_MAX {
        let reason = format!("{} arrays; at most {ARRAYS_MAX}", tables.len());
        return Err(ScenarioError::Invalid {
            field: "array".into(),
            reason,
        });
    }
    let mut names = BTreeSet::new();
    let mut entries = Vec::with_capacity(tables.len());
    for (index, table) in tables.iter().enumerate() {
        let mut fields = Fields::new(table, &format!("array[{index}]"));
        let entry = parse_array(&mut fields, catalog)?;
        if !names.insert(entry.spec.name().to_string()) {
            return Err(fields.invalid("name", format!("`{}` names two arrays", entry.spec.name())));
        }
        fields.finish()?;
        entries.push(entry);
    }
    Ok(entries)
}

fn parse_array(fields: &mut Fields, catalog: &Catalog) -> Result<ArrayEntry, ScenarioError> {
    let name = fields.required_string("name")?.to_string();
    let outstanding_ios = fields.count("outstanding_ios")?;
    if outstanding_ios == Some(0) {
        return Err(fields.invalid("outstanding_ios", "at least one I/O in flight"));
    }
    let spec = match fields.required_string("kind")? {
        "in-place" => ArraySpec::InPlace(parse_in_place(fields, name, catalog)?),
        "wafer" => ArraySpec::Wafer(parse_wafer(fields, name, catalog)?),
        other => {
            return Err(
                fields.invalid("kind", format!("`{other}`: expected `in-place` or `wafer`"))
            );
        }
    };
    Ok(ArrayEntry {
        spec,
        outstanding_ios,
    })
}

fn parse_in_place(
    fields: &mut Fields,
    name: String,
    catalog: &Catalog,
) -> Result<InPlaceSpec, ScenarioError> {
    if let Some(raid) = fields.string("raid")?.filter(|raid| *raid != "raid5") {
        return Err(fields.invalid(
            "raid",
            format!("`{raid}`: the in-place comparator implements raid5"),
        ));
    }
    let cache_mib = fields.count("cache_mib")?;
    let cache_latency = fields.microseconds("cache_latency_us")?;
    if cache_latency.is_some() && cache_mib.is_none() {
        return Err(fields.invalid("cache_latency_us", "set without a cache (`cache_mib`)"));
    }
    let (raid_groups, disks) = parse_in_place_groups(fields)?;
    let spec = InPlaceSpec {
        name,
        drive: fields.required_string("drive")?.to_string(),
        disks,
        raid_groups,
        stripe_unit_bytes: fields.required_size("stripe_unit")?,
        stripe_width: fields.count("stripe_width")?,
        luns: parse_in_place_luns(fields)?,
        placement: parse_lun_placement(fields)?,
        cache: cache_mib.map(|capacity_mib| CacheSpec {
            capacity_mib,
            latency: cache_latency.unwrap_or(CACHE_LATENCY_DEFAULT),
        }),
        controller: parse_controller(fields)?,
        snapshots: parse_reserved_pool(fields)?,
    };
    spec.check(catalog)
        .map_err(|error| in_place_error(fields, &error))?;
    Ok(spec)
}

/// An in-place array's RAID-5 groups and disks per group: `disks` alone is
/// one group; `raid_groups` takes `disks_per_group` beside it, and refuses
/// `disks`, which could mean either the total or each group's.
fn parse_in_place_groups(fields: &mut Fields) -> Result<(u32, u32), ScenarioError> {
    let Some(groups) = fields.count("raid_groups")? else {
        if fields.has("disks_per_group") {
            return Err(fields.invalid("disks_per_group", "set without `raid_groups`"));
        }
        return Ok((1, fields.required_count("disks")?));
    };
    if fields.has("disks") {
        let reason = "ambiguous beside `raid_groups` (every group's or the array's?): \
                      give `disks_per_group`";
        return Err(fields.invalid("disks", reason));
    }
    Ok((groups, fields.required_count("disks_per_group")?))
}

/// An in-place array's LUNs: `lun_<unit>` for one, or `[[array.lun]]`
/// tables of `size_<unit>` each, in address order.
fn parse_in_place_luns(fields: &mut Fields) -> Result<Vec<u64>, ScenarioError> {
    let tables = fields.tables("lun")?;
    if tables.is_empty() {
        return Ok(vec![fields.required_size("lun")?]);
    }
    if fields.size("lun")?.is_some() {
        return Err(fields.invalid("lun", "give `lun` tables or a size, not both"));
    }
    let mut luns = Vec::with_capacity(tables.len());
    for (index, table) in tables.iter().enumerate() {
        let mut inner = Fields::new(table, &fields.name(&format!("lun[{index}]")));
        let bytes = inner.required_size("size")?;
        if bytes == 0 {
            return Err(inner.invalid("size", "an empty LUN"));
        }
        inner.finish()?;
        luns.push(bytes);
    }
    Ok(luns)
}

/// How an in-place array's LUNs lie on its groups: striped MetaLUNs
/// (`metalun = true`, the default, with `metalun_multiplier`, default 4), or
/// whole LUNs round the groups (`metalun = false`).
fn parse_lun_placement(fields: &mut Fields) -> Result<LunPlacement, ScenarioError> {
    let multiplier = fields.count("metalun_multiplier")?;
    match (fields.boolean("metalun")?, multiplier) {
        (Some(false), Some(_)) => Err(fields.invalid(
            "metalun_multiplier",
            "set beside `metalun = false`: whole LUNs have no meta stripe elements",
        )),
        (Some(false), None) => Ok(LunPlacement::RoundRobin),
        (_, multiplier) => Ok(LunPlacement::Striped {
            multiplier: multiplier.unwrap_or(METALUN_MULTIPLIER_DEFAULT),
        }),
    }
}

/// The reserved LUN pool of an in-place array's copy-on-first-write
/// snapshots (`reserved_lun_pool_<unit>`, and `cow_chunk_<unit>`, by
/// default 64 KiB), if it has one.
fn parse_reserved_pool(fields: &mut Fields) -> Result<Option<ReservedPoolSpec>, ScenarioError> {
    let chunk = fields.size("cow_chunk")?;
    let Some(pool_bytes) = fields.size("reserved_lun_pool")? else {
        if chunk.is_some() {
            return Err(fields.invalid("cow_chunk", "set without `reserved_lun_pool_<unit>`"));
        }
        return Ok(None);
    };
    Ok(Some(ReservedPoolSpec {
        pool_bytes,
        chunk_bytes: chunk.unwrap_or(CHUNK_BYTES_DEFAULT),
    }))
}

/// The controller an array names, from the lab's controller catalog.
fn parse_controller(fields: &mut Fields) -> Result<Option<ControllerSpec>, ScenarioError> {
    let Some(name) = fields.string("controller")? else {
        return Ok(None);
    };
    let catalog = ControllerCatalog::builtin();
    match catalog.get(name) {
        Some(spec) => Ok(Some(spec.clone())),
        None => {
            let known: Vec<&str> = catalog.names().collect();
            let reason = format!(
                "`{name}`: not in controllers.toml (it has {})",
                known.join(", ")
            );
            Err(fields.invalid("controller", reason))
        }
    }
}

fn in_place_error(fields: &Fields, error: &InPlaceError) -> ScenarioError {
    match error {
        InPlaceError::Invalid { field, reason, .. } => {
            // Beside `raid_groups`, each group's disks are `disks_per_group`.
            let key = match *field {
                "disks" if fields.has("raid_groups") => "disks_per_group",
                other => other,
            };
            fields.invalid(key, reason.clone())
        }
        InPlaceError::UnknownDrive { .. } | InPlaceError::NotADisk { .. } => {
            fields.invalid("drive", error.to_string())
        }
    }
}

fn parse_wafer(
    fields: &mut Fields,
    name: String,
    catalog: &Catalog,
) -> Result<WaferSpec, ScenarioError> {
    let aggregate_tables = fields.tables("aggregate")?;
    let aggregates = match aggregate_tables.is_empty() {
        true => vec![parse_aggregate(fields, "aggr0".into(), catalog)?],
        false => {
            const OWN_KEYS: [&str; 4] = ["drive", "raid_type", "raid_size", "disks"];
            if let Some(key) = OWN_KEYS.iter().find(|key| fields.has(key)) {
                return Err(fields.invalid(
                    key,
                    "give `aggregate` tables or one aggregate's keys, not both",
                ));
            }
            if aggregate_tables.len() > wafer_core::node::MAX_AGGREGATES {
                let reason = format!(
                    "{} aggregates; a node serves at most {}",
                    aggregate_tables.len(),
                    wafer_core::node::MAX_AGGREGATES
                );
                return Err(fields.invalid("aggregate", reason));
            }
            let mut aggregates: Vec<AggregateSpec> = Vec::new();
            for (index, table) in aggregate_tables.iter().enumerate() {
                let mut inner = Fields::new(table, &fields.name(&format!("aggregate[{index}]")));
                let name = inner.required_string("name")?.to_string();
                if aggregates.iter().any(|a| a.name == name) {
                    return Err(inner.invalid("name", format!("`{name}` names two aggregates")));
                }
                aggregates.push(parse_aggregate(&mut inner, name, catalog)?);
                inner.finish()?;
            }
            aggregates
        }
    };
    let (volumes, luns) = parse_volumes_and_luns(fields, &aggregates, catalog)?;
    let spec = WaferSpec {
        name,
        aggregates,
        volumes,
        luns,
        cache_mib: fields.count("cache_mib")?,
        controller: parse_controller(fields)?,
        flash_cache: parse_flash_cache(fields, catalog)?,
    };
    if spec.cache_mib == Some(0) {
        return Err(fields.invalid("cache_mib", "a buffer cache of at least 1 MiB"));
    }
    Ok(spec)
}

/// A wafer array's Flash Cache keys: `flash_cache_mib`, with
/// `flash_cache_drive` (an SSD of the catalog, default
/// [`FLASH_CACHE_DRIVE`]) and `flash_cache_lopri` (default false).
fn parse_flash_cache(
    fields: &mut Fields,
    catalog: &Catalog,
) -> Result<Option<FlashCacheSpec>, ScenarioError> {
    let mib = fields.count("flash_cache_mib")?;
    let drive = fields.string("flash_cache_drive")?;
    let lopri = fields.boolean("flash_cache_lopri")?;
    let Some(mib) = mib else {
        if drive.is_some() || lopri.is_some() {
            let key = if drive.is_some() {
                "flash_cache_drive"
            } else {
                "flash_cache_lopri"
            };
            return Err(fields.invalid(key, "set without a Flash Cache (`flash_cache_mib`)"));
        }
        return Ok(None);
    };
    let drive = drive.unwrap_or(FLASH_CACHE_DRIVE).to_string();
    let ssd = match catalog.get(&drive) {
        Some(ssd @ Drive::Ssd(_)) => ssd,
        _ => {
            return Err(fields.invalid(
                "flash_cache_drive",
                format!("`{drive}` is not an SSD of the catalog"),
            ));
        }
    };
    let capacity_mib = (ssd.device().capacity_blocks() * wafer_core::BLOCK_SIZE as u64) >> 20;
    if mib == 0 || u64::from(mib) > capacity_mib {
        return Err(fields.invalid(
            "flash_cache_mib",
            format!("{mib} MiB: 1 to {capacity_mib} MiB fit `{drive}`"),
        ));
    }
    Ok(Some(FlashCacheSpec {
        mib,
        drive,
        lopri_blocks: lopri.unwrap_or(false),
    }))
}

/// One aggregate's keys (`drive`, `raid_type`, `raid_size`, `disks`),
/// checked against ONTAP's `raidsize` limits.
fn parse_aggregate(
    fields: &mut Fields,
    name: String,
    catalog: &Catalog,
) -> Result<AggregateSpec, ScenarioError> {
    let drive = fields.required_string("drive")?.to_string();
    if matches!(catalog.get(&drive), Some(Drive::Nvram(_)) | None) {
        return Err(fields.invalid(
            "drive",
            format!("`{drive}` is not a disk or SSD of the catalog"),
        ));
    }
    let raid_type = match fields.required_string("raid_type")? {
        "raid_dp" => RaidType::RaidDp,
        "raid4" => RaidType::Raid4,
        other => {
            return Err(fields.invalid(
                "raid_type",
                format!("`{other}`: expected `raid_dp` or `raid4`"),
            ));
        }
    };
    let spec = AggregateSpec {
        name,
        drive,
        raid_type,
        raid_size: fields.required_count("raid_size")?,
        disks: fields.required_count("disks")?,
    };
    let limits = spec.raid_type.group_size_limits();
    let (least, most) = (u32::from(*limits.start()), u32::from(*limits.end()));
    if !(least..=most).contains(&spec.raid_size) {
        let reason = format!(
            "{}: {} groups take {least} to {most} disks",
            spec.raid_size, spec.raid_type
        );
        return Err(fields.invalid("raid_size", reason));
    }
    match spec.group_sizes().last() {
        None => return Err(fields.invalid("disks", "an aggregate needs disks")),
        Some(&last) if last < least => {
            let reason = format!(
                "{} disks leave a last group of {last}, under the {least} a {} group needs",
                spec.disks, spec.raid_type
            );
            return Err(fields.invalid("disks", reason));
        }
        Some(_) => {}
    }
    Ok(spec)
}

/// The bytes an aggregate's data disks hold.
fn aggregate_data_bytes(aggregate: &AggregateSpec, catalog: &Catalog) -> (u64, u64) {
    let disk_bytes = catalog
        .get(&aggregate.drive)
        .map_or(0, |drive| drive.device().capacity_blocks() * BLOCK_BYTES);
    let parity = u32::from(aggregate.raid_type.parity_disks());
    let data_disks: u64 = (aggregate.group_sizes().iter())
        .map(|&size| u64::from(size - parity))
        .sum();
    (data_disks, data_disks * disk_bytes)
}

/// A volume's buffer-cache policy under `key`: `keep`, `default` (also
/// when absent) or `reuse`, as ONTAP's `priority set volume VOL cache=`.
fn parse_cache_policy(fields: &mut Fields, key: &str) -> Result<CachePolicy, ScenarioError> {
    match fields.string(key)? {
        None | Some("default") => Ok(CachePolicy::Default),
        Some("keep") => Ok(CachePolicy::Keep),
        Some("reuse") => Ok(CachePolicy::Reuse),
        Some(other) => Err(fields.invalid(
            key,
            format!("`{other}`: expected `keep`, `default` or `reuse`"),
        )),
    }
}

/// The volumes and LUNs: `[[array.volume]]` and `[[array.lun]]` tables, or
/// one volume (`volume_<unit>`) on the first aggregate holding one LUN
/// (`lun_<unit>`). Each aggregate's volumes fit its data disks, each
/// volume's LUNs the volume.
fn parse_volumes_and_luns(
    fields: &mut Fields,
    aggregates: &[AggregateSpec],
    catalog: &Catalog,
) -> Result<(Vec<VolumeSpec>, Vec<LunSpec>), ScenarioError> {
    let volume_tables = fields.tables("volume")?;
    let lun_tables = fields.tables("lun")?;
    if volume_tables.is_empty() != lun_tables.is_empty() {
        let missing = match volume_tables.is_empty() {
            true => "volume",
            false => "lun",
        };
        return Err(ScenarioError::Missing {
            field: fields.name(missing),
        });
    }
    if volume_tables.is_empty() {
        let volume_bytes = fields.required_size("volume")?;
        let lun_bytes = fields.required_size("lun")?;
        let (data_disks, data_bytes) = aggregate_data_bytes(&aggregates[0], catalog);
        if volume_bytes == 0 || volume_bytes > data_bytes {
            let reason = format!(
                "{volume_bytes} bytes; the aggregate's {data_disks} data disks hold {data_bytes}"
            );
            return Err(fields.invalid("volume", reason));
        }
        if lun_bytes == 0 || lun_bytes > volume_bytes {
            let reason = format!("{lun_bytes} bytes; the volume holds {volume_bytes}");
            return Err(fields.invalid("lun", reason));
        }
        let mut single = WaferSpec::single("", aggregates[0].clone(), volume_bytes, lun_bytes);
        single.volumes[0].cache_policy = parse_cache_policy(fields, "volume_cache")?;
        return Ok((single.volumes, single.luns));
    }
    for key in ["volume", "lun"] {
        if fields.size(key)?.is_some() {
            return Err(fields.invalid(key, "give `volume` and `lun` tables or sizes, not both"));
        }
    }
    let mut volumes: Vec<VolumeSpec> = Vec::new();
    let mut used = vec![0u64; aggregates.len()];
    for (index, table) in volume_tables.iter().enumerate() {
        let mut inner = Fields::new(table, &fields.name(&format!("volume[{index}]")));
        let name = inner.required_string("name")?.to_string();
        if volumes.iter().any(|v| v.name == name) {
            return Err(inner.invalid("name", format!("`{name}` names two volumes")));
        }
        let aggregate = match (inner.string("aggregate")?, aggregates.len()) {
            (None, 1) => 0,
            (None, _) => {
                return Err(ScenarioError::Missing {
                    field: inner.name("aggregate"),
                });
            }
            (Some(wanted), _) => (aggregates.iter().position(|a| a.name == wanted))
                .ok_or_else(|| inner.invalid("aggregate", format!("no aggregate `{wanted}`")))?,
        };
        let size_bytes = inner.required_size("size")?;
        used[aggregate] += size_bytes;
        let (data_disks, data_bytes) = aggregate_data_bytes(&aggregates[aggregate], catalog);
        if size_bytes == 0 || used[aggregate] > data_bytes {
            let reason = format!(
                "{size_bytes} bytes, {} in all on {}; its {data_disks} data disks hold {data_bytes}",
                used[aggregate], aggregates[aggregate].name
            );
            return Err(inner.invalid("size", reason));
        }
        let cache_policy = parse_cache_policy(&mut inner, "cache")?;
        inner.finish()?;
        volumes.push(VolumeSpec {
            name,
            aggregate,
            size_bytes,
            cache_policy,
        });
    }
    let mut luns: Vec<LunSpec> = Vec::new();
    let mut used = vec![0u64; volumes.len()];
    for (index, table) in lun_tables.iter().enumerate() {
        let mut inner = Fields::new(table, &fields.name(&format!("lun[{index}]")));
        let name = inner.required_string("name")?.to_string();
        let volume = match (inner.string("volume")?, volumes.len()) {
            (None, 1) => 0,
            (None, _) => {
                return Err(ScenarioError::Missing {
                    field: inner.name("volume"),
                });
            }
            (Some(wanted), _) => (volumes.iter().position(|v| v.name == wanted))
                .ok_or_else(|| inner.invalid("volume", format!("no volume `{wanted}`")))?,
        };
        if luns.iter().any(|l| l.name == name && l.volume == volume) {
            return Err(inner.invalid("name", format!("`{name}` names two LUNs of a volume")));
        }
        let size_bytes = inner.required_size("size")?;
        used[volume] += size_bytes;
        if size_bytes == 0 || used[volume] > volumes[volume].size_bytes {
            let reason = format!(
                "{size_bytes} bytes, {} in all in {}, which holds {}",
                used[volume], volumes[volume].name, volumes[volume].size_bytes
            );
            return Err(inner.invalid("size", reason));
        }
        inner.finish()?;
        luns.push(LunSpec {
            name,
            volume,
            size_bytes,
        });
    }
    Ok((volumes, luns))
}

#[cfg(test)]
mod tests;
