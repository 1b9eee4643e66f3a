//! Destroying a volume: every block it and its snapshots hold goes back to
//! the aggregate, and its record leaves the volume table.
//!
//! Theory. `vol destroy` is logged like any change, so once it is
//! acknowledged it happens, crash or not; but the volume's blocks are still
//! in the on-disk image until a CP drops its record. So the change itself
//! only marks the volume destroyed (its name stays taken, it serves
//! nothing), and the work is done at the start of a CP, when nothing is
//! being allocated: the pvbns its container map names and those of the map
//! file itself are freed after that CP, as any overwritten block is, and
//! the CP writes the table without its record. A crash before that CP
//! commits replays the change and the next CP does it again; after, the
//! volume is simply absent. No LUN tree is walked: the container map names
//! every block of the volume's files, snapshots' included, so the cost is
//! one pass over the map, whatever the data.
//!
//! Only an offline volume is destroyed, so no host I/O reaches it. Reads
//! that began before it went offline may still be waiting for disk: its
//! destruction then waits for a later CP, as it does for a snapshot the
//! volume still has to take.

use super::Filer;
use super::meta::Volume;
use crate::format::BlockPtr;
use crate::payload::Payload;
use crate::units::{Fbn, Pvbn, VolumeId};

impl<P: Payload> Filer<P> {
    /// Frees the volumes destroyed since the last CP that nothing holds any
    /// more; called as a CP starts, before it captures dirty blocks.
    pub(super) fn destroy_volumes(&mut self) {
        assert!(self.cp.is_none(), "volumes are destroyed between CPs");
        for id in self.namespace.destroying() {
            if self.volume_is_busy(id) {
                continue;
            }
            self.forget_volume_blocks(id);
            let volume = self
                .namespace
                .remove_volume(id, self.options.dirty_high_water);
            self.release_volume(&volume);
            self.volume_record_dirty(id);
        }
    }

    /// Whether volume `id` still has reads of its blocks in flight or a
    /// snapshot to take.
    fn volume_is_busy(&self, id: VolumeId) -> bool {
        let reading = self
            .cache
            .filling()
            .iter()
            .any(|(key, _)| key.0.volume == id);
        reading || self.namespace[id].pending_snapshot.is_some()
    }

    /// Drops volume `id`'s cached blocks, dirty ones included: they are
    /// never written.
    fn forget_volume_blocks(&mut self, id: VolumeId) {
        let luns: Vec<_> = self.luns(id).into_iter().map(|(lun, ..)| lun).collect();
        for lun in luns {
            for key in self.cache.keys_of(lun, Fbn(0)) {
                self.cache.remove(&key).expect("listed");
                self.dirty.remove(&key);
            }
        }
    }

    /// Frees every pvbn `volume` held: those its container map names, and
    /// the map file's own blocks.
    fn release_volume(&mut self, volume: &Volume) {
        let release_after = self.release_point();
        let container = &volume.container;
        for vvbn in 0..volume.vvbn_blocks {
            let pvbn = container.get(vvbn);
            if pvbn != 0 {
                self.release_pvbn(Pvbn(pvbn), release_after);
            }
        }
        let mut own: Vec<BlockPtr> = Vec::new();
        volume
            .container_file
            .tree
            .for_each_pointer(|_, ptr| own.push(ptr));
        for ptr in own {
            self.release_pvbn(ptr.pvbn, release_after);
        }
    }
}
