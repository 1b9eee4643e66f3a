//! The admin socket: volumes, LUNs, space and status through JSON lines, as
//! the CLI will use them. A new LUN is an NBD export at once; a resized one
//! is served at its new size; a destroyed one is gone; refusals come back as
//! typed errors; a malformed line gets an error and the connection goes on.

mod serve_harness;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;

use serve_harness::{NbdClient, Scratch, Served, serve_with};
use wafer_server::admin::{AdminErrorKind, AdminReply, AdminRequest, AdminResponse};

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
    AdminRequest::LunCreate { path, size_bytes }
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
        size_bytes: 48 << 20,
    });
    let mut client = NbdClient::connect(server.socket(), "vol1/db");
    assert_eq!(client.size, 48 << 20);
    assert_eq!(client.read(4096, 4096), Ok(vec![7u8; 4096]));
    drop(client);

    server.admin_ok(AdminRequest::LunDestroy { path });
    assert!(NbdClient::try_connect(server.socket(), "vol1/db").is_err());
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
        size_bytes: 1000,
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
