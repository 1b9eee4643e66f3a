//! The in-memory form of the file systems' metadata and its block encodings.
//!
//! The aggregate keeps two metadata files whose roots the superblock holds: its
//! active map (one bit per pvbn) and its volume table (one 2 KiB record per
//! volume with the roots of the volume's own files and its container map). A
//! flexible volume keeps an inode file (its LUNs), an active map over its vvbn
//! space, a snapinfo file (one entry per snapshot: name, CP, time and the root
//! of the snapshot's inode file), a summary map (the vvbns any snapshot holds)
//! and, in the aggregate, a container map from vvbn to pvbn. All of it is
//! resident, snapshots included; a CP writes the blocks that changed, content
//! generated from these structures at the moment the CP allocates them.
//!
//! A snapshot is the volume's inode file as one CP wrote it, and through it the
//! trees of every LUN: nothing is copied. Its blocks stay allocated (in the
//! container map and the aggregate's map) while its map, folded into the
//! summary map, marks them, whatever the active file system does.

use std::collections::BTreeMap;

use super::container::ContainerMap;
use crate::bitmap::Bitmap;
use crate::format::{
    BlockPtr, FormatError, INODE_SIZE, INODES_PER_BLOCK, Inode, InodeKind, LunAttributes, NAME_MAX,
    get_u32, get_u64, put_u32, put_u64,
};
use crate::nvlog::LunId;
use crate::schedule::{SnapKind, SnapSchedule};
use crate::space::PendingFrees;
use crate::tree::BlockTree;
use crate::units::{CpCount, FileId, Instant, SnapshotId, VolumeId};
use crate::{BLOCK_SIZE, Block};

/// A volume's inode file.
pub const INOFILE: FileId = FileId(1);
/// A volume's active map file (and, in the aggregate, the aggregate's).
pub const ACTIVEMAP: FileId = FileId(2);
/// The aggregate's volume table file.
pub const VOLUME_TABLE: FileId = FileId(3);
/// A volume's snapinfo file.
pub const SNAPINFO: FileId = FileId(4);
/// A volume's summary map file.
pub const SUMMARY: FileId = FileId(5);
pub use crate::format::MAX_SNAPSHOTS;
/// Inode numbers below this are reserved for metadata files.
pub const FIRST_LUN: u32 = 64;
/// The container map of volume `v` is aggregate file `CONTAINER_BASE + v`.
pub const CONTAINER_BASE: u32 = 1024;
/// Pseudo-file of superblock blocks.
pub const SUPERBLOCK_FILE: FileId = FileId(0);
/// Pseudo-file of parity blocks.
pub const PARITY_FILE: FileId = FileId(u32::MAX);

/// Volume records per volume-table block.
pub const VOLUMES_PER_BLOCK: usize = 2;
const VOLUME_RECORD: usize = BLOCK_SIZE / VOLUMES_PER_BLOCK;
/// The snapshot schedule, after the name.
const SCHEDULE_AT: usize = 24 + NAME_MAX;
const INOFILE_AT: usize = 128;
const _: () = assert!(
    SCHEDULE_AT + 8 <= INOFILE_AT,
    "the schedule fits before the inodes"
);
const ACTIVEMAP_AT: usize = INOFILE_AT + INODE_SIZE;
const CONTAINER_AT: usize = ACTIVEMAP_AT + INODE_SIZE;
const SNAPINFO_AT: usize = CONTAINER_AT + INODE_SIZE;
const SUMMARY_AT: usize = SNAPINFO_AT + INODE_SIZE;
const _: () = assert!(
    SUMMARY_AT + INODE_SIZE <= VOLUME_RECORD,
    "a volume record holds five inodes"
);
/// Snapinfo entries per block.
const SNAPSHOTS_PER_BLOCK: usize = 8;
const SNAPSHOT_ENTRY: usize = BLOCK_SIZE / SNAPSHOTS_PER_BLOCK;
const SNAPSHOT_INOFILE_AT: usize = SNAPSHOT_ENTRY - INODE_SIZE;
/// Blocks of a snapinfo file (room for every snapshot id).
pub const SNAPINFO_BLOCKS: u64 = MAX_SNAPSHOTS.div_ceil(SNAPSHOTS_PER_BLOCK) as u64;
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
    /// A volume's snapinfo file.
    SnapInfo(VolumeId),
    /// A volume's summary map.
    SummaryMap(VolumeId),
    /// A snapshot's inode file (read-only: read at mount, never written).
    SnapshotInofile(VolumeId, SnapshotId),
    /// A LUN as a snapshot holds it (read-only).
    SnapshotLun(LunId, SnapshotId),
}

