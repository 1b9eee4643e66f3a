//! Fixed-size bitmaps, the in-memory form of the active and summary maps.
//!
//! A map file stores its bitmap in 4 KiB blocks of 32768 bits each, block `n`
//! covering bits `n * 32768 ..`; [`Bitmap::block_words`] and
//! [`Bitmap::load_block`] convert one block at a time so that a CP writes only
//! the map blocks it changed. A bitmap stored as a map file
//! ([`Bitmap::map_file`]) keeps the running [`WordSum`] of each block's
//! words, updated as bits change, for a stamp filer's CP to stamp it by;
//! bitmaps that stay in memory do not pay for sums.

use std::sync::Arc;

use crate::BLOCK_SIZE;
use crate::format::{BlockWords, WORDS_PER_BLOCK};
use crate::word_sum::WordSum;

/// Bits held by one map block.
pub const BITS_PER_BLOCK: u64 = BLOCK_SIZE as u64 * 8;

/// One map block's worth of bits, with the running sum of its words.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Chunk {
    words: BlockWords,
    sum: WordSum,
}

impl Chunk {
    fn new(words: BlockWords) -> Chunk {
        Chunk {
            sum: WordSum::of(&words),
            words,
        }
    }
}

/// A bitmap of a fixed number of bits.
///
/// The bits are held in map-block-sized chunks shared copy-on-write: a CP
/// keeps the image's copy of the aggregate's active map (hundreds of MiB at
/// full disk sizes) at the cost of a pointer per map block, and a chunk is
/// copied only when a bit in it changes while the copy lives.
///
/// Two bitmaps are equal when they hold the same bits, whether or not they
/// keep sums.
#[derive(Clone, Debug)]
pub struct Bitmap {
    chunks: Vec<Arc<Chunk>>,
    len: u64,
    ones: u64,
    /// Whether each chunk's sum is kept up to date.
    sums: bool,
}

impl Bitmap {
    /// `len` bits, all clear.
    pub fn new(len: u64) -> Bitmap {
        Bitmap::all_clear(len, false)
    }

    /// `len` bits, all clear, of a bitmap stored as a map file: it keeps
    /// each map block's running sum.
    pub fn map_file(len: u64) -> Bitmap {
        Bitmap::all_clear(len, true)
    }

    fn all_clear(len: u64, sums: bool) -> Bitmap {
        let blocks = len.div_ceil(BITS_PER_BLOCK) as usize;
        // Every chunk starts as the same all-clear one, copied when written.
        let clear = Arc::new(Chunk::new([0; WORDS_PER_BLOCK]));
        Bitmap {
            chunks: (0..blocks).map(|_| Arc::clone(&clear)).collect(),
            len,
            ones: 0,
            sums,
        }
    }

    /// Grows to `len` bits; the new ones are clear (an aggregate given more
    /// disks).
    ///
    /// # Panics
    /// If `len` is below the current length.
    pub fn grow(&mut self, len: u64) {
        assert!(len >= self.len, "a bitmap only grows");
        let clear = Arc::new(Chunk::new([0; WORDS_PER_BLOCK]));
        self.chunks
            .resize(len.div_ceil(BITS_PER_BLOCK) as usize, clear);
        self.len = len;
    }

    /// Number of bits.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the bitmap has no bits at all.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Number of set bits.
    pub fn count_ones(&self) -> u64 {
        self.ones
    }

    fn word(&self, index: usize) -> u64 {
        self.chunks[index / WORDS_PER_BLOCK].words[index % WORDS_PER_BLOCK]
    }

    /// Replaces word `index` with `change` of it, copying its chunk first if
    /// it is shared, and keeps the chunk's sum.
    fn change_word(&mut self, index: usize, change: impl FnOnce(u64) -> u64) {
        let chunk = Arc::make_mut(&mut self.chunks[index / WORDS_PER_BLOCK]);
        let at = index % WORDS_PER_BLOCK;
        let old = chunk.words[at];
        chunk.words[at] = change(old);
        if self.sums {
            chunk.sum.change(at, old, chunk.words[at]);
        }
    }

