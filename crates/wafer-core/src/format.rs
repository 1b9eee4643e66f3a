//! The on-disk format: block trailers, block pointers, inodes and superblocks.
//!
//! Every block on disk is 4096 bytes of content plus a 64-byte trailer kept
//! beside it (a 4160-byte sector image). The trailer holds a CRC-32C of the
//! content and the block's identity: its physical and volume block numbers, the
//! volume, file, file block number and tree level it belongs to, and the CP that
//! wrote it. A read compares the identity with what the parent pointer and the
//! tree position expect, so bit rot, torn writes, lost writes and misdirected
//! writes all show as a mismatch, which RAID then repairs.
//!
//! A block pointer is a `(pvbn, vvbn)` pair plus the low 32 bits of the CP that
//! wrote the child (its *birth*) and the CRC-32C of the child's content. The
//! checksum in the parent is what lets a block rebuilt from parity be verified
//! (the trailer lives beside the block, outside parity, and is lost with it);
//! the trailer's identity is what exposes a misdirected or lost write. All
//! integers are little-endian. Decoders validate everything and never panic;
//! byte diagrams are in `docs/FORMAT.md`.

use crate::units::{AggrId, CpCount, Fbn, FileId, Pvbn, VolumeId, Vvbn};
use crate::{BLOCK_SIZE, Block};

/// Bytes of the trailer kept beside each block.
pub const TRAILER_SIZE: usize = 64;
/// Bytes of one encoded inode.
pub const INODE_SIZE: usize = 256;
/// Inodes in one inode-file block.
pub const INODES_PER_BLOCK: usize = BLOCK_SIZE / INODE_SIZE;
/// Bytes of one encoded block pointer.
pub const POINTER_SIZE: usize = 24;
/// Words of one encoded block pointer.
pub const POINTER_WORDS: usize = POINTER_SIZE / 8;
/// Pointers in one indirect block.
pub const POINTERS_PER_BLOCK: usize = BLOCK_SIZE / POINTER_SIZE;
/// Pointers held in an inode itself (the top of its block tree).
pub const ROOT_POINTERS: usize = 8;
/// Little-endian 64-bit words in one block.
pub const WORDS_PER_BLOCK: usize = BLOCK_SIZE / 8;
/// A metadata block as the words it encodes: map blocks, container-map
/// blocks and indirect blocks are all little-endian `u64`s, so a stamp filer
/// can digest them without laying out the bytes.
pub type BlockWords = [u64; WORDS_PER_BLOCK];
/// Longest LUN or volume name, in bytes of UTF-8.
pub const NAME_MAX: usize = 48;
/// Most snapshots per volume (ids 1 to 255 in the snapinfo file).
pub const MAX_SNAPSHOTS: usize = 255;

/// The first four bytes of every trailer wafer writes (little-endian "RTFW").
pub const TRAILER_MAGIC: u32 = 0x5746_5452;
const SUPERBLOCK_MAGIC: u64 = 0x3142_5352_4546_4157; // "WAFERSB1"
const FORMAT_VERSION: u32 = 1;

/// Why a block or structure failed to decode or verify.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FormatError {
    /// The trailer's magic number is wrong: the sector was never written by wafer.
    #[error("no wafer trailer")]
    NoTrailer,
    /// The content does not match the trailer's checksum.
    #[error("checksum mismatch")]
    Checksum,
    /// The block is intact but is not the block the pointer expected.
    #[error("identity mismatch: found {found:?}, expected {expected:?}")]
    Identity {
        /// What the trailer says.
        found: Box<Identity>,
        /// What the reader expected.
        expected: Box<Identity>,
    },
    /// A structure's magic number or version is unknown.
    #[error("not a wafer {what} (bad magic or version)")]
    BadMagic {
        /// The structure being decoded.
        what: &'static str,
    },
    /// A field holds a value the format does not allow.
    #[error("corrupt {what}: {detail}")]
    Corrupt {
        /// The structure being decoded.
        what: &'static str,
        /// What was wrong.
        detail: String,
    },
}

/// What a block is: where it sits and which CP wrote it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Identity {
    /// The aggregate block it was written to.
    pub pvbn: Pvbn,
    /// Its volume block number (equal to `pvbn` for aggregate metadata).
    pub vvbn: Vvbn,
    /// The volume it belongs to ([`AGGREGATE_VOLUME`] for aggregate metadata).
    pub volume: VolumeId,
    /// The file within that volume.
    pub file: FileId,
    /// Its index among the blocks of its tree level.
    pub fbn: Fbn,
    /// Tree level: 0 for file content, 1 and up for indirect blocks.
    pub level: u8,
    /// The CP that wrote it.
    pub cp: CpCount,
}

