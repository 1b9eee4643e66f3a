//! RAID-5 striping of one LUN over a disk group, with rotating parity.
//!
//! The LUN's 4 KiB blocks are cut into *chunks* of the stripe unit; `width`
//! consecutive data chunks and one parity chunk make a *stripe*. Stripes are
//! laid one after another over the group's chunk *positions*, which run
//! across the disks row by row (position `p` is disk `p mod disks`, row
//! `p div disks`), so the `width + 1` chunks of a stripe always sit on
//! distinct disks, whether or not `width + 1` divides the number of disks
//! (HP's EVA spreads narrow stripes over a wide group this way; a classic
//! RAID-5 set has `width = disks - 1`). Within a stripe the parity chunk's
//! slot rotates with the stripe number, and the data chunks follow it
//! (left-symmetric), so parity load spreads over every disk.
//!
//! What the layout guarantees: every LUN block has one home, a (disk, disk
//! block) pair that never changes; a stripe's data is a contiguous range of
//! LUN blocks; [`Layout::read_pieces`] splits a block range at chunk
//! boundaries and merges the pieces that are adjacent on one disk; and
//! [`Layout::plan`] turns the blocks a write touches in one stripe into its
//! disk commands: a full-stripe write (data and parity, no reads) when every
//! data block of the stripe is written, else a read-modify-write (read old
//! data and old parity, then write new data and new parity).

use std::collections::BTreeMap;

use wafer_devices::BLOCK_BYTES;

/// Where a RAID-5 stripe set puts its chunks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    disks: u32,
    width: u32,
    chunk_blocks: u64,
    stripes: u64,
}

/// A run of consecutive blocks on one disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Piece {
    /// Index of the disk in the group.
    pub disk: u32,
    /// First block on that disk.
    pub block: u64,
    /// Number of blocks.
    pub blocks: u32,
}

/// The blocks a write touches in one stripe: for each data chunk it touches
/// (by its index within the stripe), the span of blocks within the chunk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StripeWrite {
    /// The stripe's number.
    pub stripe: u64,
    /// Data chunk index → (first block, end block) within the chunk.
    pub chunks: BTreeMap<u32, (u64, u64)>,
}

/// The disk commands of one stripe update.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StripePlan {
    /// Reads of old data and old parity, issued first.
    pub reads: Vec<Piece>,
    /// Writes of new data and new parity, issued when every read is done.
    pub writes: Vec<Piece>,
}

impl Layout {
    /// A layout of `lun_blocks` blocks over `disks` disks in stripes of
    /// `width` data chunks of `chunk_blocks` blocks. The caller has checked
    /// `2 ≤ width + 1 ≤ disks` and `chunk_blocks ≥ 1`.
    pub fn new(disks: u32, width: u32, chunk_blocks: u64, lun_blocks: u64) -> Layout {
        assert!(
            width >= 1 && width < disks,
            "a stripe needs data and parity on distinct disks"
        );
        assert!(chunk_blocks >= 1, "a chunk holds at least one block");
        let stripe_blocks = u64::from(width) * chunk_blocks;
        Layout {
            disks,
            width,
            chunk_blocks,
            stripes: lun_blocks.div_ceil(stripe_blocks),
        }
    }

    /// Disks in the group.
    pub fn disks(&self) -> u32 {
        self.disks
    }

    /// Data blocks per stripe.
    pub fn stripe_blocks(&self) -> u64 {
        u64::from(self.width) * self.chunk_blocks
    }

    /// Blocks each disk must have to hold every stripe.
    pub fn disk_blocks_needed(&self) -> u64 {
        let positions = self.stripes * u64::from(self.width + 1);
        positions.div_ceil(u64::from(self.disks)) * self.chunk_blocks
    }

    /// The stripe slot (0..=width) of the parity chunk: rotates backwards one
    /// slot per stripe.
    fn parity_slot(&self, stripe: u64) -> u64 {
        let slots = u64::from(self.width) + 1;
        u64::from(self.width) - stripe % slots
    }

    /// The disk and first disk block of a stripe's chunk in `slot`.
    fn chunk_home(&self, stripe: u64, slot: u64) -> (u32, u64) {
        let position = stripe * (u64::from(self.width) + 1) + slot;
        let disks = u64::from(self.disks);
        (
            (position % disks) as u32,
            position / disks * self.chunk_blocks,
        )
    }

