//! Trailers in half their size, for the lab's content.
//!
//! A trailer (see `wafer_core::format`) is 64 bytes: the magic number, a
//! checksum, the block's pvbn and vvbn, volume, file, fbn, level and CP, and
//! fifteen bytes of zeros. At a lab run's scale the numbers are small (block
//! numbers below 2^40, fewer than 2^24 CPs), so the same trailer fits in 32
//! bytes: a tag, then each field in as few bytes as it needs here. A trailer
//! is kept compact only if it expands back to exactly the 64 bytes given,
//! so nothing is ever lost: any other trailer (a larger number, bytes that
//! are not a wafer trailer) is marked as kept in full elsewhere. All-zero
//! compact bytes, as a block never written reads, expand to 64 zero bytes.

use wafer_core::format::{TRAILER_MAGIC, TRAILER_SIZE};

/// Bytes of one compact trailer.
pub const COMPACT_SIZE: usize = 32;

/// What a compact record holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compact {
    /// The 64 bytes are zeros.
    Zeros,
    /// The trailer, in full.
    Trailer([u8; TRAILER_SIZE]),
    /// The trailer did not fit: it is kept in full elsewhere.
    Elsewhere,
}

const TAG_ZEROS: u8 = 0;
const TAG_TRAILER: u8 = 1;
const TAG_ELSEWHERE: u8 = 2;

/// Where each field sits: (offset in the trailer, offset in the compact
/// form, bytes kept), little-endian both sides.
const FIELDS: [(usize, usize, usize); 8] = [
    (4, 1, 4),   // checksum
    (8, 5, 5),   // pvbn
    (16, 10, 5), // vvbn
    (24, 15, 4), // volume
    (28, 19, 4), // file
    (32, 23, 5), // fbn
    (40, 28, 1), // level
    (48, 29, 3), // cp
];

/// The compact form of `trailer`, or the mark that it is kept elsewhere.
pub fn compact(trailer: &[u8; TRAILER_SIZE]) -> [u8; COMPACT_SIZE] {
    let mut out = [0; COMPACT_SIZE];
    if trailer.iter().all(|&byte| byte == 0) {
        return out;
    }
    out[0] = TAG_TRAILER;
    for (at, to, len) in FIELDS {
        out[to..to + len].copy_from_slice(&trailer[at..at + len]);
    }
    if expand(&out) != Compact::Trailer(*trailer) {
        out = [0; COMPACT_SIZE];
        out[0] = TAG_ELSEWHERE;
    }
    out
}

/// True if `compact` marks a trailer kept in full elsewhere.
pub fn kept_elsewhere(compact: &[u8; COMPACT_SIZE]) -> bool {
    compact[0] == TAG_ELSEWHERE
}

/// What compact bytes stand for.
pub fn expand(compact: &[u8; COMPACT_SIZE]) -> Compact {
    match compact[0] {
        TAG_ZEROS => Compact::Zeros,
        TAG_TRAILER => {
            let mut out = [0; TRAILER_SIZE];
            out[..4].copy_from_slice(&TRAILER_MAGIC.to_le_bytes());
            for (at, from, len) in FIELDS {
                out[at..at + len].copy_from_slice(&compact[from..from + len]);
            }
            Compact::Trailer(out)
        }
        tag => {
            assert_eq!(tag, TAG_ELSEWHERE, "a compact trailer's tag");
            Compact::Elsewhere
        }
    }
}

#[cfg(test)]
mod tests {
    use wafer_core::format::{Identity, Trailer};
    use wafer_core::units::{CpCount, Fbn, FileId, Pvbn, VolumeId, Vvbn};

    use super::*;

    fn trailer(pvbn: u64, volume: u32, cp: u64) -> [u8; TRAILER_SIZE] {
        let identity = Identity {
            pvbn: Pvbn(pvbn),
            vvbn: Vvbn(pvbn + 3),
            volume: VolumeId(volume),
            file: FileId(64),
            fbn: Fbn(77_000_000),
            level: 1,
            cp: CpCount(cp),
        };
        Trailer::new(0xdead_beef, identity).encode()
    }

    #[test]
    fn a_lab_trailer_keeps_every_byte_in_half_the_room() {
        for t in [
            trailer(1, 0, 1),
            trailer(720_000_000, u32::MAX, 6_000),
            trailer((1 << 40) - 4, 7, (1 << 24) - 1),
        ] {
            assert_eq!(expand(&compact(&t)), Compact::Trailer(t));
        }
        assert_eq!(expand(&compact(&[0; TRAILER_SIZE])), Compact::Zeros);
        assert_eq!(expand(&[0; COMPACT_SIZE]), Compact::Zeros, "never written");
    }

    #[test]
    fn what_does_not_fit_is_marked_to_be_kept_elsewhere() {
        let mut stray = trailer(5, 0, 1);
        stray[60] = 1;
        let mut foreign = [7; TRAILER_SIZE];
        foreign[0] = 0;
        for t in [
            trailer(1 << 40, 0, 1),
            trailer(5, 0, 1 << 24),
            stray,
            foreign,
        ] {
            assert_eq!(expand(&compact(&t)), Compact::Elsewhere);
        }
    }
}
