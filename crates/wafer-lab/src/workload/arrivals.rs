//! An offered load: host I/Os that arrive on their own schedule, a Poisson
//! process at a target rate, whatever the array does (an open loop).
//!
//! In a Poisson process of rate λ the gaps between arrivals are independent
//! and exponentially distributed with mean 1/λ; a gap is drawn by inverting
//! the exponential's distribution function, `-ln(1 - U) / λ` for `U`
//! uniform in [0, 1), from 53 random bits of the seeded [`Rng`], and
//! rounded to the nanosecond. Arrivals count from the start of the run,
//! each from the previous one's exact (unrounded) time, so rounding never
//! drifts the rate.

use wafer_core::units::Instant;
use wafer_rng::Rng;

/// Nanoseconds per second.
const NS_PER_S: f64 = 1e9;

/// The arrival times of a Poisson process.
#[derive(Clone, Debug)]
pub struct Arrivals {
    rng: Rng,
    mean_gap_ns: f64,
    /// The next arrival, in (unrounded) nanoseconds from the start.
    next_ns: f64,
}

impl Arrivals {
    /// Arrivals at `iops` per second on average, drawn from `seed`.
    pub fn new(iops: u32, seed: u64) -> Arrivals {
        assert!(iops > 0, "an offered load arrives at some rate");
        let mut arrivals = Arrivals {
            rng: Rng::seeded(seed),
            mean_gap_ns: NS_PER_S / f64::from(iops),
            next_ns: 0.0,
        };
        arrivals.next_ns = arrivals.gap_ns();
        arrivals
    }

    /// One exponentially distributed gap.
    fn gap_ns(&mut self) -> f64 {
        let uniform = (self.rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        -(1.0 - uniform).ln() * self.mean_gap_ns
    }

    /// When the next I/O arrives.
    pub fn next(&self) -> Instant {
        Instant(self.next_ns.round() as u64)
    }

    /// The next I/O has arrived: draws the one after it.
    pub fn arrived(&mut self) {
        self.next_ns += self.gap_ns();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrivals_come_at_the_rate_asked_with_exponential_gaps() {
        let mut arrivals = Arrivals::new(1000, 9);
        let mut gaps = Vec::new();
        let mut last = Instant(0);
        for _ in 0..100_000 {
            let at = arrivals.next();
            gaps.push((at.0 - last.0) as f64);
            last = at;
            arrivals.arrived();
        }
        let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
        assert!((mean / 1e6 - 1.0).abs() < 0.01, "mean gap {mean} ns");
        // An exponential's standard deviation equals its mean; and a share
        // e^-1 of its gaps exceed the mean.
        let variance = gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / gaps.len() as f64;
        assert!((variance.sqrt() / mean - 1.0).abs() < 0.02);
        let longer = gaps.iter().filter(|&&g| g > mean).count() as f64 / gaps.len() as f64;
        assert!((longer - (-1.0f64).exp()).abs() < 0.01, "{longer}");
    }

    #[test]
    fn a_seed_names_the_arrivals() {
        let times = |seed| {
            let mut arrivals = Arrivals::new(50, seed);
            (0..10)
                .map(|_| {
                    let at = arrivals.next();
                    arrivals.arrived();
                    at
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(times(3), times(3));
        assert_ne!(times(3), times(4));
    }
}
