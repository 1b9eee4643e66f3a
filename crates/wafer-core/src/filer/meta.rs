//! The in-memory form of the file systems' metadata and its block encodings.
//!
//! The aggregate keeps two metadata files whose roots the superblock holds: its
//! active map (one bit per pvbn) and its volume table (one 1 KiB record per
//! volume with the roots of the volume's own files and its container map). A
//! flexible volume keeps an inode file (its LUNs), an active map over its vvbn
//! space, and in the aggregate a container map from vvbn to pvbn. All of it is
//! resident; a CP writes the blocks that changed, content generated from these
//! structures at the moment the CP allocates them.

use std::collections::{BTreeMap, BTreeSet};

use crate::bitmap::Bitmap;
use crate::format::{
    BlockPtr, FormatError, INODE_SIZE, INODES_PER_BLOCK, Inode, InodeKind, NAME_MAX, get_u32,
    get_u64, put_u32, put_u64,
};
use crate::nvlog::LunId;
use crate::space::PendingFrees;
use crate::tree::BlockTree;
use crate::units::{FileId, VolumeId};
use crate::{BLOCK_SIZE, Block};

/// A volume's inode file.
pub const INOFILE: FileId = FileId(1);
/// A volume's active map file (and, in the aggregate, the aggregate's).
pub const ACTIVEMAP: FileId = FileId(2);
/// The aggregate's volume table file.
pub const VOLUME_TABLE: FileId = FileId(3);
/// Inode numbers below this are reserved for metadata files.
pub const FIRST_LUN: u32 = 64;
/// The container map of volume `v` is aggregate file `CONTAINER_BASE + v`.
pub const CONTAINER_BASE: u32 = 1024;
/// Pseudo-file of superblock blocks.
pub const SUPERBLOCK_FILE: FileId = FileId(0);
/// Pseudo-file of parity blocks.
pub const PARITY_FILE: FileId = FileId(u32::MAX);

/// Volume records per volume-table block.
pub const VOLUMES_PER_BLOCK: usize = 4;
const VOLUME_RECORD: usize = BLOCK_SIZE / VOLUMES_PER_BLOCK;
const INOFILE_AT: usize = 128;
const ACTIVEMAP_AT: usize = INOFILE_AT + INODE_SIZE;
const CONTAINER_AT: usize = ACTIVEMAP_AT + INODE_SIZE;
const _: () = assert!(
    CONTAINER_AT + INODE_SIZE <= VOLUME_RECORD,
    "a volume record holds three inodes"
);
/// Container-map entries per block (one little-endian pvbn each).
pub const CONTAINER_ENTRIES_PER_BLOCK: u64 = (BLOCK_SIZE / 8) as u64;
/// Most volumes per aggregate.
pub const MAX_VOLUMES: u32 = 500;
/// Most LUNs per volume.
pub const MAX_LUNS: u32 = 4096;

/// Every file the engine writes blocks of.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FileRef {
    /// A LUN's content.
    Lun(LunId),
    /// A volume's inode file.
    Inofile(VolumeId),
    /// A volume's active map.
    VolumeMap(VolumeId),
    /// A volume's container map (an aggregate file).
    Container(VolumeId),
    /// The aggregate's active map.
    AggregateMap,
    /// The aggregate's volume table.
    VolumeTable,
}

impl FileRef {
    /// The volume whose vvbn space the file's blocks use, if any.
    pub fn volume(self) -> Option<VolumeId> {
        match self {
            FileRef::Lun(lun) => Some(lun.volume),
            FileRef::Inofile(v) | FileRef::VolumeMap(v) => Some(v),
            FileRef::Container(_) | FileRef::AggregateMap | FileRef::VolumeTable => None,
        }
    }

    /// The (volume, file) pair block trailers record.
    pub fn ids(self) -> (VolumeId, FileId) {
        use crate::format::AGGREGATE_VOLUME;
        match self {
            FileRef::Lun(lun) => (lun.volume, lun.file),
            FileRef::Inofile(v) => (v, INOFILE),
            FileRef::VolumeMap(v) => (v, ACTIVEMAP),
            FileRef::Container(v) => (AGGREGATE_VOLUME, FileId(CONTAINER_BASE + v.0)),
            FileRef::AggregateMap => (AGGREGATE_VOLUME, ACTIVEMAP),
            FileRef::VolumeTable => (AGGREGATE_VOLUME, VOLUME_TABLE),
        }
    }
}

/// A metadata file: its tree and the content blocks changed since its last CP.
#[derive(Clone, Debug, Default)]
pub struct MetaFile {
    /// The block tree.
    pub tree: BlockTree,
    /// Content blocks to write at the next CP.
    pub dirty: BTreeSet<u64>,
}

impl MetaFile {
    /// A metadata file rooted at `inode`.
    pub fn from_inode(inode: &Inode) -> MetaFile {
        MetaFile {
            tree: BlockTree::from_inode(inode),
            dirty: BTreeSet::new(),
        }
    }

