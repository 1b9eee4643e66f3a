//! A wafer array of two aggregates (`scenarios/two-aggregates.toml`): the
//! workload over both LUNs reaches both aggregates' disks, statit shows each
//! RAID group under its aggregate, sysstat fills every column of the
//! server's layout, and a host I/O across the boundary
//! between the LUNs is answered once, as one.

use wafer_core::units::Instant;
use wafer_devices::params::Catalog;
use wafer_lab::array::{HostCompletion, HostIo, HostOp};
use wafer_lab::report::{statit, sysstat};
use wafer_lab::wafer::MEMORY_READ_LATENCY;
use wafer_lab::{Array, ArraySpec, Progress, Scenario, WaferArray, WaferSpec, run_each};

const SCENARIO: &str = include_str!("../../../scenarios/two-aggregates.toml");

fn spec(scenario: &Scenario) -> WaferSpec {
    let [entry] = &scenario.arrays[..] else {
        panic!("one array");
    };
    let ArraySpec::Wafer(spec) = &entry.spec else {
        panic!("a wafer array");
    };
    spec.clone()
}

#[test]
fn the_workload_reaches_both_aggregates_disks() {
    let catalog = Catalog::builtin().unwrap();
    let scenario = Scenario::parse(SCENARIO, &catalog).expect("the example parses");
    let spec = spec(&scenario);
    let names: Vec<&str> = spec.aggregates.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["aggr0", "aggr1"]);
    assert_eq!(spec.lun_bytes(), 256 << 20);
    // 2 GiB of each disk: the engine's maps stay small.
    let array = WaferArray::short_stroked(&spec, &catalog, 1 << 19).expect("builds");
    assert_eq!(array.capacity_bytes(), 256 << 20, "both LUNs, end to end");
    let mut arrays: Vec<Box<dyn Array>> = vec![Box::new(array)];
    let report = run_each(
        &mut arrays,
        &scenario.workloads(),
        &scenario.run,
        &mut |_: Progress| {},
    )
    .expect("runs");
    let array = &report.arrays[0];
    assert!(array.segments.iter().all(|s| s.ios > 0));
    let disks = array.measured_disk_stats();
    assert_eq!(disks.len(), 16, "8 disks in each aggregate");
    for aggregate in ["aggr0", "aggr1"] {
        let own: Vec<_> = (disks.iter())
            .filter(|d| d.name.starts_with(&format!("{aggregate}/rg0.d")))
            .collect();
        assert_eq!(own.len(), 8, "{aggregate}'s disks are named after it");
        let reads: u64 = own.iter().map(|d| d.user_reads).sum();
        let writes: u64 = own.iter().map(|d| d.writes).sum();
        assert!(
            reads > 100 && writes > 0,
            "{aggregate}: {reads} reads and {writes} writes in the measured time"
        );
    }
    let table = statit::render(array);
    for heading in ["/aggr0/plex0/rg0:", "/aggr1/plex0/rg0:"] {
        let rows: Vec<&str> = (table.lines())
            .skip_while(|l| *l != heading)
            .skip(1)
            .take_while(|l| !l.starts_with('/'))
            .collect();
        assert_eq!(rows.len(), 8, "{heading}'s eight disks: {table}");
        assert!(rows.iter().all(|r| r.starts_with("rg0.d")), "{table}");
    }
    let lines = sysstat::render(array);
    let heads = sysstat::HEADER.lines().count();
    assert!(lines.starts_with(sysstat::HEADER), "{lines}");
    assert_eq!(lines.lines().count(), heads + array.intervals.len());
    for line in lines.lines().skip(heads) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(fields.len(), 20, "a figure or `-` in every column: {line}");
        assert_eq!(fields[12], fields[2], "the lab's host is all FCP: {line}");
    }
}

#[test]
fn an_io_across_the_luns_boundary_is_answered_once() {
    let catalog = Catalog::builtin().unwrap();
    let scenario = Scenario::parse(SCENARIO, &catalog).unwrap();
    let mut array = WaferArray::short_stroked(&spec(&scenario), &catalog, 1 << 19).unwrap();
    let boundary = 128 << 20;
    let mut done: Vec<HostCompletion> = Vec::new();
    for (id, op) in [(1, HostOp::Write), (2, HostOp::Read)] {
        let io = HostIo {
            id,
            op,
            offset: boundary - 2048,
            length: 8192,
        };
        let now = array.next_event().unwrap_or(Instant(0)).max(Instant(0));
        array.submit(now, io);
        while done.iter().all(|c| c.id != id) {
            let at = array.next_event().expect("the I/O is still out");
            array.advance(at, &mut done);
        }
    }
    let ids: Vec<u64> = done.iter().map(|c| c.id).collect();
    assert_eq!(ids, [1, 2], "each I/O answered once, when all of it is");
    let read = &done[1];
    assert_eq!(read.refused, None);
    assert_eq!(
        read.finished_at.0 - read.submitted_at.0,
        MEMORY_READ_LATENCY.0,
        "both parts of the read come from the blocks the write left cached"
    );
}
