//! The administrator's CLI against a running server: ONTAP's layouts, JSON
//! on request, exit statuses that say what happened.

mod serve_harness;

use std::path::Path;
use std::time::{Duration, Instant};

use serve_harness::{NbdClient, Scratch, Served, ok, serve_with, wafer};

const SIZES: &[&str] = &[
    "--disk-size",
    "64m",
    "--vol-size",
    "160m",
    "--lun-size",
    "32m",
];

#[test]
fn admin_commands_print_ontap_layouts_and_json() {
    let scratch = Scratch::new();
    let server = serve_with(&scratch, SIZES);
    let data = server.data.clone();
    let status = ok(&data, &["aggr", "status"]);
    assert!(
        status.contains("aggr0 online          raid_dp, aggr     raidsize=16"),
        "{status}"
    );
    let raid = ok(&data, &["aggr", "status", "-r"]);
    for expected in [
        "Aggregate aggr0 (online, raid_dp) (block checksums)",
        "RAID group /aggr0/plex0/rg0 (normal)",
        "      dparity   disk0",
        "      parity    disk1",
        "Spare disks for block checksum",
        "spare     disk8",
    ] {
        assert!(raid.contains(expected), "missing '{expected}' in:\n{raid}");
    }
    assert!(ok(&data, &["aggr", "status", "-v"]).contains("Volumes: vol0"));
    assert!(ok(&data, &["vol", "status"]).contains("vol0 online          raid_dp, flex"));

    ok(&data, &["lun", "create", "-s", "16m", "/vol/vol0/logs"]);
    let luns = ok(&data, &["lun", "show"]);
    assert!(
        luns.contains("/vol/vol0/logs") && luns.contains("16m (16777216)      (r/w, online)"),
        "{luns}"
    );
    let maps = ok(&data, &["lun", "show", "-m"]);
    assert!(
        maps.contains("/vol/vol0/logs") && maps.contains("vol0/logs"),
        "{maps}"
    );

    ok(&data, &["snap", "create", "vol0", "s1"]);
    let snaps = ok(&data, &["snap", "list", "vol0"]);
    assert!(
        snaps.contains("%/used") && snaps.contains("  s1"),
        "{snaps}"
    );
    let (code, _, err) = wafer(&data, &["snap", "create", "vol0", "s1"]);
    assert_eq!(code, 1, "a refusal exits 1");
    assert!(err.contains("already exists"), "{err}");
    ok(&data, &["lun", "resize", "/vol/vol0/lun0", "48m"]);
    let resized = NbdClient::connect(server.socket(), "vol0/lun0");
    let in_snapshot = NbdClient::connect(server.socket(), "vol0/lun0@s1");
    assert_eq!(
        (resized.size, in_snapshot.size),
        (48 << 20, 32 << 20),
        "a snapshot export has the LUN's size in the snapshot"
    );
    drop((resized, in_snapshot));

    let df = ok(&data, &["df"]);
    assert!(
        df.contains("/vol/vol0/ ") && df.contains("/vol/vol0/.snapshot"),
        "{df}"
    );
    assert!(ok(&data, &["df", "-A"]).contains("aggr0/.snapshot"));
    let json: serde_json::Value =
        serde_json::from_str(&ok(&data, &["df", "--json"])).expect("--json prints JSON");
    assert_eq!(json["kind"], "volume_space");

    let sysstat = ok(&data, &["sysstat", "-x", "-c", "1", "1"]);
    assert_eq!(
        sysstat.lines().count(),
        3,
        "two header lines and a sample:\n{sysstat}"
    );
    assert!(sysstat.contains("Cache    CP  CP   Disk"), "{sysstat}");
    server.stop();
}

