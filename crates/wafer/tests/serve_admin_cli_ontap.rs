//! The administrator's CLI as ONTAP's: objects named in status commands,
//! ONTAP's syntax for `vol create` and `snap restore`, changes ONTAP makes
//! without a word, and `--json` for answers and errors alike.

mod serve_harness;

use std::process::Command;

use serve_harness::{Scratch, serve_with, wafer};

/// Room in the aggregate for two more volumes beside vol0.
const SIZES: &[&str] = &[
    "--disk-size",
    "128m",
    "--vol-size",
    "160m",
    "--lun-size",
    "32m",
];

/// Runs the command, which must exit with `code`; returns its stdout and
/// stderr.
fn exits(data: &std::path::Path, args: &[&str], code: i32) -> (String, String) {
    let (got, out, err) = wafer(data, args);
    assert_eq!(got, code, "wafer {args:?}: {err}\n{out}");
    (out, err)
}

/// The `{"error":{"kind":…,"message":…}}` a `--json` failure prints.
fn json_error(out: &str) -> (String, String) {
    let json: serde_json::Value = serde_json::from_str(out).expect("JSON on stdout");
    let error = &json["error"];
    let text = |field: &str| error[field].as_str().expect(field).to_string();
    (text("kind"), text("message"))
}

#[test]
fn status_commands_take_the_object_they_show() {
    let scratch = Scratch::new();
    let server = serve_with(&scratch, SIZES);
    let data = server.data.clone();
    let all = exits(&data, &["aggr", "status"], 0).0;
    assert_eq!(exits(&data, &["aggr", "status", "aggr0"], 0).0, all);
    assert!(
        exits(&data, &["aggr", "status", "-r", "aggr0"], 0)
            .0
            .contains("rg0")
    );
    assert!(
        exits(&data, &["aggr", "status", "-v", "aggr0"], 0)
            .0
            .contains("Volumes: vol0")
    );
    let err = exits(&data, &["aggr", "status", "aggr7"], 1).1;
    assert_eq!(
        err,
        "wafer: aggr status: No aggregate named 'aggr7' exists.\n"
    );

    exits(&data, &["vol", "create", "vol1", "aggr0", "20m"], 0);
    let one = exits(&data, &["vol", "status", "vol1"], 0).0;
    assert_eq!(one.lines().count(), 2, "the heading and vol1:\n{one}");
    assert!(
        one.contains("vol1 online") && !one.contains("vol0"),
        "{one}"
    );
    let err = exits(&data, &["vol", "status", "vol9"], 1).1;
    assert!(err.contains("No volume named 'vol9' exists."), "{err}");

    exits(&data, &["lun", "create", "-s", "8m", "/vol/vol0/logs"], 0);
    let lun = exits(&data, &["lun", "show", "/vol/vol0/logs"], 0).0;
    assert_eq!(
        lun,
        "        /vol/vol0/logs                 8m (8388608)       (r/w, online)\n"
    );
    exits(&data, &["lun", "show", "/vol/vol0/nope"], 1);
    assert!(
        exits(&data, &["aggr", "scrub", "status", "-v", "aggr0"], 0)
            .0
            .contains("raid group /aggr0/plex0/rg0: is not being scrubbed.")
    );
    server.stop();
}

#[test]
fn json_failures_have_a_kind_and_sysstat_the_wrapper_of_every_reply() {
    let scratch = Scratch::new();
    let (out, _) = exits(&scratch.data(), &["vol", "status", "--json"], 2);
    assert_eq!(json_error(&out).0, "unreachable");
    let server = serve_with(&scratch, SIZES);
    let data = server.data.clone();
    let (out, err) = exits(&data, &["vol", "status", "vol9", "--json"], 1);
    assert_eq!(err, "", "the error is JSON on stdout, not text on stderr");
    assert_eq!(
        json_error(&out),
        (
            "not_found".into(),
            "vol status: No volume named 'vol9' exists.".into()
        )
    );
    exits(&data, &["snap", "create", "vol0", "s1"], 0);
    let (out, _) = exits(&data, &["snap", "create", "vol0", "s1", "--json"], 1);
    assert_eq!(json_error(&out).0, "exists", "the server's kind: {out}");
    let (out, _) = exits(&data, &["vol", "create", "--json"], 2);
    let (kind, message) = json_error(&out);
    assert_eq!(kind, "usage");
    assert!(
        message.contains("Usage: wafer vol create <NAME> [AGGR] <SIZE>"),
        "{message}"
    );

    let out = exits(&data, &["sysstat", "-c", "1", "1", "--json"], 0).0;
    let sample: serde_json::Value = serde_json::from_str(&out).expect("a JSON line");
    assert_eq!(sample["kind"], "sysstat");
    assert!(sample["data"]["uptime_ns"].as_u64().expect("uptime") > 0);
    server.stop();
}

