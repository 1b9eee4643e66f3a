//! `wafer serve --flash-cache PATH`: the node's Flash Cache on a file.
//!
//! A hot region sixteen times the buffer cache (1 MiB) and a quarter of the
//! Flash Cache (64 MiB) is read again and again: the first reads go to disk
//! and the buffer cache's evictions fill the Flash Cache; the next are
//! answered from it (`stats show ext_cache_obj`: hits and
//! disk_reads_replaced), with fio verifying every block. The cache is not
//! persistent: after a SIGKILL the restarted node's cache is empty and its
//! first reads go to disk. A flash file truncated under the server, or on a
//! file system that refuses its writes, costs reads from disk, never data.
//! Paths and sizes that cannot be a Flash Cache are refused before anything
//! is made.

mod serve_harness;

use std::path::{Path, PathBuf};

use serve_harness::load::{CHUNK, check_range, write_chunks};
use serve_harness::{Scratch, Served, TEST_SIZES, Tmpfs, fio, ok, refusal, serve_with, wafer};
use wafer_server::admin::{AdminReply, AdminRequest, FlashCacheStatus};

/// The hot region: 16 MiB, 4096 blocks, in 64 KiB chunks.
const HOT_CHUNKS: u64 = 256;
const HOT_BLOCKS: u64 = HOT_CHUNKS * CHUNK as u64 / 4096;

/// `wafer serve` arguments: the test filer, a 1 MiB buffer cache and a
/// Flash Cache of `size` at `flash`.
fn flash_args(flash: &Path, size: &str) -> Vec<String> {
    let mut args: Vec<String> = TEST_SIZES.iter().map(|a| a.to_string()).collect();
    args.extend(["--cache-size".into(), "1m".into()]);
    args.extend(["--flash-cache".into(), flash.display().to_string()]);
    args.extend(["--flash-cache-size".into(), size.into()]);
    args
}

fn serve_flash(scratch: &Scratch, flash: &Path, size: &str) -> Served {
    let args = flash_args(flash, size);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    serve_with(scratch, &args)
}

/// The Flash Cache's counters, from the admin socket.
fn ext_cache(server: &Served) -> FlashCacheStatus {
    match server.admin_ok(AdminRequest::StatsShowExtCacheObj) {
        AdminReply::ExtCacheObj(status) => *status,
        other => panic!("not the Flash Cache's counters: {other:?}"),
    }
}

/// Writes the hot region and takes a snapshot, whose CP puts it on disk:
/// the blocks are clean, and the buffer cache lets them go.
fn write_hot(server: &Served, generation: u8) {
    write_chunks(server, "vol0/lun0", generation, HOT_CHUNKS);
    server.admin_ok(AdminRequest::SnapCreate {
        volume: "vol0".into(),
        name: format!("cp{generation}"),
    });
}

/// Reads the hot region back against what was written; the counters after.
fn read_hot(server: &Served, generation: u8) -> FlashCacheStatus {
    check_range(server, "vol0/lun0", generation, 0..HOT_CHUNKS);
    ext_cache(server)
}

/// fio reads the region it wrote with `verify=crc32c` (`verify_only`: the
/// read phase alone), failing on any block that does not match.
const FIO_JOB: &str = "\
[global]
ioengine=nbd
uri=${uri}
bs=64k
iodepth=8
verify=crc32c
verify_fatal=1
do_verify=1
${mode}

[hot]
rw=write
size=16m
offset=0
";

fn fio_run(scratch: &Scratch, server: &Served, mode: &str, name: &str) {
    let job = scratch.file(name);
    let text = FIO_JOB
        .replace("${uri}", &server.uri("vol0/lun0"))
        .replace("${mode}", mode);
    std::fs::write(&job, text).expect("a job file");
    let run = fio(scratch, &[job.to_str().expect("UTF-8 path")]);
    let output = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success() && output.contains("err= 0") && !output.contains("verify failed"),
        "{output}{}",
        String::from_utf8_lossy(&run.stderr)
    );
}

