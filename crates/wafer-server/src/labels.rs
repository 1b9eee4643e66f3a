//! Disk labels: every disk file says which disk it is.
//!
//! `wafer.toml` maps each disk's name to a backing file, but a file can be
//! renamed, swapped with another, put back from elsewhere or copied in from
//! another data directory, and a mount would then read one disk's blocks in
//! another's place. So each disk file ends in a label, kept twice (the two
//! sectors after its `blocks` sectors): the data directory's identity (a
//! random 128-bit id made with the directory, in `wafer.toml`), the disk's
//! name, and what the configuration makes of it (a pool spare, an
//! aggregate's spare, or a member at a RAID group and position, with the
//! group's geometry), with a sequence number.
//!
//! The labels follow the configuration: every save of `wafer.toml` first
//! rewrites the labels that changed, copy A, synced, then copy B, synced, so
//! a crash leaves at least one whole copy, and no label is ever behind the
//! configuration that names its disk. At start every disk in service must
//! carry its own name's label under this directory's id. One that does not is
//! looked for among the directory's other `*.img` files (a renamed or swapped
//! file is found and the configuration pointed at it), and a disk found
//! nowhere is failed with the reason, so that a foreign or blank file is never
//! written. The name is the identity; the role is its witness, reported, not
//! enforced: after a crash between a label's write and the configuration's
//! save, a label may be one step ahead, and the configuration decides.
//!
//! Labels are the driver's, like the 4160-byte sector layout: the engine
//! knows disks by slot, and the driver maps slots to devices. This module
//! sits below the configuration: it is given each disk's place
//! ([`DiskPlace`]) and answers with what the files hold.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

use wafer_core::BLOCK_SIZE;
use wafer_core::format::{fnv1a_64, get_u16, get_u32, get_u64, put_u16, put_u32, put_u64};

use wafer_core::aggregate::Tier;
use wafer_raid::RaidType;

/// Bytes each block takes in a backing file: 4096 of content, 64 of trailer.
pub const SECTOR_BYTES: u64 = 4160;

/// Label sectors after a disk's blocks: copies A and B.
pub const LABEL_SECTORS: u64 = 2;

const MAGIC: &[u8; 8] = b"WAFERDL1";
const VERSION: u32 = 1;
const NAME_MAX: usize = 64;
const DIRECTORY_AT: usize = 16;
const SEQUENCE_AT: usize = 32;
const ROLE_AT: usize = 40;
const RAID_TYPE_AT: usize = 41;
const GROUP_AT: usize = 42;
const POSITION_AT: usize = 44;
const GROUP_SIZE_AT: usize = 46;
const BLOCKS_AT: usize = 48;
const BLOCKS_PER_DISK_AT: usize = 56;
const AGGREGATE_ID_AT: usize = 64;
/// A member's group tier: 0 HDD (and on labels written before tiers), 1 SSD.
const TIER_AT: usize = 68;
const DISK_NAME_AT: usize = 128;
const AGGREGATE_NAME_AT: usize = 192;
const HASHED: usize = BLOCK_SIZE - 8;

/// A new data directory's id: 128 bits from `/dev/urandom`.
pub(crate) fn new_directory_id() -> io::Result<u128> {
    let mut bytes = [0u8; 16];
    io::Read::read_exact(&mut File::open("/dev/urandom")?, &mut bytes)?;
    Ok(u128::from_le_bytes(bytes))
}

/// The directory id on the labels of `disks`, if any carries its
/// own name's label: what a migration to labelled disks that a crash cut
/// short had begun to write, and must write again.
pub(crate) fn id_in_use(dir: &Path, disks: &[DiskPlace]) -> io::Result<Option<u128>> {
    for disk in disks {
        if let Some(label) = what_holds(dir, &disk.file, disk.blocks)?
            && label.name == disk.name
        {
            return Ok(Some(label.directory));
        }
    }
    Ok(None)
}

/// Bytes of a disk file of `blocks` blocks: the blocks, then the labels.
pub fn disk_file_bytes(blocks: u64) -> u64 {
    (blocks + LABEL_SECTORS) * SECTOR_BYTES
}

