//! A node of several aggregates over one NVLog: acknowledged writes to every
//! aggregate survive crashes, each aggregate replays its own records only
//! (the negative control replays everyone's, and is caught), one aggregate
//! past its RAID promise fails alone, and aggregates go offline, online and
//! away while the others serve.

use wafer_core::filer::{Change, CpReason, HostRequest, Options, ReplyData, Sabotage};
use wafer_core::node::AggrState;
use wafer_core::nvlog::LunId;
use wafer_core::units::{AggrId, DiskId};
use wafer_sim::node_check::{
    self, LUN_BLOCKS, NodeCheckConfig, small_layout as layout, small_node, write,
};
use wafer_sim::node_world::NodeWorld;

fn options() -> Options {
    NodeCheckConfig::for_seed(0).options
}

fn node(aggregates: usize, options: Options, seed: u64) -> NodeWorld {
    small_node(aggregates, options, seed)
}

fn lun_on(world: &mut NodeWorld, aggregate: AggrId, name: &str) -> LunId {
    node_check::lun_on(world, aggregate, name).expect("a LUN")
}

fn read_block(world: &mut NodeWorld, lun: LunId, block: u64) -> Vec<u8> {
    node_check::read_block(world, lun, block).expect("read back")
}

/// The seeded node check of `seed` on `aggregates` aggregates.
fn run_crashes(seed: u64, aggregates: usize, options: Options) -> Result<u64, String> {
    let config = NodeCheckConfig {
        aggregates,
        options,
        ..NodeCheckConfig::for_seed(seed)
    };
    node_check::run(&config).map(|report| report.crashes)
}

#[test]
fn acknowledged_writes_to_every_aggregate_survive_crashes() {
    for seed in 0..12 {
        let aggregates = 1 + (seed % 3) as usize;
        let crashes = run_crashes(seed, aggregates, options())
            .unwrap_or_else(|e| panic!("seed {seed}, {aggregates} aggregates: {e}"));
        assert_eq!(crashes, 6);
    }
}

#[test]
fn the_shared_log_fills_and_waits_and_loses_nothing() {
    let small = Options {
        nvlog_half_bytes: 48 << 10,
        dirty_high_water: 512,
        ..options()
    };
    let mut waits = 0;
    for seed in 100..104 {
        run_crashes(seed, 3, small.clone()).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        let mut world = node(3, small.clone(), seed);
        let luns: Vec<LunId> = (0..3)
            .map(|a| lun_on(&mut world, AggrId(a), &format!("vol{a}")))
            .collect();
        let ids: Vec<u64> = (0..60)
            .map(|n| world.submit(None, write(luns[n % 3], n as u64, 7)))
            .collect();
        world.run_until_settled();
        for id in ids {
            assert_eq!(world.take_reply(id), Some(Ok(ReplyData::Done)));
        }
        waits += world.node.counters().log_waits;
        assert!(world.node.counters().log_switches > 0);
    }
    assert!(
        waits > 0,
        "60 writes of 4 KiB into 48 KiB halves never waited"
    );
}

/// Whether the node check of two aggregates, with deliberate bug `bug`,
/// fails within CI's first 12 seeds.
fn caught(bug: Sabotage) -> bool {
    let sabotaged = Options {
        sabotage: Some(bug),
        ..options()
    };
    (0..12).any(|seed| run_crashes(seed, 2, sabotaged.clone()).is_err())
}

#[test]
fn negative_control_records_replayed_into_the_wrong_aggregate_are_caught() {
    assert!(
        caught(Sabotage::ReplayForeignRecords),
        "replaying other aggregates' records went unnoticed in 12 seeds"
    );
}

#[test]
fn negative_control_a_half_reset_before_its_records_are_committed_is_caught() {
    assert!(
        caught(Sabotage::EarlyLogReset),
        "resetting halves early went unnoticed in 12 seeds"
    );
}

#[test]
fn a_node_cp_covers_every_aggregate_with_dirty_data() {
    let mut world = node(2, options(), 5);
    let a = lun_on(&mut world, AggrId(0), "vol0");
    let b = lun_on(&mut world, AggrId(1), "vol1");
    world.request(None, HostRequest::Flush).expect("flushed");
    world.request(None, write(a, 1, 1)).expect("written");
    world.request(None, write(b, 1, 2)).expect("written");
    world.run_until_settled();
    assert!(uncommitted(&world, 0) && uncommitted(&world, 1));
    assert!(!running(&world, 0) && !running(&world, 1));
    let cps = world.node.counters().cps;
    // A CP starting in aggr0 alone starts one in aggr1, which has dirty data.
    let now = world.now();
    world.node.with_aggregate(now, AggrId(0), |aggr0| {
        aggr0.start_cp_now(now, CpReason::Timer);
    });
    world.after_node_call();
    assert!(running(&world, 0) && running(&world, 1));
    assert_eq!(world.node.counters().cps, cps + 1);
    world.run_until_settled();
    assert!(!uncommitted(&world, 0) && !uncommitted(&world, 1));
    // With nothing dirty in aggr1, a CP in aggr0 leaves it alone.
    world.request(None, write(a, 2, 3)).expect("written");
    let now = world.now();
    world.node.with_aggregate(now, AggrId(0), |aggr0| {
        aggr0.start_cp_now(now, CpReason::Timer);
    });
    world.after_node_call();
    assert!(running(&world, 0) && !running(&world, 1));
}