    fn words(&self) -> impl Iterator<Item = u64> + '_ {
        self.chunks
            .iter()
            .flat_map(|chunk| chunk.words.iter().copied())
    }

    /// Bits set in `range`, counted a word at a time.
    pub fn count_ones_in(&self, range: core::ops::Range<u64>) -> u64 {
        assert!(
            range.end <= self.len,
            "range {range:?} past {} bits",
            self.len
        );
        let (mut n, mut ones) = (range.start, 0);
        while n < range.end {
            let bit = n % 64;
            let take = (64 - bit).min(range.end - n);
            let mask = match take {
                64 => u64::MAX,
                _ => ((1u64 << take) - 1) << bit,
            };
            ones += u64::from((self.word((n / 64) as usize) & mask).count_ones());
            n += take;
        }
        ones
    }

    /// Whether bit `n` is set.
    pub fn get(&self, n: u64) -> bool {
        assert!(n < self.len, "bit {n} of {}", self.len);
        self.word((n / 64) as usize) & (1 << (n % 64)) != 0
    }

    /// Sets bit `n`; returns whether it was clear.
    pub fn set(&mut self, n: u64) -> bool {
        let was_clear = !self.get(n);
        if was_clear {
            self.change_word((n / 64) as usize, |word| word | 1 << (n % 64));
            self.ones += 1;
        }
        was_clear
    }

    /// Clears bit `n`; returns whether it was set.
    pub fn clear(&mut self, n: u64) -> bool {
        let was_set = self.get(n);
        if was_set {
            self.change_word((n / 64) as usize, |word| word & !(1 << (n % 64)));
            self.ones -= 1;
        }
        was_set
    }

    /// Map blocks needed to store the bitmap.
    pub fn blocks(&self) -> u64 {
        self.len.div_ceil(BITS_PER_BLOCK)
    }

    /// The map block that holds bit `n`.
    pub fn block_of(n: u64) -> u64 {
        n / BITS_PER_BLOCK
    }

    /// The words of map block `block`: its bytes are these, little-endian.
    pub fn block_words(&self, block: u64) -> &BlockWords {
        &self.chunks[block as usize].words
    }

    /// The running sum of map block `block`'s words, which only a map file's
    /// bitmap keeps.
    pub fn block_sum(&self, block: u64) -> WordSum {
        assert!(self.sums, "the sum of a block of a bitmap that keeps none");
        self.chunks[block as usize].sum
    }

    /// A chunk of `words`, summed if this bitmap keeps sums.
    fn chunk(&self, words: BlockWords) -> Chunk {
        match self.sums {
            true => Chunk::new(words),
            false => Chunk {
                words,
                sum: WordSum::default(),
            },
        }
    }

    /// The union of two bitmaps of the same length; it keeps sums if this
    /// one does.
    pub fn union(&self, other: &Bitmap) -> Bitmap {
        assert_eq!(self.len, other.len, "union of bitmaps of different lengths");
        let chunks: Vec<Arc<Chunk>> = self
            .chunks
            .iter()
            .zip(&other.chunks)
            .map(|(a, b)| match Arc::ptr_eq(a, b) {
                true => Arc::clone(a),
                false => Arc::new(self.chunk(core::array::from_fn(|i| a.words[i] | b.words[i]))),
            })
            .collect();
        let ones = chunks
            .iter()
            .flat_map(|chunk| chunk.words.iter())
            .map(|w| u64::from(w.count_ones()))
            .sum();
        Bitmap {
            chunks,
            len: self.len,
            ones,
            sums: self.sums,
        }
    }

    /// Bits set in both.
    pub fn count_common(&self, other: &Bitmap) -> u64 {
        assert_eq!(self.len, other.len, "bitmaps of different lengths");
        self.words()
            .zip(other.words())
            .map(|(a, b)| u64::from((a & b).count_ones()))
            .sum()
    }

    /// The bits set here and in none of `others`, in order.
    pub fn ones_outside(&self, others: &[&Bitmap]) -> Vec<u64> {
        let mut out = Vec::new();
        for (index, word) in self.words().enumerate() {
            let mut left = others.iter().fold(word, |w, o| w & !o.word(index));
            while left != 0 {
                out.push(index as u64 * 64 + u64::from(left.trailing_zeros()));
                left &= left - 1;
            }
        }
        out
    }

    /// The map blocks in which the two bitmaps differ.
    pub fn differing_blocks(&self, other: &Bitmap) -> Vec<u64> {
        assert_eq!(self.len, other.len, "bitmaps of different lengths");
        self.chunks
            .iter()
            .zip(&other.chunks)
            .enumerate()
            .filter(|(_, (a, b))| !Arc::ptr_eq(a, b) && a.words != b.words)
            .map(|(block, _)| block as u64)
            .collect()
    }

    /// Loads map block `block` from its bytes, ignoring bits past the end.
    pub fn load_block(&mut self, block: u64, bytes: &[u8; BLOCK_SIZE]) {
        let first = block as usize * WORDS_PER_BLOCK;
        let mut words: BlockWords = [0; WORDS_PER_BLOCK];
        for (n, (word, le)) in words.iter_mut().zip(bytes.chunks_exact(8)).enumerate() {
            let base = (first + n) as u64 * 64;
            *word = u64::from_le_bytes(le.try_into().expect("eight bytes"));
            if base >= self.len {
                *word = 0;
            } else if self.len - base < 64 {
                *word &= (1u64 << (self.len - base)) - 1;
            }
        }
        let ones = |w: &BlockWords| w.iter().map(|w| u64::from(w.count_ones())).sum::<u64>();
        self.ones = self.ones - ones(&self.chunks[block as usize].words) + ones(&words);
        self.chunks[block as usize] = Arc::new(self.chunk(words));
    }
}

