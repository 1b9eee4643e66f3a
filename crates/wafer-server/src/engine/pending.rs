//! The aggregate administrations the engine has started and the node has yet
//! to carry out: each is answered once the node's state says it is done.
//!
//! A leaf of the engine: the engine holds a list of them, and the code that
//! starts and settles them (`aggregates`) works on the engine, so the type
//! sits below both.

use std::fs::File;
use std::path::PathBuf;
use std::sync::mpsc::Sender;

use wafer_core::units::AggrId;

use crate::admin::AdminResponse;
use crate::config::{AggrConfig, DiskConfig};
use crate::growth::Placement;

/// An aggregate administration waiting for the node.
pub(super) enum Pending {
    /// A new aggregate, named in the configuration once it is online.
    Create {
        id: AggrId,
        config: AggrConfig,
        /// Pool spares it took, by name.
        from_pool: Vec<String>,
        /// Disk files made for it.
        made: Vec<PathBuf>,
        reply: Sender<AdminResponse>,
    },
    /// Blank disks for an online aggregate, waiting to be given to it.
    Add {
        addition: Addition,
        reply: Sender<AdminResponse>,
    },
    /// An aggregate going offline.
    Offline {
        id: AggrId,
        reply: Sender<AdminResponse>,
    },
    /// An aggregate mounting again.
    Online {
        id: AggrId,
        reply: Sender<AdminResponse>,
    },
}

/// Blank disks for an online aggregate, made and synced, waiting to be
/// given to it when no CP runs there: then its new layout takes effect at
/// once, so the engine and the driver move its spares' slots together.
pub(super) struct Addition {
    /// The aggregate it grows.
    pub(super) id: AggrId,
    /// Where the new disks go.
    pub(super) placement: Placement,
    /// The new disks, in the order the placement takes them; the
    /// configuration is grown from the one current when they are given (a
    /// disk may fail, or a spare be added, meanwhile).
    pub(super) members: Vec<DiskConfig>,
    /// Their open files, in the same order.
    pub(super) files: Vec<File>,
    /// Pool spares it took, by name.
    pub(super) from_pool: Vec<String>,
    /// Disk files made for it.
    pub(super) made: Vec<PathBuf>,
}
