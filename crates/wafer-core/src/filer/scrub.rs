//! Scrubbing: every stripe of every RAID group read, verified and repaired in
//! the background, so that damage where nothing reads does not wait for a disk
//! failure to turn into lost data.
//!
//! Reads heal the blocks they touch, but a block nobody reads (cold data, a
//! free block, a parity block) can rot unseen, and then one disk failure too
//! many makes its stripe unrecoverable. A scrub visits the groups stripe by
//! stripe, [`SCRUB_STRIPES_PER_CP`] per CP, inside the CP, so no CP writes a
//! stripe while it is being read. It skips the superblock stripes (their
//! copies carry them) and puts off the stripes the CP itself writes to the
//! next batch (a partial-stripe write that meets a damaged block folds its
//! reconstruction into parity but leaves the block as it is, for the scrub to
//! repair). Each stripe is read whole:
//!
//! - A block that fails its trailer (or is not the filer's last write there,
//!   content and trailer: a lost write of the same content under a new
//!   identity leaves a stale trailer that names this place and vouches for
//!   the content), or that its disk cannot return, is damaged. Up to the group's
//!   parity disks of them are reconstructed from the rest.
//! - With none damaged, parity is recomputed. A parity block that disagrees is
//!   rewritten. RAID-DP also locates a data block that passes its trailer but
//!   that both parities contradict (a write that never landed), and treats it
//!   as damaged, unless the filer's last write there or its pointer vouches
//!   for it (then both parities are stale, and are rewritten). RAID-4 cannot tell a bad parity block from such a data block,
//!   so it rewrites parity only once every data block is vouched for, by the
//!   filer's last write there or by a pointer.
//!
//! A reconstructed parity block is rewritten at once. A reconstructed data
//! block needs a trailer. Where the damaged block's own trailer is intact,
//! names this place, vouches for the reconstruction's checksum and is the one
//! the filer last wrote there (rot in the data), that trailer is kept.
//! Otherwise (an unreadable sector, a lost or misdirected write, a stale
//! identity) only a pointer can say what the block is: the stripe
//! waits until a CP with every tree whole walks the trees once, for every
//! stripe of its batch, and scrubs it again. Then a reachable block is written
//! with the identity its pointer implies, and only if the reconstruction
//! matches the checksum the pointer records; an unreachable one is written as
//! a free block, unless the committed image still uses it (this CP freed it),
//! in which case it waits for the next walk. A stripe that reconstruction
//! cannot make whole (a stale block that passed as sound beside a damaged one)
//! is still safe when every block a pointer reaches matches its pointer: its
//! free blocks are rewritten as they are and parity recomputed over them.
//!
//! Scrub writes are not logged for resync: each makes its block agree with the
//! rest of the stripe, so a crash that tears them leaves nothing worse than the
//! scrub found. Nor is a scrub recorded on disk: a crash ends it, and it is
//! started again by hand. It waits while a disk is failed or being rebuilt;
//! stripes of a batch under which a disk died are visited again afterwards.

use std::collections::{BTreeMap, BTreeSet};

use wafer_raid::{Dbn, DiskIndex, DiskSet, StripeUnit};

use super::sectors::{parity_sector, read_back_matches};
use super::written::LastWrite;
use super::{Filer, Phase, Sector};
use crate::aggregate::SUPERBLOCK_COPIES;
use crate::format::{BlockPtr, Identity, Trailer};
use crate::payload::Payload;
use crate::units::Pvbn;

/// Stripes one CP scrubs at most: with 4 KiB blocks, 1 MiB per disk.
pub const SCRUB_STRIPES_PER_CP: u64 = 256;

/// What the pointers say of the blocks of stripes waiting to be named.
type Names = BTreeMap<Pvbn, (BlockPtr, Identity)>;

/// A scrub, running or finished.
#[derive(Clone, Debug)]
pub(super) struct Scrub {
    /// Which scrub this is: batches of a stopped one are ignored.
    run: u64,
    group: usize,
    /// The next stripe of `group` to visit.
    cursor: u64,
    /// Stripes to scrub again once every tree is whole and no disk is failed:
    /// damaged data blocks that only a pointer can name, or a disk that died
    /// under the batch.
    revisit: BTreeSet<(usize, u64)>,
    /// Stripes a batch skipped because its CP wrote them: the next batch
    /// takes them.
    deferred: BTreeSet<(usize, u64)>,
    tally: ScrubTally,
    finished: bool,
}

