//! The engine thread: the one owner of the [`Node`] and its aggregates.
//!
//! Everything that wants the node sends an [`Event`] down one channel: host
//! requests and extent queries from NBD connections, I/O completions from the
//! disk and NVLog threads, admin requests, the stop signal. The loop takes one
//! event (or wakes for the node's timer), hands it to the node, and then
//! drains the node as its contract says: every I/O it wants performed goes to
//! the thread of its aggregate's disk or to the NVLog thread, then every reply
//! goes to whoever is waiting for it. Nothing here blocks except waiting for
//! the next event, so a slow client or disk never stalls the node.
//!
//! An aggregate that fails (at mount, or later) is logged and reported; the
//! node serves the others on. Only a node with every aggregate failed stops
//! (or refuses to start), as a one-aggregate server always did.
//!
//! Host requests carry a callback; the engine calls it with the reply and the
//! connection's writer thread does the rest. Requests that arrive while the
//! server is stopping are refused without reaching the node. A COMPARE AND
//! WRITE holds back the writes that overlap it until it is done
//! ([`compare`]), so it is atomic.
//!
//! Stopping: refuse new host requests, submit a flush (a CP that commits
//! everything acknowledged), and end when it has committed and no request
//! or I/O is outstanding, so the next start finds an empty NVLog.

mod administration;
mod aggregates;
mod cache_age;
mod compare;
mod pending;
pub(crate) mod view;
mod watch;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};

use wafer_core::aggregate::Slot;
use wafer_core::filer::{
    Busy, Change, HostError, HostRequest, Io, IoId, IoOp, IoResult, ReplyData, RequestId,
};
use wafer_core::node::{AggrState, Node, NodeIo};
use wafer_core::units::{AggrId, DiskId, Instant};

use crate::admin::AdminResponse;
use crate::catalogue::{Catalogue, Ended, Incarnations, SharedCatalogue, Target};
use crate::clock::Clock;
use crate::config::{DataConfig, DiskState};
use crate::disk::{DiskCommand, DiskHandle};
use crate::error::ServeError;
use crate::events::{CompareRequest, Compared, Event, HostCallback, HostOutcome};
use crate::nbd::NbdCounters;
use crate::nvlog::{NvlogCounters, NvlogLayout};
use crate::stop::StopSignal;

/// The threads that perform the node's I/O.
pub(crate) struct Devices {
    /// For each aggregate, one per disk slot, in slot order.
    pub(crate) disks: BTreeMap<AggrId, Vec<DiskHandle>>,
    /// The NVLog thread.
    pub(crate) nvlog: Sender<Io>,
    /// The Flash Cache's thread, if the node has one.
    pub(crate) flash: Option<crate::flash::FlashHandle>,
}

impl Devices {
    fn perform(&self, io: NodeIo) {
        let NodeIo { aggregate, io } = io;
        let disk = match &io.op {
            IoOp::Read { disk, .. } | IoOp::Write { disk, .. } => *disk,
            IoOp::NvlogAppend { .. } | IoOp::NvlogReset { .. } => {
                return self
                    .nvlog
                    .send(io)
                    .expect("the NVLog thread runs while the engine does (a panic aborts)");
            }
            IoOp::AssignSpare { .. } => unreachable!("the engine thread assigns spares itself"),
            IoOp::FlashRead { .. } | IoOp::FlashWrite { .. } => {
                let flash = self.flash.as_ref();
                return flash
                    .expect("a node has a Flash Cache only if the server gave it one")
                    .send(io);
            }
        };
        let aggregate = aggregate.expect("a disk I/O names its aggregate");
        self.disks[&aggregate][disk.0 as usize]
            .send(DiskCommand::Io(io))
            .expect("disk threads run while the engine does (a panic aborts)");
    }
}

/// A host request's LUN and range, kept to name it in the log should RAID
/// fail to bring its data back.
#[derive(Clone, Copy, Debug)]
struct HostLabel {
    lun: wafer_core::nvlog::LunId,
    snapshot: bool,
    range: Option<(u64, u64)>,
}

impl HostLabel {
    fn of(target: &Target, request: &HostRequest) -> HostLabel {
        let range = match request {
            HostRequest::Read { offset, length, .. }
            | HostRequest::ReadSnapshot { offset, length, .. } => Some((*offset, *length)),
            HostRequest::Change(Change::Write { offset, data, .. }) => {
                Some((*offset, data.len() as u64))
            }
            _ => None,
        };
        HostLabel {
            lun: target.lun,
            snapshot: target.snapshot.is_some(),
            range,
        }
    }

