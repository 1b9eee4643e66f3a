//! The iSCSI front end: one target per node, its LUNs by mapping, over TCP.
//!
//! The node is one iSCSI target, `iqn.2026-11.org.wafer:HOST`, with one
//! portal group (tag 1) of the `--iscsi` addresses. An initiator sees the
//! LUNs mapped to the igroups its InitiatorName is in, at the LUN IDs of
//! those maps (`crate::masking`), and nothing else: REPORT LUNS lists only
//! them and a command to any other number gets LOGICAL UNIT NOT SUPPORTED.
//! A snapshot's image (`/vol/V/L@SNAP`) mapped is read-only (WRITE
//! PROTECTED). Before login there are no LUNs at all. Discovery lists the
//! target to every initiator that may log in, as ONTAP does: masking hides
//! LUNs, not the target. A map or unmap reaches live sessions at their next
//! command: the LUNs are looked up again, and if the numbers an initiator
//! sees changed, its next command gets a REPORTED LUNS DATA HAS CHANGED
//! unit attention, so it rescans.
//!
//! Login takes each initiator's CHAP policy (`crate::chap_store`) as
//! published when the connection is accepted, with a challenge of 16 bytes
//! and an identifier read from `/dev/urandom` for each connection.
//!
//! Connections are admitted under the same caps as NBD's (`admission`),
//! and each gets two threads. A **reader** reads the socket and passes what
//! it read to the connection's **worker**, which owns the sans-I/O
//! [`wafer_iscsi::Connection`]: it feeds it bytes, hands the block
//! operations it asks for to the engine, feeds the engine's outcomes back,
//! and writes what the connection has to send. The reader reads again only
//! when the worker has taken what it read (a few reads may wait at once),
//! so a client that sends faster than the engine works is held back by TCP,
//! and the CmdSN window bounds the commands in flight.
//!
//! GET LBA STATUS is answered from the filer's extents, as NBD's
//! BLOCK_STATUS is, so an initiator sees holes (qemu skips them). VERIFY
//! reads and compares here; COMPARE AND WRITE goes to the engine, which
//! makes it atomic. Persistent reservations are the node's
//! (`crate::lun_state`), by the session's I_T nexus (initiator name and
//! ISID); each session looks again at what they leave it whenever they
//! change, before the next command it reads.
//!
//! A write is answered GOOD only when the engine replies to it, and the
//! engine replies only once the write's NVLog record is durable: a SIGKILL
//! after the response loses nothing. That is also why SYNCHRONIZE CACHE
//! and FUA cost nothing here (see `wafer_iscsi::scsi`).
//!
//! A session that negotiates several connections (MaxConnections, up to
//! [`wafer_iscsi::session::CONNECTIONS_MAX`]) is a [`SharedSession`] in the
//! node's table: a login naming its TSIH joins it, its commands are put in
//! CmdSN order by one [`Sequencer`] across its connections, and each is
//! carried out and answered by the worker of the connection it came on.
//!
//! Login must finish within the handshake timeout; after it the idle
//! timeout ends a connection that sends nothing while it has nothing in
//! flight, and one that leaves what it is sent unread. Protocol errors that
//! lose the framing end only their connection; the codec rejects the rest.

use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener};
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use wafer_core::filer::{Change, HostError, HostRequest, ReplyData};
use wafer_iscsi::login::Params;
use wafer_iscsi::pdu::Pdu;
use wafer_iscsi::scsi::{Answer, BLOCK_BYTES};
use wafer_iscsi::sense::Sense;
use wafer_iscsi::{
    BlockError, BlockOp, Challenge, Connection, ConnectionError, Event as IscsiEvent, LunInfo,
    Nexus, Outcome, Run, Sequencer, Sessions, TargetIdentity, TaskId,
};

use crate::admission::{Ticket, serve_admitted};
use crate::catalogue::{Catalogue, Session, Target};
use crate::events::{CompareRequest, Compared, Event, HostOutcome, first_difference};
use crate::lun_state::SharedLunState;
use crate::masking::{Initiator, San};
use crate::nbd::Context;
use crate::stream::Stream;

/// The iSCSI port (IANA-assigned).
pub const ISCSI_PORT: u16 = 3260;
/// The naming authority of the target's IQN.
const IQN_PREFIX: &str = "iqn.2026-11.org.wafer";
/// Bytes read from a socket at a time.
const READ_BUFFER_BYTES: usize = 256 * 1024;
/// Reads that may wait for the worker.
const READS_AHEAD: usize = 4;

