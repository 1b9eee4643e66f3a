//! `wafer lab size` reproduces `docs/research/experiments.md` E5's arithmetic exactly;
//! `wafer lab run` runs scenario files into the same reports whatever the
//! number of jobs and wherever the trailers are kept, and refuses bad files
//! and options by name.

use std::fs;
use std::path::Path;
use std::process::Command;

use wafer_devices::params::Catalog;
use wafer_lab::{Array, ArraySpec, InPlaceArray, Scenario, run_each};

/// E1's shape in miniature: two small in-place arrays (so two jobs), two
/// one-second segments on a 1 GiB test file.
const TINY_SCENARIO: &str = r#"
name = "tiny: two in-place arrays"

[run]
seed = 7
segments = 2
segment_s = 1
ramp_s = 0
sysstat_interval_s = 1

[workload]
kind = "iometer"
name = "random 4 KiB, 80 % reads"
outstanding_ios = 16
test_file_gib = 1
lines = [
  { size_kib = 4, percent = 100, read_percent = 80, random_percent = 100, align_kib = 4 },
]

[[array]]
name = "plain"
kind = "in-place"
drive = "fc15k-144g"
disks = 8
stripe_unit_kib = 128
stripe_width = 4
lun_gib = 10

[[array]]
name = "cached"
kind = "in-place"
drive = "fc15k-144g"
disks = 6
stripe_unit_kib = 64
lun_gib = 10
cache_mib = 64
outstanding_ios = 32
"#;

fn wafer(args: &[&str]) -> (bool, String, String) {
    wafer_in(Path::new("."), args)
}

