//! wafer's RAID layer: RAID-4 and RAID-DP groups, pure and free of I/O.
//!
//! This crate knows the shape of a RAID group ([`RaidGroupGeometry`]: roles,
//! stripes, the mapping between group block numbers and disk blocks) and the
//! arithmetic of its parity: full-stripe encode, partial-stripe update by
//! subtraction or addition ([`ParityUpdatePlan`], [`ParityDelta`]), reconstruction
//! of any one (RAID-4) or any two (RAID-DP) missing disks of a stripe, and scrub
//! verification. It never touches a disk: callers read the blocks a plan names,
//! call in, and write what comes back. It knows nothing of files, time or WAFL.
//!
//! RAID-DP is row-diagonal parity over the prime 257 with each 4 KiB block cut
//! into 256 symbols, so every stripe is a complete codeword; see `rdp` and
//! `docs/FORMAT.md` for the layout.
//!
//! The parity arithmetic is generic over the [`StripeUnit`] one disk holds per
//! stripe: the real 4 KiB [`Block`], or a 64-bit [`Stamp`] by which a
//! performance lab stands in for a block, protected by a P+Q code over
//! GF(2^64) instead of RDP (see `stamp`).
//!
//! Guarantees: a reconstruction either returns the exact blocks that were lost
//! or, past the RAID type's tolerance, refuses with [`ReconstructError`]; it never
//! returns wrong data for a stripe whose surviving blocks are intact. Broken
//! preconditions (a stripe of the wrong width, a disk outside the group) are
//! programming errors and panic.

mod disk_set;
mod geometry;
mod gf64;
mod rdp;
mod stamp;
mod stripe;
mod unit;
mod update;
pub mod xor;

pub use disk_set::{DiskSet, MAX_GROUP_DISKS};
pub use geometry::{Dbn, DiskIndex, DiskRole, Gbn, GeometryError, RaidGroupGeometry, RaidType};
pub use stamp::Stamp;
pub use stripe::{ReconstructError, ScrubReport};
pub use unit::StripeUnit;
pub use update::{ParityDelta, ParityUpdateMethod, ParityUpdatePlan};

/// Bytes in a WAFL block, the unit of RAID on real disks.
pub const BLOCK_SIZE: usize = 4096;

/// One 4 KiB block.
pub type Block = [u8; BLOCK_SIZE];

const _: () = assert!(
    *RaidType::RaidDp.group_size_limits().end() as usize <= MAX_GROUP_DISKS,
    "a DiskSet must hold the widest group"
);
