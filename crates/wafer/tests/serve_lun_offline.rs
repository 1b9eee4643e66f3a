//! `lun offline` stops every host path to a LUN, and `lun online` brings it
//! back: an NBD connection already open gets EIO, a new one is refused in
//! the handshake (and qemu-io reads nothing), an iSCSI READ ends in CHECK CONDITION,
//! NOT READY, LOGICAL UNIT NOT READY; `lun show` says `(r/w, offline)`, and
//! the state survives a restart, kept in `wafer.toml` beside the maps. The
//! controls: the same requests succeed before `lun offline` and after
//! `lun online`, and another LUN serves on while one is offline.

mod serve_harness;

use serve_harness::iscsi::{Initiator, admit_test_initiators, parse_uri};
use serve_harness::{NbdClient, Scratch, Served, TEST_SIZES, client, ok, serve_with, wafer};

const LUN: &str = "/vol/vol0/lun0";
/// NBD's EIO.
const EIO: u32 = 5;

fn serve_iscsi(scratch: &Scratch) -> Served {
    let mut args = TEST_SIZES.to_vec();
    args.extend(["--iscsi", "127.0.0.1:0"]);
    serve_with(scratch, &args)
}

/// READ(10) of LUN 0's first block: (status, sense key, ASC, ASCQ).
fn iscsi_read(initiator: &mut Initiator) -> (u8, u8, u8, u8) {
    initiator.read10(0, 1);
    let done = initiator.done().expect("an answer");
    let sense = |at: usize| done.data.get(at).copied().unwrap_or(0);
    (done.status, sense(2) & 0x0f, sense(12), sense(13))
}

/// Whether qemu-io opens `uri` and reads its first block.
fn qemu_reads(uri: &str) -> (bool, String) {
    let output = client("qemu-io", &["-f", "raw", "-r", "-c", "read 0 4k", uri]);
    let text = String::from_utf8_lossy(&output.stdout).into_owned()
        + &String::from_utf8_lossy(&output.stderr);
    (output.status.success() && !text.contains("failed"), text)
}

#[test]
fn an_offline_lun_refuses_nbd_and_iscsi_until_it_is_online_again() {
    let scratch = Scratch::new();
    let server = serve_iscsi(&scratch);
    let data = scratch.data();
    admit_test_initiators(&data);
    ok(&data, &["lun", "create", "-s", "4m", "/vol/vol0/other"]);
    let (address, target) = parse_uri(&server.iscsi_uri());
    let mut initiator = Initiator::login(address, &target);
    let mut open = NbdClient::connect(server.socket(), "vol0/lun0");
    assert_eq!(open.write(0, &[0x5a; 4096]), 0);
    assert_eq!(iscsi_read(&mut initiator).0, 0, "GOOD while online");
    assert!(qemu_reads(&server.uri("vol0/lun0")).0);

    assert_eq!(
        ok(&data, &["lun", "offline", LUN]),
        "",
        "ONTAP says nothing"
    );
    let show = ok(&data, &["lun", "show", LUN]);
    assert!(show.trim_end().ends_with("(r/w, offline)"), "{show}");
    assert_eq!(open.read(0, 4096), Err(EIO), "an open connection gets EIO");
    assert_eq!(open.write(0, &[0xa5; 4096]), EIO);
    assert!(
        NbdClient::try_connect(server.socket(), "vol0/lun0").is_err(),
        "the handshake offered an offline LUN"
    );
    let (read, text) = qemu_reads(&server.uri("vol0/lun0"));
    assert!(!read, "qemu-io read an offline LUN:\n{text}");
    assert_eq!(
        iscsi_read(&mut initiator),
        (0x02, 0x02, 0x04, 0x03),
        "CHECK CONDITION, NOT READY, LOGICAL UNIT NOT READY"
    );
    assert!(
        qemu_reads(&server.uri("vol0/other")).0,
        "other LUNs serve on"
    );
    let json = ok(&data, &["lun", "show", LUN, "--json"]);
    let json: serde_json::Value = serde_json::from_str(&json).expect("JSON");
    assert_eq!(json["data"][0]["offline"], true);
    let (code, out, _) = wafer(&data, &["lun", "offline", "/vol/vol0/nope", "--json"]);
    assert_eq!(code, 1);
    let error: serde_json::Value = serde_json::from_str(&out).expect("a JSON error");
    assert_eq!(error["error"]["kind"], "not_found");
    drop(open);
    drop(initiator);
    server.stop();

    // Offline across a restart, then online again: every path serves.
    let server = serve_iscsi(&scratch);
    let show = ok(&data, &["lun", "show", LUN]);
    assert!(show.trim_end().ends_with("(r/w, offline)"), "{show}");
    assert!(NbdClient::try_connect(server.socket(), "vol0/lun0").is_err());
    assert_eq!(ok(&data, &["lun", "online", LUN]), "");
    let show = ok(&data, &["lun", "show", LUN]);
    assert!(show.trim_end().ends_with("(r/w, online)"), "{show}");
    let mut open = NbdClient::connect(server.socket(), "vol0/lun0");
    assert_eq!(open.read(0, 4096), Ok(vec![0x5a; 4096]));
    let (address, target) = parse_uri(&server.iscsi_uri());
    let mut initiator = Initiator::login(address, &target);
    assert_eq!(iscsi_read(&mut initiator).0, 0, "GOOD once online");
    drop(open);
    drop(initiator);
    server.stop();
}
