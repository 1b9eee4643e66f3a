//! The namespace: an aggregate's flexible volumes and their LUNs, what they
//! are called, how large they are, what they reserve, and the checks every
//! administrative change must pass.
//!
//! Theory. Space is promised, never overcommitted (`space`): creating a
//! volume reserves its whole footprint in the aggregate, and creating a
//! space-reserved LUN its whole size in the volume, so the blocks a change
//! will need were set aside before it was accepted (a thin LUN promises
//! nothing: its writes ask for their blocks as they come, in `thin`, and the
//! blocks they were given count here as the volume's). The promises are kept here, in one place:
//! before a change the host asks for is logged, it is checked against the
//! namespace as it stands (its names free, its sizes whole blocks, its LUN
//! or snapshot there, the promises still kept with it). A change that had
//! to wait is checked again when it is taken up again, and one a mount
//! replays is checked as the namespace then stands, so that one already in
//! the on-disk image is skipped. Applying a change assumes what its check
//! established. The namespace holds no reference to the aggregate around
//! it: what its checks need of it (the blocks it can promise volumes, the
//! dirty high water that sizes each volume's room for CPs, how many of a
//! volume's blocks wait dirty for the next CP) is passed in with each
//! question.

use std::collections::BTreeMap;
use std::ops::Index;

use super::api::HostError;
use super::container::CONTAINER_ENTRIES_PER_BLOCK;
use super::meta::{
    FIRST_LUN, Lun, MAX_LUNS, MAX_SNAPSHOTS, MAX_VOLUMES, Snapshot, VOLUMES_PER_BLOCK, Volume,
    VolumeState, volume_table_bytes,
};
use super::space::{MAX_SNAP_RESERVE_PERCENT, SpaceInputs, VolumeSpace};
use crate::format::{LunAttributes, NAME_MAX};
use crate::nvlog::{Change, LoggedOp, LunId};
use crate::schedule::SnapKind;
use crate::tree::BlockTree;
use crate::units::{FileId, SnapshotId, VolumeId};
use crate::{BLOCK_SIZE, Block};

/// A volume's blocks that the next CP writes: how many, and how many of
/// them fill holes of its thin LUNs (blocks the volume does not count yet).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Unwritten {
    pub(super) blocks: u64,
    pub(super) thin_fills: u64,
}

/// An aggregate's volumes and LUNs, and the pvbns their volumes reserve.
#[derive(Clone, Debug, Default)]
pub(super) struct Namespace {
    volumes: BTreeMap<VolumeId, Volume>,
    /// pvbns promised to volumes: the sum of their footprints.
    reserved_blocks: u64,
    /// Blocks of the volume table file. It never shrinks: a destroyed
    /// volume's record becomes a free slot, so no block of the table's tree
    /// ever falls outside its length.
    table_blocks: u64,
}

/// What the aggregate lends the namespace's space checks.
#[derive(Clone, Copy, Debug)]
pub(super) struct AggregateRoom {
    /// pvbns it can promise volumes in all: its total less the superblock
    /// pair, its own metadata and its share of CP room.
    pub(super) promisable_blocks: u64,
    /// `Options::dirty_high_water`, which sizes a volume's room for CPs.
    pub(super) dirty_high_water: usize,
}

impl Index<VolumeId> for Namespace {
    type Output = Volume;

    fn index(&self, id: VolumeId) -> &Volume {
        &self.volumes[&id]
    }
}

/// Lookups.
impl Namespace {
    /// Volume `id`, if there is one.
    pub(super) fn volume(&self, id: VolumeId) -> Option<&Volume> {
        self.volumes.get(&id)
    }

    /// Volume `id` to change, if there is one.
    pub(super) fn volume_mut(&mut self, id: VolumeId) -> Option<&mut Volume> {
        self.volumes.get_mut(&id)
    }

    /// Every volume, by id.
    pub(super) fn volumes(&self) -> impl Iterator<Item = (VolumeId, &Volume)> {
        self.volumes.iter().map(|(&id, volume)| (id, volume))
    }

    /// Every volume, by id, to change.
    pub(super) fn volumes_mut(&mut self) -> impl Iterator<Item = (VolumeId, &mut Volume)> {
        self.volumes.iter_mut().map(|(&id, volume)| (id, volume))
    }

