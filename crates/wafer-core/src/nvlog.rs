//! The NVLog: the operation log that makes a write durable before any CP.
//!
//! NVRAM is split in two halves. Modifying operations are appended to the
//! active half and acknowledged once the driver reports the append durable. A
//! consistency point *freezes* the active half (its operations are exactly the
//! ones the CP's in-memory state contains) and logging moves to the other half;
//! when the CP's superblock is on disk the frozen half is released. If the other
//! half fills while a CP is still running, new operations wait for it: the
//! back-to-back CP, the latency cliff of a write-saturated filer.
//!
//! Each record carries the CP *generation* that will contain it (the CP number
//! its half will commit as) and a global sequence number. Recovery replays, in
//! sequence order, the records whose generation is newer than the superblock.
//! A record is framed by its length and a CRC-32C, so a torn append at the tail
//! is recognised and dropped, never replayed.

use crate::format::{FormatError, LunAttributes, NAME_MAX, get_u32, get_u64, put_u32, put_u64};
use crate::schedule::{SnapKind, SnapSchedule};
use crate::units::{AggrId, CpCount, FileId, VolumeId};

/// How a volume's blocks age in the buffer cache (ONTAP's FlexShare `cache=`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CachePolicy {
    /// Blocks are unlikely to be read again (streaming, backups): evicted first.
    Reuse,
    /// Normal aging.
    #[default]
    Default,
    /// Blocks stay longer: evicted only after every other volume's.
    Keep,
}

/// A LUN: a file in a volume.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LunId {
    /// The volume holding the LUN.
    pub volume: VolumeId,
    /// The LUN's inode number in that volume.
    pub file: FileId,
}

/// A change a host asks for: logged before it is acknowledged, replayed
/// after a crash.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// Bytes written to a LUN.
    Write {
        /// The LUN.
        lun: LunId,
        /// Byte offset.
        offset: u64,
        /// The bytes.
        data: Vec<u8>,
    },
    /// A range of a LUN deallocated (reads as zeros).
    Trim {
        /// The LUN.
        lun: LunId,
        /// Byte offset.
        offset: u64,
        /// Bytes.
        length: u64,
    },
    /// A flexible volume created.
    CreateVolume {
        /// Its name.
        name: String,
        /// Its size in bytes.
        size_bytes: u64,
    },
    /// A LUN created.
    CreateLun {
        /// The volume.
        volume: VolumeId,
        /// Its name.
        name: String,
        /// Its size in bytes.
        size_bytes: u64,
        /// Its space reservation and OS type.
        attributes: LunAttributes,
    },
    /// A LUN's size changed.
    ResizeLun {
        /// The LUN.
        lun: LunId,
        /// The new size in bytes.
        size_bytes: u64,
    },
    /// A LUN destroyed.
    DestroyLun {
        /// The LUN.
        lun: LunId,
    },
    /// A volume's buffer-cache policy set.
    SetCachePolicy {
        /// The volume.
        volume: VolumeId,
        /// The policy.
        policy: CachePolicy,
    },
    /// A volume's `read_realloc` option set: sequential reads of blocks that
    /// are not largely contiguous rewrite them in the next CP.
    SetReadRealloc {
        /// The volume.
        volume: VolumeId,
        /// Whether the option is on.
        enabled: bool,
    },
    /// A snapshot of a volume taken (by the CP after this change).
    CreateSnapshot {
        /// The volume.
        volume: VolumeId,
        /// The snapshot's name.
        name: String,
    },
    /// A snapshot deleted: the blocks only it held become free.
    DeleteSnapshot {
        /// The volume.
        volume: VolumeId,
        /// The snapshot's name.
        name: String,
    },
    /// A LUN, or a whole volume, put back as a snapshot holds it.
    RestoreSnapshot {
        /// The volume.
        volume: VolumeId,
        /// The snapshot's name.
        name: String,
        /// The LUN to restore (its inode number), or `None` for every LUN.
        lun: Option<FileId>,
    },
    /// A volume's snapshot reserve set, in percent of its size.
    SetSnapReserve {
        /// The volume.
        volume: VolumeId,
        /// The percentage.
        percent: u8,
    },
    /// A volume brought online (`vol online`) or taken offline (`vol
    /// offline`): an offline volume's LUNs serve no I/O.
    SetVolumeOnline {
        /// The volume.
        volume: VolumeId,
        /// Whether it serves.
        online: bool,
    },
    /// A volume's size changed (`vol size`).
    ResizeVolume {
        /// The volume.
        volume: VolumeId,
        /// Its new size in bytes.
        size_bytes: u64,
    },
    /// An offline volume destroyed (`vol destroy`): the next CP that can
    /// frees every block it and its snapshots hold.
    DestroyVolume {
        /// The volume.
        volume: VolumeId,
    },
    /// A volume's snapshot schedule set (`snap sched`).
    SetSnapSchedule {
        /// The volume.
        volume: VolumeId,
        /// The schedule.
        schedule: SnapSchedule,
    },
    /// A scheduled snapshot taken, its kind's older ones rotated: `kind.N`
    /// for every `N >= keep - 1` deleted, `kind.N` renamed `kind.N+1` for
    /// the rest, the new one named `kind.0` (by the CP after this change).
    ScheduledSnapshot {
        /// The volume.
        volume: VolumeId,
        /// Weekly, nightly or hourly.
        kind: SnapKind,
        /// How many of its kind the volume keeps, the new one included.
        keep: u8,
    },
}

