//! Negative controls: with a deliberate bug switched on in the engine, the
//! simulation (nodes of 1 to 3 aggregates) must fail within the seeds CI runs. Each proves one checker can
//! see the fault it exists for, on real bytes and, for every bug that does not
//! need a crash to show (a stamp filer is never crashed), on stamps.

use wafer_core::filer::Sabotage;
use wafer_sim::check::{CheckConfig, PayloadKind, run};

/// Seeds and operations per seed: a prefix of CI's seed set.
const SEEDS: u64 = 100;
const OPS: u64 = 1000;

/// The first seed whose run on `payload` fails with `sabotage`, and why. A
/// broken invariant is an assertion in the engine, so a panic counts as caught.
fn first_failure(sabotage: Sabotage, payload: PayloadKind) -> Option<(u64, String)> {
    first_failure_of(sabotage, payload, Flags::None)
}

/// Which of the check's optional workloads a control runs with.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Flags {
    None,
    /// `--snap-sched`: scheduled snapshots.
    SnapSched,
    /// `--thin`: thin LUNs filling their volumes.
    Thin,
    /// `--flash-cache`: a Flash Cache in the node.
    FlashCache,
    /// `--hybrid`: Flash Pool aggregates.
    Hybrid,
}

/// [`first_failure`], with one of the optional workloads.
fn first_failure_of(
    sabotage: Sabotage,
    payload: PayloadKind,
    flags: Flags,
) -> Option<(u64, String)> {
    (1..=SEEDS).find_map(|seed| {
        let config = CheckConfig {
            seed,
            ops: OPS,
            faults: true,
            sabotage: Some(sabotage),
            payload,
            record_io: false,
            bound_requests: false,
            single_filer: false,
            volume_admin: false,
            snap_sched: flags == Flags::SnapSched,
            thin: flags == Flags::Thin,
            flash_cache: flags == Flags::FlashCache,
            hybrid: flags == Flags::Hybrid,
        };
        match std::panic::catch_unwind(|| run(&config)) {
            Ok(Ok(_)) => None,
            Ok(Err(failure)) => Some((seed, failure.reason)),
            Err(panic) => Some((seed, panic_message(&panic))),
        }
    })
}

fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    let text = panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()));
    format!(
        "engine assertion: {}",
        text.unwrap_or_else(|| "(no message)".into())
    )
}

fn assert_caught(sabotage: Sabotage) {
    assert_caught_on(sabotage, PayloadKind::Bytes);
}

fn assert_caught_on(sabotage: Sabotage, payload: PayloadKind) {
    match first_failure(sabotage, payload) {
        Some((seed, reason)) => {
            println!("{sabotage:?} on {payload:?} caught at seed {seed}: {reason}")
        }
        None => panic!("{sabotage:?} on {payload:?} went unnoticed through {SEEDS} seeds"),
    }
}

#[test]
fn a_leaked_block_is_caught_at_the_commit_of_the_cp_that_leaked_it() {
    let (seed, reason) = first_failure(Sabotage::LeakFreedBlocks, PayloadKind::Bytes)
        .expect("a leak went unnoticed");
    assert!(
        reason.contains("committed with an invariant broken"),
        "seed {seed}: caught, but not by the check at the CP's commit: {reason}"
    );
}

#[test]
fn skipping_nvlog_replay_loses_acknowledged_writes() {
    assert_caught(Sabotage::SkipReplay);
}

#[test]
fn freeing_a_block_a_cp_early_corrupts_the_previous_image() {
    assert_caught(Sabotage::EarlyFree);
}

#[test]
fn skipping_the_parity_update_of_a_partial_stripe_is_seen() {
    assert_caught(Sabotage::SkipParityUpdate);
}

#[test]
fn ignoring_block_trailers_returns_damaged_data() {
    assert_caught(Sabotage::IgnoreTrailer);
}

#[test]
fn freeing_blocks_snapshots_hold_corrupts_the_snapshots() {
    assert_caught(Sabotage::IgnoreSnapshots);
}

#[test]
fn on_stamps_freeing_a_block_a_cp_early_is_seen() {
    assert_caught_on(Sabotage::EarlyFree, PayloadKind::Stamps);
}

#[test]
fn on_stamps_skipping_the_parity_update_of_a_partial_stripe_is_seen() {
    assert_caught_on(Sabotage::SkipParityUpdate, PayloadKind::Stamps);
}

#[test]
fn on_stamps_ignoring_block_trailers_returns_damaged_stamps() {
    assert_caught_on(Sabotage::IgnoreTrailer, PayloadKind::Stamps);
}

#[test]
fn on_stamps_freeing_blocks_snapshots_hold_corrupts_the_snapshots() {
    assert_caught_on(Sabotage::IgnoreSnapshots, PayloadKind::Stamps);
}

#[test]
fn the_same_runs_pass_without_sabotage() {
    for payload in [PayloadKind::Bytes, PayloadKind::Stamps] {
        for seed in 1..=SEEDS / 4 {
            let config = CheckConfig {
                seed,
                ops: OPS,
                faults: true,
                sabotage: None,
                payload,
                record_io: false,
                bound_requests: false,
                single_filer: false,
                volume_admin: false,
                snap_sched: false,
                thin: false,
                flash_cache: false,
                hybrid: false,
            };
            if let Err(failure) = run(&config) {
                panic!("the control run on {payload:?} failed: {failure}");
            }
        }
    }
}

