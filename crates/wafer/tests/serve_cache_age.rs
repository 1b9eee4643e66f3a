//! `sysstat -x`'s Cache age: blocks read into the buffer cache age from the
//! server's first sample of the cache's use clock after their use (it
//! samples every 10 s at most), so an idle cache that was read a little over
//! 10 s ago reports an age of seconds, `0` minutes under ONTAP's heading, and
//! a restarted server (empty cache) has nothing to age.

mod serve_harness;

use std::time::Duration;

use serve_harness::{Scratch, TEST_SIZES, ok, qemu_io, serve_with};

#[test]
fn blocks_read_age_in_the_cache_and_sysstat_shows_their_age() {
    let scratch = Scratch::new();
    let server = serve_with(&scratch, &TEST_SIZES);
    qemu_io(&server.uri("vol0/lun0"), &["write -P 0x5a 0 1M"]);
    server.stop();

    let server = serve_with(&scratch, &TEST_SIZES);
    assert_eq!(server.sysstat().cache_age_ns, None, "an empty cache");
    qemu_io(&server.uri("vol0/lun0"), &["read -P 0x5a 0 1M"]);
    std::thread::sleep(Duration::from_secs(11));
    // This request's step samples the use clock after the read; the next
    // one sees the read's blocks counted by that sample.
    server.sysstat();
    std::thread::sleep(Duration::from_secs(1));
    let age = server.sysstat().cache_age_ns.expect("cached blocks age");
    assert!(
        (1_000_000_000..60_000_000_000).contains(&age),
        "aged from the sample after the read: {age} ns"
    );
    let sysstat = ok(&server.data, &["sysstat", "-x", "-c", "1", "1"]);
    let lines: Vec<&str> = sysstat.lines().collect();
    let end = lines[1].find("age").expect("the age heading") + "age".len();
    assert_eq!(lines[2][end - 6..end].trim(), "0", "{sysstat}");
    server.stop();
}
