//! The NBD front end: listeners, and two threads per connection.
//!
//! A listener thread accepts clients (as `admission` allows: at most
//! [`crate::CONNECTIONS_MAX`] at once, a share per address, a slow handshake giving
//! way to a newcomer) and gives each a **reader** thread. The reader runs the
//! handshake (within the handshake timeout, however the client spreads its
//! bytes, so a silent client cannot hold a thread), then decodes requests and
//! turns each into a host request for the engine, pipelined: it does not wait
//! for one request's reply before reading the next. Replies come back, in the
//! order the engine finishes them, to the connection's **writer** thread,
//! which encodes and sends them, batching what is ready into one write.
//!
//! Mapping of commands:
//!
//! | NBD | engine |
//! |---|---|
//! | READ | `Read` (or `ReadSnapshot` on a `@snapshot` export) |
//! | WRITE, with or without FUA | `Change::Write` |
//! | TRIM, WRITE_ZEROES (also with FAST_ZERO, and with NO_HOLE on a space-reserved LUN) | `Change::Trim`: trimmed ranges read back as zeros, which is all WRITE_ZEROES promises, and a trim is metadata only, so it is also the fast zero |
//! | WRITE_ZEROES with NO_HOLE on a thin LUN | `Change::Write` of zeros; with FAST_ZERO too, refused (`ENOTSUP`) as it is not fast |
//! | FLUSH | answered at once (see below) |
//! | BLOCK_STATUS | `Filer::extents`: runs of data, and holes (which read as zeros) |
//! | CACHE | answered at once: a hint with nothing to pass it to |
//! | DISC | stop reading; the writer sends what is in flight, then closes |
//!
//! NO_HOLE asks that the range stay allocated, so that writing it later
//! cannot fail for lack of space. A space-reserved LUN has its whole size set
//! aside in its volume, so a trimmed range keeps that promise too; a thin
//! LUN's trimmed blocks go back to the volume, so there the zeros are
//! written (and a full volume refuses them with ENOSPC).
//!
//! FLUSH and FUA cost nothing: the engine acknowledges a write only once its
//! NVLog record is durable (fdatasync), so by the time a client can flush,
//! every write it was told about is already on stable storage. BLOCK_STATUS
//! answers for at most [`BLOCK_STATUS_BYTES_MAX`] of the range (the protocol
//! lets a server describe a prefix), so that one request cannot hold the
//! engine thread for long; a block written but not yet in a CP counts as data.
//!
//! Each connection holds at most its allowance of requests and payload in
//! flight (`budget`; a block-status reply counts as its largest size);
//! beyond that the reader stops reading until replies have gone out, so a
//! client that never reads its replies makes the server hold no more than
//! that for it: the engine's replies wait in memory only until the writer
//! sends them. The idle timeout ends a connection that sends no request while
//! it has none in flight, and one whose replies the client leaves unread (the
//! writer blocked) for as long.
//!
//! TLS: with `--tls-cert` the handshake offers `NBD_OPT_STARTTLS` (required
//! with `--tls-require`); when the codec grants it, the reader runs the TLS
//! handshake within the same handshake deadline and goes on over the
//! encrypted stream (`tls`), which its writer shares. The client's
//! certificate identity, if it gave one, is on the stream
//! ([`Stream::peer_identity`]) from then on, for the whole connection, and
//! names it for LUN masking (`crate::nbd_masking`).
//!
//! Hostile input: the codec answers malformed requests with errors and ends
//! the connection on anything that breaks framing; either way only that
//! connection is affected, and the engine validates every request it gets.
//! Bytes that are not TLS after a STARTTLS fail that connection's TLS
//! handshake, and it alone is dropped.

use std::io::{self, BufWriter, Read, Write};
use std::net::Shutdown;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};
use std::thread;
use std::time::{Duration, Instant};

use wafer_core::filer::{Change, Extent as FilerExtent, HostError, HostRequest, ReplyData};
use wafer_nbd::reply::{
    Chunk, Done, Extent, encode_chunk, encode_error_reply, encode_offset_data_header,
    encode_simple_reply, encode_simple_reply_header,
};
use wafer_nbd::{
    Command, DecodeError, Decoded, Handshake, HandshakeError, HandshakeEvent, NbdError, Negotiated,
    Request, RequestDecoder, TlsMode,
};

