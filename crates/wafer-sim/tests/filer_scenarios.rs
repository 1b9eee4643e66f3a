//! Hand-written scenarios of the filer in the simulated world: the behaviours
//! the seeded check exercises at random, pinned down one at a time.

use wafer_core::aggregate::Layout;
use wafer_core::filer::{Change, HostError, HostRequest, Options, ReplyData, VolumeState};
use wafer_core::nvlog::LunId;
use wafer_core::units::{AggrId, DiskId, Duration};
use wafer_raid::{RaidGroupGeometry, RaidType};
use wafer_sim::world::World;

/// The aggregate of a world of one filer.
const A0: AggrId = AggrId(0);

fn world() -> World {
    world_with(Options::default())
}

/// The scenarios' world, on `options` but for the CP triggers.
fn world_with(options: Options) -> World {
    let geometry = RaidGroupGeometry::new(RaidType::RaidDp, 6, 4096).expect("valid");
    let layout = Layout::new(vec![geometry], 1).expect("valid");
    let options = Options {
        cp_interval: Duration::from_secs(3600), // no timer CPs unless a test wants one
        dirty_high_water: 512,
        nvlog_half_bytes: 8 << 20,
        ..options
    };
    let mut world = World::format(layout, options, 7);
    world.wait_online().expect("online");
    world
}

fn request(world: &mut World, request: HostRequest) -> Result<ReplyData, HostError> {
    world.request(request)
}

fn lun(world: &mut World, size_bytes: u64) -> LunId {
    let attributes = wafer_core::format::LunAttributes::DEFAULT;
    lun_in_new_volume(world, ("vol0", 40 << 20), ("lun0", size_bytes), attributes)
}

/// A LUN `(name, bytes)` with `attributes` in a new volume `(name, bytes)`.
fn lun_in_new_volume(
    world: &mut World,
    (volume_name, volume_bytes): (&str, u64),
    (lun_name, size_bytes): (&str, u64),
    attributes: wafer_core::format::LunAttributes,
) -> LunId {
    let create = Change::CreateVolume {
        name: volume_name.into(),
        size_bytes: volume_bytes,
    };
    let volume = match request(world, HostRequest::Change(create)) {
        Ok(ReplyData::Volume(v)) => v,
        other => panic!("{other:?}"),
    };
    let create = Change::CreateLun {
        volume,
        name: lun_name.into(),
        size_bytes,
        attributes,
    };
    match request(world, HostRequest::Change(create)) {
        Ok(ReplyData::Lun(lun)) => lun,
        other => panic!("{other:?}"),
    }
}

fn write(world: &mut World, lun: LunId, offset: u64, data: Vec<u8>) {
    request(
        world,
        HostRequest::Change(Change::Write { lun, offset, data }),
    )
    .expect("write");
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

fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| seed.wrapping_add((i * 31 % 251) as u8))
        .collect()
}

#[test]
fn unaligned_writes_read_back_and_trims_read_as_zeros() {
    let mut world = world();
    let lun = lun(&mut world, 1 << 20);
    let data = pattern(3, 10_000);
    write(&mut world, lun, 5_000, data.clone());
    request(&mut world, HostRequest::Flush).expect("flush");
    assert_eq!(read(&mut world, lun, 5_000, 10_000), data);
    request(
        &mut world,
        HostRequest::Change(Change::Trim {
            lun,
            offset: 8_192,
            length: 4_096,
        }),
    )
    .expect("trim");
    let after = read(&mut world, lun, 5_000, 10_000);
    assert!(
        after[3_192..7_288].iter().all(|&b| b == 0),
        "the trimmed block reads as zeros"
    );
    assert_eq!(after[..3_192], data[..3_192]);
    assert!(
        world.filer().counters().partial_write_reads == 0,
        "a first write to a hole reads nothing"
    );
}

#[test]
fn an_acknowledged_write_survives_a_crash_before_any_cp() {
    let mut world = world();
    let lun = lun(&mut world, 1 << 20);
    request(&mut world, HostRequest::Flush).expect("flush");
    let committed = world.filer().committed_cp();
    let data = pattern(9, 8_192);
    write(&mut world, lun, 4_096, data.clone());
    assert_eq!(
        world.filer().committed_cp(),
        committed,
        "no CP ran: the write is only in the NVLog"
    );
    world.crash_and_remount();
    world.wait_online().expect("remounted");
    assert_eq!(read(&mut world, lun, 4_096, 8_192), data);
}

#[test]
fn every_block_reads_back_with_two_dead_disks() {
    let mut world = world();
    let lun = lun(&mut world, 2 << 20);
    let data = pattern(5, 2 << 20);
    write(&mut world, lun, 0, data.clone());
    request(&mut world, HostRequest::Flush).expect("flush");
    assert!(
        world.kill_disk(A0, DiskId(2)) && world.kill_disk(A0, DiskId(4)),
        "two data disks die"
    );
    world.crash_and_remount(); // drop the cache so every block comes from disk
    world.wait_online().expect("remounted degraded");
    assert_eq!(read(&mut world, lun, 0, 2 << 20), data);
    assert!(
        world.filer().counters().degraded_reads > 0,
        "blocks were rebuilt from parity"
    );
    assert!(
        !world.kill_disk(A0, DiskId(3)),
        "a third failure is beyond RAID-DP and is not injected"
    );
}

#[test]
fn bad_requests_get_clear_errors_and_change_nothing() {
    let mut world = world();
    let lun = lun(&mut world, 1 << 20);
    let past_end = request(
        &mut world,
        HostRequest::Change(Change::Write {
            lun,
            offset: (1 << 20) - 10,
            data: vec![1; 20],
        }),
    );
    assert!(
        matches!(past_end, Err(HostError::OutOfRange { .. })),
        "{past_end:?}"
    );
    let volume = lun.volume;
    let twice = request(
        &mut world,
        HostRequest::Change(Change::CreateLun {
            volume,
            name: "lun0".into(),
            size_bytes: 4096,
            attributes: wafer_core::format::LunAttributes::DEFAULT,
        }),
    );
    assert!(matches!(twice, Err(HostError::Exists(_))), "{twice:?}");
    let too_big = request(
        &mut world,
        HostRequest::Change(Change::CreateLun {
            volume,
            name: "big".into(),
            size_bytes: 1 << 40,
            attributes: wafer_core::format::LunAttributes::DEFAULT,
        }),
    );
    assert!(
        matches!(too_big, Err(HostError::NoSpace { .. })),
        "{too_big:?}"
    );
    let odd = request(
        &mut world,
        HostRequest::Change(Change::CreateLun {
            volume,
            name: "odd".into(),
            size_bytes: 1000,
            attributes: wafer_core::format::LunAttributes::DEFAULT,
        }),
    );
    assert!(matches!(odd, Err(HostError::Invalid(_))), "{odd:?}");
    let bad_name = request(
        &mut world,
        HostRequest::Change(Change::CreateVolume {
            name: "no/slash".into(),
            size_bytes: 40 << 20,
        }),
    );
    assert!(
        matches!(bad_name, Err(HostError::Invalid(_))),
        "{bad_name:?}"
    );
    assert_eq!(world.filer().luns(volume).len(), 1, "nothing was created");
    assert!(read(&mut world, lun, 0, 4096).iter().all(|&b| b == 0));
}

#[test]
fn a_resized_lun_keeps_its_head_and_drops_its_tail() {
    let mut world = world();
    let lun = lun(&mut world, 1 << 20);
    let data = pattern(1, 1 << 20);
    write(&mut world, lun, 0, data.clone());
    request(
        &mut world,
        HostRequest::Change(Change::ResizeLun {
            lun,
            size_bytes: 64 << 10,
        }),
    )
    .expect("shrink");
    request(
        &mut world,
        HostRequest::Change(Change::ResizeLun {
            lun,
            size_bytes: 1 << 20,
        }),
    )
    .expect("grow");
    request(&mut world, HostRequest::Flush).expect("flush");
    let now = read(&mut world, lun, 0, 1 << 20);
    assert_eq!(now[..64 << 10], data[..64 << 10]);
    assert!(
        now[64 << 10..].iter().all(|&b| b == 0),
        "the dropped tail comes back as zeros"
    );
    while world.step() {}
    world
        .filer()
        .check_invariants()
        .expect("maps match the trees after the resize");
}

#[test]
fn a_sequential_read_goes_out_as_chains_and_disks_count_it() {
    let mut world = world();
    let lun = lun(&mut world, 4 << 20);
    write(&mut world, lun, 0, pattern(2, 4 << 20));
    request(&mut world, HostRequest::Flush).expect("flush");
    world.crash_and_remount(); // an empty cache
    world.wait_online().expect("remounted");
    let before = world.filer().counters().clone();
    read(&mut world, lun, 0, 4 << 20);
    let after = world.filer().counters();
    let chains = after.read_chains - before.read_chains;
    let blocks = after.read_chain_blocks - before.read_chain_blocks;
    assert_eq!(blocks, 1024, "every block of the LUN was read once");
    assert!(
        blocks >= 8 * chains,
        "one CP wrote the LUN as per-disk chains: {blocks} blocks in {chains} reads"
    );
    let per_disk: u64 = after.disks.iter().map(|d| d.user_read_blocks).sum::<u64>()
        - before.disks.iter().map(|d| d.user_read_blocks).sum::<u64>();
    assert_eq!(
        per_disk, blocks,
        "the per-disk counters add up to the same blocks"
    );
    assert!(
        after
            .disks
            .iter()
            .all(|d| d.writes == 0 || d.write_time_ns > 0)
    );
}

