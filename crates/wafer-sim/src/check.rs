//! The seeded check: a random workload against the real engine in a faulty
//! world, every read compared with a reference model.
//!
//! One seed fixes everything: how many aggregates the node starts with (1 to
//! 3) and their shapes, the workload and the faults, so a failure is replayed
//! exactly by `wafer check --seed N` (and its `--payload`). A run has two
//! phases. The *safety* phase injects every fault kind (crashes with NVLog
//! replay, dead disks rebuilt onto spares, latent errors, bit rot, lost,
//! misdirected and torn writes, host refusals) on the disks of every
//! aggregate, each within what its RAID groups promise, and administers the
//! node between requests: an aggregate taken offline and brought back, disks
//! added to one, a new one created (up to 3) with a volume and LUNs of its
//! own. Every read must return what the model says. The *liveness* phase
//! injects nothing and must end with every acknowledged write to every
//! aggregate's LUNs readable, every aggregate's invariants intact, every
//! stripe's parity consistent and every reachable block sound on its disk.
//! The node shares one NVLog among its aggregates, so a crash has every
//! aggregate replay its own records from it: a record replayed into the
//! wrong aggregate, or a half reset before every aggregate committed its
//! records, shows as a read that differs from the model.
//!
//! With [`CheckConfig::single_filer`] the engine is one filer alone with its
//! own log and no administration, as the check ran before nodes: the seeds
//! found then (`scripts/regression-seeds`) replay as they were.
//!
//! The same check runs the filer on either payload ([`PayloadKind`]): real
//! bytes, or one stamp per block. A stamp filer cannot mount, so it is never
//! crashed; every other fault is injected alike. Without faults, a seed runs
//! the same workload on both, and the filer must issue the same I/Os for it
//! ([`CheckConfig::record_io`]): what a block says never steers the engine.
//!
//! The model keeps each block of each LUN as the payload does, applying every
//! write and trim to it block piece by block piece with the payload's own
//! arithmetic, and expects of a read the bytes the payload reads from it. It
//! also keeps which bytes are certain: a write that was in flight at a crash
//! may or may not have happened, so its bytes are uncertain until written
//! again. Requests in flight at once never overlap, so the model is never
//! ambiguous otherwise. A snapshot is a copy of the model's LUNs of its volume
//! when it was taken; reads of it are checked against that copy, and restoring
//! one copies it back.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;

use wafer_core::BLOCK_SIZE;
use wafer_core::aggregate::{Layout, SUPERBLOCK_COPIES, Slot, Tier};
use wafer_core::filer::FlashCacheOptions;
pub use wafer_core::filer::HyaCounters;
#[cfg(feature = "sabotage")]
use wafer_core::filer::Sabotage;
use wafer_core::filer::{
    Busy, Change, GrowError, HostRequest, Options, ReplyData, RequestId, VolumeState,
};
use wafer_core::format::LunAttributes;
pub use wafer_core::node::FlashCounters;
use wafer_core::node::{AggrError, AggrState};
use wafer_core::node::{global_volume, split_volume};
use wafer_core::nvlog::LunId;
use wafer_core::payload::{Bytes, Stamps};
use wafer_core::schedule::{SnapKind, SnapSchedule};
use wafer_core::units::{AggrId, CpCount, DiskId, Duration, VolumeId};
use wafer_raid::{RaidGroupGeometry, RaidType};
use wafer_rng::Rng;

use crate::world::{FaultRates, IoShape, SimPayload, World};

/// What the checked filer's blocks hold.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PayloadKind {
    /// Real 4 KiB blocks: every fault is injected, crashes included.
    #[default]
    Bytes,
    /// One stamp per block: every fault but the crash, since a stamp filer
    /// does not mount.
    Stamps,
}

impl PayloadKind {
    /// Whether the check crashes the filer: only a byte filer mounts again.
    pub fn crashes(self) -> bool {
        matches!(self, PayloadKind::Bytes)
    }
}

/// What a check run is asked to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckConfig {
    /// The seed.
    pub seed: u64,
    /// Host operations to run in all.
    pub ops: u64,
    /// Whether to inject faults in the safety phase.
    pub faults: bool,
    /// A deliberate engine bug, for negative controls.
    #[cfg(feature = "sabotage")]
    pub sabotage: Option<Sabotage>,
    /// What the filer's blocks hold.
    pub payload: PayloadKind,
    /// Whether to keep the shape of every I/O in the report.
    pub record_io: bool,
    /// Whether the engine holds fewer requests than the workload keeps in
    /// flight. Off, every seed runs as it did before the bound existed, so
    /// the regression seeds replay what they found.
    pub bound_requests: bool,
    /// Whether to run one filer alone (its own log, no aggregate
    /// administration) instead of a node of 1 to 3 aggregates: how the check
    /// ran before nodes, which the regression seeds found then replay.
    pub single_filer: bool,
    /// Whether a node's administration also grows, shrinks, takes offline
    /// and destroys volumes. Off, every seed runs as it did before volumes
    /// could be destroyed, so the regression seeds replay what they found.
    pub volume_admin: bool,
    /// Whether snapshot administration also sets `snap sched` schedules and
    /// takes scheduled snapshots (rotating their names), with crashes, and
    /// the end compares every volume's snapshot names and schedule with the
    /// model. Off, every seed runs as it did before schedules existed.
    pub snap_sched: bool,
    /// Whether each volume also gets a thin LUN (`-o noreserve`) larger
    /// than the space left for it, and new LUNs are thin half the time, so
    /// that writes fill volumes and some are refused for want of space
    /// (which a write to a space-reserved LUN never is). Off, every seed
    /// runs as it did before thin LUNs existed.
    pub thin: bool,
    /// Whether the node has a Flash Cache (of 16 to 511 blocks, drawn from
    /// a stream of its own), with faults of its device, and every copy it
    /// serves is held against its home on disk. Off, every seed runs as it
    /// did before the Flash Cache existed. Not with `single_filer`.
    pub flash_cache: bool,
    /// Whether every aggregate the node starts with is hybrid (Flash Pool):
    /// an SSD RAID group of 3 to 6 disks of 8 to 47 blocks, drawn from a
    /// stream of its own, small enough that the write cache fills and the
    /// eviction scanner destages. The SSD disks take faults like the others.
    /// Off, every seed runs as it did before hybrid aggregates existed.
    pub hybrid: bool,
}

impl Default for CheckConfig {
    /// CI's run of one seed: 1000 operations with faults, on bytes.
    fn default() -> CheckConfig {
        CheckConfig {
            seed: 1,
            ops: 1000,
            faults: true,
            #[cfg(feature = "sabotage")]
            sabotage: None,
            payload: PayloadKind::Bytes,
            record_io: false,
            bound_requests: false,
            single_filer: false,
            volume_admin: false,
            snap_sched: false,
            thin: false,
            flash_cache: false,
            hybrid: false,
        }
    }
}

/// What a passing run did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CheckReport {
    /// Host operations completed.
    pub ops: u64,
    /// Reads whose data was compared with the model.
    pub reads_checked: u64,
    /// Of those, reads of snapshots.
    pub snapshot_reads_checked: u64,
    /// Snapshots at the end.
    pub snapshots: usize,
    /// Crashes survived.
    pub crashes: u64,
    /// Requests `submit` refused because the engine held its most.
    pub busy_refusals: u64,
    /// Of those, restarts after the filer went offline (the host refused
    /// its writes).
    pub offline_recoveries: u64,
    /// Faults injected, by kind.
    pub faults: BTreeMap<&'static str, u64>,
    /// CPs committed by the last filer instance.
    pub cps: u64,
    /// Indirect blocks read because the cache had evicted them, over every
    /// filer instance.
    pub indirect_reads: u64,
    /// Stripes whose parity was verified at the end.
    pub stripes_verified: usize,
    /// Scrubs run to the end with every disk in service (one or none).
    pub scrubs: u64,
    /// Blocks those scrubs rewrote: data reconstructed and parity recomputed.
    pub scrub_rewrites: u64,
    /// Volumes at the end.
    pub volumes: usize,
    /// LUNs at the end.
    pub luns: usize,
    /// Aggregates at the end.
    pub aggregates: usize,
    /// Aggregate administration carried out, by kind.
    pub administration: BTreeMap<&'static str, u64>,
    /// Writes to thin LUNs refused because their volume was full.
    pub thin_refusals: u64,
    /// The last node's Flash Cache counters, if it had one.
    pub flash: Option<FlashCounters>,
    /// Flash Pool's counters at the end, summed over the hybrid aggregates.
    pub hya: Option<HyaCounters>,
    /// The shape of every I/O the filer issued after formatting, in order, if
    /// the config asked for it.
    pub io: Vec<IoShape>,
}

/// Why a run failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckFailure {
    /// The seed, to replay.
    pub seed: u64,
    /// What went wrong.
    pub reason: String,
}

impl core::fmt::Display for CheckFailure {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "seed {}: {}", self.seed, self.reason)
    }
}

/// A LUN as the model has it.
#[derive(Clone, Debug)]
struct LunModel<P: SimPayload> {
    /// Whether the LUN is thin: a write to it may be refused for want of
    /// space.
    thin: bool,
    /// Each block's content.
    blocks: Vec<P::Content>,
    /// Per byte, whether it is certain. Uncertainty comes only from crashes,
    /// so only a byte filer's model has any, and per byte is exact for bytes.
    certain: Vec<bool>,
}