/// Runs wafer with `dir` as its working directory.
fn wafer_in(dir: &Path, args: &[&str]) -> (bool, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_wafer"))
        .current_dir(dir)
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

#[test]
fn commands_without_a_data_directory_refuse_data_rather_than_ignore_it() {
    for args in [
        &["lab", "size", "--disks", "16", "--data", "d"][..],
        &["--data", "d", "lab", "disk"],
        &["raid", "layout", "--data", "d"],
        &["check", "--seeds", "1", "--data", "d"],
    ] {
        let (ok, out, err) = wafer(args);
        assert!(!ok && out.is_empty(), "{args:?}: {out}");
        assert!(
            err.contains("only `serve` and the administrator's"),
            "{args:?}: {err}"
        );
    }
    let (ok, _, err) = wafer(&["lab", "size", "--disks", "16"]);
    assert!(ok, "without --data it runs: {err}");
}

/// A small wafer array: six 15K disks in one RAID-DP group, a 256 MiB test
/// file filled and reallocated, two one-second segments.
const TINY_WAFER_SCENARIO: &str = r#"
name = "tiny: a wafer array"

[run]
seed = 3
segments = 2
segment_s = 1
ramp_s = 0
sysstat_interval_s = 1

[workload]
kind = "iometer"
name = "random 4 KiB, 80 % reads"
outstanding_ios = 16
test_file_mib = 256
fill = true
reallocate = true
lines = [
  { size_kib = 4, percent = 100, read_percent = 80, random_percent = 100, align_bytes = 512 },
]

[[array]]
name = "filer"
kind = "wafer"
drive = "fc15k-144g"
raid_type = "raid_dp"
raid_size = 6
disks = 6
volume_gib = 2
lun_gib = 1
cache_mib = 16
"#;

/// `path` as an argument.
fn arg(path: &Path) -> &str {
    path.to_str().expect("temporary paths are UTF-8")
}

/// The report a sequential `run_each` over the scenario's arrays gives.
fn sequential_report(text: &str) -> String {
    let catalog = Catalog::builtin().unwrap();
    let scenario = Scenario::parse(text, &catalog).unwrap();
    let mut arrays: Vec<Box<dyn Array>> = scenario
        .arrays
        .iter()
        .map(|entry| match &entry.spec {
            ArraySpec::InPlace(spec) => {
                Box::new(InPlaceArray::new(spec, &catalog).unwrap()) as Box<dyn Array>
            }
            ArraySpec::Wafer(_) => unreachable!("the tiny scenario has in-place arrays only"),
        })
        .collect();
    run_each(
        &mut arrays,
        &scenario.workloads(),
        &scenario.run,
        &mut |_| {},
    )
    .unwrap()
    .to_json()
}

#[test]
fn lab_run_writes_the_same_reports_whatever_the_jobs() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("tiny.toml");
    fs::write(&scenario, TINY_SCENARIO).unwrap();
    let mut reports = Vec::new();
    for jobs in ["2", "1"] {
        let out = dir.path().join(format!("jobs-{jobs}"));
        let (ok, stdout, err) = wafer(&[
            "lab",
            "run",
            arg(&scenario),
            "--jobs",
            jobs,
            "--out",
            arg(&out),
        ]);
        assert!(ok, "{err}");
        for expected in [
            "tiny: two in-place arrays (seed 7)",
            "  plain (in-place)",
            "  cached (in-place)",
            "segment       IOPS      MB/s    avg ms    p99 ms",
            "MB/s in 10^6 bytes per second",
        ] {
            assert!(
                stdout.contains(expected),
                "missing '{expected}' in:\n{stdout}"
            );
        }
        assert!(
            stdout.contains(&format!("written to {}", out.display())),
            "{stdout}"
        );
        for name in [
            "chart.svg",
            "plain.fio.json",
            "plain.statit.txt",
            "plain.sysstat.txt",
            "cached.fio.json",
            "cached.statit.txt",
            "cached.sysstat.txt",
        ] {
            let bytes = fs::read(out.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(!bytes.is_empty(), "{name} is empty");
        }
        reports.push(fs::read_to_string(out.join("report.json")).unwrap());
    }
    assert_eq!(reports[0], reports[1], "--jobs 2 and --jobs 1 differ");
    assert_eq!(reports[0], sequential_report(TINY_SCENARIO));
    let report: serde_json::Value = serde_json::from_str(&reports[0]).unwrap();
    let arrays = report["arrays"].as_array().unwrap();
    assert_eq!(arrays.len(), 2);
    for array in arrays {
        let segments = array["segments"].as_array().unwrap();
        assert_eq!(segments.len(), 2, "{}", array["name"]);
        for segment in segments {
            assert!(segment["iops"].as_f64().unwrap() > 0.0, "{segment}");
        }
    }
}

#[test]
fn lab_run_reports_the_same_whether_trailers_stay_in_memory_or_go_to_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("wafer.toml");
    fs::write(&scenario, TINY_WAFER_SCENARIO).unwrap();
    let mut reports = Vec::new();
    for memory in ["0", "1"] {
        let out = dir.path().join(format!("memory-{memory}"));
        let (ok, stdout, err) = wafer(&[
            "lab",
            "run",
            arg(&scenario),
            "--trailer-memory-gib",
            memory,
            "--out",
            arg(&out),
        ]);
        assert!(ok, "{err}");
        assert!(stdout.contains("  filer (wafer)"), "{stdout}");
        reports.push(fs::read_to_string(out.join("report.json")).unwrap());
    }
    assert_eq!(
        reports[0], reports[1],
        "trailers in a file and in memory differ"
    );
    let (ok, _, err) = wafer(&["lab", "run", arg(&scenario), "--trailer-memory-gib=-1"]);
    assert!(!ok);
    assert!(err.contains("--trailer-memory-gib -1"), "{err}");
}

#[test]
fn lab_run_puts_several_scenarios_in_directories_named_after_their_files() {
    let dir = tempfile::tempdir().unwrap();
    for stem in ["a", "b"] {
        fs::write(dir.path().join(format!("{stem}.toml")), TINY_SCENARIO).unwrap();
    }
    let (ok, _, err) = wafer_in(
        dir.path(),
        &[
            "lab", "run", "a.toml", "b.toml", "--out", "results", "--seed", "9",
        ],
    );
    assert!(ok, "{err}");
    for stem in ["a", "b"] {
        let json = fs::read_to_string(dir.path().join("results").join(stem).join("report.json"));
        let report: serde_json::Value = serde_json::from_str(&json.unwrap()).unwrap();
        assert_eq!(report["seed"], 9, "--seed overrides the scenario's");
    }
    let (ok, _, err) = wafer_in(dir.path(), &["lab", "run", "a.toml", "--jobs", "1"]);
    assert!(ok, "{err}");
    assert!(dir.path().join("lab-out/a/report.json").is_file());
}