/// The pseudo-volume that owns the aggregate's own metadata files.
pub const AGGREGATE_VOLUME: VolumeId = VolumeId(u32::MAX);

/// The 64 bytes stored beside a block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Trailer {
    checksum: u32,
    /// The identity the block was written with.
    pub identity: Identity,
}

impl Trailer {
    /// The trailer for content whose checksum (`Payload::checksum`) is
    /// `content_sum`, written with `identity`.
    pub fn new(content_sum: u32, identity: Identity) -> Trailer {
        let mut trailer = Trailer {
            checksum: 0,
            identity,
        };
        trailer.checksum = trailer.compute_checksum(content_sum);
        trailer
    }

    /// Encodes the trailer.
    pub fn encode(&self) -> [u8; TRAILER_SIZE] {
        let mut out = [0u8; TRAILER_SIZE];
        put_u32(&mut out, 0, TRAILER_MAGIC);
        put_u32(&mut out, 4, self.checksum);
        self.encode_identity(&mut out);
        out
    }

    /// Decodes a trailer, checking only its magic number.
    pub fn decode(bytes: &[u8; TRAILER_SIZE]) -> Result<Trailer, FormatError> {
        if get_u32(bytes, 0) != TRAILER_MAGIC {
            return Err(FormatError::NoTrailer);
        }
        Ok(Trailer {
            checksum: get_u32(bytes, 4),
            identity: Identity {
                pvbn: Pvbn(get_u64(bytes, 8)),
                vvbn: Vvbn(get_u64(bytes, 16)),
                volume: VolumeId(get_u32(bytes, 24)),
                file: FileId(get_u32(bytes, 28)),
                fbn: Fbn(get_u64(bytes, 32)),
                level: bytes[40],
                cp: CpCount(get_u64(bytes, 48)),
            },
        })
    }

    /// Whether content summing to `content_sum` is what this trailer's
    /// checksum describes.
    pub fn matches(&self, content_sum: u32) -> bool {
        self.checksum == self.compute_checksum(content_sum)
    }

    /// The trailer's own checksum: of the content's checksum and the whole
    /// identity together, so two trailers for the same content differ in it
    /// wherever their identities differ.
    pub fn sum(&self) -> u32 {
        self.checksum
    }

    /// Checks the content's checksum against the trailer, then the trailer against the
    /// identity the reader expected. `expected.cp` is compared in its low 32
    /// bits, the part a block pointer records.
    pub fn verify(&self, content_sum: u32, expected: &Identity) -> Result<(), FormatError> {
        if !self.matches(content_sum) {
            return Err(FormatError::Checksum);
        }
        let found = self.identity;
        let same = found.pvbn == expected.pvbn
            && found.vvbn == expected.vvbn
            && found.volume == expected.volume
            && found.file == expected.file
            && found.fbn == expected.fbn
            && found.level == expected.level
            && found.cp.0 as u32 == expected.cp.0 as u32;
        match same {
            true => Ok(()),
            false => Err(FormatError::Identity {
                found: Box::new(found),
                expected: Box::new(*expected),
            }),
        }
    }

    fn encode_identity(&self, out: &mut [u8; TRAILER_SIZE]) {
        let id = &self.identity;
        put_u64(out, 8, id.pvbn.0);
        put_u64(out, 16, id.vvbn.0);
        put_u32(out, 24, id.volume.0);
        put_u32(out, 28, id.file.0);
        put_u64(out, 32, id.fbn.0);
        out[40] = id.level;
        put_u64(out, 48, id.cp.0);
    }

    fn compute_checksum(&self, content_sum: u32) -> u32 {
        let mut identity = [0u8; TRAILER_SIZE];
        self.encode_identity(&mut identity);
        crc32c::crc32c_append(content_sum, &identity[8..])
    }
}

/// A pointer from a parent to a child block: where it is, when it was born, and
/// what its content sums to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BlockPtr {
    /// The child's aggregate block; 0 (a superblock address) means "no block".
    pub pvbn: Pvbn,
    /// The child's volume block (equal to `pvbn` for aggregate metadata).
    pub vvbn: Vvbn,
    /// The low 32 bits of the CP that wrote the child.
    pub birth: u32,
    /// CRC-32C of the child's 4 KiB content.
    pub checksum: u32,
}

impl BlockPtr {
    /// The pointer to nothing: a hole, read as zeros.
    pub const NULL: BlockPtr = BlockPtr {
        pvbn: Pvbn(0),
        vvbn: Vvbn(0),
        birth: 0,
        checksum: 0,
    };

