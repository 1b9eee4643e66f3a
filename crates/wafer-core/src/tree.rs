//! A file's block tree: the indirect blocks between its inode and its content.
//!
//! A tree of level `L` has [`ROOT_POINTERS`] pointers in the inode, each naming
//! an indirect block of level `L` (or, for `L = 0`, a content block). An indirect
//! block of level `l` holds [`POINTERS_PER_BLOCK`] pointers to level `l - 1`.
//! Node `(l, i)` covers content blocks `i * 256^l .. (i + 1) * 256^l`; its pointer
//! sits in slot `i % 256` of node `(l + 1, i / 256)`, or in root slot `i` when
//! `l = L`.
//!
//! Indirect blocks are resident: the whole tree lives in memory, loaded at mount
//! and changed in place. A change to a pointer marks the node holding it dirty;
//! at a CP the write allocator gives every dirty node a new address, bottom up,
//! which in turn dirties its parent, until the root pointers in the inode change.
//! That is write-anywhere: no block is ever overwritten in place.
//!
//! Nodes are shared, copy on write, between a tree and its frozen copies (the
//! snapshots of a volume): a snapshot costs no memory until the active tree
//! changes a node, just as it costs no disk space until a block is rewritten.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::format::{
    BlockPtr, Inode, MAX_TREE_LEVEL, POINTER_SIZE, POINTERS_PER_BLOCK, ROOT_POINTERS,
};
use crate::units::Fbn;
use crate::{BLOCK_SIZE, Block};

type Node = Arc<[BlockPtr; POINTERS_PER_BLOCK]>;

/// Identifies an indirect block of a tree: `(level, index)`.
pub type NodeId = (u8, u64);

/// The block tree of one file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BlockTree {
    level: u8,
    root: [BlockPtr; ROOT_POINTERS],
    nodes: BTreeMap<NodeId, Node>,
    dirty: BTreeSet<NodeId>,
    root_changed: bool,
}

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
            dirty: BTreeSet::new(),
            root_changed: false,
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

    /// The pointer to content block `fbn` (null for a hole).
    pub fn get(&self, fbn: Fbn) -> BlockPtr {
        if fbn.0 >= capacity(self.level) {
            return BlockPtr::NULL;
        }
        if self.level == 0 {
            return self.root[fbn.0 as usize];
        }
        match self.nodes.get(&(1, fbn.0 / POINTERS_PER_BLOCK as u64)) {
            Some(node) => node[(fbn.0 % POINTERS_PER_BLOCK as u64) as usize],
            None => BlockPtr::NULL,
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
        self.set_child(0, fbn.0, ptr)
    }

    /// The pointer to indirect block `node`, as its parent (or the root) holds it.
    pub fn node_ptr(&self, (level, index): NodeId) -> BlockPtr {
        if level == self.level {
            return self.root[index as usize];
        }
        let parent = (level + 1, index / POINTERS_PER_BLOCK as u64);
        self.nodes.get(&parent).map_or(BlockPtr::NULL, |node| {
            node[(index % POINTERS_PER_BLOCK as u64) as usize]
        })
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
        let slot = if level == self.level {
            &mut self.root[index as usize]
        } else {
            let parent = (level + 1, index / POINTERS_PER_BLOCK as u64);
            let node = self
                .nodes
                .get_mut(&parent)
                .expect("a written block's parent is resident");
            &mut Arc::make_mut(node)[(index % POINTERS_PER_BLOCK as u64) as usize]
        };
        assert!(!slot.is_null(), "checksum for a block that is not there");
        slot.checksum = checksum;
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

    /// The encoded content of indirect block `node`.
    pub fn node_bytes(&self, node: NodeId) -> Box<Block> {
        let mut out = Box::new([0u8; BLOCK_SIZE]);
        if let Some(pointers) = self.nodes.get(&node) {
            for (slot, ptr) in pointers.iter().enumerate() {
                ptr.encode(&mut out[slot * POINTER_SIZE..]);
            }
        }
        out
    }

    /// Installs an indirect block read from disk.
    pub fn load_node(&mut self, node: NodeId, bytes: &Block) {
        let mut pointers = [BlockPtr::NULL; POINTERS_PER_BLOCK];
        for (slot, ptr) in pointers.iter_mut().enumerate() {
            *ptr = BlockPtr::decode(&bytes[slot * POINTER_SIZE..]);
        }
        self.nodes.insert(node, Arc::new(pointers));
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

    /// Every non-null pointer in the tree: indirect blocks as `(level, index)`,
    /// content blocks as `(0, fbn)`.
    pub fn all_pointers(&self) -> Vec<(NodeId, BlockPtr)> {
        let mut out: Vec<(NodeId, BlockPtr)> = self
            .root
            .iter()
            .enumerate()
            .filter(|(_, ptr)| !ptr.is_null())
            .map(|(slot, ptr)| ((self.level, slot as u64), *ptr))
            .collect();
        for &(level, index) in self.nodes.keys() {
            out.extend(
                self.children((level, index))
                    .into_iter()
                    .map(|(child, ptr)| ((level - 1, child), ptr)),
            );
        }
        out
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
        self.nodes.insert((self.level, 0), Arc::new(node));
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
        let node = Arc::make_mut(self.nodes.get_mut(&parent).expect("ensured"));
        core::mem::replace(&mut node[(index % POINTERS_PER_BLOCK as u64) as usize], ptr)
    }

    fn ensure_node(&mut self, (level, index): NodeId) {
        if self.nodes.contains_key(&(level, index)) {
            return;
        }
        self.nodes.insert(
            (level, index),
            Arc::new([BlockPtr::NULL; POINTERS_PER_BLOCK]),
        );
        self.dirty.insert((level, index));
        if level < self.level {
            self.ensure_node((level + 1, index / POINTERS_PER_BLOCK as u64));
            self.dirty
                .insert((level + 1, index / POINTERS_PER_BLOCK as u64));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
    fn node_pointers_live_in_parents_and_nodes_round_trip() {
        let mut tree = BlockTree::new();
        tree.set(Fbn(300), ptr(7));
        let l1 = (1, 1);
        assert_eq!(tree.set_node_ptr(l1, ptr(99)), BlockPtr::NULL);
        assert_eq!(tree.node_ptr(l1), ptr(99));
        let bytes = tree.node_bytes(l1);
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
}
