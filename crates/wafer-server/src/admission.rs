//! Admission: which clients hold the NBD connections, so that clients that
//! connect and do nothing cannot keep a well-behaved one out.
//!
//! The server serves at most [`CONNECTIONS_MAX`] connections, and at most
//! [`ConnectionLimits::per_address`] from one IP address, so that one host
//! cannot take them all. A connection still in its handshake holds its place
//! only until a newcomer needs it: when a cap is reached, the oldest
//! connection still negotiating under that cap (the one slowest to finish,
//! since an honest handshake takes milliseconds) is dropped to make room, or
//! failing that, the connection under the cap that has moved no bytes for the
//! longest, if that is at least as long as a handshake may take (it deserves
//! its place no more than a slow handshake); only when every connection under
//! the cap is past its handshake and busier than that is the newcomer
//! refused. So connections that send nothing, or trickle their handshake,
//! delay no one, and idle ones only until the server is full; busy
//! connections keep their place until they close, their idle timeout ends
//! them, or they stop reading their replies for as long (`nbd`). Unix-socket
//! clients have no address: they
//! count towards the total only, since the socket's mode already says who may
//! connect (by default only the server's own user).

use std::collections::BTreeMap;
use std::fmt;
use std::net::{IpAddr, Shutdown};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::stop::StopSignal;
use crate::stream::Stream;

/// Connections served at once; more are refused unless one still in its
/// handshake can make room.
pub const CONNECTIONS_MAX: usize = 64;

/// The limits on NBD clients that `wafer serve`'s flags set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// The time a client has for its whole handshake.
    pub handshake_timeout: Duration,
    /// How long a connection past its handshake may send no request, with
    /// none in flight, or leave its replies unread, before it is closed
    /// (`None`: never).
    pub idle_timeout: Option<Duration>,
    /// Connections one IP address may hold at once.
    pub per_address: usize,
}

impl ConnectionLimits {
    /// Ten seconds for a handshake (an honest one takes milliseconds), five
    /// minutes of silence, a quarter of the connections per address.
    pub const DEFAULT: ConnectionLimits = ConnectionLimits {
        handshake_timeout: Duration::from_secs(10),
        idle_timeout: Some(Duration::from_secs(300)),
        per_address: CONNECTIONS_MAX / 4,
    };
}

/// Why a client was turned away.
#[derive(Debug)]
pub(crate) enum Refusal {
    /// Every connection is taken, and past its handshake.
    Full,
    /// Its address holds its share, each past its handshake.
    AddressFull(IpAddr, usize),
    /// The connection could not be duplicated for the table.
    Io(std::io::Error),
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::Full => write!(f, "all {CONNECTIONS_MAX} connections are in use"),
            Refusal::AddressFull(ip, cap) => {
                write!(f, "{ip} already holds its {cap} connections")
            }
            Refusal::Io(error) => write!(f, "{error}"),
        }
    }
}

/// One admitted connection.
struct Entry {
    address: Option<IpAddr>,
    negotiating: bool,
    stream: Stream,
    activity: Arc<Activity>,
}

/// When a connection last moved bytes, either way.
#[derive(Debug)]
pub(crate) struct Activity {
    start: Instant,
    /// Milliseconds from `start` to the last bytes moved.
    last_ms: AtomicU64,
}

impl Activity {
    fn new() -> Activity {
        Activity {
            start: Instant::now(),
            last_ms: AtomicU64::new(0),
        }
    }

    /// Bytes moved now.
    pub(crate) fn touch(&self) {
        let now = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_ms.store(now, Ordering::Relaxed);
    }

    /// How long since bytes last moved.
    fn idle(&self) -> Duration {
        let last = Duration::from_millis(self.last_ms.load(Ordering::Relaxed));
        self.start.elapsed().saturating_sub(last)
    }
}

/// The table of admitted connections, oldest first.
pub(crate) struct Admission {
    per_address: usize,
    /// How long a connection past its handshake must have moved no bytes to
    /// give way to a newcomer: as long as a handshake may take.
    idle_gives_way: Duration,
    table: Mutex<Table>,
}

#[derive(Default)]
struct Table {
    entries: BTreeMap<u64, Entry>,
    next_id: u64,
}

impl Admission {
    pub(crate) fn new(limits: &ConnectionLimits) -> Admission {
        Admission {
            per_address: limits.per_address,
            idle_gives_way: limits.handshake_timeout,
            table: Mutex::default(),
        }
    }

