//! Flash Pool's write cache: a hybrid aggregate's SSD RAID groups hold the
//! blocks hosts overwrite at random, in small writes, until they cool.
//!
//! ONTAP calls a hybrid aggregate "HYA". Its SSD groups are a second
//! allocation class: when a CP allocates a data block that a host overwrote
//! (the block existed before) in a write of at most [`WRITE_CACHE_MAX_BYTES`]
//! that did not continue the LUN's previous write, it takes an SSD pvbn
//! instead of an HDD one. That block is then the only copy, protected by the
//! SSD group's RAID like any other, and the tree points at it, so reads,
//! repair, rebuild, scrub and snapshots treat it as they treat every block.
//! First writes, sequential writes and large writes go to HDD.
//!
//! Every write-cached block has a temperature: it enters at [`NEUTRAL`], and a
//! read of it from SSD warms it a step, up to [`HOT`]. Once the SSD groups are
//! [`SCAN_FILL_PERCENT`] full, each CP's end runs the eviction scanner's
//! pass: a cold block is destaged (marked dirty without a change, as
//! reallocation does, so the next CP writes it to HDD and frees its SSD
//! block) and every other block cools a step. A block destaged and then
//! overwritten at random again before that CP simply stays in the cache.
//!
//! The map from SSD block to its owner is rebuilt at mount from the LUN trees
//! (a mount walks them all), and the temperatures start at neutral again.

use std::collections::BTreeMap;

use super::{CacheEntry, Filer, HyaCounters, QueuedOp, Sabotage};
use crate::aggregate::Tier;
use crate::format::BlockPtr;
use crate::nvlog::LunId;
use crate::payload::Payload;
use crate::units::{Fbn, Pvbn};

/// The largest host write whose blocks the write cache takes (16 KiB, the
/// limit commonly quoted for Flash Pool).
pub const WRITE_CACHE_MAX_BYTES: u64 = 16 * 1024;
/// The temperature a block enters the cache at.
pub const NEUTRAL: u8 = 2;
/// The hottest a block gets.
pub const HOT: u8 = 4;
/// How full the SSD groups are, in percent of their blocks, when the
/// eviction scanner starts running a pass per CP.
pub const SCAN_FILL_PERCENT: u64 = 75;

/// A write-cached block: which LUN block lives there, and how warm it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Cached {
    lun: LunId,
    fbn: Fbn,
    temperature: u8,
}

/// The write cache's state in memory.
#[derive(Clone, Debug, Default)]
pub(super) struct FlashPool {
    /// Every write-cached block, by its SSD pvbn.
    cached: BTreeMap<Pvbn, Cached>,
    /// Where each LUN's last host write ended: a write starting there is
    /// sequential.
    write_ends: BTreeMap<LunId, u64>,
}

/// A hybrid aggregate's cache as `aggr status`-style reports show it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlashPoolStatus {
    /// Data blocks of the SSD groups (`ssd_total`).
    pub ssd_total_blocks: u64,
    /// SSD blocks in use, by the write cache or held by snapshots (`ssd_used`).
    pub ssd_used_blocks: u64,
    /// Blocks in the write cache (`ssd_write_cached`).
    pub write_cached_blocks: u64,
    /// Copies in the read cache (`ssd_read_cached`).
    pub read_cached_blocks: u64,
    /// The counters.
    pub counters: HyaCounters,
}

impl FlashPoolStatus {
    /// `read_ops_replaced_percent`: of the data blocks read from disk, the
    /// share SSD served.
    pub fn read_replaced_percent(&self) -> f64 {
        let c = &self.counters;
        percent(c.read_blks_replaced, c.read_blks_replaced + c.hdd_read_blks)
    }

    /// `write_blks_replaced_percent`: of the data blocks CPs wrote, the share
    /// the write cache took.
    pub fn write_blks_replaced_percent(&self) -> f64 {
        let c = &self.counters;
        percent(
            c.wc_write_blks_total,
            c.wc_write_blks_total + c.hdd_write_blks_total,
        )
    }
}

/// `part` of `all` in percent (0 of nothing).
fn percent(part: u64, all: u64) -> f64 {
    match all {
        0 => 0.0,
        _ => 100.0 * part as f64 / all as f64,
    }
}

