//! A node of several aggregates: `aggr create`, `offline`, `online` and
//! `destroy` through the CLI, and the demo of issue 32: an aggregate that
//! loses more disks than RAID-DP survives is reported failed at the next
//! start, and the node serves every other aggregate's LUNs as before.

mod serve_harness;

use std::path::Path;

use serve_harness::load::{aggregate, check_chunks, check_range, config, refused, write_chunks};
use serve_harness::{NbdClient, Scratch, Served, ok, serve};
use wafer_server::admin::{AdminReply, AdminRequest, AggregateStatus};

/// The data disks' names of aggregate `name`'s first RAID group, from
/// `wafer.toml`.
fn group_disks(data: &Path, name: &str) -> Vec<String> {
    aggregate(&config(data), name)["groups"][0]["disks"]
        .as_array()
        .expect("disks")
        .iter()
        .map(|d| d.as_str().expect("a name").to_string())
        .collect()
}

/// aggr1: one RAID-DP group of five new disks, with `vol1` and
/// `/vol/vol1/lun1`.
fn create_aggr1(data: &Path) {
    let created = ok(data, &["aggr", "create", "aggr1", "-t", "raid_dp", "5"]);
    assert!(
        created.contains("Creation of aggregate 'aggr1' has completed."),
        "{created}"
    );
    let vol = ok(data, &["vol", "create", "vol1", "aggr1", "160m"]);
    assert!(vol.contains("containing aggregate\n'aggr1'"), "{vol}");
    ok(data, &["lun", "create", "-s", "64m", "/vol/vol1/lun1"]);
}

#[test]
fn an_aggregate_that_lost_three_disks_fails_alone_and_aggr0_serves_on() {
    let scratch = Scratch::new();
    let data = scratch.data();
    let server = serve(&scratch);
    create_aggr1(&data);
    let status = ok(&data, &["aggr", "status"]);
    assert!(
        status.contains("aggr0") && status.contains("aggr1"),
        "{status}"
    );
    write_chunks(&server, "vol0/lun0", 3, 256);
    write_chunks(&server, "vol1/lun1", 4, 128);
    check_chunks(&server, "vol1/lun1", 4, 128);
    server.stop();

    let aggr1 = group_disks(&data, "aggr1");
    assert_eq!(aggr1.len(), 5, "{aggr1:?}");
    for disk in &aggr1[..3] {
        std::fs::remove_file(data.join(format!("{disk}.img"))).expect("removed");
    }

    let server = serve(&scratch);
    assert!(
        server.startup.contains("aggregate aggr1") && server.startup.contains("FAILED"),
        "{}",
        server.startup
    );
    assert!(
        server.startup.contains("mounted aggregate aggr0"),
        "{}",
        server.startup
    );
    let status = ok(&data, &["aggr", "status"]);
    let aggr1_row = status
        .lines()
        .find(|l| l.trim_start().starts_with("aggr1"))
        .unwrap_or_else(|| panic!("no aggr1 row:\n{status}"));
    assert!(aggr1_row.contains("failed"), "{status}");
    assert!(
        status.contains("Aggregate aggr1 failed:") && status.contains(&aggr1[0]),
        "the reason names the missing disks:\n{status}"
    );
    let raid = ok(&data, &["aggr", "status", "-r", "aggr1"]);
    assert!(raid.contains("Aggregate aggr1 (failed"), "{raid}");
    assert!(ok(&data, &["aggr", "status", "aggr0"]).contains("online"));
    // Every byte written to aggr0 reads back, and writes go on.
    check_chunks(&server, "vol0/lun0", 3, 256);
    write_chunks(&server, "vol0/lun0", 5, 64);
    check_chunks(&server, "vol0/lun0", 5, 64);
    // aggr1's LUN is not exported.
    assert!(NbdClient::try_connect(server.socket(), "vol1/lun1").is_err());
    server.stop();
    // Its disks' states were left as they were: nothing was recorded failed.
    let text = std::fs::read_to_string(data.join(wafer_server::CONFIG_FILE)).expect("config");
    assert!(!text.contains("state = \"failed\""), "{text}");
    let server = serve(&scratch);
    check_chunks(&server, "vol0/lun0", 5, 64);
    check_range(&server, "vol0/lun0", 3, 64..256);
    server.stop();
}

