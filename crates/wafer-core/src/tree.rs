//! A file's block tree: the indirect blocks between its inode and its content.
//!
//! A tree of level `L` has [`ROOT_POINTERS`] pointers in the inode, each naming
//! an indirect block of level `L` (or, for `L = 0`, a content block). An indirect
//! block of level `l` holds `N` = [`POINTERS_PER_BLOCK`] (170) pointers to
//! level `l - 1`. Node `(l, i)` covers content blocks `i * N^l .. (i + 1) *
//! N^l`; its pointer sits in slot `i % N` of node `(l + 1, i / N)`, or in root
//! slot `i` when `l = L`.
//!
//! Indirect blocks are buffers: a node is *resident* (in memory) or *absent*.
//! An absent node whose pointer is null is a hole; one whose pointer is set was
//! evicted (or not loaded yet) and must be read before anything under it is
//! looked at. The filer does that read and [`load_node`](BlockTree::load_node)s
//! the result; every lookup here asserts that the path it walks is resident, so
//! a caller that forgot to fault a node in fails loudly instead of reading a
//! hole. Resident nodes form a prefix of the tree: a node is evicted only when
//! it is clean and none of its children is resident.
//!
//! A change to a pointer marks the node holding it dirty; at a CP the write
//! allocator gives every dirty node a new address, bottom up, which in turn
//! dirties its parent, until the root pointers in the inode change. That is
//! write-anywhere: no block is ever overwritten in place.
//!
//! Nodes are shared, copy on write, between a tree and its frozen copies (the
//! snapshots of a volume): a snapshot costs no memory until the active tree
//! changes a node, just as it costs no disk space until a block is rewritten.
//!
//! Every host I/O looks up the level-1 nodes over its blocks, and a 100 GiB
//! file has some 155,000 of them: nodes are found by id in a [`FixedMap`], in
//! a probe or two, and a set of the resident ids keeps their order for the
//! few questions that range over the tree.

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::Block;
use crate::fixed_map::FixedMap;
use crate::format::{
    BlockPtr, BlockWords, Inode, MAX_TREE_LEVEL, POINTER_SIZE, POINTER_WORDS, POINTERS_PER_BLOCK,
    ROOT_POINTERS, WORDS_PER_BLOCK,
};
use crate::units::Fbn;
use crate::word_sum::WordSum;

/// An indirect block: its pointers, shared copy on write with frozen
/// copies, and the running sum of the words they encode to (which a stamp
/// filer's CP stamps the block with). The sum sits beside the shared
/// pointers rather than in their allocation, which stays exactly 4 KiB
/// (4,080 bytes of pointers and the count of owners): at 100 GiB a LUN has
/// some 155,000 level-1 nodes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    pointers: Arc<[BlockPtr; POINTERS_PER_BLOCK]>,
    sum: WordSum,
}

impl Node {
    /// A block holding `pointers`.
    pub fn new(pointers: [BlockPtr; POINTERS_PER_BLOCK]) -> Node {
        Node {
            sum: WordSum::of(&encode_node(&pointers)),
            pointers: Arc::new(pointers),
        }
    }

    /// The running sum of the block's words.
    pub fn sum(&self) -> WordSum {
        self.sum
    }

    /// Puts `ptr` in `slot` and returns the pointer it replaces.
    fn set(&mut self, slot: usize, ptr: BlockPtr) -> BlockPtr {
        let old = core::mem::replace(&mut Arc::make_mut(&mut self.pointers)[slot], ptr);
        let (before, after) = (old.words(), ptr.words());
        for word in 0..POINTER_WORDS {
            self.sum
                .change(slot * POINTER_WORDS + word, before[word], after[word]);
        }
        old
    }
}

impl Default for Node {
    /// A block of null pointers.
    fn default() -> Node {
        Node {
            pointers: Arc::new([BlockPtr::NULL; POINTERS_PER_BLOCK]),
            sum: WordSum::default(),
        }
    }
}

impl core::ops::Deref for Node {
    type Target = [BlockPtr; POINTERS_PER_BLOCK];

    fn deref(&self) -> &Self::Target {
        &self.pointers
    }
}

/// Identifies an indirect block of a tree: `(level, index)`.
pub type NodeId = (u8, u64);