#[test]
fn lab_run_refuses_a_malformed_scenario_by_file_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("bad.toml");
    let text = TINY_SCENARIO.replace("ramp_s = 0", "ramp_s = 0\nbogus = 1");
    fs::write(&scenario, text).unwrap();
    let (ok, stdout, err) = wafer(&["lab", "run", arg(&scenario)]);
    assert!(!ok, "{stdout}");
    assert!(err.contains(arg(&scenario)), "{err}");
    assert!(err.contains("`run.bogus` is not known"), "{err}");
}

#[test]
fn lab_run_refuses_a_missing_file_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.toml");
    let (ok, stdout, err) = wafer(&["lab", "run", arg(&missing)]);
    assert!(!ok, "{stdout}");
    assert!(
        err.contains(&format!("cannot read scenario {}", missing.display())),
        "{err}"
    );
    assert!(err.contains("No such file"), "{err}");
}

#[test]
fn lab_run_expands_a_sweep_into_points_and_one_summary() {
    let dir = tempfile::tempdir().unwrap();
    let text = format!("{TINY_SCENARIO}\n[sweep]\n\"workload.outstanding_ios\" = [2, 32]\n");
    fs::write(dir.path().join("sweep.toml"), text).unwrap();
    let (ok, stdout, err) = wafer_in(dir.path(), &["lab", "run", "sweep.toml", "--out", "out"]);
    assert!(ok, "{err}");
    let out = dir.path().join("out");
    for point in ["point-01", "point-02"] {
        assert!(out.join(point).join("report.json").is_file(), "{point}");
    }
    let json = fs::read_to_string(out.join("sweep.json")).unwrap();
    let sweep: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(sweep["parameters"][0], "workload.outstanding_ios");
    let points = sweep["points"].as_array().unwrap();
    assert_eq!(points.len(), 2);
    let iops =
        |point: usize, array: usize| points[point]["arrays"][array]["iops"].as_f64().unwrap();
    assert!(iops(1, 0) > iops(0, 0), "a deeper queue, more IOPS: {json}");
    // `cached` sets its own queue depth, which a point leaves alone.
    assert_eq!(iops(1, 1), iops(0, 1), "{json}");
    // The summary's figures are the points' own reports, averaged.
    let report: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(out.join("point-02/report.json")).unwrap())
            .unwrap();
    let segments = report["arrays"][0]["segments"].as_array().unwrap();
    let mean = segments
        .iter()
        .map(|s| s["iops"].as_f64().unwrap())
        .sum::<f64>()
        / 2.0;
    assert!((mean - iops(1, 0)).abs() < 1e-6);
    let table = fs::read_to_string(out.join("sweep.txt")).unwrap();
    assert_eq!(
        table
            .lines()
            .filter(|line| line.contains(" plain "))
            .count(),
        2,
        "{table}"
    );
    assert!(stdout.contains(&table), "the table is printed too");
    assert!(
        stdout.contains("[workload.outstanding_ios = 32]"),
        "{stdout}"
    );
    let chart = fs::read_to_string(out.join("sweep.svg")).unwrap();
    assert_eq!(
        chart.matches("class=\"series\"").count(),
        4,
        "two arrays, two panels"
    );
    assert!(chart.contains(">workload.outstanding_ios</text>"));
}

