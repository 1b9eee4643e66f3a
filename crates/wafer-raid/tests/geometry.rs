//! Group geometry: the size limits ONTAP enforces, disk roles in `aggr status -r`
//! order, and a disk-major block mapping that survives adding a disk.

use wafer_raid::{Dbn, DiskIndex, DiskRole, Gbn, GeometryError, RaidGroupGeometry, RaidType};

#[test]
fn group_sizes_outside_the_limits_are_refused_with_the_limits() {
    for (raid_type, min, max) in [(RaidType::Raid4, 2, 14), (RaidType::RaidDp, 3, 28)] {
        for size in [0, min - 1, max + 1, 200] {
            assert_eq!(
                RaidGroupGeometry::new(raid_type, size, 100),
                Err(GeometryError::GroupSizeOutOfRange {
                    raid_type,
                    group_size: size,
                    min,
                    max
                })
            );
        }
        for size in min..=max {
            assert!(RaidGroupGeometry::new(raid_type, size, 100).is_ok());
        }
    }
    assert_eq!(
        RaidGroupGeometry::new(RaidType::RaidDp, 16, 0),
        Err(GeometryError::EmptyDisks)
    );
    assert!(matches!(
        RaidGroupGeometry::new(RaidType::RaidDp, 28, u64::MAX / 4),
        Err(GeometryError::TooManyBlocks { .. })
    ));
}

#[test]
fn parity_disks_come_first_in_ontap_order() {
    let dp = RaidGroupGeometry::new(RaidType::RaidDp, 5, 10).expect("valid");
    let roles: Vec<DiskRole> = (0..5).map(|d| dp.role(DiskIndex(d))).collect();
    assert_eq!(
        roles,
        [
            DiskRole::DParity,
            DiskRole::Parity,
            DiskRole::Data(0),
            DiskRole::Data(1),
            DiskRole::Data(2)
        ]
    );
    assert_eq!((dp.data_disks(), dp.parity_disks()), (3, 2));
    let r4 = RaidGroupGeometry::new(RaidType::Raid4, 3, 10).expect("valid");
    assert_eq!(r4.role(DiskIndex(0)), DiskRole::Parity);
    assert_eq!(r4.role(DiskIndex(1)), DiskRole::Data(0));
    assert_eq!(r4.dparity_disk(), None);
}

#[test]
fn every_group_block_maps_to_one_data_block_and_back() {
    let geometry = RaidGroupGeometry::new(RaidType::RaidDp, 6, 37).expect("valid");
    let mut seen = std::collections::BTreeSet::new();
    for gbn in 0..geometry.data_blocks() {
        let (disk, dbn) = geometry.locate(Gbn(gbn)).expect("inside the group");
        assert!(matches!(geometry.role(disk), DiskRole::Data(_)));
        assert_eq!(geometry.gbn(disk, dbn), Some(Gbn(gbn)));
        assert!(
            seen.insert((disk, dbn)),
            "two blocks share {disk:?} {dbn:?}"
        );
    }
    assert_eq!(geometry.locate(Gbn(geometry.data_blocks())), None);
    assert_eq!(geometry.gbn(geometry.parity_disk(), Dbn(0)), None);
    assert_eq!(geometry.gbn(DiskIndex(2), Dbn(37)), None);
}

#[test]
fn consecutive_blocks_chain_down_one_disk_and_a_stripe_crosses_all() {
    let geometry = RaidGroupGeometry::new(RaidType::RaidDp, 8, 1000).expect("valid");
    let (disk_a, dbn_a) = geometry.locate(Gbn(4000)).expect("inside");
    let (disk_b, dbn_b) = geometry.locate(Gbn(4001)).expect("inside");
    assert_eq!((disk_a, dbn_b.0), (disk_b, dbn_a.0 + 1));
    let stripe: Vec<(DiskIndex, Dbn)> = geometry
        .stripe_gbns(Dbn(7))
        .map(|gbn| geometry.locate(gbn).expect("inside"))
        .collect();
    assert_eq!(stripe.len(), 6);
    assert!(stripe.iter().all(|&(_, dbn)| dbn == Dbn(7)));
}

#[test]
fn adding_a_data_disk_keeps_every_existing_block_where_it_was() {
    let small = RaidGroupGeometry::new(RaidType::RaidDp, 4, 50).expect("valid");
    let grown = small.with_added_data_disk().expect("room to grow");
    assert_eq!(grown.data_disks(), small.data_disks() + 1);
    for gbn in 0..small.data_blocks() {
        assert_eq!(small.locate(Gbn(gbn)), grown.locate(Gbn(gbn)));
    }
    let full = RaidGroupGeometry::new(RaidType::RaidDp, 28, 50).expect("valid");
    assert!(full.with_added_data_disk().is_err());
}
