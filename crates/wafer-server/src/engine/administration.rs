//! Admin requests, carried out on the engine thread.
//!
//! Queries are answered at once from the filer and the configuration.
//! Changes are submitted to the filer like host writes (validated, logged in
//! the NVLog, applied) and answered when the filer replies; the catalogue of
//! exports is republished after each, so a new LUN or snapshot can be
//! connected to at once. `disk fail` is the driver's own business: it records
//! the failure in the configuration first, then stops the disk's I/O and
//! tells the filer, and it refuses a failure the RAID group would not survive.
//! `disk add` and `disk replace` create a spare's file, record it (saved),
//! then start its threads and tell the filer; `disk remove` forgets a broken
//! disk (saved) before it deletes the disk's file.

use std::fmt::Write;
use std::sync::mpsc::Sender;

use wafer_core::aggregate::Slot;
use wafer_core::filer::{
    CachePolicy, Change, HostError, HostRequest, MAX_SNAP_RESERVE_PERCENT, ReplyData, VolumeState,
};
use wafer_core::format::{LunAttributes, OsType};
use wafer_core::nvlog::LunId;
use wafer_core::schedule::SnapSchedule;
use wafer_core::units::{AggrId, VolumeId};
use wafer_raid::DiskIndex;

use super::{Engine, Stopping, Waiter, view};
use crate::admin::{
    AdminError, AdminErrorKind, AdminReply, AdminRequest, AdminResponse, AggrAddition,
    AggregateCpStatus, AggregateSpaceStatus, AggregateStatus, BrokenDiskStatus, DiskCountersStatus,
    DiskStatus, FIXED_VOLUME_OPTIONS, FlashCacheStatus, FlashPoolStats, LunStatus, RaidGroupStatus,
    ReallocationMeasure, ReallocationStatus, RebuildProgress, SNAP_SCHED_USAGE, ScrubProgress,
    SizeChange, SnapReserveStatus, SnapSchedStatus, SnapshotStatus, SysstatReport,
    VolumePriorityStatus, VolumeSpaceStatus, VolumeStatus, ontap_size,
};
use crate::catalogue::{Ended, Reach, Target};
use crate::config::{AggrConfig, CONFIG_FILE, DiskState, SlotDisk};
use crate::labels::disk_file_bytes;
use crate::lun_ids::LunNow;

/// How a request is answered.
pub(super) enum Answer {
    /// At once.
    Now(AdminReply),
    /// When aggregate `.0` has created this volume.
    CreateVolume(AggrId, Change, String),
    /// When the filer has applied this change; the message says what it did.
    Change(Change, String),
    /// When the filer has answered this request, which changes no data
    /// (`reallocate`); the message says what was done, or for a measurement
    /// names the LUN.
    Request(HostRequest, String),
}

/// The rating above which `reallocate measure` says ONTAP would reallocate
/// (ONTAP's default threshold).
const REALLOC_THRESHOLD: u8 = 4;

impl Engine {
    /// Carries out an admin request, or starts to.
    pub(super) fn admin(&mut self, request: AdminRequest, reply: Sender<AdminResponse>) {
        if self.stopping != Stopping::No {
            let refusal = error(AdminErrorKind::ShuttingDown, "the server is stopping");
            let _ = reply.send(AdminResponse::Error(refusal));
            return;
        }
        let later = match request {
            AdminRequest::AggrCreate {
                name,
                raid_type,
                raid_size,
                disks,
            } => Some(self.create_aggregate(&name, &raid_type, raid_size, disks, reply.clone())),
            AdminRequest::AggrAdd {
                name,
                group,
                disks,
                disk_type,
                raid_type,
                raid_size,
                disk_bytes,
            } => {
                let addition = AggrAddition {
                    group,
                    disks,
                    disk_type,
                    raid_type,
                    raid_size,
                    disk_bytes,
                };
                Some(self.add_to_aggregate(&name, &addition, reply.clone()))
            }
            AdminRequest::AggrOffline { name } => {
                Some(self.offline_aggregate(&name, reply.clone()))
            }
            AdminRequest::AggrOnline { name } => Some(self.online_aggregate(&name, reply.clone())),
            other => {
                self.answer_now_or_later(other, reply.clone());
                None
            }
        };
        if let Some(Err(refusal)) = later {
            let _ = reply.send(AdminResponse::Error(refusal));
        }
    }

    fn answer_now_or_later(&mut self, request: AdminRequest, reply: Sender<AdminResponse>) {
        match self.answer(request) {
            Ok(Answer::Now(answer)) => {
                let _ = reply.send(AdminResponse::Ok(answer));
            }
            Err(refusal) => {
                let _ = reply.send(AdminResponse::Error(refusal));
            }
            Ok(Answer::Request(request, message)) => {
                self.submit_admin(None, request, message, Vec::new(), reply);
            }
            Ok(Answer::CreateVolume(aggr, change, message)) => {
                let request = HostRequest::Change(change);
                self.submit_admin(Some(aggr), request, message, Vec::new(), reply);
            }
            Ok(Answer::Change(change, message)) => {
                // Ended before the filer sees the change, so that no request
                // submitted after it can reach what it ends, or what a later
                // change puts in its place.
                let ended = self.end_incarnations(&change);
                let destroyed = match &change {
                    Change::DestroyVolume { volume } => self.volume_name(*volume),
                    _ => None,
                };
                let request = HostRequest::Change(change);
                let waiter = Waiter::Admin {
                    reply,
                    message,
                    ended,
                    destroyed,
                };
                self.submit_waiter(None, request, waiter);
            }
        }
    }

    /// Submits an admin request to the node (to aggregate `target`, if
    /// given); answered by `admin_done`.
    fn submit_admin(
        &mut self,
        target: Option<AggrId>,
        request: HostRequest,
        message: String,
        ended: Vec<Ended>,
        reply: Sender<AdminResponse>,
    ) {
        let waiter = Waiter::Admin {
            reply,
            message,
            ended,
            destroyed: None,
        };
        self.submit_waiter(target, request, waiter);
    }

    /// Submits an admin request whose [`Waiter::Admin`] is made.
    fn submit_waiter(&mut self, target: Option<AggrId>, request: HostRequest, waiter: Waiter) {
        let now = self.clock.now();
        let submitted = match target {
            Some(aggr) => self.node.submit_to(now, aggr, request),
            None => self.node.submit(now, request),
        };
        match (submitted, waiter) {
            (Ok(id), waiter) => {
                self.waiters.insert(id, waiter);
            }
            (Err(busy), Waiter::Admin { reply, ended, .. }) => {
                self.revive(ended);
                let refusal = error(AdminErrorKind::ShuttingDown, &busy.to_string());
                let _ = reply.send(AdminResponse::Error(refusal));
            }
            (Err(_), _) => unreachable!("only admin requests are submitted here"),
        }
    }

    /// Forgets the ID records of destroyed volume `name`'s LUNs, every map of
    /// them and of their snapshots' images and which were offline, and saves
    /// the configuration.
    pub(super) fn forget_volume_records(&mut self, name: &str) {
        let prefix = format!("/vol/{name}/");
        self.config.luns.retain(|l| !l.path.starts_with(&prefix));
        if let Some(san) = self.config.san.as_mut() {
            san.maps.retain(|m| !m.path.starts_with(&prefix));
            san.offline.retain(|path| !path.starts_with(&prefix));
        }
        if let Err(e) = self.config.save(&self.dir) {
            tracing::warn!("volume {name}'s LUN records not dropped from the configuration: {e}");
        }
    }

    /// The name of node volume `volume`, if it is listed.
    pub(super) fn volume_name(&self, volume: VolumeId) -> Option<String> {
        let volumes = view::volumes(&self.node).into_iter();
        volumes
            .filter(|(id, _)| *id == volume)
            .map(|(_, name)| name)
            .next()
    }

    /// A change submitted by [`Engine::admin`] is answered.
    pub(super) fn admin_done(
        &mut self,
        reply: &Sender<AdminResponse>,
        message: String,
        ended: Vec<Ended>,
        result: Result<ReplyData, HostError>,
    ) {
        let response = match result {
            Ok(ReplyData::Measure(measure)) => {
                let line = measure.log_line(&message, REALLOC_THRESHOLD);
                tracing::info!("admin: {line}");
                AdminResponse::Ok(AdminReply::ReallocateMeasure(ReallocationMeasure {
                    path: message,
                    rating: measure.rating,
                    hotspot: measure.hotspot,
                    threshold: REALLOC_THRESHOLD,
                    message: line,
                }))
            }
            Ok(_) => {
                self.publish_catalogue();
                tracing::info!("admin: {message}");
                AdminResponse::Ok(AdminReply::Done { message })
            }
            Err(refusal) => {
                self.revive(ended);
                AdminResponse::Error(host_error(&refusal))
            }
        };
        let _ = reply.send(response);
    }

    /// Ends the incarnations of what `change` destroys or replaces: a LUN
    /// destroyed, the LUNs a restore rewrites (every one of the volume's, now
    /// or in the snapshot, for a whole-volume restore), a snapshot deleted.
    fn end_incarnations(&mut self, change: &Change) -> Vec<Ended> {
        let reaches = match change {
            Change::DestroyLun { lun } => vec![Reach::Lun(*lun)],
            Change::RestoreSnapshot {
                volume,
                lun: Some(file),
                ..
            } => vec![Reach::Lun(LunId {
                volume: *volume,
                file: *file,
            })],
            Change::RestoreSnapshot {
                volume,
                name,
                lun: None,
            } => self.luns_restored(*volume, name),
            Change::DeleteSnapshot { volume, name } => {
                vec![Reach::Snapshot(*volume, name.clone())]
            }
            Change::DestroyVolume { volume } => self.volume_reaches(*volume),
            _ => Vec::new(),
        };
        let ended: Vec<Ended> = reaches
            .into_iter()
            .map(|reach| self.incarnations.end(reach))
            .collect();
        if !ended.is_empty() {
            self.publish_catalogue();
        }
        ended
    }

    /// Every LUN and snapshot of `volume`.
    fn volume_reaches(&self, volume: VolumeId) -> Vec<Reach> {
        let luns = self.node.luns(volume).into_iter();
        let snapshots = view::snapshots(&self.node, volume).into_iter();
        luns.map(|(lun, ..)| Reach::Lun(lun))
            .chain(snapshots.map(|s| Reach::Snapshot(volume, s.name)))
            .collect()
    }

