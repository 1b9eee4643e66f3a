//! Trailers in 24 bytes, for the lab's content.
//!
//! A trailer (see `wafer_core::format`) is 64 bytes: the magic number, a
//! checksum, the block's pvbn and vvbn, volume, file, fbn, level and CP, and
//! fifteen bytes of zeros. In the lab, the pvbn is known from where the block
//! lies (the caller passes it in both directions), and the other numbers are
//! small (block numbers below 2^40, fewer than 2^24 CPs, levels below 64,
//! volume numbers below 2^16 or the aggregate's own, all ones), so the same
//! trailer fits in 24 bytes: a tag holding the level, then each field in as
//! few bytes as it needs here. With its 8-byte stamp, a block's record is 32
//! bytes: two to a cache line, never one across two. A trailer is kept
//! compact only if it expands back, at the same pvbn, to exactly the 64 bytes
//! given, so nothing is ever lost: any other trailer (a larger number, a pvbn
//! that is not where the block lies, bytes that are not a wafer trailer) is
//! marked as kept in full elsewhere. All-zero compact bytes, as a block never
//! written reads, expand to 64 zero bytes.

use wafer_core::format::{TRAILER_MAGIC, TRAILER_SIZE};
use wafer_core::units::Pvbn;

/// Bytes of one compact trailer.
pub const COMPACT_SIZE: usize = 24;

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
/// The tag is the first byte's low bits; the level is the rest of it.
const TAG_BITS: u32 = 2;
const TAG_MASK: u8 = (1 << TAG_BITS) - 1;

/// Where the pvbn sits in a trailer: eight bytes, little-endian.
const PVBN_AT: usize = 8;
/// Where the level sits in a trailer: one byte.
const LEVEL_AT: usize = 40;

/// Where each other field sits: (offset in the trailer, offset in the
/// compact form, bytes kept), little-endian both sides. A field kept
/// narrower than it is widens with zeros, but for the volume number.
const FIELDS: [(usize, usize, usize); 6] = [
    (4, 1, 4),   // checksum
    (16, 5, 5),  // vvbn
    (24, 10, 2), // volume
    (28, 12, 4), // file
    (32, 16, 5), // fbn
    (48, 21, 3), // cp
];
/// The volume number's four bytes in a trailer. Kept in two, whose all
/// ones stand for all four's: the aggregate's own number.
const VOLUME: core::ops::Range<usize> = 24..28;

/// The compact form of `trailer`, for a block at `pvbn`, or the mark that
/// it is kept elsewhere.
pub fn compact(trailer: &[u8; TRAILER_SIZE], pvbn: Pvbn) -> [u8; COMPACT_SIZE] {
    let mut out = [0; COMPACT_SIZE];
    if trailer.iter().all(|&byte| byte == 0) {
        return out;
    }
    out[0] = TAG_TRAILER | trailer[LEVEL_AT] << TAG_BITS;
    for (at, to, len) in FIELDS {
        out[to..to + len].copy_from_slice(&trailer[at..at + len]);
    }
    if expand(&out, pvbn) != Compact::Trailer(*trailer) {
        out = [0; COMPACT_SIZE];
        out[0] = TAG_ELSEWHERE;
    }
    out
}

/// True if `compact` marks a trailer kept in full elsewhere.
pub fn kept_elsewhere(compact: &[u8; COMPACT_SIZE]) -> bool {
    compact[0] & TAG_MASK == TAG_ELSEWHERE
}

/// What compact bytes stand for, for a block at `pvbn`.
pub fn expand(compact: &[u8; COMPACT_SIZE], pvbn: Pvbn) -> Compact {
    match compact[0] & TAG_MASK {
        TAG_ZEROS => Compact::Zeros,
        TAG_TRAILER => {
            let mut out = [0; TRAILER_SIZE];
            out[..4].copy_from_slice(&TRAILER_MAGIC.to_le_bytes());
            out[PVBN_AT..PVBN_AT + 8].copy_from_slice(&pvbn.0.to_le_bytes());
            out[LEVEL_AT] = compact[0] >> TAG_BITS;
            for (at, from, len) in FIELDS {
                out[at..at + len].copy_from_slice(&compact[from..from + len]);
            }
            let volume = &mut out[VOLUME];
            if volume[..2] == [u8::MAX; 2] {
                volume[2..].fill(u8::MAX);
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
    use wafer_core::format::{AGGREGATE_VOLUME, Identity, Trailer};
    use wafer_core::units::{CpCount, Fbn, FileId, Pvbn, VolumeId, Vvbn};

    use super::*;

    fn identity(pvbn: u64, volume: u32, cp: u64) -> Identity {
        Identity {
            pvbn: Pvbn(pvbn),
            vvbn: Vvbn(pvbn + 3),
            volume: VolumeId(volume),
            file: FileId(64),
            fbn: Fbn(77_000_000),
            level: 1,
            cp: CpCount(cp),
        }
    }

    fn encoded(identity: Identity) -> [u8; TRAILER_SIZE] {
        Trailer::new(0xdead_beef, identity).encode()
    }

    /// Compacts and expands `identity`'s trailer where `identity` says it lies.
    fn round_trip(identity: Identity) -> Compact {
        expand(&compact(&encoded(identity), identity.pvbn), identity.pvbn)
    }

    #[test]
    fn a_lab_trailer_keeps_every_byte_in_three_eighths_of_the_room() {
        let parity = Identity {
            pvbn: Pvbn(0),
            vvbn: Vvbn(0),
            volume: AGGREGATE_VOLUME,
            file: FileId(u32::MAX),
            fbn: Fbn(35_000_000),
            level: 0,
            cp: CpCount(0),
        };
        let deep = Identity {
            level: 63,
            ..identity(9, 0xfffe, 2)
        };
        for id in [
            identity(1, 0, 1),
            identity(720_000_000, AGGREGATE_VOLUME.0, 6_000),
            identity((1 << 40) - 4, 7, (1 << 24) - 1),
            Identity {
                pvbn: Pvbn(u64::MAX),
                ..identity(0, 0, 1)
            },
            parity,
            deep,
        ] {
            assert_eq!(round_trip(id), Compact::Trailer(encoded(id)), "{id:?}");
        }
        let zeros = compact(&[0; TRAILER_SIZE], Pvbn(12));
        assert_eq!(expand(&zeros, Pvbn(12)), Compact::Zeros);
        assert_eq!(
            expand(&[0; COMPACT_SIZE], Pvbn(5)),
            Compact::Zeros,
            "never written"
        );
    }

    #[test]
    fn what_does_not_fit_is_marked_to_be_kept_elsewhere() {
        let mut stray = encoded(identity(5, 0, 1));
        stray[60] = 1;
        let mut foreign = [7; TRAILER_SIZE];
        foreign[0] = 0;
        let at = Pvbn(5);
        for t in [
            encoded(identity(6, 0, 1)),
            encoded(Identity {
                vvbn: Vvbn(1 << 40),
                ..identity(5, 0, 1)
            }),
            encoded(identity(5, 0, 1 << 24)),
            encoded(identity(5, 1 << 16, 1)),
            encoded(identity(5, 0xffff, 1)),
            encoded(Identity {
                level: 64,
                ..identity(5, 0, 1)
            }),
            stray,
            foreign,
        ] {
            let kept = compact(&t, at);
            assert!(kept_elsewhere(&kept));
            assert_eq!(expand(&kept, at), Compact::Elsewhere);
        }
    }
}
