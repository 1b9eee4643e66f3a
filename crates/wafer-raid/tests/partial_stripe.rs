//! Partial-stripe writes keep parity exactly what a fresh full-stripe encode
//! gives, whichever method the planner picks, with or without failed disks; and
//! appending a zeroed data disk leaves every parity block valid.
//!
//! The executor below sees only the blocks a plan says to read (everything else
//! is poisoned), so a plan that reads too little fails here.

mod common;

use common::{Rng, random_block, random_stripe};
use proptest::prelude::*;
use wafer_raid::{
    BLOCK_SIZE, Block, DiskIndex, DiskSet, ParityDelta, ParityUpdateMethod, RaidGroupGeometry,
    RaidType,
};

const POISON: Block = [0xdb; BLOCK_SIZE];

/// Carries out one planned write on the `stored` disks, reading only what the
/// plan names and writing only what it names.
fn execute_write(
    geometry: &RaidGroupGeometry,
    stored: &mut [Block],
    failed: DiskSet,
    writes: &[(DiskIndex, Block)],
) -> ParityUpdateMethod {
    let updated = DiskSet::of(writes.iter().map(|(disk, _)| *disk));
    let plan = geometry.plan_parity_update(updated, failed);
    let mut view: Vec<Block> = (0..geometry.group_size())
        .map(|disk| match plan.reads.contains(DiskIndex(disk as u16)) {
            true => stored[disk],
            false => POISON,
        })
        .collect();
    match plan.method {
        ParityUpdateMethod::Subtraction => {
            let mut delta = ParityDelta::new(*geometry);
            for (disk, new) in writes {
                delta.add_change(*disk, &view[disk.as_usize()], new);
            }
            match &mut view[..geometry.parity_disks()] {
                [row] => delta.apply(row, None),
                [dparity, row] => delta.apply(row, Some(dparity)),
                _ => unreachable!("one or two parity disks"),
            }
        }
        ParityUpdateMethod::Addition | ParityUpdateMethod::FullStripe => {
            writes
                .iter()
                .for_each(|(disk, new)| view[disk.as_usize()] = *new);
            geometry.encode_stripe(&mut view);
        }
        ParityUpdateMethod::ReconstructFirst => {
            geometry
                .reconstruct_stripe(&mut view, failed)
                .expect("within tolerance");
            writes
                .iter()
                .for_each(|(disk, new)| view[disk.as_usize()] = *new);
            geometry.encode_stripe(&mut view);
        }
        ParityUpdateMethod::DataOnly => {}
    }
    writes
        .iter()
        .for_each(|(disk, new)| view[disk.as_usize()] = *new);
    for disk in plan.writes.iter() {
        stored[disk.as_usize()] = view[disk.as_usize()];
    }
    plan.method
}

fn any_geometry() -> impl Strategy<Value = RaidGroupGeometry> {
    prop_oneof![
        (3u16..=28).prop_map(|size| (RaidType::RaidDp, size)),
        (2u16..=14).prop_map(|size| (RaidType::Raid4, size)),
    ]
    .prop_map(|(raid_type, size)| RaidGroupGeometry::new(raid_type, size, 8).expect("valid"))
}

/// A geometry, a seed, some failed disks within tolerance, and a sequence of
/// writes, each a non-empty subset of the data disks (as bit masks).
fn scenario() -> impl Strategy<Value = (RaidGroupGeometry, u64, DiskSet, Vec<u32>)> {
    any_geometry().prop_flat_map(|geometry| {
        let disks = geometry.group_size();
        let data_mask = geometry.data_set().iter().fold(0u32, |m, d| m | 1 << d.0);
        let failed = proptest::collection::btree_set(0..disks as u16, 0..=geometry.parity_disks())
            .prop_map(|set| DiskSet::of(set.into_iter().map(DiskIndex)));
        let writes = proptest::collection::vec(
            (1u32..)
                .prop_map(move |bits| bits & data_mask)
                .prop_filter("non-empty", |m| *m != 0),
            1..12,
        );
        (Just(geometry), any::<u64>(), failed, writes)
    })
}