#[test]
fn ontaps_syntax_and_silences() {
    let scratch = Scratch::new();
    let server = serve_with(&scratch, SIZES);
    let data = server.data.clone();
    // ONTAP creates LUNs and snapshots, and deletes snapshots, in silence.
    assert_eq!(
        exits(&data, &["lun", "create", "-s", "8m", "/vol/vol0/a"], 0).0,
        ""
    );
    assert_eq!(exits(&data, &["snap", "create", "vol0", "s1"], 0).0, "");
    assert_eq!(exits(&data, &["snap", "create", "vol0", "s2"], 0).0, "");
    assert_eq!(exits(&data, &["snap", "delete", "vol0", "s2"], 0).0, "");
    let json = exits(&data, &["snap", "create", "vol0", "s3", "--json"], 0).0;
    assert!(
        json.contains("\"kind\": \"done\""),
        "--json still answers: {json}"
    );

    let created = exits(&data, &["vol", "create", "vol1", "aggr0", "20m"], 0).0;
    assert_eq!(
        created,
        "Creation of volume 'vol1' with size 20m on containing aggregate\n'aggr0' has completed.\n"
    );
    exits(&data, &["vol", "create", "vol2", "20m"], 0);
    let err = exits(&data, &["vol", "create", "vol3", "aggr1", "20m"], 1).1;
    assert!(err.contains("No aggregate named 'aggr1' exists."), "{err}");
    assert!(
        !exits(&data, &["vol", "status"], 0).0.contains("vol3"),
        "nothing made"
    );

    let restored = exits(
        &data,
        &["snap", "restore", "-t", "vol", "-s", "s1", "vol0"],
        0,
    )
    .0;
    assert_eq!(restored, "Volume vol0: revert successful.\n");
    exits(&data, &["lun", "show", "/vol/vol0/a"], 0);
    let one = exits(
        &data,
        &[
            "snap",
            "restore",
            "-t",
            "file",
            "-s",
            "s1",
            "/vol/vol0/lun0",
        ],
        0,
    );
    assert!(one.0.contains("/vol/vol0/lun0"), "{}", one.0);
    let err = exits(
        &data,
        &["snap", "restore", "-t", "vol", "-s", "s1", "/vol/vol0/a"],
        1,
    )
    .1;
    assert!(
        err.contains("usage: snap restore [-f] [-t vol | file]"),
        "{err}"
    );
    let err = exits(&data, &["snap", "restore", "vol0", "s1"], 2).1;
    assert!(
        err.contains("Usage: wafer snap restore [-f] [-t vol | file] -s <snapshot_name>"),
        "the snapshot is named by -s: {err}"
    );
    server.stop();
}

