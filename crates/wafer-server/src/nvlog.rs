//! The NVLog file: the engine's two log halves on a file, group-committed.
//!
//! Half `h` occupies bytes `h * region .. (h + 1) * region` of the file. The
//! engine fills a half up to its configured size, with two exceptions the
//! region leaves room for: one record may overflow an empty half (a 32 MiB NBD
//! write in a 32 MiB half), and a CP appends the list of stripes it is about
//! to write to the half it froze, however full (12 bytes per stripe, at most
//! every stripe of the aggregate; room is left for [`STRIPE_LISTS_MAX`] such
//! lists, more than replay's CPs ever add to one half). The region is rounded
//! up to 4 KiB. The configured part of each half is written with zeros when
//! the file is created, so that appends overwrite allocated blocks and
//! `fdatasync` has no file-system metadata to commit; the overflow room stays
//! sparse.
//!
//! Records go one after another from the start of their half. The engine's
//! decoder reads a half from its start and stops at the first invalid record,
//! so what keeps old records from being read as new ones is that the chain
//! always ends in something invalid:
//!
//! * an append writes the record followed by four zero bytes (a record length
//!   of zero, which no record has), overwritten by the next append;
//! * a reset zeroes the first record header of its half, cutting the old
//!   chain at its start.
//!
//! A crash may tear the last append (the decoder rejects it by its CRC) or
//! persist a record without its terminator; records behind it would be from a
//! reset half, whose CP had committed, and the engine replays only records
//! newer than the committed CP.
//!
//! One thread does all of it, in the order the engine issued: it takes every
//! operation waiting, writes them, calls `fdatasync` once, and completes them
//! in order (the engine requires NVLog operations to complete in issue order).
//! Appends that follow one another in a half are gathered in one buffer, kept
//! from batch to batch, and written with one `pwrite`: a batch of 32 appends
//! costs two system calls, not 33. A write or sync failure stops the server:
//! nothing more may be acknowledged (the thread completes no further operation
//! and tells the engine).
//!
//! The file may lie outside the data directory (`--nvlog`, a faster device);
//! [`NvlogCounters`] count what the thread wrote, for `sysstat`.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::thread;

use wafer_core::filer::{Io, IoOp, IoResult};
use wafer_core::nvlog::NvRecord;

use crate::admin::NvlogCountersStatus;
use crate::config::DataConfig;
use crate::error::ServeError;
use crate::events::Event;

/// The largest record the engine logs: an NBD write of the maximum payload,
/// with generous room for the record and operation headers.
const RECORD_BYTES_MAX: u64 = wafer_nbd::BLOCK_SIZE_MAXIMUM as u64 + 4096;
/// The zero bytes written after every record: a length field of zero.
const TERMINATOR: [u8; 4] = [0; 4];
/// The bytes a reset zeroes at the start of a half: one record header.
const RESET_BYTES: usize = 24;
/// Operations one `fdatasync` covers, at most.
const COMMIT_BATCH_MAX: usize = 1024;
/// Stripe lists a half has room for beyond its configured size.
pub(crate) const STRIPE_LISTS_MAX: u64 = 8;
/// Bytes of a stripe list naming every stripe: record header, tag, 12 bytes each.
fn stripe_list_bytes(stripes: u64) -> u64 {
    24 + 1 + 12 * stripes
}

/// Where the halves lie in the NVLog file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct NvlogLayout {
    /// The engine's size of a half.
    pub(crate) half_bytes: u64,
    /// Bytes of each half's region of the file.
    pub(crate) region_bytes: u64,
}

impl NvlogLayout {
    /// Where the NVLog's halves lie in its file for `config`'s aggregates,
    /// at least: the file may have more room.
    pub(crate) fn of(config: &DataConfig) -> NvlogLayout {
        NvlogLayout::new(config.nvlog_half_bytes, &config.stripes())
    }

    /// The smallest layout for halves of `half_bytes` in a node whose
    /// aggregates have `stripes` stripes each (the sum of an aggregate's
    /// RAID groups' blocks per disk): every aggregate's CP appends its own
    /// stripe list to the node's half.
    pub(crate) fn new(half_bytes: u64, stripes: &[u64]) -> NvlogLayout {
        let lists: u64 = stripes.iter().map(|s| stripe_list_bytes(*s)).sum();
        let overflow = STRIPE_LISTS_MAX * lists + TERMINATOR.len() as u64;
        NvlogLayout {
            half_bytes,
            region_bytes: (half_bytes.max(RECORD_BYTES_MAX) + overflow).next_multiple_of(4096),
        }
    }