impl FlashPool {
    /// Notes a host write; returns whether it is small and random, so that
    /// the blocks it overwrites belong in the write cache.
    pub(super) fn note_write(&mut self, lun: LunId, offset: u64, length: u64) -> bool {
        let sequential = self.write_ends.insert(lun, offset + length) == Some(offset);
        length <= WRITE_CACHE_MAX_BYTES && !sequential
    }

    /// The owner recorded for an SSD block, if it is write-cached.
    pub(super) fn owner(&self, pvbn: Pvbn) -> Option<(LunId, Fbn)> {
        self.cached.get(&pvbn).map(|c| (c.lun, c.fbn))
    }

    /// The write-cached blocks.
    pub(super) fn pvbns(&self) -> impl Iterator<Item = Pvbn> + '_ {
        self.cached.keys().copied()
    }

    /// How many blocks are write-cached.
    pub(super) fn len(&self) -> u64 {
        self.cached.len() as u64
    }
}

impl<P: Payload> Filer<P> {
    /// Whether a host write of `length` bytes at `offset` marks the blocks it
    /// overwrites for the write cache. Only a hybrid aggregate tracks this.
    pub(super) fn write_cache_wanted(&mut self, lun: LunId, offset: u64, length: u64) -> bool {
        self.layout.is_hybrid() && self.flash_pool.note_write(lun, offset, length)
    }

    /// Where the CP puts data block (`lun`, `fbn`), whose pointer is `old`:
    /// on SSD if the host's last write to it was small and random and it
    /// overwrote a block that was there.
    pub(super) fn wants_ssd(&self, lun: LunId, fbn: Fbn, old: BlockPtr) -> bool {
        !old.is_null()
            && self
                .cache
                .get(&(lun, fbn))
                .is_some_and(|entry| entry.write_cached)
    }

    /// Records where a CP put a data block, and forgets the SSD block it
    /// replaced.
    pub(super) fn note_data_placed(&mut self, lun: LunId, fbn: Fbn, new: Pvbn, old: BlockPtr) {
        if !old.is_null()
            && self
                .flash_pool
                .cached
                .get(&old.pvbn)
                .map(|c| (c.lun, c.fbn))
                == Some((lun, fbn))
        {
            self.flash_pool.cached.remove(&old.pvbn);
        }
        match self.layout.tier_of(new) {
            Tier::Ssd => {
                self.counters.hya.wc_write_blks_total += 1;
                let cached = Cached {
                    lun,
                    fbn,
                    temperature: NEUTRAL,
                };
                self.flash_pool.cached.insert(new, cached);
            }
            Tier::Hdd => self.counters.hya.hdd_write_blks_total += 1,
        }
    }

    /// An SSD block left the aggregate's map: it is nobody's cache now.
    pub(super) fn forget_ssd_block(&mut self, pvbn: Pvbn) {
        self.flash_pool.cached.remove(&pvbn);
    }

    /// A data block is being read from `pvbn`: a read from SSD warms it.
    pub(super) fn note_data_read(&mut self, pvbn: Pvbn) {
        match self.flash_pool.cached.get_mut(&pvbn) {
            Some(cached) => {
                cached.temperature = (cached.temperature + 1).min(HOT);
                self.counters.hya.read_blks_replaced += 1;
            }
            None => self.counters.hya.hdd_read_blks += 1,
        }
    }

    /// The write cache's state.
    pub fn flash_pool_status(&self) -> Option<FlashPoolStatus> {
        if !self.layout.is_hybrid() {
            return None;
        }
        let total = self.layout.tier_blocks(Tier::Ssd);
        Some(FlashPoolStatus {
            ssd_total_blocks: total,
            ssd_used_blocks: total - self.aggregate.allocator.ssd_free_blocks(),
            write_cached_blocks: self.flash_pool.len(),
            read_cached_blocks: 0,
            counters: self.counters.hya,
        })
    }

