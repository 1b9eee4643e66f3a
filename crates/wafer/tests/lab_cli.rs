//! `wafer lab size` reproduces experiments.md E5's arithmetic exactly.

use std::process::Command;

fn wafer(args: &[&str]) -> (bool, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_wafer"))
        .args(args)
        .output()
        .expect("wafer runs");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn lab_size_reproduces_the_e5_sizing_arithmetic() {
    let (ok, out, err) = wafer(&[
        "lab",
        "size",
        "--disks",
        "16",
        "--drive",
        "fc15k-144g",
        "--io-size",
        "4096,65536,131072",
        "--statit",
        "203@1.98,1.37@2.4,0.58@2.09",
    ]);
    assert!(ok, "{err}");
    for expected in [
        "rule of thumb (15K rpm ~220): 220.0 IOPS per disk, 3,520 IOPS",
        "4096 B I/Os:     14,418 KB/s =     14 MB/s",
        "65536 B I/Os:    230,687 KB/s =    231 MB/s",
        "131072 B I/Os:    461,373 KB/s =    461 MB/s",
        "x 16 disks = 26,636 KB/s",
    ] {
        assert!(out.contains(expected), "missing '{expected}' in:\n{out}");
    }
    assert!(out.contains("model (random 4 KiB reads, QD 1"), "{out}");
}

#[test]
fn lab_size_counts_data_disks_of_raid_groups_and_refuses_nonsense() {
    let (ok, out, err) = wafer(&["lab", "size", "--disks", "20", "--raid-size", "16"]);
    assert!(ok, "{err}");
    assert!(
        out.contains("20 disks in raid_dp groups of 16: 16 data disks"),
        "{out}"
    );
    let (ok, _, err) = wafer(&["lab", "size", "--disks", "18", "--raid-size", "16"]);
    assert!(!ok && err.contains("last group of 2"), "{err}");
    let (ok, _, err) = wafer(&["lab", "size", "--disks", "16", "--statit", "1@2"]);
    assert!(!ok && err.contains("three RATE@CHAIN pairs"), "{err}");
    let (ok, _, err) = wafer(&["lab", "size", "--disks", "16", "--drive", "nope"]);
    assert!(!ok && err.contains("no drive `nope`"), "{err}");
}
