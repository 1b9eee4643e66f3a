//! The node: one NVLog, one consistency-point schedule and one request
//! router over the aggregates it serves, as a state machine with the
//! filer's `submit`/`handle_*`/`poll_*` contract.
//!
//! Each aggregate is a [`Filer`]: its RAID groups, volumes, allocation,
//! rebuilds and scrubs, self-describing on its own disks (its superblock
//! names it). What they share is the node's: the NVRAM log, and with it the
//! moments CPs start, and the buffer-cache budget, which each aggregate
//! holds a share of by its recent use of its cache. An aggregate logs a change into what it takes for its
//! own half; the node puts the record, tagged with the aggregate, into the
//! node's *active* half. A half is reset once every aggregate with records
//! in it has committed the CP that holds them (each record carries its
//! aggregate's CP generation), which is why CPs are node-wide: when any
//! aggregate starts one, the node switches the active half (if the other is
//! reset) and starts one in every other aggregate with anything
//! uncommitted. An aggregate that ends a CP early and starts another before
//! the rest have ended theirs costs nothing but time: its new records carry
//! the newer generation, and the half waits for it too.
//!
//! The node's half fills with every aggregate's records. A record that does
//! not fit waits, unacknowledged, until the other half is reset (the
//! back-to-back CP, node-wide); the records a CP writes about itself (its
//! dirty stripes) never wait, as in the filer.
//!
//! Mounting mounts every aggregate over the same two halves; each replays
//! only its own records newer than its superblock. No half is reset until
//! every aggregate has either committed its replay or failed to mount, and
//! the node takes requests only then. An aggregate that cannot mount, or
//! that goes offline later, is reported with its reason; the others serve
//! on. One that went offline after serving keeps its records pinned in the
//! log (they are acknowledged writes, for its next mount), so if it stays
//! offline the log fills and the node's writes wait, rather than lose them.
//!
//! Volumes and LUNs are named node-wide: a node [`VolumeId`] carries its
//! aggregate in the bits above [`VOLUME_BITS`], so a one-aggregate node
//! (aggregate 0) uses the filer's own numbers, and requests are routed by
//! the volume they name.

use std::collections::{BTreeMap, VecDeque};

use crate::aggregate::Layout;
use crate::filer::{
    Busy, Change, CpReason, Filer, GrowError, HostError, HostRequest, Io, IoId, IoOp, IoResult,
    Options, Reply, ReplyData, RequestId,
};
use crate::fixed_map::{FixedHash, FixedMap, mix_words};
use crate::format::{LunAttributes, NAME_MAX};
use crate::nvlog::{LoggedOp, LunId, NvRecord};
use crate::payload::{Bytes, Payload};
use crate::units::{AggrId, CpCount, FlashSlot, Instant, VolumeId};

mod flash;
use flash::SplitRead;
pub use flash::{FlashCache, FlashCounters};

/// Most aggregates one node serves.
pub const MAX_AGGREGATES: usize = 16;

/// Bits of a node [`VolumeId`] that number the volume within its aggregate;
/// the aggregate's id sits above them.
pub const VOLUME_BITS: u32 = 16;

/// An I/O for the driver: a disk I/O of one aggregate (disk ids are that
/// aggregate's own), or an NVLog operation of the node (`aggregate` is
/// `None`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeIo<P: Payload = Bytes> {
    /// The aggregate whose disks the I/O goes to.
    pub aggregate: Option<AggrId>,
    /// The I/O, with a node-wide id.
    pub io: Io<P>,
}

/// Where an aggregate is in its life, as the node reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AggrState {
    /// Mounting, replaying, or formatting: not serving yet.
    Mounting,
    /// Serving.
    Online,
    /// Finishing its last CP before going offline at the administrator's
    /// request.
    GoingOffline,
    /// Offline at the administrator's request, every change committed.
    Offline,
    /// It could not mount, or could not go on (a RAID group lost more
    /// disks than it survives, or the host refused a write): why.
    Failed(String),
}

/// One aggregate as the node reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AggrStatus {
    /// Its identifier.
    pub id: AggrId,
    /// Its name.
    pub name: String,
    /// Its state.
    pub state: AggrState,
}

/// Why an aggregate administration request was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AggrError {
    /// The node serves [`MAX_AGGREGATES`] already.
    #[error("the node serves {MAX_AGGREGATES} aggregates already")]
    TooMany,
    /// The name is taken.
    #[error("aggregate {0} already exists")]
    Exists(String),
    /// The name is empty or too long.
    #[error("an aggregate's name must be 1 to {NAME_MAX} bytes: {0:?}")]
    BadName(String),
    /// The disks cannot be added as asked.
    #[error(transparent)]
    Grow(#[from] GrowError),
    /// No aggregate has that id.
    #[error("no such aggregate")]
    NotFound,
    /// The aggregate is not in the state the request needs.
    #[error("aggregate {name} is {state}; {needed}")]
    WrongState {
        /// The aggregate.
        name: String,
        /// Its state, in words.
        state: &'static str,
        /// What the request needs.
        needed: &'static str,
    },
}

/// Node-wide counters; each aggregate keeps its own as well.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeCounters {
    /// Node CPs: moments the node started CPs in its aggregates together.
    pub cps: u64,
    /// Times the node's active NVLog half switched.
    pub log_switches: u64,
    /// Times records began to wait for a half to be reset (back-to-back):
    /// once per wait, however many records wait behind the first.
    pub log_waits: u64,
    /// Requests refused because the node held `Options::max_requests`.
    pub busy_refusals: u64,
}

/// An aggregate the node serves: its engine, or why it has none.
#[derive(Debug)]
struct Member<P: Payload> {
    name: String,
    layout: Layout,
    engine: Option<Filer<P>>,
    state: AggrState,
    /// The half of its own that its last change record went to: a change
    /// logged to the other one means it has started a CP.
    last_half: Option<u8>,
    /// Whether it had a CP running when the node last looked.
    cp_seen: bool,
    /// Its committed CP when the node last tended the log: a commit may
    /// free a half.
    committed_seen: CpCount,
    /// Its buffer cache's use clock at the last sharing of the node's
    /// cache budget: the uses since are its demand.
    uses_seen: u64,
    /// Brought back by the administrator: a mount that finds it recorded
    /// offline clears the record (a CP) instead of taking it offline again.
    bringing_online: bool,
}

