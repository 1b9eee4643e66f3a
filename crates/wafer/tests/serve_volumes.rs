//! `vol offline`, `vol online` and `vol destroy` against a running server:
//! an offline volume's LUNs answer EIO and it stays offline across a
//! restart; a destroyed volume's space returns to `df -A`, and its LUNs'
//! IDs and maps go with it.

mod serve_harness;

use serve_harness::{NbdClient, SMALL_SIZES as SIZES, Scratch, Served, ok, serve_with, wafer};
use wafer_server::admin::{AdminReply, AdminRequest};

/// The NBD error a read of an offline volume's LUN gets (EIO).
const EIO: u32 = 5;

/// aggr0's allocated and available bytes.
fn aggr0_space(server: &Served) -> (u64, u64) {
    match server.admin_ok(AdminRequest::DfAggregates) {
        AdminReply::AggregateSpaces(spaces) => {
            let aggr0 = spaces
                .iter()
                .find(|s| s.aggregate == "aggr0")
                .expect("aggr0");
            (aggr0.allocated_bytes, aggr0.available_bytes)
        }
        other => panic!("{other:?}"),
    }
}

/// The refusal `wafer ARGS` prints, asserting it fails.
fn refused(server: &Served, args: &[&str]) -> String {
    let (code, out, err) = wafer(&server.data, args);
    assert_ne!(code, 0, "wafer {args:?} succeeded: {out}");
    err
}

#[test]
fn an_offline_volume_answers_eio_and_stays_offline_across_a_restart() {
    let scratch = Scratch::new();
    let server = serve_with(&scratch, SIZES);
    let mut client = NbdClient::connect(server.socket(), "vol0/lun0");
    assert_eq!(client.write(0, &[0x6b; 8192]), 0);
    let said = ok(&server.data, &["vol", "offline", "vol0"]);
    assert_eq!(said.trim(), "Volume 'vol0' is now offline.");
    assert_eq!(client.read(0, 4096), Err(EIO));
    assert_eq!(client.write(0, &[1; 4096]), EIO);
    let status = ok(&server.data, &["vol", "status", "vol0"]);
    assert!(status.contains("vol0 offline"), "{status}");
    drop(client);
    server.stop();

    let server = serve_with(&scratch, SIZES);
    let status = ok(&server.data, &["vol", "status", "vol0"]);
    assert!(status.contains("vol0 offline"), "offline is kept: {status}");
    let said = ok(&server.data, &["vol", "online", "vol0"]);
    assert_eq!(said.trim(), "Volume 'vol0' is now online.");
    let mut client = NbdClient::connect(server.socket(), "vol0/lun0");
    assert_eq!(client.read(0, 8192), Ok(vec![0x6b; 8192]));
}

#[test]
fn a_destroyed_volume_returns_its_space_and_takes_its_luns_maps_with_it() {
    let scratch = Scratch::new();
    let server = serve_with(&scratch, SIZES);
    let before = aggr0_space(&server);
    ok(&server.data, &["vol", "create", "vol1", "aggr0", "40m"]);
    ok(
        &server.data,
        &["lun", "create", "-s", "16m", "/vol/vol1/db"],
    );
    ok(
        &server.data,
        &[
            "igroup",
            "create",
            "-i",
            "-t",
            "linux",
            "hosts",
            "iqn.1994-05.com.example:h1",
        ],
    );
    ok(&server.data, &["lun", "map", "/vol/vol1/db", "hosts"]);
    let mut client = NbdClient::connect(server.socket(), "vol1/db");
    assert_eq!(client.write(0, &vec![0x2d; 8 << 20]), 0);
    drop(client);
    ok(&server.data, &["snap", "create", "vol1", "s1"]);
    ok(&server.data, &["lun", "offline", "/vol/vol1/db"]);
    let created = aggr0_space(&server);
    assert!(
        created.0 >= before.0 + (8 << 20),
        "{before:?} then {created:?}"
    );
    assert!(created.1 < before.1, "{before:?} then {created:?}");

    let online = refused(&server, &["vol", "destroy", "-f", "vol1"]);
    assert!(online.contains("take it offline"), "{online}");
    ok(&server.data, &["vol", "offline", "vol1"]);
    let unconfirmed = refused(&server, &["vol", "destroy", "vol1"]);
    assert!(unconfirmed.contains("not confirmed"), "{unconfirmed}");
    let said = ok(&server.data, &["vol", "destroy", "-f", "vol1"]);
    assert_eq!(said.trim(), "Volume 'vol1' destroyed.");

    let missing = refused(&server, &["vol", "status", "vol1"]);
    assert!(missing.contains("No volume named 'vol1'"), "{missing}");
    let maps = ok(&server.data, &["lun", "show", "-m"]);
    assert!(!maps.contains("vol1"), "{maps}");
    ok(&server.data, &["snap", "create", "vol0", "cp"]); // a CP or two
    ok(&server.data, &["snap", "create", "vol0", "cp2"]);
    let after = aggr0_space(&server);
    assert_eq!(after.1, before.1, "df -A avail comes back");
    assert!(
        after.0 <= before.0 + (1 << 20),
        "blocks allocated: {before:?} before, {after:?} after"
    );
    server.stop();

    let server = serve_with(&scratch, SIZES);
    let volumes = ok(&server.data, &["vol", "status"]);
    assert!(!volumes.contains("vol1"), "{volumes}");
    ok(&server.data, &["vol", "create", "vol1", "aggr0", "40m"]);
    ok(
        &server.data,
        &["lun", "create", "-s", "16m", "/vol/vol1/db"],
    );
    let maps = ok(&server.data, &["lun", "show", "-m"]);
    assert!(
        !maps.contains("hosts"),
        "a new LUN at the old path inherits no map: {maps}"
    );
    let lun = ok(&server.data, &["lun", "show", "/vol/vol1/db"]);
    assert!(
        lun.contains("(r/w, online)"),
        "nor the old one's offline state: {lun}"
    );
}