    /// Whether halves of this layout hold the stripe lists of aggregates
    /// of `stripes` stripes each.
    pub(crate) fn holds(&self, stripes: &[u64]) -> bool {
        NvlogLayout::new(self.half_bytes, stripes).region_bytes <= self.region_bytes
    }
}

/// Stripes of room a new node's NVLog leaves for aggregates created later,
/// in multiples of its first aggregate's: the file's overflow room is sparse,
/// but each start reads both halves whole into memory.
pub(crate) const NEW_NODE_ROOM: u64 = 4;

/// The layout a new node's NVLog gets: room for [`NEW_NODE_ROOM`] times
/// the stripes of `stripes` (its first aggregate).
pub(crate) fn roomy(half_bytes: u64, stripes: u64) -> NvlogLayout {
    let room: Vec<u64> = (0..NEW_NODE_ROOM).map(|_| stripes).collect();
    NvlogLayout::new(half_bytes, &room)
}

/// Creates the NVLog file: each half's configured part zero-filled, synced.
pub(crate) fn create(path: &Path, layout: NvlogLayout) -> io::Result<()> {
    let file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(crate::access::DATA_FILE_MODE)
        .open(path)?;
    file.set_len(2 * layout.region_bytes)?;
    let zeros = vec![0u8; 1 << 20];
    for half in 0..2 {
        let start = half * layout.region_bytes;
        let mut at = 0;
        while at < layout.half_bytes {
            let length = zeros.len().min((layout.half_bytes - at) as usize);
            file.write_all_at(&zeros[..length], start + at)?;
            at += length as u64;
        }
    }
    file.sync_all()
}

/// Opens the NVLog file and reads both halves, for the mount to replay. The
/// halves' regions are half the file each, at least as large as `needed`
/// (the node's aggregates' stripe lists); the layout found is returned.
pub(crate) fn open(
    path: &Path,
    needed: NvlogLayout,
) -> Result<(File, [Vec<u8>; 2], NvlogLayout), ServeError> {
    let refuse = |reason: String| ServeError::Nvlog {
        path: path.to_path_buf(),
        reason,
    };
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(|e| refuse(format!("cannot open: {e}")))?;
    let length = file
        .metadata()
        .map_err(|e| refuse(format!("cannot stat: {e}")))?
        .len();
    let region = length / 2;
    if length % 8192 != 0 || region < needed.region_bytes {
        return Err(refuse(format!(
            "holds {length} bytes, not two halves of at least {} bytes each, what halves of {} \
             bytes take with this node's aggregates",
            needed.region_bytes, needed.half_bytes
        )));
    }
    let mut halves = [vec![0u8; region as usize], vec![0u8; region as usize]];
    for (half, bytes) in halves.iter_mut().enumerate() {
        file.read_exact_at(bytes, half as u64 * region)
            .map_err(|e| refuse(format!("cannot read half {half}: {e}")))?;
    }
    let layout = NvlogLayout {
        half_bytes: needed.half_bytes,
        region_bytes: region,
    };
    Ok((file, halves, layout))
}

/// Rewrites the NVLog file at `path` with halves of `layout`'s regions,
/// holding `halves` (read from it): a new file beside it, synced, renamed
/// over it, its directory synced. A crash leaves the old file or the new
/// one, and [`open`] reads either. Returns the new file.
pub(crate) fn grow(path: &Path, layout: NvlogLayout, halves: &[Vec<u8>; 2]) -> io::Result<File> {
    let mut temporary = path.as_os_str().to_owned();
    temporary.push(".grow");
    let temporary = std::path::PathBuf::from(temporary);
    let _ = std::fs::remove_file(&temporary);
    create(&temporary, layout)?;
    let write = || -> io::Result<()> {
        let file = OpenOptions::new().write(true).open(&temporary)?;
        for (half, bytes) in halves.iter().enumerate() {
            let end = (valid_end(bytes) as usize + TERMINATOR.len()).min(bytes.len());
            file.write_all_at(&bytes[..end], half as u64 * layout.region_bytes)?;
        }
        file.sync_all()?;
        std::fs::rename(&temporary, path)?;
        if let Some(parent) = path.parent() {
            File::open(parent)?.sync_all()?;
        }
        Ok(())
    };
    if let Err(error) = write() {
        let _ = std::fs::remove_file(&temporary);
        return Err(error);
    }
    OpenOptions::new().read(true).write(true).open(path)
}

