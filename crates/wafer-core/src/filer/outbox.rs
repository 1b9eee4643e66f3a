//! The filer's side of the sans-I/O contract: the I/Os it has asked for and
//! not yet heard back about, the replies it owes, and the requests it holds.
//!
//! A request is held from `submit` until its reply is polled; at most
//! `Options::max_requests` are, which bounds every queue a request can wait
//! in. An I/O is pending from the moment it is issued (it gets its id then)
//! until its completion arrives, which returns why it was issued.

use std::collections::VecDeque;

use super::api::{Busy, HostError, Io, IoId, IoOp, Reply, ReplyData, RequestId};
use crate::fixed_map::FixedMap;
use crate::payload::Payload;

/// I/Os out, replies owed, requests held, over payload `P`; `T` is what is
/// kept of each pending I/O until it completes.
#[derive(Debug)]
pub(super) struct Outbox<P: Payload, T> {
    io_out: VecDeque<Io<P>>,
    pending: FixedMap<IoId, T>,
    next_io: u64,
    replies: VecDeque<Reply<P::ReadData>>,
    next_request: u64,
    requests_held: usize,
}

impl<P: Payload, T> Default for Outbox<P, T> {
    fn default() -> Outbox<P, T> {
        Outbox {
            io_out: VecDeque::new(),
            pending: FixedMap::default(),
            next_io: 0,
            replies: VecDeque::new(),
            next_request: 0,
            requests_held: 0,
        }
    }
}

impl<P: Payload, T> Outbox<P, T> {
    /// A new request's id, unless `max` are held already.
    pub(super) fn admit(&mut self, max: usize) -> Result<RequestId, Busy> {
        if self.requests_held >= max {
            return Err(Busy::Full(self.requests_held));
        }
        let id = RequestId(self.next_request);
        self.next_request += 1;
        self.requests_held += 1;
        Ok(id)
    }

    /// Issues `op`, keeping `kept` until it completes.
    pub(super) fn issue(&mut self, op: IoOp<P>, kept: T) {
        let id = IoId(self.next_io);
        self.next_io += 1;
        self.pending.insert(id, kept);
        self.io_out.push_back(Io { id, op });
    }

    /// I/O `id` has completed: what was kept of it.
    ///
    /// # Panics
    /// If `id` is not pending (a driver's bug).
    pub(super) fn complete(&mut self, id: IoId) -> T {
        self.pending
            .remove(&id)
            .expect("completion of an I/O that is not pending")
    }

    /// What is kept of pending I/O `id`, if it is pending.
    pub(super) fn kept(&self, id: IoId) -> Option<&T> {
        self.pending.get(&id)
    }

    /// What is kept of pending I/O `id`, to change, if it is pending.
    pub(super) fn kept_mut(&mut self, id: IoId) -> Option<&mut T> {
        self.pending.get_mut(&id)
    }

    /// Whether no I/O is pending.
    pub(super) fn nothing_pending(&self) -> bool {
        self.pending.is_empty()
    }

    /// Owes request `id` its reply.
    pub(super) fn reply(
        &mut self,
        id: RequestId,
        result: Result<ReplyData<P::ReadData>, HostError>,
    ) {
        self.replies.push_back(Reply { id, result });
    }

    /// The next I/O for the driver.
    pub(super) fn poll_io(&mut self) -> Option<Io<P>> {
        self.io_out.pop_front()
    }

    /// The next reply; its request is no longer held.
    pub(super) fn poll_reply(&mut self) -> Option<Reply<P::ReadData>> {
        let reply = self.replies.pop_front()?;
        self.requests_held = (self.requests_held.checked_sub(1))
            .expect("every reply answers a request submitted once");
        Some(reply)
    }
}
