//! The CRC32C (Castagnoli) digest iSCSI puts after headers and data
//! segments, sent least significant byte first.

/// The CRC32C of `bytes`.
pub fn crc32c(bytes: &[u8]) -> u32 {
    crc32c::crc32c(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rfc_examples_hold() {
        // RFC 7143 (and 3720 appendix B.4): 32 bytes of zeros, of ones, and
        // an ascending run.
        assert_eq!(crc32c(&[0u8; 32]), 0x8a91_36aa);
        assert_eq!(crc32c(&[0xffu8; 32]), 0x62a8_ab43);
        let ascending: Vec<u8> = (0..32).collect();
        assert_eq!(crc32c(&ascending), 0x46dd_794e);
    }
}