#[test]
fn rereads_of_a_hot_region_beyond_the_buffer_cache_are_served_from_flash_and_verify() {
    let scratch = Scratch::new();
    let flash = scratch.file("flash");
    let server = serve_flash(&scratch, &flash, "64m");
    assert!(
        server.startup.contains("Flash Cache: "),
        "{}",
        server.startup
    );
    assert_eq!(
        std::fs::metadata(&flash).expect("created").len(),
        64 << 20,
        "extended to its size"
    );
    fio_run(&scratch, &server, "", "write.fio");
    server.admin_ok(AdminRequest::SnapCreate {
        volume: "vol0".into(),
        name: "written".into(),
    });

    fio_run(&scratch, &server, "verify_only=1", "first.fio");
    let first = ext_cache(&server);
    fio_run(&scratch, &server, "verify_only=1", "second.fio");
    let second = ext_cache(&server);
    assert!(
        first.inserts >= HOT_BLOCKS * 3 / 4,
        "the first reads' evictions went in: {first:?}"
    );
    let replaced = second.disk_reads_replaced - first.disk_reads_replaced;
    assert!(
        replaced >= HOT_BLOCKS * 3 / 4,
        "{replaced} of {HOT_BLOCKS} reads replaced: {second:?}"
    );
    eprintln!("after two verified re-reads: {second:?}");
    assert!(second.hits >= second.disk_reads_replaced);
    assert_eq!((second.read_errors, second.failed), (0, false));

    // The command's JSON says the same.
    let json = ok(&server.data, &["stats", "show", "ext_cache_obj", "--json"]);
    let reply: serde_json::Value = serde_json::from_str(&json).expect("JSON");
    assert_eq!(reply["kind"], "ext_cache_obj", "{json}");
    assert_eq!(
        reply["data"]["disk_reads_replaced"],
        second.disk_reads_replaced
    );
    assert_eq!(reply["data"]["hits"], second.hits);
    let text = ok(&server.data, &["stats", "show", "ext_cache_obj"]);
    let line = format!(
        "ext_cache_obj:ec0:disk_reads_replaced:{}",
        second.disk_reads_replaced
    );
    assert!(text.lines().any(|l| l == line), "{text}");
    server.stop();
}

#[test]
fn after_sigkill_the_flash_cache_starts_cold_and_the_data_still_verifies() {
    let scratch = Scratch::new();
    let flash = scratch.file("flash");
    let server = serve_flash(&scratch, &flash, "64m");
    write_hot(&server, 3);
    read_hot(&server, 3);
    let warm = read_hot(&server, 3);
    assert!(warm.disk_reads_replaced >= HOT_BLOCKS * 3 / 4, "{warm:?}");
    server.kill();

    let server = serve_flash(&scratch, &flash, "64m");
    let cold = ext_cache(&server);
    assert_eq!(
        (cold.used, cold.hits, cold.inserts, cold.disk_reads_replaced),
        (0, 0, 0, 0),
        "a restarted node's Flash Cache is empty: {cold:?}"
    );
    // The flash file still holds every copy, but the node does not trust
    // it: the first reads go to disk (a few blocks read twice, such as
    // indirect blocks evicted and read again, may come from flash).
    let first = read_hot(&server, 3);
    assert!(
        first.disk_reads_replaced < HOT_BLOCKS / 10,
        "{} of {HOT_BLOCKS} first reads came from flash: {first:?}",
        first.disk_reads_replaced
    );
    let second = read_hot(&server, 3);
    eprintln!("warm {warm:?}\ncold {cold:?}\nfirst {first:?}\nsecond {second:?}");
    let replaced = second.disk_reads_replaced - first.disk_reads_replaced;
    assert!(replaced >= HOT_BLOCKS * 3 / 4, "warm again: {second:?}");
    server.stop();
}