#[test]
fn vol_size_shows_grows_and_refuses_to_shrink_below_what_the_volume_holds() {
    let scratch = Scratch::new();
    let server = serve_with(&scratch, SIZES);
    let said = ok(&server.data, &["vol", "size", "vol0"]);
    assert_eq!(
        said.trim(),
        "vol size: Flexible volume 'vol0' has size 60m."
    );
    let (_, avail_before) = aggr0_space(&server);
    let said = ok(&server.data, &["vol", "size", "vol0", "+20m"]);
    assert_eq!(
        said.trim(),
        "vol size: Flexible volume 'vol0' size set to 80m."
    );
    let (_, avail_after) = aggr0_space(&server);
    assert!(
        avail_after + (20 << 20) <= avail_before,
        "{avail_before} then {avail_after}"
    );
    // 16m + 56m of LUNs: more than the volume could reserve before.
    ok(
        &server.data,
        &["lun", "create", "-s", "56m", "/vol/vol0/big"],
    );
    let mut client = NbdClient::connect(server.socket(), "vol0/big");
    assert_eq!(client.write(40 << 20, &[0x11; 65536]), 0);
    let shrink = refused(&server, &["vol", "size", "vol0", "40m"]);
    assert!(shrink.contains("not enough space"), "{shrink}");
    let json = ok(&server.data, &["vol", "size", "vol0", "--json"]);
    assert!(json.contains("\"size_bytes\": 83886080"), "{json}");
    drop(client);
    server.stop();
    let server = serve_with(&scratch, SIZES);
    let said = ok(&server.data, &["vol", "size", "vol0"]);
    assert_eq!(
        said.trim(),
        "vol size: Flexible volume 'vol0' has size 80m."
    );
    let mut client = NbdClient::connect(server.socket(), "vol0/big");
    assert_eq!(client.read(40 << 20, 65536), Ok(vec![0x11; 65536]));
}

#[test]
fn vol_options_shows_wafers_options_and_sets_read_realloc_across_a_restart() {
    let scratch = Scratch::new();
    let server = serve_with(&scratch, SIZES);
    let shown = ok(&server.data, &["vol", "options", "vol0"]);
    assert_eq!(
        shown,
        "schedsnapname=ordinal, guarantee=volume, fractional_reserve=100,\nread_realloc=off\n",
        "ONTAP's order and words, wrapped at a comma as wafl.md's sample is"
    );
    let said = ok(
        &server.data,
        &["vol", "options", "vol0", "read_realloc", "on"],
    );
    assert_eq!(said, "", "ONTAP sets an option without a word");
    ok(
        &server.data,
        &["vol", "options", "vol0", "guarantee", "volume"],
    );
    for (args, why) in [
        (
            &["vol", "options", "vol0", "guarantee", "none"][..],
            "guarantee=volume",
        ),
        (
            &["vol", "options", "vol0", "read_realloc", "space_optimized"][..],
            "on or off",
        ),
        (
            &["vol", "options", "vol0", "nosnap", "on"][..],
            "no option 'nosnap'",
        ),
        (
            &["vol", "options", "vol0", "read_realloc"][..],
            "needs a value",
        ),
        (
            &["vol", "options", "nosuch"][..],
            "vol options: No volume named 'nosuch'",
        ),
    ] {
        let err = refused(&server, args);
        assert!(err.contains(why), "{args:?}: {err}");
    }
    server.stop();

    let server = serve_with(&scratch, SIZES);
    let shown = ok(&server.data, &["vol", "options", "vol0"]);
    assert!(
        shown.ends_with("read_realloc=on\n"),
        "kept on disk: {shown}"
    );
    let status = ok(&server.data, &["vol", "status", "vol0"]);
    assert!(status.contains("read_realloc=on"), "{status}");
    ok(
        &server.data,
        &["vol", "options", "vol0", "read_realloc", "off"],
    );
    let shown = ok(&server.data, &["vol", "options", "vol0"]);
    assert!(shown.ends_with("read_realloc=off\n"), "{shown}");
}
