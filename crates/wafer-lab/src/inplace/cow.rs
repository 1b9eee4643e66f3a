//! Copy-on-first-write snapshots, as EMC CLARiiON SnapView makes them: which
//! chunks of the LUN a write must copy first, and where the copies go.
//!
//! A SnapView snapshot keeps no copy of the LUN when it is taken. It starts
//! a *session*; from then on, the first write to each *chunk* of the LUN
//! first reads the chunk's old contents and writes them to the *reserved LUN
//! pool*, and only then does the write; later writes to a chunk already
//! copied cost nothing extra. A chunk is copied once for every session that
//! lacks it, not once per session: a chunk copied after the third snapshot
//! serves the first three, and the fourth snapshot makes its next write copy
//! it again. A LUN has at most [`SESSIONS_PER_LUN_MAX`] sessions.
//!
//! The pool is filled in the order chunks are copied. When it is full, a
//! session can no longer keep its point in time: the sessions end, no write
//! copies anything until the next snapshot, and the array counts it.
//!
//! This module holds the bookkeeping only: per chunk, how many snapshots had
//! been taken when it was last copied (one byte per chunk, kept from the
//! first snapshot on), the chunks being copied and the host writes waiting
//! for each, and the pool's fill. The array (`super`) issues the reads and
//! writes and holds back the host writes.

use std::collections::BTreeMap;
use std::ops::Range;

use serde::{Deserialize, Serialize};

/// \[UNV\] Snapshots (SnapView sessions) a LUN may have at once: 8, the
/// figure issue 35 gives for SnapView; no SnapView document in the
/// project's research states it.
pub const SESSIONS_PER_LUN_MAX: u8 = 8;

/// \[UNV\] SnapView's copy granularity, 64 KiB: the figure issue 35's brief
/// gives. The project's research documents no SnapView chunk size; the one
/// 64 KiB chunk it documents is EMC's FAST Cache (device-models.md §2.8), so
/// this is an assumption a scenario may replace (`cow_chunk_<unit>`).
pub const CHUNK_BYTES_DEFAULT: u64 = 64 << 10;

/// What the copy-on-first-write machinery did, cumulative.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CowCounters {
    /// Chunks read from the LUN and written to the reserved LUN pool.
    pub chunks_copied: u64,
    /// Host writes that waited for at least one chunk copy.
    pub writes_held: u64,
    /// Times the pool filled and the sessions ended.
    pub pool_exhausted: u64,
}

/// The copy-on-first-write state of one LUN and its reserved LUN pool.
#[derive(Clone, Debug)]
pub struct CopyOnWrite {
    chunk_blocks: u64,
    lun_chunks: u64,
    /// The pool's first block, in the array's block space.
    pool_first: u64,
    pool_chunks: u64,
    pool_used: u64,
    /// Snapshots taken so far.
    snapshots: u8,
    /// Snapshots taken when the sessions last ended for want of pool space.
    ended_at: u8,
    /// Per chunk: snapshots taken when it was last copied (empty until the
    /// first snapshot).
    copied_at: Vec<u8>,
    /// Chunks being copied, by number.
    copying: BTreeMap<u64, Copying>,
    counters: CowCounters,
}

/// A chunk being copied.
#[derive(Clone, Debug)]
struct Copying {
    /// Snapshots taken when the copy began: those it serves.
    snapshots: u8,
    /// Where it goes in the pool, in the array's block space.
    target: Range<u64>,
    /// Host writes waiting for it.
    waiting: Vec<u64>,
}

/// A chunk copy to start: read `source` (blocks of the LUN), then write
/// [`CopyOnWrite::target`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChunkCopy {
    /// The chunk's number.
    pub chunk: u64,
    /// Its blocks in the LUN.
    pub source: Range<u64>,
}

impl CopyOnWrite {
    /// No snapshot yet, for a LUN of `lun_blocks` in chunks of
    /// `chunk_blocks`, and a pool of `pool_blocks` starting at block
    /// `pool_first`.
    pub fn new(chunk_blocks: u64, lun_blocks: u64, pool_first: u64, pool_blocks: u64) -> Self {
        assert!(chunk_blocks > 0, "a chunk holds at least one block");
        CopyOnWrite {
            chunk_blocks,
            lun_chunks: lun_blocks.div_ceil(chunk_blocks),
            pool_first,
            pool_chunks: pool_blocks / chunk_blocks,
            pool_used: 0,
            snapshots: 0,
            ended_at: 0,
            copied_at: Vec::new(),
            copying: BTreeMap::new(),
            counters: CowCounters::default(),
        }
    }

    /// Starts a session; false if the LUN has its most already.
    pub fn take_snapshot(&mut self) -> bool {
        if self.snapshots >= SESSIONS_PER_LUN_MAX {
            return false;
        }
        if self.copied_at.is_empty() {
            self.copied_at = vec![0; self.lun_chunks as usize];
        }
        self.snapshots += 1;
        true
    }

