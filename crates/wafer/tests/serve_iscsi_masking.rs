//! LUN masking over iSCSI, with real initiators: an initiator in
//! no igroup sees the target but no LUN; `lun map` shows it exactly the
//! mapped LUN at its LUN ID (a live session is told by a unit attention),
//! `lun unmap` takes it away; a snapshot's image mapped is read-only; data
//! written over iSCSI reads back over NBD and the reverse. igroups, maps
//! and CHAP settings survive a restart and a SIGKILL; wrong administration
//! is refused with a reason and changes nothing. (CHAP itself:
//! `serve_iscsi_chap.rs`.)

mod serve_harness;

use std::net::SocketAddr;
use std::path::Path;

use serve_harness::iscsi::{Initiator, TEST_INITIATOR, iscsi_ls, luns_seen, parse_uri};
use serve_harness::load::{config, refused};
use serve_harness::{
    NbdClient, Scratch, Served, TEST_SIZES, client, client_ok, ok, pattern, serve_with,
};

/// A host the tests admit and take away.
const HOST: &str = "iqn.2026-11.org.example:host-a";
/// A host in no igroup.
const STRANGER: &str = "iqn.2026-11.org.example:stranger";

fn serve_iscsi(scratch: &Scratch) -> Served {
    let mut args = TEST_SIZES.to_vec();
    args.extend(["--iscsi", "127.0.0.1:0"]);
    serve_with(scratch, &args)
}

/// qemu-io over iSCSI as `initiator` against LUN `lun`: (success, output).
fn qemu_io_as(uri: &str, initiator: &str, lun: u16, commands: &[&str]) -> (bool, String) {
    let (address, target) = parse_uri(uri);
    let options = format!(
        "driver=iscsi,transport=tcp,portal={address},target={target},lun={lun},initiator-name={initiator}"
    );
    // Reads only: opened read-only, as a write-protected LUN must be.
    let reads_only = commands.iter().all(|c| c.starts_with("read"));
    let mut args = vec!["--image-opts"];
    if reads_only {
        args.push("-r");
    }
    for command in commands {
        args.extend(["-c", command]);
    }
    args.push(&options);
    let output = client("qemu-io", &args);
    let text = String::from_utf8_lossy(&output.stdout).into_owned()
        + &String::from_utf8_lossy(&output.stderr);
    (output.status.success() && !text.contains("failed"), text)
}

/// Sends TEST UNIT READY to `lun`: (status, sense key, ASC, ASCQ).
fn test_unit_ready(initiator: &mut Initiator, lun: u8) -> (u8, u8, u8, u8) {
    initiator.command_to(lun, &[0u8; 6], 0, false, &[]);
    let done = initiator.done().expect("an answer");
    let sense = |at: usize| done.data.get(at).copied().unwrap_or(0);
    (done.status, sense(2) & 0x0f, sense(12), sense(13))
}