impl FileRef {
    /// The volume whose vvbn space the file's blocks use, if any.
    pub fn volume(self) -> Option<VolumeId> {
        match self {
            FileRef::Lun(lun) | FileRef::SnapshotLun(lun, _) => Some(lun.volume),
            FileRef::Inofile(v)
            | FileRef::VolumeMap(v)
            | FileRef::SnapInfo(v)
            | FileRef::SummaryMap(v)
            | FileRef::SnapshotInofile(v, _) => Some(v),
            FileRef::Container(_) | FileRef::AggregateMap | FileRef::VolumeTable => None,
        }
    }

    /// The (volume, file) pair block trailers record. A snapshot's blocks were
    /// written as blocks of the active file, and say so.
    pub fn ids(self) -> (VolumeId, FileId) {
        use crate::format::AGGREGATE_VOLUME;
        match self {
            FileRef::Lun(lun) | FileRef::SnapshotLun(lun, _) => (lun.volume, lun.file),
            FileRef::Inofile(v) | FileRef::SnapshotInofile(v, _) => (v, INOFILE),
            FileRef::SnapInfo(v) => (v, SNAPINFO),
            FileRef::SummaryMap(v) => (v, SUMMARY),
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
    pub dirty: DirtyBlocks,
}

/// A metadata file's content blocks to write at the next CP, as a bitmap of
/// block numbers. Every block the write allocator hands out, and every block
/// it frees, marks a bitmap block and a container block dirty, so marking
/// costs a bit, not a search; a CP takes the marked blocks in order at the
/// cost of one pass over the bitmap, whose size is that of the file.
#[derive(Clone, Debug, Default)]
pub struct DirtyBlocks {
    words: Vec<u64>,
}

impl DirtyBlocks {
    /// Marks content block `block` dirty.
    pub fn insert(&mut self, block: u64) {
        let (word, bit) = ((block / 64) as usize, block % 64);
        if word >= self.words.len() {
            self.words.resize(word + 1, 0);
        }
        self.words[word] |= 1 << bit;
    }

    /// The dirty blocks, in order, leaving none.
    pub fn take(&mut self) -> Vec<u64> {
        let marked = self
            .words
            .iter()
            .map(|word| word.count_ones() as usize)
            .sum();
        let mut blocks = Vec::with_capacity(marked);
        for (index, word) in (0u64..).zip(&mut self.words) {
            let mut bits = core::mem::take(word);
            while bits != 0 {
                blocks.push(index * 64 + u64::from(bits.trailing_zeros()));
                bits &= bits - 1;
            }
        }
        blocks
    }
}

impl Extend<u64> for DirtyBlocks {
    fn extend<I: IntoIterator<Item = u64>>(&mut self, blocks: I) {
        blocks.into_iter().for_each(|block| self.insert(block));
    }
}

impl MetaFile {
    /// A metadata file rooted at `inode`.
    pub fn from_inode(inode: &Inode) -> MetaFile {
        MetaFile {
            tree: BlockTree::from_inode(inode),
            dirty: DirtyBlocks::default(),
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
            attributes: LunAttributes::DEFAULT,
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
    /// Its space reservation and OS type.
    pub attributes: LunAttributes,
    /// Its block tree.
    pub tree: BlockTree,
}

impl Lun {
    /// What it takes from its volume: bytes reserved if space-reserved,
    /// else the blocks it holds.
    pub fn charge(&self) -> (u64, u64) {
        match self.attributes.space_reserved {
            true => (self.size_bytes, 0),
            false => (0, self.tree.content_blocks()),
        }
    }

    /// The LUN as a snapshot keeps it: same content, tree shared.
    pub fn frozen_copy(&self) -> Lun {
        Lun {
            name: self.name.clone(),
            size_bytes: self.size_bytes,
            generation: self.generation,
            attributes: self.attributes,
            tree: self.tree.frozen_copy(),
        }
    }
}

/// A snapshot: a volume's LUNs as one CP wrote them.
#[derive(Clone, Debug)]
pub struct Snapshot {
    /// Its name.
    pub name: String,
    /// The CP whose image it is.
    pub cp: CpCount,
    /// When it was taken.
    pub created: Instant,
    /// Its inode file's tree.
    pub inofile: BlockTree,
    /// Its LUNs by inode number.
    pub luns: BTreeMap<FileId, Lun>,
    /// The vvbns it holds.
    pub map: Bitmap,
}

/// The vvbns an image holds: its inode file's tree and every LUN's, indirect
/// blocks included, in a volume of `vvbn_blocks`.
pub fn image_map(inofile: &BlockTree, luns: &BTreeMap<FileId, Lun>, vvbn_blocks: u64) -> Bitmap {
    let mut map = Bitmap::new(vvbn_blocks);
    let trees = core::iter::once(inofile).chain(luns.values().map(|l| &l.tree));
    for tree in trees {
        tree.for_each_pointer(|_, ptr| {
            map.set(ptr.vvbn.0);
        });
    }
    map
}

impl Snapshot {
    /// The vvbns its trees hold (what its map must be), in a volume of
    /// `vvbn_blocks`.
    pub fn trees_map(&self, vvbn_blocks: u64) -> Bitmap {
        image_map(&self.inofile, &self.luns, vvbn_blocks)
    }

    /// The snapinfo entry of a snapshot: what mounting needs to find it again.
    fn entry(&self, inofile_blocks: u64) -> Inode {
        Inode {
            kind: InodeKind::Metadata,
            level: self.inofile.level(),
            generation: 0,
            size_bytes: inofile_blocks * BLOCK_SIZE as u64,
            name: String::new(),
            attributes: LunAttributes::DEFAULT,
            root: self.inofile.root(),
        }
    }
}

/// A snapshot asked for and not yet taken: the CP of its generation takes it.
#[derive(Clone, Debug)]
pub struct PendingSnapshot {
    /// The id it will have.
    pub id: SnapshotId,
    /// Its name.
    pub name: String,
    /// The CP that takes it.
    pub generation: CpCount,
    /// When it was asked for.
    pub created: Instant,
    /// Its map, once the CP has allocated its image.
    pub map: Option<Bitmap>,
    /// The host request waiting for it (none when replayed).
    pub waiter: Option<super::RequestId>,
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
    pub container: ContainerMap,
    /// The container map file (an aggregate file).
    pub container_file: MetaFile,
    /// Where the next vvbn search starts.
    pub cursor: u64,
    /// How its blocks age in the buffer cache.
    pub cache_policy: super::api::CachePolicy,
    /// Whether sequential reads of scattered blocks rewrite them.
    pub read_realloc: bool,
    /// Its snapshots.
    pub snapshots: BTreeMap<SnapshotId, Snapshot>,
    /// A snapshot the next CP takes.
    pub pending_snapshot: Option<PendingSnapshot>,
    /// vvbns any snapshot holds: the union of the snapshots' maps.
    pub summary: Bitmap,
    /// The summary map file.
    pub summary_file: MetaFile,
    /// The snapinfo file.
    pub snapinfo: MetaFile,
    /// Percent of the size set aside for snapshots.
    pub snap_reserve_percent: u8,
    /// Its `snap sched`.
    pub snap_schedule: SnapSchedule,
    /// Whether it serves, or is being destroyed.
    pub state: VolumeState,
    /// The vvbn space its size needs: above `vvbn_blocks` after `vol size`
    /// grew it, until the next CP grows the maps.
    pub vvbns_wanted: u64,
}

/// Whether a volume serves its LUNs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VolumeState {
    /// Its LUNs serve I/O.
    Online,
    /// Its LUNs serve nothing (`vol offline`); what was dirty still goes to
    /// disk, and it may be destroyed.
    Offline,
    /// Destroyed (`vol destroy`, logged): the next CP that can frees its
    /// blocks and drops its record. Until then its name stays taken, and it
    /// is recorded as offline.
    Destroying,
}

impl VolumeState {
    /// The byte its volume record holds: 0 online, 1 offline (a volume being
    /// destroyed is offline on disk until a CP drops its record).
    fn code(self) -> u8 {
        u8::from(self != VolumeState::Online)
    }
}

impl Volume {
    /// An empty volume.
    pub fn new(name: String, size_bytes: u64, vvbn_blocks: u64) -> Volume {
        let mut activemap = Bitmap::map_file(vvbn_blocks);
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
            container: ContainerMap::new(vvbn_blocks),
            container_file: MetaFile::default(),
            cursor: 1,
            cache_policy: super::api::CachePolicy::Default,
            read_realloc: false,
            snapshots: BTreeMap::new(),
            pending_snapshot: None,
            summary: Bitmap::map_file(vvbn_blocks),
            summary_file: MetaFile::default(),
            snapinfo: MetaFile::default(),
            snap_reserve_percent: 0,
            snap_schedule: SnapSchedule::OFF,
            state: VolumeState::Online,
            vvbns_wanted: vvbn_blocks,
        }
    }

    /// Grows the vvbn space to `vvbns_wanted`: every map gains clear
    /// entries at its end (no vvbn moves), and the map blocks from the old
    /// end on are dirty, so the CP writes the files at their new lengths.
    pub fn grow_vvbns(&mut self) {
        let (old, new) = (self.vvbn_blocks, self.vvbns_wanted);
        assert!(new > old, "a vvbn space only grows");
        self.activemap.grow(new);
        self.summary.grow(new);
        self.pending.grow(new);
        self.container.grow(new);
        for snapshot in self.snapshots.values_mut() {
            snapshot.map.grow(new);
        }
        let map_blocks = Bitmap::block_of(old)..Bitmap::block_of(new - 1) + 1;
        self.activemap_file.dirty.extend(map_blocks.clone());
        self.summary_file.dirty.extend(map_blocks);
        let per_block = super::container::CONTAINER_ENTRIES_PER_BLOCK;
        self.container_file
            .dirty
            .extend(old / per_block..(new - 1) / per_block + 1);
        self.vvbn_blocks = new;
    }

    /// The vvbns of the volume's image as its trees stand: the inode file and
    /// every LUN, indirect blocks included. What a snapshot taken now holds.
    ///
    /// The active map marks exactly the vvbns of the volume's files and vvbn
    /// 0 (an invariant), so the image is a copy of it (chunks shared, copied
    /// on write) less vvbn 0 and the few blocks of the volume's own map files.
    /// No LUN is walked: a snapshot costs the same whatever the data, and a
    /// LUN whose indirect blocks are not all in memory needs none read.
    pub fn image_map(&self) -> Bitmap {
        let mut map = self.activemap.clone();
        map.clear(0);
        let own_maps = [&self.activemap_file, &self.snapinfo, &self.summary_file];
        for file in own_maps {
            file.tree.for_each_pointer(|_, ptr| {
                map.clear(ptr.vvbn.0);
            });
        }
        map
    }

    /// The snapshot called `name`.
    pub fn snapshot_named(&self, name: &str) -> Option<(SnapshotId, &Snapshot)> {
        self.snapshots
            .iter()
            .find(|(_, s)| s.name == name)
            .map(|(id, s)| (*id, s))
    }

    /// The names of `kind`'s snapshots a scheduled one keeping `keep`
    /// deletes: `kind.N` for every `N >= keep - 1` there is.
    pub fn rotated_out(&self, kind: SnapKind, keep: u8) -> Vec<String> {
        (keep.saturating_sub(1)..=u8::MAX)
            .map(|n| kind.name(n))
            .filter(|name| self.snapshot_named(name).is_some())
            .collect()
    }

    /// The lowest snapshot id not in use.
    pub fn free_snapshot_id(&self) -> Option<SnapshotId> {
        (1..=MAX_SNAPSHOTS as u8)
            .map(SnapshotId)
            .find(|id| !self.snapshots.contains_key(id))
    }

    /// The snapinfo block holding snapshot `id`'s entry.
    pub fn snapinfo_block(id: SnapshotId) -> u64 {
        u64::from(id.0 - 1) / SNAPSHOTS_PER_BLOCK as u64
    }

    /// Encodes snapinfo block `fbn`.
    pub fn snapinfo_bytes(&self, fbn: u64) -> Box<Block> {
        let mut out = Box::new([0u8; BLOCK_SIZE]);
        let inofile_blocks = |s: &Snapshot| {
            s.luns
                .keys()
                .last()
                .map_or(0, |&f| Volume::inofile_block(f) + 1)
        };
        for (id, snapshot) in &self.snapshots {
            if Volume::snapinfo_block(*id) != fbn {
                continue;
            }
            let slot = usize::from(id.0 - 1) % SNAPSHOTS_PER_BLOCK;
            let entry = &mut out[slot * SNAPSHOT_ENTRY..(slot + 1) * SNAPSHOT_ENTRY];
            put_u32(entry, 0, 1);
            put_u64(entry, 8, snapshot.cp.0);
            put_u64(entry, 16, snapshot.created.0);
            entry[24..24 + snapshot.name.len()].copy_from_slice(snapshot.name.as_bytes());
            snapshot
                .entry(inofile_blocks(snapshot))
                .encode(&mut entry[SNAPSHOT_INOFILE_AT..]);
        }
        out
    }

    /// Bytes reserved by its space-reserved LUNs.
    pub fn reserved_bytes(&self) -> u64 {
        self.luns.values().map(|lun| lun.charge().0).sum()
    }

    /// Content blocks its thin LUNs (those without a space reservation)
    /// hold in the active file system.
    pub fn thin_blocks(&self) -> u64 {
        self.luns.values().map(|lun| lun.charge().1).sum()
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
                    attributes: lun.attributes,
                    root: lun.tree.root(),
                },
                None => Inode::free(),
            };
            inode.encode(&mut out[slot * INODE_SIZE..]);
        }
        out
    }
}

