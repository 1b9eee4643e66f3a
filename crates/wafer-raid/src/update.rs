//! Partial-stripe writes: choosing how to bring parity up to date, and doing it.
//!
//! When a write covers only some data blocks of a stripe, parity can be updated
//! two ways (Corbett et al., FAST 2004, §6):
//!
//! - by *subtraction*: read the old contents of the written blocks and the old
//!   parity, and XOR the change into the parity (`2d + 2·parity` I/Os for `d`
//!   written blocks);
//! - by *addition*: read the data blocks that are not written and compute parity
//!   afresh over the whole stripe (`n + parity` I/Os for `n` data disks).
//!
//! Both write the same blocks, so the cheaper is the one that reads less. On a
//! tie wafer adds: recomputing from data never carries a stale parity block
//! forward (the "parity pollution" of Krioukov et al., FAST 2008). With failed
//! disks, a method that would read a failed disk is not available; if neither
//! is, the stripe is reconstructed first from every surviving disk.
//!
//! Linearity makes subtraction cheap to compute: the change to parity is the
//! parity of the change, so [`ParityDelta`] gathers `old ^ new` of each written
//! unit (block or stamp) and XORs its row and second-parity sums into the old
//! parity.

use crate::unit::{Column, SecondParity};
use crate::{Block, DiskIndex, DiskSet, RaidGroupGeometry, StripeUnit};

/// How a partial-stripe write brings parity up to date.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParityUpdateMethod {
    /// Every data block is written: parity comes from the new data alone.
    FullStripe,
    /// Read old data and old parity, XOR the change into parity.
    Subtraction,
    /// Read the untouched data blocks and recompute parity.
    Addition,
    /// Neither method can run around the failed disks: read every survivor,
    /// reconstruct the stripe, then recompute parity.
    ReconstructFirst,
    /// No parity disk survives: only the data blocks are written.
    DataOnly,
}

/// The disk I/O a partial-stripe write needs, and the method it implies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParityUpdatePlan {
    /// The method chosen.
    pub method: ParityUpdateMethod,
    /// Disks to read before parity can be computed.
    pub reads: DiskSet,
    /// Disks to write: the written data blocks and every surviving parity block.
    pub writes: DiskSet,
}

impl ParityUpdatePlan {
    /// Total disk I/Os of the plan.
    pub fn io_count(&self) -> usize {
        self.reads.len() + self.writes.len()
    }
}

impl RaidGroupGeometry {
    /// Plans a write of the data disks in `updated` to one stripe while the disks
    /// in `failed` are missing, choosing the method that needs the fewest I/Os.
    ///
    /// # Panics
    /// If `updated` is empty or holds a parity disk, or more disks have failed
    /// than the group survives (the stripe is lost; nothing can be planned).
    pub fn plan_parity_update(&self, updated: DiskSet, failed: DiskSet) -> ParityUpdatePlan {
        let data = self.data_set();
        assert!(
            !updated.is_empty() && updated.is_subset(data),
            "updated {updated:?} must be data disks"
        );
        assert!(
            failed.len() <= self.raid_type().tolerated_failures(),
            "{failed:?} exceed what the group survives"
        );
        let live_parity = self.parity_set().difference(failed);
        let writes = updated.union(live_parity).difference(failed);
        let plan = |method, reads| ParityUpdatePlan {
            method,
            reads,
            writes,
        };
        if live_parity.is_empty() {
            return plan(ParityUpdateMethod::DataOnly, DiskSet::EMPTY);
        }
        if updated == data {
            return plan(ParityUpdateMethod::FullStripe, DiskSet::EMPTY);
        }
        let untouched = data.difference(updated);
        let subtraction_reads = updated.union(live_parity);
        let subtraction = updated.intersection(failed).is_empty();
        let addition = untouched.intersection(failed).is_empty();
        match (subtraction, addition) {
            (true, true) if subtraction_reads.len() < untouched.len() => {
                plan(ParityUpdateMethod::Subtraction, subtraction_reads)
            }
            (true, false) => plan(ParityUpdateMethod::Subtraction, subtraction_reads),
            (_, true) => plan(ParityUpdateMethod::Addition, untouched),
            (false, false) => plan(
                ParityUpdateMethod::ReconstructFirst,
                self.all_disks().difference(failed),
            ),
        }
    }
}

/// The change that a set of data-block writes makes to a stripe's parity, for
/// stripes of unit `U` (4 KiB blocks unless said otherwise).
#[derive(Clone)]
pub struct ParityDelta<U: StripeUnit = Block> {
    geometry: RaidGroupGeometry,
    changed: DiskSet,
    row: U,
    second: U::SecondParity,
}

impl<U: StripeUnit> ParityDelta<U> {
    /// No change yet.
    pub fn new(geometry: RaidGroupGeometry) -> Self {
        ParityDelta {
            geometry,
            changed: DiskSet::EMPTY,
            row: U::zero(),
            second: U::SecondParity::default(),
        }
    }

    /// Records that data disk `disk` changes from `old` to `new`.
    ///
    /// # Panics
    /// If `disk` is not a data disk or was already recorded.
    pub fn add_change(&mut self, disk: DiskIndex, old: &U, new: &U) {
        assert!(
            self.geometry.data_set().contains(disk),
            "{disk:?} is not a data disk"
        );
        assert!(
            !self.changed.contains(disk),
            "{disk:?} changed twice in one delta"
        );
        self.changed = self.changed.with(disk);
        let mut change = old.clone();
        change.xor_assign(new);
        self.row.xor_assign(&change);
        if self.geometry.dparity_disk().is_some() {
            self.second.add(self.geometry.column(disk), &change);
        }
    }

    /// Applies the recorded changes to the stripe's old parity blocks, giving the
    /// new ones. `dparity` is required for RAID-DP and refused for RAID-4.
    ///
    /// # Panics
    /// If `dparity` does not match the RAID type.
    pub fn apply(&self, row_parity: &mut U, dparity: Option<&mut U>) {
        assert_eq!(
            dparity.is_some(),
            self.geometry.dparity_disk().is_some(),
            "diagonal parity is given exactly for RAID-DP"
        );
        row_parity.xor_assign(&self.row);
        if let Some(dparity) = dparity {
            let mut second = self.second.clone();
            second.add(Column::RowParity, &self.row);
            second.apply(dparity);
        }
    }

    /// The data disks recorded so far.
    pub fn changed(&self) -> DiskSet {
        self.changed
    }
}
