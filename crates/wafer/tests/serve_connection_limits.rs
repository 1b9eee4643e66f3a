//! Clients that hold connections and do nothing useful cannot keep a
//! well-behaved client out or make the server's memory grow: silent and slow
//! handshakes give way to a newcomer, one address holds at most its share,
//! idle connections and connections whose replies go unread are closed after
//! the idle timeout, and a client that never reads its replies makes the
//! server hold a bounded amount for it. Every socket is on loopback; other
//! "hosts" are other loopback addresses (127.0.0.2, ...).

mod serve_harness;

use std::io::Read;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpStream};
use std::time::{Duration, Instant};

use serve_harness::{
    LUN_BYTES, NbdClient, Scratch, TEST_SIZES, negotiate, pattern, qemu_io, serve_with, wire,
};

/// A TCP connection to `server` from the loopback address `source`.
fn connect_from(source: Ipv4Addr, server: SocketAddr) -> TcpStream {
    use rustix::net::{AddressFamily, SocketType, bind, connect, socket};
    let fd = socket(AddressFamily::INET, SocketType::STREAM, None).expect("a socket");
    bind(&fd, &SocketAddrV4::new(source, 0)).expect("binds a loopback address");
    connect(&fd, &server).expect("connects");
    let stream = TcpStream::from(fd);
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("a timeout");
    stream
}

fn loopback(n: u8) -> Ipv4Addr {
    Ipv4Addr::new(127, 0, 0, n)
}

/// A server on a free loopback port with `extra` flags.
fn serve_tcp(scratch: &Scratch, extra: &[&str]) -> serve_harness::Served {
    let mut args = TEST_SIZES.to_vec();
    args.extend(["--listen", "127.0.0.1:0"]);
    args.extend(extra);
    serve_with(scratch, &args)
}

/// qemu-io, a client that knows nothing of this server, reads a block; it
/// must get in and be served at once.
fn well_behaved_client_is_served(address: SocketAddr) {
    let start = Instant::now();
    let uri = format!("nbd://{address}/vol0/lun0");
    qemu_io(&uri, &["read -P 0 0 64k"]);
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "qemu-io took {:?}",
        start.elapsed()
    );
}

/// Whether the server closed `stream` (reading until it does, or 10 s).
fn closed_by_server(stream: &mut TcpStream) -> bool {
    let mut sink = [0u8; 4096];
    loop {
        match stream.read(&mut sink) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(error) => return error.kind() == std::io::ErrorKind::ConnectionReset,
        }
    }
}

/// 64 connections that send nothing, from one address and then from four
/// others (filling every connection), do not keep qemu-io out: with a
/// handshake timeout of a minute, only giving way explains it.
#[test]
fn silent_handshakes_give_way_to_a_new_client() {
    let scratch = Scratch::new();
    let server = serve_tcp(&scratch, &["--handshake-timeout", "60"]);
    let address = server.tcp_address();
    let silent: Vec<TcpStream> = (0..64)
        .map(|_| connect_from(loopback(1), address))
        .collect();
    well_behaved_client_is_served(address);
    let more: Vec<TcpStream> = (2..=5)
        .flat_map(|host| (0..16).map(move |_| connect_from(loopback(host), address)))
        .collect();
    well_behaved_client_is_served(address);
    let log = server.log();
    assert!(
        log.contains("still in its handshake: a new client needs its place"),
        "{log}"
    );
    assert!(
        log.contains("127.0.0.1 already holds its 16 connections")
            || log.contains("dropped a connection from 127.0.0.1"),
        "{log}"
    );
    drop((silent, more));
    server.stop();
}

/// One address that opens 64 connections and completes every handshake gets
/// its 16; the rest are refused, and other clients get in.
#[test]
fn idle_connections_from_one_address_leave_room_for_others() {
    let scratch = Scratch::new();
    let server = serve_tcp(&scratch, &[]);
    let address = server.tcp_address();
    let mut held = Vec::new();
    let mut refused = 0;
    for _ in 0..64 {
        let mut stream = connect_from(loopback(2), address);
        let mut greeting = [0u8; 18];
        if stream.read_exact(&mut greeting).is_err() {
            refused += 1;
            continue;
        }
        negotiate(&mut stream, "vol0/lun0").expect("the export");
        held.push(stream);
    }
    assert_eq!((held.len(), refused), (16, 48));
    assert!(
        server
            .log()
            .contains("127.0.0.2 already holds its 16 connections"),
        "{}",
        server.log()
    );
    well_behaved_client_is_served(address);
    // Another host has its own share.
    let mut other = connect_from(loopback(3), address);
    other.read_exact(&mut [0u8; 18]).expect("a greeting");
    negotiate(&mut other, "vol0/lun0").expect("the export");
    drop(held);
    server.stop();
}

