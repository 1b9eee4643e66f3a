//! A benchmark, not a test (ignored by the suite): 4 KiB random reads and
//! writes over iSCSI against wafer and, in the same run, against tgt, the
//! reference user-space target, serving a file of the same size on the same
//! filesystem. One client drives both: the raw initiator of the serve tests
//! (one session, one connection, a closed loop of `DEPTH` commands in
//! flight, writes as immediate data), so the figures compare the targets and
//! not two initiators. tgt runs twice: on the page cache (its default; it
//! acknowledges writes before they are durable) and with `--bsoflags sync`
//! (O_SYNC: durable when acknowledged, as wafer's are, whose writes are in
//! the NVLog, fdatasync'ed, before GOOD). The targets take turns test by
//! test for `BENCH_ROUNDS` rounds (default 3) of `BENCH_SECONDS` each
//! (default 10), and the medians are printed with their ratios to tgt's: on
//! a shared machine only the side-by-side ratio means anything.
//!
//! Run: `cargo test --release -p wafer --test serve_iscsi_bench -- --ignored --nocapture`

mod serve_harness;

use std::time::{Duration, Instant};

use serve_harness::iscsi::{Initiator, admit_test_initiators, parse_uri};
use serve_harness::tgt::start_tgt;
use serve_harness::{LUN_BYTES, Scratch, TEST_SIZES, serve_with};

/// Commands in flight.
const DEPTH: usize = 32;
/// Bytes per command.
const IO_BYTES: usize = 4096;
/// The region of the LUN the I/Os fall in (written whole first).
const REGION_BYTES: u64 = 64 << 20;

/// xorshift64: the offsets, the same sequence for every target.
struct Offsets(u64);

impl Offsets {
    fn next_lba(&mut self) -> u32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        let blocks = REGION_BYTES / IO_BYTES as u64;
        ((self.0 % blocks) * (IO_BYTES as u64 / 512)) as u32
    }
}

/// Logs in to the LUN at `uri` (LUN 0 of wafer, LUN 1 of tgt) and takes
/// the unit attentions a new session may owe (tgt's POWER ON OCCURRED) with
/// TEST UNIT READY.
fn open(uri: &str) -> (Initiator, u8) {
    let (address, target) = parse_uri(uri);
    let lun = uri
        .rsplit('/')
        .next()
        .and_then(|l| l.parse().ok())
        .unwrap_or(0);
    let mut initiator = Initiator::login(address, &target);
    for _ in 0..4 {
        initiator.command_to(lun, &[0; 6], 0, false, &[]);
        if initiator.done().expect("TEST UNIT READY answered").status == 0 {
            return (initiator, lun);
        }
    }
    panic!("{uri}: the LUN is not ready");
}

fn send(initiator: &mut Initiator, lun: u8, lba: u32, write: bool, block: &[u8]) {
    let mut cdb = [0u8; 10];
    cdb[0] = if write { 0x2a } else { 0x28 };
    cdb[2..6].copy_from_slice(&lba.to_be_bytes());
    cdb[7..9].copy_from_slice(&((IO_BYTES / 512) as u16).to_be_bytes());
    let data = if write { block } else { &[] };
    initiator.command_to(lun, &cdb, IO_BYTES as u32, !write, data);
}

/// Writes the region whole, `DEPTH` writes in flight, so that reads find
/// data, not holes. (4 KiB a command: tgt takes 8 KiB segments at most.)
fn fill(uri: &str) {
    let (mut initiator, lun) = open(uri);
    let block = vec![0x5a; IO_BYTES];
    let lbas: Vec<u32> = (0..REGION_BYTES / IO_BYTES as u64)
        .map(|n| (n * IO_BYTES as u64 / 512) as u32)
        .collect();
    for (n, &lba) in lbas.iter().enumerate() {
        if n >= DEPTH {
            let done = initiator.done().expect("the fill's write answered");
            assert_eq!(
                done.status, 0,
                "the fill's write failed: sense {:02x?}",
                done.data
            );
        }
        send(&mut initiator, lun, lba, true, &block);
    }
    for _ in 0..DEPTH.min(lbas.len()) {
        initiator.done().expect("the fill's last writes answered");
    }
}

/// 4 KiB random reads or writes at `DEPTH` for `seconds`: I/Os per second.
fn run(uri: &str, write: bool, seconds: u64) -> f64 {
    let (mut initiator, lun) = open(uri);
    let block = vec![0xa5; IO_BYTES];
    let mut offsets = Offsets(0x9e37_79b9_7f4a_7c15);
    for _ in 0..DEPTH {
        send(&mut initiator, lun, offsets.next_lba(), write, &block);
    }
    let start = Instant::now();
    let mut done = 0u64;
    while start.elapsed() < Duration::from_secs(seconds) {
        let answer = initiator.done().expect("an answer");
        assert_eq!(answer.status, 0, "an I/O failed");
        done += 1;
        send(&mut initiator, lun, offsets.next_lba(), write, &block);
    }
    let rate = done as f64 / start.elapsed().as_secs_f64();
    for _ in 0..DEPTH {
        initiator.done().expect("the last answers");
    }
    rate
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
#[ignore = "a benchmark: run with --ignored --nocapture"]
fn four_kib_random_iops_against_tgt() {
    let (rounds, seconds) = (env_or("BENCH_ROUNDS", 3), env_or("BENCH_SECONDS", 10));
    let scratch = Scratch::new();
    let mut args = TEST_SIZES.to_vec();
    args.extend(["--iscsi", "127.0.0.1:0"]);
    let server = serve_with(&scratch, &args);
    admit_test_initiators(&scratch.data());
    let mut targets = vec![("wafer".to_string(), server.iscsi_uri())];
    let mut tgtds = Vec::new();
    for (name, flags) in [("tgt", &[][..]), ("tgt-sync", &["sync"][..])] {
        let image = scratch.file(&format!("{name}.raw"));
        std::fs::File::create(&image)
            .and_then(|f| f.set_len(LUN_BYTES))
            .expect("tgt's backing file");
        let (tgtd, uri) = start_tgt(&image, flags);
        tgtds.push(tgtd);
        targets.push((name.to_string(), uri));
    }
    for (_, uri) in &targets {
        fill(uri);
    }
    for (test, write) in [("4 KiB random read", false), ("4 KiB random write", true)] {
        let mut rates = vec![Vec::new(); targets.len()];
        for _ in 0..rounds {
            for (n, (_, uri)) in targets.iter().enumerate() {
                rates[n].push(run(uri, write, seconds));
            }
        }
        let medians: Vec<f64> = rates.into_iter().map(median).collect();
        println!("{test}, depth {DEPTH}, {rounds} rounds of {seconds} s, medians:");
        for ((name, _), rate) in targets.iter().zip(&medians) {
            println!(
                "  {name:9} {rate:9.0} IOPS   wafer/{name} = {:.2}",
                medians[0] / rate
            );
        }
    }
    drop(tgtds);
    server.stop();
}