#[test]
fn version_disk_show_sysconfig_r_and_wafer_data() {
    let scratch = Scratch::new();
    let server = serve_with(&scratch, SIZES);
    let data = server.data.clone();
    let version = exits(&data, &["version"], 0).0;
    assert_eq!(
        version,
        format!("wafer Release {} 7-Mode\n", env!("CARGO_PKG_VERSION"))
    );
    let disks = exits(&data, &["disk", "show"], 0).0;
    assert!(disks.starts_with("  DISK       OWNER "), "{disks}");
    assert_eq!(
        disks.lines().count(),
        2 + 9,
        "8 members and a spare:\n{disks}"
    );
    assert!(disks.contains("disk8        wafer"), "{disks}");
    let sysconfig = exits(&data, &["sysconfig", "-r"], 0).0;
    assert_eq!(sysconfig, exits(&data, &["aggr", "status", "-r"], 0).0);
    exits(&data, &["sysconfig"], 2);

    let err = exits(&data, &["statit", "-e"], 1).1;
    assert!(err.contains("has not begun"), "{err}");
    assert_eq!(exits(&data, &["statit", "-b"], 0).0, "");
    let statit = exits(&data, &["statit", "-e"], 0).0;
    assert!(
        statit.starts_with("Disk Statistics (per second)\n")
            && statit.contains("\n/aggr0/plex0/rg0:\ndisk0 "),
        "{statit}"
    );
    exits(&data, &["statit", "-e"], 1);
    exits(&data, &["statit"], 2);

    // WAFER_DATA finds the server from any directory without --data.
    let output = Command::new(env!("CARGO_BIN_EXE_wafer"))
        .args(["vol", "status", "vol0"])
        .env("WAFER_DATA", &data)
        .current_dir(std::env::temp_dir())
        .output()
        .expect("wafer runs");
    assert!(output.status.success(), "{output:?}");
    assert!(String::from_utf8_lossy(&output.stdout).contains("vol0 online"));

    // Without either, the user's own data directory, where it exists.
    let user = tempfile::tempdir().expect("a data home");
    std::os::unix::fs::symlink(&data, user.path().join("wafer")).expect("a link");
    let output = Command::new(env!("CARGO_BIN_EXE_wafer"))
        .args(["vol", "status", "vol0"])
        .env_remove("WAFER_DATA")
        .env("XDG_DATA_HOME", user.path())
        .current_dir(user.path())
        .output()
        .expect("wafer runs");
    assert!(output.status.success(), "{output:?}");
    assert!(String::from_utf8_lossy(&output.stdout).contains("vol0 online"));
    server.stop();
}

#[test]
fn reallocate_measures_and_starts_and_priority_sets_the_cache_policy() {
    let scratch = Scratch::new();
    let server = serve_with(&scratch, SIZES);
    let data = server.data.clone();
    let lun = "/vol/vol0/lun0";
    let measured = exits(&data, &["reallocate", "measure", "-o", lun], 0).0;
    let line = measured.trim_end();
    assert!(
        line.starts_with("Allocation check on '/vol/vol0/lun0' is ")
            && (line.ends_with("(threshold 4).") || line.ends_with("so will reallocate.")),
        "ONTAP's line: {measured}"
    );
    let json = exits(&data, &["reallocate", "measure", lun, "--json"], 0).0;
    let json: serde_json::Value = serde_json::from_str(&json).expect("JSON");
    assert_eq!(json["kind"], "reallocate_measure");
    assert_eq!(json["data"]["message"], line);
    let (out, _) = exits(
        &data,
        &["reallocate", "measure", "/vol/vol0/nope", "--json"],
        1,
    );
    assert_eq!(json_error(&out).0, "not_found");
    assert_eq!(
        exits(&data, &["reallocate", "start", "-f", lun], 0).0,
        "Reallocation scan will be started on '/vol/vol0/lun0'.\n"
    );
    let status = exits(&data, &["reallocate", "status", "-v"], 0).0;
    assert!(
        status.starts_with("Reallocation scans are on\n"),
        "{status}"
    );

    assert_eq!(
        exits(
            &data,
            &["priority", "set", "volume", "vol0", "cache=reuse"],
            0
        )
        .0,
        ""
    );
    exits(
        &data,
        &["priority", "set", "volume", "vol0", "cache=default"],
        0,
    );
    let err = exits(
        &data,
        &["priority", "set", "volume", "vol0", "cache=fast"],
        1,
    )
    .1;
    assert!(
        err.contains("usage: wafer priority set volume <vol_name> cache=keep|reuse|default"),
        "{err}"
    );
    let (out, _) = exits(
        &data,
        &["priority", "set", "volume", "vol9", "cache=keep", "--json"],
        1,
    );
    assert_eq!(json_error(&out).0, "not_found");
    server.stop();
}

/// The kbytes column of `df`'s row for `path`.
fn df_kbytes(df: &str, path: &str) -> u64 {
    let row = df
        .lines()
        .find(|l| l.starts_with(path))
        .unwrap_or_else(|| panic!("no {path} row:\n{df}"));
    row.split_whitespace()
        .nth(1)
        .expect("kbytes")
        .parse()
        .expect("a number")
}