impl<P: SimPayload> LunModel<P> {
    /// A LUN never written, of `size` bytes (a multiple of the block size,
    /// as the filer requires).
    fn new(size: u64, thin: bool) -> LunModel<P> {
        LunModel {
            thin,
            blocks: vec![P::zero(); size as usize / BLOCK_SIZE],
            certain: vec![true; size as usize],
        }
    }

    fn size(&self) -> u64 {
        self.certain.len() as u64
    }

    /// Grows the LUN with blocks never written, or cuts it short.
    fn resize(&mut self, size: u64) {
        self.blocks.resize(size as usize / BLOCK_SIZE, P::zero());
        self.certain.resize(size as usize, true);
    }

    /// Writes `length` bytes at `offset`, `data` or zeros (a trim), block piece
    /// by block piece as the filer does; they are certain now.
    fn write(&mut self, offset: u64, data: Option<&[u8]>, length: u64) {
        for (block, at, range) in pieces(offset, length) {
            let piece = data.map(|d| &d[range.clone()]);
            P::write(&mut self.blocks[block], at, piece, range.len());
        }
        self.certain[span(offset, length)].fill(true);
    }

    /// The `length` bytes at `offset`, and which of them are certain.
    fn read(&self, offset: u64, length: u64) -> (Vec<u8>, Vec<bool>) {
        let mut bytes = vec![0; length as usize];
        for (block, at, range) in pieces(offset, length) {
            P::read(&self.blocks[block], at, &mut bytes[range]);
        }
        (bytes, self.certain[span(offset, length)].to_vec())
    }

    fn uncertain(&mut self, offset: u64, length: u64) {
        self.certain[span(offset, length)].fill(false);
    }

    /// Where `other` (of the same size) is uncertain or differs, this LUN may
    /// hold either, so is uncertain.
    fn doubt(&mut self, other: &LunModel<P>) {
        let ((mine, _), (theirs, _)) = (self.read(0, self.size()), other.read(0, other.size()));
        for (n, certain) in self.certain.iter_mut().enumerate() {
            *certain &= other.certain[n] && mine[n] == theirs[n];
        }
    }
}

/// The bytes `offset..offset + length`, as indices.
fn span(offset: u64, length: u64) -> Range<usize> {
    offset as usize..(offset + length) as usize
}

/// The pieces of `length` bytes at `offset` within blocks: each block's
/// number, where in it the piece starts, and its range within the bytes.
fn pieces(offset: u64, length: u64) -> impl Iterator<Item = (usize, usize, Range<usize>)> {
    let (start, end) = (offset as usize, (offset + length) as usize);
    (start / BLOCK_SIZE..end.div_ceil(BLOCK_SIZE)).map(move |block| {
        let from = (block * BLOCK_SIZE).max(start);
        let to = ((block + 1) * BLOCK_SIZE).min(end);
        (block, from % BLOCK_SIZE, from - start..to - start)
    })
}

/// A snapshot's LUNs, as the model had them when it was taken.
type SnapshotModel<P> = BTreeMap<LunId, LunModel<P>>;

/// A change to the set of volumes or the set or size of LUNs.
#[derive(Clone, Debug)]
enum AdminOp {
    CreateVolume {
        aggregate: AggrId,
        name: String,
    },
    Create {
        volume: VolumeId,
        name: String,
        size: u64,
        thin: bool,
    },
    Resize {
        lun: LunId,
        size: u64,
    },
    Destroy {
        lun: LunId,
    },
    /// A volume option (cache policy, read_realloc): nothing the model sees
    /// changes; exercises logging, persistence and read reallocation.
    CachePolicy,
    /// Rewrites a LUN in place of itself; the model must not notice.
    Reallocate,
    SnapCreate {
        volume: VolumeId,
        name: String,
    },
    SnapDelete {
        volume: VolumeId,
        name: String,
    },
    SnapRestore {
        volume: VolumeId,
        name: String,
        lun: Option<LunId>,
    },
    /// `snap sched`: the model keeps each volume's schedule.
    SnapSched {
        volume: VolumeId,
        schedule: SnapSchedule,
    },
    /// A scheduled snapshot, rotating its kind's names. `newest_cp` is the
    /// CP of the volume's newest snapshot when it was asked for: after a
    /// crash, a `kind.0` taken by a later CP says it happened.
    SnapScheduled {
        volume: VolumeId,
        kind: SnapKind,
        keep: u8,
        newest_cp: Option<CpCount>,
    },
}

#[derive(Clone, Debug)]
enum InFlight {
    Admin(AdminOp),
    Write {
        lun: LunId,
        offset: u64,
        data: Vec<u8>,
    },
    Trim {
        lun: LunId,
        offset: u64,
        length: u64,
    },
    Read {
        lun: LunId,
        offset: u64,
        length: u64,
        expected: Vec<u8>,
        certain: Vec<bool>,
    },
    SnapRead {
        lun: LunId,
        snapshot: String,
        offset: u64,
        expected: Vec<u8>,
        certain: Vec<bool>,
    },
    Flush,
}

impl InFlight {
    /// A one-line description, without the data.
    fn describe(&self) -> String {
        match self {
            InFlight::Write { lun, offset, data } => format!(
                "write of {} bytes at {offset} of LUN {}",
                data.len(),
                lun.file.0
            ),
            InFlight::Trim {
                lun,
                offset,
                length,
            } => format!("trim of {length} bytes at {offset} of LUN {}", lun.file.0),
            InFlight::Read {
                lun,
                offset,
                length,
                ..
            } => format!("read of {length} bytes at {offset} of LUN {}", lun.file.0),
            InFlight::SnapRead {
                lun,
                snapshot,
                offset,
                expected,
                ..
            } => format!(
                "read of {} bytes at {offset} of LUN {} in snapshot {snapshot}",
                expected.len(),
                lun.file.0
            ),
            InFlight::Flush => "flush".into(),
            InFlight::Admin(op) => format!("{op:?}"),
        }
    }

    fn range(&self) -> Option<(LunId, u64, u64)> {
        match self {
            InFlight::Write { lun, offset, data } => Some((*lun, *offset, data.len() as u64)),
            InFlight::Trim {
                lun,
                offset,
                length,
            }
            | InFlight::Read {
                lun,
                offset,
                length,
                ..
            } => Some((*lun, *offset, *length)),
            // A snapshot never changes: its reads overlap nothing.
            InFlight::SnapRead { .. } | InFlight::Flush | InFlight::Admin(_) => None,
        }
    }
}

struct Harness<P: SimPayload> {
    world: World<P>,
    volumes: Vec<wafer_core::units::VolumeId>,
    next_name: u64,
    admin_due: bool,
    /// Whether the engine is a node, which the harness administers.
    node: bool,
    /// Aggregate administration is due once nothing is in flight.
    aggr_admin_due: bool,
    rng: Rng,
    /// Draws for volume administration only, so that a seed's other draws
    /// stay what they were before volumes could be destroyed, up to the
    /// first time one is.
    volume_rng: Rng,
    /// Whether volumes are administered ([`CheckConfig::volume_admin`]).
    volume_admin: bool,
    /// Draws for schedules and scheduled snapshots only
    /// ([`CheckConfig::snap_sched`]), so the other draws stay as they were
    /// up to the first of them.
    schedule_rng: Rng,
    snap_sched: bool,
    /// Draws for thin LUNs only ([`CheckConfig::thin`]).
    thin_rng: Rng,
    thin: bool,
    /// Each volume's `snap sched`, where one was set.
    schedules: BTreeMap<VolumeId, SnapSchedule>,
    luns: BTreeMap<LunId, LunModel<P>>,
    snapshots: BTreeMap<(VolumeId, String), SnapshotModel<P>>,
    in_flight: BTreeMap<RequestId, InFlight>,
    /// When a request last completed, or the world was last idle: the
    /// stall detector measures from here.
    last_progress: wafer_core::units::Instant,
    report: CheckReport,
}

/// Virtual time a request may stay unanswered while the world runs before
/// the check calls the filer stalled: far beyond any CP, rebuild batch or
/// retry the engine takes (seconds), far short of a hang's forever.
const STALL_AFTER: Duration = Duration::from_secs(600);

/// Mixed into a seed for the harness's volume-administration draws.
const VOLUME_DRAWS: u64 = 0x766f_6c75_6d65;
/// Mixed into a seed for the harness's schedule draws.
const SCHEDULE_DRAWS: u64 = 0x7363_6865_6475;
/// Mixed into a seed for the harness's thin-LUN draws.
const THIN_DRAWS: u64 = 0x7468_696e;
/// Mixed into a seed for the Flash Cache's draws.
const FLASH_DRAWS: u64 = 0x0066_6c61_7368;
/// The stream hybrid aggregates' SSD groups are drawn from.
const HYBRID_DRAWS: u64 = 0x6879_6272_6964;

/// How many times the harness says `aggr online` before it gives up on an
/// aggregate that node restarts keep finding recorded offline.
const BRING_ONLINE_ATTEMPTS: u32 = 8;

/// Runs one seeded check.
pub fn run(config: &CheckConfig) -> Result<CheckReport, CheckFailure> {
    match config.payload {
        PayloadKind::Bytes => run_on::<Bytes>(config),
        PayloadKind::Stamps => run_on::<Stamps>(config),
    }
    .map_err(|reason| CheckFailure {
        seed: config.seed,
        reason,
    })
}

