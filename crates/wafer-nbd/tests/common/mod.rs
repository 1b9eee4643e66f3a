//! A test-side NBD client: encoders for what a client sends, parsers for what a
//! server sends back, written from the specification independently of the
//! crate's own encoders, and a driver loop like the one a server runs.

#![allow(dead_code, reason = "each test binary uses its own subset")]

use wafer_nbd::consts::{IHAVEOPT, NBD_REP_MAGIC, NBD_REQUEST_MAGIC};
use wafer_nbd::{
    Command, ExportInfo, Handshake, HandshakeError, HandshakeEvent, Negotiated, Request,
    TransmissionFlags,
};

/// 1 GiB, read-write, multi-connection, fast zero, described.
pub fn lun0() -> ExportInfo {
    ExportInfo {
        name: "vol0/lun0".to_owned(),
        description: "first lun".to_owned(),
        size_bytes: 1 << 30,
        read_only: false,
        multi_conn: true,
        fast_zero: true,
    }
}

/// 64 MiB, read-only, single connection, no description.
pub fn lun1() -> ExportInfo {
    ExportInfo {
        name: "vol0/lun1".to_owned(),
        description: String::new(),
        size_bytes: 64 << 20,
        read_only: true,
        multi_conn: false,
        fast_zero: false,
    }
}

/// The catalogue most tests serve; `vol0/lun0` is the default export.
pub fn catalogue() -> Vec<ExportInfo> {
    vec![lun0(), lun1()]
}

pub fn client_flags(flags: u32) -> Vec<u8> {
    flags.to_be_bytes().to_vec()
}

/// `IHAVEOPT`, option, length, data.
pub fn option(option: u32, data: &[u8]) -> Vec<u8> {
    let mut bytes = IHAVEOPT.to_be_bytes().to_vec();
    bytes.extend_from_slice(&option.to_be_bytes());
    bytes.extend_from_slice(&(data.len() as u32).to_be_bytes());
    bytes.extend_from_slice(data);
    bytes
}

/// The data of `NBD_OPT_INFO` / `NBD_OPT_GO`.
pub fn export_query(name: &str, info_requests: &[u16]) -> Vec<u8> {
    let mut data = (name.len() as u32).to_be_bytes().to_vec();
    data.extend_from_slice(name.as_bytes());
    data.extend_from_slice(&(info_requests.len() as u16).to_be_bytes());
    for request in info_requests {
        data.extend_from_slice(&request.to_be_bytes());
    }
    data
}

/// The data of `NBD_OPT_LIST_META_CONTEXT` / `NBD_OPT_SET_META_CONTEXT`.
pub fn meta_context_query(name: &str, queries: &[&str]) -> Vec<u8> {
    let mut data = (name.len() as u32).to_be_bytes().to_vec();
    data.extend_from_slice(name.as_bytes());
    data.extend_from_slice(&(queries.len() as u32).to_be_bytes());
    for query in queries {
        data.extend_from_slice(&(query.len() as u32).to_be_bytes());
        data.extend_from_slice(query.as_bytes());
    }
    data
}

/// What a handshake did with some input.
#[derive(Debug)]
pub struct Run {
    /// Everything the server sent after its greeting.
    pub output: Vec<u8>,
    /// The last result of `handle_input`.
    pub outcome: Result<Option<HandshakeEvent>, HandshakeError>,
    /// Input the handshake did not take.
    pub leftover: Vec<u8>,
    /// The handshake, if it has not ended (for `handle_eof`).
    pub handshake: Option<Handshake>,
}

impl Run {
    pub fn negotiated(&self) -> &Negotiated {
        match &self.outcome {
            Ok(Some(HandshakeEvent::Transmission(negotiated))) => negotiated,
            other => panic!("expected transmission, got {other:?}"),
        }
    }

    pub fn replies(&self) -> Vec<OptionReply> {
        parse_option_replies(&self.output)
    }
}

/// Feeds `input` to a fresh handshake in pieces of `piece` bytes, draining
/// output after every call, until the input is gone or the handshake ends.
pub fn run_handshake_in_pieces(input: &[u8], exports: &[ExportInfo], piece: usize) -> Run {
    let mut handshake = Handshake::new();
    let mut greeting = Vec::new();
    handshake.poll_transmit(&mut greeting);
    assert_eq!(greeting.len(), wafer_nbd::GREETING_BYTES);
    let mut output = Vec::new();
    let mut outcome = Ok(None);
    let mut rest = input;
    while !rest.is_empty() {
        let (mut chunk, after) = rest.split_at(piece.min(rest.len()));
        rest = after;
        while !chunk.is_empty() {
            outcome = handshake.handle_input(&mut chunk, exports);
            handshake.poll_transmit(&mut output);
            if !matches!(outcome, Ok(None)) {
                let mut leftover = chunk.to_vec();
                leftover.extend_from_slice(rest);
                return Run {
                    output,
                    outcome,
                    leftover,
                    handshake: None,
                };
            }
        }
    }
    Run {
        output,
        outcome,
        leftover: Vec::new(),
        handshake: Some(handshake),
    }
}

/// Feeds `input` all at once.
pub fn run_handshake(input: &[u8], exports: &[ExportInfo]) -> Run {
    run_handshake_in_pieces(input, exports, input.len().max(1))
}

