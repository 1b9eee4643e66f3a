//! The whole of `iscsi-test-cu` against wafer and, in the same run, against
//! tgt (the reference user-space target) serving a raw file of the same
//! size: wafer must pass every test tgt passes. The one exception is
//! libiscsi's own defect: a COMPARE AND WRITE test that finds the command
//! unsupported (wafer's case, not tgt's) leaves a hook that sets byte 13 of
//! every later CDB, failing every later 16-byte READ, WRITE and WRITE SAME
//! test of the run; each of those must then pass in a run of its own. And
//! GetLBAStatus.UnmapSingle, which tgt passes by skipping it (tgt does not
//! claim UNMAP), expects in its second half the status of LBA i+1 to start
//! at LBA i+8 when a physical block holds 8 logical ones: no target whose
//! blocks differ in size can pass it, wafer's included.
//! tgtd needs root (its control socket lives in /var/run/tgtd).

mod serve_harness;

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serve_harness::{LUN_BYTES, Scratch, TEST_SIZES, client, client_ok, serve_with};

/// Tests the leaked CDB hook fails after COMPARE AND WRITE is found missing.
const LEAK_AFFECTED: &[&str] = &[
    "ExtendedCopy.Simple",
    "Read16.Simple",
    "Read16.BeyondEol",
    "Write16.Simple",
    "Write16.BeyondEol",
    "WriteSame16.Simple",
    "WriteSame16.BeyondEol",
    "WriteSame16.ZeroBlocks",
    "WriteSame16.Unmap",
    "WriteSame16.UnmapUntilEnd",
    "WriteSame16.Check",
    "iSCSIResiduals.Read16Residuals",
    "iSCSIResiduals.Write16Residuals",
];

/// Tests whose expectation no target with 4 KiB physical blocks can meet.
const TEST_DEFECTS: &[&str] = &["GetLBAStatus.UnmapSingle"];

/// tgtd in the foreground, killed when dropped.
struct Tgtd {
    child: Child,
    control: String,
}

impl Drop for Tgtd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().expect("bound").port()
}

fn tgtadm(control: &str, args: &[&str]) -> std::process::Output {
    let mut all = vec!["-C", control, "--lld", "iscsi"];
    all.extend(args);
    client("tgtadm", &all)
}

/// Starts tgtd on a free port with one LUN (1) backed by `image`; returns
/// it and its URI.
fn start_tgt(image: &Path) -> (Tgtd, String) {
    let port = free_port();
    let control = (port % 1000 + 1000).to_string();
    let portal = format!("portal=127.0.0.1:{port}");
    let child = Command::new("tgtd")
        .args(["-f", "--iscsi", &portal, "-C", &control])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("tgtd runs (scripts/test installs tgt)");
    let tgtd = Tgtd { child, control };
    let deadline = Instant::now() + Duration::from_secs(10);
    while !tgtadm(&tgtd.control, &["--op", "show", "--mode", "target"])
        .status
        .success()
    {
        assert!(
            Instant::now() < deadline,
            "tgtd did not come up (it needs root)"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let iqn = "iqn.2026-11.org.wafer:tgt-reference";
    let image = image.to_str().expect("a UTF-8 path");
    for args in [
        vec!["--op", "new", "--mode", "target", "--tid", "1", "-T", iqn],
        vec![
            "--op",
            "new",
            "--mode",
            "logicalunit",
            "--tid",
            "1",
            "--lun",
            "1",
            "-b",
            image,
        ],
        vec![
            "--op", "bind", "--mode", "target", "--tid", "1", "-I", "ALL",
        ],
    ] {
        let output = tgtadm(&tgtd.control, &args);
        assert!(output.status.success(), "tgtadm {args:?}: {output:?}");
    }
    (tgtd, format!("iscsi://127.0.0.1:{port}/{iqn}/1"))
}

/// Runs every test against `uri` in `dir`; returns each test's outcome by
/// `Suite.Test`, from CUnit's XML results.
fn run_all(uri: &str, dir: &Path) -> BTreeMap<String, bool> {
    std::fs::create_dir_all(dir).expect("a results directory");
    let output = Command::new("iscsi-test-cu")
        .args(["--dataloss", "--test=ALL", "--xml", uri])
        .current_dir(dir)
        .output()
        .expect("iscsi-test-cu runs");
    let xml = std::fs::read_to_string(dir.join("CUnitAutomated-Results.xml"))
        .unwrap_or_else(|_| panic!("no results from {uri}: {output:?}"));
    let mut results = BTreeMap::new();
    for suite in xml.split("<SUITE_NAME> ").skip(1) {
        let name = suite.split(" </SUITE_NAME>").next().expect("a suite name");
        for (n, test) in suite.split("<TEST_NAME> ").enumerate().skip(1) {
            let before = suite.split("<TEST_NAME> ").nth(n - 1).expect("before");
            let passed = before.trim_end().ends_with("<CUNIT_RUN_TEST_SUCCESS>");
            let test = test.split(" </TEST_NAME>").next().expect("a test name");
            let key = format!("{name}.{test}");
            let earlier = results.get(&key).copied().unwrap_or(true);
            results.insert(key, earlier && passed);
        }
    }
    assert!(results.len() > 200, "{uri}: only {} tests", results.len());
    results
}

#[test]
fn wafer_passes_every_iscsi_test_cu_test_tgt_passes() {
    let scratch = Scratch::new();
    let mut args = TEST_SIZES.to_vec();
    args.extend(["--iscsi", "127.0.0.1:0"]);
    let server = serve_with(&scratch, &args);
    serve_harness::iscsi::admit_test_initiators(&scratch.data());
    let image = scratch.file("tgt.raw");
    std::fs::File::create(&image)
        .and_then(|f| f.set_len(LUN_BYTES))
        .expect("tgt's backing file");
    let (tgtd, tgt_uri) = start_tgt(&image);

    let wafer = run_all(&server.iscsi_uri(), &scratch.file("wafer-results"));
    let tgt = run_all(&tgt_uri, &scratch.file("tgt-results"));
    drop(tgtd);
    let mut missing = Vec::new();
    for (test, &passed) in &tgt {
        let wafer_passed = wafer.get(test).copied().unwrap_or(false);
        if !passed || wafer_passed || TEST_DEFECTS.contains(&test.as_str()) {
            continue;
        }
        if !LEAK_AFFECTED.contains(&test.as_str()) {
            missing.push(test.clone());
            continue;
        }
        // Run alone, away from the leaked hook, it must pass.
        let family = if test.starts_with("iSCSI") {
            "iSCSI"
        } else {
            "SCSI"
        };
        let alone = client_ok(
            "iscsi-test-cu",
            &[
                "--dataloss",
                &format!("--test={family}.{test}"),
                &server.iscsi_uri(),
            ],
        );
        let summary = alone.lines().find(|l| l.trim_start().starts_with("tests"));
        let fields: Vec<&str> = summary.unwrap_or("").split_whitespace().collect();
        if fields.get(4) != Some(&"0") || fields.get(2) == Some(&"0") {
            missing.push(format!("{test} (alone: {summary:?})"));
        }
    }
    assert!(missing.is_empty(), "tgt passes, wafer fails: {missing:#?}");
    server.stop();
}