fn run_on<P: SimPayload>(config: &CheckConfig) -> Result<CheckReport, String> {
    let mut rng = Rng::seeded(config.seed);
    let mut hybrid_rng = Rng::seeded(config.seed ^ HYBRID_DRAWS);
    let mut hybrid = |layout: Layout| match config.hybrid {
        true => with_ssd_group(&layout, &mut hybrid_rng),
        false => layout,
    };
    let layout = random_layout(&mut rng);
    let options = Options {
        cache_blocks: 64 + rng.below(512) as usize,
        nvlog_half_bytes: 64 * 1024 + rng.below(512 * 1024),
        cp_interval: Duration::from_millis(200 + rng.below(2000)),
        dirty_high_water: 32 + rng.below(256) as usize,
        // Small windows, so that every rebuild walks its trees many times.
        rebuild_identities_per_walk: 16,
        max_requests: max_requests(config),
        flash_cache: flash_cache(config),
        #[cfg(feature = "sabotage")]
        sabotage: config.sabotage,
    };
    let mut world = match config.single_filer {
        true => World::<P>::format(hybrid(layout), options, rng.next_u64()),
        false => {
            let aggregates: Vec<(String, Layout)> = (node_layouts(config.seed, layout).into_iter())
                .enumerate()
                .map(|(n, layout)| (format!("aggr{n}"), hybrid(layout)))
                .collect();
            let named: Vec<(&str, Layout)> = (aggregates.iter())
                .map(|(name, layout)| (name.as_str(), layout.clone()))
                .collect();
            World::<P>::format_node(&named, options, rng.next_u64())
        }
    };
    if config.record_io {
        world.record_io();
    }
    let mut harness = Harness {
        world,
        volumes: Vec::new(),
        next_name: 0,
        admin_due: false,
        node: !config.single_filer,
        aggr_admin_due: false,
        rng,
        volume_rng: Rng::seeded(config.seed ^ VOLUME_DRAWS),
        volume_admin: config.volume_admin,
        schedule_rng: Rng::seeded(config.seed ^ SCHEDULE_DRAWS),
        snap_sched: config.snap_sched,
        thin_rng: Rng::seeded(config.seed ^ THIN_DRAWS),
        thin: config.thin,
        schedules: BTreeMap::new(),
        luns: BTreeMap::new(),
        snapshots: BTreeMap::new(),
        in_flight: BTreeMap::new(),
        last_progress: wafer_core::units::Instant(0),
        report: CheckReport::default(),
    };
    harness.run(config)?;
    Ok(harness.report)
}

/// With `flash_cache`, the node's Flash Cache: 16 to 511 blocks, low-priority
/// data inserted half the time. A stream of its own: the seed's other draws
/// stay as they were.
fn flash_cache(config: &CheckConfig) -> Option<FlashCacheOptions> {
    let mut rng = Rng::seeded(config.seed ^ FLASH_DRAWS);
    (config.flash_cache && !config.single_filer).then(|| FlashCacheOptions {
        blocks: 16 + rng.below(496),
        normal_data_blocks: true,
        lopri_blocks: rng.chance(1, 2),
    })
}

/// With `bound_requests`, the engine holds 1 to 8 requests, below the
/// workload's eight in flight, so that `submit` refuses some (`Busy::Full`).
/// A stream of its own: the seed's other draws stay as they were.
fn max_requests(config: &CheckConfig) -> usize {
    let mut rng = Rng::seeded(config.seed ^ 0x6d61_785f_7265_7173);
    match config.bound_requests {
        true => 1 + rng.below(8) as usize,
        false => Options::default().max_requests,
    }
}

/// The aggregates a node seed starts with: 1 to 3, the first of `first`,
/// the others drawn from a stream of their own (the seed's other draws stay
/// as a filer alone has them).
fn node_layouts(seed: u64, first: Layout) -> Vec<Layout> {
    let mut rng = Rng::seeded(seed ^ 0x6e6f_6465_5f61_6767);
    let more = rng.below(3);
    let mut layouts = vec![first];
    layouts.extend((0..more).map(|_| random_layout(&mut rng)));
    layouts
}

/// An aggregate of one or two small RAID-DP groups (sometimes a RAID-4 one)
/// and a spare.
fn random_layout(rng: &mut Rng) -> Layout {
    let groups = 1 + rng.below(2) as usize;
    let blocks_per_disk = 4096 + rng.below(4096);
    let geometries = (0..groups)
        .map(|n| {
            let raid4 = n > 0 && rng.chance(1, 3);
            let (raid_type, size) = match raid4 {
                true => (RaidType::Raid4, 3 + rng.below(4) as u16),
                false => (RaidType::RaidDp, 4 + rng.below(6) as u16),
            };
            RaidGroupGeometry::new(raid_type, size, blocks_per_disk).expect("a valid small group")
        })
        .collect();
    Layout::new(geometries, 1).expect("a valid layout")
}

impl<P: SimPayload> Harness<P> {
    /// Flash Pool's counters summed over the hybrid aggregates, if any.
    fn hya_counters(&self) -> Option<HyaCounters> {
        let statuses: Vec<_> = (self.world.aggregate_ids().into_iter())
            .filter_map(|id| self.world.filer_of(id)?.flash_pool_status())
            .collect();
        (!statuses.is_empty()).then(|| {
            let mut sum = HyaCounters::default();
            statuses.iter().for_each(|s| sum.add(&s.counters));
            sum
        })
    }

    fn run(&mut self, config: &CheckConfig) -> Result<(), String> {
        self.wait_online()?;
        self.setup()?;
        let safety_ops = config.ops * 7 / 10;
        if config.faults {
            self.world.faults = FaultRates {
                lost_write: 300,
                misdirected_write: 200,
                bit_rot: 1500,
                latent_error: 1500,
                flash: 10_000,
            };
        }
        while self.report.ops < safety_ops {
            if config.faults {
                self.maybe_fault()?;
            }
            self.workload_step()?;
        }
        self.world.faults = FaultRates::NONE;
        self.world.accept_writes();
        while self.report.ops < config.ops {
            self.workload_step()?;
        }
        self.settle()?;
        self.verify_everything()?;
        self.report.faults = self.world.injected.clone();
        self.report.cps = self
            .filers()
            .map(|f| f.counters().cps.values().sum::<u64>())
            .sum();
        self.report.indirect_reads += self.indirect_reads();
        self.report.io = self.world.io_log().to_vec();
        Ok(())
    }

    /// Every aggregate's filer.
    fn filers(&self) -> impl Iterator<Item = &wafer_core::Filer<P>> {
        (self.world.aggregate_ids().into_iter()).filter_map(|id| self.world.filer_of(id))
    }

    /// Indirect blocks read on cache misses by the filers now running.
    fn indirect_reads(&self) -> u64 {
        self.filers().map(|f| f.counters().indirect_reads).sum()
    }

    /// Runs until every aggregate serves; one the host's refusals took
    /// offline while another mounted (brought back, or created) is
    /// recovered as anywhere else.
    fn wait_online(&mut self) -> Result<(), String> {
        match self.world.wait_online() {
            Err(_) if self.world.offline_reason().is_some() => self.recover_from_offline(),
            other => other,
        }
    }

    /// On each aggregate one volume with two or three LUNs, made durable
    /// before the workload.
    fn setup(&mut self) -> Result<(), String> {
        for aggregate in self.world.aggregate_ids() {
            self.volume_with_luns(aggregate)?;
        }
        self.admin(HostRequest::Flush)?;
        Ok(())
    }

    /// A volume of 20 MiB on `aggregate` with two or three LUNs.
    fn volume_with_luns(&mut self, aggregate: AggrId) -> Result<(), String> {
        let create = HostRequest::Change(Change::CreateVolume {
            name: format!("vol{}", aggregate.0),
            size_bytes: 20 << 20,
        });
        let volume = match self.admin_to(Some(aggregate), create)? {
            ReplyData::Volume(v) => v,
            other => return Err(format!("create volume replied {other:?}")),
        };
        self.volumes.push(volume);
        let luns = 2 + self.rng.below(2);
        for n in 0..luns {
            let size = (256 + self.rng.below(1024)) * 4096;
            let lun = self.create_lun(volume, &format!("setup{n}"), size, false)?;
            self.luns.insert(lun, LunModel::new(size, false));
        }
        if self.thin {
            self.thin_lun_filling(aggregate, volume)?;
        }
        Ok(())
    }

    /// A thin LUN of 8 to 32 MiB on `volume`, and a space-reserved one
    /// that leaves 16 to 256 blocks of the volume for the thin one to fill.
    fn thin_lun_filling(&mut self, aggregate: AggrId, volume: VolumeId) -> Result<(), String> {
        let thin_size = (8 + self.thin_rng.below(25)) << 20;
        let lun = self.create_lun(volume, "thin", thin_size, true)?;
        self.luns.insert(lun, LunModel::new(thin_size, true));
        let (_, local) = split_volume(volume);
        let available = (self.world.filer_of(aggregate))
            .and_then(|f| f.volume_space(local))
            .map_or(0, |s| s.available_bytes);
        let left = (16 + self.thin_rng.below(241)) * BLOCK_SIZE as u64;
        if available > left {
            let ballast = available - left;
            let lun = self.create_lun(volume, "ballast", ballast, false)?;
            self.luns.insert(lun, LunModel::new(ballast, false));
        }
        Ok(())
    }

