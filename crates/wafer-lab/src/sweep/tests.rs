use super::*;
use crate::array::ArrayKind;
use crate::report::{ClassReport, DirectionReport, SegmentReport};

const BASE: &str = r#"
name = "streams"

[run]
seed = 1
segment_s = 2

[workload]
kind = "orion"
num_small = 4
num_large = 1
type = "seq"

[[array]]
name = "node"
kind = "wafer"
drive = "fc15k-144g"
raid_type = "raid_dp"
raid_size = 5
disks = 5
volume_gib = 2
lun_gib = 1
"#;

fn with_sweep(sweep: &str) -> String {
    format!("{BASE}\n[sweep]\n{sweep}\n")
}

fn parse(text: &str) -> Result<Option<Sweep>, ScenarioError> {
    Sweep::parse(text, &Catalog::builtin().unwrap())
}

#[test]
fn a_sweep_expands_to_every_combination_the_first_key_slowest() {
    let text = with_sweep("\"workload.num_large\" = [1, 2, 3]\n\"array[0].cache_mib\" = [16, 64]");
    let sweep = parse(&text).unwrap().expect("a sweep");
    // TOML keeps no order among a table's keys: the paths sort.
    assert_eq!(
        sweep.parameters,
        ["array[0].cache_mib", "workload.num_large"]
    );
    let values: Vec<Vec<&str>> = (sweep.points.iter())
        .map(|p| p.values.iter().map(String::as_str).collect())
        .collect();
    assert_eq!(
        values,
        [
            ["16", "1"],
            ["16", "2"],
            ["16", "3"],
            ["64", "1"],
            ["64", "2"],
            ["64", "3"]
        ]
    );
    for point in &sweep.points {
        let crate::ArraySpec::Wafer(spec) = &point.scenario.arrays[0].spec else {
            panic!("a wafer array");
        };
        assert_eq!(spec.cache_mib.unwrap().to_string(), point.values[0]);
        let streams = point.scenario.workload.large.unwrap().streams;
        assert_eq!(streams.to_string(), point.values[1]);
    }
    assert!(parse(BASE).unwrap().is_none(), "no sweep table, no sweep");
}

#[test]
fn a_sweep_is_refused_where_a_scenario_is_parsed_alone() {
    let text = with_sweep("\"workload.num_large\" = [1, 2]");
    let error = Scenario::parse(&text, &Catalog::builtin().unwrap()).unwrap_err();
    assert!(matches!(error, ScenarioError::Invalid { field, .. } if field == "sweep"));
}

#[test]
fn bad_sweeps_are_refused_naming_the_key_or_the_point() {
    let reason = |sweep: &str| match parse(&with_sweep(sweep)) {
        Err(ScenarioError::Invalid { field, reason }) if field == "sweep" => reason,
        other => panic!("{sweep}: {other:?}"),
    };
    assert!(reason("\"workload.num_large\" = []").contains("an empty list"));
    assert!(reason("\"workload.num_large\" = 3").contains("a list of values"));
    assert!(reason("\"nothing.here\" = [1]").contains("no such table"));
    assert!(reason("\"array[3].disks\" = [1]").contains("no such table"));
    let at_point = reason("\"workload.write\" = [10, 101]");
    assert!(
        at_point.starts_with("at workload.write = 101: "),
        "{at_point}"
    );
    let values = |n: u32| {
        (1..=n)
            .map(|v| v.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let many = format!(
        "\"workload.num_large\" = [{}]\n\"workload.num_small\" = [{}]",
        values(32),
        values(33)
    );
    assert!(reason(&many).contains("at most 1024"));
}

fn segment(iops: f64, latency: f64, ios: u64, large_mbps: f64) -> SegmentReport {
    SegmentReport {
        index: 1,
        start_s: 0.0,
        end_s: 1.0,
        ios,
        read_ios: ios,
        iops,
        mbps: iops / 100.0,
        latency_ms_avg: latency,
        latency_ms_p99: latency * 3.0,
        offered_iops: None,
        small: Some(ClassReport {
            iops: iops / 2.0,
            ..ClassReport::default()
        }),
        large: Some(ClassReport {
            mbps: large_mbps,
            ..ClassReport::default()
        }),
        luns: Vec::new(),
    }
}

fn direction() -> DirectionReport {
    DirectionReport {
        ios: 0,
        bytes: 0,
        runtime_ns: 0,
        latency_ns_min: 0,
        latency_ns_max: 0,
        latency_ns_mean: 0.0,
        latency_ns_stddev: 0.0,
        percentiles: Vec::new(),
    }
}

/// A report of `point` whose one array measured two segments.
fn report_of(point: &SweepPoint) -> LabReport {
    let array = ArrayReport {
        name: "node".into(),
        kind: ArrayKind::Wafer,
        capacity_bytes: 1 << 30,
        workload: point.scenario.workload.clone(),
        segments: vec![
            segment(100.0, 1.0, 100, 50.0),
            segment(300.0, 3.0, 300, 70.0),
        ],
        read: direction(),
        write: direction(),
        intervals: Vec::new(),
        disk_snapshots: Vec::new(),
        engine_snapshots: Vec::new(),
        snapshot_every_ns: None,
        snapshot_counts: Vec::new(),
        snap_sched: None,
        minutes: Vec::new(),
        latency_threshold: None,
    };
    LabReport {
        seed: 1,
        arrays: vec![array],
    }
}

#[test]
fn a_points_figures_join_its_segments() {
    let text = with_sweep("\"workload.num_large\" = [1, 2]");
    let sweep = parse(&text).unwrap().unwrap();
    let reports: Vec<LabReport> = sweep.points.iter().map(report_of).collect();
    let report = SweepReport::new("streams", &sweep, &reports);
    let figures = &report.points[1].arrays[0];
    assert_eq!(report.points[1].values, ["2"]);
    assert_eq!(figures.iops, 200.0);
    assert_eq!(figures.mbps, 2.0);
    assert_eq!(
        figures.latency_ms_avg, 2.5,
        "weighted by each segment's I/Os"
    );
    assert_eq!(figures.latency_ms_p99, 9.0, "the highest segment's");
    assert_eq!(figures.small_iops, Some(100.0));
    assert_eq!(figures.large_mbps, Some(60.0));
    let table = report.render();
    assert!(table.starts_with("streams: 2 points\n"), "{table}");
    assert!(table.contains("workload.num_large  array"), "{table}");
    assert!(table.contains("large MB/s"), "{table}");
    assert!(report.to_json().contains("\"large_mbps\": 60.0"));
}