    /// "a request of 4096 bytes at offset 8192 of /vol/vol0/lun0".
    fn describe(&self, node: &Node) -> String {
        let lun = view::volumes(node)
            .into_iter()
            .filter(|(id, _)| *id == self.lun.volume)
            .flat_map(|(id, volume)| {
                node.luns(id)
                    .into_iter()
                    .filter(|(lun, _, _)| *lun == self.lun)
                    .map(move |(_, name, _)| format!("/vol/{volume}/{name}"))
            })
            .next()
            .unwrap_or_else(|| "a LUN since destroyed".into());
        let image = if self.snapshot { " (a snapshot)" } else { "" };
        match self.range {
            Some((offset, length)) => {
                format!("a request of {length} bytes at offset {offset} of {lun}{image}")
            }
            None => format!("a request to {lun}{image}"),
        }
    }
}

/// Who waits for a filer reply.
enum Waiter {
    /// An NBD or iSCSI request.
    Host(HostCallback, HostLabel),
    /// A COMPARE AND WRITE's read.
    Compare(Box<CompareRequest>),
    /// An admin change; the message says what was done, and `ended` what
    /// it ends (revived if the filer refuses it).
    Admin {
        reply: Sender<AdminResponse>,
        message: String,
        ended: Vec<Ended>,
        /// A volume destroyed: the records of its LUNs and their maps go
        /// once the filer has done it.
        destroyed: Option<String>,
    },
    /// The server's own request during startup ([`Engine::execute`]).
    Local,
    /// A request of the server's own whose answer nobody awaits; it is
    /// logged if it fails.
    Background(&'static str),
    /// A scheduled snapshot (`snap sched`), described: logged either way.
    Scheduled(String),
    /// The flush that ends a graceful stop.
    FinalFlush,
}

/// Where a graceful stop stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stopping {
    No,
    Flushing,
    /// The final CP has committed, at this time.
    Flushed(std::time::Instant),
}

/// How long a stop waits, after its final CP, for background I/O (a rebuild's
/// CPs follow one another) to finish. What it leaves unfinished is safe: the
/// next start resyncs a CP's logged stripes and resumes the rebuild.
const BACKGROUND_IO_GRACE: std::time::Duration = std::time::Duration::from_secs(2);
/// How often a stop in its grace period looks at the clock.
const STOP_POLL: std::time::Duration = std::time::Duration::from_millis(50);

/// What the engine shares with the rest of the server.
pub(crate) struct Shared {
    pub(crate) catalogue: Arc<SharedCatalogue>,
    pub(crate) counters: Arc<NbdCounters>,
    /// What the iSCSI connections asked for.
    pub(crate) iscsi: Arc<crate::iscsi_counters::IscsiCounters>,
    /// What the NVLog thread wrote (`sysstat` is to show its rate).
    pub(crate) nvlog: Arc<NvlogCounters>,
    pub(crate) stop: Arc<StopSignal>,
}

/// The channels, threads and shared state an engine is built with.
pub(crate) struct Plumbing {
    /// Where events arrive.
    pub(crate) events: Receiver<Event>,
    /// A sender on the same channel.
    pub(crate) to_self: Sender<Event>,
    /// The disk and NVLog threads.
    pub(crate) devices: Devices,
    /// The data directory.
    pub(crate) dir: PathBuf,
    /// What the engine shares with connections.
    pub(crate) shared: Shared,
}

/// The node and everything its thread needs.
pub(crate) struct Engine {
    node: Node,
    /// Where the NVLog's halves lie: how much room they have for the CP
    /// records of the aggregates `aggr create` makes.
    nvlog_layout: NvlogLayout,
    /// Aggregates that could not be mounted, with why (they are in the node,
    /// failed, so that their ids stay theirs).
    unmountable: BTreeMap<AggrId, String>,
    /// Each aggregate's state as last logged.
    states: BTreeMap<AggrId, AggrState>,
    /// Each aggregate's RAID groups' failed disks when the engine started:
    /// what the start banner reports, whatever a rebuild has done since.
    failed_at_start: BTreeMap<AggrId, Vec<Vec<String>>>,
    clock: Clock,
    events: Receiver<Event>,
    /// For completions the engine thread produces itself (spare assignment).
    to_self: Sender<Event>,
    devices: Devices,
    dir: PathBuf,
    config: DataConfig,
    shared: Shared,
    waiters: BTreeMap<RequestId, Waiter>,
    /// Writes held back by compares under way.
    fences: compare::Fences,
    local_results: BTreeMap<RequestId, Result<ReplyData, HostError>>,
    io_in_flight: u64,
    stopping: Stopping,
    incarnations: Incarnations,
    watches: BTreeMap<AggrId, watch::Watch>,
    /// Each aggregate's cache use clock against the time (Cache age).
    cache_ages: cache_age::CacheAges,
    /// Aggregate administrations waiting for the node.
    pending: Vec<pending::Pending>,
    /// The aggregate of each disk I/O out.
    io_aggregates: BTreeMap<IoId, AggrId>,
    /// Whether the start is over: the node serves.
    started: bool,
    /// Engine time up to which `snap sched` has been looked at.
    schedule_seen: Instant,
}

