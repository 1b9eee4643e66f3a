//! Free-space bookkeeping: delayed frees and the write allocator.
//!
//! A block freed while CP `n` is the newest image on disk is still part of that
//! image, so it must not be written again until an image that no longer uses it
//! has committed. [`PendingFrees`] holds such blocks with the CP after which they
//! become allocatable again.
//!
//! The [`Allocator`] chooses where a CP's blocks go. The aggregate is cut into
//! *allocation areas* (AAs): runs of [`AA_STRIPES`] stripes of one RAID group.
//! Each CP fills the emptiest AA first, and within an AA fills a *tetris* of
//! stripes column by column, so a file's consecutive dirty blocks form a chain
//! of adjacent blocks on one disk while whole stripes fill up for RAID to write
//! with parity computed in memory. The tetris height follows what the CP still
//! expects to write: a small CP uses few stripes (fewer partial-stripe writes),
//! a large one full AAs (long chains), and the last AA of a large CP gets a
//! tetris just tall enough for the rest, so every data disk takes its share
//! rather than the first columns taking it all.
//!
//! A hybrid aggregate's SSD groups are a pool of their own: the CP takes
//! blocks from them only for the write cache ([`Allocator::allocate_ssd`]), and
//! [`Allocator::free_blocks`] counts the HDD pool alone, the aggregate's
//! capacity.

use std::collections::BTreeSet;

use wafer_raid::Dbn;

use crate::aggregate::{Layout, Tier};
use crate::bitmap::Bitmap;
use crate::units::{CpCount, Pvbn};

/// Stripes in one allocation area: 64 stripes make 256 KiB chains per disk.
pub const AA_STRIPES: u64 = 64;

/// Blocks freed but still held by an on-disk image.
#[derive(Clone, Debug)]
pub struct PendingFrees {
    held: Bitmap,
    queue: Vec<(CpCount, u64)>,
}

impl PendingFrees {
    /// Room for block numbers `0..len`.
    pub fn new(len: u64) -> PendingFrees {
        PendingFrees {
            held: Bitmap::new(len),
            queue: Vec::new(),
        }
    }

    /// Room for block numbers `0..len` from now on.
    pub fn grow(&mut self, len: u64) {
        self.held.grow(len);
    }

    /// The blocks held.
    pub fn held(&self) -> &Bitmap {
        &self.held
    }

    /// Holds `block` until CP `release_after` has committed.
    pub fn hold(&mut self, block: u64, release_after: CpCount) {
        assert!(self.held.set(block), "block {block} freed twice");
        self.queue.push((release_after, block));
    }

    /// Whether `block` is held.
    pub fn is_held(&self, block: u64) -> bool {
        self.held.get(block)
    }

    /// Releases every block held until `committed` or earlier; returns them,
    /// in the order they were held. The queue keeps its room for the next
    /// CP's frees, which are about as many.
    pub fn release(&mut self, committed: CpCount) -> Vec<u64> {
        let mut released = Vec::with_capacity(self.queue.len());
        self.queue.retain(|&(cp, block)| {
            let due = cp <= committed;
            if due {
                self.held.clear(block);
                released.push(block);
            }
            !due
        });
        released
    }

    /// Number of blocks held.
    pub fn len(&self) -> u64 {
        self.held.count_ones()
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }
}

/// One allocation area: a run of stripes of one RAID group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Area {
    group: usize,
    first_stripe: u64,
    stripes: u64,
}

/// The tetris being filled: an AA's stripes `first..first + height`.
#[derive(Clone, Copy, Debug)]
struct Tetris {
    area: usize,
    height: u64,
    column: usize,
    row: u64,
}

/// The aggregate's write allocator: a pool of allocation areas per tier.
#[derive(Clone, Debug)]
pub struct Allocator {
    hdd: Pool,
    ssd: Pool,
}

impl Allocator {
    /// An allocator for `layout`, whose blocks `used` marks are taken.
    pub fn new(layout: &Layout, used: &Bitmap) -> Allocator {
        Allocator {
            hdd: Pool::new(layout, used, Tier::Hdd),
            ssd: Pool::new(layout, used, Tier::Ssd),
        }
    }

    /// Starts a CP expected to write about `blocks` blocks.
    pub fn begin_cp(&mut self, blocks: u64) {
        self.hdd.begin_cp(blocks);
        self.ssd.begin_cp(blocks);
    }

