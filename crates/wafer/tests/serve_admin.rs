//! The admin socket: volumes, LUNs, space and status through JSON lines, as
//! the CLI will use them. A new LUN is an NBD export at once; a resized one
//! is served at its new size; a destroyed one is gone; refusals come back as
//! typed errors; a malformed line gets an error and the connection goes on.

mod serve_harness;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;

use serve_harness::{NbdClient, Scratch, Served, serve_with};
use wafer_server::admin::{AdminErrorKind, AdminReply, AdminRequest, AdminResponse, SizeChange};

const SIZES: &[&str] = &[
    "--disk-size",
    "192m",
    "--vol-size",
    "320m",
    "--lun-size",
    "64m",
];

fn refused(server: &Served, request: AdminRequest) -> AdminErrorKind {
    match server.admin(request.clone()) {
        AdminResponse::Error(error) => error.kind,
        AdminResponse::Ok(reply) => panic!("{request:?} was accepted: {reply:?}"),
    }
}

fn lun_create(path: &str, size_bytes: u64) -> AdminRequest {
    let path = path.into();
    AdminRequest::LunCreate {
        path,
        size_bytes,
        ostype: None,
        noreserve: false,
    }
}

fn vol_create(name: &str, size_bytes: u64) -> AdminRequest {
    let name = name.into();
    AdminRequest::VolCreate { name, size_bytes }
}

/// A server with `vol1` (128 MiB) holding `/vol/vol1/db` (32 MiB).
fn with_second_volume(scratch: &Scratch) -> Served {
    let server = serve_with(scratch, SIZES);
    server.admin_ok(vol_create("vol1", 128 << 20));
    server.admin_ok(lun_create("/vol/vol1/db", 32 << 20));
    server
}

#[test]
fn luns_are_created_resized_and_destroyed_as_exports() {
    let scratch = Scratch::new();
    let server = with_second_volume(&scratch);
    let mut client = NbdClient::connect(server.socket(), "vol1/db");
    assert_eq!(client.size, 32 << 20);
    assert_eq!(client.write(4096, &[7u8; 4096]), 0);
    drop(client);
    let AdminReply::Luns(luns) = server.admin_ok(AdminRequest::LunShow) else {
        panic!("lun show answered something else");
    };
    let paths: Vec<(&str, u64)> = luns
        .iter()
        .map(|l| (l.path.as_str(), l.size_bytes))
        .collect();
    assert_eq!(
        paths,
        [("/vol/vol0/lun0", 64 << 20), ("/vol/vol1/db", 32 << 20)]
    );

    let path = "/vol/vol1/db".to_string();
    server.admin_ok(AdminRequest::LunResize {
        path: path.clone(),
        size: SizeChange::To(48 << 20),
        force: false,
    });
    let mut client = NbdClient::connect(server.socket(), "vol1/db");
    assert_eq!(client.size, 48 << 20);
    assert_eq!(client.read(4096, 4096), Ok(vec![7u8; 4096]));
    drop(client);

    server.admin_ok(AdminRequest::LunDestroy { path, force: true });
    assert!(NbdClient::try_connect(server.socket(), "vol1/db").is_err());
    server.stop();
}

/// EINVAL, as NBD carries "no such LUN" (and "no such snapshot").
const GONE: u32 = 22;

/// A 4 KiB read as the one byte it repeats (None if mixed), or its error.
fn block(client: &mut NbdClient, offset: u64) -> Result<Option<u8>, u32> {
    let data = client.read(offset, 4096)?;
    Ok(data.iter().all(|&b| b == data[0]).then_some(data[0]))
}

fn snap_create(volume: &str, name: &str) -> AdminRequest {
    let (volume, name) = (volume.into(), name.into());
    AdminRequest::SnapCreate { volume, name }
}

fn snap_delete(volume: &str, name: &str) -> AdminRequest {
    let (volume, name) = (volume.into(), name.into());
    AdminRequest::SnapDelete { volume, name }
}

