//! The request decoder: requests survive an encode-decode round trip however
//! the bytes are cut; refusals carry the errno the specification assigns and
//! leave the stream usable; framing errors are fatal and typed.

mod common;

use common::{WireRequest, encode_request, lun0, lun1, negotiated};
use proptest::prelude::*;
use wafer_nbd::consts::*;
use wafer_nbd::{
    BLOCK_SIZE_MAXIMUM, Command, CommandFlags, DecodeError, Decoded, NbdError, Negotiated,
    REQUEST_BUFFER_BYTES_MAX, REQUEST_HEADER_BYTES, Rejected, Request, RequestDecoder,
    RequestError,
};

/// A read-write session with structured replies and `base:allocation`, where
/// every command and flag is allowed.
fn full_session() -> Negotiated {
    negotiated(lun0(), true, true)
}

/// Decodes `bytes` fed in pieces of `piece` bytes; stops at the first fatal error.
fn decode_in_pieces(
    session: &Negotiated,
    bytes: &[u8],
    piece: usize,
) -> (Vec<Decoded>, Option<DecodeError>) {
    let mut decoder = RequestDecoder::new(session);
    let mut decoded = Vec::new();
    for chunk in bytes.chunks(piece.max(1)) {
        let mut input = chunk;
        loop {
            match decoder.decode(&mut input) {
                Ok(Some(item)) => decoded.push(item),
                Ok(None) => break,
                Err(error) => return (decoded, Some(error)),
            }
        }
        assert!(decoder.buffered_bytes() <= REQUEST_BUFFER_BYTES_MAX);
    }
    (decoded, None)
}

fn decode_all(session: &Negotiated, bytes: &[u8]) -> Vec<Decoded> {
    let (decoded, error) = decode_in_pieces(session, bytes, bytes.len());
    assert_eq!(error, None);
    decoded
}

fn rejected(handle: u64, command_type: u16, reason: RequestError) -> Decoded {
    Decoded::Rejected(Rejected {
        handle,
        command_type,
        reason,
    })
}

/// Any request a client may send in the full session.
fn arbitrary_request() -> impl Strategy<Value = Request> {
    let command = prop_oneof![
        Just((Command::Read, NBD_CMD_FLAG_FUA | NBD_CMD_FLAG_DF)),
        proptest::collection::vec(any::<u8>(), 0..600)
            .prop_map(|data| (Command::Write { data }, NBD_CMD_FLAG_FUA)),
        Just((Command::Flush, NBD_CMD_FLAG_FUA)),
        Just((Command::Disconnect, u16::MAX)),
        Just((Command::Trim, NBD_CMD_FLAG_FUA)),
        Just((Command::Cache, NBD_CMD_FLAG_FUA)),
        Just((
            Command::WriteZeroes,
            NBD_CMD_FLAG_FUA | NBD_CMD_FLAG_NO_HOLE | NBD_CMD_FLAG_FAST_ZERO
        )),
        Just((
            Command::BlockStatus,
            NBD_CMD_FLAG_FUA | NBD_CMD_FLAG_REQ_ONE
        )),
    ];
    (
        command,
        any::<u16>(),
        any::<u64>(),
        any::<u64>(),
        0..BLOCK_SIZE_MAXIMUM,
    )
        .prop_map(
            |((command, allowed_flags), flags, handle, offset, length)| {
                let (offset, length) = match &command {
                    Command::Write { data } => (offset, data.len() as u32),
                    Command::Flush => (0, 0),
                    _ => (offset, length),
                };
                Request {
                    handle,
                    command,
                    flags: CommandFlags(flags & allowed_flags),
                    offset,
                    length,
                }
            },
        )
}

proptest! {
    #[test]
    fn requests_round_trip_whatever_the_piece_size(
        requests in proptest::collection::vec(arbitrary_request(), 1..12),
        piece in 1usize..64,
    ) {
        let session = full_session();
        let bytes: Vec<u8> = requests.iter().flat_map(encode_request).collect();
        let expected: Vec<Decoded> = requests.into_iter().map(Decoded::Request).collect();
        prop_assert_eq!(&decode_all(&session, &bytes), &expected);
        let (byte_by_byte, error) = decode_in_pieces(&session, &bytes, 1);
        prop_assert_eq!(error, None);
        prop_assert_eq!(&byte_by_byte, &expected);
        let (in_pieces, error) = decode_in_pieces(&session, &bytes, piece);
        prop_assert_eq!(error, None);
        prop_assert_eq!(&in_pieces, &expected);
    }
}