use crate::admin::NbdCountersStatus;
use crate::admission::{Activity, Admission, ConnectionLimits, Ticket, serve_admitted};
use crate::budget::{Budget, Loans};
use crate::catalogue::{Export, SharedCatalogue, Target};
use crate::events::{Event, ExtentsCallback, HostCallback, HostOutcome};
use crate::nbd_masking::{ExportView, MapWatch, OfflineWatch, Reachable};
use crate::stop::StopSignal;
use crate::stream::{Listener, Stream};
use crate::tls::{TlsError, TlsSettings};

/// The most of a range one block-status reply describes: 16384 blocks.
pub const BLOCK_STATUS_BYTES_MAX: u32 = 64 << 20;
/// What a block-status reply counts for in flight: its largest encoding,
/// eight bytes per block described.
const BLOCK_STATUS_BUDGET_BYTES: u64 = (BLOCK_STATUS_BYTES_MAX / 4096 * 8) as u64;
/// Bytes read from a socket at a time.
const READ_BUFFER_BYTES: usize = 256 * 1024;
/// Bytes of replies gathered before a write.
const WRITE_BUFFER_BYTES: usize = 256 * 1024;

/// What every connection thread needs.
pub(crate) struct Context {
    pub(crate) engine: Sender<Event>,
    pub(crate) catalogue: Arc<SharedCatalogue>,
    pub(crate) counters: Arc<NbdCounters>,
    pub(crate) iscsi_counters: Arc<crate::iscsi_counters::IscsiCounters>,
    pub(crate) stop: Arc<StopSignal>,
    pub(crate) limits: ConnectionLimits,
    pub(crate) admission: Arc<Admission>,
    pub(crate) loans: Arc<Loans>,
    /// The TLS credentials and mode, if the server offers TLS.
    pub(crate) tls: Option<TlsSettings>,
}

/// Starts the accept loop of `listener`.
pub(crate) fn spawn_listener(listener: Listener, context: Arc<Context>) -> io::Result<()> {
    context.stop.add_waker(listener.waker()?);
    thread::Builder::new()
        .name("nbd-listener".into())
        .spawn(move || accept_loop(&listener, &context))?;
    Ok(())
}

