//! PDU framing: the 48-byte basic header segment (BHS), additional header
//! segments (AHS), the data segment, and their optional CRC32C digests.
//!
//! Every iSCSI PDU is a BHS, `TotalAHSLength` four-byte words of AHS, a
//! header digest (if negotiated), the data segment padded to four bytes, and
//! a data digest (if negotiated and the segment is not empty). The BHS alone
//! tells how long the rest is, so a decoder needs no other framing; but a
//! length cannot be trusted until the header digest over it has been checked,
//! so a header digest error ends the connection (at error recovery level 0
//! nothing else is safe), while a data digest error costs only that PDU.
//!
//! [`PduDecoder`] is fed bytes and yields whole PDUs. It never holds more
//! than one header and one data segment of at most its limit: a PDU whose
//! data segment is longer is counted off unread and reported as
//! [`Decoded::Oversized`], which the connection answers with a reject.
//! [`encode`] appends a PDU the target sends, filling in the data segment
//! length, padding and digests.

use crate::digest::crc32c;

/// Bytes of the basic header segment.
pub const BHS_BYTES: usize = 48;
/// Bytes of a digest.
pub const DIGEST_BYTES: usize = 4;
/// The largest AHS the format allows: 255 words.
pub const AHS_BYTES_MAX: usize = 255 * 4;
/// The tag meaning "none" in ITT and TTT fields.
pub const RESERVED_TAG: u32 = 0xffff_ffff;

/// Opcodes an initiator sends.
pub mod initiator {
    /// NOP-Out.
    pub const NOP_OUT: u8 = 0x00;
    /// SCSI Command.
    pub const SCSI_COMMAND: u8 = 0x01;
    /// SCSI Task Management Function request.
    pub const TASK_MANAGEMENT: u8 = 0x02;
    /// Login request.
    pub const LOGIN: u8 = 0x03;
    /// Text request.
    pub const TEXT: u8 = 0x04;
    /// SCSI Data-Out.
    pub const DATA_OUT: u8 = 0x05;
    /// Logout request.
    pub const LOGOUT: u8 = 0x06;
    /// SNACK request.
    pub const SNACK: u8 = 0x10;
}

/// Opcodes the target sends.
pub mod target {
    /// NOP-In.
    pub const NOP_IN: u8 = 0x20;
    /// SCSI Response.
    pub const SCSI_RESPONSE: u8 = 0x21;
    /// Task Management Function response.
    pub const TASK_MANAGEMENT_RESPONSE: u8 = 0x22;
    /// Login response.
    pub const LOGIN_RESPONSE: u8 = 0x23;
    /// Text response.
    pub const TEXT_RESPONSE: u8 = 0x24;
    /// SCSI Data-In.
    pub const DATA_IN: u8 = 0x25;
    /// Logout response.
    pub const LOGOUT_RESPONSE: u8 = 0x26;
    /// Ready To Transfer.
    pub const R2T: u8 = 0x31;
    /// Reject.
    pub const REJECT: u8 = 0x3f;
}

/// The final bit of byte 1.
pub const FLAG_FINAL: u8 = 0x80;

/// A basic header segment, read through typed accessors.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Bhs(pub [u8; BHS_BYTES]);

impl std::fmt::Debug for Bhs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Bhs(opcode {:#04x}, itt {:#x})",
            self.opcode(),
            self.itt()
        )
    }
}

impl Bhs {
    /// A zeroed header with `opcode` and the flags byte.
    pub fn new(opcode: u8, flags: u8) -> Bhs {
        let mut bytes = [0u8; BHS_BYTES];
        bytes[0] = opcode;
        bytes[1] = flags;
        Bhs(bytes)
    }

    /// The opcode, without the immediate bit.
    pub fn opcode(&self) -> u8 {
        self.0[0] & 0x3f
    }

    /// Whether the initiator marked the PDU for immediate delivery.
    pub fn immediate(&self) -> bool {
        self.0[0] & 0x40 != 0
    }

    /// Byte 1: the final bit and opcode-specific flags.
    pub fn flags(&self) -> u8 {
        self.0[1]
    }