/// Decodes inode-file block `fbn` into the LUNs it holds.
pub fn decode_inofile_block(fbn: u64, bytes: &Block) -> Result<Vec<(FileId, Lun)>, FormatError> {
    let mut luns = Vec::new();
    for slot in 0..INODES_PER_BLOCK {
        let inode = Inode::decode(&bytes[slot * INODE_SIZE..])?;
        if inode.kind != InodeKind::Lun {
            continue;
        }
        let file = FileId((fbn * INODES_PER_BLOCK as u64 + slot as u64) as u32);
        luns.push((
            file,
            Lun {
                tree: BlockTree::from_inode(&inode),
                name: inode.name,
                size_bytes: inode.size_bytes,
                generation: inode.generation,
                attributes: inode.attributes,
            },
        ));
    }
    Ok(luns)
}

/// A snapinfo entry read back: a snapshot without its LUNs and map yet.
#[derive(Clone, Debug)]
pub struct SnapshotEntry {
    /// Its id.
    pub id: SnapshotId,
    /// Its name.
    pub name: String,
    /// Its CP.
    pub cp: CpCount,
    /// When it was taken.
    pub created: Instant,
    /// Its inode file's inode.
    pub inofile: Inode,
}

/// Decodes snapinfo block `fbn`.
pub fn decode_snapinfo_block(fbn: u64, bytes: &Block) -> Result<Vec<SnapshotEntry>, FormatError> {
    let corrupt = |detail: String| FormatError::Corrupt {
        what: "snapinfo",
        detail,
    };
    let mut out = Vec::new();
    for slot in 0..SNAPSHOTS_PER_BLOCK {
        let entry = &bytes[slot * SNAPSHOT_ENTRY..(slot + 1) * SNAPSHOT_ENTRY];
        match get_u32(entry, 0) {
            0 => continue,
            1 => {}
            other => return Err(corrupt(format!("entry flag {other}"))),
        }
        let number = fbn * SNAPSHOTS_PER_BLOCK as u64 + slot as u64 + 1;
        if number > MAX_SNAPSHOTS as u64 {
            return Err(corrupt(format!("snapshot id {number}")));
        }
        out.push(SnapshotEntry {
            id: SnapshotId(number as u8),
            name: decode_name(&entry[24..24 + NAME_MAX]).map_err(corrupt)?,
            cp: CpCount(get_u64(entry, 8)),
            created: Instant(get_u64(entry, 16)),
            inofile: Inode::decode(&entry[SNAPSHOT_INOFILE_AT..])?,
        });
    }
    Ok(out)
}