/// What the NVLog thread has done since the server started.
#[derive(Debug, Default)]
pub(crate) struct NvlogCounters {
    bytes_written: AtomicU64,
    appends: AtomicU64,
    writes: AtomicU64,
    syncs: AtomicU64,
}

impl NvlogCounters {
    /// The counters now.
    pub(crate) fn status(&self) -> NvlogCountersStatus {
        let get = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        NvlogCountersStatus {
            bytes_written: get(&self.bytes_written),
            appends: get(&self.appends),
            writes: get(&self.writes),
            syncs: get(&self.syncs),
        }
    }

    fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}

/// Starts the NVLog thread; appends continue where each half's valid records end.
pub(crate) fn spawn(
    file: File,
    halves: &[Vec<u8>; 2],
    layout: NvlogLayout,
    events: Sender<Event>,
    counters: Arc<NvlogCounters>,
) -> io::Result<Sender<Io>> {
    let (operations, received) = mpsc::channel();
    let log = NvlogThread {
        file,
        region: layout.region_bytes,
        ends: [valid_end(&halves[0]), valid_end(&halves[1])],
        events,
        counters,
        run: Run::default(),
    };
    thread::Builder::new()
        .name("nvlog".into())
        .spawn(move || log.run(&received))?;
    Ok(operations)
}

/// Where the chain of valid records at the start of `half` ends.
fn valid_end(half: &[u8]) -> u64 {
    let mut at = 0;
    while let Ok((_, length)) = NvRecord::decode(&half[at..]) {
        at += length;
    }
    at as u64
}

/// The NVLog thread's state.
struct NvlogThread {
    file: File,
    region: u64,
    /// Where the next append to each half goes.
    ends: [u64; 2],
    events: Sender<Event>,
    counters: Arc<NvlogCounters>,
    /// Appends gathered for one write.
    run: Run,
}

/// Records that follow one another in a half, not yet written: the bytes
/// of `records` go at `at` in the file, followed by a terminator.
#[derive(Default)]
struct Run {
    half: u8,
    at: u64,
    bytes: Vec<u8>,
    records: u64,
}

impl NvlogThread {
    fn run(mut self, operations: &Receiver<Io>) {
        let mut batch = Vec::new();
        while let Ok(first) = operations.recv() {
            batch.push(first);
            batch.extend(operations.try_iter().take(COMMIT_BATCH_MAX - 1));
            let committed = batch
                .iter()
                .try_for_each(|io| self.write(&io.op))
                .and_then(|()| self.write_run())
                .and_then(|()| self.sync());
            if let Err(error) = committed {
                // Nothing more completes; the engine stops when it reads this.
                let _ = self.events.send(Event::NvlogFailed(error));
                for _ in operations {}
                return;
            }
            for io in batch.drain(..) {
                let done = Event::IoDone {
                    id: io.id,
                    result: IoResult::Done,
                };
                if self.events.send(done).is_err() {
                    return;
                }
            }
        }
    }

    fn write(&mut self, op: &IoOp) -> Result<(), String> {
        match op {
            IoOp::NvlogAppend { half, record } => self.append(*half, record),
            IoOp::NvlogReset { half } => {
                self.write_run()?;
                let start = self.half_start(*half)?;
                self.file
                    .write_all_at(&[0u8; RESET_BYTES], start)
                    .map_err(|e| format!("reset of half {half}: {e}"))?;
                self.count_write(RESET_BYTES);
                self.ends[usize::from(*half)] = 0;
                Ok(())
            }
            IoOp::Read { .. }
            | IoOp::Write { .. }
            | IoOp::AssignSpare { .. }
            | IoOp::FlashRead { .. }
            | IoOp::FlashWrite { .. } => {
                unreachable!("the engine thread sends the NVLog only its own operations")
            }
        }
    }