    /// Whether this pointer names no block.
    pub fn is_null(&self) -> bool {
        self.pvbn.0 == 0
    }

    /// Encodes into [`POINTER_SIZE`] bytes: [`BlockPtr::words`], little-endian.
    pub fn encode(&self, out: &mut [u8]) {
        for (at, word) in self.words().into_iter().enumerate() {
            put_u64(out, at * 8, word);
        }
    }

    /// The pointer as the little-endian words it encodes to: pvbn, vvbn,
    /// then birth in the low half and checksum in the high half.
    pub fn words(&self) -> [u64; POINTER_WORDS] {
        let tail = u64::from(self.birth) | u64::from(self.checksum) << 32;
        [self.pvbn.0, self.vvbn.0, tail]
    }

    /// Decodes [`POINTER_SIZE`] bytes.
    pub fn decode(bytes: &[u8]) -> BlockPtr {
        BlockPtr {
            pvbn: Pvbn(get_u64(bytes, 0)),
            vvbn: Vvbn(get_u64(bytes, 8)),
            birth: get_u32(bytes, 16),
            checksum: get_u32(bytes, 20),
        }
    }

    /// Whether content summing to `content_sum` is what the pointer's
    /// checksum describes.
    pub fn matches(&self, content_sum: u32) -> bool {
        content_sum == self.checksum
    }

    /// The CP that wrote the child, whole: the latest CP up to `latest`
    /// whose low 32 bits are the pointer's `birth` (a pointer is never newer
    /// than the image holding it, and 2^32 CPs are centuries).
    pub fn birth_cp(&self, latest: CpCount) -> CpCount {
        let age = (latest.0 as u32).wrapping_sub(self.birth);
        latest
            .0
            .checked_sub(u64::from(age))
            .map_or(CpCount(u64::from(self.birth)), CpCount)
    }

    /// The identity a block reached through this pointer must carry.
    pub fn expected_identity(
        &self,
        volume: VolumeId,
        file: FileId,
        level: u8,
        fbn: Fbn,
    ) -> Identity {
        Identity {
            pvbn: self.pvbn,
            vvbn: self.vvbn,
            volume,
            file,
            fbn,
            level,
            cp: CpCount(u64::from(self.birth)),
        }
    }
}

/// What an inode describes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InodeKind {
    /// An unused inode slot.
    Free,
    /// A LUN: a file presented to hosts as a block device.
    Lun,
    /// One of the file system's own metadata files.
    Metadata,
}

/// A file's inode: its size and the top of its block tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Inode {
    /// What the file is.
    pub kind: InodeKind,
    /// Height of the block tree: 0 when the root pointers name content blocks.
    pub level: u8,
    /// Bumped each time the slot is reused, so stale references are detectable.
    pub generation: u32,
    /// The file's size in bytes.
    pub size_bytes: u64,
    /// The file's name (LUNs), empty for metadata files.
    pub name: String,
    /// What a LUN promises its host; [`LunAttributes::DEFAULT`] for
    /// metadata files.
    pub attributes: LunAttributes,
    /// The top of the block tree.
    pub root: [BlockPtr; ROOT_POINTERS],
}

impl Inode {
    /// An unused inode.
    pub fn free() -> Inode {
        Inode {
            kind: InodeKind::Free,
            level: 0,
            generation: 0,
            size_bytes: 0,
            name: String::new(),
            attributes: LunAttributes::DEFAULT,
            root: [BlockPtr::NULL; ROOT_POINTERS],
        }
    }

    /// Encodes into [`INODE_SIZE`] bytes.
    pub fn encode(&self, out: &mut [u8]) {
        assert!(self.name.len() <= NAME_MAX, "name over {NAME_MAX} bytes");
        out[..INODE_SIZE].fill(0);
        out[0] = match self.kind {
            InodeKind::Free => 0,
            InodeKind::Lun => 1,
            InodeKind::Metadata => 2,
        };
        out[1] = self.level;
        [out[2], out[3]] = self.attributes.encode();
        put_u32(out, 4, self.generation);
        put_u64(out, 8, self.size_bytes);
        out[16..16 + self.name.len()].copy_from_slice(self.name.as_bytes());
        for (slot, ptr) in self.root.iter().enumerate() {
            ptr.encode(&mut out[64 + slot * POINTER_SIZE..]);
        }
    }