/// What an NVLog record holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LoggedOp {
    /// A host's change.
    Change(Change),
    /// Not a host operation: the stripes a CP is about to write, as
    /// `(RAID group, stripe)`. If that CP never commits, mounting makes their
    /// parity consistent again (the RAID write hole).
    DirtyStripes {
        /// The stripes.
        stripes: Vec<(u32, u64)>,
    },
}

impl Change {
    /// The volume the change is to, if it names one.
    pub fn volume(&self) -> Option<VolumeId> {
        match self {
            Change::Write { lun, .. }
            | Change::Trim { lun, .. }
            | Change::ResizeLun { lun, .. }
            | Change::DestroyLun { lun } => Some(lun.volume),
            Change::CreateVolume { .. } => None,
            Change::CreateLun { volume, .. }
            | Change::SetCachePolicy { volume, .. }
            | Change::SetReadRealloc { volume, .. }
            | Change::CreateSnapshot { volume, .. }
            | Change::DeleteSnapshot { volume, .. }
            | Change::RestoreSnapshot { volume, .. }
            | Change::SetSnapReserve { volume, .. }
            | Change::SetVolumeOnline { volume, .. }
            | Change::ResizeVolume { volume, .. }
            | Change::SetSnapSchedule { volume, .. }
            | Change::ScheduledSnapshot { volume, .. }
            | Change::DestroyVolume { volume } => Some(*volume),
        }
    }

    /// The volume the change is to, if it names one (a new volume's does not
    /// exist yet): a node rewrites it between its ids and an aggregate's.
    pub fn volume_mut(&mut self) -> Option<&mut VolumeId> {
        match self {
            Change::Write { lun, .. }
            | Change::Trim { lun, .. }
            | Change::ResizeLun { lun, .. }
            | Change::DestroyLun { lun } => Some(&mut lun.volume),
            Change::CreateVolume { .. } => None,
            Change::CreateLun { volume, .. }
            | Change::SetCachePolicy { volume, .. }
            | Change::SetReadRealloc { volume, .. }
            | Change::CreateSnapshot { volume, .. }
            | Change::DeleteSnapshot { volume, .. }
            | Change::RestoreSnapshot { volume, .. }
            | Change::SetSnapReserve { volume, .. }
            | Change::SetVolumeOnline { volume, .. }
            | Change::ResizeVolume { volume, .. }
            | Change::SetSnapSchedule { volume, .. }
            | Change::ScheduledSnapshot { volume, .. }
            | Change::DestroyVolume { volume } => Some(volume),
        }
    }
}

/// One log record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NvRecord {
    /// Position in the global order of operations.
    pub seq: u64,
    /// The CP that will contain the operation, in its aggregate's count.
    pub generation: CpCount,
    /// The aggregate whose change it is: a node's aggregates share one log,
    /// and each replays its own records only.
    pub aggregate: AggrId,
    /// The operation.
    pub op: LoggedOp,
}

const HEADER: usize = 28;

/// Where an operation's bytes go: into a record, or only counted.
trait ByteSink {
    fn put(&mut self, bytes: &[u8]);
}

