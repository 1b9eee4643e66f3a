//! Workloads: what the host asks of an array, in the lab's one internal form.
//!
//! A [`Workload`] is an access specification in IOmeter's terms: lines of
//! (transfer size, share of accesses, % reads, % random, alignment), run by
//! `workers` workers that each keep `outstanding_per_worker` I/Os in flight
//! (a closed loop: a worker issues its next I/O the instant one completes,
//! with no think time), over one range of the LUN (the test file), for a
//! ramp-up and then `segments` consecutive measured segments of equal
//! length. Both front ends compile to it: [`iometer::IometerSpec`] directly,
//! and [`fio::FioJob`] from a job file (device-models.md §3.8 maps every
//! other tool onto the same record).
//!
//! Each worker draws its I/Os from its own [`WorkerStream`], seeded from the
//! run's seed and the worker's index, so the n-th I/O of a worker is the same
//! whatever array it goes to and however fast that array answers: two arrays
//! given one workload and one seed see one I/O sequence. Per I/O the stream
//! draws, in this order, the line (by share), read or write, random or
//! sequential, then for a random I/O its offset; a sequential I/O continues
//! where the worker's previous one ended, wrapping to the start of the range.
//! Every offset is a multiple of its line's alignment, counted from the start
//! of the LUN.
//!
//! **Where each worker goes.** The array's LUNs form one address space, end
//! to end in the order the array lists them. By default every worker
//! addresses the same range (the test file): fio's clones of a job
//! (`numjobs`) all start at the job's `offset` unless `offset_increment` is
//! set, and IOmeter's workers all start at their target's Starting Disk
//! Sector, 0 unless set per worker (device-models.md §3.1, §3.2; fio's
//! HOWTO: "the real offset becomes offset + offset_increment *
//! thread_number, where the thread number is a counter that starts at 0 and
//! is incremented for each sub-job"). So sequential workers over one range
//! read the same blocks, as they would on a real array. With
//! [`Region::offset_increment_bytes`] worker `i`'s range starts that many
//! bytes further per worker, each its own region and position; its length
//! is the job's `size` (fio's size is per job) or, without one, the rest of
//! the address space. With [`Region::lun_active_percent`] every worker
//! addresses the first X % of each LUN (the active data set): random
//! offsets are uniform over the union of those parts, a sequential run
//! moves from one LUN's part to the next at its end, and worker `i` starts
//! at the start of LUN `i mod n`.
//!
//! **A moving working set** ([`Distribution::Moving`], the OLTP load of
//! E4): the random I/Os fall in a window of the worker's ranges (a stated
//! percentage of their aligned starts) that slides forward at a steady pace,
//! wrapping at the end, so the whole database is crossed once per stated
//! sweep time; a stated share of them may instead fall anywhere. Where the
//! window is depends on the instant each I/O is issued, so the hot set a
//! cache holds goes cold behind it as the run goes on.
//!
//! A workload may ask for the test file to be written once before measuring
//! ([`Prepare::fill`], IOmeter's preparation of its test file) and for a full
//! reallocate after that; [`Workload::prepare_plan`] lists the regions so a
//! driver can put an array in that state without simulating it I/O by I/O.

mod arrivals;
pub mod fio;
pub mod icf;
pub mod iometer;
pub mod orion;
mod stream;
mod zipf;

use serde::Serialize;
use wafer_core::units::Duration;

use crate::array::{Extent, PreparePlan};

pub use self::arrivals::Arrivals;
pub use self::stream::WorkerStream;

/// Most I/Os a workload may keep in flight in total: far above any host
/// adapter's queue (E1's HBA queue depth is 254), and a bound on the lab's
/// bookkeeping.
pub const OUTSTANDING_MAX: u32 = 65_536;

/// Most measured segments in one run.
pub const SEGMENTS_MAX: u32 = 10_000;

/// Most lines in an access specification (fio's `bssplit` takes 64 sizes).
pub const LINES_MAX: usize = 64;

