//! When each indirect block of a LUN was last used: the age that chooses
//! which indirect blocks to evict.
//!
//! Every data block that leaves the cache raises the age of the level-1 node
//! over it, so under a random load an age is written once per evicted block,
//! at a random node. A map keyed by (LUN, node) spread those writes over a
//! table many times the size of the ages themselves: E1's 100 GiB test file
//! has 154,203 level-1 nodes, and the map held them in 524,288 buckets of 40
//! bytes (20 MiB). Here a level-1 node's age is one word of a dense array per
//! LUN, indexed by the node's number and allocated in 4 KiB pages as nodes
//! are first aged, so a sparse LUN pays only for the pages its used regions
//! touch: the same test file's ages take 1.2 MiB. Evicted blocks come in
//! batches, so the LUN's array is looked up once per run of one LUN's blocks.
//! The few nodes above level 1 keep a map.
//!
//! An age of 0 means "never used"; forgetting a node sets it back to 0.
//! Nothing distinguishes a node aged 0 from one never aged, which is what
//! the eviction order asks of it.

use std::collections::BTreeMap;

use crate::fixed_map::FixedMap;
use crate::nvlog::LunId;
use crate::tree::NodeId;

/// Level-1 ages per page: one 4 KiB page.
const AGES_PER_PAGE: usize = 512;

/// A page of level-1 ages.
type Page = Box<[u64; AGES_PER_PAGE]>;

/// The ages of the indirect blocks of every LUN.
#[derive(Debug, Default)]
pub(super) struct NodeAges {
    /// Level-1 ages by node index, in pages; a missing page is all zeros.
    level1: BTreeMap<LunId, Vec<Option<Page>>>,
    /// Ages of nodes above level 1.
    upper: FixedMap<(LunId, NodeId), u64>,
}

impl NodeAges {
    /// The age of `node` of `lun`: 0 if it was never aged (or was forgotten).
    pub(super) fn age(&self, lun: LunId, node: NodeId) -> u64 {
        match node {
            (1, index) => {
                let (page, slot) = place(index);
                self.level1
                    .get(&lun)
                    .and_then(|pages| pages.get(page))
                    .and_then(Option::as_ref)
                    .map_or(0, |ages| ages[slot])
            }
            _ => self.upper.get(&(lun, node)).copied().unwrap_or(0),
        }
    }

    /// Sets the age of `node` of `lun` to `age`.
    pub(super) fn set(&mut self, lun: LunId, node: NodeId, age: u64) {
        match node {
            (1, index) => *level1_slot(self.level1.entry(lun).or_default(), index) = age,
            _ => {
                self.upper.insert((lun, node), age);
            }
        }
    }

    /// Raises the ages of level-1 nodes, each given as (LUN, node index,
    /// age), to the ages given where those are older: the nodes over data
    /// blocks leaving the cache, which come in runs of one LUN's.
    pub(super) fn raise_level1(&mut self, aged: impl IntoIterator<Item = (LunId, u64, u64)>) {
        let mut aged = aged.into_iter().peekable();
        while let Some(&(lun, _, _)) = aged.peek() {
            let pages = self.level1.entry(lun).or_default();
            while let Some((_, index, age)) = aged.next_if(|&(next, _, _)| next == lun) {
                let slot = level1_slot(pages, index);
                *slot = (*slot).max(age);
            }
        }
    }

    /// Forgets `node` of `lun`: its age is 0 again.
    pub(super) fn forget(&mut self, lun: LunId, node: NodeId) {
        match node {
            (1, index) => {
                let (page, slot) = place(index);
                if let Some(Some(ages)) = self.level1.get_mut(&lun).and_then(|p| p.get_mut(page)) {
                    ages[slot] = 0;
                }
            }
            _ => {
                self.upper.remove(&(lun, node));
            }
        }
    }
}