    /// Volume `id`, if it serves: neither offline nor being destroyed.
    pub(super) fn serving_volume(&self, id: VolumeId) -> Result<&Volume, HostError> {
        let volume = self.existing_volume(id)?;
        match volume.state {
            VolumeState::Online => Ok(volume),
            VolumeState::Offline => Err(HostError::Offline(volume.name.clone())),
            VolumeState::Destroying => Err(HostError::NotFound("volume")),
        }
    }

    /// Volumes destroyed and waiting for a CP to free their blocks.
    pub(super) fn destroying(&self) -> Vec<VolumeId> {
        let volumes = self.volumes.iter();
        volumes
            .filter(|(_, v)| v.state == VolumeState::Destroying)
            .map(|(&id, _)| id)
            .collect()
    }

    /// LUN `id` and its volume.
    pub(super) fn lun(&self, id: LunId) -> Result<(&Volume, &Lun), HostError> {
        let volume = self.existing_volume(id.volume)?;
        let lun = volume
            .luns
            .get(&id.file)
            .ok_or(HostError::NotFound("LUN"))?;
        Ok((volume, lun))
    }

    /// The block tree of LUN `lun`, which exists.
    pub(super) fn lun_tree_mut(&mut self, lun: LunId) -> &mut BlockTree {
        &mut self
            .volumes
            .get_mut(&lun.volume)
            .expect("volume exists")
            .luns
            .get_mut(&lun.file)
            .expect("LUN exists")
            .tree
    }

    /// Snapshot `name` of volume `volume`.
    fn snapshot(&self, volume: VolumeId, name: &str) -> Result<(SnapshotId, &Snapshot), HostError> {
        self.existing_volume(volume)?
            .snapshot_named(name)
            .ok_or(HostError::NotFound("snapshot"))
    }

    /// LUN `lun` as snapshot `name` of its volume holds it.
    pub(super) fn snapshot_lun(
        &self,
        lun: LunId,
        name: &str,
    ) -> Result<(SnapshotId, &Lun), HostError> {
        let (id, snapshot) = self.snapshot(lun.volume, name)?;
        let l = snapshot
            .luns
            .get(&lun.file)
            .ok_or(HostError::NotFound("LUN"))?;
        Ok((id, l))
    }

    fn existing_volume(&self, id: VolumeId) -> Result<&Volume, HostError> {
        self.volume(id).ok_or(HostError::NotFound("volume"))
    }

    /// Bytes volume `id` can still reserve for LUNs, with `fills` blocks waiting to fill its thin LUNs' holes.
    fn volume_available(&self, id: VolumeId, fills: u64) -> u64 {
        self.volume(id).map_or(0, |v| {
            let inputs = SpaceInputs::with_fills(v, fills);
            inputs.space(v.size_bytes, 0).available_bytes
        })
    }

    /// pvbns not yet promised to a volume.
    pub(super) fn aggregate_available(&self, room: AggregateRoom) -> u64 {
        room.promisable_blocks.saturating_sub(self.reserved_blocks)
    }

    /// Blocks of the volume table: enough for the highest volume id, and
    /// never fewer than it had.
    pub(super) fn volume_table_blocks(&self) -> u64 {
        let needed = self
            .volumes
            .keys()
            .last()
            .map_or(0, |v| u64::from(v.0) / VOLUMES_PER_BLOCK as u64 + 1);
        needed.max(self.table_blocks)
    }

    /// The volume table as the mount found it: `blocks` long.
    pub(super) fn keep_table_blocks(&mut self, blocks: u64) {
        self.table_blocks = blocks;
    }

    /// Volume-table block `fbn`, encoded.
    pub(super) fn volume_table_bytes(&self, fbn: u64) -> Box<Block> {
        volume_table_bytes(&self.volumes, fbn)
    }
}

