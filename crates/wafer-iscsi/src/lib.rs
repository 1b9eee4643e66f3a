//! The iSCSI target protocol (RFC 7143) and the SCSI block commands behind
//! it, as a pure state machine: no sockets, no threads, no clocks.
//!
//! An iSCSI initiator reaches a target's LUNs over one TCP connection per
//! session, or several ([`session`] orders their commands as one). It logs in (security negotiation, then operational
//! parameters), and then in the full feature phase sends SCSI commands
//! (CDBs), their data, task management functions, text requests
//! (SendTargets, for discovery), pings and finally a logout. A discovery
//! session only lists targets.
//!
//! The crate splits the work as `wafer-nbd` does, in the manner of
//! quinn-proto: [`pdu`] frames bytes into PDUs and back (digests, bounded
//! buffers), [`login`] settles the negotiation, [`scsi`] answers CDBs
//! against a LUN's description and turns reads and writes into
//! [`BlockOp`]s, [`reservation`] keeps a LUN's persistent reservations,
//! and [`Connection`] ties them together: fed bytes and
//! completions, it yields [`Event`]s (operations for the engine) and bytes
//! to send. The driver owns the socket, the threads and the engine.
//!
//! Hostile input is answered, never trusted: a malformed PDU is rejected
//! and the connection goes on; a command outside the CmdSN window is
//! dropped; only input after which the byte stream cannot be followed ends
//! the connection ([`ConnectionError`]). Memory is bounded by the largest
//! PDU accepted and by the CmdSN window. Nothing here panics on any input;
//! a driver that misuses the API (completing a task twice) is ignored.

pub mod chap;
mod connection;
mod digest;
pub mod login;
pub mod pdu;
pub mod reservation;
pub mod scsi;
pub mod sense;
pub mod session;
pub mod text;

pub use chap::{Challenge, Credentials, Policy, Security};
pub use connection::{
    CMD_WINDOW, Connection, ConnectionError, Counters, Event, Outcome, RejectReason, TaskId,
};
pub use digest::crc32c;
pub use login::{Params, SessionType, TargetIdentity};
pub use reservation::{Access, Nexus, Reservations};
pub use scsi::{BlockError, BlockOp, LunInfo, Run};
pub use session::{Sequencer, Sessions};
