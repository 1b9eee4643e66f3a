//! Admission: which clients hold the NBD connections, so that clients that
//! connect and do nothing cannot keep a well-behaved one out.
//!
//! The server serves at most [`CONNECTIONS_MAX`] connections, and at most
//! [`ConnectionLimits::per_address`] from one IP address, so that one host
//! cannot take them all. A connection still in its handshake holds its place
//! only until a newcomer needs it: when a cap is reached, the oldest
//! connection still negotiating under that cap (the one slowest to finish,
//! since an honest handshake takes milliseconds) is dropped to make room, and
//! only when every connection under the cap is past its handshake is the
//! newcomer refused. So connections that send nothing, or trickle their
//! handshake, delay no one; connections past the handshake keep their place
//! until they close, their idle timeout ends them, or they stop reading their
//! replies for as long (`nbd`). Unix-socket clients have no address: they
//! count towards the total only, since the socket's mode already says who may
//! connect (by default only the server's own user).

use std::collections::BTreeMap;
use std::fmt;
use std::net::{IpAddr, Shutdown};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

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
}

/// The table of admitted connections, oldest first.
pub(crate) struct Admission {
    per_address: usize,
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
            table: Mutex::default(),
        }
    }

    /// Admits a client from `address` (`None`: a Unix socket), dropping the
    /// oldest negotiating connection under a cap it would exceed, or refuses it.
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
                    .evict_negotiating(same)
                    .ok_or(Refusal::AddressFull(ip, self.per_address))?;
            }
        }
        if table.entries.len() >= CONNECTIONS_MAX {
            table.evict_negotiating(|_| true).ok_or(Refusal::Full)?;
        }
        let id = table.next_id;
        table.next_id += 1;
        let entry = Entry {
            address,
            negotiating: true,
            stream,
        };
        table.entries.insert(id, entry);
        Ok(Ticket {
            admission: Arc::clone(self),
            id,
        })
    }

    fn lock(&self) -> MutexGuard<'_, Table> {
        // A panic aborts the server, so a poisoned table is still whole.
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Table {
    /// Drops the oldest connection still negotiating among those `among`
    /// picks; `None` if there is none.
    fn evict_negotiating(&mut self, among: impl Fn(&Entry) -> bool) -> Option<()> {
        let id = *self
            .entries
            .iter()
            .find(|(_, entry)| entry.negotiating && among(entry))?
            .0;
        let entry = self.entries.remove(&id)?;
        // Its thread sees the connection end and finishes.
        let _ = entry.stream.shutdown(Shutdown::Both);
        let from = entry
            .address
            .map_or_else(|| "a Unix socket".to_string(), |ip| ip.to_string());
        crate::log!(
            "dropped a connection from {from} still in its handshake: a new client needs its place"
        );
        Some(())
    }
}

/// A connection's place in the table, given up when dropped.
pub(crate) struct Ticket {
    admission: Arc<Admission>,
    id: u64,
}

impl Ticket {
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
