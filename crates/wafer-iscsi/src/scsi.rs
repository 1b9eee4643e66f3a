//! The SCSI commands a LUN answers (SPC-4 and SBC-3, the block device
//! subset initiators use).
//!
//! A command's CDB is first *planned* against the LUN it names ([`plan`]):
//! most commands are answered from what the target knows of the LUN alone
//! (INQUIRY and its VPD pages, READ CAPACITY, MODE SENSE, REPORT LUNS,
//! REPORT SUPPORTED OPERATION CODES, TEST UNIT READY, REQUEST SENSE,
//! SYNCHRONIZE CACHE, PRE-FETCH); a read becomes a [`BlockOp::Read`], GET
//! LBA STATUS a question to the engine ([`BlockOp::Allocation`]), VERIFY a
//! read compared by the driver ([`BlockOp::Verify`]); and the commands that
//! carry data (WRITE, WRITE AND VERIFY, WRITE SAME, UNMAP, COMPARE AND
//! WRITE, VERIFY with BYTCHK) first wait for it and are then turned into
//! block operations by [`with_data`]. COMPARE AND WRITE becomes one
//! [`BlockOp::CompareAndWrite`], which the driver must carry out atomically
//! against every other write. PERSISTENT RESERVE IN and OUT go to the
//! LUN's shared [`crate::reservation::Reservations`] through the driver.
//! Every check SBC asks for is made before anything reaches the engine: a
//! persistent reservation held by another nexus (RESERVATION CONFLICT), the
//! range against the capacity (LBA OUT OF RANGE), the transfer against the
//! block limits the LUN advertises (INVALID FIELD IN CDB), a write to a
//! read-only LUN (WRITE PROTECTED), an opcode not implemented (INVALID
//! COMMAND OPERATION CODE).
//!
//! Logical blocks are 512 bytes, eight to the engine's 4 KiB block (READ
//! CAPACITY 16 says so, so aligned initiators avoid read-modify-write). A
//! trimmed range reads back as zeros (LBPRZ), so WRITE SAME of zeros and
//! UNMAP are both trims. There is no volatile cache to flush: the engine
//! acknowledges a write only once it is durable in the NVLog, so
//! SYNCHRONIZE CACHE and FUA have nothing to wait for, and the caching mode
//! page says the write cache is off.

use crate::reservation::{self, Access};
use crate::sense::{Sense, Status};

/// Bytes per logical block.
pub const BLOCK_BYTES: u32 = 512;
/// Logical blocks per physical (engine) block, as a power of two.
pub const PHYSICAL_BLOCK_EXPONENT: u8 = 3;
/// The most blocks one READ or WRITE moves (1 MiB): with the CmdSN window,
/// what bounds the data one connection holds.
pub const MAX_TRANSFER_BLOCKS: u32 = 2048;
/// The most blocks one WRITE SAME covers (1 MiB of pattern at most).
pub const MAX_WRITE_SAME_BLOCKS: u32 = 2048;
/// The most blocks one COMPARE AND WRITE covers (its CDB has one byte).
pub const MAX_COMPARE_AND_WRITE_BLOCKS: u32 = 255;
/// The most blocks one UNMAP descriptor covers.
pub const MAX_UNMAP_BLOCKS: u32 = 1 << 20;
/// The most descriptors one UNMAP carries.
pub const MAX_UNMAP_DESCRIPTORS: u32 = 64;
/// The most bytes of parameter list a command may send (UNMAP's header and
/// descriptors).
const PARAMETER_LIST_BYTES_MAX: u32 = 8 + 16 * MAX_UNMAP_DESCRIPTORS;

const VENDOR: &[u8; 8] = b"WAFER   ";
const PRODUCT: &[u8; 16] = b"wafer LUN       ";
const REVISION: &[u8; 4] = b"0001";

/// What the target knows of one LUN.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LunInfo {
    /// Its number, as REPORT LUNS lists it (below 16384).
    pub number: u16,
    /// Its size in logical blocks.
    pub blocks: u64,
    /// Whether writes are refused (a snapshot's image).
    pub read_only: bool,
    /// Its unit serial number (VPD page 0x80), printable ASCII.
    pub serial: String,
    /// A number unique to the LUN on this target, for its NAA designator.
    pub id: u64,
    /// What the LUN's persistent reservation leaves this session.
    pub access: Access,
    /// Logical unit resets of the LUN so far, through any session: a count
    /// that grows is a unit attention ([`crate::Connection::set_luns`]).
    pub resets: u64,
    /// Whether the LUN is thin (no space reserved for it): a WRITE SAME of
    /// zeros without its UNMAP bit then writes them, so that they stay
    /// provisioned, where on a space-reserved LUN it is a trim.
    pub thin: bool,
}

/// One operation on a LUN, for the driver: on its bytes, for the engine,
/// or on its persistent reservation, which every session shares.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BlockOp {
    /// Read `length` bytes at `offset`.
    Read {
        /// Byte offset.
        offset: u64,
        /// Bytes.
        length: u64,
    },
    /// Write `data` at `offset`.
    Write {
        /// Byte offset.
        offset: u64,
        /// The bytes.
        data: Vec<u8>,
    },
    /// Deallocate `length` bytes at `offset`: they read back as zeros.
    Trim {
        /// Byte offset.
        offset: u64,
        /// Bytes.
        length: u64,
    },
    /// Which runs of `length` bytes at `offset` hold data: answered with
    /// [`Run`]s.
    Allocation {
        /// Byte offset.
        offset: u64,
        /// Bytes.
        length: u64,
    },
    /// Read `length` bytes at `offset` and, if `expected` is given, compare
    /// them with it: answered done, or with the offset of the first byte
    /// that differs.
    Verify {
        /// Byte offset.
        offset: u64,
        /// Bytes.
        length: u64,
        /// What the bytes must be.
        expected: Option<Vec<u8>>,
    },
    /// Atomically: read `expected.len()` bytes at `offset`; if they equal
    /// `expected`, write `data` there; if not, answer with the offset of the
    /// first byte that differs and write nothing. No other write may land
    /// on these bytes between the read and the write.
    CompareAndWrite {
        /// Byte offset.
        offset: u64,
        /// What the bytes must be.
        expected: Vec<u8>,
        /// What they become (as long as `expected`).
        data: Vec<u8>,
    },
    /// PERSISTENT RESERVE IN: answered with the whole [`Answer`] that
    /// [`crate::reservation::Reservations::reserve_in`] gives.
    ReserveIn {
        /// The command.
        cdb: [u8; 16],
    },
    /// PERSISTENT RESERVE OUT, with its parameter list: answered likewise
    /// from [`crate::reservation::Reservations::reserve_out`].
    ReserveOut {
        /// The command.
        cdb: [u8; 16],
        /// Its parameter list.
        parameters: Vec<u8>,
    },
}

/// A run of a LUN's bytes, as the engine reports them: data, or a hole
/// (deallocated, reads as zeros).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Run {
    /// Bytes.
    pub length: u64,
    /// Whether it holds data.
    pub data: bool,
}

/// The most of a LUN one GET LBA STATUS describes (64 MiB), so that one
/// command cannot hold the engine for long.
pub const STATUS_BYTES_MAX: u64 = 64 << 20;

/// A command's answer made without the engine: status, data for Data-In
/// (already cut to the allocation length) and sense.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    /// The status.
    pub status: Status,
    /// Data for the initiator.
    pub data: Vec<u8>,
    /// Why it failed, with CHECK CONDITION.
    pub sense: Option<Sense>,
}

impl Answer {
    /// GOOD with `data`.
    pub fn good(data: Vec<u8>) -> Answer {
        Answer {
            status: Status::GOOD,
            data,
            sense: None,
        }
    }

