//! `wafer serve` refuses, with a clear message and without changing anything,
//! what it must not serve: a data directory another server holds, a corrupt
//! configuration, a RAID group that lost more disks than its parity rebuilds,
//! and a directory that is not a data directory.

mod serve_harness;

use std::path::Path;

use serve_harness::{Scratch, refusal, serve};

/// Every file of a directory with its length and modification time.
fn snapshot_of(dir: &Path) -> Vec<(String, u64, std::time::SystemTime)> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .expect("listable")
        .map(|entry| {
            let entry = entry.expect("an entry");
            let meta = entry.metadata().expect("its metadata");
            let name = entry.file_name().to_string_lossy().into_owned();
            (name, meta.len(), meta.modified().expect("an mtime"))
        })
        .collect();
    files.sort();
    files
}

#[test]
fn a_second_server_on_the_same_directory_is_refused() {
    let scratch = Scratch::new();
    let server = serve(&scratch);
    let other = scratch.file("other.sock");
    let message = refusal(&scratch, &["--socket", other.to_str().expect("UTF-8")]);
    assert!(
        message.contains("in use by another wafer server"),
        "{message}"
    );
    assert!(message.contains("wafer.lock"), "{message}");
    // The first server is unharmed.
    assert!(server.sysstat().uptime_ns > 0);
    server.stop();
}

#[test]
fn a_corrupt_configuration_is_refused_and_nothing_is_touched() {
    let scratch = Scratch::new();
    serve(&scratch).stop();
    let config = scratch.data().join(wafer_server::CONFIG_FILE);
    let good = std::fs::read_to_string(&config).expect("config");
    for (corruption, expected) in [
        (
            good.replace("raid_type = \"raid_dp\"", "raid_type = \"raid_9\""),
            "malformed",
        ),
        (
            good.replace("spares = [\"disk8\"]", "spares = [\"disk1\"]"),
            "used twice",
        ),
        ("aggregate = [[[".to_string(), "malformed"),
    ] {
        std::fs::write(&config, &corruption).expect("corrupted");
        let before = snapshot_of(&scratch.data());
        let message = refusal(&scratch, &[]);
        assert!(message.contains(expected), "{message}");
        assert!(
            message.contains("nothing in the data directory was changed"),
            "{message}"
        );
        assert_eq!(snapshot_of(&scratch.data()), before);
        assert_eq!(
            std::fs::read_to_string(&config).expect("config"),
            corruption
        );
    }
    std::fs::write(&config, good).expect("restored");
    serve(&scratch).stop();
}

#[test]
fn three_failed_disks_in_a_raid_dp_group_are_refused() {
    let scratch = Scratch::new();
    serve(&scratch).stop();
    for disk in [1, 4, 6] {
        std::fs::remove_file(scratch.disk(disk)).expect("removed");
    }
    let config =
        std::fs::read_to_string(scratch.data().join(wafer_server::CONFIG_FILE)).expect("config");
    let message = refusal(&scratch, &[]);
    assert!(
        message.contains("3 failed disks (disk1, disk4, disk6)"),
        "{message}"
    );
    assert!(message.contains("survives"), "{message}");
    let after =
        std::fs::read_to_string(scratch.data().join(wafer_server::CONFIG_FILE)).expect("config");
    assert_eq!(after, config, "the refusal changed the configuration");
}

#[test]
fn a_directory_that_is_not_a_data_directory_is_refused() {
    let scratch = Scratch::new();
    std::fs::create_dir(scratch.data()).expect("created");
    std::fs::write(scratch.data().join("notes.txt"), "mine").expect("written");
    let message = refusal(&scratch, &[]);
    assert!(message.contains("not a wafer data directory"), "{message}");
    assert_eq!(snapshot_of(&scratch.data()).len(), 1);
}
