//! The same arrays, workload and seed give the same report, byte for byte;
//! another seed gives another.

mod common;

#[test]
fn the_same_seed_gives_identical_report_bytes() {
    let json = |seed| common::small_run(seed).to_json();
    let first = json(3);
    assert_eq!(first, json(3));
    assert_ne!(first, json(4));
}
