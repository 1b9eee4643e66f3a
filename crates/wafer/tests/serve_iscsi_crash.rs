//! An iSCSI WRITE answered GOOD survives a SIGKILL: writes go out
//! pipelined over iSCSI, the server is killed with some in flight and no
//! flush, and after a restart (which replays the NVLog) every write the
//! initiator saw answered reads back (over NBD), and every other one reads
//! as its old or its new content, nothing else.

mod serve_harness;

use std::collections::BTreeMap;

use serve_harness::iscsi::{Initiator, parse_uri};
use serve_harness::{NbdClient, Scratch, TEST_SIZES, pattern, serve_with};

const WRITE_BYTES: usize = 16 * 1024;
const BLOCKS: u64 = 1200;
const IN_FLIGHT: u64 = 16;
const ACKS_BEFORE_KILL: u64 = 800;

fn serve_iscsi(scratch: &Scratch) -> serve_harness::Served {
    let mut args = TEST_SIZES.to_vec();
    args.extend(["--iscsi", "127.0.0.1:0"]);
    let server = serve_with(scratch, &args);
    serve_harness::iscsi::admit_test_initiators(&scratch.data());
    server
}

fn write(initiator: &mut Initiator, generation: u8, block: u64) -> u32 {
    let lba = (block * WRITE_BYTES as u64 / 512) as u32;
    initiator.write10(lba, &pattern(generation, block, WRITE_BYTES))
}

/// Writes `generation` to blocks `0..BLOCKS`, `IN_FLIGHT` at a time; stops
/// after `stop_after` GOOD responses (if any). Returns the blocks answered.
fn write_generation(
    initiator: &mut Initiator,
    generation: u8,
    stop_after: Option<u64>,
) -> Vec<bool> {
    let mut answered = vec![false; BLOCKS as usize];
    let mut block_of = BTreeMap::new();
    let mut next = 0;
    while next < BLOCKS.min(IN_FLIGHT) {
        block_of.insert(write(initiator, generation, next), next);
        next += 1;
    }
    let mut acks = 0;
    while !block_of.is_empty() && stop_after.is_none_or(|limit| acks < limit) {
        let done = initiator.done().expect("a response");
        assert_eq!(done.status, 0, "write refused");
        answered[block_of.remove(&done.itt).expect("a pending write") as usize] = true;
        acks += 1;
        if next < BLOCKS {
            block_of.insert(write(initiator, generation, next), next);
            next += 1;
        }
    }
    answered
}

#[test]
fn writes_answered_good_over_iscsi_survive_sigkill() {
    let scratch = Scratch::new();
    let server = serve_iscsi(&scratch);
    let (address, target) = parse_uri(&server.iscsi_uri());
    let mut initiator = Initiator::login(address, &target);
    let first = write_generation(&mut initiator, 1, None);
    assert!(first.iter().all(|&answered| answered));
    let second = write_generation(&mut initiator, 2, Some(ACKS_BEFORE_KILL));
    assert_eq!(
        second.iter().filter(|&&a| a).count() as u64,
        ACKS_BEFORE_KILL
    );
    // Writes are still in flight: kill now, no flush, no final CP.
    server.kill();
    drop(initiator);

    let server = serve_iscsi(&scratch);
    assert!(server.startup.contains("mounted"), "{}", server.startup);
    let mut client = NbdClient::connect(server.socket(), "vol0/lun0");
    let mut newest = 0;
    for block in 0..BLOCKS {
        let data = client
            .read(block * WRITE_BYTES as u64, WRITE_BYTES as u32)
            .expect("readable");
        let (old, new) = (
            pattern(1, block, WRITE_BYTES),
            pattern(2, block, WRITE_BYTES),
        );
        if second[block as usize] {
            assert!(data == new, "block {block} answered GOOD lost its write");
            newest += 1;
        } else {
            assert!(data == old || data == new, "block {block} holds neither");
        }
    }
    assert_eq!(newest, ACKS_BEFORE_KILL);
    server.stop();
}