#[test]
fn a_request_is_decoded_field_by_field() {
    let bytes: Vec<u8> = [
        &[0x25, 0x60, 0x95, 0x13][..], // NBD_REQUEST_MAGIC
        &[0x00, 0x01],                 // FUA
        &[0x00, 0x01],                 // NBD_CMD_WRITE
        &[1, 2, 3, 4, 5, 6, 7, 8],     // handle
        &[0, 0, 0, 0, 0, 0, 0x10, 0],  // offset 4096
        &[0, 0, 0, 3],                 // length
        b"abc",
    ]
    .concat();
    assert_eq!(
        decode_all(&full_session(), &bytes),
        [Decoded::Request(Request {
            handle: 0x0102_0304_0506_0708,
            command: Command::Write {
                data: b"abc".to_vec()
            },
            flags: CommandFlags(NBD_CMD_FLAG_FUA),
            offset: 4096,
            length: 3,
        })]
    );
}

#[test]
fn a_bad_magic_is_fatal() {
    let mut bytes = WireRequest::new(NBD_CMD_READ, 1, 0, 512).encode();
    bytes[0] ^= 0xff;
    let (decoded, error) = decode_in_pieces(&full_session(), &bytes, 5);
    assert!(decoded.is_empty());
    assert_eq!(error, Some(DecodeError::BadMagic { magic: 0xda60_9513 }));
}

#[test]
fn a_write_over_the_maximum_is_fatal_before_any_payload_is_held() {
    let header = WireRequest::new(NBD_CMD_WRITE, 9, 0, BLOCK_SIZE_MAXIMUM + 1).encode();
    let mut decoder = RequestDecoder::new(&full_session());
    let mut input = &header[..];
    assert_eq!(
        decoder.decode(&mut input),
        Err(DecodeError::WriteTooLong {
            length: BLOCK_SIZE_MAXIMUM + 1,
            maximum: BLOCK_SIZE_MAXIMUM,
        })
    );
    assert_eq!(decoder.buffered_bytes(), 0);
}

#[test]
fn a_write_of_the_maximum_is_held_whole_and_no_more() {
    let length = BLOCK_SIZE_MAXIMUM;
    let header = WireRequest::new(NBD_CMD_WRITE, 3, 0, length).encode();
    let mut decoder = RequestDecoder::new(&full_session());
    assert_eq!(decoder.decode(&mut &header[..]), Ok(None));
    let piece = vec![0x5a; 1 << 20];
    for fed in 1..(length as usize >> 20) {
        assert_eq!(decoder.decode(&mut &piece[..]), Ok(None));
        assert_eq!(decoder.buffered_bytes(), REQUEST_HEADER_BYTES + (fed << 20));
    }
    let last = [
        &piece[..],
        &WireRequest::new(NBD_CMD_FLUSH, 4, 0, 0).encode(),
    ]
    .concat();
    let mut input = &last[..];
    let Ok(Some(Decoded::Request(write))) = decoder.decode(&mut input) else {
        panic!("the write completes");
    };
    assert_eq!(
        write.command,
        Command::Write {
            data: vec![0x5a; length as usize]
        }
    );
    assert_eq!(decoder.buffered_bytes(), 0);
    assert_eq!(
        input.len(),
        REQUEST_HEADER_BYTES,
        "the flush is left for the next call"
    );
}

#[test]
fn an_unknown_command_is_rejected_with_einval_and_decoding_goes_on() {
    let bytes = [
        WireRequest::new(42, 7, 0, 512).encode(),
        WireRequest::new(NBD_CMD_READ, 8, 0, 512).encode(),
    ]
    .concat();
    let decoded = decode_all(&full_session(), &bytes);
    assert_eq!(
        decoded[0],
        rejected(7, 42, RequestError::UnknownCommand { command_type: 42 })
    );
    let Decoded::Rejected(refusal) = &decoded[0] else {
        unreachable!()
    };
    assert_eq!(refusal.error(), NbdError::InvalidArgument);
    assert!(matches!(&decoded[1], Decoded::Request(request) if request.handle == 8));
}

