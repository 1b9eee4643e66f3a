//! `wafer check`: seeded simulations pass, report what they injected, and are
//! repeatable: the same seed prints the same report. With `--payload stamps`
//! the stamp filer passes with every fault but the crash, and says so.

use std::process::{Command, Output};

fn wafer(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wafer"))
        .args(args)
        .output()
        .expect("the wafer binary runs")
}

#[test]
fn a_few_seeds_pass_with_faults_and_say_which() {
    let output = wafer(&["check", "--seed", "3", "--seeds", "4", "--ops", "400"]);
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{text}");
    assert!(text.contains("check passed: 4 seeds from 3"), "{text}");
    assert!(
        text.contains("faults injected:") && text.contains("crash"),
        "{text}"
    );
}

#[test]
fn the_same_seed_gives_the_same_run() {
    let run = || wafer(&["check", "--seed", "11", "--ops", "500", "-v"]).stdout;
    assert_eq!(run(), run());
}

#[test]
fn bad_options_are_refused() {
    let output = wafer(&["check", "--seeds", "many"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("invalid value"));
}

#[test]
fn stamp_seeds_pass_without_crashes_and_say_so() {
    let output = wafer(&[
        "check",
        "--seed",
        "3",
        "--seeds",
        "4",
        "--ops",
        "400",
        "--payload",
        "stamps",
    ]);
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{text}");
    assert!(
        text.contains("check passed: 4 seeds from 3 on stamps"),
        "{text}"
    );
    assert!(
        text.contains("crashes not injected (a stamp filer does not mount)"),
        "{text}"
    );
    assert!(
        text.contains("faults injected:") && text.contains("bit rot") && !text.contains("crash "),
        "{text}"
    );
}

#[test]
fn the_same_stamp_seed_gives_the_same_run() {
    let run = || {
        wafer(&[
            "check",
            "--seed",
            "11",
            "--ops",
            "500",
            "--payload",
            "stamps",
            "-v",
        ])
        .stdout
    };
    assert_eq!(run(), run());
}

#[test]
fn an_unknown_payload_is_refused() {
    let output = wafer(&["check", "--payload", "words"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("invalid value"));
}
