//! What the disks of a lab wafer array hold.
//!
//! The lab runs the engine on stamps (`wafer_core::Stamps`): every block is
//! one 64-bit stamp and its 64-byte trailer. The engine reads back what it
//! wrote: it verifies every file block it reads against its trailer, and it
//! folds the old stamps of blocks into parity, checking them against what it
//! last wrote there. So the lab keeps every block exactly, compactly: one
//! 32-byte record per block of every disk, at a fixed place (disk after
//! disk), in a [`Spill`] the driver supplies.
//!
//! - A record is the block's stamp, then its trailer in the compact form of
//!   `compact`, which is exact; the rare trailer that does not fit stays
//!   whole in a map beside the records. The compact form leaves out the
//!   pvbn, which follows from where the record lies: each disk's
//!   [`ContentDisk::first_pvbn`].
//! - A block's stamp and trailer sit side by side in 32 bytes, so reading a
//!   block back costs one cache line, never two, where a page's memory
//!   starts on a line (mimalloc, the `wafer` binary's allocator, places
//!   blocks this large on 4 KiB boundaries): under a random load every read
//!   finds its record cold, and a cold line is what a read costs.
//! - The spill is memory for small arrays; for the `wafer lab` command,
//!   memory while its budget lasts and then a sparse file on the host's disk
//!   (the lab itself does no I/O). Its pages are allocated as they are first
//!   written, and the write allocator fills areas in order, so the pages it
//!   touches are full.
//! - A read's records are hinted at when its disk starts it
//!   ([`Spill::prefetch`]), so that, cold as they are, they have arrived
//!   when the read completes.
//! - A block never written reads as stamp 0 with an all-zero trailer, as a
//!   real disk's unwritten block reads as zeros.

use std::collections::BTreeMap;
use std::io;
use std::ops::Range;

use wafer_core::Stamps;
use wafer_core::filer::Sector;
use wafer_core::format::TRAILER_SIZE;
use wafer_core::units::Pvbn;
use wafer_raid::Stamp;

use super::compact::{COMPACT_SIZE, Compact, compact, expand, kept_elsewhere};

/// Bytes of a stamp in a record.
const STAMP_SIZE: usize = 8;
/// Bytes of one block's record: its stamp, then its compact trailer.
pub const RECORD_SIZE: usize = STAMP_SIZE + COMPACT_SIZE;
/// Records moved to or from the spill at a time, through a buffer on the
/// stack: a read or write of a block chain costs no allocation of its own.
const CHUNK_RECORDS: usize = 32;
/// Bytes of [`CHUNK_RECORDS`] records.
const CHUNK_BYTES: usize = CHUNK_RECORDS * RECORD_SIZE;
/// Bytes of one spill page: the unit a spill keeps in memory, and the
/// size of a huge page. Every read of a record first finds its page in the
/// spill's table, so the table should stay in the CPU's cache: at E1's
/// scale (23 GB of records addressed, a sixth of them written) pages this
/// large make it some 11,000 entries, where 64 KiB pages made it 350,000,
/// too many to stay cached (measured side by side on a 100 GiB test file:
/// 1.04x in the run phase). The allocator fills areas in order, so few
/// pages are left part empty: at E1's scale they cost some 300 MB of its
/// peak (6.04 GB against 5.74 GB with 64 KiB pages).
pub const PAGE_BYTES: u64 = 1 << 21;

/// Where the trailers go: bytes kept at fixed offsets.
pub trait Spill: Send {
    /// Keeps `bytes` at `at`.
    fn write_at(&mut self, at: u64, bytes: &[u8]) -> io::Result<()>;
    /// Fills `out` with the bytes kept from `at` on: zeros where none were.
    fn read_at(&self, at: u64, out: &mut [u8]) -> io::Result<()>;
    /// Hints that the `len` bytes from `at` on will be read soon.
    fn prefetch(&self, _at: u64, _len: usize) {}
}

/// A spill in memory, in pages allocated as they are written: for arrays
/// whose runs are small.
#[derive(Debug, Default)]
pub struct MemorySpill(BTreeMap<u64, Box<[u8]>>);

/// The run of a byte range that falls in one page of a spill.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PagePiece {
    /// The page, counted from 0.
    pub page: u64,
    /// Where the run starts in the page.
    pub within: usize,
    /// Where the run starts in the caller's buffer.
    pub offset: usize,
    /// Its length in bytes.
    pub len: usize,
}

