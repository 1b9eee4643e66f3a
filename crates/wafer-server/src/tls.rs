//! NBD over TLS: the server's credentials, the upgrade of a connection after
//! `NBD_OPT_STARTTLS`, and the encrypted stream its two threads share.
//!
//! The codec (`wafer_nbd`) decides when TLS starts; this module does it with
//! rustls (the `ring` provider; TLS 1.2 and 1.3). [`TlsSettings::load`] reads
//! the certificate chain, the private key (refused if its file is open to
//! group or others, as the data directory's files are) and, with
//! `--tls-ca`, the CA that must have signed every client's certificate. With a
//! CA a client must present a certificate (mutual TLS, as qemu-nbd's
//! `verify-peer` and nbdkit's `--tls-verify-peer`), and its subject's common
//! name becomes the connection's [`PeerIdentity`], for LUN masking to match;
//! without one TLS only encrypts.
//!
//! After the handshake a connection has a reader thread and a writer thread
//! (`nbd`), but one rustls session, which holds both directions' keys and
//! sequence numbers. The session lives behind a mutex that is never held
//! across a socket read or write: the reader reads ciphertext into its own
//! buffer, then locks to decrypt; the writer locks to encrypt into its own
//! buffer, then writes it. A second lock, taken first, orders what goes onto
//! the socket, so records leave in the order the session sealed them even
//! when the reader must send something (an alert, a key update). A writer
//! blocked on a client that reads nothing therefore never stops the reader
//! from decrypting requests. Plain connections never come here: they stay
//! the bare sockets of `stream`, with no copy and no lock added.

use std::fmt;
use std::fs::File;
use std::io::{self, Read, Write};
use std::net::Shutdown;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig, ServerConnection};
use wafer_nbd::TlsMode;

/// Ciphertext read from the socket at a time.
const READ_BYTES: usize = 64 * 1024;
/// Plaintext decrypted ahead of the reader at most (rustls refuses to decrypt
/// more once it holds this much unread).
const PLAINTEXT_AHEAD_BYTES: usize = 16 * 1024;

/// Where the credentials are, and whether TLS is required (`wafer serve
/// --tls-cert --tls-key [--tls-ca] [--tls-require]`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsOptions {
    /// The server's certificate chain, PEM, its own certificate first.
    pub cert: PathBuf,
    /// The server's private key, PEM (PKCS#8, PKCS#1 or SEC1); owner-only.
    pub key: PathBuf,
    /// The CA certificates, PEM, that client certificates must chain to; with
    /// it every TLS client must present one.
    pub ca: Option<PathBuf>,
    /// Refuse clients that do not start TLS (the specification's FORCEDTLS).
    pub require: bool,
}

impl TlsOptions {
    /// What a client meets, in a line.
    pub fn summary(&self) -> String {
        let offer = match self.require {
            true => "required (plain clients are refused)",
            false => "offered (plain clients are served too)",
        };
        match &self.ca {
            Some(ca) => format!(
                "{offer}; a TLS client must present a certificate signed by {}",
                ca.display()
            ),
            None => format!("{offer}; client certificates are not asked for"),
        }
    }
}

/// Why the credentials cannot be used; nothing has been served yet.
#[derive(Debug, thiserror::Error)]
pub enum TlsConfigError {
    /// A file could not be read.
    #[error("cannot read {}: {error}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// What the system said.
        error: io::Error,
    },
    /// The private key's file lets others read it.
    #[error(
        "{} is mode {mode:04o}, readable by other users: a private key must be its owner's \
         only (chmod 600 {})",
        path.display(),
        path.display()
    )]
    KeyExposed {
        /// The key file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// A file is not the PEM it should be.
    #[error("{}: {what}", path.display())]
    Pem {
        /// The file.
        path: PathBuf,
        /// What is wrong or missing.
        what: String,
    },
    /// rustls refused the credentials (a key that does not match the
    /// certificate, a CA it cannot use).
    #[error("{what}: {error}")]
    Rejected {
        /// Which credentials.
        what: &'static str,
        /// Why.
        error: String,
    },
}