/// A whole-volume restore.
fn snap_restore(volume: &str, name: &str) -> AdminRequest {
    let (volume, name) = (volume.into(), name.into());
    AdminRequest::SnapRestore {
        volume,
        name,
        lun: None,
    }
}

#[test]
fn a_connection_outlived_by_its_lun_never_reaches_the_lun_in_its_place() {
    let scratch = Scratch::new();
    let server = serve_with(&scratch, SIZES);
    server.admin_ok(lun_create("/vol/vol0/alice", 16 << 20));
    let mut alice = NbdClient::connect(server.socket(), "vol0/alice");
    assert_eq!(alice.write(0, &[0xa1; 4096]), 0);
    let path = "/vol/vol0/alice".to_string();
    server.admin_ok(AdminRequest::LunDestroy { path, force: true });
    assert_eq!(alice.write(0, &[0xa2; 4096]), GONE);

    // bob takes alice's inode number, the lowest free one.
    server.admin_ok(lun_create("/vol/vol0/bob", 16 << 20));
    let mut bob = NbdClient::connect(server.socket(), "vol0/bob");
    assert_eq!(bob.write(4096, &[0xb0; 4096]), 0);
    assert_eq!(
        block(&mut alice, 4096),
        Err(GONE),
        "alice's connection read bob's data"
    );
    assert_eq!(alice.write(0, &[0xa3; 4096]), GONE);
    assert_eq!(
        block(&mut bob, 0),
        Ok(Some(0)),
        "alice's connection wrote into bob"
    );
    assert_eq!(block(&mut bob, 4096), Ok(Some(0xb0)));
    server.stop();
}

#[test]
fn a_restore_or_a_deleted_snapshot_ends_the_connections_it_changes_and_no_others() {
    let scratch = Scratch::new();
    let server = with_second_volume(&scratch);
    let mut lun0 = NbdClient::connect(server.socket(), "vol0/lun0");
    let mut db = NbdClient::connect(server.socket(), "vol1/db");
    assert_eq!(lun0.write(0, &[1; 4096]), 0);
    server.admin_ok(snap_create("vol0", "s1"));
    let mut then = NbdClient::connect(server.socket(), "vol0/lun0@s1");
    assert_eq!(lun0.write(0, &[2; 4096]), 0);

    // A restore the filer refuses (no such snapshot) ends nothing.
    let request = snap_restore("vol0", "nope");
    assert_eq!(refused(&server, request), AdminErrorKind::NotFound);
    assert_eq!(block(&mut lun0, 0), Ok(Some(2)));

    // A snapshot deleted and taken again under its name: the old connection
    // does not read the new one.
    server.admin_ok(snap_delete("vol0", "s1"));
    server.admin_ok(snap_create("vol0", "s1"));
    assert_eq!(block(&mut then, 0), Err(GONE));
    let mut now = NbdClient::connect(server.socket(), "vol0/lun0@s1");
    assert_eq!(block(&mut now, 0), Ok(Some(2)));

    // A whole-volume restore rewrites lun0 under its connection, which ends;
    // vol1's LUN is not touched and its connection goes on.
    assert_eq!(lun0.write(0, &[3; 4096]), 0);
    server.admin_ok(snap_restore("vol0", "s1"));
    assert_eq!(block(&mut lun0, 0), Err(GONE));
    assert_eq!(db.write(0, &[4; 4096]), 0);
    let mut lun0 = NbdClient::connect(server.socket(), "vol0/lun0");
    assert_eq!(block(&mut lun0, 0), Ok(Some(2)));
    server.stop();
}