impl PagePiece {
    /// The run's bytes in the page.
    pub fn in_page(&self) -> Range<usize> {
        self.within..self.within + self.len
    }

    /// The run's bytes in the caller's buffer.
    pub fn in_buffer(&self) -> Range<usize> {
        self.offset..self.offset + self.len
    }

    /// Where the run starts in the spill.
    pub fn position(&self) -> u64 {
        self.page * PAGE_BYTES + self.within as u64
    }
}

/// The runs of `[at, at + len)` in each page of [`PAGE_BYTES`], in order.
pub fn page_pieces(at: u64, len: usize) -> impl Iterator<Item = PagePiece> {
    let end = at + len as u64;
    let mut from = at;
    core::iter::from_fn(move || {
        (from < end).then(|| {
            let page = from / PAGE_BYTES;
            let to = end.min((page + 1) * PAGE_BYTES);
            let piece = PagePiece {
                page,
                within: (from % PAGE_BYTES) as usize,
                offset: (from - at) as usize,
                len: (to - from) as usize,
            };
            from = to;
            piece
        })
    })
}

impl Spill for MemorySpill {
    fn write_at(&mut self, at: u64, bytes: &[u8]) -> io::Result<()> {
        for piece in page_pieces(at, bytes.len()) {
            let kept = self
                .0
                .entry(piece.page)
                .or_insert_with(|| vec![0; PAGE_BYTES as usize].into_boxed_slice());
            kept[piece.in_page()].copy_from_slice(&bytes[piece.in_buffer()]);
        }
        Ok(())
    }

    fn read_at(&self, at: u64, out: &mut [u8]) -> io::Result<()> {
        for piece in page_pieces(at, out.len()) {
            let into = &mut out[piece.in_buffer()];
            match self.0.get(&piece.page) {
                Some(kept) => into.copy_from_slice(&kept[piece.in_page()]),
                None => into.fill(0),
            }
        }
        Ok(())
    }
}

/// One disk, as its content sees it.
#[derive(Clone, Copy, Debug)]
pub(super) struct ContentDisk {
    /// Its size in blocks.
    pub blocks: u64,
    /// The pvbn of its block 0, for a data disk; the pvbns of its other
    /// blocks follow in order. A parity or spare disk's blocks are taken to
    /// say pvbn 0, as parity blocks do; a trailer that says otherwise is
    /// kept whole.
    pub first_pvbn: Option<Pvbn>,
}

/// The content of every disk of one array.
pub(super) struct Content {
    /// Where each disk's first record lies in the spill.
    record_base: Vec<u64>,
    /// Each disk's pvbn of block 0, if it has one.
    first_pvbn: Vec<Option<Pvbn>>,
    spill: Box<dyn Spill>,
    /// The trailers too large for the compact form, by disk and block.
    whole: BTreeMap<(usize, u64), [u8; TRAILER_SIZE]>,
}

impl Content {
    /// `disks`, never written, their records to go to `spill`.
    pub(super) fn new(disks: &[ContentDisk], spill: Box<dyn Spill>) -> Content {
        let record_base = disks
            .iter()
            .scan(0, |base, disk| {
                let at = *base;
                *base += disk.blocks * RECORD_SIZE as u64;
                Some(at)
            })
            .collect();
        Content {
            record_base,
            first_pvbn: disks.iter().map(|disk| disk.first_pvbn).collect(),
            spill,
            whole: BTreeMap::new(),
        }
    }

    /// Keeps `sectors`, written from `dbn` on `disk`.
    pub(super) fn write(&mut self, disk: usize, dbn: u64, sectors: &[Sector<Stamps>]) {
        let mut records = [0; CHUNK_BYTES];
        for (first, chunk) in (dbn..)
            .step_by(CHUNK_RECORDS)
            .zip(sectors.chunks(CHUNK_RECORDS))
        {
            let records = &mut records[..chunk.len() * RECORD_SIZE];
            for ((n, sector), record) in (first..)
                .zip(chunk)
                .zip(records.chunks_exact_mut(RECORD_SIZE))
            {
                let kept = compact(&sector.trailer, self.pvbn(disk, n));
                if kept_elsewhere(&kept) {
                    self.whole.insert((disk, n), sector.trailer);
                } else if !self.whole.is_empty() {
                    self.whole.remove(&(disk, n));
                }
                let (stamp, compact) = record.split_at_mut(STAMP_SIZE);
                stamp.copy_from_slice(&sector.data.0.to_le_bytes());
                compact.copy_from_slice(&kept);
            }
            let at = self.record_at(disk, first);
            self.spill
                .write_at(at, records)
                .unwrap_or_else(|e| panic!("the lab cannot keep disk {disk}'s blocks: {e}"));
        }
    }

