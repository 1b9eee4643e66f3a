//! NBD over TLS with real clients: libnbd's nbdcopy and nbdinfo (`nbds://`,
//! `?tls-certificates=DIR`), qemu-io (`tls-creds-x509`), and a raw rustls
//! client for what the tools cannot be made to do. The CA and every
//! certificate are made at run time (`serve_harness::tls`).

mod serve_harness;

use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::time::Duration;

use serve_harness::tls::{
    GOOD_CLIENT, OPT_EXPORT_NAME, OPT_LIST, OTHER_CLIENT, Pki, REP_ERR_INVALID, REP_ERR_TLS_REQD,
    go, nbds_unix_uri, plain_until_starttls, qemu_io_tls_args, request, upgrade,
};
use serve_harness::{
    Scratch, Served, TEST_SIZES, client, client_ok, ok, pattern, qemu_io, read_option_reply,
    refusal, send_option, serve_with, wire,
};

/// `NBD_REP_ERR_POLICY`.
const REP_ERR_POLICY: u32 = (1 << 31) + 2;

/// A server with the test sizes, the PKI's credentials and `extra`; the
/// good client's certificate name is in NBD igroup `tlshosts`, with
/// `/vol/vol0/lun0` mapped to it (a client with a certificate sees only
/// what is mapped to it).
fn serve_tls(scratch: &Scratch, pki: &Pki, extra: &[&str]) -> Served {
    let mut args: Vec<String> = TEST_SIZES.iter().map(|arg| arg.to_string()).collect();
    args.extend(pki.serve_args());
    args.extend(extra.iter().map(|arg| arg.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let served = serve_with(scratch, &args);
    let data = scratch.data();
    nbd_igroup(&data, "tlshosts", GOOD_CLIENT);
    ok(&data, &["lun", "map", "/vol/vol0/lun0", "tlshosts"]);
    served
}

/// Creates NBD igroup `name` holding the certificate name `client`.
fn nbd_igroup(data: &std::path::Path, name: &str, client: &str) {
    ok(
        data,
        &["igroup", "create", "-n", "-t", "linux", name, client],
    );
}

/// The exports `nbdinfo --list` shows a client with the credentials of
/// `dir` (none if it is refused every export).
fn listed(served: &Served, dir: &std::path::Path) -> Vec<String> {
    let uri = nbds_unix_uri(served.socket(), "", dir);
    let output = client("nbdinfo", &["--list", "--json", &uri]);
    let text = String::from_utf8_lossy(&output.stdout);
    let json: serde_json::Value = match serde_json::from_str(&text) {
        Ok(json) => json,
        Err(_) => return Vec::new(),
    };
    let exports = json["exports"].as_array().cloned().unwrap_or_default();
    exports
        .iter()
        .filter_map(|e| e["export-name"].as_str().map(str::to_string))
        .collect()
}

#[test]
fn certificate_names_are_masked_like_iscsi_initiators() {
    let scratch = Scratch::new();
    let pki = Pki::new(&scratch.file("pki"));
    let served = serve_tls(&scratch, &pki, &[]);
    let data = scratch.data();
    ok(&data, &["lun", "create", "-s", "16m", "/vol/vol0/lun1"]);
    let (good, other) = (pki.dir("good"), pki.dir("other"));

    // host-a sees what is mapped to it, host-b (in no igroup) nothing: an
    // export it is not mapped does not exist for it.
    assert_eq!(listed(&served, &good), ["vol0/lun0"]);
    assert_eq!(listed(&served, &other), Vec::<String>::new());
    let lun1_for_other = nbds_unix_uri(served.socket(), "vol0/lun1", &other);
    assert!(!client("nbdinfo", &[&lun1_for_other]).status.success());

    // Mapped, it sees lun1 (its default export, at LUN ID 0); unmapped, it
    // is gone again for the next connection.
    nbd_igroup(&data, "hostb", OTHER_CLIENT);
    ok(&data, &["lun", "map", "/vol/vol0/lun1", "hostb", "0"]);
    assert_eq!(listed(&served, &other), ["vol0/lun1"]);
    let info = client_ok(
        "nbdinfo",
        &["--json", &nbds_unix_uri(served.socket(), "", &other)],
    );
    assert!(info.contains("vol0/lun1"), "{info}");
    ok(&data, &["lun", "unmap", "/vol/vol0/lun1", "hostb"]);
    assert!(!client("nbdinfo", &[&lun1_for_other]).status.success());

    // A plain client has no name to mask by: it sees every export.
    let plain = client_ok("nbdinfo", &["--list", &served.uri("")]);
    assert!(
        plain.contains("vol0/lun0") && plain.contains("vol0/lun1"),
        "{plain}"
    );
}

#[test]
fn an_unmap_cuts_a_masked_connection_before_its_next_request() {
    let scratch = Scratch::new();
    let pki = Pki::new(&scratch.file("pki"));
    let served = serve_tls(&scratch, &pki, &[]);
    let mut good = good_connection(&served, &pki);
    let (error, _) = request(&mut good, wire::CMD_READ, 0, 4096, &[]);
    assert_eq!(error, 0, "mapped, the read is served");

    ok(
        &scratch.data(),
        &["lun", "unmap", "/vol/vol0/lun0", "tlshosts"],
    );
    let mut read = wire::REQUEST_MAGIC.to_be_bytes().to_vec();
    read.extend_from_slice(&0u16.to_be_bytes());
    read.extend_from_slice(&wire::CMD_READ.to_be_bytes());
    read.extend_from_slice(&8u64.to_be_bytes());
    read.extend_from_slice(&0u64.to_be_bytes());
    read.extend_from_slice(&4096u32.to_be_bytes());
    good.write_all(&read).expect("the request sent");
    good.sock
        .set_read_timeout(Some(Duration::from_secs(15)))
        .expect("a timeout");
    let mut rest = Vec::new();
    let outcome = good.read_to_end(&mut rest);
    let waited = outcome.as_ref().is_err_and(|e| {
        matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        )
    });
    assert!(
        !waited && rest.is_empty(),
        "unmapped, the connection is cut without a reply: {outcome:?}, {} bytes",
        rest.len()
    );
}

/// qemu-io over TLS with the credentials of `dir`; its output (it must exit 0).
fn qemu_io_tls(served: &Served, dir: &std::path::Path, commands: &[&str]) -> String {
    let args = qemu_io_tls_args(served.socket(), "vol0/lun0", dir, commands);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    client_ok("qemu-io", &args)
}

/// A connection upgraded with the good client's certificate, in transmission
/// on `vol0/lun0`.
fn good_connection(served: &Served, pki: &Pki) -> serve_harness::tls::TlsClientStream {
    let stream = plain_until_starttls(served.socket());
    let mut tls = upgrade(stream, pki.client_config(true)).expect("the TLS handshake");
    go(&mut tls, "vol0/lun0").expect("GO inside TLS");
    tls
}

/// Whether the server has closed `stream` (reads end, or fail, at once).
fn closed_by_server(stream: &mut UnixStream) -> bool {
    stream
        .set_read_timeout(Some(Duration::from_secs(15)))
        .expect("a timeout");
    let mut rest = Vec::new();
    match stream.read_to_end(&mut rest) {
        Ok(_) => true,
        Err(error) => error.kind() == std::io::ErrorKind::ConnectionReset,
    }
}

#[test]
fn a_tls_client_round_trips_data_and_reads_what_a_plain_client_wrote() {
    let scratch = Scratch::new();
    let pki = Pki::new(&scratch.file("pki"));
    let served = serve_tls(&scratch, &pki, &["--listen", "127.0.0.1:0"]);
    assert!(
        served.startup.contains("NBD over TLS: offered"),
        "{}",
        served.startup
    );
    let good = pki.dir("good");

    // Random data in over TLS on the Unix socket (libnbd), back out over
    // plain NBD and over TLS on TCP, bit for bit.
    let data: Vec<u8> = (0..2048).flat_map(|n| pattern(7, n, 4096)).collect();
    let input = scratch.file("in.bin");
    std::fs::write(&input, &data).expect("the input written");
    let tls_uri = nbds_unix_uri(served.socket(), "vol0/lun0", &good);
    client_ok("nbdcopy", &[input.to_str().unwrap(), &tls_uri]);
    let plain_out = scratch.file("plain.bin");
    client_ok(
        "nbdcopy",
        &[&served.uri("vol0/lun0"), plain_out.to_str().unwrap()],
    );
    let address = served.tcp_address();
    let tcp_uri = format!(
        "nbds://{address}/vol0/lun0?tls-certificates={}",
        good.display()
    );
    let tls_out = scratch.file("tls.bin");
    client_ok("nbdcopy", &[&tcp_uri, tls_out.to_str().unwrap()]);
    for out in [&plain_out, &tls_out] {
        let read = std::fs::read(out).expect("the copy read");
        assert!(read[..data.len()] == data[..], "{} differs", out.display());
    }

    // qemu over TLS reads what plain qemu wrote, and the reverse.
    qemu_io(&served.uri("vol0/lun0"), &["write -P 0x5a 16M 1M"]);
    let checked = qemu_io_tls(
        &served,
        &good,
        &["read -P 0x5a 16M 1M", "write -P 0xc3 20M 1M"],
    );
    assert!(
        !checked.contains("Pattern verification failed"),
        "{checked}"
    );
    let checked = qemu_io(&served.uri("vol0/lun0"), &["read -P 0xc3 20M 1M"]);
    assert!(
        !checked.contains("Pattern verification failed"),
        "{checked}"
    );

    let log = served.log();
    assert!(
        log.contains(&format!("over TLS as CN={GOOD_CLIENT}")),
        "the log names the client:\n{log}"
    );
}

#[test]
fn with_tls_required_plain_and_unknown_clients_are_refused_while_a_good_one_works() {
    let scratch = Scratch::new();
    let pki = Pki::new(&scratch.file("pki"));
    let served = serve_tls(&scratch, &pki, &["--tls-require"]);
    let mut good = good_connection(&served, &pki);
    let block = pattern(1, 0, 65536);
    assert_eq!(request(&mut good, wire::CMD_WRITE, 0, 65536, &block).0, 0);

    // A plain client: every option but STARTTLS and ABORT is refused, and
    // EXPORT_NAME, which cannot be answered with an error, ends it.
    let mut plain = UnixStream::connect(served.socket()).expect("connects");
    let mut greeting = [0u8; 18];
    plain.read_exact(&mut greeting).expect("a greeting");
    plain.write_all(&3u32.to_be_bytes()).expect("client flags");
    send_option(&mut plain, OPT_LIST, &[]);
    assert_eq!(read_option_reply(&mut plain).0, REP_ERR_TLS_REQD);
    assert_eq!(go(&mut plain, "vol0/lun0"), Err(REP_ERR_TLS_REQD));
    send_option(&mut plain, OPT_EXPORT_NAME, b"vol0/lun0");
    assert!(
        closed_by_server(&mut plain),
        "EXPORT_NAME before TLS ends it"
    );

    // libnbd without TLS, and with a certificate the CA never signed.
    let refused = client("nbdinfo", &[&served.uri("vol0/lun0")]);
    assert!(!refused.status.success(), "a plain nbdinfo is refused");
    let rogue_uri = nbds_unix_uri(served.socket(), "vol0/lun0", &pki.dir("rogue"));
    let refused = client("nbdinfo", &[&rogue_uri]);
    assert!(
        !refused.status.success(),
        "an unknown certificate is refused"
    );
    // And a raw client with it never reaches the options.
    let stream = plain_until_starttls(served.socket());
    let rogue = upgrade(stream, pki.client_config(false));
    if let Ok(mut rogue) = rogue {
        // TLS 1.3: the client's certificate is judged after its Finished,
        // so the refusal arrives as the first read fails.
        send_option(&mut rogue, OPT_LIST, &[]);
        let mut byte = [0u8; 1];
        assert!(rogue.read(&mut byte).map_or(true, |n| n == 0));
    }

    // The good connection never noticed; a new good client is served.
    let (error, read) = request(&mut good, wire::CMD_READ, 0, 65536, &[]);
    assert_eq!((error, read == block), (0, true));
    let good_uri = nbds_unix_uri(served.socket(), "vol0/lun0", &pki.dir("good"));
    let info = client_ok("nbdinfo", &[&good_uri]);
    assert!(info.contains("export-size"), "{info}");
    assert!(info.contains("newstyle-fixed with TLS"), "{info}");

    let log = served.log();
    assert!(log.contains("TLS handshake failed"), "{log}");
    assert!(
        log.contains("NBD_OPT_EXPORT_NAME before NBD_OPT_STARTTLS"),
        "{log}"
    );
}

#[test]
fn hostile_bytes_during_and_after_starttls_drop_only_that_connection() {
    let scratch = Scratch::new();
    let pki = Pki::new(&scratch.file("pki"));
    let served = serve_tls(&scratch, &pki, &["--handshake-timeout", "2"]);
    let mut good = good_connection(&served, &pki);

    // Garbage where the ClientHello belongs.
    let mut garbage = plain_until_starttls(served.socket());
    garbage
        .write_all(&pattern(3, 0, 4096))
        .expect("garbage sent");
    assert!(closed_by_server(&mut garbage));
    // Half a ClientHello, then silence: the NBD handshake's deadline covers
    // the TLS handshake, so the server gives up on it.
    let started = std::time::Instant::now();
    let mut half = plain_until_starttls(served.socket());
    half.write_all(&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01])
        .expect("half a record");
    assert!(closed_by_server(&mut half));
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(1500),
        "closed after {waited:?}"
    );
    // Half a ClientHello, then the client goes.
    let mut gone = plain_until_starttls(served.socket());
    gone.write_all(&[0x16, 0x03, 0x01])
        .expect("a third of a header");
    drop(gone);
    // Inside TLS: a second STARTTLS is refused and the negotiation goes on;
    // then an option with a bad magic ends the connection.
    let stream = plain_until_starttls(served.socket());
    let mut twice = upgrade(stream, pki.client_config(true)).expect("the TLS handshake");
    send_option(&mut twice, serve_harness::tls::OPT_STARTTLS, &[]);
    assert_eq!(read_option_reply(&mut twice).0, REP_ERR_INVALID);
    send_option(&mut twice, OPT_LIST, &[]);
    let mut reply = read_option_reply(&mut twice).0;
    while reply != wire::REP_ACK {
        reply = read_option_reply(&mut twice).0;
    }
    twice.write_all(&[0xff; 16]).expect("a bad option header");
    let mut byte = [0u8; 1];
    assert!(twice.read(&mut byte).map_or(true, |n| n == 0), "dropped");

    // The good connection carries on, and a new client is served.
    let block = pattern(4, 1, 4096);
    assert_eq!(request(&mut good, wire::CMD_WRITE, 4096, 4096, &block).0, 0);
    let (error, read) = request(&mut good, wire::CMD_READ, 4096, 4096, &[]);
    assert_eq!((error, read == block), (0, true));
    let checked = qemu_io_tls(&served, &pki.dir("good"), &["read -P 0 1M 64k"]);
    assert!(
        !checked.contains("Pattern verification failed"),
        "{checked}"
    );
    let log = served.log();
    assert!(log.contains("TLS handshake failed"), "{log}");
}