    /// `vol size` of volume `name`: shown, or changed by `change`.
    fn volume_size(&self, name: String, change: Option<SizeChange>) -> Result<Answer, AdminError> {
        let volume = self.volume_id(&name)?;
        let from = view::volume_space(&self.node, volume).map_or(0, |s| s.size_bytes);
        let Some(change) = change else {
            let size_bytes = from;
            return Ok(Answer::Now(AdminReply::VolumeSize {
                volume: name,
                size_bytes,
            }));
        };
        let to = change
            .applied_to(from)
            .map_err(|e| invalid(&format!("vol size: volume '{name}' is not resized: {e}")))?;
        let message = format!(
            "vol size: Flexible volume '{name}' size set to {}.",
            ontap_size(to)
        );
        let change = Change::ResizeVolume {
            volume,
            size_bytes: to,
        };
        Ok(Answer::Change(change, message))
    }

    /// `vol online` or `vol offline` of volume `name`.
    fn set_volume_online(&self, name: String, online: bool) -> Result<Answer, AdminError> {
        let volume = self.volume_id(&name)?;
        let state = if online { "online" } else { "offline" };
        let message = format!("Volume '{name}' is now {state}.");
        Ok(Answer::Change(
            Change::SetVolumeOnline { volume, online },
            message,
        ))
    }

    /// Every LUN a whole-volume restore from snapshot `name` rewrites.
    fn luns_restored(&self, volume: VolumeId, name: &str) -> Vec<Reach> {
        let now = self.node.luns(volume).into_iter().map(|(lun, ..)| lun);
        let then = view::snapshots(&self.node, volume)
            .into_iter()
            .filter(|snapshot| snapshot.name == name)
            .flat_map(|snapshot| snapshot.luns)
            .map(|(lun, ..)| lun);
        let luns: std::collections::BTreeSet<LunId> = now.chain(then).collect();
        luns.into_iter().map(Reach::Lun).collect()
    }

    /// Brings back what a refused change had ended.
    fn revive(&mut self, ended: Vec<Ended>) {
        let any = !ended.is_empty();
        for one in ended {
            self.incarnations.revive(one);
        }
        if any {
            self.publish_catalogue();
        }
    }

    fn answer(&mut self, request: AdminRequest) -> Result<Answer, AdminError> {
        Ok(match request {
            AdminRequest::VolStatus => Answer::Now(AdminReply::Volumes(self.volume_status())),
            AdminRequest::VolCreate { name, size_bytes } => {
                let aggr = self.default_aggregate()?;
                let message = format!("volume {name} created ({size_bytes} bytes)");
                Answer::CreateVolume(aggr, Change::CreateVolume { name, size_bytes }, message)
            }
            AdminRequest::VolCreateOn {
                name,
                aggregate,
                size_bytes,
            } => {
                let aggr = self.serving_aggregate(&aggregate, "vol create")?;
                let message = format!("volume {name} created in {aggregate} ({size_bytes} bytes)");
                Answer::CreateVolume(aggr, Change::CreateVolume { name, size_bytes }, message)
            }
            AdminRequest::VolOffline { name } => self.set_volume_online(name, false)?,
            AdminRequest::VolOnline { name } => self.set_volume_online(name, true)?,
            AdminRequest::VolSize { name, size } => self.volume_size(name, size)?,
            AdminRequest::VolOptionSet {
                volume,
                name,
                value,
            } => self.set_volume_option(&volume, &name, &value)?,
            AdminRequest::VolDestroy { name } => {
                let volume = self.volume_id(&name)?;
                let message = format!("Volume '{name}' destroyed.");
                Answer::Change(Change::DestroyVolume { volume }, message)
            }
            AdminRequest::LunCreate {
                path,
                size_bytes,
                ostype,
                noreserve,
            } => {
                let (volume_name, name) = split_lun_path(&path)?;
                let volume = self.volume_id(volume_name)?;
                let message = format!("LUN /vol/{volume_name}/{name} created ({size_bytes} bytes)");
                let attributes = LunAttributes {
                    space_reserved: !noreserve,
                    ostype: lun_ostype(ostype.as_deref())?,
                };
                let change = Change::CreateLun {
                    volume,
                    name: name.to_string(),
                    size_bytes,
                    attributes,
                };
                Answer::Change(change, message)
            }
            AdminRequest::LunShow => Answer::Now(AdminReply::Luns(self.lun_status())),
            AdminRequest::LunResize { path, size, force } => self.resize(path, size, force)?,
            AdminRequest::LunDestroy { path, force } => {
                let lun = self.lun_id(&path)?;
                if !force {
                    self.check_unused(lun, &path)?;
                    self.check_unmapped(&path)?;
                }
                Answer::Change(Change::DestroyLun { lun }, format!("LUN {path} destroyed"))
            }
            AdminRequest::SnapCreate { volume, name } => {
                let message = format!("snapshot {name} of {volume} created");
                let volume = self.volume_id(&volume)?;
                Answer::Change(Change::CreateSnapshot { volume, name }, message)
            }
            AdminRequest::SnapList { volume } => {
                let snapshots = self.snapshot_status(self.volume_id(&volume)?);
                Answer::Now(AdminReply::Snapshots { volume, snapshots })
            }
            AdminRequest::SnapDelete { volume, name } => {
                let message = format!("snapshot {name} of {volume} deleted");
                let volume = self.volume_id(&volume)?;
                Answer::Change(Change::DeleteSnapshot { volume, name }, message)
            }
            AdminRequest::SnapRestore { volume, name, lun } => {
                self.restore(&volume, name, lun.as_deref())?
            }
            AdminRequest::Df => Answer::Now(AdminReply::VolumeSpace(self.volume_space())),
            AdminRequest::DfAggregate => {
                let aggr = self.default_aggregate()?;
                Answer::Now(AdminReply::AggregateSpace(self.aggregate_space(aggr)))
            }
            AdminRequest::DfAggregates => Answer::Now(AdminReply::AggregateSpaces(
                self.serving_aggregates()
                    .into_iter()
                    .map(|aggr| self.aggregate_space(aggr))
                    .collect(),
            )),
            AdminRequest::AggrStatus => {
                let aggr = self.first_aggregate()?;
                Answer::Now(AdminReply::Aggregate(Box::new(self.aggregate_status(aggr))))
            }
            AdminRequest::AggrStatusAll => Answer::Now(AdminReply::Aggregates(
                self.config
                    .aggregates
                    .iter()
                    .map(AggrConfig::aggr_id)
                    .collect::<Vec<_>>()
                    .into_iter()
                    .map(|aggr| self.aggregate_status(aggr))
                    .collect(),
            )),
            AdminRequest::AggrCreate { .. }
            | AdminRequest::AggrAdd { .. }
            | AdminRequest::AggrOffline { .. }
            | AdminRequest::AggrOnline { .. } => {
                unreachable!("answered by Engine::admin when the node has done it")
            }
            AdminRequest::AggrDestroy { name } => Answer::Now(self.destroy_aggregate(&name)?),
            AdminRequest::AggrOptionSet {
                name,
                option,
                value,
            } => self.set_aggregate_option(&name, &option, &value)?,
            AdminRequest::DiskFail { disk, aggregate } => {
                Answer::Now(self.fail_disk(&disk, aggregate.as_deref())?)
            }
            AdminRequest::DiskReplace { disk, aggregate } => {
                Answer::Now(self.replace_disk(&disk, aggregate.as_deref())?)
            }
            AdminRequest::DiskAdd => Answer::Now(self.add_disk()?),
            AdminRequest::DiskRemove { disk } => Answer::Now(self.remove_disk(&disk)?),
            AdminRequest::AggrScrubStart { aggregate } => {
                Answer::Now(self.start_scrub(aggregate.as_deref())?)
            }
            AdminRequest::AggrScrubStop { aggregate } => {
                Answer::Now(self.stop_scrub(aggregate.as_deref())?)
            }
            AdminRequest::Sysstat => Answer::Now(AdminReply::Sysstat(Box::new(self.sysstat()))),
            AdminRequest::StatsShowExtCacheObj => {
                let status = self.flash_cache_status().ok_or_else(|| {
                    invalid(
                        "stats show: no instances of object ext_cache_obj: the server was \
                         started without a Flash Cache (wafer serve --flash-cache PATH)",
                    )
                })?;
                Answer::Now(AdminReply::ExtCacheObj(Box::new(status)))
            }
            AdminRequest::StatsShowWaflHyaPerAggr => {
                let pools = self.flash_pool_stats();
                if pools.is_empty() {
                    return Err(invalid(
                        "stats show: no instances of object wafl_hya_per_aggr: no aggregate \
                         online has SSD RAID groups (aggr options AGGR hybrid_enabled on, then \
                         aggr add AGGR -T SSD NDISKS)",
                    ));
                }
                Answer::Now(AdminReply::WaflHyaPerAggr(pools))
            }
            AdminRequest::ReallocateMeasure { path } => {
                let lun = self.lun_id(&path)?;
                Answer::Request(HostRequest::ReallocateMeasure { lun }, path)
            }
            AdminRequest::ReallocateStart { path } => {
                let lun = self.lun_id(&path)?;
                let message = format!("Reallocation scan will be started on '{path}'.");
                Answer::Request(HostRequest::ReallocateStart { lun }, message)
            }
            AdminRequest::ReallocateStatus => Answer::Now(AdminReply::Reallocation(
                view::realloc_status(&self.node).map(|job| ReallocationStatus {
                    path: self.lun_path(job.lun),
                    blocks_done: job.blocks_done,
                    blocks_total: job.blocks_total,
                    quiesced: job.quiesced,
                }),
            )),
            AdminRequest::ReallocateQuiesce { path } => {
                Answer::Now(self.control_realloc(path.as_deref(), ReallocControl::Quiesce)?)
            }
            AdminRequest::ReallocateRestart { path } => {
                Answer::Now(self.control_realloc(path.as_deref(), ReallocControl::Restart)?)
            }
            AdminRequest::ReallocateStop { path } => {
                Answer::Now(self.control_realloc(path.as_deref(), ReallocControl::Stop)?)
            }
            AdminRequest::IgroupCreate { .. }
            | AdminRequest::IgroupAdd { .. }
            | AdminRequest::IgroupRemove { .. }
            | AdminRequest::IgroupDestroy { .. }
            | AdminRequest::IgroupShow
            | AdminRequest::LunMap { .. }
            | AdminRequest::LunUnmap { .. }
            | AdminRequest::LunMaps
            | AdminRequest::LunOffline { .. }
            | AdminRequest::LunOnline { .. } => Answer::Now(self.masking(request)?),
            AdminRequest::IscsiSecurityAdd { .. }
            | AdminRequest::IscsiSecurityShow
            | AdminRequest::IscsiSecurityDelete { .. } => Answer::Now(self.security(request)?),
            AdminRequest::PrioritySetCache { volume, cache } => {
                let policy = match cache.as_str() {
                    "keep" => CachePolicy::Keep,
                    "reuse" => CachePolicy::Reuse,
                    "default" => CachePolicy::Default,
                    other => {
                        return Err(invalid(&format!(
                            "cache={other}: the cache policy is keep, reuse or default"
                        )));
                    }
                };
                let message = format!("volume {volume} cache policy set to {cache}");
                let volume = self.volume_id(&volume)?;
                Answer::Change(Change::SetCachePolicy { volume, policy }, message)
            }
            AdminRequest::PriorityShowVolume { volume } => Answer::Now(
                AdminReply::VolumePriorities(self.volume_priorities(volume.as_deref())?),
            ),
            AdminRequest::SnapReserveSet { volume, percent } => {
                self.set_snap_reserve(&volume, percent)?
            }
            AdminRequest::SnapReserve { volume } => Answer::Now(AdminReply::SnapReserves(
                self.snap_reserves(volume.as_deref())?,
            )),
            AdminRequest::SnapSchedSet {
                volume,
                weekly,
                nightly,
                hourly,
            } => {
                let schedule = SnapSchedule::parse(&weekly, &nightly, &hourly)
                    .map_err(|e| invalid(&format!("snap sched: {e}\nusage: {SNAP_SCHED_USAGE}")))?;
                let message = format!("volume {volume}: snapshot schedule set to {schedule}");
                let volume = self.volume_id(&volume)?;
                Answer::Change(Change::SetSnapSchedule { volume, schedule }, message)
            }
            AdminRequest::SnapSched { volume } => {
                Answer::Now(AdminReply::SnapScheds(self.snap_scheds(volume.as_deref())?))
            }
        })
    }

