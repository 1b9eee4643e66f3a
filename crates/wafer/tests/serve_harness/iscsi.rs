//! A minimal raw iSCSI initiator for the `serve_iscsi_*` tests: one
//! connection, login straight to the operational stage, no digests, SCSI
//! commands with their data as immediate data, pipelined; and the means to
//! send whatever bytes a hostile-input test wants.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::Duration;

/// The raw initiator's name.
pub const TEST_INITIATOR: &str = "iqn.2026-11.org.wafer:test";
/// The names the initiators the tests run log in with: this raw one,
/// libiscsi's tools (`iscsi-test-cu` opens sessions as two) and qemu.
pub const TEST_INITIATORS: [&str; 6] = [
    TEST_INITIATOR,
    "iqn.2007-10.com.github:sahlberg:libiscsi:iscsi-test",
    "iqn.2007-10.com.github:sahlberg:libiscsi:iscsi-test-2",
    "iqn.2007-10.com.github:sahlberg:libiscsi:iscsi-ls",
    "iqn.2007-10.com.github:sahlberg:libiscsi:iscsi-inq",
    "iqn.2008-11.org.linux-kvm",
];

/// Puts every initiator the tests use in igroup `default`, to which a new
/// data directory maps `/vol/vol0/lun0` at LUN ID 0: they see it, as any
/// initiator an administrator adds would. Those already in stay.
pub fn admit_test_initiators(data: &Path) {
    for initiator in TEST_INITIATORS {
        let (code, _, err) = super::wafer(data, &["igroup", "add", "default", initiator]);
        assert!(
            code == 0 || err.contains("already in"),
            "{initiator}: {err}"
        );
    }
}

/// An initiator's view of one received PDU.
#[derive(Debug)]
pub struct Pdu {
    pub header: [u8; 48],
    pub data: Vec<u8>,
}

impl Pdu {
    pub fn opcode(&self) -> u8 {
        self.header[0] & 0x3f
    }

    pub fn itt(&self) -> u32 {
        u32::from_be_bytes(self.header[16..20].try_into().unwrap())
    }

    pub fn word(&self, at: usize) -> u32 {
        u32::from_be_bytes(self.header[at..at + 4].try_into().unwrap())
    }
}

/// A finished SCSI command: its status and the data it returned.
#[derive(Debug)]
/// A finished command: its data, or for CHECK CONDITION its sense data.
pub struct Done {
    pub itt: u32,
    pub status: u8,
    pub data: Vec<u8>,
}

pub struct Initiator {
    pub stream: TcpStream,
    pub cmd_sn: u32,
    next_itt: u32,
    /// Data-In gathered per task until its status arrives.
    partial: std::collections::BTreeMap<u32, Vec<u8>>,
}

/// The target name in an `iscsi://ADDR/IQN/LUN` URI and its address.
pub fn parse_uri(uri: &str) -> (SocketAddr, String) {
    let rest = uri.strip_prefix("iscsi://").expect("an iscsi URI");
    let mut parts = rest.split('/');
    let address = parts.next().unwrap().parse().expect("an address");
    (address, parts.next().expect("a target name").to_string())
}

/// Appends one PDU: header (data segment length set), data, padding.
pub fn pdu(out: &mut Vec<u8>, mut header: [u8; 48], data: &[u8]) {
    let length = (data.len() as u32).to_be_bytes();
    header[5..8].copy_from_slice(&length[1..]);
    out.extend_from_slice(&header);
    out.extend_from_slice(data);
    out.resize(out.len() + (4 - data.len() % 4) % 4, 0);
}

impl Initiator {
    /// Connects without logging in.
    pub fn connect(address: SocketAddr) -> Initiator {
        let stream = TcpStream::connect(address).expect("the iSCSI port answers");
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        Initiator {
            stream,
            cmd_sn: 1,
            next_itt: 1,
            partial: Default::default(),
        }
    }

    /// Connects and logs in to `target` (a normal session).
    pub fn login(address: SocketAddr, target: &str) -> Initiator {
        let (initiator, status, _) = Initiator::login_connection(address, target, 0, 0, 1);
        assert_eq!(status, 0, "login refused");
        initiator
    }

