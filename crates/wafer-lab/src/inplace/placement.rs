//! Where each LUN of an in-place array lives on its RAID-5 groups: CLARiiON
//! MetaLUN striping, or whole LUNs dealt round the groups.
//!
//! The array's groups are alike (same drive, disks and stripe), and their
//! data blocks are dealt into one *data space* stripe by stripe: the data
//! space's stripe `s` is stripe `s div G` of group `s mod G`, so a stripe
//! never straddles two groups, a run of data blocks inside one stripe is on
//! one group (module `groups` turns data blocks into disks), and the write
//! cache's destager, sweeping the data space in address order, visits every
//! group in turn rather than one group after another. A LUN is a
//! *component* on one group or on every group, a stretch
//! of each group's data blocks at the same offset, rounded up to whole
//! stripes; components follow each other on a group in LUN order, the
//! reserved LUN pool (if any) placed last like one more LUN.
//!
//! - **Striped (a MetaLUN).** A striped MetaLUN's components are one per
//!   group, all the same size, and its *meta stripe elements* go round them:
//!   element `e` of LUN `i` is on group `(i + e) mod G`, at element `e div G`
//!   of that group's component. An element is the component group's full
//!   data stripe (stripe unit x data disks) times the element size
//!   multiplier. Each LUN starts one group further on than the one before
//!   it, so LUNs of under `G` elements do not all load group 0.
//! - **Round robin.** LUN `i` lies whole on group `i mod G`, in order: the
//!   plain CLARiiON way of binding LUNs on RAID groups.
//!
//! With one group both are the plain in-place LUN of one RAID-5 group: LUN
//! block `b` of the first LUN is data block `b`.

use std::ops::Range;

/// \[INF\] A striped MetaLUN's element size multiplier, 4: the default
/// Navisphere offers, as EMC's CLARiiON best-practices guides give it (recalled
/// for issue 35, not checked against a document in the project's research,
/// which carries no MetaLUN figure); a scenario may set its own
/// (`metalun_multiplier`).
pub const METALUN_MULTIPLIER_DEFAULT: u32 = 4;

/// How LUNs are placed on the groups.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LunPlacement {
    /// Striped MetaLUNs: each LUN's meta stripe elements of `multiplier`
    /// full data stripes go round every group.
    Striped {
        /// Full data stripes per meta stripe element.
        multiplier: u32,
    },
    /// Each LUN whole on one group, LUN `i` on group `i mod G`.
    RoundRobin,
}

/// A block of the array's data space (the groups' data blocks end to end).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct DataBlock(pub u64);

/// A block of one LUN, counted from the LUN's start.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct LunBlock(pub u64);

/// Where one LUN's components are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Component {
    /// The group of the LUN's first block.
    first_group: u32,
    /// The component's first block within its group (every group, if
    /// striped).
    offset: u64,
}

/// The placement of an array's LUNs on its groups.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    groups: u32,
    stripe_blocks: u64,
    /// Blocks per meta stripe element; `None` for round robin.
    element_blocks: Option<u64>,
    group_blocks: u64,
    components: Vec<Component>,
}

impl Placement {
    /// Places LUNs of `lun_blocks` (the reserved LUN pool, if any, last)
    /// on `groups` groups of data stripes of `stripe_blocks`.
    pub fn new(
        groups: u32,
        stripe_blocks: u64,
        placement: LunPlacement,
        lun_blocks: &[u64],
    ) -> Placement {
        assert!(groups >= 1 && stripe_blocks >= 1, "a group of stripes");
        let element_blocks = match placement {
            LunPlacement::Striped { multiplier } => Some(stripe_blocks * u64::from(multiplier)),
            LunPlacement::RoundRobin => None,
        };
        let mut used = vec![0u64; groups as usize];
        let mut components = Vec::with_capacity(lun_blocks.len());
        for (index, &blocks) in lun_blocks.iter().enumerate() {
            let first_group = (index % groups as usize) as u32;
            let offset = match element_blocks {
                Some(element) => {
                    let per_group = blocks.div_ceil(element).div_ceil(u64::from(groups)) * element;
                    let size = per_group.min(blocks).next_multiple_of(stripe_blocks);
                    let offset = used[0];
                    used.iter_mut().for_each(|u| *u += size);
                    offset
                }
                None => {
                    let offset = used[first_group as usize];
                    used[first_group as usize] += blocks.next_multiple_of(stripe_blocks);
                    offset
                }
            };
            components.push(Component {
                first_group,
                offset,
            });
        }
        Placement {
            groups,
            stripe_blocks,
            element_blocks,
            group_blocks: used.into_iter().max().unwrap_or(0),
            components,
        }
    }

