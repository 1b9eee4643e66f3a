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
//! Only an offline volume is destroyed, so no host I/O reaches it, and not
//! while a snapshot of it waits for its CP, so the next CP always takes it
//! out. A read that began before it went offline and still waits for disk
//! fails; the block it waits for is dropped like the rest.
//!
//! Replay takes destroyed volumes out where a CP began, between a record of
//! one generation and the next (`mount`), so that what was logged after sees
//! the namespace it saw the first time: a volume created after gets the same
//! id (the lowest free), whether or not the CP that took the old one out
//! committed before a crash, and the space it was promised.

use super::cache::BlockState;
use super::meta::Volume;
use super::{Filer, RequestId};
use crate::format::BlockPtr;
use crate::payload::Payload;
use crate::units::{Fbn, Pvbn, VolumeId};

impl<P: Payload> Filer<P> {
    /// Frees the volumes destroyed since the last CP; called as a CP starts,
    /// before it captures dirty blocks.
    pub(super) fn destroy_volumes(&mut self) {
        assert!(self.cp.is_none(), "volumes are destroyed between CPs");
        for id in self.namespace.destroying() {
            self.forget_volume_blocks(id);
            let volume = self
                .namespace
                .remove_volume(id, self.options.dirty_high_water);
            self.release_volume(&volume);
            self.volume_record_dirty(id);
        }
    }

    /// Drops volume `id`'s cached blocks, dirty ones included (they are
    /// never written) and those being read in (the reads waiting for them
    /// fail).
    fn forget_volume_blocks(&mut self, id: VolumeId) {
        let luns: Vec<_> = self.luns(id).into_iter().map(|(lun, ..)| lun).collect();
        for lun in luns {
            for key in self.cache.keys_of(lun, Fbn(0)) {
                let entry = self.cache.remove(&key).expect("listed");
                self.dirty.remove(&key);
                if let BlockState::Filling(filling) = entry.state {
                    filling
                        .waiters
                        .into_iter()
                        .for_each(|read| self.fail_read(read));
                }
            }
        }
    }

    /// Read `id` waited for a block that is gone with its volume.
    fn fail_read(&mut self, id: RequestId) {
        if let Some(read) = self.reads.get_mut(&id) {
            read.failed = true;
            read.missing -= 1;
        }
        self.finish_read(id);
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