#[test]
fn a_failed_disk_is_rebuilt_onto_the_spare_as_aggr_status_shows() {
    let scratch = Scratch::new();
    let server = serve_with(&scratch, SIZES);
    let data = server.data.clone();
    assert!(ok(&data, &["disk", "fail", "disk3"]).contains("disk3"));
    wait_for_member(&data, "disk8");
    assert!(!ok(&data, &["aggr", "status", "-r"]).contains("FAILED"));
    server.stop();
}

/// A server whose spare, disk8, has replaced failed disk3, and whose disk4
/// has failed since, with no spare left.
fn degraded_with_no_spare(scratch: &Scratch) -> Served {
    let server = serve_with(scratch, SIZES);
    ok(&server.data, &["disk", "fail", "disk3"]);
    wait_for_member(&server.data, "disk8");
    ok(&server.data, &["disk", "fail", "disk4"]);
    server
}

#[test]
fn a_disk_failed_with_no_spare_left_is_replaced_by_a_new_disk_file() {
    let scratch = Scratch::new();
    let server = degraded_with_no_spare(&scratch);
    let data = server.data.clone();
    let degraded = ok(&data, &["aggr", "status", "-r"]);
    assert!(
        degraded.contains("rg0 (degraded)"),
        "no spare is left:\n{degraded}"
    );
    let (code, _, err) = wafer(&data, &["disk", "replace", "disk5"]);
    assert_eq!(code, 1, "an in-service disk is not replaced");
    assert!(err.contains("not a failed RAID group member"), "{err}");
    let added = ok(&data, &["disk", "replace", "disk4"]);
    assert!(
        added.contains("disk9 added as a spare for failed disk disk4"),
        "{added}"
    );
    wait_for_member(&data, "disk9");
    assert!(scratch.data().join("disk9.img").exists());
    server.stop();
}

#[test]
fn without_a_server_the_cli_says_so() {
    let scratch = Scratch::new();
    let (code, _, err) = wafer(&scratch.data(), &["aggr", "status"]);
    assert_eq!(code, 2);
    assert!(err.contains("no server to administer"), "{err}");
}

/// Every LUN as `lun show --json` reports it.
fn luns(data: &Path) -> Vec<serde_json::Value> {
    let json: serde_json::Value =
        serde_json::from_str(&ok(data, &["lun", "show", "--json"])).expect("JSON");
    json["data"].as_array().expect("a list of LUNs").clone()
}

/// A LUN's size as `lun show` reports it.
fn lun_size(data: &Path, path: &str) -> u64 {
    let luns = luns(data);
    let lun = luns.iter().find(|l| l["path"] == path).expect("the LUN");
    lun["size_bytes"].as_u64().expect("a size")
}

#[test]
fn lun_resize_grows_by_plus_size_and_shrinks_only_with_f() {
    let scratch = Scratch::new();
    let server = serve_with(&scratch, SIZES);
    let data = server.data.clone();
    let lun = "/vol/vol0/lun0";
    ok(&data, &["lun", "resize", lun, "+16m"]);
    assert_eq!(lun_size(&data, lun), 48 << 20, "+16m grows by 16 MiB");
    for shrink in ["-16m", "16m"] {
        let (code, _, err) = wafer(&data, &["lun", "resize", lun, shrink]);
        assert_eq!(code, 1, "a shrink without -f is refused");
        assert!(
            err.contains("loses the data beyond") && err.contains("use -f"),
            "{err}"
        );
        assert_eq!(
            lun_size(&data, lun),
            48 << 20,
            "a refused shrink changes nothing"
        );
    }
    ok(&data, &["lun", "resize", "-f", lun, "-16m"]);
    assert_eq!(lun_size(&data, lun), 32 << 20);
    let (code, _, err) = wafer(&data, &["lun", "resize", "-f", lun, "-64m"]);
    assert_eq!(code, 1, "{err}");
    let (code, _, err) = wafer(&data, &["lun", "create", "-s", "+16m", "/vol/vol0/x"]);
    assert_eq!(code, 2, "a size with a sign is a usage error elsewhere");
    assert!(err.contains("has no sign"), "{err}");
    server.stop();
}

