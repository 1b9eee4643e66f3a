//! NBD over TLS for the `serve_*` tests: a CA and certificates made at run
//! time (rcgen, so no openssl or certtool is needed), laid out in the
//! directories libnbd (`?tls-certificates=DIR`) and qemu (`tls-creds-x509`
//! `dir=DIR`) read, and a raw client that upgrades with `NBD_OPT_STARTTLS`.

use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose,
};

use super::{read_option_reply, send_option, wire};

/// `NBD_OPT_STARTTLS`.
pub const OPT_STARTTLS: u32 = 5;
/// `NBD_OPT_LIST`.
pub const OPT_LIST: u32 = 3;
/// `NBD_OPT_EXPORT_NAME`.
pub const OPT_EXPORT_NAME: u32 = 1;
/// `NBD_REP_ERR_INVALID`.
pub const REP_ERR_INVALID: u32 = (1 << 31) + 3;
/// `NBD_REP_ERR_TLS_REQD`.
pub const REP_ERR_TLS_REQD: u32 = (1 << 31) + 5;

/// The common name of the client certificate the CA signed.
pub const GOOD_CLIENT: &str = "host-a";
/// The common name of another client certificate the CA signed.
pub const OTHER_CLIENT: &str = "host-b";

/// Every credential a TLS test needs, in `root`:
///
/// ```text
/// server/  ca-cert.pem  server-cert.pem  server-key.pem (0600)
/// good/    ca-cert.pem  client-cert.pem  client-key.pem   signed by the CA, CN host-a
/// other/   ca-cert.pem  client-cert.pem  client-key.pem   signed by the CA, CN host-b
/// rogue/   ca-cert.pem  client-cert.pem  client-key.pem   self-signed, CN host-a
/// ```
pub struct Pki {
    root: PathBuf,
    ca: rcgen::Certificate,
    good: (rcgen::Certificate, KeyPair),
    rogue: (rcgen::Certificate, KeyPair),
}

impl Pki {
    /// Makes the CA, the server's certificate (localhost, 127.0.0.1) and the
    /// two clients' under `root`.
    pub fn new(root: &Path) -> Pki {
        let ca_key = KeyPair::generate().expect("a CA key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, "wafer test CA");
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca = params.self_signed(&ca_key).expect("the CA");

        let (server, server_key) = leaf(
            &["localhost", "127.0.0.1"],
            "wafer test server",
            ExtendedKeyUsagePurpose::ServerAuth,
        );
        let server = server
            .signed_by(&server_key, &ca, &ca_key)
            .expect("the server's certificate");
        let (good, good_key) = leaf(&[], GOOD_CLIENT, ExtendedKeyUsagePurpose::ClientAuth);
        let good = good
            .signed_by(&good_key, &ca, &ca_key)
            .expect("the good client's certificate");
        let (other, other_key) = leaf(&[], OTHER_CLIENT, ExtendedKeyUsagePurpose::ClientAuth);
        let other = other
            .signed_by(&other_key, &ca, &ca_key)
            .expect("the other client's certificate");
        let (rogue, rogue_key) = leaf(&[], GOOD_CLIENT, ExtendedKeyUsagePurpose::ClientAuth);
        let rogue = rogue
            .self_signed(&rogue_key)
            .expect("the rogue certificate");

        let pki = Pki {
            root: root.to_path_buf(),
            ca,
            good: (good, good_key),
            rogue: (rogue, rogue_key),
        };
        pki.lay_out("server", "server", &server, &server_key);
        pki.lay_out("good", "client", &pki.good.0, &pki.good.1);
        pki.lay_out("other", "client", &other, &other_key);
        pki.lay_out("rogue", "client", &pki.rogue.0, &pki.rogue.1);
        pki
    }

    fn lay_out(&self, dir: &str, role: &str, certificate: &rcgen::Certificate, key: &KeyPair) {
        let dir = self.root.join(dir);
        std::fs::create_dir_all(&dir).expect("a credentials directory");
        std::fs::write(dir.join("ca-cert.pem"), self.ca.pem()).expect("the CA written");
        std::fs::write(dir.join(format!("{role}-cert.pem")), certificate.pem())
            .expect("a certificate written");
        let key_path = dir.join(format!("{role}-key.pem"));
        std::fs::write(&key_path, key.serialize_pem()).expect("a key written");
        let owner_only = std::fs::Permissions::from_mode(0o600);
        std::fs::set_permissions(&key_path, owner_only).expect("chmod 600");
    }

    /// A directory of the layout above: `server`, `good`, `other` or
    /// `rogue`.
    pub fn dir(&self, name: &str) -> PathBuf {
        self.root.join(name)
    }

    /// `wafer serve` arguments for the server's certificate, key and CA.
    pub fn serve_args(&self) -> Vec<String> {
        let server = self.dir("server");
        let path = |name: &str| server.join(name).display().to_string();
        vec![
            "--tls-cert".into(),
            path("server-cert.pem"),
            "--tls-key".into(),
            path("server-key.pem"),
            "--tls-ca".into(),
            path("ca-cert.pem"),
        ]
    }

    /// A rustls client configuration trusting the CA, presenting the good
    /// client's certificate (`good`) or the rogue one.
    pub fn client_config(&self, good: bool) -> Arc<rustls::ClientConfig> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        roots.add(self.ca.der().clone()).expect("the CA trusted");
        let (certificate, key) = if good { &self.good } else { &self.rogue };
        let key = rustls::pki_types::PrivateKeyDer::try_from(key.serialize_der()).expect("a key");
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_root_certificates(roots)
            .with_client_auth_cert(vec![certificate.der().clone()], key)
            .expect("client credentials");
        Arc::new(config)
    }
}

