//! Disk labels: every disk file names its disk and its data directory, so
//! a server finds disk files that were renamed or swapped (within an
//! aggregate and across aggregates) while it was stopped, refuses a disk file
//! from another data directory without ever writing it, labels the disks of
//! a directory from before labels when it first starts it, and mounts an
//! aggregate that `wafer.toml` no longer lists from its disks' labels.

mod serve_harness;

use std::path::Path;

use serve_harness::load::{aggregate, check_chunks, config, write_chunks};
use serve_harness::{Scratch, ok, serve};
use wafer_server::labels::{self, DiskLabel};

/// The disk files' label of disk file `file` of `data`.
fn label(data: &Path, file: &str) -> Option<DiskLabel> {
    let file = std::fs::File::open(data.join(file)).expect("a disk file");
    let blocks = file.metadata().expect("stat").len() / wafer_server::SECTOR_BYTES - 2;
    labels::read(&file, blocks).expect("readable")
}

/// Disk `name`'s backing file, as `wafer.toml` names it.
fn file_of(data: &Path, name: &str) -> String {
    let config = config(data);
    let aggregates = config["aggregates"].as_array().expect("aggregates");
    aggregates
        .iter()
        .flat_map(|a| a["disks"].as_array().expect("disks"))
        .find(|d| d["name"].as_str() == Some(name))
        .and_then(|d| d["file"].as_str())
        .expect("a configured disk")
        .to_string()
}

fn swap(data: &Path, a: &str, b: &str) {
    let aside = data.join("aside");
    std::fs::rename(data.join(a), &aside).expect("moved");
    std::fs::rename(data.join(b), data.join(a)).expect("moved");
    std::fs::rename(&aside, data.join(b)).expect("moved");
}

fn group_disk(data: &Path, aggr: &str, position: usize) -> String {
    group_disk_of(aggregate(&config(data), aggr), position)
}

#[test]
fn disk_files_renamed_or_swapped_while_stopped_are_found_by_their_labels() {
    let scratch = Scratch::new();
    let data = scratch.data();
    let server = serve(&scratch);
    ok(&data, &["aggr", "create", "aggr1", "-t", "raid_dp", "5"]);
    ok(&data, &["vol", "create", "vol1", "aggr1", "160m"]);
    ok(&data, &["lun", "create", "-s", "64m", "/vol/vol1/lun1"]);
    write_chunks(&server, "vol0/lun0", 3, 256);
    write_chunks(&server, "vol1/lun1", 4, 128);
    server.stop();

    let (d2, d5) = (group_disk(&data, "aggr0", 2), group_disk(&data, "aggr0", 5));
    let (a0, a1) = (group_disk(&data, "aggr0", 3), group_disk(&data, "aggr1", 4));
    let moved = group_disk(&data, "aggr1", 2);
    let label_d2 = label(&data, &format!("{d2}.img")).expect("labelled");
    assert_eq!(label_d2.name, d2);
    assert_eq!(label_d2.role.to_string(), "aggr0 rg0 position 2");
    // Within aggr0, across aggr0 and aggr1, and a file renamed.
    swap(&data, &format!("{d2}.img"), &format!("{d5}.img"));
    swap(&data, &format!("{a0}.img"), &format!("{a1}.img"));
    std::fs::rename(data.join(format!("{moved}.img")), data.join("renamed.img")).expect("moved");

    let server = serve(&scratch);
    let log = server.log();
    for disk in [&d2, &d5, &a0, &a1, &moved] {
        assert!(
            log.contains(&format!("disk {disk} is in ")),
            "the move of {disk} is logged:\n{log}"
        );
    }
    assert_eq!(file_of(&data, &d2), format!("{d5}.img"));
    assert_eq!(file_of(&data, &a1), format!("{a0}.img"));
    assert_eq!(file_of(&data, &moved), "renamed.img");
    let status = ok(&data, &["aggr", "status", "-r"]);
    assert!(!status.contains("failed"), "no disk failed:\n{status}");
    check_chunks(&server, "vol0/lun0", 3, 256);
    check_chunks(&server, "vol1/lun1", 4, 128);
    write_chunks(&server, "vol1/lun1", 5, 64);
    ok(&data, &["aggr", "scrub", "start"]);
    server.stop();

    // Found once, the files are where the configuration says.
    let server = serve(&scratch);
    assert!(!server.log().contains(" is in "), "{}", server.log());
    check_chunks(&server, "vol1/lun1", 5, 64);
    server.stop();
}

#[test]
fn a_disk_file_from_another_data_directory_is_failed_and_never_written() {
    let ours = Scratch::new();
    let theirs = Scratch::new();
    let data = ours.data();
    let server = serve(&ours);
    write_chunks(&server, "vol0/lun0", 6, 256);
    server.stop();
    serve(&theirs).stop();

    // Their disk3 (same name and size, the same aggregate's geometry) in
    // place of ours.
    std::fs::copy(theirs.disk(3), ours.disk(3)).expect("copied");
    let foreign = std::fs::read(ours.disk(3)).expect("read");
    let server = serve(&ours);
    let log = server.log();
    assert!(
        log.contains(
            "disk disk3 failed: disk3.img holds the label of disk disk3 of another data \
                      directory"
        ),
        "disk3 failed with why:\n{log}"
    );
    let config = config(&data);
    let failed = &aggregate(&config, "aggr0")["disks"][3];
    assert_eq!(failed["name"].as_str(), Some("disk3"), "{failed}");
    assert_eq!(failed["state"].as_str(), Some("failed"), "{failed}");
    check_chunks(&server, "vol0/lun0", 6, 256);
    write_chunks(&server, "vol0/lun0", 7, 256);
    check_chunks(&server, "vol0/lun0", 7, 256);
    server.stop();
    assert!(
        std::fs::read(ours.disk(3)).expect("read") == foreign,
        "the foreign file was written"
    );
    let server = serve(&ours);
    check_chunks(&server, "vol0/lun0", 7, 256);
    server.stop();
}

