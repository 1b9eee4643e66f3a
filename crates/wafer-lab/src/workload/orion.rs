//! Oracle Orion's data points (device-models.md §3.3).
//!
//! Orion measures a mix of two loads at once: small random I/Os
//! (`-size_small`, 8 KiB by default) with `-num_small` of them outstanding,
//! and large I/Os (`-size_large`, 1 MiB by default), either random with
//! `-num_large` outstanding or, with `-type seq`, `-num_large` sequential
//! streams each keeping `-num_streamIO` in flight. `-write` is the
//! percentage of writes in both. It reports the small I/Os' IOPS and
//! latency and the large I/Os' MB/s apart: one data point of its matrix,
//! whose rows are large loads and columns small ones.
//!
//! The lab runs one data point per scenario: the small I/Os are one worker
//! with `num_small` in flight, the large ones a [`LargeStreams`] beside it,
//! and the report gives each kind's figures per segment. Orion's matrix
//! (`basic`, `detailed`, `row`, `col`, `max`) is an outer loop of such
//! points, which the lab does not expand yet, so only `point` is taken.
//! Every I/O is aligned to its size and the test spans every LUN, end to
//! end (Orion's `-simulate concat`) \[INF\]; sequential streams each take
//! an equal part of it (`LargeStreams`) \[INF\]; `-num_streamIO` defaults
//! to 4 as the usage posts give it \[UNV\].

use wafer_core::units::Duration;

use super::{
    AccessLine, Distribution, LargeStreams, Prepare, Region, Timing, Workload, WorkloadError,
};

/// `-num_streamIO` when a scenario gives none.
pub const STREAM_IOS_DEFAULT: u32 = 4;

/// Orion's large I/Os: random, or sequential streams.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LargeType {
    /// `-type rand`: `num_large` large I/Os outstanding, at random offsets.
    Random,
    /// `-type seq`: `num_large` streams, each with `num_stream_io` in flight.
    Sequential,
}

/// One data point of an Orion test.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OrionSpec {
    /// The test's name (Orion's `-testname`).
    pub name: String,
    /// Small I/Os outstanding (`-num_small`); 0: none.
    pub num_small: u32,
    /// Large I/Os outstanding, or sequential streams (`-num_large`); 0: none.
    pub num_large: u32,
    /// Bytes per small I/O (`-size_small`).
    pub size_small: u64,
    /// Bytes per large I/O (`-size_large`).
    pub size_large: u64,
    /// `-type`.
    pub large_type: LargeType,
    /// I/Os in flight per sequential stream (`-num_streamIO`).
    pub num_stream_io: u32,
    /// Percentage of writes, small and large alike (`-write`).
    pub write_percent: u32,
    /// Before measuring (Orion's warm-up).
    pub ramp: Duration,
    /// Each measured segment (Orion's `-duration` per data point).
    pub duration: Duration,
    /// Segments measured in a row.
    pub segments: u32,
}

impl OrionSpec {
    /// The workload of this data point.
    pub fn workload(&self) -> Result<Workload, WorkloadError> {
        if self.num_small == 0 && self.num_large == 0 {
            return Err(WorkloadError::Invalid {
                field: "num_small".into(),
                reason: "a data point needs small or large I/Os (num_small or num_large)".into(),
            });
        }
        if self.write_percent > 100 {
            return Err(WorkloadError::Invalid {
                field: "write".into(),
                reason: format!("{} % writes is over 100", self.write_percent),
            });
        }
        let read_percent = 100 - self.write_percent;
        let workload = Workload {
            name: self.name.clone(),
            lines: vec![AccessLine {
                size_bytes: self.size_small,
                percent: 100,
                read_percent,
                random_percent: 100,
                align_bytes: self.size_small.max(1),
            }],
            workers: u32::from(self.num_small > 0),
            outstanding_per_worker: self.num_small.max(1),
            region: Region::default(),
            distribution: Distribution::Uniform,
            timing: Timing {
                ramp: self.ramp,
                segment: self.duration,
                segments: self.segments,
            },
            prepare: Prepare {
                fill: true,
                reallocate: false,
            },
            offered_iops: None,
            large: (self.num_large > 0).then(|| self.large_streams(read_percent)),
        };
        workload.check()?;
        Ok(workload)
    }

    fn large_streams(&self, read_percent: u32) -> LargeStreams {
        let (streams, outstanding_per_stream) = match self.large_type {
            LargeType::Random => (1, self.num_large),
            LargeType::Sequential => (self.num_large, self.num_stream_io),
        };
        LargeStreams {
            streams,
            outstanding_per_stream,
            size_bytes: self.size_large,
            read_percent,
            sequential: self.large_type == LargeType::Sequential,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e3_point(streams: u32) -> OrionSpec {
        OrionSpec {
            name: "e3".into(),
            num_small: 8,
            num_large: streams,
            size_small: 8 << 10,
            size_large: 1 << 20,
            large_type: LargeType::Sequential,
            num_stream_io: STREAM_IOS_DEFAULT,
            write_percent: 30,
            ramp: Duration(0),
            duration: Duration::from_secs(60),
            segments: 1,
        }
    }

    #[test]
    fn sequential_streams_each_keep_their_ios_in_flight_beside_the_small_worker() {
        let workload = e3_point(3).workload().unwrap();
        assert_eq!(workload.workers, 1);
        assert_eq!(workload.lines[0].read_percent, 70);
        assert_eq!(workload.lines[0].align_bytes, 8 << 10);
        assert_eq!(workload.depths(), [8, 4, 4, 4]);
        let large = workload.large.unwrap();
        assert!(large.sequential);
        assert_eq!((large.size_bytes, large.read_percent), (1 << 20, 70));
    }

    #[test]
    fn random_large_ios_are_one_worker_with_num_large_in_flight() {
        let spec = OrionSpec {
            large_type: LargeType::Random,
            num_small: 0,
            ..e3_point(6)
        };
        let workload = spec.workload().unwrap();
        assert_eq!(workload.workers, 0);
        assert_eq!(workload.depths(), [6]);
        assert!(!workload.large.unwrap().sequential);
    }

    #[test]
    fn a_point_without_io_or_with_over_100_percent_writes_is_refused() {
        let none = OrionSpec {
            num_small: 0,
            ..e3_point(0)
        };
        assert!(matches!(
            none.workload(),
            Err(WorkloadError::Invalid { field, .. }) if field == "num_small"
        ));
        let over = OrionSpec {
            write_percent: 101,
            ..e3_point(1)
        };
        assert!(matches!(
            over.workload(),
            Err(WorkloadError::Invalid { field, .. }) if field == "write"
        ));
    }
}