/// The level-1 node that points to content block `fbn`, and the pointer's
/// slot in it.
fn level1_pointer(fbn: Fbn) -> (NodeId, usize) {
    let per_node = POINTERS_PER_BLOCK as u64;
    ((1, fbn.0 / per_node), (fbn.0 % per_node) as usize)
}

/// The block tree of one file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BlockTree {
    level: u8,
    root: [BlockPtr; ROOT_POINTERS],
    /// The resident nodes, by id.
    nodes: FixedMap<NodeId, Node>,
    /// The ids of the resident nodes, in order.
    resident: BTreeSet<NodeId>,
    dirty: BTreeSet<NodeId>,
    root_changed: bool,
    /// Content blocks with a non-null pointer, resident or not.
    content_blocks: u64,
}

/// Nodes a level over which a lookup probes one by one instead of searching
/// the ordered ids: a host I/O's path crosses a node or two a level.
const PROBED_NODES: u64 = 8;

/// Content blocks a tree of `level` can address.
pub fn capacity(level: u8) -> u64 {
    ROOT_POINTERS as u64 * (POINTERS_PER_BLOCK as u64).pow(u32::from(level))
}

impl BlockTree {
    /// An empty tree (all holes).
    pub fn new() -> BlockTree {
        BlockTree::default()
    }

    /// The tree an inode roots; its indirect blocks must then be loaded with
    /// [`load_node`](Self::load_node), top down.
    pub fn from_inode(inode: &Inode) -> BlockTree {
        BlockTree {
            level: inode.level,
            root: inode.root,
            ..BlockTree::default()
        }
    }

    /// A read-only copy of the tree as it stands, sharing every node with it:
    /// what a snapshot keeps. The copy has nothing dirty.
    pub fn frozen_copy(&self) -> BlockTree {
        BlockTree {
            level: self.level,
            root: self.root,
            nodes: self.nodes.clone(),
            resident: self.resident.clone(),
            dirty: BTreeSet::new(),
            root_changed: false,
            content_blocks: self.content_blocks,
        }
    }

    /// The tree's height.
    pub fn level(&self) -> u8 {
        self.level
    }

    /// The root pointers, as the inode stores them.
    pub fn root(&self) -> [BlockPtr; ROOT_POINTERS] {
        self.root
    }

    /// The pointer to content block `fbn` (null for a hole). The path to it
    /// must be resident.
    pub fn get(&self, fbn: Fbn) -> BlockPtr {
        if fbn.0 >= capacity(self.level) {
            return BlockPtr::NULL;
        }
        if self.level == 0 {
            return self.root[fbn.0 as usize];
        }
        let (l1, slot) = level1_pointer(fbn);
        match self.nodes.get(&l1) {
            Some(node) => node[slot],
            None => {
                self.assert_hole(l1);
                BlockPtr::NULL
            }
        }
    }

    /// Hints that content block `fbn`'s level-1 node will be looked up soon.
    pub fn prefetch_node(&self, fbn: Fbn) {
        self.nodes.prefetch(&level1_pointer(fbn).0);
    }

    /// Hints that content block `fbn`'s pointer will be changed soon: starts
    /// loading the line that holds it and its node's owner count.
    pub fn prefetch_pointer(&self, fbn: Fbn) {
        let (l1, slot) = level1_pointer(fbn);
        if let Some(node) = self.nodes.get(&l1) {
            prefetch_index::prefetch_index(&node.pointers[..], 0);
            prefetch_index::prefetch_index(&node.pointers[..], slot);
        }
    }

    /// The first content block at or after `fbn` with a pointer, if any,
    /// found without visiting holes one by one. The tree from `fbn` on must
    /// be resident (content under an evicted node would be passed over, so
    /// that is asserted).
    pub fn next_content(&self, fbn: Fbn) -> Option<Fbn> {
        let found = match self.level {
            0 => (fbn.0..ROOT_POINTERS as u64)
                .find(|&index| !self.root[index as usize].is_null())
                .map(Fbn),
            _ => self.next_content_under_l1(fbn),
        };
        let searched = fbn.0..found.map_or(u64::MAX, |next| next.0);
        assert!(
            self.missing(searched).is_empty(),
            "searching for content past an absent indirect block; fault it in first"
        );
        found
    }

