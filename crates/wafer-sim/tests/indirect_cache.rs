//! Indirect blocks in the bounded buffer cache: evicted like data, read back
//! (and verified) when a request needs them, and never in the way of a
//! request that walks a whole tree.

use wafer_core::aggregate::Layout;
use wafer_core::filer::{CachePolicy, Change, HostError, HostRequest, Options, ReplyData};
use wafer_core::nvlog::LunId;
use wafer_core::units::Duration;
use wafer_raid::{RaidGroupGeometry, RaidType};
use wafer_sim::world::World;

/// Blocks the cache may hold: far fewer than the LUN's indirect blocks.
const CACHE_BLOCKS: usize = 32;
/// 24 MiB: 6144 blocks under 37 level-1 indirect blocks (170 pointers each).
const LUN_BYTES: u64 = 24 << 20;

fn world(cache_blocks: usize) -> World {
    let geometry = RaidGroupGeometry::new(RaidType::RaidDp, 6, 4096).expect("valid");
    let layout = Layout::new(vec![geometry], 1).expect("valid");
    let options = Options {
        cache_blocks,
        cp_interval: Duration::from_secs(3600),
        dirty_high_water: 512,
        nvlog_half_bytes: 8 << 20,
        ..Options::default()
    };
    let mut world = World::format(layout, options, 11);
    world.wait_online().expect("online");
    world
}

fn request(world: &mut World, request: HostRequest) -> Result<ReplyData, HostError> {
    world.request(request)
}

fn change(world: &mut World, change: Change) -> ReplyData {
    request(world, HostRequest::Change(change)).expect("change")
}

/// A space-reserved LUN `name` of `size_bytes` in `vol0` (40 MiB), which
/// the first LUN creates.
fn new_lun(world: &mut World, name: &str, size_bytes: u64) -> LunId {
    let volume = match world.filer().volumes().first() {
        Some((volume, _)) => *volume,
        None => {
            let create = Change::CreateVolume {
                name: "vol0".into(),
                size_bytes: 40 << 20,
            };
            let ReplyData::Volume(volume) = change(world, create) else {
                panic!("no volume");
            };
            volume
        }
    };
    let create = Change::CreateLun {
        volume,
        name: name.into(),
        size_bytes,
        attributes: wafer_core::format::LunAttributes::DEFAULT,
    };
    let ReplyData::Lun(lun) = change(world, create) else {
        panic!("no LUN");
    };
    lun
}

/// A volume with one LUN written whole, flushed, and its indirect blocks
/// mostly evicted; the LUN's content as the model.
fn written_lun(world: &mut World, size_bytes: u64) -> (LunId, Vec<u8>) {
    let lun = new_lun(world, "lun0", size_bytes);
    let model: Vec<u8> = (0..size_bytes).map(|i| (i * 7 + i / 4096) as u8).collect();
    for (n, chunk) in model.chunks(256 << 10).enumerate() {
        let offset = (n * (256 << 10)) as u64;
        change(
            world,
            Change::Write {
                lun,
                offset,
                data: chunk.to_vec(),
            },
        );
    }
    request(world, HostRequest::Flush).expect("flush");
    (lun, model)
}

fn read(world: &mut World, lun: LunId, offset: u64, length: u64) -> Vec<u8> {
    match request(
        world,
        HostRequest::Read {
            lun,
            offset,
            length,
        },
    ) {
        Ok(ReplyData::Data(data)) => data,
        other => panic!("{other:?}"),
    }
}

fn read_whole(world: &mut World, lun: LunId, size: u64) -> Vec<u8> {
    (0..size)
        .step_by(64 << 10)
        .flat_map(|offset| read(world, lun, offset, (64 << 10).min(size - offset)))
        .collect()
}

