//! One iSCSI connection, target side: login, then the full feature phase,
//! as a state machine fed bytes and completions.
//!
//! The driver feeds received bytes ([`Connection::handle_input`]), takes
//! the [`Event`]s that result ([`Connection::poll_event`]): block
//! operations for the engine, and the login and logout milestones), reports
//! each operation's outcome ([`Connection::complete`]), and sends what
//! [`Connection::poll_transmit`] gives it. Nothing here reads a socket or
//! a clock.
//!
//! **Ordering.** Every non-immediate request carries a CmdSN. The target
//! delivers them in CmdSN order: one equal to ExpCmdSN runs at once, one
//! ahead of it but within the window (up to MaxCmdSN) waits for the gap to
//! fill, and one outside the window is dropped unanswered, as RFC 7143
//! says. MaxCmdSN advertises room for [`CMD_WINDOW`] commands less those in
//! flight, and never moves back, so the tasks held and the data buffered for
//! them are bounded. A session of several connections orders across them
//! instead: each request goes to the driver ([`Event::Order`]), whose
//! shared [`crate::Sequencer`] gives it back when it is due
//! ([`Connection::deliver`]) with the session's window
//! ([`Connection::set_window`]); a login naming a TSIH joins a session only
//! if the driver's [`crate::Sessions`] take it.
//!
//! **Data.** A read's data goes out in Data-In PDUs of at most the
//! initiator's MaxRecvDataSegmentLength, in sequences of at most
//! MaxBurstLength, DataSN counting from zero, the status riding on the last
//! one when it is GOOD. A write's data comes as immediate data, then
//! unsolicited Data-Out (if InitialR2T=No) up to FirstBurstLength, then one
//! R2T at a time for the rest, each answered by a sequence of Data-Out
//! checked for its task tag, DataSN and buffer offset; a sequence that
//! breaks them fails the task (ABORTED COMMAND, DATA PHASE ERROR) with a
//! reject. When the initiator's expected length differs from what the CDB
//! moves, the response says so with an underflow or overflow residual.
//!
//! **Tasks and failures.** ABORT TASK, ABORT TASK SET, CLEAR TASK SET, LUN
//! RESET and TARGET WARM RESET end the tasks they name: one still receiving
//! data is dropped at once; one the engine is carrying out cannot be
//! recalled, so it loses its response and the function's response waits
//! until the engine has finished it (after the response nothing of it can
//! still change the LUN). A malformed PDU is rejected and the connection
//! goes on; only input that loses the framing (a header digest mismatch,
//! anything but a login request during login) ends it.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use crate::chap::{Challenge, Security};

use crate::login::{
    Login, LoginRequest, LoginStatus, Params, SessionType, Stage, TARGET_RECV_DATA_SEGMENT_BYTES,
    TEXT_BYTES_MAX, TargetIdentity,
};
use crate::pdu::{
    Bhs, Decoded, Digests, FLAG_FINAL, FramingError, Pdu, PduDecoder, RESERVED_TAG, encode,
    initiator, target,
};
use crate::scsi::{self, Answer, BlockError, BlockOp, DataOut, LunInfo, Plan, Run};
use crate::sense::{Sense, Status};
use crate::session::Sessions;
use crate::text;

/// Commands the target takes in flight (held for ordering, receiving data,
/// or with the engine).
pub const CMD_WINDOW: u32 = 32;

/// A task, by its initiator task tag.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct TaskId(pub u32);

/// What the driver is asked to do or told.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// Login is over: the full feature phase begins.
    LoggedIn {
        /// The initiator's IQN.
        initiator: String,
        /// The session's initiator session id: with the IQN, the I_T
        /// nexus persistent reservations are held by.
        isid: [u8; 6],
        /// The session's handle: this connection's own, or the one it
        /// joined.
        tsih: u16,
        /// This connection's id in its session.
        cid: u16,
        /// Whether the session orders its commands across connections
        /// (it negotiated more than one): the driver then owns a
        /// [`crate::Sequencer`], fed by [`Event::Order`].
        shared_order: bool,
        /// The CmdSN the session's commands start at (a new session's).
        cmd_sn: u32,
        /// Normal or discovery.
        session: SessionType,
    },
    /// Carry out `ops` on LUN `lun`, then report the outcome with
    /// [`Connection::complete`]: data for a read, runs for an allocation
    /// question, done for the rest.
    Execute {
        /// The task.
        task: TaskId,
        /// The LUN number.
        lun: u16,
        /// The operations: one read, one allocation question, or writes
        /// and trims.
        ops: Vec<BlockOp>,
    },
    /// A LOGICAL UNIT RESET (or a target reset, for every LUN) came
    /// through this session: every session that sees these LUNs, this one
    /// included, is to be told, by a reset count that grows in their
    /// [`LunInfo`]s.
    Reset {
        /// The LUN numbers.
        luns: Vec<u16>,
    },
    /// A request of a session that orders across connections, for the
    /// driver's [`crate::Sequencer`]; what it releases comes back through
    /// [`Connection::deliver`] to the connection it names.
    Order {
        /// The request's CmdSN.
        cmd_sn: u32,
        /// The request.
        pdu: Pdu,
    },
    /// The initiator logged out the whole session: the driver ends its
    /// other connections ([`Connection::end`]).
    EndSession,
    /// The initiator logged out connection `cid` of the session through
    /// this one: the driver ends it.
    EndConnection {
        /// The connection's id.
        cid: u16,
    },
    /// The initiator logged out, or login failed: send what is queued and
    /// close the connection.
    Closing,
}

