//! `aggr add`: disks join an online aggregate (the last RAID group first,
//! then new groups), its space grows at once, what was written before reads
//! back, and a volume that did not fit before fits after; a crash right
//! after the answer, or between the configuration naming the disks and the
//! CP that records them, loses nothing; wrong usage is refused and makes no
//! disk file.

mod serve_harness;

use std::path::Path;
use std::time::{Duration, Instant};

use serve_harness::load::{
    CHUNK, Writes, aggregate, check_chunks, config, refused, write_chunks, write_pipelined,
};
use serve_harness::{NbdClient, Scratch, Served, Tmpfs, ok, serve, wafer};
use wafer_server::admin::{AdminReply, AdminRequest};

/// The blocks a 128 MiB data disk adds to a RAID group after the first.
const DISK: u64 = 128 << 20;
/// The blocks it adds to RAID group 0, whose every data disk keeps the two
/// superblock copies.
const RG0_DISK: u64 = DISK - 2 * 4096;

/// Aggregate `name`'s total bytes, as `df -A` reports them.
fn total_bytes(server: &Served, name: &str) -> u64 {
    match server.admin_ok(AdminRequest::DfAggregates) {
        AdminReply::AggregateSpaces(all) => {
            let aggr = all.iter().find(|a| a.aggregate == name).expect("listed");
            aggr.total_bytes
        }
        other => panic!("df -A answered {other:?}"),
    }
}

/// Aggregate `name`'s RAID groups' disk names, from `wafer.toml`.
fn groups(data: &Path, name: &str) -> Vec<Vec<String>> {
    let config = config(data);
    let aggr = aggregate(&config, name);
    aggr["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .map(|g| {
            g["disks"]
                .as_array()
                .expect("disks")
                .iter()
                .map(|d| d.as_str().expect("a name").to_string())
                .collect()
        })
        .collect()
}

fn disk_files(data: &Path) -> usize {
    std::fs::read_dir(data)
        .expect("listable")
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.file_name().to_string_lossy().ends_with(".img"))
        })
        .count()
}