fn uncommitted(world: &NodeWorld, id: u32) -> bool {
    let aggregate = world.node.aggregate(AggrId(id)).expect("serving");
    aggregate.has_uncommitted()
}

fn running(world: &NodeWorld, id: u32) -> bool {
    let aggregate = world.node.aggregate(AggrId(id)).expect("serving");
    aggregate.cp_running()
}

#[test]
fn an_aggregate_past_its_raid_promise_fails_alone_and_the_others_serve() {
    let mut world = node(2, options(), 9);
    let keep = lun_on(&mut world, AggrId(0), "vol0");
    let lose = lun_on(&mut world, AggrId(1), "vol1");
    for block in 0..LUN_BLOCKS {
        world
            .request(None, write(keep, block, block as u8 | 1))
            .expect("written");
        world.request(None, write(lose, block, 9)).expect("written");
    }
    world.request(None, HostRequest::Flush).expect("flushed");
    world.run_until_settled();
    // Stopped: three disks of aggr1's RAID-DP group are gone.
    for disk in [0, 2, 4] {
        world.lose_disk(AggrId(1), DiskId(disk));
    }
    world.remount();
    let states: Vec<(String, AggrState)> = world
        .aggregates()
        .into_iter()
        .map(|s| (s.name, s.state))
        .collect();
    assert_eq!(states[0], ("aggr0".into(), AggrState::Online));
    let AggrState::Failed(reason) = &states[1].1 else {
        panic!("aggr1 is {:?}", states[1]);
    };
    assert!(!reason.is_empty());
    for block in 0..LUN_BLOCKS {
        let data = read_block(&mut world, keep, block);
        assert!(data.iter().all(|&b| b == block as u8 | 1), "block {block}");
    }
    world
        .request(None, write(keep, 3, 0xee))
        .expect("aggr0 takes writes");
    assert_eq!(read_block(&mut world, keep, 3)[0], 0xee);
    let refused = world.request(None, write(lose, 0, 1));
    assert!(refused.is_err(), "a failed aggregate took a write");
    world.crash_and_remount();
    assert_eq!(read_block(&mut world, keep, 3)[0], 0xee);
}

#[test]
fn aggregates_go_offline_online_and_away_while_the_others_serve() {
    let mut world = node(2, options(), 11);
    let a = lun_on(&mut world, AggrId(0), "vol0");
    let b = lun_on(&mut world, AggrId(1), "vol1");
    world.request(None, write(b, 5, 0x55)).expect("written");
    world.offline(AggrId(1)).expect("offline");
    assert_eq!(world.aggregates()[1].state, AggrState::Offline);
    assert!(
        world.request(None, write(b, 5, 1)).is_err(),
        "offline took a write"
    );
    world
        .request(None, write(a, 5, 0xaa))
        .expect("aggr0 serves");
    // Offline commits everything: a crash now replays nothing of aggr1's.
    world.crash_and_remount();
    world.run_until_settled();
    assert_eq!(read_block(&mut world, b, 5)[0], 0x55);
    world.offline(AggrId(1)).expect("offline");
    world.online(AggrId(1)).expect("online");
    assert_eq!(world.aggregates()[1].state, AggrState::Online);
    assert_eq!(read_block(&mut world, b, 5)[0], 0x55);
    assert!(
        world.node.destroy_aggregate(AggrId(1)).is_err(),
        "destroyed online"
    );
    world.offline(AggrId(1)).expect("offline");
    world.node.destroy_aggregate(AggrId(1)).expect("destroyed");
    world.forget_aggregate(AggrId(1));
    assert_eq!(world.aggregates().len(), 1);
    assert_eq!(read_block(&mut world, a, 5)[0], 0xaa);
    let id = world.create_aggregate("aggr2", layout());
    world.run_until_settled();
    let c = lun_on(&mut world, id, "vol2");
    world.request(None, write(c, 0, 0xcc)).expect("written");
    world.crash_and_remount();
    assert_eq!(read_block(&mut world, c, 0)[0], 0xcc);
    assert_eq!(read_block(&mut world, a, 5)[0], 0xaa);
}