/// The outcome of a task's operations.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Every write or trim is done (and durable).
    Done,
    /// A read's data.
    Data(Vec<u8>),
    /// The runs of an allocation question, in order from its offset.
    Runs(Vec<Run>),
    /// An operation failed; the ones after it were not carried out.
    Failed(BlockError),
    /// A compare found the bytes differ, first at this offset into the
    /// data compared (nothing was written).
    Miscompare(u32),
    /// The whole answer (a persistent reservation command's).
    Answer(Answer),
}

/// Input after which the connection must end.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConnectionError {
    /// The PDU stream cannot be followed.
    #[error("{0}")]
    Framing(#[from] FramingError),
    /// Something other than a login request arrived during login.
    #[error("opcode {0:#04x} during login")]
    NotLogin(u8),
}

/// Why a PDU is rejected (RFC 7143 11.17.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RejectReason {
    /// The data digest did not match.
    DataDigest = 0x02,
    /// The PDU breaks the protocol.
    ProtocolError = 0x04,
    /// The command is not supported (here: in a discovery session).
    CommandNotSupported = 0x05,
    /// A field of the PDU is invalid.
    InvalidPduField = 0x09,
}

/// Counts of what the connection refused, for the driver's log.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Requests dropped for a CmdSN outside the window.
    pub out_of_window: u64,
    /// PDUs rejected.
    pub rejected: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Login,
    FullFeature(SessionType),
    Closed,
}

/// A write's data being gathered.
#[derive(Debug)]
struct Receiving {
    then: DataOut,
    /// Bytes the command needs (what its CDB moves).
    need: u32,
    /// The first `need` bytes received.
    buffer: Vec<u8>,
    /// Bytes received so far, at offsets 0 onwards.
    received: u32,
    /// Unsolicited Data-Out may still come.
    unsolicited_open: bool,
    unsolicited_data_sn: u32,
    /// The R2T outstanding: its tag, end offset and next DataSN.
    r2t: Option<(u32, u32, u32)>,
}

/// What a task with the engine is, for how its outcome is answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Read,
    Write,
    /// A VERIFY: a failure is a read's, success has no data.
    Verify,
    /// GET LBA STATUS from `lba`, cut to `allocation` bytes.
    Status {
        lba: u64,
        allocation: u32,
    },
}

#[derive(Debug)]
enum TaskState {
    Receiving(Receiving),
    /// With the engine.
    Executing {
        kind: Kind,
        aborted: bool,
    },
}

#[derive(Debug)]
struct Task {
    lun: u16,
    lun_field: u64,
    edtl: u32,
    /// R2Ts (writes) or Data-In PDUs (reads) sent: ExpDataSN.
    data_sn: u32,
    /// Underflow (positive) or overflow (negative) fixed by the command.
    residual: i64,
    state: TaskState,
}

/// A task management response waiting for aborted tasks to finish.
#[derive(Debug)]
struct PendingFunction {
    itt: u32,
    waiting: Vec<u32>,
}

/// One connection's protocol state.
#[derive(Debug)]
pub struct Connection {
    identity: TargetIdentity,
    login: Login,
    phase: Phase,
    decoder: PduDecoder,
    digests: Digests,
    params: Params,
    tsih: u16,
    stat_sn: u32,
    exp_cmd_sn: u32,
    max_cmd_sn: u32,
    /// The initiator session id of the login.
    isid: [u8; 6],
    /// The connection id of the login.
    cid: u16,
    /// The driver's sessions, which a login may join.
    sessions: Option<Arc<dyn Sessions>>,
    /// The session parameters of the session this connection joined.
    joined: Option<Params>,
    /// Commands are ordered by the driver's sequencer, across connections.
    shared_order: bool,
    held: BTreeMap<u32, Pdu>,
    tasks: BTreeMap<u32, Task>,
    functions: Vec<PendingFunction>,
    next_ttt: u32,
    luns: Vec<LunInfo>,
    /// A REPORTED LUNS DATA HAS CHANGED unit attention is pending.
    luns_changed: bool,
    /// LUNs owing a reset's unit attention (at most one per LUN seen).
    reset_attention: Vec<u16>,
    started: bool,
    out: Vec<u8>,
    events: VecDeque<Event>,
    counters: Counters,
}

/// Whether serial number `a` comes after `b` (RFC 1982, 32 bits).
fn sn_after(a: u32, b: u32) -> bool {
    a != b && a.wrapping_sub(b) < 1 << 31
}

impl Connection {
    /// A new connection to `identity`, which gives a session it starts the
    /// handle `tsih` (non-zero), serving `luns`.
    pub fn new(identity: TargetIdentity, tsih: u16, luns: Vec<LunInfo>) -> Connection {
        Connection {
            login: Login::new(identity.clone()),
            identity,
            phase: Phase::Login,
            decoder: PduDecoder::new(TEXT_BYTES_MAX as u32),
            digests: Digests::default(),
            params: Params::default(),
            tsih: tsih.max(1),
            stat_sn: 0,
            exp_cmd_sn: 0,
            max_cmd_sn: 0,
            isid: [0; 6],
            cid: 0,
            sessions: None,
            joined: None,
            shared_order: false,
            held: BTreeMap::new(),
            tasks: BTreeMap::new(),
            functions: Vec::new(),
            next_ttt: 1,
            luns,
            luns_changed: false,
            reset_attention: Vec::new(),
            started: false,
            out: Vec::new(),
            events: VecDeque::new(),
            counters: Counters::default(),
        }
    }

    /// Gives the connection the driver's sessions, which a login naming a
    /// TSIH may join; without them, such a login is refused (SESSION DOES
    /// NOT EXIST).
    pub fn set_sessions(&mut self, sessions: Arc<dyn Sessions>) {
        self.sessions = Some(sessions);
    }

    /// A request the session's sequencer has released to this connection:
    /// carried out now, in the order released.
    pub fn deliver(&mut self, pdu: Pdu) {
        self.dispatch(pdu);
    }

