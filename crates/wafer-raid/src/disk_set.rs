//! A set of disk positions within one RAID group, as a bit mask.
//!
//! Groups hold at most 28 disks, so a `u32` holds any set of them; sets are
//! copied freely and never allocate, which matters on the degraded-I/O paths
//! where a set is built for every stripe.

use core::fmt;

use crate::DiskIndex;

/// The largest group a `DiskSet` can describe.
pub const MAX_GROUP_DISKS: usize = 32;

/// A set of disk positions in one RAID group.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct DiskSet(u32);

impl DiskSet {
    /// The empty set.
    pub const EMPTY: DiskSet = DiskSet(0);

    /// Positions `0..n`.
    pub fn first(n: usize) -> DiskSet {
        assert!(n <= MAX_GROUP_DISKS, "{n} disks exceed a DiskSet");
        DiskSet(if n == MAX_GROUP_DISKS {
            u32::MAX
        } else {
            (1u32 << n) - 1
        })
    }

    /// A set holding the given positions.
    pub fn of(disks: impl IntoIterator<Item = DiskIndex>) -> DiskSet {
        disks.into_iter().fold(DiskSet::EMPTY, DiskSet::with)
    }

    /// This set with `disk` added.
    #[must_use]
    pub fn with(self, disk: DiskIndex) -> DiskSet {
        assert!(
            disk.as_usize() < MAX_GROUP_DISKS,
            "{disk:?} exceeds a DiskSet"
        );
        DiskSet(self.0 | 1 << disk.0)
    }

    /// Whether `disk` is in the set.
    pub fn contains(self, disk: DiskIndex) -> bool {
        disk.as_usize() < MAX_GROUP_DISKS && self.0 & (1 << disk.0) != 0
    }

    /// Number of disks in the set.
    pub fn len(self) -> usize {
        self.0.count_ones() as usize
    }

    /// Whether the set is empty.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Disks in both sets.
    #[must_use]
    pub fn intersection(self, other: DiskSet) -> DiskSet {
        DiskSet(self.0 & other.0)
    }

    /// Disks in either set.
    #[must_use]
    pub fn union(self, other: DiskSet) -> DiskSet {
        DiskSet(self.0 | other.0)
    }

    /// Disks in `self` but not in `other`.
    #[must_use]
    pub fn difference(self, other: DiskSet) -> DiskSet {
        DiskSet(self.0 & !other.0)
    }

    /// Whether every disk of `self` is in `other`.
    pub fn is_subset(self, other: DiskSet) -> bool {
        self.difference(other).is_empty()
    }

    /// Every subset of this set with exactly `size` disks, in ascending order of
    /// their bit masks (Gosper's hack over the members' ranks).
    pub fn subsets_of_size(self, size: usize) -> impl Iterator<Item = DiskSet> {
        let members: Vec<DiskIndex> = self.iter().collect();
        let limit = 1u64 << members.len();
        let first = (size <= members.len()).then(|| (1u64 << size) - 1);
        core::iter::successors(first, move |&ranks| {
            if ranks == 0 {
                return None;
            }
            let lowest = ranks & ranks.wrapping_neg();
            let ripple = ranks + lowest;
            let next = (((ripple ^ ranks) >> 2) / lowest) | ripple;
            (next < limit).then_some(next)
        })
        .map(move |ranks| {
            DiskSet::of(
                members
                    .iter()
                    .enumerate()
                    .filter(|(rank, _)| ranks & (1 << rank) != 0)
                    .map(|(_, &disk)| disk),
            )
        })
    }

    /// The positions in ascending order.
    pub fn iter(self) -> impl Iterator<Item = DiskIndex> {
        (0..MAX_GROUP_DISKS as u16)
            .map(DiskIndex)
            .filter(move |&disk| self.contains(disk))
    }
}

impl fmt::Debug for DiskSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set()
            .entries(self.iter().map(|disk| disk.0))
            .finish()
    }
}

impl FromIterator<DiskIndex> for DiskSet {
    fn from_iter<T: IntoIterator<Item = DiskIndex>>(iter: T) -> Self {
        DiskSet::of(iter)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn binomial(n: usize, k: usize) -> usize {
        (0..k).fold(1, |acc, i| acc * (n - i) / (i + 1))
    }

    #[test]
    fn subsets_of_size_lists_each_subset_once() {
        let set = DiskSet::of([1, 3, 4, 8, 9, 20].map(DiskIndex));
        for size in 0..=7 {
            let subsets: Vec<DiskSet> = set.subsets_of_size(size).collect();
            assert_eq!(subsets.len(), binomial(6, size), "size {size}");
            assert!(subsets.iter().all(|s| s.len() == size && s.is_subset(set)));
            let distinct: std::collections::BTreeSet<Vec<u16>> = subsets
                .iter()
                .map(|s| s.iter().map(|d| d.0).collect())
                .collect();
            assert_eq!(
                distinct.len(),
                subsets.len(),
                "size {size} repeats a subset"
            );
        }
        assert_eq!(DiskSet::first(28).subsets_of_size(3).count(), 3276);
    }
}