#[test]
fn a_flash_file_truncated_under_the_server_costs_disk_reads_not_data() {
    let scratch = Scratch::new();
    let flash = scratch.file("flash");
    let server = serve_flash(&scratch, &flash, "64m");
    write_hot(&server, 5);
    read_hot(&server, 5);
    let warm = ext_cache(&server);
    assert!(warm.used >= HOT_BLOCKS * 3 / 4, "{warm:?}");

    // Every copy now reads back as zeros, which fail their check.
    std::fs::File::options()
        .write(true)
        .open(&flash)
        .expect("the flash file")
        .set_len(0)
        .expect("truncated");
    let after = read_hot(&server, 5);
    let errors = after.read_errors - warm.read_errors;
    assert!(
        errors >= HOT_BLOCKS * 3 / 4,
        "{errors} read errors: {after:?}"
    );
    // Only copies written since the truncation (extending the file again)
    // may still serve; every block read back matched what was written.
    let served = after.disk_reads_replaced - warm.disk_reads_replaced;
    eprintln!("truncated: {after:?}");
    assert!(
        served < HOT_BLOCKS / 4,
        "{served} served from flash: {after:?}"
    );
    assert!(!after.failed, "a bad copy is not a failed device");
    // The reads refilled it: the next ones come from flash again.
    let again = read_hot(&server, 5);
    let replaced = again.disk_reads_replaced - after.disk_reads_replaced;
    assert!(replaced >= HOT_BLOCKS * 3 / 4, "{again:?}");
    server.stop();
}

#[test]
fn a_flash_file_whose_file_system_fills_keeps_serving_what_landed() {
    let scratch = Scratch::new();
    // Room for 2 MiB of copies: 16 MiB of slots, most of them refused.
    let Some(tmpfs) = Tmpfs::mount(&scratch.file("fs"), 2 << 20) else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI runs as root and must be able to mount a tmpfs"
        );
        eprintln!("cannot mount a tmpfs (not root?): this test did not run");
        return;
    };
    let flash = tmpfs.dir.join("flash");
    let server = serve_flash(&scratch, &flash, "16m");
    write_hot(&server, 9);
    read_hot(&server, 9);
    let filled = ext_cache(&server);
    let room = (2u64 << 20) / 4160;
    assert!(filled.inserts > room, "{filled:?}");
    assert!(filled.used <= room, "only what landed is held: {filled:?}");
    assert!(!filled.failed, "a full file system is the host's refusal");
    let again = read_hot(&server, 9);
    eprintln!("full: {filled:?}\nagain: {again:?}");
    assert!(
        again.disk_reads_replaced > filled.disk_reads_replaced,
        "{again:?}"
    );
    assert!(
        server.log().contains("the host refused a write"),
        "{}",
        server.log()
    );
    server.stop();
}

