//! XOR kernels, the only arithmetic parity needs.
//!
//! Every kernel works on 64-bit words, four at a time, so the compiler emits
//! vector loads and XORs; no kernel loops over single bytes. Parity is linear, so
//! all of RAID-4 and RAID-DP (encode, update, reconstruct, scrub) is built from
//! "XOR this range into that range". Lengths are always whole 16-byte symbols.

/// Bytes handled per loop iteration: four 64-bit words.
const CHUNK_BYTES: usize = 32;
const WORD_BYTES: usize = 8;

/// `dst ^= src`, word by word.
///
/// # Panics
/// If the lengths differ or are not a multiple of 8 bytes.
pub fn xor_into(dst: &mut [u8], src: &[u8]) {
    assert_eq!(dst.len(), src.len(), "xor of unequal lengths");
    assert_eq!(dst.len() % WORD_BYTES, 0, "xor length is not whole words");
    let mut dst_chunks = dst.chunks_exact_mut(CHUNK_BYTES);
    let mut src_chunks = src.chunks_exact(CHUNK_BYTES);
    for (d, s) in (&mut dst_chunks).zip(&mut src_chunks) {
        for (dw, sw) in d
            .chunks_exact_mut(WORD_BYTES)
            .zip(s.chunks_exact(WORD_BYTES))
        {
            xor_word(dw, sw);
        }
    }
    let dst_tail = dst_chunks.into_remainder();
    let src_tail = src_chunks.remainder();
    for (dw, sw) in dst_tail
        .chunks_exact_mut(WORD_BYTES)
        .zip(src_tail.chunks_exact(WORD_BYTES))
    {
        xor_word(dw, sw);
    }
}

/// `first ^= src` and `second ^= src` in one pass, so `src` is loaded once.
///
/// # Panics
/// If the lengths differ or are not a multiple of 8 bytes.
pub fn xor_into_both(first: &mut [u8], second: &mut [u8], src: &[u8]) {
    assert!(
        first.len() == src.len() && second.len() == src.len(),
        "xor of unequal lengths"
    );
    assert_eq!(src.len() % WORD_BYTES, 0, "xor length is not whole words");
    let words = first
        .chunks_exact_mut(WORD_BYTES)
        .zip(second.chunks_exact_mut(WORD_BYTES))
        .zip(src.chunks_exact(WORD_BYTES));
    for ((f, s), w) in words {
        xor_word(f, w);
        xor_word(s, w);
    }
}

/// `dst = a ^ b`, word by word.
///
/// # Panics
/// If the lengths differ or are not a multiple of 8 bytes.
pub fn xor_pair(dst: &mut [u8], a: &[u8], b: &[u8]) {
    dst.copy_from_slice(a);
    xor_into(dst, b);
}

/// `dst = sources[0] ^ sources[1] ^ ...`; no sources zeroes `dst`.
pub fn xor_all<'a>(dst: &mut [u8], sources: impl IntoIterator<Item = &'a [u8]>) {
    let mut sources = sources.into_iter();
    match sources.next() {
        None => dst.fill(0),
        Some(first) => {
            dst.copy_from_slice(first);
            for source in sources {
                xor_into(dst, source);
            }
        }
    }
}

/// Whether every byte of `bytes` is zero, tested a word at a time.
pub fn is_zero(bytes: &[u8]) -> bool {
    bytes
        .chunks(WORD_BYTES)
        .all(|word| word.iter().fold(0u8, |acc, &b| acc | b) == 0)
}

#[inline(always)]
#[allow(clippy::host_endian_bytes, reason = "XOR is byte-order agnostic")]
fn xor_word(dst: &mut [u8], src: &[u8]) {
    let d = u64::from_ne_bytes(dst.try_into().expect("word"));
    let s = u64::from_ne_bytes(src.try_into().expect("word"));
    dst.copy_from_slice(&(d ^ s).to_ne_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xor_into_matches_bytewise_xor_for_every_tail_length() {
        for words in 0..12 {
            let len = words * WORD_BYTES;
            let a: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
            let b: Vec<u8> = (0..len).map(|i| (i * 13 + 1) as u8).collect();
            let mut d = a.clone();
            xor_into(&mut d, &b);
            let expected: Vec<u8> = a.iter().zip(&b).map(|(x, y)| x ^ y).collect();
            assert_eq!(d, expected, "length {len}");
        }
    }

    #[test]
    fn xor_into_both_updates_both_destinations() {
        let src: Vec<u8> = (0..96).map(|i| i as u8).collect();
        let (mut first, mut second) = (vec![0xf0u8; 96], vec![0x0fu8; 96]);
        xor_into_both(&mut first, &mut second, &src);
        assert!(first.iter().zip(&src).all(|(f, s)| *f == 0xf0 ^ s));
        assert!(second.iter().zip(&src).all(|(d, s)| *d == 0x0f ^ s));
    }

    #[test]
    fn xor_all_of_nothing_is_zero_and_of_one_is_a_copy() {
        let mut d = [0xffu8; 64];
        xor_all(&mut d, []);
        assert!(is_zero(&d));
        let a = [0x5au8; 64];
        xor_all(&mut d, [&a[..]]);
        assert_eq!(d, a);
        xor_all(&mut d, [&a[..], &a[..]]);
        assert!(is_zero(&d));
    }

    #[test]
    fn is_zero_sees_a_single_set_bit_anywhere() {
        for position in 0..40 {
            let mut bytes = [0u8; 40];
            bytes[position] = 0x10;
            assert!(!is_zero(&bytes), "missed a bit at {position}");
        }
    }
}
