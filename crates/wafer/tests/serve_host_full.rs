//! The host's file system fills under a writing client: the server goes
//! offline without committing a CP it could not make durable, says why, and
//! marks no disk failed; once space is freed, the next start mounts the last
//! CP, replays the NVLog and every write the client saw acknowledged reads
//! back.
//!
//! The data directory lives on a tmpfs of a fixed size, which needs root to
//! mount (CI runs as root; elsewhere the test says it cannot run, and fails
//! under `CI=true`). The same holds when three disk files of the group are
//! made immutable (`chattr +i`, root again) under the writer: more disks than
//! RAID-DP survives, but none of them failed, so none is failed for good.

mod serve_harness;

use std::os::unix::fs::DirBuilderExt;
use std::path::PathBuf;
use std::process::{Command, ExitStatus};
use std::time::Duration;

use serve_harness::load::{Writes, write_pipelined};
use serve_harness::{NbdClient, Scratch, TEST_SIZES, Tmpfs, pattern, serve_with};

/// Room for the NVLog (2 x 32 MiB, written in full), the configuration and
/// the disks' first metadata, and then a little.
const FILESYSTEM_BYTES: u64 = 160 << 20;
/// What the test leaves free before the client writes: far less than the
/// client's data and its parity take on the disks.
const LEFT_FREE: u64 = 8 << 20;
const WRITE_BYTES: usize = 64 * 1024;
const WRITES: u64 = 1024; // 64 MiB
const IN_FLIGHT: u64 = 8;

/// Writes generation 1 to blocks `0..WRITES`, pipelined, until the server
/// goes away; returns which writes were acknowledged.
fn write_until_the_server_goes(client: &mut NbdClient) -> Vec<bool> {
    let writes = Writes {
        generation: 1,
        count: WRITES,
        bytes: WRITE_BYTES,
        in_flight: IN_FLIGHT,
        stop_after: None,
    };
    write_pipelined(client, &writes)
}

#[test]
fn a_full_host_file_system_stops_the_server_and_loses_no_acknowledged_write() {
    let scratch = Scratch::new();
    let Some(tmpfs) = Tmpfs::mount(&scratch.file("fs"), FILESYSTEM_BYTES) else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI runs as root and must be able to mount a tmpfs"
        );
        eprintln!("cannot mount a tmpfs (not root?): this test did not run");
        return;
    };
    // The harness serves scratch.data(): there, a link to the tmpfs.
    let data = tmpfs.dir.join("data");
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&data)
        .expect("the data directory");
    std::os::unix::fs::symlink(&data, scratch.data()).expect("a link to it");
    let served = serve_with(&scratch, &TEST_SIZES);
    let filler = tmpfs.dir.join("filler");
    let fill = tmpfs.available().saturating_sub(LEFT_FREE);
    std::fs::write(&filler, vec![0u8; fill as usize]).expect("the filler file");

    let mut client = NbdClient::connect(served.socket(), "vol0/lun0");
    let acknowledged = write_until_the_server_goes(&mut client);
    drop(client);
    let (status, log) = served.wait_exit(Duration::from_secs(120));
    assert_stopped_offline(&scratch, status, &log, "No space left");
    assert!(
        !data.join("wafer.toml.new").exists(),
        "no half-written configuration"
    );

    std::fs::remove_file(&filler).expect("space freed");
    assert_acknowledged_writes_read_back(&scratch, &acknowledged);
}

/// The server stopped with an error because the aggregate went offline on
/// `cause`, and recorded no disk failed.
fn assert_stopped_offline(scratch: &Scratch, status: ExitStatus, log: &str, cause: &str) {
    assert!(!status.success(), "it stopped with an error: {log}");
    assert!(log.contains("went offline"), "{log}");
    assert!(log.contains(cause), "{log}");
    let config = std::fs::read_to_string(scratch.data().join("wafer.toml")).expect("config");
    assert!(
        !config.contains("state = \"failed\""),
        "no disk failed: {config}"
    );
}

/// A restarted server (mount and replay) reads back every write the client
/// saw acknowledged, of which there were some.
fn assert_acknowledged_writes_read_back(scratch: &Scratch, acknowledged: &[bool]) {
    let acked = acknowledged.iter().filter(|a| **a).count();
    assert!(acked > 0, "writes were acknowledged before the stop");
    let served = serve_with(scratch, &[]);
    let mut client = NbdClient::connect(served.socket(), "vol0/lun0");
    for (block, _) in acknowledged.iter().enumerate().filter(|(_, a)| **a) {
        let offset = block as u64 * WRITE_BYTES as u64;
        let got = client.read(offset, WRITE_BYTES as u32).expect("readable");
        assert!(
            got == pattern(1, block as u64, WRITE_BYTES),
            "acknowledged write {block} of {acked} lost"
        );
    }
    served.stop();
}

/// Sets or clears the immutable attribute of `files`; false if the file
/// system or the user cannot.
fn chattr(flag: &str, files: &[PathBuf]) -> bool {
    Command::new("chattr")
        .arg(flag)
        .args(files)
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn three_immutable_disk_files_stop_the_server_and_lose_no_acknowledged_write() {
    let scratch = Scratch::new();
    let served = serve_with(&scratch, &TEST_SIZES);
    let disks: Vec<PathBuf> = [2, 4, 5].into_iter().map(|n| scratch.disk(n)).collect();
    let mut client = NbdClient::connect(served.socket(), "vol0/lun0");
    let first = pattern(1, 0, WRITE_BYTES);
    assert_eq!(client.write(0, &first), 0, "a write before the change");
    if !chattr("+i", &disks) {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI runs as root on a file system with chattr"
        );
        eprintln!("cannot make files immutable here: this test did not run");
        return;
    }
    let acknowledged = write_until_the_server_goes(&mut client);
    drop(client);
    let (status, log) = served.wait_exit(Duration::from_secs(120));
    assert!(chattr("-i", &disks), "the files made writable again");
    assert_stopped_offline(&scratch, status, &log, "Operation not permitted");
    assert_acknowledged_writes_read_back(&scratch, &acknowledged);
}