#[test]
fn indirect_blocks_share_the_budget_and_a_miss_costs_a_verified_read() {
    let mut world = world(CACHE_BLOCKS);
    let (lun, model) = written_lun(&mut world, LUN_BYTES);
    let usage = world.filer().cache_usage();
    assert!(
        usage.data_blocks + usage.indirect_blocks <= CACHE_BLOCKS,
        "the cache is within its budget once idle: {usage:?}"
    );
    assert!(
        usage.indirect_blocks < 37,
        "some indirect blocks left: {usage:?}"
    );
    assert!(world.filer().counters().indirect_evictions > 0);
    let resident_before = usage.indirect_blocks as u64;
    let reads_before = world.filer().counters().indirect_reads;
    let disk_reads_before: u64 = world
        .filer()
        .counters()
        .disks
        .iter()
        .map(|d| d.user_reads)
        .sum();

    assert!(
        read_whole(&mut world, lun, LUN_BYTES) == model,
        "the LUN reads back"
    );

    let counters = world.filer().counters();
    let indirect_reads = counters.indirect_reads - reads_before;
    assert!(
        indirect_reads >= 37 - resident_before,
        "every absent level-1 block was read: {indirect_reads} reads, {resident_before} resident"
    );
    let disk_reads: u64 =
        counters.disks.iter().map(|d| d.user_reads).sum::<u64>() - disk_reads_before;
    assert!(
        disk_reads >= indirect_reads,
        "indirect reads are disk reads: {disk_reads} disk reads"
    );
    let usage = world.filer().cache_usage();
    assert!(
        usage.data_blocks + usage.indirect_blocks <= CACHE_BLOCKS,
        "still within budget after reading it all: {usage:?}"
    );
    world
        .pin_indirect()
        .expect("every indirect block comes back");
    world.filer().check_invariants().expect("invariants");
}

#[test]
fn writes_under_evicted_indirect_blocks_survive_a_crash() {
    let mut world = world(CACHE_BLOCKS);
    let (lun, mut model) = written_lun(&mut world, LUN_BYTES);
    assert!(world.filer().cache_usage().indirect_blocks < 37);
    // Unaligned writes scattered over every level-1 block's range: each
    // faults its indirect block in (and reads the old data to merge).
    for n in 0..48u64 {
        let offset = n * (LUN_BYTES / 48) + 1000 + n * 13;
        let data: Vec<u8> = (0..5000u64).map(|i| (i + n) as u8 ^ 0x5a).collect();
        model[offset as usize..offset as usize + data.len()].copy_from_slice(&data);
        change(&mut world, Change::Write { lun, offset, data });
    }
    let committed = world.filer().committed_cp();
    world.crash_and_remount();
    world.wait_online().expect("remounted");
    assert!(world.filer().committed_cp() > committed, "replay ran a CP");
    assert!(
        read_whole(&mut world, lun, LUN_BYTES) == model,
        "every acknowledged write is there"
    );
    world.pin_indirect().expect("pinned");
    world.filer().check_invariants().expect("invariants");
}

#[test]
fn requests_that_walk_a_whole_tree_fault_it_in_first() {
    // 16 MiB, so that a snapshot has room for its overwrite reserve.
    let size = 16 << 20;
    let mut world = world(16);
    let (lun, model) = written_lun(&mut world, size);
    assert!(world.filer().cache_usage().indirect_blocks < 25);
    let measure = request(&mut world, HostRequest::ReallocateMeasure { lun }).expect("measure");
    assert!(
        matches!(measure, ReplyData::Measure(m) if m.rating == 1),
        "{measure:?}"
    );

    change(
        &mut world,
        Change::CreateSnapshot {
            volume: lun.volume,
            name: "s1".into(),
        },
    );
    // Evict again: the snapshot keeps its own (whole) tree.
    for offset in (0..size).step_by(1 << 20) {
        read(&mut world, lun, offset, 4096);
    }
    change(
        &mut world,
        Change::ResizeLun {
            lun,
            size_bytes: size / 2,
        },
    );
    assert!(read_whole(&mut world, lun, size / 2) == model[..model.len() / 2]);
    let snapshot = match request(
        &mut world,
        HostRequest::ReadSnapshot {
            lun,
            snapshot: "s1".into(),
            offset: size - (1 << 20),
            length: 1 << 20,
        },
    ) {
        Ok(ReplyData::Data(data)) => data,
        other => panic!("{other:?}"),
    };
    assert!(
        snapshot == model[model.len() - (1 << 20)..],
        "the snapshot keeps the tail"
    );
    change(&mut world, Change::DestroyLun { lun });
    world.pin_indirect().expect("pinned");
    world.filer().check_invariants().expect("invariants");
}

