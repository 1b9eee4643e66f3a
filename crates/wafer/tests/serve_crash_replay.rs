//! Every acknowledged write survives a SIGKILL: the server is killed with
//! writes in flight and no flush, and after a restart (which replays the
//! NVLog) every write the client saw acknowledged reads back, newest
//! generation first; writes never acknowledged read as either their old or
//! their new content, nothing else.

mod serve_harness;

use serve_harness::load::{Writes, write_pipelined};
use serve_harness::{NbdClient, Scratch, pattern, serve};

const WRITE_BYTES: usize = 16 * 1024;
const BLOCKS: u64 = 1200;
const IN_FLIGHT: u64 = 16;

/// Writes `generation` to blocks `0..BLOCKS` pipelined; stops after
/// `stop_after` acknowledgements (if any). Returns the blocks acknowledged.
fn write_generation(client: &mut NbdClient, generation: u8, stop_after: Option<u64>) -> Vec<bool> {
    let writes = Writes {
        generation,
        count: BLOCKS,
        bytes: WRITE_BYTES,
        in_flight: IN_FLIGHT,
        stop_after,
    };
    write_pipelined(client, &writes)
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

/// The offsets of the write records (tag 1) of the NVLog half at `bytes`,
/// walking the chain by its length fields (docs/FORMAT.md, "NVLog record").
fn write_records(bytes: &[u8]) -> Vec<usize> {
    let mut writes = Vec::new();
    let mut at = 0;
    // A record: length, CRC, sequence, generation, aggregate (28 bytes),
    // then the operation's tag (1 for a write).
    while at + 29 <= bytes.len() {
        let length = u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes")) as usize;
        if length <= 28 || at + length > bytes.len() {
            break;
        }
        if bytes[at + 28] == 1 {
            writes.push(at);
        }
        at += length;
    }
    writes
}

#[test]
fn a_record_damaged_in_the_nvlog_loses_itself_and_nothing_behind_it() {
    const WRITES: u64 = 8;
    let scratch = Scratch::new();
    let server = serve(&scratch);
    let mut client = NbdClient::connect(server.socket(), "vol0/lun0");
    for block in 0..WRITES {
        let data = pattern(1, block, 4096);
        assert_eq!(client.write(block * 4096, &data), 0);
    }
    server.kill();
    drop(client);

    // One bit of the third write's data flipped where it lies in the log.
    let path = scratch.data().join("nvlog");
    let mut log = std::fs::read(&path).expect("the NVLog");
    let region = log.len() / 2;
    let (half, writes) = (0..2)
        .map(|h| (h, write_records(&log[h * region..(h + 1) * region])))
        .find(|(_, writes)| writes.len() as u64 == WRITES)
        .expect("one half holds the eight writes");
    log[half * region + writes[2] + 100] ^= 1;
    std::fs::write(&path, &log).expect("rewritten");

    let server = serve(&scratch);
    assert!(
        server
            .log()
            .contains("is damaged and lost; the 5 intact records behind it"),
        "{}",
        server.log()
    );
    let mut client = NbdClient::connect(server.socket(), "vol0/lun0");
    for block in 0..WRITES {
        let data = client.read(block * 4096, 4096).expect("readable");
        match block {
            2 => assert!(data == vec![0; 4096], "the damaged write was replayed"),
            _ => assert!(
                data == pattern(1, block, 4096),
                "block {block} lost its write"
            ),
        }
    }
    server.stop();
}