/// What a call into an aggregate left the node to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Owed {
    /// Nothing: the call changed nothing the node answers for.
    Nothing,
    /// A pass over every aggregate, after resharing the cache budget first
    /// when `cache_sharing`.
    Something { cache_sharing: bool },
}

/// Why a node I/O was issued.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Route {
    /// An aggregate's own I/O, under its own id.
    Aggregate(AggrId, IoId),
    /// A reset of a node half.
    Reset,
    /// A block going into the Flash Cache.
    FlashWrite(crate::filer::FlashHome, FlashSlot),
    /// A block of a split read, read from the Flash Cache.
    FlashPart { split: u64, block: u32 },
    /// Blocks of a split read, from `block` on, read from disk.
    DiskPart { split: u64, block: u32 },
}

/// The aggregates a node serves, in id order: a short list (at most
/// [`MAX_AGGREGATES`]) searched in place, because the node looks its
/// aggregates up after every call into one of them.
#[derive(Debug)]
struct Members<P: Payload>(Vec<(AggrId, Member<P>)>);

impl<P: Payload> Members<P> {
    fn position(&self, id: AggrId) -> Result<usize, usize> {
        self.0.binary_search_by_key(&id, |(key, _)| *key)
    }

    fn get(&self, id: &AggrId) -> Option<&Member<P>> {
        let at = self.position(*id).ok()?;
        Some(&self.0[at].1)
    }

    fn get_mut(&mut self, id: &AggrId) -> Option<&mut Member<P>> {
        let at = self.position(*id).ok()?;
        Some(&mut self.0[at].1)
    }

    fn contains_key(&self, id: &AggrId) -> bool {
        self.position(*id).is_ok()
    }

    fn insert(&mut self, id: AggrId, member: Member<P>) {
        match self.position(id) {
            Ok(at) => self.0[at].1 = member,
            Err(at) => self.0.insert(at, (id, member)),
        }
    }

    fn remove(&mut self, id: &AggrId) -> Option<Member<P>> {
        let at = self.position(*id).ok()?;
        Some(self.0.remove(at).1)
    }

    fn iter(&self) -> impl Iterator<Item = (&AggrId, &Member<P>)> {
        self.0.iter().map(|(id, member)| (id, member))
    }

    fn keys(&self) -> impl Iterator<Item = &AggrId> {
        self.0.iter().map(|(id, _)| id)
    }

    fn values(&self) -> impl Iterator<Item = &Member<P>> {
        self.0.iter().map(|(_, member)| member)
    }

    fn values_mut(&mut self) -> impl Iterator<Item = &mut Member<P>> {
        self.0.iter_mut().map(|(_, member)| member)
    }

    fn len(&self) -> usize {
        self.0.len()
    }
}

impl<P: Payload> core::ops::Index<&AggrId> for Members<P> {
    type Output = Member<P>;

    fn index(&self, id: &AggrId) -> &Member<P> {
        self.get(id).expect("a member")
    }
}

/// A request an aggregate holds for the node: the aggregate and its own id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct PartId(AggrId, RequestId);

impl FixedHash for PartId {
    fn fixed_hash(&self) -> u64 {
        mix_words(u64::from(self.0.0), self.1.0)
    }
}

/// A request the node passed on, and the node request it answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Passed {
    One(RequestId),
    /// One aggregate's part of a node-wide flush.
    FlushPart(RequestId),
}

/// The node's two NVLog halves: which one takes records, and who still
/// needs the records in each.
#[derive(Clone, Debug)]
struct SharedLog {
    capacity: u64,
    active: u8,
    used: [u64; 2],
    /// For each half, the newest CP generation of each aggregate's records
    /// in it: the half is reset once each has committed that CP.
    live: [BTreeMap<AggrId, CpCount>; 2],
    /// Mounting: both halves hold records of generations unknown to the
    /// node until every aggregate has replayed.
    held_for_mount: bool,
    /// Records that did not fit the active half, in order.
    waiting: VecDeque<(AggrId, IoId, NvRecord)>,
}

impl SharedLog {
    fn new(capacity: u64) -> SharedLog {
        SharedLog {
            capacity,
            active: 0,
            used: [0, 0],
            live: [BTreeMap::new(), BTreeMap::new()],
            held_for_mount: false,
            waiting: VecDeque::new(),
        }
    }

    fn other(&self) -> u8 {
        1 - self.active
    }

    fn is_clean(&self, half: u8) -> bool {
        let h = usize::from(half);
        self.used[h] == 0 && self.live[h].is_empty() && !self.held_for_mount
    }

    /// Whether a record of `length` bytes fits the active half now (a lone
    /// record always does, or it would never go anywhere).
    fn fits(&self, length: u64) -> bool {
        let used = self.used[usize::from(self.active)];
        self.waiting.is_empty() && (used == 0 || used + length <= self.capacity)
    }

    /// Counts `record` into the active half; returns the half.
    fn note(&mut self, record: &NvRecord) -> u8 {
        let half = usize::from(self.active);
        self.used[half] += record.encoded_len() as u64;
        let newest = self.live[half].entry(record.aggregate).or_default();
        *newest = (*newest).max(record.generation);
        self.active
    }

    fn switch(&mut self) {
        assert!(
            self.is_clean(self.other()),
            "switching onto a half not reset"
        );
        self.active = self.other();
    }

    fn clear(&mut self, half: u8) {
        self.used[usize::from(half)] = 0;
        self.live[usize::from(half)].clear();
    }
}

