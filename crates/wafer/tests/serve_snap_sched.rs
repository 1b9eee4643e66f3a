//! `snap sched` against a running server: a schedule set with ONTAP's
//! syntax is shown as ONTAP prints it and kept across restarts, and the
//! server takes its snapshots on the hour, rotating their names. The server
//! clock is anchored a few seconds before each hour (`WAFER_CLOCK_START`),
//! so the test waits seconds, not hours.

mod serve_harness;

use std::time::{Duration, Instant};

use serve_harness::{NbdClient, SMALL_SIZES as SIZES, Scratch, Served, ok, serve_with_env, wafer};
use wafer_server::admin::{AdminReply, AdminRequest, SnapshotStatus};

/// Sunday 2026-11-29 05:00:00 UTC, in Unix seconds: no hour of the
/// schedule falls within the minute after it.
const SUNDAY_0500: u64 = 1_795_928_400;
/// Sunday 07:59:56 and 08:59:56 UTC.
const SUNDAY_0759_56: u64 = 1_795_939_196;
const SUNDAY_0859_56: u64 = 1_795_942_796;
/// Saturday 2026-12-05 23:59:56 UTC: four seconds before a weekly one.
const SATURDAY_2359_56: u64 = 1_796_515_196;

/// A server whose clock starts at Unix time `at`.
fn serve_at(scratch: &Scratch, at: u64) -> Served {
    serve_with_env(scratch, SIZES, &[("WAFER_CLOCK_START", &at.to_string())])
}

fn snapshots(server: &Served) -> Vec<SnapshotStatus> {
    match server.admin_ok(AdminRequest::SnapList {
        volume: "vol0".into(),
    }) {
        AdminReply::Snapshots { snapshots, .. } => snapshots,
        other => panic!("snap list answered {other:?}"),
    }
}

