//! The host's side of a run: the workers, the I/Os they have in flight, and,
//! for an offered load, the I/Os that have arrived and wait for room.
//!
//! In a closed loop every worker keeps its outstanding I/Os in flight: the
//! run submits them all at time zero and each completion's worker submits
//! its next at once, so the array's speed sets the rate. In an open loop
//! (an offered load) I/Os arrive on their own schedule ([`Arrivals`]),
//! each handed to the next worker in turn, which draws it from its stream
//! when it is submitted; at most `workers × outstanding` are in flight, as a
//! host adapter's queue bounds them, and the rest wait in arrival order. An
//! offered I/O's latency runs from its arrival, its wait at the host
//! included: what an application that issued it would see.

use std::collections::VecDeque;

use wafer_core::fixed_map::FixedMap;
use wafer_core::units::Instant;

use crate::array::{Array, HostCompletion, HostOp};
use crate::workload::{Arrivals, WorkerStream};

/// Most I/Os an open loop lets wait at the host before the run gives up:
/// an offered load this far beyond what the array answers only grows.
pub const WAITING_MAX: usize = 1 << 22;

/// A host I/O in flight: its worker, what it moves and when it arrived.
#[derive(Clone, Copy, Debug)]
pub struct InFlight {
    /// The worker that drew it.
    pub worker: usize,
    /// Read or write.
    pub op: HostOp,
    /// Bytes.
    pub length: u64,
    /// When it arrived (in a closed loop, when it was submitted).
    pub arrived: Instant,
    /// The LUN its first byte lies in, by index in address order.
    pub lun: usize,
}

/// An open loop's arrivals and the I/Os waiting for room.
struct OpenLoop {
    arrivals: Arrivals,
    arrived: u64,
    depth: usize,
    /// When each waiting I/O arrived, and its worker.
    waiting: VecDeque<(Instant, usize)>,
}

/// The workers' side of one array's run.
pub struct Host {
    streams: Vec<WorkerStream>,
    /// I/Os each worker keeps in flight (in an open loop, its share of the
    /// host's queue).
    depths: Vec<u32>,
    /// Where each LUN ends in the address space, in address order.
    lun_ends: Vec<u64>,
    in_flight: FixedMap<u64, InFlight>,
    next_id: u64,
    open: Option<OpenLoop>,
}

impl Host {
    /// The host of `streams` over LUNs of `lun_bytes` (end to end), worker
    /// `i` keeping `depths[i]` I/Os in flight (closed loop), or, with
    /// `arrivals`, at most their sum in all (open loop).
    pub fn new(
        streams: Vec<WorkerStream>,
        depths: Vec<u32>,
        lun_bytes: &[u64],
        arrivals: Option<Arrivals>,
    ) -> Host {
        assert_eq!(streams.len(), depths.len(), "a depth per worker");
        let depth = depths.iter().map(|&depth| depth as usize).sum();
        let lun_ends = (lun_bytes.iter())
            .scan(0, |end, &bytes| {
                *end += bytes;
                Some(*end)
            })
            .collect();
        Host {
            streams,
            depths,
            lun_ends,
            in_flight: FixedMap::default(),
            next_id: 0,
            open: arrivals.map(|arrivals| OpenLoop {
                arrivals,
                arrived: 0,
                depth,
                waiting: VecDeque::new(),
            }),
        }
    }

    /// I/Os in flight.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// Whether I/Os arrive on their own (an open loop).
    pub fn is_open(&self) -> bool {
        self.open.is_some()
    }

    /// I/Os that have arrived and wait for room.
    pub fn waiting(&self) -> usize {
        self.open.as_ref().map_or(0, |open| open.waiting.len())
    }

    /// A closed loop's start: every worker's outstanding I/Os at time zero.
    pub fn start(&mut self, array: &mut dyn Array) {
        if self.is_open() {
            return;
        }
        for worker in 0..self.streams.len() {
            for _ in 0..self.depths[worker] {
                self.submit(array, Instant(0), worker, Instant(0));
            }
        }
    }

    /// When the next I/O arrives, if the loop is open and it comes before
    /// `end`.
    pub fn next_arrival(&self, end: Instant) -> Option<Instant> {
        let next = self.open.as_ref()?.arrivals.next();
        (next < end).then_some(next)
    }

    /// Takes the I/Os that arrive at `now` and submits those there is room
    /// for; returns how many arrived.
    pub fn arrive(&mut self, array: &mut dyn Array, now: Instant) -> u64 {
        let workers = self.streams.len() as u64;
        let Some(open) = self.open.as_mut() else {
            return 0;
        };
        let mut count = 0;
        while open.arrivals.next() == now {
            let worker = (open.arrived % workers) as usize;
            open.waiting.push_back((now, worker));
            open.arrived += 1;
            open.arrivals.arrived();
            count += 1;
        }
        self.dispatch(array, now);
        count
    }

    /// An I/O finished at `now`: returns it, with its completion timed from
    /// its arrival, and (before `end`) puts the next I/O in its place.
    pub fn finished(
        &mut self,
        array: &mut dyn Array,
        now: Instant,
        completion: HostCompletion,
        end: Instant,
    ) -> (InFlight, HostCompletion) {
        let io = (self.in_flight.remove(&completion.id)).expect("the array answers its I/Os");
        let timed = match self.open {
            Some(_) => HostCompletion {
                submitted_at: io.arrived,
                ..completion
            },
            None => completion,
        };
        if now < end {
            match self.open {
                Some(_) => self.dispatch(array, now),
                None => self.submit(array, now, io.worker, now),
            }
        }
        (io, timed)
    }

    /// Submits waiting I/Os while there is room.
    fn dispatch(&mut self, array: &mut dyn Array, now: Instant) {
        while let Some(open) = self.open.as_mut()
            && self.in_flight.len() < open.depth
            && let Some((arrived, worker)) = open.waiting.pop_front()
        {
            self.submit(array, now, worker, arrived);
        }
    }

    /// Submits `worker`'s next I/O at `now`.
    fn submit(&mut self, array: &mut dyn Array, now: Instant, worker: usize, arrived: Instant) {
        self.next_id += 1;
        let io = self.streams[worker].next_io(self.next_id, now);
        let in_flight = InFlight {
            worker,
            op: io.op,
            length: io.length,
            arrived,
            lun: self.lun_ends.partition_point(|&end| end <= io.offset),
        };
        self.in_flight.insert(io.id, in_flight);
        array.submit(now, io);
    }
}