    /// Creates a LUN (thin or space-reserved) and waits for it.
    fn create_lun(
        &mut self,
        volume: VolumeId,
        name: &str,
        size_bytes: u64,
        thin: bool,
    ) -> Result<LunId, String> {
        let request = HostRequest::Change(Change::CreateLun {
            volume,
            name: name.to_string(),
            size_bytes,
            attributes: attributes(thin),
        });
        match self.admin(request)? {
            ReplyData::Lun(lun) => Ok(lun),
            other => Err(format!("create LUN replied {other:?}")),
        }
    }

    /// Submits a request and runs until its reply (no crash may intervene).
    fn admin(&mut self, request: HostRequest) -> Result<ReplyData, String> {
        self.admin_to(None, request)
    }

    /// [`Harness::admin`], to `aggregate` (how a volume is created there).
    fn admin_to(
        &mut self,
        aggregate: Option<AggrId>,
        request: HostRequest,
    ) -> Result<ReplyData, String> {
        let id = self
            .world
            .submit(aggregate, request.clone())
            .map_err(|e| e.to_string())?;
        let submitted = self.world.now();
        loop {
            if let Some(result) = self.world.take_reply(id) {
                return result.map_err(|e| format!("{} failed: {e}", describe(&request)));
            }
            if !self.world.step() {
                return Err(format!(
                    "the filer stalled: {} unanswered with no I/O in flight and no timer set",
                    describe(&request)
                ));
            }
            if self.world.now() - submitted > STALL_AFTER {
                return Err(format!(
                    "the filer stalled: {} unanswered after {} s of virtual time",
                    describe(&request),
                    STALL_AFTER.0 / 1_000_000_000
                ));
            }
        }
    }

    /// Runs the world until nothing is in flight; fails if the filer keeps
    /// issuing I/O for longer than [`STALL_AFTER`] of virtual time.
    fn quiesce(&mut self) -> Result<(), String> {
        let from = self.world.now();
        while self.world.step() {
            if self.world.now() - from > STALL_AFTER {
                return Err(format!(
                    "the filer never went idle: I/O went on for {} s of virtual time",
                    STALL_AFTER.0 / 1_000_000_000
                ));
            }
        }
        Ok(())
    }

    fn maybe_fault(&mut self) -> Result<(), String> {
        if self.rng.chance(1, 400) {
            self.crash()?;
        }
        if self.rng.chance(1, 1500) {
            let aggregate = self.random_aggregate();
            let disks = self.world.layout(aggregate).disk_count();
            let disk = DiskId(self.rng.below(u64::from(disks)) as u32);
            self.world.kill_disk(aggregate, disk);
        }
        // Drawn only where it can happen, so that a stamp seed's faults stay
        // what they were before host refusals existed.
        if P::remountable(&mut self.world).is_some() && self.rng.chance(1, 2000) {
            let aggregate = self.random_aggregate();
            let disks = self.disks_the_host_refuses(aggregate);
            self.world.refuse_writes(aggregate, disks);
        }
        // Drawn only on a node, so that a filer alone draws as it always did.
        self.aggr_admin_due = self.aggr_admin_due || (self.node && self.rng.chance(1, 300));
        Ok(())
    }

    /// One of the aggregates; a lone aggregate draws nothing.
    fn random_aggregate(&mut self) -> AggrId {
        let ids = self.world.aggregate_ids();
        match ids.len() {
            1 => ids[0],
            n => ids[self.rng.below(n as u64) as usize],
        }
    }

    /// Half the time every disk of `aggregate` (the host's file system is
    /// full), else some disks of one RAID group, as many as it has or fewer
    /// (disk files made immutable): often more than the group survives losing.
    fn disks_the_host_refuses(&mut self, aggregate: AggrId) -> Vec<DiskId> {
        let layout = self.world.layout(aggregate).clone();
        if self.rng.chance(1, 2) {
            return (0..layout.disk_count()).map(DiskId).collect();
        }
        let group = self.rng.below(layout.groups().len() as u64) as usize;
        let members: Vec<DiskId> = layout.groups()[group]
            .all_disks()
            .iter()
            .map(|d| layout.disk_id(group, d))
            .collect();
        let count = 1 + self.rng.below(members.len() as u64) as usize;
        let first = self.rng.below(members.len() as u64) as usize;
        (0..count)
            .map(|n| members[(first + n) % members.len()])
            .collect()
    }

    /// Aggregate `id`'s state, as the node reports it.
    fn aggregate_state(&self, id: AggrId) -> Option<AggrState> {
        let status = self.world.aggregates().into_iter().find(|s| s.id == id);
        status.map(|s| s.state)
    }

    /// Brings aggregate `id` back online if it is offline, and waits until
    /// it serves. The node restarted while it mounted (another aggregate's
    /// writes refused) finds its disks still recorded offline, the CP that
    /// clears the record not committed (seed 300393): as an operator would,
    /// the harness says `aggr online` again.
    fn bring_back_if_offline(&mut self, id: AggrId) -> Result<(), String> {
        for _ in 0..BRING_ONLINE_ATTEMPTS {
            if self.aggregate_state(id) != Some(AggrState::Offline) {
                return Ok(());
            }
            let Some(world) = P::remountable(&mut self.world) else {
                return Err("a stamp aggregate went offline".into());
            };
            world.online(id).map_err(|e| format!("online: {e}"))?;
            self.wait_online()?;
        }
        Err(format!(
            "aggregate {} stayed offline through {BRING_ONLINE_ATTEMPTS} onlines",
            id.0
        ))
    }

    /// The filer went offline (the host refused its writes): the host is
    /// given room again and the filer mounted anew, as an operator restarts
    /// a server that stopped; what was in flight becomes uncertain.
    fn recover_from_offline(&mut self) -> Result<(), String> {
        self.report.offline_recoveries += 1;
        self.world.accept_writes();
        match P::remountable(&mut self.world) {
            Some(_) => self.crash(),
            None => Err(format!(
                "an aggregate went offline and a stamp aggregate cannot mount again: {}",
                self.world.offline_reason().unwrap_or_default()
            )),
        }
    }

    /// Crashes the filer if it can mount again (only a byte filer can; for
    /// any other, nothing happens); in-flight writes become uncertain,
    /// in-flight reads are dropped; then waits for the remount.
    fn crash(&mut self) -> Result<(), String> {
        if P::remountable(&mut self.world).is_none() {
            return Ok(());
        }
        self.report.indirect_reads += self.indirect_reads();
        let Some(world) = P::remountable(&mut self.world) else {
            return Ok(());
        };
        world.crash_and_remount();
        self.report.crashes += 1;
        let mut admin = None;
        for (_, op) in core::mem::take(&mut self.in_flight) {
            match op {
                InFlight::Write { lun, offset, data } => {
                    self.uncertain(lun, offset, data.len() as u64)
                }
                InFlight::Trim {
                    lun,
                    offset,
                    length,
                } => self.uncertain(lun, offset, length),
                InFlight::Admin(op) => admin = Some(op),
                InFlight::Read { .. } | InFlight::SnapRead { .. } | InFlight::Flush => {}
            }
        }
        self.wait_online()?;
        if let Some(op) = admin {
            self.reconcile(op);
        }
        Ok(())
    }

    /// After a crash with a LUN change in flight: the change may or may not
    /// have happened; the filer's own view says which, and the model follows.
    fn reconcile(&mut self, op: AdminOp) {
        match &op {
            AdminOp::SnapCreate { volume, name } | AdminOp::SnapDelete { volume, name } => {
                let (aggregate, local) = split_volume(*volume);
                let filer = self.world.filer_of(aggregate);
                let exists =
                    filer.is_some_and(|f| f.snapshots(local).iter().any(|s| s.name == *name));
                if exists == matches!(op, AdminOp::SnapCreate { .. }) {
                    self.apply_admin(op, None);
                }
                return;
            }
            AdminOp::SnapRestore { volume, name, lun } => {
                return self.reconcile_restore(*volume, name, *lun);
            }
            AdminOp::SnapSched { volume, schedule } => {
                let (aggregate, local) = split_volume(*volume);
                let filer = self.world.filer_of(aggregate);
                let set = filer.and_then(|f| f.volume_settings(local));
                if set.is_some_and(|s| s.snap_schedule == *schedule) {
                    self.apply_admin(op, None);
                }
                return;
            }
            AdminOp::SnapScheduled {
                volume,
                kind,
                newest_cp,
                ..
            } => {
                let (aggregate, local) = split_volume(*volume);
                let filer = self.world.filer_of(aggregate);
                let taken = filer.is_some_and(|f| {
                    (f.snapshots(local).iter())
                        .any(|s| s.name == kind.name(0) && Some(s.cp) > *newest_cp)
                });
                if taken {
                    self.apply_admin(op, None);
                }
                return;
            }
            _ => {}
        }
        if let AdminOp::CreateVolume { aggregate, name } = &op {
            let filer = self.world.filer_of(*aggregate);
            let created = (filer.map(|f| f.volumes()).unwrap_or_default().into_iter())
                .find(|(_, n)| n == name)
                .map(|(v, _)| global_volume(*aggregate, v));
            if let Some(volume) = created {
                self.volumes.push(volume);
            }
            return;
        }
        let volume = match &op {
            AdminOp::Create { volume, .. } => *volume,
            AdminOp::Resize { lun, .. } | AdminOp::Destroy { lun } => lun.volume,
            _ => return,
        };
        let luns = self.luns_of(volume);
        let (happened, created) = match &op {
            AdminOp::Create { name, .. } => {
                let found = luns.iter().find(|(_, n, _)| n == name).map(|(l, _, _)| *l);
                (found.is_some(), found)
            }
            AdminOp::Resize { lun, size } => {
                (luns.iter().any(|(l, _, s)| l == lun && s == size), None)
            }
            AdminOp::Destroy { lun } => (!luns.iter().any(|(l, _, _)| l == lun), None),
            _ => (false, None),
        };
        if happened {
            self.apply_admin(op, created);
        }
    }