/// Loaded credentials, ready for connections.
#[derive(Debug)]
pub(crate) struct TlsSettings {
    config: Arc<ServerConfig>,
    mode: TlsMode,
}

impl TlsSettings {
    /// Reads and checks everything `options` names.
    pub(crate) fn load(options: &TlsOptions) -> Result<TlsSettings, TlsConfigError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let chain = read_certificates(&options.cert)?;
        let key = read_key(&options.key)?;
        let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()
            .map_err(rejected("the TLS provider"))?;
        let builder = match &options.ca {
            None => builder.with_no_client_auth(),
            Some(path) => {
                let mut roots = RootCertStore::empty();
                for certificate in read_certificates(path)? {
                    roots
                        .add(certificate)
                        .map_err(rejected("the CA certificate"))?;
                }
                let verifier =
                    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                        .build()
                        .map_err(rejected("the CA certificate"))?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let config = builder
            .with_single_cert(chain, key)
            .map_err(rejected("the certificate and key"))?;
        let mode = match options.require {
            true => TlsMode::Required,
            false => TlsMode::Optional,
        };
        Ok(TlsSettings {
            config: Arc::new(config),
            mode,
        })
    }

    /// The mode every connection's handshake runs in.
    pub(crate) fn mode(&self) -> TlsMode {
        self.mode
    }
}

fn rejected<E: fmt::Display>(what: &'static str) -> impl FnOnce(E) -> TlsConfigError {
    move |error| TlsConfigError::Rejected {
        what,
        error: error.to_string(),
    }
}

fn read_certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsConfigError> {
    let pem = std::fs::read(path).map_err(|error| TlsConfigError::Read {
        path: path.to_path_buf(),
        error,
    })?;
    let certificates = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| bad_pem(path, error.to_string()))?;
    if certificates.is_empty() {
        return Err(bad_pem(path, "holds no PEM certificate".into()));
    }
    Ok(certificates)
}

/// Reads the key through one open file whose mode is checked first, so the
/// file checked is the file read.
fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsConfigError> {
    let failed = |error| TlsConfigError::Read {
        path: path.to_path_buf(),
        error,
    };
    let mut file = File::open(path).map_err(failed)?;
    let mode = file.metadata().map_err(failed)?.permissions().mode() & 0o7777;
    if mode & 0o077 != 0 {
        return Err(TlsConfigError::KeyExposed {
            path: path.to_path_buf(),
            mode,
        });
    }
    let mut pem = Vec::new();
    file.read_to_end(&mut pem).map_err(failed)?;
    PrivateKeyDer::from_pem_slice(&pem).map_err(|error| match error {
        rustls::pki_types::pem::Error::NoItemsFound => {
            bad_pem(path, "holds no PEM private key".into())
        }
        error => bad_pem(path, error.to_string()),
    })
}

fn bad_pem(path: &Path, what: String) -> TlsConfigError {
    TlsConfigError::Pem {
        path: path.to_path_buf(),
        what,
    }
}

/// Who a TLS client proved to be: the subject common name of the certificate
/// it presented, which the CA vouched for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PeerIdentity {
    /// The certificate's subject CN.
    pub(crate) common_name: String,
}

impl fmt::Display for PeerIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CN={}", self.common_name)
    }
}

/// What the encrypted stream needs of the socket under it (`stream::Stream`).
pub(crate) trait Socket: Read + Write + Sized {
    /// Another handle on the same socket.
    fn try_clone(&self) -> io::Result<Self>;
    /// Shuts down one or both directions.
    fn shutdown(&self, how: Shutdown) -> io::Result<()>;
}

/// Why a connection's TLS handshake failed; the connection is dropped.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TlsError {
    #[error("{0}")]
    Io(#[from] io::Error),
    /// Not TLS at all, a certificate the CA did not sign, none, no cipher in
    /// common...
    #[error("TLS handshake failed: {0}")]
    Handshake(rustls::Error),
    #[error("the client closed the connection during the TLS handshake")]
    Closed,
    #[error("the client's certificate names no single subject common name")]
    NoCommonName,
}

