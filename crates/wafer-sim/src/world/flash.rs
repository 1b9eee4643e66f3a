//! The node's Flash Cache device in the simulated world, and the check that
//! what the node finds in it is what its disks hold.
//!
//! The device keeps every slot's sector as written. Its faults are drawn per
//! Flash Cache I/O at [`FaultRates::flash`]: a write acknowledged but lost, a
//! slot that rots (a bit of its content flips) or becomes unreadable, and,
//! once in a while, the death of the whole device. None of them is bounded
//! by a RAID promise: the cache is a copy, and the node must fall back to
//! the disks for whatever its device gets wrong.
//!
//! The check: every copy the node's index holds as readable must be the
//! sector its home holds on disk, unless the world damaged one of the two
//! behind the engine's back (the node then finds out by the copy's check,
//! the aggregate by its pointer's). It runs for the copy each read finds,
//! at the moment the device serves it, and for every copy when the harness
//! asks ([`World::check_flash`]). A copy kept after its home was written
//! (`Sabotage::FlashKeepsOverwrittenCopies`) fails it.

use std::collections::{BTreeMap, BTreeSet};

use wafer_core::filer::{FlashHome, IoOp, IoResult, Sector};
use wafer_core::units::FlashSlot;
use wafer_rng::Rng;

use super::{Engine, SimPayload, World, count, roll};

/// The Flash Cache device.
#[derive(Clone, Debug, Default)]
pub(super) struct SimFlash<P: SimPayload> {
    slots: BTreeMap<u64, Sector<P>>,
    /// Slots whose content the world changed or lost behind the node's back.
    damaged: BTreeSet<u64>,
    /// Slots that can no longer be read.
    unreadable: BTreeSet<u64>,
    dead: bool,
    /// The first copy found that was not its home's block.
    violation: Option<String>,
}

/// Of the flash faults drawn, one in this many kills the device.
const DEATH_ODDS: u64 = 256;

impl<P: SimPayload> World<P> {
    /// Performs a Flash Cache I/O, drawing its faults.
    pub(super) fn flash_io(&mut self, op: IoOp<P>) -> IoResult<P> {
        let faulty = roll(&mut self.rng, self.faults.flash);
        if faulty && self.rng.chance(1, DEATH_ODDS) {
            count(&mut self.injected, "flash device death");
            self.flash.dead = true;
        }
        if self.flash.dead {
            return IoResult::DiskFailed;
        }
        match op {
            IoOp::FlashWrite { slot, sector } => {
                self.flash.unreadable.remove(&slot.0);
                match faulty {
                    true => {
                        count(&mut self.injected, "flash lost write");
                        self.flash.damaged.insert(slot.0);
                    }
                    false => {
                        self.flash.damaged.remove(&slot.0);
                        self.flash.slots.insert(slot.0, sector);
                    }
                }
                IoResult::Done
            }
            IoOp::FlashRead { slot, home } => {
                if faulty {
                    self.damage_flash_slot(slot);
                }
                self.check_copy(home, slot);
                let sector = match self.flash.unreadable.contains(&slot.0) {
                    true => None,
                    false => self.flash.slots.get(&slot.0).cloned(),
                };
                IoResult::Read(vec![sector])
            }
            _ => unreachable!("the flash queue holds Flash Cache I/Os"),
        }
    }

    /// Rots slot `slot` or makes it unreadable, if it holds anything.
    fn damage_flash_slot(&mut self, slot: FlashSlot) {
        let World {
            flash,
            rng,
            injected,
            ..
        } = self;
        let Some(sector) = flash.slots.get_mut(&slot.0) else {
            return;
        };
        flash.damaged.insert(slot.0);
        match rng.chance(1, 2) {
            true => {
                count(injected, "flash bit rot");
                P::rot(&mut sector.data, rng);
            }
            false => {
                count(injected, "flash unreadable slot");
                flash.unreadable.insert(slot.0);
            }
        }
    }

    /// Holds the copy the node's index gives `home` in `slot`, if it is the
    /// copy the node would serve now, against the block its home holds.
    fn check_copy(&mut self, home: FlashHome, slot: FlashSlot) {
        if self.flash.violation.is_some() {
            return;
        }
        let Engine::Node(node) = &self.engine else {
            return;
        };
        let indexed = (node.flash_cache())
            .and_then(|flash| flash.copy_of(&home))
            .is_some_and(|held| held == slot);
        if indexed && let Err(why) = self.compare_copy(home, slot) {
            self.flash.violation = Some(why);
        }
    }

    /// Whether the copy in `slot` is its home's block, where neither was
    /// damaged behind the engine's back.
    fn compare_copy(&self, home: FlashHome, slot: FlashSlot) -> Result<(), String> {
        if self.flash.damaged.contains(&slot.0) || self.flash.unreadable.contains(&slot.0) {
            return Ok(());
        }
        let Some(aggr) = self.aggrs.get(&home.aggregate) else {
            return Err(format!(
                "a Flash Cache copy of {home:?}, whose aggregate is gone"
            ));
        };
        let disk = &aggr.disks[home.disk.0 as usize];
        let damaged = aggr.damaged.contains(&(home.disk, home.dbn.0))
            || disk.unreadable.contains(&home.dbn.0)
            || disk.out_of_service();
        if damaged {
            return Ok(());
        }
        let copy = self.flash.slots.get(&slot.0);
        let on_disk = disk.sectors.get(&home.dbn.0);
        match copy == on_disk {
            true => Ok(()),
            false => Err(format!(
                "the Flash Cache copy in slot {} is not what its home {home:?} holds",
                slot.0
            )),
        }
    }

    /// The node's Flash Cache counters, if it has one.
    pub fn flash_counters(&self) -> Option<wafer_core::node::FlashCounters> {
        match &self.engine {
            Engine::Node(node) => node.flash_cache().map(|flash| flash.counters().clone()),
            Engine::Filer(_) => None,
        }
    }

    /// Every copy the node's Flash Cache would serve is its home's block,
    /// and no read was given one that was not.
    pub fn check_flash(&self) -> Result<(), String> {
        if let Some(why) = &self.flash.violation {
            return Err(why.clone());
        }
        let Engine::Node(node) = &self.engine else {
            return Ok(());
        };
        let Some(flash) = node.flash_cache() else {
            return Ok(());
        };
        for (home, slot) in flash.copies() {
            self.compare_copy(home, slot)?;
        }
        Ok(())
    }

    /// What a crash does to the Flash Cache I/Os in flight: each write lands
    /// or not, at random; reads answer nobody.
    pub(super) fn crash_flash_io(&mut self, op: IoOp<P>) {
        if let IoOp::FlashWrite { slot, sector } = op {
            match self.rng.chance(1, 2) {
                true => {
                    self.flash.slots.insert(slot.0, sector);
                    self.flash.damaged.remove(&slot.0);
                }
                false => {
                    self.flash.damaged.insert(slot.0);
                }
            }
        }
    }
}

/// A Flash Cache I/O's latency in the world: an SSD's, 20 to 220 µs, in any
/// order.
pub(super) fn flash_latency(rng: &mut Rng) -> wafer_core::units::Duration {
    wafer_core::units::Duration(20_000 + rng.below(200_000))
}
