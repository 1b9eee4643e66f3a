//! `priority set volume VOL cache=reuse` on the server changes what the
//! buffer cache keeps, measurably: with a small cache (`--cache-size 4m`,
//! 1,024 blocks), a volume's hot 2 MiB read once, then another volume's
//! 8 MiB streamed through, the hot set is read again and its cache hits are
//! counted (`sysstat`'s `cache_hits`). With the streaming volume at the
//! default policy, the stream's newer blocks push the hot set out; set to
//! `reuse`, its blocks go first and the hot set stays.

mod serve_harness;

use serve_harness::{Scratch, TEST_SIZES, ok, qemu_io, serve_with};

/// Blocks of the hot set read again (512 in all).
const HOT_BLOCKS: u64 = 512;

/// Cache hits of the hot set's second read, with the streaming volume at
/// `policy`.
fn hot_set_hits(policy: &str) -> u64 {
    let scratch = Scratch::new();
    let mut args = TEST_SIZES.to_vec();
    args.extend(["--cache-size", "4m"]);
    let server = serve_with(&scratch, &args);
    let data = scratch.data();
    ok(&data, &["vol", "create", "vol1", "aggr0", "64m"]);
    ok(&data, &["lun", "create", "-s", "16m", "/vol/vol1/lun0"]);
    let (hot, stream) = (server.uri("vol0/lun0"), server.uri("vol1/lun0"));
    qemu_io(&hot, &["write -P 0x5a 0 2M"]);
    qemu_io(&stream, &["write -P 0xa5 0 8M"]);
    server.stop();

    // A restart empties the cache: every first read goes to disk.
    let server = serve_with(&scratch, &args);
    let policy = format!("cache={policy}");
    ok(&data, &["priority", "set", "volume", "vol1", &policy]);
    qemu_io(&hot, &["read -P 0x5a 0 2M"]);
    // The stream in 64 KiB reads, as a backup streams: one 8 MiB read
    // would pin all its blocks in the cache at once.
    let reads: Vec<String> = (0..128)
        .map(|n| format!("read -P 0xa5 {} 64k", n * 65536))
        .collect();
    let reads: Vec<&str> = reads.iter().map(String::as_str).collect();
    qemu_io(&stream, &reads);
    let before = server.sysstat().cache_hits;
    qemu_io(&hot, &["read -P 0x5a 0 2M"]);
    let hits = server.sysstat().cache_hits - before;
    server.stop();
    hits
}

#[test]
fn a_streaming_volume_set_to_reuse_leaves_another_volumes_hot_set_cached() {
    let default = hot_set_hits("default");
    let reuse = hot_set_hits("reuse");
    println!(
        "hot-set hits of {HOT_BLOCKS}: {default} with the stream at default, {reuse} at reuse"
    );
    assert!(
        reuse >= HOT_BLOCKS * 3 / 4 && default <= HOT_BLOCKS / 4,
        "hot-set hits: {default} of {HOT_BLOCKS} with the stream at default, {reuse} at reuse"
    );
}
