//! A workload over several LUNs at once, each confined to its first 25 %
//! (`scenarios/active-data-set.toml`): the array reports its LUNs, the
//! prepare step fills exactly the three active parts, the run answers
//! reads and writes in every segment, and each LUN's share of the I/Os is
//! its active part's share of the address space (1 : 2 : 1).

use wafer_devices::params::Catalog;
use wafer_lab::array::Extent;
use wafer_lab::report::luns;
use wafer_lab::{Array, ArraySpec, Progress, Scenario, WaferArray, run_each};

const SCENARIO: &str = include_str!("../../../scenarios/active-data-set.toml");

#[test]
fn three_luns_active_parts_are_filled_and_addressed() {
    let catalog = Catalog::builtin().unwrap();
    let scenario = Scenario::parse(SCENARIO, &catalog).expect("the example parses");
    let ArraySpec::Wafer(spec) = &scenario.arrays[0].spec else {
        panic!("a wafer array");
    };
    // 2 GiB of each disk: the engine's maps stay small.
    let array = WaferArray::short_stroked(spec, &catalog, 1 << 19).expect("builds");
    let mib = 1 << 20;
    assert_eq!(array.lun_bytes(), [256 * mib, 512 * mib, 256 * mib]);
    let plan = scenario.workload.prepare_plan(&array.lun_bytes()).unwrap();
    let part = |offset, length| Extent { offset, length };
    assert_eq!(
        plan.fill,
        [
            part(0, 64 * mib),
            part(256 * mib, 128 * mib),
            part(768 * mib, 64 * mib)
        ]
    );
    let mut arrays: Vec<Box<dyn Array>> = vec![Box::new(array)];
    let report = run_each(
        &mut arrays,
        &scenario.workloads(),
        &scenario.run,
        &mut |_: Progress| {},
    )
    .expect("runs");
    let array = &report.arrays[0];
    assert!(
        array
            .segments
            .iter()
            .all(|s| s.read_ios > 0 && s.ios > s.read_ios)
    );
    for segment in &array.segments {
        let ios: Vec<u64> = segment.luns.iter().map(|lun| lun.ios).collect();
        assert_eq!(ios.len(), 3);
        assert_eq!(
            ios.iter().sum::<u64>(),
            segment.ios,
            "every I/O counted once"
        );
        for (lun, expected) in ios.iter().zip([0.25, 0.5, 0.25]) {
            let share = *lun as f64 / segment.ios as f64;
            assert!((share - expected).abs() < 0.03, "{ios:?}");
        }
    }
    let table = luns::render(array).expect("three LUNs, a table");
    assert_eq!(
        table.lines().count(),
        2 + 3 * array.segments.len() + 1,
        "{table}"
    );
}