    /// After a crash with a restore in flight: the LUNs' sizes as the filer
    /// has them say whether it happened when they differ between the model and
    /// the snapshot; where they do not, each byte on which the two disagree is
    /// uncertain.
    fn reconcile_restore(&mut self, volume: VolumeId, name: &str, lun: Option<LunId>) {
        let snapshot = self.snapshots[&(volume, name.to_string())].clone();
        let affected = |l: &LunId| l.volume == volume && lun.is_none_or(|only| only == *l);
        let shape = |luns: Vec<(LunId, u64)>| -> Vec<(LunId, u64)> {
            luns.into_iter().filter(|(l, _)| affected(l)).collect()
        };
        let filer = shape(
            (self.luns_of(volume).into_iter())
                .map(|(l, _, size)| (l, size))
                .collect(),
        );
        let sizes = |luns: &BTreeMap<LunId, LunModel<P>>| {
            shape(luns.iter().map(|(l, m)| (*l, m.size())).collect())
        };
        let (model, restored) = (sizes(&self.luns), sizes(&snapshot));
        let op = AdminOp::SnapRestore {
            volume,
            name: name.to_string(),
            lun,
        };
        if model != restored {
            if filer == restored {
                self.apply_admin(op, None);
            }
            return;
        }
        for (id, copy) in snapshot.into_iter().filter(|(l, _)| affected(l)) {
            self.luns.get_mut(&id).expect("same shape").doubt(&copy);
        }
    }

    /// A volume's LUNs as its aggregate has them, by node id.
    fn luns_of(&self, volume: VolumeId) -> Vec<(LunId, String, u64)> {
        let (aggregate, local) = split_volume(volume);
        let Some(filer) = self.world.filer_of(aggregate) else {
            return Vec::new();
        };
        (filer.luns(local).into_iter())
            .map(|(lun, name, size)| (LunId { volume, ..lun }, name, size))
            .collect()
    }

    fn uncertain(&mut self, lun: LunId, offset: u64, length: u64) {
        let model = self.luns.get_mut(&lun).expect("modelled LUN");
        model.uncertain(offset, length);
    }

    /// Submits one random request if there is room, then advances the world.
    fn workload_step(&mut self) -> Result<(), String> {
        if self.aggr_admin_due && self.in_flight.is_empty() {
            self.aggr_admin_due = false;
            self.administer()?;
        }
        // Now and then the workload drains and changes volumes or LUNs, alone.
        self.admin_due = self.admin_due || self.luns.is_empty() || self.rng.chance(1, 60);
        let admin_turn = self.admin_due && self.in_flight.is_empty();
        if admin_turn {
            self.admin_due = false;
            let (request, op) = self.random_admin();
            let target = match &op {
                AdminOp::CreateVolume { aggregate, .. } => Some(*aggregate),
                _ => None,
            };
            let id = self
                .world
                .submit(target, request)
                .map_err(|e| format!("submit refused: {e}"))?;
            self.in_flight.insert(id, InFlight::Admin(op));
        } else if !self.admin_due
            && self.in_flight.len() < 8
            && !self
                .in_flight
                .values()
                .any(|op| matches!(op, InFlight::Admin(_)))
        {
            if let Some((request, op)) = self.random_request() {
                match self.world.submit(None, request) {
                    Ok(id) => {
                        self.in_flight.insert(id, op);
                    }
                    // Refused before it was taken: as if never sent.
                    Err(Busy::Full(_)) => self.report.busy_refusals += 1,
                    Err(refused) => return Err(format!("submit refused: {refused}")),
                }
            }
        }
        self.advance()
    }

    /// With nothing in flight, administers the node: takes an aggregate
    /// offline and brings it back (a byte node: bringing one back is a
    /// mount), adds disks to one (a data disk to its last RAID group, or a
    /// new group), or creates one (up to 3) with a volume and LUNs of its
    /// own. Faults go on meanwhile.
    fn administer(&mut self) -> Result<(), String> {
        if self.volume_admin && self.volume_rng.chance(1, 3) {
            let done = self.administer_volume()?;
            *self.report.administration.entry(done).or_default() += 1;
            return Ok(());
        }
        let aggregate = self.random_aggregate();
        let done = match self.rng.below(3) {
            0 if P::remountable(&mut self.world).is_some() => {
                self.world
                    .offline(aggregate)
                    .map_err(|e| format!("offline: {e}"))?;
                if self.world.offline_reason().is_some() {
                    // The host refused its last CP's writes; if its offline
                    // was recorded all the same, it mounts offline.
                    self.recover_from_offline()?;
                    return self.bring_back_if_offline(aggregate);
                }
                let crashed = self.rng.chance(1, 2);
                if crashed {
                    // Offline is recorded on its disks: a crash keeps it.
                    self.crash()?;
                    if self.aggregate_state(aggregate) != Some(AggrState::Offline) {
                        return Err(format!(
                            "aggregate {} was offline before a crash and came back {:?}",
                            aggregate.0,
                            self.aggregate_state(aggregate)
                        ));
                    }
                }
                let state = self.aggregate_state(aggregate);
                if state != Some(AggrState::Offline) {
                    return Err(format!(
                        "aggregate {} taken offline is {state:?}",
                        aggregate.0
                    ));
                }
                self.bring_back_if_offline(aggregate)?;
                match crashed {
                    true => "aggregate offline, crashed and back",
                    false => "aggregate offline and back",
                }
            }
            1 => {
                let layout = self.world.layout(aggregate).clone();
                if layout.groups().len() >= 3 {
                    return Ok(());
                }
                let grown = grown_layout(&layout, &mut self.rng);
                match self.world.add_disks(aggregate, grown) {
                    Ok(()) => "disks added",
                    // A rebuild is running, say: the administrator waits.
                    Err(AggrError::Grow(GrowError::NotNow(_))) => return Ok(()),
                    Err(e) => return Err(format!("add disks: {e}")),
                }
            }
            _ => {
                // Not while the host refuses writes: a node restarted for an
                // aggregate they took offline before the new one's first CP
                // committed would find blank disks where it was created.
                let count = self.world.aggregate_ids().len();
                if count >= 3 || self.world.is_refusing_writes() {
                    return Ok(());
                }
                let layout = random_layout(&mut self.rng);
                let name = format!("aggr{count}");
                let id = self
                    .world
                    .create_aggregate(&name, layout)
                    .map_err(|e| format!("create {name}: {e}"))?;
                self.wait_online()?;
                self.volume_with_luns(id)?;
                "aggregate created"
            }
        };
        *self.report.administration.entry(done).or_default() += 1;
        Ok(())
    }

