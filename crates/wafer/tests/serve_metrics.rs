//! `wafer serve --metrics ADDR`: Prometheus scrapes over plain HTTP.
//!
//! Two scrapes around NBD and iSCSI I/O and a snapshot's CP: every counter
//! the I/O must move rises (each front end's, the NVLog's, the CPs', each disk's under its aggregate and
//! name), and a scrape taken while nothing moves agrees with `sysstat`. Each
//! body passes `promtool check metrics` (Prometheus's own linter, Debian's
//! `prometheus` package; `scripts/test` installs it) and the strict reading
//! below, which also yields the values. Requests that are not `GET /metrics`
//! (garbage, an oversized head, another method or path) get 400, 405 or 404,
//! and the server serves on. A node with a Flash Cache exposes its
//! `ext_cache_obj` counters as `wafer_flash_cache_*`, which pass the same
//! checks and agree with `stats show ext_cache_obj`; a node without one
//! exposes none.

mod serve_harness;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Duration;

use serve_harness::iscsi::{Initiator, admit_test_initiators, parse_uri};
use serve_harness::{Scratch, TEST_SIZES, qemu_io, serve_with};
use wafer_server::admin::{AdminReply, AdminRequest};

/// Samples by `name{labels}` as the body writes them.
type Samples = BTreeMap<String, f64>;

#[test]
fn counters_rise_with_io_and_match_sysstat() {
    let scratch = Scratch::new();
    let mut args = TEST_SIZES.to_vec();
    args.extend(["--metrics", "127.0.0.1:0", "--iscsi", "127.0.0.1:0"]);
    let server = serve_with(&scratch, &args);
    let address = address_of(&server.metrics_url());
    admit_test_initiators(&server.data);

    let before = scrape(&address);
    let uri = server.uri("vol0/lun0");
    qemu_io(&uri, &["write -P 0x5a 0 4M", "flush", "read -P 0x5a 0 4M"]);
    iscsi_write_and_read(&server.iscsi_uri());
    // A snapshot takes a CP, which writes the blocks to the disks.
    server.admin_ok(AdminRequest::SnapCreate {
        volume: "vol0".into(),
        name: "s1".into(),
    });
    let after = scrape(&address);

    for rising in [
        "wafer_requests_total{protocol=\"nbd\",op=\"write\"}",
        "wafer_requests_total{protocol=\"nbd\",op=\"read\"}",
        "wafer_requests_total{protocol=\"nbd\",op=\"flush\"}",
        "wafer_requests_total{protocol=\"iscsi\",op=\"write\"}",
        "wafer_requests_total{protocol=\"iscsi\",op=\"read\"}",
        "wafer_connections_accepted_total{protocol=\"nbd\"}",
        "wafer_nvlog_appends_total",
        "wafer_nvlog_syncs_total",
        "wafer_cps_total{aggregate=\"aggr0\",type=\"S\"}",
        "wafer_blocks_written_total{kind=\"data\"}",
        "wafer_blocks_written_total{kind=\"parity\"}",
        "wafer_stripes_written_total{kind=\"full\"}",
    ] {
        assert!(
            value(&after, rising) > value(&before, rising),
            "{rising} did not rise: {} then {}",
            value(&before, rising),
            value(&after, rising)
        );
    }
    let written = value(
        &after,
        "wafer_request_bytes_total{protocol=\"nbd\",op=\"write\"}",
    ) - value(
        &before,
        "wafer_request_bytes_total{protocol=\"nbd\",op=\"write\"}",
    );
    assert!(written >= f64::from(4u32 << 20), "{written} bytes written");
    // Every data disk of aggr0 took some of the full stripes.
    let disk_writes = |samples: &Samples| -> f64 {
        samples
            .iter()
            .filter(|(k, _)| k.starts_with("wafer_disk_writes_total{aggregate=\"aggr0\",disk=\""))
            .map(|(_, v)| v)
            .sum()
    };
    assert!(disk_writes(&after) > disk_writes(&before));
    assert_eq!(
        value(
            &after,
            "wafer_disk_writes_total{aggregate=\"aggr0\",disk=\"disk8\"}"
        ),
        0.0,
        "the spare is written by nothing"
    );

    // Quiet now: a scrape and sysstat read the same counters.
    let quiet = scrape(&address);
    let sysstat = server.sysstat();
    let nbd = &sysstat.nbd;
    for (metric, counter) in [
        (
            "wafer_requests_total{protocol=\"nbd\",op=\"write\"}",
            nbd.writes,
        ),
        (
            "wafer_requests_total{protocol=\"nbd\",op=\"read\"}",
            nbd.reads,
        ),
        (
            "wafer_request_bytes_total{protocol=\"nbd\",op=\"read\"}",
            nbd.read_bytes,
        ),
        (
            "wafer_request_bytes_total{protocol=\"iscsi\",op=\"write\"}",
            sysstat.iscsi.write_bytes,
        ),
        ("wafer_nvlog_appends_total", sysstat.nvlog.appends),
        (
            "wafer_blocks_written_total{kind=\"data\"}",
            sysstat.data_blocks_written,
        ),
        (
            "wafer_cache_reads_total{result=\"miss\"}",
            sysstat.cache_misses,
        ),
    ] {
        assert_eq!(value(&quiet, metric), counter as f64, "{metric}");
    }
    for disk in &sysstat.disks {
        let key = format!(
            "wafer_disk_write_blocks_total{{aggregate=\"aggr0\",disk=\"{}\"}}",
            disk.name
        );
        assert_eq!(value(&quiet, &key), disk.write_blocks as f64, "{key}");
    }
    server.stop();
}