    /// Connects and logs in to `target` as connection `cid` of session
    /// `tsih` (0: a new one) offering `max_connections`; returns the
    /// initiator, the login's status and the session's TSIH.
    pub fn login_connection(
        address: SocketAddr,
        target: &str,
        tsih: u16,
        cid: u16,
        max_connections: u16,
    ) -> (Initiator, u16, u16) {
        let mut initiator = Initiator::connect(address);
        let keys = format!(
            "InitiatorName={TEST_INITIATOR}\0SessionType=Normal\0TargetName={target}\0\
             HeaderDigest=None\0DataDigest=None\0ImmediateData=Yes\0InitialR2T=Yes\0\
             FirstBurstLength=262144\0MaxBurstLength=262144\0MaxRecvDataSegmentLength=262144\0\
             MaxConnections={max_connections}\0"
        );
        let mut header = [0u8; 48];
        header[0] = 0x43; // immediate login request
        header[1] = 0x80 | (1 << 2) | 3; // transit, operational to full feature
        header[8..14].copy_from_slice(&[0x80, 0, 0, 0, 0, 1]);
        header[14..16].copy_from_slice(&tsih.to_be_bytes());
        header[16..20].copy_from_slice(&0u32.to_be_bytes());
        header[20..22].copy_from_slice(&cid.to_be_bytes());
        header[24..28].copy_from_slice(&initiator.cmd_sn.to_be_bytes());
        let mut out = Vec::new();
        pdu(&mut out, header, keys.as_bytes());
        initiator.stream.write_all(&out).unwrap();
        let response = initiator.receive().expect("a login response");
        assert_eq!(response.opcode(), 0x23, "{response:?}");
        let status = u16::from_be_bytes([response.header[36], response.header[37]]);
        if status == 0 {
            assert_eq!(
                response.header[1] & 0x83,
                0x83,
                "full feature phase reached"
            );
        }
        let tsih = u16::from_be_bytes([response.header[14], response.header[15]]);
        (initiator, status, tsih)
    }

    /// Receives one PDU (`None` once the target has closed).
    pub fn receive(&mut self) -> Option<Pdu> {
        let mut header = [0u8; 48];
        self.stream.read_exact(&mut header).ok()?;
        let length = u32::from_be_bytes([0, header[5], header[6], header[7]]) as usize;
        let mut data = vec![0u8; length.div_ceil(4) * 4];
        self.stream.read_exact(&mut data).ok()?;
        data.truncate(length);
        Some(Pdu { header, data })
    }

    /// Sends a SCSI command to LUN 0 with `data` as immediate data; returns
    /// its task tag.
    pub fn command(&mut self, cdb: &[u8], expected: u32, read: bool, data: &[u8]) -> u32 {
        self.command_to(0, cdb, expected, read, data)
    }

    /// Sends a SCSI command to LUN `lun` (below 256) with `data` as
    /// immediate data; returns its task tag.
    pub fn command_to(
        &mut self,
        lun: u8,
        cdb: &[u8],
        expected: u32,
        read: bool,
        data: &[u8],
    ) -> u32 {
        let itt = self.next_itt;
        self.next_itt += 1;
        let mut header = [0u8; 48];
        header[0] = 0x01;
        header[1] = 0x80 | if read { 0x40 } else { 0 } | if data.is_empty() { 0 } else { 0x20 };
        header[9] = lun;
        header[16..20].copy_from_slice(&itt.to_be_bytes());
        header[20..24].copy_from_slice(&expected.to_be_bytes());
        header[24..28].copy_from_slice(&self.cmd_sn.to_be_bytes());
        header[32..32 + cdb.len()].copy_from_slice(cdb);
        self.cmd_sn = self.cmd_sn.wrapping_add(1);
        let mut out = Vec::with_capacity(48 + data.len());
        pdu(&mut out, header, data);
        self.stream.write_all(&out).expect("sent");
        itt
    }