impl Engine {
    /// An engine around a node just formatted or mounting.
    pub(crate) fn new(
        node: Node,
        clock: Clock,
        plumbing: Plumbing,
        config: DataConfig,
        nvlog_layout: NvlogLayout,
        unmountable: BTreeMap<AggrId, String>,
    ) -> Engine {
        let Plumbing {
            events,
            to_self,
            devices,
            dir,
            shared,
        } = plumbing;
        let failed_at_start = config
            .aggregates
            .iter()
            .map(|a| {
                let groups = (0..a.groups.len()).map(|g| a.failed_members(g, &[]));
                (a.aggr_id(), groups.collect())
            })
            .collect();
        let mut engine = Engine {
            failed_at_start,
            node,
            nvlog_layout,
            unmountable,
            states: BTreeMap::new(),
            clock,
            events,
            to_self,
            devices,
            dir,
            config,
            shared,
            waiters: BTreeMap::new(),
            fences: compare::Fences::default(),
            local_results: BTreeMap::new(),
            io_in_flight: 0,
            stopping: Stopping::No,
            incarnations: Incarnations::default(),
            watches: BTreeMap::new(),
            cache_ages: cache_age::CacheAges::default(),
            pending: Vec::new(),
            io_aggregates: BTreeMap::new(),
            started: false,
            schedule_seen: clock.now(),
        };
        engine.drain();
        engine
    }

    /// Runs until the node is online: every aggregate formatted, or
    /// mounted and replayed, or failed. Aggregates the configuration holds
    /// offline go offline again.
    pub(crate) fn wait_online(&mut self) -> Result<(), ServeError> {
        while !self.node.is_online() || self.any_mounting() {
            self.step()?;
        }
        for aggr in self.config.aggregates.clone() {
            if aggr.offline && self.node_state(aggr.aggr_id()) == Some(AggrState::Online) {
                let _ = self
                    .node
                    .offline_aggregate(self.clock.now(), aggr.aggr_id());
                self.drain();
            }
        }
        // Offline before the start is over: `aggr online` may follow at once.
        while self
            .node
            .aggregates()
            .iter()
            .any(|a| a.state == AggrState::GoingOffline)
        {
            self.step()?;
        }
        for status in self.node.aggregates() {
            let name = self.aggr_name(status.id);
            if let Some(engine) = self.node.aggregate(status.id) {
                for warning in engine.mount_warnings() {
                    tracing::warn!("aggregate {name}: {warning}");
                }
            }
            match &status.state {
                AggrState::Online => {
                    let filer = self.node.aggregate(status.id).expect("online");
                    tracing::info!("mounted aggregate {name} at CP {}", filer.committed_cp().0);
                    self.watches.insert(status.id, watch::Watch::of(filer));
                }
                AggrState::Offline => {
                    crate::log!("aggregate {name} is offline");
                    // Its superblock is the record; the configuration
                    // follows it (a stop came between the two).
                    let configured = self.config.aggr(status.id.0).is_some_and(|a| a.offline);
                    if !configured && let Err(e) = self.record_offline(status.id, true) {
                        crate::log!("aggregate {name}: {}", e.message);
                    }
                }
                AggrState::Failed(_) => {
                    let (_, reason) = self.aggregate_state(status.id);
                    tracing::error!(
                        "aggregate {name} FAILED: {}; the other aggregates serve",
                        reason.unwrap_or_default()
                    );
                }
                _ => {}
            }
            self.states.insert(status.id, status.state.clone());
        }
        self.publish_catalogue();
        self.started = true;
        Ok(())
    }

    fn any_mounting(&self) -> bool {
        self.node
            .aggregates()
            .iter()
            .any(|a| a.state == AggrState::Mounting)
    }

    /// The node's state of aggregate `id`.
    pub(crate) fn node_state(&self, id: AggrId) -> Option<AggrState> {
        self.node
            .aggregates()
            .into_iter()
            .find(|a| a.id == id)
            .map(|a| a.state)
    }

    /// The configured name of aggregate `id` (the node names an aggregate
    /// that never mounted by its number).
    pub(crate) fn aggr_name(&self, id: AggrId) -> String {
        self.config
            .aggr(id.0)
            .map_or_else(|| format!("aggregate {}", id.0), |a| a.aggregate.clone())
    }

