//! The seeded check on the stamp filer: it survives every fault but the crash
//! (a stamp filer does not mount), and it makes exactly the decisions the byte
//! filer makes, since what a block says never steers the engine.

use std::collections::BTreeMap;

use wafer_sim::check::{CheckConfig, CheckReport, PayloadKind, run};
use wafer_sim::world::IoShape;

fn config(seed: u64, ops: u64, faults: bool, payload: PayloadKind) -> CheckConfig {
    CheckConfig {
        seed,
        ops,
        faults,
        sabotage: None,
        payload,
        record_io: !faults,
        bound_requests: false,
        single_filer: false,
        volume_admin: false,
        snap_sched: false,
        thin: false,
        flash_cache: false,
        hybrid: false,
    }
}

fn passing_run(config: &CheckConfig) -> CheckReport {
    run(config).unwrap_or_else(|failure| panic!("{:?}: {failure}", config.payload))
}

#[test]
fn stamp_seeds_survive_every_fault_but_the_crash() {
    let mut injected = BTreeMap::<&str, u64>::new();
    for seed in 1..=12 {
        let report = passing_run(&config(seed, 1000, true, PayloadKind::Stamps));
        assert_eq!(report.crashes, 0, "seed {seed}: a stamp filer was crashed");
        for (kind, count) in report.faults {
            *injected.entry(kind).or_default() += count;
        }
    }
    println!("injected on stamps: {injected:?}");
    for kind in [
        "dead disk",
        "spare assigned",
        "disk rebuilt",
        "bit rot",
        "latent sector error",
        "lost write",
        "misdirected write",
    ] {
        assert!(
            injected.get(kind).is_some_and(|n| *n > 0),
            "no {kind}: {injected:?}"
        );
    }
    for kind in ["crash", "torn write"] {
        assert!(
            !injected.contains_key(kind),
            "{kind} on stamps: {injected:?}"
        );
    }
}

#[test]
fn bytes_and_stamps_issue_the_same_ios_for_the_same_seed() {
    for seed in 1..=4 {
        let bytes = passing_run(&config(seed, 600, false, PayloadKind::Bytes));
        let stamps = passing_run(&config(seed, 600, false, PayloadKind::Stamps));
        let writes = |io: &[IoShape]| {
            io.iter()
                .filter(|s| matches!(s, IoShape::Write { .. }))
                .count()
        };
        assert!(
            writes(&bytes.io) > 100,
            "seed {seed}: too few writes to compare"
        );
        if let Some(n) =
            (0..bytes.io.len().max(stamps.io.len())).find(|&n| bytes.io.get(n) != stamps.io.get(n))
        {
            panic!(
                "seed {seed}: I/O {n} differs: bytes {:?}, stamps {:?}",
                bytes.io.get(n),
                stamps.io.get(n)
            );
        }
        assert_eq!(
            (bytes.ops, bytes.reads_checked, bytes.snapshots),
            (stamps.ops, stamps.reads_checked, stamps.snapshots),
            "seed {seed}: the workloads differ"
        );
    }
}
