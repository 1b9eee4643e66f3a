//! What the disks of a lab wafer array hold.
//!
//! The engine reads back what it wrote: it verifies every block it reads for a
//! file, and it folds the old content of blocks into parity, checking that
//! content against the checksum of what it last wrote there. So the lab keeps
//! every block's content, exactly, but compactly:
//!
//! - Every host write is zeros, so most blocks are an all-zero data block and
//!   its trailer: only the 64-byte trailer is kept, in memory.
//! - Metadata and parity blocks are kept whole, lz4-compressed, in a [`Spill`]:
//!   memory for small arrays, a file on the host's disk for the `wafer lab`
//!   command (the lab itself does no I/O). A random-write run leaves about a
//!   metadata block per host write behind: superseded, but still part of its
//!   stripe's parity, and at E1's scale far more than memory holds.
//! - A zero block the engine has freed is forgotten: it reads back as never
//!   written (zeros), which is what the engine remembers writing there. Freed
//!   blocks are swept whenever the map has doubled since the last sweep, so
//!   memory follows what the file system holds, not what the run has written.

use std::collections::BTreeMap;
use std::io;

use wafer_core::BLOCK_SIZE;
use wafer_core::filer::Sector;
use wafer_core::format::TRAILER_SIZE;

/// Bytes of a block with its trailer, as the spill file keeps it.
const SECTOR_BYTES: usize = BLOCK_SIZE + TRAILER_SIZE;
/// Entries the maps may reach before the first sweep for freed blocks.
const FIRST_SWEEP_ENTRIES: u64 = 1 << 20;

/// A block as the array's disks keep it.
#[derive(Clone, Copy, Debug)]
enum Stored {
    /// All-zero content: only the trailer.
    Zero([u8; TRAILER_SIZE]),
    /// Anything else: `bytes` of lz4 at `at` in the spill file.
    Spilled { at: u64, bytes: u32 },
}

/// Where the whole blocks go: an append-only store of byte strings.
pub trait Spill: Send {
    /// Keeps `bytes`; returns where they start.
    fn append(&mut self, bytes: &[u8]) -> io::Result<u64>;
    /// Fills `out` with the bytes kept from `at` on.
    fn read_at(&self, at: u64, out: &mut [u8]) -> io::Result<()>;
}

/// A spill in memory, for arrays small enough.
#[derive(Debug, Default)]
pub struct MemorySpill(Vec<u8>);

impl Spill for MemorySpill {
    fn append(&mut self, bytes: &[u8]) -> io::Result<u64> {
        let at = self.0.len() as u64;
        self.0.extend_from_slice(bytes);
        Ok(at)
    }

    fn read_at(&self, at: u64, out: &mut [u8]) -> io::Result<()> {
        let start = at as usize;
        let kept = self.0.get(start..start + out.len());
        out.copy_from_slice(kept.ok_or(io::ErrorKind::UnexpectedEof)?);
        Ok(())
    }
}

/// The content of every disk of one array.
pub(super) struct Content {
    disks: Vec<BTreeMap<u64, Stored>>,
    spill: Box<dyn Spill>,
    sweep_at: u64,
}

impl Content {
    /// `disks` disks, never written, their whole blocks to go to `spill`.
    pub(super) fn new(disks: usize, spill: Box<dyn Spill>) -> Content {
        Content {
            disks: vec![BTreeMap::new(); disks],
            spill,
            sweep_at: FIRST_SWEEP_ENTRIES,
        }
    }

    /// Keeps `sectors`, written from `dbn` on `disk`.
    pub(super) fn write(&mut self, disk: usize, dbn: u64, sectors: &[Sector]) {
        for (n, sector) in sectors.iter().enumerate() {
            let stored = match sector.data[..] == [0; BLOCK_SIZE][..] {
                true => Stored::Zero(sector.trailer),
                false => self.spill(sector),
            };
            self.disks[disk].insert(dbn + n as u64, stored);
        }
    }

    /// What `count` blocks from `dbn` on `disk` hold.
    pub(super) fn read(&self, disk: usize, dbn: u64, count: u32) -> Vec<Option<Sector>> {
        (dbn..dbn + u64::from(count))
            .map(|n| Some(self.sector(self.disks[disk].get(&n))))
            .collect()
    }

    /// Whether the maps have grown enough since the last sweep to sweep again.
    pub(super) fn wants_sweep(&self) -> bool {
        self.entries() >= self.sweep_at
    }

