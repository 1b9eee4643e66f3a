//! Reading blocks: chains, verification, and repair from parity.
//!
//! Every block read names what it must be (its [`Identity`], derived from the
//! pointer that led to it and its place in the tree). Reads of adjacent blocks
//! on one disk go out as one chain. A block that fails its checksum or identity,
//! or that a disk could not return, is rebuilt from the rest of its stripe:
//! first assuming only its own disk is wrong, then (RAID-DP) also each other
//! disk in turn, which catches a second silently bad block in the same stripe.
//! A rebuilt block is verified like any other before it is used, and written
//! back in place so the damage does not linger. A block on a failed disk goes
//! straight to reconstruction.

use std::collections::BTreeMap;

use wafer_raid::{Dbn, DiskIndex, DiskSet, StripeUnit};

use super::meta::FileRef;
use super::{Filer, IoOp, IoPurpose, IoResult, Sector};
use crate::aggregate::Location;
use crate::format::{BlockPtr, Identity, Trailer};
use crate::nvlog::LunId;
use crate::payload::Payload;
use crate::tree::NodeId;
use crate::units::Fbn;

/// What a block read is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ReadPurpose {
    /// A LUN block for the buffer cache, with the token of the entry it fills.
    Fill(LunId, Fbn, u64),
    /// A metadata or indirect block while mounting.
    Mount(FileRef, NodeId),
    /// A block of a snapshot for a host read.
    Snapshot(super::RequestId, Fbn),
    /// An indirect block of a LUN's tree that a request needs.
    Indirect(LunId, NodeId),
}

/// One block to read and what it must turn out to be.
#[derive(Clone, Debug)]
pub(super) struct BlockRead {
    pub(super) at: Location,
    ptr: BlockPtr,
    expected: Identity,
    purpose: ReadPurpose,
    /// Which try this is: a repair that overlapped a CP reads again.
    attempt: u8,
    /// Blocks repairs had rewritten in place when this try was made: one
    /// rewritten since may be this very block, read twice at once (a tree
    /// and a snapshot's sharing it) and made whole by the other read's
    /// repair, so a failed repair that saw a rewrite is tried again too
    /// (seeds 209, 300606).
    rewrites_seen: u64,
    /// Whether a host's request asked for it (Flash Pool counts and warms
    /// only those), not the engine's own work (a destage).
    for_host: bool,
}

impl BlockRead {
    /// The same read, made for the engine's own work.
    pub(super) fn for_engine(self) -> BlockRead {
        BlockRead {
            for_host: false,
            ..self
        }
    }
}

/// The repairs in progress, by job number; private to this module.
#[derive(Clone, Debug)]
pub(super) struct Repairs<P: Payload> {
    jobs: BTreeMap<u64, RepairJob<P>>,
    next: u64,
    /// Blocks rewritten in place by repairs so far.
    rewrites: u64,
}

impl<P: Payload> Default for Repairs<P> {
    fn default() -> Repairs<P> {
        Repairs {
            jobs: BTreeMap::new(),
            next: 0,
            rewrites: 0,
        }
    }
}

/// A stripe being read to rebuild one block.
#[derive(Clone, Debug)]
struct RepairJob<P: Payload> {
    read: BlockRead,
    failed: DiskSet,
    stripe: Vec<Option<P::Unit>>,
    reads_left: usize,
    escalated: bool,
    /// The newest CP when the repair started, and whether one was writing:
    /// a CP writing into the same stripe meanwhile can make the blocks read
    /// disagree, so a failed repair that overlapped a CP is tried again.
    overlapped_cp: bool,
    started_after: crate::units::CpCount,
}

/// Reads whose repair overlapped a CP are tried again, at most this often
/// in all.
const READ_ATTEMPTS: u8 = 3;

impl<P: Payload> Filer<P> {
    /// A read of the block `ptr` names, at `level`/`index` of `file`.
    pub(super) fn block_read(
        &self,
        file: FileRef,
        level: u8,
        index: u64,
        ptr: BlockPtr,
        purpose: ReadPurpose,
    ) -> BlockRead {
        let (volume, file_id) = file.ids();
        BlockRead {
            at: self
                .layout
                .locate(ptr.pvbn)
                .expect("pointers stay inside the aggregate"),
            ptr,
            expected: ptr.expected_identity(volume, file_id, level, Fbn(index)),
            purpose,
            attempt: 1,
            rewrites_seen: self.repairs.rewrites,
            for_host: true,
        }
    }

