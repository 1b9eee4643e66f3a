//! Hostile and broken NBD clients get the right error or a clean disconnect,
//! and nobody else notices: a well-behaved client writes and reads back its
//! own region all along, and must see every byte right and no error.

mod serve_harness;

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serve_harness::{
    LUN_BYTES, NbdClient, Scratch, TEST_SIZES, pattern, read_option_reply, send_option, serve,
    serve_with, wire,
};

/// Connects and reads the greeting.
fn greeted(socket: &Path) -> UnixStream {
    let mut stream = UnixStream::connect(socket).expect("connects");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("a timeout");
    let mut greeting = [0u8; 18];
    stream.read_exact(&mut greeting).expect("a greeting");
    stream
}

/// Whether the server has closed the connection (reads end, not time out).
fn closed(stream: &mut UnixStream) -> bool {
    let mut byte = [0u8; 1];
    loop {
        match stream.read(&mut byte) {
            Ok(0) => return true,
            Ok(_) => continue, // pending replies before the close
            Err(error) => return error.kind() == std::io::ErrorKind::ConnectionReset,
        }
    }
}

/// A raw request header.
fn request(command: u16, handle: u64, offset: u64, length: u32) -> Vec<u8> {
    let mut message = wire::REQUEST_MAGIC.to_be_bytes().to_vec();
    message.extend_from_slice(&0u16.to_be_bytes());
    message.extend_from_slice(&command.to_be_bytes());
    message.extend_from_slice(&handle.to_be_bytes());
    message.extend_from_slice(&offset.to_be_bytes());
    message.extend_from_slice(&length.to_be_bytes());
    message
}

fn hostile_handshakes(socket: &Path) {
    // Truncated: two bytes of client flags, then gone.
    let mut stream = greeted(socket);
    stream.write_all(&[0, 0]).expect("sent");
    drop(stream);

    // Client flags the server never offered: dropped.
    let mut stream = greeted(socket);
    stream
        .write_all(&0xffff_ffffu32.to_be_bytes())
        .expect("sent");
    assert!(closed(&mut stream), "unknown client flags were accepted");

    // Garbage where an option belongs: dropped.
    let mut stream = greeted(socket);
    stream.write_all(&3u32.to_be_bytes()).expect("sent");
    stream.write_all(&[0x42; 64]).expect("sent");
    assert!(closed(&mut stream), "a bad option magic was accepted");

    // An unknown option is refused, and the negotiation goes on; so is an
    // unknown export.
    let mut stream = greeted(socket);
    stream.write_all(&3u32.to_be_bytes()).expect("sent");
    send_option(&mut stream, 0x0765_4321, b"whatever");
    assert_eq!(read_option_reply(&mut stream).0, wire::REP_ERR_UNSUP);
    let mut go = 9u32.to_be_bytes().to_vec();
    go.extend_from_slice(b"vol0/nope");
    go.extend_from_slice(&0u16.to_be_bytes());
    send_option(&mut stream, wire::OPT_GO, &go);
    assert_eq!(read_option_reply(&mut stream).0, wire::REP_ERR_UNKNOWN);
    let mut go = 9u32.to_be_bytes().to_vec();
    go.extend_from_slice(b"vol0/lun0");
    go.extend_from_slice(&0u16.to_be_bytes());
    send_option(&mut stream, wire::OPT_GO, &go);
    let mut replies = 0;
    while read_option_reply(&mut stream).0 != wire::REP_ACK {
        replies += 1;
        assert!(replies < 10, "GO never acknowledged");
    }

    // NBD_OPT_EXPORT_NAME cannot answer an error: the server hangs up.
    let mut stream = greeted(socket);
    stream.write_all(&3u32.to_be_bytes()).expect("sent");
    send_option(&mut stream, 1, b"no/such/export");
    assert!(
        closed(&mut stream),
        "EXPORT_NAME of an unknown export was served"
    );
}