#[test]
fn a_keep_volume_outlives_a_reuse_volume_in_the_cache() {
    use wafer_core::filer::CachePolicy;
    let geometry = RaidGroupGeometry::new(RaidType::RaidDp, 6, 8192).expect("valid");
    let layout = Layout::new(vec![geometry], 1).expect("valid");
    // Room for the keep volume's 256 blocks and the eviction batch, not for both LUNs.
    let options = Options {
        cache_blocks: 320,
        dirty_high_water: 256,
        nvlog_half_bytes: 4 << 20,
        ..Options::default()
    };
    let mut world = World::format(layout, options, 9);
    world.wait_online().expect("online");
    let mut luns = Vec::new();
    for (name, policy) in [("keep", CachePolicy::Keep), ("reuse", CachePolicy::Reuse)] {
        let volume = match request(
            &mut world,
            HostRequest::Change(Change::CreateVolume {
                name: name.into(),
                size_bytes: 20 << 20,
            }),
        ) {
            Ok(ReplyData::Volume(v)) => v,
            other => panic!("{other:?}"),
        };
        request(
            &mut world,
            HostRequest::Change(Change::SetCachePolicy { volume, policy }),
        )
        .expect("policy");
        let lun = match request(
            &mut world,
            HostRequest::Change(Change::CreateLun {
                volume,
                name: "lun".into(),
                size_bytes: 1 << 20,
                attributes: wafer_core::format::LunAttributes::DEFAULT,
            }),
        ) {
            Ok(ReplyData::Lun(lun)) => lun,
            other => panic!("{other:?}"),
        };
        write(&mut world, lun, 0, pattern(4, 1 << 20));
        luns.push(lun);
    }
    request(&mut world, HostRequest::Flush).expect("flush");
    world.crash_and_remount(); // an empty cache; the policies come back from disk
    world.wait_online().expect("remounted");
    let (keep, reuse) = (luns[0], luns[1]);
    // Read in 64 KiB pieces, as a host would, so few blocks are in flight at once.
    let read_all = |world: &mut World, lun| {
        for n in 0..16u64 {
            read(world, lun, n << 16, 1 << 16);
        }
    };
    read_all(&mut world, keep);
    read_all(&mut world, reuse); // overflows the cache
    let hits = world.filer().counters().cache_hits;
    read_all(&mut world, keep);
    assert_eq!(
        world.filer().counters().cache_hits - hits,
        256,
        "every block of the keep volume stayed cached"
    );
    let hits = world.filer().counters().cache_hits;
    read_all(&mut world, reuse);
    assert!(
        world.filer().counters().cache_hits - hits < 64,
        "the reuse volume's blocks went first"
    );
}

#[test]
fn reallocate_lays_a_randomly_written_lun_out_again() {
    let mut world = world();
    let lun = lun(&mut world, 4 << 20);
    let mut model = pattern(6, 4 << 20);
    write(&mut world, lun, 0, model.clone());
    request(&mut world, HostRequest::Flush).expect("flush");
    let measure = |world: &mut World| match request(world, HostRequest::ReallocateMeasure { lun }) {
        Ok(ReplyData::Measure(m)) => m,
        other => panic!("{other:?}"),
    };
    let sequential = measure(&mut world);
    assert!(
        sequential.rating <= 2,
        "one sequential write lies contiguously: {sequential:?}"
    );
    for n in 0..400u64 {
        let block = world.rng().below(1024);
        let data = pattern(n as u8, 4096);
        model[(block * 4096) as usize..((block + 1) * 4096) as usize].copy_from_slice(&data);
        write(&mut world, lun, block * 4096, data);
        if n % 8 == 7 {
            request(&mut world, HostRequest::Flush).expect("flush"); // a CP every few writes
        }
    }
    let aged = measure(&mut world);
    assert!(
        aged.rating >= 4,
        "random overwrites scatter the LUN: {aged:?}"
    );
    assert!(
        aged.log_line("/vol/vol0/lun0", 4)
            .ends_with("so will reallocate."),
        "{}",
        aged.log_line("/vol/vol0/lun0", 4)
    );
    request(&mut world, HostRequest::ReallocateStart { lun }).expect("start");
    while world.filer().realloc_status().is_some() {
        request(&mut world, HostRequest::Flush).expect("a CP moves the job on");
    }
    request(&mut world, HostRequest::Flush).expect("flush");
    let after = measure(&mut world);
    assert!(after.rating <= 2, "reallocated: {after:?} (was {aged:?})");
    assert_eq!(
        read(&mut world, lun, 0, 4 << 20),
        model,
        "reallocation changes no data"
    );
    while world.step() {}
    world
        .filer()
        .check_invariants()
        .expect("maps match after reallocation");
}

#[test]
fn read_realloc_rewrites_scattered_blocks_a_sequential_read_touched() {
    let mut world = world();
    let lun = lun(&mut world, 1 << 20);
    let mut model = vec![0u8; 1 << 20];
    for n in 0..256u64 {
        // Write the blocks in a scattered order, one CP every few writes.
        let block = (n * 97) % 256;
        let data = pattern(n as u8, 4096);
        model[(block * 4096) as usize..((block + 1) * 4096) as usize].copy_from_slice(&data);
        request(
            &mut world,
            HostRequest::Change(Change::Write {
                lun,
                offset: block * 4096,
                data,
            }),
        )
        .expect("write");
        if n % 4 == 3 {
            request(&mut world, HostRequest::Flush).expect("flush");
        }
    }
    let measure = |world: &mut World| match request(world, HostRequest::ReallocateMeasure { lun }) {
        Ok(ReplyData::Measure(m)) => m.rating,
        other => panic!("{other:?}"),
    };
    let scattered = measure(&mut world);
    assert!(scattered >= 4, "scattered writes rate {scattered}");
    assert_eq!(
        read(&mut world, lun, 0, 1 << 20),
        model,
        "read_realloc is off: nothing moves"
    );
    request(&mut world, HostRequest::Flush).expect("flush");
    assert_eq!(measure(&mut world), scattered);
    let volume = lun.volume;
    request(
        &mut world,
        HostRequest::Change(Change::SetReadRealloc {
            volume,
            enabled: true,
        }),
    )
    .expect("option");
    assert_eq!(read(&mut world, lun, 0, 1 << 20), model);
    request(&mut world, HostRequest::Flush).expect("flush");
    let after = measure(&mut world);
    assert!(
        after <= 2,
        "a sequential read with read_realloc on laid the LUN out again: {scattered} -> {after}"
    );
    assert_eq!(read(&mut world, lun, 0, 1 << 20), model);
}

#[test]
fn space_is_reserved_by_luns_and_returned_when_they_go() {
    let mut world = world();
    let before = world.filer().aggregate_space();
    let lun = lun(&mut world, 1 << 20);
    let volume = lun.volume;
    let aggregate = world.filer().aggregate_space();
    assert!(
        aggregate.available_bytes < before.available_bytes,
        "the volume took its footprint"
    );
    assert_eq!(
        aggregate.used_bytes + aggregate.available_bytes,
        aggregate.total_bytes
    );
    let space = world.filer().volume_space(volume).expect("volume");
    assert_eq!(
        (space.size_bytes, space.lun_reserved_bytes),
        (40 << 20, 1 << 20)
    );
    assert_eq!(space.available_bytes, (40 << 20) - (1 << 20));
    assert_eq!(space.lun_written_bytes, 0, "nothing written yet");
    write(&mut world, lun, 0, pattern(8, 1 << 20));
    request(&mut world, HostRequest::Flush).expect("flush");
    let written = world.filer().volume_space(volume).expect("volume");
    assert_eq!(written.lun_written_bytes, 1 << 20);
    assert!(
        world.filer().counters().cp_time_ns > 0,
        "CPs take time, and sysstat shows it"
    );
    assert!(
        written.metadata_bytes > 0 && written.used_bytes == 1 << 20,
        "metadata lives in the vvbn space's own room: {written:?}"
    );
    request(&mut world, HostRequest::Change(Change::DestroyLun { lun })).expect("destroy");
    request(&mut world, HostRequest::Flush).expect("flush");
    let gone = world.filer().volume_space(volume).expect("volume");
    assert_eq!(
        (
            gone.lun_reserved_bytes,
            gone.lun_written_bytes,
            gone.available_bytes
        ),
        (0, 0, 40 << 20)
    );
    while world.step() {}
    world.filer().check_invariants().expect("space adds up");
}

#[test]
fn a_lun_destroyed_under_a_read_and_created_again_keeps_reads_and_data_apart() {
    let mut world = world();
    let old = lun(&mut world, 1 << 20);
    write(&mut world, old, 0, pattern(1, 1 << 20));
    request(&mut world, HostRequest::Flush).expect("flush");
    world.crash_and_remount(); // the reads below go to disk
    world.wait_online().expect("remounted");
    let read_id = world
        .submit(
            None,
            HostRequest::Read {
                lun: old,
                offset: 0,
                length: 1 << 20,
            },
        )
        .expect("online");
    let destroy = world
        .submit(None, HostRequest::Change(Change::DestroyLun { lun: old }))
        .expect("online");
    let volume = old.volume;
    let create = HostRequest::Change(Change::CreateLun {
        volume,
        name: "again".into(),
        size_bytes: 1 << 20,
        attributes: wafer_core::format::LunAttributes::DEFAULT,
    });
    let create_id = world.submit(None, create).expect("online");
    // The new LUN gets the old one's inode number: its first block is written
    // while the old LUN's reads of the same keys are still in flight.
    let write = HostRequest::Change(Change::Write {
        lun: old,
        offset: 0,
        data: pattern(9, 4096),
    });
    let write_id = world.submit(None, write).expect("online");
    world.drain();
    let mut replies = Vec::new();
    while replies.len() < 4 {
        replies.extend(world.take_replies());
        if !world.step() {
            break;
        }
    }
    replies.extend(world.take_replies());
    let reply = |id| {
        replies
            .iter()
            .find(|r| r.id == id)
            .map(|r| r.result.clone())
    };
    assert!(
        matches!(reply(read_id), Some(Ok(ReplyData::Data(_)))),
        "the read completes: {:?}",
        reply(read_id)
    );
    assert_eq!(reply(destroy), Some(Ok(ReplyData::Done)));
    let Some(Ok(ReplyData::Lun(again))) = reply(create_id) else {
        panic!("create: {:?}", reply(create_id))
    };
    assert_eq!(again, old, "the inode number is reused");
    assert_eq!(reply(write_id), Some(Ok(ReplyData::Done)));
    // None of the old LUN's data, read back late, may land in the new LUN.
    while world.step() {}
    let now = read(&mut world, again, 0, 1 << 20);
    assert_eq!(
        now[..4096],
        pattern(9, 4096)[..],
        "the new LUN's write stands"
    );
    assert!(
        now[4096..].iter().all(|&b| b == 0),
        "the rest of a new LUN reads as zeros"
    );
}