#[test]
fn flags_a_command_does_not_take_are_rejected_with_einval() {
    let cases = [
        (NBD_CMD_READ, NBD_CMD_FLAG_NO_HOLE),
        (NBD_CMD_WRITE, NBD_CMD_FLAG_REQ_ONE),
        (NBD_CMD_FLUSH, NBD_CMD_FLAG_DF),
        (NBD_CMD_TRIM, NBD_CMD_FLAG_FAST_ZERO),
        (NBD_CMD_BLOCK_STATUS, NBD_CMD_FLAG_NO_HOLE),
        (NBD_CMD_WRITE_ZEROES, 1 << 9),
        (NBD_CMD_CACHE, 1 << 15),
    ];
    for (command_type, flag) in cases {
        let length = if command_type == NBD_CMD_FLUSH { 0 } else { 8 };
        let mut request =
            WireRequest::new(command_type, 5, 0, length).with_flags(flag | NBD_CMD_FLAG_FUA);
        if command_type == NBD_CMD_WRITE {
            request.payload = vec![1; 8];
        }
        let bytes = [
            request.encode(),
            WireRequest::new(NBD_CMD_READ, 6, 0, 1).encode(),
        ]
        .concat();
        let decoded = decode_all(&full_session(), &bytes);
        assert_eq!(
            decoded[0],
            rejected(
                5,
                command_type,
                RequestError::FlagsNotAllowed { flags: flag }
            ),
            "command {command_type}"
        );
        assert!(matches!(&decoded[1], Decoded::Request(request) if request.handle == 6));
    }
}

#[test]
fn flags_the_session_did_not_negotiate_are_rejected() {
    // No structured replies: no DF. lun1 is read-only and has no fast zero.
    let plain = negotiated(lun0(), false, false);
    let read_df = WireRequest::new(NBD_CMD_READ, 1, 0, 512).with_flags(NBD_CMD_FLAG_DF);
    assert_eq!(
        decode_all(&plain, &read_df.encode()),
        [rejected(
            1,
            NBD_CMD_READ,
            RequestError::FlagsNotAllowed {
                flags: NBD_CMD_FLAG_DF
            }
        )]
    );
    let mut no_fast_zero = lun0();
    no_fast_zero.fast_zero = false;
    let session = negotiated(no_fast_zero, true, false);
    let fast_zero =
        WireRequest::new(NBD_CMD_WRITE_ZEROES, 2, 0, 512).with_flags(NBD_CMD_FLAG_FAST_ZERO);
    assert_eq!(
        decode_all(&session, &fast_zero.encode()),
        [rejected(
            2,
            NBD_CMD_WRITE_ZEROES,
            RequestError::FlagsNotAllowed {
                flags: NBD_CMD_FLAG_FAST_ZERO
            }
        )]
    );
}

#[test]
fn writes_to_a_read_only_export_are_eperm_and_their_payload_is_skipped() {
    let session = negotiated(lun1(), false, false);
    let bytes = [
        WireRequest::write(1, 0, vec![0xee; 700]).encode(),
        WireRequest::new(NBD_CMD_TRIM, 2, 0, 4096).encode(),
        WireRequest::new(NBD_CMD_WRITE_ZEROES, 3, 0, 4096).encode(),
        WireRequest::new(NBD_CMD_READ, 4, 0, 4096).encode(),
    ]
    .concat();
    for piece in [1, 13, bytes.len()] {
        let (decoded, error) = decode_in_pieces(&session, &bytes, piece);
        assert_eq!(error, None);
        assert_eq!(
            decoded[..3],
            [
                rejected(1, NBD_CMD_WRITE, RequestError::ReadOnly),
                rejected(2, NBD_CMD_TRIM, RequestError::ReadOnly),
                rejected(3, NBD_CMD_WRITE_ZEROES, RequestError::ReadOnly),
            ]
        );
        assert!(matches!(&decoded[3], Decoded::Request(r) if r.command == Command::Read));
    }
    assert_eq!(
        RequestError::ReadOnly.nbd_error(),
        NbdError::PermissionDenied
    );
}

#[test]
fn block_status_needs_the_metadata_context() {
    let session = negotiated(lun0(), true, false);
    let bytes = WireRequest::new(NBD_CMD_BLOCK_STATUS, 1, 0, 1 << 20).encode();
    assert_eq!(
        decode_all(&session, &bytes),
        [rejected(
            1,
            NBD_CMD_BLOCK_STATUS,
            RequestError::NoMetaContext
        )]
    );
    assert!(matches!(
        &decode_all(&full_session(), &bytes)[0],
        Decoded::Request(r) if r.command == Command::BlockStatus
    ));
}

