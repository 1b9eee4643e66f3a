//! An in-place array's RAID-5 groups side by side: the data space of module
//! `placement` turned into disk commands.
//!
//! Every group is the same RAID-5 set (module `layout`) of `disks` disks,
//! and holds `group_blocks` blocks of the data space, a whole number of
//! stripes: group `g` holds data blocks `g * group_blocks ..` and its disks
//! are the array's disks `g * disks ..`. So the data space's stripe `s`
//! (data blocks `s * stripe_blocks ..`) is stripe `s mod S` of group
//! `s div S`, `S` stripes to a group, and a stripe update, a read piece or a
//! destage run never leaves its group. With one group this is the group's
//! layout unchanged.

use super::layout::{Layout, Piece, StripePlan, StripeWrite};

/// The array's groups, each laid out alike.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Groups {
    layout: Layout,
    groups: u32,
    group_blocks: u64,
}

impl Groups {
    /// `groups` groups laid out as `layout`, each holding `group_blocks`
    /// blocks of the data space (a whole number of stripes).
    pub fn new(layout: Layout, groups: u32, group_blocks: u64) -> Groups {
        assert_eq!(
            group_blocks % layout.stripe_blocks(),
            0,
            "a group holds whole stripes"
        );
        Groups {
            layout,
            groups,
            group_blocks,
        }
    }

    /// Disks in the array.
    pub fn disks(&self) -> u32 {
        self.layout.disks() * self.groups
    }

    /// Data blocks per stripe.
    pub fn stripe_blocks(&self) -> u64 {
        self.layout.stripe_blocks()
    }

    /// Stripes per group.
    fn group_stripes(&self) -> u64 {
        self.group_blocks / self.stripe_blocks()
    }

    /// The group holding data blocks `first..end` and where they start in
    /// it.
    fn group_of(&self, first: u64, end: u64) -> (u32, u64) {
        let group = first / self.group_blocks.max(1);
        let base = group * self.group_blocks;
        assert!(
            end <= base + self.group_blocks,
            "data blocks {first}..{end} cross a group's end"
        );
        (group as u32, base)
    }

    /// Moves a group's pieces onto the array's disks.
    fn on_array_disks(&self, group: u32, mut pieces: Vec<Piece>) -> Vec<Piece> {
        let first_disk = group * self.layout.disks();
        pieces.iter_mut().for_each(|piece| piece.disk += first_disk);
        pieces
    }

    /// The disk commands that read data blocks `first..end`, all in one
    /// group.
    pub fn read_pieces(&self, first: u64, end: u64) -> Vec<Piece> {
        let (group, base) = self.group_of(first, end);
        let pieces = self.layout.read_pieces(first - base, end - base);
        self.on_array_disks(group, pieces)
    }

    /// The stripes data blocks `first..end` (in one group) touch, numbered
    /// in the data space.
    pub fn stripe_writes(&self, first: u64, end: u64) -> Vec<StripeWrite> {
        let (group, base) = self.group_of(first, end);
        let first_stripe = u64::from(group) * self.group_stripes();
        let mut writes = self.layout.stripe_writes(first - base, end - base);
        writes.iter_mut().for_each(|w| w.stripe += first_stripe);
        writes
    }

    /// The disk commands of `write` (a stripe numbered in the data space).
    pub fn plan(&self, write: &StripeWrite) -> StripePlan {
        let group = write.stripe / self.group_stripes();
        let local = StripeWrite {
            stripe: write.stripe % self.group_stripes(),
            chunks: write.chunks.clone(),
        };
        let plan = self.layout.plan(&local);
        let group = group as u32;
        StripePlan {
            reads: self.on_array_disks(group, plan.reads),
            writes: self.on_array_disks(group, plan.writes),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::super::placement::{LunBlock, LunPlacement, Placement};
    use super::*;

    /// Three groups of four disks, stripes of three 2-block chunks.
    fn small(placement: LunPlacement, luns: &[u64]) -> (Placement, Groups) {
        let placement = Placement::new(3, 6, placement, luns);
        let layout = Layout::new(4, 3, 2, placement.group_blocks());
        let groups = Groups::new(layout, 3, placement.group_blocks());
        (placement, groups)
    }

    #[test]
    fn every_lun_block_has_its_own_disk_block() {
        let luns = [50, 13, 36];
        for kind in [
            LunPlacement::Striped { multiplier: 2 },
            LunPlacement::RoundRobin,
        ] {
            let (placement, groups) = small(kind, &luns);
            let mut homes = BTreeSet::new();
            for (lun, &blocks) in luns.iter().enumerate() {
                for block in 0..blocks {
                    let ranges = placement.data_ranges(lun, LunBlock(block), LunBlock(block + 1));
                    let [range] = ranges.as_slice() else {
                        panic!("one block is one range");
                    };
                    let pieces = groups.read_pieces(range.start, range.end);
                    let [piece] = pieces.as_slice() else {
                        panic!("one block is one piece");
                    };
                    assert!(piece.disk < groups.disks());
                    let home = (piece.disk / 4, piece.disk % 4, piece.block);
                    assert!(homes.insert(home), "{kind:?}: two blocks at {home:?}");
                }
            }
            assert_eq!(homes.len(), 99);
        }
    }

    #[test]
    fn a_stripe_update_stays_on_its_groups_disks() {
        let (placement, groups) = small(LunPlacement::Striped { multiplier: 1 }, &[60]);
        let second_group = placement.group_blocks();
        let writes = groups.stripe_writes(second_group + 1, second_group + 2);
        assert_eq!(writes[0].stripe, second_group / 6);
        let plan = groups.plan(&writes[0]);
        let disks: Vec<u32> = plan
            .reads
            .iter()
            .chain(&plan.writes)
            .map(|p| p.disk)
            .collect();
        assert!(disks.iter().all(|d| (4..8).contains(d)), "{disks:?}");
    }
}