/// A node of 1 to [`MAX_AGGREGATES`] aggregates, over payload `P`.
#[derive(Debug)]
pub struct Node<P: Payload = Bytes> {
    options: Options,
    members: Members<P>,
    log: SharedLog,
    /// A node CP is due: some aggregate started a CP.
    cp_due: Option<CpReason>,
    io_out: VecDeque<NodeIo<P>>,
    routes: FixedMap<IoId, Route>,
    next_io: u64,
    passed: FixedMap<PartId, Passed>,
    /// Node-wide flushes, with the aggregates' parts still out.
    flushes: BTreeMap<RequestId, usize>,
    replies: VecDeque<Reply<P::ReadData>>,
    next_request: u64,
    requests_held: usize,
    now: Instant,
    counters: NodeCounters,
    /// The Flash Cache, if the options give it one.
    flash: Option<FlashCache>,
    /// Disk reads being answered in part from the Flash Cache.
    splits: FixedMap<u64, SplitRead<P>>,
    next_split: u64,
}

impl<P: Payload> Node<P> {
    /// A node serving no aggregate yet, over a blank NVLog.
    pub fn new(options: Options, now: Instant) -> Node<P> {
        Node {
            log: SharedLog::new(options.nvlog_half_bytes),
            flash: options.flash_cache.map(FlashCache::new),
            options,
            members: Members(Vec::new()),
            cp_due: None,
            io_out: VecDeque::new(),
            routes: FixedMap::default(),
            next_io: 0,
            passed: FixedMap::default(),
            flushes: BTreeMap::new(),
            replies: VecDeque::new(),
            next_request: 0,
            requests_held: 0,
            now,
            counters: NodeCounters::default(),
            splits: FixedMap::default(),
            next_split: 0,
        }
    }

    /// Creates aggregate `name` on the blank disks of `layout`; it serves
    /// once its first CP has committed.
    pub fn create_aggregate(
        &mut self,
        now: Instant,
        name: &str,
        layout: Layout,
    ) -> Result<AggrId, AggrError> {
        self.now = now;
        let id = self.admit(name)?;
        let engine = Filer::format_aggregate(id, name, layout.clone(), self.options.clone(), now);
        self.members.insert(id, Member::new(name, layout, engine));
        self.share_cache();
        self.settle(id);
        Ok(id)
    }

    /// The lowest free id for a new aggregate called `name`. An id whose
    /// records a half still holds (its aggregate was destroyed) is not free
    /// until that half is reset: a new aggregate under it would replay them.
    fn admit(&self, name: &str) -> Result<AggrId, AggrError> {
        if name.is_empty() || name.len() > NAME_MAX {
            return Err(AggrError::BadName(name.to_string()));
        }
        if self.members.values().any(|m| m.name == name) {
            return Err(AggrError::Exists(name.to_string()));
        }
        (0..MAX_AGGREGATES as u32)
            .map(AggrId)
            .find(|id| {
                !self.members.contains_key(id) && self.log.live.iter().all(|l| !l.contains_key(id))
            })
            .ok_or(AggrError::TooMany)
    }

    /// Takes an online aggregate offline: it answers no more requests, and
    /// once a last CP has committed everything it holds, the node lets go
    /// of its engine. Its disks keep a complete image.
    pub fn offline_aggregate(&mut self, now: Instant, id: AggrId) -> Result<(), AggrError> {
        self.now = now;
        let member = self.members.get_mut(&id).ok_or(AggrError::NotFound)?;
        if member.state != AggrState::Online {
            return Err(member.wrong_state("it must be online"));
        }
        member.state = AggrState::GoingOffline;
        if let Some(engine) = member.engine.as_mut() {
            engine.mark_offline(true);
            engine.start_cp_now(now, CpReason::Sync);
        }
        self.settle(id);
        Ok(())
    }

    /// Adds blank disks to an online aggregate: `grown` is its layout with
    /// them, a new RAID group or data disks at the end of the last group
    /// ([`Filer::add_disks`]). The driver records the disks first.
    pub fn add_disks(&mut self, now: Instant, id: AggrId, grown: Layout) -> Result<(), AggrError> {
        self.now = now;
        let member = self.members.get_mut(&id).ok_or(AggrError::NotFound)?;
        if member.state != AggrState::Online {
            return Err(member.wrong_state("it must be online"));
        }
        let engine = member
            .engine
            .as_mut()
            .expect("an online aggregate has an engine");
        engine.add_disks(now, grown.clone())?;
        member.layout = grown;
        self.settle(id);
        Ok(())
    }

    /// Removes an offline (or failed) aggregate from the node; its layout
    /// is returned, for the driver to give its disks back as spares.
    pub fn destroy_aggregate(&mut self, id: AggrId) -> Result<Layout, AggrError> {
        let member = self.members.get(&id).ok_or(AggrError::NotFound)?;
        if !matches!(member.state, AggrState::Offline | AggrState::Failed(_)) {
            return Err(member.wrong_state("it must be offline first"));
        }
        let member = self.members.remove(&id).expect("looked up");
        self.flash_forget(id, None);
        let theirs: Vec<IoId> = (self.routes.iter())
            .filter(|(_, route)| matches!(route, Route::Aggregate(a, _) if *a == id))
            .map(|(io, _)| *io)
            .collect();
        for io in theirs {
            self.routes.remove(&io);
        }
        Ok(member.layout)
    }

    /// Every aggregate, in id order.
    pub fn aggregates(&self) -> Vec<AggrStatus> {
        self.members
            .iter()
            .map(|(id, member)| AggrStatus {
                id: *id,
                name: member.name.clone(),
                state: member.state.clone(),
            })
            .collect()
    }

    /// The aggregate called `name`.
    pub fn aggregate_named(&self, name: &str) -> Option<AggrId> {
        self.members
            .iter()
            .find_map(|(id, member)| (member.name == name).then_some(*id))
    }

    /// An aggregate's engine, while it has one (mounting, online, going
    /// offline, or failed after it mounted).
    pub fn aggregate(&self, id: AggrId) -> Option<&Filer<P>> {
        self.members.get(&id)?.engine.as_ref()
    }

    /// An aggregate's layout.
    pub fn layout(&self, id: AggrId) -> Option<&Layout> {
        Some(&self.members.get(&id)?.layout)
    }