    /// Decodes [`INODE_SIZE`] bytes.
    pub fn decode(bytes: &[u8]) -> Result<Inode, FormatError> {
        let corrupt = |detail: String| FormatError::Corrupt {
            what: "inode",
            detail,
        };
        if bytes.len() < INODE_SIZE {
            return Err(corrupt(format!("{} bytes", bytes.len())));
        }
        let kind = match bytes[0] {
            0 => InodeKind::Free,
            1 => InodeKind::Lun,
            2 => InodeKind::Metadata,
            other => return Err(corrupt(format!("kind {other}"))),
        };
        let level = bytes[1];
        if level > MAX_TREE_LEVEL {
            return Err(corrupt(format!("tree level {level}")));
        }
        let attributes = LunAttributes::decode([bytes[2], bytes[3]]).map_err(corrupt)?;
        let name_bytes = &bytes[16..16 + NAME_MAX];
        let name_len = name_bytes.iter().position(|&b| b == 0).unwrap_or(NAME_MAX);
        let name = core::str::from_utf8(&name_bytes[..name_len])
            .map_err(|_| corrupt("name is not UTF-8".to_string()))?
            .to_string();
        let mut root = [BlockPtr::NULL; ROOT_POINTERS];
        for (slot, ptr) in root.iter_mut().enumerate() {
            *ptr = BlockPtr::decode(&bytes[64 + slot * POINTER_SIZE..]);
        }
        Ok(Inode {
            kind,
            level,
            generation: get_u32(bytes, 4),
            size_bytes: get_u64(bytes, 8),
            name,
            attributes,
            root,
        })
    }
}

/// The operating system a LUN is formatted for (ONTAP's `-t ostype`): it
/// names the host's partition layout. wafer stores and reports it; the
/// blocks a host sees do not depend on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum OsType {
    /// No partition layout assumed: a raw image.
    Image,
    /// Solaris with a VTOC label.
    Solaris,
    /// Windows with an MBR.
    Windows,
    /// HP-UX.
    Hpux,
    /// AIX.
    Aix,
    /// Linux.
    Linux,
    /// NetWare.
    Netware,
    /// VMware ESX/ESXi (VMFS).
    Vmware,
    /// Windows with a GUID partition table.
    WindowsGpt,
    /// Windows Server 2008 and later.
    Windows2008,
    /// OpenVMS.
    Openvms,
    /// Xen.
    Xen,
    /// Hyper-V.
    HyperV,
    /// Solaris with an EFI label.
    SolarisEfi,
}

impl OsType {
    /// Every OS type, in the order of their codes.
    pub const ALL: [OsType; 14] = [
        OsType::Image,
        OsType::Solaris,
        OsType::Windows,
        OsType::Hpux,
        OsType::Aix,
        OsType::Linux,
        OsType::Netware,
        OsType::Vmware,
        OsType::WindowsGpt,
        OsType::Windows2008,
        OsType::Openvms,
        OsType::Xen,
        OsType::HyperV,
        OsType::SolarisEfi,
    ];

    /// ONTAP's name for it, as `lun create -t` takes it and `lun show -v`
    /// prints it (`Multiprotocol Type`).
    pub fn name(self) -> &'static str {
        match self {
            OsType::Image => "image",
            OsType::Solaris => "solaris",
            OsType::Windows => "windows",
            OsType::Hpux => "hpux",
            OsType::Aix => "aix",
            OsType::Linux => "linux",
            OsType::Netware => "netware",
            OsType::Vmware => "vmware",
            OsType::WindowsGpt => "windows_gpt",
            OsType::Windows2008 => "windows_2008",
            OsType::Openvms => "openvms",
            OsType::Xen => "xen",
            OsType::HyperV => "hyper_v",
            OsType::SolarisEfi => "solaris_efi",
        }
    }

    /// The OS type ONTAP calls `name`.
    pub fn from_name(name: &str) -> Option<OsType> {
        OsType::ALL.into_iter().find(|t| t.name() == name)
    }

    /// Its code on disk and in the NVLog.
    pub fn code(self) -> u8 {
        OsType::ALL
            .iter()
            .position(|&t| t == self)
            .expect("every OS type is listed") as u8
    }

    /// The OS type coded `code`.
    pub fn from_code(code: u8) -> Option<OsType> {
        OsType::ALL.get(usize::from(code)).copied()
    }
}

impl core::fmt::Display for OsType {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

/// What a LUN promises its host beyond its blocks: whether its whole size is
/// reserved in its volume (ONTAP's space reservation; without it the LUN is
/// thin and a write needing a new block fails when the volume is full), and
/// its OS type. Two bytes on disk: flags (bit 0 set: no reservation), then
/// the OS type's code; all zero is a reserved `image` LUN, which is what
/// every LUN was before LUNs had attributes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LunAttributes {
    /// Whether the LUN's size is reserved in its volume.
    pub space_reserved: bool,
    /// The host's OS type.
    pub ostype: OsType,
}