    /// Issues block reads, merged into chains of adjacent blocks per disk.
    pub(super) fn read_blocks(&mut self, mut reads: Vec<BlockRead>) {
        reads.sort_by_key(|r| (r.at.group, r.at.disk, r.at.dbn));
        if self.layout.is_hybrid() {
            for read in &reads {
                if read.for_host && matches!(read.purpose, ReadPurpose::Fill(..)) {
                    self.note_data_read(read.ptr.pvbn);
                }
            }
        }
        // The chain being built, as the reads at `chain`: one disk's reads
        // lie side by side, so a chain is a range, and it goes out copied
        // into a list of its own length.
        let mut chain = 0..0;
        for (index, read) in reads.iter().enumerate() {
            if self.failed[read.at.group].contains(read.at.disk) {
                self.counters.degraded_reads += 1;
                self.start_repair(read.clone());
                continue;
            }
            let extends = !chain.is_empty() && {
                let last = &reads[chain.end - 1];
                last.at.group == read.at.group
                    && last.at.disk == read.at.disk
                    && last.at.dbn.0 + 1 == read.at.dbn.0
            };
            if !extends {
                if !chain.is_empty() {
                    self.issue_chain(reads[chain].to_vec());
                }
                chain = index..index;
            }
            chain.end = index + 1;
        }
        if !chain.is_empty() {
            self.issue_chain(reads[chain].to_vec());
        }
    }

    fn issue_chain(&mut self, chain: Vec<BlockRead>) {
        let first = &chain[0];
        let disk = self.layout.disk_id(first.at.group, first.at.disk);
        self.counters.read_chains += 1;
        self.counters.read_chain_blocks += chain.len() as u64;
        self.issue(
            IoOp::Read {
                disk,
                dbn: first.at.dbn,
                count: chain.len() as u32,
            },
            IoPurpose::Blocks(chain),
        );
    }

    /// A chain read has completed: verify each block, repair the ones that fail.
    pub(super) fn blocks_read(&mut self, reads: Vec<BlockRead>, result: IoResult<P>) {
        let sectors = match result {
            IoResult::Read(sectors) => sectors,
            IoResult::Done | IoResult::DiskFailed | IoResult::Unwritable => Vec::new(),
        };
        let mut sectors = sectors.into_iter();
        let trusting = self.sabotaged(super::Sabotage::IgnoreTrailer);
        for read in reads {
            let sector = sectors.next().flatten();
            let content = match trusting {
                true => sector.map(|s| s.data),
                false => sector.and_then(|s| verified(s, &read)),
            };
            match content {
                Some(block) => self.deliver(read.purpose, Some(block)),
                None => self.start_repair(read),
            }
        }
    }

    /// Reads the rest of a block's stripe to rebuild it.
    fn start_repair(&mut self, read: BlockRead) {
        let group = read.at.group;
        let failed = self.failed[group].with(read.at.disk);
        let geometry = self.layout.groups()[group];
        let Ok(reads) = geometry.reconstruction_reads(failed) else {
            return self.deliver(read.purpose, None);
        };
        let job = self.repairs.next;
        self.repairs.next += 1;
        self.repairs.jobs.insert(
            job,
            RepairJob {
                read: read.clone(),
                failed,
                stripe: vec![None; geometry.group_size()],
                reads_left: reads.len(),
                escalated: false,
                overlapped_cp: self.cp.is_some(),
                started_after: self.committed,
            },
        );
        for disk in reads.iter() {
            self.issue(
                IoOp::Read {
                    disk: self.layout.disk_id(group, disk),
                    dbn: read.at.dbn,
                    count: 1,
                },
                IoPurpose::Repair { job, disk },
            );
        }
    }

    /// A block of a repair stripe has arrived.
    pub(super) fn repair_read(&mut self, job_id: u64, disk: DiskIndex, result: IoResult<P>) {
        let job = self.repairs.jobs.get_mut(&job_id).expect("a repair job");
        let content = match result {
            IoResult::Read(mut sectors) => sectors.pop().flatten().map(|s| P::unit(&s.data)),
            IoResult::Done | IoResult::DiskFailed | IoResult::Unwritable => None,
        };
        match content {
            Some(block) => job.stripe[disk.as_usize()] = Some(block),
            None => job.failed = job.failed.with(disk),
        }
        job.reads_left -= 1;
        if job.reads_left > 0 {
            return;
        }
        let job = self.repairs.jobs.remove(&job_id).expect("a repair job");
        self.continue_repair(job_id, job);
    }

    /// Reads more of the stripe if the plan grew, else rebuilds and delivers.
    fn continue_repair(&mut self, job_id: u64, mut job: RepairJob<P>) {
        let group = job.read.at.group;
        let geometry = self.layout.groups()[group];
        // Disks added to the group since the job began (a CP took them in)
        // widen its stripe: they are read like the others if needed.
        job.stripe.resize(geometry.group_size(), None);
        let present: DiskSet = (0..geometry.group_size())
            .filter(|&d| job.stripe[d].is_some())
            .map(|d| DiskIndex(d as u16))
            .collect();
        let needed = match geometry.reconstruction_reads(job.failed) {
            Ok(needed) => needed,
            Err(_) => return self.repair_failed(job),
        };
        let mut missing = needed.difference(present);
        let rebuilt = match missing.is_empty() {
            true => self.rebuild(&job, job.failed),
            false => None,
        };
        if missing.is_empty() && rebuilt.is_none() && !job.escalated {
            // The answer did not verify: read the whole stripe and look for a
            // second bad block.
            job.escalated = true;
            missing = geometry
                .all_disks()
                .difference(job.failed)
                .difference(present);
        }
        if !missing.is_empty() {
            job.reads_left = missing.len();
            let dbn = job.read.at.dbn;
            self.repairs.jobs.insert(job_id, job);
            for disk in missing.iter() {
                self.issue(
                    IoOp::Read {
                        disk: self.layout.disk_id(group, disk),
                        dbn,
                        count: 1,
                    },
                    IoPurpose::Repair { job: job_id, disk },
                );
            }
            return;
        }
        let rebuilt = rebuilt.or_else(|| self.rebuild_with_another_suspect(&job));
        let purpose = job.read.purpose;
        match rebuilt {
            Some(block) => {
                if !self.failed[group].contains(job.read.at.disk) {
                    self.counters.blocks_repaired += 1;
                    self.rewrite_in_place(&job.read, &block);
                }
                self.deliver(purpose, Some(P::from_unit(block)));
            }
            None => self.repair_failed(job),
        }
    }