    /// The session's ExpCmdSN and MaxCmdSN, from its sequencer, for what
    /// this connection sends next.
    pub fn set_window(&mut self, exp_cmd_sn: u32, max_cmd_sn: u32) {
        self.exp_cmd_sn = exp_cmd_sn;
        self.max_cmd_sn = max_cmd_sn;
    }

    /// Ends the connection as a logout would, for the driver: another
    /// connection logged out the session, or this one.
    pub fn end(&mut self) {
        if !self.is_closed() {
            self.close();
        }
    }

    /// Replaces the LUNs served (new, destroyed or resized ones, or a
    /// reservation or reset changed). A LUN whose reset count grew owes the
    /// initiator a unit attention (BUS DEVICE RESET FUNCTION OCCURRED) on
    /// its next command to it.
    pub fn set_luns(&mut self, luns: Vec<LunInfo>) {
        for new in &luns {
            let reset = self
                .luns
                .iter()
                .any(|old| old.id == new.id && old.number == new.number && old.resets < new.resets);
            if reset && !self.reset_attention.contains(&new.number) {
                self.reset_attention.push(new.number);
            }
        }
        self.reset_attention
            .retain(|number| luns.iter().any(|l| l.number == *number));
        self.luns = luns;
    }

    /// Sets who must authenticate how, and the challenge (random, from
    /// the driver) CHAP uses; before any input, or it changes nothing.
    pub fn set_security(&mut self, security: Arc<Security>, challenge: Challenge) {
        if !self.started {
            self.login = Login::with_security(self.identity.clone(), security, challenge);
        }
    }

    /// Tells the initiator, by a unit attention on its next command (other
    /// than INQUIRY, REPORT LUNS and REQUEST SENSE), that the LUNs it sees
    /// have changed (REPORTED LUNS DATA HAS CHANGED); REPORT LUNS clears it.
    pub fn report_luns_changed(&mut self) {
        self.luns_changed = true;
    }

    /// What was refused so far.
    pub fn counters(&self) -> Counters {
        self.counters
    }

    /// The parameters the login settled (the session's, for a connection
    /// that joined one).
    pub fn params(&self) -> Params {
        self.params
    }

    /// Tasks in flight (receiving data or with the engine).
    pub fn tasks_in_flight(&self) -> usize {
        self.tasks.len()
    }

    /// Whether the connection is over (logout, failed login).
    pub fn is_closed(&self) -> bool {
        self.phase == Phase::Closed
    }

    /// Bytes held of a PDU not yet whole.
    pub fn buffered_bytes(&self) -> usize {
        self.decoder.buffered_bytes()
    }

    /// Consumes `input`.
    pub fn handle_input(&mut self, mut input: &[u8]) -> Result<(), ConnectionError> {
        while !input.is_empty() && !self.is_closed() {
            let decoded = self.decoder.decode(&mut input)?;
            let login = self.phase == Phase::Login;
            match decoded {
                None if login => self.check_login_header()?,
                None => {}
                Some(Decoded::Pdu(pdu)) => self.handle_pdu(pdu)?,
                // During login nothing else may come, and login text is
                // small: anything else is not an initiator logging in.
                Some(Decoded::Oversized(bhs) | Decoded::DataDigest(bhs)) if login => {
                    return Err(ConnectionError::NotLogin(bhs.opcode()));
                }
                Some(Decoded::Oversized(bhs)) => self.reject(&bhs, RejectReason::ProtocolError),
                Some(Decoded::DataDigest(bhs)) => self.reject(&bhs, RejectReason::DataDigest),
            }
        }
        Ok(())
    }

    /// Refuses a PDU that is not a login request as soon as its header is
    /// in, without waiting for the rest it claims to have.
    fn check_login_header(&self) -> Result<(), ConnectionError> {
        match self.decoder.pending_header() {
            Some(bhs) if bhs.opcode() != initiator::LOGIN => {
                Err(ConnectionError::NotLogin(bhs.opcode()))
            }
            _ => Ok(()),
        }
    }

    /// Reports a stream that ended.
    pub fn handle_eof(&self) -> Result<(), ConnectionError> {
        Ok(self.decoder.handle_eof()?)
    }

    /// The next event for the driver.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Appends what is to be sent to `out`; returns how many bytes.
    pub fn poll_transmit(&mut self, out: &mut Vec<u8>) -> usize {
        let length = self.out.len();
        out.append(&mut self.out);
        length
    }

    /// Reports the outcome of a task's operations.
    pub fn complete(&mut self, task: TaskId, outcome: Outcome) {
        let Some(done) = self.tasks.remove(&task.0) else {
            return;
        };
        let TaskState::Executing { kind, aborted } = done.state else {
            // A task still receiving data was never handed out: a stray
            // completion leaves it be.
            self.tasks.insert(task.0, done);
            return;
        };
        if !aborted && !self.is_closed() {
            let answer = match (outcome, kind) {
                (Outcome::Failed(error), _) => error.answer(kind == Kind::Write),
                (Outcome::Runs(runs), Kind::Status { lba, allocation }) => {
                    scsi::lba_status(lba, &runs, allocation)
                }
                // Runs for anything else: the driver answered the wrong
                // question.
                (Outcome::Runs(_), _) => Answer::check(Sense::INTERNAL_TARGET_FAILURE),
                (Outcome::Done, _) => Answer::good(Vec::new()),
                (Outcome::Data(_), Kind::Verify) => Answer::good(Vec::new()),
                (Outcome::Data(data), _) => Answer::good(data),
                (Outcome::Miscompare(offset), _) => Answer::check(Sense::miscompare_at(offset)),
                (Outcome::Answer(answer), _) => answer,
            };
            self.respond(task.0, &done, answer);
        }
        self.finish_functions(task.0);
    }

