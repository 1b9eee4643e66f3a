//! Flash Cache: the node's victim cache of the buffer cache on a flash
//! device, FIFO and read-only, as ONTAP's Flash Cache (PAM) card is.
//!
//! The aggregates' buffer caches hand over the clean blocks they evict
//! (`Filer::take_victims`): each block's home (aggregate, disk, dbn) and the
//! sector there. The node writes each into the next slot of the device,
//! round and round, and keeps an index from home to slot; a slot written
//! again drops the block it held, whether or not it was ever read (FIFO).
//! A copy is found only once its write has completed, and a slot is not
//! written again while a write to it is in flight (the device may complete
//! two writes to one slot in either order): the block that would go there
//! is not taken in.
//!
//! A disk read of blocks (`Filer::flash_may_serve`) is answered from the
//! device for the blocks the index holds and from the disk for the rest,
//! and the aggregate gets one answer as if from its disk. Each copy read
//! back is checked against the checksum and trailer recorded when it went
//! in; one that does not match, or that the device cannot read, is dropped
//! and read from its home instead. A device that fails takes the cache
//! with it: every read goes to disk from then on.
//!
//! Write anywhere keeps the copies true: a home is written only when the
//! block there is replaced (a CP's new allocation, a repair in place, a
//! rebuild onto a spare), and every disk write passes through the node,
//! which drops the homes it covers. So is a disk replaced by a spare, and
//! an aggregate brought online or destroyed. Nothing is persistent: a node
//! starts with an empty cache after a restart, as after a takeover.

use wafer_raid::Dbn;

use super::{Node, NodeIo, Route};
use crate::filer::{FlashCacheOptions, FlashHome, Io, IoId, IoOp, IoResult, Sector, Victim};
use crate::fixed_map::{FixedHash, FixedMap, mix_words};
use crate::format::TRAILER_SIZE;
use crate::payload::Payload;
use crate::units::{AggrId, DiskId, FlashSlot, Instant};

/// What ONTAP's `ext_cache_obj` counts, in blocks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FlashCounters {
    /// Blocks of block reads looked up.
    pub accesses: u64,
    /// Blocks found (`hit`).
    pub hits: u64,
    /// Blocks not found (`miss`).
    pub misses: u64,
    /// Blocks written into the cache (`inserts`).
    pub inserts: u64,
    /// Blocks dropped because their slot was needed (`evicts`).
    pub evicts: u64,
    /// Blocks dropped because their home was written (`invalidates`).
    pub invalidates: u64,
    /// Blocks answered from flash instead of disk (`disk_reads_replaced`).
    pub disk_reads_replaced: u64,
    /// Copies that failed their check or could not be read, read from
    /// their homes instead.
    pub read_errors: u64,
    /// Whether the device has failed: the cache serves nothing since.
    pub failed: bool,
}

/// A copy in the cache: its slot, and what it must read back as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Copy {
    slot: FlashSlot,
    checksum: u32,
    trailer: u64,
    /// Its write has completed: it may be read.
    ready: bool,
}

impl FixedHash for FlashHome {
    fn fixed_hash(&self) -> u64 {
        mix_words(
            u64::from(self.aggregate.0) << 32 | u64::from(self.disk.0),
            self.dbn.0,
        )
    }
}

/// The cache's index and FIFO, without the I/O.
#[derive(Debug)]
pub struct FlashCache {
    options: FlashCacheOptions,
    /// Slots filled so far, in all: the next slot is this modulo the size.
    filled: u64,
    /// Each slot filled at least once: what it holds, and whether a write
    /// to it is in flight.
    slots: Vec<SlotUse>,
    index: FixedMap<FlashHome, Copy>,
    counters: FlashCounters,
}

impl FlashCache {
    /// An empty cache of `options.blocks` slots.
    ///
    /// # Panics
    /// If it has no slot.
    pub fn new(options: FlashCacheOptions) -> FlashCache {
        assert!(options.blocks > 0, "a Flash Cache of no blocks");
        FlashCache {
            options,
            filled: 0,
            slots: Vec::new(),
            index: FixedMap::default(),
            counters: FlashCounters::default(),
        }
    }

    /// Its counters.
    pub fn counters(&self) -> &FlashCounters {
        &self.counters
    }

    /// Its size in blocks.
    pub fn blocks(&self) -> u64 {
        self.options.blocks
    }

