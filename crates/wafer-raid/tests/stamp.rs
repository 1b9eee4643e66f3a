//! The stamp unit: 64-bit digests standing for blocks keep every promise blocks
//! do. Encode follows the documented P+Q definition; reconstruction is exact for
//! every failure within tolerance, in every group width up to the widest, and
//! refused beyond it; partial-stripe updates by subtraction equal a re-encode;
//! scrub names a bad parity and locates a bad data stamp in RAID-DP.
//!
//! As in `reconstruction.rs`, each case poisons the failed stamps and every
//! stamp the plan need not read, and the negative control shows the check
//! catches a reconstruction fed a corrupt survivor.

mod common;

use common::{Rng, geometry};
use wafer_raid::{
    DiskIndex, DiskSet, ParityDelta, RaidGroupGeometry, RaidType, ReconstructError, Stamp,
    StripeUnit,
};

const RAID_DP_SIZES: [u16; 7] = [3, 4, 5, 8, 16, 20, 28];
const POISON: Stamp = Stamp(0xdbdb_dbdb_dbdb_dbdb);

/// Every RAID-DP width of `RAID_DP_SIZES` and every RAID-4 width.
fn geometries() -> impl Iterator<Item = RaidGroupGeometry> {
    let raid_dp = RAID_DP_SIZES.map(|size| geometry(RaidType::RaidDp, size));
    let raid4 = RaidType::Raid4
        .group_size_limits()
        .map(|size| geometry(RaidType::Raid4, size));
    raid_dp.into_iter().chain(raid4)
}

fn name(geometry: &RaidGroupGeometry) -> String {
    format!(
        "{} group of {}",
        geometry.raid_type(),
        geometry.group_size()
    )
}

/// A stripe of random data stamps with freshly encoded parity.
fn random_stripe(geometry: &RaidGroupGeometry, rng: &mut Rng) -> Vec<Stamp> {
    let mut stripe: Vec<Stamp> = (0..geometry.group_size())
        .map(|_| Stamp(rng.next_u64()))
        .collect();
    geometry.encode_stripe(&mut stripe);
    stripe
}

/// A non-zero random error to XOR into a stamp.
fn random_error(rng: &mut Rng) -> u64 {
    rng.next_u64().max(1)
}

/// `x · a` in GF(2^64) modulo `x^64 + x^4 + x^3 + x + 1`, written out here
/// independently of the crate.
fn times_x(a: u64) -> u64 {
    (a << 1) ^ if a >> 63 == 1 { 0x1b } else { 0 }
}

/// Fails `failed`, poisons everything the plan does not read (and flips `flip`
/// in the stamp of `corrupt`, a disk the plan reads, if given), reconstructs,
/// and says whether every lost stamp came back exactly.
fn lost_stamps_come_back(
    geometry: &RaidGroupGeometry,
    original: &[Stamp],
    failed: DiskSet,
    corrupt: Option<(DiskIndex, u64)>,
) -> bool {
    let reads = geometry
        .reconstruction_reads(failed)
        .expect("within tolerance");
    assert!(
        reads.intersection(failed).is_empty(),
        "plan reads a failed disk"
    );
    let mut degraded = original.to_vec();
    for disk in geometry.all_disks().difference(reads).iter() {
        degraded[disk.as_usize()] = POISON;
    }
    if let Some((disk, flip)) = corrupt {
        assert!(reads.contains(disk), "corrupt a disk the plan reads");
        degraded[disk.as_usize()].0 ^= flip;
    }
    geometry
        .reconstruct_stripe(&mut degraded, failed)
        .expect("within tolerance");
    failed
        .iter()
        .all(|disk| degraded[disk.as_usize()] == original[disk.as_usize()])
}

#[test]
fn the_suite_covers_the_widest_raid_dp_group() {
    let widest = *RaidType::RaidDp.group_size_limits().end();
    assert_eq!(RAID_DP_SIZES.iter().max(), Some(&widest));
}