/// What a disk's label says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiskLabel {
    /// The data directory's id (`wafer.toml`'s `directory_id`).
    pub directory: u128,
    /// The disk's name.
    pub name: String,
    /// Blocks before the labels.
    pub blocks: u64,
    /// What the configuration makes of the disk.
    pub role: Role,
    /// Counts the label's writes: of two valid copies, the higher is newer.
    pub sequence: u64,
}

/// A disk's place in the node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Role {
    /// A blank disk no aggregate owns.
    Pool,
    /// A spare of an aggregate.
    Spare(AggrName),
    /// A member of a RAID group.
    Member {
        /// Its aggregate.
        aggregate: AggrName,
        /// The RAID group, in aggregate order.
        group: u16,
        /// Its position in the group.
        position: u16,
        /// The group's disks.
        group_size: u16,
        /// RAID-DP or RAID-4.
        raid_type: RaidType,
        /// Blocks of each disk the group uses.
        blocks_per_disk: u64,
        /// What the group's disks are (HDD, or SSD for a Flash Pool).
        tier: Tier,
    },
}

/// An aggregate as a label names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AggrName {
    /// Its node id.
    pub id: u32,
    /// Its name.
    pub name: String,
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Role::Pool => write!(f, "a pool spare"),
            Role::Spare(aggr) => write!(f, "a spare of {}", aggr.name),
            Role::Member {
                aggregate,
                group,
                position,
                ..
            } => write!(f, "{} rg{group} position {position}", aggregate.name),
        }
    }
}

impl DiskLabel {
    /// The label's sector: 4096 bytes of label, 64 of zeros.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![0u8; SECTOR_BYTES as usize];
        out[..8].copy_from_slice(MAGIC);
        put_u32(&mut out, 8, VERSION);
        out[DIRECTORY_AT..DIRECTORY_AT + 16].copy_from_slice(&self.directory.to_le_bytes());
        put_u64(&mut out, SEQUENCE_AT, self.sequence);
        put_u64(&mut out, BLOCKS_AT, self.blocks);
        put_name(&mut out, DISK_NAME_AT, &self.name);
        let aggregate = match &self.role {
            Role::Pool => None,
            Role::Spare(aggregate) => Some(aggregate),
            Role::Member { aggregate, .. } => Some(aggregate),
        };
        out[ROLE_AT] = match self.role {
            Role::Pool => 1,
            Role::Spare(_) => 2,
            Role::Member { .. } => 3,
        };
        if let Some(aggregate) = aggregate {
            put_u32(&mut out, AGGREGATE_ID_AT, aggregate.id);
            put_name(&mut out, AGGREGATE_NAME_AT, &aggregate.name);
        }
        if let Role::Member {
            group,
            position,
            group_size,
            raid_type,
            blocks_per_disk,
            tier,
            ..
        } = self.role
        {
            out[RAID_TYPE_AT] = u8::from(raid_type == RaidType::RaidDp);
            out[TIER_AT] = u8::from(tier == Tier::Ssd);
            put_u16(&mut out, GROUP_AT, group);
            put_u16(&mut out, POSITION_AT, position);
            put_u16(&mut out, GROUP_SIZE_AT, group_size);
            put_u64(&mut out, BLOCKS_PER_DISK_AT, blocks_per_disk);
        }
        let hash = fnv1a_64(&out[..HASHED]);
        put_u64(&mut out, HASHED, hash);
        out
    }

    /// Reads a label sector; `None` unless it is a whole, valid label.
    pub fn decode(sector: &[u8]) -> Option<DiskLabel> {
        if sector.len() < BLOCK_SIZE
            || &sector[..8] != MAGIC
            || get_u32(sector, 8) != VERSION
            || get_u64(sector, HASHED) != fnv1a_64(&sector[..HASHED])
        {
            return None;
        }
        let aggregate = || {
            Some(AggrName {
                id: get_u32(sector, AGGREGATE_ID_AT),
                name: get_name(sector, AGGREGATE_NAME_AT)?,
            })
        };
        let role = match sector[ROLE_AT] {
            1 => Role::Pool,
            2 => Role::Spare(aggregate()?),
            3 => Role::Member {
                aggregate: aggregate()?,
                group: get_u16(sector, GROUP_AT),
                position: get_u16(sector, POSITION_AT),
                group_size: get_u16(sector, GROUP_SIZE_AT),
                raid_type: match sector[RAID_TYPE_AT] {
                    0 => RaidType::Raid4,
                    _ => RaidType::RaidDp,
                },
                blocks_per_disk: get_u64(sector, BLOCKS_PER_DISK_AT),
                tier: match sector[TIER_AT] {
                    0 => Tier::Hdd,
                    1 => Tier::Ssd,
                    _ => return None,
                },
            },
            _ => return None,
        };
        let directory = u128::from_le_bytes(
            sector[DIRECTORY_AT..DIRECTORY_AT + 16]
                .try_into()
                .expect("16 bytes"),
        );
        Some(DiskLabel {
            directory,
            name: get_name(sector, DISK_NAME_AT)?,
            blocks: get_u64(sector, BLOCKS_AT),
            role,
            sequence: get_u64(sector, SEQUENCE_AT),
        })
    }

    /// Whether two labels say the same, whatever their sequence numbers.
    fn same_as(&self, other: &DiskLabel) -> bool {
        DiskLabel {
            sequence: other.sequence,
            ..self.clone()
        } == *other
    }
}

