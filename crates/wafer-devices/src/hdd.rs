//! A hard disk: command queue, arm, spindle, zoned media and read-ahead buffer.
//!
//! The structure is DiskSim's (device-models.md §0, §1): a request costs a
//! fixed command overhead, then for each track it touches a seek (or head
//! switch), a rotational wait computed from the spindle's actual phase, and the
//! media transfer at that zone's rate. What the model guarantees:
//!
//! - **Queue.** Requests wait in the drive's command queue. When the arm is
//!   free the drive picks the next one from the first `queue_depth_max`
//!   (tagged or native command queueing): by default the one with the shortest
//!   positioning time, seek plus rotational wait, from where the arm is
//!   (SPTF); FCFS and the elevator (LOOK by cylinder) are the alternatives.
//!   Requests submitted at one instant are considered together. When a
//!   request finishes, the drive picks the next at once, before the host can
//!   answer the completion with a new request: a closed loop at depth 2 leaves
//!   it no choice, and reordering starts to pay at depth 3. (The research's
//!   own simulation, device-models.md §1.11, lets the replacement compete,
//!   one reason its figures run a little higher.)
//! - **Read-ahead.** After a read from the media the drive keeps reading the
//!   following blocks into a buffer segment (up to `read_ahead` blocks) for as
//!   long as nothing else needs the arm; the next queued request preempts it
//!   at a block boundary. A read that starts inside that stream is served from
//!   the buffer: at once if the data is there, or as soon as the stream reaches
//!   it, and the stream is pushed on to stay `read_ahead` blocks ahead. A
//!   sequential reader thus sees the media rate less track-switch skew, as
//!   long as its requests are large enough for the command overhead to keep
//!   up (64 KiB at queue depth 1). A read wholly inside another segment is a
//!   hit too. Hits cost the command overhead and the interface transfer, and
//!   do not wait for the arm. Reads already queued when a media read ends
//!   are weighed against the new stream first: those that continue it
//!   exactly (from the block after the last one it serves) are served from
//!   it like a read arriving then, so a sequential reader with
//!   several commands in flight streams as one with one does, where a drive
//!   that repositioned for each would lose most of a revolution per command
//!   (DiskSim's `Buffer continuous read` 3-4 with hits on queued requests,
//!   the setting of every validated drive, device-models.md §1.6).
//! - **Writes** go to the media before they complete (write-through), as
//!   array controllers configure enterprise drives. With the write-back
//!   option a write is acknowledged once in the buffer (up to half of it may
//!   be dirty) and written out later like any queued request.
//! - **Time.** Everything is integer nanoseconds. Once the model is built
//!   the only floating point is the seek curve, whose one square root IEEE
//!   754 rounds exactly. No randomness: the same submissions give the same
//!   completions.
//!
//! Not modelled: bus contention between drives, defects and sparing,
//! zero-latency ("read any free blocks") reads, SPTF aging (so a request can
//! starve at deep queues, as on a real drive without aging), the interface
//! time of a media read (it overlaps the media transfer: every modelled
//! interface is faster than its media).

pub mod cache;
pub mod geometry;
pub mod seek;

use std::collections::BTreeMap;
use std::fmt;

use wafer_core::units::{Duration, Instant};

use self::cache::SegmentCache;
use self::geometry::{Geometry, GeometryInputs, Location, blocks_per_track};
use self::seek::{ArmPosition, Mechanics, sequential_switch_ns};
use crate::params::HddSpec;
use crate::{
    BLOCK_BYTES, Completion, Device, DeviceRequest, Op, RequestError, Service, block_transfer_ns,
    check_call_order, check_request, ms_to_ns, sooner,
};

/// How the drive picks its next request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SchedulingPolicy {
    /// In arrival order.
    Fcfs,
    /// LOOK: sweep across the cylinders and back, nearest first in the
    /// direction of travel.
    Elevator,
    /// Shortest positioning time (seek plus rotational wait) first: what
    /// tagged-queueing drives do.
    #[default]
    Sptf,
}

