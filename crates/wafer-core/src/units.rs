//! Time and address newtypes.
//!
//! The core owns its notion of time: an [`Instant`] is nanoseconds since an
//! arbitrary epoch chosen by the driver (the server's monotonic clock, or the
//! lab's virtual clock starting at zero). Nothing in the core reads a clock.
//!
//! Block addresses are distinct types so that a volume block number can never be
//! used where a physical one is meant: [`Pvbn`] numbers the aggregate's blocks
//! across its RAID groups, [`Vvbn`] numbers a flexible volume's blocks, and
//! [`Fbn`] numbers the blocks of one file (a LUN or a metadata file).

use core::fmt;
use core::ops::{Add, Sub};

/// A point in time, in nanoseconds since the driver's epoch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant(pub u64);

/// A span of time in nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Duration(pub u64);

impl Duration {
    /// `n` milliseconds.
    pub const fn from_millis(n: u64) -> Duration {
        Duration(n * 1_000_000)
    }

    /// `n` seconds.
    pub const fn from_secs(n: u64) -> Duration {
        Duration(n * 1_000_000_000)
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, rhs: Duration) -> Instant {
        Instant(self.0.saturating_add(rhs.0))
    }
}

impl Sub<Instant> for Instant {
    type Output = Duration;
    fn sub(self, rhs: Instant) -> Duration {
        Duration(self.0.saturating_sub(rhs.0))
    }
}

macro_rules! block_number {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(pub u64);

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}", self.0)
            }
        }
    };
}

block_number!(
    /// Physical volume block number: a block of the aggregate, RAID group by
    /// RAID group (see `aggregate::Layout`).
    Pvbn
);
block_number!(
    /// Virtual volume block number: a block of one flexible volume's own space,
    /// mapped onto a [`Pvbn`] by the volume's container map.
    Vvbn
);
block_number!(
    /// File block number: the index of a 4 KiB block within one file.
    Fbn
);

/// An aggregate's identifier within its node, recorded in its superblock
/// and in every NVLog record of its changes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AggrId(pub u32);

/// A flexible volume's identifier within its aggregate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct VolumeId(pub u32);

/// A file's inode number within its volume (or within the aggregate, for the
/// aggregate's own metadata files).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FileId(pub u32);

/// A snapshot's number within its volume, 1..=255 (ONTAP's limit).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SnapshotId(pub u8);

/// A consistency point's sequence number. CP `n` is the on-disk image that the
/// `n`th committed superblock describes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CpCount(pub u64);

/// A block of the node's Flash Cache device, numbered from 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FlashSlot(pub u64);

/// A disk slot of the aggregate: RAID group members first, group by group in
/// position order, then spares.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DiskId(pub u32);

impl fmt::Display for DiskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}