#[test]
fn stamp_parity_matches_its_definition() {
    let mut rng = Rng::seeded(0x57a3_0001);
    assert!(Stamp::zero().is_zero() && Stamp::zero() == Stamp::default());
    for geometry in geometries() {
        let stripe = random_stripe(&geometry, &mut rng);
        let data = &stripe[geometry.parity_disks()..];
        let row_parity = data.iter().fold(0, |p, d| p ^ d.0);
        assert_eq!(
            stripe[geometry.parity_disk().as_usize()],
            Stamp(row_parity),
            "{}",
            name(&geometry)
        );
        if let Some(dparity) = geometry.dparity_disk() {
            // Q = sum of x^n · d_n, by Horner's rule from the last data disk.
            let q = data.iter().rev().fold(0, |q, d| times_x(q) ^ d.0);
            assert_eq!(stripe[dparity.as_usize()], Stamp(q), "{}", name(&geometry));
        }
    }
}

#[test]
fn every_failure_within_tolerance_reconstructs_the_lost_stamps() {
    let mut rng = Rng::seeded(0x57a3_0002);
    for geometry in geometries() {
        let stripe = random_stripe(&geometry, &mut rng);
        let mut cases = 0;
        for k in 1..=geometry.raid_type().tolerated_failures() {
            for failed in geometry.all_disks().subsets_of_size(k) {
                assert!(
                    lost_stamps_come_back(&geometry, &stripe, failed, None),
                    "{}: wrong stamps after losing {failed:?}",
                    name(&geometry)
                );
                cases += 1;
            }
        }
        let n = geometry.group_size();
        let expected = match geometry.raid_type() {
            RaidType::Raid4 => n,
            RaidType::RaidDp => n + n * (n - 1) / 2,
        };
        assert_eq!(cases, expected, "every failure of a {}", name(&geometry));
    }
}

/// Negative control: the same check, fed one corrupt survivor, reports wrong
/// stamps for every failure and every survivor it reads.
#[test]
fn a_corrupt_survivor_is_caught_by_the_reconstruction_check() {
    let mut rng = Rng::seeded(0x57a3_0003);
    for (raid_type, size) in [
        (RaidType::RaidDp, 3),
        (RaidType::RaidDp, 8),
        (RaidType::RaidDp, 28),
        (RaidType::Raid4, 6),
    ] {
        let geometry = geometry(raid_type, size);
        let stripe = random_stripe(&geometry, &mut rng);
        let tolerated = raid_type.tolerated_failures();
        for failed in geometry.all_disks().subsets_of_size(tolerated) {
            let reads = geometry.reconstruction_reads(failed).expect("tolerated");
            for survivor in reads.iter() {
                let flip = 1 << rng.below(64);
                assert!(
                    !lost_stamps_come_back(&geometry, &stripe, failed, Some((survivor, flip))),
                    "{}: losing {failed:?} with disk {} corrupt went unnoticed",
                    name(&geometry),
                    survivor.0
                );
            }
        }
    }
}

#[test]
fn failures_beyond_tolerance_are_refused_and_the_stripe_left_alone() {
    let mut rng = Rng::seeded(0x57a3_0004);
    for geometry in geometries() {
        let stripe = random_stripe(&geometry, &mut rng);
        let tolerated = geometry.raid_type().tolerated_failures();
        for failed in geometry.all_disks().subsets_of_size(tolerated + 1).take(50) {
            let mut degraded = stripe.clone();
            let expected = ReconstructError::TooManyFailures {
                raid_type: geometry.raid_type(),
                failed: tolerated + 1,
                tolerated,
            };
            assert_eq!(
                geometry.reconstruct_stripe(&mut degraded, failed),
                Err(expected)
            );
            assert_eq!(degraded, stripe, "a refused reconstruction wrote");
        }
    }
}

#[test]
fn parity_delta_over_stamps_matches_a_full_re_encode() {
    let mut rng = Rng::seeded(0x57a3_0005);
    for geometry in geometries() {
        let mut truth = random_stripe(&geometry, &mut rng);
        for _ in 0..40 {
            let updated: Vec<DiskIndex> = geometry
                .data_set()
                .iter()
                .filter(|_| rng.chance(1, 3))
                .collect();
            if updated.is_empty() {
                continue;
            }
            let mut delta = ParityDelta::<Stamp>::new(geometry);
            for &disk in &updated {
                let new = Stamp(rng.next_u64());
                delta.add_change(disk, &truth[disk.as_usize()], &new);
                truth[disk.as_usize()] = new;
            }
            assert_eq!(delta.changed(), DiskSet::of(updated.iter().copied()));
            let mut parity = truth[..geometry.parity_disks()].to_vec();
            match &mut parity[..] {
                [row] => delta.apply(row, None),
                [dparity, row] => delta.apply(row, Some(dparity)),
                _ => unreachable!("one or two parity disks"),
            }
            geometry.encode_stripe(&mut truth);
            assert_eq!(
                parity,
                truth[..geometry.parity_disks()],
                "{}: subtraction diverged from a re-encode after writing {updated:?}",
                name(&geometry)
            );
        }
    }
}