#[test]
fn snap_reserve_shows_and_sets_the_reserve_and_df_follows() {
    let scratch = Scratch::new();
    let server = serve_with(&scratch, SIZES);
    let data = server.data.clone();
    exits(&data, &["vol", "create", "vol1", "aggr0", "20m"], 0);
    // ONTAP sets without a word; 20% of 160 MiB is 32 MiB.
    assert_eq!(exits(&data, &["snap", "reserve", "vol0", "20"], 0).0, "");
    assert_eq!(
        exits(&data, &["snap", "reserve", "vol0"], 0).0,
        "volume vol0: current snapshot reserve is 20% or 32768 k-bytes.\n"
    );
    let all = exits(&data, &["snap", "reserve"], 0).0;
    let lines: Vec<&str> = all.lines().collect();
    assert_eq!(lines.len(), 2, "every volume:\n{all}");
    assert!(lines[1].starts_with("volume vol1: current snapshot reserve is "));
    let df = exits(&data, &["df"], 0).0;
    assert_eq!(df_kbytes(&df, "/vol/vol0/.snapshot"), 32768, "{df}");
    assert_eq!(df_kbytes(&df, "/vol/vol0/ "), 160 * 1024 - 32768, "{df}");
    exits(&data, &["snap", "reserve", "vol0", "5"], 0);
    let df = exits(&data, &["df"], 0).0;
    assert_eq!(df_kbytes(&df, "/vol/vol0/.snapshot"), 8192, "{df}");
    let json = exits(&data, &["snap", "reserve", "vol0", "--json"], 0).0;
    let json: serde_json::Value = serde_json::from_str(&json).expect("JSON");
    assert_eq!(json["kind"], "snap_reserves");
    assert_eq!(json["data"][0]["percent"], 5);
    assert_eq!(json["data"][0]["reserve_bytes"], 8192 * 1024);

    let err = exits(&data, &["snap", "reserve", "vol0", "51"], 1).1;
    assert!(
        err.contains("at most 50%") || err.contains(", 50%"),
        "{err}"
    );
    let err = exits(&data, &["snap", "reserve", "vol0", "lots"], 1).1;
    assert!(
        err.ends_with("usage: snap reserve [-A | -V] [<vol_name> | <aggr_name>] [percent]\n"),
        "{err}"
    );
    let (out, _) = exits(&data, &["snap", "reserve", "vol9", "--json"], 1);
    assert_eq!(json_error(&out).0, "not_found");
    assert_eq!(
        exits(&data, &["snap", "reserve", "-A"], 0).0,
        "Aggregate aggr0: current snapshot reserve is 0% or 0 k-bytes.\n"
    );
    let (out, _) = exits(&data, &["snap", "reserve", "-A", "aggr0", "5", "--json"], 1);
    assert_eq!(json_error(&out).0, "invalid");
    server.stop();

    // The reserve was logged and committed like any change: it survives.
    let server = serve_with(&scratch, SIZES);
    assert_eq!(
        exits(&data, &["snap", "reserve", "vol0"], 0).0,
        "volume vol0: current snapshot reserve is 5% or 8192 k-bytes.\n"
    );
    server.stop();
}

#[test]
fn priority_show_volume_shows_the_cache_policy_priority_set_gave() {
    let scratch = Scratch::new();
    let server = serve_with(&scratch, SIZES);
    let data = server.data.clone();
    exits(&data, &["vol", "create", "vol1", "aggr0", "20m"], 0);
    exits(
        &data,
        &["priority", "set", "volume", "vol1", "cache=keep"],
        0,
    );
    assert_eq!(
        exits(&data, &["priority", "show", "volume"], 0).0,
        "Volume           Cache\nvol0             default\nvol1             keep\n"
    );
    assert_eq!(
        exits(&data, &["priority", "show", "volume", "-v", "vol1"], 0).0,
        "Volume: vol1\n        Cache: keep\n"
    );
    let json = exits(&data, &["priority", "show", "volume", "vol1", "--json"], 0).0;
    let json: serde_json::Value = serde_json::from_str(&json).expect("JSON");
    assert_eq!(json["kind"], "volume_priorities");
    assert_eq!(
        json["data"],
        serde_json::json!([{"volume": "vol1", "cache": "keep"}])
    );
    let (out, _) = exits(&data, &["priority", "show", "volume", "vol9", "--json"], 1);
    assert_eq!(json_error(&out).0, "not_found");
    let err = exits(&data, &["priority", "show"], 2).1;
    assert!(
        err.contains("wafer priority show volume [-v] [<vol_name>]"),
        "{err}"
    );
    let err = exits(&data, &["priority", "show", "aggr"], 2).1;
    assert!(err.contains("[possible values: volume]"), "{err}");
    server.stop();
}

