//! The buffer cache's LUN blocks, and the order in which they leave it.
//!
//! Every cached block carries the tick of the use clock at its last use. The
//! clock only moves forward and every use takes a tick of its own, so the
//! order in which ticks are handed out is the order of age. Each volume keeps
//! that order as a log of `(tick, block)` records: a use appends one, and the
//! block's earlier records go stale, recognised by a tick that is no longer
//! the block's. Eviction reads a log from its old end, so choosing the oldest
//! blocks costs what is evicted, not a scan of the whole cache; the blocks it
//! must pass over (dirty, pinned, being filled or waited for) go back to the
//! front in their order. A log is rebuilt from its volume's blocks when stale
//! records outnumber live ones, so it stays within twice the cache's size.
//!
//! The cache also knows which blocks are still being read in (their content
//! arrives through [`BufferCache::fill_in`]), so a CP finds the ones it must
//! wait for, and a block arriving from disk is found, without a walk or a
//! probe of the whole cache; and how many blocks it holds under each level-1
//! indirect block, which may not leave while any do.
//!
//! Under a random load nearly every use of a block finds its data cold in the
//! CPU's cache, so what a block costs is the cache lines it touches. Entries
//! are 48 bytes in a slab (what only a block being read in needs is boxed
//! apart), and a [`SlotIndex`] of 8-byte buckets finds a key's slot, keeping a
//! run of a LUN's blocks side by side; the few questions that need key order
//! (a LUN's blocks, when it shrinks or is restored) sort what they find.
//!
//! Eviction takes the oldest evictable blocks by the volume's cache policy
//! first (`reuse` before `default` before `keep`), then by tick: the same
//! blocks a sort of the whole cache by `(policy, tick, key)` would give.

use std::collections::{BTreeMap, VecDeque};

use super::slot_index::{RUN_BLOCKS, SlotIndex, hash_in_run};
use super::{CachePolicy, PREFETCH_AHEAD, QueuedOp, RequestId};
use crate::fixed_map::{FixedHash, FixedMap, mix_words};
use crate::format::POINTERS_PER_BLOCK;
use crate::nvlog::LunId;
use crate::payload::Payload;
use crate::units::{Fbn, VolumeId};

/// A cached LUN block: which LUN, which block.
pub(super) type CacheKey = (LunId, Fbn);

/// A level-1 indirect block of a LUN, by its index among the LUN's level-1
/// blocks.
type L1Key = (LunId, u64);

/// A LUN as one word, for hashing keys that name it and for sorting them:
/// the volume above the file, so words order LUNs as `LunId` does.
pub(super) fn lun_word(lun: LunId) -> u64 {
    u64::from(lun.volume.0) << 32 | u64::from(lun.file.0)
}

impl FixedHash for CacheKey {
    fn fixed_hash(&self) -> u64 {
        mix_words(lun_word(self.0), self.1.0)
    }
}

impl FixedHash for L1Key {
    fn fixed_hash(&self) -> u64 {
        mix_words(lun_word(self.0), self.1)
    }
}

/// The level-1 indirect block above a LUN block.
fn l1_above((lun, fbn): CacheKey) -> L1Key {
    (lun, fbn.0 / POINTERS_PER_BLOCK as u64)
}

/// A key's hash for the index: blocks in an aligned run of
/// [`RUN_BLOCKS`](super::slot_index::RUN_BLOCKS) share it but for the bits
/// that say which of the run each is, so the index keeps them side by side
/// and a read of many blocks finds them in a cache line or two.
fn index_hash((lun, fbn): &CacheKey) -> u64 {
    let run = mix_words(lun_word(*lun), fbn.0 / RUN_BLOCKS);
    hash_in_run(run, fbn.0 % RUN_BLOCKS)
}

/// Whether a slot of `slab` holds `key`: what the index asks of the slots
/// it finds by the key's hash.
fn holds<'a, P: Payload>(slab: &'a [Slot<P>], key: &'a CacheKey) -> impl Fn(u32) -> bool + 'a {
    move |slot| {
        slab[slot as usize]
            .as_ref()
            .is_some_and(|(held, _)| held == key)
    }
}