fn snap(world: &mut World, change: Change) -> Result<ReplyData, HostError> {
    request(world, HostRequest::Change(change))
}

fn read_snapshot(world: &mut World, lun: LunId, name: &str, offset: u64, length: u64) -> Vec<u8> {
    match request(
        world,
        HostRequest::ReadSnapshot {
            lun,
            snapshot: name.into(),
            offset,
            length,
        },
    ) {
        Ok(ReplyData::Data(data)) => data,
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_snapshot_keeps_its_image_through_overwrites_crashes_and_deletion() {
    let mut world = world();
    let lun = lun(&mut world, 1 << 20);
    let volume = lun.volume;
    let a = pattern(1, 256 << 10);
    write(&mut world, lun, 0, a.clone());
    let create = |name: &str| Change::CreateSnapshot {
        volume,
        name: name.into(),
    };
    snap(&mut world, create("s1")).expect("snap create");
    let b = pattern(2, 256 << 10);
    write(&mut world, lun, 0, b.clone());
    request(&mut world, HostRequest::Flush).expect("flush");
    assert_eq!(read_snapshot(&mut world, lun, "s1", 0, 256 << 10), a);
    assert_eq!(read(&mut world, lun, 0, 256 << 10), b);
    let held = world.filer().volume_space(volume).expect("volume");
    assert!(
        held.snapshot_used_bytes >= 256 << 10,
        "the overwritten blocks are the snapshot's alone: {held:?}"
    );
    assert_eq!(
        snap(&mut world, create("s1")),
        Err(HostError::Exists("snapshot s1".into()))
    );
    world.crash_and_remount();
    world.wait_online().expect("remount");
    let listed = world.filer().snapshots(volume);
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].name, "s1");
    assert!(listed[0].exclusive_bytes >= 256 << 10);
    assert_eq!(read_snapshot(&mut world, lun, "s1", 0, 256 << 10), a);
    assert_eq!(read(&mut world, lun, 0, 256 << 10), b);
    let allocated = world.filer().aggregate_space().allocated_bytes;
    snap(
        &mut world,
        Change::DeleteSnapshot {
            volume,
            name: "s1".into(),
        },
    )
    .expect("snap delete");
    request(&mut world, HostRequest::Flush).expect("flush");
    let freed = world.filer().volume_space(volume).expect("volume");
    assert_eq!(
        (freed.snapshot_used_bytes, freed.overwrite_reserve_bytes),
        (0, 0)
    );
    assert!(
        world.filer().aggregate_space().allocated_bytes + (256 << 10) <= allocated,
        "deleting the snapshot returned its blocks to the aggregate"
    );
    assert_eq!(
        request(
            &mut world,
            HostRequest::ReadSnapshot {
                lun,
                snapshot: "s1".into(),
                offset: 0,
                length: 4096
            }
        ),
        Err(HostError::NotFound("snapshot"))
    );
    while world.step() {}
    world
        .filer()
        .check_invariants()
        .expect("maps and space add up");
}

#[test]
fn restoring_brings_back_a_lun_and_a_whole_volume() {
    let mut world = world();
    let lun = lun(&mut world, 1 << 20);
    let volume = lun.volume;
    let a = pattern(4, 1 << 20);
    write(&mut world, lun, 0, a.clone());
    snap(
        &mut world,
        Change::CreateSnapshot {
            volume,
            name: "before".into(),
        },
    )
    .expect("snap create");
    write(&mut world, lun, 4096, pattern(5, 100_000));
    snap(
        &mut world,
        Change::ResizeLun {
            lun,
            size_bytes: 512 << 10,
        },
    )
    .expect("resize");
    let held = &world.filer().snapshots(volume)[0].luns;
    assert_eq!(
        held[..],
        [(lun, "lun0".to_string(), 1 << 20)],
        "the snapshot holds the LUN at its size then"
    );
    let later = match snap(
        &mut world,
        Change::CreateLun {
            volume,
            name: "later".into(),
            size_bytes: 1 << 20,
            attributes: wafer_core::format::LunAttributes::DEFAULT,
        },
    ) {
        Ok(ReplyData::Lun(l)) => l,
        other => panic!("{other:?}"),
    };
    write(&mut world, later, 0, pattern(6, 8192));
    snap(
        &mut world,
        Change::RestoreSnapshot {
            volume,
            name: "before".into(),
            lun: Some(lun.file),
        },
    )
    .expect("restore the LUN");
    assert_eq!(
        read(&mut world, lun, 0, 1 << 20),
        a,
        "size and content as in the snapshot"
    );
    assert_eq!(
        read(&mut world, later, 0, 8192),
        pattern(6, 8192),
        "other LUNs untouched"
    );
    snap(
        &mut world,
        Change::RestoreSnapshot {
            volume,
            name: "before".into(),
            lun: None,
        },
    )
    .expect("restore the volume");
    let names: Vec<String> = world
        .filer()
        .luns(volume)
        .into_iter()
        .map(|(_, n, _)| n)
        .collect();
    assert_eq!(
        names,
        vec!["lun0".to_string()],
        "the LUN made after the snapshot is gone"
    );
    request(&mut world, HostRequest::Flush).expect("flush");
    world.crash_and_remount();
    world.wait_online().expect("remount");
    assert_eq!(read(&mut world, lun, 0, 1 << 20), a);
    write(&mut world, lun, 0, pattern(7, 4096));
    assert_eq!(
        read_snapshot(&mut world, lun, "before", 0, 4096),
        a[..4096],
        "writing the restored LUN leaves the snapshot alone"
    );
    while world.step() {}
    world
        .filer()
        .check_invariants()
        .expect("maps and space add up");
}

#[test]
fn snapshots_need_room_for_overwrites_and_a_reserve_can_be_set_aside() {
    let mut world = world();
    let lun = lun(&mut world, 24 << 20); // of a 40 MiB volume
    let volume = lun.volume;
    write(&mut world, lun, 0, pattern(8, 20 << 20));
    let refused = snap(
        &mut world,
        Change::CreateSnapshot {
            volume,
            name: "big".into(),
        },
    );
    assert!(
        matches!(refused, Err(HostError::NoSpace { .. })),
        "20 MiB written in a 24 MiB LUN needs 44 MiB with a snapshot: {refused:?}"
    );
    request(
        &mut world,
        HostRequest::Change(Change::Trim {
            lun,
            offset: 0,
            length: 16 << 20,
        }),
    )
    .expect("trim");
    snap(
        &mut world,
        Change::CreateSnapshot {
            volume,
            name: "small".into(),
        },
    )
    .expect("4 MiB written fits");
    let space = world.filer().volume_space(volume).expect("volume");
    assert!(space.overwrite_reserve_bytes >= 4 << 20, "{space:?}");
    assert_eq!(
        snap(
            &mut world,
            Change::SetSnapReserve {
                volume,
                percent: 60
            }
        ),
        Err(HostError::Invalid(
            "the snapshot reserve is at most 50%".into()
        ))
    );
    snap(
        &mut world,
        Change::SetSnapReserve {
            volume,
            percent: 20,
        },
    )
    .expect("20% reserve");
    let reserved = world.filer().volume_space(volume).expect("volume");
    assert_eq!(reserved.snapshot_reserve_bytes, 8 << 20);
    assert_eq!(
        reserved.used_bytes + reserved.available_bytes,
        (40 << 20) - (8 << 20)
    );
    world.crash_and_remount();
    world.wait_online().expect("remount");
    assert_eq!(
        world
            .filer()
            .volume_space(volume)
            .expect("volume")
            .snapshot_reserve_bytes,
        8 << 20,
        "the reserve is persistent"
    );
}

#[test]
fn a_snapshot_in_the_nvlog_is_taken_again_by_replay() {
    let mut world = world();
    let lun = lun(&mut world, 1 << 20);
    let volume = lun.volume;
    request(&mut world, HostRequest::Flush).expect("flush");
    let a = pattern(9, 64 << 10);
    write(&mut world, lun, 0, a.clone());
    let id = world
        .submit(
            None,
            HostRequest::Change(Change::CreateSnapshot {
                volume,
                name: "logged".into(),
            }),
        )
        .expect("online");
    let later = world
        .submit(
            None,
            HostRequest::Change(Change::Write {
                lun,
                offset: 0,
                data: pattern(10, 4096),
            }),
        )
        .expect("online");
    world.drain();
    // Let the NVRAM take the snapshot's record, then crash before its CP can
    // commit (disk writes take far longer than NVRAM appends).
    for _ in 0..2 {
        world.step();
    }
    let replies = world.take_replies();
    assert!(
        replies.iter().all(|r| r.id != id && r.id != later),
        "neither the snapshot nor the write behind it is answered yet"
    );
    world.crash_and_remount();
    world.wait_online().expect("remount");
    assert_eq!(
        world.filer().snapshots(volume).len(),
        1,
        "replay took the snapshot"
    );
    assert!(
        read_snapshot(&mut world, lun, "logged", 0, 64 << 10) == a,
        "the snapshot holds what was acknowledged before it"
    );
    let active = read(&mut world, lun, 0, 64 << 10);
    assert!(
        active[4096..] == a[4096..]
            && (active[..4096] == a[..4096] || active[..4096] == pattern(10, 4096)[..]),
        "the write behind the snapshot happened or not, nothing else"
    );
    while world.step() {}
    world
        .filer()
        .check_invariants()
        .expect("maps and space add up");
}

