//! Snapshots: a volume's image at a CP, kept by keeping its blocks.
//!
//! `snap create` is a logged change. Applying it names the snapshot and makes
//! the next CP (type S) the one that takes it; host changes wait meanwhile, so
//! the snapshot holds exactly what was acknowledged before it. That CP, once
//! it has allocated, records the vvbns of the volume's image as the snapshot's
//! map and folds them into the summary map; once the image's checksums are
//! final it keeps frozen copies of the inode file's and the LUNs' trees (nodes
//! shared, copy on write) and writes the snapinfo entry. The request is
//! answered when that CP commits.
//!
//! From then on, freeing a block the summary map marks only clears it from the
//! active map: the container map and the aggregate keep it. `snap delete`
//! rebuilds the summary map from the remaining snapshots and frees what neither
//! it nor the active map marks (after the next CP, like any free). `snap
//! restore` points a LUN, or every LUN of the volume, at the snapshot's trees
//! again: the blocks become shared once more and nothing is copied.
//!
//! Reads of a snapshot walk its trees and verify every block like any other
//! read; they bypass the buffer cache, which holds the active file system.

use super::blockio::ReadPurpose;
use super::meta::{FileRef, Lun, PendingSnapshot, Snapshot, Volume, VolumeState};
use super::{BlockState, CacheEntry, Filer, PendingRead, RequestId};
use crate::BLOCK_SIZE;
use crate::bitmap::Bitmap;
use crate::nvlog::{Change, LunId};
use crate::payload::Payload;
use crate::schedule::SnapKind;
use crate::units::{CpCount, Fbn, Instant, SnapshotId, VolumeId};

/// What `snap list` shows of a snapshot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotInfo {
    /// Its number in the volume.
    pub id: SnapshotId,
    /// Its name.
    pub name: String,
    /// The CP whose image it is.
    pub cp: CpCount,
    /// When it was taken.
    pub created: Instant,
    /// Bytes it holds in all.
    pub held_bytes: u64,
    /// Bytes only it holds: what deleting it would free.
    pub exclusive_bytes: u64,
    /// The LUNs it holds, as they were: id, name and size in bytes.
    pub luns: Vec<(LunId, String, u64)>,
}

impl<P: Payload> Filer<P> {
    /// A volume's snapshots, oldest first.
    pub fn snapshots(&self, volume: VolumeId) -> Vec<SnapshotInfo> {
        let Some(v) = self.namespace.volume(volume) else {
            return Vec::new();
        };
        let block = BLOCK_SIZE as u64;
        let mut out: Vec<SnapshotInfo> = v
            .snapshots
            .iter()
            .map(|(&id, snapshot)| {
                let mut others: Vec<&Bitmap> = v
                    .snapshots
                    .iter()
                    .filter(|(other, _)| **other != id)
                    .map(|(_, s)| &s.map)
                    .collect();
                others.push(&v.activemap);
                SnapshotInfo {
                    id,
                    name: snapshot.name.clone(),
                    cp: snapshot.cp,
                    created: snapshot.created,
                    held_bytes: snapshot.map.count_ones() * block,
                    exclusive_bytes: snapshot.map.ones_outside(&others).len() as u64 * block,
                    luns: snapshot
                        .luns
                        .iter()
                        .map(|(&file, l)| (LunId { volume, file }, l.name.clone(), l.size_bytes))
                        .collect(),
                }
            })
            .collect();
        out.sort_by_key(|s| s.cp);
        out
    }

    /// Names the snapshot the next CP of `generation` takes.
    pub(super) fn request_snapshot(&mut self, generation: CpCount, volume: VolumeId, name: &str) {
        let now = self.now;
        let v = self.namespace.volume_mut(volume).expect("validated");
        let id = v.free_snapshot_id().expect("validated: an id is free");
        v.snapinfo.dirty.insert(Volume::snapinfo_block(id));
        v.pending_snapshot = Some(PendingSnapshot {
            id,
            name: name.to_string(),
            generation,
            created: now,
            map: None,
            waiter: None,
        });
        self.volume_record_dirty(volume);
    }