#[test]
fn disks_fill_the_last_group_then_make_a_new_one_and_the_space_serves() {
    let scratch = Scratch::new();
    let data = scratch.data();
    let server = serve(&scratch);
    write_chunks(&server, "vol0/lun0", 1, 256);
    let before = total_bytes(&server, "aggr0");
    // Six 128 MiB data disks hold 768 MiB, most of it vol0's: 600 MiB more
    // does not fit.
    let err = refused(&data, &["vol", "create", "vol1", "aggr0", "600m"]);
    assert!(err.contains("space"), "{err}");

    let added = ok(&data, &["aggr", "add", "aggr0", "4"]);
    assert!(
        added.contains("Addition of 4 disks to the aggregate has completed."),
        "{added}"
    );
    let rg = groups(&data, "aggr0");
    assert_eq!(rg.len(), 1, "{rg:?}");
    assert_eq!(rg[0].len(), 12, "rg0 filled towards its raidsize: {rg:?}");
    let grown = total_bytes(&server, "aggr0");
    assert_eq!(grown - before, 4 * RG0_DISK, "four data disks' blocks");
    let df = ok(&data, &["df", "-A"]);
    let kbytes = df
        .lines()
        .find(|l| l.starts_with("aggr0 "))
        .and_then(|l| l.split_whitespace().nth(1))
        .expect("an aggr0 row");
    assert_eq!(kbytes, (grown / 1024).to_string(), "{df}");

    let added = ok(&data, &["aggr", "add", "aggr0", "-g", "new", "3"]);
    assert!(added.contains("Addition of 3 disks"), "{added}");
    let rg = groups(&data, "aggr0");
    assert_eq!(rg.len(), 2, "{rg:?}");
    assert_eq!(rg[1].len(), 3, "{rg:?}");
    assert_eq!(total_bytes(&server, "aggr0") - grown, DISK);
    let raid = ok(&data, &["aggr", "status", "-r", "aggr0"]);
    assert!(raid.contains("RAID group /aggr0/plex0/rg1"), "{raid}");
    for disk in rg.iter().flatten() {
        assert!(raid.contains(disk.as_str()), "{disk} listed:\n{raid}");
    }
    assert!(raid.contains("disk8"), "the spare is still listed:\n{raid}");

    // What was written before reads back; the volume that did not fit does.
    check_chunks(&server, "vol0/lun0", 1, 256);
    ok(&data, &["vol", "create", "vol1", "aggr0", "600m"]);
    ok(&data, &["lun", "create", "-s", "512m", "/vol/vol1/lun1"]);
    write_chunks(&server, "vol1/lun1", 2, 1024);
    check_chunks(&server, "vol1/lun1", 2, 1024);

    // The spare's slot moved up behind the new members, in the running
    // engine as in the configuration: a failed disk is rebuilt onto the
    // spare's file, and with another disk failed after that, every block
    // still comes back from parity over the rebuilt one.
    ok(&data, &["disk", "fail", &rg[0][3]]);
    let deadline = Instant::now() + Duration::from_secs(90);
    while server.sysstat().rebuilds_completed == 0 {
        assert!(Instant::now() < deadline, "no rebuild finished");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(groups(&data, "aggr0")[0][3], "disk8");
    ok(&data, &["disk", "fail", &rg[0][10]]);
    check_chunks(&server, "vol0/lun0", 1, 256);
    check_chunks(&server, "vol1/lun1", 2, 1024);
    server.stop();

    let server = serve(&scratch);
    check_chunks(&server, "vol0/lun0", 1, 256);
    check_chunks(&server, "vol1/lun1", 2, 1024);
    assert_eq!(total_bytes(&server, "aggr0"), grown + DISK);
    server.stop();
}

#[test]
fn a_kill_right_after_aggr_add_loses_nothing() {
    let scratch = Scratch::new();
    let data = scratch.data();
    let server = serve(&scratch);
    write_chunks(&server, "vol0/lun0", 3, 128);
    ok(&data, &["aggr", "add", "aggr0", "-g", "new", "4"]);
    let grown = total_bytes(&server, "aggr0");
    ok(&data, &["vol", "create", "vol1", "aggr0", "256m"]);
    ok(&data, &["lun", "create", "-s", "128m", "/vol/vol1/lun1"]);
    write_chunks(&server, "vol1/lun1", 4, 512);
    write_chunks(&server, "vol0/lun0", 5, 64);
    // No graceful stop: what followed the addition is in the NVLog only.
    server.kill();
    let server = serve(&scratch);
    assert_eq!(total_bytes(&server, "aggr0"), grown);
    check_chunks(&server, "vol1/lun1", 4, 512);
    check_chunks(&server, "vol0/lun0", 5, 64);
    server.stop();
}

#[test]
fn a_kill_while_writes_and_an_addition_are_under_way_loses_nothing() {
    // Writes stream in while the disks are added, so the addition may find
    // a CP running and wait for it; the kill comes while writes go on.
    let scratch = Scratch::new();
    let data = scratch.data();
    let server = serve(&scratch);
    let grown = std::thread::scope(|scope| {
        let writer = scope.spawn(|| {
            let mut client = NbdClient::connect(server.socket(), "vol0/lun0");
            let writes = Writes {
                generation: 8,
                count: 3072,
                bytes: CHUNK,
                in_flight: 1,
                stop_after: None,
            };
            let acknowledged = write_pipelined(&mut client, &writes);
            acknowledged.iter().take_while(|&&a| a).count() as u64
        });
        std::thread::sleep(Duration::from_millis(300));
        ok(&data, &["aggr", "add", "aggr0", "-g", "new", "3"]);
        let grown = total_bytes(&server, "aggr0");
        std::thread::sleep(Duration::from_millis(300));
        let pid = server.pid().to_string();
        let killed = std::process::Command::new("kill")
            .args(["-KILL", &pid])
            .status()
            .expect("kill runs");
        assert!(killed.success());
        let acknowledged = writer.join().expect("the writer");
        assert!(acknowledged > 0, "no write was acknowledged");
        (grown, acknowledged)
    });
    let (grown, acknowledged) = grown;
    drop(server);
    let server = serve(&scratch);
    assert_eq!(total_bytes(&server, "aggr0"), grown);
    check_chunks(&server, "vol0/lun0", 8, acknowledged);
    server.stop();
}

#[test]
fn a_crash_between_the_steps_of_aggr_add_mounts_and_loses_nothing() {
    let scratch = Scratch::new();
    let data = scratch.data();
    let server = serve(&scratch);
    write_chunks(&server, "vol0/lun0", 6, 128);
    let before = total_bytes(&server, "aggr0");
    server.kill();

    // Disks made, the configuration not saved yet: a blank file nothing
    // names. And one already named in the last group, labelled with its
    // name (a save labels a disk before it names it; the label's role is
    // not what identifies it), its superblock not yet written: what a
    // crash before the next CP leaves.
    let blocks = aggregate(&config(&data), "aggr0")["disks"][0]["blocks"]
        .as_integer()
        .expect("blocks") as u64;
    for name in ["disk9", "disk10"] {
        let file = std::fs::File::create(data.join(format!("{name}.img"))).expect("made");
        file.set_len(wafer_server::labels::disk_file_bytes(blocks))
            .expect("sized");
    }
    let mut config = config(&data);
    let directory = config["directory_id"].as_str().expect("an id");
    let label = wafer_server::labels::DiskLabel {
        directory: u128::from_str_radix(directory, 16).expect("hex"),
        name: "disk10".into(),
        blocks,
        role: wafer_server::labels::Role::Pool,
        sequence: 1,
    };
    let disk10 = std::fs::OpenOptions::new()
        .write(true)
        .open(data.join("disk10.img"))
        .expect("made");
    wafer_server::labels::write(&disk10, blocks, &label).expect("labelled");
    let aggr = config["aggregates"]
        .as_array_mut()
        .expect("aggregates")
        .iter_mut()
        .find(|a| a["aggregate"].as_str() == Some("aggr0"))
        .expect("aggr0");
    aggr["groups"][0]["disks"]
        .as_array_mut()
        .expect("disks")
        .push("disk10".into());
    let mut disk = aggr["disks"][0].as_table().expect("a disk").clone();
    disk.insert("name".into(), "disk10".into());
    disk.insert("file".into(), "disk10.img".into());
    aggr["disks"]
        .as_array_mut()
        .expect("disks")
        .push(disk.into());
    std::fs::write(
        data.join(wafer_server::CONFIG_FILE),
        toml::to_string(&config).expect("encodes"),
    )
    .expect("written");

    let server = serve(&scratch);
    check_chunks(&server, "vol0/lun0", 6, 128);
    assert_eq!(total_bytes(&server, "aggr0"), before + RG0_DISK);
    // The unnamed file is left alone: the next disk skips its name.
    ok(&data, &["aggr", "add", "aggr0", "1"]);
    let rg = groups(&data, "aggr0");
    assert_eq!(rg[0][8..], ["disk10", "disk11"], "{rg:?}");
    write_chunks(&server, "vol0/lun0", 7, 256);
    server.kill();
    let server = serve(&scratch);
    assert_eq!(total_bytes(&server, "aggr0"), before + 2 * RG0_DISK);
    check_chunks(&server, "vol0/lun0", 7, 256);
    server.stop();
}

#[test]
fn wrong_aggr_add_is_refused_with_a_reason_and_makes_no_disk() {
    let scratch = Scratch::new();
    let data = scratch.data();
    let server = serve(&scratch);
    let err = refused(&data, &["aggr", "add", "aggr7", "3"]);
    assert!(err.contains("No aggregate named 'aggr7' exists."), "{err}");
    let err = refused(&data, &["aggr", "add", "aggr0", "0"]);
    assert!(err.contains("at least 1"), "{err}");
    let err = refused(&data, &["aggr", "add", "aggr0", "-g", "rg3", "1"]);
    assert!(err.contains("no RAID group rg3"), "{err}");
    let err = refused(&data, &["aggr", "add", "aggr0", "-g", "rg0", "9"]);
    assert!(err.contains("room for 8 more"), "{err}");
    let err = refused(&data, &["aggr", "add", "aggr0", "-g", "new", "2"]);
    assert!(err.contains("at least 3"), "{err}");
    let err = refused(&data, &["aggr", "add", "aggr0", "-g", "disk", "3"]);
    assert!(err.contains("name a RAID group"), "{err}");
    let err = refused(&data, &["aggr", "add", "aggr0", "-g", "new", "5000"]);
    assert!(err.contains("at most 64"), "{err}");
    // A new directory's NVLog has room for the CP records of four times
    // aggr0's stripes: not for four more groups of its disks.
    let err = refused(&data, &["aggr", "add", "aggr0", "-g", "new", "60"]);
    assert!(
        err.contains("have no room for the CP records of 4 more RAID groups"),
        "{err}"
    );
    // An offline aggregate takes no disk.
    ok(
        &data,
        &["aggr", "create", "aggr1", "-t", "raid4", "-r", "3", "3"],
    );
    ok(&data, &["aggr", "offline", "aggr1"]);
    let err = refused(&data, &["aggr", "add", "aggr1", "3"]);
    assert!(
        err.contains("aggregate 'aggr1' is offline; only an online aggregate takes disks"),
        "{err}"
    );
    ok(&data, &["aggr", "online", "aggr1"]);
    // A RAID-4 aggregate of raidsize 3 grows in RAID-4 groups of 3.
    let err = refused(&data, &["aggr", "add", "aggr1", "-g", "rg0", "1"]);
    assert!(err.contains("room for 0 more (raidsize 3)"), "{err}");
    assert_eq!(disk_files(&data), 12, "only aggr1's three disks were made");
    ok(&data, &["aggr", "add", "aggr1", "5"]);
    let rg = groups(&data, "aggr1");
    assert_eq!(rg.iter().map(Vec::len).collect::<Vec<_>>(), [3, 3, 2]);
    let raid = ok(&data, &["aggr", "status", "-r", "aggr1"]);
    assert!(
        raid.contains("Aggregate aggr1 (online, raid4)") && raid.contains("/aggr1/plex0/rg2"),
        "{raid}"
    );
    let status = ok(&data, &["aggr", "status", "-v", "aggr1"]);
    assert!(status.contains("raidsize=3"), "{status}");
    server.stop();
}

#[test]
fn an_addition_the_host_has_no_room_for_is_refused_and_makes_no_disk() {
    // A 256 MiB tmpfs holds the data directory (the NVLog written in full,
    // the sparse disks' first blocks) but not three more 128 MiB disks.
    let scratch = Scratch::new();
    let Some(tmpfs) = Tmpfs::mount(&scratch.file("fs"), 256 << 20) else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI runs as root and must be able to mount a tmpfs"
        );
        eprintln!("cannot mount a tmpfs (not root?): this test did not run");
        return;
    };
    let data = tmpfs.dir.join("data");
    std::fs::create_dir(&data).expect("the data directory");
    std::os::unix::fs::symlink(&data, scratch.data()).expect("a link to it");
    let server = serve(&scratch);
    let free = tmpfs.available();
    assert!(free < 3 * DISK, "{free} bytes free");
    let (code, _, err) = wafer(&data, &["aggr", "add", "aggr0", "-g", "new", "3"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("not enough space for 3 new disk files"),
        "{err}"
    );
    assert_eq!(disk_files(&data), 9, "no disk file was made");
    assert_eq!(groups(&data, "aggr0").len(), 1);
    server.stop();
}

