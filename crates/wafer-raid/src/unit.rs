//! Stripe units: what one disk's block of a stripe holds, and the code that
//! protects it.
//!
//! Parity arithmetic is the same whatever a block is: row parity is the XOR of
//! the data, and RAID-DP adds a second parity that is linear in the columns, so
//! encode, reconstruct, scrub and partial-stripe update are written once over
//! [`StripeUnit`]. Two units exist. A [`Block`](crate::Block) is the real
//! 4 KiB block, protected by RDP (see `rdp`); a [`Stamp`](crate::Stamp) is a
//! 64-bit digest a performance lab uses in place of a block, protected by a
//! P+Q code over GF(2^64) (see `stamp`).
//!
//! What differs between the codes is the second parity, hidden behind
//! [`SecondParity`]: running sums that columns are XORed into, from which a
//! second-parity unit is stored or checked, two lost columns are solved, or a
//! single bad data column is located. The trait [`Coded`] names a unit's
//! second parity; it lives in this private module, which seals
//! [`StripeUnit`] to the units of this crate.

use core::fmt;

/// What one disk contributes to one stripe: a 4 KiB [`Block`](crate::Block)
/// or a 64-bit [`Stamp`](crate::Stamp). RAID encode, reconstruction, scrub and
/// [`ParityDelta`](crate::ParityDelta) are generic over it.
///
/// The trait is sealed: its parity code is this crate's business.
pub trait StripeUnit: Clone + PartialEq + Eq + fmt::Debug + Send + Sync + 'static + Coded {
    /// The unit of all zeros: the XOR identity, the parity of no data, and what
    /// a never-written disk holds (so it changes no parity).
    fn zero() -> Self;

    /// Whether this is the zero unit.
    fn is_zero(&self) -> bool;

    /// `self ^= other`: the sum of two units, in every code of this crate.
    fn xor_assign(&mut self, other: &Self);
}

/// The seal of [`StripeUnit`]: names the unit's second-parity code.
pub trait Coded: Sized {
    /// Running sums of the unit's second (RAID-DP) parity.
    type SecondParity: SecondParity<Self>;
}

/// A column of a stripe that row parity covers: a data disk, by its number
/// among the data disks, or the row-parity disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Column {
    /// The `n`-th data disk of the group.
    Data(usize),
    /// The row-parity disk.
    RowParity,
}

/// Running sums of a second parity over the columns added so far; zero when new
/// ([`Default`]). Linear: the sums of a XOR of stripes are the XOR of their sums.
pub trait SecondParity<U>: Clone + Default {
    /// XORs `unit`, the content of `column`, into the sums.
    fn add(&mut self, column: Column, unit: &U);

    /// Like [`add`](Self::add), and also XORs `unit` into `row`, reading the
    /// unit once for both.
    fn add_with_row(&mut self, column: Column, unit: &U, row: &mut U);

    /// XORs a stored second-parity unit into the sums, turning sums over the
    /// surviving columns into a syndrome of the lost ones.
    fn add_parity(&mut self, stored: &U);

    /// Writes the sums as a second-parity unit.
    fn store(&self, parity: &mut U);

    /// XORs the sums into a stored second-parity unit.
    fn apply(&self, parity: &mut U);

    /// Whether the sums are zero: a syndrome of a consistent stripe.
    fn is_clear(&self) -> bool;

    /// Recovers two lost columns `lost.0 != lost.1` from this syndrome of them
    /// and `row_syndrome`, the XOR of the surviving data and row-parity units.
    fn solve_two(&self, lost: (Column, Column), row_syndrome: &U, out: (&mut U, &mut U));

    /// The data column whose lone corruption explains this syndrome and
    /// `row_syndrome` (both taken against the stored parities), if exactly one
    /// of the first `data_columns` does.
    fn locate_one(&self, data_columns: usize, row_syndrome: &U) -> Option<usize>;
}
