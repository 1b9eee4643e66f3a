//! What a block holds: real 4 KiB of bytes, or a 64-bit stamp standing for them.
//!
//! The engine's decisions (where a block goes, which stripe is partial, what
//! must be read before a write can merge) never depend on what a data block
//! says, only on which blocks change. So the engine is generic over its
//! payload. [`Bytes`] is the real thing: the server and the simulator store
//! and verify every byte. [`Stamps`] is for the performance lab, where a run
//! writes hundreds of millions of blocks that nobody reads for their meaning:
//! each block is one `u64`, a digest of its history.
//!
//! A stamp is exact where the engine needs exactness. Parity is computed over
//! stamps (`wafer_raid::Stamp`), so a lost disk is rebuilt stamp for stamp;
//! checksums are taken over stamps, so a stale or misdirected block is caught.
//! Stamp 0 is the all-zero block, as a block never written reads. A write of a
//! whole block stamps it with the digest of its bytes (all zeros give 0); a
//! write of part of a block mixes the old stamp with the digest of the part,
//! so two blocks with equal stamps have equal histories, not necessarily equal
//! bytes. Reading a stamp block returns its stamp's eight bytes repeated, and
//! a stamp filer's read replies with the stamps of the blocks it covers
//! ([`StampRead`]), which give those bytes on demand: a host that only counts
//! its reads (the lab's) does not pay for bytes it never looks at.
//! A whole block's stamp, and every metadata block's, is the [`WordSum`]
//! digest of its little-endian words. Maps, container maps and indirect
//! blocks keep that sum up to date as they change, so a CP stamps them
//! without reading them again (a byte filer lays the bytes out). The resident trees
//! keep the metadata itself, but a stamp filer cannot read it back from disk,
//! so only a byte filer can be mounted.

use wafer_raid::{Stamp, StripeUnit};

use crate::format::{BlockWords, block_from_words};
use crate::tree::{Node, encode_node};
use crate::units::Fbn;
use crate::word_sum::WordSum;
use crate::{BLOCK_SIZE, Block};

/// What a read of a LUN replies with, put together block by block as the
/// blocks arrive.
pub trait ReadData: Clone + core::fmt::Debug + PartialEq + Eq + Send + Sync + 'static {
    /// The bytes read.
    fn into_bytes(self) -> Vec<u8>;
}

/// A byte filer replies with the bytes themselves.
impl ReadData for Vec<u8> {
    fn into_bytes(self) -> Vec<u8> {
        self
    }
}

/// What every block of one filer holds.
pub trait Payload:
    Clone + Copy + core::fmt::Debug + Default + PartialEq + Eq + Send + Sync + 'static
{
    /// One block's content, as the cache and the disks hold it.
    type Content: Clone + core::fmt::Debug + PartialEq + Eq + Send + Sync + 'static;
    /// The same content as the RAID parity arithmetic sees it.
    type Unit: StripeUnit;
    /// What a read of a LUN replies with.
    type ReadData: ReadData;

    /// The content of a block never written.
    fn zero() -> Self::Content;
    /// The content of an encoded metadata block.
    fn from_bytes(bytes: Box<Block>) -> Self::Content;
    /// The content of a metadata block that encodes to `words`,
    /// little-endian, whose running sum is `sum`: the same as
    /// [`Payload::from_bytes`] of those bytes.
    fn from_words(words: &BlockWords, sum: WordSum) -> Self::Content;
    /// The content of indirect block `node`: the same as
    /// [`Payload::from_words`] of [`encode_node`]'s words.
    fn from_node(node: &Node) -> Self::Content;
    /// Writes `len` bytes at `at` of the block: `bytes`, or zeros for `None`.
    fn write(content: &mut Self::Content, at: usize, bytes: Option<&[u8]>, len: usize);
    /// Reads `out.len()` bytes from `at` of the block.
    fn read(content: &Self::Content, at: usize, out: &mut [u8]);
    /// A read of `len` bytes from byte `offset` of a LUN, all zeros until
    /// blocks are put in (a hole reads as zeros).
    fn read_data(offset: u64, len: usize) -> Self::ReadData;
    /// Puts the part of block `fbn` that the read from byte `offset` covers
    /// into it.
    fn put_block(data: &mut Self::ReadData, offset: u64, fbn: Fbn, content: &Self::Content);
    /// The content as the parity arithmetic sees it.
    fn as_unit(content: &Self::Content) -> &Self::Unit;
    /// A parity unit (a rebuilt block, a computed parity block) as content.
    fn from_unit(unit: Self::Unit) -> Self::Content;
    /// The bytes of an encoded metadata block, if this payload keeps them.
    fn unit_bytes(unit: &Self::Unit) -> Option<&Block>;
    /// The checksum that block pointers and trailers record for a block.
    fn unit_checksum(unit: &Self::Unit) -> u32;
    /// Whether a metadata block read back from disk holds its bytes (stamps
    /// hold only their digest).
    const READS_METADATA: bool;

    /// The checksum that block pointers and trailers record for `content`.
    fn checksum(content: &Self::Content) -> u32 {
        Self::unit_checksum(Self::as_unit(content))
    }

    /// The bytes of an encoded metadata block, if this payload keeps them.
    fn bytes(content: &Self::Content) -> Option<&Block> {
        Self::unit_bytes(Self::as_unit(content))
    }

    /// The content as an owned parity unit.
    fn unit(content: &Self::Content) -> Self::Unit {
        Self::as_unit(content).clone()
    }
}