    /// Admits a client from `address` (`None`: a Unix socket), dropping the
    /// oldest negotiating connection, or else the longest idle, under a cap it
    /// would exceed; or refuses it.
    pub(crate) fn admit(
        self: &Arc<Self>,
        address: Option<IpAddr>,
        stream: &Stream,
    ) -> Result<Ticket, Refusal> {
        let stream = stream.try_clone().map_err(Refusal::Io)?;
        let mut table = self.lock();
        if let Some(ip) = address {
            let same = |entry: &Entry| entry.address == Some(ip);
            if table.entries.values().filter(|e| same(e)).count() >= self.per_address {
                table
                    .evict(same, self.idle_gives_way)
                    .ok_or(Refusal::AddressFull(ip, self.per_address))?;
            }
        }
        if table.entries.len() >= CONNECTIONS_MAX {
            table
                .evict(|_| true, self.idle_gives_way)
                .ok_or(Refusal::Full)?;
        }
        let id = table.next_id;
        table.next_id += 1;
        let activity = Arc::new(Activity::new());
        let entry = Entry {
            address,
            negotiating: true,
            stream,
            activity: Arc::clone(&activity),
        };
        table.entries.insert(id, entry);
        Ok(Ticket {
            admission: Arc::clone(self),
            id,
            activity,
        })
    }

    fn lock(&self) -> MutexGuard<'_, Table> {
        // A panic aborts the server, so a poisoned table is still whole.
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Table {
    /// Drops, among the connections `among` picks, the oldest still
    /// negotiating, or else the one idle longest if for `idle_gives_way` or
    /// more; `None` if there is neither.
    fn evict(&mut self, among: impl Fn(&Entry) -> bool, idle_gives_way: Duration) -> Option<()> {
        let candidates = || self.entries.iter().filter(|(_, entry)| among(entry));
        let negotiating = candidates().find(|(_, entry)| entry.negotiating);
        let (id, why) = match negotiating {
            Some((id, _)) => (*id, "still in its handshake".to_string()),
            None => {
                let (id, idle) = candidates()
                    .map(|(id, entry)| (*id, entry.activity.idle()))
                    .max_by_key(|(_, idle)| *idle)
                    .filter(|(_, idle)| *idle >= idle_gives_way)?;
                (id, format!("idle for {}s", idle.as_secs()))
            }
        };
        let entry = self.entries.remove(&id)?;
        // Its thread sees the connection end and finishes.
        let _ = entry.stream.shutdown(Shutdown::Both);
        let from = entry
            .address
            .map_or_else(|| "a Unix socket".to_string(), |ip| ip.to_string());
        tracing::warn!("dropped a connection from {from} {why}: a new client needs its place");
        Some(())
    }
}

/// A connection's place in the table, given up when dropped.
pub(crate) struct Ticket {
    admission: Arc<Admission>,
    id: u64,
    activity: Arc<Activity>,
}

impl Ticket {
    /// Where the connection's threads record that bytes moved.
    pub(crate) fn activity(&self) -> Arc<Activity> {
        Arc::clone(&self.activity)
    }

    /// The handshake is over: the connection keeps its place from now on.
    pub(crate) fn negotiated(&self) {
        if let Some(entry) = self.admission.lock().entries.get_mut(&self.id) {
            entry.negotiating = false;
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.admission.lock().entries.remove(&self.id);
    }
}

/// Admits `stream` under the caps, registers it with `stop` (which shuts
/// it at a graceful stop) and serves it on a thread of its own, named
/// `{kind}-{id}`: `serve` gets the stream and its ticket, and the stream is
/// unregistered when `serve` returns. A refusal is logged after `label`.
/// Returns whether the connection was taken (admitted and registered).
pub(crate) fn serve_admitted(
    admission: &Arc<Admission>,
    stop: &Arc<StopSignal>,
    stream: Stream,
    (label, kind): (&str, &str),
    serve: impl FnOnce(Stream, &Ticket) + Send + 'static,
) -> bool {
    let ticket = match admission.admit(stream.peer_ip(), &stream) {
        Ok(ticket) => ticket,
        Err(refusal) => {
            tracing::warn!("{label}: refused: {refusal}");
            return false;
        }
    };
    let registered = stream.try_clone().ok().and_then(|c| stop.register(c));
    let Some(id) = registered else { return false };
    let stop_now = Arc::clone(stop);
    let spawned = std::thread::Builder::new()
        .name(format!("{kind}-{id}"))
        .spawn(move || {
            serve(stream, &ticket);
            stop_now.unregister(id);
        });
    if let Err(error) = spawned {
        tracing::error!("cannot start a {kind} connection thread: {error}");
        stop.unregister(id);
    }
    true
}