    /// Aggregate `id`'s state in ONTAP's words (`online`, `offline`,
    /// `failed`, `creating`, `mounting`), and why it failed.
    pub(crate) fn aggregate_state(&self, id: AggrId) -> (String, Option<String>) {
        match self.node_state(id) {
            None => ("failed".into(), Some("not in the node".into())),
            Some(AggrState::Online) => ("online".into(), None),
            Some(AggrState::Offline) => ("offline".into(), None),
            Some(AggrState::GoingOffline) => ("going offline".into(), None),
            Some(AggrState::Mounting) => ("mounting".into(), None),
            Some(AggrState::Failed(reason)) => {
                let reason = self.unmountable.get(&id).cloned().unwrap_or(reason);
                ("failed".into(), Some(reason))
            }
        }
    }

    /// Submits a request of the server's own to aggregate `aggr` and runs
    /// until it is answered.
    pub(crate) fn execute(
        &mut self,
        aggr: AggrId,
        request: HostRequest,
    ) -> Result<Result<ReplyData, HostError>, ServeError> {
        let id = self
            .node
            .submit_to(self.clock.now(), aggr, request)
            .map_err(|busy| ServeError::Mount(busy.to_string()))?;
        self.waiters.insert(id, Waiter::Local);
        self.drain();
        loop {
            if let Some(result) = self.local_results.remove(&id) {
                self.publish_catalogue();
                return Ok(result);
            }
            self.step()?;
        }
    }

    /// RAID group `group` of aggregate `aggr`'s failed disks when the engine
    /// started.
    pub(crate) fn failed_at_start(&self, aggr: AggrId, group: usize) -> Vec<String> {
        self.failed_at_start
            .get(&aggr)
            .and_then(|groups| groups.get(group))
            .cloned()
            .unwrap_or_default()
    }

    /// Puts disks recorded failed at this start back in service in the
    /// configuration (saved): their aggregate did not mount after all.
    pub(crate) fn unfail_disks(&mut self, aggr: AggrId, names: &[String]) -> std::io::Result<()> {
        let Some(config) = self.config.aggr_mut(aggr.0) else {
            return Ok(());
        };
        for disk in &mut config.disks {
            if names.contains(&disk.name) {
                disk.state = DiskState::InService;
                disk.failed_reason = None;
            }
        }
        self.config.save(&self.dir)
    }

    /// The node, for reports.
    pub(crate) fn node(&self) -> &Node {
        &self.node
    }

    /// The Flash Cache in a line, for the start banner.
    pub(crate) fn flash_summary(&self) -> Option<String> {
        let (cache, device) = (self.node.flash_cache()?, self.devices.flash.as_ref()?);
        let on = |set: bool| if set { "on" } else { "off" };
        Some(format!(
            "Flash Cache: {} blocks of 4 KiB on {}, empty (it starts cold at every start); \
             flexscale.normal_data_blocks {}, flexscale.lopri_blocks {} (set at start only)",
            cache.blocks(),
            device.path,
            on(device.options.normal_data_blocks),
            on(device.options.lopri_blocks),
        ))
    }

    /// The configuration as it stands.
    pub(crate) fn config(&self) -> &DataConfig {
        &self.config
    }

    /// Serves until a graceful stop completes, or the NVLog fails.
    pub(crate) fn run(mut self) -> Result<(), ServeError> {
        while !self.finished() {
            self.step()?;
        }
        let nvlog = self.shared.nvlog.status();
        tracing::info!(
            "final CP committed ({} node CPs); stopped. The NVLog took {} bytes: {} records in \
             {} writes and {} syncs",
            self.node.counters().cps,
            nvlog.bytes_written,
            nvlog.appends,
            nvlog.writes,
            nvlog.syncs
        );
        Ok(())
    }

    fn finished(&self) -> bool {
        let Stopping::Flushed(at) = self.stopping else {
            return false;
        };
        if !self.waiters.is_empty() {
            return false;
        }
        if self.io_in_flight > 0 && at.elapsed() < BACKGROUND_IO_GRACE {
            return false;
        }
        if self.io_in_flight > 0 {
            tracing::warn!(
                "leaving {} background I/Os unfinished ({}): the next start resyncs the \
                 stripes they were writing{}",
                self.io_in_flight,
                self.background_job(),
                match self.engines().any(|f| f.rebuild_status().is_some()) {
                    true => " and resumes the reconstruction",
                    false => "",
                }
            );
        }
        true
    }