#[test]
fn space_is_reported_and_refusals_are_typed() {
    let scratch = Scratch::new();
    let server = with_second_volume(&scratch);
    let AdminReply::Volumes(volumes) = server.admin_ok(AdminRequest::VolStatus) else {
        panic!("vol status answered something else");
    };
    assert_eq!(volumes.len(), 2);
    assert_eq!((volumes[1].name.as_str(), volumes[1].luns), ("vol1", 1));
    let AdminReply::VolumeSpace(spaces) = server.admin_ok(AdminRequest::Df) else {
        panic!("df answered something else");
    };
    assert_eq!(spaces[1].size_bytes, 128 << 20, "{spaces:?}");
    assert_eq!(spaces[1].lun_reserved_bytes, 32 << 20, "{spaces:?}");
    let AdminReply::AggregateSpace(aggregate) = server.admin_ok(AdminRequest::DfAggregate) else {
        panic!("df -A answered something else");
    };
    assert_eq!(aggregate.aggregate, "aggr0");
    assert_eq!(
        aggregate.used_bytes + aggregate.available_bytes,
        aggregate.total_bytes
    );

    assert_eq!(
        refused(&server, vol_create("vol1", 64 << 20)),
        AdminErrorKind::Exists
    );
    assert_eq!(
        refused(&server, vol_create("huge", 64 << 30)),
        AdminErrorKind::NoSpace
    );
    assert_eq!(
        refused(&server, lun_create("/vol/nope/x", 4096)),
        AdminErrorKind::NotFound
    );
    assert_eq!(
        refused(&server, lun_create("no-volume", 4096)),
        AdminErrorKind::Invalid
    );
    assert_eq!(
        refused(&server, lun_create("/vol/vol1/big", 1 << 30)),
        AdminErrorKind::NoSpace
    );
    let odd_size = AdminRequest::LunResize {
        path: "/vol/vol0/lun0".into(),
        size: SizeChange::To(1000),
        force: true,
    };
    assert_eq!(refused(&server, odd_size), AdminErrorKind::Invalid);
    let snapshot = AdminRequest::SnapDelete {
        volume: "vol0".into(),
        name: "none".into(),
    };
    assert_eq!(refused(&server, snapshot), AdminErrorKind::NotFound);
    server.stop();
}

#[test]
fn status_reports_every_disk_and_counter() {
    let scratch = Scratch::new();
    let server = serve_with(&scratch, SIZES);
    let AdminReply::Aggregate(status) = server.admin_ok(AdminRequest::AggrStatus) else {
        panic!("aggr status answered something else");
    };
    assert_eq!(status.state, "online");
    let group = &status.raid_groups[0];
    assert_eq!(group.raid_type, "raid_dp");
    let roles: Vec<&str> = group.disks.iter().map(|d| d.role.as_str()).collect();
    assert_eq!(
        roles,
        [
            "dparity", "parity", "data", "data", "data", "data", "data", "data"
        ]
    );
    assert_eq!(status.spares.len(), 1);
    assert_eq!(status.spares[0].name, "disk8");
    assert!(status.rebuild.is_none());

    let stats = server.sysstat();
    assert!(stats.uptime_ns > 0 && stats.committed_cp >= 1, "{stats:?}");
    assert_eq!(stats.disks.len(), 9);
    assert!(stats.cps_by_type.contains_key("Z"), "{stats:?}");

    // JSON lines by hand: malformed lines are answered, the connection lives.
    let mut stream = UnixStream::connect(scratch.data().join("admin.sock")).expect("connects");
    let lines = "{\"command\":\"launch_missiles\"}\nnot json\n{\"command\":\"df_aggregate\"}\n";
    stream.write_all(lines.as_bytes()).expect("sent");
    let mut answers = BufReader::new(stream).lines();
    for _ in 0..2 {
        let line = answers.next().expect("a response").expect("readable");
        assert!(
            line.starts_with("{\"error\":{\"kind\":\"invalid\""),
            "{line}"
        );
    }
    let line = answers.next().expect("a response").expect("readable");
    assert!(
        line.starts_with("{\"ok\":{\"kind\":\"aggregate_space\""),
        "{line}"
    );
    server.stop();
}