    /// Blocks it holds copies of (ONTAP's `usage` is this over its size).
    pub fn used(&self) -> u64 {
        self.index.len() as u64
    }

    /// Every block it holds, with its slot, in home order: what a checker
    /// compares the device with the disks by.
    pub fn copies(&self) -> Vec<(FlashHome, FlashSlot)> {
        let mut copies: Vec<(FlashHome, FlashSlot)> = (self.index.iter())
            .filter(|(_, copy)| copy.ready)
            .map(|(home, copy)| (*home, copy.slot))
            .collect();
        copies.sort_unstable();
        copies
    }

    /// The slot of the copy of `home` a read would be given now, if any.
    pub fn copy_of(&self, home: &FlashHome) -> Option<FlashSlot> {
        self.lookup(home).map(|copy| copy.slot)
    }

    /// Takes `sector`, from `home`, into the next slot, dropping what the
    /// slot held; `None` if the device has failed or the block is in
    /// already.
    fn insert<P: Payload>(&mut self, home: FlashHome, sector: &Sector<P>) -> Option<FlashSlot> {
        if self.counters.failed || self.index.contains_key(&home) {
            return None;
        }
        let at = self.filled % self.options.blocks;
        if self.slots.get(at as usize).is_some_and(|s| s.writing) {
            return None;
        }
        self.filled += 1;
        let slot = FlashSlot(at);
        let taken = SlotUse {
            home: Some(home),
            writing: true,
        };
        match self.slots.get_mut(at as usize) {
            Some(used) => {
                if let Some(old) = used.home {
                    self.index.remove(&old);
                    self.counters.evicts += 1;
                }
                *used = taken;
            }
            None => self.slots.push(taken),
        }
        let copy = Copy {
            slot,
            checksum: P::checksum(&sector.data),
            trailer: trailer_sum(&sector.trailer),
            ready: false,
        };
        self.index.insert(home, copy);
        self.counters.inserts += 1;
        Some(slot)
    }

    /// The write of `home` into `slot` has completed (`landed`) or not.
    fn written(&mut self, home: FlashHome, slot: FlashSlot, landed: bool) {
        if let Some(used) = self.slots.get_mut(slot.0 as usize) {
            used.writing = false;
        }
        let Some(copy) = self.index.get_mut(&home).filter(|c| c.slot == slot) else {
            return; // dropped meanwhile
        };
        match landed {
            true => copy.ready = true,
            false => {
                self.drop_home(home);
            }
        }
    }

    /// The copy of `home` a read may use.
    fn lookup(&self, home: &FlashHome) -> Option<Copy> {
        self.index.get(home).copied().filter(|copy| copy.ready)
    }

    /// Drops the copy of `home`, if there is one.
    fn drop_home(&mut self, home: FlashHome) -> bool {
        let Some(copy) = self.index.remove(&home) else {
            return false;
        };
        self.slots[copy.slot.0 as usize].home = None;
        true
    }

    /// `count` blocks from `home` on are being written.
    fn invalidate(&mut self, home: FlashHome, count: u64) {
        if self.index.is_empty() {
            return;
        }
        for n in 0..count {
            let dbn = Dbn(home.dbn.0 + n);
            if self.drop_home(FlashHome { dbn, ..home }) {
                self.counters.invalidates += 1;
            }
        }
    }

    /// Drops every copy whose home `keep` refuses.
    fn drop_where(&mut self, refuse: impl Fn(&FlashHome) -> bool) {
        for used in &mut self.slots {
            if used.home.is_some_and(|home| refuse(&home)) {
                let home = used.home.take().expect("checked");
                self.index.remove(&home);
                self.counters.invalidates += 1;
            }
        }
    }

    /// The device has failed: nothing is served or inserted from now on.
    fn fail(&mut self) {
        self.counters.failed = true;
        self.index.clear();
        self.slots.clear();
    }
}

/// A slot of the device as the cache uses it.
#[derive(Clone, Copy, Debug, Default)]
struct SlotUse {
    home: Option<FlashHome>,
    writing: bool,
}

/// A 64-bit digest of a trailer.
fn trailer_sum(trailer: &[u8; TRAILER_SIZE]) -> u64 {
    trailer.chunks_exact(8).fold(0, |sum, word| {
        mix_words(sum, u64::from_le_bytes(word.try_into().expect("8 bytes")))
    })
}

