//! Workload files read by path: the `.icf` and fio examples in
//! `scenarios/` parse, E1's workload read from an `.icf` file is E1's
//! workload written inline, and a job file by path is the same job inline.

use std::path::Path;

use wafer_core::units::Duration;
use wafer_devices::params::Catalog;
use wafer_lab::scenario::{Scenario, ScenarioError};

const SCENARIOS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios");

/// Reads a file the way the CLI does: relative to the scenarios directory.
fn read(path: &str) -> Result<String, String> {
    std::fs::read_to_string(Path::new(SCENARIOS).join(path)).map_err(|error| error.to_string())
}

fn parse(text: &str) -> Result<Scenario, ScenarioError> {
    Scenario::parse_with_files(text, &Catalog::builtin().unwrap(), &read)
}

fn scenario_text(name: &str) -> String {
    read(name).unwrap()
}

/// E1's scenario with every workload setting its .icf file holds taken
/// out of the TOML, and the file named instead.
fn e1_from_icf() -> String {
    let e1 = scenario_text("e1-fas2050-iometer.toml");
    let lines_at = e1.find("lines = [").unwrap();
    let lines_end = lines_at + e1[lines_at..].find("]\n").unwrap() + 2;
    let mut text = format!(
        "{}icf_file = \"icf/file-server.icf\"\nsegments = 14\n{}",
        &e1[..lines_at],
        &e1[lines_end..]
    );
    for key in [
        "workers = 1\n",
        "outstanding_ios = 150\n",
        "test_file_gib = 100\n",
        "test_file_offset_bytes = 0\n",
        "segments = 14\n",
        "segment_s = 1200\n",
        "ramp_s = 0\n",
    ] {
        assert!(text.contains(key), "E1 sets `{key}`");
        text = text.replacen(key, "", 1);
    }
    text
}

#[test]
fn e1_from_its_icf_file_is_e1() {
    let inline = parse(&scenario_text("e1-fas2050-iometer.toml")).unwrap();
    let text = e1_from_icf();
    assert!(!text.contains("lines =") && !text.contains("segment_s"));
    let from_file = parse(&text).expect("E1 from its .icf file parses");
    assert_eq!(from_file.workload, inline.workload);
    assert_eq!(from_file.workloads(), inline.workloads());
}

#[test]
fn the_icf_example_takes_the_file_and_its_own_overrides() {
    let e1 = parse(&scenario_text("e1-fas2050-iometer.toml")).unwrap();
    let scenario = parse(&scenario_text("icf-file-server.toml")).unwrap();
    let workload = &scenario.workload;
    assert_eq!(workload.lines, e1.workload.lines);
    assert_eq!(workload.workers, 1);
    assert_eq!(workload.outstanding_per_worker, 32);
    assert_eq!(workload.region.length_bytes, Some(512 << 20));
    assert_eq!(workload.timing.segment, Duration::from_secs(1));
    assert_eq!(workload.timing.segments, 2);
    assert!(workload.prepare.fill && !workload.prepare.reallocate);
    assert_eq!(workload.name, "File Server");
}

#[test]
fn a_job_file_by_path_is_the_job_inline() {
    let by_path = scenario_text("fio-job-file.toml");
    let scenario = parse(&by_path).unwrap();
    let job = read("fio/random-8k.fio").unwrap();
    let inline = by_path.replacen(
        "job_file = \"fio/random-8k.fio\"",
        &format!("job = \"\"\"\n{job}\"\"\""),
        1,
    );
    assert_eq!(scenario.workload, parse(&inline).unwrap().workload);
    let workload = &scenario.workload;
    assert_eq!((workload.workers, workload.outstanding_per_worker), (4, 8));
    assert_eq!(workload.lines[0].size_bytes, 8192);
    assert_eq!(workload.lines[0].read_percent, 70);
}

/// The field a refusal names, and its reason.
fn refusal(text: &str) -> (String, String) {
    match parse(text).unwrap_err() {
        ScenarioError::Invalid { field, reason } => (field, reason),
        other => panic!("not a refusal of a field: {other}"),
    }
}

#[test]
fn files_that_cannot_be_read_or_clash_are_refused_by_name() {
    let fio = scenario_text("fio-job-file.toml");
    let (field, reason) = refusal(&fio.replace("fio/random-8k.fio", "fio/nowhere.fio"));
    assert_eq!(field, "workload.job_file");
    assert!(reason.contains("cannot read `fio/nowhere.fio`"), "{reason}");
    let both = fio.replace("job_file =", "job = \"[a]\\nrw=read\\n\"\njob_file =");
    assert_eq!(refusal(&both).0, "workload.job_file");
    let without_files = Scenario::parse(&fio, &Catalog::builtin().unwrap()).unwrap_err();
    assert!(
        matches!(without_files, ScenarioError::Invalid { field, .. } if field == "workload.job_file")
    );

    let icf = scenario_text("icf-file-server.toml");
    let (field, reason) = refusal(&icf.replace("icf/file-server.icf", "icf/none.icf"));
    assert_eq!(field, "workload.icf_file");
    assert!(reason.contains("cannot read `icf/none.icf`"), "{reason}");
    let (field, reason) = refusal(&icf.replace("fill = true", "fill = true\nicf_spec = \"Web\""));
    assert_eq!(field, "workload.icf_spec");
    assert!(reason.contains("`File Server`"), "{reason}");
    let with_lines = icf.replace(
        "fill = true",
        "fill = true\nlines = [{ size_kib = 4, percent = 100, read_percent = 0, random_percent = 0 }]",
    );
    assert_eq!(refusal(&with_lines).0, "workload.icf_file");
}
