//! A flash SSD in steady state: a controller in front of channels of dies.
//!
//! The structure follows MQSim and the Microsoft DiskSim extension
//! (device-models.md §2): a command passes the controller, then the flash
//! dies and the channels that connect them, then the host link. Each of these
//! is a resource that serves one thing at a time, in submission order:
//!
//! - **Controller**: a fixed time per command. It is what limits a drive's
//!   random-read rate long before its dies do, so it is set from the rated
//!   IOPS: `1 s / rated IOPS` per command, reads and writes apiece.
//! - **Reads**: each flash page of the request is read on its die (`tR`), then
//!   crosses the die's channel. Logical pages are striped over the dies,
//!   channel first (MQSim's CWDP order), so a random reader spreads evenly
//!   and a sequential one uses every die. Then the data crosses the host link.
//! - **Writes** cross the host link into the drive's power-safe write buffer
//!   and complete there; the buffer drains to whichever die frees first (the
//!   FTL writes anywhere). A full buffer makes writes wait. Each host block
//!   costs its die, in steady state (after preconditioning, as §0 insists):
//!   its channel transfer, `WA` program shares (the block and the valid data
//!   garbage collection moves with it; a page holds several blocks and a
//!   multi-plane program writes a page per plane at once), `WA − 1` read
//!   shares for those moves, and `WA` shares of a block erase. `WA`, the write
//!   amplification, is a drive parameter (§2.6 derives it from the spare area).
//!
//! IOPS therefore rise with queue depth, one request's latency at a time,
//! until the busiest resource saturates. A resource is booked in submission
//! order, so it can sit idle while a later request could use it; with 4 KiB
//! requests the transfers are short against `tR`, and the loss is small.
//!
//! Not modelled: the fresh-out-of-box state, read disturb, program/erase
//! suspend, the DRAM read cache, and wear.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::fmt;

use wafer_core::units::{Duration, Instant};

use crate::params::SsdSpec;
use crate::{
    BLOCK_BYTES, Completion, Device, DeviceRequest, Op, RequestError, Service, block_transfer_ns,
    check_call_order, check_request,
};

/// One SSD type, from `drives.toml`.
#[derive(Clone, Debug, PartialEq)]
pub struct SsdModel {
    name: String,
    description: String,
    capacity_blocks: u64,
    channels: u32,
    dies: u32,
    blocks_per_page: u64,
    controller_read_ns: u64,
    controller_write_ns: u64,
    link_ns_per_block: u64,
    channel_ns_per_block: u64,
    page_read_ns: u64,
    die_write_ns_per_block: u64,
    write_buffer_blocks: usize,
}

impl SsdModel {
    /// The model of a drive whose parameters have passed the checks in
    /// [`super::params`].
    pub fn new(name: &str, spec: &SsdSpec) -> SsdModel {
        let blocks_per_page = u64::from(spec.page_kib) * 1024 / BLOCK_BYTES;
        let channel_ns_per_block = block_transfer_ns(spec.channel_mt_s);
        let per_page = blocks_per_page as f64;
        let planes = f64::from(spec.planes_per_die);
        let amplification = spec.write_amplification;
        let program_share_ns = spec.program_us * 1e3 / (per_page * planes);
        let move_read_share_ns = spec.read_us * 1e3 / per_page;
        let erase_share_ns =
            spec.erase_ms * 1e6 / (f64::from(spec.pages_per_block) * per_page * planes);
        let die_write_ns = channel_ns_per_block as f64
            + amplification * (program_share_ns + erase_share_ns)
            + (amplification - 1.0) * move_read_share_ns;
        SsdModel {
            name: name.to_string(),
            description: spec.model.clone(),
            capacity_blocks: (spec.capacity_gb * 1e9 / BLOCK_BYTES as f64) as u64,
            channels: spec.channels,
            dies: spec.channels * spec.dies_per_channel,
            blocks_per_page,
            controller_read_ns: (1e9 / spec.rated_read_iops).round() as u64,
            controller_write_ns: (1e9 / spec.rated_write_iops).round() as u64,
            link_ns_per_block: block_transfer_ns(spec.interface_mb_s),
            channel_ns_per_block,
            page_read_ns: (spec.read_us * 1e3).round() as u64,
            die_write_ns_per_block: die_write_ns.round() as u64,
            write_buffer_blocks: (u64::from(spec.write_buffer_kib) * 1024 / BLOCK_BYTES) as usize,
        }
    }

    /// The drive's name in `drives.toml`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What the drive is modelled on.
    pub fn description(&self) -> &str {
        &self.description
    }

    /// The rate at which the busiest resource saturates under random 4 KiB
    /// reads: the controller, the dies, the channels or the host link.
    pub fn random_read_iops_limit(&self) -> f64 {
        let die_ns = (self.page_read_ns + self.channel_ns_per_block) as f64 / f64::from(self.dies);
        let channel_ns = self.channel_ns_per_block as f64 / f64::from(self.channels);
        let slowest_ns = [
            self.controller_read_ns as f64,
            die_ns,
            channel_ns,
            self.link_ns_per_block as f64,
        ]
        .into_iter()
        .fold(0.0, f64::max);
        1e9 / slowest_ns
    }

