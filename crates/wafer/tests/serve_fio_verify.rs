//! fio's NBD engine with end-to-end verification (`verify=crc32c`): a
//! sequential write read back and checked, random writes checked every 1024
//! blocks (`verify_backlog`), and four jobs (four connections, multi-conn)
//! writing disjoint regions at once, each checked as it goes. fio fails on
//! the first block that does not match what it wrote.

mod serve_harness;

use serve_harness::{Scratch, fio, serve};

const JOBS: &str = "\
[global]
ioengine=nbd
uri=${uri}
bs=4k
iodepth=32
verify=crc32c
verify_fatal=1
do_verify=1

[seq-write-verify]
rw=write
size=32m
offset=0

[rand-backlog]
stonewall
rw=randwrite
size=32m
offset=64m
verify_backlog=1024
verify_backlog_batch=1024

[multiconn-randwrite]
stonewall
rw=randwrite
size=16m
numjobs=4
offset=128m
offset_increment=16m
verify_backlog=256
";

#[test]
fn fio_verifies_sequential_random_and_multi_connection_writes() {
    let scratch = Scratch::new();
    let server = serve(&scratch);
    let jobs = scratch.file("verify.fio");
    std::fs::write(&jobs, JOBS.replace("${uri}", &server.uri("vol0/lun0"))).expect("a job file");
    let run = fio(&scratch, &[jobs.to_str().expect("UTF-8 path")]);
    let output = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "{output}{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert_eq!(output.matches("err= 0").count(), 6, "{output}");
    assert!(!output.contains("verify failed"), "{output}");
    let stats = server.sysstat();
    assert!(stats.nbd.connections_accepted >= 6, "{:?}", stats.nbd);
    assert_eq!(stats.nbd.errors, 0, "{:?}", stats.nbd);
    server.stop();
}