/// A volume of 20 MiB with its cache policy and an 8 MiB LUN (13 level-1
/// indirect blocks) written whole.
fn volume_with_lun(world: &mut World, name: &str, policy: CachePolicy) -> LunId {
    let ReplyData::Volume(volume) = change(
        world,
        Change::CreateVolume {
            name: name.into(),
            size_bytes: 20 << 20,
        },
    ) else {
        panic!("no volume");
    };
    change(world, Change::SetCachePolicy { volume, policy });
    let ReplyData::Lun(lun) = change(
        world,
        Change::CreateLun {
            volume,
            name: "lun".into(),
            size_bytes: 8 << 20,
            attributes: wafer_core::format::LunAttributes::DEFAULT,
        },
    ) else {
        panic!("no LUN");
    };
    for offset in (0..8u64 << 20).step_by(1 << 20) {
        let data = vec![offset as u8 + 1; 1 << 20];
        change(world, Change::Write { lun, offset, data });
    }
    lun
}

#[test]
fn a_reuse_volume_gives_up_its_indirect_blocks_before_a_keep_volume() {
    let mut world = world(24);
    let keep = volume_with_lun(&mut world, "keep", CachePolicy::Keep);
    let reuse = volume_with_lun(&mut world, "reuse", CachePolicy::Reuse);
    request(&mut world, HostRequest::Flush).expect("flush");
    let indirect_reads = |world: &World| world.filer().counters().indirect_reads;
    let before = indirect_reads(&world);
    read_whole(&mut world, keep, 8 << 20);
    let keep_reads = indirect_reads(&world) - before;
    let before = indirect_reads(&world);
    read_whole(&mut world, reuse, 8 << 20);
    let reuse_reads = indirect_reads(&world) - before;
    assert!(
        keep_reads < reuse_reads,
        "the keep volume's indirect blocks stayed: {keep_reads} reads against {reuse_reads}"
    );
}

/// A write where the LUN has no level-1 indirect block yet leaves its path
/// to the CP, down from the level-2 block: eviction must keep that block
/// however cold it is, or the CP finds it gone (seed 5 of `wafer check
/// --thin`, the first seeds whose LUNs had trees of level 2).
#[test]
fn a_write_under_a_missing_level1_block_keeps_its_level2_block_for_the_cp() {
    let mut world = world(CACHE_BLOCKS);
    let lun = new_lun(&mut world, "lun0", LUN_BYTES);
    // Written all over but for what level-1 block 30 would cover.
    let span = 170 * 4096;
    for n in (0..LUN_BYTES / span).filter(|&n| n != 30) {
        let data = vec![n as u8; span as usize];
        let offset = n * span;
        change(&mut world, Change::Write { lun, offset, data });
    }
    let other = new_lun(&mut world, "other", 8 << 20);
    let data = vec![0x33; 8 << 20];
    change(
        &mut world,
        Change::Write {
            lun: other,
            offset: 0,
            data,
        },
    );
    request(&mut world, HostRequest::Flush).expect("flush");
    let far = 30 * span + 4096;
    change(
        &mut world,
        Change::Write {
            lun,
            offset: far,
            data: vec![0x5a; 4096],
        },
    );
    let evictions = world.filer().counters().indirect_evictions;
    // Another LUN's reads push every indirect block of this one out.
    read_whole(&mut world, other, 8 << 20);
    read_whole(&mut world, other, 8 << 20);
    assert!(
        world.filer().counters().indirect_evictions > evictions,
        "the reads evicted indirect blocks"
    );
    request(&mut world, HostRequest::Flush).expect("the CP finds its path");
    assert_eq!(read(&mut world, lun, far, 4096), vec![0x5a; 4096]);
}