    /// Takes a volume offline and checks its LUNs refuse I/O and that the
    /// state survives a crash; then brings it back, or destroys it and
    /// checks it is gone after a crash at a random point of the CPs that
    /// free it (the invariants and the leak check at the end find a block
    /// it left allocated). One volume is always kept.
    fn administer_volume(&mut self) -> Result<&'static str, String> {
        if self.volumes.len() < 2 || self.world.is_refusing_writes() {
            return Ok("volume administration skipped");
        }
        let at = self.volume_rng.below(self.volumes.len() as u64) as usize;
        let volume = self.volumes[at];
        if self.volume_rng.chance(1, 3) {
            return self.resize_volume(volume);
        }
        self.admin(volume_online(volume, false))?;
        if self.volume_rng.chance(1, 4) {
            self.crash()?;
        }
        self.check_refused_offline(volume)?;
        if self.volume_rng.chance(1, 2) {
            self.admin(volume_online(volume, true))?;
            return Ok("volume offline and back");
        }
        self.admin(HostRequest::Change(Change::DestroyVolume { volume }))?;
        self.forget_volume(volume);
        let crashed = self.volume_rng.chance(1, 2);
        if crashed {
            for _ in 0..self.volume_rng.below(400) {
                self.world.step();
            }
            self.crash()?;
        }
        let (aggregate, local) = split_volume(volume);
        let filer = self.world.filer_of(aggregate);
        if filer.is_some_and(|f| {
            f.volume_state(local)
                .is_some_and(|s| s != VolumeState::Destroying)
        }) {
            return Err(format!("volume {} destroyed is still there", volume.0));
        }
        Ok(match crashed {
            true => "volume destroyed, crashed",
            false => "volume destroyed",
        })
    }

    /// Grows or shrinks `volume` by up to 16 MiB (a shrink below what it
    /// holds, or a growth the aggregate cannot give, is refused: checked as
    /// a refusal for want of space), and checks the size it reports.
    fn resize_volume(&mut self, volume: VolumeId) -> Result<&'static str, String> {
        let (aggregate, local) = split_volume(volume);
        let size_of = |harness: &Self| {
            let filer = harness.world.filer_of(aggregate)?;
            Some(filer.volume_space(local)?.size_bytes)
        };
        let Some(size) = size_of(self) else {
            return Ok("volume administration skipped");
        };
        let step = (1 + self.volume_rng.below(4096)) * BLOCK_SIZE as u64;
        let size_bytes = match self.volume_rng.chance(1, 2) {
            true => size + step,
            false => size.saturating_sub(step).max(20 << 20),
        };
        let resize = HostRequest::Change(Change::ResizeVolume { volume, size_bytes });
        match self.admin(resize) {
            Ok(_) if size_of(self) == Some(size_bytes) => Ok("volume resized"),
            Ok(_) => Err(format!(
                "volume {} resized to {size_bytes} is {:?}",
                volume.0,
                size_of(self)
            )),
            Err(refused) if refused.contains("not enough space") => Ok("volume resize refused"),
            Err(other) => Err(other),
        }
    }

    /// Every LUN of offline `volume` refuses a read, naming the volume
    /// offline, and so does the volume after any crash.
    fn check_refused_offline(&mut self, volume: VolumeId) -> Result<(), String> {
        let luns: Vec<LunId> = self
            .luns
            .keys()
            .filter(|l| l.volume == volume)
            .copied()
            .collect();
        for lun in luns {
            let read = HostRequest::Read {
                lun,
                offset: 0,
                length: 4096,
            };
            match self.admin(read) {
                Err(refused) if refused.contains("is offline") => {}
                other => return Err(format!("a read of offline volume {}: {other:?}", volume.0)),
            }
        }
        Ok(())
    }

    /// The model lets go of a destroyed volume, its LUNs and snapshots.
    fn forget_volume(&mut self, volume: VolumeId) {
        self.volumes.retain(|v| *v != volume);
        self.luns.retain(|lun, _| lun.volume != volume);
        self.snapshots.retain(|(v, _), _| *v != volume);
        self.schedules.remove(&volume);
    }

    /// Runs the world one step and takes its replies; fails when requests
    /// wait with nothing left to wake them (no I/O in flight, no timer), or
    /// wait past [`STALL_AFTER`] of virtual time while the world runs on.
    fn advance(&mut self) -> Result<(), String> {
        let stepped = self.world.step();
        let replies = self.world.take_replies();
        if !replies.is_empty() || self.in_flight.is_empty() {
            self.last_progress = self.world.now();
        }
        for reply in replies {
            self.complete(reply)?;
        }
        if self.world.offline_reason().is_some() {
            return self.recover_from_offline();
        }
        if self.in_flight.is_empty() {
            if !stepped {
                self.world.idle(Duration::from_millis(100));
            }
            return Ok(());
        }
        let waited = self.world.now() - self.last_progress;
        match (stepped, waited > STALL_AFTER) {
            (true, false) => Ok(()),
            (false, _) => Err(self.stalled("with no I/O in flight and no timer set")),
            (true, true) => Err(self.stalled(&format!(
                "for {} s of virtual time while I/O went on",
                waited.0 / 1_000_000_000
            ))),
        }
    }

    fn stalled(&self, how: &str) -> String {
        let waiting: Vec<String> = self.in_flight.values().map(InFlight::describe).collect();
        format!(
            "the filer stalled: {} requests unanswered {how} ({})",
            waiting.len(),
            waiting.join("; ")
        )
    }

    /// Creates, resizes or destroys a LUN (sizes may exceed what the volume can
    /// reserve: the filer then refuses, which is also checked).
    fn random_admin(&mut self) -> (HostRequest, AdminOp) {
        let size = (1 + self.rng.below(1024)) * 4096;
        let luns: Vec<LunId> = self.luns.keys().copied().collect();
        let volume = self.volumes[self.rng.below(self.volumes.len() as u64) as usize];
        self.next_name += 1;
        let name = format!("w{}", self.next_name);
        let pick = |rng: &mut Rng| luns[rng.below(luns.len() as u64) as usize];
        if !luns.is_empty() && self.rng.chance(1, 3) {
            return self.random_snapshot_op(volume, name);
        }
        match (luns.is_empty(), self.rng.below(6)) {
            (true, _) | (false, 0) => {
                let thin = self.thin && self.thin_rng.chance(1, 2);
                let request = HostRequest::Change(Change::CreateLun {
                    volume,
                    name: name.clone(),
                    size_bytes: size,
                    attributes: attributes(thin),
                });
                let op = AdminOp::Create {
                    volume,
                    name,
                    size,
                    thin,
                };
                (request, op)
            }
            (false, 1) => {
                let lun = pick(&mut self.rng);
                let request = HostRequest::Change(Change::ResizeLun {
                    lun,
                    size_bytes: size,
                });
                (request, AdminOp::Resize { lun, size })
            }
            (false, 2) => {
                let lun = pick(&mut self.rng);
                (
                    HostRequest::Change(Change::DestroyLun { lun }),
                    AdminOp::Destroy { lun },
                )
            }
            (false, 3) => {
                let lun = pick(&mut self.rng);
                (HostRequest::ReallocateStart { lun }, AdminOp::Reallocate)
            }
            (false, 4) => {
                // Often refused for want of space, which is checked too.
                let size_bytes = (20 + self.rng.below(8)) << 20;
                let aggregate = self.random_aggregate();
                let request = HostRequest::Change(Change::CreateVolume {
                    name: name.clone(),
                    size_bytes,
                });
                (request, AdminOp::CreateVolume { aggregate, name })
            }
            (false, _) => {
                use wafer_core::filer::CachePolicy;
                let policy = [CachePolicy::Default, CachePolicy::Keep, CachePolicy::Reuse]
                    [self.rng.below(3) as usize];
                let request = match self.rng.below(3) {
                    0 => HostRequest::Change(Change::SetCachePolicy { volume, policy }),
                    1 => HostRequest::Change(Change::SetReadRealloc {
                        volume,
                        enabled: self.rng.chance(1, 2),
                    }),
                    _ => HostRequest::Change(Change::SetSnapReserve {
                        volume,
                        percent: [0, 5, 20][self.rng.below(3) as usize],
                    }),
                };
                (request, AdminOp::CachePolicy)
            }
        }
    }

    /// Creates, deletes or restores a snapshot of `volume`.
    fn random_snapshot_op(&mut self, volume: VolumeId, name: String) -> (HostRequest, AdminOp) {
        if self.snap_sched && self.schedule_rng.chance(1, 2) {
            return self.random_schedule_op(volume);
        }
        let existing: Vec<String> = self
            .snapshots
            .keys()
            .filter(|(v, _)| *v == volume)
            .map(|(_, n)| n.clone())
            .collect();
        if existing.is_empty() || self.rng.chance(2, 5) {
            let request = HostRequest::Change(Change::CreateSnapshot {
                volume,
                name: name.clone(),
            });
            return (request, AdminOp::SnapCreate { volume, name });
        }
        let name = existing[self.rng.below(existing.len() as u64) as usize].clone();
        if self.rng.chance(1, 2) {
            let request = HostRequest::Change(Change::DeleteSnapshot {
                volume,
                name: name.clone(),
            });
            return (request, AdminOp::SnapDelete { volume, name });
        }
        let held: Vec<LunId> = self.snapshots[&(volume, name.clone())]
            .keys()
            .copied()
            .collect();
        let lun = match held.is_empty() || self.rng.chance(1, 3) {
            true => None,
            false => Some(held[self.rng.below(held.len() as u64) as usize]),
        };
        let request = HostRequest::Change(Change::RestoreSnapshot {
            volume,
            name: name.clone(),
            lun: lun.map(|l| l.file),
        });
        (request, AdminOp::SnapRestore { volume, name, lun })
    }

    /// Sets `volume`'s schedule now and then; otherwise takes a scheduled
    /// snapshot of a random kind keeping 1 to 3, as the schedule would.
    fn random_schedule_op(&mut self, volume: VolumeId) -> (HostRequest, AdminOp) {
        let rng = &mut self.schedule_rng;
        if rng.chance(1, 4) {
            let count = |rng: &mut Rng| rng.below(4).to_string();
            let hours = format!("{}@{},{}", count(rng), rng.below(24), rng.below(24));
            let schedule = SnapSchedule::parse(&count(rng), &count(rng), &hours).expect("in range");
            let request = HostRequest::Change(Change::SetSnapSchedule { volume, schedule });
            return (request, AdminOp::SnapSched { volume, schedule });
        }
        let kind = SnapKind::ALL[rng.below(3) as usize];
        let keep = 1 + rng.below(3) as u8;
        let (aggregate, local) = split_volume(volume);
        let newest_cp = (self.world.filer_of(aggregate))
            .and_then(|f| f.snapshots(local).iter().map(|s| s.cp).max());
        let request = HostRequest::Change(Change::ScheduledSnapshot { volume, kind, keep });
        let op = AdminOp::SnapScheduled {
            volume,
            kind,
            keep,
            newest_cp,
        };
        (request, op)
    }

    /// The model's rotation for a scheduled snapshot of `kind` keeping
    /// `keep`: the oldest go, the others move one name up, `kind.0` holds
    /// the volume's LUNs as they are.
    fn rotate_snapshots(&mut self, volume: VolumeId, kind: SnapKind, keep: u8) {
        for n in keep - 1..=u8::MAX {
            self.snapshots.remove(&(volume, kind.name(n)));
        }
        for n in (0..keep - 1).rev() {
            if let Some(held) = self.snapshots.remove(&(volume, kind.name(n))) {
                self.snapshots.insert((volume, kind.name(n + 1)), held);
            }
        }
        let copy = self.volume_copy(volume);
        self.snapshots.insert((volume, kind.name(0)), copy);
        *self
            .report
            .administration
            .entry("scheduled snapshot")
            .or_default() += 1;
    }

    /// The model's LUNs of `volume`, as a snapshot holds them.
    fn volume_copy(&self, volume: VolumeId) -> SnapshotModel<P> {
        self.luns
            .iter()
            .filter(|(l, _)| l.volume == volume)
            .map(|(l, m)| (*l, m.clone()))
            .collect()
    }

    /// Every volume's snapshot names and schedule, as the filer has them,
    /// are the model's.
    fn check_snapshot_names(&self) -> Result<(), String> {
        for &volume in &self.volumes {
            let (aggregate, local) = split_volume(volume);
            let Some(filer) = self.world.filer_of(aggregate) else {
                continue;
            };
            let names: BTreeSet<String> =
                filer.snapshots(local).into_iter().map(|s| s.name).collect();
            let model: BTreeSet<String> = (self.snapshots.keys())
                .filter(|(v, _)| *v == volume)
                .map(|(_, n)| n.clone())
                .collect();
            if names != model {
                return Err(format!(
                    "volume {} has snapshots {names:?}, the model {model:?}",
                    volume.0
                ));
            }
            let schedule = filer.volume_settings(local).map(|s| s.snap_schedule);
            let modelled = self.schedules.get(&volume).copied().unwrap_or_default();
            if schedule != Some(modelled) {
                return Err(format!(
                    "volume {} has snap sched {schedule:?}, the model {modelled}",
                    volume.0
                ));
            }
        }
        Ok(())
    }

    /// Makes the model follow a LUN change that happened.
    fn apply_admin(&mut self, op: AdminOp, created: Option<LunId>) {
        match op {
            AdminOp::Create { size, thin, .. } => {
                let lun = created.expect("a created LUN has an id");
                self.luns.insert(lun, LunModel::new(size, thin));
            }
            AdminOp::Resize { lun, size } => {
                self.luns.get_mut(&lun).expect("modelled").resize(size);
            }
            AdminOp::Destroy { lun } => {
                self.luns.remove(&lun);
            }
            AdminOp::SnapCreate { volume, name } => {
                let copy = self.volume_copy(volume);
                self.snapshots.insert((volume, name), copy);
            }
            AdminOp::SnapSched { volume, schedule } => {
                self.schedules.insert(volume, schedule);
            }
            AdminOp::SnapScheduled {
                volume, kind, keep, ..
            } => self.rotate_snapshots(volume, kind, keep),
            AdminOp::SnapDelete { volume, name } => {
                self.snapshots.remove(&(volume, name));
            }
            AdminOp::SnapRestore { volume, name, lun } => {
                let snapshot = &self.snapshots[&(volume, name)];
                if lun.is_none() {
                    self.luns
                        .retain(|l, _| l.volume != volume || snapshot.contains_key(l));
                }
                for (id, copy) in snapshot {
                    if lun.is_none_or(|only| only == *id) {
                        self.luns.insert(*id, copy.clone());
                    }
                }
            }
            AdminOp::CachePolicy | AdminOp::Reallocate | AdminOp::CreateVolume { .. } => {}
        }
    }

    fn random_request(&mut self) -> Option<(HostRequest, InFlight)> {
        let luns: Vec<LunId> = self.luns.keys().copied().collect();
        let lun = luns[self.rng.below(luns.len() as u64) as usize];
        let size = self.luns[&lun].size();
        let roll = self.rng.below(100);
        if roll < 3 {
            return Some((HostRequest::Flush, InFlight::Flush));
        }
        if roll < 10 {
            return self.random_snapshot_read(lun);
        }
        let length = match self.rng.below(4) {
            0 => 1 + self.rng.below(512),
            1 => 4096,
            2 => 4096 * (1 + self.rng.below(16)),
            _ => 1 + self.rng.below(40_000),
        }
        .min(size);
        let aligned = self.rng.chance(1, 2);
        let mut offset = self.rng.below(size - length + 1);
        if aligned {
            offset -= offset % 4096;
        }
        if self.overlaps_in_flight(lun, offset, length) {
            return None;
        }
        Some(match roll {
            3..=45 => {
                let mut data = vec![0u8; length as usize];
                self.rng.fill(&mut data);
                (
                    HostRequest::Change(Change::Write {
                        lun,
                        offset,
                        data: data.clone(),
                    }),
                    InFlight::Write { lun, offset, data },
                )
            }
            46..=50 => (
                HostRequest::Change(Change::Trim {
                    lun,
                    offset,
                    length,
                }),
                InFlight::Trim {
                    lun,
                    offset,
                    length,
                },
            ),
            _ => {
                let (expected, certain) = self.luns[&lun].read(offset, length);
                (
                    HostRequest::Read {
                        lun,
                        offset,
                        length,
                    },
                    InFlight::Read {
                        lun,
                        offset,
                        length,
                        expected,
                        certain,
                    },
                )
            }
        })
    }

    /// A read of `lun` in one of the snapshots that hold it, if any does.
    fn random_snapshot_read(&mut self, lun: LunId) -> Option<(HostRequest, InFlight)> {
        let holding: Vec<&(VolumeId, String)> = self
            .snapshots
            .iter()
            .filter(|(_, luns)| luns.contains_key(&lun))
            .map(|(key, _)| key)
            .collect();
        if holding.is_empty() {
            return None;
        }
        let (_, snapshot) = holding[self.rng.below(holding.len() as u64) as usize].clone();
        let model = &self.snapshots[&(lun.volume, snapshot.clone())][&lun];
        let size = model.size();
        let length = (1 + self.rng.below(65_536)).min(size);
        let offset = self.rng.below(size - length + 1);
        let (expected, certain) = model.read(offset, length);
        let request = HostRequest::ReadSnapshot {
            lun,
            snapshot: snapshot.clone(),
            offset,
            length,
        };
        let op = InFlight::SnapRead {
            lun,
            snapshot,
            offset,
            expected,
            certain,
        };
        Some((request, op))
    }

    /// Whether a range overlaps (at 4 KiB granularity) anything in flight.
    fn overlaps_in_flight(&self, lun: LunId, offset: u64, length: u64) -> bool {
        let blocks = |o: u64, l: u64| (o / 4096, (o + l).div_ceil(4096));
        let (first, end) = blocks(offset, length);
        self.in_flight
            .values()
            .filter_map(InFlight::range)
            .any(|(other, o, l)| {
                let (f, e) = blocks(o, l);
                other == lun && first < e && f < end
            })
    }

    fn complete(&mut self, reply: wafer_core::filer::Reply) -> Result<(), String> {
        let Some(op) = self.in_flight.remove(&reply.id) else {
            return Ok(());
        };
        self.report.ops += 1;
        if let InFlight::Admin(admin) = op {
            return match reply.result {
                Ok(ReplyData::Lun(lun)) => {
                    self.apply_admin(admin, Some(lun));
                    Ok(())
                }
                Ok(ReplyData::Volume(volume)) => {
                    self.volumes.push(volume);
                    Ok(())
                }
                Ok(_) => {
                    self.apply_admin(admin, None);
                    Ok(())
                }
                Err(wafer_core::filer::HostError::NoSpace { .. }) => Ok(()),
                Err(e) => Err(format!("{admin:?} failed: {e}")),
            };
        }
        if let (
            InFlight::Write { lun, .. } | InFlight::Trim { lun, .. },
            Err(wafer_core::filer::HostError::NoSpace { .. }),
        ) = (&op, &reply.result)
            && self.luns.get(lun).is_some_and(|model| model.thin)
        {
            // A thin LUN's volume is full: refused, so nothing changed (a
            // trim covering a block in part keeps the rest in a new block).
            self.report.thin_refusals += 1;
            return Ok(());
        }
        let result = reply
            .result
            .map_err(|e| format!("{} failed: {e}", op.describe()))?;
        match op {
            InFlight::Write { lun, offset, data } => {
                let model = self.luns.get_mut(&lun).expect("modelled");
                model.write(offset, Some(&data), data.len() as u64);
            }
            InFlight::Trim {
                lun,
                offset,
                length,
            } => {
                let model = self.luns.get_mut(&lun).expect("modelled");
                model.write(offset, None, length);
            }
            InFlight::Read {
                lun,
                offset,
                expected,
                certain,
                ..
            } => {
                let ReplyData::Data(got) = result else {
                    return Err(format!("read replied {result:?}"));
                };
                compare(lun, offset, &got, &expected, &certain)?;
                self.report.reads_checked += 1;
            }
            InFlight::SnapRead {
                lun,
                snapshot,
                offset,
                expected,
                certain,
            } => {
                let ReplyData::Data(got) = result else {
                    return Err(format!("snapshot read replied {result:?}"));
                };
                compare(lun, offset, &got, &expected, &certain)
                    .map_err(|e| format!("snapshot {snapshot}: {e}"))?;
                self.report.reads_checked += 1;
                self.report.snapshot_reads_checked += 1;
            }
            InFlight::Flush | InFlight::Admin(_) => {}
        }
        Ok(())
    }

    /// Lets everything in flight finish, then makes it durable.
    fn settle(&mut self) -> Result<(), String> {
        while !self.in_flight.is_empty() {
            self.advance()?;
        }
        self.admin(HostRequest::Flush)?;
        self.quiesce()?;
        Ok(())
    }

    /// Reads every LUN whole, checks the invariants and every stripe's parity.
    fn verify_everything(&mut self) -> Result<(), String> {
        let luns: Vec<LunId> = self.luns.keys().copied().collect();
        for lun in luns {
            let size = self.luns[&lun].size();
            let ReplyData::Data(got) = self.admin(HostRequest::Read {
                lun,
                offset: 0,
                length: size,
            })?
            else {
                return Err("a read returned no data".into());
            };
            let (expected, certain) = self.luns[&lun].read(0, size);
            compare(lun, 0, &got, &expected, &certain)?;
            self.report.reads_checked += 1;
        }
        let snapshots: Vec<((VolumeId, String), LunId)> = self
            .snapshots
            .iter()
            .flat_map(|(key, luns)| luns.keys().map(move |l| (key.clone(), *l)))
            .collect();
        for ((_, name), lun) in snapshots {
            let model = &self.snapshots[&(lun.volume, name.clone())][&lun];
            let (size, (expected, certain)) = (model.size(), model.read(0, model.size()));
            let ReplyData::Data(got) = self.admin(HostRequest::ReadSnapshot {
                lun,
                snapshot: name.clone(),
                offset: 0,
                length: size,
            })?
            else {
                return Err("a snapshot read returned no data".into());
            };
            compare(lun, 0, &got, &expected, &certain)
                .map_err(|e| format!("snapshot {name}: {e}"))?;
            self.report.reads_checked += 1;
            self.report.snapshot_reads_checked += 1;
        }
        self.report.snapshots = self.snapshots.len();
        if self.snap_sched {
            self.check_snapshot_names()?;
        }
        self.quiesce()?;
        self.world.pin_indirect()?;
        self.world.check_invariants()?;
        self.report.stripes_verified = self.world.check_parity()?;
        self.world.check_trailers()?;
        self.world.check_flash()?;
        self.scrub_to_the_end()?;
        self.world.check_flash()?;
        self.report.flash = self.world.flash_counters();
        self.report.hya = self.hya_counters();
        self.report.volumes = self.volumes.len();
        self.report.luns = self.luns.len();
        self.report.aggregates = self.world.aggregate_ids().len();
        Ok(())
    }
}

