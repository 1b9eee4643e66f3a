//! Every option path of the handshake, checked against byte sequences written
//! out by hand from the specification (golden bytes), so that an encoder and a
//! test cannot drift together.

mod common;

use common::{
    OptionReply, catalogue, client_flags, export_query, lun0, meta_context_query, option,
    run_handshake, run_handshake_in_pieces,
};
use wafer_nbd::consts::*;
use wafer_nbd::{Handshake, HandshakeEvent};

/// The option reply magic, as it appears on the wire.
const REP_MAGIC: [u8; 8] = [0x00, 0x03, 0xe8, 0x89, 0x04, 0x55, 0x65, 0xa9];

/// Transmission flags of `vol0/lun0` without structured replies: HAS_FLAGS,
/// SEND_FLUSH, SEND_FUA, SEND_TRIM, SEND_WRITE_ZEROES, CAN_MULTI_CONN and
/// SEND_FAST_ZERO = 0x001 + 0x004 + 0x008 + 0x020 + 0x040 + 0x100 + 0x800.
const LUN0_FLAGS: [u8; 2] = [0x09, 0x6d];
/// The same with SEND_DF (0x080), once structured replies are on.
const LUN0_FLAGS_STRUCTURED: [u8; 2] = [0x09, 0xed];
/// `vol0/lun1`, read-only: HAS_FLAGS, READ_ONLY, SEND_FLUSH, SEND_FUA.
const LUN1_FLAGS: [u8; 2] = [0x00, 0x0f];
/// 1 GiB.
const LUN0_SIZE: [u8; 8] = [0, 0, 0, 0, 0x40, 0, 0, 0];

fn reply_bytes(option: u32, reply_type: u32, data: &[u8]) -> Vec<u8> {
    let mut bytes = REP_MAGIC.to_vec();
    bytes.extend_from_slice(&option.to_be_bytes());
    bytes.extend_from_slice(&reply_type.to_be_bytes());
    bytes.extend_from_slice(&(data.len() as u32).to_be_bytes());
    bytes.extend_from_slice(data);
    bytes
}

fn fixed_newstyle() -> Vec<u8> {
    client_flags(NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES)
}

#[test]
fn the_greeting_is_nbdmagic_ihaveopt_and_fixed_newstyle_with_no_zeroes() {
    let mut handshake = Handshake::new();
    let mut output = Vec::new();
    assert_eq!(handshake.poll_transmit(&mut output), 18);
    assert_eq!(output, b"NBDMAGICIHAVEOPT\x00\x03");
    assert_eq!(
        handshake.poll_transmit(&mut output),
        0,
        "the greeting goes out once"
    );
}

#[test]
fn export_name_sends_size_flags_and_124_zeroes() {
    let mut input = client_flags(NBD_FLAG_C_FIXED_NEWSTYLE);
    input.extend(option(NBD_OPT_EXPORT_NAME, b"vol0/lun0"));
    let run = run_handshake(&input, &catalogue());
    let mut expected = LUN0_SIZE.to_vec();
    expected.extend_from_slice(&LUN0_FLAGS);
    expected.extend_from_slice(&[0; 124]);
    assert_eq!(run.output, expected);
    let negotiated = run.negotiated();
    assert_eq!(negotiated.export, lun0());
    assert_eq!(negotiated.transmission_flags.0, 0x096d);
    assert!(!negotiated.no_zeroes);
    assert!(!negotiated.structured_replies);
    assert_eq!(negotiated.base_allocation, None);
}

#[test]
fn export_name_leaves_out_the_zeroes_when_the_client_asks() {
    let mut input = fixed_newstyle();
    input.extend(option(NBD_OPT_EXPORT_NAME, b"vol0/lun1"));
    let run = run_handshake(&input, &catalogue());
    let mut expected = vec![0, 0, 0, 0, 0x04, 0, 0, 0];
    expected.extend_from_slice(&LUN1_FLAGS);
    assert_eq!(run.output, expected);
    assert!(run.negotiated().no_zeroes);
    assert!(run.negotiated().export.read_only);
}

#[test]
fn the_empty_name_is_the_default_export_and_old_clients_are_served() {
    // No client flags at all: a non-fixed newstyle client that only knows
    // EXPORT_NAME.
    let mut input = client_flags(0);
    input.extend(option(NBD_OPT_EXPORT_NAME, b""));
    let run = run_handshake(&input, &catalogue());
    assert_eq!(run.negotiated().export.name, "vol0/lun0");
    assert_eq!(run.output.len(), 8 + 2 + 124);
}