/// Whether `sector` is the copy `copy` recorded.
fn matches<P: Payload>(sector: &Sector<P>, copy: &Copy) -> bool {
    P::checksum(&sector.data) == copy.checksum && trailer_sum(&sector.trailer) == copy.trailer
}

/// A disk read answered in parts, from flash and from disk.
#[derive(Debug)]
pub(super) struct SplitRead<P: Payload> {
    aggregate: AggrId,
    /// The aggregate's id for the read.
    inner: IoId,
    disk: DiskId,
    dbn: Dbn,
    sectors: Vec<Option<Sector<P>>>,
    /// The copy each block read from flash must match.
    copies: Vec<Option<Copy>>,
    parts_left: usize,
    disk_failed: bool,
}

impl<P: Payload> SplitRead<P> {
    /// The home of its block `block`.
    fn home(&self, block: u32) -> FlashHome {
        FlashHome {
            aggregate: self.aggregate,
            disk: self.disk,
            dbn: Dbn(self.dbn.0 + u64::from(block)),
        }
    }
}

impl<P: Payload> Node<P> {
    /// The Flash Cache, if the node has one.
    pub fn flash_cache(&self) -> Option<&FlashCache> {
        self.flash.as_ref()
    }

    /// Takes in what aggregate `id`'s buffer cache let go of.
    pub(super) fn take_victims(&mut self, id: AggrId) {
        let Some(engine) = self.members.get_mut(&id).and_then(|m| m.engine.as_mut()) else {
            return;
        };
        let victims = engine.take_victims();
        if victims.is_empty() || self.flash.is_none() {
            return;
        }
        for Victim { disk, dbn, sector } in victims {
            let home = FlashHome {
                aggregate: id,
                disk,
                dbn,
            };
            let flash = self.flash.as_mut().expect("checked");
            if let Some(slot) = flash.insert(home, &sector) {
                let io = self.route(Route::FlashWrite(home, slot));
                self.flash_io(io, IoOp::FlashWrite { slot, sector });
            }
        }
    }

    /// Passes on an aggregate's disk read, answering what it can from the
    /// Flash Cache.
    pub(super) fn pass_read(&mut self, aggregate: AggrId, io: Io<P>) {
        let IoOp::Read { disk, dbn, count } = io.op else {
            unreachable!("only reads")
        };
        let copies = self.copies_for(aggregate, io.id, disk, dbn, count);
        let Some(copies) = copies else {
            return self.pass_to_disk(aggregate, io);
        };
        let id = self.next_split;
        self.next_split += 1;
        let mut split = SplitRead {
            aggregate,
            inner: io.id,
            disk,
            dbn,
            sectors: vec![None; count as usize],
            copies,
            parts_left: 0,
            disk_failed: false,
        };
        let mut block = 0;
        while block < count {
            let copy = split.copies[block as usize];
            let run = match copy {
                Some(_) => 1,
                None => (block..count)
                    .take_while(|&b| split.copies[b as usize].is_none())
                    .count() as u32,
            };
            split.parts_left += 1;
            let home = split.home(block);
            match copy {
                Some(copy) => self.read_copy(id, block, copy.slot, home),
                None => self.read_home(id, block, home, run),
            }
            block += run;
        }
        self.splits.insert(id, split);
    }

    /// The copies of a read's blocks, if it may use the cache and any is
    /// there.
    fn copies_for(
        &mut self,
        aggregate: AggrId,
        io: IoId,
        disk: DiskId,
        dbn: Dbn,
        count: u32,
    ) -> Option<Vec<Option<Copy>>> {
        let flash = self.flash.as_mut()?;
        let engine = self.members.get(&aggregate)?.engine.as_ref()?;
        if !engine.flash_may_serve(io) {
            return None;
        }
        if flash.index.is_empty() {
            flash.counters.accesses += u64::from(count);
            flash.counters.misses += u64::from(count);
            return None;
        }
        let copies: Vec<Option<Copy>> = (0..u64::from(count))
            .map(|n| {
                flash.lookup(&FlashHome {
                    aggregate,
                    disk,
                    dbn: Dbn(dbn.0 + n),
                })
            })
            .collect();
        let hits = copies.iter().flatten().count() as u64;
        flash.counters.accesses += u64::from(count);
        flash.counters.hits += hits;
        flash.counters.misses += u64::from(count) - hits;
        if hits == u64::from(count) {
            // Decided as it is issued, so that the disk's counters never
            // go back on what they showed (a copy that fails its check is
            // read from disk after all, uncounted).
            self.members
                .get_mut(&aggregate)
                .and_then(|m| m.engine.as_mut())
                .expect("looked up")
                .read_replaced(io);
        }
        (hits > 0).then_some(copies)
    }