#[test]
fn bad_requests_are_refused_and_serving_goes_on() {
    let scratch = Scratch::new();
    let mut args = TEST_SIZES.to_vec();
    args.extend(["--metrics", "127.0.0.1:0"]);
    let server = serve_with(&scratch, &args);
    let address = address_of(&server.metrics_url());

    let huge = format!(
        "GET /metrics HTTP/1.1\r\nX: {}\r\n\r\n",
        "a".repeat(64 << 10)
    );
    for (request, status) in [
        ("garbage\r\n\r\n".to_string(), 400),
        ("GET /metrics\r\n\r\n".to_string(), 400),
        (huge, 400),
        ("\u{0}\u{1}\u{2}\r\n\r\n".to_string(), 400),
        ("POST /metrics HTTP/1.1\r\n\r\n".to_string(), 405),
        ("GET / HTTP/1.1\r\n\r\n".to_string(), 404),
    ] {
        let (line, _) = request_raw(&address, request.as_bytes());
        assert_eq!(line, format!("HTTP/1.1 {status}"), "{request:.40?}");
    }
    // A client that connects and says nothing, then one that leaves midway.
    let silent = TcpStream::connect(&address).expect("connects");
    drop(silent);
    let mut partial = TcpStream::connect(&address).expect("connects");
    partial.write_all(b"GET /met").expect("sent");
    drop(partial);

    let samples = scrape(&address);
    assert!(samples.contains_key("wafer_uptime_seconds"));
    qemu_io(
        &server.uri("vol0/lun0"),
        &["write -P 7 0 64k", "read -P 7 0 64k"],
    );
    server.stop();
}

/// 64 KiB written over iSCSI at 1 MiB and read back, by a raw initiator.
#[test]
fn flash_cache_counters_are_exposed_and_match_ext_cache_obj() {
    let scratch = Scratch::new();
    let flash = scratch.file("flash");
    let flash = flash.to_str().expect("UTF-8");
    let mut args = TEST_SIZES.to_vec();
    args.extend(["--metrics", "127.0.0.1:0", "--cache-size", "1m"]);
    args.extend(["--flash-cache", flash, "--flash-cache-size", "32m"]);
    let server = serve_with(&scratch, &args);
    let address = address_of(&server.metrics_url());
    let uri = server.uri("vol0/lun0");
    qemu_io(&uri, &["write -P 0x3c 0 8M"]);
    // The snapshot's CP puts the blocks on disk; the reads that follow go
    // there once, then to flash.
    server.admin_ok(AdminRequest::SnapCreate {
        volume: "vol0".into(),
        name: "s1".into(),
    });
    let reads: Vec<String> = (0..8).map(|m| format!("read -P 0x3c {m}M 1M")).collect();
    let reads: Vec<&str> = reads.iter().map(String::as_str).collect();
    for _ in 0..2 {
        qemu_io(&uri, &reads);
    }
    let samples = scrape(&address);
    let AdminReply::ExtCacheObj(status) = server.admin_ok(AdminRequest::StatsShowExtCacheObj)
    else {
        panic!("not ext_cache_obj's counters");
    };
    assert!(status.disk_reads_replaced > 1000, "{status:?}");
    for (metric, counter) in [
        ("wafer_flash_cache_hits_total", status.hits),
        ("wafer_flash_cache_misses_total", status.misses),
        ("wafer_flash_cache_inserts_total", status.inserts),
        (
            "wafer_flash_cache_disk_reads_replaced_total",
            status.disk_reads_replaced,
        ),
        ("wafer_flash_cache_read_errors_total", status.read_errors),
        ("wafer_flash_cache_blocks", status.blocks),
        ("wafer_flash_cache_used_blocks", status.used),
        ("wafer_flash_cache_failed", 0),
    ] {
        assert_eq!(value(&samples, metric), counter as f64, "{metric}");
    }
    server.stop();

    // Without --flash-cache, no family of it.
    let scratch = Scratch::new();
    let mut args = TEST_SIZES.to_vec();
    args.extend(["--metrics", "127.0.0.1:0"]);
    let server = serve_with(&scratch, &args);
    let samples = scrape(&address_of(&server.metrics_url()));
    assert!(!samples.keys().any(|k| k.starts_with("wafer_flash_cache")));
    server.stop();
}

