//! `report.json` has the fields the lab's readers rely on, and the fio JSON
//! has fio's.

use serde_json::Value;
use wafer_lab::report::fio;

mod common;

#[test]
fn report_json_has_arrays_with_segments() {
    let report = common::small_run(1);
    let json: Value = serde_json::from_str(&report.to_json()).unwrap();
    let arrays = json["arrays"].as_array().expect("an `arrays` list");
    assert_eq!(arrays.len(), 2);
    for (array, name) in arrays.iter().zip(["plain", "cached"]) {
        assert_eq!(array["name"], name);
        assert_eq!(array["kind"], "in-place");
        let segments = array["segments"].as_array().expect("a `segments` list");
        assert_eq!(segments.len(), 3);
        for segment in segments {
            for key in ["iops", "mbps", "latency_ms_avg", "latency_ms_p99"] {
                let value = segment[key]
                    .as_f64()
                    .unwrap_or_else(|| panic!("{key} is a number"));
                assert!(value > 0.0, "{name}: {key} = {value}");
            }
            let avg = segment["latency_ms_avg"].as_f64().unwrap();
            let p99 = segment["latency_ms_p99"].as_f64().unwrap();
            assert!(p99 >= avg, "{name}: p99 {p99} below the mean {avg}");
        }
    }
}

#[test]
fn fio_json_has_jobs_with_read_and_write() {
    let report = common::small_run(1);
    let json: Value = serde_json::from_str(&fio::render(&report.arrays[0])).unwrap();
    let job = &json["jobs"][0];
    assert_eq!(job["jobname"], "plain");
    for direction in ["read", "write"] {
        let figures = &job[direction];
        assert!(figures["iops"].as_f64().unwrap() > 0.0);
        assert!(figures["bw"].as_u64().unwrap() > 0);
        let percentiles = figures["clat_ns"]["percentile"].as_object().unwrap();
        assert!(
            percentiles["99.000000"].as_u64().unwrap()
                >= percentiles["50.000000"].as_u64().unwrap()
        );
        assert_eq!(percentiles.len(), 17);
    }
    let read_iops = job["read"]["iops"].as_f64().unwrap();
    let write_iops = job["write"]["iops"].as_f64().unwrap();
    let share = read_iops / (read_iops + write_iops);
    assert!(
        (share - 0.7).abs() < 0.05,
        "reads are {share:.3} of the I/Os"
    );
}