    /// CHECK CONDITION with `sense`.
    pub fn check(sense: Sense) -> Answer {
        Answer {
            status: Status::CHECK_CONDITION,
            data: Vec::new(),
            sense: Some(sense),
        }
    }

    /// `status` alone (BUSY, TASK SET FULL).
    pub fn status(status: Status) -> Answer {
        Answer {
            status,
            data: Vec::new(),
            sense: None,
        }
    }
}

/// What a command needs next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Plan {
    /// Answered already.
    Answer(Answer),
    /// Reads the LUN; the data goes to the initiator.
    Read {
        /// Byte offset.
        offset: u64,
        /// Bytes.
        length: u64,
    },
    /// Carries out these operations, which need no data from the initiator.
    Execute(Vec<BlockOp>),
    /// Asks the engine which runs hold data (GET LBA STATUS), answered by
    /// [`lba_status`].
    Status {
        /// The first LBA described.
        lba: u64,
        /// Bytes from it to ask about.
        length: u64,
        /// The CDB's allocation length.
        allocation: u32,
    },
    /// Waits for `bytes` of Data-Out, then becomes block operations.
    Receive {
        /// Bytes of data the command carries.
        bytes: u32,
        /// What the data is for.
        then: DataOut,
    },
}

/// What a command's Data-Out is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DataOut {
    /// Written at `offset`.
    Write {
        /// Byte offset.
        offset: u64,
    },
    /// One block repeated over `blocks` from `offset`.
    WriteSame {
        /// Byte offset.
        offset: u64,
        /// Logical blocks.
        blocks: u32,
        /// Whether zeros must stay provisioned (a thin LUN, UNMAP clear).
        provision: bool,
    },
    /// An UNMAP parameter list.
    Unmap,
    /// Compared with `blocks` from `offset`: all of them, or with
    /// `repeated`, one block compared with each.
    Verify {
        /// Byte offset.
        offset: u64,
        /// Logical blocks.
        blocks: u32,
        /// One block for all (BYTCHK 3).
        repeated: bool,
    },
    /// COMPARE AND WRITE's `blocks` to compare, then `blocks` to write.
    CompareAndWrite {
        /// Byte offset.
        offset: u64,
        /// Logical blocks.
        blocks: u32,
    },
    /// A PERSISTENT RESERVE OUT parameter list, for the command `cdb`.
    ReserveOut {
        /// The command.
        cdb: [u8; 16],
    },
}

/// A failure of a block operation, as the engine reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockError {
    /// Beyond the LUN's end (it shrank under the command).
    OutOfRange,
    /// The volume has no space for the write.
    NoSpace,
    /// The disks could not deliver or keep the data.
    Io,
    /// The LUN no longer exists.
    Gone,
    /// The engine holds its most requests: try again.
    Busy,
    /// Anything else the engine refused.
    Refused,
    /// The LUN is offline (the administrator took it so).
    NotReady,
}

impl BlockError {
    /// The answer that reports this failure of a read (`write` false) or a
    /// write.
    pub fn answer(self, write: bool) -> Answer {
        match self {
            BlockError::OutOfRange => Answer::check(Sense::LBA_OUT_OF_RANGE),
            BlockError::NoSpace => Answer::check(Sense::SPACE_ALLOCATION_FAILED),
            BlockError::Io if write => Answer::check(Sense::WRITE_ERROR),
            BlockError::Io => Answer::check(Sense::UNRECOVERED_READ_ERROR),
            BlockError::Gone => Answer::check(Sense::LUN_NOT_SUPPORTED),
            BlockError::Busy => Answer::status(Status::TASK_SET_FULL),
            BlockError::Refused => Answer::check(Sense::INTERNAL_TARGET_FAILURE),
            BlockError::NotReady => Answer::check(Sense::LOGICAL_UNIT_NOT_READY),
        }
    }
}

/// INQUIRY's operation code.
pub const INQUIRY: u8 = 0x12;
/// REPORT LUNS's operation code.
pub const REPORT_LUNS: u8 = 0xa0;
/// REQUEST SENSE's operation code.
pub const REQUEST_SENSE: u8 = 0x03;

/// Plans the command `cdb` addressed to LUN number `lun`, one of `luns`.
pub fn plan(cdb: &[u8; 16], lun: u16, luns: &[LunInfo]) -> Plan {
    let unit = luns.iter().find(|l| l.number == lun);
    let answered = match (cdb[0], unit) {
        (INQUIRY, _) => inquiry(cdb, unit),
        (REPORT_LUNS, _) => report_luns(cdb, luns),
        (REQUEST_SENSE, _) => request_sense(cdb),
        (_, None) => Err(Sense::LUN_NOT_SUPPORTED),
        (_, Some(unit)) => return plan_for_unit(cdb, unit),
    };
    Plan::Answer(answered.unwrap_or_else(Answer::check))
}

fn plan_for_unit(cdb: &[u8; 16], unit: &LunInfo) -> Plan {
    if reservation_conflict(cdb, unit.access) {
        return Plan::Answer(Answer::status(Status::RESERVATION_CONFLICT));
    }
    let answered = match cdb[0] {
        0x00 => Ok(Answer::good(Vec::new())),
        0x08 | 0x28 | 0xa8 | 0x88 => return read(cdb, unit).unwrap_or_else(check_plan),
        0x0a | 0x2a | 0xaa | 0x8a | 0x2e | 0xae | 0x8e => {
            return write(cdb, unit).unwrap_or_else(check_plan);
        }
        0x2f | 0xaf | 0x8f => return verify(cdb, unit).unwrap_or_else(check_plan),
        0x89 => return compare_and_write(cdb, unit).unwrap_or_else(check_plan),
        0x34 | 0x90 => pre_fetch(cdb, unit),
        0x5e => return Plan::Execute(vec![BlockOp::ReserveIn { cdb: *cdb }]),
        0x5f => return reserve_out(cdb).unwrap_or_else(check_plan),
        0x41 | 0x93 => return write_same(cdb, unit).unwrap_or_else(check_plan),
        0x42 => return unmap(cdb, unit).unwrap_or_else(check_plan),
        0x25 => read_capacity_10(cdb, unit),
        0x9e if cdb[1] & 0x1f == 0x10 => read_capacity_16(cdb, unit),
        0x9e if cdb[1] & 0x1f == 0x12 => {
            return get_lba_status(cdb, unit).unwrap_or_else(check_plan);
        }
        0x35 | 0x91 => synchronize_cache(cdb, unit),
        0x1a | 0x5a => mode_sense(cdb, unit),
        0xa3 if cdb[1] & 0x1f == 0x0c => report_supported_operation_codes(cdb),
        _ => Err(Sense::INVALID_OPCODE),
    };
    Plan::Answer(answered.unwrap_or_else(Answer::check))
}

fn check_plan(sense: Sense) -> Plan {
    Plan::Answer(Answer::check(sense))
}

/// Whether `cdb` is a command a session with `access` may not carry out:
/// a write where it may only read, anything touching data where it may not
/// (SBC-3 table 13).
fn reservation_conflict(cdb: &[u8; 16], access: Access) -> bool {
    let read_capacity_16 = cdb[0] == 0x9e && cdb[1] & 0x1f == 0x10;
    let allowed = reservation::always_allowed(cdb[0]) || read_capacity_16;
    // READ, VERIFY, PRE-FETCH and GET LBA STATUS.
    let reads = matches!(
        cdb[0],
        0x08 | 0x28 | 0xa8 | 0x88 | 0x2f | 0xaf | 0x8f | 0x34 | 0x90 | 0x9e
    );
    match access {
        Access::Full => false,
        Access::ReadOnly => !allowed && !reads,
        Access::None => !allowed,
    }
}