    fn handle_pdu(&mut self, pdu: Pdu) -> Result<(), ConnectionError> {
        match self.phase {
            Phase::Login => self.login_pdu(&pdu),
            Phase::FullFeature(_) => {
                self.full_feature_pdu(pdu);
                Ok(())
            }
            Phase::Closed => Ok(()),
        }
    }

    // ---- login ------------------------------------------------------------

    fn login_pdu(&mut self, pdu: &Pdu) -> Result<(), ConnectionError> {
        let bhs = &pdu.bhs;
        if bhs.opcode() != initiator::LOGIN {
            return Err(ConnectionError::NotLogin(bhs.opcode()));
        }
        let cmd_sn = bhs.u32_at(24);
        if !self.started {
            self.started = true;
            self.isid.copy_from_slice(&bhs.0[8..14]);
            self.cid = u16::from_be_bytes([bhs.0[20], bhs.0[21]]);
            self.exp_cmd_sn = cmd_sn;
            self.max_cmd_sn = cmd_sn.wrapping_add(CMD_WINDOW - 1);
            self.stat_sn = bhs.u32_at(28);
        }
        let flags = bhs.flags();
        let request = LoginRequest {
            transit: flags & 0x80 != 0,
            continued: flags & 0x40 != 0,
            current: (flags >> 2) & 0x03,
            next: flags & 0x03,
            versions: (bhs.0[3], bhs.0[2]),
            tsih: u16::from_be_bytes([bhs.0[14], bhs.0[15]]),
            data: &pdu.data,
        };
        let mut step = self.login.step(&request);
        if step.next == Some(Stage::FullFeature)
            && let Some(tsih) = self.login.joining
        {
            match self.join(tsih) {
                Some(params) => {
                    self.tsih = tsih;
                    self.joined = Some(params);
                }
                None => {
                    step.status = LoginStatus::SESSION_DOES_NOT_EXIST;
                    step.next = None;
                    step.answer.clear();
                }
            }
        }
        self.login_response(bhs, &step);
        if step.status != LoginStatus::SUCCESS {
            self.close();
        } else if step.next == Some(Stage::FullFeature) {
            self.enter_full_feature();
        }
        Ok(())
    }

    fn login_response(&mut self, request: &Bhs, step: &crate::login::Step) {
        let transit = step.next.is_some();
        let mut flags = (step.current as u8) << 2;
        if let Some(next) = step.next {
            flags |= 0x80 | next as u8;
        }
        let mut bhs = Bhs::new(target::LOGIN_RESPONSE, flags);
        bhs.0[8..14].copy_from_slice(&request.0[8..14]);
        if transit && step.next == Some(Stage::FullFeature) {
            bhs.0[14..16].copy_from_slice(&self.tsih.to_be_bytes());
        }
        bhs.put_u32(16, request.itt());
        self.put_sequence_numbers(&mut bhs, true);
        bhs.0[36..38].copy_from_slice(&step.status.0.to_be_bytes());
        self.send(bhs, &step.answer);
    }

    /// Whether the session `tsih` the login names takes this connection:
    /// its parameters if so.
    fn join(&self, tsih: u16) -> Option<Params> {
        let initiator = self.login.initiator_name.as_deref()?;
        let sessions = self.sessions.as_ref()?;
        match self.login.session_type {
            SessionType::Normal => sessions.join(initiator, self.isid, tsih, self.cid),
            SessionType::Discovery => None,
        }
    }

    fn enter_full_feature(&mut self) {
        let own = self.login.params;
        // A joined connection takes the session's parameters, but its own
        // digests and receive limit (those are the connection's).
        self.params = match self.joined {
            Some(session) => Params {
                header_digest: own.header_digest,
                data_digest: own.data_digest,
                initiator_recv_data_segment: own.initiator_recv_data_segment,
                ..session
            },
            None => own,
        };
        let session = self.login.session_type;
        self.phase = Phase::FullFeature(session);
        self.digests = Digests {
            header: self.params.header_digest,
            data: self.params.data_digest,
        };
        self.decoder.set_digests(self.digests);
        self.decoder.set_data_limit(TARGET_RECV_DATA_SEGMENT_BYTES);
        self.shared_order = session == SessionType::Normal && self.params.max_connections > 1;
        let initiator = self.login.initiator_name.clone().unwrap_or_default();
        self.events.push_back(Event::LoggedIn {
            initiator,
            isid: self.isid,
            tsih: self.tsih,
            cid: self.cid,
            shared_order: self.shared_order,
            cmd_sn: self.exp_cmd_sn,
            session,
        });
    }

    fn close(&mut self) {
        self.phase = Phase::Closed;
        self.events.push_back(Event::Closing);
    }

    // ---- sequence numbers and sending -------------------------------------

    /// The MaxCmdSN to advertise: room for the window less what is in
    /// flight, never less than advertised before.
    fn advertised_max_cmd_sn(&mut self) -> u32 {
        if self.shared_order {
            // The session's window, as the driver last set it.
            return self.max_cmd_sn;
        }
        let busy = (self.tasks.len() + self.held.len()) as u32;
        let room = CMD_WINDOW.saturating_sub(busy);
        let candidate = self.exp_cmd_sn.wrapping_add(room).wrapping_sub(1);
        if sn_after(candidate, self.max_cmd_sn) {
            self.max_cmd_sn = candidate;
        }
        self.max_cmd_sn
    }