#[test]
fn the_pool_spares_go_first_and_are_blanked_before_they_are_named() {
    let scratch = Scratch::new();
    let data = scratch.data();
    let server = serve(&scratch);
    write_chunks(&server, "vol0/lun0", 9, 128);
    ok(&data, &["aggr", "create", "aggr1", "5"]);
    let aggr1 = groups(&data, "aggr1").remove(0);
    ok(&data, &["aggr", "offline", "aggr1"]);
    ok(&data, &["aggr", "destroy", "-f", "aggr1"]);
    // What a crash in the middle of aggr destroy leaves: pool spares with
    // old contents. Plant some in each.
    let garbage = vec![0xab_u8; 1 << 20];
    let at = 64 << 20;
    for disk in &aggr1 {
        use std::os::unix::fs::FileExt;
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(data.join(format!("{disk}.img")))
            .expect("a pool spare");
        file.write_all_at(&garbage, at).expect("planted");
    }
    ok(&data, &["aggr", "add", "aggr0", "-g", "new", "3"]);
    let rg1 = groups(&data, "aggr0").remove(1);
    assert!(
        rg1.iter().all(|d| aggr1.contains(d)),
        "{rg1:?} from {aggr1:?}"
    );
    let pool = config(&data)["spare_pool"]
        .as_array()
        .map_or(0, |p| p.len());
    assert_eq!(pool, 2, "three of the five pool spares were taken");
    assert_eq!(disk_files(&data), 14, "no new file was made");
    for disk in &rg1 {
        use std::os::unix::fs::FileExt;
        let file = std::fs::File::open(data.join(format!("{disk}.img"))).expect("a disk");
        let mut back = vec![0u8; garbage.len()];
        file.read_exact_at(&mut back, at).expect("read");
        assert!(back != garbage, "{disk} was named with its old contents");
    }
    check_chunks(&server, "vol0/lun0", 9, 128);
    server.stop();
}
