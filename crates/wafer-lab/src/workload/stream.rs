//! One worker's I/O sequence: a seeded draw per I/O from the access lines.
//!
//! The draws are integers from [`Rng`] (the line by share out of 100, read
//! and random by percent, the offset among the aligned starts), so a seed
//! names the sequence exactly; only a Zipf offset goes through floating
//! point ([`super::zipf`]).
//!
//! A worker addresses one or more ranges (its places): a random offset is
//! drawn among the aligned starts of all of them together, so each start is
//! equally likely; a sequential I/O continues in the range the previous one
//! was in, and moves to the next range (after the last, the first) when it
//! would run past its end. With one range the draws are those of a single
//! span, one for one.
//!
//! With a moving working set, a random I/O first draws whether it falls in
//! the window (by its share), then its start among the window's starts (or
//! all of them); the window's first start is the sweep's progress at the
//! I/O's instant times the starts in all ranges, and it wraps past the last
//! range to the first.

use wafer_core::units::Instant;
use wafer_rng::Rng;

use super::zipf::{Zipf, gcd};
use super::{Distribution, MovingSet, Workload};
use crate::array::{Extent, HostIo, HostOp};

/// Where one line's I/O may start in one of the worker's ranges.
#[derive(Clone, Copy, Debug)]
struct Starts {
    /// First and last aligned offsets where the I/O fits in the range.
    first: u64,
    last: u64,
    /// Aligned starts in the ranges before this one.
    before: u64,
}

/// One access line, ready to draw from.
#[derive(Clone, Debug)]
struct Line {
    /// The line is chosen when the share draw is below this.
    share_below: u64,
    size: u64,
    read_percent: u64,
    random_percent: u64,
    align: u64,
    /// Per range of the worker, in order.
    starts: Vec<Starts>,
    /// Aligned starts in all the ranges.
    starts_total: u64,
}

/// Random offsets spread over Zipf-ranked units of the ranges, numbered
/// through them in order.
#[derive(Clone, Debug)]
struct ZipfOffsets {
    zipf: Zipf,
    /// Per range: its first unit's offset, and the units before it.
    bases: Vec<(u64, u64)>,
    /// Bytes per unit: the smallest I/O, rounded up to every alignment.
    unit: u64,
}

/// A worker's I/O generator.
#[derive(Clone, Debug)]
pub struct WorkerStream {
    rng: Rng,
    lines: Vec<Line>,
    cursor: u64,
    /// The range the previous I/O was in.
    range: usize,
    zipf: Option<ZipfOffsets>,
    moving: Option<MovingSet>,
}

/// The first and last offsets in `span` that are multiples of `align` and
/// leave room for `size` bytes, or `None` if there are none.
pub(super) fn aligned_starts(span: &Extent, size: u64, align: u64) -> Option<(u64, u64)> {
    let first = span.offset.div_ceil(align).checked_mul(align)?;
    let last = span.end().checked_sub(size)? / align * align;
    (first <= last).then_some((first, last))
}

/// Where an I/O of `size` aligned to `align` may start in each of `ranges`.
fn line_starts(ranges: &[Extent], size: u64, align: u64) -> (Vec<Starts>, u64) {
    let mut before = 0;
    let starts = ranges
        .iter()
        .map(|range| {
            let (first, last) = aligned_starts(range, size, align)
                .expect("every range was checked to hold every line");
            let starts = Starts {
                first,
                last,
                before,
            };
            before += (last - first) / align + 1;
            starts
        })
        .collect();
    (starts, before)
}

impl WorkerStream {
    /// The stream of a checked `workload` over `ranges` (at least one),
    /// starting at the start of range `first`, seeded with `seed`.
    pub(super) fn new(
        workload: &Workload,
        ranges: &[Extent],
        first: usize,
        seed: u64,
    ) -> WorkerStream {
        let mut share_below = 0;
        let lines = workload
            .lines
            .iter()
            .map(|line| {
                share_below += u64::from(line.percent);
                let (starts, starts_total) = line_starts(ranges, line.size_bytes, line.align_bytes);
                Line {
                    share_below,
                    size: line.size_bytes,
                    read_percent: u64::from(line.read_percent),
                    random_percent: u64::from(line.random_percent),
                    align: line.align_bytes,
                    starts,
                    starts_total,
                }
            })
            .collect();
        let zipf = match workload.distribution {
            Distribution::Zipf { theta } => Some(zipf_offsets(workload, ranges, theta)),
            Distribution::Uniform | Distribution::Moving(_) => None,
        };
        let moving = match workload.distribution {
            Distribution::Moving(set) => Some(set),
            Distribution::Uniform | Distribution::Zipf { .. } => None,
        };
        WorkerStream {
            rng: Rng::seeded(seed),
            lines,
            cursor: ranges[first].offset,
            range: first,
            zipf,
            moving,
        }
    }