    /// Data blocks per group: a whole number of stripes.
    pub fn group_blocks(&self) -> u64 {
        self.group_blocks
    }

    /// Blocks of the data space.
    pub fn data_blocks(&self) -> u64 {
        self.group_blocks * u64::from(self.groups)
    }

    /// Blocks per meta stripe element; `None` for round robin.
    #[cfg(test)]
    pub fn element_blocks(&self) -> Option<u64> {
        self.element_blocks
    }

    /// The group and the block within the group of LUN `lun`'s `block`.
    fn group_and_offset(&self, lun: usize, block: LunBlock) -> (u32, u64) {
        let component = self.components[lun];
        match self.element_blocks {
            None => (component.first_group, component.offset + block.0),
            Some(element) => {
                let (index, within) = (block.0 / element, block.0 % element);
                let groups = u64::from(self.groups);
                let group = (u64::from(component.first_group) + index) % groups;
                let row = index / groups;
                (group as u32, component.offset + row * element + within)
            }
        }
    }

    /// The home of LUN `lun`'s `block` in the data space.
    pub fn locate(&self, lun: usize, block: LunBlock) -> DataBlock {
        let (group, offset) = self.group_and_offset(lun, block);
        let stripe = offset / self.stripe_blocks * u64::from(self.groups) + u64::from(group);
        DataBlock(stripe * self.stripe_blocks + offset % self.stripe_blocks)
    }

    /// The group that holds data block `block`.
    #[cfg(test)]
    pub fn group_of(&self, block: DataBlock) -> u32 {
        (block.0 / self.stripe_blocks % u64::from(self.groups)) as u32
    }

