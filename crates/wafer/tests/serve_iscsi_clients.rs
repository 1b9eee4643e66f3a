//! Real iSCSI initiators against `wafer serve --iscsi`: `iscsi-ls -s` lists
//! the target and exactly its LUNs (a LUN created later appears with its
//! LUN ID); `qemu-img convert` round-trips data bit-exactly; `qemu-io`
//! reads back its patterns, with a wrong pattern caught (the negative
//! control); and what is written over iSCSI reads back over NBD, and the
//! reverse, since both reach the same engine.

mod serve_harness;

use serve_harness::{Scratch, TEST_SIZES, client, client_ok, ok, pattern, qemu_io, serve_with};

fn serve_iscsi(scratch: &Scratch) -> serve_harness::Served {
    let mut args = TEST_SIZES.to_vec();
    args.extend(["--iscsi", "127.0.0.1:0"]);
    let server = serve_with(scratch, &args);
    serve_harness::iscsi::admit_test_initiators(&scratch.data());
    server
}

#[test]
fn iscsi_ls_lists_the_target_and_its_luns() {
    let scratch = Scratch::new();
    let server = serve_iscsi(&scratch);
    let uri = server.iscsi_uri();
    let (address, target) = serve_harness::iscsi::parse_uri(&uri);
    let listed = client_ok("iscsi-ls", &["-s", &format!("iscsi://{address}")]);
    assert!(
        listed.contains(&format!("Target:{target} Portal:{address},1")),
        "{listed}"
    );
    let luns: Vec<&str> = listed.lines().filter(|l| l.contains("Lun:")).collect();
    assert_eq!(luns.len(), 1, "{listed}");
    assert!(
        luns[0].contains("Lun:0") && luns[0].contains("DIRECT_ACCESS"),
        "{listed}"
    );

    // A new LUN is seen once mapped, not before.
    ok(
        &server.data,
        &["lun", "create", "-s", "16m", "/vol/vol0/logs"],
    );
    let listed = client_ok("iscsi-ls", &["-s", &format!("iscsi://{address}")]);
    let luns: Vec<&str> = listed.lines().filter(|l| l.contains("Lun:")).collect();
    assert_eq!(luns.len(), 1, "{listed}");
    ok(&server.data, &["lun", "map", "/vol/vol0/logs", "default"]);
    let listed = client_ok("iscsi-ls", &["-s", &format!("iscsi://{address}")]);
    let luns: Vec<&str> = listed.lines().filter(|l| l.contains("Lun:")).collect();
    assert_eq!(luns.len(), 2, "{listed}");
    assert!(luns[1].contains("Lun:1"), "{listed}");
    server.stop();
}

#[test]
fn qemu_img_and_qemu_io_round_trip_and_nbd_sees_the_same_data() {
    let scratch = Scratch::new();
    let server = serve_iscsi(&scratch);
    let iscsi = server.iscsi_uri();
    let nbd = server.uri("vol0/lun0");

    // qemu-img convert to the LUN and back: bit-exact.
    let source = scratch.file("source.raw");
    let image: Vec<u8> = (0..256).flat_map(|n| pattern(7, n, 64 * 1024)).collect();
    std::fs::write(&source, &image).expect("source written");
    let source = source.to_str().unwrap();
    client_ok(
        "qemu-img",
        &["convert", "-n", "-f", "raw", "-O", "raw", source, &iscsi],
    );
    let back = scratch.file("back.raw");
    let back = back.to_str().unwrap();
    client_ok(
        "qemu-img",
        &["convert", "-f", "raw", "-O", "raw", &iscsi, back],
    );
    let read_back = std::fs::read(back).expect("read back");
    assert_eq!(read_back.len() as u64, serve_harness::LUN_BYTES);
    assert!(
        read_back[..image.len()] == image[..],
        "iSCSI round trip differs"
    );

    // Written over iSCSI, read over NBD.
    let over_nbd = scratch.file("nbd.raw");
    let over_nbd = over_nbd.to_str().unwrap();
    client_ok(
        "qemu-img",
        &["convert", "-f", "raw", "-O", "raw", &nbd, over_nbd],
    );
    let nbd_bytes = std::fs::read(over_nbd).expect("read over NBD");
    assert!(nbd_bytes[..image.len()] == image[..], "NBD sees other data");

    // qemu-io patterns over iSCSI, including an unaligned write.
    qemu_io(
        &iscsi,
        &[
            "write -P 0xab 20M 1M",
            "write -f -P 0xcd 21M 64k",
            "write -P 0x11 22M 1536",
        ],
    );
    let checked = qemu_io(
        &iscsi,
        &[
            "read -P 0xab 20M 1M",
            "read -P 0xcd 21M 64k",
            "read -P 0x11 22M 1536",
        ],
    );
    assert!(
        !checked.contains("Pattern verification failed"),
        "{checked}"
    );
    // Written over NBD, read over iSCSI.
    qemu_io(&nbd, &["write -P 0x5a 30M 256k"]);
    let checked = qemu_io(&iscsi, &["read -P 0x5a 30M 256k", "read -P 0xab 20M 4k"]);
    assert!(
        !checked.contains("Pattern verification failed"),
        "{checked}"
    );
    // The negative control: a wrong pattern is caught over iSCSI too.
    let wrong = client(
        "qemu-io",
        &["-f", "raw", "-c", "read -P 0xcd 30M 4k", &iscsi],
    );
    assert!(!wrong.status.success());
    assert!(String::from_utf8_lossy(&wrong.stdout).contains("Pattern verification failed"));
    server.stop();
}
