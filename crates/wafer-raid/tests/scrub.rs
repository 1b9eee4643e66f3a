//! Scrub names the parity that disagrees with the data, and for RAID-DP the data
//! disk whose block is wrong. These are the negative controls of the parity
//! checker: each corrupts one block and shows the scrub catches it.

mod common;

use common::{Rng, geometry, random_stripe};
use wafer_raid::{DiskIndex, DiskSet, RaidType};

#[test]
fn an_intact_stripe_scrubs_clean() {
    let mut rng = Rng::seeded(0x5c2b_0001);
    for (raid_type, size) in [
        (RaidType::RaidDp, 3),
        (RaidType::RaidDp, 20),
        (RaidType::Raid4, 7),
    ] {
        let geometry = geometry(raid_type, size);
        let report = geometry.scrub_stripe(&random_stripe(&geometry, &mut rng));
        assert!(report.is_consistent(), "{raid_type}/{size}: {report:?}");
        assert_eq!(report.suspect_data_disk, None);
    }
}

#[test]
fn a_corrupt_parity_block_is_named_and_nothing_else() {
    let mut rng = Rng::seeded(0x5c2b_0002);
    for (raid_type, size) in [(RaidType::RaidDp, 16), (RaidType::Raid4, 5)] {
        let geometry = geometry(raid_type, size);
        for parity in geometry.parity_set().iter() {
            let mut stripe = random_stripe(&geometry, &mut rng);
            stripe[parity.as_usize()][1000] ^= 0x01;
            let report = geometry.scrub_stripe(&stripe);
            assert_eq!(
                report.inconsistent_parity,
                DiskSet::of([parity]),
                "{raid_type}"
            );
            assert_eq!(report.suspect_data_disk, None);
        }
    }
}

#[test]
fn a_corrupt_data_block_is_located_by_raid_dp() {
    let mut rng = Rng::seeded(0x5c2b_0003);
    let geometry = geometry(RaidType::RaidDp, 20);
    for data in geometry.data_set().iter() {
        let mut stripe = random_stripe(&geometry, &mut rng);
        // Flip bits in two distant symbols, as bit rot across a block might.
        stripe[data.as_usize()][5] ^= 0x80;
        stripe[data.as_usize()][4000] ^= 0x02;
        let report = geometry.scrub_stripe(&stripe);
        assert_eq!(report.inconsistent_parity, geometry.parity_set());
        assert_eq!(
            report.suspect_data_disk,
            Some(data),
            "corrupted disk {}",
            data.0
        );
    }
}

#[test]
fn raid4_flags_its_parity_for_a_corrupt_data_block() {
    let mut rng = Rng::seeded(0x5c2b_0004);
    let geometry = geometry(RaidType::Raid4, 8);
    let mut stripe = random_stripe(&geometry, &mut rng);
    stripe[3][17] ^= 0x40;
    let report = geometry.scrub_stripe(&stripe);
    assert_eq!(report.inconsistent_parity, DiskSet::of([DiskIndex(0)]));
    assert_eq!(
        report.suspect_data_disk, None,
        "RAID-4 cannot locate the bad block"
    );
}

#[test]
fn two_corrupt_data_blocks_are_flagged_but_not_pinned_on_one_disk() {
    let mut rng = Rng::seeded(0x5c2b_0005);
    let geometry = geometry(RaidType::RaidDp, 10);
    let mut stripe = random_stripe(&geometry, &mut rng);
    stripe[4][100] ^= 0x08;
    stripe[7][2100] ^= 0x10;
    let report = geometry.scrub_stripe(&stripe);
    assert_eq!(report.inconsistent_parity, geometry.parity_set());
    assert_eq!(report.suspect_data_disk, None);
}