    /// Reads block `block` of split read `id`, whose home is `home`, from
    /// its flash slot.
    fn read_copy(&mut self, id: u64, block: u32, slot: FlashSlot, home: FlashHome) {
        let io = self.route(Route::FlashPart { split: id, block });
        self.flash_io(io, IoOp::FlashRead { slot, home });
    }

    /// Reads `count` blocks of split read `id` from disk, from block
    /// `block`, at `home`, on.
    fn read_home(&mut self, id: u64, block: u32, home: FlashHome, count: u32) {
        let io = self.route(Route::DiskPart { split: id, block });
        let op = IoOp::Read {
            disk: home.disk,
            dbn: home.dbn,
            count,
        };
        self.io_out.push_back(NodeIo {
            aggregate: Some(home.aggregate),
            io: Io { id: io, op },
        });
    }

    fn flash_io(&mut self, id: IoId, op: IoOp<P>) {
        self.io_out.push_back(NodeIo {
            aggregate: None,
            io: Io { id, op },
        });
    }

    /// A flash write has completed.
    pub(super) fn flash_written(&mut self, home: FlashHome, slot: FlashSlot, result: IoResult<P>) {
        let Some(flash) = self.flash.as_mut() else {
            return;
        };
        match result {
            IoResult::Done => flash.written(home, slot, true),
            IoResult::DiskFailed => flash.fail(),
            IoResult::Read(_) | IoResult::Unwritable => flash.written(home, slot, false),
        }
    }

    /// A part of split read `id` read from flash has completed: the copy,
    /// if it checks out, else a read of its home.
    pub(super) fn flash_part_done(
        &mut self,
        now: Instant,
        id: u64,
        block: u32,
        result: IoResult<P>,
    ) {
        let split = self.splits.get_mut(&id).expect("a split read");
        let copy = split.copies[block as usize].expect("a block read from flash");
        let sector = match result {
            IoResult::Read(mut sectors) if sectors.len() == 1 => sectors.pop().flatten(),
            IoResult::DiskFailed => {
                self.flash.as_mut().expect("a Flash Cache").fail();
                None
            }
            IoResult::Read(_) | IoResult::Done | IoResult::Unwritable => None,
        };
        match sector.filter(|s| matches(s, &copy)) {
            Some(sector) => {
                split.sectors[block as usize] = Some(sector);
                if let Some(flash) = self.flash.as_mut() {
                    flash.counters.disk_reads_replaced += 1;
                }
                self.part_done(now, id);
            }
            None => {
                let home = split.home(block);
                if let Some(flash) = self.flash.as_mut() {
                    flash.counters.read_errors += 1;
                    flash.drop_home(home);
                }
                self.read_home(id, block, home, 1);
            }
        }
    }

    /// A part of split read `id` read from disk, from `block` on, has
    /// completed.
    pub(super) fn disk_part_done(
        &mut self,
        now: Instant,
        id: u64,
        block: u32,
        result: IoResult<P>,
    ) {
        let split = self.splits.get_mut(&id).expect("a split read");
        match result {
            IoResult::Read(sectors) => {
                for (n, sector) in sectors.into_iter().enumerate() {
                    split.sectors[block as usize + n] = sector;
                }
            }
            IoResult::DiskFailed | IoResult::Done | IoResult::Unwritable => {
                split.disk_failed = true;
            }
        }
        self.part_done(now, id);
    }

    /// One part of split read `id` is in; the aggregate hears once all are.
    fn part_done(&mut self, now: Instant, id: u64) {
        let split = self.splits.get_mut(&id).expect("a split read");
        split.parts_left -= 1;
        if split.parts_left > 0 {
            return;
        }
        let split = self.splits.remove(&id).expect("a split read");
        let result = match split.disk_failed {
            true => IoResult::DiskFailed,
            false => IoResult::Read(split.sectors),
        };
        if let Some(engine) =
            (self.members.get_mut(&split.aggregate)).and_then(|m| m.engine.as_mut())
        {
            engine.handle_io_done(now, split.inner, result);
            self.settle(split.aggregate);
        }
    }

