//! qemu's clients against `wafer serve`: qemu-io writes patterns (plain, FUA,
//! write-zeroes, discard, flush) and reads them back checked, and a wrong
//! pattern is caught (the negative control that proves the check checks);
//! `qemu-img bench` runs writes and reads against the export.

mod serve_harness;

use serve_harness::{Scratch, client_ok, qemu_io, serve};

#[test]
fn qemu_io_reads_back_what_it_wrote() {
    let scratch = Scratch::new();
    let server = serve(&scratch);
    let uri = server.uri("vol0/lun0");
    qemu_io(
        &uri,
        &[
            "write -P 0xab 0 1M",
            "write -z 1M 1M",
            "write -f -P 0xcd 2M 64k",
            "flush",
            "discard 3M 1M",
            "write -P 0x11 4100 5000", // unaligned: read-modify-write in the engine
        ],
    );
    let checked = qemu_io(
        &uri,
        &[
            "read -P 0xab 0 4k",
            "read -P 0x11 4100 5000",
            "read -P 0xab 12k 1004k",
            "read -P 0 1M 1M",
            "read -P 0xcd 2M 64k",
            "read -P 0 3M 1M",
            "readv -P 0xab 16k 4k 4k",
        ],
    );
    assert!(
        !checked.contains("Pattern verification failed"),
        "{checked}"
    );
    // The negative control: the same check against a wrong pattern fails.
    let wrong = serve_harness::client("qemu-io", &["-f", "raw", "-c", "read -P 0xcd 0 4k", &uri]);
    assert!(!wrong.status.success());
    assert!(String::from_utf8_lossy(&wrong.stdout).contains("Pattern verification failed"));
    server.stop();
}

#[test]
fn qemu_img_bench_writes_and_reads() {
    let scratch = Scratch::new();
    let server = serve(&scratch);
    let uri = server.uri("vol0/lun0");
    let bench = |extra: &[&str]| {
        let mut args = vec![
            "bench", "-f", "raw", "-c", "20000", "-d", "32", "-s", "4096",
        ];
        args.extend_from_slice(extra);
        args.push(&uri);
        client_ok("qemu-img", &args)
    };
    let writes = bench(&["-w", "--pattern=0xab", "--flush-interval=5000"]);
    assert!(writes.contains("Run completed"), "{writes}");
    let reads = bench(&[]);
    assert!(reads.contains("Run completed"), "{reads}");
    // Every block the writes touched reads back as the pattern.
    qemu_io(&uri, &["read -P 0xab 0 4k", "read -P 0xab 40m 4k"]);
    let stats = server.sysstat();
    assert!(
        stats.nbd.writes >= 20000 && stats.nbd.reads >= 20000,
        "{:?}",
        stats.nbd
    );
    assert!(stats.nbd.flushes >= 3, "{:?}", stats.nbd);
    server.stop();
}