    /// Whether the final bit is set.
    pub fn is_final(&self) -> bool {
        self.flags() & FLAG_FINAL != 0
    }

    /// Bytes of AHS that follow.
    pub fn ahs_bytes(&self) -> usize {
        usize::from(self.0[4]) * 4
    }

    /// Bytes of the data segment, without padding.
    pub fn data_bytes(&self) -> u32 {
        u32::from_be_bytes([0, self.0[5], self.0[6], self.0[7]])
    }

    /// Sets the data segment length (at most 2^24 - 1).
    pub fn set_data_bytes(&mut self, length: u32) {
        debug_assert!(length < 1 << 24, "a data segment is at most 16 MiB");
        self.0[5..8].copy_from_slice(&length.to_be_bytes()[1..]);
    }

    /// The LUN field, bytes 8 to 15.
    pub fn lun(&self) -> u64 {
        self.u64_at(8)
    }

    /// The initiator task tag.
    pub fn itt(&self) -> u32 {
        self.u32_at(16)
    }

    /// A big-endian word at `at`.
    pub fn u32_at(&self, at: usize) -> u32 {
        u32::from_be_bytes(self.0[at..at + 4].try_into().expect("four bytes"))
    }

    /// A big-endian double word at `at`.
    pub fn u64_at(&self, at: usize) -> u64 {
        u64::from_be_bytes(self.0[at..at + 8].try_into().expect("eight bytes"))
    }

    /// Writes a big-endian word at `at`.
    pub fn put_u32(&mut self, at: usize, value: u32) {
        self.0[at..at + 4].copy_from_slice(&value.to_be_bytes());
    }

    /// Writes a big-endian double word at `at`.
    pub fn put_u64(&mut self, at: usize, value: u64) {
        self.0[at..at + 8].copy_from_slice(&value.to_be_bytes());
    }
}

/// One received PDU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pdu {
    /// Its header.
    pub bhs: Bhs,
    /// Its additional header segments, as received.
    pub ahs: Vec<u8>,
    /// Its data segment, without padding.
    pub data: Vec<u8>,
}

/// Which digests are on, in each direction alike.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Digests {
    /// CRC32C over the BHS and AHS.
    pub header: bool,
    /// CRC32C over the padded data segment.
    pub data: bool,
}

/// What the decoder yields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decoded {
    /// A whole PDU, digests checked.
    Pdu(Pdu),
    /// A PDU whose data segment was longer than the limit: its data was
    /// counted off unread. The connection rejects it and goes on.
    Oversized(Bhs),
    /// A PDU whose data digest did not match: its data is dropped.
    DataDigest(Bhs),
}

/// Input after which the stream cannot be followed: the connection ends.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FramingError {
    /// The header digest did not match, so its lengths cannot be trusted.
    #[error("header digest mismatch (received {received:#010x}, computed {computed:#010x})")]
    HeaderDigest {
        /// The digest on the wire.
        received: u32,
        /// The digest of the header as received.
        computed: u32,
    },
    /// The stream ended inside a PDU.
    #[error("the connection ended inside a PDU ({0} bytes of it received)")]
    Truncated(usize),
}

/// Turns a byte stream into PDUs, holding at most one PDU of bounded size.
#[derive(Debug)]
pub struct PduDecoder {
    digests: Digests,
    data_limit: u32,
    /// The PDU being received: header first, then the rest.
    buffer: Vec<u8>,
    /// Bytes of an oversized PDU still to be counted off.
    skipping: u64,
}

impl PduDecoder {
    /// A decoder accepting data segments of at most `data_limit` bytes.
    pub fn new(data_limit: u32) -> PduDecoder {
        PduDecoder {
            digests: Digests::default(),
            data_limit,
            buffer: Vec::new(),
            skipping: 0,
        }
    }

    /// Turns digests on or off for the PDUs that follow.
    pub fn set_digests(&mut self, digests: Digests) {
        self.digests = digests;
    }

    /// Changes the largest data segment accepted.
    pub fn set_data_limit(&mut self, data_limit: u32) {
        self.data_limit = data_limit;
    }

    /// Bytes held of a PDU not yet whole.
    pub fn buffered_bytes(&self) -> usize {
        self.buffer.len()
    }

