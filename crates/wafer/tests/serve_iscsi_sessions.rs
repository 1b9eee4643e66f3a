//! A session of several connections (MC/S, RFC 7143 §4.2) on `wafer serve`:
//! a login naming the session's TSIH joins it, up to the MaxConnections the
//! session negotiated; commands are carried out in CmdSN order across the
//! connections (a write held on one connection waits for the earlier
//! command on the other, so the later write lands last) and answered on
//! the connection each came on; a logout of the session ends every
//! connection. The raw initiator of the serve tests drives it.

mod serve_harness;

use std::time::Duration;

use serve_harness::iscsi::{Initiator, admit_test_initiators, parse_uri};
use serve_harness::{Scratch, TEST_SIZES, serve_with};

/// A logout of the whole session (reason 0) as connection `cid`.
fn logout_session(initiator: &mut Initiator, cid: u16) {
    let mut header = [0u8; 48];
    header[0] = 0x06;
    header[1] = 0x80;
    header[16..20].copy_from_slice(&0x5555u32.to_be_bytes());
    header[20..22].copy_from_slice(&cid.to_be_bytes());
    header[24..28].copy_from_slice(&initiator.cmd_sn.to_be_bytes());
    initiator.cmd_sn += 1;
    let mut out = Vec::new();
    serve_harness::iscsi::pdu(&mut out, header, &[]);
    use std::io::Write;
    initiator.stream.write_all(&out).expect("the logout sent");
}

#[test]
fn two_connections_of_one_session_are_ordered_as_one() {
    let scratch = Scratch::new();
    let mut args = TEST_SIZES.to_vec();
    args.extend(["--iscsi", "127.0.0.1:0"]);
    let server = serve_with(&scratch, &args);
    admit_test_initiators(&scratch.data());
    let (address, target) = parse_uri(&server.iscsi_uri());

    let (mut a, status, tsih) = Initiator::login_connection(address, &target, 0, 1, 2);
    assert_eq!(status, 0, "the leading login");
    assert_ne!(tsih, 0);
    let (mut b, status, joined) = Initiator::login_connection(address, &target, tsih, 2, 2);
    assert_eq!((status, joined), (0, tsih), "the second connection joins");
    let (_, status, _) = Initiator::login_connection(address, &target, tsih, 3, 2);
    assert_eq!(
        status >> 8,
        2,
        "a third is more than the session negotiated"
    );
    let (_, status, _) = Initiator::login_connection(address, &target, tsih ^ 0x40, 3, 2);
    assert_eq!(status, 0x020a, "a session that does not exist");

    // B's write is CmdSN 2: it waits for A's CmdSN 1, then lands after it.
    b.cmd_sn = 2;
    b.write10(0, &[0xbb; 4096]);
    b.stream
        .set_read_timeout(Some(Duration::from_millis(500)))
        .expect("a timeout");
    assert!(b.done().is_none(), "CmdSN 2 answered before CmdSN 1 came");
    b.stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("a timeout");
    a.cmd_sn = 1;
    a.write10(0, &[0xaa; 4096]);
    assert_eq!(a.done().expect("A's write answered on A").status, 0);
    assert_eq!(b.done().expect("B's write answered on B").status, 0);
    a.cmd_sn = 3;
    a.read10(0, 8);
    let read = a.done().expect("the read answered");
    assert!(
        read.data.iter().all(|&byte| byte == 0xbb),
        "CmdSN 2 landed last"
    );

    // Commands spread over both keep flowing, each answered where it came.
    b.cmd_sn = 4;
    b.read10(0, 8);
    a.cmd_sn = 5;
    a.read10(8, 8);
    assert_eq!(b.done().expect("B's read").status, 0);
    assert_eq!(a.done().expect("A's read").status, 0);

    // A logout of the session through A ends B too.
    a.cmd_sn = 6;
    logout_session(&mut a, 1);
    assert!(b.done().is_none(), "B ended with the session");
    server.stop();
}