impl<P: SimPayload> Harness<P> {
    /// On each aggregate with every disk in service, a scrub must leave no
    /// damage behind: each block a pointer reaches that the world damaged
    /// behind its back is rewritten (but in the superblock stripes, which
    /// scrubs leave to their copies). A damaged free block may stay as it is,
    /// but its stripe's parity must now agree with it: parity is checked over
    /// every stripe, and every reachable block must carry its own trailer.
    /// (Faults stopped with the safety phase.)
    fn scrub_to_the_end(&mut self) -> Result<(), String> {
        let scrubbed: Vec<AggrId> = (self.world.aggregate_ids().into_iter())
            .filter(|id| self.world.all_disks_in_service(*id))
            .collect();
        if scrubbed.is_empty() {
            return Ok(());
        }
        for &id in &scrubbed {
            let started = self.world.act(id, |filer| filer.start_scrub());
            started
                .ok_or("the final scrub: the aggregate has no filer")?
                .map_err(|e| format!("the final scrub of aggregate {}: {e}", id.0))?;
        }
        self.quiesce()?;
        for id in scrubbed {
            self.check_scrubbed(id)?;
        }
        self.report.stripes_verified = self.world.check_parity()?;
        self.world.check_trailers()
    }

    /// Aggregate `id`'s scrub has finished and left no damage behind where
    /// a pointer reaches.
    fn check_scrubbed(&mut self, id: AggrId) -> Result<(), String> {
        let filer = self.world.filer_of(id).ok_or("no filer after the scrub")?;
        let status = filer.scrub_status().ok_or("no scrub status")?;
        if status.running {
            return Err(format!("the final scrub did not finish: {status:?}"));
        }
        let layout = self.world.layout(id).clone();
        let reachable: BTreeSet<(DiskId, u64)> = filer
            .reachable_blocks()
            .into_iter()
            .filter_map(|(ptr, _)| layout.locate(ptr.pvbn))
            .map(|at| (layout.disk_id(at.group, at.disk), at.dbn.0))
            .collect();
        let superblock_stripe = |disk: DiskId, dbn: u64| match layout.slot(disk) {
            Some(Slot::Member { group, .. }) => group == 0 && dbn < SUPERBLOCK_COPIES,
            _ => true,
        };
        let damaged: Vec<(DiskId, u64)> = self.world.damaged_blocks(id).iter().copied().collect();
        let (left, free): (Vec<_>, Vec<_>) = damaged
            .into_iter()
            .filter(|&(disk, dbn)| !superblock_stripe(disk, dbn))
            .partition(|block| reachable.contains(block));
        if !left.is_empty() {
            return Err(format!(
                "aggregate {}: damage left after a scrub ({status:?}): {left:?}",
                id.0
            ));
        }
        for (disk, dbn) in free {
            self.world.forget_damage(id, disk, dbn);
        }
        self.report.scrubs += 1;
        self.report.scrub_rewrites += status.tally.blocks_repaired + status.tally.parity_rewritten;
        Ok(())
    }
}