#[test]
fn go_replies_export_name_description_block_size_then_ack() {
    let mut input = fixed_newstyle();
    input.extend(option(
        NBD_OPT_GO,
        &export_query("vol0/lun0", &[NBD_INFO_NAME, NBD_INFO_DESCRIPTION]),
    ));
    let run = run_handshake(&input, &catalogue());
    let go = [0, 0, 0, 7];
    let info = [0, 0, 0, 3];
    let expected: Vec<u8> = [
        &REP_MAGIC[..],
        &go,
        &info,
        &[0, 0, 0, 12],
        &[0, 0],
        &LUN0_SIZE,
        &LUN0_FLAGS,
        &REP_MAGIC,
        &go,
        &info,
        &[0, 0, 0, 11],
        &[0, 1],
        b"vol0/lun0",
        &REP_MAGIC,
        &go,
        &info,
        &[0, 0, 0, 11],
        &[0, 2],
        b"first lun",
        &REP_MAGIC,
        &go,
        &info,
        &[0, 0, 0, 14],
        &[0, 3],
        &[0, 0, 0, 1],
        &[0, 0, 0x10, 0],
        &[0x02, 0, 0, 0],
        &REP_MAGIC,
        &go,
        &[0, 0, 0, 1],
        &[0, 0, 0, 0],
    ]
    .concat();
    assert_eq!(run.output, expected);
    assert_eq!(run.negotiated().export, lun0());
    assert!(run.leftover.is_empty());
}

#[test]
fn info_answers_like_go_without_ending_the_handshake() {
    let mut input = fixed_newstyle();
    input.extend(option(NBD_OPT_INFO, &export_query("", &[])));
    input.extend(option(
        NBD_OPT_GO,
        &export_query("vol0/lun1", &[NBD_INFO_DESCRIPTION]),
    ));
    let run = run_handshake(&input, &catalogue());
    let replies = run.replies();
    let types: Vec<(u32, u32)> = replies.iter().map(|r| (r.option, r.reply_type)).collect();
    assert_eq!(
        types,
        [
            (NBD_OPT_INFO, NBD_REP_INFO),
            (NBD_OPT_INFO, NBD_REP_INFO),
            (NBD_OPT_INFO, NBD_REP_ACK),
            (NBD_OPT_GO, NBD_REP_INFO),
            (NBD_OPT_GO, NBD_REP_INFO),
            (NBD_OPT_GO, NBD_REP_ACK),
        ]
    );
    // The default export's flags, then lun1 without a description (it has none).
    assert_eq!(
        replies[0].data,
        [&[0, 0][..], &LUN0_SIZE, &LUN0_FLAGS].concat()
    );
    assert_eq!(
        replies[3].data,
        [&[0, 0, 0, 0, 0, 0, 0x04, 0, 0, 0][..], &LUN1_FLAGS].concat()
    );
    assert_eq!(replies[4].data[..2], [0, 3], "block size, no description");
    assert_eq!(run.negotiated().export.name, "vol0/lun1");
}

#[test]
fn go_for_an_unknown_export_is_an_error_and_the_negotiation_goes_on() {
    let mut input = fixed_newstyle();
    input.extend(option(NBD_OPT_GO, &export_query("nope", &[])));
    input.extend(option(NBD_OPT_GO, &export_query("vol0/lun0", &[])));
    let run = run_handshake(&input, &catalogue());
    let replies = run.replies();
    assert_eq!(
        replies[0],
        OptionReply {
            option: NBD_OPT_GO,
            reply_type: NBD_REP_ERR_UNKNOWN,
            data: b"no such export".to_vec(),
        }
    );
    assert_eq!(replies.last().unwrap().reply_type, NBD_REP_ACK);
    assert_eq!(run.negotiated().export.name, "vol0/lun0");
}

#[test]
fn list_sends_one_server_reply_per_export_then_ack() {
    let mut input = fixed_newstyle();
    input.extend(option(NBD_OPT_LIST, &[]));
    let run = run_handshake(&input, &catalogue());
    let list = NBD_OPT_LIST;
    let expected = [
        reply_bytes(list, NBD_REP_SERVER, b"\x00\x00\x00\x09vol0/lun0"),
        reply_bytes(list, NBD_REP_SERVER, b"\x00\x00\x00\x09vol0/lun1"),
        reply_bytes(list, NBD_REP_ACK, b""),
    ]
    .concat();
    assert_eq!(run.output, expected);
    assert!(
        matches!(run.outcome, Ok(None)),
        "LIST does not end the handshake"
    );
}

#[test]
fn list_with_data_is_invalid() {
    let mut input = fixed_newstyle();
    input.extend(option(NBD_OPT_LIST, b"x"));
    let run = run_handshake(&input, &catalogue());
    assert_eq!(run.replies()[0].reply_type, NBD_REP_ERR_INVALID);
    assert_eq!(run.replies().len(), 1);
}