    /// The data-space ranges that hold LUN `lun`'s blocks `first..end`, in
    /// LUN order, ranges that continue each other merged. A LUN's stripe
    /// edges fall on its groups' stripe edges (its components start on
    /// them, and elements are whole stripes), so a stretch inside one of
    /// its stripes is one range.
    pub fn data_ranges(&self, lun: usize, first: LunBlock, end: LunBlock) -> Vec<Range<u64>> {
        let mut ranges: Vec<Range<u64>> = Vec::new();
        let mut block = first.0;
        while block < end.0 {
            let stop = ((block / self.stripe_blocks + 1) * self.stripe_blocks).min(end.0);
            let start = self.locate(lun, LunBlock(block)).0;
            let next = start..start + (stop - block);
            match ranges.last_mut() {
                Some(last) if last.end == next.start => last.end = next.end,
                _ => ranges.push(next),
            }
            block = stop;
        }
        ranges
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    const STRIPE: u64 = 3;

    fn striped(groups: u32, luns: &[u64]) -> Placement {
        Placement::new(
            groups,
            STRIPE,
            LunPlacement::Striped { multiplier: 2 },
            luns,
        )
    }

    /// Every block of every LUN, with its home.
    fn homes(placement: &Placement, luns: &[u64]) -> Vec<(usize, u64, DataBlock)> {
        (luns.iter().enumerate())
            .flat_map(|(lun, &blocks)| {
                (0..blocks).map(move |b| (lun, b, placement.locate(lun, LunBlock(b))))
            })
            .collect()
    }

    #[test]
    fn every_lun_block_has_a_home_of_its_own_inside_the_data_space() {
        let luns = [7, 30, 12, 1, 25];
        for groups in 1..=4 {
            for placement in [
                striped(groups, &luns),
                Placement::new(groups, STRIPE, LunPlacement::RoundRobin, &luns),
            ] {
                let homes = homes(&placement, &luns);
                let distinct: BTreeSet<DataBlock> = homes.iter().map(|h| h.2).collect();
                assert_eq!(distinct.len(), homes.len(), "{placement:?}");
                assert!(distinct.iter().all(|b| b.0 < placement.data_blocks()));
                assert_eq!(placement.group_blocks() % STRIPE, 0);
            }
        }
    }

    #[test]
    fn consecutive_elements_go_to_consecutive_groups() {
        let placement = striped(3, &[60, 60]);
        let element = placement.element_blocks().unwrap();
        assert_eq!(element, 6);
        for lun in 0..2 {
            let groups: Vec<u32> = (0..10)
                .map(|e| placement.group_of(placement.locate(lun, LunBlock(e * element))))
                .collect();
            for pair in groups.windows(2) {
                assert_eq!(pair[1], (pair[0] + 1) % 3, "LUN {lun}: {groups:?}");
            }
            assert_eq!(groups[0], lun as u32, "each LUN starts one group on");
        }
    }

    #[test]
    fn an_element_stays_on_its_group_and_its_edges_change_group() {
        // Two groups, elements of two 3-block stripes: the data space deals
        // stripes to groups 0, 1, 0, 1, ...
        let placement = striped(2, &[40]);
        let element = 6;
        let group = |block| placement.group_of(placement.locate(0, LunBlock(block)));
        assert!((0..element).all(|b| group(b) == 0));
        assert!((element..2 * element).all(|b| group(b) == 1));
        assert_eq!(group(2 * element), 0);
        assert_eq!(placement.locate(0, LunBlock(0)), DataBlock(0));
        // The element's second stripe is group 0's second: data stripe 2.
        assert_eq!(placement.locate(0, LunBlock(3)), DataBlock(2 * STRIPE));
        assert_eq!(placement.locate(0, LunBlock(element - 1)), DataBlock(8));
        assert_eq!(placement.locate(0, LunBlock(element)), DataBlock(STRIPE));
        // Element 2 comes back to group 0, right after element 0: data
        // stripe 4.
        assert_eq!(placement.locate(0, LunBlock(2 * element)), DataBlock(12));
        // A range over an element's edge is two ranges, one per group.
        let ranges = placement.data_ranges(0, LunBlock(element - 1), LunBlock(element + 2));
        assert_eq!(ranges, vec![8..9, 3..5]);
    }

    #[test]
    fn on_one_group_a_striped_lun_is_the_plain_lun() {
        let placement = striped(1, &[100, 9]);
        assert_eq!(
            placement.data_ranges(0, LunBlock(0), LunBlock(100)),
            vec![0..100]
        );
        // The next LUN starts at the next stripe.
        assert_eq!(placement.locate(1, LunBlock(0)), DataBlock(102));
    }

    #[test]
    fn round_robin_puts_lun_i_whole_on_group_i_mod_g() {
        let luns = [10, 10, 10, 10, 10];
        let placement = Placement::new(3, STRIPE, LunPlacement::RoundRobin, &luns);
        for lun in 0..luns.len() {
            let ranges = placement.data_ranges(lun, LunBlock(0), LunBlock(10));
            assert_eq!(ranges.len(), 4, "LUN {lun}: a range per stripe");
            for range in ranges {
                assert_eq!(placement.group_of(DataBlock(range.start)), lun as u32 % 3);
                assert_eq!(placement.group_of(DataBlock(range.end - 1)), lun as u32 % 3);
            }
        }
    }
}
