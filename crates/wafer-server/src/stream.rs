//! A client connection, over TCP or a Unix socket, and the listeners that
//! accept them.
//!
//! NBD is served on either transport; the rest of the server sees one
//! [`Stream`] type that reads, writes, clones (a connection's reader and
//! writer threads each own a handle) and shuts down. After `NBD_OPT_STARTTLS`
//! a connection's stream becomes [`Stream::Tls`], the same socket under
//! encryption (`tls`); plain streams read and write the socket directly.

use std::fmt;
use std::io::{self, Read, Write};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::tls::{PeerIdentity, Socket, TlsError, TlsSettings, TlsStream};

/// Where the server listens for NBD clients.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ListenAddress {
    /// A TCP address (port 0 picks a free port).
    Tcp(SocketAddr),
    /// A Unix socket path.
    Unix(PathBuf),
}

impl fmt::Display for ListenAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ListenAddress::Tcp(address) => write!(f, "{address}"),
            ListenAddress::Unix(path) => write!(f, "{}", path.display()),
        }
    }
}

/// One client connection.
#[derive(Debug)]
pub(crate) enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
    /// A TCP or Unix connection after STARTTLS.
    Tls(Box<TlsStream<Stream>>),
}

impl Stream {
    /// Another handle on the same connection.
    pub(crate) fn try_clone(&self) -> io::Result<Stream> {
        Ok(match self {
            Stream::Tcp(s) => Stream::Tcp(s.try_clone()?),
            Stream::Unix(s) => Stream::Unix(s.try_clone()?),
            Stream::Tls(s) => Stream::Tls(Box::new(s.try_clone()?)),
        })
    }

    /// The client's IP address (`None` on a Unix socket), an IPv4 client of
    /// an IPv6 listener as its IPv4 address.
    pub(crate) fn peer_ip(&self) -> Option<IpAddr> {
        match self {
            Stream::Tcp(s) => s.peer_addr().ok().map(|a| a.ip().to_canonical()),
            Stream::Unix(_) => None,
            Stream::Tls(s) => s.socket().peer_ip(),
        }
    }

    /// Shuts down one or both directions of the socket (under TLS too,
    /// without a word to the session: see [`Stream::close`]).
    pub(crate) fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.shutdown(how),
            Stream::Unix(s) => s.shutdown(how),
            Stream::Tls(s) => s.socket().shutdown(how),
        }
    }

    /// Ends the connection: the TLS session first, if there is one.
    pub(crate) fn close(&mut self) {
        match self {
            Stream::Tls(s) => s.close(),
            plain => {
                let _ = plain.shutdown(Shutdown::Both);
            }
        }
    }

    /// Limits how long a read may block (`None`: forever).
    pub(crate) fn set_read_timeout(&self, limit: Option<Duration>) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_read_timeout(limit),
            Stream::Unix(s) => s.set_read_timeout(limit),
            Stream::Tls(s) => s.socket().set_read_timeout(limit),
        }
    }

    /// Limits how long a write may block (`None`: forever).
    pub(crate) fn set_write_timeout(&self, limit: Option<Duration>) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_write_timeout(limit),
            Stream::Unix(s) => s.set_write_timeout(limit),
            Stream::Tls(s) => s.socket().set_write_timeout(limit),
        }
    }

    /// Runs the TLS handshake on this plain connection, `early` being the
    /// client's bytes already received after its STARTTLS, and makes it
    /// [`Stream::Tls`]. `limit` is called before every socket read and write.
    pub(crate) fn start_tls(
        &mut self,
        settings: &TlsSettings,
        early: &[u8],
        limit: &dyn Fn(&Stream) -> io::Result<()>,
    ) -> Result<(), TlsError> {
        assert!(!matches!(self, Stream::Tls(_)), "TLS starts once");
        let socket = self.try_clone()?;
        *self = Stream::Tls(Box::new(crate::tls::accept(
            socket, settings, early, limit,
        )?));
        Ok(())
    }

    /// Who the client proved to be with its TLS certificate: `None` on a
    /// plain connection, or under TLS without `--tls-ca`. LUN masking
    /// matches this against igroups.
    pub(crate) fn peer_identity(&self) -> Option<&PeerIdentity> {
        match self {
            Stream::Tls(s) => s.identity(),
            Stream::Tcp(_) | Stream::Unix(_) => None,
        }
    }
}

impl Socket for Stream {
    fn try_clone(&self) -> io::Result<Stream> {
        Stream::try_clone(self)
    }

    fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        Stream::shutdown(self, how)
    }
}

impl Read for Stream {
    fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buffer),
            Stream::Unix(s) => s.read(buffer),
            Stream::Tls(s) => s.read(buffer),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buffer: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(buffer),
            Stream::Unix(s) => s.write(buffer),
            Stream::Tls(s) => s.write(buffer),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.flush(),
            Stream::Unix(s) => s.flush(),
            Stream::Tls(s) => s.flush(),
        }
    }
}

/// A callback that makes a thread blocked in [`Listener::accept`] return.
pub(crate) type Waker = Box<dyn Fn() + Send>;

