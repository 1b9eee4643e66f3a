//! One array's results in fio's JSON output format (`--output-format=json`,
//! device-models.md §3.2), so tools that read fio's output read the lab's.
//!
//! The lab's run is one fio job (with `group_reporting`, its workers are one
//! job): `read` and `write` carry fio's fields for the measured time
//! (`io_bytes`, `io_kbytes`, `bw_bytes` in B/s, `bw` in KiB/s, `iops`,
//! `runtime` in ms, `total_ios`) and the completion latency (`clat_ns`) with
//! fio's default percentile list, keys printed `%f` as fio prints them.
//! `lat_ns` equals `clat_ns`: the lab has no submission latency. Fields fio
//! prints that the lab does not measure (CPU use, `slat_ns`, bandwidth
//! samples) are left out rather than faked.

use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};

use super::{ArrayReport, DirectionReport};

/// The top of a fio JSON document.
#[derive(Serialize)]
struct Document<'a> {
    #[serde(rename = "fio version")]
    version: &'static str,
    jobs: Vec<Job<'a>>,
}

#[derive(Serialize)]
struct Job<'a> {
    jobname: &'a str,
    groupid: u32,
    error: u32,
    #[serde(rename = "job options")]
    options: JobOptions,
    read: Direction,
    write: Direction,
    job_runtime: u64,
}

#[derive(Serialize)]
struct JobOptions {
    numjobs: String,
    iodepth: String,
}

#[derive(Serialize)]
struct Direction {
    io_bytes: u64,
    io_kbytes: u64,
    bw_bytes: u64,
    bw: u64,
    iops: f64,
    runtime: u64,
    total_ios: u64,
    clat_ns: Latency,
    lat_ns: Latency,
}

#[derive(Clone, Serialize)]
struct Latency {
    min: u64,
    max: u64,
    mean: f64,
    stddev: f64,
    #[serde(rename = "N")]
    n: u64,
    percentile: Percentiles,
}

/// fio's percentile object: keys like `"99.000000"`, in list order.
#[derive(Clone)]
struct Percentiles(Vec<(String, u64)>);

impl Serialize for Percentiles {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (key, value) in &self.0 {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

/// `report`'s results as a fio JSON document, pretty-printed, with a final
/// newline.
pub fn render(report: &ArrayReport) -> String {
    let workload = &report.workload;
    let runtime_ms = report.measured_ns() / 1_000_000;
    let document = Document {
        version: concat!("wafer-lab-", env!("CARGO_PKG_VERSION")),
        jobs: vec![Job {
            jobname: &report.name,
            groupid: 0,
            error: 0,
            options: JobOptions {
                numjobs: workload.workers.to_string(),
                iodepth: workload.outstanding_per_worker.to_string(),
            },
            read: direction(&report.read),
            write: direction(&report.write),
            job_runtime: runtime_ms,
        }],
    };
    let mut json = serde_json::to_string_pretty(&document).expect("the document serializes");
    json.push('\n');
    json
}

/// fio's figures for one direction: `iops = 1000 × total_ios / runtime_ms`,
/// `bw_bytes = 1000 × io_bytes / runtime_ms`, `bw = bw_bytes / 1024`.
fn direction(report: &DirectionReport) -> Direction {
    let runtime_ms = (report.runtime_ns / 1_000_000).max(1);
    let bw_bytes = 1000 * report.bytes / runtime_ms;
    let latency = Latency {
        min: report.latency_ns_min,
        max: report.latency_ns_max,
        mean: report.latency_ns_mean,
        stddev: report.latency_ns_stddev,
        n: report.ios,
        percentile: Percentiles(
            report
                .percentiles
                .iter()
                .map(|p| (format!("{:.6}", p.percent), p.latency_ns))
                .collect(),
        ),
    };
    Direction {
        io_bytes: report.bytes,
        io_kbytes: report.bytes / 1024,
        bw_bytes,
        bw: bw_bytes / 1024,
        iops: 1000.0 * report.ios as f64 / runtime_ms as f64,
        runtime: runtime_ms,
        total_ios: report.ios,
        clat_ns: latency.clone(),
        lat_ns: latency,
    }
}