impl TlsError {
    /// The error as a stream's reader reports it once TLS is up.
    fn into_io(self) -> io::Error {
        match self {
            TlsError::Io(error) => error,
            other => io::Error::new(io::ErrorKind::InvalidData, other),
        }
    }
}

/// Runs the server side of the TLS handshake on `socket`, `early` being
/// bytes the client sent before the server's `ACK` reached it (its first TLS
/// bytes). `limit` is called before every socket read and write: the NBD
/// handshake's deadline covers this one too.
pub(crate) fn accept<S: Socket>(
    mut socket: S,
    settings: &TlsSettings,
    early: &[u8],
    limit: &dyn Fn(&S) -> io::Result<()>,
) -> Result<TlsStream<S>, TlsError> {
    let mut session =
        ServerConnection::new(Arc::clone(&settings.config)).map_err(TlsError::Handshake)?;
    let mut incoming = Incoming::holding(early);
    while session.is_handshaking() {
        if session.wants_write() {
            limit(&socket)?;
            session.write_tls(&mut socket)?;
            continue;
        }
        if incoming.is_empty() {
            limit(&socket)?;
            if incoming.fill(&mut socket)? == 0 {
                return Err(TlsError::Closed);
            }
        }
        if let Err(error) = incoming.absorb(&mut session, 1) {
            // The alert that says why, if the session queued one.
            let _ = session.write_tls(&mut socket);
            return Err(error);
        }
    }
    while session.wants_write() {
        limit(&socket)?;
        session.write_tls(&mut socket)?;
    }
    let identity = match session.peer_certificates() {
        None => None,
        Some(chain) => Some(
            chain
                .first()
                .and_then(|certificate| subject_common_name(certificate))
                .map(|common_name| PeerIdentity { common_name })
                .ok_or(TlsError::NoCommonName)?,
        ),
    };
    Ok(TlsStream {
        shared: Arc::new(Shared {
            session: Mutex::new(session),
            send_order: Mutex::new(()),
            identity,
        }),
        socket,
        incoming,
        outgoing: Vec::new(),
    })
}

/// A connection's state that its handles share.
#[derive(Debug)]
struct Shared {
    session: Mutex<ServerConnection>,
    /// Held while sealed records are taken from the session and written to
    /// the socket, so that they leave in the order they were sealed.
    send_order: Mutex<()>,
    identity: Option<PeerIdentity>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().expect("a panic aborts the server")
}

/// Ciphertext read from the socket and not yet taken by the session.
#[derive(Debug, Default)]
struct Incoming {
    buffer: Vec<u8>,
    start: usize,
    end: usize,
}

impl Incoming {
    fn holding(early: &[u8]) -> Incoming {
        Incoming {
            buffer: early.to_vec(),
            start: 0,
            end: early.len(),
        }
    }

    fn is_empty(&self) -> bool {
        self.start == self.end
    }

    /// Reads what the socket has (it must be empty); 0 at the end of input.
    fn fill(&mut self, socket: &mut impl Read) -> io::Result<usize> {
        assert!(self.is_empty(), "ciphertext is read once the last is taken");
        if self.buffer.len() < READ_BYTES {
            self.buffer.resize(READ_BYTES, 0);
        }
        let received = socket.read(&mut self.buffer)?;
        (self.start, self.end) = (0, received);
        Ok(received)
    }

    /// Gives the session ciphertext until it holds `want` bytes of plaintext
    /// (at most [`PLAINTEXT_AHEAD_BYTES`]), the peer has closed, or none is
    /// left.
    fn absorb(&mut self, session: &mut ServerConnection, want: usize) -> Result<(), TlsError> {
        let want = want.clamp(1, PLAINTEXT_AHEAD_BYTES);
        loop {
            let state = session.process_new_packets().map_err(TlsError::Handshake)?;
            let enough = state.plaintext_bytes_to_read() >= want || state.peer_has_closed();
            if enough || self.is_empty() {
                return Ok(());
            }
            // Ok(0) only after close_notify, which the next round sees.
            self.start += session.read_tls(&mut &self.buffer[self.start..self.end])?;
        }
    }
}

