//! A node of several aggregates over one NVLog, scenario by scenario: a node
//! CP covers every aggregate with dirty data, the shared log fills and waits
//! and loses nothing, one aggregate past its RAID promise fails alone, and
//! aggregates go offline, online and away, and grow, while the others serve
//! (offline and online recorded on each aggregate's own disks, so a crash
//! keeps them as they were);
//! the aggregates share one cache budget by their use of it.
//! (The seeded check runs nodes of 1 to 3 aggregates under every fault; its
//! negative controls replay records into the wrong aggregate and reset a log
//! half early, in `negative_controls.rs`.)

use wafer_core::aggregate::Layout;
use wafer_core::filer::{CacheUsage, Change, CpReason, HostRequest, Options, ReplyData};
use wafer_core::node::AggrState;
use wafer_core::nvlog::LunId;
use wafer_core::units::{AggrId, DiskId, Duration};
use wafer_raid::{RaidGroupGeometry, RaidType};
use wafer_sim::world::World;

const BLOCK: u64 = 4096;
/// Blocks of each LUN.
const LUN_BLOCKS: u64 = 256;

/// Small NVLog halves, so that they fill and switch.
fn options() -> Options {
    Options {
        nvlog_half_bytes: 256 << 10,
        dirty_high_water: 128,
        ..Options::default()
    }
}

/// An aggregate of one RAID-DP group of six disks, 16 MiB each.
fn layout() -> Layout {
    let geometry = RaidGroupGeometry::new(RaidType::RaidDp, 6, 4096).expect("valid");
    Layout::new(vec![geometry], 0).expect("valid")
}

/// A node of `aggregates` small aggregates, serving.
fn node(aggregates: usize, options: Options, seed: u64) -> World {
    let names = ["aggr0", "aggr1", "aggr2"];
    let layouts: Vec<(&str, Layout)> = names[..aggregates]
        .iter()
        .map(|name| (*name, layout()))
        .collect();
    let mut world = World::format_node(&layouts, options, seed);
    world.wait_online().expect("a formatted node serves");
    world
}

/// A volume `name` and a LUN of [`LUN_BLOCKS`] in it, on `aggregate`.
fn lun_on(world: &mut World, aggregate: AggrId, name: &str) -> LunId {
    let create = Change::CreateVolume {
        name: name.into(),
        size_bytes: 24 << 20,
    };
    let volume = match world.request_to(Some(aggregate), HostRequest::Change(create)) {
        Ok(ReplyData::Volume(volume)) => volume,
        other => panic!("volume {name} not created: {other:?}"),
    };
    let create = Change::CreateLun {
        volume,
        name: "lun0".into(),
        size_bytes: LUN_BLOCKS * BLOCK,
        attributes: wafer_core::format::LunAttributes::DEFAULT,
    };
    match world.request(HostRequest::Change(create)) {
        Ok(ReplyData::Lun(lun)) => lun,
        other => panic!("LUN in {name} not created: {other:?}"),
    }
}

/// A write of `fill` over block `block` of `lun`.
fn write(lun: LunId, block: u64, fill: u8) -> HostRequest {
    HostRequest::Change(Change::Write {
        lun,
        offset: block * BLOCK,
        data: vec![fill; BLOCK as usize],
    })
}

/// Block `block` of `lun`.
fn read_block(world: &mut World, lun: LunId, block: u64) -> Vec<u8> {
    let read = HostRequest::Read {
        lun,
        offset: block * BLOCK,
        length: BLOCK,
    };
    match world.request(read) {
        Ok(ReplyData::Data(data)) => data,
        other => panic!("read of {lun:?} block {block}: {other:?}"),
    }
}

/// Crashes the node and runs until every aggregate has mounted or failed.
fn crash(world: &mut World) {
    world.crash_and_remount();
    mounted(world);
}

/// Runs until every aggregate has mounted or failed.
fn mounted(world: &mut World) {
    while !world.node().is_online() {
        assert!(world.step(), "the mount stopped: {:?}", world.aggregates());
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
        let mut world = node(3, small.clone(), seed);
        let luns: Vec<LunId> = (0..3)
            .map(|a| lun_on(&mut world, AggrId(a), &format!("vol{a}")))
            .collect();
        let ids: Vec<_> = (0..60)
            .map(|n| world.submit(None, write(luns[n % 3], n as u64, 7)))
            .collect::<Result<_, _>>()
            .expect("taken");
        world.run_until_settled();
        for id in ids {
            assert_eq!(world.take_reply(id), Some(Ok(ReplyData::Done)));
        }
        waits += world.node().counters().log_waits;
        assert!(world.node().counters().log_switches > 0);
    }
    assert!(
        waits > 0,
        "60 writes of 4 KiB into 48 KiB halves never waited"
    );
}