fn be16(bytes: &[u8]) -> u16 {
    u16::from_be_bytes([bytes[0], bytes[1]])
}

fn be32(bytes: &[u8]) -> u32 {
    u32::from_be_bytes(bytes[..4].try_into().expect("four bytes"))
}

fn be64(bytes: &[u8]) -> u64 {
    u64::from_be_bytes(bytes[..8].try_into().expect("eight bytes"))
}

/// `data` cut to the allocation length.
fn allocated(mut data: Vec<u8>, allocation: usize) -> Answer {
    data.truncate(allocation);
    Answer::good(data)
}

/// The LBA and block count of a READ, WRITE, WRITE SAME or SYNCHRONIZE
/// CACHE CDB, by its size.
fn lba_and_blocks(cdb: &[u8; 16]) -> (u64, u32) {
    match cdb[0] {
        // 6-byte CDBs: 21 bits of LBA; a count of 0 means 256.
        0x08 | 0x0a => {
            let lba = u64::from(be32(&[0, cdb[1] & 0x1f, cdb[2], cdb[3]]));
            let blocks = if cdb[4] == 0 { 256 } else { u32::from(cdb[4]) };
            (lba, blocks)
        }
        0x28 | 0x2a | 0x2e | 0x2f | 0x34 | 0x41 | 0x35 => {
            (u64::from(be32(&cdb[2..6])), u32::from(be16(&cdb[7..9])))
        }
        0xa8 | 0xaa | 0xae | 0xaf => (u64::from(be32(&cdb[2..6])), be32(&cdb[6..10])),
        _ => (be64(&cdb[2..10]), be32(&cdb[10..14])),
    }
}

/// Checks that `blocks` from `lba` lie within the LUN.
fn check_range(unit: &LunInfo, lba: u64, blocks: u64) -> Result<(), Sense> {
    match lba.checked_add(blocks) {
        Some(end) if end <= unit.blocks => Ok(()),
        _ => Err(Sense::LBA_OUT_OF_RANGE),
    }
}

fn byte_offset(lba: u64) -> u64 {
    lba * u64::from(BLOCK_BYTES)
}

fn read(cdb: &[u8; 16], unit: &LunInfo) -> Result<Plan, Sense> {
    let (lba, blocks) = lba_and_blocks(cdb);
    if cdb[0] != 0x08 && cdb[1] >> 5 != 0 {
        // RDPROTECT: no protection information is kept.
        return Err(Sense::INVALID_FIELD_IN_CDB);
    }
    check_range(unit, lba, u64::from(blocks))?;
    if blocks > MAX_TRANSFER_BLOCKS {
        return Err(Sense::INVALID_FIELD_IN_CDB);
    }
    Ok(match blocks {
        0 => Plan::Answer(Answer::good(Vec::new())),
        _ => Plan::Read {
            offset: byte_offset(lba),
            length: u64::from(blocks) * u64::from(BLOCK_BYTES),
        },
    })
}

fn write(cdb: &[u8; 16], unit: &LunInfo) -> Result<Plan, Sense> {
    let (lba, blocks) = lba_and_blocks(cdb);
    if cdb[0] != 0x0a && cdb[1] >> 5 != 0 {
        return Err(Sense::INVALID_FIELD_IN_CDB);
    }
    if unit.read_only {
        return Err(Sense::WRITE_PROTECTED);
    }
    check_range(unit, lba, u64::from(blocks))?;
    if blocks > MAX_TRANSFER_BLOCKS {
        return Err(Sense::INVALID_FIELD_IN_CDB);
    }
    Ok(match blocks {
        0 => Plan::Answer(Answer::good(Vec::new())),
        _ => Plan::Receive {
            bytes: blocks * BLOCK_BYTES,
            then: DataOut::Write {
                offset: byte_offset(lba),
            },
        },
    })
}

/// VERIFY 10, 12 and 16: the blocks are read back (BYTCHK 0) or compared
/// with the Data-Out (BYTCHK 1), or each with its one block (BYTCHK 3).
fn verify(cdb: &[u8; 16], unit: &LunInfo) -> Result<Plan, Sense> {
    let (lba, blocks) = lba_and_blocks(cdb);
    let bytchk = (cdb[1] >> 1) & 0x03;
    // VRPROTECT: no protection information is kept; BYTCHK 2 is reserved.
    if cdb[1] >> 5 != 0 || bytchk == 2 {
        return Err(Sense::INVALID_FIELD_IN_CDB);
    }
    check_range(unit, lba, u64::from(blocks))?;
    if blocks > MAX_TRANSFER_BLOCKS {
        return Err(Sense::INVALID_FIELD_IN_CDB);
    }
    let offset = byte_offset(lba);
    let length = u64::from(blocks) * u64::from(BLOCK_BYTES);
    Ok(match (blocks, bytchk) {
        (0, _) => Plan::Answer(Answer::good(Vec::new())),
        (_, 0) => Plan::Execute(vec![BlockOp::Verify {
            offset,
            length,
            expected: None,
        }]),
        (_, _) => Plan::Receive {
            bytes: if bytchk == 3 {
                BLOCK_BYTES
            } else {
                blocks * BLOCK_BYTES
            },
            then: DataOut::Verify {
                offset,
                blocks,
                repeated: bytchk == 3,
            },
        },
    })
}

/// COMPARE AND WRITE: twice the blocks' worth of Data-Out, what they must
/// hold and then what they become.
fn compare_and_write(cdb: &[u8; 16], unit: &LunInfo) -> Result<Plan, Sense> {
    let lba = be64(&cdb[2..10]);
    let blocks = u32::from(cdb[13]);
    if cdb[1] >> 5 != 0 {
        return Err(Sense::INVALID_FIELD_IN_CDB); // WRPROTECT
    }
    if unit.read_only {
        return Err(Sense::WRITE_PROTECTED);
    }
    check_range(unit, lba, u64::from(blocks))?;
    // Even of no blocks: the Data-Out must then be empty too, which the
    // connection checks against the expected transfer length.
    Ok(Plan::Receive {
        bytes: 2 * blocks * BLOCK_BYTES,
        then: DataOut::CompareAndWrite {
            offset: byte_offset(lba),
            blocks,
        },
    })
}

/// PRE-FETCH 10 and 16: nothing is staged ahead (the buffer cache fills as
/// reads come), so the answer is GOOD once the range is checked, never
/// CONDITION MET.
fn pre_fetch(cdb: &[u8; 16], unit: &LunInfo) -> Result<Answer, Sense> {
    let (lba, blocks) = lba_and_blocks(cdb);
    let blocks = match blocks {
        0 => unit.blocks.saturating_sub(lba),
        _ => u64::from(blocks),
    };
    check_range(unit, lba, blocks)?;
    Ok(Answer::good(Vec::new()))
}

/// PERSISTENT RESERVE OUT: its parameter list must be the basic 24 bytes.
fn reserve_out(cdb: &[u8; 16]) -> Result<Plan, Sense> {
    let length = be32(&cdb[5..9]);
    if length != reservation::PARAMETER_LIST_BYTES {
        return Err(Sense::PARAMETER_LIST_LENGTH_ERROR);
    }
    Ok(Plan::Receive {
        bytes: length,
        then: DataOut::ReserveOut { cdb: *cdb },
    })
}

