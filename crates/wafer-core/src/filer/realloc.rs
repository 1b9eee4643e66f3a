//! Reallocation: measuring how a LUN lies on disk, and laying it out again.
//!
//! Random overwrites scatter a file: each CP puts the blocks it writes where
//! free space is, so a LUN written randomly ends up with neighbours far apart and
//! a sequential read of it turns into many short disk reads. `reallocate
//! measure` rates that as ONTAP does, from 1 (contiguous) to 10 (not optimal),
//! with a hotspot value for the worst part; `reallocate start` rewrites the LUN
//! in order, a batch per CP, by marking its blocks dirty without changing them:
//! the write allocator then lays each batch out as chains down the disks.
//! Nothing is logged, since no data changes: a crash only leaves the job
//! unfinished. A job quiesced marks no more batches (the last one marked is
//! still written) and keeps its place until restarted; a job stopped is
//! gone.
//!
//! The rating (NetApp's formula is not public; this one follows the digest in
//! `wafl.md` §9): cut the LUN into windows of 64 blocks; in each, count the
//! chains, maximal runs of blocks adjacent on one disk, needed to read it; a
//! window's rating is 1 + 9 × (chains − 1) / (blocks − 1), rounded. The LUN's
//! rating is the mean over windows, its hotspot the rating of the worst 1%.

use super::{CacheEntry, Filer, HostError, QueuedOp, ReallocMeasure};
use crate::aggregate::Location;
use crate::nvlog::LunId;
use crate::payload::Payload;
use crate::units::Fbn;

/// Blocks per measuring window: 256 KiB, a long read's worth.
const WINDOW_BLOCKS: u64 = 64;
/// Blocks a reallocation job marks dirty per CP (8 MiB): enough to make
/// progress, little enough that host writes keep most of each CP.
pub const REALLOC_BLOCKS_PER_CP: u64 = 2048;

/// A reallocation in progress.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct ReallocJob {
    lun: LunId,
    next: u64,
    end: u64,
    quiesced: bool,
}

impl<P: Payload> Filer<P> {
    /// Rates how contiguously a LUN lies on disk.
    pub(super) fn measure(&self, lun: LunId) -> Result<ReallocMeasure, HostError> {
        let (_, l) = self.namespace.lun(lun)?;
        let blocks = l.size_bytes.div_ceil(crate::BLOCK_SIZE as u64);
        let mut ratings: Vec<u8> = (0..blocks.div_ceil(WINDOW_BLOCKS))
            .filter_map(|w| {
                let locations: Vec<Location> = (w * WINDOW_BLOCKS
                    ..((w + 1) * WINDOW_BLOCKS).min(blocks))
                    .map(|fbn| l.tree.get(Fbn(fbn)))
                    .filter(|ptr| !ptr.is_null())
                    .filter_map(|ptr| self.layout.locate(ptr.pvbn))
                    .collect();
                window_rating(&locations)
            })
            .collect();
        if ratings.is_empty() {
            return Ok(ReallocMeasure {
                rating: 1,
                hotspot: 1,
                windows: 0,
            });
        }
        let mean = ratings.iter().map(|&r| u64::from(r)).sum::<u64>() as f64 / ratings.len() as f64;
        ratings.sort_unstable();
        let worst = ratings[(ratings.len() * 99 / 100).min(ratings.len() - 1)];
        Ok(ReallocMeasure {
            rating: mean.round() as u8,
            hotspot: worst,
            windows: ratings.len() as u64,
        })
    }

    /// Starts rewriting a LUN contiguously, replacing any job in progress.
    pub(super) fn start_realloc(&mut self, lun: LunId) -> Result<(), HostError> {
        let (_, l) = self.namespace.lun(lun)?;
        let end = l.size_bytes.div_ceil(crate::BLOCK_SIZE as u64);
        self.realloc = Some(ReallocJob {
            lun,
            next: 0,
            end,
            quiesced: false,
        });
        self.advance_realloc();
        Ok(())
    }

    /// `reallocate quiesce`: the job marks no more batches until restarted;
    /// returns whether one was running.
    pub fn quiesce_realloc(&mut self) -> bool {
        let running = self.realloc.as_mut().filter(|job| !job.quiesced);
        running.map(|job| job.quiesced = true).is_some()
    }

    /// `reallocate restart`: a quiesced job goes on where it stopped;
    /// returns whether one was quiesced.
    pub fn restart_realloc(&mut self) -> bool {
        let quiesced = self.realloc.as_mut().filter(|job| job.quiesced);
        let restarted = quiesced.map(|job| job.quiesced = false).is_some();
        self.advance_realloc();
        restarted
    }

    /// `reallocate stop`: the job ends (a batch already marked is still
    /// written); returns whether there was one.
    pub fn stop_realloc(&mut self) -> bool {
        self.realloc.take().is_some()
    }

    /// Whether the reallocation in progress is quiesced.
    pub fn realloc_quiesced(&self) -> bool {
        self.realloc.is_some_and(|job| job.quiesced)
    }