/// Kills a disk, remounts so that the filer meets the failure, and returns
/// the data written before.
fn lose_a_disk_under_data(world: &mut World, lun: LunId) -> Vec<u8> {
    let data = pattern(11, 2 << 20);
    write(world, lun, 0, data.clone());
    request(world, HostRequest::Flush).expect("flush");
    assert!(world.kill_disk(A0, DiskId(2)), "a data disk dies");
    world.crash_and_remount();
    world.wait_online().expect("remounted degraded");
    data
}

/// The rebuilt disk must hold real data: with two other disks dead, reads
/// need it.
fn rebuilt_disk_carries_the_group(world: &mut World, lun: LunId, data: &[u8]) {
    assert_eq!(world.filer().rebuild_status(), None);
    assert!(world.filer().failed_disks().iter().all(|f| f.is_empty()));
    assert_eq!(world.filer().counters().rebuilds_completed, 1);
    world
        .check_parity()
        .expect("every stripe's parity is consistent");
    world.filer().check_invariants().expect("invariants hold");
    assert!(world.kill_disk(A0, DiskId(0)) && world.kill_disk(A0, DiskId(4)));
    world.crash_and_remount();
    world
        .wait_online()
        .expect("remounted with two other disks dead");
    assert!(
        read(world, lun, 0, 2 << 20) == data,
        "every byte reads back"
    );
}

#[test]
fn a_dead_disk_is_rebuilt_onto_the_spare_in_the_background() {
    let mut world = world();
    let lun = lun(&mut world, 2 << 20);
    let data = lose_a_disk_under_data(&mut world, lun);
    // Host I/O goes on while the rebuild runs.
    let overwrite = pattern(12, 64 << 10);
    write(&mut world, lun, 0, overwrite.clone());
    let mut expected = data.clone();
    expected[..64 << 10].copy_from_slice(&overwrite);
    let status = world
        .filer()
        .rebuild_status()
        .expect("a rebuild is under way");
    assert!(status.stripes_done < status.stripes_total);
    while world.step() {}
    assert!(world.filer().counters().rebuilt_blocks > 0);
    assert_eq!(
        world.filer().counters().rebuild_walks,
        1,
        "one walk of the trees named every block of the small disk, for all 16 batches"
    );
    rebuilt_disk_carries_the_group(&mut world, lun, &expected);
}

#[test]
fn a_rebuild_whose_blocks_outnumber_a_walk_walks_again_and_misses_none() {
    let mut world = world_with(Options {
        rebuild_identities_per_walk: 8,
        ..Options::default()
    });
    let lun = lun(&mut world, 2 << 20);
    let data = lose_a_disk_under_data(&mut world, lun);
    while world.step() {}
    // 2 MiB over 4 data disks puts some 128 data blocks on the dead disk,
    // besides metadata: a walk keeps 8 of them.
    let walks = world.filer().counters().rebuild_walks;
    assert!(
        (16..=64).contains(&walks),
        "each walk covered the next 8 used blocks: {walks} walks"
    );
    rebuilt_disk_carries_the_group(&mut world, lun, &data);
}

/// A stripe of a freshly written LUN in which one block on a data disk was
/// freed since (by an overwrite elsewhere) while another data disk's stays in
/// use; the freed block's disk dies, and the filer remounts, which forgets
/// what free blocks held (only pointers say). Before that, `stale` (given the
/// stripe's row parity disk and the data disk in use) names a block of the
/// stripe whose last write is lost: it holds an older, self-consistent
/// version. The rebuild onto the spare then runs to its end. Returns the
/// world, the LUN, what it must read, the stripe's row parity disk and its
/// disk in use.
fn rebuild_beside_a_lost_write(
    stale: impl FnOnce(DiskId, DiskId) -> DiskId,
) -> (World, LunId, Vec<u8>, DiskId, DiskId) {
    use wafer_raid::DiskIndex;
    let mut world = world();
    let lun = lun(&mut world, 2 << 20);
    let data = pattern(31, 2 << 20);
    write(&mut world, lun, 0, data.clone());
    request(&mut world, HostRequest::Flush).expect("flush");
    let used_before = used_blocks(&world);
    // Overwriting every third block frees one here and there, in stripes
    // whose other blocks stay in use.
    let mut expected = data;
    for block in (0..64).map(|n| n * 3 * 4096) {
        let new = pattern(32, 4096);
        write(&mut world, lun, block as u64, new.clone());
        expected[block..block + 4096].copy_from_slice(&new);
    }
    request(&mut world, HostRequest::Flush).expect("flush");
    let used = used_blocks(&world);
    let data_disk = |(disk, _): &(DiskIndex, u64)| *disk >= DiskIndex(2);
    let mut freed = used_before.difference(&used).filter(|b| data_disk(b));
    let ((dying, stripe), survivor) = freed
        .find_map(|&(dying, stripe)| {
            let beside = (used.iter()).find(|b| data_disk(b) && b.0 != dying && b.1 == stripe);
            beside.map(|&(survivor, _)| ((dying, stripe), survivor))
        })
        .expect("a stripe in use with a freed block");
    let id = |disk: u16| world.layout(A0).disk_id(0, DiskIndex(disk));
    let (row_parity, dying, survivor) = (id(1), id(dying.0), id(survivor.0));
    let stale = stale(row_parity, survivor);
    assert!(world.stale_content(A0, stale, stripe), "a lost write");
    assert!(world.kill_disk(A0, dying));
    world.crash_and_remount();
    world.wait_online().expect("remounted degraded");
    while world.step() {}
    assert_eq!(world.filer().counters().rebuilds_completed, 1);
    (world, lun, expected, row_parity, survivor)
}

/// A lost write left the row parity stale: the freed block cannot be checked
/// against a checksum, and reconstructing it from row parity makes it agree
/// with the stale row parity and not with the diagonal parity. Unless the
/// rebuild writes the diagonal parity too, the stripe is left inconsistent,
/// and once the disk holding the stale row parity dies, one more dead disk is
/// rebuilt wrong from the diagonal parity: its data is lost within RAID-DP's
/// promise (the class of seeds 100073, 810281 and 120085).
#[test]
fn a_rebuild_beside_stale_row_parity_leaves_its_stripe_consistent() {
    let (mut world, lun, expected, row_parity, survivor) =
        rebuild_beside_a_lost_write(|row_parity, _| row_parity);
    assert!(
        world.kill_disk(A0, row_parity),
        "the stale parity's disk dies"
    );
    world
        .check_parity()
        .expect("the diagonal parity agrees with the stripe it covers");
    assert!(world.kill_disk(A0, survivor), "one more disk dies");
    world.crash_and_remount();
    world.wait_online().expect("remounted with two disks dead");
    assert!(
        read(&mut world, lun, 0, 2 << 20) == expected,
        "every byte reads back"
    );
}

/// A lost write left a data block in use stale: reconstructing the freed
/// block from either parity beside it would take the stale block in, and
/// new parity computed from the result would keep the stale version for
/// good. The rebuild must see that the block in use does not match its
/// checksum and rebuild both from the two parities.
#[test]
fn a_rebuild_beside_a_stale_data_block_neither_keeps_nor_spreads_it() {
    let (mut world, lun, expected, _, _) = rebuild_beside_a_lost_write(|_, survivor| survivor);
    assert!(
        read(&mut world, lun, 0, 2 << 20) == expected,
        "every byte reads back"
    );
    world
        .check_parity()
        .expect("every stripe's parity is consistent");
}

/// Every block a pointer reaches, by (disk, stripe).
fn used_blocks(world: &World) -> std::collections::BTreeSet<(wafer_raid::DiskIndex, u64)> {
    (world.filer().reachable_blocks().into_iter())
        .map(|(ptr, _)| {
            let at = world.layout(A0).locate(ptr.pvbn).expect("inside");
            (at.disk, at.dbn.0)
        })
        .collect()
}