#[test]
fn an_unknown_option_is_unsupported_and_the_negotiation_goes_on() {
    // nbd-tester-client's handshake test sends option 0x7654321.
    let mut input = fixed_newstyle();
    input.extend(option(0x0765_4321, b"some data"));
    input.extend(option(NBD_OPT_EXTENDED_HEADERS, &[]));
    input.extend(option(NBD_OPT_LIST, &[]));
    let run = run_handshake(&input, &catalogue());
    let expected = [
        reply_bytes(0x0765_4321, NBD_REP_ERR_UNSUP, b"option not supported"),
        reply_bytes(
            NBD_OPT_EXTENDED_HEADERS,
            NBD_REP_ERR_UNSUP,
            b"option not supported",
        ),
    ]
    .concat();
    assert_eq!(run.output[..expected.len()], expected);
    assert_eq!(run.replies().last().unwrap().reply_type, NBD_REP_ACK);
    assert_eq!(run.replies().len(), 2 + 3);
}

#[test]
fn abort_is_acknowledged_and_ends_the_handshake() {
    let mut input = fixed_newstyle();
    input.extend(option(NBD_OPT_ABORT, &[]));
    input.extend_from_slice(b"trailing");
    let run = run_handshake(&input, &catalogue());
    assert_eq!(run.output, reply_bytes(NBD_OPT_ABORT, NBD_REP_ACK, b""));
    assert_eq!(run.outcome, Ok(Some(HandshakeEvent::Aborted)));
    assert_eq!(run.leftover, b"trailing");
}

#[test]
fn structured_replies_are_granted_once_and_enable_df() {
    let mut input = fixed_newstyle();
    input.extend(option(NBD_OPT_STRUCTURED_REPLY, &[]));
    input.extend(option(NBD_OPT_STRUCTURED_REPLY, &[]));
    input.extend(option(NBD_OPT_STRUCTURED_REPLY, b"payload"));
    input.extend(option(NBD_OPT_GO, &export_query("vol0/lun0", &[])));
    let run = run_handshake(&input, &catalogue());
    let replies = run.replies();
    assert_eq!(replies[0].reply_type, NBD_REP_ACK);
    assert_eq!(replies[1].reply_type, NBD_REP_ERR_INVALID);
    assert_eq!(replies[2].reply_type, NBD_REP_ERR_INVALID);
    assert_eq!(
        replies[3].data,
        [&[0, 0][..], &LUN0_SIZE, &LUN0_FLAGS_STRUCTURED].concat()
    );
    assert!(run.negotiated().structured_replies);
    assert_eq!(run.negotiated().transmission_flags.0, 0x09ed);
}

#[test]
fn list_meta_context_offers_base_allocation_with_id_zero() {
    let mut input = fixed_newstyle();
    for queries in [
        &[][..],
        &["base:"],
        &["base:allocation"],
        &["qemu:dirty-bitmap:b"],
    ] {
        input.extend(option(
            NBD_OPT_LIST_META_CONTEXT,
            &meta_context_query("", queries),
        ));
    }
    let run = run_handshake(&input, &catalogue());
    let option = NBD_OPT_LIST_META_CONTEXT;
    let offer = reply_bytes(
        option,
        NBD_REP_META_CONTEXT,
        b"\x00\x00\x00\x00base:allocation",
    );
    let ack = reply_bytes(option, NBD_REP_ACK, b"");
    let expected = [&offer, &ack, &offer, &ack, &offer, &ack, &ack].map(|bytes| bytes.as_slice());
    assert_eq!(run.output, expected.concat());
}

#[test]
fn set_meta_context_needs_structured_replies_first() {
    let mut input = fixed_newstyle();
    input.extend(option(
        NBD_OPT_SET_META_CONTEXT,
        &meta_context_query("vol0/lun0", &["base:allocation"]),
    ));
    input.extend(option(NBD_OPT_GO, &export_query("vol0/lun0", &[])));
    let run = run_handshake(&input, &catalogue());
    assert_eq!(run.replies()[0].reply_type, NBD_REP_ERR_INVALID);
    assert_eq!(run.negotiated().base_allocation, None);
}