    /// Acts on an aggregate's engine (start a scrub, mark a disk failed,
    /// note a spare), then carries out what it asked for.
    pub fn with_aggregate<R>(
        &mut self,
        now: Instant,
        id: AggrId,
        act: impl FnOnce(&mut Filer<P>) -> R,
    ) -> Option<R> {
        self.now = now;
        let result = act(self.members.get_mut(&id)?.engine.as_mut()?);
        self.settle(id);
        Some(result)
    }

    /// Node-wide counters.
    pub fn counters(&self) -> &NodeCounters {
        &self.counters
    }

    /// Whether the node takes requests: it is not mounting.
    pub fn is_online(&self) -> bool {
        !self.log.held_for_mount
    }

    /// Every volume: node id, name, and aggregate.
    pub fn volumes(&self) -> Vec<(VolumeId, String, AggrId)> {
        self.engines()
            .flat_map(|(id, engine)| {
                engine
                    .volumes()
                    .into_iter()
                    .map(move |(volume, name)| (global_volume(id, volume), name, id))
            })
            .collect()
    }

    /// LUN `lun`'s space reservation and OS type, and the bytes it
    /// occupies; `None` if there is no such LUN.
    pub fn lun_details(&self, lun: LunId) -> Option<(LunAttributes, u64)> {
        let (id, local) = split_volume(lun.volume);
        let local = LunId {
            volume: local,
            file: lun.file,
        };
        self.aggregate(id)?.lun_details(local)
    }

    /// A volume's LUNs: node id, name and size in bytes.
    pub fn luns(&self, volume: VolumeId) -> Vec<(LunId, String, u64)> {
        let (id, local) = split_volume(volume);
        self.aggregate(id).map_or_else(Vec::new, |engine| {
            engine
                .luns(local)
                .into_iter()
                .map(|(lun, name, size)| (global_lun(id, lun), name, size))
                .collect()
        })
    }

    /// The scheduled snapshots due at the hours in `(after, until]` on the
    /// online volumes of the serving aggregates, as requests for the driver
    /// to submit (the engine keeps no timer for them: see `schedule`).
    pub fn snapshots_due(&self, after: Instant, until: Instant) -> Vec<HostRequest> {
        self.serving_engines()
            .flat_map(|(id, engine)| {
                let changes = engine.snapshots_due(after, until).into_iter();
                changes.map(move |mut change| {
                    if let Some(volume) = change.volume_mut() {
                        *volume = global_volume(id, *volume);
                    }
                    HostRequest::Change(change)
                })
            })
            .collect()
    }

    /// The first hour after `after` a scheduled snapshot falls on, on any
    /// online volume of a serving aggregate.
    pub fn next_snapshot_due(&self, after: Instant) -> Option<Instant> {
        self.serving_engines()
            .filter_map(|(_, engine)| engine.next_snapshot_due(after))
            .min()
    }

    fn serving_engines(&self) -> impl Iterator<Item = (AggrId, &Filer<P>)> {
        self.engines().filter(|(id, _)| {
            self.members
                .get(id)
                .is_some_and(|m| m.state == AggrState::Online)
        })
    }

    fn engines(&self) -> impl Iterator<Item = (AggrId, &Filer<P>)> {
        self.members
            .iter()
            .filter_map(|(id, member)| Some((*id, member.engine.as_ref()?)))
    }

    /// Accepts a host request, routed to the aggregate of the volume it
    /// names; a flush goes to every aggregate. A volume is created with
    /// [`Node::submit_to`].
    pub fn submit(&mut self, now: Instant, request: HostRequest) -> Result<RequestId, Busy> {
        let mut request = request;
        let target = match &request {
            HostRequest::Flush => None,
            _ => Some(
                request
                    .volume_mut()
                    .map_or(AggrId(u32::MAX), |v| split_volume(*v).0),
            ),
        };
        self.submit_routed(now, target, request)
    }

    /// Accepts a host request for aggregate `id`: how a volume is created
    /// there. Requests that name a volume must name one of `id`'s.
    pub fn submit_to(
        &mut self,
        now: Instant,
        id: AggrId,
        request: HostRequest,
    ) -> Result<RequestId, Busy> {
        self.submit_routed(now, Some(id), request)
    }

    fn submit_routed(
        &mut self,
        now: Instant,
        target: Option<AggrId>,
        request: HostRequest,
    ) -> Result<RequestId, Busy> {
        self.now = now;
        if !self.is_online() {
            return Err(Busy::NotOnline);
        }
        if self.requests_held >= self.options.max_requests {
            self.counters.busy_refusals += 1;
            return Err(Busy::Full(self.requests_held));
        }
        let id = RequestId(self.next_request);
        self.next_request += 1;
        self.requests_held += 1;
        match target {
            None => self.flush_all(id),
            Some(aggregate) => {
                if let Err(busy) = self.pass(id, aggregate, request) {
                    self.requests_held -= 1;
                    return Err(busy);
                }
            }
        }
        Ok(id)
    }

    /// A node-wide flush: done when every serving aggregate's flush is.
    fn flush_all(&mut self, id: RequestId) {
        let serving: Vec<AggrId> = self.serving().collect();
        let mut parts = 0;
        for aggregate in serving {
            let now = self.now;
            if let Ok(part) = self.engine_mut(aggregate).submit(now, HostRequest::Flush) {
                self.passed
                    .insert(PartId(aggregate, part), Passed::FlushPart(id));
                parts += 1;
                self.settle(aggregate);
            }
        }
        match parts {
            0 => self.answer(id, Ok(ReplyData::Done)),
            _ => {
                self.flushes.insert(id, parts);
            }
        }
    }

    /// Passes request `id` on to `aggregate`, or answers it with why not.
    fn pass(
        &mut self,
        id: RequestId,
        aggregate: AggrId,
        mut request: HostRequest,
    ) -> Result<(), Busy> {
        let named = request.volume_mut().map(|v| *v);
        if let Err(error) = self.admits(aggregate, named, &request) {
            self.answer(id, Err(error));
            return Ok(());
        }
        // The aggregate knows its volumes by its own ids.
        if let Some(volume) = request.volume_mut() {
            *volume = split_volume(*volume).1;
        }
        let now = self.now;
        let part = self.engine_mut(aggregate).submit(now, request)?;
        self.passed.insert(PartId(aggregate, part), Passed::One(id));
        self.settle(aggregate);
        Ok(())
    }