#[test]
fn a_directory_from_before_labels_is_labelled_at_its_first_start() {
    let scratch = Scratch::new();
    let data = scratch.data();
    let server = serve(&scratch);
    write_chunks(&server, "vol0/lun0", 8, 128);
    server.stop();

    // As format 2 left it: no directory id, disk files without labels.
    let path = data.join(wafer_server::CONFIG_FILE);
    let mut table = config(&data);
    table.remove("directory_id");
    table.insert("format_version".into(), toml::Value::Integer(2));
    std::fs::write(&path, toml::to_string(&table).expect("encodes")).expect("written");
    let disks = aggregate(&table, "aggr0")["disks"]
        .as_array()
        .expect("disks")
        .clone();
    let mut unlabelled_bytes = Vec::new();
    for disk in &disks {
        let file = disk["file"].as_str().expect("a file");
        let blocks = disk["blocks"].as_integer().expect("blocks") as u64;
        let bytes = blocks * wafer_server::SECTOR_BYTES;
        std::fs::OpenOptions::new()
            .write(true)
            .open(data.join(file))
            .and_then(|f| f.set_len(bytes))
            .expect("labels cut off");
        assert_eq!(label(&data, file), None, "{file}");
        unlabelled_bytes.push((file.to_string(), bytes));
    }

    let server = serve(&scratch);
    assert!(
        server.log().contains("migrated to format 3"),
        "{}",
        server.log()
    );
    let table = config(&data);
    assert_eq!(table["format_version"].as_integer(), Some(3));
    let id = u128::from_str_radix(table["directory_id"].as_str().expect("an id"), 16).expect("hex");
    for (file, bytes) in unlabelled_bytes {
        let label = label(&data, &file).expect("labelled");
        assert_eq!(label.directory, id, "{file}");
        let length = std::fs::metadata(data.join(&file)).expect("stat").len();
        assert_eq!(length, bytes + 2 * wafer_server::SECTOR_BYTES, "{file}");
    }
    check_chunks(&server, "vol0/lun0", 8, 128);
    server.stop();
}

/// `wafer.toml` without its aggr1 entry, as an older copy of the file would
/// be.
fn forget_aggr1(data: &Path) {
    let mut table = config(data);
    let aggregates = table["aggregates"].as_array_mut().expect("aggregates");
    aggregates.retain(|a| a["aggregate"].as_str() != Some("aggr1"));
    let path = data.join(wafer_server::CONFIG_FILE);
    std::fs::write(&path, toml::to_string(&table).expect("encodes")).expect("written");
}

#[test]
fn an_aggregate_missing_from_the_configuration_is_found_whole_on_its_disks() {
    let scratch = Scratch::new();
    let data = scratch.data();
    let server = serve(&scratch);
    ok(&data, &["aggr", "create", "aggr1", "-t", "raid_dp", "6"]);
    ok(&data, &["vol", "create", "vol1", "aggr1", "160m"]);
    ok(&data, &["lun", "create", "-s", "64m", "/vol/vol1/lun1"]);
    ok(&data, &["disk", "add"]);
    write_chunks(&server, "vol1/lun1", 4, 128);
    server.kill();
    let before = aggregate(&config(&data), "aggr1").clone();
    forget_aggr1(&data);

    let server = serve(&scratch);
    assert!(
        server
            .log()
            .contains("aggregate aggr1 was found whole on its disks"),
        "{}",
        server.log()
    );
    let after = aggregate(&config(&data), "aggr1").clone();
    assert_eq!(after["id"], before["id"]);
    assert_eq!(after["groups"], before["groups"]);
    let status = ok(&data, &["aggr", "status"]);
    let row = status
        .lines()
        .find(|l| l.trim_start().starts_with("aggr1"))
        .unwrap_or_else(|| panic!("no aggr1 row:\n{status}"));
    assert!(row.contains("online"), "{status}");
    check_chunks(&server, "vol1/lun1", 4, 128);
    server.stop();

    // Not whole (a member's file gone): not adopted, its files left.
    let member = group_disk(&data, "aggr1", 3);
    std::fs::remove_file(data.join(format!("{member}.img"))).expect("removed");
    forget_aggr1(&data);
    let server = serve(&scratch);
    let log = server.log();
    assert!(
        log.contains(
            "disks of aggregate aggr1 (id 1) that wafer.toml does not list were found; \
                      not adopted: rg0 position 3 is on no file"
        ),
        "{log}"
    );
    assert!(!ok(&data, &["aggr", "status"]).contains("aggr1"));
    assert!(
        data.join(format!("{}.img", group_disk_of(&before, 4)))
            .exists()
    );
    server.stop();
}

fn group_disk_of(aggregate: &toml::Value, position: usize) -> String {
    aggregate["groups"][0]["disks"][position]
        .as_str()
        .expect("a disk")
        .to_string()
}
