//! IOmeter's access specifications, as its `.icf` files hold them
//! (device-models.md §3.1).
//!
//! An access specification is a list of lines `size, % of size, % reads,
//! % random, delay, burst, align, reply`; the lab takes the first four and
//! the alignment (`align` 0 means sector alignment, 512 bytes; delay, burst
//! and reply are for paced and network workers, which the lab does not run).
//! Outstanding I/Os are per worker, as IOmeter's "# of Outstanding I/Os" is
//! per worker per target, and the lab's arrays are one target. The test file
//! is IOmeter's "Maximum Disk Size" and "Starting Disk Sector", given here in
//! bytes; IOmeter writes it sequentially once before its first run, and a
//! test that reallocates (defragments) first says so. Each worker has its
//! own target settings in IOmeter; the lab's workers share the test file
//! unless the region's offset increment moves each one's Starting Disk
//! Sector on from the previous worker's.
//!
//! A run is a ramp-up, then `segments` back-to-back runs of `run_time`, each
//! measured on its own: E1's 14 consecutive 20-minute tests.

use wafer_core::units::Duration;

use super::{AccessLine, Distribution, Prepare, Region, Timing, Workload, WorkloadError};

/// The alignment IOmeter's `align` 0 stands for: one 512-byte sector.
pub const SECTOR_BYTES: u64 = 512;

/// An IOmeter test: access specification, workers and test file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IometerSpec {
    /// The access specification's name.
    pub name: String,
    /// Its lines; an `align_bytes` of 0 means sector alignment.
    pub lines: Vec<AccessLine>,
    /// Disk workers.
    pub workers: u32,
    /// Outstanding I/Os per worker.
    pub outstanding_ios: u32,
    /// IOmeter's Ramp Up Time.
    pub ramp_up: Duration,
    /// IOmeter's Run Time: the length of one measured segment.
    pub run_time: Duration,
    /// Consecutive runs, measured separately.
    pub segments: u32,
    /// Where the test file lies in the LUN.
    pub test_file: Region,
    /// Whether a full reallocate runs after the test file is written.
    pub reallocate_first: bool,
}

impl IometerSpec {
    /// The workload this test runs.
    pub fn workload(&self) -> Result<Workload, WorkloadError> {
        let lines = self
            .lines
            .iter()
            .map(|line| AccessLine {
                align_bytes: match line.align_bytes {
                    0 => SECTOR_BYTES,
                    align => align,
                },
                ..*line
            })
            .collect();
        let workload = Workload {
            name: self.name.clone(),
            lines,
            workers: self.workers,
            outstanding_per_worker: self.outstanding_ios,
            region: self.test_file,
            distribution: Distribution::Uniform,
            timing: Timing {
                ramp: self.ramp_up,
                segment: self.run_time,
                segments: self.segments,
            },
            prepare: Prepare {
                fill: true,
                reallocate: self.reallocate_first,
            },
            offered_iops: None,
            large: None,
        };
        workload.check()?;
        Ok(workload)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(size_bytes: u64, percent: u32, align_bytes: u64) -> AccessLine {
        AccessLine {
            size_bytes,
            percent,
            read_percent: 80,
            random_percent: 100,
            align_bytes,
        }
    }

    fn spec(lines: Vec<AccessLine>) -> IometerSpec {
        IometerSpec {
            name: "test".into(),
            lines,
            workers: 1,
            outstanding_ios: 16,
            ramp_up: Duration(0),
            run_time: Duration::from_secs(60),
            segments: 3,
            test_file: Region {
                length_bytes: Some(1 << 30),
                ..Region::default()
            },
            reallocate_first: true,
        }
    }

    #[test]
    fn align_zero_means_a_sector_and_the_file_is_prepared() {
        let workload = spec(vec![line(4096, 60, 0), line(512, 40, 4096)])
            .workload()
            .unwrap();
        assert_eq!(workload.lines[0].align_bytes, 512);
        assert_eq!(workload.lines[1].align_bytes, 4096);
        assert_eq!(
            workload.prepare,
            Prepare {
                fill: true,
                reallocate: true
            }
        );
        assert_eq!(workload.timing.segments, 3);
    }

    #[test]
    fn shares_must_add_up_to_one_hundred() {
        let error = spec(vec![line(4096, 60, 0), line(512, 30, 0)])
            .workload()
            .unwrap_err();
        assert!(matches!(error, WorkloadError::Invalid { field, .. } if field == "lines"));
    }
}