/// Real 4 KiB blocks: what the server and the simulator run on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Bytes;

impl Payload for Bytes {
    type Content = Box<Block>;
    type Unit = Block;
    const READS_METADATA: bool = true;

    fn zero() -> Box<Block> {
        Box::new([0; BLOCK_SIZE])
    }

    fn from_bytes(bytes: Box<Block>) -> Box<Block> {
        bytes
    }

    fn from_words(words: &BlockWords, sum: WordSum) -> Box<Block> {
        check_sum(words, sum);
        block_from_words(words)
    }

    fn from_node(node: &Node) -> Box<Block> {
        let words = encode_node(node);
        check_sum(&words, node.sum());
        block_from_words(&words)
    }

    fn write(content: &mut Box<Block>, at: usize, bytes: Option<&[u8]>, len: usize) {
        let range = &mut content[at..at + len];
        match bytes {
            Some(bytes) => range.copy_from_slice(bytes),
            None => range.fill(0),
        }
    }

    fn read(content: &Box<Block>, at: usize, out: &mut [u8]) {
        out.copy_from_slice(&content[at..at + out.len()]);
    }

    type ReadData = Vec<u8>;

    fn read_data(_: u64, len: usize) -> Vec<u8> {
        vec![0; len]
    }

    fn put_block(data: &mut Vec<u8>, offset: u64, fbn: Fbn, content: &Box<Block>) {
        let (from, to, len) = overlap(offset, data.len(), fbn);
        Self::read(content, from, &mut data[to..to + len]);
    }

    fn as_unit(content: &Box<Block>) -> &Block {
        content
    }

    fn from_unit(unit: Block) -> Box<Block> {
        Box::new(unit)
    }

    fn unit_bytes(unit: &Block) -> Option<&Block> {
        Some(unit)
    }

    fn unit_checksum(unit: &Block) -> u32 {
        crc32c::crc32c(unit)
    }
}

/// One 64-bit stamp per block: what the performance lab runs on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stamps;

impl Payload for Stamps {
    type Content = Stamp;
    type Unit = Stamp;
    const READS_METADATA: bool = false;

    fn zero() -> Stamp {
        Stamp(0)
    }

    fn from_bytes(bytes: Box<Block>) -> Stamp {
        Stamp(block_digest(&bytes))
    }

    fn from_words(words: &BlockWords, sum: WordSum) -> Stamp {
        check_sum(words, sum);
        Stamp(sum.digest())
    }

    fn from_node(node: &Node) -> Stamp {
        if cfg!(debug_assertions) {
            check_sum(&encode_node(node), node.sum());
        }
        Stamp(node.sum().digest())
    }

    fn write(content: &mut Stamp, at: usize, bytes: Option<&[u8]>, len: usize) {
        content.0 = match (at, len, bytes) {
            (_, 0, _) => content.0,
            (0, BLOCK_SIZE, None) => 0,
            (0, BLOCK_SIZE, Some(bytes)) => block_digest(bytes.try_into().expect("a whole block")),
            (_, _, bytes) => match bytes.map_or(0, digest) {
                0 if content.0 == 0 => 0,
                part => nonzero(mix(mix(mix(content.0, at as u64), len as u64), part)),
            },
        };
    }