    /// An aggregate writes `count` blocks of `disk` from `dbn` on: their
    /// copies are no longer its blocks.
    pub(super) fn flash_invalidate(
        &mut self,
        aggregate: AggrId,
        disk: DiskId,
        dbn: Dbn,
        count: u64,
    ) {
        #[cfg(feature = "sabotage")]
        if self.options.sabotage == Some(crate::filer::Sabotage::FlashKeepsOverwrittenCopies) {
            return;
        }
        if let Some(flash) = self.flash.as_mut() {
            let home = FlashHome {
                aggregate,
                disk,
                dbn,
            };
            flash.invalidate(home, count);
        }
    }

    /// Drops every copy of aggregate `aggregate`'s blocks, or of its disk
    /// `disk` alone.
    pub(super) fn flash_forget(&mut self, aggregate: AggrId, disk: Option<DiskId>) {
        if let Some(flash) = self.flash.as_mut() {
            flash.drop_where(|home| {
                home.aggregate == aggregate && disk.is_none_or(|disk| home.disk == disk)
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::payload::Bytes;

    fn home(dbn: u64) -> FlashHome {
        FlashHome {
            aggregate: AggrId(0),
            disk: DiskId(1),
            dbn: Dbn(dbn),
        }
    }

    fn sector(fill: u8) -> Sector<Bytes> {
        let mut data = Bytes::zero();
        Bytes::write(&mut data, 0, Some(&[fill; 8]), 8);
        Sector {
            data,
            trailer: [fill; TRAILER_SIZE],
        }
    }

    fn cache(blocks: u64) -> FlashCache {
        FlashCache::new(FlashCacheOptions::new(blocks))
    }

    #[test]
    fn a_copy_is_found_only_once_written_and_the_oldest_goes_first() {
        let mut flash = cache(2);
        let first = flash.insert(home(10), &sector(1)).unwrap();
        assert_eq!(flash.lookup(&home(10)), None, "not written yet");
        flash.written(home(10), first, true);
        assert!(matches(&sector(1), &flash.lookup(&home(10)).unwrap()));
        assert!(!matches(&sector(2), &flash.lookup(&home(10)).unwrap()));
        let second = flash.insert(home(11), &sector(2)).unwrap();
        flash.written(home(11), second, true);
        let third = flash.insert(home(12), &sector(3)).unwrap();
        assert_eq!(third, first, "FIFO: the oldest slot is reused");
        assert_eq!(flash.lookup(&home(10)), None);
        assert!(flash.lookup(&home(11)).is_some());
        assert_eq!((flash.counters.inserts, flash.counters.evicts), (3, 1));
    }

    #[test]
    fn a_write_to_a_home_drops_its_copy_and_a_block_goes_in_once() {
        let mut flash = cache(8);
        for dbn in 0..4 {
            let slot = flash.insert(home(dbn), &sector(dbn as u8)).unwrap();
            flash.written(home(dbn), slot, true);
        }
        assert_eq!(flash.insert(home(2), &sector(9)), None, "in already");
        flash.invalidate(home(1), 2);
        let held: Vec<u64> = flash.copies().iter().map(|(h, _)| h.dbn.0).collect();
        assert_eq!(held, vec![0, 3]);
        assert_eq!(flash.counters.invalidates, 2);
        flash.drop_where(|h| h.disk == DiskId(1));
        assert_eq!(flash.used(), 0);
    }

    #[test]
    fn a_slot_is_not_written_again_while_its_last_write_is_in_flight() {
        let mut flash = cache(1);
        let slot = flash.insert(home(1), &sector(1)).unwrap();
        assert_eq!(flash.insert(home(2), &sector(2)), None, "slot 0 is busy");
        flash.written(home(1), slot, true);
        assert_eq!(flash.insert(home(2), &sector(2)), Some(slot));
        assert_eq!(flash.lookup(&home(1)), None, "its copy made way");
    }

    #[test]
    fn a_failed_write_or_device_leaves_nothing_to_read() {
        let mut flash = cache(8);
        let slot = flash.insert(home(1), &sector(1)).unwrap();
        flash.written(home(1), slot, false);
        assert_eq!(flash.lookup(&home(1)), None);
        let slot = flash.insert(home(2), &sector(2)).unwrap();
        flash.written(home(2), slot, true);
        flash.fail();
        assert_eq!(flash.lookup(&home(2)), None);
        assert_eq!(flash.insert(home(3), &sector(3)), None);
    }
}
