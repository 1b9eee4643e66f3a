//! Row-diagonal parity (RDP, Corbett et al., FAST 2004) on 4 KiB blocks.
//!
//! RDP over a prime `p` is an array of `p - 1` rows and `p + 1` columns: columns
//! `0..p-1` hold data, column `p - 1` holds row parity and column `p` diagonal
//! parity. A cell `(r, c)` of the data and row-parity columns lies on diagonal
//! `(r + c) mod p`; diagonal `d < p - 1` is XOR-summed into row `d` of the diagonal
//! parity column, and diagonal `p - 1` (the *missing diagonal*) is stored nowhere.
//! Any two lost columns are recovered by chains that alternate a diagonal step and
//! a row step; primality of `p` makes the chains visit every row.
//!
//! wafer splits each 4 KiB block into `p - 1` symbols, so one stripe (one block
//! per disk) is a complete RDP codeword and a stripe can be updated, verified and
//! rebuilt on its own. It fixes `p = 257`: 256 symbols of 16 bytes, and room for
//! 256 data columns. Groups use far fewer (RAID-DP allows 26 data disks); the
//! remaining columns are *phantom* disks of zeros, which contribute nothing to any
//! parity. That is why appending a zeroed data disk never changes parity: it only
//! turns a phantom column into a real one.
//!
//! Diagonal sums are kept for all `p` diagonals while they are built (including
//! the missing one), so that adding column `c` is two contiguous XORs: its symbols
//! `0..p-c` land on diagonals `c..p` and the rest wrap around to `0..c-1`.
//!
//! This makes [`Block`] a stripe unit: its XOR is the word kernels of `xor`, and
//! its second parity is [`Diagonals`], data disk `n` being column `n` and the
//! row-parity disk column `p - 1`.

use crate::unit::{Coded, Column, SecondParity};
use crate::xor::{is_zero, xor_into, xor_into_both};
use crate::{BLOCK_SIZE, Block, StripeUnit};

/// The RDP prime.
pub const PRIME: usize = 257;
/// Rows of the RDP array: symbols per block.
const ROWS: usize = PRIME - 1;
/// Bytes per RDP symbol.
pub const SYMBOL_BYTES: usize = BLOCK_SIZE / ROWS;
/// The RDP column of the row-parity disk.
pub const ROW_PARITY_COLUMN: usize = PRIME - 1;
/// The RDP diagonal that no parity block stores.
const MISSING_DIAGONAL: usize = PRIME - 1;

const _: () = assert!(
    SYMBOL_BYTES * ROWS == BLOCK_SIZE,
    "symbols must tile a block"
);
const _: () = assert!(
    SYMBOL_BYTES % 8 == 0,
    "symbols must be whole words for the XOR kernels"
);

/// XOR sums of all `PRIME` diagonals, symbol `d` holding diagonal `d`.
#[derive(Clone)]
pub struct Diagonals {
    sums: [u8; PRIME * SYMBOL_BYTES],
}

impl Diagonals {
    /// All diagonal sums zero.
    pub fn new() -> Diagonals {
        Diagonals {
            sums: [0; PRIME * SYMBOL_BYTES],
        }
    }

    /// XORs every cell of column `column` (a data column or the row-parity column)
    /// into the sum of its diagonal.
    pub fn add_column(&mut self, column: usize, block: &Block) {
        assert!(
            column <= ROW_PARITY_COLUMN,
            "column {column} is not on any diagonal"
        );
        let start = column * SYMBOL_BYTES;
        let head = (self.sums.len() - start).min(BLOCK_SIZE);
        xor_into(&mut self.sums[start..start + head], &block[..head]);
        let tail = BLOCK_SIZE - head;
        xor_into(&mut self.sums[..tail], &block[head..]);
    }

    /// Like [`add_column`](Self::add_column), and also XORs the block into
    /// `row`, loading each word of the block once for both sums.
    pub fn add_column_and_row(&mut self, column: usize, block: &Block, row: &mut Block) {
        assert!(
            column <= ROW_PARITY_COLUMN,
            "column {column} is not on any diagonal"
        );
        let start = column * SYMBOL_BYTES;
        let head = (self.sums.len() - start).min(BLOCK_SIZE);
        let (row_head, row_tail) = row.split_at_mut(head);
        xor_into_both(
            &mut self.sums[start..start + head],
            row_head,
            &block[..head],
        );
        let tail = BLOCK_SIZE - head;
        xor_into_both(&mut self.sums[..tail], row_tail, &block[head..]);
    }

    /// XORs a stored diagonal-parity block into diagonals `0..PRIME-1`.
    pub fn add_stored(&mut self, dparity: &Block) {
        xor_into(&mut self.sums[..BLOCK_SIZE], dparity);
    }