#[test]
fn an_initiator_sees_exactly_the_luns_mapped_to_it_at_their_ids() {
    let scratch = Scratch::new();
    let server = serve_iscsi(&scratch);
    let data = server.data.clone();
    let uri = server.iscsi_uri();
    let (address, target) = parse_uri(&uri);

    // In no igroup: the target is listed, no LUN is.
    let (ok_login, luns, errors) = iscsi_ls(address, HOST, "", "");
    assert!(ok_login, "{errors}");
    assert!(luns.is_empty(), "an initiator in no igroup sees {luns:?}");
    let listed = client_ok("iscsi-ls", &["-i", HOST, &format!("iscsi://{address}")]);
    assert!(
        listed.contains(&target),
        "discovery lists the target: {listed}"
    );

    ok(&data, &["lun", "create", "-s", "16m", "/vol/vol0/lun1"]);
    ok(
        &data,
        &[
            "igroup",
            "create",
            "-i",
            "-t",
            "linux",
            "hosts",
            HOST,
            TEST_INITIATOR,
        ],
    );
    assert!(
        luns_seen(address, HOST).is_empty(),
        "an igroup without maps shows nothing"
    );

    // A live session, before the map.
    let mut session = Initiator::login(address, &target);
    assert_eq!(
        test_unit_ready(&mut session, 5),
        (2, 0x05, 0x25, 0x00),
        "LOGICAL UNIT NOT SUPPORTED"
    );

    let mapped = ok(&data, &["lun", "map", "/vol/vol0/lun1", "hosts", "5"]);
    assert!(
        mapped.contains("LUN /vol/vol0/lun1 was mapped to initiator group hosts=5"),
        "{mapped}"
    );
    assert_eq!(luns_seen(address, HOST), ["Lun:5"]);
    assert!(
        luns_seen(address, STRANGER).is_empty(),
        "others still see nothing"
    );
    let maps = ok(&data, &["lun", "show", "-m"]);
    assert!(
        maps.contains("/vol/vol0/lun1                      hosts                   5       iSCSI"),
        "{maps}"
    );
    // The live session is told once, then sees the LUN.
    assert_eq!(
        test_unit_ready(&mut session, 5),
        (2, 0x06, 0x3f, 0x0e),
        "REPORTED LUNS DATA HAS CHANGED"
    );
    assert_eq!(test_unit_ready(&mut session, 5), (0, 0, 0, 0));
    assert_eq!(
        test_unit_ready(&mut session, 0),
        (2, 0x05, 0x25, 0x00),
        "lun0 is not mapped to it"
    );
    let shown = ok(&data, &["igroup", "show", "hosts"]);
    assert!(
        shown.contains(&format!("{TEST_INITIATOR} (logged in")),
        "{shown}"
    );
    assert!(
        shown.contains(&format!("{HOST} (not logged in)")),
        "{shown}"
    );

    // iSCSI writes, NBD reads; NBD writes, iSCSI reads.
    let (wrote, out) = qemu_io_as(&uri, HOST, 5, &["write -P 0x5a 0 1M"]);
    assert!(wrote, "{out}");
    let mut nbd = NbdClient::connect(server.socket(), "vol0/lun1");
    assert!(nbd.read(0, 1 << 20).expect("readable") == vec![0x5a; 1 << 20]);
    let block = pattern(3, 7, 64 * 1024);
    assert_eq!(nbd.write(1 << 20, &block), 0);
    let (read, out) = qemu_io_as(&uri, HOST, 5, &["read -P 0x5a 0 1M"]);
    assert!(read, "{out}");
    session.command_to(
        5,
        &[0x28, 0, 0, 0, 0x08, 0, 0, 0, 128, 0],
        64 * 1024,
        true,
        &[],
    );
    let done = session.done().expect("read");
    assert!(
        done.status == 0 && done.data == block,
        "iSCSI reads what NBD wrote"
    );

    // A snapshot's image, mapped: read-only, with the data as it was.
    ok(&data, &["snap", "create", "vol0", "s1"]);
    ok(&data, &["lun", "map", "/vol/vol0/lun1@s1", "hosts"]);
    assert_eq!(
        luns_seen(address, HOST),
        ["Lun:0", "Lun:5"],
        "the lowest free ID"
    );
    assert!(qemu_io_as(&uri, HOST, 0, &["read -P 0x5a 0 1M"]).0);
    assert_eq!(nbd.write(0, &[0u8; 4096]), 0, "the live LUN changes");
    assert!(
        qemu_io_as(&uri, HOST, 0, &["read -P 0x5a 0 4k"]).0,
        "the image does not"
    );
    test_unit_ready(&mut session, 0); // the unit attention of the map
    session.command_to(
        0,
        &[0x2a, 0, 0, 0, 0, 0, 0, 0, 1, 0],
        512,
        false,
        &[0u8; 512],
    );
    let done = session.done().expect("an answer");
    let sense = (
        done.data.get(2).map(|k| k & 0x0f),
        done.data.get(12).copied(),
    );
    assert_eq!(
        (done.status, sense),
        (2, (Some(0x07), Some(0x27))),
        "DATA PROTECT, WRITE PROTECTED"
    );

    // Unmapped: gone for new and live sessions alike.
    ok(&data, &["lun", "unmap", "/vol/vol0/lun1", "hosts"]);
    assert_eq!(luns_seen(address, HOST), ["Lun:0"]);
    assert_eq!(test_unit_ready(&mut session, 5), (2, 0x06, 0x3f, 0x0e));
    assert_eq!(test_unit_ready(&mut session, 5), (2, 0x05, 0x25, 0x00));
    drop(session);
    server.stop();
}

