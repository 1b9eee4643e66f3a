//! A wafer array with a Flash Cache (`flash_cache_mib`) warms up under
//! random reads of a working set larger than its buffer cache and smaller
//! than its Flash Cache: later segments answer most disk reads from flash,
//! so the disks see fewer commands per host I/O and the array runs faster
//! than its twin without one; the mechanisms report says so. The keys are
//! checked as a scenario is read.

mod common;

use wafer_devices::params::Catalog;
use wafer_lab::Scenario;
use wafer_lab::report::mechanisms;

/// Two arrays alike but for the Flash Cache, under random 8 KiB reads of a
/// 512 MiB test file with a 16 MiB buffer cache.
fn scenario(flash_keys: &str) -> String {
    format!(
        r#"
name = "flash cache"

[run]
seed = 1
segments = 4
segment_s = 10
ramp_s = 0
sysstat_interval_s = 10

[workload]
kind = "iometer"
name = "random 8 KiB reads"
workers = 1
outstanding_ios = 16
test_file_mib = 512
fill = true
lines = [
  {{ size_kib = 8, percent = 100, read_percent = 100, random_percent = 100, align_kib = 8 }},
]

[[array]]
name = "flash"
kind = "wafer"
drive = "fc15k-144g"
raid_type = "raid_dp"
raid_size = 8
disks = 8
cache_mib = 16
volume_gib = 1
lun_mib = 512
{flash_keys}

[[array]]
name = "plain"
kind = "wafer"
drive = "fc15k-144g"
raid_type = "raid_dp"
raid_size = 8
disks = 8
cache_mib = 16
volume_gib = 1
lun_mib = 512
"#
    )
}

/// The Flash Cache table's rows: (segment, lookups/s, hit%, replaced/s, ...).
fn flash_rows(text: &str) -> Vec<Vec<f64>> {
    let table = text
        .split_once("Flash Cache, 1024 MiB:\n")
        .expect("a Flash Cache table")
        .1;
    (table.lines().skip(1))
        .take_while(|line| !line.starts_with("warm"))
        .map(|line| {
            line.split_whitespace()
                .map(|f| f.parse().unwrap())
                .collect()
        })
        .collect()
}

/// The mechanisms table's `disk/op` by segment.
fn disk_ops(text: &str) -> Vec<f64> {
    (text.lines().skip(2))
        .take_while(|line| !line.starts_with("Flash"))
        .map(|line| line.split_whitespace().nth(2).unwrap().parse().unwrap())
        .collect()
}

#[test]
fn the_flash_cache_warms_up_and_takes_reads_off_the_disks() {
    let report = common::run_scenario(&scenario("flash_cache_mib = 1024"));
    let [flash, plain] = &report.arrays[..] else {
        panic!("two arrays");
    };
    let text = mechanisms::render(flash);
    let rows = flash_rows(&text);
    assert_eq!(rows.len(), 4, "{text}");
    let (first, last) = (&rows[0], &rows[3]);
    assert!(last[2] > first[2] + 20.0, "the hit rate rises: {text}");
    assert!(last[3] > 0.0, "reads are answered from flash: {text}");
    assert!(text.contains("warm: replaced/s within 5 %"), "{text}");
    let plain_text = mechanisms::render(plain);
    assert!(!plain_text.contains("Flash Cache"), "{plain_text}");
    let (ops, plain_ops) = (disk_ops(&text), disk_ops(&plain_text));
    assert!(ops[3] < plain_ops[3] / 2.0, "{ops:?} against {plain_ops:?}");
    let (iops, plain_iops) = (flash.segments[3].iops, plain.segments[3].iops);
    assert!(iops > 2.0 * plain_iops, "{iops} against {plain_iops} IOPS");
}

#[test]
fn flash_cache_keys_are_checked() {
    let catalog = Catalog::builtin().unwrap();
    for (keys, complaint) in [
        ("flash_cache_mib = 0", "1 to"),
        ("flash_cache_mib = 99999999", "1 to"),
        (
            "flash_cache_mib = 64\nflash_cache_drive = \"fc15k-144g\"",
            "not an SSD",
        ),
        ("flash_cache_lopri = true", "without a Flash Cache"),
    ] {
        let error = Scenario::parse(&scenario(keys), &catalog)
            .err()
            .unwrap_or_else(|| panic!("`{keys}` was taken"));
        assert!(error.to_string().contains(complaint), "{keys}: {error}");
    }
    let ok = Scenario::parse(&scenario("flash_cache_mib = 64"), &catalog);
    assert!(ok.is_ok(), "{:?}", ok.err());
}
