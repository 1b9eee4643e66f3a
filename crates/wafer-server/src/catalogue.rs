//! The NBD exports: which names the server offers and what each one reaches.
//!
//! Every LUN is exported as `VOLUME/LUN` (writable), and every snapshot of its
//! volume as `VOLUME/LUN@SNAPSHOT` (read-only; reads go to the snapshot's
//! image). The empty name, the protocol's default export, is the first LUN.
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
//! Writable LUN exports advertise multi-conn: every connection goes through
//! the one engine and its one buffer cache, and a write is durable in the
//! NVLog before it is acknowledged, so a flush on any connection covers every
//! write acknowledged on all of them.

use std::sync::{Arc, RwLock};

use wafer_core::Filer;
use wafer_core::nvlog::LunId;
use wafer_nbd::{ExportInfo, Exports};

/// What an export reaches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Target {
    /// The LUN.
    pub(crate) lun: LunId,
    /// The snapshot whose image is read, for a read-only snapshot export.
    pub(crate) snapshot: Option<String>,
}

/// One export.
#[derive(Clone, Debug)]
pub(crate) struct Export {
    pub(crate) info: ExportInfo,
    pub(crate) target: Target,
}

/// Every export, LUNs first (in volume and LUN order), then snapshots.
#[derive(Clone, Debug, Default)]
pub(crate) struct Catalogue {
    exports: Vec<Export>,
}

impl Catalogue {
    /// The exports of everything `filer` holds now.
    pub(crate) fn of(filer: &Filer) -> Catalogue {
        let mut luns = Vec::new();
        let mut snapshots = Vec::new();
        for (volume, volume_name) in filer.volumes() {
            for (lun, lun_name, size_bytes) in filer.luns(volume) {
                let name = format!("{volume_name}/{lun_name}");
                let path = format!("/vol/{name}");
                luns.push(export(&name, &path, size_bytes, lun, None));
            }
            for snapshot in filer.snapshots(volume) {
                for (lun, lun_name, size_bytes) in &snapshot.luns {
                    let description = format!(
                        "/vol/{volume_name}/{lun_name} in snapshot {}",
                        snapshot.name
                    );
                    let name = format!("{volume_name}/{lun_name}@{}", snapshot.name);
                    let target = Some(snapshot.name.clone());
                    snapshots.push(export(&name, &description, *size_bytes, *lun, target));
                }
            }
        }
        luns.append(&mut snapshots);
        Catalogue { exports: luns }
    }

    /// The export a client names ("" for the default).
    pub(crate) fn find(&self, name: &str) -> Option<&Export> {
        match name {
            "" => self.exports.first().filter(|e| e.target.snapshot.is_none()),
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

fn export(
    name: &str,
    description: &str,
    size_bytes: u64,
    lun: LunId,
    snapshot: Option<String>,
) -> Export {
    let writable = snapshot.is_none();
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
        target: Target { lun, snapshot },
    }
}

/// The catalogue the engine publishes and connections read.
#[derive(Debug, Default)]
pub(crate) struct SharedCatalogue {
    current: RwLock<Arc<Catalogue>>,
}

impl SharedCatalogue {
    /// The catalogue now.
    pub(crate) fn current(&self) -> Arc<Catalogue> {
        Arc::clone(&self.current.read().unwrap_or_else(|p| p.into_inner()))
    }

    /// Replaces the catalogue.
    pub(crate) fn publish(&self, catalogue: Catalogue) {
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(catalogue);
    }
}