    fn read(content: &Stamp, at: usize, out: &mut [u8]) {
        if content.0 == 0 {
            return out.fill(0);
        }
        // The pattern rotated so that out[0] is byte `at % 8` of the stamp.
        let pattern = content.0.rotate_right(8 * (at % 8) as u32).to_le_bytes();
        let mut chunks = out.chunks_exact_mut(8);
        for chunk in &mut chunks {
            chunk.copy_from_slice(&pattern);
        }
        let tail = chunks.into_remainder();
        let len = tail.len();
        tail.copy_from_slice(&pattern[..len]);
    }

    type ReadData = StampRead;

    fn read_data(offset: u64, len: usize) -> StampRead {
        let blocks = blocks_covered(offset, len as u64);
        StampRead {
            offset,
            len,
            stamps: vec![Stamp(0); (blocks.end - blocks.start) as usize],
        }
    }

    fn put_block(data: &mut StampRead, offset: u64, fbn: Fbn, content: &Stamp) {
        debug_assert_eq!(data.offset, offset, "a read keeps its offset");
        let first = blocks_covered(data.offset, data.len as u64).start;
        data.stamps[(fbn.0 - first) as usize] = *content;
    }

    fn as_unit(content: &Stamp) -> &Stamp {
        content
    }

    fn from_unit(unit: Stamp) -> Stamp {
        unit
    }

    fn unit_bytes(_: &Stamp) -> Option<&Block> {
        None
    }

    /// A stamp is a digest already, so its checksum only folds its two
    /// halves together: any one flipped bit still changes it, which is what
    /// bit rot does to a stamp, and different stamps collide as rarely as
    /// two 32-bit checksums do.
    fn unit_checksum(unit: &Stamp) -> u32 {
        (unit.0 ^ unit.0 >> 32) as u32
    }
}

/// A stamp filer's read: the stamp of every block it covers, in order,
/// from which its bytes follow.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StampRead {
    offset: u64,
    len: usize,
    stamps: Vec<Stamp>,
}

impl ReadData for StampRead {
    fn into_bytes(self) -> Vec<u8> {
        let mut out = vec![0; self.len];
        let first = blocks_covered(self.offset, self.len as u64).start;
        for (fbn, stamp) in (first..).map(Fbn).zip(&self.stamps) {
            let (from, to, len) = overlap(self.offset, self.len, fbn);
            Stamps::read(stamp, from, &mut out[to..to + len]);
        }
        out
    }
}

/// The blocks that bytes `offset..offset + length` of a LUN lie in (a
/// length running past the largest offset is cut there).
pub(crate) fn blocks_covered(offset: u64, length: u64) -> core::ops::Range<u64> {
    let block = BLOCK_SIZE as u64;
    offset / block..offset.saturating_add(length).div_ceil(block)
}

/// Where block `fbn` and a read of `len` bytes from byte `offset` overlap:
/// the overlap's start in the block, its start in the read, and its length.
fn overlap(offset: u64, len: usize, fbn: Fbn) -> (usize, usize, usize) {
    let block = BLOCK_SIZE as u64;
    let start = (fbn.0 * block).max(offset);
    let end = ((fbn.0 + 1) * block).min(offset + len as u64);
    (
        (start - fbn.0 * block) as usize,
        (start - offset) as usize,
        (end - start) as usize,
    )
}

/// A digest of `bytes`: 0 for all zeros, never 0 otherwise. Each step of a
/// chain of mixes waits for the one before, so the words are mixed in four
/// chains side by side (word `i` into chain `i % 4`), which are then folded
/// together with whatever is left over.
fn digest(bytes: &[u8]) -> u64 {
    if is_zero(bytes) {
        return 0;
    }
    let word = |bytes: &[u8]| u64::from_le_bytes(bytes.try_into().expect("eight bytes"));
    let quads = bytes.chunks_exact(32);
    let words = quads.remainder().chunks_exact(8);
    let tail = words.remainder();
    let h = mix_words(
        quads.map(|quad| [0, 8, 16, 24].map(|at| word(&quad[at..at + 8]))),
        words.map(word),
    );
    nonzero(tail.iter().fold(h, |h, &byte| mix(h, u64::from(byte))))
}

/// The digest of a whole block: the [`WordSum`] of its little-endian words.
fn block_digest(bytes: &Block) -> u64 {
    if is_zero(bytes) {
        return 0;
    }
    let mut words = [0u64; crate::format::WORDS_PER_BLOCK];
    for (word, le) in words.iter_mut().zip(bytes.chunks_exact(8)) {
        *word = u64::from_le_bytes(le.try_into().expect("eight bytes"));
    }
    WordSum::of(&words).digest()
}

