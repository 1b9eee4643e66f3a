//! Feeds arbitrary bytes to a target connection, cut into pieces of a size
//! the input chooses, the way a socket would deliver them, and completes
//! every block operation it asks for with an outcome the input chooses.
//!
//! The first byte selects the piece size (low six bits), whether a valid
//! login goes first (bit 6, so that the full feature phase is reached without
//! the fuzzer having to find a login) and whether outcomes fail (bit 7); the
//! rest is the byte stream.
//!
//! Properties: nothing panics, and the connection never holds more than one
//! PDU of its largest accepted size.

#![no_main]

use libfuzzer_sys::fuzz_target;
use wafer_iscsi::login::{TARGET_RECV_DATA_SEGMENT_BYTES, TEXT_BYTES_MAX};
use wafer_iscsi::pdu::{AHS_BYTES_MAX, BHS_BYTES, Bhs, DIGEST_BYTES, Digests, encode};
use wafer_iscsi::{
    BlockError, BlockOp, Connection, Event, LunInfo, Outcome, Run, TargetIdentity,
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

fn outcome(op: &BlockOp, fail: bool) -> Outcome {
    match (op, fail) {
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
    let Some((&selector, stream)) = input.split_first() else {
        return;
    };
    let piece = usize::from(selector & 0x3f) + 1;
    let fail = selector & 0x80 != 0;
    let mut bytes = if selector & 0x40 != 0 { login() } else { Vec::new() };
    bytes.extend_from_slice(stream);
    let mut connection = connection();
    let mut out = Vec::new();
    for chunk in bytes.chunks(piece) {
        if connection.handle_input(chunk).is_err() {
            return;
        }
        assert!(connection.buffered_bytes() <= HELD_MAX);
        while let Some(event) = connection.poll_event() {
            if let Event::Execute { task, ops, .. } = event {
                connection.complete(task, outcome(&ops[0], fail));
            }
        }
        out.clear();
        connection.poll_transmit(&mut out);
    }
    let _ = connection.handle_eof();
});