const SECRET: &str = "alice-secret-1";

/// What the persistence test sets up and then checks after each start.
fn assert_configured(server: &Served, address: SocketAddr) {
    let right = format!("alice%{SECRET}@");
    let (admitted, luns, errors) = iscsi_ls(address, HOST, &right, "");
    assert!(admitted && luns == ["Lun:0", "Lun:7"], "{errors} {luns:?}");
    assert!(!iscsi_ls(address, HOST, "", "").0, "CHAP is still required");
    let shown = ok(&server.data, &["igroup", "show"]);
    assert!(
        shown.contains("    hosts (iSCSI) (ostype: vmware):"),
        "{shown}"
    );
}

#[test]
fn igroups_maps_and_chap_survive_a_restart_and_a_sigkill() {
    let scratch = Scratch::new();
    let server = serve_iscsi(&scratch);
    let data = server.data.clone();
    ok(&data, &["lun", "create", "-s", "16m", "/vol/vol0/lun1"]);
    ok(
        &data,
        &["igroup", "create", "-i", "-t", "vmware", "hosts", HOST],
    );
    ok(&data, &["lun", "map", "/vol/vol0/lun0", "hosts"]);
    ok(&data, &["lun", "map", "/vol/vol0/lun1", "hosts", "7"]);
    ok(
        &data,
        &[
            "iscsi", "security", "add", "-i", HOST, "-s", "CHAP", "-p", SECRET, "-n", "alice",
        ],
    );
    assert_configured(&server, parse_uri(&server.iscsi_uri()).0);
    server.stop();

    let server = serve_iscsi(&scratch);
    assert_configured(&server, parse_uri(&server.iscsi_uri()).0);
    server.kill();

    let server = serve_iscsi(&scratch);
    assert_configured(&server, parse_uri(&server.iscsi_uri()).0);
    server.stop();
}

/// `wafer.toml` and the secrets' file, to show a refusal changed nothing.
fn state(data: &Path) -> (toml::Table, Option<String>) {
    (
        config(data),
        std::fs::read_to_string(data.join("iscsi_security.toml")).ok(),
    )
}