#[test]
fn without_tls_flags_starttls_is_refused_by_policy_and_the_client_goes_on() {
    let scratch = Scratch::new();
    let served = serve_with(&scratch, &TEST_SIZES);
    let mut stream = UnixStream::connect(served.socket()).expect("connects");
    let mut greeting = [0u8; 18];
    stream.read_exact(&mut greeting).expect("a greeting");
    stream.write_all(&3u32.to_be_bytes()).expect("client flags");
    send_option(&mut stream, serve_harness::tls::OPT_STARTTLS, &[]);
    assert_eq!(read_option_reply(&mut stream).0, REP_ERR_POLICY);
    go(&mut stream, "vol0/lun0").expect("GO in the clear");
    assert_eq!(request(&mut stream, wire::CMD_READ, 0, 512, &[]).0, 0);
}

#[test]
fn a_private_key_others_can_read_is_refused_before_anything_is_made() {
    let scratch = Scratch::new();
    let pki = Pki::new(&scratch.file("pki"));
    let key = pki.dir("server").join("server-key.pem");
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let mut args: Vec<String> = TEST_SIZES.iter().map(|arg| arg.to_string()).collect();
    args.extend(pki.serve_args());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let message = refusal(&scratch, &args);
    assert!(message.contains("server-key.pem is mode 0644"), "{message}");
    assert!(message.contains("chmod 600"), "{message}");
    assert!(!scratch.data().exists(), "nothing was created");
}