fn write_same(cdb: &[u8; 16], unit: &LunInfo) -> Result<Plan, Sense> {
    let (lba, blocks) = lba_and_blocks(cdb);
    let anchor = cdb[1] & 0x10 != 0;
    let provision = unit.thin && cdb[1] & 0x08 == 0;
    let no_data_out = cdb[0] == 0x93 && cdb[1] & 0x01 != 0;
    // WSNZ: a count of zero (the rest of the LUN) is not accepted.
    if cdb[1] >> 5 != 0 || anchor || blocks == 0 || blocks > MAX_WRITE_SAME_BLOCKS {
        return Err(Sense::INVALID_FIELD_IN_CDB);
    }
    if unit.read_only {
        return Err(Sense::WRITE_PROTECTED);
    }
    check_range(unit, lba, u64::from(blocks))?;
    let then = DataOut::WriteSame {
        offset: byte_offset(lba),
        blocks,
        provision,
    };
    Ok(match no_data_out {
        // NDOB: the block is zeros, sent as nothing.
        true => Plan::Execute(vec![same(byte_offset(lba), blocks, &[], provision)]),
        false => Plan::Receive {
            bytes: BLOCK_BYTES,
            then,
        },
    })
}

fn unmap(cdb: &[u8; 16], unit: &LunInfo) -> Result<Plan, Sense> {
    let length = u32::from(be16(&cdb[7..9]));
    if cdb[1] & 0x01 != 0 {
        return Err(Sense::INVALID_FIELD_IN_CDB);
    }
    if unit.read_only {
        return Err(Sense::WRITE_PROTECTED);
    }
    match length {
        0 => Ok(Plan::Answer(Answer::good(Vec::new()))),
        1..8 => Err(Sense::PARAMETER_LIST_LENGTH_ERROR),
        _ if length > PARAMETER_LIST_BYTES_MAX => Err(Sense::INVALID_FIELD_IN_CDB),
        _ => Ok(Plan::Receive {
            bytes: length,
            then: DataOut::Unmap,
        }),
    }
}

/// Turns a command's Data-Out into block operations. A write given less
/// than its CDB asked for (the initiator expected to send less) writes the
/// whole blocks it was given.
pub fn with_data(then: DataOut, mut data: Vec<u8>, unit: &LunInfo) -> Result<Vec<BlockOp>, Sense> {
    match then {
        DataOut::Write { offset } => {
            data.truncate(data.len() / BLOCK_BYTES as usize * BLOCK_BYTES as usize);
            Ok(match data.is_empty() {
                true => Vec::new(),
                false => vec![BlockOp::Write { offset, data }],
            })
        }
        DataOut::WriteSame {
            offset,
            blocks,
            provision,
        } => Ok(vec![same(offset, blocks, &data, provision)]),
        DataOut::Unmap => unmap_descriptors(&data, unit),
        DataOut::Verify {
            offset,
            blocks,
            repeated,
        } => verify_data(offset, blocks, repeated, data),
        DataOut::CompareAndWrite { blocks: 0, .. } => Ok(Vec::new()),
        DataOut::CompareAndWrite { offset, blocks } => {
            let half = (blocks * BLOCK_BYTES) as usize;
            if data.len() != 2 * half {
                return Err(Sense::INVALID_FIELD_IN_CDB);
            }
            let written = data.split_off(half);
            Ok(vec![BlockOp::CompareAndWrite {
                offset,
                expected: data,
                data: written,
            }])
        }
        DataOut::ReserveOut { cdb } => Ok(vec![BlockOp::ReserveOut {
            cdb,
            parameters: data,
        }]),
    }
}

/// VERIFY's Data-Out as what the blocks must hold.
fn verify_data(
    offset: u64,
    blocks: u32,
    repeated: bool,
    data: Vec<u8>,
) -> Result<Vec<BlockOp>, Sense> {
    let block = BLOCK_BYTES as usize;
    let expected = match repeated {
        true if data.len() == block => data.repeat(blocks as usize),
        false if data.len() == blocks as usize * block => data,
        _ => return Err(Sense::INVALID_FIELD_IN_CDB),
    };
    Ok(vec![BlockOp::Verify {
        offset,
        length: expected.len() as u64,
        expected: Some(expected),
    }])
}

/// One block repeated (an empty block is zeros): zeros are a trim (they read
/// back as zeros, and a space-reserved LUN's space stays reserved) unless
/// they must stay `provision`ed, anything else is written out.
fn same(offset: u64, blocks: u32, block: &[u8], provision: bool) -> BlockOp {
    let length = u64::from(blocks) * u64::from(BLOCK_BYTES);
    if block.iter().all(|&b| b == 0) && !provision {
        return BlockOp::Trim { offset, length };
    }
    if block.is_empty() {
        let data = vec![0; length as usize];
        return BlockOp::Write { offset, data };
    }
    let data = block.repeat(blocks as usize);
    BlockOp::Write { offset, data }
}

fn unmap_descriptors(list: &[u8], unit: &LunInfo) -> Result<Vec<BlockOp>, Sense> {
    if list.len() < 8 {
        return Err(Sense::PARAMETER_LIST_LENGTH_ERROR);
    }
    let descriptor_bytes = usize::from(be16(&list[2..4]));
    let available = (list.len() - 8).min(descriptor_bytes) / 16;
    if available as u32 > MAX_UNMAP_DESCRIPTORS {
        return Err(Sense::INVALID_FIELD_IN_PARAMETER_LIST);
    }
    let mut ops = Vec::with_capacity(available);
    for descriptor in list[8..8 + available * 16].chunks_exact(16) {
        let lba = be64(&descriptor[..8]);
        let blocks = be32(&descriptor[8..12]);
        if blocks > MAX_UNMAP_BLOCKS {
            return Err(Sense::INVALID_FIELD_IN_PARAMETER_LIST);
        }
        check_range(unit, lba, u64::from(blocks))?;
        if blocks > 0 {
            ops.push(BlockOp::Trim {
                offset: byte_offset(lba),
                length: u64::from(blocks) * u64::from(BLOCK_BYTES),
            });
        }
    }
    Ok(ops)
}

fn synchronize_cache(cdb: &[u8; 16], unit: &LunInfo) -> Result<Answer, Sense> {
    let (lba, blocks) = lba_and_blocks(cdb);
    // A count of zero means "to the end".
    let blocks = if blocks == 0 {
        unit.blocks.saturating_sub(lba)
    } else {
        u64::from(blocks)
    };
    check_range(unit, lba, blocks)?;
    Ok(Answer::good(Vec::new()))
}

fn read_capacity_10(cdb: &[u8; 16], unit: &LunInfo) -> Result<Answer, Sense> {
    let pmi = cdb[8] & 0x01 != 0;
    if !pmi && be32(&cdb[2..6]) != 0 {
        return Err(Sense::INVALID_FIELD_IN_CDB);
    }
    let last = u32::try_from(unit.blocks.saturating_sub(1)).unwrap_or(u32::MAX);
    let mut data = Vec::with_capacity(8);
    data.extend_from_slice(&last.to_be_bytes());
    data.extend_from_slice(&BLOCK_BYTES.to_be_bytes());
    Ok(Answer::good(data))
}

fn read_capacity_16(cdb: &[u8; 16], unit: &LunInfo) -> Result<Answer, Sense> {
    let allocation = be32(&cdb[10..14]) as usize;
    let mut data = vec![0u8; 32];
    data[..8].copy_from_slice(&unit.blocks.saturating_sub(1).to_be_bytes());
    data[8..12].copy_from_slice(&BLOCK_BYTES.to_be_bytes());
    data[13] = PHYSICAL_BLOCK_EXPONENT;
    // LBPME (unmap works) and LBPRZ (unmapped blocks read as zeros).
    data[14] = 0x80 | 0x40;
    Ok(allocated(data, allocation))
}

