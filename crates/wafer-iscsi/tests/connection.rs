//! The connection state machine against a scripted initiator: discovery,
//! reads in Data-In sequences with residuals, writes gathered from
//! immediate data and R2T sequences, Data-Out out of sequence, the CmdSN
//! window, task management waiting for the engine, NOP and logout,
//! digests, refused logins (CHAP required, not offered), and the unit
//! attention of a change of LUNs.

mod common;

use common::*;
use wafer_iscsi::pdu::{Bhs, Digests};
use wafer_iscsi::scsi::BlockOp;
use wafer_iscsi::{Connection, ConnectionError, Event, Outcome, TaskId};

fn text_pairs(data: &[u8]) -> Vec<(String, String)> {
    wafer_iscsi::text::parse(data)
        .expect("text")
        .into_iter()
        .map(|p| (p.key, p.value))
        .collect()
}

#[test]
fn a_discovery_session_lists_the_target_and_refuses_scsi() {
    let mut connection = Connection::new(identity(), 1, luns());
    let keys = "InitiatorName=iqn.i\0SessionType=Discovery\0";
    connection.handle_input(&login_request(1, 3, keys)).unwrap();
    sent(&mut connection, Digests::default());
    let mut text = Bhs::new(0x04, 0x80);
    text.put_u32(16, 9);
    text.put_u32(20, u32::MAX);
    text.put_u32(24, 1);
    connection
        .handle_input(&wire(text, b"SendTargets=All\0", Digests::default()))
        .unwrap();
    let answer = sent(&mut connection, Digests::default());
    assert_eq!(answer[0].bhs.opcode(), 0x24);
    assert_eq!(
        text_pairs(&answer[0].data),
        vec![
            ("TargetName".into(), TARGET.into()),
            ("TargetAddress".into(), "127.0.0.1:3260,1".into())
        ]
    );
    let read = command(10, 2, &read10(0, 1), 512, 0xc0);
    connection
        .handle_input(&wire(read, &[], Digests::default()))
        .unwrap();
    let reject = sent(&mut connection, Digests::default());
    assert_eq!((reject[0].bhs.opcode(), reject[0].bhs.0[2]), (0x3f, 0x05));
    let happened = events(&mut connection);
    assert!(!happened.iter().any(|e| matches!(e, Event::Execute { .. })));
}

#[test]
fn a_read_goes_out_in_data_in_pdus_with_its_status_and_residual() {
    let mut connection = logged_in("");
    // 32 blocks (16 KiB) while the initiator expects 20 KiB: an underflow.
    let read = command(7, 1, &read10(8, 32), 20480, 0xc0);
    connection
        .handle_input(&wire(read, &[], Digests::default()))
        .unwrap();
    let happened = events(&mut connection);
    let [Event::Execute { task, lun: 0, ops }] = happened.as_slice() else {
        panic!("one read for the engine");
    };
    assert_eq!(
        ops,
        &[BlockOp::Read {
            offset: 4096,
            length: 16384
        }]
    );
    assert!(sent(&mut connection, Digests::default()).is_empty());
    let data: Vec<u8> = (0..16384).map(|n| (n % 251) as u8).collect();
    connection.complete(*task, Outcome::Data(data.clone()));
    let pdus = sent(&mut connection, Digests::default());
    assert_eq!(pdus.len(), 2, "the initiator takes 8 KiB per PDU");
    let mut gathered = Vec::new();
    for (n, pdu) in pdus.iter().enumerate() {
        assert_eq!(pdu.bhs.opcode(), 0x25);
        assert_eq!(pdu.bhs.u32_at(36), n as u32, "DataSN");
        assert_eq!(pdu.bhs.u32_at(40), gathered.len() as u32, "buffer offset");
        gathered.extend_from_slice(&pdu.data);
    }
    assert_eq!(gathered, data);
    let last = &pdus[1].bhs;
    assert_eq!(last.flags() & 0x83, 0x83, "final, status, underflow");
    assert_eq!((last.0[3], last.u32_at(44)), (0, 4096));
    assert_eq!(pdus[0].bhs.flags() & 0x01, 0, "no status on the first");
}