#[test]
fn aggregates_are_created_taken_offline_brought_online_and_destroyed() {
    let scratch = Scratch::new();
    let data = scratch.data();
    let server = serve(&scratch);
    create_aggr1(&data);
    write_chunks(&server, "vol1/lun1", 9, 64);
    let df = ok(&data, &["df", "-A"]);
    assert!(df.contains("aggr0 ") && df.contains("aggr1 "), "{df}");
    let disks = ok(&data, &["disk", "show"]);
    for disk in group_disks(&data, "aggr1") {
        assert!(disks.contains(&disk), "{disk} in disk show:\n{disks}");
    }
    let raid = ok(&data, &["sysconfig", "-r"]);
    assert!(raid.contains("Aggregate aggr0") && raid.contains("Aggregate aggr1"));

    let err = refused(&data, &["aggr", "destroy", "-f", "aggr1"]);
    assert!(err.contains("take it offline first"), "{err}");
    let offline = ok(&data, &["aggr", "offline", "aggr1"]);
    assert!(
        offline.contains("Aggregate 'aggr1' is now offline."),
        "{offline}"
    );
    let status = ok(&data, &["aggr", "status"]);
    assert!(
        status
            .lines()
            .any(|l| l.trim_start().starts_with("aggr1") && l.contains("offline")),
        "{status}"
    );
    assert!(NbdClient::try_connect(server.socket(), "vol1/lun1").is_err());
    server.stop();

    // Offline is recorded on aggr1's disks: it stays offline across a
    // restart even where wafer.toml lost it (a crash before its save), and
    // wafer.toml is mended.
    let config = data.join("wafer.toml");
    let text = std::fs::read_to_string(&config).expect("wafer.toml");
    assert!(text.contains("offline = true"), "{text}");
    std::fs::write(&config, text.replace("offline = true\n", "")).expect("rewritten");
    let server = serve(&scratch);
    assert!(ok(&data, &["aggr", "status", "aggr1"]).contains("offline"));
    let text = std::fs::read_to_string(&config).expect("wafer.toml");
    assert!(text.contains("offline = true"), "not mended:\n{text}");
    let online = ok(&data, &["aggr", "online", "aggr1"]);
    assert!(
        online.contains("Aggregate 'aggr1' is now online."),
        "{online}"
    );
    check_chunks(&server, "vol1/lun1", 9, 64);

    ok(&data, &["aggr", "offline", "aggr1"]);
    let aggr1 = group_disks(&data, "aggr1");
    let unconfirmed = refused(&data, &["aggr", "destroy", "aggr1"]);
    assert!(
        unconfirmed.contains("not confirmed (-f destroys"),
        "{unconfirmed}"
    );
    let destroyed = ok(&data, &["aggr", "destroy", "-f", "aggr1"]);
    assert!(
        destroyed.contains("Aggregate 'aggr1' destroyed."),
        "{destroyed}"
    );
    assert!(destroyed.contains(&aggr1[0]), "{destroyed}");
    let status = ok(&data, &["aggr", "status"]);
    assert!(!status.contains("aggr1"), "{status}");
    for disk in &aggr1 {
        assert!(data.join(format!("{disk}.img")).exists(), "{disk} kept");
    }
    // A new aggregate takes the pool's spares first.
    ok(&data, &["aggr", "create", "aggr2", "-t", "raid4", "4"]);
    let aggr2 = group_disks(&data, "aggr2");
    assert!(
        aggr2.iter().all(|d| aggr1.contains(d)),
        "{aggr2:?} from {aggr1:?}"
    );
    let raid = ok(&data, &["aggr", "status", "-r", "aggr2"]);
    assert!(raid.contains("raid4"), "{raid}");
    ok(&data, &["vol", "create", "vol2", "aggr2", "96m"]);
    ok(&data, &["lun", "create", "-s", "16m", "/vol/vol2/lun2"]);
    write_chunks(&server, "vol2/lun2", 11, 32);
    server.stop();
    let server = serve(&scratch);
    check_chunks(&server, "vol2/lun2", 11, 32);
    server.stop();
}

#[test]
fn wrong_aggregate_administration_is_refused_with_a_reason() {
    let scratch = Scratch::new();
    let data = scratch.data();
    let server = serve(&scratch);
    let err = refused(&data, &["aggr", "status", "aggr7"]);
    assert!(err.contains("No aggregate named 'aggr7' exists."), "{err}");
    for verb in [&["offline"][..], &["online"], &["destroy", "-f"]] {
        let err = refused(&data, &[&["aggr"][..], verb, &["aggr7"]].concat());
        assert!(
            err.contains("No aggregate named 'aggr7' exists."),
            "{verb:?}: {err}"
        );
    }
    let err = refused(&data, &["aggr", "create", "aggr0", "3"]);
    assert!(err.contains("already exists"), "{err}");
    let err = refused(&data, &["aggr", "destroy", "-f", "aggr0"]);
    assert!(
        err.contains("aggr0' is online; take it offline first"),
        "{err}"
    );
    let err = refused(&data, &["aggr", "online", "aggr0"]);
    assert!(err.contains("it must be offline"), "{err}");
    let err = refused(&data, &["aggr", "create", "aggr1", "2"]);
    assert!(err.contains("at least 3"), "{err}");
    let err = refused(&data, &["aggr", "create", "aggr1", "-r", "4", "10"]);
    assert!(err.contains("a group of 2"), "{err}");
    let err = refused(&data, &["aggr", "create", "9lives", "3"]);
    assert!(err.contains("invalid aggregate name"), "{err}");
    let err = refused(&data, &["vol", "create", "v9", "aggr9", "10m"]);
    assert!(err.contains("No aggregate named 'aggr9' exists."), "{err}");
    // Nothing was made: no disk file beyond aggr0's nine.
    let files = std::fs::read_dir(&data)
        .expect("listable")
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.file_name().to_string_lossy().ends_with(".img"))
        })
        .count();
    assert_eq!(files, 9);
    server.stop();
}