/// One handle on an encrypted connection: the reader's or the writer's
/// (`try_clone`), each with its own socket handle and buffers.
#[derive(Debug)]
pub(crate) struct TlsStream<S> {
    shared: Arc<Shared>,
    socket: S,
    incoming: Incoming,
    /// Sealed records on their way to the socket.
    outgoing: Vec<u8>,
}

impl<S: Socket> TlsStream<S> {
    /// Another handle on the same connection.
    pub(crate) fn try_clone(&self) -> io::Result<TlsStream<S>> {
        Ok(TlsStream {
            shared: Arc::clone(&self.shared),
            socket: self.socket.try_clone()?,
            incoming: Incoming::default(),
            outgoing: Vec::new(),
        })
    }

    /// The socket under the encryption.
    pub(crate) fn socket(&self) -> &S {
        &self.socket
    }

    /// Who the client proved to be, if the server asked for a certificate.
    pub(crate) fn identity(&self) -> Option<&PeerIdentity> {
        self.shared.identity.as_ref()
    }

    /// Ends the TLS session (`close_notify`), then the connection, as the
    /// specification asks of a disconnect.
    pub(crate) fn close(&mut self) {
        let _ = self.send(|session| {
            session.send_close_notify();
            Ok(())
        });
        let _ = self.socket.shutdown(Shutdown::Both);
    }

    /// Runs `seal` on the session, then writes every record it left to the
    /// socket, in order with every other handle's.
    fn send<T>(
        &mut self,
        seal: impl FnOnce(&mut ServerConnection) -> io::Result<T>,
    ) -> io::Result<T> {
        let _order = lock(&self.shared.send_order);
        let sealed = {
            let mut session = lock(&self.shared.session);
            let sealed = seal(&mut session)?;
            while session.wants_write() {
                session.write_tls(&mut self.outgoing)?;
            }
            sealed
        };
        let written = self.socket.write_all(&self.outgoing);
        self.outgoing.clear();
        written.map(|()| sealed)
    }
}

impl<S: Socket> Read for TlsStream<S> {
    fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        loop {
            let mut session = lock(&self.shared.session);
            let read = match self.incoming.absorb(&mut session, buffer.len()) {
                Ok(()) => session.reader().read(buffer),
                Err(error) => Err(error.into_io()),
            };
            let wants_write = session.wants_write();
            drop(session);
            if wants_write {
                // An alert after an error, or the answer to a key update.
                self.send(|_| Ok(()))?;
            }
            match read {
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => {}
                other => return other,
            }
            if self.incoming.is_empty() && self.incoming.fill(&mut self.socket)? == 0 {
                return Ok(0);
            }
        }
    }
}

impl<S: Socket> Write for TlsStream<S> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.send(|session| session.writer().write(data))
    }

    /// Nothing to do: every write reaches the socket before it returns.
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// DER tags met on the way to the subject.
const SEQUENCE: u8 = 0x30;
const SET: u8 = 0x31;
const OBJECT_IDENTIFIER: u8 = 0x06;
/// `[0] EXPLICIT Version`, present in every v2 or v3 certificate.
const VERSION: u8 = 0xa0;
/// 2.5.4.3, id-at-commonName.
const COMMON_NAME: [u8; 3] = [0x55, 0x04, 0x03];
/// UTF8String, PrintableString, IA5String: the string types a CN comes in
/// that hold UTF-8 as they are.
const UTF8_STRING_TAGS: [u8; 3] = [0x0c, 0x13, 0x16];

