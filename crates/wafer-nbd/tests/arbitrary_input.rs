//! Arbitrary bytes, and bytes shaped almost like real messages, thrown at the
//! handshake and the request decoder in arbitrary pieces: neither panics, each
//! always makes progress, and neither ever holds more than its bound.

mod common;

use common::{catalogue, lun0, lun1, negotiated};
use proptest::prelude::*;
use wafer_nbd::consts::*;
use wafer_nbd::{
    HANDSHAKE_BUFFER_BYTES_MAX, Handshake, HandshakeEvent, REQUEST_BUFFER_BYTES_MAX,
    RequestDecoder, TlsMode,
};

/// Feeds `input` to a handshake in TLS mode `mode` in the given piece sizes
/// (cycled) until it is used up or the handshake ends. A granted STARTTLS is
/// taken as an upgrade whose decrypted bytes are the rest of the input.
fn feed_handshake(mode: TlsMode, input: &[u8], pieces: &[usize]) {
    let exports = catalogue();
    let mut handshake = Handshake::with_tls(mode);
    let mut output = Vec::new();
    handshake.poll_transmit(&mut output);
    let mut rest = input;
    for &piece in pieces.iter().cycle() {
        if rest.is_empty() {
            break;
        }
        let (mut chunk, after) = rest.split_at(piece.clamp(1, rest.len()));
        rest = after;
        while !chunk.is_empty() {
            let before = chunk.len();
            let outcome = handshake.handle_input(&mut chunk, &*exports);
            handshake.poll_transmit(&mut output);
            assert!(handshake.buffered_bytes() <= HANDSHAKE_BUFFER_BYTES_MAX);
            match outcome {
                Ok(None) => {}
                Ok(Some(HandshakeEvent::StartTls)) => handshake.tls_started(),
                Ok(Some(_)) | Err(_) => return,
            }
            assert!(chunk.len() < before, "a call with input made no progress");
        }
    }
    let _ = handshake.handle_eof();
}

/// Feeds `input` to a request decoder in the given piece sizes (cycled).
fn feed_decoder(session: &wafer_nbd::Negotiated, input: &[u8], pieces: &[usize]) {
    let mut decoder = RequestDecoder::new(session);
    let mut rest = input;
    for &piece in pieces.iter().cycle() {
        if rest.is_empty() {
            break;
        }
        let (mut chunk, after) = rest.split_at(piece.clamp(1, rest.len()));
        rest = after;
        loop {
            let result = decoder.decode(&mut chunk);
            assert!(decoder.buffered_bytes() <= REQUEST_BUFFER_BYTES_MAX);
            match result {
                Ok(Some(_)) => continue,
                Ok(None) => break,
                Err(_) => return,
            }
        }
    }
    let _ = decoder.handle_eof();
}

fn pieces() -> impl Strategy<Value = Vec<usize>> {
    proptest::collection::vec(1usize..40, 1..8)
}

/// An option header and data, with a length that may or may not match.
fn option_like() -> impl Strategy<Value = Vec<u8>> {
    let option = prop_oneof![1u32..=11, any::<u32>()];
    let data = proptest::collection::vec(any::<u8>(), 0..64);
    let length_lies = prop_oneof![3 => Just(None), 1 => any::<u32>().prop_map(Some)];
    (any::<bool>(), option, data, length_lies).prop_map(|(good_magic, option, data, length)| {
        let magic = if good_magic { IHAVEOPT } else { IHAVEOPT ^ 1 };
        let length = length.unwrap_or(data.len() as u32);
        let mut bytes = magic.to_be_bytes().to_vec();
        bytes.extend_from_slice(&option.to_be_bytes());
        bytes.extend_from_slice(&length.to_be_bytes());
        bytes.extend_from_slice(&data);
        bytes
    })
}

/// A request header and payload, with fields that may or may not make sense.
fn request_like() -> impl Strategy<Value = Vec<u8>> {
    let length = prop_oneof![4 => 0u32..300, 1 => any::<u32>()];
    let payload = proptest::collection::vec(any::<u8>(), 0..300);
    (
        prop::bool::weighted(0.95),
        any::<u16>(),
        0u16..10,
        any::<u64>(),
        length,
        payload,
    )
        .prop_map(
            |(good_magic, flags, command_type, offset, length, payload)| {
                let magic = if good_magic {
                    NBD_REQUEST_MAGIC
                } else {
                    0xdead_beef
                };
                let mut bytes = magic.to_be_bytes().to_vec();
                bytes.extend_from_slice(&flags.to_be_bytes());
                bytes.extend_from_slice(&command_type.to_be_bytes());
                bytes.extend_from_slice(&7u64.to_be_bytes());
                bytes.extend_from_slice(&offset.to_be_bytes());
                bytes.extend_from_slice(&length.to_be_bytes());
                bytes.extend_from_slice(&payload);
                bytes
            },
        )
}

fn any_tls_mode() -> impl Strategy<Value = TlsMode> {
    prop_oneof![
        Just(TlsMode::Off),
        Just(TlsMode::Optional),
        Just(TlsMode::Required)
    ]
}

fn any_session() -> impl Strategy<Value = wafer_nbd::Negotiated> {
    (any::<bool>(), any::<bool>(), any::<bool>()).prop_map(|(read_only, structured, context)| {
        let export = if read_only { lun1() } else { lun0() };
        negotiated(export, structured, structured && context)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn the_handshake_survives_arbitrary_bytes(
        mode in any_tls_mode(),
        input in proptest::collection::vec(any::<u8>(), 0..600),
        pieces in pieces(),
    ) {
        feed_handshake(mode, &input, &pieces);
    }

    #[test]
    fn the_handshake_survives_almost_valid_options(
        mode in any_tls_mode(),
        flags in prop_oneof![0u32..4, any::<u32>()],
        options in proptest::collection::vec(option_like(), 0..12),
        pieces in pieces(),
    ) {
        let mut input = flags.to_be_bytes().to_vec();
        input.extend(options.concat());
        feed_handshake(mode, &input, &pieces);
    }

    #[test]
    fn the_decoder_survives_arbitrary_bytes(
        session in any_session(),
        input in proptest::collection::vec(any::<u8>(), 0..600),
        pieces in pieces(),
    ) {
        feed_decoder(&session, &input, &pieces);
    }

    #[test]
    fn the_decoder_survives_almost_valid_requests(
        session in any_session(),
        requests in proptest::collection::vec(request_like(), 0..12),
        pieces in pieces(),
    ) {
        feed_decoder(&session, &requests.concat(), &pieces);
    }
}