fn put_name(out: &mut [u8], at: usize, name: &str) {
    let bytes = name.as_bytes();
    assert!(bytes.len() < NAME_MAX, "names are checked shorter");
    out[at] = bytes.len() as u8;
    out[at + 1..at + 1 + bytes.len()].copy_from_slice(bytes);
}

fn get_name(sector: &[u8], at: usize) -> Option<String> {
    let length = usize::from(sector[at]);
    let bytes = sector
        .get(at + 1..at + 1 + length)
        .filter(|_| length < NAME_MAX)?;
    String::from_utf8(bytes.to_vec()).ok()
}

/// The newest whole label of a disk of `blocks` blocks, if either copy is.
pub fn read(file: &File, blocks: u64) -> io::Result<Option<DiskLabel>> {
    let mut newest: Option<DiskLabel> = None;
    for copy in 0..LABEL_SECTORS {
        let mut sector = vec![0u8; SECTOR_BYTES as usize];
        let read = file.read_at(&mut sector, (blocks + copy) * SECTOR_BYTES)?;
        let label = DiskLabel::decode(&sector[..read]);
        if let Some(label) =
            label.filter(|l| newest.as_ref().is_none_or(|n| l.sequence > n.sequence))
        {
            newest = Some(label);
        }
    }
    Ok(newest)
}

/// Writes `label` to both copies of a disk of `blocks` blocks, each synced
/// before the next begins.
pub fn write(file: &File, blocks: u64, label: &DiskLabel) -> io::Result<()> {
    let sector = label.encode();
    for copy in 0..LABEL_SECTORS {
        file.write_all_at(&sector, (blocks + copy) * SECTOR_BYTES)?;
        file.sync_data()?;
    }
    Ok(())
}

/// Brings the label of every disk in service in line with `config`: what a
/// save of the configuration does first. A file that is missing is left for
/// the next start to fail; a label naming another disk is never overwritten
/// (the next start reports it).
pub(crate) fn follow(dir: &Path, directory: u128, disks: Vec<DiskPlace>) -> io::Result<()> {
    for disk in disks {
        let path = dir.join(&disk.file);
        let file = match OpenOptions::new().read(true).write(true).open(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        let current = read(&file, disk.blocks)?;
        let mut wanted = DiskLabel {
            directory,
            name: disk.name.clone(),
            blocks: disk.blocks,
            role: disk.role,
            sequence: 1,
        };
        match current {
            Some(label) if label.same_as(&wanted) => continue,
            Some(label) if label.directory != directory || label.name != disk.name => {
                tracing::error!(
                    "{} holds the label of {}: not relabelled as disk {}",
                    path.display(),
                    holder(&label, directory),
                    disk.name
                );
                continue;
            }
            Some(label) => wanted.sequence = label.sequence + 1,
            None => {}
        }
        write(&file, disk.blocks, &wanted)?;
    }
    Ok(())
}

/// Finds the file that carries each disk's label: a renamed or swapped file
/// is found among the directory's `*.img` files. Returns the disks whose
/// file is another than `disks` says, with the file, and the disks whose
/// label is on no file, with why.
pub(crate) fn locate(dir: &Path, directory: u128, disks: &[DiskPlace]) -> io::Result<Located> {
    let mut index: Option<BTreeMap<String, Vec<(String, u64)>>> = None;
    let mut located = Located::default();
    for disk in disks {
        let found = what_holds(dir, &disk.file, disk.blocks)?;
        if found
            .as_ref()
            .is_some_and(|l| l.directory == directory && l.name == disk.name)
        {
            continue;
        }
        let index = match &mut index {
            Some(index) => index,
            None => index.insert(scan(dir, directory)?),
        };
        let candidates: Vec<&String> = (index.get(&disk.name).into_iter().flatten())
            .filter(|(_, blocks)| *blocks == disk.blocks)
            .map(|(file, _)| file)
            .collect();
        match candidates.as_slice() {
            [file] => located.moved.push((disk.name.clone(), (*file).clone())),
            _ => located.unlabelled.push((
                disk.name.clone(),
                why_not(&disk.file, found.as_ref(), directory, &candidates),
            )),
        }
    }
    Ok(located)
}

/// What [`locate`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Located {
    /// Disks in another file than the configuration says: name, file.
    pub(crate) moved: Vec<(String, String)>,
    /// Disks whose label is on no file, or on several: name, why.
    pub(crate) unlabelled: Vec<(String, String)>,
}