    /// `reallocate quiesce|restart|stop [PATH]`: the reallocation in
    /// progress (which must be PATH's, if given).
    fn control_realloc(
        &mut self,
        path: Option<&str>,
        control: ReallocControl,
    ) -> Result<AdminReply, AdminError> {
        let job = view::realloc_status(&self.node)
            .map(|job| (job.aggr, self.lun_path(job.lun)))
            .filter(|(_, running)| path.is_none_or(|p| p == running));
        let Some((aggr, running)) = job else {
            let what = path.map_or_else(String::new, |p| format!(" on '{p}'"));
            return Err(error(
                AdminErrorKind::NotFound,
                &format!("No reallocation scan{what}."),
            ));
        };
        let now = self.clock.now();
        let done = self.node.with_aggregate(now, aggr, |filer| match control {
            ReallocControl::Quiesce => filer.quiesce_realloc(),
            ReallocControl::Restart => filer.restart_realloc(),
            ReallocControl::Stop => filer.stop_realloc(),
        });
        let (verb, refusal) = match control {
            ReallocControl::Quiesce => ("quiesced", "is already quiesced"),
            ReallocControl::Restart => ("restarted", "is not quiesced"),
            ReallocControl::Stop => ("stopped", "has ended"),
        };
        match done {
            Some(true) => Ok(AdminReply::Done {
                message: format!("Reallocation scan on '{running}' {verb}."),
            }),
            _ => Err(invalid(&format!(
                "Reallocation scan on '{running}' {refusal}."
            ))),
        }
    }

    /// Every volume's node id and name, or only volume `name`'s.
    fn named_volumes(&self, name: Option<&str>) -> Result<Vec<(VolumeId, String)>, AdminError> {
        match name {
            Some(name) => Ok(vec![(self.volume_id(name)?, name.to_string())]),
            None => Ok(view::volumes(&self.node)),
        }
    }

    /// `priority show volume [VOLUME]`: each volume's cache policy.
    fn volume_priorities(
        &self,
        name: Option<&str>,
    ) -> Result<Vec<VolumePriorityStatus>, AdminError> {
        let volumes = self.named_volumes(name)?;
        Ok(volumes
            .into_iter()
            .filter_map(|(id, volume)| {
                let settings = view::volume_settings(&self.node, id)?;
                let cache = match settings.cache_policy {
                    CachePolicy::Keep => "keep",
                    CachePolicy::Reuse => "reuse",
                    CachePolicy::Default => "default",
                };
                Some(VolumePriorityStatus {
                    volume,
                    cache: cache.into(),
                })
            })
            .collect())
    }

    /// `snap reserve VOLUME PERCENT`: logged like any change; the engine's
    /// namespace check refuses a reserve the volume's space cannot give.
    fn set_snap_reserve(&self, volume_name: &str, percent: u32) -> Result<Answer, AdminError> {
        let volume = self.volume_id(volume_name)?;
        let percent = u8::try_from(percent)
            .ok()
            .filter(|&p| p <= MAX_SNAP_RESERVE_PERCENT)
            .ok_or_else(|| {
                invalid(&format!(
                    "snap reserve: {percent}% is more than the largest snapshot reserve, \
                     {MAX_SNAP_RESERVE_PERCENT}%"
                ))
            })?;
        let message = format!("volume {volume_name}: snapshot reserve set to {percent}%");
        Ok(Answer::Change(
            Change::SetSnapReserve { volume, percent },
            message,
        ))
    }

    /// `snap reserve [VOLUME]`: each volume's reserve, percent and bytes.
    fn snap_reserves(&self, name: Option<&str>) -> Result<Vec<SnapReserveStatus>, AdminError> {
        let volumes = self.named_volumes(name)?;
        Ok(volumes
            .into_iter()
            .filter_map(|(id, volume)| {
                let settings = view::volume_settings(&self.node, id)?;
                let space = view::volume_space(&self.node, id)?;
                Some(SnapReserveStatus {
                    volume,
                    percent: settings.snap_reserve_percent,
                    reserve_bytes: space.snapshot_reserve_bytes,
                })
            })
            .collect())
    }

    /// `vol options VOLUME NAME VALUE`: `read_realloc` is logged like any
    /// change; the options wafer holds at one value accept only that one.
    fn set_volume_option(
        &self,
        volume_name: &str,
        name: &str,
        value: &str,
    ) -> Result<Answer, AdminError> {
        let volume = self.volume_id(volume_name)?;
        let fixed = FIXED_VOLUME_OPTIONS
            .iter()
            .find(|(option, _)| *option == name);
        if let Some((_, kept)) = fixed {
            return match value == *kept {
                true => Ok(Answer::Now(AdminReply::Done {
                    message: format!("volume {volume_name}: {name} is {kept}"),
                })),
                false => Err(invalid(&format!(
                    "vol options: wafer keeps {name}={kept} on every volume; '{value}' is not \
                     supported"
                ))),
            };
        }
        if name != "read_realloc" {
            return Err(invalid(&format!(
                "vol options: no option '{name}' (wafer's volume options are read_realloc, {})",
                FIXED_VOLUME_OPTIONS.map(|(option, _)| option).join(", ")
            )));
        }
        let enabled = match value {
            "on" => true,
            "off" => false,
            _ => {
                return Err(invalid(&format!(
                    "vol options: read_realloc is on or off in wafer, not '{value}' \
                     (space_optimized is not supported)"
                )));
            }
        };
        let message = format!("volume {volume_name}: read_realloc set to {value}");
        Ok(Answer::Change(
            Change::SetReadRealloc { volume, enabled },
            message,
        ))
    }

    /// `snap sched [VOLUME]`: each volume's schedule.
    fn snap_scheds(&self, name: Option<&str>) -> Result<Vec<SnapSchedStatus>, AdminError> {
        let volumes = self.named_volumes(name)?;
        Ok(volumes
            .into_iter()
            .filter_map(|(id, volume)| {
                let schedule = view::volume_settings(&self.node, id)?.snap_schedule;
                Some(SnapSchedStatus {
                    volume,
                    weekly: schedule.weekly,
                    nightly: schedule.nightly,
                    hourly: schedule.hourly,
                    hours: (0u8..24)
                        .filter(|h| schedule.hours & (1u32 << h) != 0)
                        .collect(),
                })
            })
            .collect())
    }

    fn restore(
        &self,
        volume_name: &str,
        name: String,
        lun: Option<&str>,
    ) -> Result<Answer, AdminError> {
        let volume = self.volume_id(volume_name)?;
        let file = match lun {
            None => None,
            Some(lun) if lun.contains('/') => {
                let id = self.lun_id(lun)?;
                if id.volume != volume {
                    return Err(invalid(&format!("{lun} is not in volume {volume_name}")));
                }
                Some(id.file)
            }
            Some(lun) => Some(self.lun_in(volume, lun)?.file),
        };
        let what = lun.map_or_else(|| format!("volume {volume_name}"), |l| format!("LUN {l}"));
        let message = format!("{what} restored from snapshot {name}");
        Ok(Answer::Change(
            Change::RestoreSnapshot {
                volume,
                name,
                lun: file,
            },
            message,
        ))
    }

    /// Resizes a LUN to an absolute size or by a relative one; a shrink
    /// loses the data beyond the new size, so it needs `force`.
    fn resize(&self, path: String, change: SizeChange, force: bool) -> Result<Answer, AdminError> {
        let (volume, name) = split_lun_path(&path)?;
        let (lun, _, from) = self.lun_entry(self.volume_id(volume)?, name)?;
        let to = change
            .applied_to(from)
            .map_err(|e| invalid(&format!("LUN {path} is not resized: {e}")))?;
        if to < from && !force {
            return Err(invalid(&format!(
                "LUN {path} is not resized: shrinking it from {from} to {to} bytes loses the data \
                 beyond {to} bytes; use -f to shrink it anyway"
            )));
        }
        let message = format!("LUN {path} resized from {from} to {to} bytes");
        Ok(Answer::Change(
            Change::ResizeLun {
                lun,
                size_bytes: to,
            },
            message,
        ))
    }

