//! File-backed disks: each disk slot is a file of 4160-byte sectors, served by
//! two threads.
//!
//! Sector `n` of a disk lies at byte `n * 4160` of its file: 4096 bytes of
//! content, then the 64-byte trailer. Files are sparse, so a sector never
//! written reads as zeros, which is what the engine expects of a blank disk.
//!
//! The **I/O thread** performs the slot's reads and writes in the order the
//! engine issued them (`pread`/`pwritev`): one thread per disk keeps a read from
//! ever seeing half of a concurrent write. Reads complete at once. Writes go
//! on to the slot's **sync thread**, which takes every write waiting, calls
//! `fdatasync` once, and only then completes them: a write is durable when the
//! engine hears of it, and a batch of a CP's writes costs one sync, while reads
//! keep flowing during it.
//!
//! Failure: a slot whose file was missing or unreadable at start, or that the
//! administrator failed, answers every I/O with `DiskFailed`. A read error
//! reads the sectors one by one, and only those that fail come back as `None`
//! (a latent sector error, which the engine repairs from parity). A write or
//! sync error is either the host's or the disk's. The host's (the file system
//! is full or over quota, read-only, or refuses the file: `chattr +i`, a
//! changed mode) says nothing about the disk: the I/O answers `Unwritable`,
//! the disk stays in service, and the engine goes offline without committing,
//! so that the server stops and, once the host is put right, starts again
//! from the last CP and the NVLog. Any other error fails the disk: the I/O
//! answers `DiskFailed` and the engine is told, so that the failure is
//! recorded in the configuration.

use std::fs::File;
use std::io::{self, IoSlice};
use std::os::unix::fs::FileExt;
use std::sync::Arc;
use std::sync::mpsc::{self, Receiver, Sender};
use std::thread;

use wafer_core::filer::{Io, IoId, IoOp, IoResult, Sector};
use wafer_core::format::TRAILER_SIZE;
use wafer_core::{BLOCK_SIZE, Block};

use crate::config::SECTOR_BYTES;
use crate::events::Event;

/// Writes one sync thread covers with a single `fdatasync`, at most.
const SYNC_BATCH_MAX: usize = 1024;

/// What the engine thread sends a disk's I/O thread.
#[derive(Debug)]
pub(crate) enum DiskCommand {
    /// Perform a read or write.
    Io(Io),
    /// The disk is failed from now on.
    Fail,
}

/// The engine's handle on one disk slot.
#[derive(Debug)]
pub(crate) struct DiskHandle {
    commands: Sender<DiskCommand>,
}

impl DiskHandle {
    /// Starts the threads of disk `name`, backed by `file` (`None`: failed).
    /// The handle serves whichever slot the disk is in: a spare's handle moves
    /// to the slot of the disk it replaces.
    pub(crate) fn spawn(
        name: &str,
        file: Option<File>,
        events: Sender<Event>,
    ) -> io::Result<DiskHandle> {
        let (commands, received) = mpsc::channel();
        let (to_sync, sync_queue) = mpsc::channel();
        let sync_events = events.clone();
        let sync_name = name.to_string();
        thread::Builder::new()
            .name(format!("sync-{name}"))
            .spawn(move || sync_loop(&sync_name, &sync_queue, &sync_events))?;
        let disk = DiskThread {
            name: name.to_string(),
            file: file.map(Arc::new),
            events,
            to_sync,
            refused: false,
        };
        thread::Builder::new()
            .name(format!("disk-{name}"))
            .spawn(move || disk.run(&received))?;
        Ok(DiskHandle { commands })
    }

    /// Queues a command; gives it back if the disk's threads are gone.
    pub(crate) fn send(&self, command: DiskCommand) -> Result<(), DiskCommand> {
        self.commands.send(command).map_err(|e| e.0)
    }
}

/// A write that waits for its sync.
struct Unsynced {
    id: IoId,
    file: Arc<File>,
}

/// The state of one slot's I/O thread.
struct DiskThread {
    name: String,
    file: Option<Arc<File>>,
    events: Sender<Event>,
    to_sync: Sender<Unsynced>,
    /// Whether the host has refused a write yet (said once: the engine goes
    /// offline on the first).
    refused: bool,
}

impl DiskThread {
    fn run(mut self, commands: &Receiver<DiskCommand>) {
        for command in commands {
            match command {
                DiskCommand::Fail => self.file = None,
                DiskCommand::Io(io) => self.perform(io),
            }
        }
    }

