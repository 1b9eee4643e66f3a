//! What the `serve_*` tests share: a real `wafer serve` process on a scratch
//! data directory (small sparse disks, NBD on a Unix socket, so no port is
//! ever taken), its admin socket, a raw NBD client, and the external clients
//! (qemu-io, qemu-img, fio, nbdinfo, nbdcopy; `scripts/test` installs them).
//!
//! Each test binary uses part of this module, hence the `dead_code` allowance.
#![allow(dead_code)]

pub mod iscsi;
pub mod load;
pub mod tgt;
pub mod tls;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use wafer_server::admin::{AdminClient, AdminReply, AdminRequest, AdminResponse};

/// Sizes of a test filer: six 128 MiB data disks, a 320 MiB volume, a 192 MiB
/// LUN (room for fio's verify regions and for snapshots to hold overwrites).
pub const TEST_SIZES: [&str; 6] = [
    "--disk-size",
    "128m",
    "--vol-size",
    "320m",
    "--lun-size",
    "192m",
];
/// The LUN size `TEST_SIZES` makes.
pub const LUN_BYTES: u64 = 192 << 20;
/// How long a server may take to start.
const START_LIMIT: Duration = Duration::from_secs(60);

/// A scratch directory holding a data directory and the NBD socket.
pub struct Scratch {
    temp: tempfile::TempDir,
}

impl Scratch {
    pub fn new() -> Scratch {
        Scratch {
            temp: tempfile::tempdir().expect("a scratch directory"),
        }
    }

    /// The data directory (absent until the first server creates it).
    pub fn data(&self) -> PathBuf {
        self.temp.path().join("data")
    }

    /// The NBD socket.
    pub fn socket(&self) -> PathBuf {
        self.temp.path().join("nbd.sock")
    }

    /// A file in the scratch directory.
    pub fn file(&self, name: &str) -> PathBuf {
        self.temp.path().join(name)
    }

    /// A disk's backing file.
    pub fn disk(&self, n: usize) -> PathBuf {
        self.data().join(format!("disk{n}.img"))
    }
}

/// A running `wafer serve`.
pub struct Served {
    child: Child,
    /// What it printed on standard output when it started.
    pub startup: String,
    /// Its data directory.
    pub data: PathBuf,
    socket: PathBuf,
    log: PathBuf,
}

/// Starts `wafer serve` on the scratch directory with the test sizes.
pub fn serve(scratch: &Scratch) -> Served {
    serve_with(scratch, &TEST_SIZES)
}

/// Starts `wafer serve` with `extra` arguments; panics if it does not come up.
pub fn serve_with(scratch: &Scratch, extra: &[&str]) -> Served {
    start(scratch, wafer_serve(scratch, extra))
}

/// Starts `wafer serve` with `extra` arguments and environment variables
/// `env` (`RUST_LOG`, `NOTIFY_SOCKET`, ...).
pub fn serve_with_env(scratch: &Scratch, extra: &[&str], env: &[(&str, &str)]) -> Served {
    let mut command = wafer_serve(scratch, extra);
    command.envs(env.iter().copied());
    start(scratch, command)
}

/// Starts `wafer serve` with `extra` arguments under `umask` (a shell's
/// `umask` argument, such as `000`).
pub fn serve_under_umask(scratch: &Scratch, umask: &str, extra: &[&str]) -> Served {
    let serve = wafer_serve(scratch, extra);
    let mut command = Command::new("sh");
    command
        .arg("-c")
        .arg(format!("umask {umask} && exec \"$0\" \"$@\""))
        .arg(serve.get_program())
        .args(serve.get_args());
    start(scratch, command)
}

fn start(scratch: &Scratch, mut command: Command) -> Served {
    let log = scratch.file(&format!("server-{}.log", unique()));
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).expect("a log file"))
        .spawn()
        .expect("wafer serve starts");
    let stdout = child.stdout.take().expect("piped stdout");
    let (lines, received) = mpsc::channel();
    std::thread::spawn(move || {
        // Read to the end, even once nobody listens: a server whose stdout
        // closed would die printing its next line (each listener's URI).
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let _ = lines.send(line);
        }
    });
    let mut startup = String::new();
    let deadline = Instant::now() + START_LIMIT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match received.recv_timeout(left) {
            Ok(line) => {
                startup.push_str(&line);
                startup.push('\n');
                if line.starts_with("serving NBD:") {
                    break;
                }
            }
            Err(_) => {
                let _ = child.kill();
                let status = child.wait().expect("reaped");
                let log = std::fs::read_to_string(&log).unwrap_or_default();
                panic!("wafer serve did not come up ({status}):\n{startup}\n{log}");
            }
        }
    }
    Served {
        child,
        startup,
        data: scratch.data(),
        socket: scratch.socket(),
        log,
    }
}

