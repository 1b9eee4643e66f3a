//! A scripted initiator for the connection tests: builds the PDUs an
//! initiator sends and reads back what the target sent.
#![allow(dead_code)]

use wafer_iscsi::pdu::{Bhs, Decoded, Digests, PduDecoder, encode};
use wafer_iscsi::{Connection, Event, LunInfo, TargetIdentity};

pub const TARGET: &str = "iqn.2026-11.org.wafer:test";

pub fn identity() -> TargetIdentity {
    TargetIdentity {
        name: TARGET.into(),
        alias: "wafer".into(),
        portal_group_tag: 1,
        address: "127.0.0.1:3260".into(),
    }
}

/// One LUN of 2048 blocks (1 MiB) numbered 0.
pub fn luns() -> Vec<LunInfo> {
    vec![LunInfo {
        number: 0,
        blocks: 2048,
        read_only: false,
        serial: "wafer-test-0".into(),
        id: 1,
        access: wafer_iscsi::Access::Full,
        resets: 0,
        thin: false,
    }]
}

/// A received target PDU.
pub struct Sent {
    pub bhs: Bhs,
    pub data: Vec<u8>,
}

/// Decodes everything the target has to send.
pub fn sent(connection: &mut Connection, digests: Digests) -> Vec<Sent> {
    let mut bytes = Vec::new();
    connection.poll_transmit(&mut bytes);
    let mut decoder = PduDecoder::new(1 << 24);
    decoder.set_digests(digests);
    let mut input = &bytes[..];
    let mut pdus = Vec::new();
    while !input.is_empty() {
        match decoder
            .decode(&mut input)
            .expect("the target frames its PDUs")
        {
            Some(Decoded::Pdu(pdu)) => pdus.push(Sent {
                bhs: pdu.bhs,
                data: pdu.data,
            }),
            Some(other) => panic!("the target sent {other:?}"),
            None => panic!("the target sent part of a PDU"),
        }
    }
    pdus
}

/// Every event the connection has for the driver.
pub fn events(connection: &mut Connection) -> Vec<Event> {
    std::iter::from_fn(|| connection.poll_event()).collect()
}

/// Encodes an initiator PDU.
pub fn wire(bhs: Bhs, data: &[u8], digests: Digests) -> Vec<u8> {
    let mut out = Vec::new();
    encode(&mut out, bhs, data, digests);
    out
}

/// A login request from `current` to `next` stage with `keys`.
pub fn login_request(current: u8, next: u8, keys: &str) -> Vec<u8> {
    let mut bhs = Bhs::new(0x43, 0x80 | (current << 2) | next);
    bhs.0[8..14].copy_from_slice(&[0x80, 0, 0, 0, 0, 1]);
    bhs.put_u32(24, 1);
    wire(bhs, keys.as_bytes(), Digests::default())
}

/// A connection logged in to a normal session with `extra` keys.
pub fn logged_in(extra: &str) -> Connection {
    let mut connection = Connection::new(identity(), 1, luns());
    let keys = format!(
        "InitiatorName=iqn.i\0TargetName={TARGET}\0SessionType=Normal\0\
         MaxRecvDataSegmentLength=8192\0{extra}"
    );
    connection
        .handle_input(&login_request(1, 3, &keys))
        .expect("login");
    let responses = sent(&mut connection, Digests::default());
    assert_eq!(responses.len(), 1);
    assert_eq!(responses[0].bhs.0[36..38], [0, 0], "login succeeded");
    assert!(matches!(
        events(&mut connection).as_slice(),
        [Event::LoggedIn { .. }]
    ));
    connection
}

/// A SCSI command PDU.
pub fn command(itt: u32, cmd_sn: u32, cdb: &[u8], edtl: u32, flags: u8) -> Bhs {
    let mut bhs = Bhs::new(0x01, flags);
    bhs.put_u32(16, itt);
    bhs.put_u32(20, edtl);
    bhs.put_u32(24, cmd_sn);
    bhs.0[32..32 + cdb.len()].copy_from_slice(cdb);
    bhs
}

/// A Data-Out PDU.
pub fn data_out(itt: u32, ttt: u32, data_sn: u32, offset: u32, last: bool) -> Bhs {
    let mut bhs = Bhs::new(0x05, if last { 0x80 } else { 0 });
    bhs.put_u32(16, itt);
    bhs.put_u32(20, ttt);
    bhs.put_u32(36, data_sn);
    bhs.put_u32(40, offset);
    bhs
}

pub fn read10(lba: u32, blocks: u16) -> [u8; 10] {
    let mut cdb = [0u8; 10];
    cdb[0] = 0x28;
    cdb[2..6].copy_from_slice(&lba.to_be_bytes());
    cdb[7..9].copy_from_slice(&blocks.to_be_bytes());
    cdb
}

pub fn write10(lba: u32, blocks: u16) -> [u8; 10] {
    let mut cdb = read10(lba, blocks);
    cdb[0] = 0x2a;
    cdb
}
