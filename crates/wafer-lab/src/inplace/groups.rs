//! An in-place array's RAID-5 groups side by side: the data space of module
//! `placement` turned into disk commands.
//!
//! Every group is the same RAID-5 set (module `layout`) of `disks` disks;
//! group `g`'s disks are the array's disks `g * disks ..`. The data space
//! deals stripes round the groups: its stripe `s` (data blocks
//! `s * stripe_blocks ..`) is stripe `s div G` of group `s mod G`, so a
//! stripe update, a read piece or a destage run never leaves its group.
//! With one group this is the group's layout unchanged.

use super::layout::{Layout, Piece, StripePlan, StripeWrite};

/// The array's groups, each laid out alike.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Groups {
    layout: Layout,
    groups: u32,
}

impl Groups {
    /// `groups` groups laid out as `layout`.
    pub fn new(layout: Layout, groups: u32) -> Groups {
        assert!(groups >= 1, "an array of groups");
        Groups { layout, groups }
    }

    /// Disks in the array.
    pub fn disks(&self) -> u32 {
        self.layout.disks() * self.groups
    }

    /// Data blocks per stripe.
    pub fn stripe_blocks(&self) -> u64 {
        self.layout.stripe_blocks()
    }

    /// The group holding data stripe `stripe`, and the stripe's number in
    /// it.
    fn group_stripe(&self, stripe: u64) -> (u32, u64) {
        let groups = u64::from(self.groups);
        ((stripe % groups) as u32, stripe / groups)
    }

    /// The group holding data blocks `first..end` (inside one stripe, on
    /// several groups; one group's data space is its own), and how far the
    /// group's blocks are from them: the group's block is the data block
    /// less the shift.
    fn group_of(&self, first: u64, end: u64) -> (u32, u64) {
        if self.groups == 1 {
            return (0, 0);
        }
        let stripe_blocks = self.stripe_blocks();
        let stripe = first / stripe_blocks;
        assert!(
            end <= (stripe + 1) * stripe_blocks,
            "data blocks {first}..{end} cross a stripe's end"
        );
        let (group, local) = self.group_stripe(stripe);
        (group, (stripe - local) * stripe_blocks)
    }

    /// Moves a group's pieces onto the array's disks.
    fn on_array_disks(&self, group: u32, mut pieces: Vec<Piece>) -> Vec<Piece> {
        let first_disk = group * self.layout.disks();
        pieces.iter_mut().for_each(|piece| piece.disk += first_disk);
        pieces
    }

    /// The disk commands that read data blocks `first..end`, all in one
    /// stripe.
    pub fn read_pieces(&self, first: u64, end: u64) -> Vec<Piece> {
        let (group, shift) = self.group_of(first, end);
        let pieces = self.layout.read_pieces(first - shift, end - shift);
        self.on_array_disks(group, pieces)
    }

    /// The stripe data blocks `first..end` (inside one stripe) touch,
    /// numbered in the data space, with the blocks it touches.
    pub fn stripe_writes(&self, first: u64, end: u64) -> Vec<StripeWrite> {
        let (_, shift) = self.group_of(first, end);
        let mut writes = self.layout.stripe_writes(first - shift, end - shift);
        let shift_stripes = shift / self.stripe_blocks();
        writes.iter_mut().for_each(|w| w.stripe += shift_stripes);
        writes
    }

    /// The disk commands of `write` (a stripe numbered in the data space).
    pub fn plan(&self, write: &StripeWrite) -> StripePlan {
        let (group, stripe) = self.group_stripe(write.stripe);
        let local = StripeWrite {
            stripe,
            chunks: write.chunks.clone(),
        };
        let plan = self.layout.plan(&local);
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
        let groups = Groups::new(layout, 3);
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
        let (_, groups) = small(LunPlacement::Striped { multiplier: 1 }, &[60]);
        // Data stripe 4 is group 1's second stripe.
        let writes = groups.stripe_writes(4 * 6 + 1, 4 * 6 + 2);
        assert_eq!(writes[0].stripe, 4);
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
