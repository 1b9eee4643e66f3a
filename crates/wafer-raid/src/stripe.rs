//! Whole-stripe parity: encode, reconstruct and scrub one stripe of a RAID group.
//!
//! A stripe is passed as a slice of blocks indexed by disk position
//! (`stripe[disk.as_usize()]`), parity disks first as the geometry lays them out.
//! Every function here is pure: the caller reads the blocks a plan names, calls
//! in, and writes back what changed.
//!
//! Row parity is the XOR of the data blocks. RAID-DP's diagonal parity is RDP
//! (see `rdp`) over the data blocks and the row parity, data disk `n` being RDP
//! column `n`. Reconstruction uses row parity alone whenever at most one of the
//! data and row-parity disks is lost, as ONTAP does, and RDP chains only when two
//! are; a lost diagonal-parity disk is simply recomputed.

use crate::rdp::{self, Diagonals, ROW_PARITY_COLUMN};
use crate::xor::{xor_all, xor_into};
use crate::{BLOCK_SIZE, Block, DiskIndex, DiskRole, DiskSet, RaidGroupGeometry, RaidType};

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
    /// the data blocks (the diagonal parity from the data and the *recomputed*
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
    pub fn encode_stripe(&self, stripe: &mut [Block]) {
        self.assert_stripe(stripe);
        let (parity, data) = stripe.split_at_mut(self.parity_disks());
        match parity {
            [row_parity] => xor_all(row_parity, data.iter().map(|block| &block[..])),
            [dparity, row_parity] => encode_rdp(data, row_parity, dparity),
            _ => unreachable!("groups have one or two parity disks"),
        }
    }

    /// The surviving disks that must be read to reconstruct the `failed` ones.
    ///
    /// With at most one of the data and row-parity disks lost, row parity is
    /// enough and the diagonal-parity disk is not read.
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
    pub fn reconstruct_stripe(
        &self,
        stripe: &mut [Block],
        failed: DiskSet,
    ) -> Result<(), ReconstructError> {
        self.assert_stripe(stripe);
        self.check_recoverable(failed)?;
        let mut lost_row_members = failed.intersection(self.row_members()).iter();
        match (lost_row_members.next(), lost_row_members.next()) {
            (None, _) => {}
            (Some(lost), None) => self.rebuild_from_row_parity(stripe, lost),
            (Some(a), Some(b)) => self.rebuild_two_from_diagonals(stripe, a, b),
        }
        if let Some(dparity) = self.dparity_disk().filter(|&d| failed.contains(d)) {
            let (head, data) = stripe.split_at_mut(self.parity_disks());
            let (dp, row_parity) = head.split_at_mut(1);
            debug_assert_eq!(dparity, DiskIndex(0));
            write_diagonal_parity(data, &row_parity[0], &mut dp[0]);
        }
        Ok(())
    }

    /// Recomputes both parities of `stripe` and reports which disagree with the
    /// stored ones, naming the data disk at fault when RAID-DP can locate it.
    ///
    /// # Panics
    /// If `stripe` does not hold one block per disk of the group.
    pub fn scrub_stripe(&self, stripe: &[Block]) -> ScrubReport {
        self.assert_stripe(stripe);
        let data = &stripe[self.parity_disks()..];
        let mut row_syndrome = [0u8; BLOCK_SIZE];
        xor_all(&mut row_syndrome, data.iter().map(|block| &block[..]));
        xor_into(&mut row_syndrome, &stripe[self.parity_disk().as_usize()]);
        let mut inconsistent_parity = DiskSet::EMPTY;
        if !crate::xor::is_zero(&row_syndrome) {
            inconsistent_parity = inconsistent_parity.with(self.parity_disk());
        }
        let Some(dparity) = self.dparity_disk() else {
            return ScrubReport {
                inconsistent_parity,
                suspect_data_disk: None,
            };
        };
        // Diagonals over the data and the recomputed row parity, less the stored ones.
        let mut recomputed_row_parity = row_syndrome;
        xor_into(
            &mut recomputed_row_parity,
            &stripe[self.parity_disk().as_usize()],
        );
        let mut diagonal_syndrome = data_diagonals(data);
        diagonal_syndrome.add_column(ROW_PARITY_COLUMN, &recomputed_row_parity);
        diagonal_syndrome.add_stored(&stripe[dparity.as_usize()]);
        if !diagonal_syndrome.stored_is_zero() {
            inconsistent_parity = inconsistent_parity.with(dparity);
        }
        let suspect_data_disk = (inconsistent_parity.len() == 2)
            .then(|| {
                // Against the stored row parity, a bad data block is all that differs.
                diagonal_syndrome.add_column(ROW_PARITY_COLUMN, &row_syndrome);
                rdp::locate_single_column(self.data_disks(), &row_syndrome, &diagonal_syndrome)
            })
            .flatten()
            .map(|column| self.data_disk(column));
        ScrubReport {
            inconsistent_parity,
            suspect_data_disk,
        }
    }

    /// The RDP column of a data or row-parity disk.
    pub(crate) fn rdp_column(&self, disk: DiskIndex) -> usize {
        match self.role(disk) {
            DiskRole::Data(n) => usize::from(n),
            DiskRole::Parity => ROW_PARITY_COLUMN,
            DiskRole::DParity => unreachable!("the diagonal-parity disk is on no diagonal"),
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

    fn rebuild_from_row_parity(&self, stripe: &mut [Block], lost: DiskIndex) {
        let survivors = self.row_members().difference(DiskSet::of([lost]));
        let mut rebuilt = [0u8; BLOCK_SIZE];
        xor_all(
            &mut rebuilt,
            survivors.iter().map(|disk| &stripe[disk.as_usize()][..]),
        );
        stripe[lost.as_usize()] = rebuilt;
    }

    fn rebuild_two_from_diagonals(&self, stripe: &mut [Block], a: DiskIndex, b: DiskIndex) {
        let dparity = self
            .dparity_disk()
            .expect("only RAID-DP survives two failures");
        let survivors = self.row_members().difference(DiskSet::of([a, b]));
        let mut row_syndrome = [0u8; BLOCK_SIZE];
        let mut diagonal_syndrome = Diagonals::new();
        for disk in survivors.iter() {
            let block = &stripe[disk.as_usize()];
            diagonal_syndrome.add_column_and_row(self.rdp_column(disk), block, &mut row_syndrome);
        }
        diagonal_syndrome.add_stored(&stripe[dparity.as_usize()]);
        let (mut block_a, mut block_b) = ([0u8; BLOCK_SIZE], [0u8; BLOCK_SIZE]);
        rdp::solve_two_columns(
            (self.rdp_column(a), self.rdp_column(b)),
            &row_syndrome,
            &diagonal_syndrome,
            (&mut block_a, &mut block_b),
        );
        stripe[a.as_usize()] = block_a;
        stripe[b.as_usize()] = block_b;
    }

    fn assert_stripe(&self, stripe: &[Block]) {
        assert_eq!(
            stripe.len(),
            self.group_size(),
            "a stripe holds one block per disk of the group"
        );
    }
}

/// Row parity and diagonal parity in one pass over the data, so each data block
/// is loaded once while it is hot.
fn encode_rdp(data: &[Block], row_parity: &mut Block, dparity: &mut Block) {
    row_parity.fill(0);
    let mut diagonals = Diagonals::new();
    for (column, block) in data.iter().enumerate() {
        diagonals.add_column_and_row(column, block, row_parity);
    }
    diagonals.add_column(ROW_PARITY_COLUMN, row_parity);
    diagonals.write_stored(dparity);
}

fn write_diagonal_parity(data: &[Block], row_parity: &Block, dparity: &mut Block) {
    let mut diagonals = data_diagonals(data);
    diagonals.add_column(ROW_PARITY_COLUMN, row_parity);
    diagonals.write_stored(dparity);
}

fn data_diagonals(data: &[Block]) -> Diagonals {
    let mut diagonals = Diagonals::new();
    for (column, block) in data.iter().enumerate() {
        diagonals.add_column(column, block);
    }
    diagonals
}