    /// Adds a record to the run, which is first written if it lies
    /// elsewhere; the record is encoded straight into the run's buffer.
    fn append(&mut self, half: u8, record: &NvRecord) -> Result<(), String> {
        let start = self.half_start(half)?;
        let end = self.ends[usize::from(half)];
        let length = record.encoded_len() as u64;
        let new_end = end + length;
        if new_end > self.region {
            return Err(format!(
                "a record of {length} bytes does not fit half {half} at {end} of {}",
                self.region
            ));
        }
        let follows =
            self.run.half == half && self.run.at + self.run.bytes.len() as u64 == start + end;
        if self.run.records > 0 && !follows {
            self.write_run()?;
        }
        if self.run.records == 0 {
            self.run.half = half;
            self.run.at = start + end;
        }
        record.encode_into(&mut self.run.bytes);
        self.run.records += 1;
        self.ends[usize::from(half)] = new_end;
        Ok(())
    }

    /// Writes the run and its terminator (where the region has room for it).
    fn write_run(&mut self) -> Result<(), String> {
        if self.run.records == 0 {
            return Ok(());
        }
        let half = self.run.half;
        let end = self.run.at + self.run.bytes.len() as u64;
        let region_end = self.half_start(half)? + self.region;
        let room = (region_end - end).min(TERMINATOR.len() as u64) as usize;
        self.run.bytes.extend_from_slice(&TERMINATOR[..room]);
        self.file
            .write_all_at(&self.run.bytes, self.run.at)
            .map_err(|e| format!("append to half {half}: {e}"))?;
        NvlogCounters::add(&self.counters.appends, self.run.records);
        self.count_write(self.run.bytes.len());
        self.run.bytes.clear();
        self.run.records = 0;
        Ok(())
    }

    fn sync(&self) -> Result<(), String> {
        self.file
            .sync_data()
            .map_err(|e| format!("fdatasync: {e}"))?;
        NvlogCounters::add(&self.counters.syncs, 1);
        Ok(())
    }

    fn count_write(&self, bytes: usize) {
        NvlogCounters::add(&self.counters.writes, 1);
        NvlogCounters::add(&self.counters.bytes_written, bytes as u64);
    }

