//! RAID-DP keeps every byte through two failed disks: two data disks' files
//! deleted while the server is stopped (it starts degraded, says so, and
//! records the failures), and two disks failed through the admin socket while
//! it runs (a third is refused; the failures survive a restart). The spare
//! takes a failed disk's slot and is rebuilt in the background meanwhile; a
//! start refused in mid-rebuild for too many missing files changes nothing.

mod serve_harness;

use std::time::{Duration, Instant};

use serve_harness::{NbdClient, Scratch, Served, TEST_SIZES, pattern, serve, serve_expecting_exit};
use wafer_server::admin::{AdminErrorKind, AdminReply, AdminRequest, AdminResponse};

const CHUNK: usize = 64 * 1024;
/// 24 MiB: enough to put data on every data disk.
const CHUNKS: u64 = 384;

fn write_all(server: &Served) {
    let mut client = NbdClient::connect(server.socket(), "vol0/lun0");
    for n in 0..CHUNKS {
        assert_eq!(client.write(n * CHUNK as u64, &pattern(7, n, CHUNK)), 0);
    }
}

/// A server that has written every chunk and started afresh, so that reads
/// come from disk, not from the cache.
fn written_and_restarted(scratch: &Scratch) -> Served {
    let server = serve(scratch);
    write_all(&server);
    server.stop();
    serve(scratch)
}

fn check_all(server: &Served) {
    let mut client = NbdClient::connect(server.socket(), "vol0/lun0");
    for n in 0..CHUNKS {
        let data = client
            .read(n * CHUNK as u64, CHUNK as u32)
            .expect("readable");
        assert!(data == pattern(7, n, CHUNK), "chunk {n} differs");
    }
}

fn fail(server: &Served, disk: &str) -> AdminResponse {
    server.admin(AdminRequest::DiskFail {
        disk: disk.into(),
        aggregate: None,
    })
}

fn aggregate(server: &Served) -> wafer_server::admin::AggregateStatus {
    match server.admin_ok(AdminRequest::AggrStatus) {
        AdminReply::Aggregate(status) => *status,
        other => panic!("aggr status answered {other:?}"),
    }
}

#[test]
fn two_missing_disk_files_are_served_degraded() {
    let scratch = Scratch::new();
    let server = serve(&scratch);
    write_all(&server);
    server.stop();
    std::fs::remove_file(scratch.disk(2)).expect("disk2 removed");
    std::fs::remove_file(scratch.disk(5)).expect("disk5 removed");

    let server = serve(&scratch);
    assert!(
        server.startup.contains("DEGRADED: failed disk2, disk5"),
        "{}",
        server.startup
    );
    check_all(&server);
    let stats = server.sysstat();
    assert!(stats.degraded_reads > 0, "{stats:?}");
    assert_eq!(stats.unrecoverable_blocks, 0);
    assert_eq!(aggregate(&server).state, "degraded");
    server.stop();
    let config =
        std::fs::read_to_string(scratch.data().join(wafer_server::CONFIG_FILE)).expect("config");
    assert!(config.contains("state = \"failed\""), "{config}");

    // Failed for good: the next start is degraded too, and still whole.
    let server = serve(&scratch);
    assert!(server.startup.contains("DEGRADED"), "{}", server.startup);
    check_all(&server);
    server.stop();
}

#[test]
fn two_disks_failed_by_the_administrator_lose_nothing() {
    let scratch = Scratch::new();
    let server = written_and_restarted(&scratch);
    assert!(matches!(fail(&server, "disk3"), AdminResponse::Ok(_)));
    assert!(matches!(fail(&server, "disk6"), AdminResponse::Ok(_)));
    match fail(&server, "disk4") {
        AdminResponse::Error(error) => {
            assert_eq!(error.kind, AdminErrorKind::Invalid);
            assert!(error.message.contains("survives 2"), "{}", error.message);
        }
        AdminResponse::Ok(reply) => panic!("a third failure was accepted: {reply:?}"),
    }
    assert!(matches!(fail(&server, "disk6"), AdminResponse::Error(_)));
    assert!(
        matches!(fail(&server, "disk42"), AdminResponse::Error(e) if e.kind == AdminErrorKind::NotFound)
    );
    check_all(&server);
    let stats = server.sysstat();
    assert!(stats.degraded_reads > 0, "{stats:?}");

    // The spare takes disk3's slot and is rebuilt in the background.
    let deadline = Instant::now() + Duration::from_secs(90);
    while server.sysstat().rebuilds_completed == 0 {
        assert!(
            Instant::now() < deadline,
            "no rebuild finished: {:?}",
            aggregate(&server)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let status = aggregate(&server);
    let group = &status.raid_groups[0];
    assert_eq!(group.disks[3].name, "disk8", "{status:?}");
    assert!(status.spares.is_empty(), "{status:?}");
    let failed: Vec<&str> = group
        .disks
        .iter()
        .filter(|d| d.state == wafer_server::DiskState::Failed)
        .map(|d| d.name.as_str())
        .collect();
    assert_eq!(failed, ["disk6"]);
    check_all(&server);
    let log = server.log();
    for line in [
        "aggregate aggr0 rg0: degraded",
        "aggregate aggr0 rg0: double degraded",
        "rg0: reconstruction of disk3 started",
        "rg0: reconstruction of disk8 complete",
    ] {
        assert!(log.contains(line), "the log lacks {line:?}:\n{log}");
    }
    server.stop();

    let server = serve(&scratch);
    assert!(
        server.startup.contains("DEGRADED: failed disk6"),
        "{}",
        server.startup
    );
    check_all(&server);
    server.stop();
}

/// The start after a crash in mid-rebuild, with two more disk files missing:
/// with the slot under rebuild that is three gone from one RAID group. The
/// server must refuse cleanly and change nothing, so that putting the files
/// back and starting again serves every byte.
#[test]
fn a_refused_start_in_mid_rebuild_fails_no_disk_for_good() {
    let scratch = Scratch::new();
    let server = written_and_restarted(&scratch);
    assert!(matches!(fail(&server, "disk3"), AdminResponse::Ok(_)));
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let rebuild = aggregate(&server).rebuild;
        if let Some(r) = &rebuild
            && r.spare_assigned
            && r.stripes_done > 0
        {
            break;
        }
        assert_eq!(
            server.sysstat().rebuilds_completed,
            0,
            "rebuilt before the crash"
        );
        assert!(
            Instant::now() < deadline,
            "no rebuild progress: {rebuild:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    server.kill();

    let config_path = scratch.data().join(wafer_server::CONFIG_FILE);
    let config = std::fs::read(&config_path).expect("config");
    let aside = |n: usize| scratch.file(&format!("disk{n}.aside"));
    for n in [2, 4] {
        std::fs::rename(scratch.disk(n), aside(n)).expect("moved aside");
    }
    let refused = serve_expecting_exit(&scratch, &TEST_SIZES);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("unreadable"), "{stderr}");
    assert!(
        std::fs::read(&config_path).expect("config") == config,
        "the refused start changed the configuration"
    );

    for n in [2, 4] {
        std::fs::rename(aside(n), scratch.disk(n)).expect("put back");
    }
    let server = serve(&scratch);
    assert!(
        server.startup.contains("rg0 is reconstructing disk8"),
        "the banner says a rebuild is under way: {}",
        server.startup
    );
    check_all(&server);
    server.stop();
}