#[test]
fn a_write_gathers_immediate_data_and_r2t_sequences_before_the_engine() {
    let mut connection = logged_in(
        "ImmediateData=Yes\0InitialR2T=Yes\0FirstBurstLength=4096\0MaxBurstLength=8192\0",
    );
    let data: Vec<u8> = (0..16384).map(|n| (n * 7 % 253) as u8).collect();
    let write = command(3, 1, &write10(0, 32), 16384, 0xa0);
    connection
        .handle_input(&wire(write, &data[..4096], Digests::default()))
        .unwrap();
    let r2t = sent(&mut connection, Digests::default());
    assert_eq!(r2t.len(), 1);
    let (ttt, r2t_sn) = (r2t[0].bhs.u32_at(20), r2t[0].bhs.u32_at(36));
    assert_eq!(r2t[0].bhs.opcode(), 0x31);
    assert_eq!(
        (r2t_sn, r2t[0].bhs.u32_at(40), r2t[0].bhs.u32_at(44)),
        (0, 4096, 8192)
    );
    for (n, offset) in [4096u32, 8192].iter().enumerate() {
        let out = data_out(3, ttt, n as u32, *offset, n == 1);
        let chunk = &data[*offset as usize..*offset as usize + 4096];
        connection
            .handle_input(&wire(out, chunk, Digests::default()))
            .unwrap();
    }
    let r2t = sent(&mut connection, Digests::default());
    assert_eq!(r2t.len(), 1, "a second R2T for the rest");
    assert_eq!((r2t[0].bhs.u32_at(36), r2t[0].bhs.u32_at(40)), (1, 12288));
    assert!(
        events(&mut connection).is_empty(),
        "nothing before all data"
    );
    let out = data_out(3, r2t[0].bhs.u32_at(20), 0, 12288, true);
    connection
        .handle_input(&wire(out, &data[12288..], Digests::default()))
        .unwrap();
    let happened = events(&mut connection);
    let [Event::Execute { task, ops, .. }] = happened.as_slice() else {
        panic!("one write for the engine");
    };
    assert_eq!(
        ops,
        &[BlockOp::Write {
            offset: 0,
            data: data.clone()
        }]
    );
    assert!(
        sent(&mut connection, Digests::default()).is_empty(),
        "no response before the engine says the write is durable"
    );
    connection.complete(*task, Outcome::Done);
    let response = sent(&mut connection, Digests::default());
    assert_eq!(response[0].bhs.opcode(), 0x21);
    assert_eq!((response[0].bhs.0[3], response[0].bhs.u32_at(36)), (0, 2));
}

#[test]
fn data_out_out_of_sequence_is_rejected_and_fails_its_task() {
    let mut connection = logged_in("InitialR2T=Yes\0");
    let write = command(4, 1, &write10(0, 2), 1024, 0xa0);
    connection
        .handle_input(&wire(write, &[], Digests::default()))
        .unwrap();
    let r2t = sent(&mut connection, Digests::default());
    let out = data_out(4, r2t[0].bhs.u32_at(20), 5, 0, true);
    connection
        .handle_input(&wire(out, &[0u8; 1024], Digests::default()))
        .unwrap();
    let answer = sent(&mut connection, Digests::default());
    assert_eq!((answer[0].bhs.opcode(), answer[0].bhs.0[2]), (0x3f, 0x09));
    assert_eq!((answer[1].bhs.opcode(), answer[1].bhs.0[3]), (0x21, 0x02));
    assert_eq!(answer[1].data[2 + 2] & 0x0f, 0x0b, "ABORTED COMMAND");
    assert!(events(&mut connection).is_empty());
    assert_eq!(connection.tasks_in_flight(), 0);
}

#[test]
fn get_lba_status_asks_the_engine_and_describes_its_runs() {
    let mut connection = logged_in("");
    let mut cdb = [0u8; 16];
    cdb[0] = 0x9e;
    cdb[1] = 0x12;
    cdb[2..10].copy_from_slice(&16u64.to_be_bytes());
    cdb[13] = 64;
    let status = command(5, 1, &cdb, 64, 0xc0);
    connection
        .handle_input(&wire(status, &[], Digests::default()))
        .unwrap();
    let happened = events(&mut connection);
    let [Event::Execute { task, ops, .. }] = happened.as_slice() else {
        panic!("one question for the engine");
    };
    assert_eq!(
        ops,
        &[BlockOp::Allocation {
            offset: 8192,
            length: (2048 - 16) * 512
        }]
    );
    let runs = vec![
        wafer_iscsi::Run {
            length: 4096,
            data: true,
        },
        wafer_iscsi::Run {
            length: (2048 - 24) * 512,
            data: false,
        },
    ];
    connection.complete(*task, Outcome::Runs(runs));
    let answer = sent(&mut connection, Digests::default());
    let data = &answer[0].data;
    assert_eq!(answer[0].bhs.0[3], 0, "GOOD");
    assert_eq!(data[..4], 36u32.to_be_bytes());
    assert_eq!((&data[8..16], data[20]), (&16u64.to_be_bytes()[..], 0));
    assert_eq!((&data[24..32], data[36]), (&24u64.to_be_bytes()[..], 1));
}

