//! Feeds arbitrary bytes to a target connection, cut into pieces of a size
//! the input chooses, the way a socket would deliver them, and completes
//! every block operation it asks for with an outcome the input chooses.
//!
//! The first byte selects the piece size (low six bits), whether a valid
//! login goes first (bit 6, so that the full feature phase is reached without
//! the fuzzer having to find a login) and whether outcomes fail (bit 7). The
//! second byte's low bit makes every initiator authenticate with CHAP (so
//! the valid login is refused and the security negotiation is what the
//! bytes exercise); the rest is the byte stream. Persistent reservation
//! commands are carried out on one real [`Reservations`], so the bytes
//! exercise that state machine too; compares miscompare when outcomes
//! fail.
//!
//! Properties: nothing panics, and the connection never holds more than one
//! PDU of its largest accepted size.

#![no_main]

use libfuzzer_sys::fuzz_target;
use wafer_iscsi::login::{TARGET_RECV_DATA_SEGMENT_BYTES, TEXT_BYTES_MAX};
use wafer_iscsi::pdu::{AHS_BYTES_MAX, BHS_BYTES, Bhs, DIGEST_BYTES, Digests, encode};
use std::sync::Arc;

use wafer_iscsi::{
    BlockError, BlockOp, Challenge, Connection, Credentials, Event, LunInfo, Nexus, Outcome,
    Policy, Reservations, Run, Security, TargetIdentity,
};

const TARGET: &str = "iqn.2026-11.org.wafer:fuzz";

/// The most one connection may hold of a PDU not yet whole.
const HELD_MAX: usize = BHS_BYTES
    + AHS_BYTES_MAX
    + 2 * DIGEST_BYTES
    + 3
    + if TEXT_BYTES_MAX > TARGET_RECV_DATA_SEGMENT_BYTES as usize {
        TEXT_BYTES_MAX
    } else {
        TARGET_RECV_DATA_SEGMENT_BYTES as usize
    };

fn connection() -> Connection {
    let identity = TargetIdentity {
        name: TARGET.to_owned(),
        alias: "fuzz".to_owned(),
        portal_group_tag: 1,
        address: "127.0.0.1:3260".to_owned(),
    };
    let lun = |number, read_only| LunInfo {
        number,
        blocks: 4096,
        read_only,
        serial: format!("fuzz{number}"),
        id: u64::from(number),
        access: wafer_iscsi::Access::Full,
        resets: 0,
        thin: false,
    };
    Connection::new(identity, 1, vec![lun(0, false), lun(1, true)])
}

fn login() -> Vec<u8> {
    let keys = format!(
        "InitiatorName=iqn.fuzz\0TargetName={TARGET}\0InitialR2T=No\0ImmediateData=Yes\0"
    );
    let mut bhs = Bhs::new(0x43, 0x80 | (1 << 2) | 3);
    bhs.put_u32(24, 1);
    let mut out = Vec::new();
    encode(&mut out, bhs, keys.as_bytes(), Digests::default());
    out
}

/// Every initiator must authenticate with CHAP.
fn chap_required(connection: &mut Connection) {
    let credentials = |name: &str| Credentials {
        name: name.to_owned(),
        secret: b"fuzz-secret-12345".to_vec(),
    };
    let security = Security {
        initiators: Default::default(),
        default: Policy::Chap {
            inbound: credentials("fuzz"),
            outbound: Some(credentials("target")),
        },
    };
    let challenge = Challenge {
        identifier: 7,
        bytes: [0x5a; wafer_iscsi::chap::CHALLENGE_BYTES],
    };
    connection.set_security(Arc::new(security), challenge);
}

fn outcome(op: &BlockOp, fail: bool, reservations: &mut Reservations) -> Outcome {
    let nexus = Nexus {
        initiator: "iqn.fuzz".to_owned(),
        isid: [0x80, 0, 0, 0, 0, 1],
    };
    match (op, fail) {
        (BlockOp::ReserveIn { cdb }, _) => Outcome::Answer(reservations.reserve_in(cdb)),
        (BlockOp::ReserveOut { cdb, parameters }, _) => {
            Outcome::Answer(reservations.reserve_out(&nexus, cdb, parameters))
        }
        (BlockOp::Verify { .. } | BlockOp::CompareAndWrite { .. }, true) => {
            Outcome::Miscompare(1)
        }
        (_, true) => Outcome::Failed(BlockError::Io),
        (BlockOp::Read { length, .. }, false) => Outcome::Data(vec![0x5a; *length as usize]),
        (BlockOp::Allocation { length, .. }, false) => Outcome::Runs(vec![
            Run {
                length: length / 2,
                data: true,
            },
            Run {
                length: length - length / 2,
                data: false,
            },
        ]),
        (_, false) => Outcome::Done,
    }
}

fuzz_target!(|input: &[u8]| {
    let [selector, options, stream @ ..] = input else {
        return;
    };
    let selector = *selector;
    let piece = usize::from(selector & 0x3f) + 1;
    let fail = selector & 0x80 != 0;
    let mut bytes = if selector & 0x40 != 0 { login() } else { Vec::new() };
    bytes.extend_from_slice(stream);
    let mut connection = connection();
    if options & 0x01 != 0 {
        chap_required(&mut connection);
    }
    let mut reservations = Reservations::default();
    let mut out = Vec::new();
    for chunk in bytes.chunks(piece) {
        if connection.handle_input(chunk).is_err() {
            return;
        }
        assert!(connection.buffered_bytes() <= HELD_MAX);
        while let Some(event) = connection.poll_event() {
            if let Event::Execute { task, ops, .. } = event {
                connection.complete(task, outcome(&ops[0], fail, &mut reservations));
            }
        }
        out.clear();
        connection.poll_transmit(&mut out);
    }
    let _ = connection.handle_eof();
});