    /// Refuses to destroy a LUN an NBD connection has open: its client would
    /// lose it mid-use. Its snapshots' exports are not counted: they read
    /// the snapshots, which keep what they hold of it.
    fn check_unused(&self, lun: LunId, path: &str) -> Result<(), AdminError> {
        let target = Target::live(lun, None, &self.incarnations);
        match self.shared.catalogue.holds().connections(&target) {
            0 => Ok(()),
            open => Err(invalid(&format!(
                "LUN {path} is not destroyed: it is mapped and in use, open on {open} NBD \
                 connection{} (every later request on {} would fail); use -f to destroy it anyway",
                if open == 1 { "" } else { "s" },
                if open == 1 { "it" } else { "them" },
            ))),
        }
    }

    /// LUN `lun`'s path, `/vol/VOLUME/LUN`.
    fn lun_path(&self, lun: LunId) -> String {
        let volume = view::volumes(&self.node)
            .into_iter()
            .find(|(id, _)| *id == lun.volume);
        let name = self
            .node
            .luns(lun.volume)
            .into_iter()
            .find(|(id, ..)| *id == lun);
        match (volume, name) {
            (Some((_, volume)), Some((_, name, _))) => format!("/vol/{volume}/{name}"),
            _ => format!("LUN {} of volume {}", lun.file.0, lun.volume.0),
        }
    }

    fn volume_id(&self, name: &str) -> Result<VolumeId, AdminError> {
        view::volumes(&self.node)
            .into_iter()
            .find(|(_, n)| n == name)
            .map(|(id, _)| id)
            .ok_or_else(|| error(AdminErrorKind::NotFound, &format!("no volume {name}")))
    }

    fn lun_in(&self, volume: VolumeId, name: &str) -> Result<LunId, AdminError> {
        self.lun_entry(volume, name).map(|(id, ..)| id)
    }

    /// LUN `name` of `volume`: its id, name and size.
    fn lun_entry(&self, volume: VolumeId, name: &str) -> Result<(LunId, String, u64), AdminError> {
        self.node
            .luns(volume)
            .into_iter()
            .find(|(_, n, _)| n == name)
            .ok_or_else(|| error(AdminErrorKind::NotFound, &format!("no LUN {name}")))
    }

    fn lun_id(&self, path: &str) -> Result<LunId, AdminError> {
        let (volume, name) = split_lun_path(path)?;
        self.lun_in(self.volume_id(volume)?, name)
    }

    fn volume_status(&self) -> Vec<VolumeStatus> {
        view::volumes_in(&self.node)
            .into_iter()
            .map(|(id, name, aggr)| VolumeStatus {
                aggregate: self.aggr_name(aggr),
                name,
                id: id.0,
                state: match view::volume_state(&self.node, id) {
                    Some(VolumeState::Online) => "online".into(),
                    _ => "offline".into(),
                },
                size_bytes: view::volume_space(&self.node, id).map_or(0, |s| s.size_bytes),
                luns: self.node.luns(id).len(),
                snapshots: view::snapshots(&self.node, id).len(),
                raid_type: view::serving(&self.node, aggr)
                    .and_then(|f| f.layout().groups().first().map(|g| g.raid_type()))
                    .map_or_else(String::new, |t| t.ontap_name().into()),
                read_realloc: view::volume_settings(&self.node, id).is_some_and(|s| s.read_realloc),
            })
            .collect()
    }

    /// Records an ID for every LUN the filer holds and drops the records of
    /// LUNs gone (`crate::lun_ids`), saving the configuration if that changed
    /// it (except while the directory is being created: its configuration is
    /// written once, at the end). Returns the LUN with ID 0, the default
    /// export, if it lives.
    pub(super) fn record_lun_ids(&mut self) -> Option<LunId> {
        let present: Vec<(LunId, LunNow)> = view::volumes(&self.node)
            .into_iter()
            .flat_map(|(volume, volume_name)| {
                let luns = self.node.luns(volume).into_iter();
                luns.map(move |(lun, name, _)| {
                    let path = format!("/vol/{volume_name}/{name}");
                    let inode = lun.file.0;
                    (lun, LunNow { path, inode })
                })
            })
            .collect();
        let mut now: Vec<LunNow> = present.iter().map(|(_, l)| l.clone()).collect();
        // The LUNs of an aggregate not serving (offline, failed) keep their
        // IDs: records of volumes no serving aggregate holds stay.
        let serving: Vec<String> = view::volumes(&self.node)
            .into_iter()
            .map(|(_, name)| name)
            .collect();
        for record in &self.config.luns {
            let volume = record
                .path
                .strip_prefix("/vol/")
                .and_then(|p| p.split_once('/'))
                .map(|(volume, _)| volume);
            if volume.is_some_and(|v| !serving.iter().any(|s| s == v)) {
                now.push(LunNow {
                    path: record.path.clone(),
                    inode: record.inode,
                });
            }
        }
        let before: Vec<String> = self.config.luns.iter().map(|l| l.path.clone()).collect();
        let mut changed = self.config.record_luns(&now);
        changed |= self.unmap_destroyed(&before);
        if changed
            && self.dir.join(CONFIG_FILE).exists()
            && let Err(e) = self.config.save(&self.dir)
        {
            tracing::warn!("LUN IDs not saved ({e}): the next save of the configuration has them");
        }
        present
            .into_iter()
            .find(|(_, l)| self.config.lun_id(&l.path, l.inode) == Some(0))
            .map(|(lun, _)| lun)
    }

    fn lun_status(&self) -> Vec<LunStatus> {
        let mut luns = Vec::new();
        for (volume, volume_name) in view::volumes(&self.node) {
            for (lun, name, size_bytes) in self.node.luns(volume) {
                let path = format!("/vol/{volume_name}/{name}");
                let (attributes, occupied_bytes) =
                    (self.node.lun_details(lun)).unwrap_or((LunAttributes::DEFAULT, 0));
                luns.push(LunStatus {
                    ostype: attributes.ostype.name().to_string(),
                    space_reserved: attributes.space_reserved,
                    occupied_bytes,
                    lun_id: self.config.lun_id(&path, lun.file.0),
                    offline: self.config.san().is_offline(&path),
                    path,
                    export: format!("{volume_name}/{name}"),
                    volume: volume_name.clone(),
                    name,
                    size_bytes,
                    file_id: lun.file.0,
                });
            }
        }
        luns
    }

    fn snapshot_status(&self, volume: VolumeId) -> Vec<SnapshotStatus> {
        view::snapshots(&self.node, volume)
            .into_iter()
            .map(|s| SnapshotStatus {
                id: s.id.0,
                name: s.name,
                cp: s.cp.0,
                created_unix_ns: s.created.0,
                held_bytes: s.held_bytes,
                exclusive_bytes: s.exclusive_bytes,
            })
            .collect()
    }

    fn volume_space(&self) -> Vec<VolumeSpaceStatus> {
        let mut spaces = Vec::new();
        for (id, volume) in view::volumes(&self.node) {
            let Some(s) = view::volume_space(&self.node, id) else {
                continue;
            };
            spaces.push(VolumeSpaceStatus {
                volume,
                size_bytes: s.size_bytes,
                active_total_bytes: s.active_total_bytes(),
                snapshot_reserve_bytes: s.snapshot_reserve_bytes,
                lun_reserved_bytes: s.lun_reserved_bytes,
                lun_written_bytes: s.lun_written_bytes,
                metadata_bytes: s.metadata_bytes,
                overwrite_reserve_bytes: s.overwrite_reserve_bytes,
                snapshot_used_bytes: s.snapshot_used_bytes,
                snapshot_spill_bytes: s.snapshot_spill_bytes,
                used_bytes: s.used_bytes,
                available_bytes: s.available_bytes,
            });
        }
        spaces
    }

    fn aggregate_space(&self, aggr: AggrId) -> AggregateSpaceStatus {
        let name = self.aggr_name(aggr);
        match view::serving(&self.node, aggr) {
            Some(filer) => {
                let s = filer.aggregate_space();
                AggregateSpaceStatus {
                    aggregate: name,
                    total_bytes: s.total_bytes,
                    used_bytes: s.used_bytes,
                    available_bytes: s.available_bytes,
                    allocated_bytes: s.allocated_bytes,
                }
            }
            None => AggregateSpaceStatus {
                aggregate: name,
                total_bytes: 0,
                used_bytes: 0,
                available_bytes: 0,
                allocated_bytes: 0,
            },
        }
    }

    /// Aggregate `aggr`'s status: from its engine while it has one, else
    /// (offline, or failed to mount) from the configuration.
    pub(super) fn aggregate_status(&self, aggr: AggrId) -> AggregateStatus {
        let config = self.config.aggr(aggr.0).expect("a configured aggregate");
        let engine = self.node.aggregate(aggr);
        let layout = config.layout().expect("a valid configuration");
        let slots = config.slots();
        let mut raid_groups: Vec<RaidGroupStatus> = layout
            .groups()
            .iter()
            .enumerate()
            .map(|(group, geometry)| RaidGroupStatus {
                group,
                raid_type: geometry.raid_type().ontap_name().into(),
                state: "normal".into(),
                blocks_per_disk: geometry.blocks_per_disk(),
                tolerated_failures: geometry.raid_type().tolerated_failures(),
                tier: match layout.tier(group) {
                    wafer_core::aggregate::Tier::Hdd => "hdd".into(),
                    wafer_core::aggregate::Tier::Ssd => "ssd".into(),
                },
                disks: Vec::new(),
            })
            .collect();
        let mut spares = Vec::new();
        for slot in &slots {
            match slot.slot {
                Slot::Member { group, disk } => {
                    let role = layout.groups()[group].role(disk).ontap_name();
                    let status = disk_status(slot, role, Some(disk.0));
                    if status.state == DiskState::Failed {
                        raid_groups[group].state = "degraded".into();
                    }
                    raid_groups[group].disks.push(status);
                }
                Slot::Spare(_) => spares.push(disk_status(slot, "spare", None)),
            }
        }
        let rebuild = engine.and_then(|f| f.rebuild_status()).map(|r| {
            let slot = &slots[r.disk.0 as usize];
            // A failed disk still in a slot (waiting for a spare) leaves the
            // group degraded; once the spare is in the slot it is
            // reconstructing, whether or not the filer has heard so yet.
            let group = &mut raid_groups[r.group];
            if group.state != "degraded" {
                group.state = "reconstructing".into();
            }
            RebuildProgress {
                group: r.group,
                disk: slot.disk.name.clone(),
                slot: r.disk.0,
                stripes_done: r.stripes_done,
                stripes_total: r.stripes_total,
                spare_assigned: r.spare_assigned,
            }
        });
        let scrub = engine
            .and_then(|f| f.scrub_status())
            .map(|s| ScrubProgress {
                running: s.running,
                suspended: s.suspended,
                group: s.group,
                stripes_done: s.stripes_done,
                stripes_total: s.stripes_total,
                stripes_verified: s.tally.stripes_verified,
                parity_rewritten: s.tally.parity_rewritten,
                blocks_repaired: s.tally.blocks_repaired,
                stripes_left_alone: s.tally.stripes_left_alone,
            });
        let (state, failed_reason) = self.aggregate_state(aggr);
        let degraded = raid_groups.iter().any(|g| g.state != "normal");
        let state = match state.as_str() {
            "online" if degraded => "degraded".to_string(),
            _ => state,
        };
        AggregateStatus {
            name: config.aggregate.clone(),
            id: aggr.0,
            state,
            failed_reason,
            committed_cp: engine.map_or(0, |f| f.committed_cp().0),
            raid_size: config.raid_size(),
            hybrid_enabled: engine.is_some_and(|f| f.hybrid_enabled()) || config.is_hybrid(),
            raid_groups,
            spares,
            broken: broken_disks(config),
            rebuild,
            scrub,
        }
    }

