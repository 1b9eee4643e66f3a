//! `wafer serve` keeps the filer's data owner-only whatever it inherits: under
//! `umask 000` its files and sockets are born 0600 and its directory 0700; a
//! data directory (or its files) found open to others is closed again, with a
//! log line; `--socket-mode` opens the NBD socket to a group when asked; and a
//! TCP listener other hosts can reach is served with a warning.

mod serve_harness;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use serve_harness::{Scratch, TEST_SIZES, serve_under_umask, serve_with};

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o7777
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

/// Every regular file of the data directory, by name.
fn data_files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("listable")
        .map(|entry| entry.expect("an entry"))
        .filter(|entry| entry.file_type().expect("a type").is_file())
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn assert_owner_only(dir: &Path) {
    assert_eq!(mode(dir), 0o700, "{}", dir.display());
    let files = data_files(dir);
    for name in [
        "wafer.toml",
        "wafer.lock",
        "nvlog",
        "disk0.img",
        "disk8.img",
    ] {
        assert!(
            files.contains(&name.to_string()),
            "{name} missing: {files:?}"
        );
    }
    for name in &files {
        assert_eq!(mode(&dir.join(name)), 0o600, "{name}");
    }
    assert_eq!(mode(&dir.join("admin.sock")), 0o600);
}

#[test]
fn under_umask_000_every_file_and_socket_is_owner_only() {
    let scratch = Scratch::new();
    let server = serve_under_umask(&scratch, "000", &TEST_SIZES);
    assert_owner_only(&scratch.data());
    assert_eq!(mode(server.socket()), 0o600, "the NBD socket");
    // The configuration is rewritten through a temporary file when a disk
    // fails, and a replacement disk file is made by the engine's driver:
    // they are owner-only too.
    // The one spare goes to disk3; disk4 stays failed and is replaced.
    serve_harness::ok(&scratch.data(), &["disk", "fail", "disk3"]);
    serve_harness::ok(&scratch.data(), &["disk", "fail", "disk4"]);
    serve_harness::ok(&scratch.data(), &["disk", "replace", "disk4"]);
    assert!(data_files(&scratch.data()).contains(&"disk9.img".to_string()));
    assert_owner_only(&scratch.data());
    server.stop();
}

#[test]
fn a_data_directory_open_to_others_is_closed_with_a_log_line() {
    let scratch = Scratch::new();
    // A directory made by hand: mkdir under the usual umask gives 0755.
    std::fs::create_dir(scratch.data()).expect("created");
    chmod(&scratch.data(), 0o755);
    let server = serve_with(&scratch, &TEST_SIZES);
    assert_owner_only(&scratch.data());
    assert!(
        server
            .log()
            .contains("was mode 0755, open to other users: set to 0700"),
        "{}",
        server.log()
    );
    server.stop();

    // Loosened while stopped: directory and files are closed at the next start.
    chmod(&scratch.data(), 0o775);
    for name in ["wafer.toml", "nvlog", "disk2.img", "wafer.lock"] {
        chmod(&scratch.data().join(name), 0o644);
    }
    let server = serve_with(&scratch, &[]);
    assert_owner_only(&scratch.data());
    let log = server.log();
    assert!(
        log.contains("disk2.img was mode 0644: set to 0600"),
        "{log}"
    );
    assert!(log.contains("nvlog was mode 0644: set to 0600"), "{log}");
    server.stop();
}

#[test]
fn socket_mode_opens_the_nbd_socket_to_the_group_when_asked() {
    let scratch = Scratch::new();
    let mut args = TEST_SIZES.to_vec();
    args.extend(["--socket-mode", "0660"]);
    let server = serve_under_umask(&scratch, "000", &args);
    assert_eq!(mode(server.socket()), 0o660);
    assert_eq!(mode(&scratch.data().join("admin.sock")), 0o600);
    server.stop();
}

#[test]
fn a_bad_socket_mode_is_refused() {
    let scratch = Scratch::new();
    let output = serve_harness::serve_expecting_exit(&scratch, &["--socket-mode", "999"]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("not an octal mode"), "{stderr}");
    assert!(
        !scratch.data().exists(),
        "a refused start created the directory"
    );
}

const WARNING: &str = "WARNING: NBD on";

#[test]
fn a_listener_other_hosts_can_reach_is_warned_about() {
    let scratch = Scratch::new();
    let mut args = TEST_SIZES.to_vec();
    args.extend(["--listen", "127.0.0.1:0", "--listen", "0.0.0.0:0"]);
    let server = serve_with(&scratch, &args);
    let log = server.log();
    let warnings: Vec<&str> = log.lines().filter(|l| l.contains(WARNING)).collect();
    assert_eq!(warnings.len(), 1, "one warning, for 0.0.0.0 only:\n{log}");
    assert!(warnings[0].contains("0.0.0.0:"), "{log}");
    assert!(warnings[0].contains("no access control"), "{log}");
    assert!(
        warnings[0].contains("can read and write every LUN"),
        "{log}"
    );
    server.stop();

    let mut args = vec!["--listen", "127.0.0.1:0", "--listen", "[::1]:0"];
    if std::net::TcpListener::bind("[::1]:0").is_err() {
        args.truncate(2); // no IPv6 loopback on this machine
    }
    let server = serve_with(&scratch, &args);
    assert!(!server.log().contains(WARNING), "{}", server.log());
    server.stop();
}
