//! The file a lab wafer array keeps its disks' metadata and parity blocks in.
//!
//! At E1's scale a random-write run leaves tens of gigabytes of superseded
//! metadata behind, still part of their stripes' parity (see the lab's
//! `wafer::content`), so the lab hands them to an unlinked temporary file on
//! the host's disk, gone when the run ends however it ends.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

use wafer_lab::wafer::Spill;

/// An unlinked temporary file, appended to.
pub struct FileSpill {
    file: File,
    end: u64,
}

impl FileSpill {
    /// A new, empty file in the system's temporary directory.
    pub fn new() -> io::Result<FileSpill> {
        Ok(FileSpill {
            file: tempfile::tempfile()?,
            end: 0,
        })
    }
}

impl Spill for FileSpill {
    fn append(&mut self, bytes: &[u8]) -> io::Result<u64> {
        let at = self.end;
        self.file.write_all_at(bytes, at).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!(
                    "the spill file in {} cannot grow past {at} bytes: {e}",
                    std::env::temp_dir().display()
                ),
            )
        })?;
        self.end += bytes.len() as u64;
        Ok(at)
    }

    fn read_at(&self, at: u64, out: &mut [u8]) -> io::Result<()> {
        self.file.read_exact_at(out, at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_appended_reads_back_where_append_said() {
        let mut spill = FileSpill::new().unwrap();
        let first = spill.append(b"parity").unwrap();
        let second = spill.append(b"metadata").unwrap();
        assert_eq!((first, second), (0, 6));
        let mut out = [0; 8];
        spill.read_at(second, &mut out).unwrap();
        assert_eq!(&out, b"metadata");
        assert!(spill.read_at(10, &mut out).is_err(), "past the end");
    }
}