#[test]
fn a_node_cp_covers_every_aggregate_with_dirty_data() {
    let mut world = node(2, options(), 5);
    let a = lun_on(&mut world, AggrId(0), "vol0");
    let b = lun_on(&mut world, AggrId(1), "vol1");
    world.request(HostRequest::Flush).expect("flushed");
    world.request(write(a, 1, 1)).expect("written");
    world.request(write(b, 1, 2)).expect("written");
    world.run_until_settled();
    assert!(uncommitted(&world, 0) && uncommitted(&world, 1));
    assert!(!running(&world, 0) && !running(&world, 1));
    let cps = world.node().counters().cps;
    // A CP starting in aggr0 alone starts one in aggr1, which has dirty data.
    let now = world.now();
    world.act(AggrId(0), |aggr0| {
        aggr0.start_cp_now(now, CpReason::Timer);
    });
    assert!(running(&world, 0) && running(&world, 1));
    assert_eq!(world.node().counters().cps, cps + 1);
    world.run_until_settled();
    assert!(!uncommitted(&world, 0) && !uncommitted(&world, 1));
    // With nothing dirty in aggr1, a CP in aggr0 leaves it alone.
    world.request(write(a, 2, 3)).expect("written");
    let now = world.now();
    world.act(AggrId(0), |aggr0| {
        aggr0.start_cp_now(now, CpReason::Timer);
    });
    assert!(running(&world, 0) && !running(&world, 1));
}

fn uncommitted(world: &World, id: u32) -> bool {
    let aggregate = world.node().aggregate(AggrId(id)).expect("serving");
    aggregate.has_uncommitted()
}

fn running(world: &World, id: u32) -> bool {
    let aggregate = world.node().aggregate(AggrId(id)).expect("serving");
    aggregate.cp_running()
}

#[test]
fn an_aggregate_past_its_raid_promise_fails_alone_and_the_others_serve() {
    let mut world = node(2, options(), 9);
    let keep = lun_on(&mut world, AggrId(0), "vol0");
    let lose = lun_on(&mut world, AggrId(1), "vol1");
    for block in 0..LUN_BLOCKS {
        world
            .request(write(keep, block, block as u8 | 1))
            .expect("written");
        world.request(write(lose, block, 9)).expect("written");
    }
    world.request(HostRequest::Flush).expect("flushed");
    world.run_until_settled();
    // Stopped: three disks of aggr1's RAID-DP group are gone.
    for disk in [0, 2, 4] {
        world.kill_disk_regardless(AggrId(1), DiskId(disk));
    }
    world.remount();
    mounted(&mut world);
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
        .request(write(keep, 3, 0xee))
        .expect("aggr0 takes writes");
    assert_eq!(read_block(&mut world, keep, 3)[0], 0xee);
    let refused = world.request(write(lose, 0, 1));
    assert!(refused.is_err(), "a failed aggregate took a write");
    crash(&mut world);
    assert_eq!(read_block(&mut world, keep, 3)[0], 0xee);
}