    /// StatSN (taken, if `status`), ExpCmdSN and MaxCmdSN at 24, 28, 32.
    fn put_sequence_numbers(&mut self, bhs: &mut Bhs, status: bool) {
        if status {
            bhs.put_u32(24, self.stat_sn);
            self.stat_sn = self.stat_sn.wrapping_add(1);
        } else {
            bhs.put_u32(24, self.stat_sn);
        }
        bhs.put_u32(28, self.exp_cmd_sn);
        let max = self.advertised_max_cmd_sn();
        bhs.put_u32(32, max);
    }

    fn send(&mut self, bhs: Bhs, data: &[u8]) {
        encode(&mut self.out, bhs, data, self.digests);
    }

    fn reject(&mut self, rejected: &Bhs, reason: RejectReason) {
        self.counters.rejected += 1;
        let mut bhs = Bhs::new(target::REJECT, FLAG_FINAL);
        bhs.0[2] = reason as u8;
        bhs.put_u32(16, RESERVED_TAG);
        self.put_sequence_numbers(&mut bhs, true);
        self.send(bhs, &rejected.0);
    }

    // ---- full feature phase -----------------------------------------------

    fn full_feature_pdu(&mut self, pdu: Pdu) {
        let opcode = pdu.bhs.opcode();
        match opcode {
            initiator::DATA_OUT => self.data_out(&pdu),
            initiator::NOP_OUT if pdu.bhs.itt() == RESERVED_TAG => {
                // The answer to a NOP-In this target never sends, or a
                // malformed ping: nothing to answer either way.
                if !pdu.bhs.immediate() {
                    self.reject(&pdu.bhs, RejectReason::ProtocolError);
                }
            }
            initiator::SCSI_COMMAND
            | initiator::TASK_MANAGEMENT
            | initiator::TEXT
            | initiator::LOGOUT
            | initiator::NOP_OUT => self.ordered(pdu),
            initiator::LOGIN => self.reject(&pdu.bhs, RejectReason::ProtocolError),
            _ => self.reject(&pdu.bhs, RejectReason::CommandNotSupported),
        }
    }

    /// Delivers requests in CmdSN order.
    fn ordered(&mut self, pdu: Pdu) {
        if pdu.bhs.immediate() {
            return self.dispatch(pdu);
        }
        let cmd_sn = pdu.bhs.u32_at(24);
        if self.shared_order {
            return self.events.push_back(Event::Order { cmd_sn, pdu });
        }
        if cmd_sn == self.exp_cmd_sn {
            self.exp_cmd_sn = cmd_sn.wrapping_add(1);
            self.dispatch(pdu);
            while let Some(next) = self.held.remove(&self.exp_cmd_sn) {
                self.exp_cmd_sn = self.exp_cmd_sn.wrapping_add(1);
                self.dispatch(next);
            }
        } else if sn_after(cmd_sn, self.exp_cmd_sn)
            && !sn_after(cmd_sn, self.max_cmd_sn)
            && !self.held.contains_key(&cmd_sn)
        {
            self.held.insert(cmd_sn, pdu);
        } else {
            self.counters.out_of_window += 1;
        }
    }

    fn dispatch(&mut self, pdu: Pdu) {
        if self.is_closed() {
            return;
        }
        let discovery = self.phase == Phase::FullFeature(SessionType::Discovery);
        match pdu.bhs.opcode() {
            initiator::NOP_OUT => self.nop_out(&pdu),
            initiator::TEXT => self.text(&pdu),
            initiator::LOGOUT => self.logout(&pdu.bhs),
            _ if discovery => self.reject(&pdu.bhs, RejectReason::CommandNotSupported),
            initiator::SCSI_COMMAND => self.scsi_command(pdu),
            _ => self.task_management(&pdu.bhs),
        }
    }

    fn nop_out(&mut self, pdu: &Pdu) {
        let mut bhs = Bhs::new(target::NOP_IN, FLAG_FINAL);
        bhs.0[8..16].copy_from_slice(&pdu.bhs.0[8..16]);
        bhs.put_u32(16, pdu.bhs.itt());
        bhs.put_u32(20, RESERVED_TAG);
        self.put_sequence_numbers(&mut bhs, true);
        let echo = pdu
            .data
            .len()
            .min(self.params.initiator_recv_data_segment as usize);
        self.send(bhs, &pdu.data[..echo]);
    }

    fn text(&mut self, pdu: &Pdu) {
        // Continued text is not needed for SendTargets of one target.
        let continued = pdu.bhs.flags() & 0x40 != 0;
        let parsed = text::parse(&pdu.data);
        let (false, Ok(pairs)) = (continued, parsed) else {
            return self.reject(&pdu.bhs, RejectReason::InvalidPduField);
        };
        let mut answer = Vec::new();
        for pair in pairs {
            match pair.key.as_str() {
                "SendTargets" => self.send_targets(&pair.value, &mut answer),
                _ => text::push(&mut answer, &pair.key, "NotUnderstood"),
            }
        }
        answer.truncate(self.params.initiator_recv_data_segment as usize);
        let mut bhs = Bhs::new(target::TEXT_RESPONSE, FLAG_FINAL);
        bhs.put_u32(16, pdu.bhs.itt());
        bhs.put_u32(20, RESERVED_TAG);
        self.put_sequence_numbers(&mut bhs, true);
        self.send(bhs, &answer);
    }

    /// SendTargets: this target, if asked for all targets, for it by name,
    /// or (in a normal session) for the session's own.
    fn send_targets(&self, which: &str, answer: &mut Vec<u8>) {
        let normal = self.phase == Phase::FullFeature(SessionType::Normal);
        let listed = which == "All" || which == self.identity.name || (which.is_empty() && normal);
        if !listed {
            return;
        }
        text::push(answer, "TargetName", &self.identity.name);
        let address = format!(
            "{},{}",
            self.identity.address, self.identity.portal_group_tag
        );
        text::push(answer, "TargetAddress", &address);
    }

