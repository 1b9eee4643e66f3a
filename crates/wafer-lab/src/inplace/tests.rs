use super::*;

const KIB: u64 = 1024;
const MIB: u64 = 1024 * KIB;
const GIB: u64 = 1024 * MIB;

fn spec(disks: u32, cache: Option<CacheSpec>) -> InPlaceSpec {
    InPlaceSpec {
        name: "eva".to_string(),
        drive: "fc15k-144g".to_string(),
        disks,
        raid_groups: 1,
        stripe_unit_bytes: 128 * KIB,
        stripe_width: None,
        luns: vec![10 * 1024 * MIB],
        placement: LunPlacement::Striped {
            multiplier: METALUN_MULTIPLIER_DEFAULT,
        },
        cache,
        controller: None,
        snapshots: None,
    }
}

fn new_array(disks: u32, cache: Option<CacheSpec>) -> InPlaceArray {
    InPlaceArray::new(&spec(disks, cache), &Catalog::builtin().unwrap()).unwrap()
}

fn io(id: u64, op: HostOp, offset: u64, length: u64) -> HostIo {
    HostIo {
        id,
        op,
        offset,
        length,
    }
}

/// Submits `ios` at the array's present time and runs it until it is idle.
fn run_to_idle(array: &mut InPlaceArray, ios: &[HostIo]) -> Vec<HostCompletion> {
    let now = array.clock;
    for &io in ios {
        array.submit(now, io);
    }
    let mut done = Vec::new();
    for _ in 0..10_000 {
        let Some(at) = array.next_event() else {
            return done;
        };
        array.advance(at, &mut done);
    }
    panic!("the array never went idle");
}

/// Commands of each kind, summed over the disks: (user reads, cp reads, writes).
fn commands(array: &InPlaceArray) -> (u64, u64, u64) {
    array
        .disk_stats()
        .iter()
        .fold((0, 0, 0), |(u, c, w), disk| {
            (u + disk.user_reads, c + disk.cp_reads, w + disk.writes)
        })
}

#[test]
fn a_small_random_write_costs_two_reads_and_two_writes() {
    for (offset, length) in [(5 * MIB + 8 * KIB, 4 * KIB), (777 * MIB + 512, 512)] {
        let mut array = new_array(20, None);
        let done = run_to_idle(&mut array, &[io(1, HostOp::Write, offset, length)]);
        assert_eq!(done.len(), 1);
        assert_eq!(
            commands(&array),
            (0, 2, 2),
            "write of {length} bytes at {offset}"
        );
        let disks_used = array.disk_stats().iter().filter(|d| d.writes > 0).count();
        assert_eq!(disks_used, 2, "data and parity on two disks");
    }
}

#[test]
fn a_full_stripe_write_reads_nothing() {
    let mut array = new_array(5, None);
    let stripe_bytes = 4 * 128 * KIB;
    let done = run_to_idle(
        &mut array,
        &[io(1, HostOp::Write, 3 * stripe_bytes, stripe_bytes)],
    );
    assert_eq!(done.len(), 1);
    assert_eq!(
        commands(&array),
        (0, 0, 5),
        "four data chunks and parity, no reads"
    );
    // The same bytes shifted by one block straddle two stripes: both are
    // partial, so both pay a read-modify-write.
    let mut array = new_array(5, None);
    run_to_idle(
        &mut array,
        &[io(
            1,
            HostOp::Write,
            3 * stripe_bytes + 4 * KIB,
            stripe_bytes,
        )],
    );
    let (_, cp_reads, _) = commands(&array);
    assert!(cp_reads > 0);
}

#[test]
fn reads_go_to_the_disk_that_holds_the_data() {
    // Classic RAID-5 over 5 disks: stripe 0 has parity on disk 4 and data
    // chunks 0..3 on disks 0..3; stripe 1 has parity on disk 3, so its first
    // data chunk (LUN chunk 4) is on disk 4.
    let cases = [
        (0, 0),
        (128 * KIB, 1),
        (3 * 128 * KIB + 4096, 3),
        (4 * 128 * KIB, 4),
    ];
    for (offset, expected_disk) in cases {
        let mut array = new_array(5, None);
        run_to_idle(&mut array, &[io(1, HostOp::Read, offset, 4 * KIB)]);
        let reading: Vec<usize> = array
            .disk_stats()
            .iter()
            .enumerate()
            .filter(|(_, d)| d.user_reads > 0)
            .map(|(i, _)| i)
            .collect();
        assert_eq!(reading, vec![expected_disk], "read at {offset}");
    }
    let mut array = new_array(5, None);
    run_to_idle(&mut array, &[io(1, HostOp::Read, 120 * KIB, 16 * KIB)]);
    assert_eq!(
        commands(&array),
        (2, 0, 0),
        "a read across a chunk boundary is split"
    );
}