#[test]
fn reads_over_the_maximum_are_einval_but_write_zeroes_and_trim_are_not_limited() {
    let over = BLOCK_SIZE_MAXIMUM + 1;
    let bytes = [
        WireRequest::new(NBD_CMD_READ, 1, 0, over).encode(),
        WireRequest::new(NBD_CMD_CACHE, 2, 0, over).encode(),
        WireRequest::new(NBD_CMD_WRITE_ZEROES, 3, 0, u32::MAX).encode(),
        WireRequest::new(NBD_CMD_TRIM, 4, 0, u32::MAX).encode(),
    ]
    .concat();
    let decoded = decode_all(&full_session(), &bytes);
    let too_long = RequestError::TooLong {
        length: over,
        maximum: BLOCK_SIZE_MAXIMUM,
    };
    assert_eq!(decoded[0], rejected(1, NBD_CMD_READ, too_long.clone()));
    assert_eq!(decoded[1], rejected(2, NBD_CMD_CACHE, too_long));
    assert!(matches!(&decoded[2], Decoded::Request(r) if r.length == u32::MAX));
    assert!(matches!(&decoded[3], Decoded::Request(r) if r.length == u32::MAX));
}

#[test]
fn a_flush_with_a_range_is_einval() {
    let bytes = WireRequest::new(NBD_CMD_FLUSH, 1, 4096, 0).encode();
    assert_eq!(
        decode_all(&full_session(), &bytes),
        [rejected(1, NBD_CMD_FLUSH, RequestError::FlushWithRange)]
    );
}

#[test]
fn disconnect_is_honoured_whatever_its_flags() {
    let bytes = WireRequest::new(NBD_CMD_DISC, 1, 0, 0)
        .with_flags(0xffff)
        .encode();
    assert!(matches!(
        &decode_all(&full_session(), &bytes)[0],
        Decoded::Request(r) if r.command == Command::Disconnect
    ));
}

#[test]
fn end_of_input_is_clean_only_between_requests() {
    let session = full_session();
    let write = WireRequest::write(1, 0, vec![3; 100]).encode();
    let read_only = negotiated(lun1(), false, false);
    let cases: [(&Negotiated, &[u8], Result<(), DecodeError>); 5] = [
        (&session, &[], Ok(())),
        (&session, &write, Ok(())),
        (
            &session,
            &write[..10],
            Err(DecodeError::Truncated {
                received: 10,
                expected: 28,
            }),
        ),
        (
            &session,
            &write[..50],
            Err(DecodeError::Truncated {
                received: 50,
                expected: 128,
            }),
        ),
        (
            &read_only,
            &write[..60],
            Err(DecodeError::Truncated {
                received: 60,
                expected: 128,
            }),
        ),
    ];
    for (session, bytes, expected) in cases {
        let mut decoder = RequestDecoder::new(session);
        let mut input = bytes;
        while !input.is_empty() {
            decoder.decode(&mut input).expect("well framed");
        }
        assert_eq!(decoder.handle_eof(), expected, "{} bytes", bytes.len());
    }
}

#[test]
fn ranges_beyond_the_export_get_the_errno_the_specification_assigns() {
    let size = 1 << 20;
    let request = |command: Command, offset: u64, length: u32| Request {
        handle: 1,
        command,
        flags: CommandFlags(0),
        offset,
        length,
    };
    let write = || Command::Write { data: Vec::new() };
    assert_eq!(
        request(Command::Read, size - 512, 512).check_range(size),
        Ok(())
    );
    assert_eq!(
        request(Command::Read, size - 511, 512).check_range(size),
        Err(NbdError::InvalidArgument)
    );
    assert_eq!(
        request(Command::Trim, size, 1).check_range(size),
        Err(NbdError::InvalidArgument)
    );
    assert_eq!(
        request(Command::BlockStatus, size + 1, 0).check_range(size),
        Err(NbdError::InvalidArgument)
    );
    assert_eq!(
        request(write(), size, 1).check_range(size),
        Err(NbdError::NoSpace)
    );
    assert_eq!(
        request(Command::WriteZeroes, u64::MAX, 2).check_range(size),
        Err(NbdError::NoSpace)
    );
    assert_eq!(
        request(Command::Cache, u64::MAX, 1).check_range(size),
        Err(NbdError::InvalidArgument)
    );
    assert_eq!(request(Command::Flush, 0, 0).check_range(0), Ok(()));
    assert_eq!(request(write(), size, 0).check_range(size), Ok(()));
}
