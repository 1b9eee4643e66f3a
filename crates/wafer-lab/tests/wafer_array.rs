//! The wafer filer as a lab array: the real engine on modelled 15K disks
//! answers a random workload at rates the disks allow, the NVLog absorbs the
//! writes, and the same seed gives the same report.

use wafer_core::units::Duration;
use wafer_devices::params::Catalog;
use wafer_lab::workload::iometer::IometerSpec;
use wafer_lab::workload::{AccessLine, Region};
use wafer_lab::{AggregateSpec, Array, Progress, RunOptions, WaferArray, WaferSpec, run};
use wafer_raid::RaidType;

fn array(cache_mib: Option<u32>) -> Box<dyn Array> {
    let aggregate = AggregateSpec {
        name: "aggr0".into(),
        drive: "fc15k-144g".into(),
        raid_type: RaidType::RaidDp,
        raid_size: 8,
        disks: 8,
    };
    let spec = WaferSpec {
        cache_mib,
        controller: None,
        ..WaferSpec::single("wafer", aggregate, 3 << 30, 2 << 30)
    };
    let catalog = Catalog::builtin().expect("drives.toml");
    // 2 GiB of each disk: the engine's maps stay small.
    Box::new(WaferArray::short_stroked(&spec, &catalog, 1 << 19).expect("builds"))
}

fn workload() -> wafer_lab::Workload {
    let spec = IometerSpec {
        name: "4k random, 70 % reads".into(),
        lines: vec![AccessLine {
            size_bytes: 4096,
            percent: 100,
            read_percent: 70,
            random_percent: 100,
            align_bytes: 4096,
        }],
        workers: 1,
        outstanding_ios: 24,
        ramp_up: Duration::from_secs(1),
        run_time: Duration::from_secs(4),
        segments: 2,
        test_file: Region {
            offset_bytes: 0,
            length_bytes: Some(1 << 30),
            ..Region::default()
        },
        reallocate_first: true,
    };
    spec.workload().expect("a valid workload")
}

fn report() -> wafer_lab::LabReport {
    report_heard(&mut |_| {})
}

fn report_heard(progress: &mut dyn FnMut(Progress)) -> wafer_lab::LabReport {
    report_with(None, progress)
}

fn report_with(cache_mib: Option<u32>, progress: &mut dyn FnMut(Progress)) -> wafer_lab::LabReport {
    let options = RunOptions {
        seed: 7,
        sysstat_interval: Duration::from_secs(1),
        snapshot_every: None,
        snap_sched: None,
        per_minute: None,
    };
    run(&mut [array(cache_mib)], &workload(), &options, progress).expect("runs")
}

#[test]
fn preparing_reports_its_progress_before_the_run_does() {
    let mut heard = Vec::new();
    report_heard(&mut |p| heard.push(p));
    let running = heard
        .iter()
        .position(|p| matches!(p, Progress::Running(_)))
        .expect("the run reports");
    let preparing: Vec<f64> = heard[..running]
        .iter()
        .map(|p| match p {
            Progress::Preparing(fraction) => *fraction,
            Progress::Running(_) => unreachable!("before the first Running"),
        })
        .collect();
    assert!(
        heard[running..]
            .iter()
            .all(|p| matches!(p, Progress::Running(_))),
        "nothing is prepared once the run has started"
    );
    assert!(
        preparing.windows(2).all(|w| w[0] <= w[1]),
        "preparation went backwards: {preparing:?}"
    );
    assert_eq!(preparing.last(), Some(&1.0));
    // The fill is 1,024 writes of 1 MiB, the reallocation reported in steps.
    assert!(
        preparing.len() > 500 && preparing.iter().any(|&f| f > 0.3 && f < 0.7),
        "a smooth bar while preparing, heard {} reports",
        preparing.len()
    );
}

#[test]
fn the_engine_on_modelled_disks_answers_at_disk_rates_and_deterministically() {
    let first = report();
    let segment = &first.arrays[0].segments[0];
    // The test file (1 GiB) is 16 times the buffer cache, so most reads go to
    // the six data disks. Short-stroked to 2 GiB, their seeks are short:
    // at least one read per disk per full rotation and full seek (4 + 8 ms),
    // 500 reads/s in all, 700 I/Os with the writes; at most one per command
    // overhead and transfer (~0.2 ms), 30,000 reads/s.
    assert!(
        (700.0..40_000.0).contains(&segment.iops),
        "IOPS {} outside what six 15K data disks can do",
        segment.iops
    );
    let disks = first.arrays[0].measured_disk_stats();
    let reads: u64 = disks.iter().map(|d| d.user_reads).sum();
    let writes: u64 = disks.iter().map(|d| d.writes).sum();
    assert!(
        reads > 0 && writes > 0,
        "reads reach the disks and CPs write: {disks:?}"
    );
    assert!(
        disks[..2].iter().all(|d| d.user_reads == 0),
        "parity disks serve no host reads"
    );
    // Little's law: 24 outstanding I/Os.
    let little = segment.iops * segment.latency_ms_avg / 1000.0;
    assert!(
        (little - 24.0).abs() < 2.4,
        "IOPS x latency = {little}, not the 24 outstanding"
    );
    assert_eq!(first.to_json(), report().to_json(), "same seed, same bytes");
}

#[test]
fn the_engine_counts_the_mechanisms_of_each_segment() {
    let report = report();
    let array = &report.arrays[0];
    assert_eq!(
        array.engine_snapshots.len(),
        array.segments.len() + 1,
        "engine counters at the start and at the end of every segment"
    );
    let first = &array.engine_snapshots[0];
    let last = array.engine_snapshots.last().expect("snapshots");
    let run = last.since(first);
    assert!(run.cps.values().sum::<u64>() > 0, "CPs ran: {run:?}");
    assert!(run.full_stripes + run.partial_stripes > 0, "{run:?}");
    assert!(run.read_chains > 0 && run.read_chain_blocks >= run.read_chains);
    let seeks: u64 = array
        .measured_disk_stats()
        .iter()
        .map(|d| d.seek_cylinders)
        .sum();
    assert!(seeks > 0, "random reads move the arms");
    let table = wafer_lab::report::mechanisms::render(array);
    assert_eq!(
        table.lines().count(),
        2 + array.segments.len(),
        "a title, a header and a line per segment:\n{table}"
    );
}

#[test]
fn indirect_blocks_the_cache_cannot_hold_cost_a_read_each() {
    // The 1 GiB test file hangs from about 1,540 level-1 indirect blocks: the
    // default 64 MiB cache holds them all, a 1 MiB cache (256 blocks) cannot.
    let measured = |cache_mib| {
        let report = report_with(cache_mib, &mut |_| {});
        let array = &report.arrays[0];
        let first = &array.engine_snapshots[0];
        let run = array
            .engine_snapshots
            .last()
            .expect("snapshots")
            .since(first);
        (array.segments[0].iops, run)
    };
    let (roomy_iops, roomy) = measured(None);
    let (tight_iops, tight) = measured(Some(1));
    assert_eq!(
        roomy.indirect_reads, 0,
        "every indirect block stays: {roomy:?}"
    );
    // Dirty data pins the indirect blocks over it until its CP, so not every
    // lookup misses: at least one in ten does.
    assert!(
        tight.indirect_reads * 10 > tight.cache_misses,
        "lookups read their indirect blocks first: {tight:?}"
    );
    assert!(
        tight_iops < roomy_iops * 0.9,
        "the extra reads cost throughput: {tight_iops} against {roomy_iops} IOPS"
    );
}