#[test]
fn commands_run_in_cmd_sn_order_and_outside_the_window_are_dropped() {
    let mut connection = logged_in("");
    let unit_ready = |itt, cmd_sn| {
        wire(
            command(itt, cmd_sn, &[0u8; 6], 0, 0x80),
            &[],
            Digests::default(),
        )
    };
    connection.handle_input(&unit_ready(2, 2)).unwrap();
    assert!(
        sent(&mut connection, Digests::default()).is_empty(),
        "held for CmdSN 1"
    );
    connection.handle_input(&unit_ready(1, 1)).unwrap();
    let answers = sent(&mut connection, Digests::default());
    let order: Vec<u32> = answers.iter().map(|a| a.bhs.itt()).collect();
    assert_eq!(order, vec![1, 2]);
    assert_eq!(
        answers[1].bhs.u32_at(24),
        answers[0].bhs.u32_at(24) + 1,
        "StatSN"
    );
    assert_eq!(answers[1].bhs.u32_at(28), 3, "ExpCmdSN");
    assert_eq!(answers[1].bhs.u32_at(32), 3 + 31, "MaxCmdSN: the window");
    connection.handle_input(&unit_ready(3, 1000)).unwrap();
    connection.handle_input(&unit_ready(4, 0)).unwrap();
    assert!(sent(&mut connection, Digests::default()).is_empty());
    assert_eq!(connection.counters().out_of_window, 2);
    connection.handle_input(&unit_ready(5, 3)).unwrap();
    assert_eq!(sent(&mut connection, Digests::default()).len(), 1);
}

#[test]
fn abort_task_answers_once_the_engine_has_finished_the_task() {
    let mut connection = logged_in("");
    let read = command(7, 1, &read10(0, 1), 512, 0xc0);
    connection
        .handle_input(&wire(read, &[], Digests::default()))
        .unwrap();
    let happened = events(&mut connection);
    let [Event::Execute { task, .. }] = happened.as_slice() else {
        panic!("a read");
    };
    let task: TaskId = *task;
    let mut abort = Bhs::new(0x02, 0x80 | 1);
    abort.put_u32(16, 8);
    abort.put_u32(20, 7);
    abort.put_u32(24, 2);
    abort.put_u32(32, 1);
    connection
        .handle_input(&wire(abort, &[], Digests::default()))
        .unwrap();
    assert!(
        sent(&mut connection, Digests::default()).is_empty(),
        "waits for the engine"
    );
    connection.complete(task, Outcome::Data(vec![0; 512]));
    let answers = sent(&mut connection, Digests::default());
    assert_eq!(answers.len(), 1, "the aborted task gets no response");
    assert_eq!((answers[0].bhs.opcode(), answers[0].bhs.0[2]), (0x22, 0));
    // A LUN reset of a LUN that does not exist.
    let mut reset = Bhs::new(0x02, 0x80 | 5);
    reset.put_u64(8, wafer_iscsi::scsi::lun_field(9));
    reset.put_u32(16, 9);
    reset.put_u32(24, 3);
    connection
        .handle_input(&wire(reset, &[], Digests::default()))
        .unwrap();
    let answers = sent(&mut connection, Digests::default());
    assert_eq!(answers[0].bhs.0[2], 2, "LUN does not exist");
}

#[test]
fn nop_out_is_echoed_and_logout_closes() {
    let mut connection = logged_in("");
    let mut nop = Bhs::new(0x40, 0x80);
    nop.put_u32(16, 11);
    nop.put_u32(20, u32::MAX);
    connection
        .handle_input(&wire(nop, b"ping", Digests::default()))
        .unwrap();
    let echo = sent(&mut connection, Digests::default());
    assert_eq!((echo[0].bhs.opcode(), echo[0].bhs.itt()), (0x20, 11));
    assert_eq!(echo[0].data, b"ping");
    let mut logout = Bhs::new(0x46, 0x80);
    logout.put_u32(16, 12);
    connection
        .handle_input(&wire(logout, &[], Digests::default()))
        .unwrap();
    let answer = sent(&mut connection, Digests::default());
    assert_eq!((answer[0].bhs.opcode(), answer[0].bhs.0[2]), (0x26, 0));
    assert_eq!(events(&mut connection), vec![Event::Closing]);
    assert!(connection.is_closed());
}