    fn next_content_under_l1(&self, fbn: Fbn) -> Option<Fbn> {
        let per_node = POINTERS_PER_BLOCK as u64;
        self.resident_range((1, fbn.0 / per_node)..(2, 0))
            .find_map(|((_, index), node)| {
                let base = index * per_node;
                let from = fbn.0.saturating_sub(base) as usize;
                (from..POINTERS_PER_BLOCK)
                    .find(|&slot| !node[slot].is_null())
                    .map(|slot| Fbn(base + slot as u64))
            })
    }

    /// The pointer to content block `fbn`, or `None` if an indirect block on
    /// the way to it is not resident.
    pub fn try_get(&self, fbn: Fbn) -> Option<BlockPtr> {
        match self.missing(fbn.0..fbn.0.saturating_add(1)).is_empty() {
            true => Some(self.get(fbn)),
            false => None,
        }
    }

    /// Content blocks with a non-null pointer (resident or not).
    pub fn content_blocks(&self) -> u64 {
        self.content_blocks
    }

    /// Counts the content blocks again from the nodes: for a tree whose nodes
    /// were all loaded one by one (at mount).
    pub fn recount(&mut self) {
        let mut content_blocks = 0;
        self.for_each_pointer(|(level, _), _| {
            content_blocks += u64::from(level == 0);
        });
        self.content_blocks = content_blocks;
    }

    /// Whether `node` is in memory.
    pub fn is_resident(&self, node: NodeId) -> bool {
        self.nodes.contains_key(&node)
    }

    /// Resident indirect blocks.
    pub fn resident_nodes(&self) -> usize {
        self.nodes.len()
    }

    /// The indirect blocks to read before content blocks `fbns` can be looked
    /// at or changed: every absent node on their paths whose parent is
    /// resident and whose pointer is set, with that pointer. Nodes under an
    /// absent node are not listed; they are found once it is loaded.
    pub fn missing(&self, fbns: core::ops::Range<u64>) -> Vec<(NodeId, BlockPtr)> {
        let end = fbns.end.min(capacity(self.level));
        if self.level == 0 || fbns.start >= end || self.paths_resident(fbns.start..end) {
            return Vec::new();
        }
        let span = |level: u8| (POINTERS_PER_BLOCK as u64).pow(u32::from(level));
        let mut out = Vec::new();
        let consider = |node: NodeId, ptr: BlockPtr, out: &mut Vec<(NodeId, BlockPtr)>| {
            if !ptr.is_null() && !self.nodes.contains_key(&node) {
                out.push((node, ptr));
            }
        };
        let top = self.level;
        for index in fbns.start / span(top)..end.div_ceil(span(top)) {
            consider((top, index), self.root[index as usize], &mut out);
        }
        for level in 2..=top {
            let (first, last) = (fbns.start / span(level), (end - 1) / span(level));
            let child_span = span(level - 1);
            let (first_child, end_child) = (fbns.start / child_span, end.div_ceil(child_span));
            let mut children = |index: u64, node: &Node| {
                let base = index * POINTERS_PER_BLOCK as u64;
                let from = first_child.saturating_sub(base) as usize;
                let to = (end_child - base).min(POINTERS_PER_BLOCK as u64) as usize;
                for (slot, ptr) in node.iter().enumerate().take(to).skip(from) {
                    consider((level - 1, base + slot as u64), *ptr, &mut out);
                }
            };
            match last - first < PROBED_NODES {
                true => (first..=last)
                    .filter_map(|index| Some((index, self.nodes.get(&(level, index))?)))
                    .for_each(|(index, node)| children(index, node)),
                false => self
                    .resident_range((level, first)..(level, last + 1))
                    .for_each(|((_, index), node)| children(index, node)),
            }
        }
        out
    }

    /// Whether the level-1 nodes over content blocks `fbns` (a few at most)
    /// are all resident. Then so is every node above them, since resident
    /// nodes form a prefix of the tree, and nothing on those paths needs
    /// reading: a host I/O's usual case, answered in a probe or two.
    fn paths_resident(&self, fbns: core::ops::Range<u64>) -> bool {
        let (first, last) = (
            fbns.start / POINTERS_PER_BLOCK as u64,
            (fbns.end - 1) / POINTERS_PER_BLOCK as u64,
        );
        last - first < PROBED_NODES
            && (first..=last).all(|index| self.nodes.contains_key(&(1, index)))
    }