/// What a scrub has found and done.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScrubTally {
    /// Stripes verified (and repaired where needed).
    pub stripes_verified: u64,
    /// Parity blocks rewritten because they disagreed with their stripe.
    pub parity_rewritten: u64,
    /// Data blocks reconstructed and written back.
    pub blocks_repaired: u64,
    /// Stripes left as found: more damage than RAID can locate and repair, or
    /// a reconstruction that contradicts a pointer.
    pub stripes_left_alone: u64,
}

/// How a scrub is doing (`aggr scrub status`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScrubStatus {
    /// Whether it is still going.
    pub running: bool,
    /// Whether it waits for a failed disk to be rebuilt.
    pub suspended: bool,
    /// The RAID group it is in.
    pub group: usize,
    /// Stripes visited, over every group.
    pub stripes_done: u64,
    /// Stripes in every group.
    pub stripes_total: u64,
    /// Stripes to scrub again once every tree is whole and no disk is failed.
    pub stripes_to_revisit: usize,
    /// What it has found and done.
    pub tally: ScrubTally,
}

/// Why a scrub cannot start.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ScrubError {
    /// One is running.
    #[error("a scrub is already running")]
    Running,
    /// The filer is mounting or shutting down.
    #[error("the aggregate is not online")]
    NotOnline,
}

/// The stripes a CP scrubs.
#[derive(Clone, Debug)]
pub(super) struct ScrubBatch {
    run: u64,
    /// The stripes to read, taken when the CP issues their reads.
    pub(super) stripes: BTreeSet<(usize, u64)>,
    /// Where the scrub goes on after this batch.
    next: (usize, u64),
    /// The pointers' word on the blocks of stripes waiting to be named, when
    /// this batch walked the trees for them.
    names: Option<Names>,
}

/// What the pointers say of a data block's content.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PointerWord {
    /// A pointer reaches the block and records this content's checksum; the
    /// block must carry this identity.
    Matches(Identity),
    /// A pointer reaches the block and records another checksum.
    Contradicts,
    /// No tree of this CP reaches it, but the committed image does.
    Held,
    /// Nothing reaches it.
    Free,
}

/// What scrubbing one stripe came to.
enum Verdict<P: Payload> {
    Sound,
    Repaired {
        writes: Vec<(DiskIndex, Sector<P>)>,
        parity: u64,
        blocks: u64,
    },
    Revisit,
    LeftAlone,
}

impl<P: Payload> Filer<P> {
    /// Starts a scrub of every RAID group from the first stripe.
    pub fn start_scrub(&mut self) -> Result<(), ScrubError> {
        if !matches!(self.phase, Phase::Online) {
            return Err(ScrubError::NotOnline);
        }
        if self.scrub.as_ref().is_some_and(|s| !s.finished) {
            return Err(ScrubError::Running);
        }
        let run = self.scrub.as_ref().map_or(0, |s| s.run + 1);
        self.scrub = Some(Scrub {
            run,
            group: 0,
            cursor: 0,
            revisit: BTreeSet::new(),
            deferred: BTreeSet::new(),
            tally: ScrubTally::default(),
            finished: false,
        });
        if self.cp.is_none() && self.scrub_wants_cp() {
            self.start_cp(super::CpReason::Sync);
        }
        Ok(())
    }

    /// Stops the scrub running, if any; returns whether one was.
    pub fn stop_scrub(&mut self) -> bool {
        match self.scrub.as_mut().filter(|s| !s.finished) {
            Some(scrub) => {
                scrub.finished = true;
                true
            }
            None => false,
        }
    }

    /// The scrub running, or the last one.
    pub fn scrub_status(&self) -> Option<ScrubStatus> {
        let s = self.scrub.as_ref()?;
        let groups = self.layout.groups();
        let before: u64 = groups[..s.group.min(groups.len())]
            .iter()
            .map(|g| g.blocks_per_disk())
            .sum();
        Some(ScrubStatus {
            running: !s.finished,
            suspended: !s.finished && self.scrub_suspended(),
            group: s.group.min(groups.len().saturating_sub(1)),
            stripes_done: before + s.cursor,
            stripes_total: groups.iter().map(|g| g.blocks_per_disk()).sum(),
            stripes_to_revisit: s.revisit.len(),
            tally: s.tally,
        })
    }

