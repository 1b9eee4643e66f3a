//! Where a lab wafer array keeps its disks' blocks: memory while a budget
//! lasts, then a temporary file.
//!
//! The lab keeps each block's stamp and trailer, a 32-byte record, at a fixed
//! place (see the lab's `wafer::content`): at E1's scale some three and a
//! half gigabytes, written in pages as the write allocator reaches new areas.
//! Reading one back is a lookup in memory but a system call from a file, and
//! the engine reads a record with every block it reads. So each page stays
//! in memory if the run's [`MemoryBudget`] (shared by every array of the run)
//! still has room for it when the page is first written, and otherwise lives
//! in an unlinked, sparse temporary file for good, gone when the run ends
//! however it ends. Where a page lives changes nothing but speed: the bytes
//! read back are the same.
//!
//! A record read back is almost always cold, and the lab knows which it
//! will be milliseconds (of virtual time) ahead: when a disk starts the
//! read. Then the spill is asked to [`prefetch`](Spill::prefetch) it, and a
//! page in memory starts loading its lines, so that the read finds them.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use wafer_lab::wafer::{PAGE_BYTES, Spill, page_pieces};

/// Memory the spills of one run may take for pages, shared between them: the
/// first pages written get it.
#[derive(Debug)]
pub struct MemoryBudget {
    pages_left: AtomicU64,
}

impl MemoryBudget {
    /// A budget of `bytes` (rounded down to whole pages).
    pub fn new(bytes: u64) -> Arc<MemoryBudget> {
        Arc::new(MemoryBudget {
            pages_left: AtomicU64::new(bytes / PAGE_BYTES),
        })
    }

    /// Half the memory the system says is available now (`MemAvailable` in
    /// `/proc/meminfo`): room for records that leaves the rest of the
    /// machine alone. Nothing where the figure cannot be read.
    pub fn half_of_available() -> Arc<MemoryBudget> {
        let available_kib = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|text| {
                text.lines()
                    .find_map(|line| line.strip_prefix("MemAvailable:"))
                    .and_then(|rest| {
                        rest.trim()
                            .trim_end_matches("kB")
                            .trim()
                            .parse::<u64>()
                            .ok()
                    })
            })
            .unwrap_or(0);
        MemoryBudget::new(available_kib * 1024 / 2)
    }

    /// Takes one page of the budget, if any is left.
    fn take_page(&self) -> bool {
        self.pages_left
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| {
                left.checked_sub(1)
            })
            .is_ok()
    }
}

/// Bytes of a CPU cache line: the unit a prefetch hint loads.
const CACHE_LINE: usize = 64;

/// Where one page lives, from its first write on.
#[derive(Debug)]
enum Page {
    Unwritten,
    Memory(Box<[u8]>),
    File,
}

/// A spill in memory pages while its budget lasts, the rest in a file.
pub struct FileSpill {
    pages: Vec<Page>,
    budget: Arc<MemoryBudget>,
    file: File,
}

impl FileSpill {
    /// A new, empty spill drawing on `budget`, its file in the system's
    /// temporary directory.
    pub fn new(budget: Arc<MemoryBudget>) -> io::Result<FileSpill> {
        Ok(FileSpill {
            pages: Vec::new(),
            budget,
            file: tempfile::tempfile()?,
        })
    }

    /// Where `page` lives, placing it on its first write.
    fn place(&mut self, page: usize) -> &mut Page {
        if page >= self.pages.len() {
            self.pages.resize_with(page + 1, || Page::Unwritten);
        }
        if matches!(self.pages[page], Page::Unwritten) {
            self.pages[page] = match self.budget.take_page() {
                true => Page::Memory(vec![0; PAGE_BYTES as usize].into_boxed_slice()),
                false => Page::File,
            };
        }
        &mut self.pages[page]
    }