    /// Whether aggregate `aggregate` can take `request`: it exists and
    /// serves, the volume named is its own, a new volume's name is free
    /// node-wide.
    fn admits(
        &self,
        aggregate: AggrId,
        volume: Option<VolumeId>,
        request: &HostRequest,
    ) -> Result<(), HostError> {
        let member = self
            .members
            .get(&aggregate)
            .ok_or(HostError::NotFound("aggregate"))?;
        if member.state != AggrState::Online {
            return Err(HostError::Invalid(format!(
                "aggregate {} is {}",
                member.name,
                member.state_word()
            )));
        }
        if volume.is_some_and(|v| split_volume(v).0 != aggregate) {
            return Err(HostError::NotFound("volume in that aggregate"));
        }
        if let HostRequest::Change(Change::CreateVolume { name, .. }) = request {
            if self.volumes().iter().any(|(_, taken, _)| taken == name) {
                return Err(HostError::Exists(format!("volume {name}")));
            }
        }
        Ok(())
    }

    fn serving(&self) -> impl Iterator<Item = AggrId> + use<'_, P> {
        self.members
            .iter()
            .filter(|(_, m)| m.state == AggrState::Online)
            .map(|(id, _)| *id)
    }

    fn engine_mut(&mut self, id: AggrId) -> &mut Filer<P> {
        self.members
            .get_mut(&id)
            .and_then(|m| m.engine.as_mut())
            .expect("a serving aggregate has an engine")
    }

    fn answer(&mut self, id: RequestId, result: Result<ReplyData<P::ReadData>, HostError>) {
        self.replies.push_back(Reply { id, result });
    }

    /// The next I/O for the driver to perform.
    pub fn poll_io(&mut self) -> Option<NodeIo<P>> {
        self.io_out.pop_front()
    }

    /// The next reply to a host request.
    pub fn poll_reply(&mut self) -> Option<Reply<P::ReadData>> {
        let reply = self.replies.pop_front()?;
        self.requests_held = (self.requests_held.checked_sub(1))
            .expect("every reply answers a request submitted once");
        Some(reply)
    }

    /// When [`handle_timeout`](Self::handle_timeout) should next be called.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.engines()
            .filter_map(|(_, engine)| engine.poll_timeout())
            .min()
    }

    /// Time has passed: each aggregate's timer CP that is due starts, and
    /// with it a node CP.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.now = now;
        let (ids, count) = self.member_ids();
        for &id in &ids[..count] {
            if let Some(engine) = self.members.get_mut(&id).and_then(|m| m.engine.as_mut()) {
                engine.handle_timeout(now);
                self.settle(id);
            }
        }
    }

    /// An I/O has completed.
    pub fn handle_io_done(&mut self, now: Instant, id: IoId, result: IoResult<P>) {
        self.now = now;
        let route = self
            .routes
            .remove(&id)
            .expect("completion of an I/O that is not pending");
        let (aggregate, inner) = match route {
            Route::Aggregate(aggregate, inner) => (aggregate, inner),
            Route::Reset => return,
            Route::FlashWrite(home, slot) => return self.flash_written(home, slot, result),
            Route::FlashPart { split, block } => {
                return self.flash_part_done(now, split, block, result);
            }
            Route::DiskPart { split, block } => {
                return self.disk_part_done(now, split, block, result);
            }
        };
        if let Some(engine) = self
            .members
            .get_mut(&aggregate)
            .and_then(|m| m.engine.as_mut())
        {
            engine.handle_io_done(now, inner, result);
            self.settle(aggregate);
        }
    }

    /// After any call into aggregate `id`: carries out its I/Os and replies,
    /// then what the node owes everyone (node CPs, half resets, waiting
    /// records, state changes).
    fn settle(&mut self, id: AggrId) {
        self.drain(id);
        match self.owed_after(id) {
            Owed::Nothing => return,
            Owed::Something { cache_sharing } if cache_sharing => self.share_cache(),
            Owed::Something { .. } => {}
        }
        loop {
            let before = (self.io_out.len(), self.log.active, self.log.waiting.len());
            self.run_node_cp();
            self.tend_log();
            let (ids, count) = self.member_ids();
            for &id in &ids[..count] {
                self.update_state(id);
                self.drain(id);
            }
            if before == (self.io_out.len(), self.log.active, self.log.waiting.len()) {
                break;
            }
        }
        for member in self.members.values_mut() {
            if let Some(engine) = member.engine.as_ref() {
                member.committed_seen = engine.committed_cp();
            }
        }
    }

    /// What a call into aggregate `id`, now drained, left the node to do.
    /// Nothing when no node CP is due, no record waits, no mount is under
    /// way, the aggregate serves as before, no new CP committed (which could
    /// free a half) and its cache share is not due. Most calls are I/O
    /// completions that change none of these, and this spares them a pass
    /// over every aggregate.
    fn owed_after(&self, id: AggrId) -> Owed {
        let Some((member, engine)) =
            (self.members.get(&id)).and_then(|member| Some((member, member.engine.as_ref()?)))
        else {
            return Owed::Something {
                cache_sharing: false,
            };
        };
        let cache_sharing = self.sharing_due(member, engine);
        let quiet = self.cp_due.is_none()
            && self.log.waiting.is_empty()
            && !self.log.held_for_mount
            && member.state == AggrState::Online
            && engine.committed_cp() == member.committed_seen
            && engine.mount_error().is_none()
            && engine.offline_reason().is_none();
        match quiet && !cache_sharing {
            true => Owed::Nothing,
            false => Owed::Something { cache_sharing },
        }
    }

    /// Whether aggregate `member` has used its cache a quarter of the
    /// node's budget over since the last sharing: shares follow a load that
    /// only reads, which starts no CP. One aggregate has the whole budget
    /// whatever it does.
    fn sharing_due(&self, member: &Member<P>, engine: &Filer<P>) -> bool {
        let quarter = self.options.cache_blocks as u64 / 4;
        self.members.len() > 1 && engine.cache_uses() > member.uses_seen + quarter
    }

    /// Every aggregate's id, in order, without allocating: this runs after
    /// every call into an engine.
    fn member_ids(&self) -> ([AggrId; MAX_AGGREGATES], usize) {
        let mut ids = [AggrId(0); MAX_AGGREGATES];
        for (slot, id) in ids.iter_mut().zip(self.members.keys()) {
            *slot = *id;
        }
        (ids, self.members.len())
    }

    /// Passes on an aggregate's I/Os and replies.
    fn drain(&mut self, id: AggrId) {
        loop {
            let Some(member) = self.members.get_mut(&id) else {
                return;
            };
            let Some(engine) = member.engine.as_mut() else {
                return;
            };
            if let Some(reply) = engine.poll_reply() {
                self.passed_reply(id, reply);
                continue;
            }
            let Some(io) = engine.poll_io() else {
                break;
            };
            self.pass_io(id, io);
        }
        self.take_victims(id);
        let member = self.members.get_mut(&id).expect("drained");
        let running = member.engine.as_ref().is_some_and(Filer::cp_running);
        if running && !member.cp_seen {
            self.cp_due.get_or_insert(CpReason::Sync);
        }
        member.cp_seen = running;
    }

    fn passed_reply(&mut self, aggregate: AggrId, reply: Reply<P::ReadData>) {
        let passed = self
            .passed
            .remove(&PartId(aggregate, reply.id))
            .expect("a reply to a request the node passed on");
        match passed {
            Passed::One(id) => {
                let result = reply.result.map(|data| globalize(aggregate, data));
                self.answer(id, result);
            }
            Passed::FlushPart(id) => {
                let parts = self.flushes.get_mut(&id).expect("a node flush");
                *parts -= 1;
                if *parts == 0 {
                    self.flushes.remove(&id);
                    self.answer(id, Ok(ReplyData::Done));
                }
            }
        }
    }

    fn pass_io(&mut self, aggregate: AggrId, io: Io<P>) {
        match io.op {
            // The node resets its halves itself, when nobody needs them.
            IoOp::NvlogReset { .. } => {
                let now = self.now;
                self.engine_mut(aggregate)
                    .handle_io_done(now, io.id, IoResult::Done);
            }
            IoOp::NvlogAppend { half, record } => self.append(aggregate, io.id, half, record),
            IoOp::Read { .. } if self.flash.is_some() => self.pass_read(aggregate, io),
            IoOp::Write {
                disk,
                dbn,
                ref sectors,
            } => {
                self.flash_invalidate(aggregate, disk, dbn, sectors.len() as u64);
                self.pass_to_disk(aggregate, io);
            }
            IoOp::AssignSpare { member } => {
                self.flash_forget(aggregate, Some(member));
                self.pass_to_disk(aggregate, io);
            }
            _ => self.pass_to_disk(aggregate, io),
        }
    }

    /// Passes an aggregate's I/O to the driver as it is.
    fn pass_to_disk(&mut self, aggregate: AggrId, io: Io<P>) {
        let id = self.route(Route::Aggregate(aggregate, io.id));
        self.io_out.push_back(NodeIo {
            aggregate: Some(aggregate),
            io: Io { id, op: io.op },
        });
    }

    /// An aggregate's record for the log, which it put in its own half
    /// `half`.
    fn append(&mut self, aggregate: AggrId, inner: IoId, half: u8, record: NvRecord) {
        assert_eq!(record.aggregate, aggregate, "an aggregate logs as itself");
        if self.log.held_for_mount {
            // Mounting: the halves hold what was there; nothing is reset
            // and each aggregate's records go where it puts them.
            return self.write_record(aggregate, inner, half, record);
        }
        let own_cp_record = matches!(record.op, LoggedOp::DirtyStripes { .. });
        if !own_cp_record {
            let member = self.members.get_mut(&aggregate).expect("appending");
            let switched = member
                .last_half
                .replace(half)
                .is_some_and(|last| last != half);
            let running = member.engine.as_ref().is_some_and(Filer::cp_running);
            if switched && running {
                // It froze its half for the CP it runs: the node's half
                // switches before the first record of the next generation.
                self.cp_due.get_or_insert(CpReason::Sync);
                self.switch_if_clean();
            }
        }
        let length = record.encoded_len() as u64;
        if !own_cp_record && !self.log.fits(length) && self.log.waiting.is_empty() {
            // The active half is full: a reset other half takes the record
            // at once, and the CP that frees this one starts.
            self.cp_due.get_or_insert(CpReason::NvlogFull);
            self.switch_if_clean();
        }
        if own_cp_record || self.log.fits(length) {
            let half = self.log.note(&record);
            self.write_record(aggregate, inner, half, record);
        } else {
            // Counted as the filer counts its back-to-back waits: once
            // where writes begin to wait, not once per write behind it.
            if self.log.waiting.is_empty() {
                self.counters.log_waits += 1;
            }
            self.cp_due.get_or_insert(CpReason::NvlogFull);
            self.log.waiting.push_back((aggregate, inner, record));
        }
    }

    fn write_record(&mut self, aggregate: AggrId, inner: IoId, half: u8, record: NvRecord) {
        let op = IoOp::NvlogAppend { half, record };
        self.log_op(Route::Aggregate(aggregate, inner), op);
    }

    /// Issues an NVLog operation (no aggregate's disk), routed back by `route`.
    fn log_op(&mut self, route: Route, op: IoOp<P>) {
        let id = self.route(route);
        self.io_out.push_back(NodeIo {
            aggregate: None,
            io: Io { id, op },
        });
    }

    fn route(&mut self, route: Route) -> IoId {
        let id = IoId(self.next_io);
        self.next_io += 1;
        self.routes.insert(id, route);
        id
    }

    /// Switches the active half, if the other one is reset and the active
    /// one holds anything.
    fn switch_if_clean(&mut self) {
        let active = self.log.active;
        if self.log.is_clean(self.log.other()) && !self.log.is_clean(active) {
            self.log.switch();
            self.counters.log_switches += 1;
        }
    }

    /// Some aggregate started a CP: every other one with anything
    /// uncommitted starts one too.
    fn run_node_cp(&mut self) {
        let Some(reason) = self.cp_due.take() else {
            return;
        };
        if self.log.held_for_mount {
            return;
        }
        self.counters.cps += 1;
        self.share_cache();
        self.switch_if_clean();
        let now = self.now;
        for member in self.members.values_mut() {
            if let Some(engine) = member.engine.as_mut() {
                if engine.has_uncommitted() && !engine.cp_running() {
                    engine.start_cp_now(now, reason);
                    // Started by this node CP: not the start of another.
                    member.cp_seen = engine.cp_running();
                }
            }
        }
    }

    /// Shares the node's buffer-cache budget ([`Options::cache_blocks`])
    /// among the aggregates with engines: each keeps a floor of a quarter
    /// of an equal share, and the rest goes by the cache uses each made
    /// since the last sharing (equally when none made any). Shares are set
    /// at every node CP, whenever an engine comes or goes, and when an
    /// aggregate has used its cache a quarter of the budget over; an aggregate
    /// whose share shrank evicts down to it as its cache next fills. One
    /// aggregate has the whole budget.
    fn share_cache(&mut self) {
        let budget = self.options.cache_blocks;
        let count = self.members.values().filter(|m| m.engine.is_some()).count();
        if count == 0 {
            return;
        }
        let floor = budget / (4 * count);
        let spare = (budget - floor * count) as u128;
        let demand = |m: &Member<P>| {
            m.engine
                .as_ref()
                .map_or(0, |e| e.cache_uses().saturating_sub(m.uses_seen))
        };
        let total: u128 = self.members.values().map(|m| u128::from(demand(m))).sum();
        for member in self.members.values_mut() {
            let uses = demand(member);
            let Some(engine) = member.engine.as_mut() else {
                continue;
            };
            let extra = match total {
                0 => spare / count as u128,
                _ => spare * u128::from(uses) / total,
            };
            engine.set_cache_share(floor + extra as usize);
            member.uses_seen = engine.cache_uses();
        }
    }

    /// Resets the inactive half once nobody needs it; then lets waiting
    /// records into it, and starts CPs in aggregates that hold it up.
    fn tend_log(&mut self) {
        if self.log.held_for_mount {
            return;
        }
        let other = self.log.other();
        if !self.log.is_clean(other) && self.nobody_needs(other) {
            self.log.clear(other);
            self.log_op(Route::Reset, IoOp::NvlogReset { half: other });
        }
        if !self.log.waiting.is_empty() && self.log.is_clean(other) {
            self.log.switch();
            self.counters.log_switches += 1;
            self.cp_due.get_or_insert(CpReason::BackToBack);
            let waiting = core::mem::take(&mut self.log.waiting);
            for (aggregate, inner, record) in waiting {
                if self.log.fits(record.encoded_len() as u64) {
                    let half = self.log.note(&record);
                    self.write_record(aggregate, inner, half, record);
                } else {
                    self.log.waiting.push_back((aggregate, inner, record));
                }
            }
        }
        self.start_cps_holding_up(other);
    }

    /// Whether every aggregate with records in `half` has committed them,
    /// or can never replay them (it failed to mount, or is gone).
    fn nobody_needs(&self, half: u8) -> bool {
        #[cfg(feature = "sabotage")]
        if self.options.sabotage == Some(crate::filer::Sabotage::EarlyLogReset) {
            return true;
        }
        self.log.live[usize::from(half)]
            .iter()
            .all(|(id, generation)| match self.members.get(id) {
                None => true,
                Some(member) => match &member.engine {
                    Some(engine) => {
                        engine.committed_cp() >= *generation || engine.mount_error().is_some()
                    }
                    None => true,
                },
            })
    }

    /// An aggregate with uncommitted records in the inactive half and no CP
    /// running starts one, so that the half can be reset.
    fn start_cps_holding_up(&mut self, half: u8) {
        let now = self.now;
        for (id, &generation) in &self.log.live[usize::from(half)] {
            let Some(engine) = self.members.get_mut(id).and_then(|m| m.engine.as_mut()) else {
                continue;
            };
            if engine.committed_cp() < generation && !engine.cp_running() {
                engine.start_cp_now(now, CpReason::NvlogFull);
            }
        }
    }

    /// Follows an aggregate's engine into its node state: online once it
    /// has mounted, failed once it cannot go on, offline once a requested
    /// offline has committed everything.
    fn update_state(&mut self, id: AggrId) {
        let quiescent = self.members[&id].state == AggrState::GoingOffline
            && self.members[&id].engine.is_some()
            && self.quiescent(id);
        let member = self.members.get_mut(&id).expect("a member");
        let Some(engine) = member.engine.as_ref() else {
            return;
        };
        let failure = engine
            .mount_error()
            .or(engine.offline_reason())
            .map(str::to_string);
        if let Some(reason) = failure {
            let mounting = member.state == AggrState::Mounting;
            member.state = AggrState::Failed(reason);
            if mounting {
                self.end_mount_when_all_mounted();
            }
            return;
        }
        match member.state {
            AggrState::Mounting if engine.is_online() && engine.aggregate_id() != id => {
                member.state = AggrState::Failed(format!(
                    "its disks hold aggregate {} ({}), not aggregate {}",
                    engine.aggregate_id().0,
                    engine.aggregate_name(),
                    id.0
                ));
                self.end_mount_when_all_mounted();
            }
            AggrState::Mounting if engine.is_online() && !engine.cp_running() => {
                member.name = engine.aggregate_name().to_string();
                let recorded_offline = engine.marked_offline();
                if recorded_offline && member.bringing_online {
                    // Online once a superblock no longer records it offline.
                    let now = self.now;
                    let engine = member.engine.as_mut().expect("looked at");
                    engine.mark_offline(false);
                    engine.start_cp_now(now, CpReason::Sync);
                    return;
                }
                member.bringing_online = false;
                member.state = match recorded_offline {
                    // Its disks say the administrator took it offline: it
                    // mounted (and replayed) to commit everything, and goes
                    // offline again.
                    true => AggrState::GoingOffline,
                    false => AggrState::Online,
                };
                self.end_mount_when_all_mounted();
            }
            AggrState::GoingOffline if quiescent && engine.offline_committed() => {
                member.engine = None;
                member.state = AggrState::Offline;
            }
            AggrState::GoingOffline if quiescent => {
                // The CP it took last had written its superblock before the
                // offline was marked: one more records it.
                let now = self.now;
                let engine = member.engine.as_mut().expect("looked at");
                engine.start_cp_now(now, CpReason::Sync);
            }
            _ => {}
        }
    }

    /// Whether aggregate `id` has committed everything and has nothing out.
    fn quiescent(&self, id: AggrId) -> bool {
        let engine = self.aggregate(id).expect("an engine");
        let busy = engine.cp_running() || engine.has_uncommitted();
        let io_out = self
            .routes
            .iter()
            .any(|(_, route)| matches!(route, Route::Aggregate(a, _) if *a == id));
        let requests_out = self.passed.iter().any(|(part, _)| part.0 == id);
        let log_pinned = self.log.live.iter().any(|live| {
            live.get(&id)
                .is_some_and(|generation| engine.committed_cp() < *generation)
        });
        !busy && !io_out && !requests_out && !log_pinned
    }

    /// The mount ends when every aggregate has mounted or failed: both
    /// halves are reset and the node takes requests.
    fn end_mount_when_all_mounted(&mut self) {
        let settled = self
            .members
            .values()
            .all(|m| !matches!(m.state, AggrState::Mounting));
        if !(self.log.held_for_mount && settled) {
            return;
        }
        self.log.held_for_mount = false;
        for half in [self.log.other(), self.log.active] {
            self.log.clear(half);
            self.log_op(Route::Reset, IoOp::NvlogReset { half });
        }
    }

    /// Checks every serving aggregate's invariants.
    pub fn check_invariants(&self) -> Result<(), String> {
        for (id, engine) in self.engines() {
            if engine.is_online() {
                engine
                    .check_invariants()
                    .map_err(|e| format!("aggregate {}: {e}", id.0))?;
            }
        }
        Ok(())
    }
}