    /// A repair that overlapped a CP may have read a stripe the CP was
    /// changing, and one that overlapped another repair's rewrite may have
    /// read a block since made whole: the read is tried again from the start
    /// (its own disk may be back in service by now, rebuilt). While a CP writes, the retry waits
    /// for it to commit; a CP still capturing has written nothing, and may be
    /// waiting for this very block, so the retry goes out at once.
    fn repair_failed(&mut self, job: RepairJob<P>) {
        let overlapped = job.overlapped_cp
            || self.cp.is_some()
            || job.started_after != self.committed
            || job.read.rewrites_seen != self.repairs.rewrites;
        if overlapped && job.read.attempt < READ_ATTEMPTS {
            let mut read = job.read;
            read.attempt += 1;
            read.rewrites_seen = self.repairs.rewrites;
            let sabotaged = self.sabotaged(super::Sabotage::ParkRetriesBehindCapture);
            let writing = self
                .cp
                .as_ref()
                .is_some_and(|cp| sabotaged || !cp.is_capturing());
            match writing {
                true => self.parked_reads.push(read),
                false => self.read_again(read),
            }
            return;
        }
        self.deliver(job.read.purpose, None);
    }

    /// Reads a block again, from its disk or (the disk failed) its stripe.
    pub(super) fn read_again(&mut self, read: BlockRead) {
        match self.failed[read.at.group].contains(read.at.disk) {
            true => self.start_repair(read),
            false => self.issue_chain(vec![read]),
        }
    }

    /// Reconstructs the wanted block assuming `failed` are the bad disks; the
    /// answer counts only if it matches the pointer's checksum.
    fn rebuild(&self, job: &RepairJob<P>, failed: DiskSet) -> Option<P::Unit> {
        let geometry = self.layout.groups()[job.read.at.group];
        let mut stripe: Vec<P::Unit> = job
            .stripe
            .iter()
            .map(|b| b.clone().unwrap_or_else(P::Unit::zero))
            .collect();
        geometry.reconstruct_stripe(&mut stripe, failed).ok()?;
        let block = stripe.swap_remove(job.read.at.disk.as_usize());
        job.read
            .ptr
            .matches(P::unit_checksum(&block))
            .then_some(block)
    }

    /// Tries each other disk of the stripe as a second, silently bad one.
    fn rebuild_with_another_suspect(&self, job: &RepairJob<P>) -> Option<P::Unit> {
        let geometry = self.layout.groups()[job.read.at.group];
        if job.failed.len() >= geometry.raid_type().tolerated_failures() {
            return None;
        }
        geometry
            .all_disks()
            .difference(job.failed)
            .iter()
            .find_map(|extra| self.rebuild(job, job.failed.with(extra)))
    }

    fn rewrite_in_place(&mut self, read: &BlockRead, block: &P::Unit) {
        self.repairs.rewrites += 1;
        let sector = Sector {
            data: P::from_unit(block.clone()),
            trailer: Trailer::new(P::unit_checksum(block), read.expected).encode(),
        };
        self.issue(
            IoOp::Write {
                disk: self.layout.disk_id(read.at.group, read.at.disk),
                dbn: Dbn(read.at.dbn.0),
                sectors: vec![sector],
            },
            IoPurpose::RepairWrite,
        );
    }

    fn deliver(&mut self, purpose: ReadPurpose, block: Option<P::Content>) {
        match purpose {
            ReadPurpose::Fill(lun, fbn, fill) => self.filled(lun, fbn, fill, block),
            ReadPurpose::Mount(file, node) => self.mount_block(file, node, block),
            ReadPurpose::Snapshot(request, fbn) => self.snapshot_block(request, fbn, block),
            ReadPurpose::Indirect(lun, node) => self.indirect_arrived(lun, node, block),
        }
    }
}

/// The block's content if the sector is the block the read expects: content
/// matching the pointer's checksum, trailer intact and naming the same block.
fn verified<P: Payload>(sector: Sector<P>, read: &BlockRead) -> Option<P::Content> {
    let trailer = Trailer::decode(&sector.trailer).ok()?;
    let sum = P::checksum(&sector.data);
    let sound = read.ptr.matches(sum) && trailer.verify(sum, &read.expected).is_ok();
    sound.then_some(sector.data)
}