/// Runs `wafer serve` expecting it to exit (a refusal); panics if it serves.
pub fn serve_expecting_exit(scratch: &Scratch, extra: &[&str]) -> Output {
    let mut child = wafer_serve(scratch, extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("wafer serve starts");
    let deadline = Instant::now() + START_LIMIT;
    while child.try_wait().expect("pollable").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("wafer serve was expected to refuse, but it kept running");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("its output")
}

/// Runs `wafer serve` expecting a refusal (exit status 2); its standard error.
pub fn refusal(scratch: &Scratch, extra: &[&str]) -> String {
    let output = serve_expecting_exit(scratch, extra);
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn wafer_serve(scratch: &Scratch, extra: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_wafer"));
    command
        .arg("serve")
        .arg("--data")
        .arg(scratch.data())
        .arg("--socket")
        .arg(scratch.socket())
        .args(extra)
        // The tests read the server's info lines: a RUST_LOG of the
        // environment running them must not filter them out.
        .env_remove("RUST_LOG")
        .env_remove("NOTIFY_SOCKET");
    command
}

fn unique() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_nanos()
}

impl Served {
    /// The NBD URI of an export.
    pub fn uri(&self, export: &str) -> String {
        format!("nbd+unix:///{export}?socket={}", self.socket.display())
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The iSCSI URI it reported for LUN 0 (`--iscsi`).
    pub fn iscsi_uri(&self) -> String {
        self.startup
            .lines()
            .find_map(|line| line.strip_prefix("serving iSCSI: "))
            .unwrap_or_else(|| panic!("no iSCSI URI printed:\n{}", self.startup))
            .to_string()
    }

    /// The URL it reported for Prometheus scrapes (`--metrics`).
    pub fn metrics_url(&self) -> String {
        self.startup
            .lines()
            .find_map(|line| line.strip_prefix("serving metrics: "))
            .unwrap_or_else(|| panic!("no metrics URL printed:\n{}", self.startup))
            .to_string()
    }

    /// Sends SIGTERM, the graceful stop, without waiting.
    pub fn terminate(&self) {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill").args(["-TERM", &pid]).status();
        assert!(sent.expect("kill runs").success(), "kill -TERM {pid}");
    }

    /// The address of the first TCP listener it reported (`--listen`).
    pub fn tcp_address(&self) -> std::net::SocketAddr {
        self.startup
            .lines()
            .find_map(|line| line.strip_prefix("serving NBD: nbd://"))
            .and_then(|rest| rest.split('/').next())
            .and_then(|address| address.parse().ok())
            .unwrap_or_else(|| panic!("no TCP URI printed:\n{}", self.startup))
    }

    /// The socket NBD is served on.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// What the server has logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Sends an admin request; returns the response.
    pub fn admin(&self, request: AdminRequest) -> AdminResponse {
        AdminClient::connect(&self.data)
            .expect("the admin socket answers")
            .request(&request)
            .expect("an admin response")
    }

    /// Sends an admin request that must succeed; returns its reply.
    pub fn admin_ok(&self, request: AdminRequest) -> AdminReply {
        match self.admin(request.clone()) {
            AdminResponse::Ok(reply) => reply,
            AdminResponse::Error(error) => panic!("{request:?} failed: {error:?}"),
        }
    }

    /// The counters as `sysstat` reports them.
    pub fn sysstat(&self) -> wafer_server::admin::SysstatReport {
        match self.admin_ok(AdminRequest::Sysstat) {
            AdminReply::Sysstat(report) => *report,
            other => panic!("sysstat answered {other:?}"),
        }
    }

    /// SIGTERM: the server finishes, writes a final CP and must exit 0.
    pub fn stop(mut self) {
        let status = self.terminate_and_wait();
        assert!(
            status.success(),
            "wafer serve exited {status}:\n{}",
            self.log()
        );
        assert!(self.log().contains("final CP committed"), "{}", self.log());
    }

    /// Waits for the server to exit by itself; its status and log.
    pub fn wait_exit(mut self, limit: Duration) -> (ExitStatus, String) {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().expect("pollable") {
                return (status, self.log());
            }
            assert!(
                Instant::now() < deadline,
                "wafer serve did not exit:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGKILL: no flush, no final CP.
    pub fn kill(mut self) {
        self.child.kill().expect("killed");
        self.child.wait().expect("reaped");
    }

    fn terminate_and_wait(&mut self) -> ExitStatus {
        self.terminate();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = self.child.try_wait().expect("pollable") {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "wafer serve did not stop:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        // A test that failed midway must not leave its server behind.
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A tmpfs mounted on a directory of the scratch area, unmounted on drop.
pub struct Tmpfs {
    pub dir: PathBuf,
}

impl Tmpfs {
    /// Mounts one of `bytes` on `dir` (made if absent); `None` without the
    /// right to mount (not root).
    pub fn mount(dir: &Path, bytes: u64) -> Option<Tmpfs> {
        std::fs::create_dir_all(dir).expect("a mount point");
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={bytes}"), "tmpfs"])
            .arg(dir)
            .status()
            .ok()?;
        status.success().then(|| Tmpfs {
            dir: dir.to_path_buf(),
        })
    }

    /// Bytes free on it.
    pub fn available(&self) -> u64 {
        let output = Command::new("df")
            .args(["--output=avail", "-B1"])
            .arg(&self.dir)
            .output()
            .expect("df runs");
        let text = String::from_utf8_lossy(&output.stdout);
        text.lines()
            .nth(1)
            .and_then(|l| l.trim().parse().ok())
            .expect("df's answer")
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
    }
}

/// Runs `wafer --data DIR ARGS…`: (exit code, stdout, stderr).
pub fn wafer(data: &Path, args: &[&str]) -> (i32, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_wafer"))
        .arg("--data")
        .arg(data)
        .args(args)
        .output()
        .expect("wafer runs");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Runs `wafer --data DIR ARGS…`, which must succeed; returns its stdout.
pub fn ok(data: &Path, args: &[&str]) -> String {
    let (code, out, err) = wafer(data, args);
    assert_eq!(code, 0, "wafer {args:?} failed: {err}\n{out}");
    out
}

/// Runs an external client; panics (with a pointer to `scripts/test`) if it
/// is not installed. Returns its output whatever its status.
pub fn client(program: &str, args: &[&str]) -> Output {
    run_client(Command::new(program).args(args), program)
}

/// Runs fio in the scratch directory (it leaves verify state files behind).
pub fn fio(scratch: &Scratch, args: &[&str]) -> Output {
    run_client(
        Command::new("fio")
            .args(args)
            .current_dir(scratch.temp.path()),
        "fio",
    )
}

fn run_client(command: &mut Command, program: &str) -> Output {
    command.output().unwrap_or_else(|error| {
        panic!(
            "{program} could not be run ({error}); install fio, libnbd-bin and qemu-utils \
                 (scripts/test does it)"
        )
    })
}

/// Runs an external client that must succeed; returns its standard output.
pub fn client_ok(program: &str, args: &[&str]) -> String {
    let output = client(program, args);
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{program} {args:?} failed ({}):\n{text}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    text
}

/// qemu-io commands against `uri` (raw format); must succeed.
pub fn qemu_io(uri: &str, commands: &[&str]) -> String {
    let mut args = vec!["-f", "raw"];
    for command in commands {
        args.extend(["-c", command]);
    }
    args.push(uri);
    client_ok("qemu-io", &args)
}

/// The byte pattern the tests write at block `n` of a region: distinct per
/// block and per `generation`, so a block read back from the wrong place or
/// the wrong time is caught.
pub fn pattern(generation: u8, n: u64, length: usize) -> Vec<u8> {
    let mut block = Vec::with_capacity(length);
    let mut x = n.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ u64::from(generation) << 56;
    while block.len() < length {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        block.extend_from_slice(&x.to_le_bytes());
    }
    block.truncate(length);
    block
}

/// `wafer serve` options for a small node: 128 MiB disks, `vol0` of 60 MiB
/// and `lun0` of 16 MiB in it.
pub const SMALL_SIZES: &[&str] = &[
    "--disk-size",
    "128m",
    "--vol-size",
    "60m",
    "--lun-size",
    "16m",
];

/// NBD protocol constants a raw client needs.
pub mod wire {
    pub const NBDMAGIC: u64 = 0x4e42_444d_4147_4943;
    pub const IHAVEOPT: u64 = 0x4948_4156_454f_5054;
    pub const REPLY_MAGIC: u64 = 0x0003_e889_0455_65a9;
    pub const REQUEST_MAGIC: u32 = 0x2560_9513;
    pub const SIMPLE_REPLY_MAGIC: u32 = 0x6744_6698;
    pub const OPT_GO: u32 = 7;
    pub const REP_ACK: u32 = 1;
    pub const REP_INFO: u32 = 3;
    pub const REP_ERR_UNSUP: u32 = (1 << 31) + 1;
    pub const REP_ERR_UNKNOWN: u32 = (1 << 31) + 6;
    pub const CMD_READ: u16 = 0;
    pub const CMD_WRITE: u16 = 1;
    pub const CMD_DISC: u16 = 2;
    pub const CMD_FLUSH: u16 = 3;
    pub const CMD_TRIM: u16 = 4;
    pub const CMD_WRITE_ZEROES: u16 = 6;
    pub const CMD_FLAG_NO_HOLE: u16 = 1 << 1;
    pub const CMD_FLAG_FAST_ZERO: u16 = 1 << 4;
    pub const EPERM: u32 = 1;
    pub const EINVAL: u32 = 22;
    pub const ENOSPC: u32 = 28;
    pub const ENOTSUP: u32 = 95;
}

/// A minimal NBD client over the Unix socket: fixed newstyle, `NBD_OPT_GO`,
/// simple replies, pipelined requests.
pub struct NbdClient {
    pub stream: UnixStream,
    /// The export's size and transmission flags.
    pub size: u64,
    pub flags: u16,
    next_handle: u64,
    /// Lengths of reads in flight, by handle.
    reads: BTreeMap<u64, usize>,
}

/// A reply: its handle, error (0 = success) and, for reads, the data.
#[derive(Debug)]
pub struct NbdReply {
    pub handle: u64,
    pub error: u32,
    pub data: Vec<u8>,
}

impl NbdClient {
    /// Connects and negotiates `export`; panics if the server refuses.
    pub fn connect(socket: &Path, export: &str) -> NbdClient {
        NbdClient::try_connect(socket, export).unwrap_or_else(|reply| {
            panic!("export {export:?} refused with option reply {reply:#x}")
        })
    }

    /// Connects and negotiates `export`; `Err` holds the server's error reply.
    pub fn try_connect(socket: &Path, export: &str) -> Result<NbdClient, u32> {
        let mut stream = UnixStream::connect(socket).expect("the NBD socket answers");
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .expect("a timeout");
        let mut greeting = [0u8; 18];
        stream.read_exact(&mut greeting).expect("a greeting");
        assert_eq!(greeting[..8], wire::NBDMAGIC.to_be_bytes());
        let (size, flags) = negotiate(&mut stream, export)?;
        Ok(NbdClient {
            stream,
            size,
            flags,
            next_handle: 1,
            reads: BTreeMap::new(),
        })
    }

    /// Sends a request without waiting; returns its handle.
    pub fn send(&mut self, command: u16, offset: u64, length: u32, data: &[u8]) -> u64 {
        self.try_send(command, offset, length, data)
            .expect("a request sent")
    }

    /// Sends a request without waiting; returns its handle, or why the
    /// server did not take it (it has gone).
    pub fn try_send(
        &mut self,
        command: u16,
        offset: u64,
        length: u32,
        data: &[u8],
    ) -> std::io::Result<u64> {
        self.try_send_flagged(0, command, offset, length, data)
    }

    /// [`NbdClient::try_send`] with command flags.
    pub fn try_send_flagged(
        &mut self,
        flags: u16,
        command: u16,
        offset: u64,
        length: u32,
        data: &[u8],
    ) -> std::io::Result<u64> {
        let handle = self.next_handle;
        self.next_handle += 1;
        let mut message = Vec::with_capacity(28 + data.len());
        message.extend_from_slice(&wire::REQUEST_MAGIC.to_be_bytes());
        message.extend_from_slice(&flags.to_be_bytes());
        message.extend_from_slice(&command.to_be_bytes());
        message.extend_from_slice(&handle.to_be_bytes());
        message.extend_from_slice(&offset.to_be_bytes());
        message.extend_from_slice(&length.to_be_bytes());
        message.extend_from_slice(data);
        self.stream.write_all(&message)?;
        if command == wire::CMD_READ {
            self.reads.insert(handle, length as usize);
        }
        Ok(handle)
    }

    /// Receives the next reply.
    pub fn reply(&mut self) -> std::io::Result<NbdReply> {
        let mut header = [0u8; 16];
        self.stream.read_exact(&mut header)?;
        assert_eq!(
            u32::from_be_bytes(header[..4].try_into().unwrap()),
            wire::SIMPLE_REPLY_MAGIC
        );
        let error = u32::from_be_bytes(header[4..8].try_into().unwrap());
        let handle = u64::from_be_bytes(header[8..16].try_into().unwrap());
        let length = self.reads.remove(&handle).unwrap_or(0);
        let mut data = vec![0u8; if error == 0 { length } else { 0 }];
        self.stream.read_exact(&mut data)?;
        Ok(NbdReply {
            handle,
            error,
            data,
        })
    }

    /// WRITE_ZEROES with command `flags`, and waits; returns the error.
    pub fn write_zeroes(&mut self, offset: u64, length: u32, flags: u16) -> u32 {
        self.try_send_flagged(flags, wire::CMD_WRITE_ZEROES, offset, length, &[])
            .expect("a request sent");
        self.reply().expect("a write-zeroes reply").error
    }

    /// Writes and waits; returns the error (0 = success).
    pub fn write(&mut self, offset: u64, data: &[u8]) -> u32 {
        self.send(wire::CMD_WRITE, offset, data.len() as u32, data);
        self.reply().expect("a write reply").error
    }

    /// Reads and waits.
    pub fn read(&mut self, offset: u64, length: u32) -> Result<Vec<u8>, u32> {
        self.send(wire::CMD_READ, offset, length, &[]);
        let reply = self.reply().expect("a read reply");
        match reply.error {
            0 => Ok(reply.data),
            error => Err(error),
        }
    }
}

/// After the 18-byte greeting: the client flags and `NBD_OPT_GO` for
/// `export`; returns its size and transmission flags, or the server's error
/// reply.
pub fn negotiate(stream: &mut (impl Read + Write), export: &str) -> Result<(u64, u16), u32> {
    stream.write_all(&3u32.to_be_bytes()).expect("client flags");
    let mut data = (export.len() as u32).to_be_bytes().to_vec();
    data.extend_from_slice(export.as_bytes());
    data.extend_from_slice(&0u16.to_be_bytes());
    send_option(stream, wire::OPT_GO, &data);
    let (mut size, mut flags) = (0, 0);
    loop {
        let (reply, payload) = read_option_reply(stream);
        match reply {
            wire::REP_ACK => return Ok((size, flags)),
            wire::REP_INFO if payload.len() == 12 && payload[..2] == [0, 0] => {
                size = u64::from_be_bytes(payload[2..10].try_into().unwrap());
                flags = u16::from_be_bytes(payload[10..12].try_into().unwrap());
            }
            wire::REP_INFO => {}
            error => return Err(error),
        }
    }
}

/// Sends one handshake option.
pub fn send_option(stream: &mut impl Write, option: u32, data: &[u8]) {
    let mut message = wire::IHAVEOPT.to_be_bytes().to_vec();
    message.extend_from_slice(&option.to_be_bytes());
    message.extend_from_slice(&(data.len() as u32).to_be_bytes());
    message.extend_from_slice(data);
    stream.write_all(&message).expect("an option sent");
}

/// Reads one option reply: its type and payload.
pub fn read_option_reply(stream: &mut impl Read) -> (u32, Vec<u8>) {
    let mut header = [0u8; 20];
    stream.read_exact(&mut header).expect("an option reply");
    assert_eq!(
        u64::from_be_bytes(header[..8].try_into().unwrap()),
        wire::REPLY_MAGIC
    );
    let reply = u32::from_be_bytes(header[12..16].try_into().unwrap());
    let length = u32::from_be_bytes(header[16..20].try_into().unwrap());
    let mut payload = vec![0u8; length as usize];
    stream
        .read_exact(&mut payload)
        .expect("an option reply's payload");
    (reply, payload)
}
