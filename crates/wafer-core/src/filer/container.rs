//! A volume's container map: for every vvbn, the pvbn that holds it.
//!
//! The map is a file of the aggregate, one little-endian pvbn per word
//! ([`CONTAINER_ENTRIES_PER_BLOCK`] to a block, 0 where a vvbn is unused).
//! Every block a volume writes or frees changes an entry, so a CP writes
//! about as many container blocks as it frees data blocks. Each block keeps
//! the running [`WordSum`] of its entries, updated entry by entry, so a stamp
//! filer's CP stamps a container block without reading its 4 KiB again.

use std::borrow::Cow;

use crate::Block;
use crate::format::{BlockWords, WORDS_PER_BLOCK};
use crate::word_sum::WordSum;

/// Container-map entries per block (one little-endian pvbn each).
pub const CONTAINER_ENTRIES_PER_BLOCK: u64 = (crate::BLOCK_SIZE / 8) as u64;
const _: () = assert!(CONTAINER_ENTRIES_PER_BLOCK as usize == WORDS_PER_BLOCK);

/// vvbn to pvbn, with a running sum per map block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContainerMap {
    entries: Vec<u64>,
    sums: Vec<WordSum>,
}

impl ContainerMap {
    /// A map of `vvbns` entries, all unused.
    pub fn new(vvbns: u64) -> ContainerMap {
        ContainerMap {
            entries: vec![0; vvbns as usize],
            sums: vec![WordSum::default(); vvbns.div_ceil(CONTAINER_ENTRIES_PER_BLOCK) as usize],
        }
    }

    /// Grows to `vvbns` entries; the new ones are unused.
    pub fn grow(&mut self, vvbns: u64) {
        assert!(
            vvbns >= self.entries.len() as u64,
            "a container map only grows"
        );
        self.entries.resize(vvbns as usize, 0);
        let blocks = vvbns.div_ceil(CONTAINER_ENTRIES_PER_BLOCK) as usize;
        self.sums.resize(blocks, WordSum::default());
    }

    /// The pvbn that holds `vvbn` (0 if it is unused).
    pub fn get(&self, vvbn: u64) -> u64 {
        self.entries[vvbn as usize]
    }

    /// Maps `vvbn` to `pvbn` (0 to unmap it) and returns the pvbn it mapped to.
    pub fn set(&mut self, vvbn: u64, pvbn: u64) -> u64 {
        let old = core::mem::replace(&mut self.entries[vvbn as usize], pvbn);
        let (block, at) = (
            vvbn / CONTAINER_ENTRIES_PER_BLOCK,
            vvbn % CONTAINER_ENTRIES_PER_BLOCK,
        );
        self.sums[block as usize].change(at as usize, old, pvbn);
        old
    }

    /// Blocks of the map file.
    pub fn blocks(&self) -> u64 {
        self.sums.len() as u64
    }

    /// Map block `fbn` as words: one pvbn per entry. A block the map fills
    /// is the map's own words; only the short last block is copied out,
    /// padded with zeros.
    pub fn block_words(&self, fbn: u64) -> Cow<'_, BlockWords> {
        let entries = self.block_entries(fbn);
        match entries.first_chunk::<WORDS_PER_BLOCK>() {
            Some(words) => Cow::Borrowed(words),
            None => {
                let mut out = [0; WORDS_PER_BLOCK];
                out[..entries.len()].copy_from_slice(entries);
                Cow::Owned(out)
            }
        }
    }

    /// The running sum of map block `fbn`'s words (0 past the map's end).
    pub fn block_sum(&self, fbn: u64) -> WordSum {
        self.sums.get(fbn as usize).copied().unwrap_or_default()
    }

    /// Loads map block `fbn` from its bytes, ignoring entries past the end.
    pub fn load_block(&mut self, fbn: u64, bytes: &Block) {
        let range = self.block_range(fbn);
        for (entry, le) in self.entries[range].iter_mut().zip(bytes.chunks_exact(8)) {
            *entry = u64::from_le_bytes(le.try_into().expect("eight bytes"));
        }
        let sum = WordSum::of(self.block_entries(fbn));
        if let Some(slot) = self.sums.get_mut(fbn as usize) {
            *slot = sum;
        }
    }

    /// The entries of map block `fbn` (fewer than a block's worth for the
    /// last one, none past the end).
    fn block_entries(&self, fbn: u64) -> &[u64] {
        &self.entries[self.block_range(fbn)]
    }

    /// Where map block `fbn`'s entries lie in the map (empty past the end).
    fn block_range(&self, fbn: u64) -> core::ops::Range<usize> {
        let first = ((fbn * CONTAINER_ENTRIES_PER_BLOCK) as usize).min(self.entries.len());
        first..(first + WORDS_PER_BLOCK).min(self.entries.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::block_from_words;

    #[test]
    fn blocks_encode_their_own_entries_and_the_short_last_one_pads_with_zeros() {
        let entries = WORDS_PER_BLOCK as u64 + 3;
        let mut map = ContainerMap::new(entries);
        for vvbn in 0..entries {
            map.set(vvbn, 1000 + vvbn);
        }
        let full = map.block_words(0);
        assert!(full.iter().enumerate().all(|(n, &w)| w == 1000 + n as u64));
        let last = map.block_words(1);
        let w = WORDS_PER_BLOCK as u64;
        assert_eq!(last[..3], [1000 + w, 1001 + w, 1002 + w]);
        assert!(
            last[3..].iter().all(|&w| w == 0),
            "padding past the map's end"
        );
        assert!(map.block_words(2).iter().all(|&w| w == 0));
        assert_eq!(map.blocks(), 2);
    }

    #[test]
    fn every_block_sums_its_words_through_sets_and_loads() {
        let entries = 2 * WORDS_PER_BLOCK as u64 + 10;
        let mut map = ContainerMap::new(entries);
        let sums_agree = |map: &ContainerMap| {
            (0..=map.blocks()).all(|fbn| map.block_sum(fbn) == WordSum::of(&*map.block_words(fbn)))
        };
        for vvbn in (0..entries).step_by(3) {
            map.set(vvbn, vvbn * 7 + 1);
        }
        assert!(sums_agree(&map));
        for vvbn in (0..entries).step_by(6) {
            assert_eq!(map.set(vvbn, 0), vvbn * 7 + 1, "the old entry comes back");
        }
        assert!(sums_agree(&map));
        let mut copy = ContainerMap::new(entries);
        for fbn in 0..map.blocks() {
            copy.load_block(fbn, &block_from_words(&map.block_words(fbn)));
        }
        assert_eq!(copy, map, "loaded blocks bring their entries and sums");
        assert!(sums_agree(&copy));
    }
}