impl PartialEq for Bitmap {
    fn eq(&self, other: &Bitmap) -> bool {
        self.len == other.len
            && self.ones == other.ones
            && self
                .chunks
                .iter()
                .zip(&other.chunks)
                .all(|(a, b)| Arc::ptr_eq(a, b) || a.words == b.words)
    }
}

impl Eq for Bitmap {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::block_from_words;

    #[test]
    fn a_copy_keeps_its_bits_while_the_original_changes() {
        let mut map = Bitmap::new(3 * BITS_PER_BLOCK);
        map.set(5);
        map.set(BITS_PER_BLOCK + 7);
        let copy = map.clone();
        map.clear(5);
        map.set(2 * BITS_PER_BLOCK);
        assert!(copy.get(5) && !copy.get(2 * BITS_PER_BLOCK) && copy.count_ones() == 2);
        assert!(!map.get(5) && map.get(2 * BITS_PER_BLOCK) && map.count_ones() == 2);
        assert_eq!(copy.differing_blocks(&map), [0, 2]);
        assert_eq!(copy.union(&map).count_ones(), 3);
    }

    /// Asserts that every map block's running sum is the sum of its words.
    fn assert_sums_hold(map: &Bitmap) {
        for block in 0..map.blocks() {
            let words = map.block_words(block);
            assert_eq!(map.block_sum(block), WordSum::of(words), "block {block}");
        }
    }