    fn perform(&mut self, io: Io) {
        let Some(file) = self.file.clone() else {
            return self.complete(io.id, IoResult::DiskFailed);
        };
        match io.op {
            IoOp::Read { dbn, count, .. } => {
                let sectors = read_sectors(&file, dbn.0, count);
                self.complete(io.id, IoResult::Read(sectors));
            }
            IoOp::Write { dbn, sectors, .. } => {
                match write_sectors(&file, &sectors, dbn.0 * SECTOR_BYTES) {
                    Ok(()) => {
                        // The sync thread outlives this one's sender only if
                        // it panicked, and a panic aborts the server.
                        let _ = self.to_sync.send(Unsynced { id: io.id, file });
                    }
                    Err(error) if is_the_hosts(&error) => {
                        if !self.refused {
                            tracing::error!(
                                "disk {}: the host refused a write: {error}",
                                self.name
                            );
                            self.refused = true;
                        }
                        self.complete(io.id, IoResult::Unwritable);
                    }
                    Err(error) => {
                        self.file = None;
                        self.report_failure(format!("write failed: {error}"));
                        self.complete(io.id, IoResult::DiskFailed);
                    }
                }
            }
            IoOp::NvlogAppend { .. }
            | IoOp::NvlogReset { .. }
            | IoOp::AssignSpare { .. }
            | IoOp::FlashRead { .. }
            | IoOp::FlashWrite { .. } => {
                unreachable!("the engine thread sends disks only reads and writes")
            }
        }
    }

    fn complete(&self, id: IoId, result: IoResult) {
        // The engine outlives the disks while it runs; once it has stopped,
        // nobody waits for the answer.
        let _ = self.events.send(Event::IoDone { id, result });
    }

    fn report_failure(&self, error: String) {
        let disk = self.name.clone();
        let _ = self.events.send(Event::DiskError { disk, error });
    }
}

/// Completes writes in batches after one `fdatasync` per batch (per file: a
/// slot's file does not change while it runs, but the batch does not rely on it).
fn sync_loop(name: &str, queue: &Receiver<Unsynced>, events: &Sender<Event>) {
    while let Ok(first) = queue.recv() {
        let mut batch = vec![first];
        batch.extend(queue.try_iter().take(SYNC_BATCH_MAX - 1));
        let mut outcome = Ok(());
        for (n, write) in batch.iter().enumerate() {
            let seen = batch[..n].iter().any(|w| Arc::ptr_eq(&w.file, &write.file));
            if !seen && outcome.is_ok() {
                outcome = write.file.sync_data();
            }
        }
        let result = match outcome {
            Ok(()) => IoResult::Done,
            Err(error) if is_the_hosts(&error) => {
                tracing::error!("disk {name}: the host refused to sync writes: {error}");
                IoResult::Unwritable
            }
            Err(error) => {
                let error = format!("fdatasync failed: {error}");
                let disk = name.to_string();
                let _ = events.send(Event::DiskError { disk, error });
                IoResult::DiskFailed
            }
        };
        for write in batch {
            let _ = events.send(Event::IoDone {
                id: write.id,
                result: result.clone(),
            });
        }
    }
}

/// Whether a write or sync error is the host's doing rather than the disk's:
/// no room, a quota, a read-only file system, a file it refuses or one past
/// its size limit.
pub(crate) fn is_the_hosts(error: &io::Error) -> bool {
    use io::ErrorKind::{
        FileTooLarge, PermissionDenied, QuotaExceeded, ReadOnlyFilesystem, StorageFull,
    };
    matches!(
        error.kind(),
        StorageFull | QuotaExceeded | ReadOnlyFilesystem | PermissionDenied | FileTooLarge
    )
}

/// Reads `count` sectors from `dbn`; sectors that cannot be read are `None`.
pub(crate) fn read_sectors(file: &File, dbn: u64, count: u32) -> Vec<Option<Sector>> {
    let sector = SECTOR_BYTES as usize;
    let mut bytes = vec![0u8; count as usize * sector];
    if read_at_zero_filled(file, &mut bytes, dbn * SECTOR_BYTES).is_ok() {
        return bytes
            .chunks_exact(sector)
            .map(|s| Some(decode_sector(s)))
            .collect();
    }
    // Something in the chain is unreadable: find out which sectors.
    bytes
        .chunks_exact_mut(sector)
        .zip(dbn..)
        .map(|(buffer, n)| {
            read_at_zero_filled(file, buffer, n * SECTOR_BYTES)
                .ok()
                .map(|()| decode_sector(buffer))
        })
        .collect()
}

