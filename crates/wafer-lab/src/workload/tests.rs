use super::*;
use crate::array::{HostIo, HostOp};
use wafer_core::units::Instant;

/// IOmeter's classic file-server mix (E1), 100 % random, 80 % reads,
/// 512-byte alignment.
fn file_server() -> Workload {
    let sizes = [
        (512, 10),
        (1024, 5),
        (2048, 5),
        (4096, 60),
        (8192, 2),
        (16384, 4),
        (32768, 4),
        (65536, 10),
    ];
    Workload {
        name: "file server".into(),
        lines: sizes
            .iter()
            .map(|&(size_bytes, percent)| AccessLine {
                size_bytes,
                percent,
                read_percent: 80,
                random_percent: 100,
                align_bytes: 512,
            })
            .collect(),
        workers: 2,
        outstanding_per_worker: 4,
        region: Region {
            offset_bytes: 1 << 20,
            length_bytes: Some(1 << 30),
            ..Region::default()
        },
        distribution: Distribution::Uniform,
        timing: Timing {
            ramp: Duration(0),
            segment: Duration::from_secs(1),
            segments: 1,
        },
        prepare: Prepare {
            fill: true,
            reallocate: false,
        },
        offered_iops: None,
        large: None,
    }
}

fn draw(workload: &Workload, seed: u64, count: u64) -> Vec<HostIo> {
    let mut streams = workload.streams(seed, &[4 << 30]).unwrap();
    (0..count)
        .map(|id| streams[0].next_io(id, Instant(0)))
        .collect()
}

#[test]
fn the_mix_converges_to_the_specification() {
    let workload = file_server();
    let count = 200_000;
    let ios = draw(&workload, 7, count);
    for line in &workload.lines {
        let share =
            ios.iter().filter(|io| io.length == line.size_bytes).count() as f64 / count as f64;
        let expected = f64::from(line.percent) / 100.0;
        // Binomial standard deviation at 200,000 draws is under 0.0011.
        assert!(
            (share - expected).abs() < 0.005,
            "{} bytes: {share:.4} of I/Os, expected {expected}",
            line.size_bytes
        );
    }
    let reads = ios.iter().filter(|io| io.op == HostOp::Read).count() as f64 / count as f64;
    assert!((reads - 0.8).abs() < 0.005, "reads {reads:.4}");
}

#[test]
fn random_share_splits_random_from_sequential() {
    let mut workload = file_server();
    workload.lines = vec![AccessLine {
        size_bytes: 4096,
        percent: 100,
        read_percent: 100,
        random_percent: 30,
        align_bytes: 4096,
    }];
    let ios = draw(&workload, 3, 100_000);
    let sequential = ios.windows(2).filter(|w| w[1].offset == w[0].end()).count() as f64;
    // A random I/O lands right after its predecessor with negligible odds,
    // so the sequential ones are the 70 %.
    let share = sequential / (ios.len() - 1) as f64;
    assert!((share - 0.7).abs() < 0.01, "sequential share {share:.4}");
}

#[test]
fn every_offset_honours_its_alignment_and_the_region() {
    let mut workload = file_server();
    workload.lines[3].align_bytes = 4096;
    workload.lines[7].align_bytes = 65536;
    workload.region = Region {
        offset_bytes: 1000,
        length_bytes: Some(10 << 20),
        ..Region::default()
    };
    let ios = draw(&workload, 11, 50_000);
    for io in &ios {
        let line = workload
            .lines
            .iter()
            .find(|l| l.size_bytes == io.length)
            .unwrap();
        assert_eq!(io.offset % line.align_bytes, 0, "{io:?}");
        assert!(io.offset >= 1000 && io.end() <= 1000 + (10 << 20), "{io:?}");
    }
    // 512-byte alignment is used: some 4 KiB-or-smaller I/Os start off a
    // 4 KiB boundary.
    assert!(
        ios.iter()
            .any(|io| io.length == 512 && io.offset % 4096 != 0)
    );
}

#[test]
fn a_seed_names_the_sequence_and_workers_differ() {
    let workload = file_server();
    assert_eq!(draw(&workload, 5, 1000), draw(&workload, 5, 1000));
    assert_ne!(draw(&workload, 5, 1000), draw(&workload, 6, 1000));
    let mut streams = workload.streams(5, &[4 << 30]).unwrap();
    let first: Vec<HostIo> = (0..50)
        .map(|id| streams[0].next_io(id, Instant(0)))
        .collect();
    let second: Vec<HostIo> = (0..50)
        .map(|id| streams[1].next_io(id, Instant(0)))
        .collect();
    assert_ne!(first, second);
}

