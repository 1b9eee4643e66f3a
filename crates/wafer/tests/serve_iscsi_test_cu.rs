//! libiscsi's conformance suite, `iscsi-test-cu`, against `wafer serve`:
//! the suites wafer passes (SCSI block commands, persistent reservations
//! and the iSCSI family: CmdSN, DataSN, residuals, task management) must
//! keep passing, each in its own process, and none by skipping a command
//! as not implemented (CUnit counts a skipped test as passed). The
//! multipath suite and the reservation suites that need a second initiator
//! get two sessions to the same LUN. The negative control runs a test
//! wafer is known to fail (GetLBAStatus.UnmapSingle, see docs/SERVER.md)
//! and must see the failure counted, so a suite whose summary is misread
//! cannot pass unnoticed.

mod serve_harness;

use serve_harness::{Scratch, TEST_SIZES, client, serve_with};

/// The suites that must pass, with how many tests each runs.
const PASSING: &[(&str, u32)] = &[
    ("SCSI.Inquiry.*", 7),
    ("SCSI.ReadCapacity10.*", 1),
    ("SCSI.ReadCapacity16.*", 4),
    ("SCSI.Read6.*", 2),
    ("SCSI.Read10.*", 6),
    ("SCSI.Read12.*", 5),
    ("SCSI.Read16.*", 5),
    ("SCSI.Write10.*", 6),
    ("SCSI.Write12.*", 5),
    ("SCSI.Write16.*", 5),
    ("SCSI.WriteVerify10.*", 6),
    ("SCSI.WriteVerify12.*", 6),
    ("SCSI.WriteVerify16.*", 6),
    ("SCSI.Verify10.*", 8),
    ("SCSI.Verify12.*", 8),
    ("SCSI.Verify16.*", 8),
    ("SCSI.Prefetch10.*", 4),
    ("SCSI.Prefetch16.*", 4),
    ("SCSI.CompareAndWrite.*", 5),
    ("SCSI.PrinReadKeys.*", 2),
    ("SCSI.PrinServiceactionRange.*", 1),
    ("SCSI.PrinReportCapabilities.*", 1),
    ("SCSI.ProutRegister.*", 1),
    ("SCSI.ProutReserve.*", 13),
    ("SCSI.ProutClear.*", 1),
    ("SCSI.ProutPreempt.*", 1),
    ("SCSI.MultipathIO.*", 4),
    ("SCSI.WriteSame10.*", 10),
    ("SCSI.WriteSame16.*", 10),
    ("SCSI.Unmap.*", 3),
    ("SCSI.ModeSense6.*", 5),
    ("SCSI.ReportSupportedOpcodes.*", 4),
    ("SCSI.TestUnitReady.*", 1),
    ("SCSI.GetLBAStatus.Simple", 1),
    ("SCSI.GetLBAStatus.BeyondEol", 1),
    ("iSCSI.iSCSIcmdsn.*", 2),
    ("iSCSI.iSCSIdatasn.*", 1),
    ("iSCSI.iSCSIResiduals.*", 10),
    ("iSCSI.iSCSITMF.*", 2),
];

/// Runs one pattern over two sessions to the LUN at `uri` (the second is
/// used by the multipath and reservation tests); returns (ran, passed,
/// failed) from CUnit's summary, with a skip for a command found missing
/// counted as a failure.
fn run(uri: &str, pattern: &str) -> (u32, u32, u32) {
    let test = format!("--test={pattern}");
    let output = client("iscsi-test-cu", &["--dataloss", &test, uri, uri]);
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    // libiscsi calls REPORT SUPPORTED OPERATION CODES "not implemented"
    // whenever it answers INVALID FIELD IN CDB, even where the test expects
    // that (reporting options 2 for an opcode without service actions).
    let missing = text
        .lines()
        .filter(|l| l.contains("not implemented") || l.contains("Not Supported"))
        .filter(|l| !l.contains("REPORT_SUPPORTED_OPCODES"))
        .count() as u32;
    let counts = text
        .lines()
        .find_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            (fields.first() == Some(&"tests")).then(|| {
                let n = |i: usize| fields[i].parse::<u32>().expect("a count");
                (n(2), n(3), n(4))
            })
        })
        .unwrap_or_else(|| panic!("no CUnit summary for {pattern}:\n{text}"));
    assert!(counts.0 > 0, "{pattern} ran nothing:\n{text}");
    (
        counts.0,
        counts.1.saturating_sub(missing),
        counts.2 + missing,
    )
}

#[test]
fn iscsi_test_cu_suites_pass() {
    let scratch = Scratch::new();
    let mut args = TEST_SIZES.to_vec();
    args.extend(["--iscsi", "127.0.0.1:0"]);
    let server = serve_with(&scratch, &args);
    serve_harness::iscsi::admit_test_initiators(&scratch.data());
    let uri = server.iscsi_uri();
    let mut failures = Vec::new();
    for &(pattern, tests) in PASSING {
        let (ran, passed, failed) = run(&uri, pattern);
        if (ran, passed, failed) != (tests, tests, 0) {
            failures.push(format!(
                "{pattern}: ran {ran}, passed {passed}, failed {failed}"
            ));
        }
    }
    assert!(failures.is_empty(), "iscsi-test-cu: {failures:#?}");
    // The negative control: a known failure is counted as one.
    let (_, _, failed) = run(&uri, "SCSI.GetLBAStatus.UnmapSingle");
    assert_eq!(failed, 1, "the summary is not being read");
    server.stop();
}