#[test]
fn digests_are_checked_once_negotiated() {
    let digests = Digests {
        header: true,
        data: true,
    };
    let mut connection = logged_in("HeaderDigest=CRC32C\0DataDigest=CRC32C\0");
    let mut nop = Bhs::new(0x40, 0x80);
    nop.put_u32(16, 1);
    nop.put_u32(20, u32::MAX);
    let mut bytes = wire(nop, b"abcd", digests);
    connection.handle_input(&bytes).unwrap();
    let echo = sent(&mut connection, digests);
    assert_eq!(echo[0].data, b"abcd", "answered with digests");
    // A damaged data segment: the PDU is rejected, the session goes on.
    bytes[52] ^= 0xff;
    connection.handle_input(&bytes).unwrap();
    let reject = sent(&mut connection, digests);
    assert_eq!((reject[0].bhs.opcode(), reject[0].bhs.0[2]), (0x3f, 0x02));
    // A damaged header: the connection cannot go on.
    bytes[52] ^= 0xff;
    bytes[20] ^= 0x01;
    assert!(matches!(
        connection.handle_input(&bytes),
        Err(ConnectionError::Framing(_))
    ));
}

#[test]
fn bad_logins_are_refused() {
    let mut connection = Connection::new(identity(), 1, luns());
    let nop = wire(Bhs::new(0x40, 0x80), &[], Digests::default());
    assert_eq!(
        connection.handle_input(&nop),
        Err(ConnectionError::NotLogin(0x00))
    );
    let mut connection = Connection::new(identity(), 1, luns());
    let keys = "InitiatorName=iqn.i\0TargetName=iqn.elsewhere\0";
    connection.handle_input(&login_request(0, 1, keys)).unwrap();
    let answer = sent(&mut connection, Digests::default());
    assert_eq!(answer[0].bhs.0[36..38], [0x02, 0x03], "target not found");
    assert_eq!(events(&mut connection), vec![Event::Closing]);
}

#[test]
fn a_change_of_luns_is_a_unit_attention_on_the_next_command_but_report_luns() {
    let mut connection = logged_in("");
    let digests = Digests::default();
    let status_of = |pdus: &[common::Sent]| {
        let last = pdus.last().expect("a response");
        let sense = |at: usize| last.data.get(2 + at).copied().unwrap_or(0);
        (last.bhs.0[3], sense(2) & 0x0f, sense(12), sense(13))
    };
    let tur = |itt: u32, cmd_sn: u32| {
        wire(
            command(itt, cmd_sn, &[0u8; 6], 0, 0x80),
            &[],
            Digests::default(),
        )
    };
    connection.report_luns_changed();
    // INQUIRY passes; TEST UNIT READY gets the attention, once.
    let inquiry = command(1, 1, &[0x12, 0, 0, 0, 36, 0], 36, 0xc0);
    connection
        .handle_input(&wire(inquiry, &[], digests))
        .unwrap();
    assert_eq!(status_of(&sent(&mut connection, digests)).0, 0);
    connection.handle_input(&tur(2, 2)).unwrap();
    assert_eq!(
        status_of(&sent(&mut connection, digests)),
        (2, 0x06, 0x3f, 0x0e)
    );
    connection.handle_input(&tur(3, 3)).unwrap();
    assert_eq!(status_of(&sent(&mut connection, digests)).0, 0);
    // REPORT LUNS clears it.
    connection.report_luns_changed();
    let report = command(4, 4, &[0xa0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0], 256, 0xc0);
    connection
        .handle_input(&wire(report, &[], digests))
        .unwrap();
    assert_eq!(status_of(&sent(&mut connection, digests)).0, 0);
    connection.handle_input(&tur(5, 5)).unwrap();
    assert_eq!(status_of(&sent(&mut connection, digests)).0, 0);
}

#[test]
fn an_initiator_that_must_use_chap_is_refused_at_login_without_it() {
    use std::sync::Arc;
    use wafer_iscsi::{Challenge, Credentials, Policy, Security};
    let mut security = Security::default();
    let inbound = Credentials {
        name: "alice".into(),
        secret: b"alice-secret-1".to_vec(),
    };
    let policy = Policy::Chap {
        inbound,
        outbound: None,
    };
    security.initiators.insert("iqn.i".into(), policy);
    let challenge = Challenge {
        identifier: 1,
        bytes: [7; 16],
    };
    let mut connection = Connection::new(identity(), 1, luns());
    connection.set_security(Arc::new(security), challenge);
    let keys = format!("InitiatorName=iqn.i\0TargetName={TARGET}\0AuthMethod=None\0");
    connection
        .handle_input(&login_request(0, 1, &keys))
        .unwrap();
    let response = sent(&mut connection, Digests::default());
    assert_eq!(
        response[0].bhs.0[36..38],
        [0x02, 0x01],
        "authentication failure"
    );
    assert!(matches!(
        events(&mut connection).as_slice(),
        [Event::Closing]
    ));
    assert!(connection.is_closed());
}
