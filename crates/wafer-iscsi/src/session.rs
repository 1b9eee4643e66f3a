//! Command order across the connections of one session.
//!
//! A session may run several TCP connections (MC/S, RFC 7143 §4.2): the
//! initiator spreads its commands over them, numbered by one CmdSN
//! sequence, and the target must carry them out in CmdSN order whichever
//! connection each came on, then answer each on the connection it came on
//! (connection allegiance). One connection alone orders its own commands
//! ([`crate::Connection`] does); with several, the driver shares one
//! [`Sequencer`] between them under a lock. A connection hands it every
//! non-immediate request ([`crate::Event::Order`]); the sequencer releases
//! the requests that are now next, in order, each tagged with the
//! connection it belongs to, and the driver gives each back to its own
//! connection ([`crate::Connection::deliver`]). The window it advertises
//! counts what it holds and what every connection has in flight, so a
//! session holds at most [`crate::CMD_WINDOW`] commands however many
//! connections it spreads them over.

use std::collections::BTreeMap;
use std::fmt;

use crate::CMD_WINDOW;
use crate::login::Params;
use crate::pdu::Pdu;

/// The most connections one session may have.
pub const CONNECTIONS_MAX: u16 = 4;

/// The driver's sessions, which a login naming a TSIH asks to join.
pub trait Sessions: Send + Sync + fmt::Debug {
    /// Whether connection `cid` may join session `tsih` of `initiator` at
    /// `isid` (it exists, negotiated several connections, and has room):
    /// the session's parameters if so.
    fn join(&self, initiator: &str, isid: [u8; 6], tsih: u16, cid: u16) -> Option<Params>;
}

/// One session's CmdSN order.
#[derive(Debug)]
pub struct Sequencer {
    exp_cmd_sn: u32,
    max_cmd_sn: u32,
    /// Requests that came early, by CmdSN, with their connection's id.
    held: BTreeMap<u32, (u16, Pdu)>,
    /// Tasks each connection has in flight.
    in_flight: BTreeMap<u16, usize>,
    /// Requests refused for a CmdSN outside the window.
    out_of_window: u64,
}

/// Whether serial number `a` comes after `b` (RFC 1982, 32 bits).
fn sn_after(a: u32, b: u32) -> bool {
    a != b && a.wrapping_sub(b) < 1 << 31
}

impl Sequencer {
    /// A session whose next command is `exp_cmd_sn` (the leading login's
    /// CmdSN).
    pub fn new(exp_cmd_sn: u32) -> Sequencer {
        Sequencer {
            exp_cmd_sn,
            max_cmd_sn: exp_cmd_sn.wrapping_add(CMD_WINDOW - 1),
            held: BTreeMap::new(),
            in_flight: BTreeMap::new(),
            out_of_window: 0,
        }
    }

    /// Takes request `pdu`, numbered `cmd_sn`, from connection `cid`;
    /// returns the requests now due, in CmdSN order. One outside the window
    /// (or a CmdSN already held) is dropped, as RFC 7143 says.
    pub fn order(&mut self, cid: u16, cmd_sn: u32, pdu: Pdu) -> Vec<(u16, Pdu)> {
        if cmd_sn != self.exp_cmd_sn {
            let in_window = sn_after(cmd_sn, self.exp_cmd_sn) && !sn_after(cmd_sn, self.max_cmd_sn);
            match in_window && !self.held.contains_key(&cmd_sn) {
                true => {
                    self.held.insert(cmd_sn, (cid, pdu));
                }
                false => self.out_of_window += 1,
            }
            return Vec::new();
        }
        let mut due = vec![(cid, pdu)];
        self.exp_cmd_sn = self.exp_cmd_sn.wrapping_add(1);
        while let Some(next) = self.held.remove(&self.exp_cmd_sn) {
            due.push(next);
            self.exp_cmd_sn = self.exp_cmd_sn.wrapping_add(1);
        }
        due
    }

    /// Records how many tasks connection `cid` has in flight (0 when it
    /// has ended).
    pub fn set_in_flight(&mut self, cid: u16, tasks: usize) {
        match tasks {
            0 => self.in_flight.remove(&cid),
            _ => self.in_flight.insert(cid, tasks),
        };
    }

    /// Drops what connection `cid` left held: it has ended.
    pub fn forget(&mut self, cid: u16) {
        self.held.retain(|_, (held_by, _)| *held_by != cid);
        self.in_flight.remove(&cid);
    }

    /// ExpCmdSN and MaxCmdSN to advertise: room for the window less what is
    /// held and in flight across the session, never less than advertised
    /// before.
    pub fn window(&mut self) -> (u32, u32) {
        let busy = self.held.len() + self.in_flight.values().sum::<usize>();
        let room = CMD_WINDOW.saturating_sub(busy as u32);
        let candidate = self.exp_cmd_sn.wrapping_add(room).wrapping_sub(1);
        if sn_after(candidate, self.max_cmd_sn) {
            self.max_cmd_sn = candidate;
        }
        (self.exp_cmd_sn, self.max_cmd_sn)
    }

    /// Requests dropped for a CmdSN outside the window.
    pub fn out_of_window(&self) -> u64 {
        self.out_of_window
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pdu::Bhs;

    fn request(cmd_sn: u32) -> Pdu {
        let mut bhs = Bhs::new(0x01, 0x80);
        bhs.put_u32(24, cmd_sn);
        Pdu {
            bhs,
            ahs: Vec::new(),
            data: Vec::new(),
        }
    }

    fn released(due: &[(u16, Pdu)]) -> Vec<(u16, u32)> {
        due.iter()
            .map(|(cid, pdu)| (*cid, pdu.bhs.u32_at(24)))
            .collect()
    }

    #[test]
    fn requests_from_two_connections_come_out_in_cmd_sn_order() {
        let mut sequencer = Sequencer::new(10);
        assert!(sequencer.order(2, 12, request(12)).is_empty());
        assert!(sequencer.order(1, 11, request(11)).is_empty());
        let due = sequencer.order(1, 10, request(10));
        assert_eq!(released(&due), [(1, 10), (1, 11), (2, 12)]);
        assert_eq!(sequencer.window().0, 13);
    }

    #[test]
    fn the_window_counts_the_whole_session() {
        let mut sequencer = Sequencer::new(0);
        assert_eq!(sequencer.window(), (0, CMD_WINDOW - 1));
        sequencer.order(1, 0, request(0));
        sequencer.set_in_flight(1, 3);
        sequencer.set_in_flight(2, 4);
        // 1 taken, 7 in flight: room for CMD_WINDOW - 7 from 1 on, but the
        // window never shrinks below what was advertised.
        assert_eq!(sequencer.window(), (1, CMD_WINDOW - 1));
        assert!(
            sequencer
                .order(2, CMD_WINDOW + 5, request(CMD_WINDOW + 5))
                .is_empty()
        );
        assert_eq!(sequencer.out_of_window(), 1, "beyond MaxCmdSN: dropped");
        sequencer.set_in_flight(1, 0);
        sequencer.forget(2);
        assert_eq!(sequencer.window(), (1, CMD_WINDOW));
    }

    #[test]
    fn what_an_ended_connection_left_held_is_dropped() {
        let mut sequencer = Sequencer::new(0);
        sequencer.order(2, 1, request(1));
        sequencer.forget(2);
        assert_eq!(released(&sequencer.order(1, 0, request(0))), [(1, 0)]);
    }
}