impl ByteSink for Vec<u8> {
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

/// Counts the bytes an encoding would write.
struct ByteCount(usize);

impl ByteSink for ByteCount {
    fn put(&mut self, bytes: &[u8]) {
        self.0 += bytes.len();
    }
}

/// A LUN as a record names it: volume, then file.
fn put_lun(out: &mut impl ByteSink, lun: &LunId) {
    out.put(&lun.volume.0.to_le_bytes());
    out.put(&lun.file.0.to_le_bytes());
}

impl NvRecord {
    /// Encodes the record with its length and checksum, in one buffer of
    /// its exact size: a write's data, most of the bytes the log carries, is
    /// copied once.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.encoded_len());
        self.encode_into(&mut out);
        out
    }

    /// Appends the encoded record to `out`, as [`NvRecord::encode`] would
    /// return it: a driver that gathers records into one write copies a
    /// write's data once, straight into its buffer, and allocates nothing
    /// per record.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.resize(start + HEADER, 0);
        self.encode_op(out);
        let record = &mut out[start..];
        let length = record.len() as u32;
        put_u32(record, 0, length);
        put_u64(record, 8, self.seq);
        put_u64(record, 16, self.generation.0);
        put_u32(record, 24, self.aggregate.0);
        let crc = crc32c::crc32c_append(crc32c::crc32c(&record[..4]), &record[8..]);
        put_u32(record, 4, crc);
    }

    /// The length of [`NvRecord::encode`]'s bytes, without encoding them.
    pub fn encoded_len(&self) -> usize {
        let mut counted = ByteCount(HEADER);
        self.encode_op(&mut counted);
        counted.0
    }

    /// The operation's bytes, which follow the header.
    fn encode_op(&self, out: &mut impl ByteSink) {
        match &self.op {
            LoggedOp::Change(Change::Write {
                lun: l,
                offset,
                data,
            }) => {
                out.put(&[1]);
                put_lun(out, l);
                out.put(&offset.to_le_bytes());
                out.put(data);
            }
            LoggedOp::Change(Change::Trim {
                lun: l,
                offset,
                length,
            }) => {
                out.put(&[2]);
                put_lun(out, l);
                out.put(&offset.to_le_bytes());
                out.put(&length.to_le_bytes());
            }
            LoggedOp::Change(Change::CreateVolume { name, size_bytes }) => {
                out.put(&[3]);
                out.put(&size_bytes.to_le_bytes());
                out.put(name.as_bytes());
            }
            LoggedOp::Change(Change::CreateLun {
                volume,
                name,
                size_bytes,
                attributes,
            }) => {
                out.put(&[19]);
                out.put(&volume.0.to_le_bytes());
                out.put(&size_bytes.to_le_bytes());
                out.put(&attributes.encode());
                out.put(name.as_bytes());
            }
            LoggedOp::Change(Change::ResizeLun { lun: l, size_bytes }) => {
                out.put(&[5]);
                put_lun(out, l);
                out.put(&size_bytes.to_le_bytes());
            }
            LoggedOp::Change(Change::DestroyLun { lun: l }) => {
                out.put(&[6]);
                put_lun(out, l);
            }
            LoggedOp::Change(Change::SetCachePolicy { volume, policy }) => {
                out.put(&[8]);
                out.put(&volume.0.to_le_bytes());
                out.put(&[policy_code(*policy)]);
            }
            LoggedOp::Change(Change::SetReadRealloc { volume, enabled }) => {
                out.put(&[9]);
                out.put(&volume.0.to_le_bytes());
                out.put(&[u8::from(*enabled)]);
            }
            LoggedOp::Change(Change::CreateSnapshot { volume, name }) => {
                out.put(&[10]);
                out.put(&volume.0.to_le_bytes());
                out.put(name.as_bytes());
            }
            LoggedOp::Change(Change::DeleteSnapshot { volume, name }) => {
                out.put(&[11]);
                out.put(&volume.0.to_le_bytes());
                out.put(name.as_bytes());
            }
            LoggedOp::Change(Change::RestoreSnapshot { volume, name, lun }) => {
                out.put(&[12]);
                out.put(&volume.0.to_le_bytes());
                out.put(&lun.map_or(0, |f| f.0).to_le_bytes());
                out.put(name.as_bytes());
            }
            LoggedOp::Change(Change::SetSnapReserve { volume, percent }) => {
                out.put(&[13]);
                out.put(&volume.0.to_le_bytes());
                out.put(&[*percent]);
            }
            LoggedOp::Change(Change::SetVolumeOnline { volume, online }) => {
                out.put(&[14]);
                out.put(&volume.0.to_le_bytes());
                out.put(&[u8::from(*online)]);
            }
            LoggedOp::Change(Change::ResizeVolume { volume, size_bytes }) => {
                out.put(&[16]);
                out.put(&volume.0.to_le_bytes());
                out.put(&size_bytes.to_le_bytes());
            }
            LoggedOp::Change(Change::DestroyVolume { volume }) => {
                out.put(&[15]);
                out.put(&volume.0.to_le_bytes());
            }
            LoggedOp::Change(Change::SetSnapSchedule { volume, schedule }) => {
                out.put(&[17]);
                out.put(&volume.0.to_le_bytes());
                out.put(&schedule.encode());
            }
            LoggedOp::Change(Change::ScheduledSnapshot { volume, kind, keep }) => {
                out.put(&[18]);
                out.put(&volume.0.to_le_bytes());
                out.put(&[kind.code(), *keep]);
            }
            LoggedOp::DirtyStripes { stripes } => {
                out.put(&[7]);
                for (group, dbn) in stripes {
                    out.put(&group.to_le_bytes());
                    out.put(&dbn.to_le_bytes());
                }
            }
        }
    }

    /// Decodes the record at the start of `bytes`, returning it and its length.
    pub fn decode(bytes: &[u8]) -> Result<(NvRecord, usize), FormatError> {
        let corrupt = |detail: &str| FormatError::Corrupt {
            what: "NVLog record",
            detail: detail.to_string(),
        };
        if bytes.len() < HEADER {
            return Err(corrupt("truncated header"));
        }
        let length = get_u32(bytes, 0) as usize;
        if length <= HEADER || length > bytes.len() {
            return Err(corrupt("bad length"));
        }
        let record = &bytes[..length];
        if crc32c::crc32c_append(crc32c::crc32c(&record[..4]), &record[8..]) != get_u32(record, 4) {
            return Err(FormatError::Checksum);
        }
        let body = &record[HEADER..];
        let op = decode_op(body).ok_or_else(|| corrupt("malformed operation"))?;
        let record = NvRecord {
            seq: get_u64(record, 8),
            generation: CpCount(get_u64(record, 16)),
            aggregate: AggrId(get_u32(record, 24)),
            op,
        };
        Ok((record, length))
    }
}

