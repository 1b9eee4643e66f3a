//! Reply encoders: golden bytes for every simple and structured form, and a
//! client-side parse of arbitrary chunks that gives back what was encoded.

mod common;

use common::{ParsedChunk, parse_chunk};
use proptest::prelude::*;
use wafer_nbd::consts::*;
use wafer_nbd::reply::{
    Chunk, Done, Extent, encode_chunk, encode_error_reply, encode_offset_data_header,
    encode_simple_reply, encode_simple_reply_header,
};
use wafer_nbd::{NbdError, STRING_BYTES_MAX};

const HANDLE: u64 = 0x0102_0304_0506_0708;
const HANDLE_BYTES: [u8; 8] = [1, 2, 3, 4, 5, 6, 7, 8];

fn chunk_bytes(done: Done, chunk: &Chunk<'_>) -> Vec<u8> {
    let mut out = Vec::new();
    encode_chunk(&mut out, HANDLE, done, chunk);
    out
}

#[test]
fn errno_codes_are_the_ones_nbd_defines() {
    let codes: Vec<u32> = NbdError::ALL.iter().map(|error| error.code()).collect();
    assert_eq!(codes, [1, 5, 12, 22, 28, 75, 95, 108]);
    for error in NbdError::ALL {
        assert_eq!(NbdError::from_code(error.code()), Some(error));
    }
    assert_eq!(NbdError::from_code(0), None);
    assert_eq!(NbdError::from_code(2), None);
}

#[test]
fn a_simple_reply_is_magic_error_handle_then_data() {
    let mut out = Vec::new();
    encode_simple_reply(&mut out, HANDLE, Ok(b"data"));
    encode_simple_reply(&mut out, HANDLE, Err(NbdError::NoSpace));
    encode_simple_reply_header(&mut out, HANDLE, None);
    let expected: Vec<u8> = [
        &[0x67, 0x44, 0x66, 0x98][..],
        &[0, 0, 0, 0],
        &HANDLE_BYTES,
        b"data",
        &[0x67, 0x44, 0x66, 0x98],
        &[0, 0, 0, 28],
        &HANDLE_BYTES,
        &[0x67, 0x44, 0x66, 0x98],
        &[0, 0, 0, 0],
        &HANDLE_BYTES,
    ]
    .concat();
    assert_eq!(out, expected);
}

