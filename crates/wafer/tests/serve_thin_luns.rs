//! `lun create -t OSTYPE -o noreserve` and `lun show -v` against a running
//! server: a thin LUN larger than its volume is created, reported as ONTAP
//! reports one, fills the volume over NBD until a write gets ENOSPC, loses
//! none of the writes it acknowledged through a SIGKILL, and keeps its
//! attributes.

mod serve_harness;

use serve_harness::{NbdClient, SMALL_SIZES as SIZES, Scratch, ok, serve_with, wafer, wire};

/// The `lun show -v` block of `/vol/vol0/thin` after its first line.
fn thin_details(data: &std::path::Path) -> Vec<String> {
    let shown = ok(data, &["lun", "show", "-v", "/vol/vol0/thin"]);
    let mut lines = shown.lines();
    let first = lines.next().expect("the LUN's line");
    assert!(
        first.starts_with("        /vol/vol0/thin ") && first.ends_with("(r/w, online)"),
        "{shown}"
    );
    assert!(first.contains("100m (104857600)"), "{shown}");
    lines.map(str::to_string).collect()
}

#[test]
fn a_thin_lun_fills_its_volume_until_enospc_and_keeps_what_it_acknowledged() {
    let scratch = Scratch::new();
    let server = serve_with(&scratch, SIZES);
    let said = ok(
        &server.data,
        &[
            "lun",
            "create",
            "-s",
            "100m",
            "-t",
            "vmware",
            "-o",
            "noreserve",
            "/vol/vol0/thin",
        ],
    );
    assert_eq!(said, "", "ONTAP creates a LUN without a word");
    assert_eq!(
        thin_details(&server.data),
        [
            "                Share: none",
            "                Space Reservation: disabled",
            "                Multiprotocol Type: vmware",
            "                Occupied Size:       0 (0)",
        ],
        "lun show -v's lines as ONTAP indents them"
    );
    let reserved = ok(&server.data, &["lun", "show", "-v", "/vol/vol0/lun0"]);
    assert!(
        reserved.contains("Space Reservation: enabled")
            && reserved.contains("Multiprotocol Type: image"),
        "a LUN made without -t or -o: {reserved}"
    );

    let mut client = NbdClient::connect(server.socket(), "vol0/thin");
    let chunk = 1usize << 20;
    let mut written = 0u64;
    let refusal = loop {
        let errno = client.write(written, &vec![(written >> 20) as u8 + 1; chunk]);
        if errno != 0 {
            break errno;
        }
        written += chunk as u64;
        assert!(written < 100 << 20, "100 MiB fit a 60 MiB volume");
    };
    assert_eq!(
        refusal,
        wire::ENOSPC,
        "a full volume refuses a thin LUN's write"
    );
    assert!(written >= 30 << 20, "only {written} bytes fit");
    assert_eq!(
        client.read(written, 4096),
        Ok(vec![0; 4096]),
        "the refused write left nothing"
    );

    // A trim gives the first MiB back; zeros written there with NO_HOLE
    // take it again (a trim would not), so the volume stays full.
    let mib = chunk as u32;
    let trim = client.send(wire::CMD_TRIM, 0, mib, &[]);
    assert_eq!(client.reply().expect("a reply").handle, trim);
    let fast = wire::CMD_FLAG_NO_HOLE | wire::CMD_FLAG_FAST_ZERO;
    assert_eq!(
        client.write_zeroes(0, mib, fast),
        wire::ENOTSUP,
        "provisioned zeros are written, which is not fast"
    );
    assert_eq!(client.write_zeroes(0, mib, wire::CMD_FLAG_NO_HOLE), 0);
    assert_eq!(
        client.write(written, &vec![9; chunk]),
        wire::ENOSPC,
        "the zeros hold the trimmed blocks"
    );
    drop(client);
    server.kill();

    let server = serve_with(&scratch, SIZES);
    let details = thin_details(&server.data);
    assert_eq!(details[1], "                Space Reservation: disabled");
    assert_eq!(details[2], "                Multiprotocol Type: vmware");
    assert!(
        details[3].ends_with(&format!("({written})")),
        "every acknowledged byte occupies the volume: {details:?}"
    );
    let mut client = NbdClient::connect(server.socket(), "vol0/thin");
    assert_eq!(client.read(0, 4096), Ok(vec![0; 4096]));
    for at in (chunk as u64..written).step_by(chunk) {
        let expected = vec![(at >> 20) as u8 + 1; 4096];
        assert_eq!(client.read(at, 4096), Ok(expected), "at {at}");
    }
    let json = ok(&server.data, &["lun", "show", "--json", "/vol/vol0/thin"]);
    let parsed: serde_json::Value = serde_json::from_str(&json).expect("JSON");
    let lun = &parsed["data"][0];
    assert_eq!(lun["space_reserved"], false, "{json}");
    assert_eq!(lun["ostype"], "vmware", "{json}");
}

#[test]
fn an_unknown_ostype_or_option_is_refused_and_creates_nothing() {
    let scratch = Scratch::new();
    let server = serve_with(&scratch, SIZES);
    for (args, why) in [
        (
            &["lun", "create", "-s", "10m", "-t", "beos", "/vol/vol0/x"][..],
            "invalid ostype \"beos\"",
        ),
        (
            &["lun", "create", "-s", "10m", "-o", "reserve", "/vol/vol0/x"][..],
            "invalid value 'reserve'",
        ),
    ] {
        let (code, out, err) = wafer(&server.data, args);
        assert_ne!(code, 0, "{args:?} succeeded: {out}");
        assert!(err.contains(why), "{args:?}: {err}");
    }
    let shown = ok(&server.data, &["lun", "show"]);
    assert!(!shown.contains("/vol/vol0/x"), "{shown}");
}