/// Changes, each already checked by [`Namespace::validate`].
impl Namespace {
    /// Creates volume `name` and reserves its footprint; returns its id. Its
    /// record in the volume table is the aggregate's to mark dirty.
    pub(super) fn create_volume(
        &mut self,
        name: &str,
        size_bytes: u64,
        dirty_high_water: usize,
    ) -> VolumeId {
        let id = (0..)
            .map(VolumeId)
            .find(|id| !self.volumes.contains_key(id))
            .expect("a free id");
        let size_blocks = size_bytes / BLOCK_SIZE as u64;
        self.reserved_blocks += volume_footprint(size_blocks, dirty_high_water);
        let vvbns = volume_vvbns(size_blocks, dirty_high_water);
        let mut volume = Volume::new(name.to_string(), size_bytes, vvbns);
        volume.activemap_file.dirty.insert(0); // vvbn 0 is marked used
        self.volumes.insert(id, volume);
        self.table_blocks = self.volume_table_blocks();
        id
    }

    /// Sets volume `id` online or offline.
    pub(super) fn set_online(&mut self, id: VolumeId, online: bool) {
        let volume = self.volumes.get_mut(&id).expect("validated");
        volume.state = match online {
            true => VolumeState::Online,
            false => VolumeState::Offline,
        };
    }

    /// Sets volume `id`'s size and its reservation in the aggregate. Its
    /// vvbn space grows, if the new size needs more, at the start of the
    /// next CP ([`Volume::grow_vvbns`]): vvbns are only allocated by CPs.
    pub(super) fn resize_volume(&mut self, id: VolumeId, size_bytes: u64, dirty_high_water: usize) {
        let volume = self.volumes.get_mut(&id).expect("validated");
        let block = BLOCK_SIZE as u64;
        let footprint = |bytes: u64| volume_footprint(bytes / block, dirty_high_water);
        self.reserved_blocks =
            self.reserved_blocks + footprint(size_bytes) - footprint(volume.size_bytes);
        volume.size_bytes = size_bytes;
        let vvbns = volume_vvbns(size_bytes / block, dirty_high_water);
        volume.vvbns_wanted = vvbns.max(volume.vvbn_blocks);
    }

    /// Grows the vvbn spaces of the volumes resized larger, as a CP starts;
    /// returns them, whose records the CP must write.
    pub(super) fn grow_vvbn_spaces(&mut self) -> Vec<VolumeId> {
        let mut grown = Vec::new();
        for (&id, volume) in &mut self.volumes {
            if volume.vvbns_wanted > volume.vvbn_blocks {
                volume.grow_vvbns();
                grown.push(id);
            }
        }
        grown
    }

    /// Marks volume `id` destroyed: a CP frees it ([`Namespace::remove_volume`]).
    pub(super) fn destroy_volume(&mut self, id: VolumeId) {
        self.volumes.get_mut(&id).expect("validated").state = VolumeState::Destroying;
    }

    /// Takes volume `id` out, with its reservation; its blocks are the
    /// caller's to free.
    pub(super) fn remove_volume(&mut self, id: VolumeId, dirty_high_water: usize) -> Volume {
        let volume = self.volumes.remove(&id).expect("a volume being destroyed");
        let size_blocks = volume.size_bytes / BLOCK_SIZE as u64;
        self.reserved_blocks -= volume_footprint(size_blocks, dirty_high_water);
        volume
    }

    /// Creates LUN `name` of `size_bytes` in volume `volume_id`.
    pub(super) fn create_lun(
        &mut self,
        volume_id: VolumeId,
        name: &str,
        size_bytes: u64,
        attributes: LunAttributes,
    ) -> LunId {
        let volume = self.volumes.get_mut(&volume_id).expect("validated");
        let file = (FIRST_LUN..)
            .map(FileId)
            .find(|f| !volume.luns.contains_key(f))
            .expect("a free inode");
        let lun = Lun {
            name: name.to_string(),
            size_bytes,
            generation: 1,
            attributes,
            tree: BlockTree::new(),
        };
        volume.luns.insert(file, lun);
        volume.inofile.dirty.insert(Volume::inofile_block(file));
        LunId {
            volume: volume_id,
            file,
        }
    }

    /// Records LUN `lun`'s new size; its blocks past the new end are the
    /// caller's to let go of.
    pub(super) fn resize_lun(&mut self, lun: LunId, size_bytes: u64) {
        let volume = self.volumes.get_mut(&lun.volume).expect("validated");
        volume
            .luns
            .get_mut(&lun.file)
            .expect("validated")
            .size_bytes = size_bytes;
        volume.inofile.dirty.insert(Volume::inofile_block(lun.file));
    }

