//! Zipf-distributed picks over a range, for fio's `random_distribution=zipf:θ`.
//!
//! Rank `k` of `1..=n` is drawn with probability proportional to `k^-θ` by
//! Hörmann and Derflinger's rejection-inversion method ("Rejection-inversion
//! to generate variates from monotone discrete distributions", ACM TOMACS
//! 6(3), 1996), in the form Apache Commons RNG's
//! `RejectionInversionZipfSampler` gives it: constant time and memory per
//! draw for any `n`, where a table would need `n` entries (26 million for
//! 100 GiB of 4 KiB blocks). Ranks are then spread over the range by a fixed
//! bijection, `item = (rank - 1) · P mod n` with `P` coprime to `n`, so the
//! hot items are scattered rather than packed at the start (fio hashes its
//! ranks for the same reason).
//!
//! Uniform variates come from the seeded [`Rng`]; the method uses `ln`,
//! `exp`, `ln_1p` and `exp_m1`, so the draws are the same on one platform but
//! may differ in the last bits between math libraries.

use wafer_rng::Rng;

/// Multipliers tried in turn for the bijection, until one is coprime to `n`:
/// large primes (2^32 / φ and neighbours), so consecutive ranks land far
/// apart.
const SPREADERS: [u64; 3] = [2_654_435_761, 2_654_435_789, 2_654_435_803];

/// A Zipf distribution over the items `0..n`.
#[derive(Clone, Debug, PartialEq)]
pub struct Zipf {
    n: u64,
    exponent: f64,
    h_integral_x1: f64,
    h_integral_n: f64,
    s: f64,
    spreader: u64,
}

impl Zipf {
    /// Items `0..n` with exponent `theta` (greater than zero).
    pub fn new(n: u64, theta: f64) -> Zipf {
        assert!(n > 0, "a Zipf distribution over no items");
        assert!(theta > 0.0 && theta.is_finite(), "Zipf exponent {theta}");
        let mut zipf = Zipf {
            n,
            exponent: theta,
            h_integral_x1: 0.0,
            h_integral_n: 0.0,
            s: 0.0,
            spreader: SPREADERS
                .into_iter()
                .find(|&p| gcd(p, n) == 1)
                .expect("n has not every spreader as a factor"),
        };
        zipf.h_integral_x1 = zipf.h_integral(1.5) - 1.0;
        zipf.h_integral_n = zipf.h_integral(n as f64 + 0.5);
        zipf.s = 2.0 - zipf.h_integral_inverse(zipf.h_integral(2.5) - zipf.h(2.0));
        zipf
    }

    /// A rank in `1..=n`: 1 is the most likely.
    pub fn rank(&self, rng: &mut Rng) -> u64 {
        loop {
            let u = self.h_integral_n + unit(rng) * (self.h_integral_x1 - self.h_integral_n);
            let x = self.h_integral_inverse(u);
            let k = ((x + 0.5) as u64).clamp(1, self.n);
            let k_f = k as f64;
            if k_f - x <= self.s || u >= self.h_integral(k_f + 0.5) - self.h(k_f) {
                return k;
            }
        }
    }

    /// An item in `0..n`: a rank, spread over the range.
    pub fn item(&self, rng: &mut Rng) -> u64 {
        let rank = self.rank(rng) - 1;
        (u128::from(rank) * u128::from(self.spreader) % u128::from(self.n)) as u64
    }

    fn h(&self, x: f64) -> f64 {
        (-self.exponent * x.ln()).exp()
    }

    fn h_integral(&self, x: f64) -> f64 {
        let log_x = x.ln();
        helper2((1.0 - self.exponent) * log_x) * log_x
    }

    fn h_integral_inverse(&self, x: f64) -> f64 {
        let t = (x * (1.0 - self.exponent)).max(-1.0);
        (helper1(t) * x).exp()
    }
}

/// `ln(1 + x) / x`, continuous at zero.
fn helper1(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.ln_1p() / x
    } else {
        1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x))
    }
}

/// `(e^x - 1) / x`, continuous at zero.
fn helper2(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.exp_m1() / x
    } else {
        1.0 + x * 0.5 * (1.0 + x * (1.0 / 3.0) * (1.0 + 0.25 * x))
    }
}

/// A uniform variate in `[0, 1)` with 53 random bits.
fn unit(rng: &mut Rng) -> f64 {
    (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// The greatest common divisor.
pub(super) fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_follow_the_power_law() {
        for theta in [0.8, 1.0, 1.2] {
            let zipf = Zipf::new(1000, theta);
            let mut rng = Rng::seeded(3);
            let mut counts = [0u64; 5];
            let draws = 400_000;
            for _ in 0..draws {
                let rank = zipf.rank(&mut rng);
                assert!((1..=1000).contains(&rank));
                if rank <= 4 {
                    counts[rank as usize] += 1;
                }
            }
            for k in 2..=4u32 {
                let expected = f64::from(k).powf(theta);
                let measured = counts[1] as f64 / counts[k as usize] as f64;
                assert!(
                    (measured / expected - 1.0).abs() < 0.05,
                    "θ {theta}: P(1)/P({k}) = {measured:.3}, expected {expected:.3}"
                );
            }
        }
    }

    #[test]
    fn items_are_a_bijection_of_ranks() {
        let zipf = Zipf::new(10, 1.1);
        let mut items: Vec<u64> = (0..10).map(|rank| rank * zipf.spreader % 10).collect();
        items.sort_unstable();
        assert_eq!(items, (0..10).collect::<Vec<u64>>());
        assert_eq!(gcd(12, 18), 6);
    }
}
