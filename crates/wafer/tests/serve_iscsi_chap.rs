//! CHAP over iSCSI with libiscsi's `iscsi-ls`: the right secret logs in; a
//! wrong one, another user name, or no CHAP at all is refused at login
//! (Authentication failure); mutual CHAP with the right target secret logs
//! in and with a wrong one is refused by the initiator itself; initiators
//! without an entry take the default (none, or deny once set); secrets are
//! in an owner-only file and never shown; a corrupt file refuses every
//! iSCSI login while NBD serves on.

mod serve_harness;

use std::os::unix::fs::PermissionsExt;

use serve_harness::iscsi::{iscsi_ls, luns_seen, parse_uri};
use serve_harness::load::refused;
use serve_harness::{NbdClient, Scratch, Served, TEST_SIZES, ok, serve_with};

/// The host given a CHAP entry.
const HOST: &str = "iqn.2026-11.org.example:host-a";
/// A host without one.
const STRANGER: &str = "iqn.2026-11.org.example:stranger";
const SECRET: &str = "alice-secret-1";
const TARGET_SECRET: &str = "filer-secret-1";

fn serve_iscsi(scratch: &Scratch) -> Served {
    let mut args = TEST_SIZES.to_vec();
    args.extend(["--iscsi", "127.0.0.1:0"]);
    serve_with(scratch, &args)
}

#[test]
fn chap_admits_the_right_secret_and_refuses_the_wrong_one_both_ways() {
    let scratch = Scratch::new();
    let server = serve_iscsi(&scratch);
    let data = server.data.clone();
    let (address, _) = parse_uri(&server.iscsi_uri());
    ok(
        &data,
        &["igroup", "create", "-i", "-t", "linux", "hosts", HOST],
    );
    ok(&data, &["lun", "map", "/vol/vol0/lun0", "hosts"]);
    ok(
        &data,
        &[
            "iscsi", "security", "add", "-i", HOST, "-s", "CHAP", "-p", SECRET, "-n", "alice",
        ],
    );
    let shown = ok(&data, &["iscsi", "security", "show"]);
    assert!(
        shown.contains(&format!(
            "init: {HOST} auth: CHAP Inbound password: **** Inbound username: alice"
        )),
        "{shown}"
    );
    assert!(!shown.contains(SECRET), "no secret shown: {shown}");
    let mode = std::fs::metadata(data.join("iscsi_security.toml"))
        .expect("the secrets' file")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);

    let right = format!("alice%{SECRET}@");
    let (admitted, luns, errors) = iscsi_ls(address, HOST, &right, "");
    assert!(admitted && luns == ["Lun:0"], "{errors}");
    let (admitted, _, errors) = iscsi_ls(address, HOST, "alice%wrong-secret-1@", "");
    assert!(
        !admitted && errors.contains("Authentication failure"),
        "a wrong secret: {errors}"
    );
    let (admitted, _, errors) = iscsi_ls(address, HOST, "", "");
    assert!(
        !admitted && errors.contains("Authentication failure"),
        "AuthMethod=None: {errors}"
    );
    let (admitted, _, errors) = iscsi_ls(address, HOST, &format!("mallory%{SECRET}@"), "");
    assert!(!admitted, "another user name: {errors}");
    // Initiators without an entry keep the default: none needed.
    let (admitted, _, errors) = iscsi_ls(address, STRANGER, "", "");
    assert!(admitted, "{errors}");

    // Mutual: the target proves itself with its own secret.
    ok(
        &data,
        &[
            "iscsi",
            "security",
            "add",
            "-i",
            HOST,
            "-s",
            "CHAP",
            "-p",
            SECRET,
            "-n",
            "alice",
            "-o",
            TARGET_SECRET,
            "-m",
            "filer",
        ],
    );
    let mutual = format!("?target_user=filer&target_password={TARGET_SECRET}");
    let (admitted, luns, errors) = iscsi_ls(address, HOST, &right, &mutual);
    assert!(admitted && luns == ["Lun:0"], "{errors}");
    let wrong = "?target_user=filer&target_password=not-the-filer-1";
    let (admitted, _, errors) = iscsi_ls(address, HOST, &right, wrong);
    assert!(
        !admitted && errors.contains("Invalid CHAP_R response from the target"),
        "{errors}"
    );

    // A default of deny shuts out everyone without an entry.
    ok(
        &data,
        &["iscsi", "security", "add", "-i", "default", "-s", "deny"],
    );
    assert!(!iscsi_ls(address, STRANGER, "", "").0);
    ok(&data, &["iscsi", "security", "delete", "-i", "default"]);
    assert!(iscsi_ls(address, STRANGER, "", "").0);
    server.stop();
}

#[test]
fn a_corrupt_security_file_refuses_every_iscsi_login_and_nbd_serves_on() {
    let scratch = Scratch::new();
    let server = serve_iscsi(&scratch);
    let data = server.data.clone();
    ok(&data, &["igroup", "add", "default", HOST]);
    assert_eq!(luns_seen(parse_uri(&server.iscsi_uri()).0, HOST), ["Lun:0"]);
    server.stop();
    std::fs::write(data.join("iscsi_security.toml"), "entries = 7\n").expect("written");

    let server = serve_iscsi(&scratch);
    let (address, _) = parse_uri(&server.iscsi_uri());
    let (admitted, _, errors) = iscsi_ls(address, HOST, "", "");
    assert!(
        !admitted && errors.contains("Authentication failure"),
        "{errors}"
    );
    assert!(
        server.log().contains("every iSCSI login is refused"),
        "{}",
        server.log()
    );
    let mut nbd = NbdClient::connect(server.socket(), "vol0/lun0");
    assert!(nbd.read(0, 4096).is_ok(), "NBD serves on");
    let err = refused(&data, &["iscsi", "security", "show"]);
    assert!(err.contains("malformed"), "{err}");
    server.stop();
}