#[test]
fn structured_chunks_have_their_golden_bytes() {
    let magic = [0x66, 0x8e, 0x33, 0xef];
    let cases: [(Done, Chunk<'_>, Vec<u8>); 6] = [
        (
            Done::Yes,
            Chunk::OffsetData {
                offset: 4096,
                data: b"xyz",
            },
            [
                &magic[..],
                &[0, 1],
                &[0, 1],
                &HANDLE_BYTES,
                &[0, 0, 0, 11],
                &[0, 0, 0, 0, 0, 0, 0x10, 0],
                b"xyz",
            ]
            .concat(),
        ),
        (
            Done::No,
            Chunk::OffsetHole {
                offset: 512,
                length: 8192,
            },
            [
                &magic[..],
                &[0, 0],
                &[0, 2],
                &HANDLE_BYTES,
                &[0, 0, 0, 12],
                &[0, 0, 0, 0, 0, 0, 2, 0],
                &[0, 0, 0x20, 0],
            ]
            .concat(),
        ),
        (
            Done::Yes,
            Chunk::None,
            [&magic[..], &[0, 1], &[0, 0], &HANDLE_BYTES, &[0, 0, 0, 0]].concat(),
        ),
        (
            Done::Yes,
            Chunk::Error {
                error: NbdError::Io,
                message: "bad",
            },
            [
                &magic[..],
                &[0, 1],
                &[0x80, 0x01],
                &HANDLE_BYTES,
                &[0, 0, 0, 9],
                &[0, 0, 0, 5],
                &[0, 3],
                b"bad",
            ]
            .concat(),
        ),
        (
            Done::No,
            Chunk::ErrorOffset {
                error: NbdError::Io,
                message: "",
                offset: 7,
            },
            [
                &magic[..],
                &[0, 0],
                &[0x80, 0x02],
                &HANDLE_BYTES,
                &[0, 0, 0, 14],
                &[0, 0, 0, 5],
                &[0, 0],
                &[0, 0, 0, 0, 0, 0, 0, 7],
            ]
            .concat(),
        ),
        (
            Done::Yes,
            Chunk::BlockStatus {
                context_id: 1,
                extents: &[
                    Extent {
                        length: 65536,
                        hole: false,
                        zero: false,
                    },
                    Extent {
                        length: 4096,
                        hole: true,
                        zero: true,
                    },
                    Extent {
                        length: 512,
                        hole: false,
                        zero: true,
                    },
                ],
            },
            [
                &magic[..],
                &[0, 1],
                &[0, 5],
                &HANDLE_BYTES,
                &[0, 0, 0, 28],
                &[0, 0, 0, 1],
                &[0, 1, 0, 0],
                &[0, 0, 0, 0],
                &[0, 0, 0x10, 0],
                &[0, 0, 0, 3],
                &[0, 0, 2, 0],
                &[0, 0, 0, 2],
            ]
            .concat(),
        ),
    ];
    for (done, chunk, expected) in cases {
        assert_eq!(chunk_bytes(done, &chunk), expected, "{chunk:?}");
    }
}

#[test]
fn the_offset_data_header_matches_the_whole_chunk() {
    let data = [9u8; 300];
    let mut header = Vec::new();
    encode_offset_data_header(&mut header, HANDLE, Done::No, 1 << 40, data.len());
    header.extend_from_slice(&data);
    let whole = chunk_bytes(
        Done::No,
        &Chunk::OffsetData {
            offset: 1 << 40,
            data: &data,
        },
    );
    assert_eq!(header, whole);
}

#[test]
fn error_replies_follow_the_negotiated_form() {
    let mut simple = Vec::new();
    encode_error_reply(
        &mut simple,
        HANDLE,
        NbdError::InvalidArgument,
        "ignored",
        false,
    );
    assert_eq!(
        simple,
        [&[0x67, 0x44, 0x66, 0x98][..], &[0, 0, 0, 22], &HANDLE_BYTES].concat()
    );
    let mut structured = Vec::new();
    encode_error_reply(
        &mut structured,
        HANDLE,
        NbdError::InvalidArgument,
        "why",
        true,
    );
    let (chunk, rest) = parse_chunk(&structured);
    assert!(rest.is_empty());
    assert_eq!(
        chunk,
        ParsedChunk {
            flags: NBD_REPLY_FLAG_DONE,
            chunk_type: NBD_REPLY_TYPE_ERROR,
            handle: HANDLE,
            payload: [&[0, 0, 0, 22][..], &[0, 3], b"why"].concat(),
        }
    );
}

#[test]
fn long_error_messages_are_cut_at_the_string_limit_on_a_character_boundary() {
    // One ASCII byte, then two-byte characters: byte 4096 falls inside one.
    let message = format!("a{}", "é".repeat(STRING_BYTES_MAX));
    let bytes = chunk_bytes(
        Done::Yes,
        &Chunk::Error {
            error: NbdError::Io,
            message: &message,
        },
    );
    let (chunk, _) = parse_chunk(&bytes);
    let message_length = u16::from_be_bytes([chunk.payload[4], chunk.payload[5]]) as usize;
    assert_eq!(message_length, STRING_BYTES_MAX - 1);
    assert_eq!(
        std::str::from_utf8(&chunk.payload[6..]),
        Ok(&message[..STRING_BYTES_MAX - 1])
    );
    assert_eq!(chunk.payload.len(), 6 + STRING_BYTES_MAX - 1);
}

fn arbitrary_error() -> impl Strategy<Value = NbdError> {
    proptest::sample::select(NbdError::ALL.to_vec())
}

proptest! {
    #[test]
    fn every_chunk_parses_back_to_what_was_encoded(
        handle in any::<u64>(),
        done_flag in any::<bool>(),
        offset in any::<u64>(),
        data in proptest::collection::vec(any::<u8>(), 1..200),
        hole_length in 1u32..,
        error in arbitrary_error(),
        message in "[a-z é]{0,40}",
        extents in proptest::collection::vec((1u32.., any::<bool>(), any::<bool>()), 1..20),
        context_id in any::<u32>(),
        kind in 0usize..5,
    ) {
        let done = if done_flag { Done::Yes } else { Done::No };
        let extents: Vec<Extent> = extents
            .into_iter()
            .map(|(length, hole, zero)| Extent { length, hole, zero })
            .collect();
        let (chunk, chunk_type, payload) = match kind {
            0 => (
                Chunk::OffsetData { offset, data: &data },
                NBD_REPLY_TYPE_OFFSET_DATA,
                [&offset.to_be_bytes()[..], &data].concat(),
            ),
            1 => (
                Chunk::OffsetHole { offset, length: hole_length },
                NBD_REPLY_TYPE_OFFSET_HOLE,
                [&offset.to_be_bytes()[..], &hole_length.to_be_bytes()].concat(),
            ),
            2 => (
                Chunk::Error { error, message: &message },
                NBD_REPLY_TYPE_ERROR,
                [&error.code().to_be_bytes()[..], &(message.len() as u16).to_be_bytes(), message.as_bytes()].concat(),
            ),
            3 => (
                Chunk::ErrorOffset { error, message: &message, offset },
                NBD_REPLY_TYPE_ERROR_OFFSET,
                [
                    &error.code().to_be_bytes()[..],
                    &(message.len() as u16).to_be_bytes(),
                    message.as_bytes(),
                    &offset.to_be_bytes(),
                ]
                .concat(),
            ),
            _ => (
                Chunk::BlockStatus { context_id, extents: &extents },
                NBD_REPLY_TYPE_BLOCK_STATUS,
                std::iter::once(context_id.to_be_bytes())
                    .chain(extents.iter().flat_map(|e| {
                        let flags = u32::from(e.hole) * NBD_STATE_HOLE + u32::from(e.zero) * NBD_STATE_ZERO;
                        [e.length.to_be_bytes(), flags.to_be_bytes()]
                    }))
                    .flatten()
                    .collect(),
            ),
        };
        let mut out = Vec::new();
        encode_chunk(&mut out, handle, done, &chunk);
        let (parsed, rest) = parse_chunk(&out);
        prop_assert!(rest.is_empty());
        prop_assert_eq!(parsed, ParsedChunk {
            flags: if done_flag { NBD_REPLY_FLAG_DONE } else { 0 },
            chunk_type,
            handle,
            payload,
        });
    }
}
