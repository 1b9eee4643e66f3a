//! The NBD exports: which names the server offers and what each one reaches.
//!
//! Every LUN is exported as `VOLUME/LUN` (writable), and every snapshot of its
//! volume as `VOLUME/LUN@SNAPSHOT` (read-only; reads go to the snapshot's
//! image). The empty name, the protocol's default export, is the LUN whose
//! LUN ID is 0 (`crate::lun_ids`) while it lives, and no export after.
//! Volume, LUN and snapshot names cannot contain `/` or `@`, so the names are
//! unambiguous.
//!
//! The engine thread owns the truth and publishes a fresh catalogue after
//! every change that adds, removes or resizes an export; connection threads
//! read the current one when a client negotiates, and keep what they resolved
//! for the life of the connection (as NBD clients keep the size they were
//! told). A snapshot export shows the LUN as the snapshot holds it: its size
//! then, and LUNs destroyed since are still there to read.
//!
//! What a connection resolved can end under it: its LUN destroyed, or
//! restored from a snapshot, or its snapshot deleted. A new LUN may then take
//! the same inode number, and a new snapshot the same name; the old
//! connection must reach neither. So each target carries its *incarnation*,
//! which the engine ends when it submits the change that ends it, and the
//! engine refuses every later request that names an ended one (no such LUN
//! or snapshot, as for a destroyed LUN); the client reconnects to see what is
//! there now.
//!
//! Each export carries a [`Hold`] on its target, so the engine can tell how
//! many connections have a LUN open (`lun destroy` refuses to pull a LUN
//! from under its clients without `-f`). A connection keeps the export it
//! took out of the catalogue (a clone) for as long as it lives: the
//! catalogue's own hold is not counted, each clone is, until it is dropped.
//! The counts live in [`Holds`], keyed by target and incarnation, beside the
//! catalogues, so a count survives the publication of a new catalogue and a
//! connection to a LUN's ended life never counts against the LUN that takes
//! its place.
//!
//! Writable LUN exports advertise multi-conn: every connection goes through
//! the one engine and its one buffer cache, and a write is durable in the
//! NVLog before it is acknowledged, so a flush on any connection covers every
//! write acknowledged on all of them.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use wafer_core::filer::HostRequest;
use wafer_core::node::Node;
use wafer_core::nvlog::LunId;
use wafer_core::units::VolumeId;
use wafer_nbd::{ExportInfo, Exports};

use wafer_iscsi::Security;

use crate::lun_ids::LunRecord;
use crate::masking::San;

/// What an export reaches.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Target {
    /// The LUN.
    pub(crate) lun: LunId,
    /// The snapshot whose image is read, for a read-only snapshot export.
    pub(crate) snapshot: Option<String>,
    /// Which life of the LUN (or snapshot) under this name it reaches.
    pub(crate) incarnation: u64,
}

impl Target {
    /// `lun` (or its image in `snapshot`) in its live incarnation.
    pub(crate) fn live(
        lun: LunId,
        snapshot: Option<String>,
        incarnations: &Incarnations,
    ) -> Target {
        let mut target = Target {
            lun,
            snapshot,
            incarnation: 0,
        };
        target.incarnation = incarnations.current(&target.reach());
        target
    }

    /// A read of `length` bytes at `offset` of the target: of the LUN, or
    /// of what its snapshot holds.
    pub(crate) fn read(&self, offset: u64, length: u64) -> HostRequest {
        let lun = self.lun;
        match &self.snapshot {
            None => HostRequest::Read {
                lun,
                offset,
                length,
            },
            Some(snapshot) => HostRequest::ReadSnapshot {
                lun,
                snapshot: snapshot.clone(),
                offset,
                length,
            },
        }
    }

    /// What the target reaches, whatever its incarnation.
    pub(crate) fn reach(&self) -> Reach {
        match &self.snapshot {
            None => Reach::Lun(self.lun),
            Some(name) => Reach::Snapshot(self.lun.volume, name.clone()),
        }
    }
}

/// What a target reaches: a LUN by its inode, or a volume's snapshot by name
/// (all of its LUNs end together).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Reach {
    Lun(LunId),
    Snapshot(VolumeId, String),
}

/// How many lives of each [`Reach`] have ended (none, for most).
#[derive(Debug, Default)]
pub(crate) struct Incarnations {
    ended: BTreeMap<Reach, u64>,
}

/// An incarnation ended by a change not yet applied, to revive if the change
/// is refused.
#[derive(Debug)]
pub(crate) struct Ended {
    reach: Reach,
    new: u64,
}

impl Incarnations {
    /// The live incarnation of `reach`.
    pub(crate) fn current(&self, reach: &Reach) -> u64 {
        self.ended.get(reach).copied().unwrap_or(0)
    }

    /// Whether `target` still reaches the life it resolved.
    pub(crate) fn is_live(&self, target: &Target) -> bool {
        self.current(&target.reach()) == target.incarnation
    }