#[test]
fn the_cache_answers_writes_at_its_latency_and_coalesces_overwrites() {
    let cache = CacheSpec {
        capacity_mib: 64,
        latency: Duration(150_000),
    };
    let mut array = new_array(20, Some(cache));
    let ios: Vec<HostIo> = (0..10)
        .map(|id| io(id, HostOp::Write, 40 * MIB, 4 * KIB))
        .collect();
    let done = run_to_idle(&mut array, &ios);
    assert_eq!(done.len(), 10);
    assert!(done.iter().all(|c| c.finished_at == Instant(150_000)));
    let (_, cp_reads, writes) = commands(&array);
    // The first write's destage starts at once; the nine overwrites that
    // arrive while it runs coalesce into one more.
    assert_eq!(
        (cp_reads, writes),
        (4, 4),
        "ten writes of one block, two destages"
    );
    let read = run_to_idle(&mut array, &[io(99, HostOp::Read, 40 * MIB, 4 * KIB)]);
    assert_eq!(
        commands(&array).0,
        1,
        "the block was destaged, so the read goes to disk"
    );
    assert_eq!(read.len(), 1);
}

#[test]
fn a_full_cache_makes_writes_wait_for_destage() {
    let cache = CacheSpec {
        capacity_mib: 1,
        latency: Duration(150_000),
    };
    let mut array = new_array(20, Some(cache));
    // 512 KiB writes to distinct places: the first two fill the 1 MiB cache,
    // the third waits until a destage frees room.
    let ios: Vec<HostIo> = (0..3)
        .map(|i| io(i, HostOp::Write, i * 7 * MIB, 512 * KIB))
        .collect();
    let done = run_to_idle(&mut array, &ios);
    let slow = done
        .iter()
        .filter(|c| c.finished_at > Instant(150_000))
        .count();
    assert_eq!(slow, 1, "{done:?}");
    let cached = Instant(150_000);
    assert_eq!(done.iter().filter(|c| c.finished_at == cached).count(), 2);
}

#[test]
fn same_submissions_give_the_same_completions() {
    let run = || {
        let mut array = new_array(8, None);
        let ios: Vec<HostIo> = (0..40)
            .map(|i| {
                let op = if i % 3 == 0 {
                    HostOp::Write
                } else {
                    HostOp::Read
                };
                io(i, op, (i * 7919 % 2000) * 64 * KIB, 4 * KIB + (i % 5) * 512)
            })
            .collect();
        (run_to_idle(&mut array, &ios), array.disk_stats())
    };
    let (first, stats) = run();
    assert_eq!(first.len(), 40);
    assert_eq!((first, stats), run());
}

#[test]
fn impossible_arrays_are_refused_by_field() {
    let catalog = Catalog::builtin().unwrap();
    let refuse = |change: fn(&mut InPlaceSpec)| {
        let mut spec = spec(20, None);
        change(&mut spec);
        match InPlaceArray::new(&spec, &catalog) {
            Err(InPlaceError::Invalid { field, .. }) => field,
            Err(other) => panic!("refused for another reason: {other}"),
            Ok(_) => panic!("accepted {spec:?}"),
        }
    };
    assert_eq!(refuse(|s| s.disks = 2), "disks");
    assert_eq!(refuse(|s| s.stripe_unit_bytes = 6000), "stripe_unit");
    assert_eq!(refuse(|s| s.stripe_width = Some(20)), "stripe_width");
    assert_eq!(refuse(|s| s.luns = vec![4_000_000_000_000]), "lun");
    let mut spec = spec(20, None);
    spec.drive = "floppy".to_string();
    assert!(matches!(
        InPlaceArray::new(&spec, &catalog),
        Err(InPlaceError::UnknownDrive { .. })
    ));
}

/// 20 disks of 128 KiB chunks, a 10 GiB LUN and a 1 GiB reserved LUN pool
/// of 64 KiB chunks.
fn snapshotting_array(cache: Option<CacheSpec>) -> InPlaceArray {
    let spec = InPlaceSpec {
        snapshots: Some(ReservedPoolSpec {
            pool_bytes: 1024 * MIB,
            chunk_bytes: CHUNK_BYTES_DEFAULT,
        }),
        ..spec(20, cache)
    };
    InPlaceArray::new(&spec, &Catalog::builtin().unwrap()).unwrap()
}

/// Blocks moved by each kind of command, summed over the disks: (user
/// reads, cp reads, writes).
fn blocks(array: &InPlaceArray) -> (u64, u64, u64) {
    array
        .disk_stats()
        .iter()
        .fold((0, 0, 0), |(u, c, w), disk| {
            (
                u + disk.user_read_blocks,
                c + disk.cp_read_blocks,
                w + disk.write_blocks,
            )
        })
}

