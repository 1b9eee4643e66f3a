//! What the buffer cache lets go of, offered to the node's Flash Cache.
//!
//! Flash Cache is a victim cache: a block enters it when the buffer cache
//! evicts it, not when it is read. A clean block's content is the content
//! of its home on disk (the block its pointer names), so when eviction
//! takes one the filer offers the node that home and the sector there, its
//! trailer built as the CP built it: the checksum of the content and the
//! identity the pointer and the block's place in its tree give. Data the
//! host wrote counts as low priority and goes in only if the options say
//! so; data read in from disk goes in unless they say not; indirect blocks
//! (metadata) always do. A block whose home cannot be told (its pointer is
//! not resident, or null: a hole) or lies on a failed disk is not offered:
//! reads of a failed disk go to its stripe, never to its home.
//!
//! The filer also answers which of its disk reads the node may serve from
//! the cache: only block reads (a fill, an indirect block, a snapshot's
//! block, a mount's metadata), which it verifies against their pointers.
//! Reads for parity, repairs, resyncs and scrubs are about the disks
//! themselves and go to them.

use wafer_raid::Dbn;

use super::cache::Evicted;
use super::{Filer, IoId, IoPurpose, Sector};
use crate::format::{BlockPtr, Trailer};
use crate::nvlog::LunId;
use crate::payload::Payload;
use crate::tree::NodeId;
use crate::units::{DiskId, Fbn};

/// A clean block the buffer cache let go of: where it lives and the sector
/// there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Victim<P: Payload> {
    /// Its home's disk, by the aggregate's own id.
    pub disk: DiskId,
    /// Its home's block.
    pub dbn: Dbn,
    /// The sector its home holds.
    pub sector: Sector<P>,
}

impl<P: Payload> Filer<P> {
    /// The blocks evicted since the last call, for the node's Flash Cache;
    /// none unless the node has one.
    pub fn take_victims(&mut self) -> Vec<Victim<P>> {
        std::mem::take(&mut self.victims)
    }

    /// Whether the node may answer disk read `io` from its Flash Cache: a
    /// block read, verified against its pointers when it comes back.
    pub fn flash_may_serve(&self, io: IoId) -> bool {
        matches!(self.outbox.kept(io), Some((IoPurpose::Blocks(_), ..)))
    }

    /// The node answers disk read `io`, just issued, wholly from its Flash
    /// Cache: the disk does not see it, so its counters (`statit`'s user
    /// reads, chains and latency) leave it out. A read answered in part
    /// from the cache counts as the disk read it was issued as. Should a
    /// copy fail the node's check, the block is read from its disk after
    /// all, uncounted; and a disk that fails that read is marked failed by
    /// the next I/O to it (the read itself goes to the block's stripe).
    pub fn read_replaced(&mut self, io: IoId) {
        let Some((IoPurpose::Blocks(reads), disk, _)) = self.outbox.kept_mut(io) else {
            return;
        };
        let blocks = reads.len() as u64;
        if let Some((id, kind)) = disk.take() {
            self.counters.disks[id.0 as usize].uncount_issued(kind, blocks);
        }
    }

    /// Offers the data blocks eviction took, those the options let in; their
    /// content moves into the offer rather than being copied.
    pub(super) fn offer_data(&mut self, evicted: Vec<Evicted<P>>) {
        let Some(flash) = self.options.flash_cache else {
            return;
        };
        for block in evicted {
            let wanted = match block.written {
                true => flash.lopri_blocks,
                false => flash.normal_data_blocks,
            };
            let (lun, fbn) = block.key;
            let ptr = self
                .namespace
                .lun(lun)
                .ok()
                .and_then(|(_, l)| l.tree.try_get(fbn));
            if let Some(ptr) = ptr.filter(|_| wanted) {
                self.offer(lun, (0, fbn.0), ptr, block.content);
            }
        }
    }

    /// Offers indirect block `node` of `lun`, which `ptr` names, being
    /// evicted with `pointers`.
    pub(super) fn offer_indirect(
        &mut self,
        lun: LunId,
        node: NodeId,
        ptr: BlockPtr,
        pointers: &crate::tree::Node,
    ) {
        if self.options.flash_cache.is_some() {
            self.offer(lun, node, ptr, P::from_node(pointers));
        }
    }

    /// Offers the block `ptr` names at `(level, index)` of `lun`'s tree,
    /// holding `content`.
    fn offer(&mut self, lun: LunId, (level, index): NodeId, ptr: BlockPtr, content: P::Content) {
        if ptr.is_null() {
            return;
        }
        let at = self
            .layout
            .locate(ptr.pvbn)
            .expect("pointers stay inside the aggregate");
        if self.failed[at.group].contains(at.disk) {
            return;
        }
        let identity = ptr.expected_identity(lun.volume, lun.file, level, Fbn(index));
        let checksum = P::checksum(&content);
        debug_assert!(ptr.matches(checksum), "a clean block is its home's");
        self.victims.push(Victim {
            disk: self.layout.disk_id(at.group, at.disk),
            dbn: at.dbn,
            sector: Sector {
                data: content,
                trailer: Trailer::new(checksum, identity).encode(),
            },
        });
    }
}
