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

use serve_harness::{Scratch, client_ok, ok, qemu_io, serve};

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
    write_with_fio(&scratch, &uri);
    server.stop();

    let disk = scratch.disk(3); // a data disk (positions 0 and 1 hold parity)
    let (sector, original) = find_fio_block(&disk).expect("fio's blocks on a data disk");
    rot_block(&disk, sector);

    let server = serve(&scratch);
    let verified = fio(&scratch, &fio_args(&uri, "read"), &[]);
    let report = String::from_utf8_lossy(&verified.stdout);
    assert!(verified.status.success(), "fio saw the rot:\n{report}");
    let stats = server.sysstat();
    assert!(stats.blocks_repaired >= 1, "no repair counted: {stats:?}");
    assert_eq!(stats.unrecoverable_blocks, 0);
    server.stop();
    let repaired = read_block(&disk, sector);
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

/// Fills the LUN's first 16 MiB with fio's self-verifying blocks.
fn write_with_fio(scratch: &Scratch, uri: &str) {
    let written = fio(scratch, &fio_args(uri, "write"), &["--do_verify=0"]);
    assert!(
        written.status.success(),
        "{}",
        String::from_utf8_lossy(&written.stdout)
    );
}

fn read_block(path: &std::path::Path, sector: u64) -> Vec<u8> {
    let mut block = vec![0u8; BLOCK];
    std::fs::File::open(path)
        .expect("a disk file")
        .read_exact_at(&mut block, sector * SECTOR)
        .expect("readable");
    block
}

/// Inverts eight bytes in the middle of a block of a disk file.
fn rot_block(path: &std::path::Path, sector: u64) {
    let original = read_block(path, sector);
    let rot: Vec<u8> = original[512..520].iter().map(|b| !b).collect();
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .expect("writable")
        .write_all_at(&rot, sector * SECTOR + 512)
        .expect("rotted");
}

fn scrub_progress(server: &serve_harness::Served) -> wafer_server::admin::ScrubProgress {
    match server.admin_ok(wafer_server::admin::AdminRequest::AggrStatus) {
        wafer_server::admin::AdminReply::Aggregate(aggr) => aggr.scrub.expect("a scrub ran"),
        other => panic!("aggr status answered {other:?}"),
    }
}

/// Rot in a parity block and in a data block that no client reads: `aggr
/// scrub` finds both and rewrites them byte for byte while the server runs.
/// The control: until the scrub runs, the rot stays on disk.
#[test]
fn a_scrub_repairs_rot_in_blocks_nobody_reads() {
    let scratch = Scratch::new();
    let server = serve(&scratch);
    let uri = server.uri("vol0/lun0");
    write_with_fio(&scratch, &uri);
    server.stop();
    let data_disk = scratch.disk(3);
    let (data_sector, data_original) = find_fio_block(&data_disk).expect("fio's blocks");
    let parity_disk = scratch.disk(1); // row parity
    let parity_sector = data_sector + 1; // the next stripe also holds fio's data
    let parity_original = read_block(&parity_disk, parity_sector);
    rot_block(&data_disk, data_sector);
    rot_block(&parity_disk, parity_sector);

    let server = serve(&scratch);
    let scrub = ok(&server.data, &["aggr", "scrub", "status"]);
    assert!(scrub.contains("No scrub has run"), "{scrub}");
    assert!(read_block(&data_disk, data_sector) != data_original);
    assert!(read_block(&parity_disk, parity_sector) != parity_original);
    let started = ok(&server.data, &["aggr", "scrub", "start"]);
    assert!(
        started.contains("scrub of aggregate aggr0 started"),
        "{started}"
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while scrub_progress(&server).running {
        assert!(
            std::time::Instant::now() < deadline,
            "the scrub never ended"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let progress = scrub_progress(&server);
    assert_eq!(progress.stripes_done, progress.stripes_total);
    assert_eq!(
        (progress.parity_rewritten, progress.blocks_repaired),
        (1, 1)
    );
    assert_eq!(progress.stripes_left_alone, 0);
    let status = ok(&server.data, &["aggr", "scrub", "status"]);
    for line in [
        "raid group /aggr0/plex0/rg0: is not being scrubbed.",
        "Last full scrub completed",
        "Scrub found 1 parity inconsistencies in /aggr0/plex0",
        "Scrub found 1 checksum errors in /aggr0/plex0",
    ] {
        assert!(status.contains(line), "{line:?} missing:\n{status}");
    }
    let verbose = ok(&server.data, &["aggr", "scrub", "status", "-v", "aggr0"]);
    assert!(
        verbose.contains("Scrub found 1 checksum errors in /aggr0/plex0 (blocks repaired)."),
        "{verbose}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&ok(&server.data, &["aggr", "scrub", "status", "--json"]))
            .expect("--json prints JSON");
    let scrub = &json["data"][0]["scrub"];
    assert_eq!(scrub["blocks_repaired"], 1, "{json}");
    assert_eq!(scrub["parity_rewritten"], 1, "{json}");
    assert_eq!(server.sysstat().blocks_repaired, 0, "no read repaired them");
    let log = server.log();
    assert!(log.contains("aggr scrub started"), "{log}");
    assert!(
        log.contains("aggr scrub complete")
            && log.contains("1 parity blocks rewritten, 1 blocks repaired"),
        "the operator is told what the scrub found: {log}"
    );
    server.stop();
    assert!(read_block(&data_disk, data_sector) == data_original);
    assert!(read_block(&parity_disk, parity_sector) == parity_original);
}

/// Rot in three blocks of one stripe is more than RAID-DP rebuilds: the read
/// fails with an I/O error, never with wrong data, and the server log names
/// the request and counts the block, so the operator hears of the loss.
#[test]
fn a_block_beyond_repair_fails_its_read_and_the_log_says_so() {
    let scratch = Scratch::new();
    let server = serve(&scratch);
    let uri = server.uri("vol0/lun0");
    write_with_fio(&scratch, &uri);
    server.stop();

    let disk = scratch.disk(3);
    let (sector, _) = find_fio_block(&disk).expect("fio's blocks on a data disk");
    for n in [0, 1, 3] {
        rot_block(&scratch.disk(n), sector);
    }
    let server = serve(&scratch);
    let read = fio(&scratch, &fio_args(&uri, "read"), &[]);
    assert!(
        !read.status.success(),
        "fio read a block RAID cannot rebuild"
    );
    assert!(server.sysstat().unrecoverable_blocks >= 1);
    let log = server.log();
    assert!(
        log.contains("of /vol/vol0/lun0 failed: unrecoverable media error"),
        "{log}"
    );
    assert!(
        log.contains("could not be read even with RAID reconstruction"),
        "{log}"
    );
    server.stop();
}