#[test]
fn set_meta_context_selects_base_allocation_for_the_export_go_enters() {
    let mut input = fixed_newstyle();
    input.extend(option(NBD_OPT_STRUCTURED_REPLY, &[]));
    input.extend(option(
        NBD_OPT_SET_META_CONTEXT,
        &meta_context_query("vol0/lun0", &["base:", "x-other:thing", "base:allocation"]),
    ));
    input.extend(option(NBD_OPT_GO, &export_query("vol0/lun0", &[])));
    let run = run_handshake(&input, &catalogue());
    let set = NBD_OPT_SET_META_CONTEXT;
    let expected = [
        reply_bytes(
            set,
            NBD_REP_META_CONTEXT,
            b"\x00\x00\x00\x01base:allocation",
        ),
        reply_bytes(set, NBD_REP_ACK, b""),
    ]
    .concat();
    let structured_ack = reply_bytes(NBD_OPT_STRUCTURED_REPLY, NBD_REP_ACK, b"");
    assert_eq!(
        run.output[structured_ack.len()..][..expected.len()],
        expected
    );
    assert_eq!(run.negotiated().base_allocation, Some(1));
}

#[test]
fn export_name_also_enters_with_the_selected_context() {
    let mut input = fixed_newstyle();
    input.extend(option(NBD_OPT_STRUCTURED_REPLY, &[]));
    input.extend(option(
        NBD_OPT_SET_META_CONTEXT,
        &meta_context_query("vol0/lun0", &["base:allocation"]),
    ));
    input.extend(option(NBD_OPT_EXPORT_NAME, b"vol0/lun0"));
    let run = run_handshake(&input, &catalogue());
    let negotiated = run.negotiated();
    assert!(negotiated.structured_replies);
    assert_eq!(negotiated.base_allocation, Some(1));
    let mut expected_tail = LUN0_SIZE.to_vec();
    expected_tail.extend_from_slice(&LUN0_FLAGS_STRUCTURED);
    assert!(
        run.output.ends_with(&expected_tail),
        "no zeroes were asked for"
    );
}

#[test]
fn a_context_set_for_another_name_does_not_carry_over() {
    let mut input = fixed_newstyle();
    input.extend(option(NBD_OPT_STRUCTURED_REPLY, &[]));
    input.extend(option(
        NBD_OPT_SET_META_CONTEXT,
        &meta_context_query("vol0/lun0", &["base:allocation"]),
    ));
    // The default export is vol0/lun0 too, but the client spelled it differently.
    input.extend(option(NBD_OPT_GO, &export_query("", &[])));
    let run = run_handshake(&input, &catalogue());
    assert_eq!(run.negotiated().export.name, "vol0/lun0");
    assert_eq!(run.negotiated().base_allocation, None);
}

#[test]
fn a_failed_set_meta_context_clears_the_selection() {
    let mut input = fixed_newstyle();
    input.extend(option(NBD_OPT_STRUCTURED_REPLY, &[]));
    input.extend(option(
        NBD_OPT_SET_META_CONTEXT,
        &meta_context_query("vol0/lun0", &["base:allocation"]),
    ));
    input.extend(option(
        NBD_OPT_SET_META_CONTEXT,
        &meta_context_query("nope", &["base:allocation"]),
    ));
    input.extend(option(NBD_OPT_GO, &export_query("vol0/lun0", &[])));
    let run = run_handshake(&input, &catalogue());
    let replies = run.replies();
    assert_eq!(replies[3].reply_type, NBD_REP_ERR_UNKNOWN);
    assert_eq!(run.negotiated().base_allocation, None);
}

#[test]
fn requests_sent_right_after_go_stay_with_the_caller() {
    let mut input = fixed_newstyle();
    input.extend(option(NBD_OPT_GO, &export_query("vol0/lun0", &[])));
    input.extend_from_slice(&[0x25, 0x60, 0x95, 0x13]);
    for piece in [1, 3, 7, input.len()] {
        let run = run_handshake_in_pieces(&input, &catalogue(), piece);
        assert_eq!(run.leftover, [0x25, 0x60, 0x95, 0x13], "piece size {piece}");
        assert_eq!(run.negotiated().export.name, "vol0/lun0");
    }
}

#[test]
fn every_piece_size_gives_the_same_replies() {
    let mut input = fixed_newstyle();
    input.extend(option(NBD_OPT_LIST, &[]));
    input.extend(option(0x99, &[1, 2, 3]));
    input.extend(option(NBD_OPT_STRUCTURED_REPLY, &[]));
    input.extend(option(
        NBD_OPT_INFO,
        &export_query("vol0/lun1", &[NBD_INFO_NAME]),
    ));
    input.extend(option(
        NBD_OPT_GO,
        &export_query("vol0/lun0", &[NBD_INFO_BLOCK_SIZE]),
    ));
    let whole = run_handshake(&input, &catalogue());
    for piece in 1..=17 {
        let pieces = run_handshake_in_pieces(&input, &catalogue(), piece);
        assert_eq!(pieces.output, whole.output, "piece size {piece}");
        assert_eq!(pieces.outcome, whole.outcome, "piece size {piece}");
    }
}