    /// Ends the live incarnation of `reach`.
    pub(crate) fn end(&mut self, reach: Reach) -> Ended {
        let count = self.ended.entry(reach.clone()).or_default();
        *count += 1;
        Ended { reach, new: *count }
    }

    /// Brings back the incarnation `ended` ended, unless another change has
    /// ended the one after it too.
    pub(crate) fn revive(&mut self, ended: Ended) {
        if self.current(&ended.reach) == ended.new {
            self.ended.insert(ended.reach, ended.new - 1);
        }
    }
}

/// One export.
#[derive(Clone, Debug)]
pub(crate) struct Export {
    pub(crate) info: ExportInfo,
    pub(crate) target: Target,
    /// The LUN's ID (`crate::lun_ids`), which iSCSI gives as its LUN
    /// number; `None` for a snapshot's image.
    pub(crate) lun_id: Option<u32>,
    /// Whether the LUN is thin (`lun create -o noreserve`): a trimmed range
    /// of it gives its blocks back, so a later write there may find its
    /// volume full.
    pub(crate) thin: bool,
    /// Counts the connection that clones the export out of the catalogue;
    /// held for its drop alone.
    _hold: Hold,
}

/// A hold on a target: the catalogue's is not counted; every clone is, until
/// it is dropped.
#[derive(Debug)]
struct Hold {
    count: Arc<AtomicUsize>,
    counted: bool,
}