#[test]
fn zipf_concentrates_random_offsets() {
    let mut workload = file_server();
    workload.lines = vec![AccessLine {
        size_bytes: 4096,
        percent: 100,
        read_percent: 100,
        random_percent: 100,
        align_bytes: 4096,
    }];
    workload.region.length_bytes = Some(4096 * 10_000);
    let distinct = |workload: &Workload| {
        let mut offsets: Vec<u64> = draw(workload, 1, 20_000)
            .iter()
            .map(|io| io.offset)
            .collect();
        offsets.sort_unstable();
        offsets.dedup();
        offsets.len()
    };
    let uniform = distinct(&workload);
    workload.distribution = Distribution::Zipf { theta: 1.2 };
    let skewed = distinct(&workload);
    assert!(
        skewed * 3 < uniform,
        "zipf touched {skewed} blocks, uniform {uniform}"
    );
}

#[test]
fn regions_must_fit_the_lun() {
    let workload = file_server();
    assert!(matches!(
        workload.worker_extents(0, &[1 << 30]),
        Err(WorkloadError::OutsideLun { .. })
    ));
    assert_eq!(
        workload.worker_extents(0, &[2 << 30]).unwrap(),
        vec![Extent {
            offset: 1 << 20,
            length: 1 << 30
        }]
    );
    let mut whole = file_server();
    whole.region = Region {
        offset_bytes: 4096,
        length_bytes: None,
        ..Region::default()
    };
    assert_eq!(
        whole.worker_extents(0, &[1 << 20]).unwrap()[0].length,
        (1 << 20) - 4096
    );
    let mut tiny = file_server();
    tiny.region.length_bytes = Some(32768);
    assert_eq!(
        tiny.worker_extents(0, &[2 << 30]),
        Err(WorkloadError::RangeTooSmall {
            size_bytes: 65536,
            align_bytes: 512
        })
    );
    assert_eq!(
        whole.prepare_plan(&[1 << 20]).unwrap().fill,
        vec![Extent {
            offset: 4096,
            length: (1 << 20) - 4096
        }]
    );
}