/// A disk in service: where the configuration has it, and the role its
/// label must give.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct DiskPlace {
    /// Its name.
    pub(crate) name: String,
    /// Its file, relative to the data directory.
    pub(crate) file: String,
    /// Its blocks, before the labels.
    pub(crate) blocks: u64,
    /// What it is in the node.
    pub(crate) role: Role,
}

/// The label of the disk file `file` of `blocks` blocks; `None` if it is
/// missing, too short, or holds no whole label.
fn what_holds(dir: &Path, file: &str, blocks: u64) -> io::Result<Option<DiskLabel>> {
    match File::open(dir.join(file)) {
        Ok(file) => read(&file, blocks),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Every `*.img` file of the directory that carries one of its labels, by
/// disk name: the file and the blocks its label gives.
fn scan(dir: &Path, directory: u128) -> io::Result<BTreeMap<String, Vec<(String, u64)>>> {
    let mut index: BTreeMap<String, Vec<(String, u64)>> = BTreeMap::new();
    for (file, label) in labelled_files(dir, directory)? {
        index
            .entry(label.name)
            .or_default()
            .push((file, label.blocks));
    }
    Ok(index)
}

/// Every `*.img` file of the directory that carries one of its labels, in
/// file name order, with the label.
pub(crate) fn labelled_files(dir: &Path, directory: u128) -> io::Result<Vec<(String, DiskLabel)>> {
    let mut found = Vec::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let length = entry.metadata()?.len();
        if !name.ends_with(".img") || !entry.file_type()?.is_file() || length % SECTOR_BYTES != 0 {
            continue;
        }
        let Some(blocks) = (length / SECTOR_BYTES).checked_sub(LABEL_SECTORS) else {
            continue;
        };
        if let Some(label) = what_holds(dir, &name, blocks)?
            && label.directory == directory
            && label.blocks == blocks
        {
            found.push((name, label));
        }
    }
    found.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(found)
}

/// Why disk `file` cannot be used, for the configuration and the log.
fn why_not(file: &str, found: Option<&DiskLabel>, directory: u128, others: &[&String]) -> String {
    let holds = match found {
        None => format!("{file} is missing or holds no disk label"),
        Some(label) => format!("{file} holds the label of {}", holder(label, directory)),
    };
    match others {
        [] => holds,
        _ => format!(
            "{holds}, and the disk's label is on {} files ({}): remove all but one",
            others.len(),
            others
                .iter()
                .map(|f| f.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

fn holder(label: &DiskLabel, directory: u128) -> String {
    match label.directory == directory {
        true => format!("disk {} ({})", label.name, label.role),
        false => format!(
            "disk {} of another data directory ({:032x})",
            label.name, label.directory
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BLOCKS: u64 = 64;

    fn place(name: &str, role: Role) -> DiskPlace {
        DiskPlace {
            name: name.into(),
            file: format!("{name}.img"),
            blocks: BLOCKS,
            role,
        }
    }

    fn member(position: u16) -> Role {
        Role::Member {
            aggregate: AggrName {
                id: 0,
                name: "aggr0".into(),
            },
            group: 0,
            position,
            group_size: 8,
            raid_type: RaidType::RaidDp,
            blocks_per_disk: BLOCKS,
            tier: Tier::Hdd,
        }
    }

    fn label_of(dir: &Path, file: &str) -> Option<DiskLabel> {
        what_holds(dir, file, BLOCKS).expect("readable")
    }

    #[test]
    fn a_label_round_trips_and_any_flipped_byte_voids_it() {
        let label = DiskLabel {
            directory: 0x0123_4567_89ab_cdef_0011_2233_4455_6677,
            name: "disk7".into(),
            blocks: 196_608,
            role: Role::Member {
                aggregate: AggrName {
                    id: 3,
                    name: "aggr3".into(),
                },
                group: 2,
                position: 5,
                group_size: 16,
                raid_type: RaidType::RaidDp,
                blocks_per_disk: 196_000,
                tier: Tier::Ssd,
            },
            sequence: 9,
        };
        let sector = label.encode();
        assert_eq!(sector.len(), SECTOR_BYTES as usize);
        assert_eq!(DiskLabel::decode(&sector), Some(label.clone()));
        // A label of an HDD member, as labels were written before tiers:
        // the byte is 0, and reads back as HDD.
        let hdd = DiskLabel {
            role: member(5),
            ..label
        };
        let decoded = DiskLabel::decode(&hdd.encode()).expect("valid");
        assert!(matches!(
            decoded.role,
            Role::Member {
                tier: Tier::Hdd,
                ..
            }
        ));
        assert_eq!(hdd.encode()[TIER_AT], 0);
        for at in [0, 20, 45, 130, 200, 4095] {
            let mut bent = sector.clone();
            bent[at] ^= 1;
            assert_eq!(DiskLabel::decode(&bent), None, "byte {at}");
        }
        assert_eq!(DiskLabel::decode(&vec![0; SECTOR_BYTES as usize]), None);
    }

    #[test]
    fn a_torn_copy_leaves_the_other_and_a_change_writes_a_newer_one() {
        let dir = tempfile::tempdir().expect("a scratch directory");
        let path = dir.path().join("disk8.img");
        File::create(&path).expect("made");
        follow(dir.path(), 7, vec![place("disk8", Role::Pool)]).expect("labelled");
        let file = OpenOptions::new().write(true).open(&path).expect("opens");
        assert_eq!(
            file.metadata().expect("stat").len(),
            disk_file_bytes(BLOCKS)
        );
        file.write_all_at(&[0xff; 100], BLOCKS * SECTOR_BYTES + 10)
            .expect("copy A torn");
        let copy_b = label_of(dir.path(), "disk8.img").expect("copy B");
        assert_eq!((copy_b.sequence, copy_b.role), (1, Role::Pool));
        follow(dir.path(), 7, vec![place("disk8", member(4))]).expect("relabelled");
        let label = label_of(dir.path(), "disk8.img").expect("labelled");
        assert_eq!(
            (label.sequence, label.role.to_string()),
            (2, "aggr0 rg0 position 4".into())
        );
        follow(dir.path(), 7, vec![place("disk8", member(4))]).expect("unchanged");
        assert_eq!(
            label_of(dir.path(), "disk8.img")
                .expect("labelled")
                .sequence,
            2
        );
    }

    #[test]
    fn a_label_naming_another_disk_is_never_overwritten() {
        let dir = tempfile::tempdir().expect("a scratch directory");
        File::create(dir.path().join("disk1.img")).expect("made");
        follow(dir.path(), 7, vec![place("disk1", member(1))]).expect("labelled");
        let other_disk = DiskPlace {
            file: "disk1.img".into(),
            ..place("disk2", member(2))
        };
        follow(dir.path(), 7, vec![other_disk.clone()]).expect("left");
        follow(dir.path(), 8, vec![place("disk1", member(1))]).expect("left");
        let label = label_of(dir.path(), "disk1.img").expect("labelled");
        assert_eq!((label.directory, label.name.as_str()), (7, "disk1"));
        let located = locate(dir.path(), 7, &[other_disk]).expect("located");
        assert_eq!(located.unlabelled.len(), 1);
        assert!(
            located.unlabelled[0]
                .1
                .contains("holds the label of disk disk1 (aggr0 rg0 position 1)"),
            "{located:?}"
        );
    }
}