    /// A scrub waits while any disk is failed or being rebuilt.
    fn scrub_suspended(&self) -> bool {
        self.rebuild.is_some() || self.failed.iter().any(|f| !f.is_empty())
    }

    /// Whether the scrub needs a CP to go on.
    pub(super) fn scrub_wants_cp(&self) -> bool {
        let Some(s) = self.scrub.as_ref().filter(|s| !s.finished) else {
            return false;
        };
        let online = matches!(self.phase, Phase::Online);
        let stripes_left = s.group < self.layout.groups().len() || !s.deferred.is_empty();
        let nameable = !s.revisit.is_empty() && self.indirect_complete();
        online && !self.scrub_suspended() && (stripes_left || nameable)
    }

    /// Whether the scrub needs every tree whole, to name damaged blocks.
    pub(super) fn scrub_needs_names(&self) -> bool {
        self.scrub
            .as_ref()
            .is_some_and(|s| !s.finished && !s.revisit.is_empty())
    }

    /// The stripes the CP now encoding scrubs, none of those it writes: the
    /// next ones past the cursor, and those waiting for names if the trees are
    /// whole (walking them once for all).
    pub(super) fn scrub_batch<V>(
        &mut self,
        staged: &BTreeMap<(usize, u64), V>,
    ) -> Option<ScrubBatch> {
        let s = self.scrub.as_ref().filter(|s| !s.finished)?;
        if !matches!(self.phase, Phase::Online) || self.scrub_suspended() {
            return None;
        }
        let mut stripes = BTreeSet::new();
        let naming = !s.revisit.is_empty() && self.indirect_complete();
        if naming {
            stripes.extend(s.revisit.iter().filter(|k| !staged.contains_key(k)));
        }
        let mut deferred = BTreeSet::new();
        let mut take = |stripe: (usize, u64)| match staged.contains_key(&stripe) {
            true => deferred.insert(stripe),
            false => stripes.insert(stripe),
        };
        for &stripe in &s.deferred {
            take(stripe);
        }
        let (mut group, mut dbn) = (s.group, s.cursor);
        let mut visited = 0;
        while visited < SCRUB_STRIPES_PER_CP && group < self.layout.groups().len() {
            if dbn >= self.layout.groups()[group].blocks_per_disk() {
                (group, dbn) = (group + 1, 0);
                continue;
            }
            if !(group == 0 && dbn < SUPERBLOCK_COPIES) {
                take((group, dbn));
            }
            dbn += 1;
            visited += 1;
        }
        // The walk names the blocks of every stripe in the batch: a verdict
        // that trusts the names must never meet a stripe the walk skipped.
        let names = naming.then(|| self.name_blocks(&stripes));
        self.counters.scrub_walks += u64::from(naming);
        let s = self.scrub.as_mut().expect("a scrub");
        s.deferred = deferred;
        Some(ScrubBatch {
            run: s.run,
            stripes,
            next: (group, dbn),
            names,
        })
    }

    /// The identities the pointers give the data blocks of `stripes`.
    fn name_blocks(&self, stripes: &BTreeSet<(usize, u64)>) -> Names {
        let wanted: BTreeSet<Pvbn> = stripes
            .iter()
            .flat_map(|&(group, dbn)| {
                let data = self.layout.groups()[group].data_set();
                data.iter()
                    .filter_map(move |disk| self.layout.pvbn(group, disk, Dbn(dbn)))
            })
            .collect();
        let mut names = Names::new();
        self.for_each_reachable_block(|ptr, identity| {
            if wanted.contains(&ptr.pvbn) {
                names.insert(ptr.pvbn, (ptr, identity));
            }
        });
        names
    }

    /// A CP that scrubbed `batch` has committed: the scrub goes on past it, and
    /// is finished once past the last group with nothing left to name.
    pub(super) fn scrub_after_commit(&mut self, batch: Option<ScrubBatch>) {
        let Some(batch) = batch else { return };
        let groups = self.layout.groups().len();
        let Some(s) = self.scrub.as_mut().filter(|s| s.run == batch.run) else {
            return;
        };
        (s.group, s.cursor) = batch.next;
        if s.group >= groups && s.revisit.is_empty() && s.deferred.is_empty() {
            s.finished = true;
        }
    }

