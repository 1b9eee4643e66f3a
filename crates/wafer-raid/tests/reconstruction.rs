//! Reconstruction is exact for every failure the RAID type promises to survive,
//! and refused for every failure beyond it.
//!
//! Each case poisons the failed blocks and every block the plan says it need not
//! read, so a reconstruction that peeks at anything else shows up as wrong data.

mod common;

use common::{Rng, geometry, random_stripe};
use wafer_raid::{
    BLOCK_SIZE, Block, DiskIndex, DiskSet, RaidGroupGeometry, RaidType, ReconstructError,
};

const RAID_DP_SIZES: [u16; 7] = [3, 4, 5, 8, 16, 20, 28];

fn disk_set(positions: &[u16]) -> DiskSet {
    DiskSet::of(positions.iter().map(|&p| DiskIndex(p)))
}

fn every_failure_of(geometry: &RaidGroupGeometry, disks: usize) -> impl Iterator<Item = DiskSet> {
    geometry.all_disks().subsets_of_size(disks)
}

/// Fails `failed`, poisons everything the plan does not read, reconstructs, and
/// checks the rebuilt blocks against the originals.
fn assert_reconstructs(geometry: &RaidGroupGeometry, original: &[Block], failed: DiskSet) {
    let reads = geometry
        .reconstruction_reads(failed)
        .expect("within tolerance");
    assert!(
        reads.intersection(failed).is_empty(),
        "plan reads a failed disk"
    );
    let mut degraded = original.to_vec();
    for disk in geometry.all_disks().difference(reads).iter() {
        degraded[disk.as_usize()] = [0xdb; BLOCK_SIZE];
    }
    geometry
        .reconstruct_stripe(&mut degraded, failed)
        .expect("within tolerance");
    for disk in failed.iter() {
        assert!(
            degraded[disk.as_usize()] == original[disk.as_usize()],
            "{} group of {}: disk {} wrong after losing {failed:?}",
            geometry.raid_type(),
            geometry.group_size(),
            disk.0
        );
    }
}

#[test]
fn raid_dp_survives_every_single_and_double_failure() {
    let mut rng = Rng::seeded(0x5eed_0001);
    for size in RAID_DP_SIZES {
        let geometry = geometry(RaidType::RaidDp, size);
        let stripe = random_stripe(&geometry, &mut rng);
        let mut cases = 0;
        for k in 1..=2 {
            for failed in every_failure_of(&geometry, k) {
                assert_reconstructs(&geometry, &stripe, failed);
                cases += 1;
            }
        }
        let n = usize::from(size);
        assert_eq!(
            cases,
            n + n * (n - 1) / 2,
            "every failure of a {size}-disk group"
        );
    }
}

#[test]
fn raid4_survives_every_single_failure() {
    let mut rng = Rng::seeded(0x5eed_0002);
    for size in RaidType::Raid4.group_size_limits() {
        let geometry = geometry(RaidType::Raid4, size);
        let stripe = random_stripe(&geometry, &mut rng);
        for failed in every_failure_of(&geometry, 1) {
            assert_reconstructs(&geometry, &stripe, failed);
        }
    }
}

#[test]
fn a_failure_beyond_the_promise_is_refused_and_the_stripe_left_alone() {
    let mut rng = Rng::seeded(0x5eed_0003);
    let cases = [(RaidType::RaidDp, 3usize), (RaidType::Raid4, 2)];
    for (raid_type, failures) in cases {
        for size in [raid_type.group_size_limits().start() + 1, 8] {
            let geometry = geometry(raid_type, size);
            let stripe = random_stripe(&geometry, &mut rng);
            for failed in every_failure_of(&geometry, failures) {
                let mut degraded = stripe.clone();
                let expected = ReconstructError::TooManyFailures {
                    raid_type,
                    failed: failures,
                    tolerated: failures - 1,
                };
                assert_eq!(
                    geometry.reconstruct_stripe(&mut degraded, failed),
                    Err(expected.clone())
                );
                assert_eq!(geometry.reconstruction_reads(failed), Err(expected));
                assert!(
                    degraded == stripe,
                    "a refused reconstruction wrote to the stripe"
                );
            }
        }
    }
}

