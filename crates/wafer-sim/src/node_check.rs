//! The seeded check of a node of several aggregates over one NVLog.
//!
//! A seed formats a node of 1 to 3 aggregates, a volume and a LUN on each,
//! then runs rounds of random 4 KiB writes over all the LUNs, several in
//! flight at once, and ends each round with a crash and a remount. Between
//! rounds it takes a random aggregate offline and back, and loses disks
//! within RAID-DP's promise (at most two per aggregate, each its own RAID
//! group), and add disks (a data disk to the last RAID group, or a new
//! group). After every remount each block of every LUN is read back: it must
//! hold the last acknowledged write's bytes, or those of a write in flight
//! at the crash. A node that replays a record into the wrong aggregate, or
//! resets a half whose records some aggregate has not committed, fails here
//! (the negative controls in `tests/node.rs`).

use std::collections::BTreeMap;

use wafer_core::aggregate::Layout;
use wafer_core::filer::{Change, HostRequest, Options, ReplyData};
use wafer_core::node::AggrState;
use wafer_core::nvlog::LunId;
use wafer_core::units::{AggrId, DiskId};
use wafer_raid::{RaidGroupGeometry, RaidType};
use wafer_rng::Rng;

use crate::node_world::NodeWorld;

const BLOCK: u64 = 4096;
/// Blocks of each LUN.
pub const LUN_BLOCKS: u64 = 256;
const AGGREGATE_NAMES: [&str; 3] = ["aggr0", "aggr1", "aggr2"];

/// One seed's parameters.
#[derive(Clone, Debug)]
pub struct NodeCheckConfig {
    /// The seed.
    pub seed: u64,
    /// Aggregates, 1 to 3.
    pub aggregates: usize,
    /// Rounds, each ended by a crash.
    pub rounds: u64,
    /// Writes submitted per round.
    pub writes_per_round: u64,
    /// Administration and disk losses between rounds.
    pub faults: bool,
    /// The engine's options.
    pub options: Options,
}

impl NodeCheckConfig {
    /// The default check of `seed`: 1 to 3 aggregates by the seed, small
    /// NVLog halves so that they fill and switch.
    pub fn for_seed(seed: u64) -> NodeCheckConfig {
        NodeCheckConfig {
            seed,
            aggregates: 1 + (seed % 3) as usize,
            rounds: 6,
            writes_per_round: 40,
            faults: true,
            options: Options {
                nvlog_half_bytes: 256 << 10,
                dirty_high_water: 128,
                ..Options::default()
            },
        }
    }
}

/// What a passing seed did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeCheckReport {
    /// Crashes survived.
    pub crashes: u64,
    /// Writes acknowledged.
    pub writes: u64,
    /// Blocks read back and checked.
    pub blocks_checked: u64,
    /// Aggregates taken offline and back.
    pub offlines: u64,
    /// Disks lost.
    pub disks_lost: u64,
    /// Times disks were added to an aggregate.
    pub disks_added: u64,
}

/// An aggregate of one RAID-DP group of six disks, 16 MiB each.
pub fn small_layout() -> Layout {
    let geometry = RaidGroupGeometry::new(RaidType::RaidDp, 6, 4096).expect("valid");
    Layout::new(vec![geometry], 0).expect("valid")
}

/// A node of `aggregates` small aggregates, serving.
pub fn small_node(aggregates: usize, options: Options, seed: u64) -> NodeWorld {
    let aggregates = AGGREGATE_NAMES[..aggregates]
        .iter()
        .map(|name| (*name, small_layout()))
        .collect();
    let world = NodeWorld::format(aggregates, options, seed);
    assert!(world.node.is_online(), "a formatted node serves");
    world
}

/// A volume `name` and a LUN of [`LUN_BLOCKS`] in it, on `aggregate`.
pub fn lun_on(world: &mut NodeWorld, aggregate: AggrId, name: &str) -> Result<LunId, String> {
    let create = Change::CreateVolume {
        name: name.into(),
        size_bytes: 24 << 20,
    };
    let volume = match world.request(Some(aggregate), HostRequest::Change(create)) {
        Ok(ReplyData::Volume(volume)) => volume,
        other => return Err(format!("volume {name} not created: {other:?}")),
    };
    let create = Change::CreateLun {
        volume,
        name: "lun0".into(),
        size_bytes: LUN_BLOCKS * BLOCK,
    };
    match world.request(None, HostRequest::Change(create)) {
        Ok(ReplyData::Lun(lun)) => Ok(lun),
        other => Err(format!("LUN in {name} not created: {other:?}")),
    }
}

/// A write of `fill` over block `block` of `lun`.
pub fn write(lun: LunId, block: u64, fill: u8) -> HostRequest {
    HostRequest::Change(Change::Write {
        lun,
        offset: block * BLOCK,
        data: vec![fill; BLOCK as usize],
    })
}

/// Reads block `block` of `lun`.
pub fn read_block(world: &mut NodeWorld, lun: LunId, block: u64) -> Result<Vec<u8>, String> {
    let read = HostRequest::Read {
        lun,
        offset: block * BLOCK,
        length: BLOCK,
    };
    match world.request(None, read) {
        Ok(ReplyData::Data(data)) => Ok(data),
        other => Err(format!("read of {lun:?} block {block}: {other:?}")),
    }
}

/// What each block may hold: the acknowledged fill, plus the fills of
/// writes in flight at a crash.
#[derive(Default)]
struct Model {
    blocks: BTreeMap<(LunId, u64), Vec<u8>>,
}

/// A write submitted and not yet answered.
type InFlight = BTreeMap<u64, (LunId, u64, u8)>;

