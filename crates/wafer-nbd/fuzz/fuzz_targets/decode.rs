//! Feeds arbitrary bytes to the handshake and the request decoder, cut into
//! pieces of a size the input chooses, the way a socket would deliver them.
//!
//! The first byte selects the piece size (low five bits), and with its high
//! three bits both the handshake's TLS mode (their value modulo 3) and the
//! session the stand-alone request decoder runs in; the rest is the byte
//! stream. The stream goes to a handshake first (a granted `NBD_OPT_STARTTLS`
//! is taken as an upgrade whose decrypted bytes are the rest of the stream),
//! and whatever follows a successful `NBD_OPT_GO` or `NBD_OPT_EXPORT_NAME` to a
//! decoder for the negotiated session, as in the server; it also goes straight
//! to a decoder so that requests are reached without a valid handshake in
//! front of them.
//!
//! Properties: nothing panics, every call with input makes progress, and
//! neither side buffers more than its bound.

#![no_main]

use libfuzzer_sys::fuzz_target;
use wafer_nbd::{
    ExportInfo, HANDSHAKE_BUFFER_BYTES_MAX, Handshake, HandshakeEvent, Negotiated,
    REQUEST_BUFFER_BYTES_MAX, RequestDecoder, TlsMode, TransmissionFlags,
};

fn exports() -> [ExportInfo; 2] {
    let export = |name: &str, read_only: bool| ExportInfo {
        name: name.to_owned(),
        description: "fuzz".to_owned(),
        size_bytes: 1 << 30,
        read_only,
        multi_conn: true,
        fast_zero: !read_only,
    };
    [export("a", false), export("b", true)]
}

fn session(selector: u8) -> Negotiated {
    let [writable, read_only] = exports();
    let export = if selector & 1 == 0 {
        writable
    } else {
        read_only
    };
    let structured_replies = selector & 2 != 0;
    Negotiated {
        transmission_flags: TransmissionFlags::for_export(&export, structured_replies),
        export,
        structured_replies,
        base_allocation: (structured_replies && selector & 4 != 0)
            .then_some(wafer_nbd::BASE_ALLOCATION_CONTEXT_ID),
        no_zeroes: false,
    }
}

/// Runs the handshake over `stream`; the negotiated session and the bytes left
/// after it, if it entered transmission.
fn handshake(mode: TlsMode, stream: &[u8], piece: usize) -> Option<(Negotiated, &[u8])> {
    let exports = exports();
    let mut handshake = Handshake::with_tls(mode);
    let mut output = Vec::new();
    handshake.poll_transmit(&mut output);
    let mut rest = stream;
    while !rest.is_empty() {
        let (mut chunk, after) = rest.split_at(piece.min(rest.len()));
        while !chunk.is_empty() {
            let before = chunk.len();
            let outcome = handshake.handle_input(&mut chunk, &exports[..]);
            handshake.poll_transmit(&mut output);
            output.clear();
            assert!(handshake.buffered_bytes() <= HANDSHAKE_BUFFER_BYTES_MAX);
            match outcome {
                Ok(None) => assert!(chunk.len() < before, "no progress"),
                Ok(Some(HandshakeEvent::StartTls)) => handshake.tls_started(),
                Ok(Some(HandshakeEvent::Transmission(negotiated))) => {
                    let consumed = stream.len() - after.len() - chunk.len();
                    return Some((negotiated, &stream[consumed..]));
                }
                Ok(Some(HandshakeEvent::Aborted)) | Err(_) => return None,
            }
        }
        rest = after;
    }
    let _ = handshake.handle_eof();
    None
}

fn requests(negotiated: &Negotiated, stream: &[u8], piece: usize) {
    let mut decoder = RequestDecoder::new(negotiated);
    for chunk in stream.chunks(piece) {
        let mut input = chunk;
        loop {
            let result = decoder.decode(&mut input);
            assert!(decoder.buffered_bytes() <= REQUEST_BUFFER_BYTES_MAX);
            match result {
                Ok(Some(_)) => {}
                Ok(None) => break,
                Err(_) => return,
            }
        }
    }
    let _ = decoder.handle_eof();
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, stream)) = data.split_first() else {
        return;
    };
    let piece = usize::from(selector & 0x1f) + 1;
    let mode = [TlsMode::Off, TlsMode::Optional, TlsMode::Required][usize::from(selector >> 5) % 3];
    if let Some((negotiated, rest)) = handshake(mode, stream, piece) {
        requests(&negotiated, rest, piece);
    }
    requests(&session(selector >> 5), stream, piece);
});