/// How the drive is configured for a run: mode-page settings, not physics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HddOptions {
    /// Queue scheduling.
    pub policy: SchedulingPolicy,
    /// Acknowledge writes from the buffer (the SCSI WCE bit). Off by default:
    /// array controllers turn it off (device-models.md §1.6).
    pub write_back: bool,
}

/// One drive type: its geometry, arm and electronics, from `drives.toml`.
#[derive(Clone, Debug, PartialEq)]
pub struct HddModel {
    name: String,
    description: String,
    rpm: u32,
    geometry: Geometry,
    mechanics: Mechanics,
    command_overhead_ns: u64,
    interface_ns_per_block: u64,
    queue_depth_max: usize,
    cache_segments: u32,
    segment_blocks: u64,
    read_ahead_blocks: u64,
}

impl HddModel {
    /// The model of a drive whose parameters have passed the checks in
    /// [`super::params`].
    pub fn new(name: &str, spec: &HddSpec) -> HddModel {
        let (track_switch_ns, cylinder_switch_ns) =
            sequential_switch_ns(&spec.seek_read, &spec.seek_write, spec.head_switch_ms);
        let geometry = Geometry::new(&GeometryInputs {
            capacity_blocks: (spec.capacity_gb * 1e9 / BLOCK_BYTES as f64) as u64,
            rpm: spec.rpm,
            surfaces: spec.surfaces,
            zones: spec.zones,
            outer_blocks_per_track: blocks_per_track(spec.media_rate_outer_mb_s, spec.rpm),
            inner_blocks_per_track: blocks_per_track(spec.media_rate_inner_mb_s, spec.rpm),
            track_switch_ns,
            cylinder_switch_ns,
        });
        let mechanics = Mechanics::new(
            &spec.seek_read,
            &spec.seek_write,
            spec.head_switch_ms,
            geometry.cylinders(),
        );
        let kib_to_blocks = |kib: u32| u64::from(kib) * 1024 / BLOCK_BYTES;
        HddModel {
            name: name.to_string(),
            description: spec.model.clone(),
            rpm: spec.rpm,
            geometry,
            mechanics,
            command_overhead_ns: ms_to_ns(spec.command_overhead_ms),
            interface_ns_per_block: block_transfer_ns(spec.interface_mb_s),
            queue_depth_max: spec.queue_depth_max as usize,
            cache_segments: spec.cache_segments,
            segment_blocks: kib_to_blocks(spec.cache_segment_kib),
            read_ahead_blocks: kib_to_blocks(spec.read_ahead_kib),
        }
    }

    /// The drive's name in `drives.toml`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What the drive is modelled on.
    pub fn description(&self) -> &str {
        &self.description
    }

    /// Spindle speed.
    pub fn rpm(&self) -> u32 {
        self.rpm
    }

    /// Layout and spindle.
    pub fn geometry(&self) -> &Geometry {
        &self.geometry
    }

    /// Seek curves and head switches.
    pub fn mechanics(&self) -> &Mechanics {
        &self.mechanics
    }

    /// Fixed controller time per command.
    pub fn command_overhead(&self) -> Duration {
        Duration(self.command_overhead_ns)
    }

    /// Requests the drive reorders among.
    pub fn queue_depth_max(&self) -> usize {
        self.queue_depth_max
    }

    /// Interface time for `blocks` blocks.
    fn interface_ns(&self, blocks: u64) -> u64 {
        blocks * self.interface_ns_per_block
    }

    /// Blocks that may wait dirty in the buffer with write-back on: half of it,
    /// as DiskSim's limit on write segments keeps room for reads.
    fn write_back_limit_blocks(&self) -> u64 {
        u64::from(self.cache_segments) * self.segment_blocks / 2
    }
}

impl fmt::Display for HddModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let geometry = &self.geometry;
        let zones = geometry.zones();
        let (outer, inner) = (&zones[0], &zones[zones.len() - 1]);
        write!(
            f,
            "{}: {} rpm, {} surfaces x {} cylinders, \
             {} zones of {}-{} blocks/track ({:.0}-{:.0} MB/s)",
            self.description,
            self.rpm,
            geometry.surfaces(),
            geometry.cylinders(),
            zones.len(),
            outer.blocks_per_track,
            inner.blocks_per_track,
            geometry.media_rate_mb_s(outer),
            geometry.media_rate_mb_s(inner),
        )
    }
}