impl Clone for Hold {
    fn clone(&self) -> Hold {
        self.count.fetch_add(1, Ordering::Relaxed);
        Hold {
            count: Arc::clone(&self.count),
            counted: true,
        }
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        if self.counted {
            self.count.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// How many connections hold each target, over every catalogue published.
#[derive(Debug, Default)]
pub(crate) struct Holds {
    counts: Mutex<BTreeMap<Target, Arc<AtomicUsize>>>,
}

impl Holds {
    /// The catalogue's (uncounted) hold on `target`.
    fn hold(&self, target: &Target) -> Hold {
        let mut counts = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        let count = counts.entry(target.clone()).or_default();
        Hold {
            count: Arc::clone(count),
            counted: false,
        }
    }

    /// How many connections hold `target` now.
    pub(crate) fn connections(&self, target: &Target) -> usize {
        let counts = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        counts
            .get(target)
            .map_or(0, |count| count.load(Ordering::Relaxed))
    }

    /// Forgets the targets nothing can hold any more: no catalogue or
    /// connection has a hold on them.
    fn forget_unreachable(&self) {
        let mut counts = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        counts.retain(|_, count| Arc::strong_count(count) > 1);
    }
}

/// Every export, LUNs first (in volume and LUN order), then snapshots.
#[derive(Debug, Default)]
pub(crate) struct Catalogue {
    exports: Vec<Export>,
    /// The LUN the empty name reaches, if it lives.
    default: Option<LunId>,
}

impl Catalogue {
    /// The exports of everything `node` serves now, in their live
    /// incarnations, each with its hold from `holds` and its LUN ID from
    /// `lun_ids`; the empty name reaches `default`.
    pub(crate) fn of(
        node: &Node,
        incarnations: &Incarnations,
        holds: &Holds,
        default: Option<LunId>,
        lun_ids: &[LunRecord],
    ) -> Catalogue {
        let mut luns = Vec::new();
        let mut snapshots = Vec::new();
        for (volume, volume_name) in crate::engine::view::volumes(node) {
            for (lun, lun_name, size_bytes) in node.luns(volume) {
                let name = format!("{volume_name}/{lun_name}");
                let path = format!("/vol/{name}");
                let target = Target::live(lun, None, incarnations);
                let mut export = export(&name, &path, size_bytes, target, holds);
                export.lun_id = crate::lun_ids::id_of(lun_ids, &path, lun.file.0);
                export.thin = node
                    .lun_details(lun)
                    .is_some_and(|(attributes, _)| !attributes.space_reserved);
                luns.push(export);
            }
            for snapshot in crate::engine::view::snapshots(node, volume) {
                for (lun, lun_name, size_bytes) in &snapshot.luns {
                    let description = format!(
                        "/vol/{volume_name}/{lun_name} in snapshot {}",
                        snapshot.name
                    );
                    let name = format!("{volume_name}/{lun_name}@{}", snapshot.name);
                    let name_then = Some(snapshot.name.clone());
                    let target = Target::live(*lun, name_then, incarnations);
                    snapshots.push(export(&name, &description, *size_bytes, target, holds));
                }
            }
        }
        luns.append(&mut snapshots);
        Catalogue {
            exports: luns,
            default,
        }
    }

    /// The export a client names ("" for the default).
    pub(crate) fn find(&self, name: &str) -> Option<&Export> {
        match name {
            "" => self
                .exports
                .iter()
                .find(|e| e.target.snapshot.is_none() && Some(e.target.lun) == self.default),
            _ => self.exports.iter().find(|e| e.info.name == name),
        }
    }
}

impl Exports for Catalogue {
    fn lookup(&self, name: &str) -> Option<ExportInfo> {
        self.find(name).map(|e| e.info.clone())
    }

    fn list(&self) -> Vec<String> {
        self.exports.iter().map(|e| e.info.name.clone()).collect()
    }
}

fn export(name: &str, description: &str, size_bytes: u64, target: Target, holds: &Holds) -> Export {
    let writable = target.snapshot.is_none();
    let hold = holds.hold(&target);
    Export {
        info: ExportInfo {
            name: name.to_string(),
            description: description.to_string(),
            size_bytes,
            read_only: !writable,
            multi_conn: writable,
            // Write-zeroes is always a trim, which changes metadata only: it
            // is as fast as zeroing gets, so a fast-zero request never fails.
            fast_zero: writable,
        },
        target,
        lun_id: None,
        thin: false,
        _hold: hold,
    }
}

/// The catalogue the engine publishes and connections read; beside it, the
/// igroups and maps (`crate::masking`), the iSCSI security policies
/// (`crate::chap_store`) and the initiators logged in now.
#[derive(Debug, Default)]
pub(crate) struct SharedCatalogue {
    current: RwLock<Arc<Catalogue>>,
    holds: Holds,
    san: RwLock<Arc<San>>,
    /// None until the engine first publishes it: every login is refused.
    security: RwLock<Option<Arc<Security>>>,
    sessions: Arc<Mutex<BTreeMap<String, usize>>>,
}

/// An initiator's session, counted in `igroup show` while it lives.
pub(crate) struct Session {
    name: String,
    sessions: Arc<Mutex<BTreeMap<String, usize>>>,
}

impl Drop for Session {
    fn drop(&mut self) {
        let mut sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(count) = sessions.get_mut(&self.name) {
            *count -= 1;
            if *count == 0 {
                sessions.remove(&self.name);
            }
        }
    }
}

impl SharedCatalogue {
    /// The catalogue now.
    pub(crate) fn current(&self) -> Arc<Catalogue> {
        Arc::clone(&self.current.read().unwrap_or_else(|p| p.into_inner()))
    }

    /// Replaces the catalogue.
    pub(crate) fn publish(&self, catalogue: Catalogue) {
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(catalogue);
        self.holds.forget_unreachable();
    }

    /// The connections' holds on every target.
    pub(crate) fn holds(&self) -> &Holds {
        &self.holds
    }

    /// The igroups and maps now.
    pub(crate) fn san(&self) -> Arc<San> {
        Arc::clone(&self.san.read().unwrap_or_else(|p| p.into_inner()))
    }

    /// Replaces the igroups and maps, if they changed.
    pub(crate) fn publish_san(&self, san: &San) {
        let mut current = self.san.write().unwrap_or_else(|p| p.into_inner());
        if **current != *san {
            *current = Arc::new(san.clone());
        }
    }

    /// The iSCSI security policies now (all logins refused before the
    /// first publication).
    pub(crate) fn security(&self) -> Arc<Security> {
        let current = self.security.read().unwrap_or_else(|p| p.into_inner());
        current.clone().unwrap_or_else(|| {
            Arc::new(Security {
                default: wafer_iscsi::Policy::Deny,
                ..Security::default()
            })
        })
    }

    /// Whether the security policies were ever published.
    pub(crate) fn has_security(&self) -> bool {
        self.security
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
    }

    /// Replaces the iSCSI security policies.
    pub(crate) fn publish_security(&self, security: Security) {
        *self.security.write().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(security));
    }

    /// Counts a session of `initiator` until the result is dropped.
    pub(crate) fn logged_in(&self, initiator: &str) -> Session {
        let mut sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        *sessions.entry(initiator.to_string()).or_default() += 1;
        Session {
            name: initiator.to_string(),
            sessions: Arc::clone(&self.sessions),
        }
    }

    /// Whether `initiator` has a session now.
    pub(crate) fn is_logged_in(&self, initiator: &str) -> bool {
        let sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        sessions.contains_key(initiator)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wafer_core::units::FileId;

    fn target(file: u32) -> Target {
        let lun = LunId {
            volume: VolumeId(1),
            file: FileId(file),
        };
        Target::live(lun, None, &Incarnations::default())
    }

    #[test]
    fn clones_of_a_hold_count_connections_and_the_catalogues_own_does_not() {
        let holds = Holds::default();
        let catalogues = holds.hold(&target(2));
        assert_eq!(holds.connections(&target(2)), 0);
        let first = catalogues.clone();
        let second = first.clone();
        assert_eq!(holds.connections(&target(2)), 2);
        assert_eq!(holds.connections(&target(3)), 0, "per target");
        drop(first);
        holds.forget_unreachable();
        assert_eq!(holds.connections(&target(2)), 1);
        drop((catalogues, second));
        holds.forget_unreachable();
        assert!(holds.counts.lock().expect("unpoisoned").is_empty());
    }
}