/// Stale records a volume's log may hold beyond its live ones before it is
/// rebuilt: enough that a small cache is not rebuilt on every use.
const STALE_SLACK: usize = 1024;

/// A block of a LUN in the buffer cache: small, since the cache holds
/// hundreds of thousands and every host I/O visits several.
#[derive(Clone, Debug)]
pub(super) struct CacheEntry<P: Payload> {
    pub(super) state: BlockState<P::Content>,
    pub(super) dirty: bool,
    pub(super) pinned: bool,
    /// Whether the host has written it since it came in: what the Flash
    /// Cache calls low-priority data.
    pub(super) written: bool,
    /// Whether the host's last write to it was small and random, so that in
    /// a hybrid aggregate the CP puts it in Flash Pool's write cache.
    pub(super) write_cached: bool,
    /// Changed only through [`BufferCache::touch`], which logs it.
    last_use: u64,
}

/// Whether a cached block's content is in memory yet.
#[derive(Clone, Debug)]
pub(super) enum BlockState<C> {
    /// Being read in. Few blocks are at a time, so what they need lives in a
    /// box of its own rather than in every entry.
    Filling(Box<Filling>),
    /// In memory, from [`BufferCache::fill_in`] (or from the start) until the
    /// block leaves.
    Present(C),
}

/// A block being read in.
#[derive(Clone, Debug)]
pub(super) struct Filling {
    /// The read that will fill the entry. A LUN destroyed and created again
    /// reuses keys; a read for the old one must not fill the new.
    pub(super) fill: u64,
    /// Changes made meanwhile, applied in order when the content arrives.
    pub(super) queue: Vec<QueuedOp<'static>>,
    /// Reads waiting for the content.
    pub(super) waiters: Waiters,
}

/// The reads waiting for a block being read in, in the order they came.
/// Nearly every fill has exactly one, the read that started it: that one is
/// kept without an allocation of its own (one per block read in, else).
#[derive(Clone, Debug, Default)]
pub(super) struct Waiters {
    /// The first; `None` only while there are none.
    first: Option<RequestId>,
    /// The rest, in order.
    rest: Vec<RequestId>,
}

impl Waiters {
    /// Adds `id` behind those waiting already.
    pub(super) fn push(&mut self, id: RequestId) {
        match self.first {
            None => self.first = Some(id),
            Some(_) => self.rest.push(id),
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.first.is_none()
    }
}

impl IntoIterator for Waiters {
    type Item = RequestId;
    type IntoIter =
        core::iter::Chain<core::option::IntoIter<RequestId>, std::vec::IntoIter<RequestId>>;

    fn into_iter(self) -> Self::IntoIter {
        self.first.into_iter().chain(self.rest)
    }
}

impl<P: Payload> CacheEntry<P> {
    /// An entry whose content read `fill` is bringing, with changes queued
    /// behind it and reads `waiting` for it, used at tick `last_use`.
    pub(super) fn filling(
        fill: u64,
        queue: Vec<QueuedOp<'static>>,
        waiting: impl IntoIterator<Item = RequestId>,
        last_use: u64,
    ) -> CacheEntry<P> {
        let mut waiters = Waiters::default();
        waiting.into_iter().for_each(|id| waiters.push(id));
        let filling = Filling {
            fill,
            queue,
            waiters,
        };
        CacheEntry {
            state: BlockState::Filling(Box::new(filling)),
            dirty: false,
            pinned: false,
            written: false,
            write_cached: false,
            last_use,
        }
    }

    /// A clean entry holding `content`, used at tick `last_use`.
    pub(super) fn present(content: P::Content, last_use: u64) -> CacheEntry<P> {
        CacheEntry {
            state: BlockState::Present(content),
            dirty: false,
            pinned: false,
            written: false,
            write_cached: false,
            last_use,
        }
    }