    /// The steady-state random 4 KiB write rate: the controller, the dies
    /// with garbage collection, or the host link, whichever is slowest.
    pub fn random_write_iops_limit(&self) -> f64 {
        let die_ns = self.die_write_ns_per_block as f64 / f64::from(self.dies);
        let slowest_ns = [
            self.controller_write_ns as f64,
            die_ns,
            self.link_ns_per_block as f64,
        ]
        .into_iter()
        .fold(0.0, f64::max);
        1e9 / slowest_ns
    }
}

impl fmt::Display for SsdModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {} channels x {} dies, tR {} us, steady-state write {:.0} us/block/die, \
             limits {:.0} read / {:.0} write IOPS",
            self.description,
            self.channels,
            self.dies / self.channels,
            self.page_read_ns / 1000,
            self.die_write_ns_per_block as f64 / 1e3,
            self.random_read_iops_limit(),
            self.random_write_iops_limit(),
        )
    }
}

/// A modelled SSD.
#[derive(Clone, Debug)]
pub struct Ssd {
    model: SsdModel,
    now_ns: u64,
    controller_free_ns: u64,
    link_free_ns: u64,
    channel_free_ns: Vec<u64>,
    die_free_ns: Vec<u64>,
    /// When each buffered write block will have left the buffer.
    buffer_drains_ns: BinaryHeap<Reverse<u64>>,
    done: BTreeMap<(u64, u64), Completion>,
    arrivals: u64,
}

impl Ssd {
    /// An idle, preconditioned drive of `model` at time 0.
    pub fn new(model: SsdModel) -> Ssd {
        let (channels, dies) = (model.channels as usize, model.dies as usize);
        Ssd {
            model,
            now_ns: 0,
            controller_free_ns: 0,
            link_free_ns: 0,
            channel_free_ns: vec![0; channels],
            die_free_ns: vec![0; dies],
            buffer_drains_ns: BinaryHeap::new(),
            done: BTreeMap::new(),
            arrivals: 0,
        }
    }

    /// The drive type.
    pub fn model(&self) -> &SsdModel {
        &self.model
    }

    /// Books `busy_ns` on the controller from `now_ns`; returns when it ends.
    fn book_controller(&mut self, now_ns: u64, busy_ns: u64) -> u64 {
        self.controller_free_ns = self.controller_free_ns.max(now_ns) + busy_ns;
        self.controller_free_ns
    }

    /// Books the host link for `blocks` from `ready_ns`; returns when it ends.
    fn book_link(&mut self, ready_ns: u64, blocks: u64) -> u64 {
        self.link_free_ns = self.link_free_ns.max(ready_ns) + blocks * self.model.link_ns_per_block;
        self.link_free_ns
    }

    /// Reads: controller, then each page on its die and channel, then the
    /// link. Returns the finishing time and the unavoidable transfer time.
    fn schedule_read(&mut self, now_ns: u64, request: &DeviceRequest) -> (u64, u64) {
        let commanded_ns = self.book_controller(now_ns, self.model.controller_read_ns);
        let per_page = self.model.blocks_per_page;
        let (mut block, end) = (request.block, request.end_block());
        let (mut data_ready_ns, mut longest_page_ns) = (commanded_ns, 0);
        while block < end {
            let page = block / per_page;
            let blocks = (end - block).min(per_page - block % per_page);
            let die = (page % u64::from(self.model.dies)) as usize;
            let channel = die % self.model.channels as usize;
            let sensed_ns = self.die_free_ns[die].max(commanded_ns) + self.model.page_read_ns;
            let moved_ns = self.channel_free_ns[channel].max(sensed_ns)
                + blocks * self.model.channel_ns_per_block;
            self.channel_free_ns[channel] = moved_ns;
            self.die_free_ns[die] = moved_ns;
            data_ready_ns = data_ready_ns.max(moved_ns);
            longest_page_ns = longest_page_ns
                .max(self.model.page_read_ns + blocks * self.model.channel_ns_per_block);
            block += blocks;
        }
        let blocks = u64::from(request.blocks);
        let finished_ns = self.book_link(data_ready_ns, blocks);
        (
            finished_ns,
            longest_page_ns + blocks * self.model.link_ns_per_block,
        )
    }

    /// Writes: controller, link, a place in the write buffer per block; each
    /// block then drains to the die that frees first. Returns the finishing
    /// time and the unavoidable transfer time.
    fn schedule_write(&mut self, now_ns: u64, request: &DeviceRequest) -> (u64, u64) {
        let commanded_ns = self.book_controller(now_ns, self.model.controller_write_ns);
        let blocks = u64::from(request.blocks);
        let received_ns = self.book_link(commanded_ns, blocks);
        let mut finished_ns = received_ns;
        for _ in 0..blocks {
            let buffered_ns = match self.buffer_drains_ns.len() < self.model.write_buffer_blocks {
                true => received_ns,
                false => {
                    let Reverse(drained_ns) =
                        self.buffer_drains_ns.pop().expect("the buffer is full");
                    received_ns.max(drained_ns)
                }
            };
            let die = (0..self.die_free_ns.len())
                .min_by_key(|&d| (self.die_free_ns[d], d))
                .expect("at least one die");
            let written_ns =
                self.die_free_ns[die].max(buffered_ns) + self.model.die_write_ns_per_block;
            self.die_free_ns[die] = written_ns;
            self.buffer_drains_ns.push(Reverse(written_ns));
            finished_ns = finished_ns.max(buffered_ns);
        }
        (finished_ns, blocks * self.model.link_ns_per_block)
    }
}