    /// Every block of a scrubbed stripe has been read: judge it, note the
    /// verdict, and return the sectors to write.
    pub(super) fn scrub_stripe_read(
        &mut self,
        group: usize,
        dbn: u64,
        old: &BTreeMap<DiskIndex, Option<Sector<P>>>,
    ) -> Vec<(crate::units::DiskId, Dbn, Sector<P>)> {
        let batch = self.cp.as_ref().and_then(|cp| cp.scrub.as_ref());
        let run = batch.map(|b| b.run);
        let names = batch.and_then(|b| b.names.as_ref());
        let verdict = match self.failed[group].is_empty() {
            true => self.judge_stripe(group, dbn, old, names),
            false => Verdict::Revisit, // a disk died meanwhile: the rebuild comes first
        };
        let named = names.is_some();
        let Some(s) = self.scrub.as_mut().filter(|s| Some(s.run) == run) else {
            return Vec::new();
        };
        if named {
            s.revisit.remove(&(group, dbn));
        }
        match verdict {
            Verdict::Sound => s.tally.stripes_verified += 1,
            Verdict::Revisit => {
                s.revisit.insert((group, dbn));
            }
            Verdict::LeftAlone => s.tally.stripes_left_alone += 1,
            Verdict::Repaired {
                writes,
                parity,
                blocks,
            } => {
                s.tally.stripes_verified += 1;
                s.tally.parity_rewritten += parity;
                s.tally.blocks_repaired += blocks;
                if self.sabotaged(super::Sabotage::SkipScrubRepair) {
                    return Vec::new();
                }
                return writes
                    .into_iter()
                    .map(|(disk, sector)| (self.layout.disk_id(group, disk), Dbn(dbn), sector))
                    .collect();
            }
        }
        Vec::new()
    }

    fn judge_stripe(
        &self,
        group: usize,
        dbn: u64,
        old: &BTreeMap<DiskIndex, Option<Sector<P>>>,
        names: Option<&Names>,
    ) -> Verdict<P> {
        let geometry = self.layout.groups()[group];
        let stripe = stripe_units(&geometry, old);
        let damaged = self.damaged_blocks(group, dbn, old, &stripe, names);
        if damaged.len() > geometry.raid_type().tolerated_failures() {
            return Verdict::LeftAlone;
        }
        if !damaged.is_empty() {
            return self.reconstruct_damaged(group, dbn, old, stripe, damaged, names);
        }
        let report = geometry.scrub_stripe(&stripe);
        if report.is_consistent() {
            return Verdict::Sound;
        }
        // Both parities point at one data block: it is stale, unless it is
        // what the filer last wrote there or what its pointer (or no pointer)
        // says, in which case both parities are.
        if let Some(disk) = report
            .suspect_data_disk
            .filter(|&disk| !self.block_vouched(group, dbn, disk, &stripe, names))
        {
            return self.reconstruct_damaged(group, dbn, old, stripe, DiskSet::of([disk]), names);
        }
        // Only parity disagrees. One RAID-DP parity alone points at itself;
        // otherwise the data must be vouched for before parity yields to it.
        let one_of_two = geometry.parity_disks() == 2 && report.inconsistent_parity.len() == 1;
        let data_vouched = || {
            let data = geometry.data_set();
            data.iter()
                .all(|disk| self.block_vouched(group, dbn, disk, &stripe, None))
        };
        if !one_of_two && names.is_none() && !data_vouched() {
            return Verdict::Revisit;
        }
        let mut encoded = stripe;
        geometry.encode_stripe(&mut encoded);
        let writes: Vec<_> = report
            .inconsistent_parity
            .iter()
            .map(|disk| (disk, parity_sector(&encoded[disk.as_usize()], dbn)))
            .collect();
        Verdict::Repaired {
            parity: writes.len() as u64,
            writes,
            blocks: 0,
        }
    }