/// `vol status` has the aggregate's RAID type and the volume's options;
/// `aggr status -r`'s Phys is the disk file's length, not Used again.
#[test]
fn vol_status_and_aggr_status_r_show_what_the_filer_has() {
    let scratch = Scratch::new();
    let server = serve_with(&scratch, SIZES);
    let data = server.data.clone();
    let status = exits(&data, &["vol", "status", "vol0"], 0).0;
    assert_eq!(
        status.lines().nth(1),
        Some(
            "           vol0 online          raid_dp, flex     guarantee=volume, fractional_reserve=100"
        ),
        "{status}"
    );
    let json = exits(&data, &["vol", "status", "vol0", "--json"], 0).0;
    let json: serde_json::Value = serde_json::from_str(&json).expect("JSON");
    assert_eq!(json["data"][0]["raid_type"], "raid_dp");
    assert_eq!(json["data"][0]["read_realloc"], false);
    exits(&data, &["aggr", "create", "aggr1", "-t", "raid4", "3"], 0);
    exits(&data, &["vol", "create", "vol1", "aggr1", "20m"], 0);
    let status = exits(&data, &["vol", "status", "vol1"], 0).0;
    assert!(
        status.contains(" vol1 online          raid4, flex "),
        "{status}"
    );

    let raid = exits(&data, &["aggr", "status", "-r", "aggr0"], 0).0;
    let row = raid
        .lines()
        .find(|l| l.contains(" disk0 "))
        .unwrap_or_else(|| panic!("no disk0 row:\n{raid}"));
    let file = std::fs::metadata(scratch.disk(0))
        .expect("disk0's file")
        .len();
    let phys = format!(" {}/{}", file >> 20, file / 512);
    assert!(row.ends_with(&phys), "Phys {phys}: {row}");
    server.stop();
}

#[test]
fn reallocate_quiesce_holds_the_scan_where_it_is_and_restart_and_stop_follow() {
    let scratch = Scratch::new();
    let server = serve_with(&scratch, SIZES);
    let data = server.data.clone();
    let lun = "/vol/vol0/lun0";
    serve_harness::qemu_io(&server.uri("vol0/lun0"), &["write -P 0x33 0 16M"]);
    // The stop's final CP puts the blocks in the LUN's tree, where the
    // scan finds them.
    server.stop();
    let server = serve_with(&scratch, SIZES);
    exits(&data, &["reallocate", "start", lun], 0);
    assert_eq!(
        exits(&data, &["reallocate", "quiesce", lun], 0).0,
        "Reallocation scan on '/vol/vol0/lun0' quiesced.\n"
    );
    let status = exits(&data, &["reallocate", "status", "-v"], 0).0;
    let held = "/vol/vol0/lun0:\n        State: Quiesced: block 2048 of 8192\n";
    assert!(status.ends_with(held), "{status}");
    // A CP (the 10 s timer's, for the batch marked) passes: no more batches.
    std::thread::sleep(std::time::Duration::from_secs(11));
    let status = exits(&data, &["reallocate", "status"], 0).0;
    assert!(status.ends_with(held), "the scan went on: {status}");
    let err = exits(&data, &["reallocate", "quiesce"], 1).1;
    assert!(err.contains("is already quiesced"), "{err}");

    exits(&data, &["reallocate", "restart"], 0);
    let status = exits(&data, &["reallocate", "status"], 0).0;
    assert!(status.contains("State: Reallocating: block "), "{status}");
    let (out, _) = exits(
        &data,
        &["reallocate", "stop", "/vol/vol0/nope", "--json"],
        1,
    );
    assert_eq!(json_error(&out).0, "not_found");
    exits(&data, &["reallocate", "stop", lun], 0);
    let status = exits(&data, &["reallocate", "status"], 0).0;
    assert!(status.ends_with("No reallocation status.\n"), "{status}");
    let (out, _) = exits(&data, &["reallocate", "restart", "--json"], 1);
    assert_eq!(json_error(&out).0, "not_found");
    server.stop();
}