/// Most bytes in one host I/O: 64 MiB, far above any transfer a host
/// adapter issues, and small enough that every I/O's block count fits the
/// devices' requests.
pub const IO_BYTES_MAX: u64 = 64 << 20;

/// One line of an access specification.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct AccessLine {
    /// Bytes per I/O.
    pub size_bytes: u64,
    /// Share of the I/Os that use this line, in percent of the whole
    /// specification.
    pub percent: u32,
    /// Of this line's I/Os, the percentage that read.
    pub read_percent: u32,
    /// Of this line's I/Os, the percentage at a random offset (the rest
    /// continue sequentially).
    pub random_percent: u32,
    /// Every offset is a multiple of this many bytes.
    pub align_bytes: u64,
}

/// The part of the array's address space a workload addresses (its test
/// file).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Region {
    /// First byte, from the start of the first LUN.
    pub offset_bytes: u64,
    /// Bytes; `None` for the rest of the address space.
    pub length_bytes: Option<u64>,
    /// Each worker's range starts this much further than the previous
    /// worker's (fio's `offset_increment`); 0: every worker addresses the
    /// same range.
    pub offset_increment_bytes: u64,
    /// Instead of one range, the first this many percent of every LUN
    /// (the active data set), for every worker.
    pub lun_active_percent: Option<u32>,
}

/// How random offsets spread over the region.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Distribution {
    /// Every aligned offset equally likely.
    Uniform,
    /// Zipf with exponent `theta` over the region's units (fio's `zipf:θ`).
    Zipf {
        /// The exponent; larger is more skewed.
        theta: f64,
    },
    /// An OLTP database's working set, moving across the region over time.
    Moving(MovingSet),
}

/// A working set that moves: a window of `percent` of the region's aligned
/// starts, which slides forward at a steady pace and wraps around, crossing
/// the whole region once every `sweep`. Of the random I/Os, `share_percent`
/// fall in the window as it is at the I/O's instant, uniformly; the rest
/// anywhere in the region, uniformly. The window starts at the start of the
/// region at time zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct MovingSet {
    /// The window's size, in percent of the region.
    pub percent: u32,
    /// Of the random I/Os, the percentage that fall in the window.
    pub share_percent: u32,
    /// How long the window takes to cross the whole region once.
    #[serde(rename = "sweep_ns", serialize_with = "nanoseconds")]
    pub sweep: Duration,
}

/// When a run measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Timing {
    /// Run before measuring starts.
    #[serde(rename = "ramp_ns", serialize_with = "nanoseconds")]
    pub ramp: Duration,
    /// Length of each measured segment.
    #[serde(rename = "segment_ns", serialize_with = "nanoseconds")]
    pub segment: Duration,
    /// Consecutive segments, measured separately.
    pub segments: u32,
}

impl Timing {
    /// From the start of the run to the end of the last segment.
    pub fn total(&self) -> Duration {
        Duration(self.ramp.0 + self.segment.0 * u64::from(self.segments))
    }
}

/// What happens to the LUN before the run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Prepare {
    /// Write the region once, sequentially.
    pub fill: bool,
    /// Then run a full reallocate (defragmentation).
    pub reallocate: bool,
}

/// A host workload, ready to run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Workload {
    /// A name for reports.
    pub name: String,
    /// The access specification; the shares add up to 100.
    pub lines: Vec<AccessLine>,
    /// Workers (fio's jobs).
    pub workers: u32,
    /// I/Os each worker keeps in flight.
    pub outstanding_per_worker: u32,
    /// The range addressed.
    pub region: Region,
    /// How random offsets spread.
    pub distribution: Distribution,
    /// Ramp-up and segments.
    pub timing: Timing,
    /// The prepare step.
    pub prepare: Prepare,
    /// An open loop: host I/Os arrive at this many per second on average,
    /// a Poisson process, handed to the workers in turn, with at most
    /// `workers × outstanding_per_worker` in flight (the rest wait at the
    /// host, in arrival order); `None`: the closed loop.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offered_iops: Option<u32>,
    /// Large-I/O streams beside the workers, measured apart (Oracle
    /// Orion's large I/Os beside its small ones); `None`: the workers alone.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub large: Option<LargeStreams>,
}