    /// Whether `node` may be evicted: resident, clean and with no resident
    /// child (nodes stay a prefix of the tree).
    pub fn is_evictable(&self, (level, index): NodeId) -> bool {
        if level == 0
            || !self.nodes.contains_key(&(level, index))
            || self.dirty.contains(&(level, index))
        {
            return false;
        }
        if self.node_ptr((level, index)).is_null() {
            return false; // not written yet: the CP has still to give it an address
        }
        let first = index * POINTERS_PER_BLOCK as u64;
        let children = (level - 1, first)..(level - 1, first + POINTERS_PER_BLOCK as u64);
        level == 1 || self.resident.range(children).next().is_none()
    }

    /// Drops an evictable node from memory and returns it.
    pub fn evict(&mut self, node: NodeId) -> Node {
        assert!(
            self.is_evictable(node),
            "evicting node {node:?}, which is pinned"
        );
        self.resident.remove(&node);
        let pointers = self.nodes.remove(&node).expect("resident");
        assert_eq!(self.resident.len(), self.nodes.len(), "ids and nodes agree");
        pointers
    }

    /// Reinstalls a node evicted earlier (the lab's stamp filer keeps
    /// digests, not pointers, on its disks, so it keeps evicted nodes aside).
    pub fn restore_node(&mut self, node: NodeId, pointers: Node) {
        assert!(!self.nodes.contains_key(&node), "node {node:?} is resident");
        self.install(node, pointers);
    }

    /// Every resident indirect block, in (level, index) order.
    pub fn resident(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.resident.iter().copied()
    }

