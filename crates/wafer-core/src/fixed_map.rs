//! A map for the engine's hottest lookups, hashed by a fixed function.
//!
//! The buffer cache looks a block up several times for every host I/O, and a
//! B-tree over hundreds of thousands of blocks spends most of that on
//! comparisons that miss the CPU cache; the engine's requests and I/Os, and
//! the lab's device commands, are looked up by number as often. This map
//! answers in one probe or a few: open addressing with linear probing in a power-of-two table that is
//! never more than half full. A removal shifts the rest of its probe run back
//! into the hole, so there are no tombstones and a lookup stops at the first
//! empty bucket.
//!
//! The core must be deterministic, which is why `std`'s randomly seeded
//! `HashMap` is banned here. This map's hash is a fixed function of the key
//! (Fibonacci hashing of the key's words), so the same operations lay the
//! table out the same way on every run; even so, its [`FixedMap::iter`] is in
//! table order, and nothing may decide anything from that order without
//! sorting first.

/// A key with a fixed 64-bit hash: equal keys hash alike on every run.
pub trait FixedHash: Copy + Eq {
    /// The key's hash; its high bits choose the bucket.
    fn fixed_hash(&self) -> u64;
}

/// Identifiers handed out in sequence: request, I/O and command numbers.
impl FixedHash for u64 {
    fn fixed_hash(&self) -> u64 {
        mix_words(0, *self)
    }
}

/// A block tree's node: (level, index).
impl FixedHash for (u8, u64) {
    fn fixed_hash(&self) -> u64 {
        mix_words(u64::from(self.0), self.1)
    }
}

/// Mixes two words into a hash whose high bits depend on every input bit.
pub fn mix_words(high: u64, low: u64) -> u64 {
    const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;
    (high.rotate_left(32) ^ low).wrapping_mul(GOLDEN)
}

/// The smallest table: 2^MIN_BITS buckets.
const MIN_BITS: u32 = 4;

/// A map from keys with a [`FixedHash`] to values, in a table that is never
/// more than half full.
#[derive(Clone, Debug)]
pub struct FixedMap<K, V> {
    buckets: Vec<Option<(K, V)>>,
    /// log2 of the number of buckets.
    bits: u32,
    len: usize,
}

impl<K: FixedHash, V> Default for FixedMap<K, V> {
    fn default() -> Self {
        FixedMap {
            buckets: Self::empty_table(MIN_BITS),
            bits: MIN_BITS,
            len: 0,
        }
    }
}

impl<K: FixedHash, V> FixedMap<K, V> {
    /// How many keys are mapped.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no key is mapped.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether `key` is mapped.
    pub fn contains_key(&self, key: &K) -> bool {
        self.find(key).is_some()
    }

    /// The value of `key`.
    pub fn get(&self, key: &K) -> Option<&V> {
        let at = self.find(key)?;
        self.buckets[at].as_ref().map(|(_, value)| value)
    }

    /// The value of `key`, to change.
    pub fn get_mut(&mut self, key: &K) -> Option<&mut V> {
        let at = self.find(key)?;
        self.buckets[at].as_mut().map(|(_, value)| value)
    }

    /// Maps `key` to `value`; returns the value it replaces.
    pub fn insert(&mut self, key: K, value: V) -> Option<V> {
        if 2 * (self.len + 1) > self.buckets.len() {
            self.grow();
        }
        match self.probe(&key) {
            Ok(at) => {
                let (_, old) = self.buckets[at].as_mut().expect("found");
                Some(core::mem::replace(old, value))
            }
            Err(empty) => {
                self.buckets[empty] = Some((key, value));
                self.len += 1;
                None
            }
        }
    }

    /// The value of `key`, which is first mapped to `make()` if it is not
    /// mapped yet: one probe either way.
    pub fn get_or_insert_with(&mut self, key: K, make: impl FnOnce() -> V) -> &mut V {
        if 2 * (self.len + 1) > self.buckets.len() {
            self.grow();
        }
        let at = match self.probe(&key) {
            Ok(at) => at,
            Err(empty) => {
                self.buckets[empty] = Some((key, make()));
                self.len += 1;
                empty
            }
        };
        &mut self.buckets[at].as_mut().expect("found or filled").1
    }

