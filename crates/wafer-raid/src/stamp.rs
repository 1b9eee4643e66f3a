//! Stamps: a stripe unit that stands for a whole block by one 64-bit digest,
//! and the P+Q code that protects them.
//!
//! A performance lab that needs RAID's behaviour but not its bytes gives each
//! block a [`Stamp`] and runs the same geometry, encode, reconstruction, scrub
//! and [`ParityDelta`](crate::ParityDelta) over stamps. Their parity is not
//! derived from block parity; it is a code of its own, over GF(2^64) (see
//! `gf64`, modulus `x^64 + x^4 + x^3 + x + 1`, generator `g = x`):
//!
//! - row parity `P = d_0 + d_1 + ...`, the XOR of the data stamps, as for
//!   blocks and for RAID-4 as well as RAID-DP;
//! - RAID-DP's second parity `Q = g^0·d_0 + g^1·d_1 + ...`, summed over the data
//!   disks, `d_n` being the stamp of the group's `n`-th data disk.
//!
//! With syndromes `S_p` and `S_q` (the sums over the survivors plus the stored
//! parity), two lost data disks `a` and `b` satisfy `S_p = d_a + d_b` and
//! `S_q = g^a·d_a + g^b·d_b`, so `d_a = (S_q + g^b·S_p) / (g^a + g^b)` and
//! `d_b = S_p + d_a`; the divisor is non-zero because `g` has order
//! `2^64 - 1`. A lost data disk `a` and `P` give `d_a = S_q / g^a`, then `P`
//! by XOR; one lost data disk or `P` alone comes back by XOR; a lost `Q` is
//! recomputed. A single bad data stamp on disk `n` with error `e` leaves
//! `S_p = e` and `S_q = g^n·e`, which scrub uses to name the disk.
//!
//! Unlike RDP, whose diagonal parity also covers the row-parity column, `Q`
//! covers the data disks only: adding the row-parity column to `Q`'s sums does
//! nothing. Both codes are linear, so partial-stripe update by subtraction and
//! the zero stamp of a new, never-written disk work exactly as for blocks.

use crate::StripeUnit;
use crate::gf64;
use crate::unit::{Coded, Column, SecondParity};

/// A 64-bit digest standing for one block in a stripe of stamps.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Stamp(pub u64);

impl StripeUnit for Stamp {
    fn zero() -> Stamp {
        Stamp(0)
    }

    fn is_zero(&self) -> bool {
        self.0 == 0
    }

    fn xor_assign(&mut self, other: &Stamp) {
        self.0 ^= other.0;
    }
}

impl Coded for Stamp {
    type SecondParity = QSums;
}

/// Running sums of `Q`: `g^n·d_n` over the data columns added, plus any stored
/// `Q` added.
#[derive(Clone, Copy, Debug, Default)]
pub struct QSums(u64);

impl SecondParity<Stamp> for QSums {
    fn add(&mut self, column: Column, stamp: &Stamp) {
        if let Column::Data(n) = column {
            self.0 ^= weighted(n, stamp.0);
        }
    }

    fn add_with_row(&mut self, column: Column, stamp: &Stamp, row: &mut Stamp) {
        row.0 ^= stamp.0;
        self.add(column, stamp);
    }

    fn add_parity(&mut self, stored: &Stamp) {
        self.0 ^= stored.0;
    }

    fn store(&self, parity: &mut Stamp) {
        *parity = Stamp(self.0);
    }

    fn apply(&self, parity: &mut Stamp) {
        parity.0 ^= self.0;
    }

    fn is_clear(&self) -> bool {
        self.0 == 0
    }

    fn solve_two(
        &self,
        lost: (Column, Column),
        row_syndrome: &Stamp,
        out: (&mut Stamp, &mut Stamp),
    ) {
        let (s_p, s_q) = (row_syndrome.0, self.0);
        let (a, b) = match lost {
            (Column::Data(a), Column::Data(b)) => solve_two_data((a, b), s_p, s_q),
            (Column::Data(a), Column::RowParity) => solve_data_and_row_parity(a, s_p, s_q),
            (Column::RowParity, Column::Data(b)) => {
                let (data, row_parity) = solve_data_and_row_parity(b, s_p, s_q);
                (row_parity, data)
            }
            (Column::RowParity, Column::RowParity) => unreachable!("two distinct columns are lost"),
        };
        *out.0 = Stamp(a);
        *out.1 = Stamp(b);
    }

    fn locate_one(&self, data_columns: usize, row_syndrome: &Stamp) -> Option<usize> {
        let mut candidates = (0..data_columns).filter(|&n| weighted(n, row_syndrome.0) == self.0);
        let found = candidates.next()?;
        candidates.next().is_none().then_some(found)
    }
}

/// `g^n · value`: data disk `n`'s term of `Q`.
fn weighted(n: usize, value: u64) -> u64 {
    gf64::mul_x_pow(value, n)
}

/// Two lost data disks `a != b`, from `S_p = d_a + d_b` and
/// `S_q = g^a·d_a + g^b·d_b`.
fn solve_two_data((a, b): (usize, usize), s_p: u64, s_q: u64) -> (u64, u64) {
    assert_ne!(a, b, "two distinct data disks are lost");
    let divisor = weighted(a, gf64::ONE) ^ weighted(b, gf64::ONE);
    let d_a = gf64::div(s_q ^ weighted(b, s_p), divisor);
    (d_a, s_p ^ d_a)
}

/// A lost data disk `a` and the row parity, from `S_p = d_a + P` and
/// `S_q = g^a·d_a`: returns `(d_a, P)`.
fn solve_data_and_row_parity(a: usize, s_p: u64, s_q: u64) -> (u64, u64) {
    let d_a = gf64::div(s_q, weighted(a, gf64::ONE));
    (d_a, s_p ^ d_a)
}