#[test]
fn a_snapshot_rotation_that_renames_nothing_is_caught() {
    let sabotage = Sabotage::RotationRenamesNothing;
    match first_failure_of(sabotage, PayloadKind::Bytes, Flags::SnapSched) {
        Some((seed, reason)) => println!("{sabotage:?} caught at seed {seed}: {reason}"),
        None => panic!("{sabotage:?} went unnoticed through {SEEDS} seeds with --snap-sched"),
    }
}

#[test]
fn thin_writes_admitted_without_room_are_caught() {
    let sabotage = Sabotage::ThinWritesAdmittedBlindly;
    match first_failure_of(sabotage, PayloadKind::Bytes, Flags::Thin) {
        Some((seed, reason)) => println!("{sabotage:?} caught at seed {seed}: {reason}"),
        None => panic!("{sabotage:?} went unnoticed through {SEEDS} seeds with --thin"),
    }
}

#[test]
fn a_flash_cache_copy_kept_after_its_home_was_written_is_caught() {
    let sabotage = Sabotage::FlashKeepsOverwrittenCopies;
    match first_failure_of(sabotage, PayloadKind::Bytes, Flags::FlashCache) {
        Some((seed, reason)) => println!("{sabotage:?} caught at seed {seed}: {reason}"),
        None => panic!("{sabotage:?} went unnoticed through {SEEDS} seeds with --flash-cache"),
    }
}

#[test]
fn a_write_cached_block_dropped_instead_of_destaged_is_caught() {
    let sabotage = Sabotage::WriteCacheDropsColdBlocks;
    match first_failure_of(sabotage, PayloadKind::Bytes, Flags::Hybrid) {
        Some((seed, reason)) => println!("{sabotage:?} caught at seed {seed}: {reason}"),
        None => panic!("{sabotage:?} went unnoticed through {SEEDS} seeds with --hybrid"),
    }
}

#[test]
fn a_scrub_that_writes_no_repair_leaves_damage_behind() {
    assert_caught(Sabotage::SkipScrubRepair);
}

#[test]
fn a_scrub_that_writes_no_repair_is_seen_on_stamps() {
    assert_caught_on(Sabotage::SkipScrubRepair, PayloadKind::Stamps);
}

/// A stamp seed whose run, with 5,000 operations, once hung: a CP capturing
/// waited for a block whose read was parked until a CP committed. Found on a
/// filer alone, and replayed so.
const DEADLOCK_SEED: u64 = 9_100_398;

fn deadlock_run(sabotage: Option<Sabotage>) -> Result<(), String> {
    let config = CheckConfig {
        seed: DEADLOCK_SEED,
        ops: 5000,
        faults: true,
        sabotage,
        payload: PayloadKind::Stamps,
        record_io: false,
        bound_requests: false,
        single_filer: true,
        volume_admin: false,
        snap_sched: false,
        thin: false,
        flash_cache: false,
        hybrid: false,
    };
    run(&config).map(|_| ()).map_err(|failure| failure.reason)
}

#[test]
fn a_deadlocked_filer_is_reported_as_a_stall_not_a_hang() {
    let reason = deadlock_run(Some(Sabotage::ParkRetriesBehindCapture))
        .expect_err("the deadlock went unnoticed");
    assert!(reason.contains("stalled"), "{reason}");
    deadlock_run(None).expect("the same seed passes without the deadlock");
}

#[test]
fn committing_a_cp_whose_writes_the_host_refused_loses_acknowledged_writes() {
    assert_caught(Sabotage::CommitRegardless);
}

#[test]
fn replaying_records_into_the_wrong_aggregate_is_caught() {
    assert_caught(Sabotage::ReplayForeignRecords);
}

#[test]
fn resetting_a_log_half_before_its_records_are_committed_is_caught() {
    assert_caught(Sabotage::EarlyLogReset);
}

/// A seed of CI's set (`wafer check --seed 196 --ops 1000`) whose run leaves
/// a stale trailer identity over the right content: a CP torn by a crash
/// wrote a block with one identity, the redo after replay wrote the same
/// content there with another, and that write was misdirected.
const STALE_IDENTITY_SEED: u64 = 196;

fn stale_identity_run(sabotage: Option<Sabotage>) -> Result<(), String> {
    let config = CheckConfig {
        seed: STALE_IDENTITY_SEED,
        ops: OPS,
        faults: true,
        sabotage,
        payload: PayloadKind::Bytes,
        record_io: false,
        bound_requests: false,
        single_filer: false,
        volume_admin: false,
        snap_sched: false,
        thin: false,
        flash_cache: false,
        hybrid: false,
    };
    run(&config).map(|_| ()).map_err(|failure| failure.reason)
}

#[test]
fn a_scrub_blind_to_stale_identity_fails_the_trailer_audit() {
    let reason = stale_identity_run(Some(Sabotage::ScrubTrustsStaleIdentity))
        .expect_err("the stale identity went unnoticed");
    assert!(
        reason.contains("not the block its pointer expects"),
        "caught, but not by the trailer audit: {reason}"
    );
    stale_identity_run(None).expect("the same seed passes with the scrub's trailer check");
}