impl Device for Ssd {
    fn capacity_blocks(&self) -> u64 {
        self.model.capacity_blocks
    }

    fn submit(&mut self, now: Instant, request: DeviceRequest) -> Result<(), RequestError> {
        check_call_order(Instant(self.now_ns), now, self.next_event());
        check_request(&request, self.model.capacity_blocks)?;
        self.now_ns = now.0;
        let (overhead_ns, (finished_ns, transfer_ns)) = match request.op {
            Op::Read => (
                self.model.controller_read_ns,
                self.schedule_read(now.0, &request),
            ),
            Op::Write => (
                self.model.controller_write_ns,
                self.schedule_write(now.0, &request),
            ),
        };
        let service = Service {
            queue: Duration(finished_ns - now.0 - overhead_ns - transfer_ns),
            overhead: Duration(overhead_ns),
            transfer: Duration(transfer_ns),
            ..Service::default()
        };
        let completion = Completion {
            id: request.id,
            op: request.op,
            blocks: request.blocks,
            submitted_at: now,
            finished_at: Instant(finished_ns),
            service,
        };
        self.arrivals += 1;
        self.done.insert((finished_ns, self.arrivals), completion);
        Ok(())
    }

    fn next_event(&self) -> Option<Instant> {
        self.done.keys().next().map(|&(at, _)| Instant(at))
    }

    fn advance(&mut self, now: Instant, completions: &mut Vec<Completion>) {
        assert!(now.0 >= self.now_ns, "device driven backwards in time");
        self.now_ns = now.0;
        while let Some(entry) = self.done.first_entry().filter(|e| e.key().0 <= now.0) {
            completions.push(entry.remove());
        }
    }
}

#[cfg(test)]
mod tests {
    use wafer_rng::Rng;

    use super::*;
    use crate::params::{Catalog, Drive};
    use crate::single_disk::{random_reads, run_closed_loop, summarize};

    fn ssd() -> Ssd {
        match Catalog::builtin()
            .expect("drives.toml parses")
            .get("ssd-200g")
        {
            Some(Drive::Ssd(model)) => Ssd::new(model.clone()),
            other => panic!("ssd-200g is not an SSD: {other:?}"),
        }
    }

    #[test]
    fn random_read_iops_grow_with_queue_depth_then_saturate() {
        let iops: Vec<f64> = [1, 2, 4, 8, 32, 64]
            .into_iter()
            .map(|depth| random_reads(&mut ssd(), depth, 20_000, 2).iops)
            .collect();
        assert!(
            iops.windows(2).take(3).all(|pair| pair[1] > pair[0] * 1.5),
            "{iops:?}"
        );
        let limit = ssd().model().random_read_iops_limit();
        let (deep, deeper) = (iops[4], iops[5]);
        assert!((deeper - deep).abs() < deep * 0.02, "saturated: {iops:?}");
        assert!(
            (deeper - limit).abs() < limit * 0.03,
            "{deeper} against the limit {limit}"
        );
        // The rated 56,000 IOPS of drives.toml is that limit: the controller.
        assert!((limit - 56_000.0).abs() < 1.0);
    }

    #[test]
    fn one_read_costs_controller_flash_channel_and_link() {
        let mut drive = ssd();
        drive
            .submit(
                Instant(0),
                DeviceRequest {
                    id: 1,
                    op: Op::Read,
                    block: 77,
                    blocks: 1,
                },
            )
            .unwrap();
        let mut done = Vec::new();
        drive.advance(Instant(u64::MAX), &mut done);
        // 17.9 µs controller + 75 µs tR + 12.3 µs channel + 6.8 µs link.
        let latency = done[0].latency().0;
        assert!((111_000..113_000).contains(&latency), "{latency} ns");
        assert_eq!(done[0].service.total(), done[0].latency());
    }

    #[test]
    fn steady_state_writes_run_at_the_slowest_resource() {
        let mut drive = ssd();
        let limit = drive.model().random_write_iops_limit();
        let capacity = drive.capacity_blocks();
        let mut rng = Rng::seeded(8);
        // Enough writes to fill the write buffer many times over.
        let completions = run_closed_loop(&mut drive, 32, 40_000, |id| DeviceRequest {
            id,
            op: Op::Write,
            block: rng.below(capacity),
            blocks: 1,
        });
        let report = summarize(32, &completions);
        assert!(
            (report.iops - limit).abs() < limit * 0.03,
            "{} against {limit}",
            report.iops
        );
        assert!(completions.iter().all(|c| c.service.total() == c.latency()));
        assert!(limit < ssd().model().random_read_iops_limit());
    }
}