    /// The next HDD block for this CP, or `None` when the aggregate is full.
    pub fn allocate(&mut self, layout: &Layout, is_free: impl Fn(Pvbn) -> bool) -> Option<Pvbn> {
        self.hdd.allocate(layout, is_free)
    }

    /// The next SSD block for this CP, or `None` when the SSD groups are
    /// full (or there are none).
    pub fn allocate_ssd(
        &mut self,
        layout: &Layout,
        is_free: impl Fn(Pvbn) -> bool,
    ) -> Option<Pvbn> {
        self.ssd.allocate(layout, is_free)
    }

    /// Notes that `pvbn` became allocatable again (its hold was released).
    pub fn note_released(&mut self, layout: &Layout, pvbn: Pvbn) {
        match layout.tier_of(pvbn) {
            Tier::Hdd => self.hdd.note_released(layout, pvbn),
            Tier::Ssd => self.ssd.note_released(layout, pvbn),
        }
    }

    /// Allocatable blocks of the aggregate's capacity (its HDD groups).
    pub fn free_blocks(&self) -> u64 {
        self.hdd.free_total
    }

    /// Allocatable blocks in the SSD groups.
    pub fn ssd_free_blocks(&self) -> u64 {
        self.ssd.free_total
    }
}

/// The allocation areas of one tier.
///
/// Choosing the emptiest area must not cost a scan of every area: a 20-disk
/// aggregate of 144 GB drives has over half a million. So the areas not yet
/// used in this CP sit in buckets by free count, and the choice is the lowest
/// area of the highest non-empty bucket.
#[derive(Clone, Debug)]
struct Pool {
    areas: Vec<Area>,
    free_in_area: Vec<u64>,
    free_total: u64,
    /// `by_free[f]`: the areas with `f` free blocks not yet used in this CP.
    by_free: Vec<BTreeSet<usize>>,
    /// No bucket above this one holds an area.
    highest: usize,
    tetris: Option<Tetris>,
    used_this_cp: Vec<bool>,
    /// The areas used in this CP, to put back in their buckets.
    used: Vec<usize>,
    /// Blocks the CP is still expected to write.
    expected: u64,
}

impl Pool {
    /// The pool of `layout`'s groups on `tier`, whose blocks `used` marks are taken.
    fn new(layout: &Layout, used: &Bitmap, tier: Tier) -> Pool {
        let mut areas = Vec::new();
        for (group, geometry) in layout.groups().iter().enumerate() {
            if layout.tier(group) != tier {
                continue;
            }
            let mut first = 0;
            while first < geometry.blocks_per_disk() {
                let stripes = AA_STRIPES.min(geometry.blocks_per_disk() - first);
                areas.push(Area {
                    group,
                    first_stripe: first,
                    stripes,
                });
                first += stripes;
            }
        }
        let free_in_area: Vec<u64> = areas
            .iter()
            .map(|area| free_in(layout, area, used))
            .collect();
        let widest = layout
            .groups()
            .iter()
            .map(|g| g.data_disks() as u64)
            .max()
            .unwrap_or(1);
        let mut by_free = vec![BTreeSet::new(); (AA_STRIPES * widest) as usize + 1];
        for (area, &free) in free_in_area.iter().enumerate() {
            by_free[free as usize].insert(area);
        }
        let count = areas.len();
        Pool {
            areas,
            free_total: free_in_area.iter().sum(),
            free_in_area,
            highest: by_free.len() - 1,
            by_free,
            tetris: None,
            used_this_cp: vec![false; count],
            used: Vec::new(),
            expected: 0,
        }
    }

    fn begin_cp(&mut self, blocks: u64) {
        self.expected = blocks;
        self.tetris = None;
        for area in std::mem::take(&mut self.used) {
            self.used_this_cp[area] = false;
            self.bucket(area, None, Some(self.free_in_area[area]));
        }
    }

    fn allocate(&mut self, layout: &Layout, is_free: impl Fn(Pvbn) -> bool) -> Option<Pvbn> {
        loop {
            let tetris = match self.tetris {
                Some(tetris) => tetris,
                None => self.next_tetris(layout)?,
            };
            match self.next_in_tetris(layout, tetris, &is_free) {
                Some(pvbn) => {
                    self.change_free(tetris.area, -1);
                    self.expected = self.expected.saturating_sub(1);
                    return Some(pvbn);
                }
                None => self.tetris = None,
            }
        }
    }

