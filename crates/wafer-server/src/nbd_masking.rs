//! What an NBD client may see: every export, or, for a client that proved
//! a certificate name over TLS, only the LUNs mapped to it.
//!
//! A plain NBD client has no identity, so it is not masked: its reach is
//! whoever can open the socket or reach the listener (`--socket-mode`,
//! `--listen`). A client that started TLS and presented a certificate the
//! CA (`--tls-ca`) signed is an initiator like an iSCSI one, named by the
//! certificate's CN: it sees exactly the LUNs mapped to the NBD igroups
//! (`igroup create -n`) that list that name, each under its usual export
//! name (`VOLUME/LUN`, `VOLUME/LUN@SNAPSHOT`), and no other export exists
//! for it, in `NBD_OPT_LIST` as in `GO`, `INFO` and `EXPORT_NAME`. Its
//! default export (the empty name) is the LUN mapped to it at LUN ID 0.
//!
//! The view is built per handshake step from the current catalogue and
//! maps, since the identity appears only once TLS is on. Once in
//! transmission, a masked connection keeps a [`MapWatch`]: when its export
//! is unmapped from it, the connection is cut before its next request, as
//! an iSCSI initiator loses the LUN at once (NBD has no unit attention to
//! say so more gently).
//!
//! A LUN taken offline (`lun offline`) is no export at all for a new
//! client ([`Reachable`]), and a connection already open to it gets EIO
//! for every request that would reach its data until `lun online`
//! ([`OfflineWatch`]): NBD has no "not ready" of its own.

use std::sync::Arc;

use wafer_nbd::{ExportInfo, Exports};

use crate::catalogue::{Catalogue, Export, SharedCatalogue};
use crate::masking::{Initiator, San};
use crate::tls::PeerIdentity;

/// The exports one NBD client may reach.
pub(crate) enum ExportView<'a> {
    /// No identity: the whole catalogue.
    Unmasked(&'a Catalogue),
    /// A certificate's name: the exports mapped to it, by export name,
    /// with the one at LUN ID 0 first when there is one.
    Masked {
        catalogue: &'a Catalogue,
        mapped: Vec<(u16, String)>,
    },
}

impl<'a> ExportView<'a> {
    /// What a client with `identity` (none for plain NBD, or TLS without a
    /// client certificate) may reach in `catalogue`, as `san` maps it.
    pub(crate) fn of(
        catalogue: &'a Catalogue,
        san: &San,
        identity: Option<&PeerIdentity>,
    ) -> ExportView<'a> {
        let Some(identity) = identity else {
            return ExportView::Unmasked(catalogue);
        };
        let mapped = san
            .visible(Initiator::NbdCertificate(&identity.common_name))
            .into_iter()
            .filter_map(|map| {
                let name = map.path.strip_prefix("/vol/")?.to_string();
                catalogue
                    .find(&name)
                    .is_some()
                    .then_some((map.lun_id, name))
            })
            .collect();
        ExportView::Masked { catalogue, mapped }
    }

    /// The export a client names ("" for its default), if it may reach it.
    pub(crate) fn find(&self, name: &str) -> Option<&'a Export> {
        match self {
            ExportView::Unmasked(catalogue) => catalogue.find(name),
            ExportView::Masked { catalogue, mapped } => {
                let reached = match name {
                    "" => mapped.iter().find(|(id, _)| *id == 0),
                    _ => mapped.iter().find(|(_, mapped)| mapped == name),
                };
                reached.and_then(|(_, name)| catalogue.find(name))
            }
        }
    }
}

/// Whether a masked connection's export is still mapped to its name.
pub(crate) struct MapWatch {
    shared: Arc<SharedCatalogue>,
    /// The maps last looked at.
    seen: Arc<San>,
    common_name: String,
    /// The export's path, as maps name it (`/vol/VOLUME/LUN[@SNAPSHOT]`).
    path: String,
}

impl MapWatch {
    /// The watch for a connection by `identity` to `export`; none for a
    /// client with no name, which is not masked.
    pub(crate) fn of(
        shared: &Arc<SharedCatalogue>,
        identity: Option<&PeerIdentity>,
        export: &str,
    ) -> Option<MapWatch> {
        Some(MapWatch {
            shared: Arc::clone(shared),
            seen: shared.san(),
            common_name: identity?.common_name.clone(),
            path: format!("/vol/{export}"),
        })
    }

    /// Whether the export is still mapped: looked up again only when the
    /// maps have changed since last asked.
    pub(crate) fn still_mapped(&mut self) -> bool {
        let san = self.shared.san();
        if Arc::ptr_eq(&san, &self.seen) {
            return true;
        }
        let mapped = san
            .visible(Initiator::NbdCertificate(&self.common_name))
            .iter()
            .any(|map| map.path == self.path);
        if mapped {
            self.seen = san;
        }
        mapped
    }

    /// What a log line calls the export.
    pub(crate) fn path(&self) -> &str {
        &self.path
    }
}

/// The exports of a view whose LUNs are online: what a client may connect
/// to now.
pub(crate) struct Reachable<'a> {
    /// What the client may see.
    pub(crate) view: ExportView<'a>,
    /// The maps, with the LUNs taken offline.
    pub(crate) san: &'a San,
}

impl Reachable<'_> {
    fn online(&self, name: &str) -> bool {
        !self.san.is_offline(&format!("/vol/{name}"))
    }
}

impl Exports for Reachable<'_> {
    fn lookup(&self, name: &str) -> Option<ExportInfo> {
        let export = self.view.find(name)?;
        self.online(&export.info.name).then(|| export.info.clone())
    }

    fn list(&self) -> Vec<String> {
        let names = match &self.view {
            ExportView::Unmasked(catalogue) => catalogue.list(),
            ExportView::Masked { mapped, .. } => {
                mapped.iter().map(|(_, name)| name.clone()).collect()
            }
        };
        names.into_iter().filter(|n| self.online(n)).collect()
    }
}

/// Whether a connection's LUN is offline: looked up again only when the
/// maps table (which keeps the LUNs offline) has changed since last asked.
pub(crate) struct OfflineWatch {
    shared: Arc<SharedCatalogue>,
    seen: Arc<San>,
    /// The export's path (`/vol/VOLUME/LUN[@SNAPSHOT]`).
    path: String,
    offline: bool,
}

impl OfflineWatch {
    /// The watch for a connection to `export`.
    pub(crate) fn of(shared: &Arc<SharedCatalogue>, export: &str) -> OfflineWatch {
        let seen = shared.san();
        let path = format!("/vol/{export}");
        OfflineWatch {
            offline: seen.is_offline(&path),
            shared: Arc::clone(shared),
            seen,
            path,
        }
    }

    /// Whether the LUN is offline now.
    pub(crate) fn is_offline(&mut self) -> bool {
        let san = self.shared.san();
        if !Arc::ptr_eq(&san, &self.seen) {
            self.offline = san.is_offline(&self.path);
            self.seen = san;
        }
        self.offline
    }
}