/// Host CPs write stripes the rebuild has not reached yet: the new disk's
/// block in each must get the identity its pointer implies (or be left to the
/// rebuild), never a free block's, or it is lost once two more disks die.
#[test]
fn host_writes_ahead_of_a_rebuild_leave_no_rebuilt_block_misnamed() {
    // A window for the whole disk, and windows of 16 blocks that the
    // scattered writes keep running past.
    for per_walk in [Options::default().rebuild_identities_per_walk, 16] {
        let mut world = world_with(Options {
            rebuild_identities_per_walk: per_walk,
            ..Options::default()
        });
        let volume = match request(
            &mut world,
            HostRequest::Change(Change::CreateVolume {
                name: "vol0".into(),
                size_bytes: 48 << 20,
            }),
        ) {
            Ok(ReplyData::Volume(v)) => v,
            other => panic!("{other:?}"),
        };
        let mut luns = Vec::new();
        for (seed, (name, mib)) in [("big", 30), ("small", 14)].into_iter().enumerate() {
            let lun = match request(
                &mut world,
                HostRequest::Change(Change::CreateLun {
                    volume,
                    name: name.into(),
                    size_bytes: mib << 20,
                    attributes: wafer_core::format::LunAttributes::DEFAULT,
                }),
            ) {
                Ok(ReplyData::Lun(lun)) => lun,
                other => panic!("{other:?}"),
            };
            let data = pattern(seed as u8 + 1, (mib << 20) as usize);
            for (n, chunk) in data.chunks(1 << 20).enumerate() {
                write(&mut world, lun, (n as u64) << 20, chunk.to_vec());
            }
            luns.push((lun, data));
        }
        request(&mut world, HostRequest::Flush).expect("flush");
        assert!(world.kill_disk(A0, DiskId(2)), "a data disk dies");
        world.crash_and_remount();
        world.wait_online().expect("remounted degraded");
        let mut rng = wafer_rng::Rng::seeded(per_walk as u64);
        let mut round = 0u8;
        while world.filer().rebuild_status().is_some() {
            round = round.checked_add(1).expect("the rebuild ends");
            for _ in 0..8 {
                let (lun, data) = &mut luns[rng.below(2) as usize];
                let block = rng.below((data.len() / 4096) as u64) as usize;
                let new = pattern(round, 4096);
                write(&mut world, *lun, (block * 4096) as u64, new.clone());
                data[block * 4096..][..4096].copy_from_slice(&new);
            }
            request(&mut world, HostRequest::Flush).expect("flush");
        }
        while world.step() {}
        assert!(world.kill_disk(A0, DiskId(0)) && world.kill_disk(A0, DiskId(4)));
        world.crash_and_remount();
        world
            .wait_online()
            .expect("remounted with two other disks dead");
        for (lun, data) in &luns {
            for (n, chunk) in data.chunks(1 << 20).enumerate() {
                assert!(
                    read(&mut world, *lun, (n as u64) << 20, 1 << 20) == chunk,
                    "{per_walk} identities per walk: MiB {n} of {lun:?} reads back"
                );
            }
        }
    }
}

#[test]
fn a_rebuild_interrupted_by_a_crash_resumes_where_it_was() {
    let mut world = world();
    let lun = lun(&mut world, 2 << 20);
    let data = lose_a_disk_under_data(&mut world, lun);
    while world
        .filer()
        .rebuild_status()
        .is_none_or(|s| s.stripes_done < 4 * wafer_core::filer::REBUILD_STRIPES_PER_CP)
    {
        assert!(world.step(), "the rebuild stopped before it was half done");
    }
    let before = world.filer().rebuild_status().expect("under way");
    world.crash_and_remount();
    world.wait_online().expect("remount mid-rebuild");
    let after = world
        .filer()
        .rebuild_status()
        .expect("the superblock recorded it");
    assert!(
        after.stripes_done >= 3 * wafer_core::filer::REBUILD_STRIPES_PER_CP
            && after.stripes_done <= before.stripes_done,
        "resumed from the last committed cursor: {before:?} then {after:?}"
    );
    while world.step() {}
    rebuilt_disk_carries_the_group(&mut world, lun, &data);
}

#[test]
fn extents_tell_data_from_holes_in_the_lun_and_its_snapshots() {
    use wafer_core::filer::Extent;
    let mut world = world();
    let lun = lun(&mut world, 1 << 20);
    write(&mut world, lun, 8192, pattern(13, 8192));
    let extent = |offset, length, data| Extent {
        offset,
        length,
        data,
    };
    let cached = world
        .filer()
        .extents(lun, None, 1000, 20_000)
        .expect("extents");
    assert_eq!(
        cached,
        vec![
            extent(1000, 7192, false),
            extent(8192, 8192, true),
            extent(16384, 4616, false)
        ],
        "a block written and not yet in a CP is data"
    );
    snap(
        &mut world,
        Change::CreateSnapshot {
            volume: lun.volume,
            name: "s".into(),
        },
    )
    .expect("snap create");
    request(
        &mut world,
        HostRequest::Change(Change::Trim {
            lun,
            offset: 8192,
            length: 4096,
        }),
    )
    .expect("trim");
    request(&mut world, HostRequest::Flush).expect("flush");
    assert_eq!(
        world
            .filer()
            .extents(lun, None, 8192, 8192)
            .expect("extents"),
        vec![extent(8192, 4096, false), extent(12288, 4096, true)]
    );
    assert_eq!(
        world
            .filer()
            .extents(lun, Some("s"), 8192, 8192)
            .expect("extents"),
        vec![extent(8192, 8192, true)],
        "the snapshot keeps the trimmed block"
    );
    assert!(matches!(
        world.filer().extents(lun, None, 1 << 20, 1),
        Err(HostError::OutOfRange { .. })
    ));
    request(&mut world, HostRequest::Change(Change::DestroyLun { lun })).expect("destroy");
    assert_eq!(
        world
            .filer()
            .extents(lun, Some("s"), 8192, 8192)
            .expect("extents"),
        vec![extent(8192, 8192, true)],
        "a snapshot's LUN destroyed since still has its extents (it is still exported)"
    );
    assert_eq!(
        world.filer().extents(lun, None, 0, 4096),
        Err(HostError::NotFound("LUN"))
    );
}

/// Where the LUN's data blocks lie: (disk in the group, stripe).
fn data_blocks_of(world: &World, lun: LunId) -> Vec<(wafer_raid::DiskIndex, u64)> {
    let mut blocks: Vec<_> = world
        .filer()
        .reachable_blocks()
        .into_iter()
        .filter(|(_, id)| id.level == 0 && id.volume == lun.volume && id.file == lun.file)
        .map(|(ptr, _)| {
            let at = world.layout(A0).locate(ptr.pvbn).expect("inside");
            (at.disk, at.dbn.0)
        })
        .collect();
    blocks.sort();
    blocks
}

/// Damages four cold blocks of a freshly written LUN, each in a stripe of its
/// own: rot in a data block (disk 2), rot in a row-parity block, an
/// unreadable data block (disk 3) and a misdirected write over a data block
/// (disk 4). Returns the data written.
fn damage_cold_blocks(world: &mut World, lun: LunId) -> Vec<u8> {
    use wafer_raid::DiskIndex;
    let data = pattern(21, 2 << 20);
    write(world, lun, 0, data.clone());
    request(world, HostRequest::Flush).expect("flush");
    let blocks = data_blocks_of(world, lun);
    let on = |disk: u16| {
        blocks
            .iter()
            .filter(move |(d, _)| *d == DiskIndex(disk))
            .map(|(_, dbn)| *dbn)
    };
    let stripes: Vec<u64> = on(5).collect();
    let rotten = on(2).nth(10).expect("data on disk 2");
    let bad_parity = stripes[30];
    let unreadable = on(3).nth(50).expect("data on disk 3");
    let misdirected = on(4).nth(70).expect("data on disk 4");
    let id = |disk: u16| world.layout(A0).disk_id(0, DiskIndex(disk));
    let (d1, d2, d3, d4) = (id(1), id(2), id(3), id(4));
    assert!(world.rot_block(A0, d2, rotten));
    assert!(world.rot_block(A0, d1, bad_parity));
    world.lose_block(A0, d3, unreadable);
    assert!(world.misdirect_block(A0, d4, misdirected + 1, misdirected));
    let distinct: std::collections::BTreeSet<u64> =
        [rotten, bad_parity, unreadable, misdirected].into();
    assert_eq!(distinct.len(), 4, "four stripes, one damaged block each");
    data
}

#[test]
fn a_scrub_repairs_damage_nobody_reads_so_two_dead_disks_lose_nothing() {
    let mut world = world();
    let lun = lun(&mut world, 2 << 20);
    let data = damage_cold_blocks(&mut world, lun);
    world
        .act(A0, |filer| filer.start_scrub())
        .expect("a filer")
        .expect("a scrub starts");
    assert_eq!(
        world.act(A0, |filer| filer.start_scrub()).expect("a filer"),
        Err(wafer_core::filer::ScrubError::Running)
    );
    world.drain();
    while world.step() {}
    let status = world.filer().scrub_status().expect("a scrub ran");
    assert!(!status.running);
    assert_eq!(status.stripes_done, status.stripes_total);
    assert_eq!(status.tally.parity_rewritten, 1, "{status:?}");
    assert_eq!(status.tally.blocks_repaired, 3, "{status:?}");
    assert_eq!(status.tally.stripes_left_alone, 0, "{status:?}");
    let walks = world.filer().counters().scrub_walks;
    assert!(
        (1..=2).contains(&walks),
        "the unreadable and the misdirected block were named by a walk: {walks}"
    );
    assert!(
        world.damaged_blocks(A0).is_empty(),
        "every damaged block rewritten"
    );
    world.check_parity().expect("parity consistent everywhere");
    world
        .check_trailers()
        .expect("every block carries its own trailer");
    world.filer().check_invariants().expect("invariants hold");
    let (d3, d4) = (
        world.layout(A0).disk_id(0, wafer_raid::DiskIndex(3)),
        world.layout(A0).disk_id(0, wafer_raid::DiskIndex(4)),
    );
    assert!(world.kill_disk(A0, d3) && world.kill_disk(A0, d4));
    world.crash_and_remount();
    world.wait_online().expect("remounts with two dead disks");
    assert!(
        read(&mut world, lun, 0, 2 << 20) == data,
        "every byte reads back"
    );
}

#[test]
fn without_a_scrub_the_same_damage_and_two_dead_disks_lose_data() {
    let mut world = world();
    let lun = lun(&mut world, 2 << 20);
    let data = damage_cold_blocks(&mut world, lun);
    let id = |world: &World, disk| world.layout(A0).disk_id(0, wafer_raid::DiskIndex(disk));
    assert!(world.kill_disk(A0, id(&world, 3)));
    let d4 = id(&world, 4);
    assert!(
        !world.kill_disk(A0, d4),
        "the world's own guard sees the damage"
    );
    world.kill_disk_regardless(A0, d4);
    let survived = remounts_with(&mut world, lun, data);
    assert!(
        !survived,
        "the damage a scrub repairs loses data without one"
    );
}