impl Node<Bytes> {
    /// Mounts a node's aggregates from their disks (`layouts`, each with
    /// the id the driver knows it by) and the NVLog halves' contents. Each
    /// aggregate replays its own records; the node takes requests once
    /// every one has mounted or failed ([`Node::aggregates`] says which).
    pub fn mount(
        options: Options,
        now: Instant,
        layouts: Vec<(AggrId, Layout)>,
        nvlog: [&[u8]; 2],
    ) -> Node {
        let mut node = Node::new(options, now);
        node.log.held_for_mount = true;
        for (id, layout) in layouts {
            let engine = Filer::mount(layout.clone(), node.options.clone(), now, nvlog);
            let name = format!("aggregate {}", id.0);
            node.members.insert(id, Member::new(&name, layout, engine));
            node.settle(id);
        }
        node.end_mount_when_all_mounted();
        node.share_cache();
        node
    }

    /// Brings an offline aggregate back: it mounts from its disks (the
    /// node's log holds nothing of it: it went offline with everything
    /// committed).
    pub fn online_aggregate(&mut self, now: Instant, id: AggrId) -> Result<(), AggrError> {
        self.now = now;
        let member = self.members.get_mut(&id).ok_or(AggrError::NotFound)?;
        if member.state != AggrState::Offline {
            return Err(member.wrong_state("it must be offline"));
        }
        let engine = Filer::mount(member.layout.clone(), self.options.clone(), now, [&[], &[]]);
        member.engine = Some(engine);
        self.flash_forget(id, None);
        let member = self.members.get_mut(&id).expect("looked up");
        member.state = AggrState::Mounting;
        member.bringing_online = true;
        member.last_half = None;
        member.uses_seen = 0;
        self.share_cache();
        self.settle(id);
        Ok(())
    }
}