    /// Takes a scheduled snapshot: deletes the ones of its kind it pushes
    /// out, renames the others `kind.N` to `kind.N+1` (newest last, so no
    /// name is taken twice), and names the snapshot the next CP takes
    /// `kind.0`.
    pub(super) fn take_scheduled_snapshot(
        &mut self,
        generation: CpCount,
        volume: VolumeId,
        kind: SnapKind,
        keep: u8,
    ) {
        let rotated_out = self.namespace[volume].rotated_out(kind, keep);
        for name in rotated_out {
            self.delete_snapshot(volume, &name);
        }
        let renames = match self.sabotaged(super::Sabotage::RotationRenamesNothing) {
            true => 0,
            false => keep - 1,
        };
        let v = self.namespace.volume_mut(volume).expect("validated");
        for n in (0..renames).rev() {
            if let Some((id, _)) = v.snapshot_named(&kind.name(n)) {
                v.snapshots.get_mut(&id).expect("named").name = kind.name(n + 1);
                v.snapinfo.dirty.insert(Volume::snapinfo_block(id));
            }
        }
        self.request_snapshot(generation, volume, &kind.name(0));
    }

    /// The scheduled snapshots due at the hours in `(after, until]` on the
    /// online volumes, as the changes that take them.
    pub fn snapshots_due(&self, after: Instant, until: Instant) -> Vec<Change> {
        let online = self
            .namespace
            .volumes()
            .filter(|(_, v)| v.state == VolumeState::Online);
        online
            .filter_map(|(volume, v)| {
                let kind = v.snap_schedule.due(after, until)?;
                let keep = v.snap_schedule.keep(kind);
                Some(Change::ScheduledSnapshot { volume, kind, keep })
            })
            .collect()
    }

    /// The first hour after `after` a scheduled snapshot of any online
    /// volume falls on.
    pub fn next_snapshot_due(&self, after: Instant) -> Option<Instant> {
        let online = self
            .namespace
            .volumes()
            .filter(|(_, v)| v.state == VolumeState::Online);
        online
            .filter_map(|(_, v)| v.snap_schedule.next_due(after))
            .min()
    }

    /// Whether a snapshot waits for its CP (host changes wait with it).
    pub(super) fn snapshot_pending(&self) -> bool {
        self.namespace
            .volumes()
            .any(|(_, v)| v.pending_snapshot.is_some())
    }

    /// Registers the request to answer when the pending snapshot is on disk.
    pub(super) fn wait_for_snapshot(&mut self, volume: VolumeId, request: RequestId) {
        let v = self.namespace.volume_mut(volume).expect("validated");
        v.pending_snapshot.as_mut().expect("just requested").waiter = Some(request);
    }

    /// CP `number` has allocated: the snapshots it takes get their maps, which
    /// join the summary maps. Returns whether a summary-map block became dirty
    /// (and so needs an address in turn).
    pub(super) fn map_pending_snapshots(&mut self, number: CpCount) -> bool {
        let mut dirtied = false;
        for (_, volume) in self.namespace.volumes_mut() {
            let due = volume
                .pending_snapshot
                .as_ref()
                .is_some_and(|p| p.generation <= number && p.map.is_none());
            if !due {
                continue;
            }
            let map = volume.image_map();
            let summary = volume.summary.union(&map);
            let changed = volume.summary.differing_blocks(&summary);
            dirtied |= !changed.is_empty();
            volume.summary_file.dirty.extend(changed);
            volume.summary = summary;
            volume.pending_snapshot.as_mut().expect("due").map = Some(map);
        }
        dirtied
    }