    /// What is doing I/O on its own, in an administrator's words.
    fn background_job(&self) -> &'static str {
        let scrubbing = self
            .engines()
            .any(|f| f.scrub_status().is_some_and(|s| s.running));
        let rebuilding = self.engines().any(|f| f.rebuild_status().is_some());
        match (rebuilding, scrubbing) {
            (true, true) => "a reconstruction's and a scrub's CPs",
            (true, false) => "a reconstruction's CPs",
            (false, true) => "a scrub's CPs (a restart ends the scrub)",
            (false, false) => "the CP in progress",
        }
    }

    /// Every aggregate's engine the node holds.
    fn engines(&self) -> impl Iterator<Item = &wafer_core::Filer> {
        self.node
            .aggregates()
            .into_iter()
            .filter_map(|a| self.node.aggregate(a.id))
    }

    /// Waits for one event or the node's timer, handles it, drains the node.
    fn step(&mut self) -> Result<(), ServeError> {
        // Schedules fall on hour boundaries only: wake at the next one.
        let next_hour = wafer_core::schedule::next_hour(self.schedule_seen);
        let timer = [self.node.poll_timeout(), Some(next_hour)]
            .into_iter()
            .flatten()
            .min()
            .map(|at| self.clock.until(at));
        // A stop waiting out its grace period must wake to notice its end.
        let wait = match self.stopping {
            Stopping::Flushed(_) => Some(timer.map_or(STOP_POLL, |t| t.min(STOP_POLL))),
            _ => timer,
        };
        let event = match wait {
            Some(wait) => match self.events.recv_timeout(wait) {
                Ok(event) => Some(event),
                Err(RecvTimeoutError::Timeout) => None,
                Err(RecvTimeoutError::Disconnected) => unreachable!("disk threads hold senders"),
            },
            None => Some(self.events.recv().expect("disk threads hold senders")),
        };
        if let Some(event) = event {
            self.handle(event)?;
        }
        // Under a steady stream of events the timer must still fire.
        let now = self.clock.now();
        if self.node.poll_timeout().is_some_and(|at| at <= now) {
            self.node.handle_timeout(now);
        }
        self.take_scheduled_snapshots(now);
        self.drain();
        self.handle_released()?;
        self.settle_pending();
        self.watch_aggregates();
        self.sample_cache_ages();
        self.check_something_serves()
    }

    /// Submits, once an hour boundary has passed, the snapshots `snap sched`
    /// says fell due since the last look: none while stopping (a stop's
    /// final CP must be the last), and those that fell due while starting
    /// once the node serves.
    fn take_scheduled_snapshots(&mut self, now: Instant) {
        let crossed = now >= wafer_core::schedule::next_hour(self.schedule_seen);
        if !self.started || !crossed {
            return;
        }
        if self.stopping != Stopping::No {
            self.schedule_seen = now;
            return;
        }
        let due = self.node.snapshots_due(self.schedule_seen, now);
        self.schedule_seen = now;
        for request in due {
            let what = self.describe_scheduled(&request);
            match self.node.submit(now, request) {
                Ok(id) => {
                    self.waiters.insert(id, Waiter::Scheduled(what));
                }
                Err(busy) => tracing::error!("scheduled snapshot {what} not taken: {busy}"),
            }
        }
    }

    /// `hourly.0 of volume vol0`, for a scheduled snapshot's log lines.
    fn describe_scheduled(&self, request: &HostRequest) -> String {
        let HostRequest::Change(Change::ScheduledSnapshot { volume, kind, .. }) = request else {
            unreachable!("the node's schedule asks for scheduled snapshots only")
        };
        let name = (self.volume_name(*volume)).unwrap_or_else(|| format!("#{}", volume.0));
        format!("{} of volume {name}", kind.name(0))
    }

    /// Notes each aggregate's cache use clock with the time, now and then.
    fn sample_cache_ages(&mut self) {
        let now_ns = self.clock.elapsed_ns();
        let node = &self.node;
        let uses = node
            .aggregates()
            .into_iter()
            .filter_map(|a| Some((a.id, node.aggregate(a.id)?.cache_uses())));
        self.cache_ages.sample(now_ns, uses);
    }

    /// How long ago the oldest block of any aggregate's buffer cache was
    /// last used, at least; none while the caches are empty or every block
    /// was used since the last sample.
    fn cache_age_ns(&self) -> Option<u64> {
        let now_ns = self.clock.elapsed_ns();
        self.node
            .aggregates()
            .into_iter()
            .filter_map(|a| {
                let oldest = self.node.aggregate(a.id)?.cache_oldest_use()?;
                self.cache_ages.age_ns(a.id, oldest, now_ns)
            })
            .max()
    }

    /// Handles, in order, what compares that ended have let go: their
    /// writes, then the events they held back.
    fn handle_released(&mut self) -> Result<(), ServeError> {
        while let Some(event) = self.fences.next_released() {
            self.handle(event)?;
            self.drain();
        }
        Ok(())
    }

    /// Once serving, a node whose every aggregate has failed has nothing
    /// left to serve: the server stops, as a one-aggregate server always did
    /// when its aggregate went offline. With any aggregate online, offline or
    /// being created, it serves on.
    fn check_something_serves(&self) -> Result<(), ServeError> {
        if !self.started || !self.pending.is_empty() {
            return Ok(());
        }
        let aggregates = self.node.aggregates();
        let reasons: Vec<String> = aggregates
            .iter()
            .filter_map(|a| match &a.state {
                AggrState::Failed(reason) => Some(reason.clone()),
                _ => None,
            })
            .collect();
        match !aggregates.is_empty() && reasons.len() == aggregates.len() {
            true => Err(ServeError::Offline(reasons.join("; "))),
            false => Ok(()),
        }
    }

    /// Logs what changed in each aggregate: its state (failed, offline,
    /// online), its RAID groups, reconstructions and scrubs.
    fn watch_aggregates(&mut self) {
        for status in self.node.aggregates() {
            let name = self.aggr_name(status.id);
            if let Some(filer) = view::serving(&self.node, status.id)
                && let Some(config) = self.config.aggr(status.id.0)
            {
                let watch = self
                    .watches
                    .entry(status.id)
                    .or_insert_with(|| watch::Watch::of(filer));
                for line in watch.changes(filer, config) {
                    tracing::info!("{line}");
                }
            }
            if self.started && self.states.get(&status.id) != Some(&status.state) {
                if let AggrState::Failed(reason) = &status.state {
                    tracing::error!(
                        "aggregate {name} FAILED: {reason}; it serves no more requests, the \
                         other aggregates serve on"
                    );
                    self.publish_catalogue();
                }
                self.states.insert(status.id, status.state);
            }
        }
    }

    fn handle(&mut self, event: Event) -> Result<(), ServeError> {
        if self.fences.must_wait(&event) {
            self.fences.park(event);
            return Ok(());
        }
        match event {
            Event::Host {
                target,
                request,
                done,
            } => self.host(&target, request, done),
            Event::Extents {
                target,
                offset,
                length,
                done,
            } => {
                let snapshot = target.snapshot.as_deref();
                match self.incarnations.is_live(&target) {
                    true => done(view::extents(
                        &self.node, target.lun, snapshot, offset, length,
                    )),
                    false => done(Err(ended(&target))),
                }
            }
            Event::CompareAndWrite(compare) => self.compare_and_write(compare),
            Event::IoDone { id, result } => {
                self.io_in_flight -= 1;
                self.io_aggregates.remove(&id);
                self.node.handle_io_done(self.clock.now(), id, result);
            }
            Event::DiskError { disk, error } => self.disk_error(&disk, &error)?,
            Event::NvlogFailed(error) => return Err(ServeError::NvlogFailed(error)),
            Event::Admin { request, reply } => self.admin(request, reply),
            Event::Shutdown => self.begin_stop(),
        }
        Ok(())
    }

    fn host(&mut self, target: &Target, request: HostRequest, done: HostCallback) {
        if self.stopping != Stopping::No {
            return done(HostOutcome::Refused);
        }
        if !self.incarnations.is_live(target) {
            return done(HostOutcome::Reply(Err(ended(target))));
        }
        let label = HostLabel::of(target, &request);
        match self.node.submit(self.clock.now(), request) {
            Ok(id) => {
                self.waiters.insert(id, Waiter::Host(done, label));
            }
            Err(busy @ Busy::Full(_)) => done(HostOutcome::Busy(busy)),
            Err(Busy::NotOnline) => done(HostOutcome::Refused),
        }
    }

    /// Reads what a COMPARE AND WRITE compares, with its range fenced.
    fn compare_and_write(&mut self, compare: Box<CompareRequest>) {
        let refused =
            |compare: Box<CompareRequest>, outcome| (compare.done)(Compared::Outcome(outcome));
        if self.stopping != Stopping::No {
            return refused(compare, HostOutcome::Refused);
        }
        if !self.incarnations.is_live(&compare.target) {
            let ended = ended(&compare.target);
            return refused(compare, HostOutcome::Reply(Err(ended)));
        }
        let length = compare.expected.len() as u64;
        let read = compare.target.read(compare.offset, length);
        match self.node.submit(self.clock.now(), read) {
            Ok(id) => {
                self.fences
                    .fence(compare.target.lun, compare.offset, length);
                self.waiters.insert(id, Waiter::Compare(compare));
            }
            Err(busy @ Busy::Full(_)) => refused(compare, HostOutcome::Busy(busy)),
            Err(Busy::NotOnline) => refused(compare, HostOutcome::Refused),
        }
    }

    /// A compare's read is back: a miscompare is answered, a match becomes
    /// the write, handled before anything the fence held back.
    fn compared(&mut self, compare: CompareRequest, read: Result<ReplyData, HostError>) {
        let CompareRequest {
            target,
            offset,
            expected,
            data,
            done,
        } = compare;
        let write = match read {
            Ok(ReplyData::Data(bytes)) => {
                match crate::events::first_difference(&bytes, &expected) {
                    Some(at) => {
                        done(Compared::Miscompare(u32::try_from(at).unwrap_or(u32::MAX)));
                        None
                    }
                    None => Some(Event::Host {
                        request: HostRequest::Change(Change::Write {
                            lun: target.lun,
                            offset,
                            data,
                        }),
                        target: target.clone(),
                        done: Box::new(move |outcome| done(Compared::Outcome(outcome))),
                    }),
                }
            }
            other => {
                done(Compared::Outcome(HostOutcome::Reply(other)));
                None
            }
        };
        self.fences.lift(target.lun, offset, write);
    }

    /// The node's contract: I/Os first, then replies.
    pub(super) fn drain(&mut self) {
        while let Some(io) = self.node.poll_io() {
            self.io_in_flight += 1;
            match (io.aggregate, &io.io.op) {
                (Some(aggr), IoOp::AssignSpare { member }) => {
                    let result = self.assign_spare(aggr, *member);
                    let done = Event::IoDone {
                        id: io.io.id,
                        result,
                    };
                    self.to_self
                        .send(done)
                        .expect("the engine holds its own receiver");
                }
                (Some(aggr), _) => {
                    self.io_aggregates.insert(io.io.id, aggr);
                    self.devices.perform(io);
                }
                (None, _) => self.devices.perform(io),
            }
        }
        while let Some(reply) = self.node.poll_reply() {
            match self.waiters.remove(&reply.id) {
                Some(Waiter::Host(done, label)) => {
                    if reply.result == Err(HostError::Io) {
                        let what = label.describe(&self.node);
                        let aggr = wafer_core::node::split_volume(label.lun.volume).0;
                        let watch = self.watches.entry(aggr).or_default();
                        if let Some(line) = watch.unrecoverable_read(&what) {
                            tracing::error!("{line}");
                        }
                    }
                    done(HostOutcome::Reply(reply.result))
                }
                Some(Waiter::Compare(compare)) => self.compared(*compare, reply.result),
                Some(Waiter::Admin {
                    reply: to,
                    message,
                    ended,
                    destroyed,
                }) => {
                    if reply.result.is_ok()
                        && let Some(volume) = destroyed
                    {
                        self.forget_volume_records(&volume);
                    }
                    self.admin_done(&to, message, ended, reply.result);
                }
                Some(Waiter::Local) => {
                    self.local_results.insert(reply.id, reply.result);
                }
                Some(Waiter::Background(what)) => {
                    if let Err(error) = reply.result {
                        tracing::error!("{what} failed: {error}");
                    }
                }
                Some(Waiter::Scheduled(what)) => match reply.result {
                    Ok(_) => {
                        self.publish_catalogue();
                        tracing::info!("scheduled snapshot {what} taken");
                    }
                    Err(error) => tracing::error!("scheduled snapshot {what} not taken: {error}"),
                },
                Some(Waiter::FinalFlush) => {
                    if let Err(error) = reply.result {
                        tracing::error!("the final flush failed: {error}");
                    }
                    self.stopping = Stopping::Flushed(std::time::Instant::now());
                }
                None => unreachable!("a reply to {:?}, which nobody sent", reply.id),
            }
        }
    }

    fn begin_stop(&mut self) {
        if self.stopping != Stopping::No {
            return;
        }
        tracing::info!(
            "stopping: no new connections; {} requests in flight finish, then a final CP",
            self.waiters.len()
        );
        self.shared.stop.begin();
        self.abandon_additions();
        self.stopping = match self.node.submit(self.clock.now(), HostRequest::Flush) {
            Ok(id) => {
                self.waiters.insert(id, Waiter::FinalFlush);
                Stopping::Flushing
            }
            Err(_busy) => Stopping::Flushed(std::time::Instant::now()),
        };
    }

    /// A disk failed an I/O: record it for good (once). A failure that
    /// cannot be recorded stops the server before the filer hears of it, so
    /// that nothing commits while the configuration still trusts the disk.
    fn disk_error(&mut self, name: &str, error: &str) -> Result<(), ServeError> {
        let Some(aggr) = self.config.aggr_of_disk(name) else {
            return Ok(()); // a disk that has left the node since
        };
        let slots = aggr.slots();
        let Some(slot) = slots.iter().find(|s| s.disk.name == name) else {
            return Ok(()); // a disk that has left the aggregate since
        };
        if slot.disk.state == DiskState::Failed {
            return Ok(());
        }
        let (aggr, id) = (aggr.aggr_id(), slot.id);
        self.fail_disk_slot(aggr, id, name, error)
            .map_err(|save| ServeError::FailureUnrecorded {
                disk: name.to_string(),
                failure: error.to_string(),
                save,
            })
    }

    /// Puts the last spare in failed member `member`'s slot: durably in the
    /// configuration first, then by moving the spare's threads (and so its
    /// file) to the slot. A member already replaced (the request repeated
    /// after a crash) is left alone.
    fn assign_spare(&mut self, aggr: AggrId, member: DiskId) -> IoResult {
        let Some(config) = self.config.aggr(aggr.0) else {
            return IoResult::DiskFailed;
        };
        let slots = config.slots();
        let slot = &slots[member.0 as usize];
        let Slot::Member {
            group,
            disk: position,
        } = slot.slot
        else {
            unreachable!("the engine rebuilds members only, not {:?}", slot.slot)
        };
        if slot.disk.state == DiskState::InService {
            return IoResult::Done;
        }
        let failed = slot.disk.name.clone();
        let usable = |s: &&crate::config::SlotDisk<'_>| {
            matches!(s.slot, Slot::Spare(_)) && s.disk.state == DiskState::InService
        };
        let Some(spare_slot) = slots.iter().rfind(usable) else {
            tracing::warn!("disk {failed} cannot be rebuilt: no spare left");
            return IoResult::DiskFailed;
        };
        let (spare, spare_slot) = (spare_slot.disk.name.clone(), spare_slot.id.0 as usize);
        let before = self.config.clone();
        self.config
            .aggr_mut(aggr.0)
            .expect("looked up")
            .replace_member(group, position.as_usize(), &spare);
        if let Err(error) = self.config.save(&self.dir) {
            // The spare is still there; the host is what failed. The filer
            // goes offline, and the next start assigns the spare again.
            tracing::error!(
                "spare {spare} not assigned: the configuration cannot be saved: {error}"
            );
            self.config = before;
            return IoResult::Unwritable;
        }
        let disks = self.devices.disks.get_mut(&aggr).expect("its disks");
        let handle = disks.remove(spare_slot);
        disks[member.0 as usize] = handle;
        tracing::info!(
            "spare {spare} takes the place of failed disk {failed} (RAID group {group}, \
             position {}); reconstruction runs in the background; {failed} is a broken disk, \
             its file kept until `disk remove {failed}`",
            position.0
        );
        IoResult::Done
    }

    /// Fails a disk: in the configuration (saved) first, then in its thread
    /// and in the filer. If the configuration cannot be saved, nothing
    /// changes and the error is returned.
    fn fail_disk_slot(
        &mut self,
        aggr: AggrId,
        disk: DiskId,
        name: &str,
        reason: &str,
    ) -> std::io::Result<()> {
        let before = self.config.clone();
        self.config
            .aggr_mut(aggr.0)
            .expect("a configured aggregate")
            .mark_failed(name, reason);
        if let Err(error) = self.config.save(&self.dir) {
            self.config = before;
            return Err(error);
        }
        // The disk thread lives as long as the engine (a panic aborts).
        let _ = self.devices.disks[&aggr][disk.0 as usize].send(DiskCommand::Fail);
        let now = self.clock.now();
        self.node
            .with_aggregate(now, aggr, |filer| filer.mark_failed(disk));
        tracing::warn!("disk {name} (slot {}) failed: {reason}", disk.0);
        // The filer takes up a reconstruction onto a spare when a CP commits;
        // an idle filer would not start one, so ask for a CP now.
        if let Ok(id) = self.node.submit(self.clock.now(), HostRequest::Flush) {
            self.waiters
                .insert(id, Waiter::Background("the CP after a disk failure"));
        }
        Ok(())
    }

    fn publish_catalogue(&mut self) {
        let default = self.record_lun_ids();
        let holds = self.shared.catalogue.holds();
        let ids = &self.config.luns;
        let catalogue = Catalogue::of(&self.node, &self.incarnations, holds, default, ids);
        self.shared.catalogue.publish(catalogue);
        self.publish_masking();
    }
}

/// The refusal of a request whose target has ended: what a connection to a
/// destroyed LUN is told.
fn ended(target: &Target) -> HostError {
    HostError::NotFound(match target.snapshot {
        None => "LUN",
        Some(_) => "snapshot",
    })
}
