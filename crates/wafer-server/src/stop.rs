//! Stopping: the one switch every thread that accepts work looks at.
//!
//! When the engine begins a graceful stop it flips the switch: listeners are
//! woken (each registered a waker that connects to its own socket) and close,
//! and every open NBD connection has its read side shut, so its reader stops
//! taking requests while its writer still sends the replies to the requests
//! already in flight. The server then waits, for a bounded time, until every
//! connection has closed.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

use crate::stream::{Stream, Waker};

/// The server's stop switch, with what it must reach when flipped.
#[derive(Default)]
pub(crate) struct StopSignal {
    stopping: AtomicBool,
    wakers: Mutex<Vec<Waker>>,
    connections: Mutex<BTreeMap<u64, Stream>>,
    next_connection: AtomicU64,
}

impl StopSignal {
    /// Whether the server is stopping.
    pub(crate) fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::SeqCst)
    }

    /// Flips the switch (once): wakes the listeners and stops every
    /// connection's reader.
    pub(crate) fn begin(&self) {
        if self.stopping.swap(true, Ordering::SeqCst) {
            return;
        }
        for wake in lock(&self.wakers).iter() {
            wake();
        }
        for stream in lock(&self.connections).values() {
            // A connection already closing may refuse; it stops either way.
            let _ = stream.shutdown(std::net::Shutdown::Read);
        }
    }

    /// Registers a listener's waker.
    pub(crate) fn add_waker(&self, waker: Waker) {
        lock(&self.wakers).push(waker);
    }

    /// Registers an open connection (a clone of its stream), unless the
    /// server is stopping.
    pub(crate) fn register(&self, stream: Stream) -> Option<u64> {
        let mut connections = lock(&self.connections);
        if self.is_stopping() {
            return None;
        }
        let id = self.next_connection.fetch_add(1, Ordering::SeqCst);
        connections.insert(id, stream);
        Some(id)
    }

    /// Forgets a closed connection.
    pub(crate) fn unregister(&self, id: u64) {
        lock(&self.connections).remove(&id);
    }

    /// Connections open now.
    pub(crate) fn connections_open(&self) -> usize {
        lock(&self.connections).len()
    }

    /// Waits until every connection has closed, or `limit` has passed.
    pub(crate) fn wait_for_connections(&self, limit: Duration) {
        let deadline = Instant::now() + limit;
        while self.connections_open() > 0 && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(10));
        }
    }
}

/// A poisoned lock only means another thread panicked, and a panic aborts
/// the server; the data is still usable until then.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