/// The difference of two counts of (user reads, cp reads, writes).
fn minus(after: (u64, u64, u64), before: (u64, u64, u64)) -> (u64, u64, u64) {
    (after.0 - before.0, after.1 - before.1, after.2 - before.2)
}

#[test]
fn the_first_write_to_a_chunk_after_a_snapshot_copies_it_and_the_second_does_not() {
    let mut array = snapshotting_array(None);
    let at = 5 * MIB + 8 * KIB;
    // Before any snapshot a 4 KiB write costs its read-modify-write alone.
    run_to_idle(&mut array, &[io(1, HostOp::Write, at, 4 * KIB)]);
    assert_eq!(commands(&array), (0, 2, 2));
    let now = array.clock;
    array.take_snapshot(now);
    let (commands_before, blocks_before) = (commands(&array), blocks(&array));
    let first = run_to_idle(&mut array, &[io(2, HostOp::Write, at, 4 * KIB)]);
    // The old 64 KiB chunk (16 blocks) is read in one command, then written
    // to the pool, a RAID-5 LUN of its own: a partial stripe there, so its
    // old data and parity are read and its new data and parity written.
    // Then the host's write pays its own read-modify-write.
    assert_eq!(
        minus(commands(&array), commands_before),
        (0, 1 + 2 + 2, 2 + 2)
    );
    assert_eq!(
        minus(blocks(&array), blocks_before),
        (0, 16 + 2 * 16 + 2, 2 * 16 + 2)
    );
    let (commands_before, blocks_before) = (commands(&array), blocks(&array));
    let second = run_to_idle(&mut array, &[io(3, HostOp::Write, at + 32 * KIB, 4 * KIB)]);
    assert_eq!(minus(commands(&array), commands_before), (0, 2, 2));
    assert_eq!(minus(blocks(&array), blocks_before), (0, 2, 2));
    let latency = |done: &[HostCompletion]| done[0].finished_at - done[0].submitted_at;
    assert!(
        latency(&first) > latency(&second),
        "the first write waited for the copy"
    );
    let stats = array.snapshot_stats();
    assert_eq!((stats.requested, stats.taken, stats.refused), (1, 1, 0));
    let cow = stats
        .copy_on_write
        .expect("the array copies on first write");
    assert_eq!((cow.chunks_copied, cow.writes_held), (1, 1));
}

#[test]
fn behind_a_cache_the_first_write_waits_for_the_chunk_read_only() {
    let cache = CacheSpec {
        capacity_mib: 64,
        latency: Duration(150_000),
    };
    let mut array = snapshotting_array(Some(cache));
    array.take_snapshot(Instant(0));
    let first = run_to_idle(&mut array, &[io(1, HostOp::Write, 7 * MIB, 4 * KIB)]);
    let second = run_to_idle(
        &mut array,
        &[io(2, HostOp::Write, 7 * MIB + 4 * KIB, 4 * KIB)],
    );
    let latency = |done: &[HostCompletion]| done[0].finished_at - done[0].submitted_at;
    // A disk read of the old chunk (milliseconds), then both writes go into
    // the cache; the second write is answered by the cache alone.
    assert!(
        latency(&first) > Duration(1_000_000),
        "{:?}",
        latency(&first)
    );
    assert_eq!(latency(&second), Duration(150_000));
    let cow = array.snapshot_stats().copy_on_write.unwrap();
    assert_eq!((cow.chunks_copied, cow.writes_held), (1, 1));
}

#[test]
fn a_lun_keeps_eight_snapshots_and_refuses_the_ninth() {
    let mut array = snapshotting_array(None);
    for _ in 0..9 {
        array.take_snapshot(Instant(0));
    }
    let stats = array.snapshot_stats();
    assert_eq!((stats.requested, stats.taken, stats.refused), (9, 8, 1));
}

/// Three RAID-5 groups of four disks (stripes of three 64 KiB chunks, so
/// 768 KiB meta stripe elements at the default multiplier), with LUNs of
/// `luns` bytes placed as `placement`.
fn grouped_spec(luns: Vec<u64>, placement: LunPlacement) -> InPlaceSpec {
    InPlaceSpec {
        disks: 4,
        raid_groups: 3,
        stripe_unit_bytes: 64 * KIB,
        luns,
        placement,
        ..spec(4, None)
    }
}

const METALUN: LunPlacement = LunPlacement::Striped {
    multiplier: METALUN_MULTIPLIER_DEFAULT,
};

const ELEMENT: u64 = 768 * KIB;

