//! A moving working set (`scenarios/moving-working-set.toml`) is cache
//! friendly: run beside the same load spread uniformly over the LUN, on the
//! same wafer node, its reads find the blocks recent I/Os left in the
//! buffer cache, so it answers faster and does more I/O with the same
//! disks; and the report names the working set.

use wafer_devices::params::Catalog;
use wafer_lab::report::ArrayReport;
use wafer_lab::workload::Distribution;
use wafer_lab::{Array, ArraySpec, Scenario, WaferArray, run_each};

const SCENARIO: &str = include_str!("../../../scenarios/moving-working-set.toml");

/// The scenario's node under `distribution`.
fn run_with(scenario: &Scenario, distribution: Distribution) -> (ArrayReport, String) {
    let catalog = Catalog::builtin().unwrap();
    let ArraySpec::Wafer(spec) = &scenario.arrays[0].spec else {
        panic!("a wafer array");
    };
    // 2 GiB of each disk: the engine's maps stay small.
    let array = WaferArray::short_stroked(spec, &catalog, 1 << 19).expect("builds");
    let mut arrays: Vec<Box<dyn Array>> = vec![Box::new(array)];
    let mut workload = scenario.workload.clone();
    workload.distribution = distribution;
    let report = run_each(&mut arrays, &[workload], &scenario.run, &mut |_| {}).expect("runs");
    let json = report.to_json();
    (report.arrays.into_iter().next().unwrap(), json)
}

#[test]
fn a_moving_working_set_is_served_from_cache_where_a_uniform_load_is_not() {
    let catalog = Catalog::builtin().unwrap();
    let scenario = Scenario::parse(SCENARIO, &catalog).expect("the example parses");
    let moving_set = scenario.workload.distribution;
    assert!(matches!(moving_set, Distribution::Moving(_)));
    let (moving, json) = run_with(&scenario, moving_set);
    let (uniform, _) = run_with(&scenario, Distribution::Uniform);
    for (m, u) in moving.segments.iter().zip(&uniform.segments) {
        assert!(
            m.iops > 2.0 * u.iops,
            "moving {:.0} IOPS against uniform {:.0}",
            m.iops,
            u.iops
        );
    }
    let (m_read, u_read) = (moving.read.latency_ns_mean, uniform.read.latency_ns_mean);
    assert!(
        m_read * 2.0 < u_read,
        "read latency {m_read} ns against {u_read} ns"
    );
    assert!(json.contains("\"sweep_ns\": 600000000000"), "{json}");
}