/// Asserts, where debug assertions are on (the test suites), that a running
/// sum is the sum of the words as they stand: a structure that changed a
/// word without telling its sum is caught at the next CP.
fn check_sum(words: &BlockWords, sum: WordSum) {
    debug_assert_eq!(
        sum,
        WordSum::of(words),
        "a metadata block's running sum has drifted from its words"
    );
}

/// Mixes words in four chains, the words of each quad one into each chain,
/// folds the chains together, and mixes in the words left over.
fn mix_words(quads: impl Iterator<Item = [u64; 4]>, rest: impl Iterator<Item = u64>) -> u64 {
    let mut chains = [0u64; 4];
    for quad in quads {
        for (chain, word) in chains.iter_mut().zip(quad) {
            *chain = mix(*chain, word);
        }
    }
    rest.fold(chains.into_iter().fold(0, mix), mix)
}

/// Whether `bytes` are all zero: an OR of words, which vectorises.
fn is_zero(bytes: &[u8]) -> bool {
    let words = bytes.chunks_exact(8);
    let tail = words.remainder().iter().fold(0, |acc, &b| acc | b);
    let body = words.fold(0, |acc, w| {
        acc | u64::from_le_bytes(w.try_into().expect("eight bytes"))
    });
    body == 0 && tail == 0
}

