//! tgt, the reference user-space iSCSI target, run beside wafer: tgtd in
//! the foreground on a free port, one target with one LUN backed by a file.
//! tgtd needs root (its control socket lives in /var/run/tgtd).

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::client;

/// tgtd in the foreground, killed when dropped.
pub struct Tgtd {
    child: Child,
    control: String,
}

impl Drop for Tgtd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().expect("bound").port()
}

pub fn tgtadm(control: &str, args: &[&str]) -> std::process::Output {
    let mut all = vec!["-C", control, "--lld", "iscsi"];
    all.extend(args);
    client("tgtadm", &all)
}

/// Starts tgtd on a free port with one LUN (1) backed by `image`, opened
/// with the backing-store flags `bsoflags` (`["sync"]`, `["direct"]`, or none
/// for the page cache); returns it and its URI.
pub fn start_tgt(image: &Path, bsoflags: &[&str]) -> (Tgtd, String) {
    let port = free_port();
    let control = (port % 1000 + 1000).to_string();
    let portal = format!("portal=127.0.0.1:{port}");
    let child = Command::new("tgtd")
        .args(["-f", "--iscsi", &portal, "-C", &control])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("tgtd runs (scripts/test installs tgt)");
    let tgtd = Tgtd { child, control };
    let deadline = Instant::now() + Duration::from_secs(10);
    while !tgtadm(&tgtd.control, &["--op", "show", "--mode", "target"])
        .status
        .success()
    {
        assert!(
            Instant::now() < deadline,
            "tgtd did not come up (it needs root)"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let iqn = "iqn.2026-11.org.wafer:tgt-reference";
    let image = image.to_str().expect("a UTF-8 path");
    for args in [
        vec!["--op", "new", "--mode", "target", "--tid", "1", "-T", iqn],
        vec![
            "--op",
            "new",
            "--mode",
            "logicalunit",
            "--tid",
            "1",
            "--lun",
            "1",
            "-b",
            image,
        ]
        .into_iter()
        .chain(bsoflags.iter().flat_map(|flag| ["--bsoflags", *flag]))
        .collect(),
        vec![
            "--op", "bind", "--mode", "target", "--tid", "1", "-I", "ALL",
        ],
    ] {
        let output = tgtadm(&tgtd.control, &args);
        assert!(output.status.success(), "tgtadm {args:?}: {output:?}");
    }
    (tgtd, format!("iscsi://127.0.0.1:{port}/{iqn}/1"))
}