    /// The worker's next I/O, named `id`, issued at `now` (from the start of
    /// the run; only a moving working set looks at it).
    pub fn next_io(&mut self, id: u64, now: Instant) -> HostIo {
        let share = self.rng.below(100);
        let index = self
            .lines
            .iter()
            .position(|line| share < line.share_below)
            .expect("the shares add up to 100");
        let line = &self.lines[index];
        let read = self.rng.chance(line.read_percent, 100);
        let random = self.rng.chance(line.random_percent, 100);
        let (range, offset) = match random {
            true => self.random_offset(index, now),
            false => self.sequential_offset(index),
        };
        let line = &self.lines[index];
        self.range = range;
        self.cursor = offset + line.size;
        HostIo {
            id,
            op: if read { HostOp::Read } else { HostOp::Write },
            offset,
            length: line.size,
        }
    }

    /// A random start for line `index` at `now`: its range and offset.
    fn random_offset(&mut self, index: usize, now: Instant) -> (usize, u64) {
        let line = &self.lines[index];
        match (&self.zipf, self.moving) {
            (None, None) => {
                let draw = self.rng.below(line.starts_total);
                line.start_at(draw)
            }
            (None, Some(set)) => {
                let draw = match self.rng.chance(u64::from(set.share_percent), 100) {
                    true => moving_start(&mut self.rng, &set, line.starts_total, now),
                    false => self.rng.below(line.starts_total),
                };
                line.start_at(draw)
            }
            (Some(zipf), _) => {
                let item = zipf.zipf.item(&mut self.rng);
                let range = zipf.bases.partition_point(|&(_, before)| before <= item) - 1;
                let (base, before) = zipf.bases[range];
                let offset = base + (item - before) * zipf.unit;
                let starts = &line.starts[range];
                let aligned = offset / line.align * line.align;
                (range, aligned.clamp(starts.first, starts.last))
            }
        }
    }

    /// Where the previous I/O ended, aligned up, in the same range; the start
    /// of the next range if the I/O would run past its end.
    fn sequential_offset(&self, index: usize) -> (usize, u64) {
        let line = &self.lines[index];
        let starts = &line.starts[self.range];
        let next = self.cursor.div_ceil(line.align) * line.align;
        if next <= starts.last {
            (self.range, next.max(starts.first))
        } else {
            let range = (self.range + 1) % line.starts.len();
            (range, line.starts[range].first)
        }
    }
}

impl Line {
    /// The range and offset of the `draw`-th aligned start of all ranges.
    fn start_at(&self, draw: u64) -> (usize, u64) {
        let range = self.starts.partition_point(|s| s.before <= draw) - 1;
        let starts = &self.starts[range];
        (range, starts.first + (draw - starts.before) * self.align)
    }
}

/// A start among `total` drawn in `set`'s window as it is at `now`: the
/// window's first start is the sweep's progress times `total`, and it holds
/// `set.percent` of them (at least one), wrapping at the end.
fn moving_start(rng: &mut Rng, set: &MovingSet, total: u64, now: Instant) -> u64 {
    let progress = u128::from(now.0 % set.sweep.0);
    let first = progress * u128::from(total) / u128::from(set.sweep.0);
    let window = (u128::from(total) * u128::from(set.percent) / 100).max(1);
    let draw = u128::from(rng.below(u64::try_from(window).expect("at most total")));
    u64::try_from((first + draw) % u128::from(total)).expect("below total")
}

/// Zipf units over `ranges`: the smallest I/O rounded up to the least common
/// multiple of the alignments, so each unit's offset suits every line.
fn zipf_offsets(workload: &Workload, ranges: &[Extent], theta: f64) -> ZipfOffsets {
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
    let mut units = 0;
    let bases = ranges
        .iter()
        .map(|range| {
            let base = range.offset.div_ceil(align) * align;
            let here = (base, units);
            units += (range.end().saturating_sub(base) / unit).max(1);
            here
        })
        .collect();
    ZipfOffsets {
        zipf: Zipf::new(units, theta),
        bases,
        unit,
    }
}