fn decode_op(body: &[u8]) -> Option<LoggedOp> {
    let (&tag, rest) = body.split_first()?;
    let u32_at = |at: usize| rest.get(at..at + 4).map(|_| get_u32(rest, at));
    let u64_at = |at: usize| rest.get(at..at + 8).map(|_| get_u64(rest, at));
    let lun = || {
        Some(LunId {
            volume: VolumeId(u32_at(0)?),
            file: FileId(u32_at(4)?),
        })
    };
    let name_at = |at: usize| {
        let bytes = rest.get(at..)?;
        (bytes.len() <= NAME_MAX).then(|| core::str::from_utf8(bytes).ok().map(str::to_string))?
    };
    Some(match tag {
        1 => LoggedOp::Change(Change::Write {
            lun: lun()?,
            offset: u64_at(8)?,
            data: rest.get(16..)?.to_vec(),
        }),
        2 if rest.len() == 24 => LoggedOp::Change(Change::Trim {
            lun: lun()?,
            offset: u64_at(8)?,
            length: u64_at(16)?,
        }),
        3 => LoggedOp::Change(Change::CreateVolume {
            size_bytes: u64_at(0)?,
            name: name_at(8)?,
        }),
        // A LUN created before LUNs had attributes.
        4 => LoggedOp::Change(Change::CreateLun {
            volume: VolumeId(u32_at(0)?),
            size_bytes: u64_at(4)?,
            name: name_at(12)?,
            attributes: LunAttributes::DEFAULT,
        }),
        19 => LoggedOp::Change(Change::CreateLun {
            volume: VolumeId(u32_at(0)?),
            size_bytes: u64_at(4)?,
            attributes: LunAttributes::decode([*rest.get(12)?, *rest.get(13)?]).ok()?,
            name: name_at(14)?,
        }),
        5 if rest.len() == 16 => LoggedOp::Change(Change::ResizeLun {
            lun: lun()?,
            size_bytes: u64_at(8)?,
        }),
        6 if rest.len() == 8 => LoggedOp::Change(Change::DestroyLun { lun: lun()? }),
        8 if rest.len() == 5 => LoggedOp::Change(Change::SetCachePolicy {
            volume: VolumeId(u32_at(0)?),
            policy: policy_from_code(rest[4])?,
        }),
        9 if rest.len() == 5 && rest[4] <= 1 => LoggedOp::Change(Change::SetReadRealloc {
            volume: VolumeId(u32_at(0)?),
            enabled: rest[4] == 1,
        }),
        10 => LoggedOp::Change(Change::CreateSnapshot {
            volume: VolumeId(u32_at(0)?),
            name: name_at(4)?,
        }),
        11 => LoggedOp::Change(Change::DeleteSnapshot {
            volume: VolumeId(u32_at(0)?),
            name: name_at(4)?,
        }),
        12 => LoggedOp::Change(Change::RestoreSnapshot {
            volume: VolumeId(u32_at(0)?),
            lun: Some(FileId(u32_at(4)?)).filter(|f| f.0 != 0),
            name: name_at(8)?,
        }),
        13 if rest.len() == 5 => LoggedOp::Change(Change::SetSnapReserve {
            volume: VolumeId(u32_at(0)?),
            percent: rest[4],
        }),
        14 if rest.len() == 5 && rest[4] <= 1 => LoggedOp::Change(Change::SetVolumeOnline {
            volume: VolumeId(u32_at(0)?),
            online: rest[4] == 1,
        }),
        16 if rest.len() == 12 => LoggedOp::Change(Change::ResizeVolume {
            volume: VolumeId(u32_at(0)?),
            size_bytes: u64_at(4)?,
        }),
        15 if rest.len() == 4 => LoggedOp::Change(Change::DestroyVolume {
            volume: VolumeId(u32_at(0)?),
        }),
        17 if rest.len() == 12 => LoggedOp::Change(Change::SetSnapSchedule {
            volume: VolumeId(u32_at(0)?),
            schedule: SnapSchedule::decode(rest[4..12].try_into().ok()?).ok()?,
        }),
        18 if rest.len() == 6 && rest[5] > 0 => LoggedOp::Change(Change::ScheduledSnapshot {
            volume: VolumeId(u32_at(0)?),
            kind: SnapKind::from_code(rest[4])?,
            keep: rest[5],
        }),
        7 if rest.len() % 12 == 0 => LoggedOp::DirtyStripes {
            stripes: rest
                .chunks_exact(12)
                .map(|c| (get_u32(c, 0), get_u64(c, 4)))
                .collect(),
        },
        _ => return None,
    })
}