fn hostile_requests(socket: &Path) {
    let mut client = NbdClient::connect(socket, "vol0/lun0");
    assert_eq!(client.size, LUN_BYTES);
    // A read over the 32 MiB maximum, out-of-range reads, writes and trims,
    // an offset that overflows, an unknown command: each refused, and the
    // connection goes on.
    assert_eq!(client.read(0, 64 << 20), Err(wire::EINVAL));
    assert_eq!(client.read(LUN_BYTES, 4096), Err(wire::EINVAL));
    assert_eq!(client.read(LUN_BYTES - 4096, 8192), Err(wire::EINVAL));
    assert_eq!(client.write(LUN_BYTES - 4096, &[1u8; 8192]), wire::ENOSPC);
    assert_eq!(client.write(u64::MAX - 100, &[1u8; 512]), wire::ENOSPC);
    client.send(wire::CMD_TRIM, LUN_BYTES, 4096, &[]);
    assert_eq!(client.reply().expect("a reply").error, wire::EINVAL);
    client.send(99, 0, 0, &[]);
    assert_eq!(client.reply().expect("a reply").error, wire::EINVAL);
    client.send(wire::CMD_FLUSH, 4096, 1, &[]);
    assert_eq!(client.reply().expect("a reply").error, wire::EINVAL);
    assert_eq!(client.read(4096, 4096).map(|d| d.len()), Ok(4096));

    // A write announcing more than 32 MiB: the server cannot skip that much
    // safely, so it drops the client.
    client
        .stream
        .write_all(&request(wire::CMD_WRITE, 7, 0, 64 << 20))
        .expect("sent");
    assert!(
        closed(&mut client.stream),
        "an oversized write was accepted"
    );

    // Garbage in place of a request: framing is lost, the client is dropped.
    let mut client = NbdClient::connect(socket, "vol0/lun0");
    client.stream.write_all(&[0xde; 100]).expect("sent");
    assert!(closed(&mut client.stream), "garbage was taken for requests");

    // A request cut short by the client's going away.
    let mut client = NbdClient::connect(socket, "vol0/lun0");
    let mut header = request(wire::CMD_WRITE, 8, 0, 4096);
    header.extend_from_slice(&[5u8; 100]);
    client.stream.write_all(&header).expect("sent");
    drop(client);
}

#[test]
fn hostile_clients_are_refused_and_good_ones_never_notice() {
    let scratch = Scratch::new();
    let server = serve(&scratch);
    let stop = Arc::new(AtomicBool::new(false));
    let good = {
        let (socket, stop) = (server.socket().to_path_buf(), Arc::clone(&stop));
        std::thread::spawn(move || {
            let mut client = NbdClient::connect(&socket, "vol0/lun0");
            let base = 100u64 << 20;
            let mut rounds = 0u64;
            while !stop.load(Ordering::SeqCst) || rounds < 50 {
                let data = pattern(9, rounds, 16 * 1024);
                let offset = base + (rounds % 256) * 16 * 1024;
                assert_eq!(
                    client.write(offset, &data),
                    0,
                    "round {rounds}: write failed"
                );
                let back = client.read(offset, data.len() as u32).expect("round read");
                assert!(back == data, "round {rounds}: read back something else");
                rounds += 1;
            }
            rounds
        })
    };
    for _ in 0..3 {
        hostile_handshakes(server.socket());
        hostile_requests(server.socket());
    }
    stop.store(true, Ordering::SeqCst);
    let rounds = good.join().expect("the good client saw no error");
    assert!(rounds >= 50);
    let stats = server.sysstat();
    assert!(stats.nbd.protocol_errors >= 9, "{:?}", stats.nbd);
    server.stop();
}

/// A client that sends its handshake a byte every second, each read arriving
/// well within any per-read limit, still has the handshake timeout in all (4
/// seconds here, 10 by default): it must not hold one of the 64 connections
/// for as long as it likes.
#[test]
fn a_handshake_trickled_a_byte_at_a_time_is_cut_off_at_the_handshake_timeout() {
    let scratch = Scratch::new();
    let mut args = TEST_SIZES.to_vec();
    args.extend(["--handshake-timeout", "4"]);
    let server = serve_with(&scratch, &args);
    let start = std::time::Instant::now();
    let mut stream = greeted(server.socket());
    stream.write_all(&3u32.to_be_bytes()).expect("client flags");
    stream
        .set_read_timeout(Some(Duration::from_secs(1)))
        .expect("a timeout");
    let option_header = wire::IHAVEOPT.to_be_bytes();
    let mut sent = 0;
    let mut byte = [0u8; 1];
    let cut_off = loop {
        match stream.read(&mut byte) {
            Ok(0) => break start.elapsed(),
            Ok(_) => panic!("the server answered half an option header"),
            Err(error) if error.kind() == std::io::ErrorKind::ConnectionReset => {
                break start.elapsed();
            }
            Err(_) => {} // a quiet second: trickle on
        }
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "still open after 15 s"
        );
        if stream
            .write_all(&option_header[sent % 8..sent % 8 + 1])
            .is_err()
        {
            break start.elapsed();
        }
        sent += 1;
    };
    assert!(
        cut_off >= Duration::from_secs(4),
        "cut off after {cut_off:?}"
    );
    // And the server goes on serving.
    let mut client = NbdClient::connect(server.socket(), "vol0/lun0");
    assert_eq!(client.write(0, &pattern(1, 0, 4096)), 0);
    server.stop();
}
