//! Loads the `serve_*` tests put on a LUN and check afterwards: chunks of a
//! known pattern written one after another or pipelined, read back against
//! what was acknowledged, and the configuration file as the tests inspect it.
//! A pipelined writer stops quietly when the server goes away (a kill, a
//! full host), so the caller learns exactly which writes were acknowledged.

use std::collections::BTreeMap;
use std::path::Path;

use super::{NbdClient, Served, pattern, wafer, wire};

/// The unit `write_chunks` and `check_chunks` write and read.
pub const CHUNK: usize = 64 * 1024;

/// Writes chunks `0..chunks` of `generation` to `export`, each acknowledged.
pub fn write_chunks(server: &Served, export: &str, generation: u8, chunks: u64) {
    let mut client = NbdClient::connect(server.socket(), export);
    for n in 0..chunks {
        let written = client.write(n * CHUNK as u64, &pattern(generation, n, CHUNK));
        assert_eq!(written, 0, "write {n} to {export}");
    }
}

/// Chunks `0..chunks` of `export` hold `generation`.
pub fn check_chunks(server: &Served, export: &str, generation: u8, chunks: u64) {
    check_range(server, export, generation, 0..chunks);
}

/// Chunks `chunks` of `export` hold `generation`.
pub fn check_range(server: &Served, export: &str, generation: u8, chunks: std::ops::Range<u64>) {
    let mut client = NbdClient::connect(server.socket(), export);
    for n in chunks {
        let data = client
            .read(n * CHUNK as u64, CHUNK as u32)
            .expect("readable");
        assert!(
            data == pattern(generation, n, CHUNK),
            "chunk {n} of {export} differs"
        );
    }
}

/// What a pipelined writer writes: `count` writes of `bytes` each, write
/// `n` at offset `n * bytes` holding `pattern(generation, n, bytes)`, at
/// most `in_flight` at once, and no more sent once `stop_after` are
/// acknowledged (if given).
pub struct Writes {
    pub generation: u8,
    pub count: u64,
    pub bytes: usize,
    pub in_flight: u64,
    pub stop_after: Option<u64>,
}

/// Runs `writes` on `client` until they are done, `stop_after` is reached
/// or the server goes away; returns which writes were acknowledged without
/// error. Writes still in flight at a stop are left unanswered.
pub fn write_pipelined(client: &mut NbdClient, writes: &Writes) -> Vec<bool> {
    let mut acknowledged = vec![false; writes.count as usize];
    let mut write_of = BTreeMap::new();
    let (mut next, mut acks) = (0, 0);
    loop {
        let stopping = writes.stop_after.is_some_and(|limit| acks >= limit);
        while !stopping && next < writes.count && (write_of.len() as u64) < writes.in_flight {
            let data = pattern(writes.generation, next, writes.bytes);
            let offset = next * writes.bytes as u64;
            match client.try_send(wire::CMD_WRITE, offset, data.len() as u32, &data) {
                Ok(handle) => write_of.insert(handle, next),
                Err(_) => return acknowledged,
            };
            next += 1;
        }
        if stopping || write_of.is_empty() {
            return acknowledged;
        }
        let Ok(reply) = client.reply() else {
            return acknowledged;
        };
        let n = write_of.remove(&reply.handle).expect("a pending write");
        acknowledged[n as usize] = reply.error == 0;
        acks += u64::from(reply.error == 0);
    }
}

/// Runs `wafer ARGS`, which must fail; returns its stderr.
pub fn refused(data: &Path, args: &[&str]) -> String {
    let (code, out, err) = wafer(data, args);
    assert_ne!(code, 0, "wafer {args:?} succeeded: {out}");
    err
}

/// `wafer.toml` of `data`, parsed.
pub fn config(data: &Path) -> toml::Table {
    let text = std::fs::read_to_string(data.join(wafer_server::CONFIG_FILE)).expect("config");
    toml::from_str(&text).expect("TOML")
}

/// Aggregate `name`'s table in `config`.
pub fn aggregate<'a>(config: &'a toml::Table, name: &str) -> &'a toml::Value {
    config["aggregates"]
        .as_array()
        .expect("aggregates")
        .iter()
        .find(|a| a["aggregate"].as_str() == Some(name))
        .expect("the aggregate is configured")
}
