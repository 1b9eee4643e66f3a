//! `contrib/wafer.service`, the systemd unit: `systemd-analyze verify`
//! accepts it (with its `ExecStart` pointed at the binary under test, since
//! verify wants the command to exist), it is `Type=notify` (the server sends
//! `READY=1`; `serve_sd_notify`), and every flag its `ExecStart` gives
//! `wafer serve` is one `wafer serve` has.

use std::path::Path;
use std::process::Command;

const UNIT: &str = include_str!("../../../contrib/wafer.service");
const INSTALLED: &str = "/usr/local/bin/wafer";

fn exec_start() -> &'static str {
    UNIT.lines()
        .find_map(|line| line.strip_prefix("ExecStart="))
        .expect("an ExecStart line")
}

#[test]
fn systemd_analyze_verifies_the_unit() {
    let scratch = tempfile::tempdir().expect("a scratch directory");
    let unit = scratch.path().join("wafer.service");
    let binary = env!("CARGO_BIN_EXE_wafer");
    std::fs::write(&unit, UNIT.replace(INSTALLED, binary)).expect("the unit copied");
    let output = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(&unit)
        .output()
        .unwrap_or_else(|e| {
            panic!("systemd-analyze could not be run ({e}); install systemd (scripts/test does)")
        });
    assert!(
        output.status.success() && output.stderr.is_empty(),
        "systemd-analyze verify: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn the_unit_waits_for_ready_and_passes_flags_wafer_serve_has() {
    assert!(UNIT.lines().any(|l| l == "Type=notify"));
    let command = exec_start();
    assert!(
        command.starts_with(&format!("{INSTALLED} serve ")),
        "{command}"
    );
    let help = Command::new(env!("CARGO_BIN_EXE_wafer"))
        .args(["serve", "--help"])
        .output()
        .expect("wafer runs");
    let help = String::from_utf8_lossy(&help.stdout);
    for flag in command.split(' ').filter(|word| word.starts_with("--")) {
        assert!(
            help.contains(&format!("{flag} ")),
            "wafer serve has no {flag}"
        );
    }
    let data = command
        .split(' ')
        .skip_while(|w| *w != "--data")
        .nth(1)
        .expect("--data DIR");
    let state = UNIT
        .lines()
        .find_map(|l| l.strip_prefix("StateDirectory="))
        .expect("a StateDirectory");
    assert_eq!(Path::new(data), Path::new("/var/lib").join(state));
}