/// Large-I/O streams that run beside a workload's own workers, each a
/// worker of its own, their I/Os reported apart from the others
/// (Orion's large I/Os, whose MB/s it reports beside the small I/Os'
/// IOPS). Sequential streams each take an equal part of the workload's
/// range, in order, and read (or write) it from its start, wrapping at
/// its end: `n` streams are `n` independent sequential readers, as
/// Orion's are. Random ones spread over the whole range.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct LargeStreams {
    /// Streams, each a worker.
    pub streams: u32,
    /// I/Os each stream keeps in flight.
    pub outstanding_per_stream: u32,
    /// Bytes per I/O; every I/O is aligned to its size.
    pub size_bytes: u64,
    /// Of the streams' I/Os, the percentage that read.
    pub read_percent: u32,
    /// Whether each stream moves through its own part in order (else its
    /// offsets are random over the whole range).
    pub sequential: bool,
}

impl LargeStreams {
    /// These streams with Orion's `-num_large` set to `num_large`: that
    /// many sequential streams, or that many random large I/Os in flight.
    pub fn with_num_large(self, num_large: u32) -> LargeStreams {
        if self.sequential {
            LargeStreams {
                streams: num_large,
                ..self
            }
        } else {
            LargeStreams {
                outstanding_per_stream: num_large,
                ..self
            }
        }
    }
}

/// Why a workload cannot run.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WorkloadError {
    /// A field has a value no workload can have.
    #[error("{field}: {reason}")]
    Invalid {
        /// The field, e.g. `lines[2].read_percent`.
        field: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The region reaches past the LUN.
    #[error(
        "the workload's range of {length_bytes} bytes at {offset_bytes} does not fit in the {capacity_bytes}-byte LUN"
    )]
    OutsideLun {
        /// The region's first byte.
        offset_bytes: u64,
        /// Its length (the rest of the LUN if the workload gave none).
        length_bytes: u64,
        /// The LUN's size.
        capacity_bytes: u64,
    },
    /// A line's I/O does not fit in the region at its alignment.
    #[error(
        "a {size_bytes}-byte I/O aligned to {align_bytes} bytes does not fit in the workload's range"
    )]
    RangeTooSmall {
        /// The I/O size.
        size_bytes: u64,
        /// Its alignment.
        align_bytes: u64,
    },
}

impl Workload {
    /// Checks every field; a workload that passes runs on any LUN its region
    /// fits.
    pub fn check(&self) -> Result<(), WorkloadError> {
        check_lines(&self.lines)?;
        let in_flight = self
            .depths()
            .iter()
            .map(|&depth| u64::from(depth))
            .sum::<u64>();
        require(self.workers >= 1 || self.large.is_some(), "workers", || {
            "at least one worker".into()
        })?;
        self.check_large()?;
        require(self.outstanding_per_worker >= 1, "outstanding_ios", || {
            "at least one I/O in flight per worker".into()
        })?;
        require(
            in_flight <= u64::from(OUTSTANDING_MAX),
            "outstanding_ios",
            || format!("{in_flight} I/Os in flight; the lab keeps at most {OUTSTANDING_MAX}"),
        )?;
        require(self.region.length_bytes != Some(0), "size", || {
            "an empty range".into()
        })?;
        self.check_active_percent()?;
        require(self.offered_iops != Some(0), "offered_iops", || {
            "an offered load arrives at some rate".into()
        })?;
        match self.distribution {
            Distribution::Uniform => {}
            Distribution::Zipf { theta } => require(
                theta > 0.0 && theta.is_finite(),
                "random_distribution",
                || format!("zipf:{theta}: the exponent must be a positive number"),
            )?,
            Distribution::Moving(set) => check_moving_set(&set)?,
        }
        self.check_timing()
    }