    /// The CP's image is final up to the inode files: the mapped snapshots
    /// keep their trees. Returns the requests to answer when the CP commits.
    pub(super) fn take_pending_snapshots(&mut self, number: CpCount) -> Vec<RequestId> {
        let mut waiters = Vec::new();
        for (_, volume) in self.namespace.volumes_mut() {
            if volume
                .pending_snapshot
                .as_ref()
                .is_none_or(|p| p.map.is_none())
            {
                continue;
            }
            let pending = volume.pending_snapshot.take().expect("checked");
            let snapshot = Snapshot {
                name: pending.name,
                cp: number,
                created: pending.created,
                inofile: volume.inofile.tree.frozen_copy(),
                luns: volume
                    .luns
                    .iter()
                    .map(|(file, lun)| (*file, lun.frozen_copy()))
                    .collect(),
                map: pending.map.expect("checked"),
            };
            volume.snapshots.insert(pending.id, snapshot);
            waiters.extend(pending.waiter);
        }
        waiters
    }

    /// Deletes a snapshot; what only it held is freed after the next CP.
    pub(super) fn delete_snapshot(&mut self, volume_id: VolumeId, name: &str) {
        let release_after = self.release_point();
        let volume = self.namespace.volume_mut(volume_id).expect("validated");
        let (id, _) = volume.snapshot_named(name).expect("validated");
        volume.snapshots.remove(&id);
        volume.snapinfo.dirty.insert(Volume::snapinfo_block(id));
        let remaining = volume
            .snapshots
            .values()
            .fold(Bitmap::map_file(volume.vvbn_blocks), |all, s| {
                all.union(&s.map)
            });
        let released = volume
            .summary
            .ones_outside(&[&remaining, &volume.activemap]);
        let changed = volume.summary.differing_blocks(&remaining);
        volume.summary_file.dirty.extend(changed);
        volume.summary = remaining;
        for vvbn in released {
            self.release_vvbn(volume_id, vvbn, release_after);
        }
    }

    /// Restores one LUN, or every LUN of the volume, from a snapshot.
    pub(super) fn restore_snapshot(
        &mut self,
        volume_id: VolumeId,
        name: &str,
        lun: Option<crate::units::FileId>,
    ) {
        let volume = &self.namespace[volume_id];
        let (_, snapshot) = volume.snapshot_named(name).expect("validated");
        let restored: Vec<(crate::units::FileId, Lun)> = snapshot
            .luns
            .iter()
            .filter(|(file, _)| lun.is_none_or(|only| only == **file))
            .map(|(file, l)| (*file, l.frozen_copy()))
            .collect();
        if lun.is_none() {
            let gone: Vec<crate::units::FileId> = volume
                .luns
                .keys()
                .filter(|file| !snapshot.luns.contains_key(file))
                .copied()
                .collect();
            for file in gone {
                self.replace_lun(
                    LunId {
                        volume: volume_id,
                        file,
                    },
                    None,
                );
            }
        }
        for (file, l) in restored {
            self.replace_lun(
                LunId {
                    volume: volume_id,
                    file,
                },
                Some(l),
            );
        }
    }

    /// Replaces a LUN's content with `new` (a snapshot's copy), or destroys
    /// it: its cached blocks go, its blocks are freed (those a snapshot holds
    /// stay), `new`'s blocks become active again. Reads waiting for a block
    /// are served from the new content.
    pub(super) fn replace_lun(&mut self, lun: LunId, new: Option<Lun>) {
        let waiting = self.forget_cached(lun);
        let release_after = self.release_point();
        let volume = self.namespace.volume_mut(lun.volume).expect("validated");
        let old = volume.luns.remove(&lun.file);
        volume.inofile.dirty.insert(Volume::inofile_block(lun.file));
        if let Some(old) = &old {
            old.tree.for_each_pointer(|_, ptr| {
                self.free_block(FileRef::Lun(lun), ptr, release_after);
            });
        }
        if let Some(new) = new {
            let volume = self.namespace.volume_mut(lun.volume).expect("validated");
            new.tree.for_each_pointer(|_, ptr| {
                assert!(
                    volume.summary.get(ptr.vvbn.0),
                    "a restored block is one a snapshot holds"
                );
                volume.activemap.set(ptr.vvbn.0);
                volume
                    .activemap_file
                    .dirty
                    .insert(Bitmap::block_of(ptr.vvbn.0));
            });
            volume.luns.insert(lun.file, new);
            self.adopt_write_cached(lun);
        }
        for (fbn, waiters) in waiting {
            self.refill_for(lun, fbn, waiters);
        }
    }