/// Who a queued media access is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Origin {
    /// A host request: completes to the host.
    Host,
    /// Write-back data going to the media: completes silently.
    Destage,
}

/// A request waiting for the arm.
#[derive(Clone, Copy, Debug)]
struct Queued {
    request: DeviceRequest,
    origin: Origin,
    submitted_ns: u64,
    /// Where the request's first block is: worked out once, as the
    /// scheduler weighs the request at every dispatch while it waits.
    place: Location,
}

/// The media access under way.
#[derive(Clone, Copy, Debug)]
struct MediaOp {
    queued: Queued,
    finished_ns: u64,
    service: Service,
    arm: ArmPosition,
}

/// The cost of one media access, track by track.
#[derive(Clone, Copy, Debug, Default)]
struct Access {
    end_ns: u64,
    arm: ArmPosition,
    seek_ns: u64,
    seek_cylinders: u64,
    rotation_ns: u64,
    transfer_ns: u64,
}

/// One track's worth of a read-ahead stream.
#[derive(Clone, Copy, Debug)]
struct Chunk {
    blocks: u64,
    slot: u32,
    blocks_per_track: u32,
    start_ns: u64,
    end_ns: u64,
    arm: ArmPosition,
}

/// The read-ahead stream: the arm reading on after a media read while nothing
/// else needs it. Its schedule is fixed by where and when it started; it is
/// worked out lazily, a track at a time.
#[derive(Clone, Copy, Debug)]
struct ReadAhead {
    /// Buffer segment the stream fills.
    segment: usize,
    /// First block of the run in the segment.
    start: u64,
    /// Next block to read.
    cursor: u64,
    /// The stream stops before this block.
    limit: u64,
    /// When the block before `cursor` was read (or the parked head was free).
    ready_ns: u64,
    /// Track of the block before `cursor`.
    arm: ArmPosition,
    /// Blocks before this are promised to hits: the stream may not be
    /// preempted before reading them.
    committed: u64,
    /// When the committed blocks will have been read.
    committed_ns: u64,
}

impl ReadAhead {
    /// The next track's worth of the stream, or `None` at the limit.
    fn next_chunk(&self, model: &HddModel) -> Option<Chunk> {
        if self.cursor >= self.limit {
            return None;
        }
        let (geometry, mechanics) = (&model.geometry, &model.mechanics);
        let place = geometry.locate(self.cursor);
        let arrive_ns = self.ready_ns + mechanics.positioning_ns(Op::Read, self.arm, place.arm);
        let start_ns =
            arrive_ns + geometry.rotational_wait_ns(arrive_ns, place.slot, place.blocks_per_track);
        let blocks = (self.limit - self.cursor).min(u64::from(place.blocks_left_on_track));
        let end_ns =
            start_ns + geometry.transfer_ns(place.slot, blocks as u32, place.blocks_per_track);
        Some(Chunk {
            blocks,
            slot: place.slot,
            blocks_per_track: place.blocks_per_track,
            start_ns,
            end_ns,
            arm: place.arm,
        })
    }

    fn take(&mut self, chunk: &Chunk) {
        self.cursor += chunk.blocks;
        self.ready_ns = chunk.end_ns;
        self.arm = chunk.arm;
    }

    /// Moves the stream's state on over the tracks it finishes by `now`. A
    /// stream parked at its limit idles until `now`.
    fn catch_up(&mut self, model: &HddModel, now_ns: u64) {
        while let Some(chunk) = self.next_chunk(model) {
            if chunk.end_ns > now_ns {
                return;
            }
            self.take(&chunk);
        }
        self.ready_ns = self.ready_ns.max(now_ns);
    }

