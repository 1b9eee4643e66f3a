//! systemd's readiness protocol (`sd_notify(3)`), for a `Type=notify` unit
//! (`contrib/wafer.service`).
//!
//! systemd starts the service with `NOTIFY_SOCKET` naming a Unix datagram
//! socket: a path, or, when it starts with `@`, a name in Linux's abstract
//! namespace (the `@` standing for the leading NUL byte). The service sends
//! newline-separated `VARIABLE=value` assignments to it, each datagram whole:
//! `READY=1` once it serves (every listener bound, the aggregates mounted,
//! the threads running), so that units ordered after it start only then, and
//! `STOPPING=1` when a graceful stop begins. Without `NOTIFY_SOCKET` (not
//! under systemd) nothing is sent. A message that cannot be sent is logged
//! and otherwise ignored: serving matters more than telling systemd.

use std::io;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};

/// The variable naming the socket.
const NOTIFY_SOCKET: &str = "NOTIFY_SOCKET";

/// Tells systemd the server serves.
pub(crate) fn ready() {
    send_logged("READY=1");
}

/// Tells systemd a graceful stop has begun.
pub(crate) fn stopping() {
    send_logged("STOPPING=1");
}

fn send_logged(state: &str) {
    if let Err(error) = send(state) {
        tracing::warn!("systemd was not told {state}: {error}");
    }
}

/// Sends `state` to `$NOTIFY_SOCKET`, if it is set.
fn send(state: &str) -> io::Result<()> {
    let Some(socket) = std::env::var_os(NOTIFY_SOCKET).filter(|s| !s.is_empty()) else {
        return Ok(());
    };
    let address = address_of(socket.as_encoded_bytes())?;
    let sent = UnixDatagram::unbound()?.send_to_addr(state.as_bytes(), &address)?;
    match sent == state.len() {
        true => Ok(()),
        false => Err(io::Error::other("the datagram was cut short")),
    }
}

/// The socket address `NOTIFY_SOCKET` names: `@name` is abstract.
fn address_of(socket: &[u8]) -> io::Result<SocketAddr> {
    match socket.strip_prefix(b"@") {
        Some(name) => SocketAddr::from_abstract_name(name),
        None => {
            use std::os::unix::ffi::OsStrExt;
            SocketAddr::from_pathname(std::ffi::OsStr::from_bytes(socket))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_names_an_abstract_socket_and_anything_else_a_path() {
        let abstract_address = address_of(b"@wafer/notify").expect("an abstract name");
        assert_eq!(
            abstract_address.as_abstract_name(),
            Some(&b"wafer/notify"[..])
        );
        let path = address_of(b"/run/systemd/notify").expect("a path");
        assert_eq!(
            path.as_pathname(),
            Some(std::path::Path::new("/run/systemd/notify"))
        );
    }

    #[test]
    fn a_datagram_reaches_an_abstract_socket() {
        let name = format!("wafer-notify-test-{}", std::process::id());
        let address = SocketAddr::from_abstract_name(name.as_bytes()).expect("a name");
        let receiver = UnixDatagram::bind_addr(&address).expect("bound");
        let sender = UnixDatagram::unbound().expect("a socket");
        let full = format!("@{name}");
        let to = address_of(full.as_bytes()).expect("an address");
        sender.send_to_addr(b"READY=1", &to).expect("sent");
        let mut buffer = [0u8; 64];
        let n = receiver.recv(&mut buffer).expect("received");
        assert_eq!(&buffer[..n], b"READY=1");
    }
}