#[test]
fn checks_name_the_field() {
    let field = |change: fn(&mut Workload)| {
        let mut workload = file_server();
        change(&mut workload);
        match workload.check() {
            Err(WorkloadError::Invalid { field, .. }) => field,
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(
        field(|w| w.lines[2].read_percent = 101),
        "lines[2].read_percent"
    );
    assert_eq!(field(|w| w.lines[0].size_bytes = 0), "lines[0].size");
    assert_eq!(field(|w| w.lines[0].percent = 11), "lines");
    assert_eq!(field(|w| w.workers = 0), "workers");
    assert_eq!(
        field(|w| w.outstanding_per_worker = 40_000),
        "outstanding_ios"
    );
    assert_eq!(field(|w| w.timing.segments = 0), "segments");
}

/// 1 MiB sequential reads, one worker per stream.
fn sequential_1mib(workers: u32) -> Workload {
    let mut workload = file_server();
    workload.lines = vec![AccessLine {
        size_bytes: 1 << 20,
        percent: 100,
        read_percent: 100,
        random_percent: 0,
        align_bytes: 1 << 20,
    }];
    workload.workers = workers;
    workload.region = Region::default();
    workload
}

#[test]
fn workers_share_the_range_unless_each_is_offset_by_the_increment() {
    let capacity = 64 << 20;
    let firsts = |workload: &Workload| -> Vec<u64> {
        let mut streams = workload.streams(3, &[capacity]).unwrap();
        streams
            .iter_mut()
            .map(|s| s.next_io(0, Instant(0)).offset)
            .collect()
    };
    let mut shared = sequential_1mib(4);
    assert_eq!(firsts(&shared), vec![0; 4], "fio clones on one file");
    shared.region.offset_increment_bytes = 16 << 20;
    assert_eq!(firsts(&shared), vec![0, 16 << 20, 32 << 20, 48 << 20]);
    // Each worker keeps to its own 16 MiB, wrapping at its end.
    shared.region.length_bytes = Some(16 << 20);
    let mut streams = shared.streams(3, &[capacity]).unwrap();
    for (worker, stream) in streams.iter_mut().enumerate() {
        let base = worker as u64 * (16 << 20);
        for id in 0..40 {
            let io = stream.next_io(id, Instant(0));
            assert_eq!(io.offset, base + id % 16 * (1 << 20), "worker {worker}");
        }
    }
    assert_eq!(
        shared.prepare_plan(&[capacity]).unwrap().fill,
        vec![Extent {
            offset: 0,
            length: capacity
        }],
        "the four ranges filled once, joined"
    );
    shared.region.offset_increment_bytes = 24 << 20;
    assert!(matches!(
        shared.streams(3, &[capacity]),
        Err(WorkloadError::OutsideLun { .. })
    ));
}

#[test]
fn an_active_share_of_every_lun_is_addressed_and_nothing_else() {
    let luns = [100 << 20, 200 << 20, 100 << 20];
    let mut workload = file_server();
    workload.region = Region {
        lun_active_percent: Some(25),
        ..Region::default()
    };
    let parts = [(0, 25 << 20), (100 << 20, 50 << 20), (300 << 20, 25 << 20)];
    let mut hits = [0u64; 3];
    let mut streams = workload.streams(9, &luns).unwrap();
    for id in 0..60_000 {
        let io = streams[0].next_io(id, Instant(0));
        let part = parts
            .iter()
            .position(|&(start, length)| start <= io.offset && io.end() <= start + length)
            .unwrap_or_else(|| panic!("{io:?} is outside every LUN's first 25 %"));
        hits[part] += 1;
    }
    // Uniform over the union: each part by its size (1 : 2 : 1).
    let share = hits[1] as f64 / 60_000.0;
    assert!((share - 0.5).abs() < 0.01, "{hits:?}");
    assert!(hits[0].abs_diff(hits[2]) < 1000, "{hits:?}");
    let fill = workload.prepare_plan(&luns).unwrap().fill;
    let expected: Vec<Extent> = parts
        .iter()
        .map(|&(offset, length)| Extent { offset, length })
        .collect();
    assert_eq!(fill, expected);
}

#[test]
fn sequential_workers_over_several_luns_start_in_their_own_and_move_on() {
    let luns = [8 << 20, 8 << 20];
    let mut workload = sequential_1mib(2);
    workload.region.lun_active_percent = Some(50);
    let mut streams = workload.streams(1, &luns).unwrap();
    let offsets = |stream: &mut WorkerStream| -> Vec<u64> {
        (0..9)
            .map(|id| stream.next_io(id, Instant(0)).offset >> 20)
            .collect()
    };
    assert_eq!(offsets(&mut streams[0]), vec![0, 1, 2, 3, 8, 9, 10, 11, 0]);
    assert_eq!(offsets(&mut streams[1]), vec![8, 9, 10, 11, 0, 1, 2, 3, 8]);
    workload.region.offset_bytes = 4096;
    assert!(matches!(
        workload.check(),
        Err(WorkloadError::Invalid { field, .. }) if field == "lun_active_percent"
    ));
}

/// 4 KiB random reads over 100 MiB at 4 KiB alignment, in a working set of
/// 10 % that crosses the range once every 100 s.
fn moving_reads(share_percent: u32) -> Workload {
    let mut workload = file_server();
    workload.lines = vec![AccessLine {
        size_bytes: 4096,
        percent: 100,
        read_percent: 100,
        random_percent: 100,
        align_bytes: 4096,
    }];
    workload.region = Region {
        offset_bytes: 0,
        length_bytes: Some(100 << 20),
        ..Region::default()
    };
    workload.distribution = Distribution::Moving(MovingSet {
        percent: 10,
        share_percent,
        sweep: Duration::from_secs(100),
    });
    workload
}

/// The offsets (in MiB from the region's start) a worker draws at `at`.
fn offsets_at(workload: &Workload, at: Duration, count: u64) -> Vec<u64> {
    let mut streams = workload.streams(3, &[1 << 30]).unwrap();
    (0..count)
        .map(|id| streams[0].next_io(id, Instant(at.0)).offset >> 20)
        .collect()
}

#[test]
fn a_moving_working_set_is_where_the_sweep_has_got_to() {
    let workload = moving_reads(100);
    let at_start = offsets_at(&workload, Duration(0), 2_000);
    assert!(at_start.iter().all(|&mib| mib < 10), "{at_start:?}");
    let at_40s = offsets_at(&workload, Duration::from_secs(40), 2_000);
    assert!(at_40s.iter().all(|&mib| (40..50).contains(&mib)));
    // Every MiB of the window is used: the window is 10 %, not less.
    let mut seen = at_40s.clone();
    seen.sort_unstable();
    seen.dedup();
    assert_eq!(seen, (40..50).collect::<Vec<u64>>());
    // Near the end it wraps to the start of the range.
    let at_95s = offsets_at(&workload, Duration::from_secs(95), 2_000);
    assert!(at_95s.iter().all(|&mib| !(5..95).contains(&mib)));
    assert!(at_95s.iter().any(|&mib| mib < 5) && at_95s.iter().any(|&mib| mib >= 95));
    // A whole sweep later it is back where it was.
    assert_eq!(
        offsets_at(&workload, Duration::from_secs(140), 2_000),
        at_40s
    );
}

#[test]
fn a_moving_working_sets_share_sends_the_rest_anywhere() {
    let offsets = offsets_at(&moving_reads(50), Duration::from_secs(20), 10_000);
    let inside = offsets
        .iter()
        .filter(|&&mib| (20..30).contains(&mib))
        .count();
    // Half in the window, and a tenth of the other half lands there by chance.
    assert!(
        (5_200..5_800).contains(&inside),
        "{inside} of 10000 in the window"
    );
    let mut seen = offsets.clone();
    seen.sort_unstable();
    seen.dedup();
    assert_eq!(seen.len(), 100, "the rest reach every MiB of the range");
}

#[test]
fn a_uniform_workloads_draws_ignore_the_time() {
    let workload = file_server();
    let mut streams = workload.streams(5, &[4 << 30]).unwrap();
    let mut later = workload.streams(5, &[4 << 30]).unwrap();
    for id in 0..1_000 {
        let at = Instant(id * 1_000_000_007);
        assert_eq!(streams[0].next_io(id, Instant(0)), later[0].next_io(id, at));
    }
}

#[test]
fn a_moving_working_set_is_checked() {
    let mut workload = moving_reads(100);
    let set = |percent, share_percent, sweep| {
        Distribution::Moving(MovingSet {
            percent,
            share_percent,
            sweep,
        })
    };
    for (bad, field) in [
        (set(0, 100, Duration(1)), "working_set_percent"),
        (set(101, 100, Duration(1)), "working_set_percent"),
        (set(10, 0, Duration(1)), "working_set_share_percent"),
        (set(10, 100, Duration(0)), "working_set_sweep_s"),
    ] {
        workload.distribution = bad;
        match workload.check() {
            Err(WorkloadError::Invalid { field: named, .. }) => assert_eq!(named, field),
            other => panic!("{bad:?}: {other:?}"),
        }
    }
}

/// Small random 8 KiB I/O beside four sequential 1 MiB read streams over a
/// 400 MiB LUN.
fn small_and_streams() -> Workload {
    let mut workload = moving_reads(100);
    workload.distribution = Distribution::Uniform;
    workload.region = Region::default();
    workload.workers = 1;
    workload.large = Some(LargeStreams {
        streams: 4,
        outstanding_per_stream: 2,
        size_bytes: 1 << 20,
        read_percent: 100,
        sequential: true,
    });
    workload
}

#[test]
fn large_sequential_streams_each_read_their_own_part_in_order() {
    let workload = small_and_streams();
    assert_eq!(workload.depths(), [4, 2, 2, 2, 2]);
    let mut streams = workload.streams(9, &[400 << 20]).unwrap();
    assert_eq!(streams.len(), 5);
    for (index, stream) in streams[1..].iter_mut().enumerate() {
        let part = index as u64 * 100;
        let offsets: Vec<u64> = (0..102)
            .map(|id| stream.next_io(id, Instant(0)))
            .inspect(|io| assert_eq!((io.op, io.length), (HostOp::Read, 1 << 20)))
            .map(|io| io.offset >> 20)
            .collect();
        let expected: Vec<u64> = (0..102).map(|n| part + n % 100).collect();
        assert_eq!(offsets, expected, "stream {index} wraps in its own part");
    }
    let small: Vec<u64> = (0..100)
        .map(|id| streams[0].next_io(id, Instant(0)).length)
        .collect();
    assert!(small.iter().all(|&length| length == 4096));
    let plan = workload.prepare_plan(&[400 << 20]).unwrap();
    assert_eq!(
        plan.fill,
        vec![Extent {
            offset: 0,
            length: 400 << 20
        }]
    );
}

#[test]
fn large_streams_run_alone_in_a_closed_loop_over_one_range() {
    let mut alone = small_and_streams();
    alone.workers = 0;
    assert_eq!(alone.streams(1, &[400 << 20]).unwrap().len(), 4);
    let mut open = small_and_streams();
    open.offered_iops = Some(100);
    assert!(matches!(
        open.check(),
        Err(WorkloadError::Invalid { field, .. }) if field == "num_large"
    ));
    let mut tiny = small_and_streams();
    tiny.region.length_bytes = Some(3 << 20);
    assert!(matches!(
        tiny.streams(1, &[400 << 20]),
        Err(WorkloadError::RangeTooSmall { .. })
    ));
}