    /// When the stream will have read the blocks before `end` (`end` at most
    /// the limit).
    fn read_by_ns(&self, model: &HddModel, end: u64) -> u64 {
        debug_assert!(end <= self.limit);
        let mut probe = *self;
        while probe.cursor < end {
            let chunk = probe.next_chunk(model).expect("end is within the limit");
            let wanted = end - probe.cursor;
            if wanted <= chunk.blocks {
                let geometry = &model.geometry;
                let part_ns =
                    geometry.transfer_ns(chunk.slot, wanted as u32, chunk.blocks_per_track);
                return chunk.start_ns + part_ns;
            }
            probe.take(&chunk);
        }
        probe.ready_ns
    }

    /// Stops the stream at `now`: the blocks read by then, and the track the
    /// head is on.
    fn stop(mut self, model: &HddModel, now_ns: u64) -> (u64, ArmPosition) {
        while let Some(chunk) = self.next_chunk(model) {
            if chunk.end_ns <= now_ns {
                self.take(&chunk);
                continue;
            }
            if chunk.start_ns < now_ns {
                let passed = model.geometry.slots_passed(
                    chunk.slot,
                    now_ns - chunk.start_ns,
                    chunk.blocks_per_track,
                );
                self.cursor += passed.min(chunk.blocks);
                self.arm = chunk.arm;
            }
            break;
        }
        (self.cursor, self.arm)
    }
}

/// A modelled hard disk.
#[derive(Clone, Debug)]
pub struct Hdd {
    model: HddModel,
    options: HddOptions,
    now_ns: u64,
    queue: Vec<Queued>,
    arm: ArmPosition,
    arm_free_ns: u64,
    media: Option<MediaOp>,
    read_ahead: Option<ReadAhead>,
    cache: SegmentCache,
    dirty_blocks: u64,
    /// Requests the controller answers without the arm (hits, write-back
    /// acknowledgements), by finishing time and then the order in which
    /// they were answered (several may finish at one instant).
    answers: BTreeMap<(u64, u64), Completion>,
    answered: u64,
    sweep_inward: bool,
}

impl Hdd {
    /// A drive of `model`, idle, its arm on the outermost cylinder at time 0.
    pub fn new(model: HddModel, options: HddOptions) -> Hdd {
        let cache = SegmentCache::new(model.cache_segments, model.segment_blocks);
        Hdd {
            model,
            options,
            now_ns: 0,
            queue: Vec::new(),
            arm: ArmPosition::default(),
            arm_free_ns: 0,
            media: None,
            read_ahead: None,
            cache,
            dirty_blocks: 0,
            answers: BTreeMap::new(),
            answered: 0,
            sweep_inward: true,
        }
    }

    /// The drive type.
    pub fn model(&self) -> &HddModel {
        &self.model
    }

    /// Answers a request from the controller at `finished_ns`: the command
    /// overhead, then the interface (and for a read-ahead hit, the wait for
    /// the stream), all counted as transfer.
    /// A request taken from the queue at `taken_ns` counts the wait as queue
    /// time.
    fn answer(&mut self, queued: &Queued, taken_ns: u64, finished_ns: u64) {
        let overhead_ns = self.model.command_overhead_ns;
        let queue_ns = taken_ns - queued.submitted_ns;
        let transfer_ns = finished_ns - taken_ns - overhead_ns;
        let completion = Completion {
            id: queued.request.id,
            op: queued.request.op,
            blocks: queued.request.blocks,
            submitted_at: Instant(queued.submitted_ns),
            finished_at: Instant(finished_ns),
            service: Service {
                queue: Duration(queue_ns),
                overhead: Duration(overhead_ns),
                transfer: Duration(transfer_ns),
                cache_hit: true,
                ..Service::default()
            },
        };
        self.answers
            .insert((finished_ns, self.answered), completion);
        self.answered += 1;
    }