/// The byte a cache policy is stored as (in NVLog records and volume records).
pub fn policy_code(policy: CachePolicy) -> u8 {
    match policy {
        CachePolicy::Default => 0,
        CachePolicy::Keep => 1,
        CachePolicy::Reuse => 2,
    }
}

/// The cache policy stored as `code`, if it is one.
pub fn policy_from_code(code: u8) -> Option<CachePolicy> {
    match code {
        0 => Some(CachePolicy::Default),
        1 => Some(CachePolicy::Keep),
        2 => Some(CachePolicy::Reuse),
        _ => None,
    }
}

/// Decodes a half's chain of records from its start, stopping at the first
/// torn or corrupt one.
pub fn decode_half(bytes: &[u8]) -> Vec<NvRecord> {
    decode_chain(bytes, 0).0
}

/// A half read back: its chain, and the intact records found past damage.
#[derive(Clone, Debug, Default)]
pub struct HalfScan {
    /// The records from the half's start up to the first invalid one.
    pub chain: Vec<NvRecord>,
    /// Intact records past an invalid one, each with the byte offset of the
    /// invalid record before it.
    pub past_damage: Vec<(usize, NvRecord)>,
}

/// Reads a half as [`decode_half`] does, then looks past each invalid record
/// whose length field still fits the half: its successor starts there if the
/// record was damaged in place. A torn append at the tail has nothing of the
/// current chain behind it, only zeros or records of a reset half (whose CP
/// committed, so replay skips them); a record damaged where it lay has the
/// rest of the chain behind it, which replay must not lose with it.
pub fn scan_half(bytes: &[u8]) -> HalfScan {
    let (chain, mut at) = decode_chain(bytes, 0);
    let mut past_damage = Vec::new();
    while let Some(length) = claimed_length(&bytes[at..]) {
        let (records, end) = decode_chain(bytes, at + length);
        past_damage.extend(records.into_iter().map(|record| (at, record)));
        at = end;
    }
    HalfScan { chain, past_damage }
}