#[test]
fn volume_names_are_unique_across_the_node() {
    let mut world = node(2, options(), 13);
    lun_on(&mut world, AggrId(0), "vol0");
    let again = Change::CreateVolume {
        name: "vol0".into(),
        size_bytes: 24 << 20,
    };
    let reply = world.request(Some(AggrId(1)), HostRequest::Change(again));
    assert!(reply.is_err(), "a second vol0 on aggr1: {reply:?}");
}

/// `layout()` with `extra` data disks in its group, or with a second group
/// of `extra` + 2 disks.
fn grown(extra: u16, new_group: bool) -> wafer_core::aggregate::Layout {
    use wafer_raid::{RaidGroupGeometry, RaidType};
    let first = RaidGroupGeometry::new(RaidType::RaidDp, 6 + extra * u16::from(!new_group), 4096);
    let mut groups = vec![first.expect("valid")];
    if new_group {
        groups.push(RaidGroupGeometry::new(RaidType::RaidDp, 2 + extra, 4096).expect("valid"));
    }
    wafer_core::aggregate::Layout::new(groups, 0).expect("valid")
}

/// A 40 MiB volume on aggr1.
fn big_volume(world: &mut NodeWorld) -> Result<wafer_core::units::VolumeId, String> {
    let create = Change::CreateVolume {
        name: "vol_big".into(),
        size_bytes: 40 << 20,
    };
    match world.request(Some(AggrId(1)), HostRequest::Change(create)) {
        Ok(ReplyData::Volume(volume)) => Ok(volume),
        other => Err(format!("{other:?}")),
    }
}

fn free_blocks(world: &NodeWorld, id: u32) -> u64 {
    let aggregate = world.node.aggregate(AggrId(id)).expect("serving");
    aggregate.aggregate_space().available_bytes / 4096
}

#[test]
fn disks_added_to_an_aggregate_add_space_and_survive_crashes() {
    for (seed, new_group) in [(21, false), (22, true), (23, false), (24, true)] {
        let mut world = node(2, options(), seed);
        let lun = lun_on(&mut world, AggrId(1), "vol1");
        for block in 0..LUN_BLOCKS {
            world
                .request(None, write(lun, block, block as u8 | 1))
                .expect("written");
        }
        let before = free_blocks(&world, 1);
        assert!(
            big_volume(&mut world).is_err(),
            "a 40 MiB volume fit beside a 24 MiB one in 64 MiB"
        );
        world
            .add_disks(AggrId(1), grown(2, new_group))
            .expect("disks added");
        // Odd seeds crash before the CP that takes the disks has issued a
        // write: the mount finds the configured layout extending the
        // superblock's.
        if seed % 2 == 1 {
            world.crash_and_remount();
        }
        world.run_until_settled();
        let after = free_blocks(&world, 1);
        assert!(
            after >= before + 2 * 4096 - 64,
            "seed {seed}: {before} free blocks, then {after}"
        );
        assert_eq!(world.node.layout(AggrId(1)), Some(&grown(2, new_group)));
        // The new space takes a volume that did not fit before, and data.
        let volume = big_volume(&mut world).expect("room for the big volume");
        let create = Change::CreateLun {
            volume,
            name: "lun0".into(),
            size_bytes: LUN_BLOCKS * 4096,
        };
        let Ok(ReplyData::Lun(big)) = world.request(None, HostRequest::Change(create)) else {
            panic!("no LUN in the big volume");
        };
        for block in 0..LUN_BLOCKS {
            world
                .request(None, write(big, block, 0x5a))
                .expect("written");
        }
        world.crash_and_remount();
        for block in 0..LUN_BLOCKS {
            assert_eq!(read_block(&mut world, lun, block)[0], block as u8 | 1);
            assert_eq!(read_block(&mut world, big, block)[0], 0x5a);
        }
        world.node.check_invariants().expect("invariants hold");
    }
}

#[test]
fn disks_that_do_not_extend_the_aggregate_are_refused() {
    let mut world = node(1, options(), 31);
    let shrunk = {
        use wafer_raid::{RaidGroupGeometry, RaidType};
        let group = RaidGroupGeometry::new(RaidType::RaidDp, 5, 4096).expect("valid");
        wafer_core::aggregate::Layout::new(vec![group], 0).expect("valid")
    };
    let other_size = {
        use wafer_raid::{RaidGroupGeometry, RaidType};
        let group = RaidGroupGeometry::new(RaidType::RaidDp, 7, 8192).expect("valid");
        wafer_core::aggregate::Layout::new(vec![group], 0).expect("valid")
    };
    for refused in [shrunk, other_size, layout()] {
        let result = world.add_disks(AggrId(0), refused.clone());
        assert!(result.is_err(), "{refused:?} accepted");
    }
    assert_eq!(world.node.layout(AggrId(0)), Some(&layout()));
}