    /// The content, once it is in memory.
    pub(super) fn content(&self) -> Option<&P::Content> {
        match &self.state {
            BlockState::Present(content) => Some(content),
            BlockState::Filling(_) => None,
        }
    }

    /// What waits for the content, while it is being read in.
    fn in_flight(&self) -> Option<&Filling> {
        match &self.state {
            BlockState::Filling(filling) => Some(filling),
            BlockState::Present(_) => None,
        }
    }

    /// What waits for the content, while it is being read in.
    pub(super) fn in_flight_mut(&mut self) -> Option<&mut Filling> {
        match &mut self.state {
            BlockState::Filling(filling) => Some(filling),
            BlockState::Present(_) => None,
        }
    }

    /// Whether eviction may take it: clean, not held by a CP, with its
    /// content in (so nobody waits for it).
    fn is_evictable(&self) -> bool {
        !self.dirty && !self.pinned && matches!(self.state, BlockState::Present(_))
    }
}

/// A block eviction took out of the cache: clean, its content in.
#[derive(Clone, Debug)]
pub(super) struct Evicted<P: Payload> {
    pub(super) key: CacheKey,
    /// The tick of its last use.
    pub(super) last_use: u64,
    pub(super) content: P::Content,
    /// Whether the host wrote it while it was cached.
    pub(super) written: bool,
}

/// One volume's uses, oldest first: the tick and the slab slot of each.
type AgeLog = VecDeque<(u64, u32)>;

/// A slab slot: the block cached there, if any.
type Slot<P> = Option<(CacheKey, CacheEntry<P>)>;

// A slot is touched on every use of its block, mostly cold: keep it to 48
// bytes for either payload (a box of content, or a stamp).
const _: () = assert!(size_of::<Slot<crate::payload::Bytes>>() <= 48);
const _: () = assert!(size_of::<Slot<crate::payload::Stamps>>() <= 48);

/// The LUN blocks in memory, with their order of age. Entries live in a slab,
/// so that a record of use finds its block without a search; the index finds
/// the slot of a key.
#[derive(Clone, Debug)]
pub(super) struct BufferCache<P: Payload> {
    index: SlotIndex,
    slab: Vec<Slot<P>>,
    vacant: Vec<u32>,
    ages: BTreeMap<VolumeId, AgeLog>,
    /// The blocks whose content is still being read, with their slots: few,
    /// so a block arriving from disk is found here without a probe of the
    /// whole cache's map.
    filling: FixedMap<CacheKey, u32>,
    /// How many cached blocks lie under each level-1 indirect block (those
    /// with none are absent).
    under_l1: FixedMap<L1Key, u32>,
}

impl<P: Payload> Default for BufferCache<P> {
    fn default() -> Self {
        BufferCache {
            index: SlotIndex::default(),
            slab: Vec::new(),
            vacant: Vec::new(),
            ages: BTreeMap::new(),
            filling: FixedMap::default(),
            under_l1: FixedMap::default(),
        }
    }
}

impl<P: Payload> BufferCache<P> {
    /// Blocks cached.
    pub(super) fn len(&self) -> usize {
        self.index.len()
    }

    pub(super) fn contains_key(&self, key: &CacheKey) -> bool {
        self.slot_of(key).is_some()
    }

    pub(super) fn get(&self, key: &CacheKey) -> Option<&CacheEntry<P>> {
        self.slot_of(key).map(|slot| self.entry(slot))
    }

    pub(super) fn get_mut(&mut self, key: &CacheKey) -> Option<&mut CacheEntry<P>> {
        let slot = self.slot_of(key)?;
        Some(self.entry_mut(slot))
    }

    /// Hints that `key` will be looked up soon.
    pub(super) fn prefetch(&self, key: &CacheKey) {
        self.index.prefetch(index_hash(key));
    }

    /// The slot that holds `key`.
    fn slot_of(&self, key: &CacheKey) -> Option<u32> {
        self.index.get(index_hash(key), holds(&self.slab, key))
    }