    #[test]
    fn every_block_sums_its_words_through_sets_clears_copies_and_loads() {
        let mut map = Bitmap::map_file(3 * BITS_PER_BLOCK);
        for n in [0, 1, 63, 64, BITS_PER_BLOCK, 2 * BITS_PER_BLOCK + 77] {
            map.set(n);
        }
        assert_sums_hold(&map);
        let copy = map.clone();
        map.clear(1);
        map.clear(BITS_PER_BLOCK);
        map.set(5);
        assert_sums_hold(&map);
        assert_sums_hold(&copy);
        assert_eq!(
            map.block_sum(1),
            WordSum::default(),
            "a block cleared again sums to 0"
        );
        assert_ne!(
            map.block_sum(0),
            copy.block_sum(0),
            "a changed block's sum moves"
        );
        let union = map.union(&copy);
        assert_sums_hold(&union);
        let mut loaded = Bitmap::map_file(3 * BITS_PER_BLOCK);
        for block in 0..union.blocks() {
            loaded.load_block(block, &block_from_words(union.block_words(block)));
        }
        assert_eq!(loaded, union);
        assert_sums_hold(&loaded);
        let unsummed = Bitmap::new(3 * BITS_PER_BLOCK).union(&loaded);
        assert_eq!(unsummed, loaded, "equal bits, equal bitmaps, sums or not");
        assert_sums_hold(&loaded.union(&unsummed));
    }

    #[test]
    #[should_panic(expected = "keeps none")]
    fn a_bitmap_kept_in_memory_has_no_sums_to_give() {
        let mut map = Bitmap::new(BITS_PER_BLOCK);
        map.set(3);
        map.block_sum(0);
    }

    #[test]
    fn ranges_count_the_bits_set_inside_them_only() {
        let mut map = Bitmap::new(1000);
        let set = [0, 1, 63, 64, 65, 127, 128, 500, 999];
        for n in set {
            map.set(n);
        }
        for (start, end) in [
            (0, 1000),
            (1, 64),
            (63, 129),
            (64, 64),
            (130, 999),
            (999, 1000),
        ] {
            let expected = set.iter().filter(|&&n| (start..end).contains(&n)).count() as u64;
            assert_eq!(map.count_ones_in(start..end), expected, "{start}..{end}");
        }
    }

    #[test]
    fn bits_set_and_clear_with_an_exact_count() {
        let mut map = Bitmap::new(100_000);
        assert!(map.set(5) && map.set(99_999) && !map.set(5));
        assert_eq!(map.count_ones(), 2);
        assert!(map.clear(5) && !map.clear(5));
        assert_eq!(map.count_ones(), 1);
        assert!(map.get(99_999) && !map.get(5));
    }

    #[test]
    fn blocks_round_trip_and_trailing_bits_are_ignored() {
        let mut map = Bitmap::new(40_000);
        for n in [0, 32_767, 32_768, 39_999] {
            map.set(n);
        }
        let mut copy = Bitmap::new(40_000);
        for block in 0..map.blocks() {
            copy.load_block(block, &block_from_words(map.block_words(block)));
        }
        assert_eq!(copy, map);
        let mut noisy = [0xffu8; BLOCK_SIZE];
        noisy[0] = 0;
        copy.load_block(1, &noisy);
        assert_eq!(copy.count_ones(), 40_000 - 32_768 - 8 + 2);
    }

    #[test]
    fn set_operations_agree_with_bit_by_bit_definitions() {
        let (mut a, mut b) = (Bitmap::new(70_000), Bitmap::new(70_000));
        for n in [1, 64, 65, 40_000, 69_999] {
            a.set(n);
        }
        for n in [64, 40_000, 50_000] {
            b.set(n);
        }
        let union = a.union(&b);
        assert_eq!(union.count_ones(), 6);
        assert!((0..70_000).all(|n| union.get(n) == (a.get(n) || b.get(n))));
        assert_eq!(a.count_common(&b), 2);
        assert_eq!(a.ones_outside(&[&b]), vec![1, 65, 69_999]);
        assert_eq!(union.ones_outside(&[&a, &b]), Vec::<u64>::new());
        assert_eq!(a.differing_blocks(&union), vec![1]);
        assert_eq!(a.differing_blocks(&a.clone()), Vec::<u64>::new());
    }
}
