//! Byte-level helpers shared by the handshake and the request decoder.
//!
//! Messages arrive cut at arbitrary points, so each decoder gathers one message
//! at a time into a buffer whose target size it learnt from a fixed-size header.
//! [`gather`] moves bytes from the caller's input into that buffer and never
//! takes more than the message needs: the buffers stay bounded by the largest
//! message a decoder accepts, and bytes that belong to the next message (or to
//! the next phase of the protocol) stay in the caller's input. [`discard`] does
//! the same for payloads the decoder refuses to hold, counting them off instead.
//!
//! [`Reader`] parses a gathered message in network byte order and answers
//! `None` instead of panicking when the message is shorter than its fields.

use crate::STRING_BYTES_MAX;

/// Moves bytes from the front of `input` into `buffer` until `buffer` holds
/// `wanted` bytes or `input` is exhausted; true once `buffer` is complete.
pub(crate) fn gather(buffer: &mut Vec<u8>, wanted: usize, input: &mut &[u8]) -> bool {
    assert!(buffer.len() <= wanted, "a message buffer overshot its size");
    let taken = (wanted - buffer.len()).min(input.len());
    let (head, rest) = input.split_at(taken);
    buffer.extend_from_slice(head);
    *input = rest;
    buffer.len() == wanted
}

/// Drops bytes from the front of `input` until `remaining` reaches zero or
/// `input` is exhausted; true once nothing remains.
pub(crate) fn discard(remaining: &mut u32, input: &mut &[u8]) -> bool {
    let available = u32::try_from(input.len()).unwrap_or(u32::MAX);
    let dropped = (*remaining).min(available);
    *input = &input[dropped as usize..];
    *remaining -= dropped;
    *remaining == 0
}

/// Why a string field was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StringError {
    /// The field claims more bytes than its message holds.
    Truncated,
    /// Longer than the protocol's 4096-byte limit on strings.
    TooLong,
    /// Not UTF-8, or contains a NUL.
    Malformed,
}

/// Checks the protocol's rules for strings: at most [`STRING_BYTES_MAX`] bytes
/// of UTF-8 without NUL characters.
pub(crate) fn decode_string(bytes: &[u8]) -> Result<String, StringError> {
    if bytes.len() > STRING_BYTES_MAX {
        return Err(StringError::TooLong);
    }
    let text = core::str::from_utf8(bytes).map_err(|_| StringError::Malformed)?;
    if text.contains('\0') {
        return Err(StringError::Malformed);
    }
    Ok(text.to_owned())
}

/// The longest prefix of `text` that fits in `bytes_max` bytes without cutting
/// a character in two.
pub(crate) fn truncate_str(text: &str, bytes_max: usize) -> &str {
    let mut end = text.len().min(bytes_max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// A big-endian cursor over one complete message.
pub(crate) struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Reader { bytes }
    }

    /// Bytes not yet read.
    pub(crate) fn remaining(&self) -> usize {
        self.bytes.len()
    }

    /// The next `count` bytes, or `None` if fewer remain.
    pub(crate) fn bytes(&mut self, count: usize) -> Option<&'a [u8]> {
        if count > self.bytes.len() {
            return None;
        }
        let (head, rest) = self.bytes.split_at(count);
        self.bytes = rest;
        Some(head)
    }

    fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        self.bytes(N)?.try_into().ok()
    }

    pub(crate) fn u16(&mut self) -> Option<u16> {
        self.array().map(u16::from_be_bytes)
    }

    pub(crate) fn u32(&mut self) -> Option<u32> {
        self.array().map(u32::from_be_bytes)
    }

    pub(crate) fn u64(&mut self) -> Option<u64> {
        self.array().map(u64::from_be_bytes)
    }

    /// A string whose length the message gave as a 32-bit field just before it.
    pub(crate) fn string_u32(&mut self) -> Result<String, StringError> {
        let length = self.u32().ok_or(StringError::Truncated)?;
        let length = usize::try_from(length).map_err(|_| StringError::Truncated)?;
        let bytes = self.bytes(length).ok_or(StringError::Truncated)?;
        decode_string(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gather_takes_only_what_the_message_needs() {
        let mut buffer = vec![1];
        let mut input: &[u8] = &[2, 3, 4, 5];
        assert!(gather(&mut buffer, 3, &mut input));
        assert_eq!(buffer, [1, 2, 3]);
        assert_eq!(input, [4, 5]);
        let mut short: &[u8] = &[9];
        let mut partial = Vec::new();
        assert!(!gather(&mut partial, 2, &mut short));
        assert!(short.is_empty());
    }

    #[test]
    fn discard_counts_down_across_calls() {
        let mut remaining = 5;
        let mut input: &[u8] = &[0; 3];
        assert!(!discard(&mut remaining, &mut input));
        assert_eq!((remaining, input.len()), (2, 0));
        let mut input: &[u8] = &[7; 4];
        assert!(discard(&mut remaining, &mut input));
        assert_eq!(input, [7, 7]);
    }

    #[test]
    fn strings_follow_the_protocol_rules() {
        assert_eq!(decode_string(b"vol0/lun1"), Ok("vol0/lun1".to_owned()));
        assert_eq!(decode_string(b"a\0b"), Err(StringError::Malformed));
        assert_eq!(decode_string(&[0xff, 0xfe]), Err(StringError::Malformed));
        assert_eq!(
            decode_string(&vec![b'x'; STRING_BYTES_MAX + 1]),
            Err(StringError::TooLong)
        );
        assert!(decode_string(&vec![b'x'; STRING_BYTES_MAX]).is_ok());
    }

    #[test]
    fn truncation_never_splits_a_character() {
        assert_eq!(truncate_str("héllo", 2), "h");
        assert_eq!(truncate_str("héllo", 3), "hé");
        assert_eq!(truncate_str("abc", 10), "abc");
    }

    #[test]
    fn reader_refuses_to_read_past_the_end() {
        let mut reader = Reader::new(&[0, 0, 0, 5, b'a']);
        assert_eq!(reader.string_u32(), Err(StringError::Truncated));
        let mut reader = Reader::new(&[0x12, 0x34]);
        assert_eq!(reader.u16(), Some(0x1234));
        assert_eq!(reader.u16(), None);
        assert_eq!(reader.remaining(), 0);
    }
}