/// GET LBA STATUS: the engine is asked which runs from the LBA hold data,
/// for at most [`STATUS_BYTES_MAX`] of the LUN.
fn get_lba_status(cdb: &[u8; 16], unit: &LunInfo) -> Result<Plan, Sense> {
    let lba = be64(&cdb[2..10]);
    if lba >= unit.blocks {
        return Err(Sense::LBA_OUT_OF_RANGE);
    }
    let length = ((unit.blocks - lba) * u64::from(BLOCK_BYTES)).min(STATUS_BYTES_MAX);
    Ok(Plan::Status {
        lba,
        length,
        allocation: be32(&cdb[10..14]),
    })
}

/// GET LBA STATUS's parameter data for the runs from `lba`: one descriptor
/// per run, mapped (data) or deallocated (a hole, which reads as zeros),
/// cut to the allocation length.
pub fn lba_status(lba: u64, runs: &[Run], allocation: u32) -> Answer {
    let mut data = vec![0u8; 8];
    let mut next = lba;
    for run in runs.iter().filter(|r| r.length > 0) {
        let blocks = run.length.div_ceil(u64::from(BLOCK_BYTES));
        let mut descriptor = [0u8; 16];
        descriptor[..8].copy_from_slice(&next.to_be_bytes());
        descriptor[8..12].copy_from_slice(&u32::try_from(blocks).unwrap_or(u32::MAX).to_be_bytes());
        descriptor[12] = if run.data { 0 } else { 1 };
        data.extend_from_slice(&descriptor);
        next += blocks;
    }
    let length = u32::try_from(data.len() - 4).unwrap_or(u32::MAX);
    data[..4].copy_from_slice(&length.to_be_bytes());
    allocated(data, allocation as usize)
}

fn request_sense(cdb: &[u8; 16]) -> Result<Answer, Sense> {
    if cdb[1] & 0x01 != 0 {
        // Descriptor-format sense is not spoken.
        return Err(Sense::INVALID_FIELD_IN_CDB);
    }
    // Every failure is reported with its command (autosense): nothing is
    // pending.
    let none = Sense::new(0, 0, 0).fixed().to_vec();
    Ok(allocated(none, usize::from(cdb[4])))
}

fn inquiry(cdb: &[u8; 16], unit: Option<&LunInfo>) -> Result<Answer, Sense> {
    let evpd = cdb[1] & 0x01 != 0;
    let page = cdb[2];
    let allocation = usize::from(be16(&cdb[3..5]));
    if cdb[1] & 0xfe != 0 || (!evpd && page != 0) {
        return Err(Sense::INVALID_FIELD_IN_CDB);
    }
    let data = match (evpd, unit) {
        (false, _) => standard_inquiry(unit.is_some()),
        (true, None) => return Err(Sense::LUN_NOT_SUPPORTED),
        (true, Some(unit)) => vpd_page(page, unit)?,
    };
    Ok(allocated(data, allocation))
}

fn standard_inquiry(present: bool) -> Vec<u8> {
    let mut data = vec![0u8; 66];
    // Peripheral qualifier 3 and type 0x1f: no unit at this LUN.
    data[0] = if present { 0x00 } else { 0x7f };
    data[2] = 0x06; // SPC-4
    data[3] = 0x12; // HISUP, response data format 2
    data[4] = (data.len() - 5) as u8;
    data[7] = 0x02; // CMDQUE
    data[8..16].copy_from_slice(VENDOR);
    data[16..32].copy_from_slice(PRODUCT);
    data[32..36].copy_from_slice(REVISION);
    // Version descriptors: SAM-5, iSCSI, SPC-4, SBC-3.
    for (n, version) in [0x00a0u16, 0x0960, 0x0460, 0x04c0].iter().enumerate() {
        data[58 + 2 * n..60 + 2 * n].copy_from_slice(&version.to_be_bytes());
    }
    data
}

/// The VPD pages served, in the order page 0x00 lists them.
const VPD_PAGES: [u8; 6] = [0x00, 0x80, 0x83, 0xb0, 0xb1, 0xb2];

fn vpd_page(page: u8, unit: &LunInfo) -> Result<Vec<u8>, Sense> {
    let body = match page {
        0x00 => VPD_PAGES.to_vec(),
        0x80 => unit.serial.as_bytes().to_vec(),
        0x83 => device_identification(unit),
        0xb0 => block_limits(),
        0xb1 => block_device_characteristics(),
        0xb2 => logical_block_provisioning(),
        _ => return Err(Sense::INVALID_FIELD_IN_CDB),
    };
    let mut data = vec![0x00, page];
    data.extend_from_slice(&(body.len() as u16).to_be_bytes());
    data.extend_from_slice(&body);
    Ok(data)
}

fn designator(out: &mut Vec<u8>, code_set: u8, kind: u8, value: &[u8]) {
    out.extend_from_slice(&[code_set, kind, 0, value.len() as u8]);
    out.extend_from_slice(value);
}

fn device_identification(unit: &LunInfo) -> Vec<u8> {
    let mut out = Vec::new();
    // NAA locally assigned (type 3), of the logical unit.
    let naa = (0x3u64 << 60) | (unit.id & 0x0fff_ffff_ffff_ffff);
    designator(&mut out, 0x01, 0x03, &naa.to_be_bytes());
    // T10 vendor ID (type 1): vendor and serial.
    let mut t10 = VENDOR.to_vec();
    t10.extend_from_slice(unit.serial.as_bytes());
    designator(&mut out, 0x02, 0x01, &t10);
    // Relative target port 1 (type 4, associated with the target port,
    // protocol iSCSI).
    designator(&mut out, 0x51, 0x94, &[0, 0, 0, 1]);
    out
}

fn block_limits() -> Vec<u8> {
    let mut body = vec![0u8; 0x3c];
    body[0] = 0x01; // WSNZ
    body[2..4].copy_from_slice(&(1u16 << PHYSICAL_BLOCK_EXPONENT).to_be_bytes());
    body[1] = MAX_COMPARE_AND_WRITE_BLOCKS as u8;
    body[4..8].copy_from_slice(&MAX_TRANSFER_BLOCKS.to_be_bytes());
    body[8..12].copy_from_slice(&(MAX_TRANSFER_BLOCKS / 4).to_be_bytes());
    body[16..20].copy_from_slice(&MAX_UNMAP_BLOCKS.to_be_bytes());
    body[20..24].copy_from_slice(&MAX_UNMAP_DESCRIPTORS.to_be_bytes());
    body[24..28].copy_from_slice(&(1u32 << PHYSICAL_BLOCK_EXPONENT).to_be_bytes());
    body[32..40].copy_from_slice(&u64::from(MAX_WRITE_SAME_BLOCKS).to_be_bytes());
    body
}

fn block_device_characteristics() -> Vec<u8> {
    let mut body = vec![0u8; 0x3c];
    body[1] = 0x01; // medium rotation rate 1: not rotating
    body
}

fn logical_block_provisioning() -> Vec<u8> {
    // LBPU, LBPWS, LBPWS10, LBPRZ; provisioning type 1 (resource
    // provisioned: the LUN's space is reserved in its volume).
    vec![0x00, 0x80 | 0x40 | 0x20 | 0x04, 0x01, 0x00]
}