    /// What `count` blocks from `dbn` on `disk` hold.
    pub(super) fn read(&self, disk: usize, dbn: u64, count: u32) -> Vec<Option<Sector<Stamps>>> {
        let mut out = Vec::with_capacity(count as usize);
        let mut records = [0; CHUNK_BYTES];
        let end = dbn + u64::from(count);
        for first in (dbn..end).step_by(CHUNK_RECORDS) {
            let blocks = (end - first).min(CHUNK_RECORDS as u64) as usize;
            let records = &mut records[..blocks * RECORD_SIZE];
            self.spill
                .read_at(self.record_at(disk, first), records)
                .unwrap_or_else(|e| panic!("the lab cannot read back disk {disk}'s blocks: {e}"));
            out.extend(
                records
                    .chunks_exact(RECORD_SIZE)
                    .zip(first..)
                    .map(|(record, n)| Some(self.sector(disk, n, record))),
            );
        }
        out
    }

    /// Hints that `count` blocks from `dbn` on `disk` will be read soon.
    pub(super) fn prefetch(&self, disk: usize, dbn: u64, count: u32) {
        self.spill
            .prefetch(self.record_at(disk, dbn), count as usize * RECORD_SIZE);
    }

    /// The sector block `n` of `disk` holds, from its record.
    fn sector(&self, disk: usize, n: u64, record: &[u8]) -> Sector<Stamps> {
        let (stamp, kept) = record.split_at(STAMP_SIZE);
        let kept = kept.try_into().expect("a compact trailer");
        let trailer = match expand(kept, self.pvbn(disk, n)) {
            Compact::Zeros => [0; TRAILER_SIZE],
            Compact::Trailer(trailer) => trailer,
            Compact::Elsewhere => self.whole[&(disk, n)],
        };
        Sector {
            data: Stamp(u64::from_le_bytes(stamp.try_into().expect("a stamp"))),
            trailer,
        }
    }

    /// The pvbn block `n` of `disk` is written with: its own for a data
    /// disk, 0 for the rest.
    fn pvbn(&self, disk: usize, n: u64) -> Pvbn {
        self.first_pvbn[disk].map_or(Pvbn(0), |first| Pvbn(first.0 + n))
    }

