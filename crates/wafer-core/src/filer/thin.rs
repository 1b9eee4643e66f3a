//! Thin LUNs: admitting writes to LUNs without a space reservation.
//!
//! Theory. A space-reserved LUN took its whole size from its volume when it
//! was created, so a write to it always has a block. A thin LUN took
//! nothing: each block it comes to hold is taken from the volume's
//! available space when it is first written. So a write that fills holes of
//! a thin LUN is checked before it is logged: the holes it fills that no
//! write waiting for a CP fills already (its *fills*) must fit in the
//! volume's available space, counting the fills already waiting as taken.
//! A write that does not fit is refused (ENOSPC for NBD, SPACE ALLOCATION
//! FAILED for iSCSI) and changes nothing; an acknowledged write never
//! needs a block it was not promised.
//!
//! Computing the available space means counting the volume's maps, too
//! slow for every write, so each volume keeps a lower bound on the blocks
//! its thin LUNs may still fill: the exact figure when it was last
//! computed, less every fill admitted since. Between changes to the
//! namespace nothing but a thin fill makes a volume's used space grow (an
//! overwrite of a block a snapshot shares turns a block of overwrite
//! reserve into a snapshot's, at most one for one), so the bound stays a
//! bound; any other change forgets it, and so does every CP's commit (a
//! snapshot taken makes the blocks thin LUNs hold shared, which counts them
//! twice; a write asked for while the snapshot was pending waited for the
//! commit and is checked again after it). A write the bound cannot cover is
//! checked against the exact figure before it is refused. A mount's replay
//! applies writes without this check: each was admitted when it was logged.

use super::Filer;
use super::api::HostError;
use super::namespace::Unwritten;
use super::space::SpaceInputs;
use crate::BLOCK_SIZE;
use crate::nvlog::{Change, LoggedOp, LunId};
use crate::payload::Payload;
use crate::units::{Fbn, VolumeId};

impl<P: Payload> Filer<P> {
    /// Volume `id`'s blocks the next CP writes, and how many of them fill a
    /// thin LUN's hole.
    pub(super) fn unwritten(&self, id: VolumeId) -> Unwritten {
        let mut unwritten = Unwritten::default();
        let capturing = self.cp.iter().flat_map(|cp| cp.capturing_keys());
        let keys = self.dirty.iter().map(|(key, ())| *key);
        for key in keys.chain(capturing.filter(|key| !self.dirty.contains_key(key))) {
            if key.0.volume != id {
                continue;
            }
            unwritten.blocks += 1;
            unwritten.thin_fills += u64::from(self.is_thin_hole(key));
        }
        unwritten
    }

    /// Whether `(lun, fbn)` is a block of a thin LUN that no CP has
    /// allocated (a block whose path is not in memory counts as one).
    fn is_thin_hole(&self, (lun, fbn): (LunId, Fbn)) -> bool {
        let Ok((_, l)) = self.namespace.lun(lun) else {
            return false;
        };
        !l.attributes.space_reserved && l.tree.try_get(fbn).is_none_or(|p| p.is_null())
    }

    /// Whether a write to `(lun, fbn)` would fill a thin LUN's hole that no
    /// write waiting for a CP fills already.
    fn is_new_fill(&self, key: (LunId, Fbn)) -> bool {
        let waiting = self.cache.get(&key).is_some_and(|e| e.dirty || e.pinned);
        !waiting && self.is_thin_hole(key)
    }

    /// The fills `op` makes, if it may be logged: a write to a thin LUN
    /// whose fills its volume has no room for is refused. A trim fills
    /// nothing but the blocks it covers in part (their rest is kept, in a
    /// new block).
    pub(super) fn admit_fills(&mut self, op: &LoggedOp) -> Result<u64, HostError> {
        let Some((lun, blocks)) = filled_blocks(op) else {
            return Ok(0);
        };
        let thin = self
            .namespace
            .lun(lun)
            .is_ok_and(|(_, l)| !l.attributes.space_reserved);
        if !thin {
            return Ok(0); // a space-reserved LUN's blocks were set aside
        }
        let fills = blocks.filter(|&fbn| self.is_new_fill((lun, Fbn(fbn))));
        let fills = fills.count() as u64;
        let blind = self.sabotaged(super::Sabotage::ThinWritesAdmittedBlindly);
        if fills == 0 || blind || self.thin_room.get(&lun.volume).is_some_and(|&r| r >= fills) {
            return Ok(fills);
        }
        let room = self.exact_thin_room(lun.volume);
        self.thin_room.insert(lun.volume, room);
        match fills <= room {
            true => Ok(fills),
            false => Err(HostError::NoSpace {
                needed_blocks: fills,
                available_blocks: room,
            }),
        }
    }

    /// Takes `fills` admitted blocks from `volume`'s bound.
    pub(super) fn spend_thin_room(&mut self, volume: VolumeId, fills: u64) {
        if let Some(room) = self.thin_room.get_mut(&volume) {
            *room = room.saturating_sub(fills);
        }
    }

    /// The blocks `volume`'s thin LUNs may still fill: its available space,
    /// with the fills waiting for a CP counted as taken.
    fn exact_thin_room(&self, id: VolumeId) -> u64 {
        let Some(volume) = self.namespace.volume(id) else {
            return 0;
        };
        let fills = self.unwritten(id).thin_fills;
        let space = SpaceInputs::with_fills(volume, fills).space(volume.size_bytes, 0);
        space.available_bytes / BLOCK_SIZE as u64
    }
}

/// The LUN a write or trim `op` changes, and the blocks it may fill: every
/// block a write touches; those a trim covers only in part.
fn filled_blocks(op: &LoggedOp) -> Option<(LunId, impl Iterator<Item = u64>)> {
    let block = BLOCK_SIZE as u64;
    let (lun, offset, length, whole_ones_fill) = match op {
        LoggedOp::Change(Change::Write { lun, offset, data }) => {
            (*lun, *offset, data.len() as u64, true)
        }
        LoggedOp::Change(Change::Trim {
            lun,
            offset,
            length,
        }) => (*lun, *offset, *length, false),
        _ => return None,
    };
    let end = offset + length;
    let partial = move |fbn: u64| fbn * block < offset || (fbn + 1) * block > end;
    let blocks = offset / block..end.div_ceil(block);
    Some((
        lun,
        blocks.filter(move |&fbn| whole_ones_fill || partial(fbn)),
    ))
}