    /// Large streams: at least one, each with an I/O in flight, in a
    /// closed loop over one range.
    fn check_large(&self) -> Result<(), WorkloadError> {
        let Some(large) = &self.large else {
            return Ok(());
        };
        require(large.streams >= 1, "num_large", || {
            "at least one large stream".into()
        })?;
        require(large.outstanding_per_stream >= 1, "num_streamIO", || {
            "at least one I/O in flight per stream".into()
        })?;
        require(
            (1..=IO_BYTES_MAX).contains(&large.size_bytes),
            "size_large",
            || format!("{} bytes; 1 to {IO_BYTES_MAX}", large.size_bytes),
        )?;
        require(large.read_percent <= 100, "write", || {
            format!("{} % reads is over 100", large.read_percent)
        })?;
        let alone = self.offered_iops.is_none()
            && self.region.lun_active_percent.is_none()
            && self.region.offset_increment_bytes == 0;
        require(alone, "num_large", || {
            "large streams run in a closed loop over one range: no offered load, active part or \
             worker increment with them"
                .into()
        })
    }

    /// I/Os each worker keeps in flight: the workers', then the large
    /// streams'.
    pub fn depths(&self) -> Vec<u32> {
        let workers = std::iter::repeat_n(self.outstanding_per_worker, self.workers as usize);
        let large = self.large.iter().flat_map(|large| {
            std::iter::repeat_n(large.outstanding_per_stream, large.streams as usize)
        });
        workers.chain(large).collect()
    }

    /// The workload the large streams run, as workers of their own: one
    /// line at their size, each stream over its part of the range (or the
    /// whole range, random).
    fn large_workload(&self, large: &LargeStreams, capacity_bytes: u64) -> Workload {
        let range = self.base_range(capacity_bytes);
        let region = match large.sequential {
            true => {
                let part =
                    range.length / u64::from(large.streams) / large.size_bytes * large.size_bytes;
                Region {
                    offset_bytes: range.offset,
                    length_bytes: Some(part.max(1)),
                    offset_increment_bytes: part,
                    lun_active_percent: None,
                }
            }
            false => self.region,
        };
        Workload {
            name: format!("{} (large)", self.name),
            lines: vec![AccessLine {
                size_bytes: large.size_bytes,
                percent: 100,
                read_percent: large.read_percent,
                random_percent: if large.sequential { 0 } else { 100 },
                align_bytes: large.size_bytes,
            }],
            workers: large.streams,
            outstanding_per_worker: large.outstanding_per_stream,
            region,
            distribution: Distribution::Uniform,
            timing: self.timing,
            prepare: self.prepare,
            offered_iops: None,
            large: None,
        }
    }

    /// The workload's one range, before any worker's increment.
    fn base_range(&self, capacity_bytes: u64) -> Extent {
        let offset = self.region.offset_bytes.min(capacity_bytes);
        Extent {
            offset,
            length: (self.region.length_bytes).unwrap_or(capacity_bytes - offset),
        }
    }

    /// The active part of every LUN replaces the one range: it takes no
    /// offset, length or increment.
    fn check_active_percent(&self) -> Result<(), WorkloadError> {
        let Some(percent) = self.region.lun_active_percent else {
            return Ok(());
        };
        require((1..=100).contains(&percent), "lun_active_percent", || {
            format!("{percent}; 1 to 100")
        })?;
        let region = &self.region;
        let alone = region.offset_bytes == 0
            && region.length_bytes.is_none()
            && region.offset_increment_bytes == 0;
        require(alone, "lun_active_percent", || {
            "the active part of every LUN is the range: no offset, size or increment with it".into()
        })
    }

    fn check_timing(&self) -> Result<(), WorkloadError> {
        let timing = &self.timing;
        require(timing.segment.0 > 0, "segment", || {
            "segments must last".into()
        })?;
        require(
            (1..=SEGMENTS_MAX).contains(&timing.segments),
            "segments",
            || format!("{} segments; 1 to {SEGMENTS_MAX}", timing.segments),
        )?;
        let total =
            u128::from(timing.ramp.0) + u128::from(timing.segment.0) * u128::from(timing.segments);
        require(total <= u128::from(u64::MAX / 2), "segment", || {
            "the run is longer than virtual time can count".into()
        })
    }