/// The subject common name of a DER certificate (one the verifier accepted),
/// if its subject has exactly one, in a string type that holds UTF-8.
fn subject_common_name(certificate: &[u8]) -> Option<String> {
    let mut input = certificate;
    let mut certificate = der_expect(&mut input, SEQUENCE)?;
    let mut tbs = der_expect(&mut certificate, SEQUENCE)?;
    if tbs.first() == Some(&VERSION) {
        der_next(&mut tbs)?;
    }
    // serialNumber, signature, issuer, validity.
    for _ in 0..4 {
        der_next(&mut tbs)?;
    }
    let mut subject = der_expect(&mut tbs, SEQUENCE)?;
    let mut names = Vec::new();
    while !subject.is_empty() {
        let mut relative_name = der_expect(&mut subject, SET)?;
        while !relative_name.is_empty() {
            let mut attribute = der_expect(&mut relative_name, SEQUENCE)?;
            let kind = der_expect(&mut attribute, OBJECT_IDENTIFIER)?;
            let (tag, value) = der_next(&mut attribute)?;
            if kind == COMMON_NAME {
                let text = std::str::from_utf8(value).ok();
                names.push(text.filter(|_| UTF8_STRING_TAGS.contains(&tag))?);
            }
        }
    }
    match names[..] {
        [name] if !name.is_empty() => Some(name.to_owned()),
        _ => None,
    }
}

/// The next DER element's tag and content, taken off `input`.
fn der_next<'a>(input: &mut &'a [u8]) -> Option<(u8, &'a [u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, mut rest) = rest.split_first()?;
    let length = if first < 0x80 {
        usize::from(first)
    } else {
        let count = usize::from(first & 0x7f);
        if count == 0 || count > 4 || rest.len() < count {
            return None;
        }
        let (bytes, after) = rest.split_at(count);
        rest = after;
        bytes
            .iter()
            .fold(0usize, |length, &byte| (length << 8) | usize::from(byte))
    };
    if rest.len() < length {
        return None;
    }
    let (content, after) = rest.split_at(length);
    *input = after;
    Some((tag, content))
}

