//! Latency histograms with bounded relative error, for percentiles over
//! millions of I/Os in fixed memory.
//!
//! Values (nanoseconds) below 128 have a bucket each; above, every power of
//! two is cut into 128 equal buckets, so a bucket is never wider than 1/128
//! of its lower edge. A percentile is the nearest-rank bucket's midpoint,
//! clamped to the smallest and largest values seen: within 0.4 % of the
//! exact nearest-rank value (fio's own latency histogram, with 64 buckets
//! per power of two, is coarser). Count, sum, sum of squares, minimum and
//! maximum are kept exactly, in integers.

/// Bits of sub-bucket resolution per power of two.
const SUB_BITS: u32 = 7;
const SUB_BUCKETS: u64 = 1 << SUB_BITS;
/// Buckets for every `u64`: the exact ones below `SUB_BUCKETS`, then
/// `SUB_BUCKETS` for each power of two from `2^SUB_BITS` up.
const BUCKETS: usize = ((64 - SUB_BITS + 1) as usize) << SUB_BITS;

/// A latency histogram.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Histogram {
    counts: Vec<u64>,
    count: u64,
    sum: u128,
    sum_of_squares: u128,
    min: u64,
    max: u64,
}

impl Default for Histogram {
    fn default() -> Histogram {
        Histogram {
            counts: vec![0; BUCKETS],
            count: 0,
            sum: 0,
            sum_of_squares: 0,
            min: u64::MAX,
            max: 0,
        }
    }
}

/// The bucket of `value`.
fn bucket(value: u64) -> usize {
    if value < SUB_BUCKETS {
        return value as usize;
    }
    let exponent = 63 - value.leading_zeros();
    let shift = exponent - SUB_BITS;
    let top = value >> shift;
    (((u64::from(shift) + 1) << SUB_BITS) + (top - SUB_BUCKETS)) as usize
}

/// The midpoint of bucket `index`.
fn midpoint(index: usize) -> u64 {
    let index = index as u64;
    if index < SUB_BUCKETS {
        return index;
    }
    let shift = (index >> SUB_BITS) - 1;
    let low = (SUB_BUCKETS + index % SUB_BUCKETS) << shift;
    low + ((1u64 << shift) - 1) / 2
}

impl Histogram {
    /// Counts one value.
    pub fn record(&mut self, value: u64) {
        self.counts[bucket(value)] += 1;
        self.count += 1;
        self.sum += u128::from(value);
        self.sum_of_squares += u128::from(value) * u128::from(value);
        self.min = self.min.min(value);
        self.max = self.max.max(value);
    }

    /// Values counted.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The smallest value, or 0 if none.
    pub fn min(&self) -> u64 {
        if self.count == 0 { 0 } else { self.min }
    }

    /// The largest value, or 0 if none.
    pub fn max(&self) -> u64 {
        self.max
    }

    /// The exact mean, or 0 if none.
    pub fn mean(&self) -> f64 {
        if self.count == 0 {
            return 0.0;
        }
        self.sum as f64 / self.count as f64
    }

    /// The population standard deviation, or 0 if none.
    pub fn stddev(&self) -> f64 {
        if self.count == 0 {
            return 0.0;
        }
        let n = self.count as f64;
        let mean = self.sum as f64 / n;
        (self.sum_of_squares as f64 / n - mean * mean)
            .max(0.0)
            .sqrt()
    }

    /// The nearest-rank `percent` percentile (0 < percent ≤ 100), or 0 if
    /// none.
    pub fn percentile(&self, percent: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let rank = ((percent / 100.0 * self.count as f64).ceil() as u64).clamp(1, self.count);
        let mut seen = 0;
        for (index, &count) in self.counts.iter().enumerate() {
            seen += count;
            if seen >= rank {
                return midpoint(index).clamp(self.min, self.max);
            }
        }
        self.max
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_narrow_and_ordered() {
        let mut previous = 0;
        for value in [
            0,
            1,
            127,
            128,
            129,
            255,
            256,
            1_000,
            30_000_000,
            u64::MAX / 3,
            u64::MAX,
        ] {
            let index = bucket(value);
            assert!(index >= previous, "bucket order at {value}");
            previous = index;
            assert!(index < BUCKETS);
            let error = midpoint(index).abs_diff(value) as f64;
            assert!(
                error <= value as f64 / 128.0,
                "{value} → {}",
                midpoint(index)
            );
        }
    }

    #[test]
    fn percentiles_are_close_to_nearest_rank() {
        let mut histogram = Histogram::default();
        for value in 1..=1000u64 {
            histogram.record(value * 1_000_000);
        }
        let p99 = histogram.percentile(99.0) as f64;
        assert!((p99 / 990e6 - 1.0).abs() < 0.004, "p99 {p99}");
        assert_eq!(histogram.percentile(100.0), 1_000_000_000);
        assert_eq!(histogram.min(), 1_000_000);
        assert!((histogram.mean() - 500.5e6).abs() < 1.0);
        assert_eq!(Histogram::default().percentile(99.0), 0);
    }
}
