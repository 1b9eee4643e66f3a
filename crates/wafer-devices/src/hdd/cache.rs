//! The drive's segmented buffer: which block ranges it holds.
//!
//! The buffer is cut into a fixed number of equal segments (DiskSim's
//! `Number of buffer segments` and `Segment size`, device-models.md §1.6).
//! Each segment holds one run of consecutive blocks: the data of a read and
//! the read-ahead that followed it, or a write held for write-back. A segment
//! is a circular buffer, so a run longer than the segment keeps only its last
//! `segment_blocks` blocks. A new run takes the least recently used segment.
//! A write invalidates whatever the segments held of the blocks it overwrites
//! (the part of a run from the first overwritten block on is dropped).
//!
//! Only ranges are tracked, never data: the lab needs to know what hits, not
//! what the bytes are.

/// One segment: blocks `start..end` (empty when equal).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Segment {
    start: u64,
    end: u64,
    last_used: u64,
}

/// The segments and their replacement order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SegmentCache {
    segments: Vec<Segment>,
    segment_blocks: u64,
    clock: u64,
}

impl SegmentCache {
    /// A buffer of `segments` segments of `segment_blocks` blocks each.
    pub fn new(segments: u32, segment_blocks: u64) -> SegmentCache {
        assert!(
            segments > 0 && segment_blocks > 0,
            "a buffer needs at least one non-empty segment"
        );
        SegmentCache {
            segments: vec![Segment::default(); segments as usize],
            segment_blocks,
            clock: 0,
        }
    }

    /// Blocks per segment.
    pub fn segment_blocks(&self) -> u64 {
        self.segment_blocks
    }

    /// True if one segment holds all of `start..end`; marks it used.
    pub fn lookup(&mut self, start: u64, end: u64) -> bool {
        self.clock += 1;
        let clock = self.clock;
        match self
            .segments
            .iter_mut()
            .find(|s| s.start <= start && end <= s.end && start < end)
        {
            Some(segment) => {
                segment.last_used = clock;
                true
            }
            None => false,
        }
    }

    /// Marks segment `index` used, so that the next insertion replaces another.
    pub fn touch(&mut self, index: usize) {
        self.clock += 1;
        self.segments[index].last_used = self.clock;
    }

    /// Puts the run `start..end` in the least recently used segment and returns
    /// its index.
    pub fn insert(&mut self, start: u64, end: u64) -> usize {
        self.clock += 1;
        let index = (0..self.segments.len())
            .min_by_key(|&i| self.segments[i].last_used)
            .expect("at least one segment");
        self.segments[index] = Segment {
            start: start.max(end.saturating_sub(self.segment_blocks)),
            end,
            last_used: self.clock,
        };
        index
    }

    /// Sets segment `index` to hold `start..end` (the run a read-ahead stream
    /// reached), keeping only the last `segment_blocks` blocks.
    pub fn set_run(&mut self, index: usize, start: u64, end: u64) {
        let segment = &mut self.segments[index];
        segment.start = start.max(end.saturating_sub(self.segment_blocks));
        segment.end = end;
    }

    /// Forgets whatever the segments hold from `start` on, wherever they hold
    /// any of `start..end`.
    pub fn invalidate(&mut self, start: u64, end: u64) {
        for segment in &mut self.segments {
            if segment.start < end && start < segment.end {
                segment.end = start.max(segment.start);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_hits_until_it_is_replaced_least_recently_used_first() {
        let mut cache = SegmentCache::new(2, 100);
        assert!(!cache.lookup(0, 1));
        cache.insert(0, 10);
        cache.insert(50, 60);
        assert!(cache.lookup(2, 5));
        assert!(!cache.lookup(8, 12), "a hit needs the whole range");
        cache.insert(200, 210); // replaces 50..60, the least recently used
        assert!(cache.lookup(0, 10));
        assert!(!cache.lookup(50, 51));
        assert!(cache.lookup(205, 210));
    }

    #[test]
    fn a_long_run_keeps_its_tail_and_writes_cut_runs() {
        let mut cache = SegmentCache::new(1, 100);
        let index = cache.insert(0, 10);
        cache.set_run(index, 0, 1000);
        assert!(!cache.lookup(0, 1));
        assert!(cache.lookup(900, 1000));
        cache.invalidate(950, 951);
        assert!(cache.lookup(900, 950));
        assert!(!cache.lookup(950, 951));
        assert!(!cache.lookup(960, 970));
    }
}