    /// Writes the stored diagonals (all but the missing one) as a diagonal-parity block.
    pub fn write_stored(&self, dparity: &mut Block) {
        dparity.copy_from_slice(&self.sums[..BLOCK_SIZE]);
    }

    /// XORs the stored diagonals into a diagonal-parity block.
    pub fn xor_stored_into(&self, dparity: &mut Block) {
        xor_into(dparity, &self.sums[..BLOCK_SIZE]);
    }

    /// Whether every stored diagonal sums to zero.
    pub fn stored_is_zero(&self) -> bool {
        is_zero(&self.sums[..BLOCK_SIZE])
    }

    fn symbol(&self, diagonal: usize) -> &[u8] {
        &self.sums[diagonal * SYMBOL_BYTES..(diagonal + 1) * SYMBOL_BYTES]
    }
}

impl Default for Diagonals {
    fn default() -> Self {
        Diagonals::new()
    }
}

impl StripeUnit for Block {
    fn zero() -> Block {
        [0; BLOCK_SIZE]
    }

    fn is_zero(&self) -> bool {
        is_zero(self)
    }

    fn xor_assign(&mut self, other: &Block) {
        xor_into(self, other);
    }
}

impl Coded for Block {
    type SecondParity = Diagonals;
}

/// The diagonal parity of RDP as the second parity of blocks.
impl SecondParity<Block> for Diagonals {
    fn add(&mut self, column: Column, block: &Block) {
        self.add_column(rdp_column(column), block);
    }

    fn add_with_row(&mut self, column: Column, block: &Block, row: &mut Block) {
        self.add_column_and_row(rdp_column(column), block, row);
    }

    fn add_parity(&mut self, stored: &Block) {
        self.add_stored(stored);
    }

    fn store(&self, parity: &mut Block) {
        self.write_stored(parity);
    }

    fn apply(&self, parity: &mut Block) {
        self.xor_stored_into(parity);
    }

    fn is_clear(&self) -> bool {
        self.stored_is_zero()
    }

    fn solve_two(
        &self,
        (a, b): (Column, Column),
        row_syndrome: &Block,
        out: (&mut Block, &mut Block),
    ) {
        solve_two_columns((rdp_column(a), rdp_column(b)), row_syndrome, self, out);
    }

    fn locate_one(&self, data_columns: usize, row_syndrome: &Block) -> Option<usize> {
        locate_single_column(data_columns, row_syndrome, self)
    }
}

/// The RDP column of a stripe column.
fn rdp_column(column: Column) -> usize {
    match column {
        Column::Data(n) => n,
        Column::RowParity => ROW_PARITY_COLUMN,
    }
}

/// Recovers two lost columns `a != b` (data or row parity) from their syndromes.
///
/// `row_syndrome` is the XOR of every surviving cell of each row, so its row `r`
/// equals `A[r] ^ B[r]`. `diagonal_syndrome` is the XOR of every surviving cell of
/// each diagonal with the stored diagonal parity, so stored diagonal `d` equals
/// the XOR of the lost cells on `d`.
pub fn solve_two_columns(
    (a, b): (usize, usize),
    row_syndrome: &Block,
    diagonal_syndrome: &Diagonals,
    (out_a, out_b): (&mut Block, &mut Block),
) {
    assert!(a != b && a <= ROW_PARITY_COLUMN && b <= ROW_PARITY_COLUMN);
    // Diagonal (b - 1) misses column b, so its one lost cell is on column a; the
    // chain from there solves a by diagonals and b by rows. Symmetrically for a.
    let steps = follow_chain(
        (a, b),
        (b + PRIME - 1) % PRIME,
        row_syndrome,
        diagonal_syndrome,
        (out_a, out_b),
    ) + follow_chain(
        (b, a),
        (a + PRIME - 1) % PRIME,
        row_syndrome,
        diagonal_syndrome,
        (out_b, out_a),
    );
    assert_eq!(
        steps, ROWS,
        "RDP chains must recover every row of both columns"
    );
}

/// Walks one reconstruction chain from diagonal `start`, solving column `x` on each
/// diagonal and then column `y` on the row of that cell. Returns the rows solved.
fn follow_chain(
    (x, y): (usize, usize),
    start: usize,
    row_syndrome: &Block,
    diagonal_syndrome: &Diagonals,
    (out_x, out_y): (&mut Block, &mut Block),
) -> usize {
    let mut diagonal = start;
    let mut rows_solved = 0;
    while diagonal != MISSING_DIAGONAL {
        let row = (diagonal + PRIME - x) % PRIME;
        let row_of_y = (diagonal + PRIME - y) % PRIME;
        assert!(row < ROWS, "a chain diagonal must cross column {x}");
        // Symbols are 16 bytes: one u128 each, so a step is a few loads and XORs.
        let mut x_cell = cell(&diagonal_syndrome.sums, diagonal);
        if row_of_y < ROWS {
            x_cell ^= cell(out_y, row_of_y);
        }
        set_cell(out_x, row, x_cell);
        set_cell(out_y, row, cell(row_syndrome, row) ^ x_cell);
        diagonal = (row + y) % PRIME;
        rows_solved += 1;
        assert!(rows_solved <= ROWS, "RDP chain did not terminate");
    }
    rows_solved
}

