//! Snapshots over NBD: a snapshot taken through the admin socket is exported
//! read-only as `vol0/lun0@NAME` and keeps the data of its moment while the
//! LUN moves on (also after a restart); writes and trims to it are refused
//! with EPERM; deleting it gives its blocks back in `df`; restoring a LUN from
//! a snapshot brings its data back.

mod serve_harness;

use serve_harness::{NbdClient, Scratch, Served, pattern, serve, wire};
use wafer_server::admin::{AdminReply, AdminRequest, SnapshotStatus, VolumeSpaceStatus};

const CHUNK: usize = 64 * 1024;
/// 4 MiB of the LUN.
const CHUNKS: u64 = 64;

fn write_generation(server: &Served, generation: u8) {
    let mut client = NbdClient::connect(server.socket(), "vol0/lun0");
    for n in 0..CHUNKS {
        assert_eq!(
            client.write(n * CHUNK as u64, &pattern(generation, n, CHUNK)),
            0
        );
    }
}

fn holds_generation(server: &Served, export: &str, generation: u8) -> bool {
    let mut client = NbdClient::connect(server.socket(), export);
    (0..CHUNKS).all(|n| {
        let data = client
            .read(n * CHUNK as u64, CHUNK as u32)
            .expect("readable");
        data == pattern(generation, n, CHUNK)
    })
}

fn snapshot(server: &Served, request: AdminRequest) {
    server.admin_ok(request);
}

fn snapshots(server: &Served) -> Vec<SnapshotStatus> {
    match server.admin_ok(AdminRequest::SnapList {
        volume: "vol0".into(),
    }) {
        AdminReply::Snapshots { snapshots, .. } => snapshots,
        other => panic!("snap list answered {other:?}"),
    }
}

fn df(server: &Served) -> VolumeSpaceStatus {
    match server.admin_ok(AdminRequest::Df) {
        AdminReply::VolumeSpace(mut volumes) => volumes.remove(0),
        other => panic!("df answered {other:?}"),
    }
}

#[test]
fn a_snapshot_keeps_its_data_read_only_and_gives_its_space_back() {
    let scratch = Scratch::new();
    let server = serve(&scratch);
    write_generation(&server, 1);
    snapshot(
        &server,
        AdminRequest::SnapCreate {
            volume: "vol0".into(),
            name: "s1".into(),
        },
    );
    write_generation(&server, 2);
    assert!(holds_generation(&server, "vol0/lun0@s1", 1));
    assert!(holds_generation(&server, "vol0/lun0", 2));

    let mut frozen = NbdClient::connect(server.socket(), "vol0/lun0@s1");
    assert_ne!(
        frozen.flags & 2,
        0,
        "the snapshot export is not flagged read-only"
    );
    assert_eq!(frozen.write(0, &[0u8; 4096]), wire::EPERM);
    frozen.send(wire::CMD_TRIM, 0, 4096, &[]);
    assert_eq!(frozen.reply().expect("a trim reply").error, wire::EPERM);
    assert!(frozen.read(0, 4096).is_ok(), "reads go on after a refusal");
    drop(frozen);

    let listed = snapshots(&server);
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].name, "s1");
    assert!(listed[0].held_bytes >= CHUNKS * CHUNK as u64, "{listed:?}");

    // The snapshot is on disk: a restart (cold cache) still reads it. The
    // final CP has moved the overwrites to new blocks, so the old ones are
    // the snapshot's alone.
    server.stop();
    let server = serve(&scratch);
    assert!(holds_generation(&server, "vol0/lun0@s1", 1));
    assert!(holds_generation(&server, "vol0/lun0", 2));
    let listed = snapshots(&server);
    assert!(
        listed[0].exclusive_bytes >= CHUNKS * CHUNK as u64,
        "{listed:?}"
    );

    let before = df(&server);
    snapshot(
        &server,
        AdminRequest::SnapDelete {
            volume: "vol0".into(),
            name: "s1".into(),
        },
    );
    let after = df(&server);
    assert!(
        before.snapshot_used_bytes >= CHUNKS * CHUNK as u64,
        "{before:?}"
    );
    assert_eq!(after.snapshot_used_bytes, 0, "{after:?}");
    assert!(
        after.available_bytes >= before.available_bytes + CHUNKS * CHUNK as u64,
        "df before {before:?}, after {after:?}"
    );
    assert!(NbdClient::try_connect(server.socket(), "vol0/lun0@s1").is_err());
    server.stop();
}

#[test]
fn a_lun_restored_from_a_snapshot_reads_as_it_was() {
    let scratch = Scratch::new();
    let server = serve(&scratch);
    write_generation(&server, 3);
    snapshot(
        &server,
        AdminRequest::SnapCreate {
            volume: "vol0".into(),
            name: "before".into(),
        },
    );
    write_generation(&server, 4);
    snapshot(
        &server,
        AdminRequest::SnapRestore {
            volume: "vol0".into(),
            name: "before".into(),
            lun: Some("/vol/vol0/lun0".into()),
        },
    );
    assert!(holds_generation(&server, "vol0/lun0", 3));
    server.stop();
}