    /// The inode describing the file.
    pub fn inode(&self, blocks: u64) -> Inode {
        Inode {
            kind: InodeKind::Metadata,
            level: self.tree.level(),
            generation: 0,
            size_bytes: blocks * BLOCK_SIZE as u64,
            name: String::new(),
            root: self.tree.root(),
        }
    }
}

/// A LUN.
#[derive(Clone, Debug)]
pub struct Lun {
    /// Its name.
    pub name: String,
    /// Its size in bytes.
    pub size_bytes: u64,
    /// Inode slot generation.
    pub generation: u32,
    /// Its block tree.
    pub tree: BlockTree,
}

/// A flexible volume.
#[derive(Clone, Debug)]
pub struct Volume {
    /// Its name.
    pub name: String,
    /// Its nominal size in bytes.
    pub size_bytes: u64,
    /// Blocks of its vvbn space (nominal size plus metadata and CP slack).
    pub vvbn_blocks: u64,
    /// Its LUNs by inode number.
    pub luns: BTreeMap<FileId, Lun>,
    /// The inode file.
    pub inofile: MetaFile,
    /// vvbns in use.
    pub activemap: Bitmap,
    /// The active map file.
    pub activemap_file: MetaFile,
    /// vvbns freed but still held by an on-disk image.
    pub pending: PendingFrees,
    /// vvbn to pvbn (0 where unused).
    pub container: Vec<u64>,
    /// The container map file (an aggregate file).
    pub container_file: MetaFile,
    /// Where the next vvbn search starts.
    pub cursor: u64,
    /// How its blocks age in the buffer cache.
    pub cache_policy: super::api::CachePolicy,
    /// Whether sequential reads of scattered blocks rewrite them.
    pub read_realloc: bool,
}

impl Volume {
    /// An empty volume.
    pub fn new(name: String, size_bytes: u64, vvbn_blocks: u64) -> Volume {
        let mut activemap = Bitmap::new(vvbn_blocks);
        activemap.set(0); // vvbn 0 is "no block" in pointers
        Volume {
            name,
            size_bytes,
            vvbn_blocks,
            luns: BTreeMap::new(),
            inofile: MetaFile::default(),
            activemap,
            activemap_file: MetaFile::default(),
            pending: PendingFrees::new(vvbn_blocks),
            container: vec![0; vvbn_blocks as usize],
            container_file: MetaFile::default(),
            cursor: 1,
            cache_policy: super::api::CachePolicy::Default,
            read_realloc: false,
        }
    }

    /// Bytes reserved by its LUNs.
    pub fn reserved_bytes(&self) -> u64 {
        self.luns.values().map(|lun| lun.size_bytes).sum()
    }

    /// The inode-file block holding inode `file`.
    pub fn inofile_block(file: FileId) -> u64 {
        u64::from(file.0) / INODES_PER_BLOCK as u64
    }

    /// Blocks of the inode file.
    pub fn inofile_blocks(&self) -> u64 {
        self.luns
            .keys()
            .last()
            .map_or(0, |&f| Volume::inofile_block(f) + 1)
    }

    /// Encodes inode-file block `fbn`.
    pub fn inofile_bytes(&self, fbn: u64) -> Box<Block> {
        let mut out = Box::new([0u8; BLOCK_SIZE]);
        for slot in 0..INODES_PER_BLOCK {
            let file = FileId((fbn * INODES_PER_BLOCK as u64 + slot as u64) as u32);
            let inode = match self.luns.get(&file) {
                Some(lun) => Inode {
                    kind: InodeKind::Lun,
                    level: lun.tree.level(),
                    generation: lun.generation,
                    size_bytes: lun.size_bytes,
                    name: lun.name.clone(),
                    root: lun.tree.root(),
                },
                None => Inode::free(),
            };
            inode.encode(&mut out[slot * INODE_SIZE..]);
        }
        out
    }

    /// Loads inode-file block `fbn`: creates the LUNs it holds.
    pub fn load_inofile_block(
        &mut self,
        fbn: u64,
        bytes: &Block,
    ) -> Result<Vec<FileId>, FormatError> {
        let mut loaded = Vec::new();
        for slot in 0..INODES_PER_BLOCK {
            let inode = Inode::decode(&bytes[slot * INODE_SIZE..])?;
            if inode.kind != InodeKind::Lun {
                continue;
            }
            let file = FileId((fbn * INODES_PER_BLOCK as u64 + slot as u64) as u32);
            self.luns.insert(
                file,
                Lun {
                    tree: BlockTree::from_inode(&inode),
                    name: inode.name,
                    size_bytes: inode.size_bytes,
                    generation: inode.generation,
                },
            );
            loaded.push(file);
        }
        Ok(loaded)
    }

    /// Encodes container-map block `fbn`.
    pub fn container_bytes(&self, fbn: u64) -> Box<Block> {
        let mut out = Box::new([0u8; BLOCK_SIZE]);
        let first = (fbn * CONTAINER_ENTRIES_PER_BLOCK) as usize;
        for (n, chunk) in out.chunks_exact_mut(8).enumerate() {
            if let Some(&pvbn) = self.container.get(first + n) {
                chunk.copy_from_slice(&pvbn.to_le_bytes());
            }
        }
        out
    }

