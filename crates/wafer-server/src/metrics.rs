//! `--metrics ADDR`: the counters of `sysstat` and `statit` for Prometheus,
//! over plain HTTP (`GET /metrics`).
//!
//! A scrape asks the engine for the same [`SysstatReport`] the admin socket's
//! `sysstat` gets (every aggregate summed, but CPs labelled by aggregate and
//! every disk by aggregate and name; the NBD and iSCSI front ends; the NVLog,
//! which the aggregates share, so it has no aggregate label; the node's
//! Flash Cache, `wafer_flash_cache_*`, only on a node that has one), so the
//! two never disagree, and
//! renders it in the Prometheus text exposition format (version 0.0.4):
//! `# HELP` and `# TYPE` lines, then samples, names `wafer_…`, counters
//! ending `_total`, times in seconds. The engine answers between events, as
//! it answers an admin request; a scrape costs it one report.
//!
//! The responder is a few lines on a `std` `TcpListener`, one thread taking
//! one connection at a time: a request head of at most
//! [`REQUEST_BYTES_MAX`] bytes, read within [`IO_TIMEOUT`], answered and
//! closed (after draining what the client still sends, for at most a second
//! and a MiB, so that its response is not lost to a reset). Anything other
//! than `GET /metrics` gets 400, 404 or 405; nothing a client sends reaches
//! the engine but the request for a report. It has no access control, like
//! NBD over TCP without TLS: it is for a loopback or trusted address.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::mpsc::{self, Sender};
use std::thread;
use std::time::Duration;

use crate::admin::{
    AdminReply, AdminRequest, AdminResponse, AggregateCpStatus, FlashCacheStatus, FlashPoolStats,
    SysstatReport,
};
use crate::error::ServeError;
use crate::events::Event;
use crate::exposition::Exposition;
use crate::stop::StopSignal;

