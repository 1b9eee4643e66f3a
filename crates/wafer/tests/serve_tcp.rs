//! NBD over TCP: `--listen 127.0.0.1:0` takes a free port and prints the URI
//! with the port it got; qemu-io writes and reads through it; a raw TCP
//! client that sends garbage is dropped while the server keeps serving.

mod serve_harness;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use serve_harness::{Scratch, TEST_SIZES, qemu_io, serve_with};

#[test]
fn nbd_is_served_over_tcp_on_the_port_printed() {
    let scratch = Scratch::new();
    let mut args = TEST_SIZES.to_vec();
    args.extend(["--listen", "127.0.0.1:0"]);
    let server = serve_with(&scratch, &args);
    let uri = server
        .startup
        .lines()
        .find_map(|line| line.strip_prefix("serving NBD: nbd://"))
        .map(|rest| format!("nbd://{rest}"))
        .unwrap_or_else(|| panic!("no TCP URI printed:\n{}", server.startup));
    assert!(uri.ends_with("/vol0/lun0") && !uri.contains(":0/"), "{uri}");
    qemu_io(&uri, &["write -P 0x3c 1M 128k"]);
    qemu_io(&uri, &["read -P 0x3c 1M 128k"]);

    let address = uri
        .trim_start_matches("nbd://")
        .trim_end_matches("/vol0/lun0");
    let mut raw = TcpStream::connect(address).expect("connects");
    raw.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("a timeout");
    let mut greeting = [0u8; 18];
    raw.read_exact(&mut greeting).expect("a greeting");
    assert_eq!(&greeting[..8], b"NBDMAGIC");
    raw.write_all(&[0xff; 64]).expect("garbage sent");
    let mut rest = Vec::new();
    let _ = raw.read_to_end(&mut rest);
    assert!(rest.is_empty(), "the server answered garbage: {rest:?}");
    qemu_io(&uri, &["read -P 0x3c 1M 128k"]);
    server.stop();
}
