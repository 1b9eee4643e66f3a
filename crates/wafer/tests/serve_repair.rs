//! Bit rot behind the server's back is caught and repaired, not returned.
//!
//! fio writes blocks carrying its own verify headers; the server is stopped
//! (its final CP puts them on disk); bytes of one such block are flipped in a
//! data disk's backing file; the restarted server must hand fio the original
//! data (its checksum caught the damage and RAID rebuilt the block), count the
//! repair, and have rewritten the block in place. The negative control: a
//! block really changed through NBD makes the same fio check fail.

mod serve_harness;

use std::os::unix::fs::FileExt;

use serve_harness::{Scratch, client_ok, qemu_io, serve};

const BLOCK: usize = 4096;
const SECTOR: u64 = wafer_server::SECTOR_BYTES;

fn fio_args<'a>(uri: &'a str, rw: &'a str) -> Vec<String> {
    [
        "--name=rot",
        "--ioengine=nbd",
        &format!("--uri={uri}"),
        &format!("--rw={rw}"),
        "--bs=4k",
        "--size=16m",
        "--iodepth=16",
        "--verify=crc32c",
        "--verify_fatal=1",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

fn fio(scratch: &Scratch, args: &[String], extra: &[&str]) -> std::process::Output {
    let mut all: Vec<&str> = args.iter().map(String::as_str).collect();
    all.extend_from_slice(extra);
    serve_harness::fio(scratch, &all)
}

/// The first sector of a data disk whose content starts with fio's verify
/// header magic (0xacca, little-endian): a LUN block fio wrote.
fn find_fio_block(path: &std::path::Path) -> Option<(u64, Vec<u8>)> {
    let file = std::fs::File::open(path).expect("a disk file");
    let sectors = file.metadata().expect("its size").len() / SECTOR;
    let mut sector = vec![0u8; SECTOR as usize];
    (0..sectors).find_map(|n| {
        file.read_exact_at(&mut sector, n * SECTOR)
            .expect("readable");
        (sector[..2] == [0xca, 0xac]).then(|| (n, sector[..BLOCK].to_vec()))
    })
}

#[test]
fn a_rotten_block_is_repaired_from_parity_and_never_reaches_the_client() {
    let scratch = Scratch::new();
    let server = serve(&scratch);
    let uri = server.uri("vol0/lun0");
    let written = fio(&scratch, &fio_args(&uri, "write"), &["--do_verify=0"]);
    assert!(
        written.status.success(),
        "{}",
        String::from_utf8_lossy(&written.stdout)
    );
    server.stop();

    let disk = scratch.disk(3); // a data disk (positions 0 and 1 hold parity)
    let (sector, original) = find_fio_block(&disk).expect("fio's blocks on a data disk");
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(&disk)
        .expect("writable");
    let rot: Vec<u8> = original[512..520].iter().map(|b| !b).collect();
    file.write_all_at(&rot, sector * SECTOR + 512)
        .expect("rotted");
    drop(file);

    let server = serve(&scratch);
    let verified = fio(&scratch, &fio_args(&uri, "read"), &[]);
    let report = String::from_utf8_lossy(&verified.stdout);
    assert!(verified.status.success(), "fio saw the rot:\n{report}");
    let stats = server.sysstat();
    assert!(stats.blocks_repaired >= 1, "no repair counted: {stats:?}");
    assert_eq!(stats.unrecoverable_blocks, 0);
    server.stop();
    let mut repaired = vec![0u8; BLOCK];
    let file = std::fs::File::open(&disk).expect("readable");
    file.read_exact_at(&mut repaired, sector * SECTOR)
        .expect("readable");
    assert!(repaired == original, "the block was not rewritten in place");

    // Negative control: a block changed through NBD is what fio then reads,
    // and its check fails.
    let server = serve(&scratch);
    qemu_io(&uri, &["write -P 0x5a 8k 4k"]);
    let caught = fio(&scratch, &fio_args(&uri, "read"), &[]);
    assert!(!caught.status.success(), "fio missed a changed block");
    let report = String::from_utf8_lossy(&caught.stdout).into_owned()
        + &String::from_utf8_lossy(&caught.stderr);
    assert!(report.contains("verify"), "{report}");
    client_ok("qemu-io", &["-f", "raw", "-c", "read -P 0x5a 8k 4k", &uri]);
    server.stop();
}