#[test]
fn a_zero_stamp_disk_joins_without_touching_parity() {
    let mut rng = Rng::seeded(0x57a3_0006);
    for geometry in geometries() {
        let Ok(grown) = geometry.with_added_data_disk() else {
            continue;
        };
        let mut stripe = random_stripe(&geometry, &mut rng);
        stripe.push(Stamp::zero());
        assert!(grown.scrub_stripe(&stripe).is_consistent());
        let before = stripe.clone();
        grown.encode_stripe(&mut stripe);
        assert_eq!(stripe, before, "{}: re-encode changed parity", name(&grown));
    }
}

#[test]
fn an_intact_stamp_stripe_scrubs_clean() {
    let mut rng = Rng::seeded(0x57a3_0007);
    for geometry in geometries() {
        let report = geometry.scrub_stripe(&random_stripe(&geometry, &mut rng));
        assert!(report.is_consistent(), "{}: {report:?}", name(&geometry));
        assert_eq!(report.suspect_data_disk, None);
    }
}

#[test]
fn a_corrupt_stamp_parity_is_named_and_nothing_else() {
    let mut rng = Rng::seeded(0x57a3_0008);
    for geometry in geometries() {
        for parity in geometry.parity_set().iter() {
            let mut stripe = random_stripe(&geometry, &mut rng);
            stripe[parity.as_usize()].0 ^= random_error(&mut rng);
            let report = geometry.scrub_stripe(&stripe);
            assert_eq!(
                report.inconsistent_parity,
                DiskSet::of([parity]),
                "{}",
                name(&geometry)
            );
            assert_eq!(report.suspect_data_disk, None);
        }
    }
}

#[test]
fn a_corrupt_data_stamp_is_located_by_raid_dp() {
    let mut rng = Rng::seeded(0x57a3_0009);
    for size in RAID_DP_SIZES {
        let geometry = geometry(RaidType::RaidDp, size);
        for data in geometry.data_set().iter() {
            // A single flipped bit at each end, and a random error.
            for error in [1, 1 << 63, random_error(&mut rng)] {
                let mut stripe = random_stripe(&geometry, &mut rng);
                stripe[data.as_usize()].0 ^= error;
                let report = geometry.scrub_stripe(&stripe);
                assert_eq!(report.inconsistent_parity, geometry.parity_set());
                assert_eq!(
                    report.suspect_data_disk,
                    Some(data),
                    "{}: corrupted disk {} by {error:#x}",
                    name(&geometry),
                    data.0
                );
            }
        }
    }
}

#[test]
fn raid4_flags_its_parity_for_a_corrupt_data_stamp() {
    let mut rng = Rng::seeded(0x57a3_000a);
    let geometry = geometry(RaidType::Raid4, 8);
    let mut stripe = random_stripe(&geometry, &mut rng);
    stripe[3].0 ^= 0x40;
    let report = geometry.scrub_stripe(&stripe);
    assert_eq!(report.inconsistent_parity, DiskSet::of([DiskIndex(0)]));
    assert_eq!(report.suspect_data_disk, None, "RAID-4 cannot locate it");
}

#[test]
fn two_corrupt_data_stamps_are_flagged_but_not_pinned_on_one_disk() {
    let mut rng = Rng::seeded(0x57a3_000b);
    let geometry = geometry(RaidType::RaidDp, 10);
    let mut stripe = random_stripe(&geometry, &mut rng);
    stripe[4].0 ^= 0x08;
    stripe[7].0 ^= 0x10;
    let report = geometry.scrub_stripe(&stripe);
    assert_eq!(report.inconsistent_parity, geometry.parity_set());
    assert_eq!(report.suspect_data_disk, None);
}