/// Whether, after a crash, the filer mounts and the first 2 MiB of `lun`
/// read back as `data`.
fn remounts_with(world: &mut World, lun: LunId, data: Vec<u8>) -> bool {
    world.crash_and_remount();
    world.wait_online().is_ok()
        && request(
            world,
            HostRequest::Read {
                lun,
                offset: 0,
                length: 2 << 20,
            },
        ) == Ok(ReplyData::Data(data))
}

/// A CP in flight when the host starts refusing writes: `refuse` picks the
/// disks. Returns the data acknowledged last, the CP committed before, and
/// the world once the flush behind the CP has gone as far as it can.
fn cp_meets_refused_writes(options: Options, refuse: &[u16]) -> (World, LunId, Vec<u8>, u64) {
    let mut world = world_with(options);
    let lun = lun(&mut world, 2 << 20);
    write(&mut world, lun, 0, pattern(1, 2 << 20));
    request(&mut world, HostRequest::Flush).expect("flush");
    let committed = world.filer().committed_cp().0;
    let newest = pattern(2, 1 << 20);
    write(&mut world, lun, 512 << 10, newest.clone());
    let disks: Vec<DiskId> = refuse
        .iter()
        .map(|d| world.layout(A0).disk_id(0, wafer_raid::DiskIndex(*d)))
        .collect();
    world.refuse_writes(A0, disks);
    world.submit(None, HostRequest::Flush).expect("online");
    world.drain();
    while world.step() {}
    let mut expected = pattern(1, 2 << 20);
    expected[512 << 10..(512 << 10) + (1 << 20)].copy_from_slice(&newest);
    (world, lun, expected, committed)
}

#[test]
fn a_full_host_takes_the_filer_offline_and_the_next_mount_loses_nothing() {
    let (mut world, lun, expected, committed) =
        cp_meets_refused_writes(Options::default(), &[0, 1, 2, 3, 4, 5]);
    let reason = world.filer().offline_reason().expect("offline").to_string();
    assert!(reason.contains("could not store a write"), "{reason}");
    assert_eq!(
        world.filer().committed_cp().0,
        committed,
        "nothing committed"
    );
    assert!(world.submit(None, HostRequest::Flush).is_err());
    world.crash_and_remount(); // the host has room again
    world.wait_online().expect("mounts");
    assert_eq!(read(&mut world, lun, 0, 2 << 20), expected);
}

#[test]
fn three_immutable_disk_files_take_the_filer_offline_and_lose_nothing() {
    let (mut world, lun, expected, committed) =
        cp_meets_refused_writes(Options::default(), &[1, 3, 5]);
    assert!(world.filer().offline_reason().is_some());
    assert_eq!(world.filer().committed_cp().0, committed);
    world.crash_and_remount();
    world.wait_online().expect("mounts");
    assert_eq!(read(&mut world, lun, 0, 2 << 20), expected);
}

#[test]
fn committing_regardless_of_refused_writes_loses_data() {
    let options = Options {
        sabotage: Some(wafer_core::filer::Sabotage::CommitRegardless),
        ..Options::default()
    };
    let (mut world, lun, expected, committed) =
        cp_meets_refused_writes(options, &[0, 1, 2, 3, 4, 5]);
    assert!(world.filer().committed_cp().0 > committed, "it committed");
    let survived = remounts_with(&mut world, lun, expected);
    assert!(!survived, "a CP committed over refused writes lost nothing");
}

#[test]
fn a_group_that_loses_three_disks_mid_cp_never_commits_it() {
    let mut world = world();
    let lun = lun(&mut world, 2 << 20);
    write(&mut world, lun, 0, pattern(1, 2 << 20));
    request(&mut world, HostRequest::Flush).expect("flush");
    let committed = world.filer().committed_cp().0;
    write(&mut world, lun, 0, pattern(2, 2 << 20));
    world.submit(None, HostRequest::Flush).expect("online");
    world.drain();
    for disk in [0, 2, 4] {
        let id = world.layout(A0).disk_id(0, wafer_raid::DiskIndex(disk));
        world.kill_disk_regardless(A0, id);
    }
    while world.step() {}
    let reason = world.filer().offline_reason().expect("offline").to_string();
    assert!(reason.contains("lost 3 disks"), "{reason}");
    assert_eq!(
        world.filer().committed_cp().0,
        committed,
        "nothing committed"
    );
}

/// A lost write of content equal to what the block held leaves the old
/// trailer (seed 51574: an indirect block of zeros over a never-written
/// block). The data matches the filer's last write, but the block fails any
/// read's identity check: the scrub must count it damaged and rewrite it.
#[test]
fn a_scrub_rewrites_a_block_a_lost_write_left_with_a_stale_trailer() {
    use wafer_raid::DiskIndex;
    let mut world = world();
    let lun = lun(&mut world, 2 << 20);
    write(&mut world, lun, 0, pattern(5, 2 << 20));
    request(&mut world, HostRequest::Flush).expect("flush");
    let (disk, dbn) = data_blocks_of(&world, lun)
        .into_iter()
        .find(|(d, _)| *d == DiskIndex(3))
        .expect("data on disk 3");
    let id = world.layout(A0).disk_id(0, disk);
    assert!(world.stale_trailer(A0, id, dbn));
    world
        .act(A0, |filer| filer.start_scrub())
        .expect("a filer")
        .expect("a scrub starts");
    world.drain();
    while world.step() {}
    let status = world.filer().scrub_status().expect("a scrub ran");
    assert_eq!(status.tally.blocks_repaired, 1, "{status:?}");
    world.check_trailers().expect("the trailer is whole again");
}

/// Seed 100530: a CP torn by a crash wrote a block as one file's, the redo
/// after replay wrote the same content there under another identity, and that
/// write was lost. Content and parity are right, only the trailer is stale:
/// reads through the pointer refuse it, and so must the scrub. Gives a cold
/// data block such a trailer (after a remount if `remount`, when the filer
/// knows its blocks only from their pointers), scrubs, and returns what the
/// scrub did and whether every trailer is whole after it.
fn scrub_a_stale_identity(options: Options, remount: bool) -> (u64, Result<(), String>) {
    use wafer_raid::DiskIndex;
    let mut world = world_with(options);
    let lun = lun(&mut world, 2 << 20);
    write(&mut world, lun, 0, pattern(9, 2 << 20));
    request(&mut world, HostRequest::Flush).expect("flush");
    if remount {
        world.crash_and_remount();
        world.wait_online().expect("remounts");
    }
    let (disk, dbn) = data_blocks_of(&world, lun)
        .into_iter()
        .find(|(d, _)| *d == DiskIndex(2))
        .expect("data on disk 2");
    let id = world.layout(A0).disk_id(0, disk);
    assert!(world.stale_identity(A0, id, dbn));
    assert!(world.check_trailers().is_err(), "the identity is stale");
    world.check_parity().expect("content and parity are right");
    world
        .act(A0, |filer| filer.start_scrub())
        .expect("a filer")
        .expect("a scrub starts");
    world.drain();
    while world.step() {}
    let status = world.filer().scrub_status().expect("a scrub ran");
    assert!(!status.running, "{status:?}");
    (status.tally.blocks_repaired, world.check_trailers())
}

#[test]
fn a_scrub_rewrites_the_right_content_under_a_stale_identity() {
    for remount in [false, true] {
        let (repaired, trailers) = scrub_a_stale_identity(Options::default(), remount);
        assert_eq!(repaired, 1, "remounted first: {remount}");
        trailers.expect("the block carries its pointer's identity again");
    }
}

#[test]
fn a_scrub_that_checks_content_alone_leaves_a_stale_identity() {
    let options = Options {
        sabotage: Some(wafer_core::filer::Sabotage::ScrubTrustsStaleIdentity),
        ..Options::default()
    };
    for remount in [false, true] {
        let (repaired, trailers) = scrub_a_stale_identity(options.clone(), remount);
        assert_eq!(repaired, 0, "remounted first: {remount}");
        assert!(trailers.is_err(), "the stale identity went unseen");
    }
}