#[test]
fn aggregates_go_offline_online_and_away_while_the_others_serve() {
    let mut world = node(2, options(), 11);
    let a = lun_on(&mut world, AggrId(0), "vol0");
    let b = lun_on(&mut world, AggrId(1), "vol1");
    world.request(write(b, 5, 0x55)).expect("written");
    world.offline(AggrId(1)).expect("offline");
    assert_eq!(world.aggregates()[1].state, AggrState::Offline);
    assert!(
        world.request(write(b, 5, 1)).is_err(),
        "offline took a write"
    );
    world.request(write(a, 5, 0xaa)).expect("aggr0 serves");
    // Offline commits everything and is recorded on aggr1's own disks: the
    // node mounts it after a crash and it goes offline again by itself.
    crash(&mut world);
    world.run_until_settled();
    assert_eq!(world.aggregates()[1].state, AggrState::Offline);
    assert_eq!(world.aggregates()[0].state, AggrState::Online);
    world.online(AggrId(1)).expect("online");
    world.wait_online().expect("aggr1 mounts");
    assert_eq!(world.aggregates()[1].state, AggrState::Online);
    assert_eq!(read_block(&mut world, b, 5)[0], 0x55);
    // Online is recorded the same way: after a crash it serves at once.
    crash(&mut world);
    world.run_until_settled();
    assert_eq!(world.aggregates()[1].state, AggrState::Online);
    assert_eq!(read_block(&mut world, b, 5)[0], 0x55);
    assert!(
        world.destroy_aggregate(AggrId(1)).is_err(),
        "destroyed online"
    );
    world.offline(AggrId(1)).expect("offline");
    world.destroy_aggregate(AggrId(1)).expect("destroyed");
    assert_eq!(world.aggregates().len(), 1);
    assert_eq!(read_block(&mut world, a, 5)[0], 0xaa);
    let id = world.create_aggregate("aggr2", layout()).expect("created");
    world.run_until_settled();
    let c = lun_on(&mut world, id, "vol2");
    world.request(write(c, 0, 0xcc)).expect("written");
    crash(&mut world);
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
    let reply = world.request_to(Some(AggrId(1)), HostRequest::Change(again));
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
fn big_volume(world: &mut World) -> Result<wafer_core::units::VolumeId, String> {
    let create = Change::CreateVolume {
        name: "vol_big".into(),
        size_bytes: 40 << 20,
    };
    match world.request_to(Some(AggrId(1)), HostRequest::Change(create)) {
        Ok(ReplyData::Volume(volume)) => Ok(volume),
        other => Err(format!("{other:?}")),
    }
}

fn free_blocks(world: &World, id: u32) -> u64 {
    let aggregate = world.node().aggregate(AggrId(id)).expect("serving");
    aggregate.aggregate_space().available_bytes / 4096
}

#[test]
fn disks_added_to_an_aggregate_add_space_and_survive_crashes() {
    for (seed, new_group) in [(21, false), (22, true), (23, false), (24, true)] {
        let mut world = node(2, options(), seed);
        let lun = lun_on(&mut world, AggrId(1), "vol1");
        for block in 0..LUN_BLOCKS {
            world
                .request(write(lun, block, block as u8 | 1))
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
            crash(&mut world);
        }
        world.run_until_settled();
        let after = free_blocks(&world, 1);
        assert!(
            after >= before + 2 * 4096 - 64,
            "seed {seed}: {before} free blocks, then {after}"
        );
        assert_eq!(world.node().layout(AggrId(1)), Some(&grown(2, new_group)));
        // The new space takes a volume that did not fit before, and data.
        let volume = big_volume(&mut world).expect("room for the big volume");
        let create = Change::CreateLun {
            volume,
            name: "lun0".into(),
            size_bytes: LUN_BLOCKS * 4096,
            attributes: wafer_core::format::LunAttributes::DEFAULT,
        };
        let Ok(ReplyData::Lun(big)) = world.request(HostRequest::Change(create)) else {
            panic!("no LUN in the big volume");
        };
        for block in 0..LUN_BLOCKS {
            world.request(write(big, block, 0x5a)).expect("written");
        }
        crash(&mut world);
        for block in 0..LUN_BLOCKS {
            assert_eq!(read_block(&mut world, lun, block)[0], block as u8 | 1);
            assert_eq!(read_block(&mut world, big, block)[0], 0x5a);
        }
        world.node().check_invariants().expect("invariants hold");
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
    assert_eq!(world.node().layout(AggrId(0)), Some(&layout()));
}

/// The node's cache budget in [`a_node_shares_one_cache_budget_by_use`].
const BUDGET: usize = 128;

/// A small cache budget, and no timer CP in the test's time: after the
/// flush, only the reads can move the shares.
fn cache_options() -> Options {
    Options {
        cache_blocks: BUDGET,
        cp_interval: Duration::from_millis(3_600_000),
        ..options()
    }
}

fn share(world: &World, aggregate: AggrId) -> usize {
    world
        .node()
        .aggregate(aggregate)
        .expect("serving")
        .cache_share()
}

fn usage(world: &World, aggregate: AggrId) -> CacheUsage {
    world
        .node()
        .aggregate(aggregate)
        .expect("serving")
        .cache_usage()
}

fn resident(world: &World) -> usize {
    [AggrId(0), AggrId(1)]
        .iter()
        .map(|&a| {
            let usage = usage(world, a);
            usage.data_blocks + usage.indirect_blocks
        })
        .sum()
}

/// Reads the first half-budget of blocks of `lun` three times over.
fn read_much(world: &mut World, lun: LunId) {
    for _ in 0..3 {
        for block in 0..BUDGET as u64 / 2 {
            let data = read_block(world, lun, block);
            assert_eq!(data[0], block as u8);
        }
    }
}

/// Asserts that `reader` has most of the budget, and that the node keeps
/// within it.
fn assert_shares_follow(world: &World, reader: AggrId, other: AggrId) {
    let (reader_share, other_share) = (share(world, reader), share(world, other));
    assert!(
        reader_share + other_share <= BUDGET,
        "{reader_share} + {other_share}"
    );
    assert!(
        reader_share > 3 * other_share,
        "aggregate {} being read has {reader_share} blocks, the other {other_share}",
        reader.0
    );
    assert!(
        resident(world) <= BUDGET,
        "{} blocks cached over a budget of {BUDGET}",
        resident(world)
    );
}

#[test]
fn a_node_shares_one_cache_budget_by_use() {
    let mut world = node(2, cache_options(), 7);
    let first = lun_on(&mut world, AggrId(0), "first");
    let second = lun_on(&mut world, AggrId(1), "second");
    for block in 0..LUN_BLOCKS {
        for lun in [first, second] {
            let reply = world.request(write(lun, block, block as u8));
            assert!(reply.is_ok(), "write: {reply:?}");
        }
    }
    world.request(HostRequest::Flush).expect("flushed");
    assert!(
        resident(&world) <= BUDGET,
        "after writing {LUN_BLOCKS} blocks to each aggregate, {} are cached over a budget of \
         {BUDGET}",
        resident(&world)
    );
    // Reads start no CP: the shares follow them all the same.
    let cps = world.node().counters().cps;
    read_much(&mut world, second);
    assert_shares_follow(&world, AggrId(1), AggrId(0));
    read_much(&mut world, first);
    assert_shares_follow(&world, AggrId(0), AggrId(1));
    assert_eq!(world.node().counters().cps, cps, "reads started a CP");
}