fn report_luns(cdb: &[u8; 16], luns: &[LunInfo]) -> Result<Answer, Sense> {
    let allocation = be32(&cdb[6..10]) as usize;
    if cdb[2] > 0x02 || allocation < 16 {
        return Err(Sense::INVALID_FIELD_IN_CDB);
    }
    let mut data = Vec::with_capacity(8 + 8 * luns.len());
    data.extend_from_slice(&((8 * luns.len()) as u32).to_be_bytes());
    data.extend_from_slice(&[0; 4]);
    for lun in luns {
        data.extend_from_slice(&lun_field(lun.number).to_be_bytes());
    }
    Ok(allocated(data, allocation))
}

/// The eight-byte LUN field for `number`: peripheral addressing below 256,
/// flat space addressing above.
pub fn lun_field(number: u16) -> u64 {
    let first_level = match number {
        0..=255 => number,
        _ => 0x4000 | (number & 0x3fff),
    };
    u64::from(first_level) << 48
}

/// The LUN number in an eight-byte LUN field, if it is one this target
/// could have (peripheral or flat addressing, single level).
pub fn lun_number(field: u64) -> Option<u16> {
    let first = (field >> 48) as u16;
    if field & 0x0000_ffff_ffff_ffff != 0 {
        return None;
    }
    match first >> 14 {
        0 if first >> 8 == 0 => Some(first),
        1 => Some(first & 0x3fff),
        _ => None,
    }
}

fn mode_sense(cdb: &[u8; 16], unit: &LunInfo) -> Result<Answer, Sense> {
    let six = cdb[0] == 0x1a;
    let block_descriptor = cdb[1] & 0x08 == 0;
    let control = cdb[2] >> 6;
    let page = cdb[2] & 0x3f;
    let subpage = cdb[3];
    let allocation = match six {
        true => usize::from(cdb[4]),
        false => usize::from(be16(&cdb[7..9])),
    };
    if control == 3 {
        return Err(Sense::SAVING_NOT_SUPPORTED);
    }
    let changeable = control == 1;
    let pages = match (page, subpage) {
        (0x3f, 0x00 | 0xff) => [0x08, 0x0a, 0x1c]
            .iter()
            .flat_map(|&p| mode_page(p, changeable))
            .collect(),
        (0x08 | 0x0a | 0x1c, 0x00) => mode_page(page, changeable),
        _ => return Err(Sense::INVALID_FIELD_IN_CDB),
    };
    let mut descriptor = Vec::new();
    if block_descriptor {
        let blocks = u32::try_from(unit.blocks).unwrap_or(u32::MAX);
        descriptor.extend_from_slice(&blocks.to_be_bytes());
        descriptor.extend_from_slice(&BLOCK_BYTES.to_be_bytes());
    }
    // Device-specific parameter: WP for a read-only LUN, DPOFUA.
    let device = if unit.read_only { 0x80 } else { 0 } | 0x10;
    let mut data = Vec::new();
    match six {
        true => {
            let length = 3 + descriptor.len() + pages.len();
            data.extend_from_slice(&[length as u8, 0, device, descriptor.len() as u8]);
        }
        false => {
            let length = (6 + descriptor.len() + pages.len()) as u16;
            data.extend_from_slice(&length.to_be_bytes());
            data.extend_from_slice(&[0, device, 0, 0]);
            data.extend_from_slice(&(descriptor.len() as u16).to_be_bytes());
        }
    }
    data.extend_from_slice(&descriptor);
    data.extend_from_slice(&pages);
    Ok(allocated(data, allocation))
}

/// A mode page: its current values, or (changeable) the mask of what
/// MODE SELECT may change: nothing.
fn mode_page(page: u8, changeable: bool) -> Vec<u8> {
    let mut data = match page {
        // Caching: WCE off (acknowledged writes are durable).
        0x08 => vec![0u8; 20],
        // Control: unrestricted reordering of simple tasks.
        0x0a => {
            let mut control = vec![0u8; 12];
            control[3] = 0x10;
            control
        }
        // Informational exceptions control: nothing reported.
        _ => vec![0u8; 12],
    };
    if changeable {
        data.iter_mut().for_each(|b| *b = 0);
    }
    data[0] = page;
    data[1] = (data.len() - 2) as u8;
    data
}

/// A command in the REPORT SUPPORTED OPERATION CODES table: opcode, service
/// action, and the CDB usage bitmap (its length is the CDB's).
struct Supported {
    opcode: u8,
    service_action: Option<u16>,
    usage: &'static [u8],
}

const SUPPORTED: &[Supported] = &[
    Supported::plain(0x00, &[0x00, 0, 0, 0, 0, 0x07]),
    Supported::plain(0x03, &[0x03, 0x01, 0, 0, 0xff, 0x07]),
    Supported::plain(0x08, &[0x08, 0x1f, 0xff, 0xff, 0xff, 0x07]),
    Supported::plain(0x0a, &[0x0a, 0x1f, 0xff, 0xff, 0xff, 0x07]),
    Supported::plain(0x12, &[0x12, 0x01, 0xff, 0xff, 0xff, 0x07]),
    Supported::plain(0x1a, &[0x1a, 0x08, 0xff, 0xff, 0xff, 0x07]),
    Supported::plain(
        0x25,
        &[0x25, 0x00, 0xff, 0xff, 0xff, 0xff, 0, 0, 0x01, 0x07],
    ),
    Supported::plain(
        0x28,
        &[0x28, 0x08, 0xff, 0xff, 0xff, 0xff, 0x1f, 0xff, 0xff, 0x07],
    ),
    Supported::plain(
        0x2a,
        &[0x2a, 0x08, 0xff, 0xff, 0xff, 0xff, 0x1f, 0xff, 0xff, 0x07],
    ),
    Supported::plain(
        0x35,
        &[0x35, 0x00, 0xff, 0xff, 0xff, 0xff, 0x1f, 0xff, 0xff, 0x07],
    ),
    Supported::plain(
        0x41,
        &[0x41, 0x08, 0xff, 0xff, 0xff, 0xff, 0x1f, 0xff, 0xff, 0x07],
    ),
    Supported::plain(0x42, &[0x42, 0x00, 0, 0, 0, 0, 0x1f, 0xff, 0xff, 0x07]),
    Supported::plain(0x5a, &[0x5a, 0x18, 0xff, 0xff, 0, 0, 0, 0xff, 0xff, 0x07]),
    Supported::plain(
        0x88,
        &[
            0x88, 0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
            0x1f, 0x07,
        ],
    ),
    Supported::plain(
        0x8a,
        &[
            0x8a, 0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
            0x1f, 0x07,
        ],
    ),
    Supported::plain(
        0x91,
        &[
            0x91, 0x00, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
            0x1f, 0x07,
        ],
    ),
    Supported::plain(
        0x93,
        &[
            0x93, 0x09, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
            0x1f, 0x07,
        ],
    ),
    Supported::with_action(
        0x9e,
        0x10,
        &[
            0x9e, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0x07,
        ],
    ),
    Supported::with_action(
        0x9e,
        0x12,
        &[
            0x9e, 0x12, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0,
            0x07,
        ],
    ),
    Supported::plain(
        0xa0,
        &[0xa0, 0, 0xff, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0x07],
    ),
    Supported::plain(
        0x2e,
        &[0x2e, 0x16, 0xff, 0xff, 0xff, 0xff, 0x1f, 0xff, 0xff, 0x07],
    ),
    Supported::plain(
        0x2f,
        &[0x2f, 0x16, 0xff, 0xff, 0xff, 0xff, 0x1f, 0xff, 0xff, 0x07],
    ),
    Supported::plain(
        0x34,
        &[0x34, 0x02, 0xff, 0xff, 0xff, 0xff, 0x1f, 0xff, 0xff, 0x07],
    ),
    Supported::plain(
        0xa8,
        &[
            0xa8, 0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x1f, 0x07,
        ],
    ),
    Supported::plain(
        0xaa,
        &[
            0xaa, 0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x1f, 0x07,
        ],
    ),
    Supported::plain(
        0xae,
        &[
            0xae, 0x16, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x1f, 0x07,
        ],
    ),
    Supported::plain(
        0xaf,
        &[
            0xaf, 0x16, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x1f, 0x07,
        ],
    ),
    Supported::plain(
        0x8e,
        &[
            0x8e, 0x16, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
            0x1f, 0x07,
        ],
    ),
    Supported::plain(
        0x8f,
        &[
            0x8f, 0x16, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
            0x1f, 0x07,
        ],
    ),
    Supported::plain(
        0x90,
        &[
            0x90, 0x02, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
            0x1f, 0x07,
        ],
    ),
    Supported::plain(
        0x89,
        &[
            0x89, 0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0xff, 0x1f, 0x07,
        ],
    ),
    Supported::with_action(0x5e, 0, &[0x5e, 0x00, 0, 0, 0, 0, 0, 0xff, 0xff, 0x07]),
    Supported::with_action(0x5e, 1, &[0x5e, 0x01, 0, 0, 0, 0, 0, 0xff, 0xff, 0x07]),
    Supported::with_action(0x5e, 2, &[0x5e, 0x02, 0, 0, 0, 0, 0, 0xff, 0xff, 0x07]),
    Supported::with_action(0x5e, 3, &[0x5e, 0x03, 0, 0, 0, 0, 0, 0xff, 0xff, 0x07]),
    Supported::with_action(
        0x5f,
        0,
        &[0x5f, 0x00, 0xff, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x07],
    ),
    Supported::with_action(
        0x5f,
        1,
        &[0x5f, 0x01, 0xff, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x07],
    ),
    Supported::with_action(
        0x5f,
        2,
        &[0x5f, 0x02, 0xff, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x07],
    ),
    Supported::with_action(
        0x5f,
        3,
        &[0x5f, 0x03, 0xff, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x07],
    ),
    Supported::with_action(
        0x5f,
        4,
        &[0x5f, 0x04, 0xff, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x07],
    ),
    Supported::with_action(
        0x5f,
        5,
        &[0x5f, 0x05, 0xff, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x07],
    ),
    Supported::with_action(
        0x5f,
        6,
        &[0x5f, 0x06, 0xff, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x07],
    ),
    Supported::with_action(
        0xa3,
        0x0c,
        &[
            0xa3, 0x0c, 0x87, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0x07,
        ],
    ),
];