    fn record_at(&self, disk: usize, dbn: u64) -> u64 {
        self.record_base[disk] + dbn * RECORD_SIZE as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Disks of `blocks[i]` blocks each, with no pvbns of their own.
    fn disks(blocks: &[u64]) -> Vec<ContentDisk> {
        blocks
            .iter()
            .map(|&blocks| ContentDisk {
                blocks,
                first_pvbn: None,
            })
            .collect()
    }

    fn sector(stamp: u64, tag: u8) -> Sector<Stamps> {
        let mut trailer = [0; TRAILER_SIZE];
        trailer[0] = tag;
        trailer[TRAILER_SIZE - 1] = tag;
        Sector {
            data: Stamp(stamp),
            trailer,
        }
    }

    #[test]
    fn blocks_read_back_as_written_and_unwritten_ones_as_zeros() {
        let mut content = Content::new(&disks(&[100, 20_000]), Box::new(MemorySpill::default()));
        content.write(1, 10, &[sector(0, 1), sector(7, 2), sector(0, 3)]);
        content.write(1, 11, &[sector(9, 4)]);
        // Two records either side of the spill's first page boundary.
        let straddling = (PAGE_BYTES - content.record_at(1, 0)).div_ceil(RECORD_SIZE as u64) - 1;
        let at = content.record_at(1, straddling);
        assert!(at < PAGE_BYTES && PAGE_BYTES < at + 2 * RECORD_SIZE as u64);
        let (wide, widest) = (0x0123_4567_89ab_cdef, u64::MAX);
        content.write(1, straddling, &[sector(wide, 5), sector(widest, 6)]);
        let read = content.read(1, 9, 4);
        let expected = [sector(0, 0), sector(0, 1), sector(9, 4), sector(0, 3)];
        for (got, want) in read.iter().zip(&expected) {
            assert_eq!(got.as_ref(), Some(want));
        }
        let across = content.read(1, straddling, 2);
        assert_eq!(across[0].as_ref(), Some(&sector(wide, 5)));
        assert_eq!(across[1].as_ref(), Some(&sector(widest, 6)));
        assert_eq!(content.read(0, 10, 1)[0].as_ref(), Some(&sector(0, 0)));
        assert_eq!(content.read(0, 99, 1)[0].as_ref(), Some(&sector(0, 0)));
    }

    #[test]
    fn wafer_trailers_are_kept_compact_and_others_whole() {
        let identity = wafer_core::format::Identity {
            pvbn: wafer_core::units::Pvbn(12),
            vvbn: wafer_core::units::Vvbn(34),
            volume: wafer_core::units::VolumeId(0),
            file: wafer_core::units::FileId(64),
            fbn: wafer_core::units::Fbn(56),
            level: 0,
            cp: wafer_core::units::CpCount(9),
        };
        let wafer = Sector {
            data: Stamp(3),
            trailer: wafer_core::format::Trailer::new(7, identity).encode(),
        };
        // Block 5 of disk 0 is pvbn 12; disk 1 has no pvbns.
        let data_disk = ContentDisk {
            blocks: 100,
            first_pvbn: Some(wafer_core::units::Pvbn(7)),
        };
        let mut content = Content::new(
            &[data_disk, disks(&[100])[0]],
            Box::new(MemorySpill::default()),
        );
        content.write(0, 5, &[wafer.clone(), sector(1, 1)]);
        assert_eq!(content.whole.len(), 1, "only the foreign trailer is whole");
        content.write(0, 6, &[sector(0, 0)]);
        assert!(
            content.whole.is_empty(),
            "an overwrite drops the whole copy"
        );
        content.write(1, 5, std::slice::from_ref(&wafer));
        assert_eq!(content.whole.len(), 1, "a pvbn not where it lies is whole");
        assert_eq!(
            content.read(0, 5, 2),
            vec![Some(wafer.clone()), Some(sector(0, 0))]
        );
        assert_eq!(content.read(1, 5, 1), vec![Some(wafer)]);
    }

    #[test]
    fn chains_longer_than_a_chunk_read_back_whole() {
        let mut content = Content::new(&disks(&[500, 500]), Box::new(MemorySpill::default()));
        let long = CHUNK_RECORDS as u64 * 2 + 5;
        let chain: Vec<_> = (0..long).map(|n| sector(n + 1, n as u8)).collect();
        content.write(1, 7, &chain);
        let read = content.read(1, 6, long as u32 + 2);
        assert_eq!(read.len(), chain.len() + 2);
        assert_eq!(read[0].as_ref(), Some(&sector(0, 0)), "before the chain");
        for (got, want) in read[1..].iter().zip(&chain) {
            assert_eq!(got.as_ref(), Some(want));
        }
        assert_eq!(
            read[long as usize + 1].as_ref(),
            Some(&sector(0, 0)),
            "after it"
        );
        assert_eq!(
            content.read(0, 7, 1)[0].as_ref(),
            Some(&sector(0, 0)),
            "disk 0 untouched"
        );
    }

    #[test]
    fn disks_keep_their_trailers_apart() {
        let mut content = Content::new(&disks(&[3, 3]), Box::new(MemorySpill::default()));
        content.write(0, 2, &[sector(1, 1)]);
        content.write(1, 0, &[sector(2, 2)]);
        assert_eq!(content.read(0, 2, 1)[0].as_ref(), Some(&sector(1, 1)));
        assert_eq!(content.read(1, 0, 1)[0].as_ref(), Some(&sector(2, 2)));
    }

    #[test]
    fn the_memory_spill_reads_zeros_where_nothing_was_written() {
        let mut spill = MemorySpill::default();
        spill.write_at(PAGE_BYTES - 2, &[1, 2, 3, 4]).unwrap();
        let mut out = [9; 6];
        spill.read_at(PAGE_BYTES - 3, &mut out).unwrap();
        assert_eq!(out, [0, 1, 2, 3, 4, 0]);
    }
}