    /// The aggregate a request that names none acts on: `aggr0` (id 0) if
    /// it serves, else the only one serving.
    pub(super) fn default_aggregate(&self) -> Result<AggrId, AdminError> {
        let serving = self.serving_aggregates();
        if serving.contains(&AggrId(0)) {
            return Ok(AggrId(0));
        }
        match serving.as_slice() {
            [only] => Ok(*only),
            [] => Err(invalid("no aggregate is online")),
            _ => Err(invalid(
                "aggregate 0 is not online and several others are: name the aggregate",
            )),
        }
    }

    /// The aggregate with the lowest id, whatever its state.
    fn first_aggregate(&self) -> Result<AggrId, AdminError> {
        self.config
            .aggregates
            .iter()
            .map(AggrConfig::aggr_id)
            .min()
            .ok_or_else(|| error(AdminErrorKind::NotFound, "the node has no aggregate"))
    }

    /// Every online aggregate.
    pub(super) fn serving_aggregates(&self) -> Vec<AggrId> {
        self.node
            .aggregates()
            .into_iter()
            .filter(|a| view::serving(&self.node, a.id).is_some())
            .map(|a| a.id)
            .collect()
    }

    /// The aggregate called `name`, which `what` needs online.
    pub(super) fn serving_aggregate(&self, name: &str, what: &str) -> Result<AggrId, AdminError> {
        let aggr = self.named_aggregate(name, what)?;
        match self.aggregate_state(aggr) {
            (state, _) if state == "online" => Ok(aggr),
            (state, reason) => Err(invalid(&format!(
                "{what}: aggregate '{name}' is {state}{}",
                reason.map_or_else(String::new, |r| format!(" ({r})"))
            ))),
        }
    }

    /// The aggregate called `name`.
    pub(super) fn named_aggregate(&self, name: &str, what: &str) -> Result<AggrId, AdminError> {
        self.config
            .aggr_named(name)
            .map(AggrConfig::aggr_id)
            .ok_or_else(|| {
                error(
                    AdminErrorKind::NotFound,
                    &format!("{what}: No aggregate named '{name}' exists."),
                )
            })
    }

    /// `aggr scrub start [AGGR]`: AGGR's scrub, or as ONTAP does without a
    /// name, one on every online aggregate not scrubbing already.
    fn start_scrub(&mut self, name: Option<&str>) -> Result<AdminReply, AdminError> {
        let now = self.clock.now();
        let Some(name) = name else {
            let mut started = Vec::new();
            let mut not = Vec::new();
            for aggr in self.serving_aggregates() {
                let result = self
                    .node
                    .with_aggregate(now, aggr, |filer| filer.start_scrub());
                match result.expect("a serving aggregate has an engine") {
                    Ok(()) => started.push(self.aggr_name(aggr)),
                    Err(e) => not.push(format!("{}: {e}", self.aggr_name(aggr))),
                }
            }
            self.drain();
            if started.is_empty() {
                return Err(match not.is_empty() {
                    true => invalid("scrub not started: no aggregate is online"),
                    false => invalid(&format!("scrub not started: {}", not.join("; "))),
                });
            }
            let mut message = match started.as_slice() {
                [one] => format!("scrub of aggregate {one} started"),
                all => format!("scrub of aggregates {} started", all.join(", ")),
            };
            if !not.is_empty() {
                let _ = write!(message, "; not of {}", not.join("; "));
            }
            return Ok(AdminReply::Done { message });
        };
        let aggr = self.serving_aggregate(name, "aggr scrub start")?;
        self.node
            .with_aggregate(now, aggr, |filer| filer.start_scrub())
            .expect("a serving aggregate has an engine")
            .map_err(|e| invalid(&format!("scrub of aggregate {name} not started: {e}")))?;
        self.drain();
        Ok(AdminReply::Done {
            message: format!("scrub of aggregate {name} started"),
        })
    }

    /// `aggr scrub stop [AGGR]`: AGGR's scrub, or every one running.
    fn stop_scrub(&mut self, name: Option<&str>) -> Result<AdminReply, AdminError> {
        let aggregates = match name {
            Some(name) => vec![self.serving_aggregate(name, "aggr scrub stop")?],
            None => self.serving_aggregates(),
        };
        let now = self.clock.now();
        let stopped: Vec<AggrId> = aggregates
            .into_iter()
            .filter(|aggr| {
                let stop = self
                    .node
                    .with_aggregate(now, *aggr, |filer| filer.stop_scrub());
                stop.unwrap_or(false)
            })
            .collect();
        let stopped: Vec<String> = stopped.into_iter().map(|a| self.aggr_name(a)).collect();
        self.drain();
        match (stopped.as_slice(), name) {
            ([], Some(name)) => Err(invalid(&format!("no scrub of aggregate {name} is running"))),
            ([], None) => Err(invalid("no scrub is running")),
            ([one], _) => Ok(AdminReply::Done {
                message: format!("scrub of aggregate {one} stopped"),
            }),
            (all, _) => Ok(AdminReply::Done {
                message: format!("scrub of aggregates {} stopped", all.join(", ")),
            }),
        }
    }

    /// The aggregate and slot of disk `disk` (a name, or a slot number of
    /// the first aggregate).
    fn find_slot(&self, disk: &str) -> Option<(AggrId, wafer_core::units::DiskId)> {
        let by_name = self.config.aggregates.iter().find_map(|aggr| {
            let slots = aggr.slots();
            let slot = slots.iter().find(|s| s.disk.name == disk)?;
            Some((aggr.aggr_id(), slot.id))
        });
        by_name.or_else(|| self.slot_in(self.config.aggregates.first()?, disk))
    }

    /// Disk `disk` (a name or a slot number) of aggregate `aggr`.
    fn slot_in(
        &self,
        aggr: &AggrConfig,
        disk: &str,
    ) -> Option<(AggrId, wafer_core::units::DiskId)> {
        let slots = aggr.slots();
        let slot = (slots.iter().find(|s| s.disk.name == disk))
            .or_else(|| slots.iter().find(|s| s.id.0.to_string() == disk))?;
        Some((aggr.aggr_id(), slot.id))
    }

    /// The slot `command` (`disk fail`, the disk to be `what`: `failed`)
    /// names: in aggregate `aggregate` if given (a name or a slot number of
    /// it), else as [`Engine::find_slot`] finds it.
    fn named_slot(
        &self,
        disk: &str,
        aggregate: Option<&str>,
        (command, what): (&str, &str),
    ) -> Result<(AggrId, wafer_core::units::DiskId), AdminError> {
        let Some(name) = aggregate else {
            return self
                .find_slot(disk)
                .ok_or_else(|| self.not_a_slot(disk, what));
        };
        let aggr = self.named_aggregate(name, command)?;
        let config = self.config.aggr(aggr.0).expect("named");
        self.slot_in(config, disk)
            .ok_or_else(|| match config.broken.iter().any(|b| b == disk) {
                true => self.not_a_slot(disk, what),
                false => error(
                    AdminErrorKind::NotFound,
                    &format!("no disk {disk} in aggregate {name} (a disk name or a slot number)"),
                ),
            })
    }

    fn fail_disk(&mut self, disk: &str, aggregate: Option<&str>) -> Result<AdminReply, AdminError> {
        let (aggr, id) = self.named_slot(disk, aggregate, ("disk fail", "failed"))?;
        let config = self.config.aggr(aggr.0).expect("found");
        let slots = config.slots();
        let slot = &slots[id.0 as usize];
        let name = slot.disk.name.clone();
        if slot.disk.state == DiskState::Failed {
            return Err(invalid(&format!("disk {name} has already failed")));
        }
        if let Slot::Member {
            group,
            disk: position,
        } = slot.slot
        {
            self.check_survives(aggr, group, position, &name)?;
        }
        self.fail_disk_slot(aggr, id, &name, "failed by the administrator (disk fail)")
            .map_err(|e| {
                let message =
                    format!("disk {name} not failed: the configuration cannot be saved: {e}");
                error(AdminErrorKind::Io, &message)
            })?;
        let message = format!(
            "disk {name} (slot {} of aggregate {}) failed",
            id.0,
            self.aggr_name(aggr)
        );
        Ok(AdminReply::Done { message })
    }