impl<P: Payload> Member<P> {
    fn new(name: &str, layout: Layout, engine: Filer<P>) -> Member<P> {
        Member {
            name: name.to_string(),
            layout,
            engine: Some(engine),
            state: AggrState::Mounting,
            last_half: None,
            cp_seen: false,
            committed_seen: CpCount::default(),
            uses_seen: 0,
            bringing_online: false,
        }
    }

    fn state_word(&self) -> &'static str {
        match self.state {
            AggrState::Mounting => "mounting",
            AggrState::Online => "online",
            AggrState::GoingOffline => "going offline",
            AggrState::Offline => "offline",
            AggrState::Failed(_) => "failed",
        }
    }

    fn wrong_state(&self, needed: &'static str) -> AggrError {
        AggrError::WrongState {
            name: self.name.clone(),
            state: self.state_word(),
            needed,
        }
    }
}

/// The node id of aggregate `aggregate`'s volume `volume`.
pub fn global_volume(aggregate: AggrId, volume: VolumeId) -> VolumeId {
    VolumeId(aggregate.0 << VOLUME_BITS | volume.0)
}

/// The aggregate of a node volume id, and the volume's id there.
pub fn split_volume(volume: VolumeId) -> (AggrId, VolumeId) {
    let local = volume.0 & ((1 << VOLUME_BITS) - 1);
    (AggrId(volume.0 >> VOLUME_BITS), VolumeId(local))
}

fn global_lun(aggregate: AggrId, lun: LunId) -> LunId {
    LunId {
        volume: global_volume(aggregate, lun.volume),
        file: lun.file,
    }
}

/// A reply's content with node-wide volume ids.
fn globalize<D>(aggregate: AggrId, data: ReplyData<D>) -> ReplyData<D> {
    match data {
        ReplyData::Volume(volume) => ReplyData::Volume(global_volume(aggregate, volume)),
        ReplyData::Lun(lun) => ReplyData::Lun(global_lun(aggregate, lun)),
        other => other,
    }
}