/// A certificate request for `names` (DNS names or IP addresses) and
/// `common_name`, for `usage`, and its key.
fn leaf(
    names: &[&str],
    common_name: &str,
    usage: ExtendedKeyUsagePurpose,
) -> (CertificateParams, KeyPair) {
    let names: Vec<String> = names.iter().map(|name| name.to_string()).collect();
    let mut params = CertificateParams::new(names).expect("params");
    params.distinguished_name = rcgen::DistinguishedName::new();
    params
        .distinguished_name
        .push(DnType::CommonName, common_name);
    params.extended_key_usages = vec![usage];
    (params, KeyPair::generate().expect("a key"))
}

/// `nbds+unix://` for libnbd, with the client credentials of `dir`.
pub fn nbds_unix_uri(socket: &Path, export: &str, dir: &Path) -> String {
    format!(
        "nbds+unix:///{export}?socket={}&tls-certificates={}",
        socket.display(),
        dir.display()
    )
}

/// qemu-io's arguments to open `export` over TLS with the credentials of
/// `dir`, then run `commands`.
pub fn qemu_io_tls_args(socket: &Path, export: &str, dir: &Path, commands: &[&str]) -> Vec<String> {
    let mut args = vec![
        "--object".to_string(),
        format!(
            "tls-creds-x509,id=tls0,dir={},endpoint=client",
            dir.display()
        ),
        "--image-opts".to_string(),
        format!(
            "driver=nbd,server.type=unix,server.path={},export={export},tls-creds=tls0,\
             tls-hostname=localhost",
            socket.display()
        ),
    ];
    for command in commands {
        args.push("-c".to_string());
        args.push(command.to_string());
    }
    args
}

/// A raw client that has read the greeting, sent fixed newstyle and
/// STARTTLS, and had it acknowledged: ready for the TLS handshake.
pub fn plain_until_starttls(socket: &Path) -> UnixStream {
    let mut stream = UnixStream::connect(socket).expect("the NBD socket answers");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("a timeout");
    let mut greeting = [0u8; 18];
    stream.read_exact(&mut greeting).expect("a greeting");
    assert_eq!(greeting[..8], wire::NBDMAGIC.to_be_bytes());
    stream.write_all(&3u32.to_be_bytes()).expect("client flags");
    send_option(&mut stream, OPT_STARTTLS, &[]);
    let (reply, _) = read_option_reply(&mut stream);
    assert_eq!(reply, wire::REP_ACK, "STARTTLS acknowledged");
    stream
}

/// A stream encrypted with rustls.
pub type TlsClientStream = rustls::StreamOwned<rustls::ClientConnection, UnixStream>;

/// Upgrades `stream` (after [`plain_until_starttls`]) with `config`; the
/// handshake completes (or fails) before this returns.
pub fn upgrade(
    stream: UnixStream,
    config: Arc<rustls::ClientConfig>,
) -> std::io::Result<TlsClientStream> {
    let name = "localhost".try_into().expect("a server name");
    let session = rustls::ClientConnection::new(config, name).expect("a client session");
    let mut tls = rustls::StreamOwned::new(session, stream);
    while tls.conn.is_handshaking() {
        tls.conn.complete_io(&mut tls.sock)?;
    }
    Ok(tls)
}

/// `NBD_OPT_GO` for `export` with no information requests; `Err` holds the
/// server's error reply.
pub fn go(stream: &mut (impl Read + Write), export: &str) -> Result<(), u32> {
    let mut data = (export.len() as u32).to_be_bytes().to_vec();
    data.extend_from_slice(export.as_bytes());
    data.extend_from_slice(&0u16.to_be_bytes());
    send_option(stream, wire::OPT_GO, &data);
    loop {
        match read_option_reply(stream).0 {
            wire::REP_ACK => return Ok(()),
            wire::REP_INFO => {}
            error => return Err(error),
        }
    }
}

/// One request with simple replies, waited for: the error (0 = success) and
/// the data a read brought.
pub fn request(
    stream: &mut (impl Read + Write),
    command: u16,
    offset: u64,
    length: u32,
    data: &[u8],
) -> (u32, Vec<u8>) {
    let mut message = wire::REQUEST_MAGIC.to_be_bytes().to_vec();
    message.extend_from_slice(&0u16.to_be_bytes());
    message.extend_from_slice(&command.to_be_bytes());
    message.extend_from_slice(&7u64.to_be_bytes());
    message.extend_from_slice(&offset.to_be_bytes());
    message.extend_from_slice(&length.to_be_bytes());
    message.extend_from_slice(data);
    stream.write_all(&message).expect("a request sent");
    let mut header = [0u8; 16];
    stream.read_exact(&mut header).expect("a reply");
    assert_eq!(header[..4], wire::SIMPLE_REPLY_MAGIC.to_be_bytes());
    assert_eq!(header[8..16], 7u64.to_be_bytes(), "the request's handle");
    let error = u32::from_be_bytes(header[4..8].try_into().expect("four bytes"));
    let mut read = vec![
        0u8;
        if command == wire::CMD_READ && error == 0 {
            length as usize
        } else {
            0
        }
    ];
    stream.read_exact(&mut read).expect("the data read");
    (error, read)
}