    /// Every cached block's key and slot, in no meaningful order.
    fn cached(&self) -> impl Iterator<Item = (&CacheKey, u32)> {
        self.index.slots().map(|slot| {
            let (key, _) = self.slab[slot as usize].as_ref().expect("an indexed slot");
            (key, slot)
        })
    }

    fn entry(&self, slot: u32) -> &CacheEntry<P> {
        &self.slab[slot as usize]
            .as_ref()
            .expect("an occupied slot")
            .1
    }

    fn entry_mut(&mut self, slot: u32) -> &mut CacheEntry<P> {
        &mut self.slab[slot as usize]
            .as_mut()
            .expect("an occupied slot")
            .1
    }

    /// The cached blocks of `lun` from block `first` on, in block order.
    pub(super) fn keys_of(&self, lun: LunId, first: Fbn) -> Vec<CacheKey> {
        let mut keys: Vec<CacheKey> = self
            .cached()
            .map(|(key, _)| *key)
            .filter(|&(of, fbn)| of == lun && fbn >= first)
            .collect();
        keys.sort_unstable();
        keys
    }

    /// Whether any block under level-1 indirect block `index` of `lun` is
    /// cached, in any state.
    pub(super) fn caches_under_l1(&self, lun: LunId, index: u64) -> bool {
        self.under_l1.contains_key(&(lun, index))
    }

    /// The blocks still being read in, in key order.
    pub(super) fn filling(&self) -> Vec<(CacheKey, &Filling)> {
        let mut filling: Vec<(CacheKey, u32)> = self
            .filling
            .iter()
            .map(|(key, &slot)| (*key, slot))
            .collect();
        filling.sort_unstable();
        filling
            .into_iter()
            .map(|(key, slot)| {
                let filling = self.entry(slot).in_flight().expect("being read in");
                (key, filling)
            })
            .collect()
    }

    /// The block `key` if it is being read in.
    pub(super) fn filling_mut(&mut self, key: &CacheKey) -> Option<&mut CacheEntry<P>> {
        let slot = *self.filling.get(key)?;
        Some(self.entry_mut(slot))
    }

    /// A block being read in gets its content.
    pub(super) fn fill_in(&mut self, key: &CacheKey, content: P::Content) {
        let slot = self
            .filling
            .remove(key)
            .unwrap_or_else(|| panic!("{key:?} is not being read in"));
        self.entry_mut(slot).state = BlockState::Present(content);
    }

    /// Caches `entry` as `key`, replacing what was there.
    pub(super) fn insert(&mut self, key: CacheKey, entry: CacheEntry<P>) {
        let tick = entry.last_use;
        let slot = match self.vacant.pop() {
            Some(slot) => slot,
            None => {
                self.slab.push(None);
                u32::try_from(self.slab.len() - 1).expect("a cache of fewer than 2^32 blocks")
            }
        };
        let replaced = self
            .index
            .insert(index_hash(&key), slot, holds(&self.slab, &key));
        match replaced {
            Some(old) => {
                self.slab[old as usize] = None;
                self.vacant.push(old);
                self.filling.remove(&key);
            }
            None => *self.under_l1.get_or_insert_with(l1_above(key), || 0) += 1,
        }
        if entry.content().is_none() {
            self.filling.insert(key, slot);
        }
        self.slab[slot as usize] = Some((key, entry));
        self.log(key.0.volume, tick, slot);
    }

    /// Drops a block.
    pub(super) fn remove(&mut self, key: &CacheKey) -> Option<CacheEntry<P>> {
        let slot = self.index.remove(index_hash(key), holds(&self.slab, key))?;
        self.filling.remove(key);
        let l1 = l1_above(*key);
        let count = self.under_l1.get_mut(&l1).expect("counted");
        *count -= 1;
        if *count == 0 {
            self.under_l1.remove(&l1);
        }
        self.vacant.push(slot);
        self.slab[slot as usize].take().map(|(_, entry)| entry)
    }