    /// A volume the mount found in the volume table.
    pub(super) fn load_volume(&mut self, id: VolumeId, volume: Volume) {
        self.volumes.insert(id, volume);
    }

    /// Counts the mounted volumes' footprints as reserved.
    pub(super) fn count_reservations(&mut self, dirty_high_water: usize) {
        self.reserved_blocks = self
            .volumes
            .values()
            .map(|v| volume_footprint(v.size_bytes / BLOCK_SIZE as u64, dirty_high_water))
            .sum();
    }
}

/// Validation: whether a change may be logged.
impl Namespace {
    /// Checks `op` against the namespace as it stands, with `room` and a
    /// volume's blocks the next CP writes (`unwritten`) from the aggregate.
    pub(super) fn validate(
        &self,
        op: &LoggedOp,
        room: AggregateRoom,
        unwritten: impl Fn(VolumeId) -> Unwritten,
    ) -> Result<(), HostError> {
        let LoggedOp::Change(change) = op else {
            return Ok(()); // not a host's change
        };
        if let Some(volume) = change.volume() {
            match change {
                Change::SetVolumeOnline { .. } | Change::DestroyVolume { .. } => {}
                _ => {
                    self.serving_volume(volume)?;
                }
            }
        }
        match change {
            Change::Write { lun, offset, data } => {
                self.check_range(*lun, *offset, data.len() as u64)
            }
            Change::Trim {
                lun,
                offset,
                length,
            } => self.check_range(*lun, *offset, *length),
            Change::CreateVolume { name, size_bytes } => {
                self.check_new_volume(name, *size_bytes, room)
            }
            Change::CreateLun {
                volume,
                name,
                size_bytes,
                attributes,
            } => self.check_new_lun(
                *volume,
                name,
                *size_bytes,
                *attributes,
                unwritten(*volume).thin_fills,
            ),
            Change::ResizeLun { lun, size_bytes } => {
                self.check_resize(*lun, *size_bytes, unwritten(lun.volume).thin_fills)
            }
            Change::DestroyLun { lun } => self.lun(*lun).map(|_| ()),
            Change::SetReadRealloc { volume, .. } | Change::SetCachePolicy { volume, .. } => {
                self.existing_volume(*volume).map(|_| ())
            }
            Change::CreateSnapshot { volume, name } => {
                self.check_new_snapshot(*volume, name, unwritten(*volume).blocks)
            }
            Change::DeleteSnapshot { volume, name } => self.snapshot(*volume, name).map(|_| ()),
            Change::RestoreSnapshot { volume, name, lun } => {
                self.check_restore(*volume, name, *lun, unwritten(*volume).thin_fills)
            }
            Change::SetSnapReserve { volume, percent } => {
                self.check_snap_reserve(*volume, *percent, unwritten(*volume).thin_fills)
            }
            Change::SetVolumeOnline { volume, .. } => self.check_present(*volume),
            Change::ResizeVolume { volume, size_bytes } => {
                self.check_volume_size(*volume, *size_bytes, room, unwritten(*volume).thin_fills)
            }
            Change::DestroyVolume { volume } => self.check_destroy(*volume),
            Change::SetSnapSchedule { volume, schedule } => {
                self.existing_volume(*volume)?;
                schedule
                    .check()
                    .map_err(|e| HostError::Invalid(e.to_string()))
            }
            Change::ScheduledSnapshot { volume, kind, keep } => {
                self.check_scheduled_snapshot(*volume, *kind, *keep, unwritten(*volume).blocks)
            }
        }
    }

    /// A volume neither absent nor being destroyed.
    fn check_present(&self, id: VolumeId) -> Result<(), HostError> {
        match self.existing_volume(id)?.state {
            VolumeState::Destroying => Err(HostError::NotFound("volume")),
            VolumeState::Online | VolumeState::Offline => Ok(()),
        }
    }

