//! Hostile iSCSI input costs only its own connection, and often not even
//! that: garbage instead of a login and a PDU cut short are dropped; a PDU
//! whose data segment is longer than the target accepts is rejected and
//! the session goes on; a command outside the CmdSN window is dropped
//! unanswered while the session still answers pings and in-window
//! commands. Meanwhile a good initiator (qemu-io) keeps reading and
//! writing.

mod serve_harness;

use std::io::{Read, Write};
use std::time::Duration;

use serve_harness::iscsi::{Initiator, parse_uri, pdu};
use serve_harness::{Scratch, TEST_SIZES, qemu_io, serve_with};

const TEST_UNIT_READY: [u8; 6] = [0; 6];

/// Whether the target has closed `initiator`'s connection (within a few
/// seconds).
fn closed(initiator: &mut Initiator) -> bool {
    initiator
        .stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut byte = [0u8; 1];
    matches!(initiator.stream.read(&mut byte), Ok(0) | Err(_))
        && !matches!(initiator.stream.read(&mut byte), Ok(1))
}

#[test]
fn hostile_input_is_rejected_or_dropped_and_good_initiators_go_on() {
    let scratch = Scratch::new();
    let mut args = TEST_SIZES.to_vec();
    args.extend(["--iscsi", "127.0.0.1:0"]);
    let server = serve_with(&scratch, &args);
    serve_harness::iscsi::admit_test_initiators(&scratch.data());
    let uri = server.iscsi_uri();
    let (address, target) = parse_uri(&uri);
    qemu_io(&uri, &["write -P 0x42 0 64k"]);

    // Garbage where a login belongs: the connection is dropped.
    let mut garbage = Initiator::connect(address);
    let noise: Vec<u8> = (0..200u32).map(|n| (n * 37 % 251) as u8).collect();
    garbage.stream.write_all(&noise).unwrap();
    assert!(closed(&mut garbage), "garbage was not dropped");

    // A PDU cut short, then the peer goes away: only that connection ends.
    let mut cut = Initiator::login(address, &target);
    let mut header = [0u8; 48];
    header[0] = 0x01;
    let mut out = Vec::new();
    pdu(&mut out, header, &[0u8; 512]);
    cut.stream.write_all(&out[..100]).unwrap();
    drop(cut);

    let mut session = Initiator::login(address, &target);
    // A data segment longer than the target's MaxRecvDataSegmentLength:
    // rejected (the Reject carries the offending header), session intact.
    let mut oversized = [0u8; 48];
    oversized[0] = 0x41; // an immediate SCSI command
    oversized[1] = 0xa0;
    oversized[16..20].copy_from_slice(&0x5555u32.to_be_bytes());
    oversized[20..24].copy_from_slice(&(1u32 << 20).to_be_bytes());
    let mut out = Vec::new();
    pdu(&mut out, oversized, &vec![0u8; 1 << 20]);
    session.stream.write_all(&out).unwrap();
    let reject = session.receive().expect("a reject");
    assert_eq!(reject.opcode(), 0x3f, "{reject:?}");
    assert_eq!(reject.header[2], 0x04, "protocol error");
    assert_eq!(&reject.data[16..20], &0x5555u32.to_be_bytes());

    // A command far outside the CmdSN window is dropped unanswered ...
    let expected = session.cmd_sn;
    session.cmd_sn = expected.wrapping_add(100_000);
    session.command(&TEST_UNIT_READY, 0, false, &[]);
    session.cmd_sn = expected;
    // ... and the session still answers a ping and the next good command.
    assert_eq!(
        session.ping(b"still there").as_deref(),
        Some(&b"still there"[..])
    );
    let itt = session.command(&TEST_UNIT_READY, 0, false, &[]);
    let done = session.done().expect("TEST UNIT READY answered");
    assert_eq!((done.itt, done.status), (itt, 0));

    // A read of 8 blocks, checked: the session still moves data.
    session.read10(0, 8);
    let done = session.done().expect("a read");
    assert_eq!(done.status, 0);
    assert_eq!(done.data, vec![0x42u8; 4096]);

    // And a good initiator was never disturbed.
    let checked = qemu_io(&uri, &["read -P 0x42 0 64k", "write -P 0x43 64k 4k"]);
    assert!(
        !checked.contains("Pattern verification failed"),
        "{checked}"
    );
    // The server says what it refused once the session ends.
    drop(session);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !server
        .log()
        .contains("1 commands outside the CmdSN window dropped")
    {
        assert!(std::time::Instant::now() < deadline, "{}", server.log());
        std::thread::sleep(Duration::from_millis(50));
    }
    let log = server.log();
    assert!(log.contains("dropped: opcode 0x"), "the garbage: {log}");
    assert!(log.contains("1 PDUs rejected"), "{log}");
    server.stop();
}

/// Seconds until the target closes `initiator`'s connection (at most 20).
fn seconds_until_closed(initiator: &mut Initiator) -> f64 {
    let started = std::time::Instant::now();
    initiator
        .stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut byte = [0u8; 1];
    while let Ok(1) = initiator.stream.read(&mut byte) {}
    started.elapsed().as_secs_f64()
}

#[test]
fn silent_trickling_and_idle_initiators_are_dropped_on_time() {
    let scratch = Scratch::new();
    let mut args = TEST_SIZES.to_vec();
    args.extend([
        "--iscsi",
        "127.0.0.1:0",
        "--handshake-timeout",
        "1",
        "--idle-timeout",
        "3",
    ]);
    let server = serve_with(&scratch, &args);
    serve_harness::iscsi::admit_test_initiators(&scratch.data());
    let (address, target) = parse_uri(&server.iscsi_uri());

    // Silent: dropped at the login deadline.
    let mut silent = Initiator::connect(address);
    let waited = seconds_until_closed(&mut silent);
    assert!((0.8..3.0).contains(&waited), "silent for {waited}s");

    // Trickling a login, a byte every 200 ms: the deadline is for the
    // whole login, not per read.
    let mut trickle = Initiator::connect(address);
    let started = std::time::Instant::now();
    let mut header = [0u8; 48];
    header[0] = 0x43;
    while trickle.stream.write_all(&header[..1]).is_ok() && started.elapsed().as_secs() < 10 {
        std::thread::sleep(Duration::from_millis(200));
    }
    let waited = started.elapsed().as_secs_f64();
    assert!(
        waited < 4.0,
        "a trickling login kept its connection {waited}s"
    );

    // Logged in, then idle with nothing in flight: dropped at the idle
    // timeout, not the login deadline.
    let mut idle = Initiator::login(address, &target);
    let waited = seconds_until_closed(&mut idle);
    assert!((2.5..6.0).contains(&waited), "idle for {waited}s");
    server.stop();
}