#[test]
fn a_format_1_data_directory_is_migrated_to_aggregate_0() {
    let scratch = Scratch::new();
    let data = scratch.data();
    let server = serve(&scratch);
    write_chunks(&server, "vol0/lun0", 6, 32);
    server.stop();
    // Rewrite wafer.toml as format 1 wrote it: one aggregate, at the top.
    let path = data.join(wafer_server::CONFIG_FILE);
    let text = std::fs::read_to_string(&path).expect("config");
    let mut config: toml::Table = toml::from_str(&text).expect("TOML");
    let aggr = config
        .remove("aggregates")
        .and_then(|a| a.as_array().and_then(|a| a.first().cloned()))
        .expect("one aggregate");
    let toml::Value::Table(mut aggr) = aggr else {
        panic!("a table")
    };
    aggr.remove("id");
    config.remove("directory_id");
    config.remove("spare_pool");
    config.remove("san");
    config.insert("format_version".into(), toml::Value::Integer(1));
    let half = config["nvlog_half_bytes"].as_integer().expect("a size") as u64;
    let stripes = aggr["groups"][0]["blocks_per_disk"]
        .as_integer()
        .expect("blocks") as u64;
    config.extend(aggr);
    std::fs::write(&path, toml::to_string(&config).expect("encodes")).expect("written");
    // And its NVLog as format 1 sized it, for one aggregate's CP records
    // (half 0 keeps its place; a graceful stop left both halves reset).
    let record_max = (32 << 20) + 4096;
    let region = (half.max(record_max) + 8 * (25 + 12 * stripes) + 4).next_multiple_of(4096);
    let nvlog = std::fs::OpenOptions::new()
        .write(true)
        .open(data.join("nvlog"))
        .expect("the NVLog");
    let roomy = nvlog.metadata().expect("stat").len();
    assert!(roomy > 2 * region, "{roomy} <= {}", 2 * region);
    nvlog.set_len(2 * region).expect("shrunk");
    drop(nvlog);

    let server = serve(&scratch);
    check_chunks(&server, "vol0/lun0", 6, 32);
    let text = std::fs::read_to_string(&path).expect("config");
    assert!(text.contains("format_version = 3"), "{text}");
    let grown = std::fs::metadata(data.join("nvlog")).expect("stat").len();
    assert_eq!(grown, roomy, "the NVLog grew back to a new node's room");
    assert!(text.contains("[[aggregates]]"), "{text}");
    create_aggr1(&data);
    server.stop();
}

#[test]
fn an_aggregate_whose_disks_hold_no_superblock_fails_alone() {
    // What a configuration naming an aggregate that never committed would
    // find (the server never saves one, but a file copied back or a disk
    // wiped looks the same): blank disks.
    let scratch = Scratch::new();
    let data = scratch.data();
    let server = serve(&scratch);
    create_aggr1(&data);
    write_chunks(&server, "vol0/lun0", 8, 32);
    server.stop();
    for disk in group_disks(&data, "aggr1") {
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(data.join(format!("{disk}.img")))
            .expect("opens");
        let length = file.metadata().expect("stat").len();
        file.set_len(0).expect("truncated");
        file.set_len(length).expect("extended");
    }
    let server = serve(&scratch);
    let status = ok(&data, &["aggr", "status"]);
    assert!(status.contains("Aggregate aggr1 failed:"), "{status}");
    check_chunks(&server, "vol0/lun0", 8, 32);
    // A failed aggregate can be destroyed; its disks join the pool.
    let destroyed = ok(&data, &["aggr", "destroy", "-f", "aggr1"]);
    assert!(destroyed.contains("destroyed"), "{destroyed}");
    ok(&data, &["aggr", "create", "aggr1", "5"]);
    ok(&data, &["vol", "create", "vol1", "aggr1", "160m"]);
    server.stop();
}