    /// Adds a blank disk file as a spare for failed disk `disk`, which the
    /// filer rebuilds onto it.
    fn replace_disk(
        &mut self,
        disk: &str,
        aggregate: Option<&str>,
    ) -> Result<AdminReply, AdminError> {
        let (aggr, id) = self.named_slot(disk, aggregate, ("disk replace", "replaced"))?;
        let config = self.config.aggr(aggr.0).expect("found");
        let slots = config.slots();
        let slot = &slots[id.0 as usize];
        let (failed, blocks) = (slot.disk.name.clone(), slot.disk.blocks);
        if slot.disk.state != DiskState::Failed || !matches!(slot.slot, Slot::Member { .. }) {
            return Err(invalid(&format!(
                "disk {failed} is not a failed RAID group member (disk fail it first)"
            )));
        }
        let name = self.add_spare_disk(aggr, blocks)?;
        let message = format!(
            "disk {name} added as a spare for failed disk {failed}; reconstruction runs in the background"
        );
        Ok(AdminReply::Done { message })
    }

    /// Adds a blank disk file as a spare, as large as the largest disk a RAID
    /// group uses; a failed disk waiting for a spare is rebuilt onto it. It
    /// goes to the first aggregate with a failed disk waiting for a spare,
    /// or else to the first online aggregate.
    fn add_disk(&mut self) -> Result<AdminReply, AdminError> {
        let waiting_in = |aggr: &AggrConfig| -> Vec<String> {
            aggr.slots()
                .iter()
                .filter(|s| {
                    s.disk.state == DiskState::Failed && matches!(s.slot, Slot::Member { .. })
                })
                .map(|s| s.disk.name.clone())
                .collect()
        };
        let serving = self.serving_aggregates();
        let aggr = match self
            .config
            .aggregates
            .iter()
            .find(|a| serving.contains(&a.aggr_id()) && !waiting_in(a).is_empty())
        {
            Some(a) => a.aggr_id(),
            None => self.default_aggregate()?,
        };
        let config = self.config.aggr(aggr.0).expect("configured");
        let blocks = config.largest_group_disk();
        let waiting = waiting_in(config);
        let name = self.add_spare_disk(aggr, blocks)?;
        let mib = (blocks * wafer_core::BLOCK_SIZE as u64) >> 20;
        let mut message = format!(
            "disk {name} ({mib} MiB, file {name}.img) added as a spare of aggregate {}",
            self.aggr_name(aggr)
        );
        if !waiting.is_empty() {
            let _ = write!(
                message,
                "; failed disk {} is reconstructed onto a spare in the background",
                waiting.join(", ")
            );
        }
        Ok(AdminReply::Done { message })
    }

    /// Removes broken disk `disk`: out of the configuration (saved), then its
    /// file deleted.
    fn remove_disk(&mut self, disk: &str) -> Result<AdminReply, AdminError> {
        let Some(aggr) = self
            .config
            .aggregates
            .iter()
            .find(|a| a.broken.iter().any(|b| b == disk))
            .map(AggrConfig::aggr_id)
        else {
            return Err(self.not_broken(disk));
        };
        let config = self.config.aggr(aggr.0).expect("found");
        let file = self
            .dir
            .join(&config.disk(disk).expect("a broken disk is defined").file);
        let before = self.config.clone();
        self.config
            .aggr_mut(aggr.0)
            .expect("found")
            .remove_broken(disk);
        if let Err(e) = self.config.save(&self.dir) {
            self.config = before;
            let message = format!("disk {disk} stays: the configuration cannot be saved: {e}");
            return Err(error(AdminErrorKind::Io, &message));
        }
        let gone = match std::fs::remove_file(&file) {
            Ok(()) => format!("its file {} deleted", file.display()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                format!("its file {} was already gone", file.display())
            }
            Err(e) => format!(
                "its file {} could not be deleted ({e}): delete it by hand",
                file.display()
            ),
        };
        tracing::info!("broken disk {disk} removed; {gone}");
        let message = format!("broken disk {disk} removed; {gone}");
        Ok(AdminReply::Done { message })
    }

    /// Why `disk` names no slot: unknown, or broken (already replaced).
    fn not_a_slot(&self, disk: &str, what: &str) -> AdminError {
        let broken = self
            .config
            .aggregates
            .iter()
            .any(|a| a.broken.iter().any(|b| b == disk));
        match broken {
            true => invalid(&format!(
                "disk {disk} is not {what}: it is a broken disk, already replaced by a spare in \
                 its RAID group (disk add adds a spare; disk remove {disk} deletes its file)"
            )),
            false => error(AdminErrorKind::NotFound, &format!("no disk {disk}")),
        }
    }

    /// Why `disk` cannot be removed: only a broken disk can.
    fn not_broken(&self, disk: &str) -> AdminError {
        let Some((aggr, id)) = self.find_slot(disk) else {
            return error(AdminErrorKind::NotFound, &format!("no disk {disk}"));
        };
        let slots = self.config.aggr(aggr.0).expect("found").slots();
        let slot = &slots[id.0 as usize];
        let why = match (slot.slot, slot.disk.state) {
            (Slot::Member { group, .. }, DiskState::Failed) => format!(
                "it has failed but still holds its place in RAID group {group} until a spare is \
                 rebuilt there (disk add adds one)"
            ),
            (Slot::Member { group, .. }, DiskState::InService) => {
                format!("it is in service in RAID group {group}")
            }
            (Slot::Spare(_), _) => "it is a spare".to_string(),
        };
        invalid(&format!(
            "disk {disk} is not removed: {why}; only a broken disk (failed and replaced by a \
             spare) is removed"
        ))
    }

    /// Creates a blank disk file of `blocks` sectors and adds it as a spare
    /// of aggregate `aggr`: recorded in the configuration (saved), given its
    /// threads, and announced to the filer, which rebuilds a failed disk
    /// waiting for a spare onto it. Returns its name.
    fn add_spare_disk(&mut self, aggr: AggrId, blocks: u64) -> Result<String, AdminError> {
        let (name, file) = self.new_disk_file(blocks)?;
        let before = self.config.clone();
        self.config
            .aggr_mut(aggr.0)
            .expect("configured")
            .add_spare(&name, blocks);
        let io = |e: &dyn std::fmt::Display| error(AdminErrorKind::Io, &e.to_string());
        if let Err(e) = self.config.save(&self.dir) {
            self.config = before;
            let _ = std::fs::remove_file(self.dir.join(format!("{name}.img")));
            return Err(io(&format!("the configuration cannot be saved: {e}")));
        }
        let handle = crate::disk::DiskHandle::spawn(&name, Some(file), self.to_self.clone())
            .map_err(|e| io(&e))?;
        self.devices.disks.entry(aggr).or_default().push(handle);
        let now = self.clock.now();
        self.node
            .with_aggregate(now, aggr, |filer| filer.spare_added());
        self.drain();
        tracing::info!("disk {name} added as a spare ({name}.img)");
        Ok(name)
    }

    /// A new sparse disk file `diskN.img` of `blocks` sectors, N the first
    /// number no disk or file uses.
    pub(super) fn new_disk_file(&self, blocks: u64) -> Result<(String, std::fs::File), AdminError> {
        let taken = |n: &u32| {
            let name = format!("disk{n}");
            let file = format!("{name}.img");
            self.config.disk_taken(&name, &file) || self.dir.join(&file).exists()
        };
        let number = (0..).find(|n| !taken(n)).expect("a free number");
        let name = format!("disk{number}");
        let path = self.dir.join(format!("{name}.img"));
        let create = || -> std::io::Result<std::fs::File> {
            let file = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .open(&path)?;
            file.set_len(crate::labels::disk_file_bytes(blocks))?;
            file.sync_all()?;
            Ok(file)
        };
        let file = create().map_err(|e| {
            error(
                AdminErrorKind::Io,
                &format!("cannot create {}: {e}", path.display()),
            )
        })?;
        Ok((name, file))
    }

    /// Refuses to fail the disk at `position` of `group` if the group could
    /// not rebuild its blocks then. The filer's failed set is the measure: it
    /// also holds a disk whose reconstruction onto a spare is not finished.
    fn check_survives(
        &self,
        aggr: AggrId,
        group: usize,
        position: DiskIndex,
        name: &str,
    ) -> Result<(), AdminError> {
        let Some(filer) = self.node.aggregate(aggr) else {
            return Err(invalid(&format!(
                "disk {name} stays in service: its aggregate {} is not online",
                self.aggr_name(aggr)
            )));
        };
        let slots = self.config.aggr(aggr.0).expect("configured").slots();
        let lost = filer.failed_disks()[group].with(position);
        let raid_type = filer.layout().groups()[group].raid_type();
        if lost.len() <= raid_type.tolerated_failures() {
            return Ok(());
        }
        let names: Vec<String> = lost
            .iter()
            .map(|d| {
                slots[filer.layout().disk_id(group, d).0 as usize]
                    .disk
                    .name
                    .clone()
            })
            .collect();
        Err(invalid(&format!(
            "disk {name} stays in service: failing it would leave RAID group {group} ({raid_type}) \
             without {} disks ({}, counting any still being reconstructed), and it survives {}",
            lost.len(),
            names.join(", "),
            raid_type.tolerated_failures()
        )))
    }

