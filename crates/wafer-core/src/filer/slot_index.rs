//! The buffer cache's index from blocks to slab slots, in 8 bytes a block.
//!
//! Almost every use of a cached block starts with a lookup here, and under a
//! random load most lookups miss the CPU's cache: what they cost is how many
//! bytes the index spreads over. So a bucket holds only the slot and the high
//! half of the key's hash; the key itself stays in the slab, and the caller
//! says whether a slot holds the key it seeks. A lookup for a block that is
//! not cached (most of them, when the working set dwarfs the cache) reads
//! hashes only: a slot is looked at only when its hash matches, a false match
//! once in 2^32. One for a cached block reads the block's slab entry, which
//! the caller wanted anyway. A map keeping the 16-byte key in the table would
//! take 32 bytes a bucket.
//!
//! Otherwise it works as [`FixedMap`](crate::fixed_map::FixedMap) does: open
//! addressing with linear probing in a power-of-two table never more than half
//! full, each entry's home bucket chosen by its hash's high bits, and removal
//! shifting the rest of a probe run back into the hole, so there are no
//! tombstones and the layout is a fixed function of the operations.

/// A bucket: 0 when empty, else the hash's high half above the slot plus one.
type Bucket = u64;

/// Keys come in runs of this many that a caller wants side by side (a LUN's
/// blocks, read and evicted together): the low bits of a key's tag place it
/// that many buckets past the home its other bits give, so a run whose tags
/// differ only there fills adjacent buckets.
pub(super) const RUN_BLOCKS: u64 = 8;

/// The hash of the key `within` a run of [`RUN_BLOCKS`] whose keys share
/// `run_hash`: the run's hash but for the tag's low bits, which say which key
/// of the run it is.
pub(super) fn hash_in_run(run_hash: u64, within: u64) -> u64 {
    assert!(within < RUN_BLOCKS, "key {within} of a run of {RUN_BLOCKS}");
    run_hash & !((RUN_BLOCKS - 1) << 32) | within << 32
}

/// The smallest table: 2^MIN_BITS buckets.
const MIN_BITS: u32 = 4;

/// Slots by the hash of the key each holds.
#[derive(Clone, Debug)]
pub(super) struct SlotIndex {
    buckets: Vec<Bucket>,
    /// log2 of the number of buckets; at most 29, as the home bucket comes
    /// from the hash's high half above the bits within a run.
    bits: u32,
    len: usize,
}

impl Default for SlotIndex {
    fn default() -> Self {
        SlotIndex {
            buckets: vec![0; 1 << MIN_BITS],
            bits: MIN_BITS,
            len: 0,
        }
    }
}

impl SlotIndex {
    /// Slots indexed.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// The slot with key hash `hash` that `holds` the key sought.
    pub(super) fn get(&self, hash: u64, holds: impl Fn(u32) -> bool) -> Option<u32> {
        self.find(hash, holds).map(|at| slot_of(self.buckets[at]))
    }

    /// Indexes `slot` for a key with hash `hash`, in place of the slot that
    /// `holds` the same key, if any: that one is returned.
    pub(super) fn insert(
        &mut self,
        hash: u64,
        slot: u32,
        holds: impl Fn(u32) -> bool,
    ) -> Option<u32> {
        assert!(slot < u32::MAX, "slot {slot} out of range");
        if 2 * (self.len + 1) > self.buckets.len() {
            self.grow();
        }
        let tag = tag_of(hash);
        match self.probe(tag, holds) {
            Ok(at) => {
                let replaced = slot_of(self.buckets[at]);
                self.buckets[at] = bucket_of(tag, slot);
                Some(replaced)
            }
            Err(empty) => {
                self.buckets[empty] = bucket_of(tag, slot);
                self.len += 1;
                None
            }
        }
    }

    /// Unindexes the slot with key hash `hash` that `holds` the key; returns it.
    pub(super) fn remove(&mut self, hash: u64, holds: impl Fn(u32) -> bool) -> Option<u32> {
        let mut hole = self.find(hash, holds)?;
        let slot = slot_of(self.buckets[hole]);
        self.buckets[hole] = 0;
        self.len -= 1;
        let mut at = self.next(hole);
        while self.buckets[at] != 0 {
            // The entry may fill the hole if the hole lies on its probe path:
            // from its home bucket up to where it sits.
            let mask = self.mask();
            let from_home = at.wrapping_sub(self.home(tag_in(self.buckets[at]))) & mask;
            let from_hole = at.wrapping_sub(hole) & mask;
            if from_home >= from_hole {
                self.buckets[hole] = core::mem::take(&mut self.buckets[at]);
                hole = at;
            }
            at = self.next(at);
        }
        Some(slot)
    }