fn decode_name(bytes: &[u8]) -> Result<String, String> {
    let len = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    core::str::from_utf8(&bytes[..len])
        .map(str::to_string)
        .map_err(|_| "a name is not UTF-8".to_string())
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
    /// Its snapshot reserve, in percent of its size.
    pub snap_reserve_percent: u8,
    /// Its snapshot schedule.
    pub snap_schedule: SnapSchedule,
    /// Online or offline.
    pub state: VolumeState,
    /// Its snapinfo file's inode.
    pub snapinfo: Inode,
    /// Its summary map's inode.
    pub summary: Inode,
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
        record[6] = volume.snap_reserve_percent;
        record[7] = volume.state.code();
        put_u64(record, 8, volume.size_bytes);
        put_u64(record, 16, volume.vvbn_blocks);
        record[24..24 + volume.name.len()].copy_from_slice(volume.name.as_bytes());
        record[SCHEDULE_AT..SCHEDULE_AT + 8].copy_from_slice(&volume.snap_schedule.encode());
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
            .inode(volume.container.blocks())
            .encode(&mut record[CONTAINER_AT..CONTAINER_AT + INODE_SIZE]);
        volume
            .snapinfo
            .inode(SNAPINFO_BLOCKS)
            .encode(&mut record[SNAPINFO_AT..SNAPINFO_AT + INODE_SIZE]);
        volume
            .summary_file
            .inode(volume.summary.blocks())
            .encode(&mut record[SUMMARY_AT..SUMMARY_AT + INODE_SIZE]);
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
        let name = decode_name(&record[24..24 + NAME_MAX]).map_err(corrupt)?;
        let vvbn_blocks = get_u64(record, 16);
        if vvbn_blocks == 0 || vvbn_blocks > 1 << 40 {
            return Err(corrupt(format!("{vvbn_blocks} vvbns")));
        }
        let id = VolumeId((fbn * VOLUMES_PER_BLOCK as u64 + slot as u64) as u32);
        let cache_policy = crate::nvlog::policy_from_code(record[4])
            .ok_or_else(|| corrupt(format!("cache policy {}", record[4])))?;
        let mut schedule = [0u8; 8];
        schedule.copy_from_slice(&record[SCHEDULE_AT..SCHEDULE_AT + 8]);
        let snap_schedule =
            SnapSchedule::decode(&schedule).map_err(|e| corrupt(format!("snap sched: {e}")))?;
        let state = match record[7] {
            0 => VolumeState::Online,
            1 => VolumeState::Offline,
            other => return Err(corrupt(format!("volume state {other}"))),
        };
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
                snap_reserve_percent: record[6],
                snap_schedule,
                state,
                snapinfo: Inode::decode(&record[SNAPINFO_AT..SNAPINFO_AT + INODE_SIZE])?,
                summary: Inode::decode(&record[SUMMARY_AT..SUMMARY_AT + INODE_SIZE])?,
            },
        ));
    }
    Ok(out)
}

/// Whether a pointer is non-null, for filtering.
pub fn present(ptr: &BlockPtr) -> bool {
    !ptr.is_null()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dirty_blocks_are_taken_once_each_in_order_and_can_be_marked_again() {
        let mut dirty = DirtyBlocks::default();
        dirty.extend([700, 7, 64, 63, 7, 0, 700]);
        assert_eq!(dirty.take(), [0, 7, 63, 64, 700]);
        assert!(dirty.take().is_empty(), "a take leaves nothing dirty");
        dirty.insert(64);
        assert_eq!(dirty.take(), [64], "blocks taken can be marked again");
    }
}
