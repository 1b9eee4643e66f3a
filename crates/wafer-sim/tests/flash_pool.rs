//! Flash Pool's write cache in a hybrid aggregate, scenario by scenario:
//! which writes it takes, that it survives a crash, and that the eviction
//! scanner gives blocks back to HDD without losing one.

use wafer_core::aggregate::{Layout, Tier};
use wafer_core::filer::{Change, FlashPoolStatus, HostRequest, Options, ReplyData};
use wafer_core::nvlog::LunId;
use wafer_core::units::Duration;
use wafer_raid::{RaidGroupGeometry, RaidType};
use wafer_sim::world::World;

const BLOCK: u64 = 4096;

/// A hybrid aggregate: six RAID-DP hard disks and an SSD RAID-4 group of
/// three disks of `ssd_blocks_per_disk` blocks, with a small buffer cache so
/// that reads go to disk.
fn hybrid_world(ssd_blocks_per_disk: u64) -> World {
    let hdd = RaidGroupGeometry::new(RaidType::RaidDp, 6, 4096).expect("valid");
    let ssd = RaidGroupGeometry::new(RaidType::Raid4, 3, ssd_blocks_per_disk).expect("valid");
    let layout = Layout::new(vec![hdd], 1).expect("valid");
    let layout = layout.with_group(ssd, Tier::Ssd, 1).expect("valid");
    let options = Options {
        cp_interval: Duration::from_secs(3600),
        cache_blocks: 64,
        dirty_high_water: 512,
        nvlog_half_bytes: 8 << 20,
        ..Options::default()
    };
    let mut world = World::format(layout, options, 11);
    world.wait_online().expect("online");
    world
}

fn lun(world: &mut World, size_bytes: u64) -> LunId {
    let create = Change::CreateVolume {
        name: "vol0".into(),
        size_bytes: 32 << 20,
    };
    let volume = match world.request(HostRequest::Change(create)) {
        Ok(ReplyData::Volume(v)) => v,
        other => panic!("{other:?}"),
    };
    let create = Change::CreateLun {
        volume,
        name: "lun0".into(),
        size_bytes,
        attributes: wafer_core::format::LunAttributes::DEFAULT,
    };
    match world.request(HostRequest::Change(create)) {
        Ok(ReplyData::Lun(lun)) => lun,
        other => panic!("{other:?}"),
    }
}

fn write(world: &mut World, lun: LunId, offset: u64, data: &[u8]) {
    let write = Change::Write {
        lun,
        offset,
        data: data.to_vec(),
    };
    world.request(HostRequest::Change(write)).expect("write");
}

fn read(world: &mut World, lun: LunId, offset: u64, length: u64) -> Vec<u8> {
    let read = HostRequest::Read {
        lun,
        offset,
        length,
    };
    match world.request(read) {
        Ok(ReplyData::Data(data)) => data,
        other => panic!("{other:?}"),
    }
}

fn flush(world: &mut World) {
    world.request(HostRequest::Flush).expect("flush");
}

fn status(world: &World) -> FlashPoolStatus {
    world
        .filer()
        .flash_pool_status()
        .expect("a hybrid aggregate")
}

/// The LUN's first `blocks` blocks written in order, 64 KiB at a time: first
/// writes, sequential, so HDD's. Returns the model of their content.
fn fill_sequentially(world: &mut World, lun: LunId, blocks: u64) -> Vec<u8> {
    let model: Vec<u8> = (0..blocks * BLOCK).map(|i| (i * 7 % 251) as u8).collect();
    for chunk in (0..blocks * BLOCK).step_by(64 << 10) {
        let end = (chunk + (64 << 10)).min(blocks * BLOCK);
        write(world, lun, chunk, &model[chunk as usize..end as usize]);
    }
    flush(world);
    model
}

/// Blocks 3, 10, 17, ... visited backwards: no write continues the last.
fn scattered(count: u64) -> Vec<u64> {
    (0..count).rev().map(|n| 3 + 7 * n).collect()
}

#[test]
fn small_random_overwrites_go_to_ssd_and_stay_there_across_a_crash() {
    let mut world = hybrid_world(256);
    let lun = lun(&mut world, 4 << 20);
    let mut model = fill_sequentially(&mut world, lun, 256);
    assert_eq!(
        status(&world).counters.wc_write_blks_total,
        0,
        "first writes"
    );
    let blocks = scattered(30);
    for &fbn in &blocks {
        let data = vec![fbn as u8 ^ 0x5a; BLOCK as usize];
        model[(fbn * BLOCK) as usize..((fbn + 1) * BLOCK) as usize].copy_from_slice(&data);
        write(&mut world, lun, fbn * BLOCK, &data);
    }
    flush(&mut world);
    assert_eq!(status(&world).write_cached_blocks, 30);
    assert_eq!(status(&world).counters.wc_write_blks_total, 30);
    assert_eq!(read(&mut world, lun, 0, 256 * BLOCK), model);
    world.crash_and_remount();
    world.wait_online().expect("online");
    assert_eq!(status(&world).write_cached_blocks, 30, "rebuilt at mount");
    settle_and_check(&mut world);
    assert_eq!(read(&mut world, lun, 0, 256 * BLOCK), model);
    // The same blocks rewritten sequentially, 64 KiB at a time, go to HDD.
    for chunk in (0..256 * BLOCK).step_by(64 << 10) {
        let range = chunk as usize..(chunk + (64 << 10)) as usize;
        write(&mut world, lun, chunk, &model[range]);
    }
    flush(&mut world);
    assert_eq!(status(&world).write_cached_blocks, 0);
    settle_and_check(&mut world);
    assert_eq!(read(&mut world, lun, 0, 256 * BLOCK), model);
}

#[test]
fn a_full_write_cache_destages_cold_blocks_without_losing_any() {
    // 2 data disks of 12 blocks: 24 SSD blocks, far fewer than the writes.
    let mut world = hybrid_world(12);
    let lun = lun(&mut world, 4 << 20);
    let mut model = fill_sequentially(&mut world, lun, 1024);
    // Each round overwrites 20 blocks of its own: the older rounds' cool.
    for round in 0..8u64 {
        for fbn in (0..20).rev().map(|n| 3 + 5 * (round * 20 + n)) {
            let data = vec![round as u8 ^ fbn as u8; BLOCK as usize];
            model[(fbn * BLOCK) as usize..((fbn + 1) * BLOCK) as usize].copy_from_slice(&data);
            write(&mut world, lun, fbn * BLOCK, &data);
        }
        flush(&mut world);
        settle_and_check(&mut world);
    }
    let status = status(&world);
    assert!(status.counters.scanner_passes > 0, "{status:?}");
    assert!(status.counters.evict_destage > 0, "{status:?}");
    assert!(status.ssd_used_blocks <= status.ssd_total_blocks);
    assert_eq!(read(&mut world, lun, 0, 1024 * BLOCK), model);
    world.crash_and_remount();
    world.wait_online().expect("online");
    assert_eq!(read(&mut world, lun, 0, 1024 * BLOCK), model);
}

/// Lets what the CP's end started (destages, copies' reads) finish, then
/// checks the engine's invariants.
fn settle_and_check(world: &mut World) {
    world.run_until_settled();
    world.check_invariants().expect("invariants");
}
