//! Hostile and broken clients during the handshake: each gets the typed error
//! or error reply the specification calls for, and the handshake never holds
//! more than one bounded option.

mod common;

use common::{catalogue, client_flags, export_query, meta_context_query, option, run_handshake};
use wafer_nbd::consts::*;
use wafer_nbd::{
    HANDSHAKE_BUFFER_BYTES_MAX, Handshake, HandshakeError, OPTION_DATA_BYTES_MAX,
    OPTION_HEADER_BYTES, STRING_BYTES_MAX,
};

fn after_flags(options: &[Vec<u8>]) -> Vec<u8> {
    let mut input = client_flags(NBD_FLAG_C_FIXED_NEWSTYLE);
    for bytes in options {
        input.extend_from_slice(bytes);
    }
    input
}

#[test]
fn unknown_client_flags_drop_the_connection() {
    for flags in [1 << 2, 1 << 31, 0xffff_ffff] {
        let run = run_handshake(&client_flags(flags), &catalogue());
        assert_eq!(
            run.outcome,
            Err(HandshakeError::UnknownClientFlags { flags })
        );
        assert!(run.output.is_empty());
    }
}

#[test]
fn an_option_without_ihaveopt_drops_the_connection() {
    let mut input = client_flags(NBD_FLAG_C_FIXED_NEWSTYLE);
    input.extend_from_slice(b"IHAVEOPX\x00\x00\x00\x03\x00\x00\x00\x00");
    let run = run_handshake(&input, &catalogue());
    assert_eq!(
        run.outcome,
        Err(HandshakeError::BadOptionMagic {
            magic: u64::from_be_bytes(*b"IHAVEOPX")
        })
    );
}

#[test]
fn export_name_for_an_unknown_export_closes_without_a_reply() {
    let run = run_handshake(
        &after_flags(&[option(NBD_OPT_EXPORT_NAME, b"nope")]),
        &catalogue(),
    );
    assert_eq!(
        run.outcome,
        Err(HandshakeError::UnknownExport {
            name: "nope".to_owned()
        })
    );
    assert!(run.output.is_empty(), "EXPORT_NAME has no error reply");
}

#[test]
fn export_name_with_a_malformed_name_closes() {
    for name in [&b"a\0b"[..], &[0xc3, 0x28]] {
        let run = run_handshake(
            &after_flags(&[option(NBD_OPT_EXPORT_NAME, name)]),
            &catalogue(),
        );
        assert_eq!(run.outcome, Err(HandshakeError::ExportNameMalformed));
    }
}

#[test]
fn export_name_over_the_string_limit_closes_before_reading_it() {
    let mut input = after_flags(&[]);
    input.extend_from_slice(&IHAVEOPT.to_be_bytes());
    input.extend_from_slice(&NBD_OPT_EXPORT_NAME.to_be_bytes());
    input.extend_from_slice(&5000u32.to_be_bytes());
    let run = run_handshake(&input, &catalogue());
    assert_eq!(
        run.outcome,
        Err(HandshakeError::ExportNameTooLong { length: 5000 })
    );
}

#[test]
fn oversized_option_data_is_skipped_unread_and_refused_as_too_big() {
    let length = 1 << 20;
    assert!(length > OPTION_DATA_BYTES_MAX);
    let mut handshake = Handshake::new();
    let mut output = Vec::new();
    handshake.poll_transmit(&mut output);
    output.clear();
    let mut header = client_flags(NBD_FLAG_C_FIXED_NEWSTYLE);
    header.extend_from_slice(&IHAVEOPT.to_be_bytes());
    header.extend_from_slice(&NBD_OPT_GO.to_be_bytes());
    header.extend_from_slice(&length.to_be_bytes());
    let mut input = &header[..];
    while !input.is_empty() {
        assert_eq!(handshake.handle_input(&mut input, &*catalogue()), Ok(None));
    }
    let junk = vec![0xaa; 4096];
    for _ in 0..length / 4096 {
        assert_eq!(
            handshake.handle_input(&mut &junk[..], &*catalogue()),
            Ok(None)
        );
        assert_eq!(
            handshake.buffered_bytes(),
            0,
            "oversized data is never buffered"
        );
        handshake.poll_transmit(&mut output);
    }
    let list = option(NBD_OPT_LIST, &[]);
    let mut input = &list[..];
    assert_eq!(handshake.handle_input(&mut input, &*catalogue()), Ok(None));
    handshake.poll_transmit(&mut output);
    let replies = common::parse_option_replies(&output);
    assert_eq!(replies[0].option, NBD_OPT_GO);
    assert_eq!(replies[0].reply_type, NBD_REP_ERR_TOO_BIG);
    assert_eq!(
        replies.last().unwrap().reply_type,
        NBD_REP_ACK,
        "LIST still works"
    );
}