    /// The header of the PDU being received, once its 48 bytes are in (so
    /// a caller can refuse a PDU by its opcode before the rest arrives).
    pub fn pending_header(&self) -> Option<Bhs> {
        let bytes = self.buffer.get(..BHS_BYTES)?;
        Some(Bhs(bytes.try_into().expect("a whole BHS")))
    }

    /// Takes bytes from `input` until a PDU is whole (and returns it) or the
    /// input is used up (`None`).
    pub fn decode(&mut self, input: &mut &[u8]) -> Result<Option<Decoded>, FramingError> {
        if self.skipping > 0 {
            let skipped = self.skipping.min(input.len() as u64) as usize;
            *input = &input[skipped..];
            self.skipping -= skipped as u64;
            if self.skipping > 0 {
                return Ok(None);
            }
        }
        if !self.fill(input, BHS_BYTES) {
            return Ok(None);
        }
        let bhs = Bhs(self.buffer[..BHS_BYTES].try_into().expect("a whole BHS"));
        let header_bytes = BHS_BYTES + bhs.ahs_bytes() + self.header_digest_bytes();
        if !self.fill(input, header_bytes) {
            return Ok(None);
        }
        self.check_header_digest(header_bytes)?;
        let data_bytes = bhs.data_bytes();
        let padded = padded(data_bytes as usize);
        let data_digest = if self.digests.data && data_bytes > 0 {
            DIGEST_BYTES
        } else {
            0
        };
        if data_bytes > self.data_limit {
            self.buffer.clear();
            self.skipping = (padded + data_digest) as u64;
            let skipped = self.skipping.min(input.len() as u64) as usize;
            *input = &input[skipped..];
            self.skipping -= skipped as u64;
            return Ok(Some(Decoded::Oversized(bhs)));
        }
        if !self.fill(input, header_bytes + padded + data_digest) {
            return Ok(None);
        }
        let pdu = self.take(bhs, header_bytes, data_bytes as usize, data_digest > 0);
        Ok(Some(pdu))
    }

    /// Reports a stream that ends inside a PDU.
    pub fn handle_eof(&self) -> Result<(), FramingError> {
        match self.buffer.len() as u64 + self.skipping {
            0 => Ok(()),
            held => Err(FramingError::Truncated(held as usize)),
        }
    }

    fn header_digest_bytes(&self) -> usize {
        if self.digests.header { DIGEST_BYTES } else { 0 }
    }

    /// Moves bytes from `input` until the buffer holds `want`; whether it does.
    fn fill(&mut self, input: &mut &[u8], want: usize) -> bool {
        let missing = want.saturating_sub(self.buffer.len());
        let taken = missing.min(input.len());
        self.buffer.extend_from_slice(&input[..taken]);
        *input = &input[taken..];
        self.buffer.len() >= want
    }

    fn check_header_digest(&self, header_bytes: usize) -> Result<(), FramingError> {
        if !self.digests.header {
            return Ok(());
        }
        let covered = header_bytes - DIGEST_BYTES;
        let received = u32::from_le_bytes(
            self.buffer[covered..header_bytes]
                .try_into()
                .expect("four bytes"),
        );
        let computed = crc32c(&self.buffer[..covered]);
        match received == computed {
            true => Ok(()),
            false => Err(FramingError::HeaderDigest { received, computed }),
        }
    }

    /// Takes the whole PDU out of the buffer, checking its data digest.
    fn take(&mut self, bhs: Bhs, header_bytes: usize, data_bytes: usize, digest: bool) -> Decoded {
        let ahs_end = BHS_BYTES + bhs.ahs_bytes();
        let padded_end = header_bytes + padded(data_bytes);
        if digest {
            let received = u32::from_le_bytes(
                self.buffer[padded_end..padded_end + DIGEST_BYTES]
                    .try_into()
                    .expect("four bytes"),
            );
            if received != crc32c(&self.buffer[header_bytes..padded_end]) {
                self.buffer.clear();
                return Decoded::DataDigest(bhs);
            }
        }
        let ahs = self.buffer[BHS_BYTES..ahs_end].to_vec();
        let data = self.buffer[header_bytes..header_bytes + data_bytes].to_vec();
        self.buffer.clear();
        Decoded::Pdu(Pdu { bhs, ahs, data })
    }
}