#[test]
fn whole_disk_rebuild_restores_every_stripe_of_two_failed_disks() {
    let geometry = RaidGroupGeometry::new(RaidType::RaidDp, 20, 48).expect("valid geometry");
    let mut rng = Rng::seeded(0x5eed_0004);
    let disks_by_stripe: Vec<Vec<Block>> = (0..geometry.blocks_per_disk())
        .map(|_| random_stripe(&geometry, &mut rng))
        .collect();
    let failed = disk_set(&[1, 9]); // the parity disk and a data disk
    let reads = geometry.reconstruction_reads(failed).expect("two failures");
    let mut rebuilt = 0;
    for original in &disks_by_stripe {
        let mut stripe: Vec<Block> = (0..geometry.group_size())
            .map(|disk| match reads.contains(DiskIndex(disk as u16)) {
                true => original[disk],
                false => [0u8; BLOCK_SIZE],
            })
            .collect();
        geometry
            .reconstruct_stripe(&mut stripe, failed)
            .expect("two failures");
        assert!(
            stripe == *original,
            "stripe {rebuilt} differs after the rebuild"
        );
        rebuilt += 1;
    }
    assert_eq!(rebuilt, geometry.blocks_per_disk());
}

#[test]
fn single_failures_read_only_the_row_and_leave_diagonal_parity_unread() {
    let geometry = geometry(RaidType::RaidDp, 16);
    let dparity = geometry.dparity_disk().expect("RAID-DP");
    for disk in 1..16u16 {
        let reads = geometry
            .reconstruction_reads(disk_set(&[disk]))
            .expect("one failure");
        assert!(
            !reads.contains(dparity),
            "losing disk {disk} should not read dparity"
        );
        assert_eq!(reads.len(), 14);
    }
    let both_row = geometry
        .reconstruction_reads(disk_set(&[3, 4]))
        .expect("two failures");
    assert!(
        both_row.contains(dparity),
        "two lost row members need the diagonals"
    );
}

/// The diagonal parity block equals RDP's definition evaluated cell by cell:
/// symbol `d` is the XOR of every 16-byte cell `(r, c)` of the data and
/// row-parity columns with `(r + c) mod 257 == d`, the row-parity column being
/// column 256 and absent data columns being zero.
#[test]
fn diagonal_parity_matches_the_rdp_definition_cell_by_cell() {
    const PRIME: usize = 257;
    const SYMBOL: usize = 16;
    let mut rng = Rng::seeded(0x5eed_0005);
    for size in [3u16, 5, 28] {
        let geometry = geometry(RaidType::RaidDp, size);
        let stripe = random_stripe(&geometry, &mut rng);
        let column_of = |disk: usize| match disk {
            1 => PRIME - 1,
            data => data - 2,
        };
        let mut expected = [0u8; BLOCK_SIZE];
        for (disk, block) in stripe.iter().enumerate().skip(1) {
            for (row, cell) in block.chunks_exact(SYMBOL).enumerate() {
                let diagonal = (row + column_of(disk)) % PRIME;
                if diagonal == PRIME - 1 {
                    continue;
                }
                let target = &mut expected[diagonal * SYMBOL..(diagonal + 1) * SYMBOL];
                for (e, c) in target.iter_mut().zip(cell) {
                    *e ^= c;
                }
            }
        }
        assert!(stripe[0] == expected, "dparity of a {size}-disk group");
        let mut row_parity = [0u8; BLOCK_SIZE];
        for block in &stripe[2..] {
            for (p, b) in row_parity.iter_mut().zip(block) {
                *p ^= b;
            }
        }
        assert!(stripe[1] == row_parity, "parity of a {size}-disk group");
    }
}