    fn logout(&mut self, request: &Bhs) {
        let reason = request.flags() & 0x7f;
        let cid = u16::from_be_bytes([request.0[20], request.0[21]]);
        match reason {
            0 if self.shared_order => self.events.push_back(Event::EndSession),
            1 if cid != self.cid => {
                // Another connection of the session goes; this one stays.
                self.events.push_back(Event::EndConnection { cid });
                return self.logout_response(request, 0, false);
            }
            _ => {}
        }
        self.logout_response(request, if reason == 2 { 2 } else { 0 }, true);
    }

    /// Answers a logout with `response`, and closes this connection if
    /// `closing`.
    fn logout_response(&mut self, request: &Bhs, response: u8, closing: bool) {
        let mut bhs = Bhs::new(target::LOGOUT_RESPONSE, FLAG_FINAL);
        // Closing the session or this connection is done; recovery is not
        // supported at error recovery level 0.
        bhs.0[2] = response;
        bhs.put_u32(16, request.itt());
        self.put_sequence_numbers(&mut bhs, true);
        self.send(bhs, &[]);
        if closing {
            self.close();
        }
    }

    // ---- SCSI commands ----------------------------------------------------

    fn scsi_command(&mut self, pdu: Pdu) {
        let bhs = pdu.bhs;
        let itt = bhs.itt();
        let edtl = bhs.u32_at(20);
        let immediate = pdu.data.len() as u32;
        let bad_immediate = immediate > 0
            && (!self.params.immediate_data
                || immediate > self.params.first_burst
                || immediate > edtl);
        if self.tasks.contains_key(&itt) || itt == RESERVED_TAG || bad_immediate {
            return self.reject(&bhs, RejectReason::InvalidPduField);
        }
        let cdb: [u8; 16] = bhs.0[32..48].try_into().expect("sixteen bytes");
        let lun = scsi::lun_number(bhs.lun()).unwrap_or(u16::MAX);
        let mut task = Task {
            lun,
            lun_field: bhs.lun(),
            edtl,
            data_sn: 0,
            // Nothing moved yet: all the expected bytes are left over.
            residual: i64::from(edtl),
            state: TaskState::Executing {
                kind: Kind::Read,
                aborted: false,
            },
        };
        let exempt = matches!(
            cdb[0],
            scsi::INQUIRY | scsi::REQUEST_SENSE | scsi::REPORT_LUNS
        );
        if let Some(at) = self.reset_attention.iter().position(|&n| n == lun)
            && !exempt
        {
            self.reset_attention.swap_remove(at);
            let attention = Answer::check(Sense::LUN_RESET_OCCURRED);
            return self.respond(itt, &task, attention);
        }
        if self.luns_changed {
            match cdb[0] {
                scsi::REPORT_LUNS => self.luns_changed = false,
                scsi::INQUIRY | scsi::REQUEST_SENSE => {}
                _ => {
                    self.luns_changed = false;
                    let attention = Answer::check(Sense::REPORTED_LUNS_DATA_CHANGED);
                    return self.respond(itt, &task, attention);
                }
            }
        }
        match scsi::plan(&cdb, lun, &self.luns) {
            Plan::Answer(answer) => self.respond(itt, &task, answer),
            Plan::Read { offset, length } => {
                self.execute(itt, task, vec![BlockOp::Read { offset, length }]);
            }
            Plan::Execute(ops) => {
                task.state = TaskState::Executing {
                    kind: kind_of(&ops),
                    aborted: false,
                };
                self.execute(itt, task, ops);
            }
            Plan::Status {
                lba,
                length,
                allocation,
            } => {
                task.state = TaskState::Executing {
                    kind: Kind::Status { lba, allocation },
                    aborted: false,
                };
                let offset = lba * u64::from(scsi::BLOCK_BYTES);
                self.execute(itt, task, vec![BlockOp::Allocation { offset, length }]);
            }
            Plan::Receive {
                bytes,
                then: DataOut::WriteSame { .. } | DataOut::CompareAndWrite { .. },
            } if edtl != bytes => {
                // WRITE SAME's one block must come whole, and alone; and
                // COMPARE AND WRITE's halves must both come whole.
                self.respond(itt, &task, Answer::check(Sense::INVALID_FIELD_IN_CDB));
            }
            Plan::Receive { bytes, then } => {
                // With an expected length short of the CDB's, only what is
                // sent is taken (an overflow); with a longer one, the excess
                // is received and dropped (an underflow).
                task.residual = i64::from(edtl) - i64::from(bytes);
                let need = bytes.min(edtl);
                let unsolicited = !bhs.is_final() && !self.params.initial_r2t;
                task.state = TaskState::Receiving(Receiving {
                    then,
                    need,
                    // Grown as data arrives: a command costs memory only
                    // for what the initiator has sent.
                    buffer: Vec::new(),
                    received: 0,
                    unsolicited_open: unsolicited,
                    unsolicited_data_sn: 0,
                    r2t: None,
                });
                self.tasks.insert(itt, task);
                self.take_data(itt, &pdu.data);
                self.advance(itt);
            }
        }
    }

    fn execute(&mut self, itt: u32, task: Task, ops: Vec<BlockOp>) {
        let lun = task.lun;
        self.tasks.insert(itt, task);
        self.events.push_back(Event::Execute {
            task: TaskId(itt),
            lun,
            ops,
        });
    }

    /// Appends data for a receiving task at its next offset.
    fn take_data(&mut self, itt: u32, data: &[u8]) {
        let Some(Task {
            state: TaskState::Receiving(receiving),
            ..
        }) = self.tasks.get_mut(&itt)
        else {
            return;
        };
        let room = (receiving.need as usize).saturating_sub(receiving.buffer.len());
        receiving
            .buffer
            .extend_from_slice(&data[..data.len().min(room)]);
        receiving.received += data.len() as u32;
    }

