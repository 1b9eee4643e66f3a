//! Every acknowledged write survives a SIGKILL: the server is killed with
//! writes in flight and no flush, and after a restart (which replays the
//! NVLog) every write the client saw acknowledged reads back, newest
//! generation first; writes never acknowledged read as either their old or
//! their new content, nothing else.

mod serve_harness;

use serve_harness::{NbdClient, Scratch, pattern, serve, wire};

const WRITE_BYTES: usize = 16 * 1024;
const BLOCKS: u64 = 1200;
const IN_FLIGHT: u64 = 16;

/// Writes `generation` to blocks `0..BLOCKS` pipelined; stops after
/// `stop_after` acknowledgements (if any). Returns the blocks acknowledged.
fn write_generation(client: &mut NbdClient, generation: u8, stop_after: Option<u64>) -> Vec<bool> {
    let mut acknowledged = vec![false; BLOCKS as usize];
    let mut block_of = std::collections::BTreeMap::new();
    let mut next = 0;
    let mut acks = 0;
    while next < BLOCKS.min(IN_FLIGHT) {
        let data = pattern(generation, next, WRITE_BYTES);
        block_of.insert(
            client.send(
                wire::CMD_WRITE,
                next * WRITE_BYTES as u64,
                data.len() as u32,
                &data,
            ),
            next,
        );
        next += 1;
    }
    while !block_of.is_empty() {
        if stop_after.is_some_and(|limit| acks >= limit) {
            break;
        }
        let reply = client.reply().expect("a reply");
        assert_eq!(reply.error, 0, "write refused");
        acknowledged[block_of.remove(&reply.handle).expect("a pending write") as usize] = true;
        acks += 1;
        if next < BLOCKS {
            let data = pattern(generation, next, WRITE_BYTES);
            let handle = client.send(
                wire::CMD_WRITE,
                next * WRITE_BYTES as u64,
                data.len() as u32,
                &data,
            );
            block_of.insert(handle, next);
            next += 1;
        }
    }
    acknowledged
}

#[test]
fn acknowledged_writes_survive_sigkill() {
    let scratch = Scratch::new();
    let server = serve(&scratch);
    let mut client = NbdClient::connect(server.socket(), "vol0/lun0");
    let first = write_generation(&mut client, 1, None);
    assert!(first.iter().all(|&acked| acked));
    let second = write_generation(&mut client, 2, Some(800));
    let acknowledged = second.iter().filter(|&&acked| acked).count();
    assert_eq!(acknowledged, 800);
    // Writes are still in flight: kill now, no flush, no final CP.
    server.kill();
    drop(client);

    let server = serve(&scratch);
    assert!(server.startup.contains("mounted"), "{}", server.startup);
    let mut client = NbdClient::connect(server.socket(), "vol0/lun0");
    let mut newest = 0;
    for block in 0..BLOCKS {
        let data = client
            .read(block * WRITE_BYTES as u64, WRITE_BYTES as u32)
            .expect("readable");
        let old = pattern(1, block, WRITE_BYTES);
        let new = pattern(2, block, WRITE_BYTES);
        if second[block as usize] {
            assert!(data == new, "acknowledged block {block} lost its write");
            newest += 1;
        } else {
            assert!(
                data == old || data == new,
                "block {block} holds neither generation"
            );
        }
    }
    assert_eq!(newest, 800);
    server.stop();
}