proptest! {
    #[test]
    fn every_write_sequence_leaves_parity_equal_to_a_fresh_encode(
        (geometry, seed, failed, write_masks) in scenario()
    ) {
        let mut rng = Rng::seeded(seed);
        let mut truth = random_stripe(&geometry, &mut rng);
        let mut stored = truth.clone();
        for disk in failed.iter() {
            stored[disk.as_usize()] = POISON;
        }
        for mask in write_masks {
            let writes: Vec<(DiskIndex, Block)> = (0..32u16)
                .filter(|d| mask & (1 << d) != 0)
                .map(|d| (DiskIndex(d), random_block(&mut rng)))
                .collect();
            execute_write(&geometry, &mut stored, failed, &writes);
            writes.iter().for_each(|(disk, new)| truth[disk.as_usize()] = *new);
            geometry.encode_stripe(&mut truth);
            for disk in geometry.all_disks().difference(failed).iter() {
                prop_assert!(stored[disk.as_usize()] == truth[disk.as_usize()], "disk {} diverged", disk.0);
            }
        }
        // The failed disks' current contents are still recoverable from parity.
        geometry.reconstruct_stripe(&mut stored, failed).expect("within tolerance");
        prop_assert!(stored == truth, "failed disks do not reconstruct to the last writes");
    }

    #[test]
    fn the_planner_picks_the_cheaper_feasible_method(
        (geometry, _seed, failed, write_masks) in scenario()
    ) {
        let updated = DiskSet::of((0..32u16).filter(|d| write_masks[0] & (1 << d) != 0).map(DiskIndex));
        let plan = geometry.plan_parity_update(updated, failed);
        prop_assert!(plan.reads.intersection(failed).is_empty(), "plan reads a failed disk");
        prop_assert!(plan.writes.intersection(failed).is_empty(), "plan writes a failed disk");
        let live_parity = geometry.parity_set().difference(failed);
        prop_assert_eq!(plan.writes, updated.union(live_parity).difference(failed));
        let untouched = geometry.data_set().difference(updated);
        let subtraction_ok = updated.intersection(failed).is_empty();
        let addition_ok = untouched.intersection(failed).is_empty();
        if subtraction_ok && addition_ok && !live_parity.is_empty() {
            let cheapest = untouched.len().min(updated.union(live_parity).len());
            prop_assert_eq!(plan.reads.len(), cheapest, "{:?} is not the cheapest", plan);
        }
    }

    #[test]
    fn a_zeroed_data_disk_joins_without_touching_parity(
        geometry in any_geometry().prop_filter("room to grow", |g| {
            g.group_size() < usize::from(*g.raid_type().group_size_limits().end())
        }),
        seed in any::<u64>(),
    ) {
        let mut stripe = random_stripe(&geometry, &mut Rng::seeded(seed));
        let grown = geometry.with_added_data_disk().expect("room to grow");
        stripe.push([0u8; BLOCK_SIZE]);
        prop_assert!(grown.scrub_stripe(&stripe).is_consistent());
        let before = stripe.clone();
        grown.encode_stripe(&mut stripe);
        prop_assert!(stripe == before, "re-encoding the grown group changed parity");
    }
}

#[test]
fn the_planner_reports_the_textbook_costs_for_an_18_plus_2_group() {
    let geometry = RaidGroupGeometry::new(RaidType::RaidDp, 20, 8).expect("valid");
    let data = |n: usize| geometry.data_disk(n);
    // One block: subtraction reads the old block and both parities (3 reads).
    let one = geometry.plan_parity_update(DiskSet::of([data(0)]), DiskSet::EMPTY);
    assert_eq!(
        (one.method, one.reads.len(), one.io_count()),
        (ParityUpdateMethod::Subtraction, 3, 6)
    );
    // Ten blocks: addition reads the eight untouched ones.
    let ten = geometry.plan_parity_update(DiskSet::of((0..10).map(data)), DiskSet::EMPTY);
    assert_eq!(
        (ten.method, ten.reads.len()),
        (ParityUpdateMethod::Addition, 8)
    );
    // Eight blocks: ten reads either way; the tie goes to addition.
    let eight = geometry.plan_parity_update(DiskSet::of((0..8).map(data)), DiskSet::EMPTY);
    assert_eq!(
        (eight.method, eight.reads.len()),
        (ParityUpdateMethod::Addition, 10)
    );
    let all = geometry.plan_parity_update(geometry.data_set(), DiskSet::EMPTY);
    assert_eq!(
        (all.method, all.reads.len()),
        (ParityUpdateMethod::FullStripe, 0)
    );
}

#[test]
fn a_write_to_a_failed_disk_beside_another_failure_reconstructs_first() {
    let geometry = RaidGroupGeometry::new(RaidType::RaidDp, 8, 8).expect("valid");
    let failed = DiskSet::of([geometry.data_disk(0), geometry.data_disk(1)]);
    let plan = geometry.plan_parity_update(DiskSet::of([geometry.data_disk(0)]), failed);
    assert_eq!(plan.method, ParityUpdateMethod::ReconstructFirst);
    assert_eq!(plan.reads, geometry.all_disks().difference(failed));
}