    /// Serves a read from the buffer at `now` if it can: from the read-ahead
    /// stream, or from a segment that holds all of it.
    fn read_from_buffer(&mut self, queued: &Queued, now_ns: u64) -> bool {
        let request = queued.request;
        let (start, end) = (request.block, request.end_block());
        let answered_ns =
            now_ns + self.model.command_overhead_ns + self.model.interface_ns(end - start);
        if let Some(mut stream) = self.read_ahead.filter(|s| self.stream_holds(s, start)) {
            stream.catch_up(&self.model, now_ns);
            let ahead = end.saturating_add(self.model.read_ahead_blocks);
            stream.limit = stream
                .limit
                .max(ahead.min(self.model.geometry.capacity_blocks()));
            let read_ns = stream.read_by_ns(&self.model, end);
            stream.committed = stream.committed.max(end);
            stream.committed_ns = stream.committed_ns.max(read_ns);
            self.read_ahead = Some(stream);
            let finished_ns = answered_ns.max(read_ns + self.model.interface_ns(1));
            self.answer(queued, now_ns, finished_ns);
            return true;
        }
        if self.cache.lookup(start, end) {
            self.answer(queued, now_ns, answered_ns);
            return true;
        }
        false
    }

    /// True if a read starting at `block` continues the stream: it starts in
    /// the stream's buffered run or right at its limit.
    fn stream_holds(&self, stream: &ReadAhead, block: u64) -> bool {
        let buffered_from = stream
            .start
            .max(stream.limit.saturating_sub(self.model.segment_blocks));
        buffered_from <= block && block <= stream.limit
    }

    /// Ends the read-ahead stream at `at_ns`, or later if it has reads
    /// promised: what it read stays in its segment, and the arm is free where
    /// the stream left it.
    fn end_read_ahead(&mut self, at_ns: u64) {
        if let Some(stream) = self.read_ahead.take() {
            let stop_ns = at_ns.max(stream.committed_ns);
            let (cursor, arm) = stream.stop(&self.model, stop_ns);
            self.cache.set_run(stream.segment, stream.start, cursor);
            self.arm = arm;
            self.arm_free_ns = self.arm_free_ns.max(stop_ns);
        }
    }

    /// Takes a write: invalidates what the buffer held of its blocks, then
    /// acknowledges it from the buffer (write-back) or queues it for the media.
    fn accept_write(&mut self, queued: Queued) {
        let (start, end) = (queued.request.block, queued.request.end_block());
        let overlaps_stream = self
            .read_ahead
            .is_some_and(|s| s.start < end && start < s.limit);
        if overlaps_stream {
            self.end_read_ahead(queued.submitted_ns);
        }
        self.cache.invalidate(start, end);
        let blocks = end - start;
        let fits = self.dirty_blocks + blocks <= self.model.write_back_limit_blocks();
        if self.options.write_back && fits {
            self.dirty_blocks += blocks;
            if let Some(segment) = self.read_ahead.map(|s| s.segment) {
                self.cache.touch(segment);
            }
            self.cache.insert(start, end);
            let overhead_ns = self.model.command_overhead_ns;
            let answered_ns = queued.submitted_ns + overhead_ns + self.model.interface_ns(blocks);
            self.answer(&queued, queued.submitted_ns, answered_ns);
            self.queue.push(Queued {
                origin: Origin::Destage,
                ..queued
            });
        } else {
            self.queue.push(queued);
        }
    }

    /// When the arm takes its next request from the queue, if it is idle and
    /// the queue is not empty.
    fn dispatch_ns(&self) -> Option<u64> {
        if self.media.is_some() {
            return None;
        }
        let first = self.queue.first()?;
        let promised_ns = self.read_ahead.map_or(0, |s| s.committed_ns);
        Some(first.submitted_ns.max(self.arm_free_ns).max(promised_ns))
    }

    /// Starts the next media access at `now`.
    fn dispatch(&mut self, now_ns: u64) {
        self.end_read_ahead(now_ns);
        let window = self.queue.len().min(self.model.queue_depth_max);
        let index = self.pick(now_ns, window);
        let queued = self.queue.remove(index);
        let overhead_ns = self.model.command_overhead_ns;
        let access = self.access(now_ns + overhead_ns, &queued.request);
        let service = Service {
            queue: Duration(now_ns - queued.submitted_ns),
            overhead: Duration(overhead_ns),
            seek: Duration(access.seek_ns),
            seek_cylinders: access.seek_cylinders,
            rotation: Duration(access.rotation_ns),
            transfer: Duration(access.transfer_ns),
            cache_hit: false,
        };
        self.media = Some(MediaOp {
            queued,
            finished_ns: access.end_ns,
            service,
            arm: access.arm,
        });
    }