    /// The LUN being reallocated and how far it got (blocks done, blocks in all).
    pub fn realloc_status(&self) -> Option<(LunId, u64, u64)> {
        self.realloc.map(|job| (job.lun, job.next, job.end))
    }

    /// Marks the job's next batch dirty; called when it starts and after each
    /// CP. Batches of holes are passed over at once: they give a CP nothing to
    /// write, and an idle filer would never run the CP that moves on.
    pub(super) fn advance_realloc(&mut self) {
        while self.realloc.is_some_and(|job| !job.quiesced) && !self.realloc_batch() {}
    }

    /// Marks the next batch dirty; returns whether it marked anything (or the
    /// job is over).
    fn realloc_batch(&mut self) -> bool {
        let Some(mut job) = self.realloc else {
            return true;
        };
        if self.namespace.lun(job.lun).is_err() || job.next >= job.end {
            self.realloc = None;
            return true;
        }
        let tree = &self.namespace[job.lun.volume].luns[&job.lun.file].tree;
        let Some(content) = tree.next_content(Fbn(job.next)).filter(|f| f.0 < job.end) else {
            self.realloc = None;
            return true;
        };
        // Batches keep their places (multiples of the batch size); those that
        // are all holes are passed over without a look at each hole.
        job.next = job
            .next
            .max(content.0 / REALLOC_BLOCKS_PER_CP * REALLOC_BLOCKS_PER_CP);
        let stop = (job.next + REALLOC_BLOCKS_PER_CP).min(job.end);
        let marked_before = self.counters.realloc_blocks;
        let generation = self.generation();
        let mut reads = Vec::new();
        for fbn in (job.next..stop).map(Fbn) {
            let ptr = self.namespace[job.lun.volume].luns[&job.lun.file]
                .tree
                .get(fbn);
            if ptr.is_null() {
                continue;
            }
            let touch = QueuedOp::touch(generation);
            self.counters.realloc_blocks += 1;
            let key = (job.lun, fbn);
            if self.cache.contains_key(&key) {
                self.apply_block(job.lun, fbn, touch);
                continue;
            }
            let (read, fill) = self.fill_read(job.lun, fbn, ptr);
            self.use_clock += 1;
            let entry = CacheEntry::filling(fill, vec![touch], Vec::new(), self.use_clock);
            self.cache.insert(key, entry);
            reads.push(read);
        }
        // One batch, so blocks adjacent on disk go out as chains.
        self.read_blocks(reads);
        job.next = stop;
        self.realloc = Some(job);
        self.counters.realloc_blocks > marked_before
    }
}

/// Reads shorter than this are not sequential enough to judge a layout by.
const READ_REALLOC_MIN_BLOCKS: u64 = 8;

impl<P: Payload> Filer<P> {
    /// `read_realloc`: after a sequential read of a volume with the option on,
    /// if the blocks read were not largely contiguous (more than one break in
    /// four), mark them dirty so the next CP writes them as chains.
    pub(super) fn read_realloc(&mut self, lun: LunId, offset: u64, length: u64) {
        let block = crate::BLOCK_SIZE as u64;
        let (first, end) = (offset / block, (offset + length).div_ceil(block));
        let enabled = self
            .namespace
            .volume(lun.volume)
            .is_some_and(|v| v.read_realloc);
        if !enabled || end - first < READ_REALLOC_MIN_BLOCKS || self.namespace.lun(lun).is_err() {
            return;
        }
        let tree = &self.namespace[lun.volume].luns[&lun.file].tree;
        let present: Vec<(Fbn, Location)> = (first..end)
            .map(Fbn)
            .filter_map(|fbn| {
                let ptr = tree.try_get(fbn)?;
                let at = self.layout.locate(ptr.pvbn).filter(|_| !ptr.is_null())?;
                Some((fbn, at))
            })
            .collect();
        let locations: Vec<Location> = present.iter().map(|(_, at)| *at).collect();
        let scattered = locations.len() >= 2 && breaks(&locations) * 4 > locations.len();
        if !scattered {
            return;
        }
        let generation = self.generation();
        for (fbn, _) in present {
            if self
                .cache
                .get(&(lun, fbn))
                .is_some_and(|e| e.content().is_some())
            {
                self.counters.realloc_blocks += 1;
                self.apply_block(lun, fbn, QueuedOp::touch(generation));
            }
        }
    }
}

/// Places in a run of locations where the next block is not the adjacent one
/// on the same disk.
fn breaks(locations: &[Location]) -> usize {
    locations
        .windows(2)
        .filter(|pair| {
            let (a, b) = (pair[0], pair[1]);
            !(a.group == b.group && a.disk == b.disk && a.dbn.0 + 1 == b.dbn.0)
        })
        .count()
}

/// A window's rating from its blocks' locations in file order.
fn window_rating(locations: &[Location]) -> Option<u8> {
    if locations.len() < 2 {
        return None;
    }
    let worst = (locations.len() - 1) as f64;
    Some((1.0 + 9.0 * breaks(locations) as f64 / worst).round() as u8)
}