/// Waits up to 60 s for vol0's snapshots to be named `names` (oldest
/// first), the newest taken at Unix second `after` or later, and returns
/// them.
fn wait_for(server: &Served, names: &[&str], after: u64) -> Vec<SnapshotStatus> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let now = snapshots(server);
        let named: Vec<&str> = now.iter().map(|s| s.name.as_str()).collect();
        let newest = now.iter().map(|s| s.created_unix_ns / 1_000_000_000).max();
        if named == names && newest >= Some(after) {
            return now;
        }
        assert!(
            Instant::now() < deadline,
            "vol0 still has {named:?}, not {names:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Writes `byte` over the LUN's first 64 KiB.
fn fill(server: &Served, byte: u8) {
    let mut client = NbdClient::connect(server.socket(), "vol0/lun0");
    assert_eq!(client.write(0, &[byte; 65536]), 0);
}

/// The byte snapshot `name` holds over the LUN's first 64 KiB.
fn held(server: &Served, name: &str) -> u8 {
    let mut client = NbdClient::connect(server.socket(), &format!("vol0/lun0@{name}"));
    let data = client.read(0, 65536).expect("readable");
    assert!(data.iter().all(|b| *b == data[0]), "{name} holds one fill");
    data[0]
}

#[test]
fn the_schedule_is_set_shown_and_refused_in_ontaps_words() {
    let scratch = Scratch::new();
    let server = serve_at(&scratch, SUNDAY_0500);
    let said = ok(&server.data, &["snap", "sched", "vol0"]);
    assert_eq!(said, "volume vol0: 0 0 0\n", "a new volume takes none");
    let said = ok(
        &server.data,
        &["snap", "sched", "vol0", "0", "2", "6@8,12,16,20"],
    );
    assert_eq!(said, "", "ONTAP sets a schedule without a word");
    let said = ok(&server.data, &["snap", "sched", "vol0"]);
    assert_eq!(
        said, "volume vol0: 0 2 6@8,12,16,20\n",
        "wafl.md §12.4's line"
    );
    ok(&server.data, &["snap", "sched", "vol0", "1", "2"]);
    assert_eq!(
        ok(&server.data, &["snap", "sched"]),
        "volume vol0: 1 2 0\n",
        "counts left out are 0; every volume without a name"
    );
    let json = ok(&server.data, &["snap", "sched", "vol0", "--json"]);
    let parsed: serde_json::Value = serde_json::from_str(&json).expect("JSON");
    let text = parsed.to_string();
    assert!(
        text.contains("\"weekly\":1")
            && text.contains("\"nightly\":2")
            && text.contains("\"hours\":[0,1,2"),
        "{json}"
    );
    assert_eq!(
        ok(&server.data, &["snap", "sched", "-A"]),
        "Aggregate aggr0: 0 0 0\n"
    );
    for (args, why) in [
        (
            &["snap", "sched", "vol0", "0", "0", "4@24"][..],
            "hour \"24\"",
        ),
        (&["snap", "sched", "vol0", "x"][..], "weekly count"),
        (
            &["snap", "sched", "vol0", "200", "50", "10"][..],
            "at most 255",
        ),
        (&["snap", "sched", "nosuch", "0", "0", "1"][..], "nosuch"),
        (
            &["snap", "sched", "-A", "aggr0", "0", "0", "1"][..],
            "no aggregate snapshots",
        ),
    ] {
        let (code, out, err) = wafer(&server.data, args);
        assert_ne!(code, 0, "{args:?} succeeded: {out}");
        assert!(err.contains(why), "{args:?}: {err}");
        if why != "nosuch" {
            assert!(
                err.contains("usage: snap sched [-A | -V]"),
                "{args:?}: {err}"
            );
        }
    }
    assert_eq!(
        ok(&server.data, &["snap", "sched", "vol0"]),
        "volume vol0: 1 2 0\n",
        "a refusal changes nothing"
    );
    server.stop();
    let server = serve_at(&scratch, SUNDAY_0500);
    assert_eq!(
        ok(&server.data, &["snap", "sched", "vol0"]),
        "volume vol0: 1 2 0\n",
        "the schedule is on disk"
    );
}

#[test]
fn scheduled_snapshots_are_taken_on_the_hour_and_rotate_their_names() {
    let scratch = Scratch::new();
    let server = serve_at(&scratch, SUNDAY_0500);
    ok(&server.data, &["snap", "sched", "vol0", "1", "0", "2@8,9"]);
    fill(&server, 0xa1);
    server.stop();

    let server = serve_at(&scratch, SUNDAY_0759_56);
    let taken = wait_for(&server, &["hourly.0"], SUNDAY_0759_56);
    let at = taken[0].created_unix_ns / 1_000_000_000;
    assert!(
        (SUNDAY_0759_56 + 4..SUNDAY_0759_56 + 10).contains(&at),
        "hourly.0 taken at {at}, not on the hour ({})",
        SUNDAY_0759_56 + 4
    );
    let list = ok(&server.data, &["snap", "list", "vol0"]);
    assert!(list.contains("Nov 29 08:00  hourly.0"), "{list}");
    fill(&server, 0xb2);
    server.stop();

    let server = serve_at(&scratch, SUNDAY_0859_56);
    wait_for(&server, &["hourly.1", "hourly.0"], SUNDAY_0859_56);
    assert_eq!(held(&server, "hourly.1"), 0xa1, "08:00's, renamed");
    assert_eq!(held(&server, "hourly.0"), 0xb2, "09:00's");
    fill(&server, 0xc3);
    // The next hourly pushes 08:00's out: two are kept.
    ok(
        &server.data,
        &["snap", "sched", "vol0", "1", "0", "2@8,9,10"],
    );
    server.stop();

    let server = serve_at(&scratch, SUNDAY_0859_56 + 3600);
    wait_for(&server, &["hourly.1", "hourly.0"], SUNDAY_0859_56 + 3600);
    assert_eq!(held(&server, "hourly.1"), 0xb2, "09:00's, renamed");
    assert_eq!(held(&server, "hourly.0"), 0xc3, "10:00's");
    server.stop();

    // Sunday midnight takes a weekly one, not an hourly one.
    let server = serve_at(&scratch, SATURDAY_2359_56);
    wait_for(
        &server,
        &["hourly.1", "hourly.0", "weekly.0"],
        SATURDAY_2359_56,
    );
    let list = ok(&server.data, &["snap", "list", "vol0"]);
    assert!(list.contains("Dec 06 00:00  weekly.0"), "{list}");
}