impl Supported {
    const fn plain(opcode: u8, usage: &'static [u8]) -> Supported {
        Supported {
            opcode,
            service_action: None,
            usage,
        }
    }

    const fn with_action(opcode: u8, action: u16, usage: &'static [u8]) -> Supported {
        Supported {
            opcode,
            service_action: Some(action),
            usage,
        }
    }
}

/// The command timeouts descriptor (RCTD): no timeouts stated.
const TIMEOUTS: [u8; 12] = [0, 0x0a, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];

fn report_supported_operation_codes(cdb: &[u8; 16]) -> Result<Answer, Sense> {
    let timeouts = cdb[2] & 0x80 != 0;
    let options = cdb[2] & 0x07;
    let opcode = cdb[3];
    let action = be16(&cdb[4..6]);
    let allocation = be32(&cdb[6..10]) as usize;
    let data = match options {
        0 => all_commands(timeouts),
        1..=3 => one_command(options, opcode, action, timeouts)?,
        _ => return Err(Sense::INVALID_FIELD_IN_CDB),
    };
    Ok(allocated(data, allocation))
}

fn all_commands(timeouts: bool) -> Vec<u8> {
    let mut list = Vec::new();
    for command in SUPPORTED {
        let flags = u8::from(command.service_action.is_some()) | if timeouts { 0x02 } else { 0 };
        list.extend_from_slice(&[command.opcode, 0]);
        list.extend_from_slice(&command.service_action.unwrap_or(0).to_be_bytes());
        list.extend_from_slice(&[0, flags]);
        list.extend_from_slice(&(command.usage.len() as u16).to_be_bytes());
        if timeouts {
            list.extend_from_slice(&TIMEOUTS);
        }
    }
    let mut data = (list.len() as u32).to_be_bytes().to_vec();
    data.extend_from_slice(&list);
    data
}