fn grouped(luns: Vec<u64>, placement: LunPlacement) -> InPlaceArray {
    InPlaceArray::new(&grouped_spec(luns, placement), &Catalog::builtin().unwrap()).unwrap()
}

/// The groups (by their disks' names) whose disks did user reads.
fn groups_reading(array: &InPlaceArray) -> Vec<String> {
    let mut groups: Vec<String> = (array.disk_stats().iter())
        .filter(|disk| disk.user_reads > 0)
        .map(|disk| disk.name.split('.').next().unwrap().to_string())
        .collect();
    groups.dedup();
    groups
}

#[test]
fn a_metalun_reads_each_element_from_the_next_group() {
    let array = grouped(vec![GIB, GIB], METALUN);
    let names: Vec<String> = array.disk_stats().into_iter().map(|d| d.name).collect();
    assert_eq!(names.len(), 12);
    assert_eq!(
        (names[0].as_str(), names[11].as_str()),
        ("rg0.d00", "rg2.d03")
    );
    assert_eq!(array.lun_bytes(), vec![GIB, GIB]);
    for element in 0..6 {
        for (lun, first_group) in [(0, 0), (1, 1)] {
            let mut array = grouped(vec![GIB, GIB], METALUN);
            let offset = lun * GIB + element * ELEMENT + 12 * KIB;
            run_to_idle(&mut array, &[io(1, HostOp::Read, offset, 4 * KIB)]);
            let group = (first_group + element) % 3;
            assert_eq!(groups_reading(&array), vec![format!("rg{group}")]);
        }
    }
}

#[test]
fn an_io_over_an_element_edge_or_a_luns_end_is_split_and_answered_once() {
    for offset in [ELEMENT - 4 * KIB, GIB - 4 * KIB] {
        for op in [HostOp::Read, HostOp::Write] {
            let mut array = grouped(vec![GIB, GIB], METALUN);
            let done = run_to_idle(&mut array, &[io(7, op, offset, 8 * KIB)]);
            assert_eq!(done.len(), 1, "{op} at {offset}");
            assert_eq!(done[0].id, 7);
            let (reads, cp_reads, writes) = commands(&array);
            match op {
                HostOp::Read => assert_eq!((reads, cp_reads, writes), (2, 0, 0)),
                HostOp::Write => assert_eq!((reads, cp_reads, writes), (0, 4, 4)),
            }
        }
    }
}

#[test]
fn round_robin_puts_lun_i_whole_on_group_i_mod_3() {
    for lun in 0..4 {
        let mut array = grouped(vec![GIB; 4], LunPlacement::RoundRobin);
        let ios: Vec<HostIo> = (0..20)
            .map(|i| io(i, HostOp::Read, lun * GIB + i * 37 * MIB, 4 * KIB))
            .collect();
        run_to_idle(&mut array, &ios);
        assert_eq!(groups_reading(&array), vec![format!("rg{}", lun % 3)]);
    }
}

#[test]
fn every_lun_keeps_its_own_snapshots_and_copies_into_its_share_of_the_pool() {
    let spec = InPlaceSpec {
        snapshots: Some(ReservedPoolSpec {
            pool_bytes: 64 * MIB,
            chunk_bytes: CHUNK_BYTES_DEFAULT,
        }),
        ..grouped_spec(vec![GIB, GIB], METALUN)
    };
    let mut array = InPlaceArray::new(&spec, &Catalog::builtin().unwrap()).unwrap();
    array.take_snapshot(Instant(0));
    run_to_idle(&mut array, &[io(1, HostOp::Write, GIB + 5 * MIB, 4 * KIB)]);
    let stats = array.snapshot_stats();
    assert_eq!((stats.requested, stats.taken), (2, 2), "one per LUN");
    let cow = stats.copy_on_write.unwrap();
    assert_eq!((cow.chunks_copied, cow.writes_held), (1, 1));
    for _ in 0..8 {
        let now = array.clock;
        array.take_snapshot(now);
    }
    let stats = array.snapshot_stats();
    assert_eq!(
        (stats.requested, stats.taken, stats.refused),
        (18, 16, 2),
        "eight sessions a LUN"
    );
}

#[test]
fn a_chunk_that_straddles_stripes_on_several_groups_is_refused() {
    let spec = InPlaceSpec {
        snapshots: Some(ReservedPoolSpec {
            pool_bytes: 64 * MIB,
            chunk_bytes: 512 * KIB,
        }),
        ..grouped_spec(vec![GIB], METALUN)
    };
    let refused = InPlaceArray::new(&spec, &Catalog::builtin().unwrap());
    assert!(
        matches!(
            refused,
            Err(InPlaceError::Invalid {
                field: "cow_chunk",
                ..
            })
        ),
        "192 KiB stripes hold no whole number of 512 KiB chunks"
    );
}