#[test]
fn lopri_blocks_on_lets_what_the_host_wrote_into_the_flash_cache() {
    // Off (ONTAP's default): blocks the host wrote are let go of unseen, so
    // the first reads after their CP go to disk.
    let scratch = Scratch::new();
    let server = serve_flash(&scratch, &scratch.file("flash"), "64m");
    write_hot(&server, 11);
    let off = read_hot(&server, 11);
    server.stop();
    // On: they go in as the CP lets the buffer cache evict them, and the
    // first reads come from flash.
    let scratch = Scratch::new();
    let mut args = flash_args(&scratch.file("flash"), "64m");
    args.extend(["--flexscale-lopri-blocks".into(), "on".into()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let server = serve_with(&scratch, &args);
    assert!(
        server.startup.contains("flexscale.lopri_blocks on"),
        "{}",
        server.startup
    );
    write_hot(&server, 11);
    let on = read_hot(&server, 11);
    eprintln!("lopri off {off:?}\nlopri on {on:?}");
    assert!(off.disk_reads_replaced < HOT_BLOCKS / 10, "{off:?}");
    assert!(on.disk_reads_replaced >= HOT_BLOCKS / 2, "{on:?}");
    assert!(on.lopri_blocks && !off.lopri_blocks);
    server.stop();
}

/// A data directory with `--nvlog` on another path, served once and
/// stopped; that path.
fn with_external_nvlog(scratch: &Scratch) -> PathBuf {
    let device = scratch.file("ssd");
    std::fs::create_dir(&device).expect("the other device's directory");
    let nvlog = device.join("nvlog");
    let mut args = TEST_SIZES.to_vec();
    let path = nvlog.display().to_string();
    args.extend(["--nvlog", &path]);
    serve_with(scratch, &args).stop();
    nvlog
}

fn refused(scratch: &Scratch, flash: &Path, size: &str, extra: &[&str]) -> String {
    let mut args = flash_args(flash, size);
    args.extend(extra.iter().map(|a| a.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    refusal(scratch, &args)
}

#[test]
fn flash_paths_and_sizes_that_cannot_be_used_are_refused_and_nothing_starts() {
    let scratch = Scratch::new();
    let message = refused(&scratch, &scratch.file("absent/flash"), "64m", &[]);
    assert!(message.contains("is not usable"), "{message}");
    for size in ["0", "4k", "1023k"] {
        let message = refused(&scratch, &scratch.file("flash"), size, &[]);
        assert!(
            message.contains("too small: at least 1m"),
            "{size}: {message}"
        );
    }
    let message = refused(&scratch, &scratch.file("flash"), "64x", &[]);
    assert!(message.contains("unknown size suffix"), "{message}");
    let extra = ["--flexscale-lopri-blocks", "yes"];
    let message = refused(&scratch, &scratch.file("flash"), "64m", &extra);
    assert!(message.contains("neither on nor off"), "{message}");
    assert!(!scratch.file("flash").exists(), "no flash file is made");
    assert!(!scratch.data().exists(), "no data directory is made");

    let nvlog = with_external_nvlog(&scratch);
    let logged = std::fs::read(&nvlog).expect("readable");
    let disk = scratch.disk(0);
    let label = std::fs::read(&disk).expect("readable")[..65536].to_vec();
    let nvlog_arg = nvlog.display().to_string();
    let message = refused(&scratch, &disk, "64m", &["--nvlog", &nvlog_arg]);
    assert!(message.contains("is in the data directory"), "{message}");
    let message = refused(&scratch, &nvlog, "64m", &["--nvlog", &nvlog_arg]);
    assert!(message.contains("is the NVLog"), "{message}");
    let message = refused(
        &scratch,
        &scratch.file("ssd"),
        "64m",
        &["--nvlog", &nvlog_arg],
    );
    assert!(message.contains("neither a regular file"), "{message}");
    assert!(
        std::fs::read(&nvlog).expect("readable") == logged,
        "the NVLog is untouched"
    );
    let disk_now = std::fs::read(&disk).expect("readable");
    assert!(disk_now[..65536] == label[..], "the disk is untouched");

    // A server without a Flash Cache says so.
    let args = ["--nvlog", nvlog_arg.as_str()];
    let mut serve_args = TEST_SIZES.to_vec();
    serve_args.extend(args);
    let server = serve_with(&scratch, &serve_args);
    let (code, _, stderr) = wafer(&server.data, &["stats", "show", "ext_cache_obj"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("without a Flash Cache"), "{stderr}");
    server.stop();

    // One device, two servers: the second is refused.
    let shared = scratch.file("shared-flash");
    let holder = Scratch::new();
    let first = serve_flash(&holder, &shared, "8m");
    let other = Scratch::new();
    let message = refused(&other, &shared, "8m", &[]);
    assert!(message.contains("is in use"), "{message}");
    assert!(!other.data().exists(), "no data directory is made");
    first.stop();
}
