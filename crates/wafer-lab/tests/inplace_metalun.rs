//! In-place arrays of several RAID-5 groups: MetaLUNs spread random reads
//! over every group's disks, so G groups of n disks read clearly faster than
//! one group of n; and `scenarios/metalun.toml` runs, reporting each group
//! and each LUN.
//!
//! The arithmetic: a random 4 KiB read over all LUNs lands on a meta stripe
//! element uniformly, and the elements go round the groups, so each group
//! takes 1/G of the reads (within a few points over tens of thousands of
//! reads). At a fixed number of reads in flight, G times the disks each
//! hold 1/G of the queue: the array's IOPS grow by nearly G when the disks
//! are the limit, by less as the shorter queues give each disk's
//! reordering less to choose from.

mod common;

use wafer_lab::array::DiskStats;
use wafer_lab::report::ArrayReport;

const EXAMPLE: &str = include_str!("../../../scenarios/metalun.toml");

/// Random 4 KiB reads, 48 in flight, over three 4 GiB MetaLUNs on one group
/// of five fc15k-144g (`one`) and on three such groups (`three`).
fn one_against_three() -> String {
    let array = |name: &str, groups: &str| {
        let luns = "[[array.lun]]\nsize_gib = 4\n".repeat(3);
        format!(
            "[[array]]\nname = \"{name}\"\nkind = \"in-place\"\ndrive = \"fc15k-144g\"\n\
             {groups}\nstripe_unit_kib = 64\n{luns}\n"
        )
    };
    let load = r#"
name = "random reads, one group against three"

[run]
seed = 1
segments = 1
segment_s = 4
ramp_s = 1

[workload]
kind = "iometer"
outstanding_ios = 48
fill = false
lines = [
  { size_kib = 4, percent = 100, read_percent = 100, random_percent = 100, align_kib = 4 },
]
"#;
    let one = array("one", "disks = 5");
    let three = array("three", "raid_groups = 3\ndisks_per_group = 5");
    format!("{load}\n{one}\n{three}")
}

/// Each group's share of the commands `count` counts over the measured
/// time, groups in disk order.
fn group_shares(report: &ArrayReport, count: fn(&DiskStats) -> u64) -> Vec<f64> {
    let disks = report.measured_disk_stats();
    let total: u64 = disks.iter().map(count).sum();
    let mut groups: Vec<(&str, u64)> = Vec::new();
    for disk in &disks {
        let group = disk.name.split('.').next().unwrap();
        match groups.last_mut() {
            Some((name, commands)) if *name == group => *commands += count(disk),
            _ => groups.push((group, count(disk))),
        }
    }
    (groups.iter())
        .map(|(_, commands)| *commands as f64 / total as f64)
        .collect()
}

#[test]
fn random_reads_load_every_group_alike_and_more_groups_read_faster() {
    let report = common::run_scenario(&one_against_three());
    let [one, three] = report.arrays.as_slice() else {
        panic!("two arrays");
    };
    let shares = group_shares(three, |disk| disk.user_reads);
    assert_eq!(shares.len(), 3, "{shares:?}");
    for share in &shares {
        assert!((share - 1.0 / 3.0).abs() < 0.03, "{shares:?}");
    }
    let (one_iops, three_iops) = (one.segments[0].iops, three.segments[0].iops);
    eprintln!(
        "random 4 KiB reads, 48 in flight: {one_iops:.0} IOPS on 1 group, {three_iops:.0} on 3"
    );
    assert!(
        three_iops > 1.8 * one_iops,
        "3 groups {three_iops:.0} IOPS against 1 group {one_iops:.0}"
    );
}

#[test]
fn the_example_runs_and_reports_each_group_and_lun() {
    let report = common::run_scenario(EXAMPLE);
    let gib = 1 << 30;
    for array in &report.arrays {
        assert_eq!(array.capacity_bytes, 3 * 2 * gib, "three 2 GiB LUNs");
        let statit = wafer_lab::report::statit::render(array);
        for group in 0..3 {
            let path = format!("/{}/plex0/rg{group}:", array.name);
            assert!(statit.contains(&path), "{statit}");
        }
        assert_eq!(array.measured_disk_stats().len(), 15);
        // The destager sweeps the groups' stripes in turn, so the cached
        // writes reach every group alike too.
        for commands in [|d: &DiskStats| d.user_reads, |d: &DiskStats| d.writes] {
            let shares = group_shares(array, commands);
            assert!(
                shares.iter().all(|s| (s - 1.0 / 3.0).abs() < 0.04),
                "{shares:?}"
            );
        }
        for segment in &array.segments {
            assert!(segment.read_ios > 0 && segment.ios > segment.read_ios);
            let ios: Vec<u64> = segment.luns.iter().map(|lun| lun.ios).collect();
            assert_eq!(ios.len(), 3);
            assert_eq!(ios.iter().sum::<u64>(), segment.ios);
            for lun in &ios {
                let share = *lun as f64 / segment.ios as f64;
                assert!((share - 1.0 / 3.0).abs() < 0.04, "{ios:?}");
            }
        }
        eprintln!(
            "{}: {:.0} and {:.0} IOPS",
            array.name, array.segments[0].iops, array.segments[1].iops
        );
    }
}
