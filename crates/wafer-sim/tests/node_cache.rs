//! One buffer-cache budget per node: the aggregates share it by their use
//! of it. A node whose load reads only one aggregate's LUN gives that
//! aggregate most of the budget, and the aggregates together keep no more
//! than the budget (plus dirty blocks, which are pinned on top).

use wafer_core::filer::{CacheUsage, HostRequest, Options};
use wafer_core::nvlog::LunId;
use wafer_core::units::{AggrId, Duration};
use wafer_sim::node_check::{self, LUN_BLOCKS, NodeCheckConfig, small_node, write};
use wafer_sim::node_world::NodeWorld;

const BUDGET: usize = 128;

/// No timer CP in the test's time: after the flush, only the reads can
/// move the shares.
fn options() -> Options {
    Options {
        cache_blocks: BUDGET,
        cp_interval: Duration::from_millis(3_600_000),
        ..NodeCheckConfig::for_seed(0).options
    }
}

fn share(world: &NodeWorld, aggregate: AggrId) -> usize {
    world
        .node
        .aggregate(aggregate)
        .expect("serving")
        .cache_share()
}

fn usage(world: &NodeWorld, aggregate: AggrId) -> CacheUsage {
    world
        .node
        .aggregate(aggregate)
        .expect("serving")
        .cache_usage()
}

fn resident(world: &NodeWorld) -> usize {
    [AggrId(0), AggrId(1)]
        .iter()
        .map(|&a| {
            let usage = usage(world, a);
            usage.data_blocks + usage.indirect_blocks
        })
        .sum()
}

/// Reads the first half-budget of blocks of `lun` three times over.
fn read_much(world: &mut NodeWorld, lun: LunId) {
    for _ in 0..3 {
        for block in 0..BUDGET as u64 / 2 {
            let data = node_check::read_block(world, lun, block).expect("read");
            assert_eq!(data[0], block as u8);
        }
    }
}

/// Asserts that `reader` has most of the budget, and that the node keeps
/// within it.
fn assert_shares_follow(world: &NodeWorld, reader: AggrId, other: AggrId) {
    let (reader_share, other_share) = (share(world, reader), share(world, other));
    assert!(
        reader_share + other_share <= BUDGET,
        "{reader_share} + {other_share}"
    );
    assert!(
        reader_share > 3 * other_share,
        "aggregate {} being read has {reader_share} blocks, the other {other_share}",
        reader.0
    );
    assert!(
        resident(world) <= BUDGET,
        "{} blocks cached over a budget of {BUDGET}",
        resident(world)
    );
}

#[test]
fn a_node_shares_one_cache_budget_by_use() {
    let mut world = small_node(2, options(), 7);
    let first = node_check::lun_on(&mut world, AggrId(0), "first").expect("a LUN");
    let second = node_check::lun_on(&mut world, AggrId(1), "second").expect("a LUN");
    for block in 0..LUN_BLOCKS {
        for lun in [first, second] {
            let reply = world.request(None, write(lun, block, block as u8));
            assert!(reply.is_ok(), "write: {reply:?}");
        }
    }
    world.request(None, HostRequest::Flush).expect("flushed");
    assert!(
        resident(&world) <= BUDGET,
        "after writing {LUN_BLOCKS} blocks to each aggregate, {} are cached over a budget of \
         {BUDGET}",
        resident(&world)
    );
    // Reads start no CP: the shares follow them all the same.
    let cps = world.node.counters().cps;
    read_much(&mut world, second);
    assert_shares_follow(&world, AggrId(1), AggrId(0));
    read_much(&mut world, first);
    assert_shares_follow(&world, AggrId(0), AggrId(1));
    assert_eq!(world.node.counters().cps, cps, "reads started a CP");
}