/// The node's target name: the IQN prefix and the host's name, lowercased
/// and stripped to the characters an IQN allows.
pub(crate) fn target_name() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let host: String = host
        .trim()
        .to_lowercase()
        .chars()
        .map(|c| match c {
            'a'..='z' | '0'..='9' | '.' | '-' => c,
            _ => '-',
        })
        .collect();
    let host = if host.is_empty() { "node".into() } else { host };
    format!("{IQN_PREFIX}:{host}")
}

/// Bound iSCSI listeners, before the server starts.
pub(crate) struct Listeners(Vec<TcpListener>);

/// Binds every `--iscsi` address.
pub(crate) fn bind(addresses: &[SocketAddr]) -> Result<Listeners, crate::ServeError> {
    let listeners = addresses
        .iter()
        .map(|address| {
            TcpListener::bind(address).map_err(|error| crate::ServeError::Listen {
                address: format!("{address} (iSCSI)"),
                error,
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    for address in addresses {
        crate::access::warn_if_exposed(address);
    }
    Ok(Listeners(listeners))
}

/// Starts each listener's accept thread; returns the iSCSI URI of each
/// (of LUN 0, the default LUN, when it lives).
pub(crate) fn spawn(listeners: Listeners, context: &Arc<Context>) -> io::Result<Vec<String>> {
    let target = Arc::new(NodeTarget {
        name: target_name(),
        sessions: AtomicU16::new(1),
        session_table: Arc::default(),
        lun_state: Arc::default(),
    });
    let default = context
        .catalogue
        .current()
        .find("")
        .and_then(|e| e.lun_id)
        .map_or_else(String::new, |id| format!("/{id}"));
    let mut uris = Vec::new();
    for listener in listeners.0 {
        let address = listener.local_addr()?;
        uris.push(format!("iscsi://{address}/{}{default}", target.name));
        let waker_address = address;
        context.stop.add_waker(Box::new(move || {
            let _ = std::net::TcpStream::connect_timeout(&waker_address, Duration::from_secs(1));
        }));
        let (context, target) = (Arc::clone(context), Arc::clone(&target));
        thread::Builder::new()
            .name("iscsi-listener".into())
            .spawn(move || accept_loop(&listener, &context, &target))?;
    }
    Ok(uris)
}

/// The node's target: its name, the next session handle and its LUNs' state
/// shared by every session (persistent reservations, resets).
struct NodeTarget {
    name: String,
    sessions: AtomicU16,
    /// The sessions with several connections, by TSIH.
    session_table: Arc<SessionTable>,
    lun_state: Arc<SharedLunState>,
}

/// The sessions that may have several connections, by TSIH.
#[derive(Debug, Default)]
struct SessionTable {
    sessions: Mutex<BTreeMap<u16, Arc<SharedSession>>>,
}

/// One session spread over several connections.
#[derive(Debug)]
struct SharedSession {
    initiator: String,
    isid: [u8; 6],
    /// The parameters its leading connection negotiated.
    params: Params,
    sequencer: Mutex<Sequencer>,
    /// Its connections' workers, by connection id.
    members: Mutex<BTreeMap<u16, Sender<Message>>>,
}

impl Sessions for SessionTable {
    fn join(&self, initiator: &str, isid: [u8; 6], tsih: u16, cid: u16) -> Option<Params> {
        let session = lock(&self.sessions).get(&tsih).cloned()?;
        let members = lock(&session.members);
        let room = members.len() < session.params.max_connections as usize;
        (session.initiator == initiator
            && session.isid == isid
            && room
            && !members.contains_key(&cid))
        .then_some(session.params)
    }
}

impl SessionTable {
    /// Adds connection `cid` (whose worker `to` is) to session `tsih`:
    /// made by this connection if it leads it, else joined. `None` if the
    /// session ended or filled meanwhile.
    fn enter(
        &self,
        tsih: u16,
        cid: u16,
        to: Sender<Message>,
        lead: Option<SharedSession>,
    ) -> Option<Arc<SharedSession>> {
        let mut sessions = lock(&self.sessions);
        let session = match lead {
            Some(session) => Arc::clone(sessions.entry(tsih).or_insert(Arc::new(session))),
            None => Arc::clone(sessions.get(&tsih)?),
        };
        let mut members = lock(&session.members);
        if members.len() >= session.params.max_connections as usize || members.contains_key(&cid) {
            return None;
        }
        members.insert(cid, to);
        drop(members);
        Some(session)
    }

    /// Takes connection `cid` out of session `tsih`; the session ends with
    /// its last connection.
    fn leave(&self, tsih: u16, cid: u16) {
        let mut sessions = lock(&self.sessions);
        let Some(session) = sessions.get(&tsih) else {
            return;
        };
        lock(&session.sequencer).forget(cid);
        let mut members = lock(&session.members);
        members.remove(&cid);
        if members.is_empty() {
            drop(members);
            sessions.remove(&tsih);
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

fn accept_loop(listener: &TcpListener, context: &Arc<Context>, target: &Arc<NodeTarget>) {
    loop {
        let (socket, peer) = match listener.accept() {
            Ok(accepted) => accepted,
            Err(error) => {
                crate::log!("iSCSI accept failed: {error}");
                thread::sleep(Duration::from_millis(100));
                continue;
            }
        };
        if context.stop.is_stopping() {
            break;
        }
        let _ = socket.set_nodelay(true);
        let stream = Stream::Tcp(socket);
        let (connection_context, target) = (Arc::clone(context), Arc::clone(target));
        serve_admitted(
            &context.admission,
            &context.stop,
            stream,
            (&format!("iSCSI {peer}"), "iscsi"),
            move |stream, ticket| {
                serve_connection(stream, peer, &connection_context, &target, ticket)
            },
        );
    }
}

/// What the worker is told.
enum Message {
    Input(Vec<u8>),
    Eof,
    ReadFailed(io::Error),
    /// The read timed out: the worker decides whether that is idleness.
    Quiet,
    Done(TaskId, Outcome),
    /// A request of this connection the session's sequencer released.
    Deliver(Box<Pdu>),
    /// The initiator logged this connection out through another.
    End,
}

/// Why a connection ended early.
#[derive(Debug, thiserror::Error)]
enum EndError {
    #[error("{0}")]
    Io(#[from] io::Error),
    #[error("{0}")]
    Protocol(#[from] ConnectionError),
    #[error("login took over {0:?}")]
    LoginTimeout(Duration),
    #[error("sent nothing for {0:?}")]
    Idle(Duration),
}

fn serve_connection(
    stream: Stream,
    peer: SocketAddr,
    context: &Arc<Context>,
    target: &NodeTarget,
    ticket: &Ticket,
) {
    let Stream::Tcp(socket) = &stream else {
        return;
    };
    let portal = socket
        .local_addr()
        .map_or_else(|_| "127.0.0.1:3260".into(), |a| a.to_string());
    let identity = TargetIdentity {
        name: target.name.clone(),
        alias: "wafer".into(),
        portal_group_tag: 1,
        address: portal,
    };
    let tsih = target.sessions.fetch_add(1, Ordering::Relaxed).max(1);
    let shared = Shared {
        lun_state: Arc::clone(&target.lun_state),
        sessions: Arc::clone(&target.session_table),
    };
    let mut worker = match Worker::new(stream, identity, tsih, context, shared) {
        Ok(worker) => worker,
        Err(error) => return crate::log!("iSCSI {peer}: dropped: {error}"),
    };
    match worker.run(ticket) {
        Ok(()) => crate::log!("iSCSI {peer}: disconnected"),
        Err(error) => crate::log!("iSCSI {peer}: dropped: {error}"),
    }
    let counters = worker.connection.counters();
    if counters.rejected + counters.out_of_window > 0 {
        crate::log!(
            "iSCSI {peer}: {} PDUs rejected, {} commands outside the CmdSN window dropped",
            counters.rejected,
            counters.out_of_window
        );
    }
    if let Some((session, cid)) = worker.session.take() {
        worker.sessions.leave(session, cid);
    }
    let _ = worker.stream.shutdown(Shutdown::Both);
}

/// What a connection's worker shares with every other.
struct Shared {
    lun_state: Arc<SharedLunState>,
    sessions: Arc<SessionTable>,
}

/// A connection's worker thread state.
struct Worker {
    stream: Stream,
    connection: Connection,
    messages: Receiver<Message>,
    to_self: Sender<Message>,
    /// Given back to the reader for each input taken.
    permits: SyncSender<()>,
    context: Arc<Context>,
    catalogue: Arc<Catalogue>,
    /// The igroups and maps the LUNs were found by.
    san: Arc<San>,
    /// The initiator, once logged in (a normal session), with its count
    /// for `igroup show`.
    initiator: Option<(String, Session)>,
    /// The session's I_T nexus, once logged in.
    nexus: Option<Nexus>,
    lun_state: Arc<SharedLunState>,
    /// The LUN state's version the LUNs' access was looked up at.
    lun_state_seen: u64,
    sessions: Arc<SessionTable>,
    /// The session spread over several connections this connection is in
    /// (its TSIH and this connection's id), if it is.
    session: Option<(u16, u16)>,
    /// That session, shared.
    shared_session: Option<Arc<SharedSession>>,
    /// This connection's TSIH, if it leads a session.
    own_tsih: u16,
    /// Requests released to the session's other connections, to forward.
    released: Vec<(u16, Pdu)>,
    /// The target's name, which its LUNs' serials are made from.
    target_name: String,
    targets: Vec<(u16, Target)>,
    /// The numbers of those whose LUN is offline (`lun offline`).
    offline: Vec<u16>,
    out: Vec<u8>,
}

impl Worker {
    fn new(
        stream: Stream,
        identity: TargetIdentity,
        tsih: u16,
        context: &Arc<Context>,
        shared: Shared,
    ) -> io::Result<Worker> {
        let Shared {
            lun_state,
            sessions,
        } = shared;
        stream.set_read_timeout(Some(context.limits.handshake_timeout))?;
        stream.set_write_timeout(Some(context.limits.handshake_timeout))?;
        let (to_self, messages) = mpsc::channel();
        let (permits, taken) = mpsc::sync_channel(READS_AHEAD);
        for _ in 0..READS_AHEAD {
            permits.send(()).expect("room for every permit");
        }
        let reader = stream.try_clone()?;
        let sender = to_self.clone();
        thread::Builder::new()
            .name("iscsi-reader".into())
            .spawn(move || read_loop(reader, &sender, &taken))?;
        let catalogue = context.catalogue.current();
        let target_name = identity.name.clone();
        let mut connection = Connection::new(identity, tsih, Vec::new());
        connection.set_security(context.catalogue.security(), random_challenge()?);
        connection.set_sessions(Arc::clone(&sessions) as Arc<dyn Sessions>);
        Ok(Worker {
            stream,
            connection,
            messages,
            to_self,
            permits,
            context: Arc::clone(context),
            catalogue,
            san: context.catalogue.san(),
            initiator: None,
            nexus: None,
            lun_state_seen: lun_state.version(),
            lun_state,
            sessions,
            session: None,
            shared_session: None,
            own_tsih: tsih,
            released: Vec::new(),
            target_name,
            targets: Vec::new(),
            offline: Vec::new(),
            out: Vec::new(),
        })
    }

    fn run(&mut self, ticket: &Ticket) -> Result<(), EndError> {
        let login_deadline = Instant::now() + self.context.limits.handshake_timeout;
        let mut logged_in = false;
        let activity = ticket.activity();
        // When the initiator last sent anything: a quiet read may have
        // started under the login's shorter timeout, so the idle timeout
        // is measured from here, not from the read.
        let mut last_input = Instant::now();
        while let Ok(message) = self.messages.recv() {
            match message {
                Message::Input(bytes) => {
                    last_input = Instant::now();
                    activity.touch();
                    self.refresh_luns();
                    let fed = self.connection.handle_input(&bytes);
                    let _ = self.permits.try_send(());
                    fed?;
                }
                Message::Eof => {
                    self.connection.handle_eof()?;
                    return Ok(());
                }
                Message::ReadFailed(error) => return Err(error.into()),
                Message::Quiet if !logged_in => {
                    return Err(EndError::LoginTimeout(
                        self.context.limits.handshake_timeout,
                    ));
                }
                Message::Quiet => match self.context.limits.idle_timeout {
                    Some(idle)
                        if self.connection.tasks_in_flight() == 0
                            && last_input.elapsed() >= idle =>
                    {
                        return Err(EndError::Idle(idle));
                    }
                    _ => {}
                },
                Message::Done(task, outcome) => self.connection.complete(task, outcome),
                Message::Deliver(pdu) => self.connection.deliver(*pdu),
                Message::End => self.connection.end(),
            }
            if !logged_in && Instant::now() > login_deadline {
                return Err(EndError::LoginTimeout(
                    self.context.limits.handshake_timeout,
                ));
            }
            let closing = self.handle_events(ticket, &mut logged_in)?;
            self.share_window();
            self.transmit()?;
            activity.touch();
            if closing {
                return Ok(());
            }
        }
        Ok(())
    }

    /// Acts on the connection's events; returns whether it is closing.
    fn handle_events(&mut self, ticket: &Ticket, logged_in: &mut bool) -> io::Result<bool> {
        let mut closing = false;
        while let Some(event) = self.connection.poll_event() {
            match event {
                IscsiEvent::LoggedIn {
                    initiator,
                    isid,
                    session,
                    tsih,
                    cid,
                    shared_order,
                    cmd_sn,
                } => {
                    if shared_order && !self.enter_session(&initiator, isid, (tsih, cid), cmd_sn) {
                        self.connection.end();
                        continue;
                    }
                    *logged_in = true;
                    ticket.negotiated();
                    let idle = self.context.limits.idle_timeout;
                    self.stream.set_read_timeout(idle)?;
                    self.stream.set_write_timeout(idle)?;
                    crate::log!("iSCSI: {initiator} logged in ({session:?} session)");
                    if session == wafer_iscsi::SessionType::Normal {
                        let counted = self.context.catalogue.logged_in(&initiator);
                        self.nexus = Some(Nexus {
                            initiator: initiator.clone(),
                            isid,
                        });
                        self.initiator = Some((initiator, counted));
                        self.look_up_luns();
                    }
                }
                IscsiEvent::Execute { task, lun, ops } => {
                    // A reservation change of this session's own applies to
                    // its next command; others' are seen before each input.
                    let reserves = matches!(ops.first(), Some(BlockOp::ReserveOut { .. }));
                    self.execute(task, lun, ops);
                    if reserves {
                        self.refresh_luns();
                    }
                }
                IscsiEvent::Reset { luns } => self.reset(&luns),
                IscsiEvent::Order { cmd_sn, pdu } => self.order(cmd_sn, pdu),
                IscsiEvent::EndSession => self.end_others(None),
                IscsiEvent::EndConnection { cid } => self.end_others(Some(cid)),
                IscsiEvent::Closing => closing = true,
            }
        }
        self.forward_released();
        Ok(closing)
    }

    fn transmit(&mut self) -> io::Result<()> {
        self.out.clear();
        if self.connection.poll_transmit(&mut self.out) > 0 {
            self.stream.write_all(&self.out)?;
        }
        Ok(())
    }

    /// Looks the initiator's LUNs up again if the catalogue, the maps or
    /// the reservations have changed; a change in the numbers it sees is a
    /// unit attention.
    fn refresh_luns(&mut self) {
        let current = self.context.catalogue.current();
        let san = self.context.catalogue.san();
        let version = self.lun_state.version();
        if Arc::ptr_eq(&current, &self.catalogue)
            && Arc::ptr_eq(&san, &self.san)
            && version == self.lun_state_seen
        {
            return;
        }
        self.lun_state_seen = version;
        self.catalogue = current;
        self.san = san;
        let before: Vec<u16> = self.targets.iter().map(|(n, _)| *n).collect();
        self.look_up_luns();
        if self.targets.iter().map(|(n, _)| *n).ne(before) {
            self.connection.report_luns_changed();
        }
    }

    /// Gives the connection the LUNs its initiator sees now.
    fn look_up_luns(&mut self) {
        let Some((initiator, _)) = &self.initiator else {
            return;
        };
        let visible = self.san.visible(Initiator::Iscsi(initiator));
        self.offline = visible
            .iter()
            .filter(|v| self.san.is_offline(&v.path))
            .map(|v| v.lun_id)
            .collect();
        let (mut luns, targets) = luns_of(&self.catalogue, &visible, &self.target_name);
        if let Some(nexus) = &self.nexus {
            for (info, (_, target)) in luns.iter_mut().zip(&targets) {
                (info.access, info.resets) = self.lun_state.seen_by(target, nexus);
            }
        }
        self.targets = targets;
        self.connection.set_luns(luns);
    }

    /// Enters the session this connection leads or joined; false if it
    /// has ended or filled since the login was let in.
    fn enter_session(
        &mut self,
        initiator: &str,
        isid: [u8; 6],
        (tsih, cid): (u16, u16),
        cmd_sn: u32,
    ) -> bool {
        let lead = (tsih == self.own_tsih).then(|| SharedSession {
            initiator: initiator.to_owned(),
            isid,
            params: self.connection.params(),
            sequencer: Mutex::new(Sequencer::new(cmd_sn)),
            members: Mutex::new(BTreeMap::new()),
        });
        let Some(session) = self.sessions.enter(tsih, cid, self.to_self.clone(), lead) else {
            return false;
        };
        self.session = Some((tsih, cid));
        self.shared_session = Some(session);
        true
    }

    /// Puts a request in the session's CmdSN order; what is now due goes to
    /// the connection it came on: this one's now, the others' once this
    /// one's have gone to the engine ([`Worker::forward_released`]), so that
    /// a command released after this connection's is submitted after it.
    fn order(&mut self, cmd_sn: u32, pdu: Pdu) {
        let (Some(session), Some((_, own))) = (&self.shared_session, self.session) else {
            return;
        };
        let due = lock(&session.sequencer).order(own, cmd_sn, pdu);
        for (cid, pdu) in due {
            match cid == own {
                true => self.connection.deliver(pdu),
                false => self.released.push((cid, pdu)),
            }
        }
    }

    /// Sends the other connections what the sequencer released to them.
    fn forward_released(&mut self) {
        let Some(session) = &self.shared_session else {
            return;
        };
        let members = lock(&session.members);
        for (cid, pdu) in self.released.drain(..) {
            if let Some(to) = members.get(&cid) {
                let _ = to.send(Message::Deliver(Box::new(pdu)));
            }
        }
    }

    /// Ends the session's other connections (`None`), or connection `cid`.
    fn end_others(&self, cid: Option<u16>) {
        let (Some(session), Some((_, own))) = (&self.shared_session, self.session) else {
            return;
        };
        for (member, to) in lock(&session.members).iter() {
            if *member != own && cid.is_none_or(|cid| cid == *member) {
                let _ = to.send(Message::End);
            }
        }
    }

    /// Tells the session's sequencer what this connection has in flight,
    /// and the connection the session's window.
    fn share_window(&mut self) {
        let (Some(session), Some((_, own))) = (&self.shared_session, self.session) else {
            return;
        };
        let (exp, max) = {
            let mut sequencer = lock(&session.sequencer);
            sequencer.set_in_flight(own, self.connection.tasks_in_flight());
            sequencer.window()
        };
        self.connection.set_window(exp, max);
    }

    /// A LOGICAL UNIT RESET (or a target reset) of `luns` through this
    /// session: a unit attention for every session that sees them, this
    /// one included.
    fn reset(&mut self, luns: &[u16]) {
        for (_, target) in self.targets.iter().filter(|(n, _)| luns.contains(n)) {
            self.lun_state.reset(target);
        }
        self.refresh_luns();
    }

    /// Hands a task's operations to the engine; its outcome comes back as a
    /// message once every one has been answered.
    fn execute(&mut self, task: TaskId, lun: u16, ops: Vec<BlockOp>) {
        self.context.iscsi_counters.count(&ops);
        let Some((_, target)) = self.targets.iter().find(|(n, _)| *n == lun) else {
            return self
                .connection
                .complete(task, Outcome::Failed(BlockError::Gone));
        };
        if self.offline.contains(&lun) {
            return self
                .connection
                .complete(task, Outcome::Failed(BlockError::NotReady));
        }
        let gather = Arc::new(Mutex::new(Gather {
            left: ops.len(),
            outcome: Outcome::Done,
            task,
            to: self.to_self.clone(),
        }));
        for op in ops {
            let gather = Arc::clone(&gather);
            let one_done = move |outcome| {
                let mut gather = gather.lock().unwrap_or_else(|p| p.into_inner());
                gather.one_done(outcome);
            };
            match op {
                BlockOp::ReserveIn { .. } | BlockOp::ReserveOut { .. } => {
                    one_done(Outcome::Answer(self.reservation_answer(target, &op)));
                }
                op => self.send(engine_event(target, op, one_done)),
            }
        }
    }

    /// A persistent reservation command's answer, from the node's shared
    /// reservations.
    fn reservation_answer(&self, target: &Target, op: &BlockOp) -> Answer {
        let (Some(nexus), BlockOp::ReserveOut { cdb, parameters }) = (&self.nexus, op) else {
            return match op {
                BlockOp::ReserveIn { cdb } => self.lun_state.reserve_in(target, cdb),
                // Only a logged-in session sees a LUN to reserve.
                _ => Answer::check(Sense::LUN_NOT_SUPPORTED),
            };
        };
        self.lun_state.reserve_out(target, nexus, cdb, parameters)
    }

    /// Sends `event` to the engine; if it has stopped, the event's sender
    /// hears so.
    fn send(&self, event: Event) {
        let Err(mpsc::SendError(event)) = self.context.engine.send(event) else {
            return;
        };
        match event {
            Event::Host { done, .. } => done(HostOutcome::Refused),
            Event::Extents { done, .. } => {
                done(Err(HostError::Invalid("the server has stopped".into())));
            }
            Event::CompareAndWrite(compare) => {
                (compare.done)(Compared::Outcome(HostOutcome::Refused));
            }
            _ => {}
        }
    }
}

/// The engine's event for one block operation of a task on `target`;
/// `one_done` takes its outcome. A read, write or trim is a host request
/// (a snapshot's image reads what the snapshot holds); an allocation
/// question goes to the filer's extents; a VERIFY reads and compares here;
/// a COMPARE AND WRITE goes whole to the engine.
fn engine_event(
    target: &Target,
    op: BlockOp,
    one_done: impl FnOnce(Outcome) + Send + 'static,
) -> Event {
    let lun = target.lun;
    let host = |request, done: crate::events::HostCallback| Event::Host {
        target: target.clone(),
        request,
        done,
    };
    match op {
        BlockOp::Read { offset, length } => host(
            target.read(offset, length),
            Box::new(move |outcome| one_done(outcome_of(outcome))),
        ),
        BlockOp::Write { offset, data } => host(
            HostRequest::Change(Change::Write { lun, offset, data }),
            Box::new(move |outcome| one_done(outcome_of(outcome))),
        ),
        BlockOp::Trim { offset, length } => host(
            HostRequest::Change(Change::Trim {
                lun,
                offset,
                length,
            }),
            Box::new(move |outcome| one_done(outcome_of(outcome))),
        ),
        BlockOp::Verify {
            offset,
            length,
            expected,
        } => host(
            target.read(offset, length),
            Box::new(move |outcome| one_done(verified(outcome_of(outcome), expected.as_deref()))),
        ),
        BlockOp::Allocation { offset, length } => Event::Extents {
            target: target.clone(),
            offset,
            length,
            done: Box::new(move |runs| one_done(runs_of(runs))),
        },
        BlockOp::CompareAndWrite {
            offset,
            expected,
            data,
        } => Event::CompareAndWrite(Box::new(CompareRequest {
            target: target.clone(),
            offset,
            expected,
            data,
            done: Box::new(move |compared| one_done(compare_outcome(compared))),
        })),
        BlockOp::ReserveIn { .. } | BlockOp::ReserveOut { .. } => {
            unreachable!("the worker answers reservation commands itself")
        }
    }
}

/// A VERIFY's read, compared with what the blocks must hold (if given).
fn verified(read: Outcome, expected: Option<&[u8]>) -> Outcome {
    match (read, expected) {
        (Outcome::Data(data), Some(expected)) => match first_difference(&data, expected) {
            Some(at) => Outcome::Miscompare(u32::try_from(at).unwrap_or(u32::MAX)),
            None => Outcome::Done,
        },
        (Outcome::Data(_), None) => Outcome::Done,
        (other, _) => other,
    }
}

/// A COMPARE AND WRITE's outcome as the codec takes it.
fn compare_outcome(compared: Compared) -> Outcome {
    match compared {
        Compared::Miscompare(at) => Outcome::Miscompare(at),
        Compared::Outcome(outcome) => outcome_of(outcome),
    }
}

/// The outcomes of one task's operations, gathered.
struct Gather {
    left: usize,
    outcome: Outcome,
    task: TaskId,
    to: Sender<Message>,
}

impl Gather {
    /// One operation's outcome: the first that is not plain success wins.
    fn one_done(&mut self, this: Outcome) {
        if matches!(self.outcome, Outcome::Done) {
            self.outcome = this;
        }
        self.left -= 1;
        if self.left == 0 {
            let outcome = std::mem::replace(&mut self.outcome, Outcome::Done);
            let _ = self.to.send(Message::Done(self.task, outcome));
        }
    }
}

fn outcome_of(outcome: HostOutcome) -> Outcome {
    match outcome {
        HostOutcome::Refused => Outcome::Failed(BlockError::Refused),
        HostOutcome::Busy(_) => Outcome::Failed(BlockError::Busy),
        HostOutcome::Reply(Ok(ReplyData::Data(data))) => Outcome::Data(data),
        HostOutcome::Reply(Ok(_)) => Outcome::Done,
        HostOutcome::Reply(Err(error)) => Outcome::Failed(block_error(&error)),
    }
}

/// The engine's data and hole runs as the codec takes them.
fn runs_of(result: Result<Vec<wafer_core::filer::Extent>, HostError>) -> Outcome {
    match result {
        Ok(extents) => Outcome::Runs(
            extents
                .iter()
                .map(|e| Run {
                    length: e.length,
                    data: e.data,
                })
                .collect(),
        ),
        Err(error) => Outcome::Failed(block_error(&error)),
    }
}

fn block_error(error: &HostError) -> BlockError {
    match error {
        HostError::OutOfRange { .. } => BlockError::OutOfRange,
        HostError::NoSpace { .. } => BlockError::NoSpace,
        HostError::Io => BlockError::Io,
        HostError::NotFound(_) => BlockError::Gone,
        // A volume taken offline under its sessions, as a LUN taken offline.
        HostError::Offline(_) => BlockError::NotReady,
        _ => BlockError::Refused,
    }
}

/// The LUNs `visible` maps that the node serves now, described for the
/// codec at their mapped numbers, and what each reaches in the engine. A
/// LUN's serial and designator follow the LUN (its node-wide LUN ID, or
/// for a snapshot's image a hash of its path), not the number it is mapped
/// at, so two initiators seeing it at two numbers see one device.
fn luns_of(
    catalogue: &Catalogue,
    visible: &[crate::masking::Visible],
    target_name: &str,
) -> (Vec<LunInfo>, Vec<(u16, Target)>) {
    let node = wafer_core::format::fnv1a_64(target_name.as_bytes());
    let mut luns = Vec::new();
    let mut targets = Vec::new();
    for map in visible {
        let name = map.path.strip_prefix("/vol/").unwrap_or_default();
        let Some(export) = catalogue.find(name).filter(|_| !name.is_empty()) else {
            continue;
        };
        let unit = match export.lun_id {
            Some(id) => u64::from(id) & 0x7f_ffff,
            None => 0x80_0000 | (wafer_core::format::fnv1a_64(map.path.as_bytes()) & 0x7f_ffff),
        };
        luns.push(LunInfo {
            number: map.lun_id,
            blocks: export.info.size_bytes / u64::from(BLOCK_BYTES),
            read_only: map.read_only || export.info.read_only,
            serial: format!("wafer{:08x}{unit:06x}", node as u32),
            id: (node << 24) | unit,
            access: wafer_iscsi::Access::Full,
            resets: 0,
            thin: export.thin,
        });
        targets.push((map.lun_id, export.target.clone()));
    }
    (luns, targets)
}

/// A CHAP identifier and challenge from `/dev/urandom`.
fn random_challenge() -> io::Result<Challenge> {
    let mut bytes = [0u8; 1 + wafer_iscsi::chap::CHALLENGE_BYTES];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    let mut challenge = [0u8; wafer_iscsi::chap::CHALLENGE_BYTES];
    challenge.copy_from_slice(&bytes[1..]);
    Ok(Challenge {
        identifier: bytes[0],
        bytes: challenge,
    })
}

/// The reader: reads while the worker keeps up (one permit per input the
/// worker has yet to take), and reports what it read; a read that times
/// out is reported as quiet, and reading goes on.
fn read_loop(mut stream: Stream, to: &Sender<Message>, permits: &Receiver<()>) {
    let mut buffer = vec![0u8; READ_BUFFER_BYTES];
    while permits.recv().is_ok() {
        let message = loop {
            match stream.read(&mut buffer) {
                Ok(0) => break Message::Eof,
                Ok(read) => break Message::Input(buffer[..read].to_vec()),
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(error)
                    if matches!(
                        error.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    if to.send(Message::Quiet).is_err() {
                        return;
                    }
                }
                Err(error) => break Message::ReadFailed(error),
            }
        };
        let last = matches!(message, Message::Eof | Message::ReadFailed(_));
        if to.send(message).is_err() || last {
            return;
        }
    }
}
