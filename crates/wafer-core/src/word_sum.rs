//! A metadata block's digest, kept up to date word by word as the block changes.
//!
//! A stamp filer stamps each metadata block it writes with a digest of the
//! words the block encodes to. A CP writes every dirty map block, container
//! block and indirect block (under E1's random writes, about one for every
//! two data blocks); computing their digests from scratch read 4 KiB of cold
//! memory per block. So the digest is a sum: word `w` at position `i`
//! contributes a term `t(i, w) = f(w ^ k(i)) - f(k(i))` (wrapping), where
//! `f` is a bijective 64-bit mixer and `k(i)` a key per position. A
//! structure that changes word `i` from `a` to `b` adds `t(i, b) - t(i, a)`
//! to its block's [`WordSum`] and the CP reads the digest off the sum.
//!
//! Properties that follow: a zero word contributes nothing, so an all-zero
//! block sums to 0 and a block is summed by its nonzero words alone; for a
//! fixed position `t` is a bijection, so changing one word always changes the
//! sum; and words are tied to their positions by the keys, so moving a word
//! changes the sum too (with the odds of a 64-bit collision). A count of the
//! nonzero words makes "digest 0" mean exactly "all zeros", as stamp 0 does.

use crate::format::WORDS_PER_BLOCK;

/// The running digest of one block's words.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WordSum {
    sum: u64,
    nonzero: u32,
}

impl WordSum {
    /// The sum of `words`, the first words of a block (the rest are zeros).
    pub fn of(words: &[u64]) -> WordSum {
        assert!(words.len() <= WORDS_PER_BLOCK, "{} words", words.len());
        let mut out = WordSum::default();
        for (at, &word) in words.iter().enumerate() {
            if word != 0 {
                out.sum = out.sum.wrapping_add(term(at, word));
                out.nonzero += 1;
            }
        }
        out
    }

    /// Word `at` of the block changes from `old` to `new`.
    pub fn change(&mut self, at: usize, old: u64, new: u64) {
        if old == new {
            return;
        }
        if old != 0 {
            self.sum = self.sum.wrapping_sub(term(at, old));
            self.nonzero -= 1;
        }
        if new != 0 {
            self.sum = self.sum.wrapping_add(term(at, new));
            self.nonzero += 1;
        }
    }

    /// The block's digest: 0 when every word is zero, never 0 otherwise.
    pub fn digest(&self) -> u64 {
        match self.nonzero {
            0 => 0,
            _ => mix(self.sum ^ SEED).max(1),
        }
    }
}

/// What word `word` at position `at` adds to its block's sum (0 for a zero
/// word, by the subtraction).
fn term(at: usize, word: u64) -> u64 {
    mix(word ^ key(at)).wrapping_sub(ZERO_TERMS[at])
}

/// The key of position `at`: distinct for every position of a block.
const fn key(at: usize) -> u64 {
    (at as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// `mix(key(at))`, subtracted so that a zero word adds nothing.
const ZERO_TERMS: [u64; WORDS_PER_BLOCK] = {
    let mut terms = [0; WORDS_PER_BLOCK];
    let mut at = 0;
    while at < WORDS_PER_BLOCK {
        terms[at] = mix(key(at));
        at += 1;
    }
    terms
};

/// Folded into the sum before the final mix, so that a block's digest is not
/// simply the mix of a sum that could be 0.
const SEED: u64 = 0x5741_4645_5253_554D;

/// A bijective 64-bit mixer (the finalizer of MurmurHash3).
const fn mix(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xFF51_AFD7_ED55_8CCD);
    x ^= x >> 33;
    x = x.wrapping_mul(0xC4CE_B9FE_1A85_EC53);
    x ^ (x >> 33)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn zeros_digest_to_zero_and_anything_else_does_not() {
        assert_eq!(WordSum::of(&[0; WORDS_PER_BLOCK]).digest(), 0);
        assert_eq!(WordSum::of(&[]).digest(), 0);
        for at in [0, 1, 255, WORDS_PER_BLOCK - 1] {
            let mut words = [0; WORDS_PER_BLOCK];
            words[at] = 1 << (at % 64);
            assert_ne!(WordSum::of(&words).digest(), 0, "word {at} set");
        }
    }

    #[test]
    fn a_word_moved_or_changed_in_one_bit_changes_the_digest() {
        let words: Vec<u64> = (0..WORDS_PER_BLOCK as u64)
            .map(|i| i.wrapping_mul(0x0123_4567_89AB_CDEF))
            .collect();
        let original = WordSum::of(&words).digest();
        for at in (0..WORDS_PER_BLOCK).step_by(7) {
            for bit in [0, 31, 32, 63] {
                let mut changed = words.clone();
                changed[at] ^= 1 << bit;
                assert_ne!(
                    WordSum::of(&changed).digest(),
                    original,
                    "bit {bit} of word {at}"
                );
            }
        }
        let mut swapped = words.clone();
        swapped.swap(3, 4);
        assert_ne!(
            WordSum::of(&swapped).digest(),
            original,
            "two words swapped"
        );
        let mut top_bits = words.clone();
        top_bits[10] ^= 1 << 63;
        top_bits[20] ^= 1 << 63;
        assert_ne!(WordSum::of(&top_bits).digest(), original, "two top bits");
    }

    proptest! {
        /// However a block changes, the running sum is the sum of the
        /// block as it ends up.
        #[test]
        fn changes_keep_the_sum_of_the_block_as_it_stands(
            start in proptest::collection::vec(prop_oneof![Just(0u64), any::<u64>()], WORDS_PER_BLOCK),
            changes in proptest::collection::vec(
                (0..WORDS_PER_BLOCK, prop_oneof![Just(0u64), any::<u64>()]),
                0..64,
            ),
        ) {
            let mut words = start;
            let mut sum = WordSum::of(&words);
            for (at, new) in changes {
                sum.change(at, words[at], new);
                words[at] = new;
            }
            prop_assert_eq!(sum, WordSum::of(&words));
            prop_assert_eq!(sum.digest() == 0, words.iter().all(|&w| w == 0));
        }
    }
}
