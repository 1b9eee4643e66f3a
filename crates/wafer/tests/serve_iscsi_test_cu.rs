//! libiscsi's conformance suite, `iscsi-test-cu`, against `wafer serve`:
//! the suites wafer passes (SCSI block commands and the iSCSI family:
//! CmdSN, DataSN, residuals, task management) must keep passing. Each
//! suite runs in its own process: one test of the suite (COMPARE AND
//! WRITE's InvalidDataOutSize) leaves a PDU hook behind when the target
//! lacks the command, which would corrupt every later 16-byte CDB of the
//! same run. The negative control runs a test wafer is known to fail
//! (GetLBAStatus.UnmapSingle, see docs/SERVER.md) and must see the failure
//! counted, so a suite whose summary is misread cannot pass unnoticed.

mod serve_harness;

use serve_harness::{Scratch, TEST_SIZES, client, serve_with};

/// The suites that must pass, with how many tests each runs.
const PASSING: &[(&str, u32)] = &[
    ("SCSI.Inquiry.*", 7),
    ("SCSI.ReadCapacity10.*", 1),
    ("SCSI.ReadCapacity16.*", 4),
    ("SCSI.Read6.*", 2),
    ("SCSI.Read10.*", 6),
    ("SCSI.Read16.*", 5),
    ("SCSI.Write10.*", 6),
    ("SCSI.Write16.*", 5),
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

/// Runs one pattern; returns (ran, passed, failed) from CUnit's summary.
fn run(uri: &str, pattern: &str) -> (u32, u32, u32) {
    let test = format!("--test={pattern}");
    let output = client("iscsi-test-cu", &["--dataloss", &test, uri]);
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
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
    counts
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