    /// The blocks of the stripe that are not what they should be: unreadable,
    /// failing their trailer or the filer's last write there, or (with the
    /// pointers' word) contradicting their pointer.
    fn damaged_blocks(
        &self,
        group: usize,
        dbn: u64,
        old: &BTreeMap<DiskIndex, Option<Sector<P>>>,
        stripe: &[P::Unit],
        names: Option<&Names>,
    ) -> DiskSet {
        let geometry = self.layout.groups()[group];
        geometry
            .all_disks()
            .iter()
            .filter(|&disk| {
                let sector = old.get(&disk).and_then(Option::as_ref);
                let last_write = self.scrub_last_write(group, disk, dbn, sector);
                let sound = read_back_matches(&self.layout, last_write, (group, disk, dbn), sector);
                let sum = P::unit_checksum(&stripe[disk.as_usize()]);
                let word = self.pointer_word(names, group, disk, dbn, sum);
                !sound || word == Some(PointerWord::Contradicts)
            })
            .collect()
    }

    /// What the filer last wrote to block `dbn` of `disk`, where known, for
    /// judging `found`, the sector read back there.
    fn scrub_last_write(
        &self,
        group: usize,
        disk: DiskIndex,
        dbn: u64,
        found: Option<&Sector<P>>,
    ) -> Option<LastWrite> {
        let last = self
            .written
            .last_write(self.layout.disk_id(group, disk), dbn);
        match (
            self.sabotaged(super::Sabotage::ScrubTrustsStaleIdentity),
            found,
        ) {
            // The bug: the last write's content under any trailer passes.
            (true, Some(found)) => last.map(|w| LastWrite {
                trailer: super::sectors::last_write_of(found).trailer,
                ..w
            }),
            _ => last,
        }
    }

    /// Whether data block `disk` of the stripe is what the filer last wrote
    /// there, or (with the pointers' word) what its pointer records, or free.
    fn block_vouched(
        &self,
        group: usize,
        dbn: u64,
        disk: DiskIndex,
        stripe: &[P::Unit],
        names: Option<&Names>,
    ) -> bool {
        let sum = P::unit_checksum(&stripe[disk.as_usize()]);
        let id = self.layout.disk_id(group, disk);
        let last_write = self.written.matches(id, dbn, sum) == Some(true);
        let word = self.pointer_word(names, group, disk, dbn, sum);
        last_write || matches!(word, Some(PointerWord::Matches(_) | PointerWord::Free))
    }

    /// What the pointers' word (if the batch walked for it) says of content
    /// summing to `sum` in data block `disk` of the stripe; `None` without the
    /// word, or for a parity block.
    fn pointer_word(
        &self,
        names: Option<&Names>,
        group: usize,
        disk: DiskIndex,
        dbn: u64,
        sum: u32,
    ) -> Option<PointerWord> {
        let names = names?;
        let home = self.layout.pvbn(group, disk, Dbn(dbn))?;
        Some(match names.get(&home) {
            Some((ptr, identity)) if ptr.matches(sum) => PointerWord::Matches(*identity),
            Some(_) => PointerWord::Contradicts,
            None if self.held_by_committed_image(home) => PointerWord::Held,
            None => PointerWord::Free,
        })
    }

    /// Rebuilds the `damaged` blocks from the rest of the stripe and names
    /// what to write back.
    fn reconstruct_damaged(
        &self,
        group: usize,
        dbn: u64,
        old: &BTreeMap<DiskIndex, Option<Sector<P>>>,
        mut stripe: Vec<P::Unit>,
        damaged: DiskSet,
        names: Option<&Names>,
    ) -> Verdict<P> {
        let geometry = self.layout.groups()[group];
        damaged
            .iter()
            .for_each(|disk| stripe[disk.as_usize()] = P::Unit::zero());
        if geometry.reconstruct_stripe(&mut stripe, damaged).is_err() {
            return Verdict::LeftAlone;
        }
        // With parity to spare, the rebuilt stripe must be whole: if not,
        // something else is wrong too and nothing is written.
        let spare = damaged.len() < geometry.raid_type().tolerated_failures();
        if spare && !geometry.scrub_stripe(&stripe).is_consistent() {
            return match names {
                Some(names) => self.reencode_around_free_blocks(group, dbn, old, names),
                None => Verdict::Revisit,
            };
        }
        let mut writes = Vec::new();
        let (mut parity, mut blocks) = (0, 0);
        for disk in damaged.iter() {
            let content = &stripe[disk.as_usize()];
            let Some(home) = self.layout.pvbn(group, disk, Dbn(dbn)) else {
                writes.push((disk, parity_sector(content, dbn)));
                parity += 1;
                continue;
            };
            let sum = P::unit_checksum(content);
            let own = old.get(&disk).and_then(Option::as_ref);
            let last_write = self.scrub_last_write(group, disk, dbn, own);
            let word = || self.pointer_word(names, group, disk, dbn, sum);
            let trailer = match vouching_trailer(own, home, sum, last_write).ok_or_else(word) {
                Ok(trailer) => trailer,
                Err(None | Some(PointerWord::Held)) => return Verdict::Revisit,
                Err(Some(PointerWord::Contradicts)) => return Verdict::LeftAlone,
                Err(Some(PointerWord::Matches(identity))) => Trailer::new(sum, identity),
                Err(Some(PointerWord::Free)) => {
                    Trailer::new(sum, super::rebuild::free_identity(home, dbn))
                }
            };
            let sector = Sector {
                data: P::from_unit(content.clone()),
                trailer: trailer.encode(),
            };
            writes.push((disk, sector));
            blocks += 1;
        }
        Verdict::Repaired {
            writes,
            parity,
            blocks,
        }
    }

