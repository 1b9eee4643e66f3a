//! Hostile bytes never panic the target, and how input is cut into reads
//! never changes what it does: arbitrary bytes before and after login,
//! valid streams cut short, and every block operation completed with an
//! arbitrary outcome.

mod common;

use common::*;
use proptest::prelude::*;
use wafer_iscsi::pdu::{Bhs, Digests};
use wafer_iscsi::{BlockError, Connection, Event, Outcome, Run};

/// A valid initiator's stream, PDU by PDU: a login, then a read, a write
/// (immediate data and unsolicited Data-Out), an INQUIRY, a ping, an ABORT
/// TASK and a logout.
fn script() -> Vec<Vec<u8>> {
    let keys =
        format!("InitiatorName=iqn.i\0TargetName={TARGET}\0InitialR2T=No\0ImmediateData=Yes\0");
    let none = Digests::default();
    let mut nop = Bhs::new(0x40, 0x80);
    nop.put_u32(16, 4);
    nop.put_u32(20, u32::MAX);
    let mut abort = Bhs::new(0x02, 0x81);
    abort.put_u32(16, 5);
    abort.put_u32(20, 1);
    abort.put_u32(24, 4);
    let mut logout = Bhs::new(0x46, 0x80);
    logout.put_u32(16, 6);
    vec![
        login_request(1, 3, &keys),
        wire(command(1, 1, &read10(0, 8), 4096, 0xc0), &[], none),
        wire(command(2, 2, &write10(8, 4), 2048, 0x20), &[7u8; 512], none),
        wire(data_out(2, u32::MAX, 0, 512, true), &[8u8; 1536], none),
        wire(
            command(3, 3, &[0x12, 1, 0x83, 0, 255, 0], 255, 0xc0),
            &[],
            none,
        ),
        wire(nop, b"hello", none),
        wire(abort, &[], none),
        wire(logout, &[], none),
    ]
}

/// `bytes` cut into pieces of `sizes` (cycled).
fn cut<'a>(bytes: &'a [u8], sizes: &[usize]) -> Vec<&'a [u8]> {
    let mut pieces = Vec::new();
    let mut at = 0;
    for &size in sizes.iter().cycle() {
        if at >= bytes.len() {
            break;
        }
        let end = (at + size.max(1)).min(bytes.len());
        pieces.push(&bytes[at..end]);
        at = end;
    }
    pieces
}

/// Completes every operation asked for with `outcomes` in turn.
fn complete_all(connection: &mut Connection, outcomes: &[u8], next: &mut usize) {
    while let Some(event) = connection.poll_event() {
        let Event::Execute { task, ops, .. } = event else {
            continue;
        };
        let pick = outcomes.get(*next).copied().unwrap_or(0);
        *next += 1;
        let outcome = match (pick % 6, &ops[0]) {
            (0, wafer_iscsi::BlockOp::Read { length, .. }) => {
                Outcome::Data(vec![pick; *length as usize])
            }
            (0, wafer_iscsi::BlockOp::Allocation { length, .. }) => Outcome::Runs(vec![
                Run {
                    length: length / 3,
                    data: false,
                },
                Run {
                    length: length - length / 3,
                    data: true,
                },
            ]),
            (0 | 1, _) => Outcome::Done,
            (2, _) => Outcome::Failed(BlockError::Io),
            (3, _) => Outcome::Miscompare(u32::from(pick)),
            (4, _) => Outcome::Answer(wafer_iscsi::scsi::Answer::status(
                wafer_iscsi::sense::Status::RESERVATION_CONFLICT,
            )),
            _ => Outcome::Data(vec![pick; usize::from(pick)]),
        };
        connection.complete(task, outcome);
    }
}

/// Feeds `pieces`, completing every operation with `outcomes` after each
/// piece (`eager`) or only once all are in; returns everything sent and
/// whether the connection failed.
fn run(pieces: &[&[u8]], outcomes: &[u8], eager: bool) -> (Vec<u8>, bool) {
    let mut connection = Connection::new(identity(), 1, luns());
    let (mut out, mut next) = (Vec::new(), 0);
    for piece in pieces {
        if connection.handle_input(piece).is_err() {
            connection.poll_transmit(&mut out);
            return (out, true);
        }
        if eager {
            complete_all(&mut connection, outcomes, &mut next);
        }
        connection.poll_transmit(&mut out);
    }
    complete_all(&mut connection, outcomes, &mut next);
    connection.poll_transmit(&mut out);
    (out, connection.handle_eof().is_err())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..4096)) {
        run(&cut(&bytes, &[64]), &[], true);
    }

    #[test]
    fn arbitrary_bytes_after_login_never_panic(
        tail in proptest::collection::vec(any::<u8>(), 0..4096),
        outcomes in proptest::collection::vec(any::<u8>(), 0..8),
    ) {
        let keys = format!("InitiatorName=iqn.i\0TargetName={TARGET}\0");
        let mut bytes = login_request(1, 3, &keys);
        bytes.extend(tail);
        run(&cut(&bytes, &[7, 300, 48]), &outcomes, true);
    }

    #[test]
    fn damaged_scripts_never_panic(
        keep in 0usize..2000,
        flips in proptest::collection::vec((0usize..2000, any::<u8>()), 0..6),
        outcomes in proptest::collection::vec(any::<u8>(), 0..8),
    ) {
        let mut bytes = script().concat();
        for (at, value) in flips {
            let len = bytes.len();
            bytes[at % len] ^= value;
        }
        bytes.truncate(keep.min(bytes.len()));
        run(&cut(&bytes, &[13, 64]), &outcomes, true);
    }

    #[test]
    fn how_input_is_cut_changes_nothing(
        chunks in proptest::collection::vec(1usize..200, 1..8),
        outcomes in proptest::collection::vec(any::<u8>(), 0..8),
    ) {
        // Compared by length and digest: a mismatch prints short.
        let bytes = script().concat();
        let (whole, failed) = run(&[&bytes], &outcomes, false);
        let (pieces, pieces_failed) = run(&cut(&bytes, &chunks), &outcomes, false);
        prop_assert_eq!(failed, pieces_failed);
        prop_assert_eq!(whole.len(), pieces.len());
        prop_assert_eq!(wafer_iscsi::crc32c(&whole), wafer_iscsi::crc32c(&pieces));
    }
}

#[test]
fn the_script_is_served_whole() {
    let pdus = script();
    let pieces: Vec<&[u8]> = pdus.iter().map(Vec::as_slice).collect();
    let (out, failed) = run(&pieces, &[0, 1], true);
    assert!(!failed);
    let mut decoder = wafer_iscsi::pdu::PduDecoder::new(1 << 24);
    let mut input = &out[..];
    let mut opcodes = Vec::new();
    while let Ok(Some(wafer_iscsi::pdu::Decoded::Pdu(pdu))) = decoder.decode(&mut input) {
        opcodes.push(pdu.bhs.opcode());
    }
    // Login, read data with status, write response, INQUIRY data, NOP-In,
    // TMF response, logout response.
    assert_eq!(opcodes, vec![0x23, 0x25, 0x21, 0x25, 0x20, 0x22, 0x26]);
}