fn iscsi_write_and_read(uri: &str) {
    let (address, target) = parse_uri(uri);
    let mut initiator = Initiator::login(address, &target);
    let data = vec![0x3c; 64 << 10];
    initiator.write10(2048, &data);
    assert_eq!(initiator.done().expect("the write's status").status, 0);
    initiator.read10(2048, 128);
    let read = initiator.done().expect("the read's data");
    assert_eq!((read.status, read.data), (0, data));
}

/// `host:port` of a `http://host:port/metrics` URL.
fn address_of(url: &str) -> String {
    let rest = url.strip_prefix("http://").expect("an http URL");
    assert!(rest.ends_with("/metrics"), "{url}");
    rest.trim_end_matches("/metrics").to_string()
}

/// Sends `request`; the status line's protocol and code, and the rest.
fn request_raw(address: &str, request: &[u8]) -> (String, String) {
    let mut stream = TcpStream::connect(address).expect("the metrics port answers");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("a timeout");
    // The server may answer an oversized head before reading all of it.
    let _ = stream.write_all(request);
    let mut response = Vec::new();
    let _ = stream.read_to_end(&mut response);
    let text = String::from_utf8(response).expect("a text response");
    let (status, rest) = text.split_once("\r\n").unwrap_or((&text, ""));
    let line: Vec<&str> = status.splitn(3, ' ').collect();
    (line[..2.min(line.len())].join(" "), rest.to_string())
}

/// One scrape: checked by promtool and read strictly.
fn scrape(address: &str) -> Samples {
    let (status, rest) = request_raw(address, b"GET /metrics HTTP/1.1\r\nHost: wafer\r\n\r\n");
    assert_eq!(status, "HTTP/1.1 200", "{rest}");
    let (head, body) = rest.split_once("\r\n\r\n").expect("a head and a body");
    assert!(
        head.contains("Content-Type: text/plain; version=0.0.4; charset=utf-8"),
        "{head}"
    );
    assert!(
        head.contains(&format!("Content-Length: {}", body.len())),
        "{head}"
    );
    promtool_check(body);
    parse_exposition(body)
}

/// `promtool check metrics` must accept the body without a remark.
fn promtool_check(body: &str) {
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!(
                "promtool could not be run ({e}); install Debian's prometheus (scripts/test does)"
            )
        });
    child
        .stdin
        .take()
        .expect("piped")
        .write_all(body.as_bytes())
        .expect("the body sent");
    let output = child.wait_with_output().expect("promtool ran");
    assert!(
        output.status.success() && output.stdout.is_empty() && output.stderr.is_empty(),
        "promtool check metrics: {}{}\n{body}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Reads the text exposition format strictly: every family has one HELP
/// and one TYPE (counter or gauge) before its samples, which follow
/// together; names start `wafer_`; counters end `_total`; label values are
/// quoted; every value is a finite, non-negative number; no sample twice.
fn parse_exposition(body: &str) -> Samples {
    let mut samples = Samples::new();
    let mut types: BTreeMap<&str, &str> = BTreeMap::new();
    let mut helped = Vec::new();
    let mut current: Option<&str> = None;
    assert!(body.ends_with('\n'), "the body ends with a line feed");
    for line in body.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').expect("HELP name text");
            assert!(!help.is_empty() && !helped.contains(&name), "{line}");
            helped.push(name);
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("TYPE name kind");
            assert!(helped.last() == Some(&name), "TYPE after its HELP: {line}");
            assert!(matches!(kind, "counter" | "gauge"), "{line}");
            assert!(name.ends_with("_total") == (kind == "counter"), "{line}");
            assert!(types.insert(name, kind).is_none(), "{name} typed twice");
            current = Some(name);
        } else {
            let (key, number) = line.rsplit_once(' ').expect("a sample: key value");
            let name = key.split('{').next().expect("a name");
            assert_eq!(Some(name), current, "{line}: outside its family");
            assert!(name.starts_with("wafer_") && valid_name(name), "{line}");
            if let Some(labels) = key.strip_prefix(name) {
                check_labels(labels, line);
            }
            let value: f64 = number.parse().expect("a number");
            assert!(value.is_finite() && value >= 0.0, "{line}");
            assert!(
                samples.insert(key.to_string(), value).is_none(),
                "{line} twice"
            );
        }
    }
    assert!(!samples.is_empty());
    samples
}

fn valid_name(name: &str) -> bool {
    name.chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// `{a="x",b="y"}`, or nothing.
fn check_labels(labels: &str, line: &str) {
    if labels.is_empty() {
        return;
    }
    let inner = labels
        .strip_prefix('{')
        .and_then(|l| l.strip_suffix('}'))
        .unwrap_or_else(|| panic!("{line}: labels in braces"));
    for pair in inner.split("\",") {
        let (label, value) = pair.split_once("=\"").expect("label=\"value\"");
        assert!(valid_name(label), "{line}");
        assert!(!value.trim_end_matches('"').contains('"'), "{line}");
    }
}

fn value(samples: &Samples, key: &str) -> f64 {
    *samples
        .get(key)
        .unwrap_or_else(|| panic!("{key} not exposed; have {:?}", samples.keys()))
}