/// The most bytes of a request head (request line and headers) read.
const REQUEST_BYTES_MAX: usize = 8192;
/// How long a client has to send its request head, and to take the
/// response.
const IO_TIMEOUT: Duration = Duration::from_secs(5);
/// How long, and for how many bytes, a closing connection is drained.
const LINGER_TIMEOUT: Duration = Duration::from_secs(1);
const LINGER_BYTES_MAX: u64 = 1 << 20;
/// How long a scrape waits for the engine's report.
const REPORT_TIMEOUT: Duration = Duration::from_secs(10);
/// `sysstat`'s CP type letters.
const CP_TYPES: [&str; 7] = ["T", "F", "B", "H", "U", "S", "Z"];
/// The exposition format's content type.
const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Binds the metrics listener (before anything is changed, like the NBD
/// listeners, so an address in use refuses the start).
pub(crate) fn bind(address: SocketAddr) -> Result<TcpListener, ServeError> {
    TcpListener::bind(address).map_err(|error| ServeError::Listen {
        address: address.to_string(),
        error,
    })
}

/// Starts answering scrapes; returns the URL to scrape.
pub(crate) fn spawn(
    listener: TcpListener,
    engine: Sender<Event>,
    stop: &Arc<StopSignal>,
) -> io::Result<String> {
    let address = listener.local_addr()?;
    stop.add_waker(Box::new(move || {
        let _ = TcpStream::connect(address);
    }));
    let stop = Arc::clone(stop);
    thread::Builder::new()
        .name("metrics".into())
        .spawn(move || accept_loop(&listener, &engine, &stop))?;
    Ok(format!("http://{address}/metrics"))
}

fn accept_loop(listener: &TcpListener, engine: &Sender<Event>, stop: &StopSignal) {
    for stream in listener.incoming() {
        if stop.is_stopping() {
            break;
        }
        let Ok(stream) = stream else { continue };
        // A client that goes away midway is its own problem.
        let _ = answer(stream, engine);
    }
}

/// Reads one request and answers it.
fn answer(mut stream: TcpStream, engine: &Sender<Event>) -> io::Result<()> {
    stream.set_read_timeout(Some(IO_TIMEOUT))?;
    stream.set_write_timeout(Some(IO_TIMEOUT))?;
    let response = match read_head(&mut stream)? {
        Some(head) => respond(&head, engine),
        None => Response::error(400, "Bad Request"),
    };
    stream.write_all(&response.encode())?;
    linger(stream)
}

/// Closes the connection once the client has had the response: the
/// writing side first, then what the client still sends (the rest of an
/// oversized head) is read and dropped, up to a bound, so that the close
/// does not reset the connection before the client reads the response.
fn linger(mut stream: TcpStream) -> io::Result<()> {
    stream.shutdown(Shutdown::Write)?;
    stream.set_read_timeout(Some(LINGER_TIMEOUT))?;
    let mut rest = (&mut stream).take(LINGER_BYTES_MAX);
    io::copy(&mut rest, &mut io::sink()).map(|_| ())
}

/// The request head, up to the blank line; `None` if it is longer than
/// [`REQUEST_BYTES_MAX`], not text, or ends before the blank line.
fn read_head(stream: &mut impl Read) -> io::Result<Option<String>> {
    let mut head = Vec::new();
    let mut buffer = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && !head.windows(2).any(|w| w == b"\n\n") {
        if head.len() > REQUEST_BYTES_MAX {
            return Ok(None);
        }
        match stream.read(&mut buffer) {
            Ok(0) => return Ok(None),
            Ok(n) => head.extend_from_slice(&buffer[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return Ok(None);
            }
            Err(e) => return Err(e),
        }
    }
    Ok(String::from_utf8(head).ok())
}

/// The answer to a request head.
fn respond(head: &str, engine: &Sender<Event>) -> Response {
    let mut words = head.lines().next().unwrap_or("").split(' ');
    let (method, target, version) = (words.next(), words.next(), words.next());
    let well_formed = words.next().is_none()
        && version.is_some_and(|v| v.starts_with("HTTP/1."))
        && target.is_some_and(|t| t.starts_with('/'));
    let path = target.map(|t| t.split('?').next().unwrap_or(t));
    match (well_formed, method, path) {
        (false, _, _) => Response::error(400, "Bad Request"),
        (true, _, Some(path)) if path != "/metrics" => Response::error(404, "Not Found"),
        (true, Some("GET"), _) => scrape(engine),
        (true, _, _) => Response::error(405, "Method Not Allowed"),
    }
}

/// Asks the engine for its report and renders it.
fn scrape(engine: &Sender<Event>) -> Response {
    let (reply, response) = mpsc::channel();
    let request = AdminRequest::Sysstat;
    if engine.send(Event::Admin { request, reply }).is_err() {
        return Response::error(503, "Service Unavailable");
    }
    match response.recv_timeout(REPORT_TIMEOUT) {
        Ok(AdminResponse::Ok(AdminReply::Sysstat(report))) => Response {
            status: (200, "OK"),
            content_type: CONTENT_TYPE,
            body: render(&report),
        },
        _ => Response::error(503, "Service Unavailable"),
    }
}

/// An HTTP/1.1 response, closed after it is sent.
struct Response {
    status: (u16, &'static str),
    content_type: &'static str,
    body: String,
}

impl Response {
    fn error(code: u16, reason: &'static str) -> Response {
        Response {
            status: (code, reason),
            content_type: "text/plain; charset=utf-8",
            body: format!("{code} {reason}\n"),
        }
    }

    fn encode(&self) -> Vec<u8> {
        let (code, reason) = self.status;
        let mut bytes = format!(
            "HTTP/1.1 {code} {reason}\r\nContent-Type: {}\r\nContent-Length: {}\r\n\
             Connection: close\r\n\r\n",
            self.content_type,
            self.body.len()
        )
        .into_bytes();
        bytes.extend_from_slice(self.body.as_bytes());
        bytes
    }
}

/// Nanoseconds as seconds, the exposition's unit of time.
fn seconds(ns: u64) -> f64 {
    ns as f64 / 1e9
}

/// The report in the exposition format.
fn render(report: &SysstatReport) -> String {
    let mut out = Exposition::default();
    node_metrics(&mut out, report);
    cp_metrics(&mut out, report);
    read_metrics(&mut out, report);
    disk_metrics(&mut out, report);
    front_end_metrics(&mut out, report);
    nvlog_metrics(&mut out, report);
    if let Some(flash) = &report.flash_cache {
        flash_cache_metrics(&mut out, flash);
    }
    if !report.flash_pool.is_empty() {
        flash_pool_metrics(&mut out, &report.flash_pool);
    }
    out.finish()
}

fn node_metrics(out: &mut Exposition, r: &SysstatReport) {
    let uptime = "Seconds since the server started.";
    out.gauge("wafer_uptime_seconds", uptime, seconds(r.uptime_ns));
    let cpu = "CPU time the server process has used, user and system, in seconds.";
    out.counter("wafer_cpu_seconds_total", cpu, seconds(r.cpu_time_ns));
    let cp = "The newest committed consistency point (the highest of the aggregates').";
    out.gauge("wafer_committed_cp", cp, r.committed_cp as f64);
}

/// Each aggregate's CPs, labelled by aggregate: every aggregate takes its
/// own (the node starts one in each with changes when any starts one).
fn cp_metrics(out: &mut Exposition, r: &SysstatReport) {
    let help = "Consistency points completed, by aggregate and sysstat's type letter (T \
                timer, F full NVLog half, B back-to-back, H high-water mark, U flush, S \
                snapshot, Z sync).";
    out.counters("wafer_cps_total", help);
    for aggr in &r.aggregates {
        // Every type from the start, 0 until it happens, so rates see each.
        let mut by_type: std::collections::BTreeMap<&str, u64> =
            CP_TYPES.iter().map(|letter| (*letter, 0)).collect();
        by_type.extend(aggr.cps_by_type.iter().map(|(l, n)| (l.as_str(), *n)));
        for (letter, n) in by_type {
            let labels = [("aggregate", aggr.aggregate.as_str()), ("type", letter)];
            out.sample("wafer_cps_total", &labels, n as f64);
        }
    }
    let per_aggregate =
        |out: &mut Exposition, name: &str, value: &dyn Fn(&AggregateCpStatus) -> f64| {
            for aggr in &r.aggregates {
                out.sample(name, &[("aggregate", aggr.aggregate.as_str())], value(aggr));
            }
        };
    let waits = "Host changes that waited for a CP to free an NVLog half (back-to-back), by \
                 aggregate.";
    out.counters("wafer_cp_back_to_back_waits_total", waits);
    per_aggregate(out, "wafer_cp_back_to_back_waits_total", &|a| {
        a.back_to_back_waits as f64
    });
    let time = "Seconds CPs ran, from start to commit, by aggregate.";
    out.counters("wafer_cp_seconds_total", time);
    per_aggregate(out, "wafer_cp_seconds_total", &|a| seconds(a.cp_time_ns));
    let stripes = "Stripes written by CPs: whole, or in part with parity by subtraction, by \
                   addition, or reconstructed first.";
    out.by_kind(
        "wafer_stripes_written_total",
        stripes,
        &[
            ("full", r.full_stripes),
            ("subtraction", r.partial_stripes_subtraction),
            ("addition", r.partial_stripes_addition),
            ("reconstruct", r.partial_stripes_reconstruct),
        ],
    );
    let blocks = "4 KiB blocks written by CPs: data, metadata, parity.";
    out.by_kind(
        "wafer_blocks_written_total",
        blocks,
        &[
            ("data", r.data_blocks_written),
            ("meta", r.meta_blocks_written),
            ("parity", r.parity_blocks_written),
        ],
    );
    let parity = "Disk reads for partial-stripe parity.";
    out.counter("wafer_parity_reads_total", parity, r.parity_reads as f64);
    let merge = "Disk reads to merge partial-block writes.";
    out.counter(
        "wafer_partial_write_reads_total",
        merge,
        r.partial_write_reads as f64,
    );
}

fn read_metrics(out: &mut Exposition, r: &SysstatReport) {
    let cache = "Host reads, by whether the buffer cache held them (hit) or not (miss).";
    out.counters("wafer_cache_reads_total", cache);
    out.sample(
        "wafer_cache_reads_total",
        &[("result", "hit")],
        r.cache_hits as f64,
    );
    out.sample(
        "wafer_cache_reads_total",
        &[("result", "miss")],
        r.cache_misses as f64,
    );
    let counters = [
        (
            "wafer_read_chains_total",
            "Disk read chains issued for data.",
            r.read_chains,
        ),
        (
            "wafer_read_chain_blocks_total",
            "4 KiB blocks read in those chains.",
            r.read_chain_blocks,
        ),
        (
            "wafer_blocks_repaired_total",
            "Blocks whose checksum or identity failed on a read and that RAID repaired.",
            r.blocks_repaired,
        ),
        (
            "wafer_degraded_reads_total",
            "Blocks reconstructed from parity because their disk is failed.",
            r.degraded_reads,
        ),
        (
            "wafer_unrecoverable_blocks_total",
            "Blocks that could not be recovered (data lost).",
            r.unrecoverable_blocks,
        ),
        (
            "wafer_rebuilt_blocks_total",
            "Blocks written onto a spare by reconstruction.",
            r.rebuilt_blocks,
        ),
        (
            "wafer_rebuilds_completed_total",
            "Reconstructions onto a spare completed.",
            r.rebuilds_completed,
        ),
    ];
    for (name, help, value) in counters {
        out.counter(name, help, value as f64);
    }
}

/// `statit`'s raw material: per disk, labelled by aggregate and disk name.
fn disk_metrics(out: &mut Exposition, r: &SysstatReport) {
    let reads = "Disk read I/Os: user (host data, metadata, repairs, scrub, reconstruction) \
                 and cp (partial-stripe parity), as statit counts them.";
    out.counters("wafer_disk_reads_total", reads);
    for d in &r.disks {
        let disk = [
            ("aggregate", d.aggregate.as_str()),
            ("disk", d.name.as_str()),
        ];
        for (kind, ios) in [("user", d.user_reads), ("cp", d.cp_reads)] {
            out.sample(
                "wafer_disk_reads_total",
                &[disk[0], disk[1], ("kind", kind)],
                ios as f64,
            );
        }
    }
    let blocks = "4 KiB blocks those reads moved.";
    out.counters("wafer_disk_read_blocks_total", blocks);
    for d in &r.disks {
        let disk = [
            ("aggregate", d.aggregate.as_str()),
            ("disk", d.name.as_str()),
        ];
        for (kind, n) in [("user", d.user_read_blocks), ("cp", d.cp_read_blocks)] {
            out.sample(
                "wafer_disk_read_blocks_total",
                &[disk[0], disk[1], ("kind", kind)],
                n as f64,
            );
        }
    }
    type Get = fn(&crate::admin::DiskCountersStatus) -> f64;
    let per_disk: [(&str, &str, Get); 3] = [
        ("wafer_disk_writes_total", "Disk write I/Os.", |d| {
            d.writes as f64
        }),
        (
            "wafer_disk_write_blocks_total",
            "4 KiB blocks written to the disk.",
            |d| d.write_blocks as f64,
        ),
        (
            "wafer_disk_io_seconds_total",
            "Seconds of the disk's I/Os from issue to completion, summed.",
            |d| seconds(d.io_time_ns),
        ),
    ];
    for (name, help, get) in per_disk {
        out.counters(name, help);
        for d in &r.disks {
            let disk = [
                ("aggregate", d.aggregate.as_str()),
                ("disk", d.name.as_str()),
            ];
            out.sample(name, &disk, get(d));
        }
    }
}

fn front_end_metrics(out: &mut Exposition, r: &SysstatReport) {
    let n = &r.nbd;
    let open = "Client connections open now, NBD and iSCSI.";
    out.gauge("wafer_connections_open", open, n.connections_open as f64);
    let nbd = [("protocol", "nbd")];
    let per_protocol = [
        (
            "wafer_connections_accepted_total",
            "Client connections accepted since start, by protocol.",
            n.connections_accepted,
        ),
        (
            "wafer_protocol_errors_total",
            "Connections dropped for breaking the protocol, by protocol.",
            n.protocol_errors,
        ),
        (
            "wafer_request_errors_total",
            "Requests answered with an error, by protocol.",
            n.errors,
        ),
    ];
    for (name, help, value) in per_protocol {
        out.counters(name, help);
        out.sample(name, &nbd, value as f64);
    }
    request_metrics(out, r);
}

/// Requests by protocol and operation: NBD's commands, and the block
/// operations iSCSI's SCSI commands became (an allocation query, GET LBA
/// STATUS, is iSCSI's block status).
fn request_metrics(out: &mut Exposition, r: &SysstatReport) {
    let (n, i) = (&r.nbd, &r.iscsi);
    let requests = [
        ("nbd", "read", n.reads),
        ("nbd", "write", n.writes),
        ("nbd", "trim", n.trims),
        ("nbd", "flush", n.flushes),
        ("nbd", "block_status", n.block_status),
        ("iscsi", "read", i.reads),
        ("iscsi", "write", i.writes),
        ("iscsi", "trim", i.trims),
        ("iscsi", "block_status", i.allocation_queries),
        ("iscsi", "verify", i.verifies),
        ("iscsi", "compare_and_write", i.compare_and_writes),
        ("iscsi", "reservation", i.reservations),
    ];
    let help = "Requests received, by protocol and operation.";
    out.counters("wafer_requests_total", help);
    for (protocol, op, count) in requests {
        let labels = [("protocol", protocol), ("op", op)];
        out.sample("wafer_requests_total", &labels, count as f64);
    }
    let bytes = [
        ("nbd", "read", n.read_bytes),
        ("nbd", "write", n.write_bytes),
        ("iscsi", "read", i.read_bytes),
        ("iscsi", "write", i.write_bytes),
    ];
    let help = "Bytes requests asked to read or write, by protocol and operation.";
    out.counters("wafer_request_bytes_total", help);
    for (protocol, op, count) in bytes {
        let labels = [("protocol", protocol), ("op", op)];
        out.sample("wafer_request_bytes_total", &labels, count as f64);
    }
}

fn nvlog_metrics(out: &mut Exposition, r: &SysstatReport) {
    let n = &r.nvlog;
    let counters = [
        (
            "wafer_nvlog_written_bytes_total",
            "Bytes written to the NVLog file (records, terminators, resets).",
            n.bytes_written,
        ),
        (
            "wafer_nvlog_appends_total",
            "Records appended to the NVLog.",
            n.appends,
        ),
        (
            "wafer_nvlog_writes_total",
            "pwrite calls on the NVLog file.",
            n.writes,
        ),
        (
            "wafer_nvlog_syncs_total",
            "fdatasync calls on the NVLog file: one per group commit.",
            n.syncs,
        ),
    ];
    for (name, help, value) in counters {
        out.counter(name, help, value as f64);
    }
}

/// The Flash Cache's `ext_cache_obj` counters, in 4 KiB blocks; present
/// only on a node that has one.
fn flash_cache_metrics(out: &mut Exposition, f: &FlashCacheStatus) {
    let counters = [
        (
            "wafer_flash_cache_accesses_total",
            "Blocks of disk reads looked up in the Flash Cache (ext_cache_obj accesses).",
            f.accesses,
        ),
        (
            "wafer_flash_cache_hits_total",
            "Blocks found in the Flash Cache (ext_cache_obj hit).",
            f.hits,
        ),
        (
            "wafer_flash_cache_misses_total",
            "Blocks not found in the Flash Cache (ext_cache_obj miss).",
            f.misses,
        ),
        (
            "wafer_flash_cache_inserts_total",
            "Blocks written into the Flash Cache as the buffer cache evicted them.",
            f.inserts,
        ),
        (
            "wafer_flash_cache_evicts_total",
            "Blocks dropped from the Flash Cache for their slot (FIFO).",
            f.evicts,
        ),
        (
            "wafer_flash_cache_invalidates_total",
            "Blocks dropped from the Flash Cache because their home on disk was written.",
            f.invalidates,
        ),
        (
            "wafer_flash_cache_disk_reads_replaced_total",
            "Blocks read from the Flash Cache instead of disk.",
            f.disk_reads_replaced,
        ),
        (
            "wafer_flash_cache_read_errors_total",
            "Flash Cache copies unreadable or failing their check, read from disk instead.",
            f.read_errors,
        ),
    ];
    for (name, help, value) in counters {
        out.counter(name, help, value as f64);
    }
    let size = "Blocks (slots) of the Flash Cache device.";
    out.gauge("wafer_flash_cache_blocks", size, f.blocks as f64);
    let used = "Blocks the Flash Cache holds copies of.";
    out.gauge("wafer_flash_cache_used_blocks", used, f.used as f64);
    let failed = "1 if the Flash Cache device has failed (every read goes to disk), else 0.";
    out.gauge(
        "wafer_flash_cache_failed",
        failed,
        u8::from(f.failed).into(),
    );
}

/// Each hybrid aggregate's Flash Pool (`wafl_hya_per_aggr`), labelled by
/// aggregate, in 4 KiB blocks; present only while one serves.
fn flash_pool_metrics(out: &mut Exposition, pools: &[FlashPoolStats]) {
    type Get = fn(&FlashPoolStats) -> u64;
    let gauges: [(&str, &str, Get); 4] = [
        (
            "wafer_flash_pool_ssd_blocks",
            "Data blocks of the aggregate's SSD RAID groups (wafl_hya_per_aggr ssd_total).",
            |p| p.ssd_total,
        ),
        (
            "wafer_flash_pool_ssd_used_blocks",
            "SSD blocks in use (ssd_used).",
            |p| p.ssd_used,
        ),
        (
            "wafer_flash_pool_read_cached_blocks",
            "Copies of HDD blocks in the read cache (ssd_read_cached).",
            |p| p.ssd_read_cached,
        ),
        (
            "wafer_flash_pool_write_cached_blocks",
            "Blocks in the write cache, their only copy (ssd_write_cached).",
            |p| p.ssd_write_cached,
        ),
    ];
    for (name, help, get) in gauges {
        out.family_gauge(name, help);
        for p in pools {
            out.sample(name, &[("aggregate", p.aggregate.as_str())], get(p) as f64);
        }
    }
    let counters: [(&str, &str, Get); 8] = [
        (
            "wafer_flash_pool_read_blocks_replaced_total",
            "Data blocks read from SSD instead of HDD (read_ops_replaced).",
            |p| p.read_ops_replaced,
        ),
        (
            "wafer_flash_pool_hdd_read_blocks_total",
            "Data blocks read from HDD in a hybrid aggregate.",
            |p| p.hdd_read_blks,
        ),
        (
            "wafer_flash_pool_write_cache_blocks_total",
            "Data blocks CPs wrote to the write cache (wc_write_blks_total).",
            |p| p.wc_write_blks_total,
        ),
        (
            "wafer_flash_pool_hdd_write_blocks_total",
            "Data blocks CPs wrote to HDD in a hybrid aggregate.",
            |p| p.hdd_write_blks_total,
        ),
        (
            "wafer_flash_pool_read_cache_inserts_total",
            "Copies inserted into the read cache (read_cache_ins).",
            |p| p.read_cache_ins,
        ),
        (
            "wafer_flash_pool_evict_destage_total",
            "Write-cached blocks the eviction scanner sent back to HDD (evict_destage).",
            |p| p.evict_destage,
        ),
        (
            "wafer_flash_pool_evict_remove_total",
            "Read-cached copies the eviction scanner dropped (evict_remove).",
            |p| p.evict_remove,
        ),
        (
            "wafer_flash_pool_ssd_full_rejects_total",
            "Write-cache candidates put on HDD because the SSDs were full.",
            |p| p.ssd_full_rejects,
        ),
    ];
    for (name, help, get) in counters {
        out.counters(name, help);
        for p in pools {
            out.sample(name, &[("aggregate", p.aggregate.as_str())], get(p) as f64);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head_of(bytes: &[u8]) -> Option<String> {
        read_head(&mut &bytes[..]).expect("a slice reads")
    }

    #[test]
    fn request_heads_are_bounded_and_complete() {
        assert!(head_of(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").is_some());
        assert_eq!(head_of(b"GET /metrics HTTP/1.1\r\n"), None, "no blank line");
        let long = format!(
            "GET /{} HTTP/1.1\r\n\r\n",
            "a".repeat(REQUEST_BYTES_MAX * 2)
        );
        assert_eq!(head_of(long.as_bytes()), None, "longer than the bound");
        assert_eq!(head_of(b"GET / HTTP/1.1\r\n\xff\r\n\r\n"), None, "not text");
    }

    #[test]
    fn requests_other_than_get_metrics_are_refused_without_the_engine() {
        // A sender whose receiver is gone: only a scrape would use it (503).
        let (engine, _) = mpsc::channel();
        let status = |head: &str| respond(head, &engine).status.0;
        assert_eq!(status("GET /metrics HTTP/1.1\r\n\r\n"), 503);
        assert_eq!(status("GET /metrics?x=1 HTTP/1.0\r\n\r\n"), 503);
        assert_eq!(status("POST /metrics HTTP/1.1\r\n\r\n"), 405);
        assert_eq!(status("GET /other HTTP/1.1\r\n\r\n"), 404);
        assert_eq!(status("GET /metrics\r\n\r\n"), 400);
        assert_eq!(status("GET metrics HTTP/1.1\r\n\r\n"), 400);
        assert_eq!(status("GET /metrics HTTP/1.1 extra\r\n\r\n"), 400);
        assert_eq!(status("\r\n\r\n"), 400);
    }

    #[test]
    fn a_flash_cache_renders_only_when_the_node_has_one() {
        let mut report = SysstatReport::default();
        assert!(!render(&report).contains("wafer_flash_cache"));
        report.flash_cache = Some(FlashCacheStatus {
            blocks: 252,
            used: 10,
            hits: 7,
            disk_reads_replaced: 6,
            failed: true,
            ..FlashCacheStatus::default()
        });
        let text = render(&report);
        for line in [
            "# TYPE wafer_flash_cache_hits_total counter",
            "wafer_flash_cache_hits_total 7",
            "wafer_flash_cache_disk_reads_replaced_total 6",
            "wafer_flash_cache_blocks 252",
            "wafer_flash_cache_used_blocks 10",
            "wafer_flash_cache_failed 1",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "{line} missing from:\n{text}"
            );
        }
    }

    #[test]
    fn a_flash_pool_renders_per_aggregate_only_when_one_serves() {
        let mut report = SysstatReport::default();
        assert!(!render(&report).contains("wafer_flash_pool"));
        report.flash_pool = vec![FlashPoolStats {
            aggregate: "aggr1".into(),
            ssd_total: 16384,
            ssd_write_cached: 256,
            wc_write_blks_total: 300,
            ..FlashPoolStats::default()
        }];
        let body = render(&report);
        for line in [
            "# TYPE wafer_flash_pool_write_cached_blocks gauge",
            "wafer_flash_pool_ssd_blocks{aggregate=\"aggr1\"} 16384",
            "wafer_flash_pool_write_cached_blocks{aggregate=\"aggr1\"} 256",
            "# TYPE wafer_flash_pool_write_cache_blocks_total counter",
            "wafer_flash_pool_write_cache_blocks_total{aggregate=\"aggr1\"} 300",
            "wafer_flash_pool_evict_destage_total{aggregate=\"aggr1\"} 0",
        ] {
            assert!(body.lines().any(|l| l == line), "{line} in\n{body}");
        }
    }

    #[test]
    fn a_report_renders_with_labels_and_seconds() {
        let mut report = SysstatReport::default();
        let mut aggr = crate::admin::AggregateCpStatus {
            aggregate: "aggr0".into(),
            cp_time_ns: 1_500_000_000,
            ..crate::admin::AggregateCpStatus::default()
        };
        aggr.cps_by_type.insert("T".into(), 3);
        report.aggregates.push(aggr);
        report.nbd.reads = 7;
        report.disks.push(crate::admin::DiskCountersStatus {
            aggregate: "aggr0".into(),
            name: "disk\"1".into(),
            slot: 1,
            user_reads: 5,
            user_read_blocks: 9,
            cp_reads: 0,
            cp_read_blocks: 0,
            writes: 2,
            write_blocks: 4,
            io_time_ns: 250_000_000,
        });
        let text = render(&report);
        for line in [
            "# TYPE wafer_cps_total counter",
            "wafer_cps_total{aggregate=\"aggr0\",type=\"T\"} 3",
            "wafer_cps_total{aggregate=\"aggr0\",type=\"F\"} 0",
            "wafer_cp_seconds_total{aggregate=\"aggr0\"} 1.5",
            "wafer_requests_total{protocol=\"nbd\",op=\"read\"} 7",
            "wafer_disk_reads_total{aggregate=\"aggr0\",disk=\"disk\\\"1\",kind=\"user\"} 5",
            "wafer_disk_io_seconds_total{aggregate=\"aggr0\",disk=\"disk\\\"1\"} 0.25",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "{line} missing from:\n{text}"
            );
        }
    }
}