impl LunAttributes {
    /// A space-reserved `image` LUN.
    pub const DEFAULT: LunAttributes = LunAttributes {
        space_reserved: true,
        ostype: OsType::Image,
    };

    /// The two bytes that record it.
    pub fn encode(self) -> [u8; 2] {
        [u8::from(!self.space_reserved), self.ostype.code()]
    }

    /// The attributes two bytes record.
    pub fn decode([flags, ostype]: [u8; 2]) -> Result<LunAttributes, String> {
        if flags > 1 {
            return Err(format!("LUN flags {flags:#x}"));
        }
        let ostype = OsType::from_code(ostype).ok_or(format!("OS type code {ostype}"))?;
        Ok(LunAttributes {
            space_reserved: flags == 0,
            ostype,
        })
    }
}

/// The tallest block tree the format allows: 8 × 256^5 blocks, far beyond any
/// address the 48-bit block numbers can reach.
pub const MAX_TREE_LEVEL: u8 = 5;

/// One RAID group as the superblock records it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupRecord {
    /// Whether the group is on SSDs: a Flash Pool cache group (0 on disks
    /// written before hybrid aggregates, so HDD).
    pub ssd: bool,
    /// Whether the group is RAID-DP (else RAID-4).
    pub raid_dp: bool,
    /// Disks in the group.
    pub group_size: u16,
    /// Blocks per disk.
    pub blocks_per_disk: u64,
}

/// The root of the aggregate: the only structure at a fixed address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Superblock {
    /// The CP this superblock commits.
    pub cp: CpCount,
    /// The RAID groups of the aggregate, in pvbn order.
    pub groups: Vec<GroupRecord>,
    /// Spare disks of the aggregate.
    pub spares: u32,
    /// The aggregate's active map file.
    pub activemap: Inode,
    /// The aggregate's volume table file (each volume's roots).
    pub volumes: Inode,
    /// A disk being rebuilt onto a spare, and how far.
    pub rebuild: Option<RebuildRecord>,
    /// The aggregate's identifier within its node (0 on disks written
    /// before nodes served several aggregates, where the bytes were zero).
    pub aggregate: AggrId,
    /// The aggregate's name (`aggr0` where none was recorded).
    pub name: String,
    /// One past the NVLog sequence number of the last record a mount
    /// replayed into this image or an older one (0: none): a later mount
    /// replays only records from it on, whatever their generation says.
    pub replayed_below: u64,
    /// Taken offline by the administrator: a mount brings it up offline
    /// (false on disks written before the state was recorded, where the
    /// byte was zero).
    pub offline: bool,
    /// `hybrid_enabled`: SSD groups may be added (false where the byte was zero).
    pub hybrid: bool,
}

/// A reconstruction in progress, as the superblock records it: the disk in
/// slot (`group`, `disk`) holds valid blocks below stripe `cursor` only.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RebuildRecord {
    /// The RAID group.
    pub group: u16,
    /// The disk's position in the group.
    pub disk: u16,
    /// The first stripe not rebuilt yet.
    pub cursor: u64,
}

/// Most RAID groups one aggregate may hold (what one superblock block records).
pub const MAX_GROUPS: usize = 64;
/// The superblock's bytes covered by its hash, stored in the 8 bytes after them.
const SUPERBLOCK_HASHED: usize = BLOCK_SIZE - 8;

/// FNV-1a, 64 bits: the superblock's self-check. A CRC will not do here: CRCs
/// are linear, so the XOR of an odd number of valid superblocks (which is
/// what rebuilding a copy from a stripe of mixed copies and parity yields)
/// carries a valid CRC of its own. Multiplication breaks that.
pub fn fnv1a_64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}
const GROUP_RECORDS_AT: usize = 1024;
const REBUILD_AT: usize = 800;
const STATE_AT: usize = 816;
const HYBRID_AT: usize = STATE_AT + 1;
const REPLAYED_BELOW_AT: usize = 824;
const AGGREGATE_AT: usize = 832;
const NAME_AT: usize = 840;
/// The name an aggregate has when its superblock records none.
pub const DEFAULT_AGGREGATE_NAME: &str = "aggr0";

