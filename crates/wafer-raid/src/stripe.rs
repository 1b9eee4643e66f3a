//! Whole-stripe parity: encode, reconstruct and scrub one stripe of a RAID group.
//!
//! A stripe is passed as a slice of units (4 KiB blocks or 64-bit stamps, see
//! `unit`) indexed by disk position (`stripe[disk.as_usize()]`), parity disks
//! first as the geometry lays them out. Every function here is pure: the caller
//! reads the blocks a plan names, calls in, and writes back what changed.
//!
//! Row parity is the XOR of the data units. RAID-DP's second parity is the
//! unit's own code, reached through [`SecondParity`]: RDP (see `rdp`) over the
//! data blocks and the row parity for blocks, a GF(2^64) weighted sum of the
//! data for stamps (see `stamp`); data disk `n` is the code's column `n`.
//! Reconstruction uses row parity alone whenever at most one of the data and
//! row-parity disks is lost, as ONTAP does, and the second parity only when two
//! are; a lost second-parity disk is simply recomputed.

use crate::unit::{Column, SecondParity};
use crate::{DiskIndex, DiskRole, DiskSet, RaidGroupGeometry, RaidType, StripeUnit};

/// Why a stripe could not be reconstructed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReconstructError {
    /// More disks are missing than the RAID type can survive; no block of the
    /// missing disks is returned, right or wrong.
    #[error("{failed} disks of a {raid_type} group are missing; it survives at most {tolerated}")]
    TooManyFailures {
        /// The group's RAID type.
        raid_type: RaidType,
        /// How many of its disks are missing.
        failed: usize,
        /// How many it can survive.
        tolerated: usize,
    },
}

/// What a scrub of one stripe found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScrubReport {
    /// Parity disks whose stored block differs from the parity recomputed from
    /// the data blocks (the second parity from the data and the *recomputed*
    /// row parity, so a bad row-parity block does not also implicate it).
    pub inconsistent_parity: DiskSet,
    /// For RAID-DP, when both parities disagree in exactly the pattern one bad
    /// data block leaves, that block's disk. RAID-4 cannot tell a bad data block
    /// from a bad parity block; block checksums must.
    pub suspect_data_disk: Option<DiskIndex>,
}

impl ScrubReport {
    /// Whether the stored parity agrees with the data.
    pub fn is_consistent(&self) -> bool {
        self.inconsistent_parity.is_empty()
    }
}

impl RaidGroupGeometry {
    /// Computes the parity blocks of `stripe` from its data blocks, in place.
    ///
    /// # Panics
    /// If `stripe` does not hold one block per disk of the group.
    pub fn encode_stripe<U: StripeUnit>(&self, stripe: &mut [U]) {
        self.assert_stripe(stripe);
        let (parity, data) = stripe.split_at_mut(self.parity_disks());
        match parity {
            [row_parity] => xor_all(row_parity, &*data),
            [dparity, row_parity] => encode_double(data, row_parity, dparity),
            _ => unreachable!("groups have one or two parity disks"),
        }
    }

    /// The surviving disks that must be read to reconstruct the `failed` ones.
    ///
    /// With at most one of the data and row-parity disks lost, row parity is
    /// enough and the second-parity (diagonal-parity) disk is not read.
    pub fn reconstruction_reads(&self, failed: DiskSet) -> Result<DiskSet, ReconstructError> {
        self.check_recoverable(failed)?;
        let row_members = self.row_members();
        let reads = if failed.intersection(row_members).len() <= 1 {
            row_members.difference(failed)
        } else {
            self.all_disks().difference(failed)
        };
        Ok(reads)
    }

    /// Rebuilds the blocks of the `failed` disks in `stripe` from the blocks that
    /// [`reconstruction_reads`](Self::reconstruction_reads) names; other positions
    /// are neither read nor written. Serves a degraded read of one block as well
    /// as each stripe of a whole-disk rebuild.
    ///
    /// # Panics
    /// If `stripe` does not hold one block per disk of the group, or `failed`
    /// names a disk outside the group.
    pub fn reconstruct_stripe<U: StripeUnit>(
        &self,
        stripe: &mut [U],
        failed: DiskSet,
    ) -> Result<(), ReconstructError> {
        self.assert_stripe(stripe);
        self.check_recoverable(failed)?;
        let mut lost_row_members = failed.intersection(self.row_members()).iter();
        match (lost_row_members.next(), lost_row_members.next()) {
            (None, _) => {}
            (Some(lost), None) => self.rebuild_from_row_parity(stripe, lost),
            (Some(a), Some(b)) => self.rebuild_two_from_second_parity(stripe, a, b),
        }
        if let Some(dparity) = self.dparity_disk().filter(|&d| failed.contains(d)) {
            let (head, data) = stripe.split_at_mut(self.parity_disks());
            let (dp, row_parity) = head.split_at_mut(1);
            debug_assert_eq!(dparity, DiskIndex(0));
            write_second_parity(data, &row_parity[0], &mut dp[0]);
        }
        Ok(())
    }