    /// A volume's new size: whole blocks, at least the smallest volume's;
    /// growing takes the footprint it adds from the aggregate, shrinking
    /// must leave room for what the volume holds and reserves.
    fn check_volume_size(
        &self,
        id: VolumeId,
        size_bytes: u64,
        room: AggregateRoom,
        fills: u64,
    ) -> Result<(), HostError> {
        let volume = self.existing_volume(id)?;
        check_volume_bytes(size_bytes)?;
        let block = BLOCK_SIZE as u64;
        let footprint = |bytes: u64| volume_footprint(bytes / block, room.dirty_high_water);
        let added = footprint(size_bytes).saturating_sub(footprint(volume.size_bytes));
        let available = self.aggregate_available(room);
        if added > available {
            return Err(HostError::NoSpace {
                needed_blocks: added,
                available_blocks: available,
            });
        }
        fits(SpaceInputs::with_fills(volume, fills).space(size_bytes, 0))
    }

    /// Only an offline volume is destroyed, and not while a snapshot of it
    /// waits for its CP: the next CP must be able to take it out.
    fn check_destroy(&self, id: VolumeId) -> Result<(), HostError> {
        self.check_present(id)?;
        let volume = &self.volumes[&id];
        if volume.state != VolumeState::Offline {
            return Err(HostError::Invalid(format!(
                "volume {} is online: take it offline before destroying it",
                volume.name
            )));
        }
        match &volume.pending_snapshot {
            Some(snapshot) => Err(HostError::Invalid(format!(
                "volume {} is taking snapshot {}: destroy it once that is done",
                volume.name, snapshot.name
            ))),
            None => Ok(()),
        }
    }

    /// A range must lie inside LUN `lun`.
    pub(super) fn check_range(
        &self,
        lun: LunId,
        offset: u64,
        length: u64,
    ) -> Result<(), HostError> {
        check_in_range(offset, length, self.lun(lun)?.1.size_bytes)
    }

    fn check_new_volume(
        &self,
        name: &str,
        size_bytes: u64,
        room: AggregateRoom,
    ) -> Result<(), HostError> {
        let block = BLOCK_SIZE as u64;
        check_name(name)?;
        // A volume being destroyed has let go of its name: replay may find it
        // beside one created after its destruction, as the CP left them.
        let taken = self.volumes.values();
        if taken
            .filter(|v| v.state != VolumeState::Destroying)
            .any(|v| v.name == *name)
        {
            return Err(HostError::Exists(format!("volume {name}")));
        }
        check_volume_bytes(size_bytes)?;
        if self.volumes.len() as u32 >= MAX_VOLUMES {
            return Err(HostError::Invalid(format!("at most {MAX_VOLUMES} volumes")));
        }
        let needed = volume_footprint(size_bytes / block, room.dirty_high_water);
        let available = self.aggregate_available(room);
        if needed > available {
            return Err(HostError::NoSpace {
                needed_blocks: needed,
                available_blocks: available,
            });
        }
        Ok(())
    }

    fn check_new_lun(
        &self,
        volume: VolumeId,
        name: &str,
        size_bytes: u64,
        attributes: LunAttributes,
        fills: u64,
    ) -> Result<(), HostError> {
        check_name(name)?;
        let v = self.existing_volume(volume)?;
        if v.luns.values().any(|l| l.name == *name) {
            return Err(HostError::Exists(format!("LUN {name}")));
        }
        check_lun_size(size_bytes)?;
        if v.luns.len() as u32 >= MAX_LUNS {
            return Err(HostError::Invalid(format!(
                "at most {MAX_LUNS} LUNs per volume"
            )));
        }
        match attributes.space_reserved {
            true => check_reservation(size_bytes, self.volume_available(volume, fills)),
            false => Ok(()),
        }
    }

    /// A new size: a space-reserved LUN's growth comes from its volume.
    fn check_resize(&self, lun: LunId, size_bytes: u64, fills: u64) -> Result<(), HostError> {
        let (_, l) = self.lun(lun)?;
        check_lun_size(size_bytes)?;
        match l.attributes.space_reserved {
            true => check_reservation(
                size_bytes,
                self.volume_available(lun.volume, fills) + l.size_bytes,
            ),
            false => Ok(()),
        }
    }

    fn check_new_snapshot(
        &self,
        volume: VolumeId,
        name: &str,
        dirty_blocks: u64,
    ) -> Result<(), HostError> {
        check_name(name)?;
        let v = self.existing_volume(volume)?;
        if v.snapshot_named(name).is_some()
            || v.pending_snapshot.as_ref().is_some_and(|p| p.name == *name)
        {
            return Err(HostError::Exists(format!("snapshot {name}")));
        }
        check_snapshot_slot(v, 0, dirty_blocks)
    }