    /// Every counter, summed over the aggregates with an engine; each
    /// aggregate's disks are listed under their own names.
    fn sysstat(&self) -> SysstatReport {
        let engines: Vec<(AggrId, &wafer_core::Filer)> = self
            .node
            .aggregates()
            .into_iter()
            .filter_map(|a| Some((a.id, self.node.aggregate(a.id)?)))
            .collect();
        let sum = |get: &dyn Fn(&wafer_core::filer::Counters) -> u64| -> u64 {
            engines.iter().map(|(_, f)| get(f.counters())).sum()
        };
        let mut cps_by_type = std::collections::BTreeMap::new();
        for (_, filer) in &engines {
            for (reason, count) in &filer.counters().cps {
                *cps_by_type.entry(reason.letter().to_string()).or_insert(0) += *count;
            }
        }
        let mut disks = Vec::new();
        for (aggr, filer) in &engines {
            let Some(config) = self.config.aggr(aggr.0) else {
                continue;
            };
            let slots = config.slots();
            for (d, slot) in filer.counters().disks.iter().zip(&slots) {
                disks.push(DiskCountersStatus {
                    aggregate: config.aggregate.clone(),
                    name: slot.disk.name.clone(),
                    slot: slot.id.0,
                    user_reads: d.user_reads,
                    user_read_blocks: d.user_read_blocks,
                    cp_reads: d.cp_reads,
                    cp_read_blocks: d.cp_read_blocks,
                    writes: d.writes,
                    write_blocks: d.write_blocks,
                    io_time_ns: d.io_time_ns(),
                });
            }
        }
        SysstatReport {
            uptime_ns: self.clock.elapsed_ns(),
            cpu_time_ns: crate::admin::process_cpu_time_ns().unwrap_or(0),
            committed_cp: engines
                .iter()
                .map(|(_, f)| f.committed_cp().0)
                .max()
                .unwrap_or(0),
            cps_by_type: cps_by_type.into_iter().collect(),
            back_to_back_waits: sum(&|c| c.back_to_back_waits),
            cp_time_ns: sum(&|c| c.cp_time_ns),
            full_stripes: sum(&|c| c.full_stripes),
            partial_stripes_subtraction: sum(&|c| c.partial_stripes_subtraction),
            partial_stripes_addition: sum(&|c| c.partial_stripes_addition),
            partial_stripes_reconstruct: sum(&|c| c.partial_stripes_reconstruct),
            data_blocks_written: sum(&|c| c.data_blocks_written),
            meta_blocks_written: sum(&|c| c.meta_blocks_written),
            parity_blocks_written: sum(&|c| c.parity_blocks_written),
            parity_reads: sum(&|c| c.parity_reads),
            partial_write_reads: sum(&|c| c.partial_write_reads),
            cache_hits: sum(&|c| c.cache_hits),
            cache_misses: sum(&|c| c.cache_misses),
            read_chains: sum(&|c| c.read_chains),
            read_chain_blocks: sum(&|c| c.read_chain_blocks),
            blocks_repaired: sum(&|c| c.blocks_repaired),
            degraded_reads: sum(&|c| c.degraded_reads),
            unrecoverable_blocks: sum(&|c| c.unrecoverable_blocks),
            rebuilt_blocks: sum(&|c| c.rebuilt_blocks),
            rebuilds_completed: sum(&|c| c.rebuilds_completed),
            disks,
            nbd: self
                .shared
                .counters
                .status(self.shared.stop.connections_open()),
            iscsi: self.shared.iscsi.status(),
            nvlog: self.shared.nvlog.status(),
            cache_age_ns: self.cache_age_ns(),
            aggregates: engines
                .iter()
                .map(|(aggr, filer)| self.aggregate_cps(*aggr, filer))
                .collect(),
            flash_cache: self.flash_cache_status(),
            flash_pool: self.flash_pool_stats(),
        }
    }

    /// Each online hybrid aggregate's Flash Pool (`wafl_hya_per_aggr`).
    fn flash_pool_stats(&self) -> Vec<FlashPoolStats> {
        let mut pools = Vec::new();
        for aggr in self.serving_aggregates() {
            let Some(status) = self
                .node
                .aggregate(aggr)
                .and_then(|f| f.flash_pool_status())
            else {
                continue;
            };
            let c = &status.counters;
            pools.push(FlashPoolStats {
                aggregate: self.aggr_name(aggr),
                ssd_total: status.ssd_total_blocks,
                ssd_used: status.ssd_used_blocks,
                ssd_read_cached: status.read_cached_blocks,
                ssd_write_cached: status.write_cached_blocks,
                read_ops_replaced: c.read_blks_replaced,
                hdd_read_blks: c.hdd_read_blks,
                read_ops_replaced_percent: status.read_replaced_percent().floor() as u64,
                wc_write_blks_total: c.wc_write_blks_total,
                hdd_write_blks_total: c.hdd_write_blks_total,
                write_blks_replaced_percent: status.write_blks_replaced_percent().floor() as u64,
                read_cache_ins: c.read_cache_ins,
                evict_destage: c.evict_destage,
                evict_remove: c.evict_remove,
                scanner_passes: c.scanner_passes,
                ssd_full_rejects: c.ssd_full_rejects,
            });
        }
        pools
    }

    /// `aggr options NAME OPTION VALUE`: `hybrid_enabled on|off` is the
    /// option wafer sets. The engine keeps it in the aggregate's superblock,
    /// so the answer waits for a CP (a flush) to record it.
    fn set_aggregate_option(
        &mut self,
        name: &str,
        option: &str,
        value: &str,
    ) -> Result<Answer, AdminError> {
        let aggr = self.serving_aggregate(name, "aggr options")?;
        if option != "hybrid_enabled" {
            let fixed = [
                "nosnap",
                "raidtype",
                "raidsize",
                "snapshot_autodelete",
                "lost_write_protect",
            ];
            let why = match fixed.contains(&option) {
                true => "wafer keeps it as `aggr options` lists it",
                false => "wafer does not have it",
            };
            return Err(invalid(&format!(
                "aggr options: option '{option}' cannot be set ({why}); the option wafer sets \
                 is hybrid_enabled on|off"
            )));
        }
        let enabled = match value {
            "on" | "true" => true,
            "off" | "false" => false,
            other => {
                return Err(invalid(&format!(
                    "aggr options: hybrid_enabled is on or off, not '{other}'"
                )));
            }
        };
        let now = self.clock.now();
        let set = self
            .node
            .with_aggregate(now, aggr, |filer| filer.set_hybrid(enabled));
        match set {
            Some(Ok(())) => {}
            Some(Err(wafer_core::filer::HybridError::HasSsdGroups)) => {
                return Err(invalid(&format!(
                    "aggr options: hybrid_enabled cannot be turned off: aggregate '{name}' has \
                     SSD RAID groups (a Flash Pool's cache); it stays on"
                )));
            }
            Some(Err(e)) => return Err(invalid(&format!("aggr options: {e}"))),
            None => {
                return Err(invalid(&format!(
                    "aggr options: aggregate '{name}' is not online"
                )));
            }
        }
        self.drain();
        let message = format!("aggregate {name}: hybrid_enabled set to {value}");
        Ok(Answer::Request(HostRequest::Flush, message))
    }

    /// The Flash Cache's counters and options, if the node has one.
    fn flash_cache_status(&self) -> Option<FlashCacheStatus> {
        let cache = self.node.flash_cache()?;
        let device = self.devices.flash.as_ref()?;
        let c = cache.counters();
        Some(FlashCacheStatus {
            device: device.path.clone(),
            blocks: cache.blocks(),
            used: cache.used(),
            normal_data_blocks: device.options.normal_data_blocks,
            lopri_blocks: device.options.lopri_blocks,
            accesses: c.accesses,
            hits: c.hits,
            misses: c.misses,
            inserts: c.inserts,
            evicts: c.evicts,
            invalidates: c.invalidates,
            disk_reads_replaced: c.disk_reads_replaced,
            read_errors: c.read_errors,
            failed: c.failed,
        })
    }

    /// One aggregate's CP counters, for `sysstat` and the metrics.
    fn aggregate_cps(&self, aggr: AggrId, filer: &wafer_core::Filer) -> AggregateCpStatus {
        let counters = filer.counters();
        AggregateCpStatus {
            aggregate: self.aggr_name(aggr),
            committed_cp: filer.committed_cp().0,
            cps_by_type: counters
                .cps
                .iter()
                .map(|(reason, count)| (reason.letter().to_string(), *count))
                .collect(),
            back_to_back_waits: counters.back_to_back_waits,
            cp_time_ns: counters.cp_time_ns,
        }
    }

    // ---- igroups, maps and iSCSI security (`crate::masking`, `crate::chap_store`)

    /// Carries out an igroup or map request: the changed igroups and maps
    /// are saved in `wafer.toml`, then published to the connections.
    fn masking(&mut self, request: AdminRequest) -> Result<AdminReply, AdminError> {
        let mut san = self.config.san().clone();
        let message = match request {
            AdminRequest::IgroupShow => return Ok(AdminReply::Igroups(self.igroup_status())),
            AdminRequest::LunMaps => return Ok(AdminReply::LunMaps(self.map_status())),
            AdminRequest::IgroupCreate {
                name,
                protocol,
                ostype,
                initiators,
            } => {
                san.create(&name, protocol, &ostype, &initiators)
                    .map_err(masking_error)?;
                format!("initiator group {name} created")
            }
            AdminRequest::IgroupAdd { name, initiator } => {
                san.add(&name, &initiator).map_err(masking_error)?;
                format!("{initiator} added to initiator group {name}")
            }
            AdminRequest::IgroupRemove {
                name,
                initiator,
                force,
            } => {
                san.remove(&name, &initiator, force)
                    .map_err(masking_error)?;
                format!("{initiator} removed from initiator group {name}")
            }
            AdminRequest::IgroupDestroy { name, force } => {
                san.destroy(&name, force).map_err(masking_error)?;
                format!("initiator group {name} destroyed")
            }
            AdminRequest::LunMap {
                path,
                igroup,
                lun_id,
            } => {
                self.check_mappable(&path)?;
                let id = san.map(&path, &igroup, lun_id).map_err(masking_error)?;
                format!("LUN {path} was mapped to initiator group {igroup}={id}")
            }
            AdminRequest::LunUnmap { path, igroup } => {
                san.unmap(&path, &igroup).map_err(masking_error)?;
                format!("LUN {path} unmapped from initiator group {igroup}")
            }
            AdminRequest::LunOffline { path } => self.set_lun_online(&mut san, &path, false)?,
            AdminRequest::LunOnline { path } => self.set_lun_online(&mut san, &path, true)?,
            _ => unreachable!("only igroup and map requests are routed here"),
        };
        self.save_san(san)?;
        tracing::info!("admin: {message}");
        Ok(AdminReply::Done { message })
    }

    /// `lun online` or `lun offline` of LUN `path`, recorded in `san`;
    /// what was done, in a sentence.
    fn set_lun_online(
        &self,
        san: &mut crate::masking::San,
        path: &str,
        online: bool,
    ) -> Result<String, AdminError> {
        self.lun_id(path)?;
        san.set_online(path, online);
        let state = if online { "online" } else { "offline" };
        Ok(format!("LUN {path} is {state}"))
    }

    /// Records `san` in `wafer.toml` (the old one stays if that fails) and
    /// publishes it.
    fn save_san(&mut self, san: crate::masking::San) -> Result<(), AdminError> {
        let old = self.config.san.replace(san);
        if let Err(e) = self.config.save(&self.dir) {
            self.config.san = old;
            return Err(error(
                AdminErrorKind::Io,
                &format!("{CONFIG_FILE} could not be saved, nothing changed: {e}"),
            ));
        }
        self.shared.catalogue.publish_san(self.config.san());
        Ok(())
    }