    /// Whether the committed image still uses `pvbn`, though no tree of this
    /// CP reaches it (this CP freed it): a crash would bring that image back,
    /// so the block keeps its trailer until the CP has committed.
    fn held_by_committed_image(&self, pvbn: Pvbn) -> bool {
        self.committed_map.get(pvbn.0)
    }

    /// A stripe RAID cannot make whole by reconstruction (a stale block passed
    /// as sound beside a damaged one) is still safe when every block a pointer
    /// reaches matches its pointer: the free blocks' content does not matter.
    /// They are written as free blocks with the content they have, and parity
    /// is recomputed over them.
    fn reencode_around_free_blocks(
        &self,
        group: usize,
        dbn: u64,
        old: &BTreeMap<DiskIndex, Option<Sector<P>>>,
        names: &Names,
    ) -> Verdict<P> {
        let geometry = self.layout.groups()[group];
        let mut stripe = stripe_units(&geometry, old);
        let mut writes = Vec::new();
        for disk in geometry.data_set().iter() {
            let home = self
                .layout
                .pvbn(group, disk, Dbn(dbn))
                .expect("a data disk");
            let content = &stripe[disk.as_usize()];
            let sum = P::unit_checksum(content);
            match self.pointer_word(Some(names), group, disk, dbn, sum) {
                Some(PointerWord::Matches(_)) => {}
                Some(PointerWord::Contradicts) => return Verdict::LeftAlone,
                Some(PointerWord::Held) | None => return Verdict::Revisit,
                Some(PointerWord::Free) => writes.push((
                    disk,
                    Sector {
                        data: P::from_unit(content.clone()),
                        trailer: Trailer::new(sum, super::rebuild::free_identity(home, dbn))
                            .encode(),
                    },
                )),
            }
        }
        geometry.encode_stripe(&mut stripe);
        let parity = geometry.parity_set();
        for disk in parity.iter() {
            writes.push((disk, parity_sector(&stripe[disk.as_usize()], dbn)));
        }
        Verdict::Repaired {
            blocks: (writes.len() - parity.len()) as u64,
            parity: parity.len() as u64,
            writes,
        }
    }
}

/// The stripe's blocks as parity sees them: what was read, zeros for what
/// could not be.
fn stripe_units<P: Payload>(
    geometry: &wafer_raid::RaidGroupGeometry,
    old: &BTreeMap<DiskIndex, Option<Sector<P>>>,
) -> Vec<P::Unit> {
    geometry
        .all_disks()
        .iter()
        .map(|disk| match old.get(&disk) {
            Some(Some(sector)) => P::unit(&sector.data),
            _ => P::Unit::zero(),
        })
        .collect()
}

/// The damaged block's own trailer, if it is intact, names `home`, vouches
/// for content summing to `sum` and is the trailer the filer last wrote there
/// (where that is known: a lost write of the same content under a new
/// identity leaves an old trailer that passes every other test).
fn vouching_trailer<P: Payload>(
    sector: Option<&Sector<P>>,
    home: Pvbn,
    sum: u32,
    last_write: Option<LastWrite>,
) -> Option<Trailer> {
    Trailer::decode(&sector?.trailer).ok().filter(|t| {
        let last = last_write.is_none_or(|w| w.is(sum, t));
        t.identity.pvbn == home && t.matches(sum) && last
    })
}