    /// A scheduled snapshot: the ones of its kind it pushes out make room.
    fn check_scheduled_snapshot(
        &self,
        volume: VolumeId,
        kind: SnapKind,
        keep: u8,
        dirty_blocks: u64,
    ) -> Result<(), HostError> {
        if keep == 0 {
            return Err(HostError::Invalid(format!(
                "a scheduled {} snapshot keeps at least itself",
                kind.prefix()
            )));
        }
        let v = self.existing_volume(volume)?;
        let pushed_out = v.rotated_out(kind, keep).len();
        check_snapshot_slot(v, pushed_out, dirty_blocks)
    }

    fn check_restore(
        &self,
        volume: VolumeId,
        name: &str,
        lun: Option<FileId>,
        fills: u64,
    ) -> Result<(), HostError> {
        let v = self.existing_volume(volume)?;
        let (_, snapshot) = v
            .snapshot_named(name)
            .ok_or(HostError::NotFound("snapshot"))?;
        if let Some(file) = lun {
            let restored = snapshot
                .luns
                .get(&file)
                .ok_or(HostError::NotFound("LUN in that snapshot"))?;
            let taken = v
                .luns
                .iter()
                .any(|(f, l)| *f != file && l.name == restored.name);
            if taken {
                return Err(HostError::Exists(format!("LUN {}", restored.name)));
            }
        }
        check_restore_room(v, snapshot, lun, fills)
    }

    fn check_snap_reserve(
        &self,
        volume: VolumeId,
        percent: u8,
        fills: u64,
    ) -> Result<(), HostError> {
        let v = self.existing_volume(volume)?;
        if percent > MAX_SNAP_RESERVE_PERCENT {
            return Err(HostError::Invalid(format!(
                "the snapshot reserve is at most {MAX_SNAP_RESERVE_PERCENT}%"
            )));
        }
        let inputs = SpaceInputs {
            snap_reserve_percent: percent,
            ..SpaceInputs::with_fills(v, fills)
        };
        fits(inputs.space(v.size_bytes, 0))
    }
}

/// vvbns a volume of `size_blocks` needs: its data, its indirect blocks and
/// maps (1/128 covers both with room), and room for two CPs of new copies
/// before the old ones are released.
fn volume_vvbns(size_blocks: u64, dirty_high_water: usize) -> u64 {
    size_blocks + size_blocks / 128 + 4 * dirty_high_water as u64 + 256
}

/// pvbns a volume takes from the aggregate: its vvbn space and container map.
fn volume_footprint(size_blocks: u64, dirty_high_water: usize) -> u64 {
    let vvbns = volume_vvbns(size_blocks, dirty_high_water);
    vvbns + vvbns.div_ceil(CONTAINER_ENTRIES_PER_BLOCK) + 8
}

/// A range must lie inside a LUN of `size` bytes.
pub(super) fn check_in_range(offset: u64, length: u64, size: u64) -> Result<(), HostError> {
    match offset.checked_add(length) {
        Some(end) if end <= size => Ok(()),
        _ => Err(HostError::OutOfRange {
            offset,
            length,
            size,
        }),
    }
}

fn check_name(name: &str) -> Result<(), HostError> {
    let valid = !name.is_empty()
        && name.len() <= NAME_MAX
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.');
    match valid {
        true => Ok(()),
        false => Err(HostError::Invalid(format!(
            "'{name}': names are 1..={NAME_MAX} characters of letters, digits, '_', '-' and '.'"
        ))),
    }
}

fn check_volume_bytes(size_bytes: u64) -> Result<(), HostError> {
    match size_bytes < 20 << 20 || size_bytes % BLOCK_SIZE as u64 != 0 {
        true => Err(HostError::Invalid(
            "a volume is at least 20 MiB, in 4 KiB steps".into(),
        )),
        false => Ok(()),
    }
}

fn check_lun_size(size_bytes: u64) -> Result<(), HostError> {
    match size_bytes == 0 || size_bytes % BLOCK_SIZE as u64 != 0 {
        true => Err(HostError::Invalid(
            "a LUN's size is a positive multiple of 4 KiB".into(),
        )),
        false => Ok(()),
    }
}