    /// Unmaps `key`; returns its value.
    pub fn remove(&mut self, key: &K) -> Option<V> {
        let mut hole = self.find(key)?;
        let (_, value) = self.buckets[hole].take().expect("found");
        self.len -= 1;
        let mut at = self.next(hole);
        while let Some((held, _)) = &self.buckets[at] {
            // The entry may fill the hole if the hole lies on its probe path:
            // from its home bucket up to where it sits.
            let mask = self.mask();
            let from_home = at.wrapping_sub(self.home(held)) & mask;
            let from_hole = at.wrapping_sub(hole) & mask;
            if from_home >= from_hole {
                self.buckets[hole] = self.buckets[at].take();
                hole = at;
            }
            at = self.next(at);
        }
        Some(value)
    }

    /// Unmaps every key, keeping the table: a map that fills to the same
    /// size again does not grow through every size on the way.
    pub fn clear(&mut self) {
        self.buckets.iter_mut().for_each(|bucket| *bucket = None);
        self.len = 0;
    }

    /// Every entry, in table order: sort before deciding anything from it.
    pub fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        self.buckets
            .iter()
            .filter_map(|bucket| bucket.as_ref().map(|(key, value)| (key, value)))
    }

    fn find(&self, key: &K) -> Option<usize> {
        self.probe(key).ok()
    }

    /// Hints that `key` will be looked up soon: starts loading its home bucket.
    pub fn prefetch(&self, key: &K) {
        prefetch_index::prefetch_index(&self.buckets, self.home(key));
    }

    /// Walks `key`'s probe run: the bucket holding it, or else the empty
    /// bucket that ends the run, where it would go.
    fn probe(&self, key: &K) -> Result<usize, usize> {
        let mut at = self.home(key);
        loop {
            match &self.buckets[at] {
                Some((held, _)) if held == key => return Ok(at),
                Some(_) => at = self.next(at),
                None => return Err(at),
            }
        }
    }

    fn home(&self, key: &K) -> usize {
        (key.fixed_hash() >> (64 - self.bits)) as usize
    }

    fn next(&self, at: usize) -> usize {
        (at + 1) & self.mask()
    }

    fn mask(&self) -> usize {
        self.buckets.len() - 1
    }

    fn grow(&mut self) {
        self.bits += 1;
        let old = core::mem::replace(&mut self.buckets, Self::empty_table(self.bits));
        self.len = 0;
        for (key, value) in old.into_iter().flatten() {
            self.insert(key, value);
        }
    }

    fn empty_table(bits: u32) -> Vec<Option<(K, V)>> {
        core::iter::repeat_with(|| None).take(1 << bits).collect()
    }
}

/// Equal when they map the same keys to equal values, whatever their tables'
/// sizes or layouts.
impl<K: FixedHash, V: PartialEq> PartialEq for FixedMap<K, V> {
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len
            && self
                .iter()
                .all(|(key, value)| other.get(key) == Some(value))
    }
}