/// Four hosts holding all 64 connections, idle past their handshakes, keep a
/// newcomer out only for as long as a handshake may take (2 s here): then
/// the connection idle longest gives way, well before the idle timeout.
#[test]
fn idle_connections_give_way_when_every_place_is_taken() {
    let scratch = Scratch::new();
    let server = serve_tcp(&scratch, &["--handshake-timeout", "2"]);
    let address = server.tcp_address();
    let held: Vec<TcpStream> = (2..=5)
        .flat_map(|host| (0..16).map(move |_| host))
        .map(|host| {
            let mut stream = connect_from(loopback(host), address);
            stream.read_exact(&mut [0u8; 18]).expect("a greeting");
            negotiate(&mut stream, "vol0/lun0").expect("the export");
            stream
        })
        .collect();
    let mut refused = connect_from(loopback(6), address);
    assert!(
        refused.read_exact(&mut [0u8; 18]).is_err(),
        "a 65th connection was served while every other was fresh"
    );
    std::thread::sleep(Duration::from_millis(2500));
    well_behaved_client_is_served(address);
    let log = server.log();
    assert!(
        log.lines()
            .any(|l| l.contains("idle for ") && l.ends_with("s: a new client needs its place")),
        "{log}"
    );
    drop(held);
    server.stop();
}

/// A connection that sends nothing after its handshake is closed after the
/// idle timeout; one that keeps sending requests is not.
#[test]
fn an_idle_connection_is_closed_after_the_idle_timeout() {
    let scratch = Scratch::new();
    let server = serve_tcp(&scratch, &["--idle-timeout", "2"]);
    let address = server.tcp_address();
    let mut idle = connect_from(loopback(1), address);
    idle.read_exact(&mut [0u8; 18]).expect("a greeting");
    negotiate(&mut idle, "vol0/lun0").expect("the export");
    let start = Instant::now();
    let mut busy = NbdClient::connect(server.socket(), "vol0/lun0");
    while start.elapsed() < Duration::from_secs(4) {
        assert_eq!(busy.write(0, &pattern(3, 0, 4096)), 0);
        std::thread::sleep(Duration::from_millis(500));
    }
    assert!(closed_by_server(&mut idle), "the idle connection is open");
    let closed_after = start.elapsed();
    assert!(closed_after < Duration::from_secs(8), "{closed_after:?}");
    assert_eq!(busy.read(0, 4096), Ok(pattern(3, 0, 4096)));
    assert!(
        server.log().contains("sent no request for 2s"),
        "{}",
        server.log()
    );
    server.stop();
}

/// The server's resident memory, from /proc.
fn resident_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("its status");
    let kib: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("a VmRSS line");
    kib << 10
}

/// Sends `count` reads of `length` bytes at offset 0 and never reads a reply.
fn never_reading(socket: &std::path::Path, count: usize, length: u32) -> NbdClient {
    let mut client = NbdClient::connect(socket, "vol0/lun0");
    for _ in 0..count {
        client.send(wire::CMD_READ, 0, length, &[]);
    }
    client
}

/// Starts `hogs` clients that each send `count` reads of `length` bytes of
/// written data and never read a reply, serves a well-behaved client for
/// four seconds meanwhile, and returns how much the server's resident memory
/// grew at its peak. The data is written first: a hole reads as zeros the
/// allocator may never have to touch, which would hide what replies hold.
fn growth_with_clients_not_reading(hogs: usize, count: usize, length: u32) -> u64 {
    let scratch = Scratch::new();
    let mut args = TEST_SIZES.to_vec();
    args.extend(["--idle-timeout", "0"]);
    let server = serve_with(&scratch, &args);
    let mut writer = NbdClient::connect(server.socket(), "vol0/lun0");
    assert_eq!(writer.write(0, &pattern(4, 0, length as usize)), 0);
    let before = resident_bytes(server.pid());
    let hogs: Vec<NbdClient> = (0..hogs)
        .map(|_| never_reading(server.socket(), count, length))
        .collect();
    let mut good = NbdClient::connect(server.socket(), "vol0/lun0");
    let offset = LUN_BYTES - (1 << 20);
    let mut peak = 0;
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(4) {
        peak = peak.max(resident_bytes(server.pid()));
        let data = pattern(5, peak, 64 << 10);
        assert_eq!(good.write(offset, &data), 0);
        assert_eq!(good.read(offset, data.len() as u32), Ok(data));
        std::thread::sleep(Duration::from_millis(200));
    }
    eprintln!(
        "VmRSS {} MiB before, peak {} MiB with {} clients not reading {count} reads of {length} bytes",
        before >> 20,
        peak >> 20,
        hogs.len()
    );
    drop(hogs);
    server.stop();
    peak.saturating_sub(before)
}