    /// Fills `out` from the file at `position`; zeros past its end, where
    /// nothing was written.
    fn read_file(&self, out: &mut [u8], position: u64) -> io::Result<()> {
        let mut done = 0;
        while done < out.len() {
            match self.file.read_at(&mut out[done..], position + done as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        out[done..].fill(0);
        Ok(())
    }

    fn file_error(e: io::Error, what: &str) -> io::Error {
        io::Error::new(
            e.kind(),
            format!(
                "the spill file in {} cannot {what}: {e}",
                std::env::temp_dir().display()
            ),
        )
    }
}

impl Spill for FileSpill {
    fn write_at(&mut self, at: u64, bytes: &[u8]) -> io::Result<()> {
        for piece in page_pieces(at, bytes.len()) {
            let from = &bytes[piece.in_buffer()];
            match self.place(piece.page as usize) {
                Page::Memory(kept) => kept[piece.in_page()].copy_from_slice(from),
                Page::File => {
                    self.file
                        .write_all_at(from, piece.position())
                        .map_err(|e| Self::file_error(e, "take more trailers"))?;
                }
                Page::Unwritten => unreachable!("placed"),
            }
        }
        Ok(())
    }

    fn read_at(&self, at: u64, out: &mut [u8]) -> io::Result<()> {
        for piece in page_pieces(at, out.len()) {
            let into = &mut out[piece.in_buffer()];
            match self
                .pages
                .get(piece.page as usize)
                .unwrap_or(&Page::Unwritten)
            {
                Page::Unwritten => into.fill(0),
                Page::Memory(kept) => into.copy_from_slice(&kept[piece.in_page()]),
                Page::File => self
                    .read_file(into, piece.position())
                    .map_err(|e| Self::file_error(e, "give back its trailers"))?,
            }
        }
        Ok(())
    }

    fn prefetch(&self, at: u64, len: usize) {
        for piece in page_pieces(at, len) {
            if let Some(Page::Memory(kept)) = self.pages.get(piece.page as usize) {
                let end = piece.within + piece.len;
                for line in
                    (piece.within / CACHE_LINE..end.div_ceil(CACHE_LINE)).map(|l| l * CACHE_LINE)
                {
                    prefetch_index::prefetch_index(&kept[..], line);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(budget_pages: u64) {
        let budget = MemoryBudget::new(budget_pages * PAGE_BYTES);
        let mut spill = FileSpill::new(budget).unwrap();
        spill.write_at(3 * PAGE_BYTES - 3, b"trailer").unwrap();
        spill.write_at(3, b"abc").unwrap();
        let mut out = [9; 9];
        spill.read_at(3 * PAGE_BYTES - 4, &mut out).unwrap();
        assert_eq!(&out, b"\0trailer\0", "budget of {budget_pages} pages");
        let mut head = [9; 7];
        spill.read_at(0, &mut head).unwrap();
        assert_eq!(&head, b"\0\0\0abc\0");
        let mut tail = [9; 4];
        spill.read_at(3 * PAGE_BYTES + 4, &mut tail).unwrap(); // past the file's end
        assert_eq!(tail, [0; 4]);
        let mut beyond = [9; 4];
        spill.read_at(40 * PAGE_BYTES, &mut beyond).unwrap();
        assert_eq!(beyond, [0; 4]);
    }

    #[test]
    fn what_is_written_reads_back_and_the_rest_reads_as_zeros_wherever_it_lives() {
        round_trip(0); // all in the file
        round_trip(1); // the first page written in memory, the rest in the file
        round_trip(100); // all in memory
    }

    #[test]
    fn a_prefetch_anywhere_changes_nothing() {
        let budget = MemoryBudget::new(PAGE_BYTES);
        let mut spill = FileSpill::new(budget).unwrap();
        spill.write_at(PAGE_BYTES - 2, b"span").unwrap(); // memory, then file
        for (at, len) in [
            (0, 1),
            (PAGE_BYTES - 70, 140),
            (5 * PAGE_BYTES, 9),
            (u64::MAX / 2, 64),
        ] {
            spill.prefetch(at, len);
        }
        let mut out = [0; 6];
        spill.read_at(PAGE_BYTES - 3, &mut out).unwrap();
        assert_eq!(&out, b"\0span\0");
    }

    #[test]
    fn the_budget_is_shared_and_the_first_pages_written_take_it() {
        let budget = MemoryBudget::new(2 * PAGE_BYTES);
        let mut first = FileSpill::new(Arc::clone(&budget)).unwrap();
        let mut second = FileSpill::new(Arc::clone(&budget)).unwrap();
        first.write_at(0, &[1]).unwrap();
        second.write_at(5 * PAGE_BYTES, &[2]).unwrap();
        first.write_at(PAGE_BYTES, &[3]).unwrap();
        assert!(matches!(first.pages[0], Page::Memory(_)));
        assert!(matches!(second.pages[5], Page::Memory(_)));
        assert!(matches!(first.pages[1], Page::File));
        let mut out = [0; 1];
        first.read_at(PAGE_BYTES, &mut out).unwrap();
        assert_eq!(out, [3]);
    }
}