/// Symbol `index` of `bytes` as one 128-bit word.
#[allow(clippy::host_endian_bytes, reason = "XOR is byte-order agnostic")]
fn cell(bytes: &[u8], index: usize) -> u128 {
    let start = index * SYMBOL_BYTES;
    u128::from_ne_bytes(
        bytes[start..start + SYMBOL_BYTES]
            .try_into()
            .expect("a symbol"),
    )
}

#[allow(clippy::host_endian_bytes, reason = "XOR is byte-order agnostic")]
fn set_cell(bytes: &mut [u8], index: usize, value: u128) {
    let start = index * SYMBOL_BYTES;
    bytes[start..start + SYMBOL_BYTES].copy_from_slice(&value.to_ne_bytes());
}

fn symbol(block: &Block, row: usize) -> &[u8] {
    &block[row * SYMBOL_BYTES..(row + 1) * SYMBOL_BYTES]
}

/// The data column whose lone corruption explains both syndromes, if exactly one does.
///
/// `row_syndrome` is the XOR of each row (data and stored row parity);
/// `diagonal_syndrome` the XOR of each diagonal (data, stored row parity and
/// stored diagonal parity). A single corrupted data column `c` with error `e`
/// shows as `row_syndrome[r] = e[r]` and `diagonal_syndrome[(r + c) mod p] = e[r]`.
pub fn locate_single_column(
    data_columns: usize,
    row_syndrome: &Block,
    diagonal_syndrome: &Diagonals,
) -> Option<usize> {
    let mut candidates = (0..data_columns)
        .filter(|&column| explains_syndromes(column, row_syndrome, diagonal_syndrome));
    let found = candidates.next()?;
    candidates.next().is_none().then_some(found)
}

fn explains_syndromes(column: usize, row_syndrome: &Block, diagonal_syndrome: &Diagonals) -> bool {
    (0..MISSING_DIAGONAL).all(|diagonal| {
        let row = (diagonal + PRIME - column) % PRIME;
        let expected = diagonal_syndrome.symbol(diagonal);
        if row < ROWS {
            symbol(row_syndrome, row) == expected
        } else {
            is_zero(expected)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xor::xor_pair;

    fn symbol_mut(block: &mut Block, row: usize) -> &mut [u8] {
        &mut block[row * SYMBOL_BYTES..(row + 1) * SYMBOL_BYTES]
    }

    /// Builds a block whose symbol `r` is filled with `values[r]`.
    fn block_of_symbols(values: impl Fn(usize) -> u8) -> Block {
        let mut block = [0u8; BLOCK_SIZE];
        for row in 0..ROWS {
            symbol_mut(&mut block, row).fill(values(row));
        }
        block
    }

    #[test]
    fn a_column_lands_each_symbol_on_its_diagonal() {
        for column in [0, 1, 7, 255, ROW_PARITY_COLUMN] {
            let block = block_of_symbols(|row| row as u8 ^ 0xa5);
            let mut diagonals = Diagonals::new();
            diagonals.add_column(column, &block);
            for row in 0..ROWS {
                let diagonal = (row + column) % PRIME;
                assert_eq!(
                    diagonals.symbol(diagonal),
                    symbol(&block, row),
                    "col {column} row {row}"
                );
            }
            let untouched = (column + PRIME - 1) % PRIME;
            assert!(
                is_zero(diagonals.symbol(untouched)),
                "column {column} touched diagonal {untouched}"
            );
        }
    }

    #[test]
    fn two_lost_columns_come_back_from_their_syndromes() {
        let a_block = block_of_symbols(|row| (row * 3 + 1) as u8);
        let b_block = block_of_symbols(|row| (row * 5 + 7) as u8);
        for (a, b) in [
            (0, 1),
            (0, ROW_PARITY_COLUMN),
            (3, 200),
            (254, 255),
            (17, ROW_PARITY_COLUMN),
        ] {
            let mut rows = [0u8; BLOCK_SIZE];
            xor_pair(&mut rows, &a_block, &b_block);
            let mut diagonals = Diagonals::new();
            diagonals.add_column(a, &a_block);
            diagonals.add_column(b, &b_block);
            let (mut out_a, mut out_b) = ([0u8; BLOCK_SIZE], [0u8; BLOCK_SIZE]);
            solve_two_columns((a, b), &rows, &diagonals, (&mut out_a, &mut out_b));
            assert!(out_a == a_block && out_b == b_block, "columns {a} and {b}");
        }
    }
}
