//! What the node's iSCSI sessions share of each LUN: its persistent
//! reservations and its logical unit resets.
//!
//! A reservation belongs to a LUN, not to a session: a cluster's hosts
//! register and reserve through their own sessions, and each must see what
//! the others did. Likewise a LOGICAL UNIT RESET through one session is a
//! unit attention for every session that sees the LUN. This module holds,
//! by the LUN's target (so a snapshot image mapped read-only has its own),
//! each LUN's [`wafer_iscsi::Reservations`] and a count of its resets,
//! under one lock; it carries out PERSISTENT RESERVE IN and OUT, and counts
//! every change, so that a session can cheaply tell when to look again at
//! what the LUNs now are to it (`crate::iscsi` does before each command it
//! reads). A LUN's entry stays once made, since its PRgeneration must go
//! on counting: a few words per LUN ever reserved or reset, with at most
//! [`wafer_iscsi::reservation::REGISTRATIONS_MAX`] registrations each.
//! The state lives as long as the server: SPC's persistence through a power
//! loss is not offered (REPORT CAPABILITIES says so), so a restart clears
//! it, as a target's power would.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use wafer_iscsi::scsi::Answer;
use wafer_iscsi::{Access, Nexus, Reservations};

use crate::catalogue::Target;

/// One LUN's shared state.
#[derive(Default)]
struct Unit {
    reservations: Reservations,
    resets: u64,
}

/// Every LUN's shared state.
#[derive(Default)]
pub(crate) struct SharedLunState {
    units: Mutex<BTreeMap<Target, Unit>>,
    /// Changes made so far.
    version: AtomicU64,
}

impl SharedLunState {
    /// How many changes have been made: a session whose count differs
    /// looks its LUNs up again.
    pub(crate) fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    /// What `target`'s reservation leaves `nexus`, and how many times the
    /// LUN has been reset.
    pub(crate) fn seen_by(&self, target: &Target, nexus: &Nexus) -> (Access, u64) {
        self.lock().get(target).map_or((Access::Full, 0), |u| {
            (u.reservations.access(nexus), u.resets)
        })
    }

    /// PERSISTENT RESERVE IN on `target`.
    pub(crate) fn reserve_in(&self, target: &Target, cdb: &[u8; 16]) -> Answer {
        let units = self.lock();
        let empty = Reservations::default();
        let reservations = units.get(target).map_or(&empty, |u| &u.reservations);
        reservations.reserve_in(cdb)
    }

    /// PERSISTENT RESERVE OUT on `target` from `nexus`.
    pub(crate) fn reserve_out(
        &self,
        target: &Target,
        nexus: &Nexus,
        cdb: &[u8; 16],
        parameters: &[u8],
    ) -> Answer {
        let mut units = self.lock();
        let unit = units.entry(target.clone()).or_default();
        let answer = unit.reservations.reserve_out(nexus, cdb, parameters);
        self.version.fetch_add(1, Ordering::AcqRel);
        answer
    }

    /// A LOGICAL UNIT RESET of `target`: every session sees it.
    pub(crate) fn reset(&self, target: &Target) {
        self.lock().entry(target.clone()).or_default().resets += 1;
        self.version.fetch_add(1, Ordering::AcqRel);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<Target, Unit>> {
        self.units.lock().unwrap_or_else(|p| p.into_inner())
    }
}