    /// Moves a receiving task on: another R2T, or the engine.
    fn advance(&mut self, itt: u32) {
        let Some(task) = self.tasks.get_mut(&itt) else {
            return;
        };
        let TaskState::Receiving(receiving) = &mut task.state else {
            return;
        };
        if receiving.unsolicited_open || receiving.r2t.is_some() {
            return;
        }
        if receiving.received < receiving.need {
            let offset = receiving.received;
            let length = (receiving.need - offset).min(self.params.max_burst);
            let ttt = self.next_ttt;
            self.next_ttt = match self.next_ttt.wrapping_add(1) {
                RESERVED_TAG => 1,
                next => next,
            };
            receiving.r2t = Some((ttt, offset + length, 0));
            let r2t_sn = task.data_sn;
            task.data_sn += 1;
            let lun_field = task.lun_field;
            return self.send_r2t(itt, lun_field, ttt, r2t_sn, offset, length);
        }
        let Some(mut task) = self.tasks.remove(&itt) else {
            return;
        };
        let TaskState::Receiving(receiving) = std::mem::replace(
            &mut task.state,
            TaskState::Executing {
                kind: Kind::Write,
                aborted: false,
            },
        ) else {
            return;
        };
        let unit = self.luns.iter().find(|l| l.number == task.lun).cloned();
        let ops = match unit {
            Some(unit) => scsi::with_data(receiving.then, receiving.buffer, &unit),
            None => Err(Sense::LUN_NOT_SUPPORTED),
        };
        match ops {
            Ok(ops) if ops.is_empty() => self.respond(itt, &task, Answer::good(Vec::new())),
            Ok(ops) => {
                task.state = TaskState::Executing {
                    kind: kind_of(&ops),
                    aborted: false,
                };
                self.execute(itt, task, ops);
            }
            Err(sense) => self.respond(itt, &task, Answer::check(sense)),
        }
    }

    fn send_r2t(&mut self, itt: u32, lun: u64, ttt: u32, r2t_sn: u32, offset: u32, length: u32) {
        let mut bhs = Bhs::new(target::R2T, FLAG_FINAL);
        bhs.put_u64(8, lun);
        bhs.put_u32(16, itt);
        bhs.put_u32(20, ttt);
        self.put_sequence_numbers(&mut bhs, false);
        bhs.put_u32(36, r2t_sn);
        bhs.put_u32(40, offset);
        bhs.put_u32(44, length);
        self.send(bhs, &[]);
    }

    fn data_out(&mut self, pdu: &Pdu) {
        let bhs = &pdu.bhs;
        let accepted = match self.tasks.get_mut(&bhs.itt()) {
            Some(Task {
                state: TaskState::Receiving(receiving),
                edtl,
                ..
            }) => Some(accept_data_out(
                receiving,
                *edtl,
                bhs,
                pdu.data.len() as u32,
            )),
            _ => None,
        };
        match accepted {
            // Unsolicited data for a command already answered (refused
            // before its data arrived) is dropped; anything else is wrong.
            None if bhs.u32_at(20) == RESERVED_TAG => {}
            None => self.reject(bhs, RejectReason::InvalidPduField),
            Some(false) => {
                self.reject(bhs, RejectReason::InvalidPduField);
                self.fail_receiving(bhs.itt());
            }
            Some(true) => {
                self.take_data(bhs.itt(), &pdu.data);
                self.advance(bhs.itt());
            }
        }
    }

    /// Ends a task whose data broke the sequencing rules.
    fn fail_receiving(&mut self, itt: u32) {
        if let Some(task) = self.tasks.remove(&itt) {
            self.respond(itt, &task, Answer::check(Sense::DATA_PHASE_ERROR));
            self.finish_functions(itt);
        }
    }

    /// Sends a task's data (cut to what the initiator expects) and status.
    fn respond(&mut self, itt: u32, task: &Task, answer: Answer) {
        let sent = answer.data.len().min(task.edtl as usize);
        let residual = match answer.data.is_empty() {
            true => task.residual,
            false => i64::from(task.edtl) - answer.data.len() as i64,
        };
        let mut data_sn = task.data_sn;
        let status_with_data = answer.status == Status::GOOD && sent > 0;
        let chunk = self.params.initiator_recv_data_segment.max(512) as usize;
        let burst = self.params.max_burst.max(512) as usize;
        let mut offset = 0;
        while offset < sent {
            let length = chunk.min(sent - offset).min(burst - offset % burst);
            let last = offset + length == sent;
            let end_of_burst = (offset + length) % burst == 0;
            let mut flags = if last || end_of_burst { FLAG_FINAL } else { 0 };
            let mut bhs = Bhs::new(target::DATA_IN, 0);
            bhs.put_u64(8, task.lun_field);
            bhs.put_u32(16, itt);
            bhs.put_u32(20, RESERVED_TAG);
            if last && status_with_data {
                flags |= 0x01 | residual_flags(residual);
                bhs.0[3] = answer.status.0;
                self.put_sequence_numbers(&mut bhs, true);
                bhs.put_u32(44, residual.unsigned_abs() as u32);
            } else {
                self.put_sequence_numbers(&mut bhs, false);
                bhs.put_u32(24, 0);
            }
            bhs.0[1] = flags;
            bhs.put_u32(36, data_sn);
            bhs.put_u32(40, offset as u32);
            self.send(bhs, &answer.data[offset..offset + length]);
            data_sn += 1;
            offset += length;
        }
        if !status_with_data {
            self.scsi_response(itt, &answer, residual, data_sn);
        }
    }