/// One option reply as a client sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OptionReply {
    pub option: u32,
    pub reply_type: u32,
    pub data: Vec<u8>,
}

/// Splits server output into option replies; panics on anything else.
pub fn parse_option_replies(mut bytes: &[u8]) -> Vec<OptionReply> {
    let mut replies = Vec::new();
    while !bytes.is_empty() {
        assert!(bytes.len() >= 20, "a truncated option reply: {bytes:?}");
        let magic = u64::from_be_bytes(bytes[0..8].try_into().unwrap());
        assert_eq!(magic, NBD_REP_MAGIC);
        let option = u32::from_be_bytes(bytes[8..12].try_into().unwrap());
        let reply_type = u32::from_be_bytes(bytes[12..16].try_into().unwrap());
        let length = u32::from_be_bytes(bytes[16..20].try_into().unwrap()) as usize;
        replies.push(OptionReply {
            option,
            reply_type,
            data: bytes[20..20 + length].to_vec(),
        });
        bytes = &bytes[20 + length..];
    }
    replies
}

/// A request as a client puts it on the wire, any field allowed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WireRequest {
    pub magic: u32,
    pub flags: u16,
    pub command_type: u16,
    pub handle: u64,
    pub offset: u64,
    pub length: u32,
    pub payload: Vec<u8>,
}

impl WireRequest {
    pub fn new(command_type: u16, handle: u64, offset: u64, length: u32) -> WireRequest {
        WireRequest {
            magic: NBD_REQUEST_MAGIC,
            flags: 0,
            command_type,
            handle,
            offset,
            length,
            payload: Vec::new(),
        }
    }

    pub fn write(handle: u64, offset: u64, payload: Vec<u8>) -> WireRequest {
        WireRequest {
            length: payload.len() as u32,
            payload,
            ..WireRequest::new(wafer_nbd::consts::NBD_CMD_WRITE, handle, offset, 0)
        }
    }

    pub fn with_flags(self, flags: u16) -> WireRequest {
        WireRequest { flags, ..self }
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut bytes = self.magic.to_be_bytes().to_vec();
        bytes.extend_from_slice(&self.flags.to_be_bytes());
        bytes.extend_from_slice(&self.command_type.to_be_bytes());
        bytes.extend_from_slice(&self.handle.to_be_bytes());
        bytes.extend_from_slice(&self.offset.to_be_bytes());
        bytes.extend_from_slice(&self.length.to_be_bytes());
        bytes.extend_from_slice(&self.payload);
        bytes
    }
}

/// The wire form of a decoded request: the client encoder run backwards.
pub fn encode_request(request: &Request) -> Vec<u8> {
    use wafer_nbd::consts::*;
    let (command_type, payload) = match &request.command {
        Command::Read => (NBD_CMD_READ, Vec::new()),
        Command::Write { data } => (NBD_CMD_WRITE, data.clone()),
        Command::Disconnect => (NBD_CMD_DISC, Vec::new()),
        Command::Flush => (NBD_CMD_FLUSH, Vec::new()),
        Command::Trim => (NBD_CMD_TRIM, Vec::new()),
        Command::Cache => (NBD_CMD_CACHE, Vec::new()),
        Command::WriteZeroes => (NBD_CMD_WRITE_ZEROES, Vec::new()),
        Command::BlockStatus => (NBD_CMD_BLOCK_STATUS, Vec::new()),
    };
    WireRequest {
        magic: NBD_REQUEST_MAGIC,
        flags: request.flags.0,
        command_type,
        handle: request.handle,
        offset: request.offset,
        length: request.length,
        payload,
    }
    .encode()
}

/// Settings as a handshake would have produced them.
pub fn negotiated(
    export: ExportInfo,
    structured_replies: bool,
    base_allocation: bool,
) -> Negotiated {
    Negotiated {
        transmission_flags: TransmissionFlags::for_export(&export, structured_replies),
        export,
        structured_replies,
        base_allocation: base_allocation.then_some(wafer_nbd::BASE_ALLOCATION_CONTEXT_ID),
        no_zeroes: true,
    }
}

/// One structured reply chunk as a client parses it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParsedChunk {
    pub flags: u16,
    pub chunk_type: u16,
    pub handle: u64,
    pub payload: Vec<u8>,
}

/// Parses one structured chunk from the front of `bytes`; returns it and the rest.
pub fn parse_chunk(bytes: &[u8]) -> (ParsedChunk, &[u8]) {
    let magic = u32::from_be_bytes(bytes[0..4].try_into().unwrap());
    assert_eq!(magic, wafer_nbd::consts::NBD_STRUCTURED_REPLY_MAGIC);
    let flags = u16::from_be_bytes(bytes[4..6].try_into().unwrap());
    let chunk_type = u16::from_be_bytes(bytes[6..8].try_into().unwrap());
    let handle = u64::from_be_bytes(bytes[8..16].try_into().unwrap());
    let length = u32::from_be_bytes(bytes[16..20].try_into().unwrap()) as usize;
    let chunk = ParsedChunk {
        flags,
        chunk_type,
        handle,
        payload: bytes[20..20 + length].to_vec(),
    };
    (chunk, &bytes[20 + length..])
}
