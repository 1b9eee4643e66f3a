//! A volume's cache policy (`scenarios/cache-policy.toml`, `cache =
//! "keep|default|reuse"` per volume) reaches the engine, and changes which
//! blocks the buffer cache gives up: the same skewed reads, with the volume
//! holding the hottest blocks set to `reuse`, are served differently than
//! with both volumes at `default`.

use wafer_core::nvlog::CachePolicy;
use wafer_devices::params::Catalog;
use wafer_lab::report::ArrayReport;
use wafer_lab::{Array, ArraySpec, Scenario, WaferArray, WaferSpec, run_each};

const SCENARIO: &str = include_str!("../../../scenarios/cache-policy.toml");

/// The array of `spec` as built, and its run of the scenario.
fn build_and_run(
    scenario: &Scenario,
    spec: &WaferSpec,
) -> (Vec<(String, CachePolicy)>, ArrayReport) {
    let catalog = Catalog::builtin().unwrap();
    // 2 GiB of each disk: the engine's maps stay small.
    let array = WaferArray::short_stroked(spec, &catalog, 1 << 19).expect("builds");
    let policies = array.cache_policies();
    let mut arrays: Vec<Box<dyn Array>> = vec![Box::new(array)];
    let report = run_each(
        &mut arrays,
        &scenario.workloads(),
        &scenario.run,
        &mut |_| {},
    );
    let report = report.expect("runs").arrays.into_iter().next().unwrap();
    (policies, report)
}

/// Cache hits and misses over the measured segments.
fn hits_and_misses(report: &ArrayReport) -> (u64, u64) {
    let first = report.engine_snapshots.first().unwrap();
    let last = report.engine_snapshots.last().unwrap();
    (
        last.cache_hits - first.cache_hits,
        last.cache_misses - first.cache_misses,
    )
}

#[test]
fn a_volumes_cache_policy_reaches_the_engine_and_changes_what_the_cache_keeps() {
    let catalog = Catalog::builtin().unwrap();
    let scenario = Scenario::parse(SCENARIO, &catalog).expect("the example parses");
    let ArraySpec::Wafer(reuse) = &scenario.arrays[0].spec else {
        panic!("a wafer array");
    };
    let mut default = reuse.clone();
    default.volumes[0].cache_policy = CachePolicy::Default;
    let (policies, with_reuse) = build_and_run(&scenario, reuse);
    assert_eq!(
        policies,
        [
            ("hot".to_string(), CachePolicy::Reuse),
            ("cold".to_string(), CachePolicy::Default)
        ]
    );
    let (policies, with_default) = build_and_run(&scenario, &default);
    assert!(policies.iter().all(|(_, p)| *p == CachePolicy::Default));
    let reuse = hits_and_misses(&with_reuse);
    let default = hits_and_misses(&with_default);
    assert!(
        reuse.0 < default.0,
        "cache hits {} with reuse on the hot volume, {} at default",
        reuse.0,
        default.0
    );
}