    /// The index of the next request among the first `window` queued.
    fn pick(&mut self, now_ns: u64, window: usize) -> usize {
        debug_assert!(window > 0);
        match self.options.policy {
            SchedulingPolicy::Fcfs => 0,
            SchedulingPolicy::Sptf => {
                let start_ns = now_ns + self.model.command_overhead_ns;
                (0..window)
                    .min_by_key(|&i| (self.positioning_ns(start_ns, &self.queue[i]), i))
                    .expect("the window is not empty")
            }
            SchedulingPolicy::Elevator => self.pick_elevator(window),
        }
    }

    /// Seek plus rotational wait to reach the first block of `queued` from the
    /// arm's position, starting at `start_ns`.
    fn positioning_ns(&self, start_ns: u64, queued: &Queued) -> u64 {
        let place = queued.place;
        let seek_ns = self
            .model
            .mechanics
            .positioning_ns(queued.request.op, self.arm, place.arm);
        let arrive_ns = start_ns + seek_ns;
        seek_ns
            + self
                .model
                .geometry
                .rotational_wait_ns(arrive_ns, place.slot, place.blocks_per_track)
    }

    /// LOOK: the nearest request at or beyond the arm in the direction of
    /// travel; the sweep turns when there is none.
    fn pick_elevator(&mut self, window: usize) -> usize {
        for _ in 0..2 {
            let here = self.arm.cylinder;
            let inward = self.sweep_inward;
            let nearest = (0..window)
                .filter_map(|i| {
                    let queued = &self.queue[i];
                    let (block, cylinder) = (queued.request.block, queued.place.arm.cylinder);
                    let ahead = if inward {
                        cylinder >= here
                    } else {
                        cylinder <= here
                    };
                    ahead.then_some((cylinder.abs_diff(here), block, i))
                })
                .min();
            if let Some((_, _, index)) = nearest {
                return index;
            }
            self.sweep_inward = !self.sweep_inward;
        }
        unreachable!("one direction holds every queued request")
    }

    /// The media access for `request` starting at `start_ns` from the arm's
    /// position: per track, position, wait for the block, transfer.
    fn access(&self, start_ns: u64, request: &DeviceRequest) -> Access {
        let geometry = &self.model.geometry;
        let mut access = Access {
            end_ns: start_ns,
            arm: self.arm,
            ..Access::default()
        };
        let (mut block, end) = (request.block, request.end_block());
        while block < end {
            let place = geometry.locate(block);
            let seek_ns = self
                .model
                .mechanics
                .positioning_ns(request.op, access.arm, place.arm);
            let arrive_ns = access.end_ns + seek_ns;
            let wait_ns =
                geometry.rotational_wait_ns(arrive_ns, place.slot, place.blocks_per_track);
            let blocks = (end - block).min(u64::from(place.blocks_left_on_track));
            let transfer_ns =
                geometry.transfer_ns(place.slot, blocks as u32, place.blocks_per_track);
            access.seek_ns += seek_ns;
            access.seek_cylinders += access.arm.cylinder.abs_diff(place.arm.cylinder);
            access.rotation_ns += wait_ns;
            access.transfer_ns += transfer_ns;
            access.end_ns = arrive_ns + wait_ns + transfer_ns;
            access.arm = place.arm;
            block += blocks;
        }
        access
    }

