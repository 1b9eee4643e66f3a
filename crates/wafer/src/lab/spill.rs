//! The file a lab wafer array keeps its disks' trailers in.
//!
//! The lab keeps each block's 64-byte trailer at a fixed place (see the lab's
//! `wafer::content`): at E1's scale some ten gigabytes, more than memory
//! should hold. So the lab hands them to an unlinked temporary file on the
//! host's disk, sparse (only what is written takes space) and gone when the
//! run ends however it ends.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

use wafer_lab::wafer::Spill;

/// An unlinked, sparse temporary file.
pub struct FileSpill {
    file: File,
}

impl FileSpill {
    /// A new, empty file in the system's temporary directory.
    pub fn new() -> io::Result<FileSpill> {
        Ok(FileSpill {
            file: tempfile::tempfile()?,
        })
    }
}

impl Spill for FileSpill {
    fn write_at(&mut self, at: u64, bytes: &[u8]) -> io::Result<()> {
        self.file.write_all_at(bytes, at).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!(
                    "the spill file in {} cannot take {} bytes at {at}: {e}",
                    std::env::temp_dir().display(),
                    bytes.len()
                ),
            )
        })
    }

    fn read_at(&self, at: u64, out: &mut [u8]) -> io::Result<()> {
        let mut done = 0;
        while done < out.len() {
            match self.file.read_at(&mut out[done..], at + done as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        out[done..].fill(0); // past the end: never written
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_written_reads_back_and_the_rest_reads_as_zeros() {
        let mut spill = FileSpill::new().unwrap();
        spill.write_at(1 << 20, b"trailer").unwrap();
        spill.write_at(3, b"abc").unwrap();
        let mut out = [9; 9];
        spill.read_at((1 << 20) - 1, &mut out).unwrap();
        assert_eq!(&out, b"\0trailer\0");
        let mut head = [9; 7];
        spill.read_at(0, &mut head).unwrap();
        assert_eq!(&head, b"\0\0\0abc\0");
    }
}