#[test]
fn lab_run_writes_a_procedure_step_by_step_and_one_summary() {
    let dir = tempfile::tempdir().unwrap();
    let steps = "[[step]]\nkind = \"run\"\n\n[[step]]\nkind = \"repeat\"\ntimes = 2\n\
                 steps = [\"snapshot\", { kind = \"run\", segments = 1 }]\n";
    fs::write(
        dir.path().join("steps.toml"),
        format!("{TINY_SCENARIO}\n{steps}"),
    )
    .unwrap();
    let (ok, stdout, err) = wafer_in(dir.path(), &["lab", "run", "steps.toml", "--out", "out"]);
    assert!(ok, "{err}");
    let out = dir.path().join("out");
    let segments = |step: &str| {
        let text = fs::read_to_string(out.join(step).join("report.json")).unwrap();
        let report: serde_json::Value = serde_json::from_str(&text).unwrap();
        report["arrays"][0]["segments"].as_array().unwrap().len()
    };
    assert_eq!(segments("step-01"), 2, "the scenario's timing");
    assert_eq!(segments("step-02"), 1, "the step's own");
    assert_eq!(segments("step-03"), 1);
    assert!(out.join("step-03/plain.statit.txt").is_file());
    assert!(!out.join("step-04").exists() && !out.join("report.json").exists());
    let table = fs::read_to_string(out.join("procedure.txt")).unwrap();
    assert!(table.contains("after 2 snapshots"), "{table}");
    assert!(stdout.contains(&table), "the table is printed too");
    let json = fs::read_to_string(out.join("procedure.json")).unwrap();
    let summary: serde_json::Value = serde_json::from_str(&json).unwrap();
    let runs = summary["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 3);
    // In-place arrays without a reserved LUN pool refuse each snapshot
    // step, and have no volume to fill.
    let refused: Vec<u64> = (runs.iter())
        .map(|run| run["arrays"][1]["snapshots_refused"].as_u64().unwrap())
        .collect();
    assert_eq!(refused, [0, 1, 2], "{json}");
    assert!(runs[0]["arrays"][0].get("volume_used_percent").is_none());
    let start = |run: usize| runs[run]["arrays"][0]["start_s"].as_f64().unwrap();
    assert!(start(1) >= 2.0 && start(2) >= start(1) + 1.0, "{json}");
    let chart = fs::read_to_string(out.join("procedure.svg")).unwrap();
    assert_eq!(
        chart.matches("class=\"series\"").count(),
        4,
        "two arrays, two panels: {chart}"
    );
}

#[test]
fn lab_run_refuses_a_sweep_point_that_is_no_scenario() {
    let dir = tempfile::tempdir().unwrap();
    let text = format!("{TINY_SCENARIO}\n[sweep]\n\"workload.outstanding_ios\" = [2, 0]\n");
    let scenario = dir.path().join("bad-sweep.toml");
    fs::write(&scenario, text).unwrap();
    let (ok, stdout, err) = wafer(&["lab", "run", arg(&scenario)]);
    assert!(!ok, "{stdout}");
    assert!(err.contains(arg(&scenario)), "{err}");
    assert!(err.contains("at workload.outstanding_ios = 0"), "{err}");
}

#[test]
fn lab_run_reads_a_job_file_beside_the_scenario_and_refuses_a_missing_one() {
    let dir = tempfile::tempdir().unwrap();
    let scenarios = dir.path().join("scenarios");
    fs::create_dir_all(scenarios.join("jobs")).unwrap();
    let job = "[random]\nrw=randread\nbs=4k\niodepth=8\nsize=512m\n";
    fs::write(scenarios.join("jobs/random.fio"), job).unwrap();
    let (head, arrays) = TINY_SCENARIO.split_once("[[array]]").unwrap();
    let (run, _) = head.split_once("[workload]").unwrap();
    let text = format!(
        "{run}[workload]\nkind = \"fio\"\njob_file = \"jobs/random.fio\"\n\n[[array]]{arrays}"
    );
    fs::write(scenarios.join("by-path.toml"), &text).unwrap();
    // Run from the temporary directory: the job file is found beside the
    // scenario, not in the working directory.
    let (ok, stdout, err) = wafer_in(
        dir.path(),
        &["lab", "run", "scenarios/by-path.toml", "--out", "out"],
    );
    assert!(ok, "{err}");
    assert!(stdout.contains("plain (in-place)"), "{stdout}");
    let report = fs::read_to_string(dir.path().join("out/report.json")).unwrap();
    assert!(
        report.contains("\"size_bytes\": 4096"),
        "the job's block size"
    );
    fs::remove_file(scenarios.join("jobs/random.fio")).unwrap();
    let (ok, _, err) = wafer_in(dir.path(), &["lab", "run", "scenarios/by-path.toml"]);
    assert!(!ok);
    assert!(err.contains("workload.job_file"), "{err}");
    assert!(err.contains("random.fio"), "{err}");
}