/// The records from `start` up to the first invalid one, and where it lies.
fn decode_chain(bytes: &[u8], start: usize) -> (Vec<NvRecord>, usize) {
    let mut records = Vec::new();
    let mut at = start;
    while let Ok((record, length)) = NvRecord::decode(&bytes[at..]) {
        records.push(record);
        at += length;
    }
    (records, at)
}

/// The length an invalid record's header claims, if a record could have it.
fn claimed_length(bytes: &[u8]) -> Option<usize> {
    let length = get_u32(bytes.get(..HEADER)?, 0) as usize;
    (length > HEADER && length <= bytes.len()).then_some(length)
}

/// An aggregate's port on the NVLog: the space its records take in each
/// half, and their sequence numbers.
#[derive(Clone, Debug)]
pub struct LogPort {
    halves: Halves,
    next_seq: u64,
}

impl LogPort {
    /// A port on two empty halves of `capacity_bytes` each.
    pub fn new(capacity_bytes: u64) -> LogPort {
        LogPort {
            halves: Halves::new(capacity_bytes),
            next_seq: 0,
        }
    }

    /// Logs `op` of `aggregate` for the CP `generation` in the active half,
    /// if it fits: the half and the record, which takes the next sequence
    /// number; else `op` back.
    pub fn append(
        &mut self,
        generation: CpCount,
        aggregate: AggrId,
        op: LoggedOp,
    ) -> Result<(u8, NvRecord), LoggedOp> {
        let record = NvRecord {
            seq: self.next_seq,
            generation,
            aggregate,
            op,
        };
        match self.halves.append(record.encoded_len() as u64) {
            Append::Logged { half } => {
                self.next_seq += 1;
                Ok((half, record))
            }
            Append::HalfFull => Err(record.op),
        }
    }

    /// A record a CP writes about itself (its dirty stripes), into the half
    /// it froze: outside the halves' accounting.
    pub fn cp_record(&mut self, generation: CpCount, aggregate: AggrId, op: LoggedOp) -> NvRecord {
        let seq = self.next_seq;
        self.next_seq += 1;
        NvRecord {
            seq,
            generation,
            aggregate,
            op,
        }
    }

    /// Numbers new records after every one of `replayed`, and from
    /// `replayed_below` on (records below it were replayed once: a new
    /// record numbered there would be taken for one of them).
    pub fn resume_after(&mut self, replayed: &[NvRecord], replayed_below: u64) {
        let after_log = replayed.iter().map(|r| r.seq + 1).max().unwrap_or(0);
        self.next_seq = after_log.max(replayed_below);
    }

    /// The half new records go to.
    pub fn active_half(&self) -> u8 {
        self.halves.active_half()
    }

    /// Bytes used in the active half.
    pub fn active_used(&self) -> u64 {
        self.halves.active_used()
    }

    /// Freezes the active half for a CP; returns it.
    pub fn freeze(&mut self) -> u8 {
        self.halves.freeze()
    }

    /// Releases the frozen half once its CP is on disk; returns it.
    pub fn release(&mut self) -> u8 {
        self.halves.release()
    }
}

/// Which half an append went to, or why it must wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Append {
    /// The record fits the active half.
    Logged {
        /// The half.
        half: u8,
    },
    /// The active half is full: a CP must freeze it first.
    HalfFull,
}

/// Space accounting of the two halves.
#[derive(Clone, Debug)]
struct Halves {
    capacity_bytes: u64,
    used_bytes: [u64; 2],
    active: u8,
    frozen: Option<u8>,
}

impl Halves {
    /// Two empty halves of `capacity_bytes` each.
    fn new(capacity_bytes: u64) -> Halves {
        Halves {
            capacity_bytes,
            used_bytes: [0, 0],
            active: 0,
            frozen: None,
        }
    }

    /// Room for a record of `length` bytes in the active half?
    fn append(&mut self, length: u64) -> Append {
        let half = usize::from(self.active);
        if self.used_bytes[half] + length > self.capacity_bytes && self.used_bytes[half] > 0 {
            return Append::HalfFull;
        }
        self.used_bytes[half] += length;
        Append::Logged { half: self.active }
    }

