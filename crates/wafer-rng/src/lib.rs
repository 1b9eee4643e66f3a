//! Seeded pseudo-random numbers: xoshiro256++ (Blackman and Vigna, 2019).
//!
//! Every random choice in wafer (simulated workloads, injected faults, test
//! data) comes from a [`Rng`] built from a 64-bit seed, so a seed names a run and
//! the same seed replays it bit for bit. The state is expanded from the seed with
//! SplitMix64, as the algorithm's authors recommend, so nearby seeds give
//! unrelated streams. Not for cryptography.

/// A xoshiro256++ generator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rng {
    state: [u64; 4],
}

impl Rng {
    /// A generator whose whole stream is determined by `seed`.
    pub fn seeded(seed: u64) -> Rng {
        let mut splitmix = seed;
        let mut next = || {
            splitmix = splitmix.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = splitmix;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        };
        Rng::from_state([next(), next(), next(), next()])
    }

    /// A generator starting from a raw state, which must not be all zeros.
    ///
    /// # Panics
    /// If `state` is all zeros, the one state xoshiro never leaves.
    pub fn from_state(state: [u64; 4]) -> Rng {
        assert!(state != [0; 4], "xoshiro256++ state must not be all zeros");
        Rng { state }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let [s0, s1, s2, s3] = &mut self.state;
        let result = s0.wrapping_add(*s3).rotate_left(23).wrapping_add(*s0);
        let t = *s1 << 17;
        *s2 ^= *s0;
        *s3 ^= *s1;
        *s1 ^= *s2;
        *s0 ^= *s3;
        *s2 ^= t;
        *s3 = s3.rotate_left(45);
        result
    }

    /// A number uniformly distributed in `0..bound` (Lemire's multiply-shift
    /// with rejection, so there is no modulo bias).
    ///
    /// # Panics
    /// If `bound` is zero.
    pub fn below(&mut self, bound: u64) -> u64 {
        assert!(bound > 0, "empty range");
        let threshold = bound.wrapping_neg() % bound;
        loop {
            let product = u128::from(self.next_u64()) * u128::from(bound);
            if (product as u64) >= threshold {
                return (product >> 64) as u64;
            }
        }
    }

    /// True with probability `numerator / denominator`.
    ///
    /// # Panics
    /// If `denominator` is zero.
    pub fn chance(&mut self, numerator: u64, denominator: u64) -> bool {
        self.below(denominator) < numerator
    }

    /// Fills `bytes` with random bytes.
    pub fn fill(&mut self, bytes: &mut [u8]) {
        for chunk in bytes.chunks_mut(8) {
            let word = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&word[..chunk.len()]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_reference_stream() {
        // The reference implementation's output for the state [1, 2, 3, 4].
        let expected = [
            41943041,
            58720359,
            3588806011781223,
            3591011842654386,
            9228616714210784205,
            9973669472204895162,
            14011001112246962877,
            12406186145184390807,
            15849039046786891736,
            10450023813501588000,
        ];
        let mut rng = Rng::from_state([1, 2, 3, 4]);
        let got: Vec<u64> = (0..expected.len()).map(|_| rng.next_u64()).collect();
        assert_eq!(got, expected);
    }

    #[test]
    fn a_seed_names_one_stream() {
        let stream = |seed| {
            let mut rng = Rng::seeded(seed);
            (0..8).map(|_| rng.next_u64()).collect::<Vec<_>>()
        };
        assert_eq!(stream(7), stream(7));
        assert_ne!(stream(7), stream(8));
    }

    #[test]
    fn below_stays_in_range_and_reaches_both_ends() {
        let mut rng = Rng::seeded(1);
        let draws: Vec<u64> = (0..2000).map(|_| rng.below(10)).collect();
        assert!(draws.iter().all(|&d| d < 10));
        assert!(draws.contains(&0) && draws.contains(&9));
    }

    #[test]
    fn fill_covers_a_ragged_tail() {
        let mut bytes = [0u8; 13];
        Rng::seeded(3).fill(&mut bytes);
        assert_ne!(bytes[8..], [0u8; 5]);
    }
}