    /// Snapshots taken so far.
    pub fn snapshots(&self) -> u64 {
        u64::from(self.snapshots)
    }

    /// What the counters say so far.
    pub fn counters(&self) -> CowCounters {
        self.counters
    }

    /// Host write `id` of LUN blocks `first..end` is about to go ahead: the
    /// copies it must wait for, and among them those to start now. A write
    /// that waits for none may go at once.
    pub fn before_write(&mut self, id: u64, first: u64, end: u64) -> (usize, Vec<ChunkCopy>) {
        let mut waits = 0;
        let mut starts = Vec::new();
        for chunk in first / self.chunk_blocks..end.div_ceil(self.chunk_blocks) {
            if let Some(copying) = self.copying.get_mut(&chunk) {
                copying.waiting.push(id);
                waits += 1;
            } else if self.needs_copy(chunk) {
                let Some(copy) = self.start_copy(chunk, id) else {
                    continue;
                };
                starts.push(copy);
                waits += 1;
            }
        }
        if waits > 0 {
            self.counters.writes_held += 1;
        }
        (waits, starts)
    }

    /// Whether a live session lacks `chunk`'s present contents.
    fn needs_copy(&self, chunk: u64) -> bool {
        self.snapshots > self.ended_at && self.copied_at[chunk as usize] < self.snapshots
    }

    /// Takes pool room for `chunk` and marks it being copied for `id`; if the
    /// pool is full, ends the sessions instead.
    fn start_copy(&mut self, chunk: u64, id: u64) -> Option<ChunkCopy> {
        if self.pool_used == self.pool_chunks {
            self.ended_at = self.snapshots;
            self.counters.pool_exhausted += 1;
            return None;
        }
        let target_first = self.pool_first + self.pool_used * self.chunk_blocks;
        self.pool_used += 1;
        let source = chunk * self.chunk_blocks..(chunk + 1) * self.chunk_blocks;
        let copying = Copying {
            snapshots: self.snapshots,
            target: target_first..target_first + self.chunk_blocks,
            waiting: vec![id],
        };
        self.copying.insert(chunk, copying);
        Some(ChunkCopy { chunk, source })
    }

    /// Where `chunk`, being copied, goes in the pool.
    pub fn target(&self, chunk: u64) -> Range<u64> {
        self.copying[&chunk].target.clone()
    }

    /// `chunk`'s copy is in the pool: returns the host writes that waited
    /// for it.
    pub fn copied(&mut self, chunk: u64) -> Vec<u64> {
        let copying = self.copying.remove(&chunk).expect("a chunk being copied");
        self.copied_at[chunk as usize] = copying.snapshots;
        self.counters.chunks_copied += 1;
        copying.waiting
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cow(pool_chunks: u64) -> CopyOnWrite {
        CopyOnWrite::new(16, 16 * 100, 16 * 100, 16 * pool_chunks)
    }

    #[test]
    fn without_a_snapshot_no_write_copies() {
        let mut cow = cow(10);
        assert_eq!(cow.before_write(1, 0, 1), (0, Vec::new()));
    }

    #[test]
    fn the_first_write_to_a_chunk_copies_it_and_the_next_does_not() {
        let mut cow = cow(10);
        assert!(cow.take_snapshot());
        let (waits, starts) = cow.before_write(1, 17, 18);
        assert_eq!(waits, 1);
        let copy = ChunkCopy {
            chunk: 1,
            source: 16..32,
        };
        assert_eq!(starts, vec![copy]);
        assert_eq!(cow.target(1), 1600..1616);
        // A write to the chunk while it is being copied waits for that copy.
        assert_eq!(cow.before_write(2, 20, 21), (1, Vec::new()));
        assert_eq!(cow.copied(1), vec![1, 2]);
        assert_eq!(cow.before_write(3, 16, 32), (0, Vec::new()));
        // A new snapshot lacks the chunk's present contents again.
        assert!(cow.take_snapshot());
        assert_eq!(cow.before_write(4, 16, 17).0, 1);
    }

    #[test]
    fn a_write_over_two_chunks_waits_for_both() {
        let mut cow = cow(10);
        cow.take_snapshot();
        let (waits, starts) = cow.before_write(1, 15, 17);
        assert_eq!(waits, 2);
        assert_eq!(starts.len(), 2);
    }

    #[test]
    fn a_full_pool_ends_the_sessions() {
        let mut cow = cow(1);
        cow.take_snapshot();
        assert_eq!(cow.before_write(1, 0, 1).0, 1);
        assert_eq!(cow.before_write(2, 16, 17), (0, Vec::new()));
        assert_eq!(cow.counters().pool_exhausted, 1);
        assert_eq!(cow.before_write(3, 32, 33), (0, Vec::new()));
    }

    #[test]
    fn a_lun_takes_at_most_eight_snapshots() {
        let mut cow = cow(1);
        for _ in 0..SESSIONS_PER_LUN_MAX {
            assert!(cow.take_snapshot());
        }
        assert!(!cow.take_snapshot());
    }
}