    /// The ranges worker `worker` addresses on an array of LUNs of
    /// `lun_bytes` (in address order), each checked to lie in the address
    /// space and to hold every line's I/O at its alignment.
    pub fn worker_extents(
        &self,
        worker: u32,
        lun_bytes: &[u64],
    ) -> Result<Vec<Extent>, WorkloadError> {
        let extents = match self.region.lun_active_percent {
            Some(percent) => active_parts(lun_bytes, percent),
            None => vec![self.worker_range(worker, lun_bytes.iter().sum())?],
        };
        for extent in &extents {
            self.check_fits(extent)?;
        }
        Ok(extents)
    }

    /// Worker `worker`'s one range in an address space of `capacity_bytes`.
    fn worker_range(&self, worker: u32, capacity_bytes: u64) -> Result<Extent, WorkloadError> {
        let region = &self.region;
        let shift = u128::from(worker) * u128::from(region.offset_increment_bytes);
        let offset = u64::try_from(u128::from(region.offset_bytes) + shift).unwrap_or(u64::MAX);
        let length = region
            .length_bytes
            .unwrap_or(capacity_bytes.saturating_sub(offset));
        match offset.checked_add(length) {
            Some(end) if end <= capacity_bytes && length > 0 => Ok(Extent { offset, length }),
            _ => Err(WorkloadError::OutsideLun {
                offset_bytes: offset,
                length_bytes: length,
                capacity_bytes,
            }),
        }
    }

    /// Checks that every line's I/O fits `extent` at its alignment.
    fn check_fits(&self, extent: &Extent) -> Result<(), WorkloadError> {
        for line in &self.lines {
            if stream::aligned_starts(extent, line.size_bytes, line.align_bytes).is_none() {
                return Err(WorkloadError::RangeTooSmall {
                    size_bytes: line.size_bytes,
                    align_bytes: line.align_bytes,
                });
            }
        }
        Ok(())
    }

    /// One stream per worker over its ranges on an array of LUNs of
    /// `lun_bytes`, each seeded from `seed` and its index.
    pub fn streams(
        &self,
        seed: u64,
        lun_bytes: &[u64],
    ) -> Result<Vec<WorkerStream>, WorkloadError> {
        self.check()?;
        let mut seeds = wafer_rng::Rng::seeded(seed);
        let mut streams = self.own_streams(&mut seeds, lun_bytes)?;
        if let Some(large) = &self.large {
            let large = self.large_workload(large, lun_bytes.iter().sum());
            streams.extend(large.own_streams(&mut seeds, lun_bytes)?);
        }
        Ok(streams)
    }

    /// The workers' streams, seeded in turn from `seeds`.
    fn own_streams(
        &self,
        seeds: &mut wafer_rng::Rng,
        lun_bytes: &[u64],
    ) -> Result<Vec<WorkerStream>, WorkloadError> {
        (0..self.workers)
            .map(|worker| {
                let extents = self.worker_extents(worker, lun_bytes)?;
                let first = worker as usize % extents.len();
                Ok(WorkerStream::new(self, &extents, first, seeds.next_u64()))
            })
            .collect()
    }

    /// The arrivals of an open loop, seeded from `seed` after every
    /// worker's stream; `None` for a closed loop.
    pub fn arrivals(&self, seed: u64) -> Option<Arrivals> {
        let iops = self.offered_iops?;
        let mut seeds = wafer_rng::Rng::seeded(seed);
        for _ in 0..self.workers {
            seeds.next_u64();
        }
        Some(Arrivals::new(iops, seeds.next_u64()))
    }