/// `layout` with an SSD RAID group after its groups: Flash Pool's write
/// cache, a few dozen blocks per disk so that it fills.
fn with_ssd_group(layout: &Layout, rng: &mut Rng) -> Layout {
    let (raid_type, size) = match rng.chance(1, 3) {
        true => (RaidType::Raid4, 3 + rng.below(3) as u16),
        false => (RaidType::RaidDp, 4 + rng.below(3) as u16),
    };
    let blocks_per_disk = 8 + rng.below(40);
    let group = RaidGroupGeometry::new(raid_type, size, blocks_per_disk).expect("a valid group");
    (layout.with_group(group, Tier::Ssd, layout.spares())).expect("a valid hybrid layout")
}

/// `layout` with a data disk added to its last RAID group (on its tier), or
/// a new HDD group of 4 to 6 RAID-DP disks (or 3 to 5 RAID-4) of the same size.
fn grown_layout(layout: &Layout, rng: &mut Rng) -> Layout {
    let mut tiers = layout.tiers().to_vec();
    let mut groups = layout.groups().to_vec();
    let last = groups.last_mut().expect("a group");
    let blocks_per_disk = last.blocks_per_disk();
    if rng.chance(1, 2) && last.group_size() < 10 {
        let wider = RaidGroupGeometry::new(
            last.raid_type(),
            last.group_size() as u16 + 1,
            blocks_per_disk,
        );
        *last = wider.expect("a valid wider group");
    } else {
        let (raid_type, size) = match rng.chance(1, 3) {
            true => (RaidType::Raid4, 3 + rng.below(3) as u16),
            false => (RaidType::RaidDp, 4 + rng.below(3) as u16),
        };
        groups
            .push(RaidGroupGeometry::new(raid_type, size, blocks_per_disk).expect("a valid group"));
        tiers.push(Tier::Hdd);
    }
    Layout::tiered(groups, tiers, layout.spares()).expect("a valid layout")
}

fn compare(
    lun: LunId,
    offset: u64,
    got: &[u8],
    expected: &[u8],
    certain: &[bool],
) -> Result<(), String> {
    if got.len() != expected.len() {
        return Err(format!(
            "LUN {lun:?} read {} bytes, expected {}",
            got.len(),
            expected.len()
        ));
    }
    match (0..got.len()).find(|&i| certain[i] && got[i] != expected[i]) {
        None => Ok(()),
        Some(i) => Err(format!(
            "LUN {}/{} byte {}: read {:#04x}, but the last acknowledged write left {:#04x}",
            lun.volume.0,
            lun.file.0,
            offset + i as u64,
            got[i],
            expected[i]
        )),
    }
}

/// `vol online` or `vol offline` of `volume`.
fn volume_online(volume: VolumeId, online: bool) -> HostRequest {
    HostRequest::Change(Change::SetVolumeOnline { volume, online })
}

fn describe(request: &HostRequest) -> String {
    match request {
        HostRequest::Read {
            lun,
            offset,
            length,
        } => format!("read of {length} bytes at {offset} of LUN {}", lun.file.0),
        HostRequest::Change(Change::Write { .. }) | HostRequest::Change(Change::Trim { .. }) => {
            "a write".into()
        }
        other => format!("{other:?}"),
    }
}

/// The attributes of a thin or a space-reserved LUN.
fn attributes(thin: bool) -> LunAttributes {
    LunAttributes {
        space_reserved: !thin,
        ..LunAttributes::DEFAULT
    }
}

#[cfg(test)]
mod tests {
    use wafer_core::payload::Payload;

    use super::*;

    #[test]
    fn a_range_splits_into_block_pieces() {
        let split = |offset, length| pieces(offset, length).collect::<Vec<_>>();
        assert_eq!(split(4090, 10), [(0, 4090, 0..6), (1, 0, 6..10)]);
        assert_eq!(split(8192, 4096), [(2, 0, 0..4096)]);
        assert_eq!(
            split(100, 9000),
            [(0, 100, 0..3996), (1, 0, 3996..8092), (2, 0, 8092..9000)]
        );
    }

    #[test]
    fn a_stamp_model_reads_what_its_pieces_wrote() {
        let mut model = LunModel::<Stamps>::new(3 * 4096, false);
        model.write(4090, Some(&[7; 10]), 10);
        let mut block = Stamps::zero();
        Stamps::write(&mut block, 4090, Some(&[7; 6]), 6);
        let mut expected = [0u8; 4];
        Stamps::read(&block, 4092, &mut expected);
        assert_eq!(model.read(4092, 4).0, expected);
        assert_eq!(model.read(8192, 4096), (vec![0; 4096], vec![true; 4096]));
        model.write(4096, None, 4096);
        assert_eq!(model.read(4096, 8), (vec![0; 8], vec![true; 8]));
    }
}