/// A refused write cuts its stripe short: the CP's other writes to it may
/// land, so its parity covers neither the old nor the new content (the write
/// hole, which the mount's resync closes from what is on the disks). A block
/// of a dead disk lives only in that parity, so two dead disks and a write
/// hole in one stripe are three faults, beyond RAID-DP (seed 40120 lost a
/// snapshot's block so). As at a crash, the world lands such writes whole:
/// refused or not, the filer loses nothing of a doubly degraded group.
#[test]
fn a_host_refusal_never_cuts_short_a_stripe_of_a_doubly_degraded_group() {
    // A small group, so that CPs come back to stripes earlier CPs left
    // partly used.
    let geometry = RaidGroupGeometry::new(RaidType::RaidDp, 6, 2560).expect("valid");
    let layout = Layout::new(vec![geometry], 1).expect("valid");
    let options = Options {
        cp_interval: Duration::from_secs(3600),
        dirty_high_water: 512,
        nvlog_half_bytes: 8 << 20,
        ..Options::default()
    };
    let mut world = World::format(layout, options, 7);
    world.wait_online().expect("online");
    let volume = match request(
        &mut world,
        HostRequest::Change(Change::CreateVolume {
            name: "vol0".into(),
            size_bytes: 20 << 20,
        }),
    ) {
        Ok(ReplyData::Volume(v)) => v,
        other => panic!("{other:?}"),
    };
    let lun = match request(
        &mut world,
        HostRequest::Change(Change::CreateLun {
            volume,
            name: "lun0".into(),
            size_bytes: 256 << 10,
            attributes: wafer_core::format::LunAttributes::DEFAULT,
        }),
    ) {
        Ok(ReplyData::Lun(lun)) => lun,
        other => panic!("{other:?}"),
    };
    let mut expected = vec![0u8; 256 << 10];
    let mut lost = 0;
    // Small CPs each fill part of a stripe: later ones write beside them.
    for n in 0..200u32 {
        if n == 20 {
            assert!(
                world.kill_disk(A0, DiskId(2)) && world.kill_disk(A0, DiskId(4)),
                "two data disks die"
            );
            world.refuse_writes(A0, [DiskId(3)]);
        }
        let offset = (n as usize * 7 % 64) * 4096;
        let data = pattern(n as u8, 4096);
        expected[offset..offset + data.len()].copy_from_slice(&data);
        write(&mut world, lun, offset as u64, data);
        world.submit(None, HostRequest::Flush).expect("online");
        world.drain();
        while world.step() {}
        if world.filer().offline_reason().is_some() {
            // The host has room again, until the next write.
            lost += world.filer().counters().unrecoverable_blocks;
            world.crash_and_remount();
            world.wait_online().expect("mounts");
            world.refuse_writes(A0, [DiskId(3)]);
        }
    }
    lost += world.filer().counters().unrecoverable_blocks;
    assert_eq!(lost, 0, "a stripe of the degraded group was cut short");
    world.crash_and_remount(); // drop the cache so every block comes from disk
    world.wait_online().expect("remounted degraded");
    assert_eq!(read(&mut world, lun, 0, 256 << 10), expected);
}

fn take_offline(world: &mut World, volume: wafer_core::units::VolumeId) {
    let offline = Change::SetVolumeOnline {
        volume,
        online: false,
    };
    snap(world, offline).expect("vol offline");
}

fn flush(world: &mut World) {
    request(world, HostRequest::Flush).expect("flush");
}

#[test]
fn an_offline_volume_serves_nothing_stays_offline_and_comes_back_whole() {
    let mut world = world();
    let lun = lun(&mut world, 8 << 20);
    write(&mut world, lun, 0, vec![0x5a; 8192]);
    let offline = Change::SetVolumeOnline {
        volume: lun.volume,
        online: false,
    };
    snap(&mut world, offline).expect("vol offline");
    let refused = request(
        &mut world,
        HostRequest::Read {
            lun,
            offset: 0,
            length: 4096,
        },
    );
    assert_eq!(refused, Err(HostError::Offline("vol0".into())));
    let write_refused = request(
        &mut world,
        HostRequest::Change(Change::Write {
            lun,
            offset: 0,
            data: vec![1; 4096],
        }),
    );
    assert_eq!(write_refused, Err(HostError::Offline("vol0".into())));
    world.crash_and_remount();
    world.wait_online().expect("remount");
    let state = world.filer().volume_state(lun.volume);
    assert_eq!(state, Some(VolumeState::Offline), "offline is persistent");
    let online = Change::SetVolumeOnline {
        volume: lun.volume,
        online: true,
    };
    snap(&mut world, online).expect("vol online");
    assert_eq!(read(&mut world, lun, 0, 8192), vec![0x5a; 8192]);
}

#[test]
fn a_destroyed_volume_gives_back_every_block_and_its_name() {
    let mut world = world();
    let before = world.filer().aggregate_space();
    let lun = lun(&mut world, 8 << 20);
    write(&mut world, lun, 0, vec![0xa5; 4 << 20]);
    let snapshot = Change::CreateSnapshot {
        volume: lun.volume,
        name: "s1".into(),
    };
    snap(&mut world, snapshot).expect("snapshot");
    write(&mut world, lun, 0, vec![0x3c; 2 << 20]);
    flush(&mut world);
    let full = world.filer().aggregate_space();
    assert!(full.allocated_bytes >= before.allocated_bytes + (6 << 20));
    let destroy = Change::DestroyVolume { volume: lun.volume };
    let refused = snap(&mut world, destroy.clone());
    assert!(
        matches!(&refused, Err(HostError::Invalid(why)) if why.contains("offline")),
        "an online volume is not destroyed: {refused:?}"
    );
    let offline = Change::SetVolumeOnline {
        volume: lun.volume,
        online: false,
    };
    snap(&mut world, offline).expect("vol offline");
    snap(&mut world, destroy).expect("vol destroy");
    assert!(
        world.filer().volumes().is_empty(),
        "gone at once from the list"
    );
    // Two CPs: the first drops the record, the next may reuse its blocks.
    flush(&mut world);
    flush(&mut world);
    while world.step() {}
    world.check_invariants().expect("no block leaked");
    let after = world.filer().aggregate_space();
    assert_eq!(after.available_bytes, before.available_bytes);
    assert!(
        after.allocated_bytes <= before.allocated_bytes + (64 << 10),
        "{} bytes allocated before, {} after",
        before.allocated_bytes,
        after.allocated_bytes
    );
    world.crash_and_remount();
    world.wait_online().expect("remount");
    assert!(world.filer().volumes().is_empty(), "destroyed for good");
    lun_named(&mut world, "vol0");
}

#[test]
fn a_destroy_replayed_after_a_crash_still_frees_the_volume() {
    let mut world = world();
    let lun = lun(&mut world, 4 << 20);
    write(&mut world, lun, 0, vec![7; 1 << 20]);
    flush(&mut world);
    let volume = lun.volume;
    take_offline(&mut world, volume);
    snap(&mut world, Change::DestroyVolume { volume }).expect("destroy");
    world.crash_and_remount();
    world.wait_online().expect("remount");
    assert!(
        world.filer().volumes().is_empty(),
        "the logged destroy is replayed"
    );
    flush(&mut world);
    flush(&mut world);
    while world.step() {}
    world.check_invariants().expect("no block leaked");
    world.crash_and_remount();
    world.wait_online().expect("remount");
    assert_eq!(world.filer().volume_state(volume), None);
}

/// A volume called `name` with a LUN, made in place of one destroyed.
fn lun_named(world: &mut World, name: &str) {
    let created = request(
        world,
        HostRequest::Change(Change::CreateVolume {
            name: name.into(),
            size_bytes: 40 << 20,
        }),
    );
    assert!(matches!(created, Ok(ReplyData::Volume(_))), "{created:?}");
}

#[test]
fn a_volume_grown_holds_more_than_it_could_and_keeps_it_across_a_crash() {
    let geometry = RaidGroupGeometry::new(RaidType::RaidDp, 8, 8192).expect("valid");
    let layout = Layout::new(vec![geometry], 1).expect("valid");
    let options = Options {
        cp_interval: Duration::from_secs(3600),
        dirty_high_water: 512,
        nvlog_half_bytes: 8 << 20,
        ..Options::default()
    };
    let mut world = World::format(layout, options, 7);
    world.wait_online().expect("online");
    let lun = lun(&mut world, 32 << 20);
    let volume = lun.volume;
    let too_big = Change::CreateLun {
        volume,
        name: "big".into(),
        size_bytes: 64 << 20,
        attributes: wafer_core::format::LunAttributes::DEFAULT,
    };
    let refused = snap(&mut world, too_big.clone());
    assert!(
        matches!(refused, Err(HostError::NoSpace { .. })),
        "{refused:?}"
    );
    let grow = Change::ResizeVolume {
        volume,
        size_bytes: 100 << 20,
    };
    snap(&mut world, grow).expect("vol size grows");
    let big = match snap(&mut world, too_big) {
        Ok(ReplyData::Lun(big)) => big,
        other => panic!("a grown volume takes the LUN: {other:?}"),
    };
    // 96 MiB written: more vvbns than the 40 MiB volume had in all.
    for (lun, mibs) in [(lun, 32u8), (big, 64)] {
        for mib in 0..mibs {
            write(&mut world, lun, u64::from(mib) << 20, vec![mib; 1 << 20]);
        }
    }
    flush(&mut world);
    world.crash_and_remount();
    world.wait_online().expect("remount");
    for mib in [0u8, 31, 63] {
        assert_eq!(
            read(&mut world, big, u64::from(mib) << 20, 4096),
            vec![mib; 4096]
        );
    }
    assert_eq!(read(&mut world, lun, 31 << 20, 4096), vec![31; 4096]);
    while world.step() {}
    world.filer().check_invariants().expect("maps grown whole");
    let shrink = Change::ResizeVolume {
        volume,
        size_bytes: 64 << 20,
    };
    let refused = snap(&mut world, shrink);
    assert!(
        matches!(refused, Err(HostError::NoSpace { .. })),
        "96 MiB of LUNs do not fit 64 MiB: {refused:?}"
    );
    let size = world
        .filer()
        .volume_space(volume)
        .expect("volume")
        .size_bytes;
    assert_eq!(size, 100 << 20);
}

#[test]
fn a_volume_created_while_a_destroying_cp_runs_keeps_its_id_across_a_crash() {
    created_while_a_destroying_cp_runs(false);
}

#[test]
fn a_volume_created_before_a_destroying_cp_commits_keeps_its_id_across_a_crash() {
    created_while_a_destroying_cp_runs(true);
}