#[test]
fn option_data_at_the_limit_is_buffered_and_parsed() {
    // A GO whose info request list fills the limit exactly: well formed.
    let count = (OPTION_DATA_BYTES_MAX as usize - 4 - 9 - 2) / 2;
    let requests = vec![NBD_INFO_NAME; count];
    let data = export_query("vol0/lun0", &requests);
    assert!(data.len() <= OPTION_DATA_BYTES_MAX as usize);
    assert!(data.len() + 2 > OPTION_DATA_BYTES_MAX as usize);
    let run = run_handshake(&after_flags(&[option(NBD_OPT_INFO, &data)]), &catalogue());
    assert_eq!(run.replies().last().unwrap().reply_type, NBD_REP_ACK);
    assert!(OPTION_HEADER_BYTES + data.len() <= HANDSHAKE_BUFFER_BYTES_MAX);
}

#[test]
fn inconsistent_lengths_inside_an_option_are_invalid() {
    let mut name_too_long = export_query("vol0/lun0", &[]);
    name_too_long[3] = 200;
    let mut count_too_big = export_query("vol0/lun0", &[NBD_INFO_NAME]);
    count_too_big[4 + 9 + 1] = 5;
    let mut query_too_long = meta_context_query("vol0/lun0", &["base:allocation"]);
    let query_length_at = 4 + 9 + 4 + 3;
    query_too_long[query_length_at] = 99;
    let options = [
        option(NBD_OPT_GO, &name_too_long),
        option(NBD_OPT_INFO, &count_too_big),
        option(NBD_OPT_LIST_META_CONTEXT, &query_too_long),
        option(NBD_OPT_GO, &[0, 0]),
        option(NBD_OPT_LIST, &[]),
    ];
    let run = run_handshake(&after_flags(&options), &catalogue());
    let types: Vec<u32> = run.replies().iter().map(|reply| reply.reply_type).collect();
    assert_eq!(
        types,
        [
            NBD_REP_ERR_INVALID,
            NBD_REP_ERR_INVALID,
            NBD_REP_ERR_INVALID,
            NBD_REP_ERR_INVALID,
            NBD_REP_SERVER,
            NBD_REP_SERVER,
            NBD_REP_ACK
        ]
    );
}

#[test]
fn names_over_the_string_limit_are_too_big() {
    let long_name = "x".repeat(STRING_BYTES_MAX + 1);
    let options = [
        option(NBD_OPT_GO, &export_query(&long_name, &[])),
        option(
            NBD_OPT_SET_META_CONTEXT,
            &meta_context_query(&long_name, &[]),
        ),
    ];
    let run = run_handshake(&after_flags(&options), &catalogue());
    let types: Vec<u32> = run.replies().iter().map(|reply| reply.reply_type).collect();
    assert_eq!(types, [NBD_REP_ERR_TOO_BIG, NBD_REP_ERR_TOO_BIG]);
}

#[test]
fn a_connection_closed_mid_message_is_truncated() {
    let cases: [(Vec<u8>, HandshakeError); 6] = [
        (Vec::new(), HandshakeError::Closed),
        (
            vec![0, 0],
            HandshakeError::Truncated {
                received: 2,
                expected: 4,
            },
        ),
        (after_flags(&[]), HandshakeError::Closed),
        (
            [after_flags(&[]), b"IHAVE".to_vec()].concat(),
            HandshakeError::Truncated {
                received: 5,
                expected: 16,
            },
        ),
        (
            after_flags(&[option(NBD_OPT_GO, &export_query("vol0/lun0", &[]))[..19].to_vec()]),
            HandshakeError::Truncated {
                received: 3,
                expected: 15,
            },
        ),
        (
            after_flags(&[option(NBD_OPT_LIST, &[])]),
            HandshakeError::Closed,
        ),
    ];
    for (input, expected) in cases {
        let run = run_handshake(&input, &catalogue());
        assert_eq!(run.outcome, Ok(None), "input {input:?}");
        let handshake = run.handshake.expect("still negotiating");
        assert_eq!(handshake.handle_eof(), expected, "input {input:?}");
    }
}

#[test]
fn a_connection_closed_while_skipping_is_truncated() {
    let mut input = after_flags(&[]);
    input.extend_from_slice(&IHAVEOPT.to_be_bytes());
    input.extend_from_slice(&NBD_OPT_INFO.to_be_bytes());
    input.extend_from_slice(&100_000u32.to_be_bytes());
    input.extend_from_slice(&[7; 1000]);
    let run = run_handshake(&input, &catalogue());
    assert_eq!(
        run.handshake.expect("still negotiating").handle_eof(),
        HandshakeError::Truncated {
            received: 1000,
            expected: 100_000
        }
    );
}