/// Runs one seed.
pub fn run(config: &NodeCheckConfig) -> Result<NodeCheckReport, String> {
    let mut world = small_node(config.aggregates, config.options.clone(), config.seed);
    let luns = (0..config.aggregates)
        .map(|a| lun_on(&mut world, AggrId(a as u32), &format!("vol{a}")))
        .collect::<Result<Vec<LunId>, String>>()?;
    let mut rng = Rng::seeded(config.seed ^ 0x6e6f_6465);
    let mut model = Model::default();
    let mut report = NodeCheckReport::default();
    let mut fill = 0u8;
    let mut lost: BTreeMap<AggrId, u32> = BTreeMap::new();
    for _round in 0..config.rounds {
        let mut in_flight = InFlight::new();
        for _ in 0..config.writes_per_round {
            let lun = luns[rng.below(luns.len() as u64) as usize];
            let block = rng.below(LUN_BLOCKS);
            if in_flight.values().any(|(l, b, _)| (*l, *b) == (lun, block)) {
                continue;
            }
            fill = fill.wrapping_add(1).max(1);
            let id = world.submit(None, write(lun, block, fill));
            in_flight.insert(id, (lun, block, fill));
            for _ in 0..rng.below(6) {
                world.step();
            }
            report.writes += acknowledge(&mut world, &mut in_flight, &mut model)?;
        }
        for _ in 0..rng.below(200) {
            world.step();
        }
        report.writes += acknowledge(&mut world, &mut in_flight, &mut model)?;
        for (lun, block, fill) in in_flight.into_values() {
            model
                .blocks
                .entry((lun, block))
                .or_insert(vec![0])
                .push(fill);
        }
        world.crash_and_remount();
        report.crashes += 1;
        all_online(&world)?;
        report.blocks_checked += verify(&mut world, &luns, &mut model)?;
        if config.faults {
            administer(&mut world, &mut rng, &mut lost, &mut report)?;
        }
    }
    Ok(report)
}

/// Takes a random aggregate offline and back, or loses a disk of one
/// within its promise.
fn administer(
    world: &mut NodeWorld,
    rng: &mut Rng,
    lost: &mut BTreeMap<AggrId, u32>,
    report: &mut NodeCheckReport,
) -> Result<(), String> {
    let aggregates = world.aggregates().len() as u64;
    let aggregate = AggrId(rng.below(aggregates) as u32);
    match rng.below(4) {
        0 => {
            world
                .offline(aggregate)
                .map_err(|e| format!("offline: {e}"))?;
            world
                .online(aggregate)
                .map_err(|e| format!("online: {e}"))?;
            all_online(world)?;
            report.offlines += 1;
        }
        1 => {
            let count = lost.entry(aggregate).or_default();
            if *count < 2 {
                // Disks 0 and 3 of the group: data disks both.
                world.lose_disk(aggregate, DiskId(*count * 3));
                *count += 1;
                report.disks_lost += 1;
            }
        }
        2 => {
            let layout = world.node.layout(aggregate).expect("a member").clone();
            if layout.groups().len() < 3 {
                let grown = grown_layout(&layout, rng.chance(1, 2));
                let added = world.add_disks(aggregate, grown);
                added.map_err(|e| format!("add disks: {e}"))?;
                report.disks_added += 1;
            }
        }
        _ => {}
    }
    Ok(())
}

/// `layout` with a data disk added to its last group, or with a new
/// RAID-DP group of four disks.
fn grown_layout(layout: &Layout, new_group: bool) -> Layout {
    let mut groups = layout.groups().to_vec();
    let last = groups.last_mut().expect("a group");
    if new_group || last.group_size() >= 8 {
        groups.push(RaidGroupGeometry::new(RaidType::RaidDp, 4, 4096).expect("valid"));
    } else {
        let wider = RaidGroupGeometry::new(last.raid_type(), last.group_size() as u16 + 1, 4096);
        *last = wider.expect("valid");
    }
    Layout::new(groups, 0).expect("valid")
}

fn all_online(world: &NodeWorld) -> Result<(), String> {
    match world
        .aggregates()
        .into_iter()
        .find(|s| s.state != AggrState::Online)
    {
        Some(status) => Err(format!("{} is {:?}", status.name, status.state)),
        None => Ok(()),
    }
}

/// Moves answered writes from `in_flight` into the model; returns how many.
fn acknowledge(
    world: &mut NodeWorld,
    in_flight: &mut InFlight,
    model: &mut Model,
) -> Result<u64, String> {
    let mut answered = 0;
    let ids: Vec<u64> = in_flight.keys().copied().collect();
    for id in ids {
        if let Some(result) = world.take_reply(id) {
            if result != Ok(ReplyData::Done) {
                return Err(format!("write {id} failed: {result:?}"));
            }
            let (lun, block, fill) = in_flight.remove(&id).expect("in flight");
            model.blocks.insert((lun, block), vec![fill]);
            answered += 1;
        }
    }
    Ok(answered)
}

/// Reads every block back against the model; from then on each block
/// holds exactly what it read. Returns the blocks checked.
fn verify(world: &mut NodeWorld, luns: &[LunId], model: &mut Model) -> Result<u64, String> {
    for &lun in luns {
        for block in 0..LUN_BLOCKS {
            let data = read_block(world, lun, block)?;
            let allowed = model
                .blocks
                .get(&(lun, block))
                .map_or(&[0][..], Vec::as_slice);
            if !data.iter().all(|&b| b == data[0]) || !allowed.contains(&data[0]) {
                return Err(format!(
                    "LUN {lun:?} block {block} holds {:?}, expected one of {allowed:?}",
                    &data[..4]
                ));
            }
            model.blocks.insert((lun, block), vec![data[0]]);
        }
    }
    Ok(luns.len() as u64 * LUN_BLOCKS)
}