    /// Recomputes both parities of `stripe` and reports which disagree with the
    /// stored ones, naming the data disk at fault when RAID-DP can locate it.
    ///
    /// # Panics
    /// If `stripe` does not hold one block per disk of the group.
    pub fn scrub_stripe<U: StripeUnit>(&self, stripe: &[U]) -> ScrubReport {
        self.assert_stripe(stripe);
        let data = &stripe[self.parity_disks()..];
        let stored_row_parity = &stripe[self.parity_disk().as_usize()];
        let mut row_syndrome = U::zero();
        xor_all(&mut row_syndrome, data);
        row_syndrome.xor_assign(stored_row_parity);
        let mut inconsistent_parity = DiskSet::EMPTY;
        if !row_syndrome.is_zero() {
            inconsistent_parity = inconsistent_parity.with(self.parity_disk());
        }
        let Some(dparity) = self.dparity_disk() else {
            return ScrubReport {
                inconsistent_parity,
                suspect_data_disk: None,
            };
        };
        // Second parity over the data and the recomputed row parity, less the stored one.
        let mut recomputed_row_parity = row_syndrome.clone();
        recomputed_row_parity.xor_assign(stored_row_parity);
        let mut second_syndrome = data_second_parity(data);
        second_syndrome.add(Column::RowParity, &recomputed_row_parity);
        second_syndrome.add_parity(&stripe[dparity.as_usize()]);
        if !second_syndrome.is_clear() {
            inconsistent_parity = inconsistent_parity.with(dparity);
        }
        let suspect_data_disk = (inconsistent_parity.len() == 2)
            .then(|| {
                // Against the stored row parity, a bad data block is all that differs.
                second_syndrome.add(Column::RowParity, &row_syndrome);
                second_syndrome.locate_one(self.data_disks(), &row_syndrome)
            })
            .flatten()
            .map(|column| self.data_disk(column));
        ScrubReport {
            inconsistent_parity,
            suspect_data_disk,
        }
    }

    /// The parity-code column of a data or row-parity disk.
    pub(crate) fn column(&self, disk: DiskIndex) -> Column {
        match self.role(disk) {
            DiskRole::Data(n) => Column::Data(usize::from(n)),
            DiskRole::Parity => Column::RowParity,
            DiskRole::DParity => unreachable!("the second-parity disk is no column of its code"),
        }
    }

    /// The disks whose blocks XOR to zero in every row: data and row parity.
    fn row_members(&self) -> DiskSet {
        let all = self.all_disks();
        match self.dparity_disk() {
            Some(dparity) => all.difference(DiskSet::of([dparity])),
            None => all,
        }
    }

    fn check_recoverable(&self, failed: DiskSet) -> Result<(), ReconstructError> {
        assert!(
            failed.is_subset(self.all_disks()),
            "failed disks {failed:?} outside the group"
        );
        let tolerated = self.raid_type().tolerated_failures();
        if failed.len() > tolerated {
            return Err(ReconstructError::TooManyFailures {
                raid_type: self.raid_type(),
                failed: failed.len(),
                tolerated,
            });
        }
        Ok(())
    }

    fn rebuild_from_row_parity<U: StripeUnit>(&self, stripe: &mut [U], lost: DiskIndex) {
        let survivors = self.row_members().difference(DiskSet::of([lost]));
        let mut rebuilt = U::zero();
        xor_all(
            &mut rebuilt,
            survivors.iter().map(|disk| &stripe[disk.as_usize()]),
        );
        stripe[lost.as_usize()] = rebuilt;
    }

    fn rebuild_two_from_second_parity<U: StripeUnit>(
        &self,
        stripe: &mut [U],
        a: DiskIndex,
        b: DiskIndex,
    ) {
        let dparity = self
            .dparity_disk()
            .expect("only RAID-DP survives two failures");
        let survivors = self.row_members().difference(DiskSet::of([a, b]));
        let mut row_syndrome = U::zero();
        let mut second_syndrome = U::SecondParity::default();
        for disk in survivors.iter() {
            let unit = &stripe[disk.as_usize()];
            second_syndrome.add_with_row(self.column(disk), unit, &mut row_syndrome);
        }
        second_syndrome.add_parity(&stripe[dparity.as_usize()]);
        let (mut unit_a, mut unit_b) = (U::zero(), U::zero());
        second_syndrome.solve_two(
            (self.column(a), self.column(b)),
            &row_syndrome,
            (&mut unit_a, &mut unit_b),
        );
        stripe[a.as_usize()] = unit_a;
        stripe[b.as_usize()] = unit_b;
    }

    fn assert_stripe<U>(&self, stripe: &[U]) {
        assert_eq!(
            stripe.len(),
            self.group_size(),
            "a stripe holds one block per disk of the group"
        );
    }
}

/// `dst = units[0] ^ units[1] ^ ...`; no units zeroes `dst`.
fn xor_all<'a, U: StripeUnit>(dst: &mut U, units: impl IntoIterator<Item = &'a U>) {
    let mut units = units.into_iter();
    match units.next() {
        None => *dst = U::zero(),
        Some(first) => {
            dst.clone_from(first);
            units.for_each(|unit| dst.xor_assign(unit));
        }
    }
}

/// Row parity and second parity in one pass over the data, so each data unit
/// is loaded once while it is hot.
fn encode_double<U: StripeUnit>(data: &[U], row_parity: &mut U, dparity: &mut U) {
    *row_parity = U::zero();
    let mut second = U::SecondParity::default();
    for (n, unit) in data.iter().enumerate() {
        second.add_with_row(Column::Data(n), unit, row_parity);
    }
    second.add(Column::RowParity, row_parity);
    second.store(dparity);
}

fn write_second_parity<U: StripeUnit>(data: &[U], row_parity: &U, dparity: &mut U) {
    let mut second = data_second_parity(data);
    second.add(Column::RowParity, row_parity);
    second.store(dparity);
}

fn data_second_parity<U: StripeUnit>(data: &[U]) -> U::SecondParity {
    let mut second = U::SecondParity::default();
    for (n, unit) in data.iter().enumerate() {
        second.add(Column::Data(n), unit);
    }
    second
}