    /// Every slot indexed, in table order: sort before deciding anything
    /// from it.
    pub(super) fn slots(&self) -> impl Iterator<Item = u32> + '_ {
        self.buckets
            .iter()
            .filter(|&&bucket| bucket != 0)
            .map(|&bucket| slot_of(bucket))
    }

    /// Hints that a key with hash `hash` will be looked up soon.
    pub(super) fn prefetch(&self, hash: u64) {
        prefetch_index::prefetch_index(&self.buckets, self.home(tag_of(hash)));
    }

    fn find(&self, hash: u64, holds: impl Fn(u32) -> bool) -> Option<usize> {
        self.probe(tag_of(hash), holds).ok()
    }

    /// Walks the probe run of a key with tag `tag`: the bucket whose slot
    /// `holds` it, or else the empty bucket that ends the run.
    fn probe(&self, tag: u32, holds: impl Fn(u32) -> bool) -> Result<usize, usize> {
        let mut at = self.home(tag);
        loop {
            let bucket = self.buckets[at];
            if bucket == 0 {
                return Err(at);
            }
            if tag_in(bucket) == tag && holds(slot_of(bucket)) {
                return Ok(at);
            }
            at = self.next(at);
        }
    }

    fn home(&self, tag: u32) -> usize {
        let within = tag as usize % RUN_BLOCKS as usize;
        ((tag >> (32 - self.bits)) as usize + within) & self.mask()
    }

    fn next(&self, at: usize) -> usize {
        (at + 1) & self.mask()
    }

    fn mask(&self) -> usize {
        self.buckets.len() - 1
    }

    fn grow(&mut self) {
        // The bits that choose a home must not reach the bits within a run.
        assert!(
            self.bits + RUN_BLOCKS.trailing_zeros() < 32,
            "an index of more than 2^28 slots"
        );
        self.bits += 1;
        let old = core::mem::replace(&mut self.buckets, vec![0; 1 << self.bits]);
        for bucket in old.into_iter().filter(|&bucket| bucket != 0) {
            // Every entry is distinct: each goes to the end of its run.
            let empty = self.probe(tag_in(bucket), |_| false).expect_err("no match");
            self.buckets[empty] = bucket;
        }
    }
}

fn tag_of(hash: u64) -> u32 {
    (hash >> 32) as u32
}

fn bucket_of(tag: u32, slot: u32) -> Bucket {
    u64::from(tag) << 32 | u64::from(slot + 1)
}

fn tag_in(bucket: Bucket) -> u32 {
    (bucket >> 32) as u32
}

fn slot_of(bucket: Bucket) -> u32 {
    (bucket as u32) - 1
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixed_map::mix_words;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    /// Keys as the cache uses them: each slot of `slab` holds one key, and
    /// the index must find the slot by the key's hash alone plus `holds`.
    struct Harness {
        index: SlotIndex,
        slab: Vec<Option<u16>>,
        model: BTreeMap<u16, u32>,
        hash: fn(u16) -> u64,
    }

    impl Harness {
        fn holds(slab: &[Option<u16>], key: u16) -> impl Fn(u32) -> bool + '_ {
            move |slot| slab[slot as usize] == Some(key)
        }

        fn insert(&mut self, key: u16) {
            let slot = self.slab.len() as u32;
            self.slab.push(Some(key));
            let replaced = self
                .index
                .insert((self.hash)(key), slot, Self::holds(&self.slab, key));
            assert_eq!(replaced, self.model.insert(key, slot), "insert {key}");
            if let Some(old) = replaced {
                self.slab[old as usize] = None;
            }
        }

        fn remove(&mut self, key: u16) {
            let removed = self
                .index
                .remove((self.hash)(key), Self::holds(&self.slab, key));
            assert_eq!(removed, self.model.remove(&key), "remove {key}");
            if let Some(slot) = removed {
                self.slab[slot as usize] = None;
            }
        }

        fn agrees(&self) {
            assert_eq!(self.index.len(), self.model.len());
            for key in 0..64 {
                let found = self
                    .index
                    .get((self.hash)(key), Self::holds(&self.slab, key));
                assert_eq!(found, self.model.get(&key).copied(), "get {key}");
            }
            let mut slots: Vec<u32> = self.index.slots().collect();
            slots.sort_unstable();
            let mut expected: Vec<u32> = self.model.values().copied().collect();
            expected.sort_unstable();
            assert_eq!(slots, expected);
        }
    }

    fn run(ops: &[(bool, u16)], hash: fn(u16) -> u64) {
        let mut harness = Harness {
            index: SlotIndex::default(),
            slab: Vec::new(),
            model: BTreeMap::new(),
            hash,
        };
        for &(insert, key) in ops {
            match insert {
                true => harness.insert(key),
                false => harness.remove(key),
            }
            harness.agrees();
        }
    }

    /// Hashes that share their high half four ways, so that probe runs are
    /// long, tags collide and removals shift entries across the wrap-around.
    fn clustered(key: u16) -> u64 {
        (u64::MAX - u64::from(key % 4)) << 32 | u64::from(key)
    }

    fn spread(key: u16) -> u64 {
        mix_words(0, u64::from(key))
    }

    proptest! {
        #[test]
        fn the_index_agrees_with_a_btree(
            ops in proptest::collection::vec((any::<bool>(), 0u16..64), 0..400)
        ) {
            run(&ops, clustered);
            run(&ops, spread);
        }
    }

    #[test]
    fn a_slot_whose_tag_matches_but_holds_another_key_is_passed_over() {
        // Every key has the same hash: only `holds` tells them apart.
        run(
            &[
                (true, 1),
                (true, 2),
                (true, 3),
                (false, 2),
                (true, 2),
                (false, 1),
            ],
            |_| 7 << 32,
        );
    }
}
