//! The comparator's write-back cache: mirrored controller memory that
//! acknowledges writes at once and writes them to the disks later.
//!
//! The cache holds 4 KiB LUN blocks. A host write is admitted when the blocks
//! it newly dirties fit (an overwrite of a block still dirty costs no space:
//! the cache coalesces it); writes that do not fit wait in arrival order until
//! destaging frees room. A block being destaged keeps its room until its disk
//! write is done; if the host writes it again meanwhile, the new data takes a
//! room of its own and goes out with a later destage.
//!
//! The destager sweeps the LUN in address order (an elevator): each destage
//! takes the next run of consecutive dirty blocks within one stripe, in a
//! stripe not already being updated, so blocks dirtied next to each other
//! share one parity update. The cache keeps no data, only which blocks are dirty: the lab
//! models time, not contents.

use std::collections::VecDeque;

use wafer_core::units::{Duration, Instant};

use super::block_set::BlockSet;

/// A host write waiting for room.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WaitingWrite {
    /// The host I/O.
    pub id: u64,
    /// When the host submitted it.
    pub submitted_at: Instant,
    /// First LUN block.
    pub first: u64,
    /// One past the last.
    pub end: u64,
}

/// Dirty blocks, blocks on their way to disk, and writes waiting for room.
#[derive(Clone, Debug)]
pub struct WriteCache {
    capacity_blocks: u64,
    latency: Duration,
    dirty: BlockSet,
    destaging: BlockSet,
    waiting: VecDeque<WaitingWrite>,
    cursor: u64,
}

impl WriteCache {
    /// An empty cache of `capacity_blocks` blocks of a LUN of `lun_blocks`
    /// that answers a host in `latency`.
    pub fn new(capacity_blocks: u64, lun_blocks: u64, latency: Duration) -> WriteCache {
        assert!(capacity_blocks > 0, "a cache holds at least one block");
        WriteCache {
            capacity_blocks,
            latency,
            dirty: BlockSet::new(lun_blocks),
            destaging: BlockSet::new(lun_blocks),
            waiting: VecDeque::new(),
            cursor: 0,
        }
    }

    /// How long the controller takes to answer from the cache.
    pub fn latency(&self) -> Duration {
        self.latency
    }

    /// Blocks of room in use.
    pub fn occupancy(&self) -> u64 {
        self.dirty.len() + self.destaging.len()
    }

    /// True if a write of `first..end` can never fit, even in an empty cache.
    pub fn too_large(&self, first: u64, end: u64) -> bool {
        end - first > self.capacity_blocks
    }

    /// True if every block of `first..end` is in the cache (dirty or on its
    /// way out): a read of them is a hit.
    pub fn holds(&self, first: u64, end: u64) -> bool {
        self.dirty.covers_with(&self.destaging, first..end)
    }

    /// Drops `first..end` from the dirty set: a write that bypasses the cache
    /// supersedes them.
    pub fn forget(&mut self, first: u64, end: u64) {
        self.dirty.remove_range(first..end);
    }

    /// Queues a host write behind any already waiting.
    pub fn enqueue(&mut self, write: WaitingWrite) {
        self.waiting.push_back(write);
    }

    /// Admits waiting writes, oldest first, while they fit; returns them.
    pub fn admit(&mut self) -> Vec<WaitingWrite> {
        let mut admitted = Vec::new();
        while let Some(&write) = self.waiting.front() {
            let range = write.first..write.end;
            let new_blocks = range.end - range.start - self.dirty.count_in(range.clone());
            if self.occupancy() + new_blocks > self.capacity_blocks {
                break;
            }
            self.dirty.insert_range(range);
            admitted.push(write);
            self.waiting.pop_front();
        }
        admitted
    }

    /// The next run of dirty blocks to destage, found by sweeping on from
    /// the last one: consecutive dirty blocks within one stripe (of
    /// `stripe_blocks` blocks), in a stripe that `busy` does not report as
    /// being updated already (`busy_stripes` of them are). The blocks move
    /// to the destaging set. `None` if every dirty stripe is busy.
    pub fn take_run(
        &mut self,
        stripe_blocks: u64,
        busy: impl Fn(u64) -> bool,
        busy_stripes: usize,
    ) -> Option<(u64, u64)> {
        let mut wrapped = false;
        let mut skipped = 0;
        loop {
            let next = self.dirty.first_from(self.cursor);
            let Some(first) = next else {
                if wrapped || self.dirty.is_empty() {
                    return None;
                }
                wrapped = true;
                self.cursor = 0;
                continue;
            };
            let stripe = first / stripe_blocks;
            let stripe_end = (stripe + 1) * stripe_blocks;
            if busy(stripe) {
                self.cursor = stripe_end;
                skipped += 1;
                if skipped > busy_stripes {
                    return None;
                }
                continue;
            }
            let end = self.dirty.run_end(first, stripe_end);
            self.dirty.remove_range(first..end);
            self.destaging.insert_range(first..end);
            self.cursor = end;
            return Some((first, end));
        }
    }

    /// Releases the room of destaged blocks `first..end`.
    pub fn destaged(&mut self, first: u64, end: u64) {
        let removed = self.destaging.remove_range(first..end);
        assert_eq!(
            removed,
            end - first,
            "blocks {first}..{end} were not all being destaged"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(id: u64, first: u64, end: u64) -> WaitingWrite {
        WaitingWrite {
            id,
            submitted_at: Instant(0),
            first,
            end,
        }
    }

    #[test]
    fn overwrites_coalesce_and_full_cache_makes_writes_wait() {
        let mut cache = WriteCache::new(4, 100, Duration(1));
        cache.enqueue(write(1, 0, 3));
        cache.enqueue(write(2, 1, 3));
        assert_eq!(cache.admit().len(), 2, "the overwrite needs no room");
        assert_eq!(cache.occupancy(), 3);
        cache.enqueue(write(3, 10, 12));
        cache.enqueue(write(4, 20, 21));
        assert!(cache.admit().is_empty(), "two blocks do not fit in one");
        assert_eq!(cache.take_run(8, |_| false, 0), Some((0, 3)));
        assert!(
            cache.holds(0, 3),
            "blocks on their way out still answer reads"
        );
        assert_eq!(cache.occupancy(), 3, "destaging blocks keep their room");
        cache.destaged(0, 3);
        let admitted: Vec<u64> = cache.admit().iter().map(|w| w.id).collect();
        assert_eq!(admitted, vec![3, 4], "waiting writes go in arrival order");
    }

    #[test]
    fn the_sweep_takes_runs_skips_busy_stripes_and_wraps() {
        let mut cache = WriteCache::new(100, 100, Duration(1));
        cache.enqueue(write(1, 3, 5));
        cache.enqueue(write(2, 6, 10));
        cache.enqueue(write(3, 17, 18));
        cache.admit();
        assert_eq!(
            cache.take_run(8, |s| s == 2, 1),
            Some((3, 5)),
            "a run of two"
        );
        assert_eq!(
            cache.take_run(8, |s| s == 2, 1),
            Some((6, 8)),
            "a run stops at its stripe's end"
        );
        assert_eq!(cache.take_run(8, |s| s == 2, 1), Some((8, 10)));
        assert_eq!(cache.take_run(8, |s| s == 2, 1), None, "stripe 2 is busy");
        assert_eq!(cache.take_run(8, |_| false, 0), Some((17, 18)));
        assert_eq!(cache.take_run(8, |_| false, 0), None);
    }
}