/// A volume is destroyed, and another created while the CP that takes the
/// old one out runs; a crash comes before that CP commits (seed 800280:
/// replay gave the new volume another id, or none) or after (seed 820121:
/// the first run had held the old id back until the commit, replay did not).
fn created_while_a_destroying_cp_runs(commit_first: bool) {
    let mut world = world();
    let old = lun(&mut world, 4 << 20);
    write(&mut world, old, 0, vec![3; 65536]);
    let volume = old.volume;
    take_offline(&mut world, volume);
    snap(&mut world, Change::DestroyVolume { volume }).expect("destroy");
    let flush = world.submit(None, HostRequest::Flush).expect("flush");
    while !world.filer().cp_running() {
        assert!(world.step(), "a CP starts");
    }
    let create = HostRequest::Change(Change::CreateVolume {
        name: "vol0".into(),
        size_bytes: 40 << 20,
    });
    let created = world.submit(None, create).expect("create");
    let new = loop {
        if let Some(reply) = world.take_reply(created) {
            break match reply {
                Ok(ReplyData::Volume(v)) => v,
                other => panic!("{other:?}"),
            };
        }
        assert!(world.step(), "the create is answered");
    };
    assert!(
        world.filer().cp_running(),
        "the destroying CP has not committed"
    );
    if commit_first {
        while world.take_reply(flush).is_none() {
            assert!(world.step(), "the destroying CP commits");
        }
    }
    world.crash_and_remount();
    world.wait_online().expect("remount");
    let volumes = world.filer().volumes();
    assert_eq!(
        volumes,
        vec![(new, "vol0".to_string())],
        "the new volume, at its id"
    );
    flush_all(&mut world);
    let volumes = world.filer().volumes();
    assert_eq!(volumes, vec![(new, "vol0".to_string())]);
}

fn flush_all(world: &mut World) {
    flush(world);
    flush(world);
    while world.step() {}
    world.filer().check_invariants().expect("no block leaked");
}

/// The names of `volume`'s snapshots, oldest first, with what each holds
/// of `lun`'s first `len` bytes.
fn snapshot_contents(world: &mut World, lun: LunId, len: u64) -> Vec<(String, Vec<u8>)> {
    let names: Vec<String> = world
        .filer()
        .snapshots(lun.volume)
        .into_iter()
        .map(|s| s.name)
        .collect();
    names
        .into_iter()
        .map(|name| {
            let data = read_snapshot(world, lun, &name, 0, len);
            (name, data)
        })
        .collect()
}

#[test]
fn scheduled_snapshots_rotate_their_names_and_the_rotation_survives_a_crash() {
    use wafer_core::schedule::{SnapKind, SnapSchedule};
    use wafer_core::units::Instant;
    let mut world = world();
    let lun = lun(&mut world, 1 << 20);
    let volume = lun.volume;
    let hour = 3_600_000_000_000;
    assert!(
        world
            .filer()
            .snapshots_due(Instant(0), Instant(hour))
            .is_empty()
    );
    let schedule = SnapSchedule::parse("0", "0", "2@1").expect("valid");
    snap(&mut world, Change::SetSnapSchedule { volume, schedule }).expect("snap sched");
    assert!(
        world
            .filer()
            .snapshots_due(Instant(0), Instant(hour - 1))
            .is_empty(),
        "nothing before 01:00"
    );
    let due = world.filer().snapshots_due(Instant(0), Instant(hour));
    let take = Change::ScheduledSnapshot {
        volume,
        kind: SnapKind::Hourly,
        keep: 2,
    };
    assert_eq!(due, std::slice::from_ref(&take));
    assert_eq!(
        world.filer().next_snapshot_due(Instant(0)),
        Some(Instant(hour))
    );
    let (a, b, c) = (pattern(1, 8192), pattern(2, 8192), pattern(3, 8192));
    write(&mut world, lun, 0, a.clone());
    snap(&mut world, take.clone()).expect("first hourly");
    write(&mut world, lun, 0, b.clone());
    snap(&mut world, take.clone()).expect("second hourly");
    assert_eq!(
        snapshot_contents(&mut world, lun, 8192),
        [
            ("hourly.1".to_string(), a.clone()),
            ("hourly.0".to_string(), b.clone())
        ]
    );
    // The third is logged, then the node crashes before its CP commits
    // (as in the replay scenario above): replay rotates and takes it again.
    write(&mut world, lun, 0, c.clone());
    world
        .submit(None, HostRequest::Change(take.clone()))
        .expect("online");
    world.drain();
    for _ in 0..2 {
        world.step();
    }
    world.crash_and_remount();
    world.wait_online().expect("remount");
    assert_eq!(
        snapshot_contents(&mut world, lun, 8192),
        [("hourly.1".to_string(), b), ("hourly.0".to_string(), c)],
        "hourly.1 (a) went, hourly.0 (b) became hourly.1, the new one is hourly.0"
    );
    let settings = world.filer().volume_settings(volume).expect("volume");
    assert_eq!(settings.snap_schedule, schedule, "the schedule is on disk");
    assert!(matches!(
        snap(
            &mut world,
            Change::ScheduledSnapshot {
                volume,
                kind: SnapKind::Nightly,
                keep: 0
            }
        ),
        Err(HostError::Invalid(_))
    ));
    take_offline(&mut world, volume);
    assert!(
        world
            .filer()
            .snapshots_due(Instant(0), Instant(hour))
            .is_empty(),
        "an offline volume takes no scheduled snapshot"
    );
    while world.step() {}
    world
        .filer()
        .check_invariants()
        .expect("maps and space add up");
}

/// A thin LUN (`-o noreserve`) of `size_bytes` in a new volume of
/// `volume_bytes`, next to nothing else.
fn thin_lun(world: &mut World, volume_bytes: u64, size_bytes: u64) -> LunId {
    let attributes = wafer_core::format::LunAttributes {
        space_reserved: false,
        ostype: wafer_core::format::OsType::Linux,
    };
    let volume = ("thinvol", volume_bytes);
    lun_in_new_volume(world, volume, ("thin", size_bytes), attributes)
}

#[test]
fn a_thin_lun_takes_space_as_written_and_a_full_volume_refuses_new_blocks_only() {
    let mut world = world();
    // 40 MiB of LUN in a 20 MiB volume: creating it takes nothing.
    let lun = thin_lun(&mut world, 20 << 20, 40 << 20);
    let volume = lun.volume;
    let space = world.filer().volume_space(volume).expect("a volume");
    assert_eq!(
        (space.lun_reserved_bytes, space.used_bytes),
        (0, 0),
        "{space:?}"
    );
    let (attributes, occupied) = world.filer().lun_details(lun).expect("a LUN");
    assert!(!attributes.space_reserved && occupied == 0);

    // Fill it a MiB at a time until the volume refuses.
    let mut written = 0u64;
    let refused = loop {
        let data = pattern((written >> 20) as u8, 1 << 20);
        let change = Change::Write {
            lun,
            offset: written,
            data,
        };
        match request(&mut world, HostRequest::Change(change)) {
            Ok(_) => written += 1 << 20,
            Err(error) => break error,
        }
        assert!(written < 40 << 20, "a 40 MiB LUN filled a 20 MiB volume");
    };
    assert!(matches!(refused, HostError::NoSpace { .. }), "{refused:?}");
    assert!(written >= 16 << 20, "only {written} bytes went in");
    // The refused write changed nothing: its range still reads as zeros.
    assert_eq!(
        read(&mut world, lun, written, 1 << 20),
        vec![0; 1 << 20],
        "a refused write left data behind"
    );
    // Overwriting what is there needs no new block, so it still works.
    write(&mut world, lun, 0, pattern(99, 1 << 20));
    request(&mut world, HostRequest::Flush).expect("flush");
    let space = world.filer().volume_space(volume).expect("a volume");
    assert!(space.fits(), "{space:?}");
    assert_eq!(space.thin_lun_bytes, written, "{space:?}");

    // A crash loses none of the acknowledged writes.
    world.crash_and_remount();
    world.wait_online().expect("remounted");
    assert_eq!(read(&mut world, lun, 0, 1 << 20), pattern(99, 1 << 20));
    assert_eq!(read(&mut world, lun, 1 << 20, 1 << 20), pattern(1, 1 << 20));

    // Trimming gives blocks back, and the volume takes writes again.
    let trim = Change::Trim {
        lun,
        offset: 0,
        length: 1 << 20,
    };
    request(&mut world, HostRequest::Change(trim)).expect("trim");
    write(&mut world, lun, written, pattern(7, 1 << 20));
    assert_eq!(read(&mut world, lun, written, 1 << 20), pattern(7, 1 << 20));
}

#[test]
fn a_space_reserved_lun_cannot_use_what_a_thin_lun_holds() {
    let mut world = world();
    let thin = thin_lun(&mut world, 20 << 20, 40 << 20);
    // A space-reserved LUN leaves 2 MiB for the thin one.
    let available = (world.filer().volume_space(thin.volume))
        .expect("a volume")
        .available_bytes;
    let ballast = Change::CreateLun {
        volume: thin.volume,
        name: "ballast".into(),
        size_bytes: available - (2 << 20),
        attributes: wafer_core::format::LunAttributes::DEFAULT,
    };
    request(&mut world, HostRequest::Change(ballast)).expect("ballast");
    // 1.5 MiB written stay dirty (under the high water, no CP timer), yet
    // count: the 1 MiB a new reservation needs is not there.
    let committed = world.filer().committed_cp();
    write(&mut world, thin, 0, pattern(3, 3 << 19));
    assert_eq!(world.filer().committed_cp(), committed, "no CP ran");
    let reserved = Change::CreateLun {
        volume: thin.volume,
        name: "thick".into(),
        size_bytes: 1 << 20,
        attributes: wafer_core::format::LunAttributes::DEFAULT,
    };
    let refused = request(&mut world, HostRequest::Change(reserved.clone()));
    assert!(
        matches!(refused, Err(HostError::NoSpace { .. })),
        "{refused:?}"
    );
    let trim = Change::Trim {
        lun: thin,
        offset: 0,
        length: 3 << 19,
    };
    request(&mut world, HostRequest::Change(trim)).expect("trim");
    assert!(
        matches!(
            request(&mut world, HostRequest::Change(reserved)),
            Ok(ReplyData::Lun(_))
        ),
        "the trimmed space is free again"
    );
}