#[test]
fn lun_destroy_refuses_a_lun_a_client_has_open_unless_forced() {
    let scratch = Scratch::new();
    let server = serve_with(&scratch, SIZES);
    let data = server.data.clone();
    ok(&data, &["lun", "create", "-s", "16m", "/vol/vol0/lunA"]);
    let mut client = NbdClient::connect(server.socket(), "vol0/lunA");
    assert_eq!(client.write(0, &[1; 4096]), 0);
    let (code, _, err) = wafer(&data, &["lun", "destroy", "/vol/vol0/lunA"]);
    assert_eq!(code, 1, "a LUN in use is not destroyed without -f");
    assert!(
        err.contains("open on 1 NBD connection ") && err.contains("use -f"),
        "{err}"
    );
    assert_eq!(client.write(4096, &[2; 4096]), 0, "the LUN is still there");
    ok(&data, &["lun", "destroy", "-f", "/vol/vol0/lunA"]);
    assert_eq!(client.write(0, &[3; 4096]), 22, "EINVAL once destroyed");
    drop(client);

    // A snapshot's export reads the snapshot, which outlives the LUN: it
    // does not hold the LUN; a closed connection holds nothing.
    ok(&data, &["lun", "create", "-s", "16m", "/vol/vol0/lunB"]);
    ok(&data, &["snap", "create", "vol0", "s1"]);
    drop(NbdClient::connect(server.socket(), "vol0/lunB"));
    let mut in_snapshot = NbdClient::connect(server.socket(), "vol0/lunB@s1");
    let deadline = Instant::now() + Duration::from_secs(10);
    while wafer(&data, &["lun", "destroy", "/vol/vol0/lunB"]).0 != 0 {
        assert!(
            Instant::now() < deadline,
            "the closed connection still counts"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(in_snapshot.read(0, 4096).is_ok());
    server.stop();
}

/// Every LUN's path and LUN ID, as `lun show` reports them.
fn lun_ids(data: &Path) -> Vec<(String, u64)> {
    let mut ids: Vec<(String, u64)> = luns(data)
        .iter()
        .map(|l| {
            let path = l["path"].as_str().expect("a path").to_string();
            (path, l["lun_id"].as_u64().expect("an ID"))
        })
        .collect();
    ids.sort();
    ids
}

fn owned(ids: &[(&str, u64)]) -> Vec<(String, u64)> {
    ids.iter().map(|(p, id)| (p.to_string(), *id)).collect()
}

#[test]
fn lun_ids_stay_with_their_luns_and_the_default_export_never_moves() {
    let scratch = Scratch::new();
    let server = serve_with(&scratch, SIZES);
    let data = server.data.clone();
    ok(&data, &["lun", "create", "-s", "8m", "/vol/vol0/a"]);
    ok(&data, &["lun", "create", "-s", "12m", "/vol/vol0/b"]);
    ok(&data, &["lun", "destroy", "/vol/vol0/a"]);
    // c takes a's inode, and a new LUN a its path: neither takes its ID.
    ok(&data, &["lun", "create", "-s", "16m", "/vol/vol0/c"]);
    ok(&data, &["lun", "create", "-s", "4m", "/vol/vol0/a"]);
    let expected = owned(&[
        ("/vol/vol0/a", 4),
        ("/vol/vol0/b", 2),
        ("/vol/vol0/c", 3),
        ("/vol/vol0/lun0", 0),
    ]);
    assert_eq!(lun_ids(&data), expected);
    let maps = ok(&data, &["lun", "show", "-m"]);
    assert!(
        maps.contains("/vol/vol0/c                         vol0/c                  3       NBD"),
        "{maps}"
    );
    assert_eq!(NbdClient::connect(server.socket(), "").size, 32 << 20);
    server.stop();

    let server = serve_with(&scratch, SIZES);
    assert_eq!(lun_ids(&data), expected, "IDs survive a restart");
    assert_eq!(
        NbdClient::connect(server.socket(), "").size,
        32 << 20,
        "the default export is still lun0"
    );
    // -f: the connection just closed may not have ended on the server yet.
    ok(&data, &["lun", "destroy", "-f", "/vol/vol0/lun0"]);
    assert!(
        NbdClient::try_connect(server.socket(), "").is_err(),
        "with lun0 gone there is no default export"
    );
    ok(&data, &["lun", "create", "-s", "8m", "/vol/vol0/lun0"]);
    assert!(
        NbdClient::try_connect(server.socket(), "").is_err(),
        "a new lun0 is another LUN"
    );
    assert!(lun_ids(&data).contains(&("/vol/vol0/lun0".to_string(), 5)));
    server.stop();
}

/// Waits until `aggr status -r --json` shows no reconstruction, every group
/// normal and `disk` a member of RAID group 0; returns the status.
fn wait_for_member(data: &Path, disk: &str) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let text = ok(data, &["aggr", "status", "-r", "aggr0", "--json"]);
        let status: serde_json::Value = serde_json::from_str(&text).expect("JSON");
        let group = &status["data"]["raid_groups"][0];
        let member = group["disks"]
            .as_array()
            .expect("disks")
            .iter()
            .any(|d| d["name"] == disk);
        if status["data"]["rebuild"].is_null() && group["state"] == "normal" && member {
            return status;
        }
        assert!(Instant::now() < deadline, "{disk} never rebuilt:\n{text}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn disk_add_gives_reconstruction_a_spare_and_broken_disks_are_shown_until_removed() {
    let scratch = Scratch::new();
    // No spare is left: disk4 waits, degraded, until one is added.
    let server = degraded_with_no_spare(&scratch);
    let data = server.data.clone();
    let added = ok(&data, &["disk", "add"]);
    assert!(
        added.contains("disk disk9 (64 MiB, file disk9.img) added as a spare")
            && added.contains("failed disk disk4 is reconstructed"),
        "{added}"
    );
    wait_for_member(&data, "disk9");
    // A spare added ahead of a failure is used by the next reconstruction.
    assert!(ok(&data, &["disk", "add"]).contains("disk disk10 "));
    ok(&data, &["disk", "fail", "disk5"]);
    let status = wait_for_member(&data, "disk10");
    let broken: Vec<&str> = status["data"]["broken"]
        .as_array()
        .expect("broken disks")
        .iter()
        .map(|d| d["file"].as_str().expect("a file"))
        .collect();
    assert_eq!(broken, ["disk3.img", "disk4.img", "disk5.img"]);
    let raid = ok(&data, &["aggr", "status", "-r"]);
    assert!(
        raid.contains("\nBroken disks\n") && raid.contains("\nfailed    disk3 "),
        "{raid}"
    );

    let (code, _, err) = wafer(&data, &["disk", "remove", "disk6"]);
    assert_eq!(code, 1, "an in-service disk is not removed");
    assert!(err.contains("only a broken disk"), "{err}");
    for command in ["replace", "fail"] {
        let (code, _, err) = wafer(&data, &["disk", command, "disk3"]);
        assert_eq!(code, 1);
        assert!(err.contains("broken disk, already replaced"), "{err}");
    }
    assert!(scratch.disk(3).exists());
    assert!(ok(&data, &["disk", "remove", "disk3"]).contains("deleted"));
    assert!(!scratch.disk(3).exists());
    assert!(!ok(&data, &["aggr", "status", "-r"]).contains("disk3 "));
    server.stop();
    let server = serve_with(&scratch, SIZES);
    let raid = ok(&data, &["aggr", "status", "-r"]);
    assert!(
        raid.contains("\nfailed    disk4 ") && !raid.contains("disk3 "),
        "{raid}"
    );
    server.stop();
}