/// Fills `buffer` from `offset`; bytes past the end of the file read as zeros.
fn read_at_zero_filled(file: &File, buffer: &mut [u8], offset: u64) -> io::Result<()> {
    let mut done = 0;
    while done < buffer.len() {
        match file.read_at(&mut buffer[done..], offset + done as u64) {
            Ok(0) => {
                buffer[done..].fill(0);
                return Ok(());
            }
            Ok(n) => done += n,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    }
    Ok(())
}

/// One sector image as the engine knows it.
fn decode_sector(bytes: &[u8]) -> Sector {
    let (content, trailer) = bytes.split_at(BLOCK_SIZE);
    let data: Box<Block> = Box::new(content.try_into().expect("a sector holds one block"));
    Sector {
        data,
        trailer: trailer.try_into().expect("a sector holds one trailer"),
    }
}

/// The most buffers one `pwritev` takes (Linux's `IOV_MAX`).
const IOVECS_MAX: usize = 1024;

/// Writes consecutive sector images from `offset` with `pwritev`, straight
/// from the engine's blocks and trailers: a CP's chain of sectors used to be
/// copied into a buffer allocated for it (4160 bytes a block, fresh pages the
/// kernel zeroed first), costing the disk threads CPU the engine thread needs
/// on a small machine.
pub(crate) fn write_sectors(file: &File, sectors: &[Sector], offset: u64) -> io::Result<()> {
    let mut at = offset;
    for chunk in sectors.chunks(IOVECS_MAX / 2) {
        let mut slices = [IoSlice::new(&[]); IOVECS_MAX];
        for (pair, sector) in slices.chunks_exact_mut(2).zip(chunk) {
            pair[0] = IoSlice::new(&sector.data[..]);
            pair[1] = IoSlice::new(&sector.trailer);
        }
        let mut left = &mut slices[..2 * chunk.len()];
        while !left.is_empty() {
            match rustix::io::pwritev(file, left, at) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(written) => {
                    at += written as u64;
                    IoSlice::advance_slices(&mut left, written);
                }
                Err(rustix::io::Errno::INTR) => {}
                Err(error) => return Err(error.into()),
            }
        }
    }
    Ok(())
}

// A sector image is exactly a block and its trailer.
const _: () = assert!(SECTOR_BYTES as usize == BLOCK_SIZE + TRAILER_SIZE);

#[cfg(test)]
mod tests {
    use super::*;

    fn sector(fill: u8) -> Sector {
        Sector {
            data: Box::new([fill; BLOCK_SIZE]),
            trailer: [fill ^ 0xff; TRAILER_SIZE],
        }
    }

    #[test]
    fn sectors_land_at_4160_byte_strides_and_read_back() {
        let dir = tempfile::tempdir().expect("a scratch directory");
        let file = File::create_new(dir.path().join("d")).expect("created");
        file.set_len(8 * SECTOR_BYTES).expect("sized");
        write_sectors(&file, &[sector(7), sector(9)], 3 * SECTOR_BYTES).expect("written");
        let read = read_sectors(&file, 2, 4);
        let blank = Sector {
            data: Box::new([0; BLOCK_SIZE]),
            trailer: [0; TRAILER_SIZE],
        };
        assert_eq!(read[0], Some(blank));
        assert_eq!(read[1], Some(sector(7)));
        assert_eq!(read[2], Some(sector(9)));
        let mut raw = vec![0u8; 1];
        file.read_exact_at(&mut raw, 4 * SECTOR_BYTES)
            .expect("readable");
        assert_eq!(raw[0], 9);
    }

    #[test]
    fn a_chain_longer_than_one_pwritev_takes_lands_whole() {
        let dir = tempfile::tempdir().expect("a scratch directory");
        let file = File::create_new(dir.path().join("d")).expect("created");
        let count = IOVECS_MAX + 3;
        let sectors: Vec<Sector> = (0..count).map(|n| sector(n as u8)).collect();
        write_sectors(&file, &sectors, SECTOR_BYTES).expect("written");
        let length = file.metadata().expect("its metadata").len();
        assert_eq!(length, (count as u64 + 1) * SECTOR_BYTES);
        let read = read_sectors(&file, 1, count as u32);
        let expected: Vec<Option<Sector>> = sectors.into_iter().map(Some).collect();
        assert!(read == expected, "every sector where it belongs");
    }

    #[test]
    fn reads_past_the_end_of_a_short_file_are_zeros() {
        let dir = tempfile::tempdir().expect("a scratch directory");
        let file = File::create_new(dir.path().join("d")).expect("created");
        let read = read_sectors(&file, 5, 2);
        assert!(
            read.iter()
                .all(|s| s.as_ref().is_some_and(|s| s.data.iter().all(|&b| b == 0)))
        );
    }
}