fn accept_loop(listener: &Listener, context: &Arc<Context>) {
    loop {
        let (stream, peer) = match listener.accept() {
            Ok(accepted) => accepted,
            Err(error) => {
                // Out of descriptors, say: wait rather than spin.
                crate::log!("NBD accept failed: {error}");
                thread::sleep(Duration::from_millis(100));
                continue;
            }
        };
        if context.stop.is_stopping() {
            break;
        }
        let connection_context = Arc::clone(context);
        let label = peer.clone();
        let taken = serve_admitted(
            &context.admission,
            &context.stop,
            stream,
            (&label, "nbd"),
            move |stream, ticket| serve_connection(stream, &peer, &connection_context, ticket),
        );
        if taken {
            context.counters.accepted.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Why a connection ended early.
#[derive(Debug, thiserror::Error)]
enum ConnectionError {
    #[error("{0}")]
    Io(#[from] io::Error),
    #[error("handshake: {0}")]
    Handshake(#[from] HandshakeError),
    #[error("{0}")]
    Tls(#[from] TlsError),
    #[error("{0}")]
    Decode(#[from] DecodeError),
    #[error("sent no request for {0:?}")]
    Idle(Duration),
}

fn serve_connection(mut stream: Stream, peer: &str, context: &Context, ticket: &Ticket) {
    let outcome = negotiate(&mut stream, context, ticket).and_then(|chosen| match chosen {
        Some((negotiated, export, leftover)) => {
            crate::log!(
                "{peer}: connected to export {:?}{}",
                export.info.name,
                security(&stream)
            );
            let activity = ticket.activity();
            transmit(
                stream,
                peer,
                &negotiated,
                export,
                &leftover,
                context,
                &activity,
            )
        }
        None => {
            stream.close();
            Ok(())
        }
    });
    match outcome {
        Ok(()) => crate::log!("{peer}: disconnected"),
        Err(error) => {
            let benign = matches!(
                error,
                ConnectionError::Io(_)
                    | ConnectionError::Idle(_)
                    | ConnectionError::Tls(TlsError::Io(_))
            );
            if !benign {
                context
                    .counters
                    .protocol_errors
                    .fetch_add(1, Ordering::Relaxed);
            }
            crate::log!("{peer}: dropped: {error}");
        }
    }
}

/// How a connection is secured, for its log line.
fn security(stream: &Stream) -> String {
    match (stream, stream.peer_identity()) {
        (_, Some(identity)) => format!(" over TLS as {identity}"),
        (Stream::Tls(_), None) => " over TLS".to_owned(),
        _ => String::new(),
    }
}

/// Runs the handshake, upgrading `stream` to TLS if the client asks and the
/// server offers it; returns what was agreed, the export, and the bytes
/// after the handshake (requests sent before the answer was read). The
/// connection keeps its place (`ticket`) from before the client hears that
/// the handshake is over.
fn negotiate(
    stream: &mut Stream,
    context: &Context,
    ticket: &Ticket,
) -> Result<Option<(Negotiated, Export, Vec<u8>)>, ConnectionError> {
    let deadline = Deadline {
        at: Instant::now() + context.limits.handshake_timeout,
        limit: context.limits.handshake_timeout,
    };
    let catalogue = context.catalogue.current();
    let san = context.catalogue.san();
    let mode = context.tls.as_ref().map_or(TlsMode::Off, TlsSettings::mode);
    let mut handshake = Handshake::with_tls(mode);
    let mut output = Vec::new();
    let mut buffer = vec![0u8; 64 * 1024];
    send_handshake_output(&mut handshake, stream, &mut output, deadline)?;
    loop {
        limit_to(stream, deadline)?;
        let received = stream.read(&mut buffer)?;
        if received == 0 {
            return Err(handshake.handle_eof().into());
        }
        let mut input = &buffer[..received];
        while !input.is_empty() {
            // Built anew each step: a certificate's name exists once TLS is on.
            let view = Reachable {
                view: ExportView::of(&catalogue, &san, stream.peer_identity()),
                san: &san,
            };
            let event = handshake.handle_input(&mut input, &view)?;
            if matches!(event, Some(HandshakeEvent::Transmission(_))) {
                ticket.negotiated();
            }
            send_handshake_output(&mut handshake, stream, &mut output, deadline)?;
            match event {
                None => {}
                Some(HandshakeEvent::StartTls) => {
                    let settings = context.tls.as_ref().expect("STARTTLS is granted with TLS");
                    // What the client sent after STARTTLS is its first TLS bytes.
                    stream.start_tls(settings, input, &|s| limit_to(s, deadline))?;
                    input = &[];
                    handshake.tls_started();
                }
                Some(HandshakeEvent::Aborted) => return Ok(None),
                Some(HandshakeEvent::Transmission(negotiated)) => {
                    let export = view
                        .view
                        .find(&negotiated.export.name)
                        .cloned()
                        .expect("the handshake found the export in this view");
                    return Ok(Some((negotiated, export, input.to_vec())));
                }
            }
        }
    }
}

fn send_handshake_output(
    handshake: &mut Handshake,
    stream: &mut Stream,
    output: &mut Vec<u8>,
    deadline: Deadline,
) -> io::Result<()> {
    output.clear();
    if handshake.poll_transmit(output) > 0 {
        limit_to(stream, deadline)?;
        stream.write_all(output)?;
    }
    Ok(())
}

/// When the handshake must be over, and the limit that set it.
#[derive(Clone, Copy, Debug)]
struct Deadline {
    at: Instant,
    limit: Duration,
}

/// Limits the stream's next reads and writes to what is left until
/// `deadline`: the handshake's time is a whole, not a limit per read, so a
/// client trickling bytes (or options, or never reading the answers) cannot
/// hold one of the connections for longer.
fn limit_to(stream: &Stream, deadline: Deadline) -> io::Result<()> {
    let left = deadline.at.saturating_duration_since(Instant::now());
    if left.is_zero() {
        let message = format!("the handshake took over {:?}", deadline.limit);
        return Err(io::Error::new(io::ErrorKind::TimedOut, message));
    }
    stream.set_read_timeout(Some(left))?;
    stream.set_write_timeout(Some(left))
}

/// The transmission phase: this thread reads, a writer thread replies. The
/// idle timeout bounds both a read (when nothing is in flight) and a write.
fn transmit(
    mut stream: Stream,
    peer: &str,
    negotiated: &Negotiated,
    export: Export,
    leftover: &[u8],
    context: &Context,
    activity: &Arc<Activity>,
) -> Result<(), ConnectionError> {
    let idle = context.limits.idle_timeout;
    stream.set_read_timeout(idle)?;
    stream.set_write_timeout(idle)?;
    let budget = Arc::new(Budget::new(Arc::clone(&context.loans)));
    let (replies, outgoing) = mpsc::channel();
    let writer = {
        let stream = stream.try_clone()?;
        let budget = Arc::clone(&budget);
        let counters = Arc::clone(&context.counters);
        let structured = negotiated.structured_replies;
        let peer = peer.to_string();
        let activity = Arc::clone(activity);
        thread::Builder::new()
            .name("nbd-writer".into())
            .spawn(move || {
                let writer = ReplyWriter::new(stream, peer, structured, activity, budget);
                writer.run(&outgoing, &counters);
            })?
    };
    let mut dispatcher = Dispatcher {
        mapping: MapWatch::of(
            &context.catalogue,
            stream.peer_identity(),
            &export.info.name,
        ),
        offline: OfflineWatch::of(&context.catalogue, &export.info.name),
        target: export.target,
        thin: export.thin,
        size_bytes: export.info.size_bytes,
        base_allocation: negotiated.base_allocation,
        budget,
        replies,
        engine: context.engine.clone(),
        counters: Arc::clone(&context.counters),
    };
    let read = read_requests(
        &mut stream,
        RequestDecoder::new(negotiated),
        leftover,
        &mut dispatcher,
        idle,
        activity,
    );
    // The writer ends once every reply in flight has been sent.
    drop(dispatcher);
    let _ = writer.join();
    stream.close();
    read
}

fn read_requests(
    stream: &mut Stream,
    mut decoder: RequestDecoder,
    leftover: &[u8],
    dispatcher: &mut Dispatcher,
    idle: Option<Duration>,
    activity: &Activity,
) -> Result<(), ConnectionError> {
    if dispatcher.feed(&mut decoder, leftover)? == Flow::Disconnect {
        return Ok(());
    }
    let mut buffer = vec![0u8; READ_BUFFER_BYTES];
    loop {
        dispatcher.budget.wait_for_room(decoder.buffered_bytes());
        let received = match stream.read(&mut buffer) {
            Ok(received) => received,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            // A client waiting for replies is not idle; the writer's own
            // timeout covers one that does not read them.
            Err(error) if timed_out(&error) => match (idle, dispatcher.budget.is_empty()) {
                (Some(idle), true) => return Err(ConnectionError::Idle(idle)),
                _ => continue,
            },
            Err(error) => return Err(error.into()),
        };
        if received == 0 {
            decoder.handle_eof()?;
            return Ok(());
        }
        activity.touch();
        if dispatcher.feed(&mut decoder, &buffer[..received])? == Flow::Disconnect {
            return Ok(());
        }
    }
}

/// Whether the reader goes on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Flow {
    Continue,
    Disconnect,
}

/// Turns decoded requests into engine requests and immediate replies.
struct Dispatcher {
    /// For a masked client, whether its export is still mapped to it.
    mapping: Option<MapWatch>,
    /// Whether its LUN has been taken offline.
    offline: OfflineWatch,
    target: Target,
    /// Whether the LUN is thin: a write-zeroes with NO_HOLE then writes
    /// zeros, which holds their blocks, where a trim would give them back.
    thin: bool,
    size_bytes: u64,
    base_allocation: Option<u32>,
    budget: Arc<Budget>,
    replies: Sender<Outgoing>,
    engine: Sender<Event>,
    counters: Arc<NbdCounters>,
}

impl Dispatcher {
    fn feed(
        &mut self,
        decoder: &mut RequestDecoder,
        mut input: &[u8],
    ) -> Result<Flow, DecodeError> {
        while let Some(decoded) = decoder.decode(&mut input)? {
            // Requests already received are not carried out for a client
            // that is gone: their replies could not be sent.
            if self.budget.is_abandoned() || self.dispatch(decoded) == Flow::Disconnect {
                return Ok(Flow::Disconnect);
            }
        }
        Ok(Flow::Continue)
    }

    fn dispatch(&mut self, decoded: Decoded) -> Flow {
        if let Some(mapping) = &mut self.mapping
            && !mapping.still_mapped()
        {
            crate::log!(
                "NBD: {} was unmapped from the connection's certificate name: disconnected",
                mapping.path()
            );
            return Flow::Disconnect;
        }
        let request = match decoded {
            Decoded::Request(request) => request,
            Decoded::Rejected(rejected) => {
                let message = rejected.reason.to_string();
                self.answer(rejected.handle, Body::Error(rejected.error(), message));
                return Flow::Continue;
            }
        };
        self.counters.count(&request);
        if let Err(error) = request.check_range(self.size_bytes) {
            let message = format!(
                "offset {} + length {} lies beyond the export's {} bytes",
                request.offset, request.length, self.size_bytes
            );
            self.answer(request.handle, Body::Error(error, message));
            return Flow::Continue;
        }
        let reaches_data = !matches!(
            request.command,
            Command::Disconnect | Command::Flush | Command::Cache
        );
        if reaches_data && self.offline.is_offline() {
            let message = "the LUN is offline (lun offline)".to_string();
            self.answer(request.handle, Body::Error(NbdError::Io, message));
            return Flow::Continue;
        }
        match request.command {
            Command::Disconnect => return Flow::Disconnect,
            // Every write this server has acknowledged is already durable in
            // the NVLog (the engine answers a write only after its record's
            // fdatasync), so a flush has nothing left to wait for.
            Command::Flush | Command::Cache => self.answer(request.handle, Body::Done),
            Command::BlockStatus => self.block_status(&request),
            Command::Read => self.read(&request),
            Command::Write { ref data } if data.is_empty() => {
                self.answer(request.handle, Body::Done);
            }
            Command::Write { data } => self.write(request.handle, request.offset, data),
            Command::Trim | Command::WriteZeroes if request.length == 0 => {
                self.answer(request.handle, Body::Done);
            }
            Command::WriteZeroes
                if self.thin && request.flags.no_hole() && request.flags.fast_zero() =>
            {
                let message = "zeros that must stay allocated on a thin LUN are written, \
                               which is not fast"
                    .to_string();
                self.answer(request.handle, Body::Error(NbdError::NotSupported, message));
            }
            Command::WriteZeroes if self.thin && request.flags.no_hole() => {
                let zeros = vec![0; request.length as usize];
                self.write(request.handle, request.offset, zeros);
            }
            Command::Trim | Command::WriteZeroes => {
                let change = Change::Trim {
                    lun: self.target.lun,
                    offset: request.offset,
                    length: u64::from(request.length),
                };
                self.submit(request.handle, Expect::Done, 0, HostRequest::Change(change));
            }
        }
        Flow::Continue
    }

    /// Writes `data` at `offset`, answering `handle`.
    fn write(&mut self, handle: u64, offset: u64, data: Vec<u8>) {
        let bytes = data.len() as u64;
        let change = Change::Write {
            lun: self.target.lun,
            offset,
            data,
        };
        self.submit(handle, Expect::Done, bytes, HostRequest::Change(change));
    }

    fn read(&mut self, request: &Request) {
        let (offset, length) = (request.offset, u64::from(request.length));
        if length == 0 {
            let body = Body::Data {
                offset,
                data: Vec::new(),
            };
            return self.answer(request.handle, body);
        }
        let read = self.target.read(offset, length);
        self.submit(
            request.handle,
            Expect::Data { offset, length },
            length,
            read,
        );
    }

    fn block_status(&mut self, request: &Request) {
        let Some(context_id) = self.base_allocation.filter(|_| request.length > 0) else {
            let message = "block status of an empty range".into();
            return self.answer(
                request.handle,
                Body::Error(NbdError::InvalidArgument, message),
            );
        };
        self.budget.acquire(BLOCK_STATUS_BUDGET_BYTES);
        let (replies, handle) = (self.replies.clone(), request.handle);
        let only_one = request.flags.request_one();
        let done: ExtentsCallback = Box::new(move |result| {
            let body = match result {
                Ok(extents) => Body::BlockStatus {
                    context_id,
                    extents: nbd_extents(&extents, only_one),
                },
                Err(refusal) => Body::Error(nbd_error(&refusal), refusal.to_string()),
            };
            let _ = replies.send(Outgoing {
                handle,
                body,
                budget_bytes: BLOCK_STATUS_BUDGET_BYTES,
            });
        });
        let event = Event::Extents {
            target: self.target.clone(),
            offset: request.offset,
            length: u64::from(request.length.min(BLOCK_STATUS_BYTES_MAX)),
            done,
        };
        if let Err(mpsc::SendError(Event::Extents { done, .. })) = self.engine.send(event) {
            done(Err(HostError::Invalid("the server has stopped".into())));
        }
    }

    /// Replies without the engine.
    fn answer(&self, handle: u64, body: Body) {
        self.budget.acquire(0);
        let reply = Outgoing {
            handle,
            body,
            budget_bytes: 0,
        };
        // The writer outlives this dispatcher (it holds the channel open).
        let _ = self.replies.send(reply);
    }

    /// Sends a request to the engine; its reply goes to the writer.
    fn submit(&self, handle: u64, expect: Expect, budget_bytes: u64, request: HostRequest) {
        self.budget.acquire(budget_bytes);
        let replies = self.replies.clone();
        let done: HostCallback = Box::new(move |outcome| {
            let body = expect.body(outcome);
            let _ = replies.send(Outgoing {
                handle,
                body,
                budget_bytes,
            });
        });
        let target = self.target.clone();
        if let Err(mpsc::SendError(Event::Host { done, .. })) = self.engine.send(Event::Host {
            target,
            request,
            done,
        }) {
            done(HostOutcome::Refused);
        }
    }
}

/// What a request's reply should carry on success.
#[derive(Clone, Copy, Debug)]
enum Expect {
    Done,
    Data { offset: u64, length: u64 },
}

impl Expect {
    fn body(self, outcome: HostOutcome) -> Body {
        let result = match outcome {
            HostOutcome::Refused => {
                return Body::Error(NbdError::ShuttingDown, "the server is stopping".into());
            }
            HostOutcome::Busy(busy) => return Body::Error(NbdError::OutOfMemory, busy.to_string()),
            HostOutcome::Reply(result) => result,
        };
        match (self, result) {
            (_, Err(refusal)) => Body::Error(nbd_error(&refusal), refusal.to_string()),
            (Expect::Done, Ok(_)) => Body::Done,
            (Expect::Data { offset, length }, Ok(ReplyData::Data(data)))
                if data.len() as u64 == length =>
            {
                Body::Data { offset, data }
            }
            (Expect::Data { .. }, Ok(other)) => Body::Error(
                NbdError::Io,
                format!("the engine answered a read with {other:?}"),
            ),
        }
    }
}

/// The filer's runs in `base:allocation` terms: a hole is unallocated and
/// reads as zeros. With `NBD_CMD_FLAG_REQ_ONE` only the first run is sent.
fn nbd_extents(runs: &[FilerExtent], only_one: bool) -> Vec<Extent> {
    let count = if only_one { 1 } else { runs.len() };
    runs.iter()
        .take(count)
        .map(|run| Extent {
            length: u32::try_from(run.length).expect("runs lie within one request's range"),
            hole: !run.data,
            zero: !run.data,
        })
        .collect()
}

/// The NBD error for an engine refusal.
fn nbd_error(refusal: &HostError) -> NbdError {
    match refusal {
        HostError::NoSpace { .. } => NbdError::NoSpace,
        // A volume taken offline under its connection: the device is gone
        // until it comes back, as a disk's would be.
        HostError::Io | HostError::Offline(_) => NbdError::Io,
        // OutOfRange, NotFound (a LUN destroyed under its connection),
        // Invalid and anything newer: the request cannot be carried out.
        _ => NbdError::InvalidArgument,
    }
}

/// One reply for the writer.
struct Outgoing {
    handle: u64,
    body: Body,
    budget_bytes: u64,
}

/// A reply's content.
enum Body {
    Done,
    Data {
        offset: u64,
        data: Vec<u8>,
    },
    BlockStatus {
        context_id: u32,
        extents: Vec<Extent>,
    },
    Error(NbdError, String),
}

/// A connection's writer: sends replies, batching what is ready, until the
/// dispatcher's side of the channel closes.
struct ReplyWriter {
    writer: BufWriter<Stream>,
    peer: String,
    structured: bool,
    activity: Arc<Activity>,
    budget: Arc<Budget>,
    /// False once a write failed: later replies are drained unsent.
    healthy: bool,
}

impl ReplyWriter {
    fn new(
        stream: Stream,
        peer: String,
        structured: bool,
        activity: Arc<Activity>,
        budget: Arc<Budget>,
    ) -> ReplyWriter {
        ReplyWriter {
            writer: BufWriter::with_capacity(WRITE_BUFFER_BYTES, stream),
            peer,
            structured,
            activity,
            budget,
            healthy: true,
        }
    }

    fn run(mut self, outgoing: &Receiver<Outgoing>, counters: &NbdCounters) {
        let mut header = Vec::with_capacity(64);
        loop {
            let reply = match outgoing.try_recv() {
                Ok(reply) => reply,
                Err(TryRecvError::Disconnected) => break,
                Err(TryRecvError::Empty) => {
                    self.flush();
                    match outgoing.recv() {
                        Ok(reply) => reply,
                        Err(_) => break,
                    }
                }
            };
            if matches!(reply.body, Body::Error(..)) {
                counters.errors.fetch_add(1, Ordering::Relaxed);
            }
            if self.healthy {
                header.clear();
                let data = encode_reply(&mut header, &reply, self.structured);
                let written = self
                    .writer
                    .write_all(&header)
                    .and_then(|()| self.writer.write_all(data));
                self.check(written);
            }
            self.budget.release(reply.budget_bytes);
        }
        self.flush();
    }

    fn flush(&mut self) {
        if self.healthy {
            let flushed = self.writer.flush();
            self.check(flushed);
        }
    }

    /// After a failed write the client is gone, or has left its replies
    /// unread for the idle timeout: the connection ends (its reader stops
    /// too), and replies still in flight are drained, their budget released.
    fn check(&mut self, written: io::Result<()>) {
        let Err(error) = written else {
            return self.activity.touch();
        };
        self.healthy = false;
        self.budget.abandon();
        if timed_out(&error) {
            crate::log!("{}: dropped: it leaves its replies unread", self.peer);
        }
        let _ = self.writer.get_ref().shutdown(Shutdown::Both);
    }
}

/// Whether a socket error is a read or write timeout running out.
fn timed_out(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

/// Encodes a reply's header into `out`; returns the data to send after it.
fn encode_reply<'a>(out: &mut Vec<u8>, reply: &'a Outgoing, structured: bool) -> &'a [u8] {
    let handle = reply.handle;
    match &reply.body {
        Body::Done => encode_simple_reply(out, handle, Ok(&[])),
        Body::Data { data, .. } if data.is_empty() && structured => {
            encode_chunk(out, handle, Done::Yes, &Chunk::None);
        }
        Body::Data { offset, data } => {
            match structured {
                true => encode_offset_data_header(out, handle, Done::Yes, *offset, data.len()),
                false => encode_simple_reply_header(out, handle, None),
            }
            return data;
        }
        Body::BlockStatus {
            context_id,
            extents,
        } => {
            let chunk = Chunk::BlockStatus {
                context_id: *context_id,
                extents,
            };
            encode_chunk(out, handle, Done::Yes, &chunk);
        }
        Body::Error(error, message) => encode_error_reply(out, handle, *error, message, structured),
    }
    &[]
}

/// The front end's counters, shared by every connection.
#[derive(Debug, Default)]
pub(crate) struct NbdCounters {
    accepted: AtomicU64,
    protocol_errors: AtomicU64,
    reads: AtomicU64,
    read_bytes: AtomicU64,
    writes: AtomicU64,
    write_bytes: AtomicU64,
    trims: AtomicU64,
    flushes: AtomicU64,
    block_status: AtomicU64,
    errors: AtomicU64,
}

impl NbdCounters {
    fn count(&self, request: &Request) {
        let length = u64::from(request.length);
        let add = |counter: &AtomicU64, n: u64| {
            counter.fetch_add(n, Ordering::Relaxed);
        };
        match request.command {
            Command::Read => {
                add(&self.reads, 1);
                add(&self.read_bytes, length);
            }
            Command::Write { .. } => {
                add(&self.writes, 1);
                add(&self.write_bytes, length);
            }
            Command::Trim | Command::WriteZeroes => add(&self.trims, 1),
            Command::Flush => add(&self.flushes, 1),
            Command::BlockStatus => add(&self.block_status, 1),
            Command::Disconnect | Command::Cache => {}
        }
    }

    /// The counters now, for `sysstat`.
    pub(crate) fn status(&self, connections_open: usize) -> NbdCountersStatus {
        let get = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        NbdCountersStatus {
            connections_open: connections_open as u64,
            connections_accepted: get(&self.accepted),
            protocol_errors: get(&self.protocol_errors),
            reads: get(&self.reads),
            read_bytes: get(&self.read_bytes),
            writes: get(&self.writes),
            write_bytes: get(&self.write_bytes),
            trims: get(&self.trims),
            flushes: get(&self.flushes),
            block_status: get(&self.block_status),
            errors: get(&self.errors),
        }
    }
}
