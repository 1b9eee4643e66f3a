//! The node's volumes, LUNs and snapshots under node-wide ids, as the server
//! reports and exports them: what one filer's queries answered when the
//! server served one aggregate. Only serving (online) aggregates are seen:
//! an offline or failed aggregate's LUNs are not exported.

use wafer_core::Filer;
use wafer_core::filer::{
    Extent, HostError, SnapshotInfo, VolumeSettings, VolumeSpace, VolumeState,
};
use wafer_core::node::{AggrState, Node, global_volume, split_volume};
use wafer_core::nvlog::LunId;
use wafer_core::units::{AggrId, VolumeId};

/// The engine of aggregate `id`, while it serves.
pub(crate) fn serving(node: &Node, id: AggrId) -> Option<&Filer> {
    let online = node
        .aggregates()
        .iter()
        .any(|a| a.id == id && a.state == AggrState::Online);
    node.aggregate(id).filter(|_| online)
}

/// Every serving volume: node id and name.
pub(crate) fn volumes(node: &Node) -> Vec<(VolumeId, String)> {
    node.volumes()
        .into_iter()
        .filter(|(_, _, aggr)| serving(node, *aggr).is_some())
        .map(|(id, name, _)| (id, name))
        .collect()
}

/// Every serving volume with its aggregate.
pub(crate) fn volumes_in(node: &Node) -> Vec<(VolumeId, String, AggrId)> {
    node.volumes()
        .into_iter()
        .filter(|(_, _, aggr)| serving(node, *aggr).is_some())
        .collect()
}

/// The engine of node volume `volume` and its id there.
fn local(node: &Node, volume: VolumeId) -> Option<(&Filer, VolumeId)> {
    let (aggr, local) = split_volume(volume);
    Some((serving(node, aggr)?, local))
}

/// A node LUN id in its aggregate's numbering.
pub(crate) fn local_lun(lun: LunId) -> LunId {
    LunId {
        volume: split_volume(lun.volume).1,
        file: lun.file,
    }
}

/// An aggregate's LUN id in the node's numbering.
pub(crate) fn global_lun(aggr: AggrId, lun: LunId) -> LunId {
    LunId {
        volume: global_volume(aggr, lun.volume),
        file: lun.file,
    }
}

/// A volume's snapshots, their LUNs under node ids.
pub(crate) fn snapshots(node: &Node, volume: VolumeId) -> Vec<SnapshotInfo> {
    let Some((filer, id)) = local(node, volume) else {
        return Vec::new();
    };
    let aggr = split_volume(volume).0;
    filer
        .snapshots(id)
        .into_iter()
        .map(|mut s| {
            for (lun, _, _) in &mut s.luns {
                *lun = global_lun(aggr, *lun);
            }
            s
        })
        .collect()
}

/// A volume's state: online, offline (or being destroyed).
pub(crate) fn volume_state(node: &Node, volume: VolumeId) -> Option<VolumeState> {
    let (filer, id) = local(node, volume)?;
    filer.volume_state(id)
}

/// A volume's space.
pub(crate) fn volume_space(node: &Node, volume: VolumeId) -> Option<VolumeSpace> {
    let (filer, id) = local(node, volume)?;
    filer.volume_space(id)
}

/// What the administrator has set on a volume.
pub(crate) fn volume_settings(node: &Node, volume: VolumeId) -> Option<VolumeSettings> {
    let (filer, id) = local(node, volume)?;
    filer.volume_settings(id)
}

/// The data and hole runs of a LUN's range.
pub(crate) fn extents(
    node: &Node,
    lun: LunId,
    snapshot: Option<&str>,
    offset: u64,
    length: u64,
) -> Result<Vec<Extent>, HostError> {
    let (filer, _) = local(node, lun.volume).ok_or(HostError::NotFound("LUN"))?;
    filer.extents(local_lun(lun), snapshot, offset, length)
}

/// A reallocation in progress, its LUN under its node id.
pub(crate) struct Realloc {
    /// The aggregate whose engine runs it.
    pub(crate) aggr: AggrId,
    pub(crate) lun: LunId,
    pub(crate) blocks_done: u64,
    pub(crate) blocks_total: u64,
    pub(crate) quiesced: bool,
}

/// The reallocation in progress in any aggregate.
pub(crate) fn realloc_status(node: &Node) -> Option<Realloc> {
    node.aggregates().iter().find_map(|a| {
        let filer = serving(node, a.id)?;
        let (lun, blocks_done, blocks_total) = filer.realloc_status()?;
        Some(Realloc {
            aggr: a.id,
            lun: global_lun(a.id, lun),
            blocks_done,
            blocks_total,
            quiesced: filer.realloc_quiesced(),
        })
    })
}