    fn note_released(&mut self, layout: &Layout, pvbn: Pvbn) {
        let at = layout
            .locate(pvbn)
            .expect("released block inside the aggregate");
        let area = self.area_of(at.group, at.dbn);
        self.change_free(area, 1);
    }

    /// Adds `delta` to an area's free count, moving it between buckets if it
    /// is in one.
    fn change_free(&mut self, area: usize, delta: i64) {
        let old = self.free_in_area[area];
        let new = old
            .checked_add_signed(delta)
            .expect("free count stays >= 0");
        self.free_in_area[area] = new;
        self.free_total = self.free_total.checked_add_signed(delta).expect(">= 0");
        if !self.used_this_cp[area] {
            self.bucket(area, Some(old), Some(new));
        }
    }

    /// Moves `area` from bucket `from` to bucket `to` (either may be none).
    fn bucket(&mut self, area: usize, from: Option<u64>, to: Option<u64>) {
        if let Some(from) = from {
            assert!(
                self.by_free[from as usize].remove(&area),
                "area in its bucket"
            );
        }
        if let Some(to) = to {
            self.by_free[to as usize].insert(area);
            self.highest = self.highest.max(to as usize);
        }
    }

    fn area_of(&self, group: usize, dbn: Dbn) -> usize {
        self.areas
            .partition_point(|a| (a.group, a.first_stripe) <= (group, dbn.0))
            .checked_sub(1)
            .expect("every stripe is in an area")
    }

    /// Picks the emptiest area not yet used in this CP (ties to the lowest).
    fn next_tetris(&mut self, layout: &Layout) -> Option<Tetris> {
        while self.highest > 0 && self.by_free[self.highest].is_empty() {
            self.highest -= 1;
        }
        if self.highest == 0 {
            return None;
        }
        let area = self.by_free[self.highest]
            .pop_first()
            .expect("the bucket is not empty");
        self.used_this_cp[area] = true;
        self.used.push(area);
        let data_disks = layout.groups()[self.areas[area].group].data_disks() as u64;
        let height = self.expected.div_ceil(data_disks).clamp(1, AA_STRIPES);
        let tetris = Tetris {
            area,
            height: height.min(self.areas[area].stripes),
            column: 0,
            row: 0,
        };
        self.tetris = Some(tetris);
        Some(tetris)
    }

    /// Walks the tetris column by column (disk by disk) for the next free block.
    fn next_in_tetris(
        &mut self,
        layout: &Layout,
        mut tetris: Tetris,
        is_free: impl Fn(Pvbn) -> bool,
    ) -> Option<Pvbn> {
        let area = self.areas[tetris.area];
        let geometry = &layout.groups()[area.group];
        let mut found = None;
        while found.is_none() {
            if tetris.row == tetris.height {
                tetris.row = 0;
                tetris.column += 1;
            }
            if tetris.column == geometry.data_disks() {
                // The tetris is used up; grow it within the area if room remains.
                if tetris.height == area.stripes {
                    return None;
                }
                tetris.height = (tetris.height * 2).min(area.stripes);
                tetris.column = 0;
                tetris.row = 0;
            }
            let dbn = Dbn(area.first_stripe + tetris.row);
            let pvbn = layout
                .pvbn(area.group, geometry.data_disk(tetris.column), dbn)
                .expect("data disk");
            if is_free(pvbn) && !layout.is_reserved(pvbn) {
                found = Some(pvbn);
            }
            tetris.row += 1;
        }
        self.tetris = Some(tetris);
        found
    }
}