    /// Forgets the zero blocks `is_free` says nothing holds; returns how many.
    pub(super) fn sweep(&mut self, is_free: impl Fn(usize, u64) -> bool) -> u64 {
        let before = self.entries();
        for (disk, blocks) in self.disks.iter_mut().enumerate() {
            blocks.retain(|&dbn, stored| {
                matches!(stored, Stored::Spilled { .. }) || !is_free(disk, dbn)
            });
        }
        let after = self.entries();
        self.sweep_at = (2 * after).max(FIRST_SWEEP_ENTRIES);
        before - after
    }

    /// Blocks kept, over all disks.
    fn entries(&self) -> u64 {
        self.disks.iter().map(|blocks| blocks.len() as u64).sum()
    }

    fn spill(&mut self, sector: &Sector) -> Stored {
        let mut raw = Vec::with_capacity(SECTOR_BYTES);
        raw.extend_from_slice(&sector.data[..]);
        raw.extend_from_slice(&sector.trailer);
        let packed = lz4_flex::compress(&raw);
        let at = self
            .spill
            .append(&packed)
            .unwrap_or_else(|e| panic!("the lab cannot keep a disk block: {e}"));
        Stored::Spilled {
            at,
            bytes: packed.len() as u32,
        }
    }

    fn sector(&self, stored: Option<&Stored>) -> Sector {
        match stored {
            // A block never written (or freed as zeros) reads as zeros, trailer too.
            None => zero_sector([0; TRAILER_SIZE]),
            Some(Stored::Zero(trailer)) => zero_sector(*trailer),
            Some(&Stored::Spilled { at, bytes }) => self.unspill(at, bytes),
        }
    }

    fn unspill(&self, at: u64, bytes: u32) -> Sector {
        let mut packed = vec![0; bytes as usize];
        self.spill.read_at(at, &mut packed).unwrap_or_else(|e| {
            panic!("the lab cannot read back the disk block it kept at {at}: {e}")
        });
        let raw = lz4_flex::decompress(&packed, SECTOR_BYTES)
            .expect("the spill file holds what the lab wrote");
        let mut sector = zero_sector([0; TRAILER_SIZE]);
        sector.data.copy_from_slice(&raw[..BLOCK_SIZE]);
        sector.trailer.copy_from_slice(&raw[BLOCK_SIZE..]);
        sector
    }
}

fn zero_sector(trailer: [u8; TRAILER_SIZE]) -> Sector {
    Sector {
        data: Box::new([0; BLOCK_SIZE]),
        trailer,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sector(fill: u8, tag: u8) -> Sector {
        let mut trailer = [0; TRAILER_SIZE];
        trailer[0] = tag;
        Sector {
            data: Box::new([fill; BLOCK_SIZE]),
            trailer,
        }
    }

    #[test]
    fn blocks_read_back_as_written_whether_zero_or_spilled() {
        let mut content = Content::new(2, Box::new(MemorySpill::default()));
        content.write(1, 10, &[sector(0, 1), sector(7, 2), sector(0, 3)]);
        content.write(1, 11, &[sector(9, 4)]);
        let read = content.read(1, 9, 4);
        let expected = [sector(0, 0), sector(0, 1), sector(9, 4), sector(0, 3)];
        for (got, want) in read.iter().zip(&expected) {
            assert_eq!(got.as_ref(), Some(want));
        }
        assert_eq!(content.read(0, 10, 1)[0].as_ref(), Some(&sector(0, 0)));
    }

    #[test]
    fn a_sweep_forgets_only_free_zero_blocks() {
        let mut content = Content::new(1, Box::new(MemorySpill::default()));
        content.write(0, 0, &[sector(0, 1), sector(0, 2), sector(5, 3)]);
        // Blocks 0 and 2 are free; 2 is not zeros, so parity still needs it.
        let forgotten = content.sweep(|_, dbn| dbn != 1);
        assert_eq!(forgotten, 1);
        let read = content.read(0, 0, 3);
        assert_eq!(read[0].as_ref(), Some(&sector(0, 0)));
        assert_eq!(read[1].as_ref(), Some(&sector(0, 2)));
        assert_eq!(read[2].as_ref(), Some(&sector(5, 3)));
    }

    #[test]
    fn the_maps_are_swept_each_time_they_double() {
        let mut content = Content::new(1, Box::new(MemorySpill::default()));
        let zero = [sector(0, 1)];
        for dbn in 0..FIRST_SWEEP_ENTRIES - 1 {
            content.write(0, dbn, &zero);
        }
        content.write(0, 0, &zero);
        assert!(!content.wants_sweep(), "a rewrite adds no entry");
        content.write(0, FIRST_SWEEP_ENTRIES, &[sector(0, 1)]);
        assert!(content.wants_sweep());
        content.sweep(|_, _| false);
        assert!(!content.wants_sweep());
    }
}
