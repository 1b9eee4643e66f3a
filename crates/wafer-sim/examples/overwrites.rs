//! Random 4 KiB overwrites of a LUN on a 16+2 RAID-DP aggregate, in the
//! simulator without faults, and what the engine did to absorb them.
//!
//! Run: `cargo run --release -p wafer-sim --example overwrites -- [OPS] [MISALIGN_BYTES]`
//! (defaults: 1,000,000 writes, aligned). With MISALIGN_BYTES, every write is
//! shifted off the 4 KiB grid by that many bytes, so each touches two blocks and
//! needs their old contents.

#![allow(missing_docs, reason = "an example program")]
#![allow(
    clippy::disallowed_methods,
    reason = "an example program reads its arguments"
)]

use wafer_core::aggregate::Layout;
use wafer_core::filer::{Change, HostRequest, Options, ReplyData};
use wafer_core::units::Duration;
use wafer_raid::{RaidGroupGeometry, RaidType};
use wafer_sim::world::World;

const LUN_BYTES: u64 = 1 << 30;
const QUEUE_DEPTH: usize = 32;

fn main() {
    let mut args = std::env::args().skip(1);
    let ops: u64 = args
        .next()
        .map_or(1_000_000, |a| a.parse().expect("OPS is a number"));
    let misalign: u64 = args
        .next()
        .map_or(0, |a| a.parse().expect("MISALIGN_BYTES is a number"));
    let geometry =
        RaidGroupGeometry::new(RaidType::RaidDp, 18, 32 * 1024).expect("16+2 of 128 MiB disks");
    let layout = Layout::new(vec![geometry], 1).expect("one RAID group");
    let mut world = World::format(layout, Options::default(), 1);
    world.wait_online().expect("a fresh aggregate comes online");
    let volume = match admin(
        &mut world,
        HostRequest::Change(Change::CreateVolume {
            name: "vol0".into(),
            size_bytes: LUN_BYTES + (64 << 20),
        }),
    ) {
        ReplyData::Volume(v) => v,
        other => panic!("create volume: {other:?}"),
    };
    let lun = match admin(
        &mut world,
        HostRequest::Change(Change::CreateLun {
            volume,
            name: "lun0".into(),
            size_bytes: LUN_BYTES,
            attributes: wafer_core::format::LunAttributes::DEFAULT,
        }),
    ) {
        ReplyData::Lun(l) => l,
        other => panic!("create LUN: {other:?}"),
    };
    let before = world.filer().counters().clone();
    let started = world.now();
    let (mut submitted, mut done, mut in_flight) = (0u64, 0u64, 0usize);
    let blocks = LUN_BYTES / 4096 - 1;
    while done < ops {
        while in_flight < QUEUE_DEPTH && submitted < ops {
            let offset = world.rng().below(blocks) * 4096 + misalign;
            let mut data = vec![0u8; 4096];
            world.rng().fill(&mut data);
            let write = HostRequest::Change(Change::Write { lun, offset, data });
            world.submit(None, write).expect("online");
            submitted += 1;
            in_flight += 1;
        }
        if !world.step() {
            world.idle(Duration::from_millis(10));
        }
        for reply in world.take_replies() {
            reply.result.expect("a write succeeds");
            done += 1;
            in_flight -= 1;
        }
    }
    admin(&mut world, HostRequest::Flush);
    let elapsed = world.now() - started;
    let c = world.filer().counters();
    let cps: u64 = c.cps.values().sum::<u64>() - before.cps.values().sum::<u64>();
    let data = c.data_blocks_written - before.data_blocks_written;
    let meta = c.meta_blocks_written - before.meta_blocks_written;
    let full = c.full_stripes - before.full_stripes;
    let partial_sub = c.partial_stripes_subtraction - before.partial_stripes_subtraction;
    let partial_add = c.partial_stripes_addition - before.partial_stripes_addition;
    let partial_rec = c.partial_stripes_reconstruct - before.partial_stripes_reconstruct;
    println!(
        "{ops} random 4 KiB writes (misaligned by {misalign} B) to a 1 GiB LUN, 16+2 RAID-DP, queue depth {QUEUE_DEPTH}"
    );
    println!("virtual time: {:.1} s", elapsed.0 as f64 / 1e9);
    println!("CPs: {cps} ({:?})", c.cps);
    println!(
        "back-to-back waits (writes held for a CP): {}",
        c.back_to_back_waits - before.back_to_back_waits
    );
    println!(
        "data blocks written: {data}; metadata blocks written: {meta}; metadata per data block: {:.4}",
        meta as f64 / data as f64
    );
    println!(
        "stripes: {full} full, {partial_add} partial by addition, {partial_sub} partial by subtraction, {partial_rec} reconstructed first"
    );
    println!(
        "parity blocks written: {}; disk reads for partial stripes: {}",
        c.parity_blocks_written - before.parity_blocks_written,
        c.parity_reads - before.parity_reads
    );
    println!(
        "disk reads caused by unaligned writes (old block merges): {}",
        c.partial_write_reads - before.partial_write_reads
    );
}

fn admin(world: &mut World, request: HostRequest) -> ReplyData {
    let id = world.submit(None, request).expect("online");
    world.drain();
    loop {
        for reply in world.take_replies() {
            if reply.id == id {
                return reply.result.expect("admin request succeeds");
            }
        }
        if !world.step() {
            world.idle(Duration::from_millis(10));
        }
    }
}