fn one_command(options: u8, opcode: u8, action: u16, timeouts: bool) -> Result<Vec<u8>, Sense> {
    let mut named = SUPPORTED.iter().filter(|c| c.opcode == opcode).peekable();
    let known = named.peek().is_some();
    let has_action = SUPPORTED
        .iter()
        .any(|c| c.opcode == opcode && c.service_action.is_some());
    // Option 1 names an opcode without service actions, option 2 one with.
    if known && matches!((options, has_action), (1, true) | (2, false)) {
        return Err(Sense::INVALID_FIELD_IN_CDB);
    }
    let found = named.find(|c| c.service_action.is_none_or(|a| a == action));
    let timeouts_flag = if timeouts { 0x80 } else { 0 };
    let Some(command) = found else {
        // Not supported: support field 1, no usage data.
        return Ok(vec![0, timeouts_flag | 0x01, 0, 0]);
    };
    let mut data = vec![0, timeouts_flag | 0x03];
    data.extend_from_slice(&(command.usage.len() as u16).to_be_bytes());
    data.extend_from_slice(command.usage);
    if timeouts {
        data.extend_from_slice(&TIMEOUTS);
    }
    Ok(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(read_only: bool) -> LunInfo {
        LunInfo {
            number: 0,
            blocks: 2048,
            read_only,
            serial: "wafer0001".into(),
            id: 0x1234,
            access: Access::Full,
            resets: 0,
            thin: false,
        }
    }

    fn cdb(bytes: &[u8]) -> [u8; 16] {
        let mut cdb = [0u8; 16];
        cdb[..bytes.len()].copy_from_slice(bytes);
        cdb
    }

    fn answer(plan: Plan) -> Answer {
        match plan {
            Plan::Answer(answer) => answer,
            other => panic!("expected an answer, got {other:?}"),
        }
    }

    #[test]
    fn reads_and_writes_are_checked_against_the_lun() {
        let luns = [unit(false)];
        let read = plan(&cdb(&[0x28, 0, 0, 0, 0, 8, 0, 0, 4]), 0, &luns);
        assert_eq!(
            read,
            Plan::Read {
                offset: 4096,
                length: 2048
            }
        );
        let beyond = plan(&cdb(&[0x28, 0, 0, 0, 0x07, 0xfe, 0, 0, 4]), 0, &luns);
        assert_eq!(answer(beyond).sense, Some(Sense::LBA_OUT_OF_RANGE));
        let write16 = plan(
            &cdb(&[0x8a, 0x08, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2]),
            0,
            &luns,
        );
        assert_eq!(
            write16,
            Plan::Receive {
                bytes: 1024,
                then: DataOut::Write { offset: 512 }
            }
        );
        let protected = plan(&cdb(&[0x2a, 0, 0, 0, 0, 0, 0, 0, 1]), 0, &[unit(true)]);
        assert_eq!(answer(protected).sense, Some(Sense::WRITE_PROTECTED));
        let unknown_lun = plan(&cdb(&[0x00]), 3, &luns);
        assert_eq!(answer(unknown_lun).sense, Some(Sense::LUN_NOT_SUPPORTED));
        let bad_opcode = plan(&cdb(&[0xc7]), 0, &luns);
        assert_eq!(answer(bad_opcode).sense, Some(Sense::INVALID_OPCODE));
        let too_long = plan(
            &cdb(&[0x28, 0, 0, 0, 0, 0, 0, 0x40, 0x01]),
            0,
            &[LunInfo {
                blocks: 1 << 20,
                ..unit(false)
            }],
        );
        assert_eq!(answer(too_long).sense, Some(Sense::INVALID_FIELD_IN_CDB));
    }

    #[test]
    fn capacity_inquiry_and_vpd_pages_describe_the_lun() {
        let luns = [unit(false)];
        let capacity = answer(plan(
            &cdb(&[0x9e, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 32]),
            0,
            &luns,
        ));
        assert_eq!(be64(&capacity.data[..8]), 2047);
        assert_eq!(be32(&capacity.data[8..12]), 512);
        assert_eq!(capacity.data[14] & 0x80, 0x80);
        let pages = answer(plan(&cdb(&[0x12, 1, 0x00, 0, 255]), 0, &luns));
        assert_eq!(&pages.data[4..], &VPD_PAGES);
        for page in VPD_PAGES {
            let vpd = answer(plan(&cdb(&[0x12, 1, page, 0x10, 0]), 0, &luns));
            assert_eq!(vpd.data[1], page);
            assert_eq!(usize::from(be16(&vpd.data[2..4])) + 4, vpd.data.len());
        }
        let bad_page = answer(plan(&cdb(&[0x12, 1, 0x99, 0, 255]), 0, &luns));
        assert_eq!(bad_page.sense, Some(Sense::INVALID_FIELD_IN_CDB));
        let absent = answer(plan(&cdb(&[0x12, 0, 0, 0, 36]), 9, &luns));
        assert_eq!(absent.data[0], 0x7f);
        assert_eq!(absent.data.len(), 36);
    }

    #[test]
    fn unmap_and_write_same_become_trims_within_range() {
        let luns = [unit(false)];
        let mut list = vec![0, 22, 0, 16, 0, 0, 0, 0];
        list.extend_from_slice(&8u64.to_be_bytes());
        list.extend_from_slice(&16u32.to_be_bytes());
        list.extend_from_slice(&[0; 4]);
        let ops = with_data(DataOut::Unmap, list.clone(), &luns[0]).expect("valid list");
        assert_eq!(
            ops,
            vec![BlockOp::Trim {
                offset: 4096,
                length: 8192
            }]
        );
        list[8..16].copy_from_slice(&2040u64.to_be_bytes());
        assert_eq!(
            with_data(DataOut::Unmap, list, &luns[0]),
            Err(Sense::LBA_OUT_OF_RANGE)
        );
        let same = with_data(
            DataOut::WriteSame {
                offset: 0,
                blocks: 3,
                provision: false,
            },
            vec![7u8; 512],
            &luns[0],
        );
        let Ok(ops) = same else { panic!("a write") };
        assert!(matches!(&ops[0], BlockOp::Write { data, .. } if data.len() == 1536));
        // Zeros: a trim, but on a thin LUN without UNMAP they are written.
        let thin = LunInfo {
            thin: true,
            ..unit(false)
        };
        for (unit, byte1, trimmed) in [(&luns[0], 0, true), (&thin, 0, false), (&thin, 0x08, true)]
        {
            let ndob = cdb(&[0x93, byte1 | 0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
            let Plan::Execute(ops) = plan(&ndob, 0, core::slice::from_ref(unit)) else {
                panic!("zeros sent as nothing are carried out at once");
            };
            let expected = match trimmed {
                true => BlockOp::Trim {
                    offset: 0,
                    length: 1024,
                },
                false => BlockOp::Write {
                    offset: 0,
                    data: vec![0; 1024],
                },
            };
            assert_eq!(ops, vec![expected], "thin {} byte 1 {byte1:#x}", unit.thin);
        }
        let zero_length = plan(&cdb(&[0x41, 0x08, 0, 0, 0, 0, 0, 0, 0]), 0, &luns);
        assert_eq!(answer(zero_length).sense, Some(Sense::INVALID_FIELD_IN_CDB));
    }

    #[test]
    fn lba_status_describes_each_run_from_the_lba_asked_for() {
        let luns = [unit(false)];
        assert_eq!(
            plan(&cdb_at(2040), 0, &luns),
            Plan::Status {
                lba: 2040,
                length: 4096,
                allocation: 64
            }
        );
        let runs = [
            Run {
                length: 1024,
                data: false,
            },
            Run {
                length: 3072,
                data: true,
            },
        ];
        let status = lba_status(2040, &runs, 64);
        assert_eq!(be32(&status.data[..4]), 36);
        assert_eq!(
            (be64(&status.data[8..16]), be32(&status.data[16..20])),
            (2040, 2)
        );
        assert_eq!(status.data[20], 1, "deallocated");
        assert_eq!(
            (be64(&status.data[24..32]), be32(&status.data[32..36])),
            (2042, 6)
        );
        assert_eq!(status.data[36], 0, "mapped");
        assert_eq!(lba_status(2040, &runs, 20).data.len(), 20);
        let beyond = plan(&cdb_at(2048), 0, &luns);
        assert_eq!(answer(beyond).sense, Some(Sense::LBA_OUT_OF_RANGE));
    }

    fn cdb_at(lba: u64) -> [u8; 16] {
        let mut bytes = [0u8; 16];
        bytes[0] = 0x9e;
        bytes[1] = 0x12;
        bytes[2..10].copy_from_slice(&lba.to_be_bytes());
        bytes[13] = 64;
        bytes
    }

    #[test]
    fn report_luns_and_lun_fields_agree() {
        let luns = [
            unit(false),
            LunInfo {
                number: 300,
                ..unit(false)
            },
        ];
        let report = answer(plan(&cdb(&[0xa0, 0, 0, 0, 0, 0, 0, 0, 1, 0]), 7, &luns));
        assert_eq!(be32(&report.data[..4]), 16);
        assert_eq!(lun_number(be64(&report.data[8..16])), Some(0));
        assert_eq!(lun_number(be64(&report.data[16..24])), Some(300));
        assert_eq!(lun_number(1), None);
        let short = answer(plan(&cdb(&[0xa0, 0, 0, 0, 0, 0, 0, 0, 0, 8]), 0, &luns));
        assert_eq!(short.sense, Some(Sense::INVALID_FIELD_IN_CDB));
    }

    #[test]
    fn mode_sense_and_supported_opcodes_answer_within_allocation() {
        let luns = [unit(true)];
        let all = answer(plan(&cdb(&[0x1a, 0, 0x3f, 0, 255]), 0, &luns));
        assert_eq!(usize::from(all.data[0]) + 1, all.data.len());
        assert_eq!(all.data[2] & 0x80, 0x80, "write protected");
        let saved = answer(plan(&cdb(&[0x5a, 0, 0xc8, 0, 0, 0, 0, 0, 255]), 0, &luns));
        assert_eq!(saved.sense, Some(Sense::SAVING_NOT_SUPPORTED));
        let list = answer(plan(&cdb(&[0xa3, 0x0c, 0, 0, 0, 0, 0, 0, 4, 0]), 0, &luns));
        assert_eq!(be32(&list.data[..4]) as usize, 8 * SUPPORTED.len());
        let one = answer(plan(
            &cdb(&[0xa3, 0x0c, 1, 0x28, 0, 0, 0, 0, 1, 0]),
            0,
            &luns,
        ));
        assert_eq!(one.data[1] & 0x07, 3);
        assert_eq!(one.data[4], 0x28);
        let truncated = answer(plan(&cdb(&[0xa3, 0x0c, 0, 0, 0, 0, 0, 0, 0, 6]), 0, &luns));
        assert_eq!(truncated.data.len(), 6);
    }
}