    /// Drops a LUN's cached blocks; returns the reads waiting for any of them.
    fn forget_cached(&mut self, lun: LunId) -> Vec<(Fbn, Vec<RequestId>)> {
        let mut waiting = Vec::new();
        for key in self.cache.keys_of(lun, Fbn(0)) {
            let entry = self.cache.remove(&key).expect("listed");
            self.dirty.remove(&key);
            if let BlockState::Filling(filling) = entry.state {
                if !filling.waiters.is_empty() {
                    waiting.push((key.1, filling.waiters.into_iter().collect()));
                }
            }
        }
        waiting
    }

    /// Serves reads that waited for a block whose LUN was replaced: from the
    /// new LUN's block, or as zeros where it has none.
    fn refill_for(&mut self, lun: LunId, fbn: Fbn, waiters: Vec<RequestId>) {
        let ptr = self
            .namespace
            .volume(lun.volume)
            .and_then(|v| v.luns.get(&lun.file))
            .filter(|l| fbn.0 * (BLOCK_SIZE as u64) < l.size_bytes)
            .map(|l| l.tree.get(fbn))
            .filter(|ptr| !ptr.is_null());
        let Some(ptr) = ptr else {
            for waiter in waiters {
                if let Some(read) = self.reads.get_mut(&waiter) {
                    read.missing -= 1;
                }
                self.finish_read(waiter);
            }
            return;
        };
        self.use_clock += 1;
        let stamp = self.use_clock;
        let (read, fill) = self.fill_read(lun, fbn, ptr);
        self.cache.insert(
            (lun, fbn),
            CacheEntry::filling(fill, Vec::new(), waiters, stamp),
        );
        self.read_blocks(vec![read]);
    }

    /// Reads a LUN as a snapshot holds it.
    pub(super) fn read_snapshot(
        &mut self,
        id: RequestId,
        lun: LunId,
        name: &str,
        offset: u64,
        length: u64,
    ) {
        let found = self
            .namespace
            .snapshot_lun(lun, name)
            .map(|(sid, l)| (sid, l.size_bytes));
        let (sid, size) = match found {
            Ok(found) => found,
            Err(error) => return self.reply(id, Err(error)),
        };
        if let Err(error) = super::check_read_range(offset, length, size) {
            return self.reply(id, Err(error));
        }
        let block = BLOCK_SIZE as u64;
        let pointers: Vec<(Fbn, crate::format::BlockPtr)> = {
            let tree = &self.namespace[lun.volume].snapshots[&sid].luns[&lun.file].tree;
            (offset / block..(offset + length).div_ceil(block))
                .map(Fbn)
                .map(|fbn| (fbn, tree.get(fbn)))
                .filter(|(_, ptr)| !ptr.is_null())
                .collect()
        };
        let reads = pointers
            .iter()
            .map(|&(fbn, ptr)| {
                let file = FileRef::SnapshotLun(lun, sid);
                self.block_read(file, 0, fbn.0, ptr, ReadPurpose::Snapshot(id, fbn))
            })
            .collect();
        self.reads.insert(
            id,
            PendingRead {
                lun,
                offset,
                length,
                data: P::read_data(offset, length as usize),
                missing: pointers.len(),
                failed: false,
                snapshot: true,
            },
        );
        self.read_blocks(reads);
        self.finish_read(id);
    }

    /// A block of a snapshot read has arrived (or could not be recovered).
    pub(super) fn snapshot_block(&mut self, id: RequestId, fbn: Fbn, block: Option<P::Content>) {
        let Some(read) = self.reads.get_mut(&id) else {
            return;
        };
        match block {
            Some(content) => P::put_block(&mut read.data, read.offset, fbn, &content),
            None => {
                self.counters.unrecoverable_blocks += 1;
                read.failed = true;
            }
        }
        read.missing -= 1;
        self.finish_read(id);
    }
}