impl Superblock {
    /// Encodes into one block, with its own checksum in the last 4 bytes.
    pub fn encode(&self) -> Block {
        assert!(self.groups.len() <= MAX_GROUPS, "too many RAID groups");
        let mut out = [0u8; BLOCK_SIZE];
        put_u64(&mut out, 0, SUPERBLOCK_MAGIC);
        put_u32(&mut out, 8, FORMAT_VERSION);
        put_u64(&mut out, 16, self.cp.0);
        put_u32(&mut out, 24, self.groups.len() as u32);
        put_u32(&mut out, 28, self.spares);
        self.activemap.encode(&mut out[32..32 + INODE_SIZE]);
        self.volumes
            .encode(&mut out[32 + INODE_SIZE..32 + 2 * INODE_SIZE]);
        if let Some(rebuild) = self.rebuild {
            out[REBUILD_AT] = 1;
            put_u16(&mut out, REBUILD_AT + 2, rebuild.group);
            put_u16(&mut out, REBUILD_AT + 4, rebuild.disk);
            put_u64(&mut out, REBUILD_AT + 8, rebuild.cursor);
        }
        out[STATE_AT] = u8::from(self.offline);
        out[HYBRID_AT] = u8::from(self.hybrid);
        put_u64(&mut out, REPLAYED_BELOW_AT, self.replayed_below);
        assert!(self.name.len() <= NAME_MAX, "aggregate name too long");
        put_u32(&mut out, AGGREGATE_AT, self.aggregate.0);
        out[AGGREGATE_AT + 4] = self.name.len() as u8;
        out[NAME_AT..NAME_AT + self.name.len()].copy_from_slice(self.name.as_bytes());
        for (n, group) in self.groups.iter().enumerate() {
            let at = GROUP_RECORDS_AT + n * 16;
            out[at] = u8::from(group.raid_dp);
            out[at + 1] = u8::from(group.ssd);
            put_u16(&mut out, at + 2, group.group_size);
            put_u64(&mut out, at + 8, group.blocks_per_disk);
        }
        let hash = fnv1a_64(&out[..SUPERBLOCK_HASHED]);
        put_u64(&mut out, SUPERBLOCK_HASHED, hash);
        out
    }

    /// Decodes and validates a superblock block.
    pub fn decode(block: &Block) -> Result<Superblock, FormatError> {
        if get_u64(block, 0) != SUPERBLOCK_MAGIC || get_u32(block, 8) != FORMAT_VERSION {
            return Err(FormatError::BadMagic { what: "superblock" });
        }
        if fnv1a_64(&block[..SUPERBLOCK_HASHED]) != get_u64(block, SUPERBLOCK_HASHED) {
            return Err(FormatError::Checksum);
        }
        let group_count = get_u32(block, 24) as usize;
        if group_count == 0 || group_count > MAX_GROUPS {
            return Err(FormatError::Corrupt {
                what: "superblock",
                detail: format!("{group_count} RAID groups"),
            });
        }
        let groups = (0..group_count)
            .map(|n| {
                let at = GROUP_RECORDS_AT + n * 16;
                GroupRecord {
                    ssd: block[at + 1] != 0,
                    raid_dp: block[at] != 0,
                    group_size: get_u16(block, at + 2),
                    blocks_per_disk: get_u64(block, at + 8),
                }
            })
            .collect();
        let rebuild = (block[REBUILD_AT] == 1).then(|| RebuildRecord {
            group: get_u16(block, REBUILD_AT + 2),
            disk: get_u16(block, REBUILD_AT + 4),
            cursor: get_u64(block, REBUILD_AT + 8),
        });
        let name_len = usize::from(block[AGGREGATE_AT + 4]).min(NAME_MAX);
        let name = match std::str::from_utf8(&block[NAME_AT..NAME_AT + name_len]) {
            Ok("") => DEFAULT_AGGREGATE_NAME.to_string(),
            Ok(name) => name.to_string(),
            Err(_) => {
                return Err(FormatError::Corrupt {
                    what: "superblock",
                    detail: "the aggregate's name is not UTF-8".into(),
                });
            }
        };
        let offline = match block[STATE_AT] {
            0 => false,
            1 => true,
            state => {
                return Err(FormatError::Corrupt {
                    what: "superblock",
                    detail: format!("aggregate state {state}"),
                });
            }
        };
        let hybrid = match block[HYBRID_AT] {
            0 => false,
            1 => true,
            flag => {
                return Err(FormatError::Corrupt {
                    what: "superblock",
                    detail: format!("hybrid_enabled {flag}"),
                });
            }
        };
        Ok(Superblock {
            hybrid,
            aggregate: AggrId(get_u32(block, AGGREGATE_AT)),
            name,
            replayed_below: get_u64(block, REPLAYED_BELOW_AT),
            offline,
            cp: CpCount(get_u64(block, 16)),
            rebuild,
            groups,
            spares: get_u32(block, 28),
            activemap: Inode::decode(&block[32..32 + INODE_SIZE])?,
            volumes: Inode::decode(&block[32 + INODE_SIZE..32 + 2 * INODE_SIZE])?,
        })
    }
}