    /// Records a use of `key` at `tick`, newer than every tick handed out
    /// before, if it is cached; the entry is returned for the use.
    pub(super) fn touch(&mut self, key: CacheKey, tick: u64) -> Option<&mut CacheEntry<P>> {
        let slot = self.slot_of(&key)?;
        self.entry_mut(slot).last_use = tick;
        self.log(key.0.volume, tick, slot);
        Some(self.entry_mut(slot))
    }

    fn log(&mut self, volume: VolumeId, tick: u64, slot: u32) {
        let log = self.ages.entry(volume).or_default();
        debug_assert!(
            log.back().is_none_or(|&(last, _)| last < tick),
            "use ticks only move forward"
        );
        log.push_back((tick, slot));
        if log.len() > 2 * self.index.len() + STALE_SLACK {
            self.rebuild_log(volume);
        }
    }

    /// A volume's log again from its blocks, without stale records.
    fn rebuild_log(&mut self, volume: VolumeId) {
        let mut records: Vec<(u64, u32)> = (0..)
            .zip(&self.slab)
            .filter_map(|(slot, held)| {
                let (key, entry) = held.as_ref()?;
                (key.0.volume == volume).then_some((entry.last_use, slot))
            })
            .collect();
        records.sort_unstable();
        self.ages.insert(volume, records.into());
    }

    /// The block a record names, if the record is that block's latest use
    /// (ticks are unique, so a reused slot's old records do not match).
    fn live(&self, (tick, slot): (u64, u32)) -> Option<&(CacheKey, CacheEntry<P>)> {
        self.slab[slot as usize]
            .as_ref()
            .filter(|(_, entry)| entry.last_use == tick)
    }

    /// Takes out up to `count` evictable blocks, oldest by `policy` of their
    /// volume and then by tick.
    pub(super) fn evict_oldest(
        &mut self,
        count: usize,
        policy: impl Fn(VolumeId) -> CachePolicy,
    ) -> Vec<Evicted<P>> {
        let mut classes: BTreeMap<CachePolicy, Vec<VolumeId>> = BTreeMap::new();
        for &volume in self.ages.keys() {
            classes.entry(policy(volume)).or_default().push(volume);
        }
        let mut victims = Vec::new();
        for volumes in classes.values() {
            let wanted = count - victims.len();
            if wanted == 0 {
                break;
            }
            victims.extend(self.oldest_of(volumes, wanted));
        }
        let mut evicted = Vec::with_capacity(victims.len());
        for (at, &(last_use, key)) in victims.iter().enumerate() {
            if let Some((_, ahead)) = victims.get(at + PREFETCH_AHEAD) {
                self.prefetch(ahead);
            }
            let entry = self.remove(&key).expect("a live record");
            let BlockState::Present(content) = entry.state else {
                unreachable!("only blocks with their content in are evictable");
            };
            evicted.push(Evicted {
                key,
                last_use,
                content,
                written: entry.written,
            });
        }
        for volume in classes.into_values().flatten() {
            self.trim_log(volume);
        }
        evicted
    }

    /// The `wanted` oldest evictable blocks of `volumes`, read from the fronts
    /// of their logs. The logs are left as they are: the caller removes the
    /// blocks, which makes their records stale.
    fn oldest_of(&self, volumes: &[VolumeId], wanted: usize) -> Vec<(u64, CacheKey)> {
        let mut candidates: Vec<(u64, CacheKey)> = Vec::with_capacity(wanted.min(self.len()));
        for volume in volumes {
            let log = &self.ages[volume];
            let evictable = log.iter().enumerate().filter_map(|(at, &record)| {
                if let Some(&(_, ahead)) = log.get(at + PREFETCH_AHEAD) {
                    prefetch_index::prefetch_index(&self.slab, ahead as usize);
                }
                self.live(record)
                    .filter(|(_, entry)| entry.is_evictable())
                    .map(|(key, _)| (record.0, *key))
            });
            candidates.extend(evictable.take(wanted));
        }
        if candidates.len() > wanted {
            // Several volumes share the policy: the oldest of all of them go.
            candidates.sort_unstable();
            candidates.truncate(wanted);
        }
        candidates
    }

