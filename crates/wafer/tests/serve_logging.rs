//! The server's log on standard error: levels, `RUST_LOG` filters and
//! `--log-format json`.
//!
//! A data directory made by `mkdir` (mode 0755) gives a deterministic
//! warning at start (it is made owner-only), beside the info lines every
//! start and stop writes (`created aggregate aggr0`, `final CP committed`).
//! `RUST_LOG=warn` keeps the warning and drops every info line;
//! `--log-format json` writes one JSON object a line, each with its time,
//! level, module and message; an unreadable `RUST_LOG` is refused before
//! anything is made.

mod serve_harness;

use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use serve_harness::{Scratch, TEST_SIZES, serve_with, serve_with_env};

/// The data directory, made as `mkdir` makes it: open to others.
fn open_data_dir(scratch: &Scratch) {
    std::fs::DirBuilder::new()
        .mode(0o755)
        .create(scratch.data())
        .expect("a data directory");
    std::fs::set_permissions(scratch.data(), std::fs::Permissions::from_mode(0o755))
        .expect("mode 0755 whatever the umask");
}

const OPEN_WARNING: &str = "was mode 0755, open to other users: set to 0700";

#[test]
fn text_lines_carry_time_level_and_module() {
    let scratch = Scratch::new();
    open_data_dir(&scratch);
    let server = serve_with(&scratch, &TEST_SIZES);
    let log = server.log();
    let warning = log
        .lines()
        .find(|l| l.contains(OPEN_WARNING))
        .unwrap_or_else(|| panic!("no warning about the mode:\n{log}"));
    let created = log
        .lines()
        .find(|l| l.contains("created aggregate aggr0"))
        .unwrap_or_else(|| panic!("no creation line:\n{log}"));
    for (line, level) in [(warning, "WARN"), (created, "INFO")] {
        let (stamp, rest) = line.split_once(' ').expect("a timestamp first");
        assert_eq!(stamp.len(), "2026-05-01T12:34:56.789Z".len(), "{line}");
        assert!(
            stamp.ends_with('Z') && stamp.as_bytes()[10] == b'T',
            "{line}"
        );
        assert_eq!(rest.split_whitespace().next(), Some(level), "{line}");
        assert!(rest.contains(" wafer_server::"), "the module: {line}");
    }
    server.stop();
}

#[test]
fn rust_log_warn_keeps_warnings_and_drops_info() {
    let scratch = Scratch::new();
    open_data_dir(&scratch);
    let server = serve_with_env(&scratch, &TEST_SIZES, &[("RUST_LOG", "warn")]);
    server.terminate();
    let (status, log) = server.wait_exit(Duration::from_secs(60));
    assert!(status.success(), "{status}:\n{log}");
    assert!(log.contains(OPEN_WARNING), "the warning stays:\n{log}");
    assert!(
        !log.contains(" INFO "),
        "info lines are filtered out:\n{log}"
    );
    assert!(!log.contains("final CP committed"), "{log}");
    assert!(!log.contains("created aggregate"), "{log}");
}

#[test]
fn a_directive_per_module_filters_that_module() {
    let scratch = Scratch::new();
    open_data_dir(&scratch);
    // The mode warning comes from wafer_server::access: errors only there.
    let filter = "info,wafer_server::access=error";
    let server = serve_with_env(&scratch, &TEST_SIZES, &[("RUST_LOG", filter)]);
    let log = server.log();
    assert!(!log.contains(OPEN_WARNING), "{log}");
    assert!(log.contains("created aggregate aggr0"), "{log}");
    server.stop();
}

#[test]
fn json_lines_parse_with_time_level_module_and_message() {
    let scratch = Scratch::new();
    open_data_dir(&scratch);
    let mut args = TEST_SIZES.to_vec();
    args.extend(["--log-format", "json"]);
    let server = serve_with(&scratch, &args);
    server.terminate();
    let (status, log) = server.wait_exit(Duration::from_secs(60));
    assert!(status.success(), "{status}:\n{log}");
    let events: Vec<Value> = log
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect();
    for event in &events {
        for field in ["timestamp", "level", "target", "message"] {
            assert!(event[field].is_string(), "{field} missing: {event}");
        }
    }
    let find = |text: &str| {
        events
            .iter()
            .find(|e| e["message"].as_str().is_some_and(|m| m.contains(text)))
            .unwrap_or_else(|| panic!("no event with {text:?}:\n{log}"))
    };
    assert_eq!(find(OPEN_WARNING)["level"], "WARN");
    assert_eq!(find("created aggregate aggr0")["level"], "INFO");
    let stopped = find("final CP committed");
    assert_eq!(stopped["level"], "INFO");
    assert_eq!(stopped["target"], "wafer_server::engine");
    assert!(
        stopped["timestamp"]
            .as_str()
            .is_some_and(|t| t.ends_with('Z'))
    );
}

#[test]
fn an_unreadable_rust_log_is_refused_before_anything_is_made() {
    let scratch = Scratch::new();
    let mut child = Command::new(env!("CARGO_BIN_EXE_wafer"))
        .arg("serve")
        .arg("--data")
        .arg(scratch.data())
        .arg("--socket")
        .arg(scratch.socket())
        .env("RUST_LOG", "wafer_server=loudest")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("wafer runs");
    // A server that took the filter would serve on: stop it, and fail.
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().expect("pollable").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("wafer serve started with an unreadable RUST_LOG");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let output = child.wait_with_output().expect("its output");
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.starts_with("wafer: RUST_LOG: "), "{stderr}");
    assert!(!scratch.data().exists(), "nothing was made");
}
