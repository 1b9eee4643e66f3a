//! libnbd's clients against `wafer serve`: `nbdinfo --json` shows each export
//! with its size and the flags the server promises (a writable LUN with
//! flush, FUA, trim, zero, fast zero and multi-conn; a snapshot read-only and
//! without multi-conn), `nbdinfo --list` lists LUNs and snapshots, `nbdinfo
//! --map` (block status) tells written blocks from holes, and `nbdcopy`
//! copies a LUN in and back out bit for bit, over four connections.

mod serve_harness;

use serde_json::Value;
use serve_harness::{Scratch, client_ok, pattern, qemu_io, serve_with};
use wafer_server::admin::AdminRequest;

const LUN: &[&str] = &[
    "--disk-size",
    "128m",
    "--vol-size",
    "256m",
    "--lun-size",
    "64m",
];

fn export_info(uri: &str) -> Value {
    let json: Value =
        serde_json::from_str(&client_ok("nbdinfo", &["--json", uri])).expect("nbdinfo prints JSON");
    json["exports"][0].clone()
}

#[test]
fn nbdinfo_reports_exports_sizes_and_flags() {
    let scratch = Scratch::new();
    let server = serve_with(&scratch, LUN);
    let lun = export_info(&server.uri("vol0/lun0"));
    assert_eq!(lun["export-name"], "vol0/lun0");
    assert_eq!(lun["export-size"], 64 << 20);
    for flag in [
        "can_flush",
        "can_fua",
        "can_trim",
        "can_zero",
        "can_fast_zero",
        "can_multi_conn",
    ] {
        assert_eq!(lun[flag], true, "{flag}: {lun}");
    }
    assert_eq!(lun["is_read_only"], false);
    assert_eq!(lun["block_size_preferred"], 4096);

    server.admin_ok(AdminRequest::SnapCreate {
        volume: "vol0".into(),
        name: "s1".into(),
    });
    let snapshot = export_info(&server.uri("vol0/lun0@s1"));
    assert_eq!(snapshot["export-size"], 64 << 20);
    assert_eq!(snapshot["is_read_only"], true);
    assert_eq!(snapshot["can_multi_conn"], false);
    assert_eq!(snapshot["can_trim"], false);

    // Block status: the one written run is data, the rest holes.
    qemu_io(&server.uri("vol0/lun0"), &["write -P 1 1M 64k"]);
    let map: Value = serde_json::from_str(&client_ok(
        "nbdinfo",
        &["--map", "--json", &server.uri("vol0/lun0")],
    ))
    .expect("nbdinfo prints JSON");
    let runs: Vec<(u64, u64, u64)> = map
        .as_array()
        .expect("a list of extents")
        .iter()
        .map(|e| {
            let field = |name: &str| e[name].as_u64().expect("a number");
            (field("offset"), field("length"), field("type"))
        })
        .collect();
    assert_eq!(
        runs,
        [
            (0, 1 << 20, 3),
            (1 << 20, 64 << 10, 0),
            ((1 << 20) + (64 << 10), (63 << 20) - (64 << 10), 3)
        ]
    );

    let list: Value = serde_json::from_str(&client_ok(
        "nbdinfo",
        &["--list", "--json", &server.uri("")],
    ))
    .expect("nbdinfo prints JSON");
    let names: Vec<&str> = list["exports"]
        .as_array()
        .expect("a list of exports")
        .iter()
        .filter_map(|e| e["export-name"].as_str())
        .collect();
    assert_eq!(names, ["vol0/lun0", "vol0/lun0@s1"]);
    server.stop();
}

#[test]
fn nbdcopy_copies_a_lun_in_and_out_bit_exactly() {
    let scratch = Scratch::new();
    let server = serve_with(&scratch, LUN);
    let source = scratch.file("source.img");
    let image: Vec<u8> = (0..(64u64 << 20) / 65536)
        .flat_map(|n| pattern(1, n, 65536))
        .collect();
    std::fs::write(&source, &image).expect("a source image");
    let uri = server.uri("vol0/lun0");
    let source_path = source.to_str().expect("UTF-8 path");
    client_ok("nbdcopy", &["--flush", "-C", "4", source_path, &uri]);
    let copy = scratch.file("copy.img");
    let copy_path = copy.to_str().expect("UTF-8 path");
    client_ok("nbdcopy", &["-C", "4", &uri, copy_path]);
    let copied = std::fs::read(&copy).expect("the copy");
    assert_eq!(copied.len(), image.len());
    let first_difference = copied.iter().zip(&image).position(|(a, b)| a != b);
    assert_eq!(first_difference, None, "the copy differs from the source");
    server.stop();
}
