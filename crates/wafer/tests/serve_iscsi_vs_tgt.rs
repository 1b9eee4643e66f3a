//! The whole of `iscsi-test-cu` against wafer and, in the same run, against
//! tgt (the reference user-space target) serving a raw file of the same
//! size, each over two sessions to the LUN (so the multipath suite and the
//! reservation tests that need a second initiator run): wafer must pass
//! every test tgt passes. The one exception is GetLBAStatus.UnmapSingle,
//! which tgt passes by skipping it (tgt does not claim UNMAP): it expects
//! in its second half the status of LBA i+1 to start at LBA i+8 when a
//! physical block holds 8 logical ones, which no target whose blocks differ
//! in size can pass, wafer's included. The tests wafer passes and tgt does
//! not are printed. tgtd needs root (its control socket lives in
//! /var/run/tgtd).

mod serve_harness;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use serve_harness::tgt::start_tgt;
use serve_harness::{LUN_BYTES, Scratch, TEST_SIZES, serve_with};

/// Tests whose expectation no target with 4 KiB physical blocks can meet.
const TEST_DEFECTS: &[&str] = &["GetLBAStatus.UnmapSingle"];

/// Runs every test against `uri` in `dir`; returns each test's outcome by
/// `Suite.Test`, from CUnit's XML results.
fn run_all(uri: &str, dir: &Path) -> BTreeMap<String, bool> {
    std::fs::create_dir_all(dir).expect("a results directory");
    let output = Command::new("iscsi-test-cu")
        .args(["--dataloss", "--test=ALL", "--xml", uri, uri])
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
    let (tgtd, tgt_uri) = start_tgt(&image, &[]);

    let wafer = run_all(&server.iscsi_uri(), &scratch.file("wafer-results"));
    let tgt = run_all(&tgt_uri, &scratch.file("tgt-results"));
    drop(tgtd);
    let missing: Vec<&String> = tgt
        .iter()
        .filter(|&(test, &passed)| passed && !TEST_DEFECTS.contains(&test.as_str()))
        .filter(|(test, _)| !wafer.get(*test).copied().unwrap_or(false))
        .map(|(test, _)| test)
        .collect();
    let beyond: Vec<&String> = wafer
        .iter()
        .filter(|&(test, &passed)| passed && !tgt.get(test).copied().unwrap_or(false))
        .map(|(test, _)| test)
        .collect();
    let passed = |results: &BTreeMap<String, bool>| results.values().filter(|&&p| p).count();
    println!(
        "of {} tests, wafer passes {}, tgt {}; wafer passes, tgt fails: {beyond:#?}",
        wafer.len(),
        passed(&wafer),
        passed(&tgt)
    );
    assert!(missing.is_empty(), "tgt passes, wafer fails: {missing:#?}");
    server.stop();
}