    /// What the prepare step leaves on an array of LUNs of `lun_bytes`: every
    /// worker's ranges filled once, in address order, overlaps once.
    pub fn prepare_plan(&self, lun_bytes: &[u64]) -> Result<PreparePlan, WorkloadError> {
        let mut ranges = Vec::new();
        for worker in 0..self.workers {
            ranges.extend(self.worker_extents(worker, lun_bytes)?);
        }
        if let Some(large) = &self.large {
            let large = self.large_workload(large, lun_bytes.iter().sum());
            for stream in 0..large.workers {
                ranges.extend(large.worker_extents(stream, lun_bytes)?);
            }
        }
        Ok(PreparePlan {
            fill: if self.prepare.fill {
                merged(ranges)
            } else {
                Vec::new()
            },
            reallocate: self.prepare.reallocate,
        })
    }
}

/// The first `percent` of each LUN of `lun_bytes`, in the address space of
/// the LUNs end to end.
fn active_parts(lun_bytes: &[u64], percent: u32) -> Vec<Extent> {
    let mut start = 0;
    lun_bytes
        .iter()
        .map(|&bytes| {
            let length = u64::try_from(u128::from(bytes) * u128::from(percent) / 100)
                .expect("a part is no larger than its LUN");
            let part = Extent {
                offset: start,
                length,
            };
            start += bytes;
            part
        })
        .collect()
}

/// `ranges` sorted, with overlapping or touching ones joined.
fn merged(mut ranges: Vec<Extent>) -> Vec<Extent> {
    ranges.sort_by_key(|range| range.offset);
    let mut joined: Vec<Extent> = Vec::with_capacity(ranges.len());
    for range in ranges {
        match joined.last_mut() {
            Some(last) if range.offset <= last.end() => {
                last.length = last.length.max(range.end() - last.offset);
            }
            _ => joined.push(range),
        }
    }
    joined
}

/// A duration in reports: its nanoseconds.
fn nanoseconds<S: serde::Serializer>(
    duration: &Duration,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.serialize_u64(duration.0)
}

fn check_moving_set(set: &MovingSet) -> Result<(), WorkloadError> {
    require(
        (1..=100).contains(&set.percent),
        "working_set_percent",
        || format!("{}; 1 to 100", set.percent),
    )?;
    require(
        (1..=100).contains(&set.share_percent),
        "working_set_share_percent",
        || format!("{}; 1 to 100", set.share_percent),
    )?;
    require(set.sweep.0 > 0, "working_set_sweep_s", || {
        "the working set must take some time to move across the region".into()
    })
}

fn check_lines(lines: &[AccessLine]) -> Result<(), WorkloadError> {
    require(!lines.is_empty(), "lines", || "no access lines".into())?;
    require(lines.len() <= LINES_MAX, "lines", || {
        format!("{} lines; at most {LINES_MAX}", lines.len())
    })?;
    for (index, line) in lines.iter().enumerate() {
        let field = |name: &str| format!("lines[{index}].{name}");
        let in_range = 1..=IO_BYTES_MAX;
        require_field(in_range.contains(&line.size_bytes), field("size"), || {
            format!("{} bytes; 1 to {IO_BYTES_MAX}", line.size_bytes)
        })?;
        require_field(line.read_percent <= 100, field("read_percent"), || {
            format!("{} is over 100", line.read_percent)
        })?;
        require_field(line.random_percent <= 100, field("random_percent"), || {
            format!("{} is over 100", line.random_percent)
        })?;
        require_field(line.align_bytes >= 1, field("align"), || {
            "alignment of 0 bytes".into()
        })?;
    }
    let total: u64 = lines.iter().map(|line| u64::from(line.percent)).sum();
    require(total == 100, "lines", || {
        format!("the shares add up to {total}%, not 100%")
    })
}

fn require(holds: bool, field: &str, reason: impl FnOnce() -> String) -> Result<(), WorkloadError> {
    require_field(holds, field.to_string(), reason)
}

fn require_field(
    holds: bool,
    field: String,
    reason: impl FnOnce() -> String,
) -> Result<(), WorkloadError> {
    match holds {
        true => Ok(()),
        false => Err(WorkloadError::Invalid {
            field,
            reason: reason(),
        }),
    }
}

#[cfg(test)]
mod tests;
