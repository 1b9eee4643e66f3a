//! The checksum of what the filer last wrote to every disk block.
//!
//! A partial-stripe write reads blocks it does not itself rewrite: old parity
//! and the old content of the blocks it replaces (subtraction), or the untouched
//! blocks of the stripe (addition). If one of those came back stale (a lost
//! write) or rotten, folding it into new parity would make the damage permanent
//! and spread it to every block of the stripe. So the filer remembers, for each
//! block it writes, the checksum of the content (`Payload::checksum`), and checks every block a parity
//! computation reads against it. After a mount only what the block pointers
//! record is known; subtraction, which needs old parity and old free blocks, is
//! then used only where every block it reads is known.

use crate::aggregate::{Layout, Slot};
use crate::bitmap::Bitmap;
use crate::units::DiskId;

/// Expected content checksums, per disk and block.
#[derive(Clone, Debug)]
pub(super) struct WrittenSums {
    sums: Vec<Vec<u32>>,
    known: Vec<Bitmap>,
}

impl WrittenSums {
    /// Nothing known yet.
    pub(super) fn new(layout: &Layout) -> WrittenSums {
        let mut sums = WrittenSums {
            sums: Vec::new(),
            known: Vec::new(),
        };
        sums.grow(layout);
        sums
    }

    /// Room for the disks of `layout`, which extends the layout so far
    /// (disks were added): what is known of the disks already members stays.
    pub(super) fn grow(&mut self, layout: &Layout) {
        for id in 0..layout.disk_count() {
            let blocks = match layout.slot(DiskId(id)) {
                Some(Slot::Member { group, .. }) => layout.groups()[group].blocks_per_disk(),
                _ => 0,
            };
            let d = id as usize;
            if d >= self.sums.len() {
                self.sums.push(Vec::new());
                self.known.push(Bitmap::new(0));
            }
            if self.sums[d].is_empty() && blocks > 0 {
                // Zeroed pages straight from the allocator: a full disk's
                // sums are hundreds of MB, which writing zeros would touch.
                self.sums[d] = vec![0; blocks as usize];
                self.known[d] = Bitmap::new(blocks);
            } else if (self.sums[d].len() as u64) < blocks {
                self.sums[d].resize(blocks as usize, 0);
                self.known[d].grow(blocks);
            }
        }
    }

    /// Notes the checksum of what was written to (`disk`, `dbn`), or of what
    /// a block pointer records there.
    pub(super) fn learn(&mut self, disk: DiskId, dbn: u64, checksum: u32) {
        let d = disk.0 as usize;
        self.sums[d][dbn as usize] = checksum;
        self.known[d].set(dbn);
    }

    /// Whether the checksum of (`disk`, `dbn`) is known.
    pub(super) fn is_known(&self, disk: DiskId, dbn: u64) -> bool {
        self.known[disk.0 as usize].get(dbn)
    }

    /// Whether content summing to `checksum` is what was last written to
    /// (`disk`, `dbn`); `None` when that is not known.
    pub(super) fn matches(&self, disk: DiskId, dbn: u64, checksum: u32) -> Option<bool> {
        self.is_known(disk, dbn)
            .then(|| self.sums[disk.0 as usize][dbn as usize] == checksum)
    }
}