    fn half_start(&self, half: u8) -> Result<u64, String> {
        match half {
            0 | 1 => Ok(u64::from(half) * self.region),
            _ => Err(format!("the engine named NVLog half {half}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wafer_core::filer::IoId;
    use wafer_core::nvlog::{Change, LoggedOp, LunId, decode_half};
    use wafer_core::units::{CpCount, FileId, VolumeId};

    const LAYOUT: NvlogLayout = NvlogLayout {
        half_bytes: 1 << 20,
        region_bytes: 40 << 20,
    };

    fn record(seq: u64, length: usize) -> NvRecord {
        let lun = LunId {
            volume: VolumeId(1),
            file: FileId(64),
        };
        let data = vec![seq as u8; length];
        let op = LoggedOp::Change(Change::Write {
            lun,
            offset: 0,
            data,
        });
        NvRecord {
            seq,
            generation: CpCount(1),
            aggregate: wafer_core::units::AggrId(0),
            op,
        }
    }

    fn run(path: &Path, ops: Vec<IoOp>) -> NvlogCountersStatus {
        let (file, halves, _) = open(path, LAYOUT).expect("opens");
        let (events, completions) = mpsc::channel();
        let counters = Arc::<NvlogCounters>::default();
        let log = spawn(file, &halves, LAYOUT, events, Arc::clone(&counters)).expect("spawned");
        let count = ops.len();
        for (n, op) in ops.into_iter().enumerate() {
            log.send(Io {
                id: IoId(n as u64),
                op,
            })
            .expect("queued");
        }
        for n in 0..count {
            match completions.recv().expect("a completion") {
                Event::IoDone { id, result } => {
                    assert_eq!((id, result), (IoId(n as u64), IoResult::Done));
                }
                _ => panic!("only completions"),
            }
        }
        counters.status()
    }

    fn append(half: u8, record: NvRecord) -> IoOp {
        IoOp::NvlogAppend { half, record }
    }

    #[test]
    fn appends_survive_a_reopen_and_continue_where_the_chain_ends() {
        let dir = tempfile::tempdir().expect("a scratch directory");
        let path = dir.path().join("nvlog");
        create(&path, LAYOUT).expect("created");
        run(
            &path,
            vec![append(0, record(1, 100)), append(1, record(2, 50))],
        );
        let counted = run(&path, vec![append(0, record(3, 10))]);
        let bytes = record(3, 10).encode().len() as u64 + 4;
        assert_eq!((counted.appends, counted.bytes_written), (1, bytes));
        assert_eq!((counted.writes, counted.syncs), (1, 1));
        let (_, halves, _) = open(&path, LAYOUT).expect("opens");
        let seqs: Vec<u64> = decode_half(&halves[0]).iter().map(|r| r.seq).collect();
        assert_eq!(seqs, [1, 3]);
        assert_eq!(decode_half(&halves[1]).len(), 1);
    }

    #[test]
    fn a_reset_hides_old_records_even_when_new_ones_end_on_their_boundary() {
        let dir = tempfile::tempdir().expect("a scratch directory");
        let path = dir.path().join("nvlog");
        create(&path, LAYOUT).expect("created");
        run(
            &path,
            vec![append(0, record(1, 100)), append(0, record(2, 100))],
        );
        // After a reset, one record exactly as long as the old first one: the
        // old second record would follow it if the chain were not terminated.
        let reset = IoOp::NvlogReset { half: 0 };
        run(&path, vec![reset, append(0, record(5, 100))]);
        let (_, halves, _) = open(&path, LAYOUT).expect("opens");
        let seqs: Vec<u64> = decode_half(&halves[0]).iter().map(|r| r.seq).collect();
        assert_eq!(seqs, [5]);
    }

    #[test]
    fn appends_to_both_halves_and_a_reset_between_them_keep_their_order() {
        let dir = tempfile::tempdir().expect("a scratch directory");
        let path = dir.path().join("nvlog");
        create(&path, LAYOUT).expect("created");
        let ops = vec![
            append(0, record(1, 4096)),
            append(0, record(2, 4096)),
            append(1, record(3, 100)),
            append(0, record(4, 4096)),
            IoOp::NvlogReset { half: 1 },
            append(1, record(5, 200)),
        ];
        let counted = run(&path, ops);
        assert_eq!(counted.appends, 5);
        assert!(counted.syncs >= 1 && counted.writes >= counted.syncs);
        let (_, halves, _) = open(&path, LAYOUT).expect("opens");
        let seqs = |half: &[u8]| -> Vec<u64> { decode_half(half).iter().map(|r| r.seq).collect() };
        assert_eq!(seqs(&halves[0]), [1, 2, 4]);
        assert_eq!(seqs(&halves[1]), [5]);
    }

    #[test]
    fn regions_leave_room_for_a_maximal_write_and_stripe_lists() {
        let layout = NvlogLayout::new(32 << 20, &[1000]);
        assert!(layout.region_bytes >= RECORD_BYTES_MAX + STRIPE_LISTS_MAX * 12_000);
        assert_eq!(layout.region_bytes % 4096, 0);
        let big = NvlogLayout::new(64 << 20, &[0]);
        assert!(big.region_bytes >= 64 << 20 && big.region_bytes < (64 << 20) + 8192);
    }

    #[test]
    fn a_grown_log_keeps_its_records_at_its_halves_new_places() {
        let dir = tempfile::tempdir().expect("a scratch directory");
        let path = dir.path().join("nvlog");
        let small = NvlogLayout::new(1 << 20, &[100]);
        create(&path, small).expect("created");
        let bytes = record(1, 4096).encode();
        let file = OpenOptions::new().write(true).open(&path).expect("opens");
        file.write_all_at(&bytes, small.region_bytes)
            .expect("written");
        drop(file);
        let (_, halves, found) = open(&path, small).expect("opens");
        assert_eq!(found, small);
        let big = NvlogLayout::new(1 << 20, &[100, 100_000, 100_000]);
        assert!(big.region_bytes > small.region_bytes && big.holds(&[100, 100_000]));
        assert!(!small.holds(&[100, 100]));
        grow(&path, big, &halves).expect("grown");
        let (_, halves, found) = open(&path, small).expect("opens");
        assert_eq!(found, big, "the region is half the file");
        assert_eq!(valid_end(&halves[0]), 0);
        assert_eq!(valid_end(&halves[1]), bytes.len() as u64);
        assert!(!dir.path().join("nvlog.grow").exists());
    }

    #[test]
    fn a_file_of_the_wrong_size_is_refused() {
        let dir = tempfile::tempdir().expect("a scratch directory");
        let path = dir.path().join("nvlog");
        std::fs::write(&path, b"short").expect("written");
        let error = open(&path, LAYOUT).unwrap_err().to_string();
        assert!(error.contains("holds 5 bytes"), "{error}");
        let missing = open(&dir.path().join("absent"), LAYOUT)
            .unwrap_err()
            .to_string();
        assert!(missing.contains("cannot open"), "{missing}");
    }
}