    /// The disk and first disk block of data chunk `index` of `stripe`.
    fn data_home(&self, stripe: u64, index: u32) -> (u32, u64) {
        let slots = u64::from(self.width) + 1;
        let slot = (self.parity_slot(stripe) + 1 + u64::from(index)) % slots;
        self.chunk_home(stripe, slot)
    }

    /// The disk and first disk block of `stripe`'s parity chunk.
    fn parity_home(&self, stripe: u64) -> (u32, u64) {
        self.chunk_home(stripe, self.parity_slot(stripe))
    }

    /// The home of LUN block `block`.
    pub fn locate(&self, block: u64) -> (u32, u64) {
        let chunk = block / self.chunk_blocks;
        let within = block % self.chunk_blocks;
        let stripe = chunk / u64::from(self.width);
        let index = (chunk % u64::from(self.width)) as u32;
        let (disk, first) = self.data_home(stripe, index);
        (disk, first + within)
    }

    /// The disk commands that read LUN blocks `first..end`: one piece per
    /// chunk touched, merged where adjacent on a disk, ordered by disk.
    pub fn read_pieces(&self, first: u64, end: u64) -> Vec<Piece> {
        let mut pieces: Vec<Piece> = Vec::new();
        let mut block = first;
        while block < end {
            let chunk_end = (block / self.chunk_blocks + 1) * self.chunk_blocks;
            let blocks = chunk_end.min(end) - block;
            let (disk, disk_block) = self.locate(block);
            pieces.push(piece(disk, disk_block, blocks));
            block += blocks;
        }
        merge_adjacent(pieces)
    }

    /// The stripes LUN blocks `first..end` touch, each with the blocks it
    /// touches.
    pub fn stripe_writes(&self, first: u64, end: u64) -> Vec<StripeWrite> {
        let mut writes: Vec<StripeWrite> = Vec::new();
        let mut block = first;
        while block < end {
            let chunk_end = (block / self.chunk_blocks + 1) * self.chunk_blocks;
            let stop = chunk_end.min(end);
            let (stripe, index, within) = self.split(block);
            let span = (within, within + (stop - block));
            match writes.last_mut() {
                Some(write) if write.stripe == stripe => {
                    write.chunks.insert(index, span);
                }
                _ => writes.push(StripeWrite {
                    stripe,
                    chunks: BTreeMap::from([(index, span)]),
                }),
            }
            block = stop;
        }
        writes
    }

    /// The stripe, data chunk index and block within the chunk of LUN block
    /// `block`.
    fn split(&self, block: u64) -> (u64, u32, u64) {
        let chunk = block / self.chunk_blocks;
        (
            chunk / u64::from(self.width),
            (chunk % u64::from(self.width)) as u32,
            block % self.chunk_blocks,
        )
    }

    /// True if `write` covers every data block of its stripe.
    pub fn is_full_stripe(&self, write: &StripeWrite) -> bool {
        write.chunks.len() == self.width as usize
            && write
                .chunks
                .values()
                .all(|&span| span == (0, self.chunk_blocks))
    }

    /// The disk commands of `write`: full-stripe, or read-modify-write.
    pub fn plan(&self, write: &StripeWrite) -> StripePlan {
        let (parity_disk, parity_first) = self.parity_home(write.stripe);
        if self.is_full_stripe(write) {
            let mut writes: Vec<Piece> = (0..self.width)
                .map(|index| {
                    let (disk, first) = self.data_home(write.stripe, index);
                    piece(disk, first, self.chunk_blocks)
                })
                .collect();
            writes.push(piece(parity_disk, parity_first, self.chunk_blocks));
            return StripePlan {
                reads: Vec::new(),
                writes,
            };
        }
        let mut pieces: Vec<Piece> = write
            .chunks
            .iter()
            .map(|(&index, &(start, end))| {
                let (disk, first) = self.data_home(write.stripe, index);
                piece(disk, first + start, end - start)
            })
            .collect();
        let parity_start = write.chunks.values().map(|span| span.0).min();
        let parity_end = write.chunks.values().map(|span| span.1).max();
        let (start, end) = parity_start
            .zip(parity_end)
            .expect("a write touches a chunk");
        pieces.push(piece(parity_disk, parity_first + start, end - start));
        StripePlan {
            reads: pieces.clone(),
            writes: pieces,
        }
    }
}

/// A piece of `blocks` blocks; a host I/O never spans 2^32 blocks (16 TiB).
fn piece(disk: u32, block: u64, blocks: u64) -> Piece {
    Piece {
        disk,
        block,
        blocks: u32::try_from(blocks).expect("an I/O of under 16 TiB"),
    }
}