    /// The half new records go to.
    fn active_half(&self) -> u8 {
        self.active
    }

    /// Bytes used in the active half.
    fn active_used(&self) -> u64 {
        self.used_bytes[usize::from(self.active)]
    }

    /// Freezes the active half for a CP and switches logging to the other.
    ///
    /// # Panics
    /// If a half is already frozen (one CP at a time).
    fn freeze(&mut self) -> u8 {
        assert!(self.frozen.is_none(), "a half is already frozen");
        let frozen = self.active;
        self.frozen = Some(frozen);
        self.active = 1 - frozen;
        frozen
    }

    /// Releases the frozen half once its CP is on disk; returns it.
    fn release(&mut self) -> u8 {
        let half = self.frozen.take().expect("a frozen half to release");
        self.used_bytes[usize::from(half)] = 0;
        half
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lun_created_before_attributes_replays_as_a_reserved_image_lun() {
        let mut body = vec![4];
        body.extend_from_slice(&7u32.to_le_bytes());
        body.extend_from_slice(&(1u64 << 30).to_le_bytes());
        body.extend_from_slice(b"old");
        let expected = LoggedOp::Change(Change::CreateLun {
            volume: VolumeId(7),
            name: "old".into(),
            size_bytes: 1 << 30,
            attributes: LunAttributes::DEFAULT,
        });
        assert_eq!(decode_op(&body), Some(expected));
    }

    #[test]
    fn a_lun_with_attributes_no_release_knows_is_not_read() {
        let mut body = vec![19];
        body.extend_from_slice(&7u32.to_le_bytes());
        body.extend_from_slice(&(1u64 << 30).to_le_bytes());
        body.extend_from_slice(&[0, 200]); // OS type 200
        body.extend_from_slice(b"new");
        assert_eq!(decode_op(&body), None);
        body[13] = 0;
        body[12] = 2; // an unknown flag
        assert_eq!(decode_op(&body), None);
    }

    fn records() -> Vec<NvRecord> {
        let lun = LunId {
            volume: VolumeId(1),
            file: FileId(2),
        };
        let ops = vec![
            LoggedOp::Change(Change::Write {
                lun,
                offset: 12345,
                data: vec![7; 100],
            }),
            LoggedOp::Change(Change::Trim {
                lun,
                offset: 0,
                length: 8192,
            }),
            LoggedOp::Change(Change::CreateVolume {
                name: "vol0".into(),
                size_bytes: 1 << 30,
            }),
            LoggedOp::Change(Change::CreateLun {
                volume: VolumeId(1),
                name: "lun0".into(),
                size_bytes: 1 << 29,
                attributes: LunAttributes::DEFAULT,
            }),
            LoggedOp::Change(Change::CreateLun {
                volume: VolumeId(1),
                name: "thin".into(),
                size_bytes: 1 << 40,
                attributes: LunAttributes {
                    space_reserved: false,
                    ostype: crate::format::OsType::Vmware,
                },
            }),
            LoggedOp::Change(Change::ResizeLun {
                lun,
                size_bytes: 4096,
            }),
            LoggedOp::Change(Change::DestroyLun { lun }),
            LoggedOp::Change(Change::SetCachePolicy {
                volume: VolumeId(3),
                policy: CachePolicy::Keep,
            }),
            LoggedOp::Change(Change::SetReadRealloc {
                volume: VolumeId(4),
                enabled: true,
            }),
            LoggedOp::Change(Change::CreateSnapshot {
                volume: VolumeId(5),
                name: "nightly.0".into(),
            }),
            LoggedOp::Change(Change::DeleteSnapshot {
                volume: VolumeId(5),
                name: "nightly.1".into(),
            }),
            LoggedOp::Change(Change::RestoreSnapshot {
                volume: VolumeId(5),
                name: "s1".into(),
                lun: Some(FileId(64)),
            }),
            LoggedOp::Change(Change::RestoreSnapshot {
                volume: VolumeId(5),
                name: "s1".into(),
                lun: None,
            }),
            LoggedOp::Change(Change::SetSnapReserve {
                volume: VolumeId(5),
                percent: 20,
            }),
            LoggedOp::Change(Change::SetVolumeOnline {
                volume: VolumeId(6),
                online: false,
            }),
            LoggedOp::Change(Change::ResizeVolume {
                volume: VolumeId(6),
                size_bytes: 3 << 30,
            }),
            LoggedOp::Change(Change::DestroyVolume {
                volume: VolumeId(6),
            }),
            LoggedOp::Change(Change::SetSnapSchedule {
                volume: VolumeId(7),
                schedule: SnapSchedule::parse("0", "2", "6@8,12,16,20").expect("valid"),
            }),
            LoggedOp::Change(Change::ScheduledSnapshot {
                volume: VolumeId(7),
                kind: SnapKind::Nightly,
                keep: 2,
            }),
            LoggedOp::DirtyStripes {
                stripes: vec![(0, 7), (1, 1 << 40)],
            },
        ];
        ops.into_iter()
            .enumerate()
            .map(|(n, op)| NvRecord {
                seq: n as u64,
                generation: CpCount(9),
                aggregate: AggrId(n as u32 % 3),
                op,
            })
            .collect()
    }

    #[test]
    fn records_round_trip_and_a_torn_tail_is_dropped() {
        let mut half: Vec<u8> = records().iter().flat_map(NvRecord::encode).collect();
        assert_eq!(decode_half(&half), records());
        half.truncate(half.len() - 3);
        assert_eq!(decode_half(&half), records()[..records().len() - 1]);
    }

    #[test]
    fn the_length_of_every_kind_of_record_is_known_without_encoding_it() {
        for record in records() {
            let encoded = record.encode();
            assert_eq!(record.encoded_len(), encoded.len(), "{record:?}");
            assert_eq!(encoded.capacity(), encoded.len(), "one exact allocation");
        }
    }

    #[test]
    fn a_record_encoded_into_a_buffer_follows_what_it_holds_byte_for_byte() {
        let mut gathered = vec![0xa5; 3];
        for record in records() {
            record.encode_into(&mut gathered);
        }
        let each: Vec<u8> = records().iter().flat_map(NvRecord::encode).collect();
        assert_eq!(gathered[..3], [0xa5; 3], "what was there is kept");
        assert_eq!(gathered[3..], each[..]);
        assert_eq!(decode_half(&gathered[3..]), records());
    }

    #[test]
    fn a_corrupt_record_ends_the_replay_there() {
        let mut half: Vec<u8> = records().iter().flat_map(NvRecord::encode).collect();
        let second = records()[0].encode().len();
        half[second + 30] ^= 1;
        assert_eq!(decode_half(&half), records()[..1]);
        assert!(decode_half(&[0xff; 64]).is_empty());
    }

    #[test]
    fn a_scan_reads_past_a_record_damaged_in_place_but_finds_nothing_behind_a_torn_tail() {
        let mut half: Vec<u8> = records().iter().flat_map(NvRecord::encode).collect();
        let second = records()[0].encode().len();
        half[second + 30] ^= 1;
        let scan = scan_half(&half);
        assert_eq!(scan.chain, records()[..1]);
        let behind: Vec<(usize, NvRecord)> = records()[2..]
            .iter()
            .map(|record| (second, record.clone()))
            .collect();
        assert_eq!(scan.past_damage, behind);

        // A torn last append, then its terminator's zeros: nothing behind.
        let mut torn: Vec<u8> = records().iter().flat_map(NvRecord::encode).collect();
        let last = torn.len() - records().last().expect("records").encode().len();
        torn.truncate(torn.len() - 3);
        torn.extend([0; 64]);
        let scan = scan_half(&torn);
        assert_eq!(scan.chain, records()[..records().len() - 1]);
        assert!(
            scan.past_damage.is_empty(),
            "{:?} behind byte {last}",
            scan.past_damage
        );
        // A length field past the half's end claims nothing.
        let mut header = [0u8; HEADER];
        header[..4].copy_from_slice(&(HEADER as u32 + 1).to_le_bytes());
        assert!(scan_half(&header).past_damage.is_empty());
    }

    #[test]
    fn halves_freeze_switch_and_report_full() {
        let mut halves = Halves::new(100);
        assert_eq!(halves.append(60), Append::Logged { half: 0 });
        assert_eq!(halves.append(60), Append::HalfFull);
        assert_eq!(halves.freeze(), 0);
        assert_eq!(halves.append(60), Append::Logged { half: 1 });
        assert_eq!(halves.release(), 0);
        assert!(halves.frozen.is_none());
    }
}