    /// The resident nodes whose ids fall in `ids`, in order.
    fn resident_range(
        &self,
        ids: core::ops::Range<NodeId>,
    ) -> impl Iterator<Item = (NodeId, &Node)> + '_ {
        self.resident
            .range(ids)
            .map(|id| (*id, self.nodes.get(id).expect("resident ids are nodes")))
    }

    /// Makes `node` resident with `pointers`.
    fn install(&mut self, node: NodeId, pointers: Node) {
        self.resident.insert(node);
        self.nodes.insert(node, pointers);
        assert_eq!(self.resident.len(), self.nodes.len(), "ids and nodes agree");
    }

    /// An absent node must be a hole: its pointer null (or its parent a hole).
    fn assert_hole(&self, (level, index): NodeId) {
        if level >= self.level {
            assert!(
                self.root[index as usize].is_null(),
                "node {:?} is not resident; fault it in first",
                (level, index)
            );
            return;
        }
        let parent = (level + 1, index / POINTERS_PER_BLOCK as u64);
        match self.nodes.get(&parent) {
            Some(node) => assert!(
                node[(index % POINTERS_PER_BLOCK as u64) as usize].is_null(),
                "node {:?} is not resident; fault it in first",
                (level, index)
            ),
            None => self.assert_hole(parent),
        }
    }

    /// Points content block `fbn` at `ptr`, growing the tree as needed, and
    /// returns the pointer it replaces.
    pub fn set(&mut self, fbn: Fbn, ptr: BlockPtr) -> BlockPtr {
        if ptr.is_null() && fbn.0 >= capacity(self.level) {
            return BlockPtr::NULL;
        }
        while fbn.0 >= capacity(self.level) {
            self.grow();
        }
        let old = self.set_child(0, fbn.0, ptr);
        self.content_blocks += u64::from(old.is_null() && !ptr.is_null());
        self.content_blocks -= u64::from(!old.is_null() && ptr.is_null());
        old
    }

    /// The pointer to indirect block `node`, as its parent (or the root) holds it.
    pub fn node_ptr(&self, (level, index): NodeId) -> BlockPtr {
        if level == self.level {
            return self.root[index as usize];
        }
        let parent = (level + 1, index / POINTERS_PER_BLOCK as u64);
        match self.nodes.get(&parent) {
            Some(node) => node[(index % POINTERS_PER_BLOCK as u64) as usize],
            None => {
                self.assert_hole(parent);
                BlockPtr::NULL
            }
        }
    }

    /// Points the parent of indirect block `node` at `ptr` (marking the parent
    /// dirty) and returns the pointer it replaces.
    pub fn set_node_ptr(&mut self, (level, index): NodeId, ptr: BlockPtr) -> BlockPtr {
        assert!(
            level >= 1 && level <= self.level,
            "node level {level} of a level-{} tree",
            self.level
        );
        self.set_child(level, index, ptr)
    }

    /// Records the checksum of the block `child` names (a content block as
    /// `(0, fbn)` or an indirect block) in the pointer to it, without marking
    /// anything dirty: the CP fills checksums in once content is final.
    pub fn set_checksum(&mut self, (level, index): NodeId, checksum: u32) {
        if level == self.level {
            let slot = &mut self.root[index as usize];
            assert!(!slot.is_null(), "checksum for a block that is not there");
            slot.checksum = checksum;
            return;
        }
        let parent = (level + 1, index / POINTERS_PER_BLOCK as u64);
        let node = self
            .nodes
            .get_mut(&parent)
            .expect("a written block's parent is resident");
        let slot = (index % POINTERS_PER_BLOCK as u64) as usize;
        let ptr = node[slot];
        assert!(!ptr.is_null(), "checksum for a block that is not there");
        node.set(slot, BlockPtr { checksum, ..ptr });
    }

    /// Dirty indirect blocks of `level`, in index order.
    pub fn dirty_nodes(&self, level: u8) -> Vec<NodeId> {
        self.dirty
            .range((level, 0)..=(level, u64::MAX))
            .copied()
            .collect()
    }

    /// Forgets that `node` is dirty (the CP has given it a new address).
    pub fn mark_clean(&mut self, node: NodeId) {
        self.dirty.remove(&node);
    }

    /// Whether any indirect block is dirty.
    pub fn has_dirty_nodes(&self) -> bool {
        !self.dirty.is_empty()
    }

    /// Whether the root pointers or the level changed since the last call:
    /// the inode that holds them must then be written.
    pub fn take_root_changed(&mut self) -> bool {
        core::mem::take(&mut self.root_changed)
    }

    /// Whether the root pointers or the level changed and nobody took note yet.
    pub fn root_changed(&self) -> bool {
        self.root_changed
    }

    /// Indirect block `node`, if it is resident.
    pub fn node(&self, node: NodeId) -> Option<&Node> {
        self.nodes.get(&node)
    }

    /// Installs an indirect block read from disk.
    pub fn load_node(&mut self, node: NodeId, bytes: &Block) {
        let mut pointers = [BlockPtr::NULL; POINTERS_PER_BLOCK];
        for (slot, ptr) in pointers.iter_mut().enumerate() {
            *ptr = BlockPtr::decode(&bytes[slot * POINTER_SIZE..]);
        }
        self.install(node, Node::new(pointers));
    }

    /// The non-null children of `node`, as (child node or content fbn, pointer).
    pub fn children(&self, (level, index): NodeId) -> Vec<(u64, BlockPtr)> {
        let first = index * POINTERS_PER_BLOCK as u64;
        self.nodes
            .get(&(level, index))
            .map_or_else(Vec::new, |node| {
                node.iter()
                    .enumerate()
                    .filter(|(_, ptr)| !ptr.is_null())
                    .map(|(slot, ptr)| (first + slot as u64, *ptr))
                    .collect()
            })
    }

    /// Whether every indirect block of the tree is resident.
    pub fn is_complete(&self) -> bool {
        self.missing(0..u64::MAX).is_empty()
    }

    /// Every non-null pointer in the tree: indirect blocks as `(level, index)`,
    /// content blocks as `(0, fbn)`. The tree must be complete.
    pub fn all_pointers(&self) -> Vec<(NodeId, BlockPtr)> {
        let mut out = Vec::new();
        self.for_each_pointer(|node, ptr| out.push((node, ptr)));
        out
    }

    /// Visits every non-null pointer in the tree, named as by
    /// [`all_pointers`](Self::all_pointers), without gathering them: a walk
    /// of a large LUN's tree that keeps a few of its pointers costs no memory
    /// for the rest. The tree must be complete.
    pub fn for_each_pointer(&self, mut visit: impl FnMut(NodeId, BlockPtr)) {
        assert!(
            self.is_complete(),
            "walking a tree whose indirect blocks are not all resident"
        );
        for (slot, ptr) in self.root.iter().enumerate() {
            if !ptr.is_null() {
                visit((self.level, slot as u64), *ptr);
            }
        }
        for &(level, index) in &self.resident {
            let Some(node) = self.nodes.get(&(level, index)) else {
                continue;
            };
            let first = index * POINTERS_PER_BLOCK as u64;
            for (slot, ptr) in node.iter().enumerate() {
                if !ptr.is_null() {
                    visit((level - 1, first + slot as u64), *ptr);
                }
            }
        }
    }

    /// Adds a level on top: the old root becomes the first indirect block of the
    /// new top level.
    fn grow(&mut self) {
        assert!(
            self.level < MAX_TREE_LEVEL,
            "block tree over {MAX_TREE_LEVEL} levels"
        );
        self.level += 1;
        let mut node = [BlockPtr::NULL; POINTERS_PER_BLOCK];
        node[..ROOT_POINTERS].copy_from_slice(&self.root);
        self.install((self.level, 0), Node::new(node));
        self.dirty.insert((self.level, 0));
        self.root_changed = true;
        // Root slot 0 stays null until the CP gives the new node an address;
        // meanwhile reads go through the resident node.
        self.root = [BlockPtr::NULL; ROOT_POINTERS];
    }

    fn set_child(&mut self, level: u8, index: u64, ptr: BlockPtr) -> BlockPtr {
        if level == self.level {
            self.root_changed = true;
            return core::mem::replace(&mut self.root[index as usize], ptr);
        }
        let parent = (level + 1, index / POINTERS_PER_BLOCK as u64);
        self.ensure_node(parent);
        self.dirty.insert(parent);
        let node = self.nodes.get_mut(&parent).expect("ensured");
        node.set((index % POINTERS_PER_BLOCK as u64) as usize, ptr)
    }

    fn ensure_node(&mut self, (level, index): NodeId) {
        if self.nodes.contains_key(&(level, index)) {
            return;
        }
        self.assert_hole((level, index));
        self.install((level, index), Node::default());
        self.dirty.insert((level, index));
        if level < self.level {
            self.ensure_node((level + 1, index / POINTERS_PER_BLOCK as u64));
            self.dirty
                .insert((level + 1, index / POINTERS_PER_BLOCK as u64));
        }
    }
}