/// A LUN of `size_bytes` must fit the `available` bytes of its volume.
fn check_reservation(size_bytes: u64, available: u64) -> Result<(), HostError> {
    let block = BLOCK_SIZE as u64;
    match size_bytes > available {
        true => Err(HostError::NoSpace {
            needed_blocks: size_bytes / block,
            available_blocks: available / block,
        }),
        false => Ok(()),
    }
}

/// A new snapshot turns every block of the volume's image into a shared
/// one: the image now, plus what the snapshot's CP writes for the volume
/// (its `dirty` data blocks and, at most, that much again in metadata).
/// Whether `volume` can take a snapshot once `freed` of its snapshots are
/// deleted: none pending, an id free, and room for its CP.
fn check_snapshot_slot(volume: &Volume, freed: usize, dirty: u64) -> Result<(), HostError> {
    if let Some(pending) = &volume.pending_snapshot {
        return Err(HostError::Invalid(format!(
            "volume {} is taking snapshot {}: try again once it is done",
            volume.name, pending.name
        )));
    }
    if volume.snapshots.len() - freed >= MAX_SNAPSHOTS {
        return Err(HostError::Invalid(format!(
            "at most {MAX_SNAPSHOTS} snapshots per volume"
        )));
    }
    check_snapshot_room(volume, dirty)
}

fn check_snapshot_room(volume: &Volume, dirty: u64) -> Result<(), HostError> {
    let image = volume.image_map();
    let summary = volume.summary.union(&image);
    let mut active = volume.activemap.clone();
    for vvbn in image.ones_outside(&[&volume.activemap]) {
        active.set(vvbn);
    }
    let inputs = SpaceInputs {
        active: &active,
        summary: &summary,
        ..SpaceInputs::of(volume)
    };
    let mut space = inputs.space(volume.size_bytes, 0);
    space.used_bytes += (2 * dirty + 16) * BLOCK_SIZE as u64;
    fits(space)
}

/// Restoring makes the snapshot's blocks of the restored LUNs active again
/// (shared) and takes their sizes as reservations (a thin LUN's, its
/// blocks); `fills` blocks wait to fill thin LUNs' holes (counted whole,
/// though a replaced LUN's go with it).
fn check_restore_room(
    volume: &Volume,
    snapshot: &Snapshot,
    lun: Option<FileId>,
    fills: u64,
) -> Result<(), HostError> {
    let restored: Vec<(FileId, &Lun)> = match lun {
        Some(file) => vec![(file, &snapshot.luns[&file])],
        None => snapshot.luns.iter().map(|(f, l)| (*f, l)).collect(),
    };
    let replaced: Vec<&Lun> = match lun {
        Some(file) => volume.luns.get(&file).into_iter().collect(),
        None => volume.luns.values().collect(),
    };
    let mut active = volume.activemap.clone();
    for old in &replaced {
        old.tree.for_each_pointer(|_, ptr| {
            active.clear(ptr.vvbn.0);
        });
    }
    for (_, new) in &restored {
        new.tree.for_each_pointer(|_, ptr| {
            active.set(ptr.vvbn.0);
        });
    }
    let charges = |luns: &mut dyn Iterator<Item = &Lun>| {
        luns.map(Lun::charge)
            .fold((0, 0), |(bytes, blocks), (b, n)| (bytes + b, blocks + n))
    };
    let (replaced_bytes, replaced_blocks) = charges(&mut replaced.iter().copied());
    let (restored_bytes, restored_blocks) = charges(&mut restored.iter().map(|(_, l)| *l));
    let inputs = SpaceInputs {
        active: &active,
        lun_reserved_bytes: volume.reserved_bytes() - replaced_bytes + restored_bytes,
        thin_blocks: volume.thin_blocks() + fills - replaced_blocks + restored_blocks,
        ..SpaceInputs::of(volume)
    };
    fits(inputs.space(volume.size_bytes, 0))
}

/// A change fits if the volume's used space stays within its active total.
fn fits(space: VolumeSpace) -> Result<(), HostError> {
    match space.fits() {
        true => Ok(()),
        false => {
            let block = BLOCK_SIZE as u64;
            Err(HostError::NoSpace {
                needed_blocks: space.used_bytes.div_ceil(block),
                available_blocks: space.active_total_bytes() / block,
            })
        }
    }
}