/// Sorts pieces by disk and block and merges those that continue each other.
fn merge_adjacent(mut pieces: Vec<Piece>) -> Vec<Piece> {
    pieces.sort_unstable();
    let mut merged: Vec<Piece> = Vec::with_capacity(pieces.len());
    for next in pieces {
        match merged.last_mut() {
            Some(last)
                if last.disk == next.disk && last.block + u64::from(last.blocks) == next.block =>
            {
                last.blocks += next.blocks;
            }
            _ => merged.push(next),
        }
    }
    merged
}

/// The 4 KiB blocks that hold bytes `offset..offset + length`: a partial
/// block at either end counts whole.
pub fn covering_blocks(offset: u64, length: u64) -> (u64, u64) {
    (
        offset / BLOCK_BYTES,
        (offset + length).div_ceil(BLOCK_BYTES),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Five disks, 4+1 stripes of 2-block chunks: a classic RAID-5 set.
    fn classic() -> Layout {
        Layout::new(5, 4, 2, 8 * 10)
    }

    #[test]
    fn parity_rotates_over_every_disk_and_data_avoids_it() {
        let layout = classic();
        let parity_disks: Vec<u32> = (0..5).map(|s| layout.parity_home(s).0).collect();
        let mut sorted = parity_disks.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, vec![0, 1, 2, 3, 4], "parity on {parity_disks:?}");
        for stripe in 0..10 {
            let (parity_disk, _) = layout.parity_home(stripe);
            let mut disks: Vec<u32> = (0..4).map(|i| layout.data_home(stripe, i).0).collect();
            disks.push(parity_disk);
            disks.sort_unstable();
            disks.dedup();
            assert_eq!(
                disks.len(),
                5,
                "stripe {stripe} puts two chunks on one disk"
            );
        }
    }

    #[test]
    fn every_block_has_one_home() {
        for layout in [classic(), Layout::new(7, 4, 3, 12 * 9)] {
            let blocks = layout.stripes * layout.stripe_blocks();
            let mut homes: Vec<(u32, u64)> = (0..blocks).map(|b| layout.locate(b)).collect();
            let parity: Vec<(u32, u64)> = (0..layout.stripes)
                .flat_map(|s| {
                    let (disk, first) = layout.parity_home(s);
                    (0..layout.chunk_blocks).map(move |b| (disk, first + b))
                })
                .collect();
            homes.extend(parity);
            let count = homes.len();
            homes.sort_unstable();
            homes.dedup();
            assert_eq!(homes.len(), count, "two blocks share a home");
            assert!(homes.iter().all(|&(_, b)| b < layout.disk_blocks_needed()));
        }
    }

    #[test]
    fn reads_split_at_chunks_and_merge_on_a_disk() {
        let layout = classic();
        // Blocks 1..4 span chunk 0 (block 1) and chunk 1 (blocks 2, 3).
        let pieces = layout.read_pieces(1, 4);
        assert_eq!(pieces.len(), 2);
        assert_eq!(pieces.iter().map(|p| p.blocks).sum::<u32>(), 3);
        // A read of two whole stripes puts two chunks on each disk, but only
        // where they are adjacent do they merge.
        let whole = layout.read_pieces(0, 16);
        assert_eq!(whole.iter().map(|p| u64::from(p.blocks)).sum::<u64>(), 16);
        assert!(whole.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn a_small_write_is_read_modify_write_and_a_whole_stripe_is_not() {
        let layout = classic();
        let small = layout.stripe_writes(3, 4);
        assert_eq!(small.len(), 1);
        let plan = layout.plan(&small[0]);
        assert_eq!((plan.reads.len(), plan.writes.len()), (2, 2));
        let full = layout.stripe_writes(8, 16);
        assert_eq!(full.len(), 1);
        assert!(layout.is_full_stripe(&full[0]));
        let plan = layout.plan(&full[0]);
        assert_eq!((plan.reads.len(), plan.writes.len()), (0, 5));
        let straddling = layout.stripe_writes(6, 10);
        assert_eq!(
            straddling.len(),
            2,
            "a write across a stripe boundary updates both"
        );
    }

    #[test]
    fn partial_blocks_round_out() {
        assert_eq!(covering_blocks(0, 512), (0, 1));
        assert_eq!(covering_blocks(3584, 1024), (0, 2));
        assert_eq!(covering_blocks(4096, 4096), (1, 2));
    }
}