/// An indirect block's pointers as they are written to disk.
pub fn encode_node(pointers: &[BlockPtr; POINTERS_PER_BLOCK]) -> BlockWords {
    let mut out = [0; WORDS_PER_BLOCK];
    for (words, ptr) in out.chunks_exact_mut(POINTER_WORDS).zip(pointers.iter()) {
        words.copy_from_slice(&ptr.words());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::block_from_words;
    use crate::units::{Pvbn, Vvbn};

    fn ptr(n: u64) -> BlockPtr {
        BlockPtr {
            pvbn: Pvbn(n),
            vvbn: Vvbn(n),
            birth: 1,
            checksum: 0,
        }
    }

    #[test]
    fn setting_far_blocks_grows_the_tree_and_dirties_the_path() {
        let mut tree = BlockTree::new();
        assert_eq!(tree.set(Fbn(3), ptr(10)), BlockPtr::NULL);
        assert_eq!(tree.level(), 0);
        tree.set(Fbn(5000), ptr(11));
        assert_eq!(
            tree.level(),
            2,
            "5000 blocks need two levels of 256-way nodes under 8 roots"
        );
        assert_eq!(tree.get(Fbn(3)), ptr(10));
        assert_eq!(tree.get(Fbn(5000)), ptr(11));
        assert_eq!(tree.get(Fbn(4999)), BlockPtr::NULL);
        assert_eq!(tree.dirty_nodes(1), vec![(1, 0), (1, 29)]);
        assert_eq!(tree.dirty_nodes(2), vec![(2, 0)]);
        assert_eq!(tree.set(Fbn(5000), ptr(12)), ptr(11));
    }

    #[test]
    fn next_content_skips_holes_whole() {
        let mut tree = BlockTree::new();
        assert_eq!(tree.next_content(Fbn(0)), None);
        tree.set(Fbn(5), ptr(1));
        assert_eq!(tree.next_content(Fbn(0)), Some(Fbn(5)));
        assert_eq!(tree.next_content(Fbn(6)), None, "a level-0 tree");
        tree.set(Fbn(70_000), ptr(2));
        tree.set(Fbn(70_001), ptr(3));
        tree.set(Fbn(70_000), BlockPtr::NULL);
        assert_eq!(tree.next_content(Fbn(5)), Some(Fbn(5)));
        assert_eq!(tree.next_content(Fbn(6)), Some(Fbn(70_001)));
        assert_eq!(tree.next_content(Fbn(70_002)), None);
        tree.set(Fbn(70_001), BlockPtr::NULL);
        assert_eq!(
            tree.next_content(Fbn(6)),
            None,
            "an emptied node holds none"
        );
    }

    #[test]
    #[should_panic(expected = "fault it in first")]
    fn next_content_refuses_to_pass_an_absent_node() {
        let mut tree = written_tree();
        assert_eq!(tree.next_content(Fbn(0)), Some(Fbn(8 * B)));
        tree.evict((1, 8));
        tree.next_content(Fbn(0));
    }

    #[test]
    fn node_pointers_live_in_parents_and_nodes_round_trip() {
        let mut tree = BlockTree::new();
        tree.set(Fbn(300), ptr(7));
        let l1 = (1, 1);
        assert_eq!(tree.set_node_ptr(l1, ptr(99)), BlockPtr::NULL);
        assert_eq!(tree.node_ptr(l1), ptr(99));
        let bytes = block_from_words(&encode_node(tree.node(l1).expect("resident")));
        let mut copy = BlockTree::new();
        copy.load_node(l1, &bytes);
        assert_eq!(copy.children(l1), vec![(300, ptr(7))]);
        let pointers = tree.all_pointers();
        assert!(pointers.contains(&((0, 300), ptr(7))) && pointers.contains(&((1, 1), ptr(99))));
    }

    #[test]
    fn a_frozen_copy_keeps_its_pointers_while_the_tree_changes() {
        let mut tree = BlockTree::new();
        tree.set(Fbn(300), ptr(7));
        tree.set_node_ptr((1, 1), ptr(99));
        let frozen = tree.frozen_copy();
        assert!(!frozen.has_dirty_nodes() && !frozen.root_changed());
        tree.set(Fbn(300), ptr(8));
        tree.set(Fbn(301), ptr(9));
        assert_eq!(tree.get(Fbn(300)), ptr(8));
        assert_eq!(
            frozen.get(Fbn(300)),
            ptr(7),
            "the copy's node was not changed"
        );
        assert_eq!(frozen.get(Fbn(301)), BlockPtr::NULL);
        assert_eq!(frozen.node_ptr((1, 1)), ptr(99));
    }

    const B: u64 = POINTERS_PER_BLOCK as u64;

    /// A level-2 tree with content blocks `8B..11B` under three level-1
    /// nodes, (1, 8) to (1, 10), all written by a CP: every node has an
    /// address and is clean.
    fn written_tree() -> BlockTree {
        let mut tree = BlockTree::new();
        for fbn in 8 * B..11 * B {
            tree.set(Fbn(fbn), ptr(fbn));
        }
        for level in 1..=tree.level() {
            for node in tree.dirty_nodes(level) {
                tree.mark_clean(node);
                tree.set_node_ptr(node, ptr(100_000 + node.1 + 1000 * u64::from(level)));
            }
        }
        tree.mark_clean((tree.level(), 0));
        tree
    }

    /// Asserts that every resident node's running sum is the sum of the
    /// words its pointers encode to.
    fn assert_sums_hold(tree: &BlockTree) {
        for id in tree.resident() {
            let node = tree.node(id).expect("resident");
            assert_eq!(node.sum(), WordSum::of(&encode_node(node)), "node {id:?}");
        }
    }

    #[test]
    fn every_node_sums_the_words_its_pointers_encode_to() {
        let mut tree = written_tree();
        assert_sums_hold(&tree);
        let frozen = tree.frozen_copy();
        for fbn in [8 * B, 8 * B + 1, 9 * B + 5, 20 * B, 200 * B] {
            tree.set(Fbn(fbn), ptr(fbn + 7));
            assert_sums_hold(&tree);
        }
        tree.set(Fbn(8 * B + 1), BlockPtr::NULL);
        tree.set_checksum((0, 9 * B + 5), 0xDEAD_BEEF);
        tree.set_checksum((1, 8 * B / B), 0x1234_5678);
        assert_sums_hold(&tree);
        assert_sums_hold(&frozen);
        let (l1, before) = ((1, 9), frozen.node((1, 9)).expect("resident").sum());
        assert_ne!(
            tree.node(l1).expect("resident").sum(),
            before,
            "a changed node's sum moves"
        );
        let mut loaded = BlockTree::new();
        let bytes = block_from_words(&encode_node(tree.node(l1).expect("resident")));
        loaded.load_node(l1, &bytes);
        assert_eq!(
            loaded.node(l1),
            tree.node(l1),
            "a loaded node brings its sum"
        );
    }

    #[test]
    fn an_evicted_node_is_missing_until_it_is_loaded_again() {
        let mut tree = written_tree();
        assert_eq!(tree.level(), 2);
        assert!(tree.is_complete());
        assert_eq!(tree.content_blocks(), 3 * B);
        let l1 = (1, 9); // fbns 9B..10B
        let bytes = block_from_words(&encode_node(tree.node(l1).expect("resident")));
        assert!(tree.is_evictable(l1));
        assert!(
            !tree.is_evictable((2, 0)),
            "a node with resident children stays"
        );
        tree.evict(l1);
        assert_eq!(
            tree.missing(9 * B..9 * B + 1),
            vec![(l1, tree.node_ptr(l1))]
        );
        assert!(
            tree.missing(8 * B..9 * B).is_empty(),
            "other nodes are resident"
        );
        assert_eq!(tree.try_get(Fbn(9 * B + 5)), None);
        assert!(tree.try_get(Fbn(8 * B + 5)).is_some_and(|p| !p.is_null()));
        assert!(!tree.is_complete());
        assert_eq!(tree.content_blocks(), 3 * B, "an absent node still counts");
        tree.load_node(l1, &bytes);
        assert!(tree.is_complete());
        assert_eq!(tree.get(Fbn(9 * B + 5)), ptr(9 * B + 5));
    }

    #[test]
    fn evicting_a_parent_hides_its_subtree_until_it_is_back() {
        let mut tree = written_tree();
        let top = tree.root()[0];
        assert!(!top.is_null());
        for index in [0, 8, 9, 10] {
            tree.evict((1, index));
        }
        let l2 = block_from_words(&encode_node(tree.node((2, 0)).expect("resident")));
        tree.evict((2, 0));
        assert_eq!(tree.missing(0..u64::MAX), vec![((2, 0), top)]);
        tree.load_node((2, 0), &l2);
        assert_eq!(tree.missing(0..u64::MAX).len(), 4, "then the level-1 nodes");
        assert_eq!(tree.missing(8 * B..9 * B).len(), 1);
    }

    #[test]
    #[should_panic(expected = "fault it in first")]
    fn looking_through_an_absent_node_fails_loudly() {
        let mut tree = written_tree();
        tree.evict((1, 8));
        tree.get(Fbn(8 * B));
    }

    #[test]
    #[should_panic(expected = "fault it in first")]
    fn writing_under_an_absent_node_fails_loudly() {
        let mut tree = written_tree();
        tree.evict((1, 8));
        tree.set(Fbn(8 * B + 1), ptr(5));
    }

    #[test]
    fn dirty_nodes_and_nodes_without_an_address_stay() {
        let mut tree = written_tree();
        tree.set(Fbn(8 * B + 2), ptr(7));
        assert!(!tree.is_evictable((1, 8)), "dirty");
        tree.set(Fbn(40 * B), ptr(8));
        tree.mark_clean((1, 40));
        assert!(!tree.is_evictable((1, 40)), "never given an address");
    }
}