    /// A path `lun map` takes: a LUN, or a snapshot's image of one, that the
    /// node serves now.
    fn check_mappable(&self, path: &str) -> Result<(), AdminError> {
        let name = path.strip_prefix("/vol/").unwrap_or("");
        let (live, snapshot) = name.split_once('@').unwrap_or((name, ""));
        let well_formed = live.split('/').count() == 2
            && live.split('/').all(|part| !part.is_empty())
            && !snapshot.contains('/');
        if !well_formed || (name.contains('@') && snapshot.is_empty()) {
            return Err(invalid(&format!(
                "lun map: {path} is not a LUN path (/vol/VOLUME/LUN, or \
                 /vol/VOLUME/LUN@SNAPSHOT for a snapshot's image, read-only)"
            )));
        }
        if self.shared.catalogue.current().find(name).is_none() {
            return Err(error(
                AdminErrorKind::NotFound,
                &format!("lun map: {path}: no such LUN"),
            ));
        }
        Ok(())
    }

    /// `lun destroy` without `-f` refuses a mapped LUN, as ONTAP does.
    fn check_unmapped(&self, path: &str) -> Result<(), AdminError> {
        let groups: Vec<&str> = self
            .config
            .san()
            .maps
            .iter()
            .filter(|m| m.path == path)
            .map(|m| m.igroup.as_str())
            .collect();
        if groups.is_empty() {
            return Ok(());
        }
        Err(invalid(&format!(
            "lun destroy: {path}: the LUN is mapped to initiator group {} (lun unmap it, or use -f)",
            groups.join(", ")
        )))
    }

    /// Forgets the maps of LUNs whose records went (destroyed, or taken
    /// away by a restore), and that they were offline: a LUN made later at
    /// the path starts online. Their snapshots' images stay mapped. Returns
    /// whether anything was forgotten.
    fn unmap_destroyed(&mut self, before: &[String]) -> bool {
        let gone: Vec<&String> = before
            .iter()
            .filter(|path| !self.config.luns.iter().any(|l| &l.path == *path))
            .collect();
        let Some(san) = self.config.san.as_mut() else {
            return false;
        };
        let before_maps = san.maps.len();
        let before_offline = san.offline.len();
        san.maps.retain(|m| !gone.contains(&&m.path));
        san.offline.retain(|path| !gone.contains(&path));
        before_maps != san.maps.len() || before_offline != san.offline.len()
    }

    fn igroup_status(&self) -> Vec<crate::admin::IgroupStatus> {
        let catalogue = &self.shared.catalogue;
        self.config
            .san()
            .igroups
            .iter()
            .map(|group| crate::admin::IgroupStatus {
                name: group.name.clone(),
                protocol: group.protocol,
                ostype: group.ostype.clone(),
                initiators: group
                    .initiators
                    .iter()
                    .map(|name| crate::admin::InitiatorStatus {
                        name: name.clone(),
                        logged_in: catalogue.is_logged_in(name),
                    })
                    .collect(),
            })
            .collect()
    }

    fn map_status(&self) -> Vec<crate::admin::LunMapStatus> {
        let san = self.config.san();
        let mut maps: Vec<crate::admin::LunMapStatus> = san
            .maps
            .iter()
            .filter_map(|map| {
                let group = san.igroups.iter().find(|g| g.name == map.igroup)?;
                Some(crate::admin::LunMapStatus {
                    path: map.path.clone(),
                    igroup: map.igroup.clone(),
                    lun_id: map.lun_id,
                    protocol: group.protocol,
                })
            })
            .collect();
        maps.sort_by(|a, b| (&a.path, &a.igroup).cmp(&(&b.path, &b.igroup)));
        maps
    }

    /// Publishes the igroups and maps, and the iSCSI security settings the
    /// first time (read from the data directory; a file that cannot be read
    /// leaves every iSCSI login refused, and says so).
    pub(super) fn publish_masking(&mut self) {
        let catalogue = &self.shared.catalogue;
        if let Some(san) = &self.config.san {
            catalogue.publish_san(san);
        }
        if catalogue.has_security() {
            return;
        }
        match crate::chap_store::Entries::load(&self.dir) {
            Ok(entries) => catalogue.publish_security(entries.security()),
            Err(e) => {
                tracing::warn!("every iSCSI login is refused: {e}");
                catalogue.publish_security(wafer_iscsi::Security {
                    default: wafer_iscsi::Policy::Deny,
                    ..wafer_iscsi::Security::default()
                });
            }
        }
    }

    /// Carries out an `iscsi security` request against the file.
    fn security(&mut self, request: AdminRequest) -> Result<AdminReply, AdminError> {
        let mut entries = crate::chap_store::Entries::load(&self.dir).map_err(chap_error)?;
        let message = match request {
            AdminRequest::IscsiSecurityShow => {
                return Ok(AdminReply::IscsiSecurity(
                    entries
                        .entries
                        .iter()
                        .map(|e| crate::admin::SecurityStatus {
                            initiator: e.initiator.clone(),
                            method: e.method,
                            inbound_user: e.inbound_user.clone(),
                            outbound_user: e.outbound_user.clone(),
                        })
                        .collect(),
                ));
            }
            AdminRequest::IscsiSecurityAdd { entry } => {
                let message = format!("iSCSI security of {} set", entry.initiator);
                entries.add(entry).map_err(chap_error)?;
                message
            }
            AdminRequest::IscsiSecurityDelete { initiator } => {
                entries.delete(&initiator).map_err(chap_error)?;
                format!("iSCSI security of {initiator} deleted")
            }
            _ => unreachable!("only iscsi security requests are routed here"),
        };
        entries.save(&self.dir).map_err(chap_error)?;
        self.shared.catalogue.publish_security(entries.security());
        tracing::info!("admin: {message}");
        Ok(AdminReply::Done { message })
    }
}

fn masking_error(refusal: crate::masking::MaskingError) -> AdminError {
    use crate::masking::MaskingError;
    let kind = match &refusal {
        MaskingError::Invalid(_) => AdminErrorKind::Invalid,
        MaskingError::NotFound(_) => AdminErrorKind::NotFound,
        MaskingError::Exists(_) => AdminErrorKind::Exists,
    };
    error(kind, &refusal.to_string())
}

fn chap_error(refusal: crate::chap_store::ChapError) -> AdminError {
    use crate::chap_store::ChapError;
    let kind = match &refusal {
        ChapError::Invalid(_) => AdminErrorKind::Invalid,
        ChapError::NotFound(_) => AdminErrorKind::NotFound,
        ChapError::File { .. } => AdminErrorKind::Io,
    };
    error(kind, &refusal.to_string())
}

/// An aggregate's broken disks.
fn broken_disks(config: &AggrConfig) -> Vec<BrokenDiskStatus> {
    config
        .broken
        .iter()
        .filter_map(|name| config.disk(name))
        .map(|disk| BrokenDiskStatus {
            name: disk.name.clone(),
            failed_reason: disk.failed_reason.clone(),
            file: disk.file.clone(),
            size_bytes: disk.blocks * wafer_core::BLOCK_SIZE as u64,
            physical_bytes: disk_file_bytes(disk.blocks),
        })
        .collect()
}

fn disk_status(slot: &SlotDisk<'_>, role: &str, position: Option<u16>) -> DiskStatus {
    DiskStatus {
        name: slot.disk.name.clone(),
        slot: slot.id.0,
        role: role.into(),
        position,
        state: slot.disk.state,
        failed_reason: slot.disk.failed_reason.clone(),
        file: slot.disk.file.clone(),
        size_bytes: slot.disk.blocks * wafer_core::BLOCK_SIZE as u64,
        physical_bytes: disk_file_bytes(slot.disk.blocks),
    }
}

/// `/vol/VOLUME/LUN` (or `VOLUME/LUN`) into its volume and LUN names.
fn split_lun_path(path: &str) -> Result<(&str, &str), AdminError> {
    let relative = path.strip_prefix("/vol/").unwrap_or(path);
    match relative.split_once('/') {
        Some((volume, lun)) if !volume.is_empty() && !lun.is_empty() && !lun.contains('/') => {
            Ok((volume, lun))
        }
        _ => Err(invalid(&format!(
            "{path:?} is not a LUN path (they look like /vol/VOLUME/LUN)"
        ))),
    }
}

/// The OS type `lun create -t` names: `image` if none.
fn lun_ostype(name: Option<&str>) -> Result<OsType, AdminError> {
    let Some(name) = name else {
        return Ok(OsType::Image);
    };
    OsType::from_name(name).ok_or_else(|| {
        let known: Vec<&str> = OsType::ALL.iter().map(|t| t.name()).collect();
        invalid(&format!(
            "lun create: invalid ostype {name:?}: it is one of {}",
            known.join(", ")
        ))
    })
}

/// What `reallocate quiesce|restart|stop` does to the job.
#[derive(Clone, Copy)]
enum ReallocControl {
    Quiesce,
    Restart,
    Stop,
}

fn error(kind: AdminErrorKind, message: &str) -> AdminError {
    AdminError {
        kind,
        message: message.to_string(),
    }
}

fn invalid(message: &str) -> AdminError {
    error(AdminErrorKind::Invalid, message)
}

/// The admin form of a filer refusal.
fn host_error(refusal: &HostError) -> AdminError {
    let kind = match refusal {
        HostError::NotFound(_) => AdminErrorKind::NotFound,
        HostError::Exists(_) => AdminErrorKind::Exists,
        HostError::NoSpace { .. } => AdminErrorKind::NoSpace,
        HostError::Io => AdminErrorKind::Io,
        _ => AdminErrorKind::Invalid,
    };
    error(kind, &refusal.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lun_paths_split_into_volume_and_lun() {
        assert_eq!(
            split_lun_path("/vol/vol0/lun0").ok(),
            Some(("vol0", "lun0"))
        );
        assert_eq!(split_lun_path("vol0/lun0").ok(), Some(("vol0", "lun0")));
        for bad in [
            "/vol/vol0",
            "/vol//lun0",
            "/vol/vol0/",
            "/vol/a/b/c",
            "lun0",
        ] {
            assert!(split_lun_path(bad).is_err(), "{bad}");
        }
    }
}
