//! A set of LUN blocks as a two-level bitmap: the comparator cache's dirty
//! and destaging blocks.
//!
//! A cache of a gibibyte holds some 262,000 blocks of a LUN of a hundred
//! million, and every host read asks whether all of its blocks are held. A
//! bit per LUN block answers that with a word or two per read (16 MiB for a
//! 500 GiB LUN, paged in only where blocks were ever held), where an ordered
//! tree of the held blocks costs a descent per block. The destager's sweep
//! wants the next held block at or after a cursor; a summary bit per word,
//! set while the word holds anything, lets that search skip 4096 empty
//! blocks per summary bit read, so a sweep over a sparse set stays short.

use std::ops::Range;

const WORD_BITS: u64 = u64::BITS as u64;

/// A set of block numbers below a fixed limit.
#[derive(Clone, Debug)]
pub struct BlockSet {
    words: Vec<u64>,
    /// Bit `i` is set while `words[i]` is not zero.
    summary: Vec<u64>,
    len: u64,
}

impl BlockSet {
    /// An empty set of blocks below `limit`.
    pub fn new(limit: u64) -> BlockSet {
        let words = limit.div_ceil(WORD_BITS) as usize;
        BlockSet {
            words: vec![0; words],
            summary: vec![0; words.div_ceil(WORD_BITS as usize)],
            len: 0,
        }
    }

    /// How many blocks the set holds.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True if the set holds no block.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// How many blocks of `range` the set holds.
    pub fn count_in(&self, range: Range<u64>) -> u64 {
        word_masks(range)
            .map(|(word, mask)| u64::from((self.words[word] & mask).count_ones()))
            .sum()
    }

    /// True if every block of `range` is in this set or in `other`.
    pub fn covers_with(&self, other: &BlockSet, range: Range<u64>) -> bool {
        word_masks(range).all(|(word, mask)| (self.words[word] | other.words[word]) & mask == mask)
    }

    /// Adds every block of `range`; returns how many were not held before.
    pub fn insert_range(&mut self, range: Range<u64>) -> u64 {
        let mut added = 0;
        for (word, mask) in word_masks(range) {
            added += u64::from((mask & !self.words[word]).count_ones());
            self.words[word] |= mask;
            self.summary[word_of(word as u64)] |= bit_of(word as u64);
        }
        self.len += added;
        added
    }

    /// Removes every block of `range`; returns how many were held.
    pub fn remove_range(&mut self, range: Range<u64>) -> u64 {
        let mut removed = 0;
        for (word, mask) in word_masks(range) {
            removed += u64::from((mask & self.words[word]).count_ones());
            self.words[word] &= !mask;
            if self.words[word] == 0 {
                self.summary[word_of(word as u64)] &= !bit_of(word as u64);
            }
        }
        self.len -= removed;
        removed
    }

    /// The first held block at or after `from`, if any.
    pub fn first_from(&self, from: u64) -> Option<u64> {
        let word = word_of(from);
        let here = self.words.get(word)? & (u64::MAX << (from % WORD_BITS));
        if here != 0 {
            return Some(word as u64 * WORD_BITS + u64::from(here.trailing_zeros()));
        }
        let next = self.first_word_from(word + 1)?;
        Some(next as u64 * WORD_BITS + u64::from(self.words[next].trailing_zeros()))
    }

    /// The end of the run of held blocks from `start` (held), stopping at
    /// `limit` at the latest.
    pub fn run_end(&self, start: u64, limit: u64) -> u64 {
        let mut end = start;
        while end < limit {
            let gap = !self.words[word_of(end)] >> (end % WORD_BITS);
            let held = u64::from(gap.trailing_zeros()).min(WORD_BITS - end % WORD_BITS);
            end += held;
            if held == 0 || end % WORD_BITS != 0 {
                break;
            }
        }
        end.min(limit)
    }