/// A bound listening socket.
#[derive(Debug)]
pub(crate) enum Listener {
    Tcp(TcpListener),
    Unix(UnixListener, PathBuf),
}

impl Listener {
    /// Binds `address`; a Unix socket gets `socket_mode`. A Unix socket file
    /// left by a server that died is replaced; one that a live server answers
    /// on is not.
    pub(crate) fn bind(address: &ListenAddress, socket_mode: u32) -> io::Result<Listener> {
        match address {
            ListenAddress::Tcp(address) => Ok(Listener::Tcp(TcpListener::bind(address)?)),
            ListenAddress::Unix(path) => {
                remove_stale_socket(path)?;
                let listener = Listener::Unix(UnixListener::bind(path)?, path.clone());
                let mode = std::fs::Permissions::from_mode(socket_mode);
                std::fs::set_permissions(path, mode)?;
                Ok(listener)
            }
        }
    }

    /// Waits for the next client; returns it and a name for the logs.
    pub(crate) fn accept(&self) -> io::Result<(Stream, String)> {
        match self {
            Listener::Tcp(listener) => {
                let (stream, peer) = listener.accept()?;
                // NBD is request/response: the protocol asks for no delay.
                stream.set_nodelay(true)?;
                Ok((Stream::Tcp(stream), peer.to_string()))
            }
            Listener::Unix(listener, path) => {
                let (stream, _) = listener.accept()?;
                Ok((Stream::Unix(stream), format!("unix:{}", path.display())))
            }
        }
    }

    /// Where the listener actually listens (the port a `:0` address got).
    pub(crate) fn address(&self) -> io::Result<ListenAddress> {
        match self {
            Listener::Tcp(listener) => Ok(ListenAddress::Tcp(listener.local_addr()?)),
            Listener::Unix(_, path) => Ok(ListenAddress::Unix(path.clone())),
        }
    }

    /// A callback that wakes a thread blocked in [`Listener::accept`] by
    /// connecting to the listener.
    pub(crate) fn waker(&self) -> io::Result<Waker> {
        Ok(match self.address()? {
            ListenAddress::Tcp(address) => Box::new(move || {
                let _ = TcpStream::connect_timeout(&address, Duration::from_secs(1));
            }),
            ListenAddress::Unix(path) => Box::new(move || {
                let _ = UnixStream::connect(&path);
            }),
        })
    }
}

/// A Unix listener takes its socket file with it.
impl Drop for Listener {
    fn drop(&mut self) {
        if let Listener::Unix(_, path) = self {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// The NBD URI of `export` on a listener at `address`.
pub(crate) fn nbd_uri(address: &ListenAddress, export: &str) -> String {
    match address {
        ListenAddress::Tcp(address) => format!("nbd://{address}/{export}"),
        ListenAddress::Unix(path) => format!("nbd+unix:///{export}?socket={}", path.display()),
    }
}

/// Removes `path` if it is a Unix socket nobody answers on.
pub(crate) fn remove_stale_socket(path: &Path) -> io::Result<()> {
    use std::os::unix::fs::FileTypeExt;
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_socket() => match UnixStream::connect(path) {
            Ok(_) => Err(io::Error::new(
                io::ErrorKind::AddrInUse,
                "a server is listening on this socket",
            )),
            Err(_) => std::fs::remove_file(path),
        },
        Ok(_) => Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            "a file that is not a socket is in the way",
        )),
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(error) => Err(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_follow_the_nbd_uri_scheme() {
        let tcp = ListenAddress::Tcp("127.0.0.1:10809".parse().expect("an address"));
        assert_eq!(
            nbd_uri(&tcp, "vol0/lun0"),
            "nbd://127.0.0.1:10809/vol0/lun0"
        );
        let unix = ListenAddress::Unix("/tmp/w.sock".into());
        assert_eq!(
            nbd_uri(&unix, "vol0/lun0@s1"),
            "nbd+unix:///vol0/lun0@s1?socket=/tmp/w.sock"
        );
    }

    #[test]
    fn a_stale_socket_is_replaced_and_a_live_one_kept() {
        let dir = tempfile::tempdir().expect("a scratch directory");
        let path = dir.path().join("s.sock");
        let live = Listener::bind(&ListenAddress::Unix(path.clone()), 0o600).expect("binds");
        let refused = Listener::bind(&ListenAddress::Unix(path.clone()), 0o600).unwrap_err();
        assert_eq!(refused.kind(), io::ErrorKind::AddrInUse);
        drop(live);
        assert!(!path.exists(), "a closed listener leaves no socket file");
        // A crashed server's socket file stays behind (a plain std listener
        // leaves it too); the next bind replaces it.
        drop(UnixListener::bind(&path).expect("binds"));
        assert!(path.exists());
        let _replaced =
            Listener::bind(&ListenAddress::Unix(path.clone()), 0o640).expect("replaces it");
        let mode = std::fs::metadata(&path).expect("stat").permissions().mode();
        assert_eq!(mode & 0o777, 0o640, "the socket takes the mode asked for");
    }
}
