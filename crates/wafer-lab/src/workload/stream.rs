//! One worker's I/O sequence: a seeded draw per I/O from the access lines.
//!
//! The draws are integers from [`Rng`] (the line by share out of 100, read
//! and random by percent, the offset among the aligned starts), so a seed
//! names the sequence exactly; only a Zipf offset goes through floating
//! point ([`super::zipf`]).

use wafer_rng::Rng;

use super::zipf::{Zipf, gcd};
use super::{Distribution, Workload};
use crate::array::{Extent, HostIo, HostOp};

/// One access line, ready to draw from.
#[derive(Clone, Copy, Debug)]
struct Line {
    /// The line is chosen when the share draw is below this.
    share_below: u64,
    size: u64,
    read_percent: u64,
    random_percent: u64,
    align: u64,
    /// First and last aligned offsets where the I/O fits in the span.
    first_start: u64,
    last_start: u64,
}

/// Random offsets spread over Zipf-ranked units of the span.
#[derive(Clone, Debug)]
struct ZipfOffsets {
    zipf: Zipf,
    /// The first unit's offset.
    base: u64,
    /// Bytes per unit: the smallest I/O, rounded up to every alignment.
    unit: u64,
}

/// A worker's I/O generator.
#[derive(Clone, Debug)]
pub struct WorkerStream {
    rng: Rng,
    lines: Vec<Line>,
    cursor: u64,
    zipf: Option<ZipfOffsets>,
}

/// The first and last offsets in `span` that are multiples of `align` and
/// leave room for `size` bytes, or `None` if there are none.
pub(super) fn aligned_starts(span: &Extent, size: u64, align: u64) -> Option<(u64, u64)> {
    let first = span.offset.div_ceil(align).checked_mul(align)?;
    let last = span.end().checked_sub(size)? / align * align;
    (first <= last).then_some((first, last))
}

impl WorkerStream {
    /// The stream of a checked `workload` over `span`, seeded with `seed`.
    pub(super) fn new(workload: &Workload, span: Extent, seed: u64) -> WorkerStream {
        let mut share_below = 0;
        let lines = workload
            .lines
            .iter()
            .map(|line| {
                share_below += u64::from(line.percent);
                let (first_start, last_start) =
                    aligned_starts(&span, line.size_bytes, line.align_bytes)
                        .expect("the span was checked to hold every line");
                Line {
                    share_below,
                    size: line.size_bytes,
                    read_percent: u64::from(line.read_percent),
                    random_percent: u64::from(line.random_percent),
                    align: line.align_bytes,
                    first_start,
                    last_start,
                }
            })
            .collect();
        let zipf = match workload.distribution {
            Distribution::Uniform => None,
            Distribution::Zipf { theta } => Some(zipf_offsets(workload, &span, theta)),
        };
        WorkerStream {
            rng: Rng::seeded(seed),
            lines,
            cursor: span.offset,
            zipf,
        }
    }

    /// The worker's next I/O, named `id`.
    pub fn next_io(&mut self, id: u64) -> HostIo {
        let share = self.rng.below(100);
        let line = *self
            .lines
            .iter()
            .find(|line| share < line.share_below)
            .expect("the shares add up to 100");
        let read = self.rng.chance(line.read_percent, 100);
        let random = self.rng.chance(line.random_percent, 100);
        let offset = match random {
            true => self.random_offset(&line),
            false => self.sequential_offset(&line),
        };
        self.cursor = offset + line.size;
        HostIo {
            id,
            op: if read { HostOp::Read } else { HostOp::Write },
            offset,
            length: line.size,
        }
    }

    fn random_offset(&mut self, line: &Line) -> u64 {
        match &self.zipf {
            None => {
                let starts = (line.last_start - line.first_start) / line.align + 1;
                line.first_start + self.rng.below(starts) * line.align
            }
            Some(zipf) => {
                let offset = zipf.base + zipf.zipf.item(&mut self.rng) * zipf.unit;
                (offset / line.align * line.align).clamp(line.first_start, line.last_start)
            }
        }
    }

    /// Where the previous I/O ended, aligned up; the start of the span if
    /// the I/O would run past its end.
    fn sequential_offset(&self, line: &Line) -> u64 {
        let next = self.cursor.div_ceil(line.align) * line.align;
        if next <= line.last_start {
            next.max(line.first_start)
        } else {
            line.first_start
        }
    }
}

/// Zipf units over `span`: the smallest I/O rounded up to the least common
/// multiple of the alignments, so each unit's offset suits every line.
fn zipf_offsets(workload: &Workload, span: &Extent, theta: f64) -> ZipfOffsets {
    let align = workload.lines.iter().fold(1, |lcm, line| {
        lcm / gcd(lcm, line.align_bytes) * line.align_bytes
    });
    let smallest = workload
        .lines
        .iter()
        .map(|line| line.size_bytes)
        .min()
        .unwrap_or(1);
    let unit = smallest.div_ceil(align) * align;
    let base = span.offset.div_ceil(align) * align;
    let units = (span.end().saturating_sub(base) / unit).max(1);
    ZipfOffsets {
        zipf: Zipf::new(units, theta),
        base,
        unit,
    }
}
