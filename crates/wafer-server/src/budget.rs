//! What one NBD connection may hold in memory, and the server-wide loans
//! beyond it.
//!
//! A request's payload (a write's data, a read's reply) lives in the server
//! from the moment the reader takes the request until the writer has sent the
//! reply, and a client that never reads its replies keeps it there. So each
//! connection has an allowance: [`REQUESTS_IN_FLIGHT_MAX`] requests and
//! [`BYTES_IN_FLIGHT_MAX`] bytes of payload in flight; beyond it the reader
//! waits (and so stops reading the socket) until the writer has sent replies.
//! The reader also stops gathering a write's payload beside a full allowance.
//! A request larger than the allowance (NBD allows 32 MiB) is taken alone,
//! and its excess over the allowance is borrowed from one server-wide pool of
//! [`LOANS_BYTES`] shared by every connection, so clients that never read
//! their 32 MiB reads hold at most the pool between them, beside 8 MiB each:
//! a large request waits for the pool while others hold it, while requests
//! within the allowance never wait for another connection. When the writer
//! can no longer send (the client has gone, or left its replies unread for
//! the idle timeout), the connection is abandoned, and the reader dispatches
//! nothing more.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

/// Requests one connection may have in flight.
pub const REQUESTS_IN_FLIGHT_MAX: u32 = 256;
/// Payload bytes one connection may have in flight. Eight MiB keeps a
/// pipelining client busy (32 requests of 256 KiB, measured as fast as 64
/// MiB with fio) while 64 clients that never read their replies hold half a
/// GiB, until the idle timeout drops them.
pub const BYTES_IN_FLIGHT_MAX: u64 = 8 << 20;
/// The server-wide pool that requests larger than [`BYTES_IN_FLIGHT_MAX`]
/// borrow their excess from: two 32 MiB requests at once.
pub const LOANS_BYTES: u64 = 2 * ((32 << 20) - BYTES_IN_FLIGHT_MAX);

/// A poisoned lock only means another thread panicked, and a panic aborts
/// the server; the data is still usable until then.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// The server-wide pool of bytes lent to requests larger than an allowance.
#[derive(Debug)]
pub(crate) struct Loans {
    available: Mutex<u64>,
    returned: Condvar,
}

impl Default for Loans {
    fn default() -> Loans {
        Loans {
            available: Mutex::new(LOANS_BYTES),
            returned: Condvar::new(),
        }
    }
}

impl Loans {
    /// Waits until `bytes` are free, then takes them.
    fn borrow(&self, bytes: u64) {
        let mut available = lock(&self.available);
        while *available < bytes {
            available = self
                .returned
                .wait(available)
                .unwrap_or_else(|p| p.into_inner());
        }
        *available -= bytes;
    }

    fn give_back(&self, bytes: u64) {
        *lock(&self.available) += bytes;
        self.returned.notify_all();
    }
}

/// The excess of a request of `bytes` over a connection's allowance.
fn loan_for(bytes: u64) -> u64 {
    bytes.saturating_sub(BYTES_IN_FLIGHT_MAX)
}

/// A connection's allowance of requests and bytes in flight, and whether
/// its replies can still be sent.
pub(crate) struct Budget {
    in_flight: Mutex<(u32, u64)>,
    freed: Condvar,
    abandoned: AtomicBool,
    loans: Arc<Loans>,
}

impl Budget {
    pub(crate) fn new(loans: Arc<Loans>) -> Budget {
        Budget {
            in_flight: Mutex::default(),
            freed: Condvar::new(),
            abandoned: AtomicBool::new(false),
            loans,
        }
    }

    /// The writer cannot send replies any more.
    pub(crate) fn abandon(&self) {
        self.abandoned.store(true, Ordering::SeqCst);
    }

    pub(crate) fn is_abandoned(&self) -> bool {
        self.abandoned.load(Ordering::SeqCst)
    }

    /// Waits until a request of `bytes` fits (one larger than the allowance
    /// alone, with its excess borrowed), then takes it.
    pub(crate) fn acquire(&self, bytes: u64) {
        let mut in_flight = lock(&self.in_flight);
        while in_flight.0 >= REQUESTS_IN_FLIGHT_MAX
            || (in_flight.1 > 0 && in_flight.1 + bytes > BYTES_IN_FLIGHT_MAX)
        {
            in_flight = self
                .freed
                .wait(in_flight)
                .unwrap_or_else(|p| p.into_inner());
        }
        in_flight.0 += 1;
        in_flight.1 += bytes;
        drop(in_flight);
        // Alone on this connection now: waiting for the pool holds up no
        // request of its own.
        if loan_for(bytes) > 0 {
            self.loans.borrow(loan_for(bytes));
        }
    }

    /// Waits until the connection may read more requests while its decoder
    /// holds `buffered` bytes of one: when nothing is in flight, or what is
    /// leaves room. So a write's payload is not gathered beside a full
    /// allowance.
    pub(crate) fn wait_for_room(&self, buffered: usize) {
        let mut in_flight = lock(&self.in_flight);
        while in_flight.1 > 0 && in_flight.1 + buffered as u64 >= BYTES_IN_FLIGHT_MAX {
            in_flight = self
                .freed
                .wait(in_flight)
                .unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Whether nothing is in flight.
    pub(crate) fn is_empty(&self) -> bool {
        lock(&self.in_flight).0 == 0
    }

    /// Gives back a request of `bytes`, and its loan.
    pub(crate) fn release(&self, bytes: u64) {
        if loan_for(bytes) > 0 {
            self.loans.give_back(loan_for(bytes));
        }
        let mut in_flight = lock(&self.in_flight);
        in_flight.0 -= 1;
        in_flight.1 -= bytes;
        self.freed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use std::thread;
    use std::time::Duration;

    use super::*;

    fn budget(loans: &Arc<Loans>) -> Arc<Budget> {
        Arc::new(Budget::new(Arc::clone(loans)))
    }

    #[test]
    fn reading_waits_while_in_flight_and_buffered_fill_the_allowance() {
        let budget = budget(&Arc::default());
        // Nothing in flight: a whole 32 MiB write may be gathered.
        budget.wait_for_room(32 << 20);
        budget.acquire(BYTES_IN_FLIGHT_MAX - 4096);
        budget.wait_for_room(4095);
        let waiting = {
            let budget = Arc::clone(&budget);
            thread::spawn(move || budget.wait_for_room(4096))
        };
        thread::sleep(Duration::from_millis(100));
        assert!(!waiting.is_finished(), "read on beyond the allowance");
        budget.release(BYTES_IN_FLIGHT_MAX - 4096);
        waiting.join().expect("woken by the release");
        assert!(budget.is_empty());
    }

    #[test]
    fn large_requests_share_the_pool_and_small_ones_never_wait_for_it() {
        let loans = Arc::default();
        let large = 32 << 20;
        let [a, b, c, d] = [(); 4].map(|()| budget(&loans));
        a.acquire(large);
        b.acquire(large);
        let third = {
            let c = Arc::clone(&c);
            thread::spawn(move || c.acquire(large))
        };
        d.acquire(BYTES_IN_FLIGHT_MAX);
        thread::sleep(Duration::from_millis(100));
        assert!(!third.is_finished(), "a third 32 MiB request got a loan");
        a.release(large);
        third.join().expect("lent what the first gave back");
        for (budget, bytes) in [(&b, large), (&c, large), (&d, BYTES_IN_FLIGHT_MAX)] {
            budget.release(bytes);
        }
        assert_eq!(*lock(&loans.available), LOANS_BYTES);
    }
}