/// An area's free blocks: on each data disk its stripes are one run of
/// pvbns, counted in `used` a word at a time; reserved blocks are not free.
fn free_in(layout: &Layout, area: &Area, used: &Bitmap) -> u64 {
    let geometry = &layout.groups()[area.group];
    (0..geometry.data_disks())
        .map(|n| {
            let disk = geometry.data_disk(n);
            let first = layout
                .pvbn(area.group, disk, Dbn(area.first_stripe))
                .expect("a data disk");
            let run = first.0..first.0 + area.stripes;
            let reserved = (run.start..run.end)
                .take_while(|&p| layout.is_reserved(Pvbn(p)))
                .filter(|&p| !used.get(p))
                .count() as u64;
            area.stripes - used.count_ones_in(run) - reserved
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use wafer_raid::{RaidGroupGeometry, RaidType};

    fn layout() -> Layout {
        let geometry = RaidGroupGeometry::new(RaidType::RaidDp, 6, 256).expect("valid");
        Layout::new(vec![geometry], 0).expect("valid")
    }

    #[test]
    fn a_large_cp_fills_full_stripes_with_chains_down_each_disk() {
        let layout = layout();
        let mut allocator = Allocator::new(&layout, &Bitmap::new(layout.total_blocks()));
        allocator.begin_cp(4 * 64);
        let blocks: Vec<Pvbn> = (0..4 * 64)
            .map(|_| allocator.allocate(&layout, |_| true).expect("room"))
            .collect();
        let stripes: std::collections::BTreeSet<u64> = blocks
            .iter()
            .map(|&p| layout.locate(p).expect("inside").dbn.0)
            .collect();
        assert_eq!(stripes.len(), 64, "four data disks times 64 stripes");
        assert!(blocks.windows(2).filter(|w| w[1].0 == w[0].0 + 1).count() >= 4 * 63 - 1);
    }

    #[test]
    fn a_cp_larger_than_an_area_gives_every_data_disk_its_share() {
        let geometry = RaidGroupGeometry::new(RaidType::RaidDp, 20, 1024).expect("valid");
        let layout = Layout::new(vec![geometry], 0).expect("valid");
        let mut allocator = Allocator::new(&layout, &Bitmap::new(layout.total_blocks()));
        // Reallocation's CPs: 2048 blocks and a few of metadata, 1.8 areas.
        let blocks = 2064;
        allocator.begin_cp(blocks);
        let mut per_disk = [0u64; 20];
        for _ in 0..blocks {
            let pvbn = allocator.allocate(&layout, |_| true).expect("room");
            per_disk[layout.locate(pvbn).expect("inside").disk.as_usize()] += 1;
        }
        let data = &per_disk[2..];
        let (least, most) = (data.iter().min().unwrap(), data.iter().max().unwrap());
        assert!(most - least <= 64 / 8, "{per_disk:?}");
    }

    #[test]
    fn a_small_cp_stays_in_one_stripe() {
        let layout = layout();
        let mut allocator = Allocator::new(&layout, &Bitmap::new(layout.total_blocks()));
        allocator.begin_cp(3);
        let stripes: Vec<u64> = (0..3)
            .map(|_| {
                layout
                    .locate(allocator.allocate(&layout, |_| true).expect("room"))
                    .expect("in")
                    .dbn
                    .0
            })
            .collect();
        assert!(stripes.iter().all(|&s| s == stripes[0]), "{stripes:?}");
    }

    #[test]
    fn used_and_reserved_blocks_are_skipped_until_the_aggregate_is_full() {
        let layout = layout();
        let used = |p: Pvbn| p.0 % 3 == 0;
        let mut map = Bitmap::new(layout.total_blocks());
        for p in (0..layout.total_blocks()).filter(|&p| used(Pvbn(p))) {
            map.set(p);
        }
        let mut allocator = Allocator::new(&layout, &map);
        let expected = (0..layout.total_blocks())
            .filter(|&p| !used(Pvbn(p)) && !layout.is_reserved(Pvbn(p)))
            .count();
        assert_eq!(allocator.free_blocks(), expected as u64);
        allocator.begin_cp(10_000);
        let mut got = std::collections::BTreeSet::new();
        while let Some(p) = allocator.allocate(&layout, |p| !used(p)) {
            assert!(!used(p) && !layout.is_reserved(p) && got.insert(p), "{p:?}");
        }
        assert_eq!(got.len(), expected);
    }

    #[test]
    fn held_blocks_come_back_only_after_their_cp() {
        let mut pending = PendingFrees::new(100);
        pending.hold(7, CpCount(5));
        pending.hold(9, CpCount(6));
        assert!(pending.release(CpCount(4)).is_empty());
        assert_eq!(pending.release(CpCount(5)), vec![7]);
        assert!(pending.is_held(9) && !pending.is_held(7));
    }
}
