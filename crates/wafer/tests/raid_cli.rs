//! `wafer raid`: the self-check passes on a sound build and fails when its
//! negative control corrupts data, and bad usage gets a clear error.

use std::process::{Command, Output};

fn wafer(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wafer"))
        .args(args)
        .output()
        .expect("the wafer binary runs")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn raid_check_passes_for_every_raid_dp_size() {
    let output = wafer(&["raid", "check", "-t", "raid_dp", "--stripes", "1"]);
    assert!(output.status.success(), "{}", stdout(&output));
    let text = stdout(&output);
    assert!(
        text.contains("raid check passed: 26 group geometries"),
        "{text}"
    );
    // 28 disks: 28 single and 378 double failures, 3276 triples refused.
    assert!(
        text.contains("raid_dp     28       406      3276"),
        "{text}"
    );
}

#[test]
fn raid_check_fails_when_its_negative_control_corrupts_a_survivor() {
    let output = wafer(&[
        "raid",
        "check",
        "-t",
        "raid4",
        "-r",
        "5",
        "--negative-control",
    ]);
    assert_eq!(output.status.code(), Some(1), "{}", stdout(&output));
    let text = stdout(&output);
    assert!(text.contains("raid check FAILED"), "{text}");
    assert!(
        text.contains(
            "replay: wafer raid check --seed 1 --stripes 4 -t raid4 -r 5 --negative-control"
        ),
        "{text}"
    );
}

#[test]
fn raid_layout_maps_data_disks_to_consecutive_block_ranges() {
    let output = wafer(&["raid", "layout", "-r", "5", "--disk-size", "16k"]);
    assert!(output.status.success());
    let text = stdout(&output);
    for line in [
        "dparity   0        -",
        "parity    1        -",
        "data      2        0..=3",
        "data      4        8..=11",
    ] {
        assert!(text.contains(line), "missing {line:?} in\n{text}");
    }
}

#[test]
fn bad_usage_is_refused_with_a_reason() {
    let too_wide = wafer(&["raid", "layout", "-t", "raid4", "-r", "15"]);
    assert_eq!(too_wide.status.code(), Some(2));
    let message = String::from_utf8_lossy(&too_wide.stderr);
    assert!(
        message.contains("raid4 group size 15 is out of range 2..=14"),
        "{message}"
    );

    let bad_size = wafer(&["raid", "layout", "--disk-size", "12x"]);
    assert_eq!(bad_size.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad_size.stderr).contains("unknown size suffix"));

    let no_blocks = wafer(&["raid", "layout", "--disk-size", "100"]);
    assert_eq!(no_blocks.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&no_blocks.stderr).contains("at least one block"));

    let unknown = wafer(&["raid", "rebuild"]);
    assert_eq!(unknown.status.code(), Some(2));
}
