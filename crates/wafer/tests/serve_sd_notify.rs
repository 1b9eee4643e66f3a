//! `wafer serve` under systemd's `Type=notify` (`contrib/wafer.service`):
//! with `NOTIFY_SOCKET` naming a Unix datagram socket, the server sends
//! `READY=1` once it serves (the admin socket and NBD answer by then), and
//! `STOPPING=1` when SIGTERM starts its graceful stop; nothing else.

mod serve_harness;

use std::os::unix::net::UnixDatagram;
use std::time::Duration;

use serve_harness::{NbdClient, Scratch, TEST_SIZES, serve_with_env};

/// The next datagram, as text.
fn next_message(socket: &UnixDatagram) -> String {
    let mut buffer = [0u8; 4096];
    let n = socket.recv(&mut buffer).expect("a notification in time");
    String::from_utf8(buffer[..n].to_vec()).expect("text")
}

#[test]
fn ready_once_serving_and_stopping_at_sigterm() {
    let scratch = Scratch::new();
    let path = scratch.file("notify.sock");
    let socket = UnixDatagram::bind(&path).expect("a notify socket");
    socket
        .set_read_timeout(Some(Duration::from_secs(60)))
        .expect("a timeout");
    let notify = path.to_str().expect("a UTF-8 path");
    let server = serve_with_env(&scratch, &TEST_SIZES, &[("NOTIFY_SOCKET", notify)]);

    assert_eq!(next_message(&socket), "READY=1");
    // Ready means serving: the admin socket and NBD answer.
    assert_eq!(server.sysstat().nbd.connections_accepted, 0);
    let mut client = NbdClient::connect(server.socket(), "vol0/lun0");
    assert_eq!(client.write(0, &[9u8; 4096]), 0);
    drop(client);

    server.terminate();
    assert_eq!(next_message(&socket), "STOPPING=1");
    let (status, log) = server.wait_exit(Duration::from_secs(60));
    assert!(status.success(), "{status}:\n{log}");
    socket
        .set_read_timeout(Some(Duration::from_millis(200)))
        .expect("a timeout");
    let mut buffer = [0u8; 64];
    assert!(socket.recv(&mut buffer).is_err(), "nothing more was sent");
}