/// `length` rounded up to four bytes.
pub fn padded(length: usize) -> usize {
    length.div_ceil(4) * 4
}

/// Appends a target PDU: `bhs` (its data segment length set here), `data`,
/// padding and the digests `digests` asks for. No AHS: the target sends none.
pub fn encode(out: &mut Vec<u8>, mut bhs: Bhs, data: &[u8], digests: Digests) {
    bhs.0[4] = 0;
    bhs.set_data_bytes(u32::try_from(data.len()).expect("a data segment below 16 MiB"));
    out.extend_from_slice(&bhs.0);
    if digests.header {
        out.extend_from_slice(&crc32c(&bhs.0).to_le_bytes());
    }
    if data.is_empty() {
        return;
    }
    let start = out.len();
    out.extend_from_slice(data);
    out.resize(start + padded(data.len()), 0);
    if digests.data {
        let digest = crc32c(&out[start..]);
        out.extend_from_slice(&digest.to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn command(data: &[u8], digests: Digests) -> Vec<u8> {
        let mut bhs = Bhs::new(initiator::SCSI_COMMAND, FLAG_FINAL);
        bhs.put_u32(16, 7);
        let mut out = Vec::new();
        encode(&mut out, bhs, data, digests);
        out
    }

    #[test]
    fn a_pdu_is_whole_however_its_bytes_arrive() {
        let digests = Digests {
            header: true,
            data: true,
        };
        let wire = command(b"hello", digests);
        assert_eq!(wire.len(), 48 + 4 + 8 + 4);
        for split in 0..wire.len() {
            let mut decoder = PduDecoder::new(1024);
            decoder.set_digests(digests);
            let mut first = &wire[..split];
            assert_eq!(decoder.decode(&mut first), Ok(None));
            let mut rest = &wire[split..];
            let Ok(Some(Decoded::Pdu(pdu))) = decoder.decode(&mut rest) else {
                panic!("a PDU after {split} bytes")
            };
            assert_eq!(pdu.data, b"hello");
            assert_eq!(pdu.bhs.itt(), 7);
            assert!(rest.is_empty());
            assert_eq!(decoder.handle_eof(), Ok(()));
        }
    }

    #[test]
    fn a_bad_header_digest_ends_the_stream_and_a_bad_data_digest_drops_the_pdu() {
        let digests = Digests {
            header: true,
            data: true,
        };
        let mut wire = command(b"data", digests);
        let mut decoder = PduDecoder::new(1024);
        decoder.set_digests(digests);
        wire[53] ^= 1;
        let mut input = &wire[..];
        assert_eq!(
            decoder.decode(&mut input),
            Ok(Some(Decoded::DataDigest(Bhs(wire[..48]
                .try_into()
                .unwrap()))))
        );
        wire[3] ^= 1;
        let mut input = &wire[..];
        assert!(matches!(
            decoder.decode(&mut input),
            Err(FramingError::HeaderDigest { .. })
        ));
    }

    #[test]
    fn an_oversized_data_segment_is_counted_off_and_the_next_pdu_follows() {
        let mut wire = command(&[1u8; 100], Digests::default());
        wire.extend(command(b"ok", Digests::default()));
        let mut decoder = PduDecoder::new(64);
        let mut input = &wire[..];
        assert!(matches!(
            decoder.decode(&mut input),
            Ok(Some(Decoded::Oversized(_)))
        ));
        let Ok(Some(Decoded::Pdu(pdu))) = decoder.decode(&mut input) else {
            panic!("the next PDU")
        };
        assert_eq!(pdu.data, b"ok");
    }

    #[test]
    fn a_stream_ending_inside_a_pdu_is_reported() {
        let wire = command(b"abc", Digests::default());
        let mut decoder = PduDecoder::new(64);
        let mut input = &wire[..50];
        assert_eq!(decoder.decode(&mut input), Ok(None));
        assert_eq!(decoder.handle_eof(), Err(FramingError::Truncated(50)));
    }
}