/// Writes a little-endian `u16` at `at`.
pub fn put_u16(out: &mut [u8], at: usize, value: u16) {
    out[at..at + 2].copy_from_slice(&value.to_le_bytes());
}

/// Writes a little-endian `u32` at `at`.
pub fn put_u32(out: &mut [u8], at: usize, value: u32) {
    out[at..at + 4].copy_from_slice(&value.to_le_bytes());
}

/// Writes a little-endian `u64` at `at`.
pub fn put_u64(out: &mut [u8], at: usize, value: u64) {
    out[at..at + 8].copy_from_slice(&value.to_le_bytes());
}

/// The bytes of a block of little-endian words.
pub fn block_from_words(words: &BlockWords) -> Box<Block> {
    let mut out = Box::new([0u8; BLOCK_SIZE]);
    for (bytes, word) in out.chunks_exact_mut(8).zip(words) {
        bytes.copy_from_slice(&word.to_le_bytes());
    }
    out
}

/// Reads a little-endian `u16` at `at`.
pub fn get_u16(bytes: &[u8], at: usize) -> u16 {
    u16::from_le_bytes(bytes[at..at + 2].try_into().expect("two bytes"))
}

/// Reads a little-endian `u32` at `at`.
pub fn get_u32(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().expect("four bytes"))
}