/// One step of the digest; mixing a zero word into a zero state stays zero.
fn mix(state: u64, word: u64) -> u64 {
    (state.rotate_left(23) ^ word).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

fn nonzero(stamp: u64) -> u64 {
    stamp.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stamp_after(writes: &[(usize, Option<&[u8]>, usize)]) -> Stamp {
        let mut content = Stamps::zero();
        for &(at, bytes, len) in writes {
            Stamps::write(&mut content, at, bytes, len);
        }
        content
    }

    #[test]
    fn zeros_keep_a_stamp_block_zero_and_anything_else_does_not() {
        let zeros = [0u8; BLOCK_SIZE];
        assert_eq!(stamp_after(&[(0, Some(&zeros), BLOCK_SIZE)]), Stamp(0));
        assert_eq!(stamp_after(&[(512, None, 512)]), Stamp(0));
        assert_eq!(stamp_after(&[(512, Some(&zeros[..512]), 512)]), Stamp(0));
        assert_ne!(stamp_after(&[(512, Some(&[1; 512]), 512)]), Stamp(0));
        let mut one = zeros;
        one[4095] = 1;
        assert_ne!(stamp_after(&[(0, Some(&one), BLOCK_SIZE)]), Stamp(0));
    }

    #[test]
    fn the_digest_tells_apart_blocks_differing_in_a_byte_or_in_word_order() {
        let block: Vec<u8> = (0..BLOCK_SIZE).map(|i| (i * 7 % 251) as u8).collect();
        let with = |change: &dyn Fn(&mut Vec<u8>)| {
            let mut changed = block.clone();
            change(&mut changed);
            digest(&changed)
        };
        let original = digest(&block);
        for at in (0..BLOCK_SIZE).step_by(61) {
            assert_ne!(with(&|b| b[at] ^= 1), original, "a bit of byte {at}");
        }
        let swap_words = |i: usize, j: usize| {
            move |b: &mut Vec<u8>| (0..8).for_each(|k| b.swap(8 * i + k, 8 * j + k))
        };
        assert_ne!(with(&swap_words(0, 4)), original, "two words of one chain");
        assert_ne!(with(&swap_words(0, 1)), original, "words of two chains");
        assert_ne!(
            with(&swap_words(0, 511)),
            original,
            "the first and last words"
        );
        assert_ne!(
            digest(&block[..4093]),
            digest(&block[..4092]),
            "a tail byte"
        );
    }

    #[test]
    fn a_block_stamps_the_same_from_its_words_as_from_its_bytes() {
        let mut words = [0u64; crate::format::WORDS_PER_BLOCK];
        let from_words = |words: &BlockWords| Stamps::from_words(words, WordSum::of(words));
        assert_eq!(from_words(&words), Stamp(0), "zero words, stamp 0");
        for (i, word) in words.iter_mut().enumerate() {
            *word = (i as u64 + 1).wrapping_mul(0x0123_4567_89ab_cdef);
        }
        for last in [0, 1, 2, 3, 509, 511] {
            let mut some = words;
            some[last + 1..].fill(0);
            let bytes = block_from_words(&some);
            assert_eq!(
                from_words(&some),
                Stamps::from_bytes(bytes.clone()),
                "words 0..={last} set"
            );
            let mut written = Stamp(7);
            Stamps::write(&mut written, 0, Some(&bytes[..]), BLOCK_SIZE);
            assert_eq!(written, from_words(&some), "a whole-block write");
        }
    }

    #[test]
    fn a_stamps_checksum_changes_with_any_one_bit_of_it() {
        for stamp in [0, 1, u64::MAX, 0x0123_4567_89AB_CDEF] {
            let sum = Stamps::unit_checksum(&Stamp(stamp));
            for bit in 0..64 {
                let rotten = Stamp(stamp ^ 1 << bit);
                assert_ne!(
                    Stamps::unit_checksum(&rotten),
                    sum,
                    "bit {bit} of {stamp:#x}"
                );
            }
        }
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "running sum has drifted")]
    fn a_running_sum_that_missed_a_change_is_caught() {
        let mut words = [0u64; crate::format::WORDS_PER_BLOCK];
        words[9] = 42;
        let stale = WordSum::of(&words);
        words[10] = 43;
        Stamps::from_words(&words, stale);
    }

    #[test]
    fn a_stamp_records_where_and_what_was_written() {
        let a = stamp_after(&[(512, Some(&[7; 512]), 512)]);
        let b = stamp_after(&[(1024, Some(&[7; 512]), 512)]);
        let c = stamp_after(&[(512, Some(&[8; 512]), 512)]);
        assert_ne!(a, b);
        assert_ne!(a, c);
        let whole = stamp_after(&[(512, Some(&[7; 512]), 512), (0, Some(&[3; 4096]), 4096)]);
        assert_eq!(whole, stamp_after(&[(0, Some(&[3; 4096]), 4096)]));
        assert_eq!(Stamps::from_bytes(Box::new([3; 4096])), whole);
    }

    #[test]
    fn a_stamp_reads_as_its_bytes_repeated_wherever_the_read_starts() {
        let stamp = Stamp(0x0807_0605_0403_0201);
        let mut out = [0u8; 10];
        Stamps::read(&stamp, 6, &mut out);
        assert_eq!(out, [7, 8, 1, 2, 3, 4, 5, 6, 7, 8]);
        Stamps::read(&Stamp(0), 0, &mut out);
        assert_eq!(out, [0; 10]);
        for at in 0..16 {
            let mut long = [0u8; 37];
            Stamps::read(&stamp, at, &mut long);
            let expected: Vec<u8> = (at..at + 37).map(|i| (i % 8 + 1) as u8).collect();
            assert_eq!(long.to_vec(), expected, "from {at}");
        }
    }

    #[test]
    fn a_stamp_read_gives_the_bytes_of_the_blocks_put_in_and_zeros_for_holes() {
        let block = BLOCK_SIZE as u64;
        let stamps = [
            (5, Stamp(0x0807_0605_0403_0201)),
            (7, Stamp(0x1122_3344_5566_7788)),
        ];
        let byte_at = |position: u64| {
            let stamp = stamps.iter().find(|(fbn, _)| *fbn == position / block);
            stamp.map_or(0, |(_, s)| {
                s.0.to_le_bytes()[(position % block % 8) as usize]
            })
        };
        for (offset, len) in [(5 * block + 100, 2 * block as usize + 7), (5 * block, 4096)]
            .into_iter()
            .chain([
                (6 * block + 4095, 2),
                (5 * block + 3, 3 * 4096 - 6),
                (7 * block + 9, 1),
            ])
        {
            let mut read = Stamps::read_data(offset, len);
            for &(fbn, stamp) in stamps.iter().rev() {
                let covered = blocks_covered(offset, len as u64);
                if covered.contains(&fbn) {
                    Stamps::put_block(&mut read, offset, Fbn(fbn), &stamp);
                }
            }
            let expected: Vec<u8> = (offset..offset + len as u64).map(byte_at).collect();
            assert_eq!(read.into_bytes(), expected, "{len} bytes from {offset}");
        }
    }

    #[test]
    fn bytes_write_and_read_what_they_are_given() {
        let mut block = Bytes::zero();
        Bytes::write(&mut block, 4000, Some(&[9; 96]), 96);
        Bytes::write(&mut block, 4090, None, 3);
        let mut out = [1u8; 8];
        Bytes::read(&block, 4088, &mut out);
        assert_eq!(out, [9, 9, 0, 0, 0, 9, 9, 9]);
        assert_eq!(Bytes::checksum(&block), crc32c::crc32c(&block[..]));
    }
}