    /// After a mount's walk: every LUN block the trees put on SSD is in the
    /// write cache, at neutral temperature.
    pub(super) fn rebuild_write_cache(&mut self) {
        self.flash_pool = FlashPool::default();
        let luns: Vec<LunId> = (self.namespace.volumes())
            .flat_map(|(volume, v)| v.luns.keys().map(move |&file| LunId { volume, file }))
            .collect();
        for lun in luns {
            self.adopt_write_cached(lun);
        }
    }

    /// A LUN's tree came from elsewhere (a mount, a snapshot restore): its
    /// data blocks on SSD join the write cache, at neutral temperature.
    pub(super) fn adopt_write_cached(&mut self, lun: LunId) {
        if !self.layout.is_hybrid() {
            return;
        }
        let (layout, pool) = (&self.layout, &mut self.flash_pool);
        let tree = &self.namespace[lun.volume].luns[&lun.file].tree;
        tree.for_each_pointer(|(level, fbn), ptr| {
            if level == 0 && layout.tier_of(ptr.pvbn) == Tier::Ssd {
                let cached = Cached {
                    lun,
                    fbn: Fbn(fbn),
                    temperature: NEUTRAL,
                };
                pool.cached.insert(ptr.pvbn, cached);
            }
        });
    }

    /// The eviction scanner's pass, run as a CP ends once the SSD groups are
    /// [`SCAN_FILL_PERCENT`] full: cold blocks are destaged, the rest cool.
    pub(super) fn scan_write_cache(&mut self) {
        let Some(status) = self.flash_pool_status() else {
            return;
        };
        if status.ssd_used_blocks * 100 < status.ssd_total_blocks * SCAN_FILL_PERCENT {
            return;
        }
        self.counters.hya.scanner_passes += 1;
        let mut cold = Vec::new();
        for (&pvbn, cached) in self.flash_pool.cached.iter_mut() {
            match cached.temperature {
                0 => cold.push((pvbn, cached.lun, cached.fbn)),
                t => cached.temperature = t - 1,
            }
        }
        let mut reads = Vec::new();
        let generation = self.generation();
        // Destaged blocks are dirty blocks like the host's, and each takes a
        // new vvbn before its old one is freed: a pass destages no more than
        // half the dirty high-water mark leaves room for, as the space
        // reservations count on. The rest stay cold for the next pass.
        let mut room = (self.options.dirty_high_water / 2).saturating_sub(self.dirty.len());
        for (pvbn, lun, fbn) in cold {
            let Ok((_, l)) = self.namespace.lun(lun) else {
                self.flash_pool.cached.remove(&pvbn);
                continue;
            };
            match l.tree.try_get(fbn) {
                // Its path is not in memory: the next pass tries again.
                None => continue,
                Some(ptr) if ptr.pvbn != pvbn || ptr.is_null() => {
                    self.flash_pool.cached.remove(&pvbn);
                }
                Some(_) if room == 0 => continue,
                Some(ptr) => {
                    room -= 1;
                    if !self.sabotaged(Sabotage::WriteCacheDropsColdBlocks) {
                        reads.extend(self.destage(lun, fbn, ptr, generation));
                    } else {
                        self.release_pvbn(pvbn, self.release_point());
                    }
                    self.counters.hya.evict_destage += 1;
                }
            }
        }
        self.read_blocks(reads);
    }

    /// Marks a write-cached block for HDD: dirty without a change, and no
    /// longer wanted on SSD. Returns the read that brings it in, if it is not
    /// cached.
    fn destage(
        &mut self,
        lun: LunId,
        fbn: Fbn,
        ptr: BlockPtr,
        generation: crate::units::CpCount,
    ) -> Option<super::BlockRead> {
        let touch = QueuedOp::touch(generation);
        if self.cache.contains_key(&(lun, fbn)) {
            self.apply_block(lun, fbn, touch);
            if let Some(entry) = self.cache.get_mut(&(lun, fbn)) {
                entry.write_cached = false;
            }
            return None;
        }
        let (read, fill) = self.fill_read(lun, fbn, ptr);
        self.use_clock += 1;
        let entry = CacheEntry::filling(fill, vec![touch], Vec::new(), self.use_clock);
        self.cache.insert((lun, fbn), entry);
        Some(read.for_engine())
    }
}