    /// The tick of the oldest last use of any cached block, or `None` with
    /// the cache empty: the first live record of each volume's log. Stale
    /// records at a log's front are passed over (eviction trims them, so
    /// there are few).
    pub(super) fn oldest_use(&self) -> Option<u64> {
        self.ages
            .values()
            .filter_map(|log| log.iter().find(|&&record| self.live(record).is_some()))
            .map(|&(tick, _)| tick)
            .min()
    }

    /// Drops the stale records at the front of `volume`'s log.
    fn trim_log(&mut self, volume: VolumeId) {
        let mut log = self.ages.remove(&volume).expect("listed");
        while log
            .front()
            .is_some_and(|&record| self.live(record).is_none())
        {
            log.pop_front();
        }
        self.ages.insert(volume, log);
    }

    /// Every cached block has one live record in its volume's log, and each
    /// log is in order of age.
    pub(super) fn check(&self) -> Result<(), String> {
        let mut live = 0;
        for (volume, log) in &self.ages {
            if !log.iter().zip(log.iter().skip(1)).all(|(a, b)| a.0 < b.0) {
                return Err(format!("volume {volume:?}'s cache log is out of order"));
            }
            for &record in log {
                match self.live(record) {
                    Some((key, _)) if key.0.volume != *volume => {
                        return Err(format!("{key:?} is logged under volume {volume:?}"));
                    }
                    Some(_) => live += 1,
                    None => {}
                }
            }
        }
        let indexed = self.index.slots().all(|slot| {
            self.slab[slot as usize]
                .as_ref()
                .is_some_and(|(key, _)| self.slot_of(key) == Some(slot))
        });
        let occupied = self.slab.iter().flatten().count();
        let filling = self.filling.len() <= self.index.len()
            && self.cached().all(|(key, slot)| {
                let filling_here = self.filling.get(key) == Some(&slot);
                self.entry(slot).content().is_none() == filling_here
            });
        if !indexed {
            return Err("a slot the index names is empty or not found by its key".into());
        }
        if occupied != self.index.len() {
            return Err(format!(
                "{occupied} slots hold blocks but {} are indexed",
                self.index.len()
            ));
        }
        if !filling {
            return Err("the blocks being read in are not those without content".into());
        }
        if live != self.index.len() {
            return Err(format!(
                "{} cached blocks but {live} live records of their use",
                self.index.len()
            ));
        }
        self.check_under_l1()
    }

