//! What the filer last wrote to every disk block: the checksum of the content
//! and the checksum of the trailer.
//!
//! A partial-stripe write reads blocks it does not itself rewrite: old parity
//! and the old content of the blocks it replaces (subtraction), or the untouched
//! blocks of the stripe (addition). If one of those came back stale (a lost
//! write) or rotten, folding it into new parity would make the damage permanent
//! and spread it to every block of the stripe. So the filer remembers, for each
//! block it writes, the checksum of the content (`Payload::checksum`), and checks
//! every block a parity computation reads, or a reconstruction rebuilds, against
//! it. After a mount only what the block pointers record is known; subtraction,
//! which needs old parity and old free blocks, is then used only where every
//! block it reads is known.
//!
//! Content alone cannot tell a block whose last write was lost when that write
//! carried the same content under a new identity: a CP torn by a crash wrote
//! the block as one file's, and the redo after replay wrote the same content
//! there as another's, or in another CP. The disk then holds the right content
//! and consistent parity under a stale trailer, which every read through the
//! pointer refuses (`Trailer::verify`) but a scrub comparing content would
//! pass. So the filer remembers the trailer's own checksum too
//! (`Trailer::sum`, which covers the content's checksum and the whole identity):
//! a block read back is what the filer last wrote only if both agree. A mount
//! derives the trailer of every block a pointer reaches from the pointer and
//! its place in the tree, so what it learns is as strict as what a write
//! teaches. The two checksums cost 8 bytes a block, and a bit for whether they
//! are known.

use crate::aggregate::{Layout, Slot};
use crate::bitmap::Bitmap;
use crate::format::Trailer;
use crate::units::DiskId;

/// The checksums of what was last written to a block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct LastWrite {
    /// Of the content (`Payload::checksum`).
    pub(super) content: u32,
    /// Of the trailer (`Trailer::sum`): the content's checksum and the
    /// identity together.
    pub(super) trailer: u32,
}

impl LastWrite {
    /// Whether content summing to `content` under `trailer` is this write: the
    /// trailer must be intact for that content, and the one written.
    pub(super) fn is(&self, content: u32, trailer: &Trailer) -> bool {
        self.content == content && trailer.sum() == self.trailer && trailer.matches(content)
    }

    fn packed(self) -> u64 {
        u64::from(self.content) | u64::from(self.trailer) << 32
    }

    fn unpacked(word: u64) -> LastWrite {
        LastWrite {
            content: word as u32,
            trailer: (word >> 32) as u32,
        }
    }
}

/// The last writes, per disk and block.
#[derive(Clone, Debug)]
pub(super) struct WrittenSums {
    /// [`LastWrite::packed`]: one word a block, so that a disk's worth comes
    /// zeroed from the allocator.
    sums: Vec<Vec<u64>>,
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

    /// Notes what was written to (`disk`, `dbn`), or what a block pointer
    /// says is there.
    pub(super) fn learn(&mut self, disk: DiskId, dbn: u64, write: LastWrite) {
        let d = disk.0 as usize;
        self.sums[d][dbn as usize] = write.packed();
        self.known[d].set(dbn);
    }

    /// Whether what was last written to (`disk`, `dbn`) is known.
    pub(super) fn is_known(&self, disk: DiskId, dbn: u64) -> bool {
        self.known[disk.0 as usize].get(dbn)
    }

    /// What was last written to (`disk`, `dbn`), where known.
    pub(super) fn last_write(&self, disk: DiskId, dbn: u64) -> Option<LastWrite> {
        self.is_known(disk, dbn)
            .then(|| LastWrite::unpacked(self.sums[disk.0 as usize][dbn as usize]))
    }

    /// Whether content summing to `checksum` is what was last written to
    /// (`disk`, `dbn`), trailer aside (a reconstruction has none); `None`
    /// when that is not known.
    pub(super) fn matches(&self, disk: DiskId, dbn: u64, checksum: u32) -> Option<bool> {
        self.last_write(disk, dbn).map(|w| w.content == checksum)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{AGGREGATE_VOLUME, Identity};
    use crate::units::{CpCount, Fbn, FileId, Pvbn, Vvbn};

    fn trailer(content: u32, file: u32, cp: u64) -> Trailer {
        let identity = Identity {
            pvbn: Pvbn(40),
            vvbn: Vvbn(7),
            volume: AGGREGATE_VOLUME,
            file: FileId(file),
            fbn: Fbn(3),
            level: 0,
            cp: CpCount(cp),
        };
        Trailer::new(content, identity)
    }

    #[test]
    fn a_last_write_is_its_content_under_its_own_trailer() {
        let written = trailer(0xabcd, 1026, 24);
        let last = LastWrite {
            content: 0xabcd,
            trailer: written.sum(),
        };
        assert_eq!(LastWrite::unpacked(last.packed()), last);
        assert!(last.is(0xabcd, &written));
        assert!(!last.is(0xabce, &written), "other content");
        assert!(
            !last.is(0xabcd, &trailer(0xabcd, 1025, 24)),
            "the same content, another file's"
        );
        assert!(
            !last.is(0xabcd, &trailer(0xabcd, 1026, 12)),
            "the same content, an older CP's"
        );
    }
}