    fn scsi_response(&mut self, itt: u32, answer: &Answer, residual: i64, exp_data_sn: u32) {
        let mut bhs = Bhs::new(target::SCSI_RESPONSE, FLAG_FINAL | residual_flags(residual));
        bhs.0[3] = answer.status.0;
        bhs.put_u32(16, itt);
        self.put_sequence_numbers(&mut bhs, true);
        bhs.put_u32(36, exp_data_sn);
        bhs.put_u32(44, residual.unsigned_abs() as u32);
        let mut data = Vec::new();
        if let Some(sense) = answer.sense {
            let fixed = sense.fixed();
            data.extend_from_slice(&(fixed.len() as u16).to_be_bytes());
            data.extend_from_slice(&fixed);
        }
        self.send(bhs, &data);
    }

    // ---- task management --------------------------------------------------

    fn task_management(&mut self, request: &Bhs) {
        let function = request.flags() & 0x7f;
        let lun = scsi::lun_number(request.lun());
        let referenced = request.u32_at(20);
        let response = match function {
            1 => self.abort_task(referenced, request.u32_at(32)),
            2 | 4 | 5 if !self.luns.iter().any(|l| Some(l.number) == lun) => Ok(2),
            2 | 4 => Err(self.abort_where(|_, task| Some(task.lun) == lun)),
            5 => {
                let luns = lun.into_iter().collect();
                self.events.push_back(Event::Reset { luns });
                Err(self.abort_where(|_, task| Some(task.lun) == lun))
            }
            6 => {
                let luns = self.luns.iter().map(|l| l.number).collect();
                self.events.push_back(Event::Reset { luns });
                Err(self.abort_where(|_, _| true))
            }
            8 => Ok(4),
            _ => Ok(5),
        };
        match response {
            Ok(code) => self.function_response(request.itt(), code),
            Err(waiting) if waiting.is_empty() => self.function_response(request.itt(), 0),
            Err(waiting) => self.functions.push(PendingFunction {
                itt: request.itt(),
                waiting,
            }),
        }
    }

    /// ABORT TASK: `Ok(code)` to answer now, `Err(tasks)` to wait for.
    fn abort_task(&mut self, referenced: u32, ref_cmd_sn: u32) -> Result<u8, Vec<u32>> {
        if self.tasks.contains_key(&referenced) {
            return Err(self.abort_where(|itt, _| itt == referenced));
        }
        // Not found: done already if its CmdSN has gone by, else unknown.
        match sn_after(self.exp_cmd_sn, ref_cmd_sn) {
            true => Ok(0),
            false => Ok(1),
        }
    }

    /// Ends every task `matches` picks; returns the ones with the engine.
    fn abort_where(&mut self, matches: impl Fn(u32, &Task) -> bool) -> Vec<u32> {
        let picked: Vec<u32> = self
            .tasks
            .iter()
            .filter(|&(&itt, task)| matches(itt, task))
            .map(|(&itt, _)| itt)
            .collect();
        let mut waiting = Vec::new();
        for itt in picked {
            match self.tasks.get_mut(&itt).map(|task| &mut task.state) {
                Some(TaskState::Executing { aborted, .. }) => {
                    *aborted = true;
                    waiting.push(itt);
                }
                _ => {
                    self.tasks.remove(&itt);
                }
            }
        }
        waiting
    }

    fn finish_functions(&mut self, itt: u32) {
        let mut ready = Vec::new();
        self.functions.retain_mut(|function| {
            function.waiting.retain(|&w| w != itt);
            if function.waiting.is_empty() {
                ready.push(function.itt);
                return false;
            }
            true
        });
        for function in ready {
            self.function_response(function, 0);
        }
    }

    fn function_response(&mut self, itt: u32, code: u8) {
        if self.is_closed() {
            return;
        }
        let mut bhs = Bhs::new(target::TASK_MANAGEMENT_RESPONSE, FLAG_FINAL);
        bhs.0[2] = code;
        bhs.put_u32(16, itt);
        self.put_sequence_numbers(&mut bhs, true);
        self.send(bhs, &[]);
    }
}

/// Checks a Data-Out against its task's sequence (tag, DataSN, offset in
/// order, within the R2T and the expected length) and, if it fits, moves
/// the sequence on. The data itself is taken by the caller.
fn accept_data_out(receiving: &mut Receiving, edtl: u32, bhs: &Bhs, length: u32) -> bool {
    let (ttt, data_sn, offset) = (bhs.u32_at(20), bhs.u32_at(36), bhs.u32_at(40));
    let Some(end) = offset.checked_add(length) else {
        return false;
    };
    if offset != receiving.received || end > edtl {
        return false;
    }
    if ttt == RESERVED_TAG {
        if !receiving.unsolicited_open || data_sn != receiving.unsolicited_data_sn {
            return false;
        }
        receiving.unsolicited_data_sn += 1;
        receiving.unsolicited_open = !bhs.is_final();
        return true;
    }
    match &mut receiving.r2t {
        Some((tag, r2t_end, next_sn)) if *tag == ttt && *next_sn == data_sn && end <= *r2t_end => {
            *next_sn += 1;
            if end == *r2t_end {
                receiving.r2t = None;
            }
            true
        }
        _ => false,
    }
}

/// The U (underflow) or O (overflow) flag for a residual.
/// How a task carrying out `ops` (no read among them) is answered.
fn kind_of(ops: &[BlockOp]) -> Kind {
    match ops.first() {
        Some(BlockOp::Verify { .. }) => Kind::Verify,
        _ => Kind::Write,
    }
}

fn residual_flags(residual: i64) -> u8 {
    match residual {
        0 => 0,
        r if r > 0 => 0x02,
        _ => 0x04,
    }
}