    /// The counts of blocks under level-1 indirect blocks are the blocks'.
    fn check_under_l1(&self) -> Result<(), String> {
        let mut counted: BTreeMap<L1Key, u32> = BTreeMap::new();
        for (key, _) in self.cached() {
            *counted.entry(l1_above(*key)).or_default() += 1;
        }
        let mut kept: Vec<(L1Key, u32)> = self.under_l1.iter().map(|(k, &n)| (*k, n)).collect();
        kept.sort_unstable();
        match kept.into_iter().eq(counted) {
            true => Ok(()),
            false => Err("the counts of cached blocks under level-1 blocks are off".into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::payload::Bytes;
    use crate::units::FileId;

    #[test]
    fn a_luns_word_orders_luns_as_their_ids_do() {
        let ids = [0, 1, 7, u32::MAX];
        let luns: Vec<LunId> = ids
            .iter()
            .flat_map(|&volume| {
                ids.iter().map(move |&file| LunId {
                    volume: VolumeId(volume),
                    file: FileId(file),
                })
            })
            .collect();
        for a in &luns {
            for b in &luns {
                assert_eq!(
                    lun_word(*a).cmp(&lun_word(*b)),
                    a.cmp(b),
                    "{a:?} against {b:?}"
                );
            }
        }
    }

    fn key(volume: u32, fbn: u64) -> CacheKey {
        let lun = LunId {
            volume: VolumeId(volume),
            file: FileId(64),
        };
        (lun, Fbn(fbn))
    }

    fn clean(tick: u64) -> CacheEntry<Bytes> {
        CacheEntry::present(Bytes::zero(), tick)
    }

    /// What eviction took, as (key, tick of last use).
    fn aged(evicted: Vec<Evicted<Bytes>>) -> Vec<(CacheKey, u64)> {
        evicted.into_iter().map(|e| (e.key, e.last_use)).collect()
    }

    fn default_policy(_: VolumeId) -> CachePolicy {
        CachePolicy::Default
    }

    #[test]
    fn the_least_recently_used_leave_first() {
        let mut cache = BufferCache::default();
        for (tick, fbn) in [(1, 30), (2, 10), (3, 20)] {
            cache.insert(key(0, fbn), clean(tick));
        }
        cache.touch(key(0, 30), 4);
        let gone = aged(cache.evict_oldest(2, default_policy));
        assert_eq!(gone, vec![(key(0, 10), 2), (key(0, 20), 3)]);
        assert!(cache.contains_key(&key(0, 30)));
        cache.check().unwrap();
    }

    #[test]
    fn blocks_eviction_must_pass_over_keep_their_place() {
        let mut cache = BufferCache::default();
        for tick in 1..=4 {
            cache.insert(key(0, tick), clean(tick));
        }
        cache.get_mut(&key(0, 1)).unwrap().dirty = true;
        cache.get_mut(&key(0, 2)).unwrap().pinned = true;
        assert_eq!(
            aged(cache.evict_oldest(1, default_policy)),
            vec![(key(0, 3), 3)]
        );
        cache.get_mut(&key(0, 2)).unwrap().pinned = false;
        assert_eq!(
            aged(cache.evict_oldest(1, default_policy)),
            vec![(key(0, 2), 2)]
        );
        assert_eq!(
            aged(cache.evict_oldest(5, default_policy)),
            vec![(key(0, 4), 4)]
        );
        assert_eq!(cache.len(), 1);
        cache.check().unwrap();
    }

    #[test]
    fn a_reuse_volume_goes_before_older_default_blocks_and_keep_goes_last() {
        let mut cache = BufferCache::default();
        cache.insert(key(0, 1), clean(1)); // keep
        cache.insert(key(1, 1), clean(2)); // default
        cache.insert(key(2, 1), clean(3)); // reuse
        cache.insert(key(3, 1), clean(4)); // default
        let policy = |v: VolumeId| match v.0 {
            0 => CachePolicy::Keep,
            2 => CachePolicy::Reuse,
            _ => CachePolicy::Default,
        };
        let order: Vec<CacheKey> = (0..4)
            .map(|_| cache.evict_oldest(1, policy)[0].key)
            .collect();
        assert_eq!(order, vec![key(2, 1), key(1, 1), key(3, 1), key(0, 1)]);
        cache.check().unwrap();
    }

    #[test]
    fn volumes_of_one_policy_give_up_their_oldest_blocks_together() {
        let mut cache = BufferCache::default();
        for (tick, volume) in [(1, 0), (2, 1), (3, 1), (4, 0), (5, 1)] {
            cache.insert(key(volume, tick), clean(tick));
        }
        let gone: Vec<u64> = cache
            .evict_oldest(3, default_policy)
            .into_iter()
            .map(|evicted| evicted.last_use)
            .collect();
        assert_eq!(gone, vec![1, 2, 3]);
        cache.check().unwrap();
        let rest: Vec<u64> = cache
            .evict_oldest(9, default_policy)
            .into_iter()
            .map(|evicted| evicted.last_use)
            .collect();
        assert_eq!(rest, vec![4, 5]);
    }

    #[test]
    fn the_oldest_use_is_the_oldest_live_record_of_any_volume() {
        let mut cache = BufferCache::<Bytes>::default();
        assert_eq!(cache.oldest_use(), None);
        for (tick, volume) in [(1, 0), (2, 1), (3, 0)] {
            cache.insert(key(volume, tick), clean(tick));
        }
        assert_eq!(cache.oldest_use(), Some(1));
        cache.touch(key(0, 1), 4); // its record at tick 1 goes stale
        assert_eq!(cache.oldest_use(), Some(2));
        cache.remove(&key(1, 2));
        assert_eq!(cache.oldest_use(), Some(3));
    }

    #[test]
    fn stale_records_are_dropped_and_the_log_stays_bounded() {
        let mut cache = BufferCache::default();
        cache.insert(key(0, 1), clean(1));
        cache.insert(key(0, 2), clean(2));
        for tick in 3..10_000 {
            cache.touch(key(0, 1 + tick % 2), tick);
        }
        assert!(cache.ages[&VolumeId(0)].len() <= 2 * cache.len() + STALE_SLACK);
        cache.check().unwrap();
        cache.remove(&key(0, 2));
        assert_eq!(
            aged(cache.evict_oldest(2, default_policy)),
            vec![(key(0, 1), 9_998)]
        );
        assert!(cache.check().is_ok());
    }

    #[test]
    fn a_cp_finds_the_blocks_being_read_in_and_they_leave_that_list_when_filled() {
        let mut cache = BufferCache::<Bytes>::default();
        cache.insert(key(0, 1), clean(1));
        cache.insert(key(0, 3), CacheEntry::filling(8, Vec::new(), Vec::new(), 2));
        cache.insert(key(0, 2), CacheEntry::filling(7, Vec::new(), Vec::new(), 3));
        let filling: Vec<CacheKey> = cache.filling().into_iter().map(|(key, _)| key).collect();
        assert_eq!(filling, vec![key(0, 2), key(0, 3)], "in key order");
        cache.fill_in(&key(0, 2), Bytes::zero());
        cache.remove(&key(0, 3));
        assert!(cache.filling().is_empty());
        cache.check().unwrap();
        cache.insert(key(0, 4), CacheEntry::filling(9, Vec::new(), Vec::new(), 4));
        let slot = cache.slot_of(&key(0, 4)).unwrap();
        cache.entry_mut(slot).state = BlockState::Present(Bytes::zero()); // behind the cache's back
        assert!(cache.check().is_err());
    }

    #[test]
    fn level_1_blocks_are_busy_while_any_block_under_them_is_cached() {
        let per_l1 = POINTERS_PER_BLOCK as u64;
        let mut cache = BufferCache::default();
        cache.insert(key(0, 3), clean(1));
        cache.insert(key(0, per_l1 + 5), clean(2));
        cache.insert(key(0, per_l1 + 6), clean(3));
        let lun = key(0, 0).0;
        assert!(cache.caches_under_l1(lun, 0) && cache.caches_under_l1(lun, 1));
        assert!(!cache.caches_under_l1(lun, 2));
        cache.remove(&key(0, per_l1 + 5));
        assert!(cache.caches_under_l1(lun, 1));
        cache.remove(&key(0, per_l1 + 6));
        assert!(!cache.caches_under_l1(lun, 1));
        assert_eq!(cache.keys_of(lun, Fbn(0)), vec![key(0, 3)]);
        cache.check().unwrap();
        cache.under_l1.insert((lun, 2), 1); // behind the cache's back
        assert!(cache.check().is_err());
    }

    #[test]
    fn a_luns_blocks_come_in_block_order() {
        let mut cache = BufferCache::default();
        for (tick, fbn) in [(1, 40), (2, 7), (3, 900_000), (4, 12)] {
            cache.insert(key(0, fbn), clean(tick));
        }
        cache.insert(key(1, 8), clean(5));
        let lun = key(0, 0).0;
        assert_eq!(
            cache.keys_of(lun, Fbn(10)),
            vec![key(0, 12), key(0, 40), key(0, 900_000)]
        );
    }

    #[test]
    fn the_check_sees_a_block_whose_use_was_not_logged() {
        let mut cache = BufferCache::default();
        cache.insert(key(0, 1), clean(1));
        let slot = cache.slot_of(&key(0, 1)).unwrap();
        cache.entry_mut(slot).last_use = 7;
        assert!(cache.check().is_err());
    }
}