/// The next DER element's content, if it has tag `tag`.
fn der_expect<'a>(input: &mut &'a [u8], tag: u8) -> Option<&'a [u8]> {
    der_next(input).and_then(|(found, content)| (found == tag).then_some(content))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
        KeyUsagePurpose,
    };
    use std::os::unix::net::UnixStream;

    /// A plain socket for the tests, as `stream::Stream` is for the server.
    impl Socket for UnixStream {
        fn try_clone(&self) -> io::Result<UnixStream> {
            UnixStream::try_clone(self)
        }

        fn shutdown(&self, how: Shutdown) -> io::Result<()> {
            UnixStream::shutdown(self, how)
        }
    }

    /// A CA with the key that signs for it.
    struct Authority {
        certificate: rcgen::Certificate,
        key: KeyPair,
    }

    fn authority(name: &str) -> Authority {
        let key = KeyPair::generate().expect("a key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let certificate = params.self_signed(&key).expect("self-signed");
        Authority { certificate, key }
    }

    /// A certificate for `common_name` (none if `None`) signed by `ca`, and
    /// its key.
    fn issue(
        ca: &Authority,
        common_name: Option<&str>,
        usage: ExtendedKeyUsagePurpose,
    ) -> (rcgen::Certificate, KeyPair) {
        let key = KeyPair::generate().expect("a key");
        let mut params = CertificateParams::new(vec!["localhost".to_owned()]).expect("params");
        params.distinguished_name = rcgen::DistinguishedName::new();
        if let Some(name) = common_name {
            params.distinguished_name.push(DnType::CommonName, name);
        }
        params
            .distinguished_name
            .push(DnType::OrganizationName, "wafer");
        params.extended_key_usages = vec![usage];
        let certificate = params
            .signed_by(&key, &ca.certificate, &ca.key)
            .expect("signed");
        (certificate, key)
    }

    /// A server's files in a scratch directory, its key 0600.
    struct Files {
        dir: tempfile::TempDir,
        options: TlsOptions,
    }

    fn server_files(ca: &Authority, with_ca: bool) -> Files {
        let dir = tempfile::tempdir().expect("a scratch directory");
        let (certificate, key) = issue(ca, Some("server"), ExtendedKeyUsagePurpose::ServerAuth);
        let write = |name: &str, text: &str, mode: u32| {
            let path = dir.path().join(name);
            std::fs::write(&path, text).expect("written");
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("chmod");
            path
        };
        let options = TlsOptions {
            cert: write("cert.pem", &certificate.pem(), 0o644),
            key: write("key.pem", &key.serialize_pem(), 0o600),
            ca: with_ca.then(|| write("ca.pem", &ca.certificate.pem(), 0o644)),
            require: true,
        };
        Files { dir, options }
    }

    fn client_config(
        ca: &Authority,
        client: Option<(rcgen::Certificate, KeyPair)>,
    ) -> Arc<rustls::ClientConfig> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = RootCertStore::empty();
        roots.add(ca.certificate.der().clone()).expect("a root");
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_root_certificates(roots);
        Arc::new(match client {
            None => builder.with_no_client_auth(),
            Some((certificate, key)) => builder
                .with_client_auth_cert(
                    vec![certificate.der().clone()],
                    PrivateKeyDer::try_from(key.serialize_der()).expect("a key"),
                )
                .expect("client credentials"),
        })
    }

    /// Runs `accept` on one end of a socket pair while a rustls client with
    /// `config` talks on the other: sends "ping", expects "pong".
    fn connect(
        settings: &TlsSettings,
        config: Arc<rustls::ClientConfig>,
    ) -> (Result<TlsStream<UnixStream>, TlsError>, io::Result<Vec<u8>>) {
        let (server, client) = UnixStream::pair().expect("a socket pair");
        let client = std::thread::spawn(move || {
            let name = "localhost".try_into().expect("a server name");
            let session = rustls::ClientConnection::new(config, name).expect("a client");
            let mut stream = rustls::StreamOwned::new(session, client);
            stream.write_all(b"ping")?;
            let mut answer = vec![0; 4];
            stream.read_exact(&mut answer)?;
            Ok(answer)
        });
        let accepted = accept(server, settings, &[], &|_| Ok(()));
        if let Ok(stream) = &accepted {
            let mut reader = stream.try_clone().expect("a reader handle");
            let mut writer = stream.try_clone().expect("a writer handle");
            let mut ping = [0; 4];
            reader.read_exact(&mut ping).expect("the ping");
            assert_eq!(&ping, b"ping");
            writer.write_all(b"pong").expect("the pong");
        }
        let answer = client.join().expect("the client thread");
        (accepted, answer)
    }

    #[test]
    fn a_client_signed_by_the_ca_is_served_and_named_by_its_common_name() {
        let ca = authority("test CA");
        let files = server_files(&ca, true);
        let settings = TlsSettings::load(&files.options).expect("loads");
        assert_eq!(settings.mode(), TlsMode::Required);
        let client = issue(&ca, Some("host-a"), ExtendedKeyUsagePurpose::ClientAuth);
        let (accepted, answer) = connect(&settings, client_config(&ca, Some(client)));
        let stream = accepted.expect("the handshake succeeds");
        assert_eq!(answer.expect("the client's answer"), b"pong");
        let identity = stream.identity().expect("an identity");
        assert_eq!(identity.common_name, "host-a");
        assert_eq!(identity.to_string(), "CN=host-a");
    }

    #[test]
    fn without_a_ca_tls_only_encrypts() {
        let ca = authority("test CA");
        let files = server_files(&ca, false);
        let settings = TlsSettings::load(&files.options).expect("loads");
        let (accepted, answer) = connect(&settings, client_config(&ca, None));
        assert_eq!(answer.expect("the client's answer"), b"pong");
        assert_eq!(accepted.expect("served").identity(), None);
    }

    #[test]
    fn a_client_of_another_ca_or_none_fails_the_handshake() {
        let ca = authority("test CA");
        let files = server_files(&ca, true);
        let settings = TlsSettings::load(&files.options).expect("loads");
        let rogue = authority("rogue CA");
        let stranger = issue(&rogue, Some("host-a"), ExtendedKeyUsagePurpose::ClientAuth);
        for client in [Some(stranger), None] {
            let (accepted, answer) = connect(&settings, client_config(&ca, client));
            let error = accepted.expect_err("refused");
            assert!(matches!(error, TlsError::Handshake(_)), "{error}");
            assert!(answer.is_err(), "the client hears of it");
        }
    }

    #[test]
    fn a_certificate_without_a_common_name_names_no_one_and_is_refused() {
        let ca = authority("test CA");
        let files = server_files(&ca, true);
        let settings = TlsSettings::load(&files.options).expect("loads");
        let nameless = issue(&ca, None, ExtendedKeyUsagePurpose::ClientAuth);
        let (accepted, _) = connect(&settings, client_config(&ca, Some(nameless)));
        assert!(matches!(accepted, Err(TlsError::NoCommonName)));
    }

    #[test]
    fn bytes_that_are_not_tls_fail_the_handshake() {
        let ca = authority("test CA");
        let files = server_files(&ca, false);
        let settings = TlsSettings::load(&files.options).expect("loads");
        let (server, mut client) = UnixStream::pair().expect("a socket pair");
        client
            .write_all(b"GET / HTTP/1.1\r\nHost: wafer\r\n\r\n")
            .expect("sent");
        let error = accept(server, &settings, &[], &|_| Ok(())).expect_err("refused");
        assert!(matches!(error, TlsError::Handshake(_)), "{error}");
        let (server, client) = UnixStream::pair().expect("a socket pair");
        drop(client);
        let error = accept(server, &settings, &[], &|_| Ok(())).expect_err("refused");
        assert!(matches!(error, TlsError::Closed), "{error}");
    }

    #[test]
    fn a_key_others_can_read_is_refused_and_named() {
        let ca = authority("test CA");
        let files = server_files(&ca, true);
        for mode in [0o640, 0o604] {
            let permissions = std::fs::Permissions::from_mode(mode);
            std::fs::set_permissions(&files.options.key, permissions).expect("chmod");
            let error = TlsSettings::load(&files.options).expect_err("refused");
            assert!(
                matches!(error, TlsConfigError::KeyExposed { mode: m, .. } if m == mode),
                "{error}"
            );
            let message = error.to_string();
            assert!(message.contains("chmod 600"), "{message}");
        }
    }

    #[test]
    fn credentials_that_do_not_hold_together_are_refused() {
        let ca = authority("test CA");
        let files = server_files(&ca, true);
        let (_, other_key) = issue(&ca, Some("x"), ExtendedKeyUsagePurpose::ServerAuth);
        std::fs::write(&files.options.key, other_key.serialize_pem()).expect("written");
        let error = TlsSettings::load(&files.options).expect_err("a key for another cert");
        assert!(matches!(error, TlsConfigError::Rejected { .. }), "{error}");

        let files = server_files(&ca, true);
        std::fs::write(&files.options.cert, "not PEM at all").expect("written");
        let error = TlsSettings::load(&files.options).expect_err("no certificate");
        assert!(matches!(error, TlsConfigError::Pem { .. }), "{error}");

        let files = server_files(&ca, true);
        let missing = files.dir.path().join("absent.pem");
        let options = TlsOptions {
            ca: Some(missing),
            ..files.options.clone()
        };
        let error = TlsSettings::load(&options).expect_err("no CA file");
        assert!(matches!(error, TlsConfigError::Read { .. }), "{error}");
    }

    #[test]
    fn the_common_name_is_read_from_any_certificate_and_no_prefix_panics() {
        let ca = authority("test CA");
        let (named, _) = issue(&ca, Some("host-é"), ExtendedKeyUsagePurpose::ClientAuth);
        let der = named.der().as_ref();
        assert_eq!(subject_common_name(der).as_deref(), Some("host-é"));
        let (nameless, _) = issue(&ca, None, ExtendedKeyUsagePurpose::ClientAuth);
        assert_eq!(subject_common_name(nameless.der()), None);
        for end in 0..der.len() {
            assert_eq!(subject_common_name(&der[..end]), None, "prefix of {end}");
        }
    }
}