    /// WRITE(10) of `data` (whole 512-byte blocks) at `lba`.
    pub fn write10(&mut self, lba: u32, data: &[u8]) -> u32 {
        let blocks = (data.len() / 512) as u16;
        let mut cdb = [0u8; 10];
        cdb[0] = 0x2a;
        cdb[2..6].copy_from_slice(&lba.to_be_bytes());
        cdb[7..9].copy_from_slice(&blocks.to_be_bytes());
        self.command(&cdb, data.len() as u32, false, data)
    }

    /// READ(10) of `blocks` at `lba`.
    pub fn read10(&mut self, lba: u32, blocks: u16) -> u32 {
        let mut cdb = [0u8; 10];
        cdb[0] = 0x28;
        cdb[2..6].copy_from_slice(&lba.to_be_bytes());
        cdb[7..9].copy_from_slice(&blocks.to_be_bytes());
        self.command(&cdb, u32::from(blocks) * 512, true, &[])
    }

    /// The next finished command (Data-In gathered), skipping other PDUs;
    /// `None` once the target has closed.
    pub fn done(&mut self) -> Option<Done> {
        loop {
            let pdu = self.receive()?;
            match pdu.opcode() {
                0x25 => {
                    let itt = pdu.itt();
                    self.partial.entry(itt).or_default().extend(&pdu.data);
                    if pdu.header[1] & 0x01 != 0 {
                        let data = self.partial.remove(&itt).unwrap_or_default();
                        let status = pdu.header[3];
                        return Some(Done { itt, status, data });
                    }
                }
                0x21 => {
                    let itt = pdu.itt();
                    let status = pdu.header[3];
                    let data = match status {
                        // CHECK CONDITION: the sense data, after its length.
                        0x02 => pdu.data.get(2..).unwrap_or_default().to_vec(),
                        _ => self.partial.remove(&itt).unwrap_or_default(),
                    };
                    return Some(Done { itt, status, data });
                }
                _ => {}
            }
        }
    }

    /// A NOP-Out ping (immediate, so outside the CmdSN order) with `data`;
    /// waits for its NOP-In and returns the echoed data.
    pub fn ping(&mut self, data: &[u8]) -> Option<Vec<u8>> {
        let itt = 0x7000_0000 | self.next_itt;
        self.next_itt += 1;
        let mut header = [0u8; 48];
        header[0] = 0x40;
        header[1] = 0x80;
        header[16..20].copy_from_slice(&itt.to_be_bytes());
        header[20..24].copy_from_slice(&u32::MAX.to_be_bytes());
        header[24..28].copy_from_slice(&self.cmd_sn.to_be_bytes());
        let mut out = Vec::new();
        pdu(&mut out, header, data);
        self.stream.write_all(&out).ok()?;
        loop {
            let pdu = self.receive()?;
            if pdu.opcode() == 0x20 && pdu.itt() == itt {
                return Some(pdu.data);
            }
        }
    }
}

/// `iscsi-ls -s` as `initiator`, with `credentials` (`user%secret@`,
/// and `?target_user=…&target_password=…` for mutual CHAP) in the URL:
/// (whether it succeeded, its `Lun:` lines, its stderr).
pub fn iscsi_ls(
    address: SocketAddr,
    initiator: &str,
    user: &str,
    query: &str,
) -> (bool, Vec<String>, String) {
    let url = format!("iscsi://{user}{address}{query}");
    let output = super::client("iscsi-ls", &["-s", "-i", initiator, &url]);
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    let luns = text
        .lines()
        .filter(|l| l.starts_with("Lun:"))
        .map(|l| l.split_whitespace().next().unwrap_or_default().to_string())
        .collect();
    let errors = String::from_utf8_lossy(&output.stderr).into_owned();
    (output.status.success(), luns, errors)
}

/// The LUN numbers `initiator` sees, without CHAP.
pub fn luns_seen(address: SocketAddr, initiator: &str) -> Vec<String> {
    let (logged_in, luns, errors) = iscsi_ls(address, initiator, "", "");
    assert!(logged_in, "iscsi-ls as {initiator} failed: {errors}");
    luns
}