#[test]
fn wrong_igroups_maps_and_security_are_refused_with_a_reason_and_change_nothing() {
    let scratch = Scratch::new();
    let server = serve_iscsi(&scratch);
    let data = server.data.clone();
    ok(
        &data,
        &["igroup", "create", "-i", "-t", "linux", "hosts", HOST],
    );
    ok(&data, &["lun", "map", "/vol/vol0/lun0", "hosts", "3"]);
    let before = state(&data);
    for (args, reason) in [
        (
            vec!["igroup", "add", "nosuch", STRANGER],
            "initiator group nosuch does not exist",
        ),
        (
            vec!["igroup", "add", "hosts", HOST],
            "already in initiator group hosts",
        ),
        (
            vec!["igroup", "add", "hosts", "iqn.2026-11.Example:UPPER"],
            "is not a valid iSCSI initiator name",
        ),
        (
            vec!["igroup", "add", "hosts", "not-an-iqn"],
            "is not a valid iSCSI initiator name",
        ),
        (
            vec!["igroup", "create", "-i", "-t", "linux", "hosts"],
            "already exists",
        ),
        (
            vec!["igroup", "create", "-i", "-t", "beos", "g"],
            "is not a valid ostype",
        ),
        (
            vec!["igroup", "create", "-f", "-t", "linux", "g"],
            "FCP is not supported",
        ),
        (
            vec![
                "igroup", "create", "-i", "-t", "linux", "g", STRANGER, STRANGER,
            ],
            "given twice",
        ),
        (
            vec!["igroup", "remove", "hosts", HOST],
            "lun maps for this initiator group exist",
        ),
        (
            vec!["igroup", "remove", "hosts", STRANGER],
            "is not in initiator group hosts",
        ),
        (
            vec!["igroup", "destroy", "hosts"],
            "LUNs are mapped to this initiator group",
        ),
        (
            vec!["lun", "map", "/vol/vol0/lun0", "nosuch"],
            "initiator group nosuch does not exist",
        ),
        (
            vec!["lun", "map", "/vol/vol0/lun0", "hosts"],
            "already mapped to initiator group hosts",
        ),
        (
            vec!["lun", "map", "/vol/vol0/nosuch", "hosts"],
            "no such LUN",
        ),
        (
            vec!["lun", "map", "vol0/lun0", "hosts"],
            "is not a LUN path",
        ),
        (
            vec!["lun", "map", "/vol/vol0/lun0@nosnap", "hosts"],
            "no such LUN",
        ),
        (
            vec!["lun", "map", "/vol/vol0/lun0", "hosts", "5000"],
            "out of range",
        ),
        (
            vec!["lun", "unmap", "/vol/vol0/lun0", "nosuch"],
            "does not exist",
        ),
        (
            vec!["lun", "destroy", "/vol/vol0/lun0"],
            "the LUN is mapped to initiator group",
        ),
        (
            vec![
                "iscsi", "security", "add", "-i", HOST, "-s", "CHAP", "-p", "short", "-n", "alice",
            ],
            "secret must be",
        ),
        (
            vec![
                "iscsi", "security", "add", "-i", HOST, "-s", "CHAP", "-n", "alice",
            ],
            "needs an inbound user name",
        ),
        (
            vec!["iscsi", "security", "add", "-i", "bad", "-s", "none"],
            "neither an iSCSI initiator name",
        ),
        (
            vec!["iscsi", "security", "delete", "-i", HOST],
            "no entry for",
        ),
    ] {
        let err = refused(&data, &args);
        assert!(err.contains(reason), "wafer {args:?}: {err}");
        assert!(
            state(&data) == before,
            "wafer {args:?} changed the configuration"
        );
    }
    // The same map ID in a second igroup of the same initiator.
    ok(&data, &["lun", "create", "-s", "16m", "/vol/vol0/lun1"]);
    ok(
        &data,
        &["igroup", "create", "-i", "-t", "linux", "more", HOST],
    );
    let err = refused(&data, &["lun", "map", "/vol/vol0/lun1", "more", "3"]);
    assert!(err.contains("LUN ID 3 is already in use"), "{err}");
    // Forced, the refusals give way; a LUN destroyed takes its maps along.
    ok(&data, &["lun", "map", "/vol/vol0/lun1", "more", "4"]);
    ok(&data, &["lun", "destroy", "-f", "/vol/vol0/lun1"]);
    let maps = ok(&data, &["lun", "show", "-m"]);
    assert!(!maps.contains("/vol/vol0/lun1"), "{maps}");
    assert!(
        !std::fs::read_to_string(data.join("wafer.toml"))
            .expect("config")
            .contains("/vol/vol0/lun1")
    );
    ok(&data, &["igroup", "destroy", "-f", "hosts"]);
    let maps = ok(&data, &["lun", "show", "-m"]);
    assert!(!maps.contains(" hosts "), "{maps}");
    server.stop();
}