    /// Loads container-map block `fbn`.
    pub fn load_container_block(&mut self, fbn: u64, bytes: &Block) {
        let first = (fbn * CONTAINER_ENTRIES_PER_BLOCK) as usize;
        for (n, chunk) in bytes.chunks_exact(8).enumerate() {
            if let Some(entry) = self.container.get_mut(first + n) {
                *entry = get_u64(chunk, 0);
            }
        }
    }

    /// Blocks of the container map.
    pub fn container_blocks(&self) -> u64 {
        self.vvbn_blocks.div_ceil(CONTAINER_ENTRIES_PER_BLOCK)
    }
}

/// What the volume table records about one volume.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VolumeRecord {
    /// Its name.
    pub name: String,
    /// Nominal size in bytes.
    pub size_bytes: u64,
    /// Blocks of its vvbn space.
    pub vvbn_blocks: u64,
    /// Its inode file's inode.
    pub inofile: Inode,
    /// Its active map's inode.
    pub activemap: Inode,
    /// Its container map's inode.
    pub container: Inode,
    /// Its buffer-cache policy.
    pub cache_policy: super::api::CachePolicy,
    /// Its read_realloc option.
    pub read_realloc: bool,
}

/// Encodes volume-table block `fbn` from the volumes present.
pub fn volume_table_bytes(volumes: &BTreeMap<VolumeId, Volume>, fbn: u64) -> Box<Block> {
    let mut out = Box::new([0u8; BLOCK_SIZE]);
    for slot in 0..VOLUMES_PER_BLOCK {
        let id = VolumeId((fbn * VOLUMES_PER_BLOCK as u64 + slot as u64) as u32);
        let Some(volume) = volumes.get(&id) else {
            continue;
        };
        let record = &mut out[slot * VOLUME_RECORD..(slot + 1) * VOLUME_RECORD];
        put_u32(record, 0, 1);
        record[4] = crate::nvlog::policy_code(volume.cache_policy);
        record[5] = u8::from(volume.read_realloc);
        put_u64(record, 8, volume.size_bytes);
        put_u64(record, 16, volume.vvbn_blocks);
        record[24..24 + volume.name.len()].copy_from_slice(volume.name.as_bytes());
        volume
            .inofile
            .inode(volume.inofile_blocks())
            .encode(&mut record[INOFILE_AT..INOFILE_AT + INODE_SIZE]);
        volume
            .activemap_file
            .inode(volume.activemap.blocks())
            .encode(&mut record[ACTIVEMAP_AT..ACTIVEMAP_AT + INODE_SIZE]);
        volume
            .container_file
            .inode(volume.container_blocks())
            .encode(&mut record[CONTAINER_AT..CONTAINER_AT + INODE_SIZE]);
    }
    out
}

/// Decodes volume-table block `fbn` into the records it holds.
pub fn decode_volume_table(
    fbn: u64,
    bytes: &Block,
) -> Result<Vec<(VolumeId, VolumeRecord)>, FormatError> {
    let corrupt = |detail: String| FormatError::Corrupt {
        what: "volume table",
        detail,
    };
    let mut out = Vec::new();
    for slot in 0..VOLUMES_PER_BLOCK {
        let record = &bytes[slot * VOLUME_RECORD..(slot + 1) * VOLUME_RECORD];
        match get_u32(record, 0) {
            0 => continue,
            1 => {}
            other => return Err(corrupt(format!("record flag {other}"))),
        }
        let name_bytes = &record[24..24 + NAME_MAX];
        let len = name_bytes.iter().position(|&b| b == 0).unwrap_or(NAME_MAX);
        let name = core::str::from_utf8(&name_bytes[..len])
            .map_err(|_| corrupt("volume name is not UTF-8".into()))?
            .to_string();
        let vvbn_blocks = get_u64(record, 16);
        if vvbn_blocks == 0 || vvbn_blocks > 1 << 40 {
            return Err(corrupt(format!("{vvbn_blocks} vvbns")));
        }
        let id = VolumeId((fbn * VOLUMES_PER_BLOCK as u64 + slot as u64) as u32);
        let cache_policy = crate::nvlog::policy_from_code(record[4])
            .ok_or_else(|| corrupt(format!("cache policy {}", record[4])))?;
        out.push((
            id,
            VolumeRecord {
                name,
                size_bytes: get_u64(record, 8),
                vvbn_blocks,
                inofile: Inode::decode(&record[INOFILE_AT..INOFILE_AT + INODE_SIZE])?,
                activemap: Inode::decode(&record[ACTIVEMAP_AT..ACTIVEMAP_AT + INODE_SIZE])?,
                container: Inode::decode(&record[CONTAINER_AT..CONTAINER_AT + INODE_SIZE])?,
                cache_policy,
                read_realloc: record[5] == 1,
            },
        ));
    }
    Ok(out)
}

/// Whether a pointer is non-null, for filtering.
pub fn present(ptr: &BlockPtr) -> bool {
    !ptr.is_null()
}