/// Reads a little-endian `u64` at `at`.
pub fn get_u64(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().expect("eight bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lun_attributes_round_trip_through_an_inode_and_zeros_mean_reserved_image() {
        for ostype in OsType::ALL {
            assert_eq!(OsType::from_name(ostype.name()), Some(ostype));
            for space_reserved in [true, false] {
                let attributes = LunAttributes {
                    space_reserved,
                    ostype,
                };
                let inode = Inode {
                    kind: InodeKind::Lun,
                    name: "lun".into(),
                    attributes,
                    ..Inode::free()
                };
                let mut bytes = [0u8; INODE_SIZE];
                inode.encode(&mut bytes);
                assert_eq!(Inode::decode(&bytes).expect("decodes"), inode);
            }
        }
        assert_eq!(LunAttributes::decode([0, 0]), Ok(LunAttributes::DEFAULT));
        assert!(LunAttributes::decode([2, 0]).is_err(), "an unknown flag");
        let codes = OsType::ALL.len() as u8;
        assert!(
            LunAttributes::decode([0, codes]).is_err(),
            "an unknown OS type"
        );
    }

    fn identity() -> Identity {
        Identity {
            pvbn: Pvbn(123_456),
            vvbn: Vvbn(789),
            volume: VolumeId(3),
            file: FileId(64),
            fbn: Fbn(1_000_000),
            level: 1,
            cp: CpCount(0x1_2345_6789),
        }
    }

    #[test]
    fn a_trailer_round_trips_and_verifies_its_block() {
        let content = [0x5au8; BLOCK_SIZE];
        let trailer = Trailer::new(crc32c::crc32c(&content), identity());
        let decoded = Trailer::decode(&trailer.encode()).expect("valid trailer");
        assert_eq!(decoded, trailer);
        assert_eq!(
            decoded.verify(crc32c::crc32c(&content), &identity()),
            Ok(())
        );
    }

    #[test]
    fn a_flipped_bit_or_a_different_identity_fails_verification() {
        let mut content = [0x5au8; BLOCK_SIZE];
        let trailer = Trailer::new(crc32c::crc32c(&content), identity());
        let older = Identity {
            cp: CpCount(identity().cp.0 - 1),
            ..identity()
        };
        assert!(matches!(
            trailer.verify(crc32c::crc32c(&content), &older),
            Err(FormatError::Identity { .. })
        ));
        content[4095] ^= 1;
        assert_eq!(
            trailer.verify(crc32c::crc32c(&content), &identity()),
            Err(FormatError::Checksum)
        );
        assert_eq!(
            Trailer::decode(&[0u8; TRAILER_SIZE]),
            Err(FormatError::NoTrailer)
        );
    }

    #[test]
    fn a_block_pointer_round_trips_and_checks_content() {
        let content = [9u8; BLOCK_SIZE];
        let ptr = BlockPtr {
            pvbn: Pvbn(u64::MAX >> 1),
            vvbn: Vvbn(0x0000_8000_0000_0001),
            birth: 0xdead_beef,
            checksum: crc32c::crc32c(&content),
        };
        let mut bytes = [0u8; POINTER_SIZE];
        ptr.encode(&mut bytes);
        assert_eq!(BlockPtr::decode(&bytes), ptr);
        assert!(BlockPtr::decode(&[0u8; POINTER_SIZE]).is_null());
        assert!(ptr.matches(crc32c::crc32c(&content)));
        assert!(!ptr.matches(crc32c::crc32c(&[8u8; BLOCK_SIZE])));
    }

    #[test]
    fn a_pointer_birth_widens_to_the_latest_cp_with_its_low_bits() {
        let born = |birth| BlockPtr {
            birth,
            ..BlockPtr::NULL
        };
        assert_eq!(born(12).birth_cp(CpCount(24)), CpCount(12));
        assert_eq!(born(24).birth_cp(CpCount(24)), CpCount(24));
        let latest = CpCount(0x3_0000_0005);
        assert_eq!(born(5).birth_cp(latest), latest);
        assert_eq!(born(6).birth_cp(latest), CpCount(0x2_0000_0006));
        assert_eq!(born(0xffff_ffff).birth_cp(latest), CpCount(0x2_ffff_ffff));
        assert_eq!(
            born(30).birth_cp(CpCount(24)),
            CpCount(30),
            "a pointer newer than the image is taken at its word"
        );
    }

    #[test]
    fn an_inode_round_trips_and_bad_fields_are_refused() {
        let mut inode = Inode::free();
        inode.kind = InodeKind::Lun;
        inode.level = 2;
        inode.size_bytes = 10 << 30;
        inode.name = "lun0".to_string();
        inode.root[7] = BlockPtr {
            pvbn: Pvbn(9),
            vvbn: Vvbn(10),
            birth: 11,
            checksum: 12,
        };
        let mut bytes = [0u8; INODE_SIZE];
        inode.encode(&mut bytes);
        assert_eq!(Inode::decode(&bytes), Ok(inode));
        bytes[0] = 9;
        assert!(Inode::decode(&bytes).is_err());
        bytes[0] = 1;
        bytes[1] = MAX_TREE_LEVEL + 1;
        assert!(Inode::decode(&bytes).is_err());
    }

    fn superblock_like() -> Superblock {
        Superblock {
            cp: CpCount(1),
            groups: vec![GroupRecord {
                ssd: false,
                raid_dp: true,
                group_size: 6,
                blocks_per_disk: 4096,
            }],
            spares: 1,
            activemap: Inode::free(),
            volumes: Inode::free(),
            rebuild: None,
            aggregate: AggrId(0),
            name: DEFAULT_AGGREGATE_NAME.into(),
            replayed_below: 0,
            offline: false,
            hybrid: false,
        }
    }

    #[test]
    fn a_superblock_round_trips_and_detects_damage() {
        let superblock = Superblock {
            cp: CpCount(42),
            groups: vec![
                GroupRecord {
                    ssd: false,
                    raid_dp: true,
                    group_size: 18,
                    blocks_per_disk: 1 << 20,
                },
                GroupRecord {
                    ssd: true,
                    raid_dp: false,
                    group_size: 5,
                    blocks_per_disk: 77,
                },
            ],
            spares: 2,
            activemap: Inode::free(),
            volumes: Inode::free(),
            rebuild: Some(RebuildRecord {
                group: 1,
                disk: 3,
                cursor: 999,
            }),
            aggregate: AggrId(7),
            name: "aggr_sas".into(),
            replayed_below: 1 << 40,
            offline: true,
            hybrid: true,
        };
        let mut block = superblock.encode();
        assert_eq!(Superblock::decode(&block), Ok(superblock.clone()));
        let online = Superblock {
            offline: false,
            ..superblock.clone()
        };
        assert_eq!(Superblock::decode(&online.encode()), Ok(online));
        block[300] ^= 4;
        assert_eq!(Superblock::decode(&block), Err(FormatError::Checksum));
        // Three valid superblocks XORed together (what a rebuild from mixed copies
        // gives) must not pass for a fourth.
        let versions: Vec<Block> = [17, 19, 21]
            .iter()
            .map(|&cp| {
                Superblock {
                    cp: CpCount(cp),
                    ..superblock_like()
                }
                .encode()
            })
            .collect();
        let mut mixed = versions[0];
        for other in &versions[1..] {
            for (m, o) in mixed.iter_mut().zip(other) {
                *m ^= o;
            }
        }
        assert_eq!(Superblock::decode(&mixed), Err(FormatError::Checksum));
        assert!(matches!(
            Superblock::decode(&[0u8; BLOCK_SIZE]),
            Err(FormatError::BadMagic { .. })
        ));
    }
}