/// The word of `pages` holding level-1 node `index`'s age, its page
/// allocated if need be.
fn level1_slot(pages: &mut Vec<Option<Page>>, index: u64) -> &mut u64 {
    let (page, slot) = place(index);
    if pages.len() <= page {
        pages.resize_with(page + 1, || None);
    }
    let ages = pages[page].get_or_insert_with(|| Box::new([0; AGES_PER_PAGE]));
    &mut ages[slot]
}

/// The page and the slot in it of level-1 node `index`.
fn place(index: u64) -> (usize, usize) {
    let index = usize::try_from(index).expect("a level-1 node index fits in memory");
    (index / AGES_PER_PAGE, index % AGES_PER_PAGE)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use proptest::prelude::*;

    use super::*;
    use crate::units::{FileId, VolumeId};

    #[derive(Clone, Debug)]
    enum Op {
        Set(u8, u64, u64),
        /// Level-1 nodes, each as (LUN, index, age).
        RaiseLevel1(Vec<(u8, u64, u64)>),
        Forget(u8, u64),
    }

    fn lun(l: u8) -> LunId {
        LunId {
            volume: VolumeId(1),
            file: FileId(u32::from(l % 2) + 100),
        }
    }

    /// Levels 1 to 3, so that level 1 meets the levels kept apart.
    fn node(l: u8, index: u64) -> NodeId {
        (1 + l % 3, index)
    }

    fn ops() -> impl Strategy<Value = Vec<Op>> {
        // Level-1 indices over three pages.
        let index = 0u64..3 * AGES_PER_PAGE as u64;
        let age = 0u64..1000;
        let op = prop_oneof![
            (any::<u8>(), index.clone(), age.clone()).prop_map(|(l, i, a)| Op::Set(l, i, a)),
            proptest::collection::vec((any::<u8>(), index.clone(), age), 0..8)
                .prop_map(Op::RaiseLevel1),
            (any::<u8>(), index).prop_map(|(l, i)| Op::Forget(l, i)),
        ];
        proptest::collection::vec(op, 0..100)
    }

    proptest! {
        /// Every age is what a map of every node's age gives, 0 for a node it
        /// does not hold (never aged, or forgotten).
        #[test]
        fn ages_answer_as_a_map_of_every_node_does(ops in ops()) {
            let mut ages = NodeAges::default();
            let mut model: BTreeMap<(LunId, NodeId), u64> = BTreeMap::new();
            let mut touched = BTreeSet::new();
            for op in ops {
                match op {
                    Op::Set(l, i, age) => {
                        ages.set(lun(l), node(l, i), age);
                        model.insert((lun(l), node(l, i)), age);
                        touched.insert((lun(l), node(l, i)));
                    }
                    Op::RaiseLevel1(aged) => {
                        ages.raise_level1(aged.iter().map(|&(l, i, age)| (lun(l), i, age)));
                        for (l, i, age) in aged {
                            let held = model.entry((lun(l), (1, i))).or_insert(0);
                            *held = (*held).max(age);
                            touched.insert((lun(l), (1, i)));
                        }
                    }
                    Op::Forget(l, i) => {
                        ages.forget(lun(l), node(l, i));
                        model.remove(&(lun(l), node(l, i)));
                        touched.insert((lun(l), node(l, i)));
                    }
                }
                for key in &touched {
                    prop_assert_eq!(ages.age(key.0, key.1), model.get(key).copied().unwrap_or(0));
                }
            }
        }
    }

    #[test]
    fn a_level1_age_takes_one_page_however_far_into_the_lun_it_lies() {
        let mut ages = NodeAges::default();
        let far = 10_000 * AGES_PER_PAGE as u64 + 3;
        ages.raise_level1([(lun(0), far, 9)]);
        assert_eq!(ages.age(lun(0), (1, far)), 9);
        let pages = &ages.level1[&lun(0)];
        assert_eq!(pages.iter().filter(|page| page.is_some()).count(), 1);
        assert_eq!(
            ages.age(lun(0), (1, far - 1)),
            0,
            "its neighbour was never aged"
        );
        ages.forget(lun(0), (1, far));
        assert_eq!(ages.age(lun(0), (1, far)), 0);
    }
}