    /// The first non-empty word at index `from` or later, found through the
    /// summary.
    fn first_word_from(&self, from: usize) -> Option<usize> {
        let mut group = from / WORD_BITS as usize;
        let mut bits = self.summary.get(group)? & (u64::MAX << (from % WORD_BITS as usize));
        while bits == 0 {
            group += 1;
            bits = *self.summary.get(group)?;
        }
        Some(group * WORD_BITS as usize + bits.trailing_zeros() as usize)
    }
}

fn word_of(block: u64) -> usize {
    (block / WORD_BITS) as usize
}

fn bit_of(block: u64) -> u64 {
    1 << (block % WORD_BITS)
}

/// The words `range` touches, each with the mask of its blocks in `range`.
fn word_masks(range: Range<u64>) -> impl Iterator<Item = (usize, u64)> {
    let words = if range.is_empty() {
        0..0
    } else {
        word_of(range.start)..word_of(range.end - 1) + 1
    };
    words.map(move |word| {
        let base = word as u64 * WORD_BITS;
        let low = range.start.max(base) - base;
        let high = range.end.min(base + WORD_BITS) - base;
        let mask = (u64::MAX >> (WORD_BITS - (high - low))) << low;
        (word, mask)
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use proptest::prelude::*;

    use super::*;

    const LIMIT: u64 = 20_000;

    #[derive(Clone, Debug)]
    enum Step {
        Insert(u64, u64),
        Remove(u64, u64),
    }

    fn step() -> impl Strategy<Value = Step> {
        let range =
            (0..LIMIT, 1..200u64).prop_map(|(start, len)| (start, (start + len).min(LIMIT)));
        prop_oneof![
            range.clone().prop_map(|(a, b)| Step::Insert(a, b)),
            range.prop_map(|(a, b)| Step::Remove(a, b)),
        ]
    }

    proptest! {
        /// Every query agrees with an ordered set of the same blocks.
        #[test]
        fn agrees_with_an_ordered_set(steps in prop::collection::vec(step(), 1..60), probes in prop::collection::vec(0..LIMIT, 20)) {
            let mut set = BlockSet::new(LIMIT);
            let other = BlockSet::new(LIMIT);
            let mut model = BTreeSet::new();
            for step in steps {
                match step {
                    Step::Insert(a, b) => {
                        let new = (a..b).filter(|x| model.insert(*x)).count() as u64;
                        prop_assert_eq!(set.insert_range(a..b), new);
                    }
                    Step::Remove(a, b) => {
                        let gone = (a..b).filter(|x| model.remove(x)).count() as u64;
                        prop_assert_eq!(set.remove_range(a..b), gone);
                    }
                }
                prop_assert_eq!(set.len(), model.len() as u64);
            }
            for probe in probes {
                prop_assert_eq!(set.count_in(probe..probe + 1), u64::from(model.contains(&probe)));
                prop_assert_eq!(set.first_from(probe), model.range(probe..).next().copied());
                let end = (probe + 150).min(LIMIT);
                let held = model.range(probe..end).count() as u64;
                prop_assert_eq!(set.count_in(probe..end), held);
                prop_assert_eq!(set.covers_with(&other, probe..end), held == end - probe);
                if model.contains(&probe) {
                    let run = (probe..end).take_while(|x| model.contains(x)).count() as u64;
                    prop_assert_eq!(set.run_end(probe, end), probe + run);
                }
            }
        }
    }

    #[test]
    fn the_search_crosses_empty_summary_words() {
        let mut set = BlockSet::new(1 << 20);
        set.insert_range(900_001..900_003);
        assert_eq!(set.first_from(3), Some(900_001));
        assert_eq!(set.first_from(900_003), None);
        assert_eq!(set.run_end(900_001, 1 << 20), 900_003);
        assert_eq!(set.remove_range(0..1 << 20), 2);
        assert_eq!(set.first_from(0), None, "the summary forgets empty words");
    }
}