impl<K: FixedHash, V: Eq> Eq for FixedMap<K, V> {}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    /// A key whose hash clusters on purpose, so that probe runs are long and
    /// removals must shift entries across the table's wrap-around.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
    struct Clustered(u16);

    impl FixedHash for Clustered {
        fn fixed_hash(&self) -> u64 {
            u64::MAX - u64::from(self.0 % 4) // the last buckets, then wrap
        }
    }

    #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
    struct Spread(u64);

    impl FixedHash for Spread {
        fn fixed_hash(&self) -> u64 {
            mix_words(0, self.0)
        }
    }

    #[derive(Clone, Debug)]
    enum Op {
        Insert(u16, u32),
        Remove(u16),
        /// Adds to the key's value, mapping it to 0 first if need be.
        Add(u16, u32),
    }

    fn ops() -> impl Strategy<Value = Vec<Op>> {
        let op = prop_oneof![
            (0u16..64, any::<u32>()).prop_map(|(k, v)| Op::Insert(k, v)),
            (0u16..64).prop_map(Op::Remove),
            (0u16..64, 0u32..1000).prop_map(|(k, v)| Op::Add(k, v)),
        ];
        proptest::collection::vec(op, 0..400)
    }

    /// Applies `ops` to the map and to a B-tree, comparing every answer.
    fn agrees_with_a_btree<K: FixedHash + Ord + core::fmt::Debug>(
        ops: &[Op],
        make: impl Fn(u16) -> K,
    ) {
        let mut map = FixedMap::default();
        let mut model = BTreeMap::new();
        for op in ops {
            match *op {
                Op::Insert(k, v) => assert_eq!(map.insert(make(k), v), model.insert(make(k), v)),
                Op::Remove(k) => assert_eq!(map.remove(&make(k)), model.remove(&make(k))),
                Op::Add(k, v) => {
                    let held = map.get_or_insert_with(make(k), || 0);
                    *held = held.wrapping_add(v);
                    let modelled = model.entry(make(k)).or_insert(0);
                    *modelled = modelled.wrapping_add(v);
                    assert_eq!(*held, *modelled);
                }
            }
            assert_eq!(map.len(), model.len());
        }
        for k in 0..64 {
            assert_eq!(map.get(&make(k)), model.get(&make(k)), "key {k}");
        }
        let mut entries: Vec<(K, u32)> = map.iter().map(|(k, v)| (*k, *v)).collect();
        entries.sort();
        assert_eq!(entries, model.into_iter().collect::<Vec<_>>());
    }

    proptest! {
        #[test]
        fn it_answers_as_a_btree_does_with_clustered_keys(ops in ops()) {
            agrees_with_a_btree(&ops, Clustered);
        }

        #[test]
        fn it_answers_as_a_btree_does_with_spread_keys(ops in ops()) {
            agrees_with_a_btree(&ops, |k| Spread(u64::from(k) * 4096));
        }
    }

    #[test]
    fn it_grows_and_stays_at_most_half_full() {
        let mut map = FixedMap::default();
        for k in 0..10_000 {
            map.insert(Spread(k), k);
            assert!(2 * map.len() <= map.buckets.len());
        }
        for k in (0..10_000).step_by(2) {
            assert_eq!(map.remove(&Spread(k)), Some(k));
        }
        assert!((0..10_000).all(|k| map.contains_key(&Spread(k)) == (k % 2 == 1)));
        *map.get_mut(&Spread(1)).unwrap() = 7;
        assert_eq!(map.get(&Spread(1)), Some(&7));
    }

    #[test]
    fn a_cleared_map_keeps_its_table_and_maps_nothing() {
        let mut map = FixedMap::default();
        (0..1000).for_each(|k| _ = map.insert(Spread(k), k));
        let buckets = map.buckets.len();
        map.clear();
        assert!(map.is_empty() && map.iter().next().is_none());
        assert!(!map.contains_key(&Spread(3)));
        assert_eq!(map.buckets.len(), buckets, "no shrinking");
        map.insert(Spread(3), 4);
        assert_eq!((map.len(), map.get(&Spread(3))), (1, Some(&4)));
    }

    #[test]
    fn maps_are_equal_by_content_not_by_layout() {
        let grown = {
            let mut map = FixedMap::default();
            (0..100).for_each(|k| _ = map.insert(Spread(k), k));
            (2..100).for_each(|k| _ = map.remove(&Spread(k)));
            map
        };
        let mut small = FixedMap::default();
        small.insert(Spread(1), 1);
        small.insert(Spread(0), 0);
        assert_ne!(grown.buckets.len(), small.buckets.len());
        assert_eq!(grown, small);
        small.insert(Spread(1), 2);
        assert_ne!(grown, small, "a value differs");
        small.insert(Spread(1), 1);
        small.insert(Spread(5), 5);
        assert_ne!(grown, small, "a key more");
    }

    #[test]
    fn the_same_operations_give_the_same_table_order() {
        let build = || {
            let mut map = FixedMap::default();
            for k in [9u64, 3, 700, 12, 5, 88] {
                map.insert(Spread(k), ());
            }
            map.remove(&Spread(12));
            map.iter().map(|(k, _)| *k).collect::<Vec<_>>()
        };
        assert_eq!(build(), build());
    }
}