#[test]
fn writes_to_two_aggregates_survive_a_kill_through_the_one_nvlog() {
    let scratch = Scratch::new();
    let data = scratch.data();
    let server = serve(&scratch);
    create_aggr1(&data);
    write_chunks(&server, "vol0/lun0", 12, 48);
    write_chunks(&server, "vol1/lun1", 13, 48);
    // No graceful stop: the writes since the last CP are only in the NVLog,
    // each record tagged with its aggregate.
    server.kill();
    let server = serve(&scratch);
    check_chunks(&server, "vol0/lun0", 12, 48);
    check_chunks(&server, "vol1/lun1", 13, 48);
    server.stop();
}

/// Every aggregate's status, by the admin socket.
fn statuses(server: &Served) -> Vec<AggregateStatus> {
    match server.admin_ok(AdminRequest::AggrStatusAll) {
        AdminReply::Aggregates(all) => all,
        other => panic!("aggr status answered {other:?}"),
    }
}

fn scrubbed(server: &Served, name: &str) -> bool {
    let all = statuses(server);
    let aggr = all.iter().find(|a| a.name == name).expect("listed");
    aggr.scrub.is_some()
}

#[test]
fn scrubs_and_disk_slots_act_on_the_named_aggregate() {
    let scratch = Scratch::new();
    let data = scratch.data();
    let server = serve(&scratch);
    create_aggr1(&data);
    write_chunks(&server, "vol1/lun1", 14, 64);

    // A named scrub runs on that aggregate only, and stops there only.
    let started = ok(&data, &["aggr", "scrub", "start", "aggr1"]);
    assert!(
        started.contains("scrub of aggregate aggr1 started"),
        "{started}"
    );
    assert!(scrubbed(&server, "aggr1") && !scrubbed(&server, "aggr0"));
    let err = refused(&data, &["aggr", "scrub", "stop", "aggr0"]);
    assert!(
        err.contains("no scrub of aggregate aggr0 is running"),
        "{err}"
    );
    let err = refused(&data, &["aggr", "scrub", "start", "aggr7"]);
    assert!(err.contains("No aggregate named 'aggr7' exists."), "{err}");
    let stopped = ok(&data, &["aggr", "scrub", "stop", "aggr1"]);
    assert!(
        stopped.contains("scrub of aggregate aggr1 stopped"),
        "{stopped}"
    );
    // Without a name, as ONTAP: every online aggregate.
    let started = ok(&data, &["aggr", "scrub", "start"]);
    assert!(
        started.contains("scrub of aggregates aggr0, aggr1 started"),
        "{started}"
    );
    let running = statuses(&server)
        .iter()
        .filter(|a| a.scrub.as_ref().is_some_and(|s| s.running))
        .count();
    let stopped = ok(&data, &["aggr", "scrub", "stop"]);
    assert!(
        running == 0 || stopped.contains("stopped"),
        "{running} running: {stopped}"
    );
    let status = ok(&data, &["aggr", "scrub", "status", "aggr1"]);
    assert!(
        status.contains("/aggr1/plex0/rg0") && !status.contains("aggr0"),
        "{status}"
    );

    // A slot number names a slot of the aggregate -a names.
    let aggr1 = group_disks(&data, "aggr1");
    let failed = ok(&data, &["disk", "fail", "-a", "aggr1", "2"]);
    assert!(
        failed.contains(&format!(
            "disk {} (slot 2 of aggregate aggr1) failed",
            aggr1[2]
        )),
        "{failed}"
    );
    let text = std::fs::read_to_string(data.join(wafer_server::CONFIG_FILE)).expect("config");
    assert_eq!(text.matches("state = \"failed\"").count(), 1, "{text}");
    let all = statuses(&server);
    let state = |aggr: &str, slot: u32| {
        let aggr = all.iter().find(|a| a.name == aggr).expect("listed");
        let disk = aggr.raid_groups[0].disks.iter().find(|d| d.slot == slot);
        disk.map(|d| d.state)
    };
    assert_eq!(state("aggr1", 2), Some(wafer_server::DiskState::Failed));
    assert_eq!(state("aggr0", 2), Some(wafer_server::DiskState::InService));
    let err = refused(&data, &["disk", "fail", "-a", "aggr1", "disk0"]);
    assert!(err.contains("no disk disk0 in aggregate aggr1"), "{err}");
    let err = refused(&data, &["disk", "fail", "-a", "aggr7", "1"]);
    assert!(
        err.contains("disk fail: No aggregate named 'aggr7' exists."),
        "{err}"
    );
    let err = refused(&data, &["disk", "replace", "-a", "aggr1", "3"]);
    assert!(err.contains("not a failed RAID group member"), "{err}");
    let replaced = ok(&data, &["disk", "replace", "-a", "aggr1", "2"]);
    assert!(
        replaced.contains(&format!("failed disk {}", aggr1[2])),
        "{replaced}"
    );
    check_chunks(&server, "vol1/lun1", 14, 64);
    server.stop();
}