/// What each connection's threads and buffers cost, about 5 MiB with the
/// allocator's transparent huge pages, and room for the rest of the server.
const CONNECTION_BYTES: u64 = 6 << 20;
const SLACK_BYTES: u64 = 96 << 20;

/// Sixteen clients ask for 256 MiB of reads each and never read a reply: the
/// server holds about 8 MiB for each (it stops reading their requests), not
/// everything they asked for, and serves a well-behaved client meanwhile.
/// (The old limit of 64 MiB each let it grow by 1 GiB and more.)
#[test]
fn clients_that_never_read_their_replies_hold_bounded_memory() {
    let grown = growth_with_clients_not_reading(16, 256, 1 << 20);
    let bound = 16 * (CONNECTION_BYTES + (8 << 20)) + SLACK_BYTES;
    assert!(grown < bound, "grew {} MiB", grown >> 20);
}

/// Twelve clients ask for two 32 MiB reads each and never read a reply: a
/// request beyond the 8 MiB allowance is admitted only with a loan from one
/// server-wide pool, so two of them hold 32 MiB and the rest wait holding
/// nothing, where each would hold 32 MiB without the pool; a well-behaved
/// client with small requests is served meanwhile.
#[test]
fn clients_that_never_read_32_mib_replies_share_one_pool() {
    let grown = growth_with_clients_not_reading(12, 2, 32 << 20);
    let bound = 12 * CONNECTION_BYTES + 2 * (32 << 20) + SLACK_BYTES;
    assert!(grown < bound, "grew {} MiB", grown >> 20);
}

/// A client that stops reading its replies is dropped after the idle
/// timeout, and what it held is freed.
#[test]
fn a_client_that_leaves_its_replies_unread_is_dropped() {
    let scratch = Scratch::new();
    let mut args = TEST_SIZES.to_vec();
    args.extend(["--idle-timeout", "2"]);
    let server = serve_with(&scratch, &args);
    let hog = never_reading(server.socket(), 64, 1 << 20);
    let start = Instant::now();
    while server.sysstat().nbd.connections_open > 0 {
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "still open:\n{}",
            server.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(
        server
            .log()
            .contains("dropped: it leaves its replies unread"),
        "{}",
        server.log()
    );
    drop(hog);
    let mut client = NbdClient::connect(server.socket(), "vol0/lun0");
    assert_eq!(client.write(0, &pattern(1, 0, 4096)), 0);
    server.stop();
}

/// A client that sends 256 reads and hangs up without reading a reply gets
/// the few the server had started, not all 256: requests received but not
/// yet carried out are dropped with the connection.
#[test]
fn requests_of_a_client_that_hung_up_are_not_carried_out() {
    let scratch = Scratch::new();
    let server = serve_with(&scratch, &TEST_SIZES);
    let mut writer = NbdClient::connect(server.socket(), "vol0/lun0");
    assert_eq!(writer.write(0, &pattern(6, 0, 1 << 20)), 0);
    drop(writer);
    let hog = never_reading(server.socket(), 256, 1 << 20);
    std::thread::sleep(Duration::from_millis(500));
    drop(hog);
    let start = Instant::now();
    while server.sysstat().nbd.connections_open > 0 {
        assert!(start.elapsed() < Duration::from_secs(10), "still open");
        std::thread::sleep(Duration::from_millis(50));
    }
    let reads = server.sysstat().nbd.reads;
    assert!(
        reads < 64,
        "{reads} reads carried out for a client that left"
    );
    server.stop();
}

/// A handshake timeout of 0, a per-address cap above the total and a
/// negative idle timeout are refused before anything is created.
#[test]
fn limit_flags_are_checked() {
    let scratch = Scratch::new();
    for bad in [
        ["--handshake-timeout", "0"],
        ["--connections-per-address", "65"],
        ["--idle-timeout", "-1"],
    ] {
        let output = serve_harness::serve_expecting_exit(&scratch, &bad);
        assert_eq!(output.status.code(), Some(2), "{bad:?}: {output:?}");
        assert!(!scratch.data().exists());
    }
}