    /// Ends the media access under way: reports it, and after a host read
    /// keeps the data and starts reading ahead.
    fn finish_media(&mut self, completions: &mut Vec<Completion>) {
        let op = self.media.take().expect("a media access is under way");
        self.arm = op.arm;
        self.arm_free_ns = op.finished_ns;
        let request = op.queued.request;
        match op.queued.origin {
            Origin::Destage => self.dirty_blocks -= u64::from(request.blocks),
            Origin::Host => completions.push(Completion {
                id: request.id,
                op: request.op,
                blocks: request.blocks,
                submitted_at: Instant(op.queued.submitted_ns),
                finished_at: Instant(op.finished_ns),
                service: op.service,
            }),
        }
        if op.queued.origin == Origin::Host && request.op == Op::Read {
            self.start_read_ahead(&request, op.finished_ns);
            self.continue_queued_reads(op.finished_ns);
        }
    }

    /// Serves from the new read-ahead stream the queued reads that continue
    /// it, each starting where the previous one it served ends: the head is
    /// already on their first block, so they need no positioning at all,
    /// less than any other queued request, and the drive reads on instead of
    /// repositioning for them (DiskSim's `Buffer continuous read` with hits
    /// on queued requests, device-models.md §1.6). Each one served pushes
    /// the stream on, so a chain of queued reads streams at the media rate.
    /// A queued read further ahead in the stream waits its turn, as SPTF
    /// weighs it.
    fn continue_queued_reads(&mut self, now_ns: u64) {
        let mut index = 0;
        while index < self.queue.len() {
            let queued = self.queue[index];
            let continues = queued.origin == Origin::Host
                && queued.request.op == Op::Read
                && self
                    .read_ahead
                    .is_some_and(|s| s.committed == queued.request.block);
            if continues && self.read_from_buffer(&queued, now_ns) {
                self.queue.remove(index);
                index = 0;
            } else {
                index += 1;
            }
        }
    }

    /// Buffers a read's data and starts the stream after it.
    fn start_read_ahead(&mut self, request: &DeviceRequest, now_ns: u64) {
        let end = request.end_block();
        let segment = self.cache.insert(request.block, end);
        let limit = end
            .saturating_add(self.model.read_ahead_blocks)
            .min(self.model.geometry.capacity_blocks());
        if limit > end {
            self.read_ahead = Some(ReadAhead {
                segment,
                start: request.block,
                cursor: end,
                limit,
                ready_ns: now_ns,
                arm: self.arm,
                committed: end,
                committed_ns: now_ns,
            });
        }
    }

    /// The earliest pending event, in nanoseconds.
    fn next_event_ns(&self) -> Option<u64> {
        let answer = self.answers.keys().next().map(|&(at, _)| at);
        let media = self.media.map(|op| op.finished_ns);
        sooner(answer, sooner(media, self.dispatch_ns()))
    }
}

impl Device for Hdd {
    fn capacity_blocks(&self) -> u64 {
        self.model.geometry.capacity_blocks()
    }

    fn submit(&mut self, now: Instant, request: DeviceRequest) -> Result<(), RequestError> {
        check_call_order(Instant(self.now_ns), now, self.next_event());
        check_request(&request, self.capacity_blocks())?;
        self.now_ns = now.0;
        let queued = Queued {
            request,
            origin: Origin::Host,
            submitted_ns: now.0,
            place: self.model.geometry.locate(request.block),
        };
        match request.op {
            Op::Read if self.read_from_buffer(&queued, now.0) => {}
            Op::Read => self.queue.push(queued),
            Op::Write => self.accept_write(queued),
        }
        Ok(())
    }

    fn next_event(&self) -> Option<Instant> {
        self.next_event_ns().map(Instant)
    }

    fn advance(&mut self, now: Instant, completions: &mut Vec<Completion>) {
        assert!(now.0 >= self.now_ns, "device driven backwards in time");
        self.now_ns = now.0;
        while let Some(at_ns) = self.next_event_ns().filter(|&at| at <= now.0) {
            if let Some(entry) = self.answers.first_entry().filter(|e| e.key().0 == at_ns) {
                completions.push(entry.remove());
            } else if self.media.is_some_and(|op| op.finished_ns == at_ns) {
                self.finish_media(completions);
            } else {
                self.dispatch(at_ns);
            }
        }
    }

    fn in_service(&self) -> Option<&DeviceRequest> {
        self.media.as_ref().map(|op| &op.queued.request)
    }
}

#[cfg(test)]
mod tests;
