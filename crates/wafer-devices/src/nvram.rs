//! NVRAM: battery-backed memory on the controller, where the NVLog lives.
//!
//! An NVLog append is a DMA into the card (and, in an HA pair, across the
//! interconnect into the partner's). The model is the simplest that keeps
//! both costs: transfers share one path of fixed bandwidth, in submission
//! order, and each append completes a fixed latency after its transfer ends.
//! Appends therefore complete in the order issued, as a log needs. Requests
//! are in 4 KiB blocks like every device's; a driver charging a smaller
//! record rounds it up to a block, which overstates its transfer by a few
//! microseconds at most.

use std::collections::VecDeque;
use std::fmt;

use wafer_core::units::{Duration, Instant};

use crate::params::NvramSpec;
use crate::{
    BLOCK_BYTES, Completion, Device, DeviceRequest, RequestError, Service, block_transfer_ns,
    check_call_order, check_request,
};

/// One NVRAM type, from `drives.toml`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NvramModel {
    name: String,
    description: String,
    capacity_blocks: u64,
    latency_ns: u64,
    transfer_ns_per_block: u64,
}

impl NvramModel {
    /// The model of an NVRAM whose parameters have passed the checks in
    /// [`super::params`].
    pub fn new(name: &str, spec: &NvramSpec) -> NvramModel {
        NvramModel {
            name: name.to_string(),
            description: spec.model.clone(),
            capacity_blocks: u64::from(spec.capacity_mib) * (1 << 20) / BLOCK_BYTES,
            latency_ns: (spec.latency_us * 1e3).round() as u64,
            transfer_ns_per_block: block_transfer_ns(spec.bandwidth_mb_s),
        }
    }

    /// The name in `drives.toml`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What it is modelled on.
    pub fn description(&self) -> &str {
        &self.description
    }
}

impl fmt::Display for NvramModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {} us latency, {:.0} MB/s",
            self.description,
            self.latency_ns as f64 / 1e3,
            BLOCK_BYTES as f64 * 1e3 / self.transfer_ns_per_block as f64
        )
    }
}

/// A modelled NVRAM card.
#[derive(Clone, Debug)]
pub struct Nvram {
    model: NvramModel,
    now_ns: u64,
    path_free_ns: u64,
    /// Requests in flight; they finish in this order.
    in_flight: VecDeque<Completion>,
}

impl Nvram {
    /// An idle card of `model` at time 0.
    pub fn new(model: NvramModel) -> Nvram {
        Nvram {
            model,
            now_ns: 0,
            path_free_ns: 0,
            in_flight: VecDeque::new(),
        }
    }
}

impl Device for Nvram {
    fn capacity_blocks(&self) -> u64 {
        self.model.capacity_blocks
    }

    fn submit(&mut self, now: Instant, request: DeviceRequest) -> Result<(), RequestError> {
        check_call_order(Instant(self.now_ns), now, self.next_event());
        check_request(&request, self.model.capacity_blocks)?;
        self.now_ns = now.0;
        let start_ns = self.path_free_ns.max(now.0);
        let transfer_ns = u64::from(request.blocks) * self.model.transfer_ns_per_block;
        self.path_free_ns = start_ns + transfer_ns;
        self.in_flight.push_back(Completion {
            id: request.id,
            op: request.op,
            blocks: request.blocks,
            submitted_at: now,
            finished_at: Instant(self.path_free_ns + self.model.latency_ns),
            service: Service {
                queue: Duration(start_ns - now.0),
                overhead: Duration(self.model.latency_ns),
                transfer: Duration(transfer_ns),
                ..Service::default()
            },
        });
        Ok(())
    }

    fn next_event(&self) -> Option<Instant> {
        self.in_flight.front().map(|c| c.finished_at)
    }

    fn advance(&mut self, now: Instant, completions: &mut Vec<Completion>) {
        assert!(now.0 >= self.now_ns, "device driven backwards in time");
        self.now_ns = now.0;
        while self.in_flight.front().is_some_and(|c| c.finished_at <= now) {
            completions.extend(self.in_flight.pop_front());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Op;
    use crate::single_disk::run_closed_loop;

    fn card() -> Nvram {
        Nvram::new(NvramModel::new(
            "test",
            &NvramSpec {
                model: "test card".into(),
                capacity_mib: 64,
                latency_us: 10.0,
                bandwidth_mb_s: 409.6,
            },
        ))
    }

    #[test]
    fn an_append_costs_latency_plus_transfer() {
        let mut nvram = card();
        let append = DeviceRequest {
            id: 1,
            op: Op::Write,
            block: 0,
            blocks: 2,
        };
        nvram.submit(Instant(0), append).unwrap();
        let mut done = Vec::new();
        nvram.advance(Instant(u64::MAX), &mut done);
        assert_eq!(done.len(), 1);
        // Two blocks at 409.6 MB/s: 20 µs; then 10 µs.
        assert_eq!(done[0].finished_at, Instant(30_000));
        assert_eq!(done[0].service.total(), done[0].latency());
    }

    #[test]
    fn deep_queues_run_at_the_bandwidth_and_finish_in_order() {
        let mut nvram = card();
        let mut next = 0;
        let completions = run_closed_loop(&mut nvram, 16, 1000, |id| {
            next = (next + 1) % 100;
            DeviceRequest {
                id,
                op: Op::Write,
                block: next,
                blocks: 1,
            }
        });
        let ids: Vec<u64> = completions.iter().map(|c| c.id).collect();
        assert!(
            ids.windows(2).all(|pair| pair[0] < pair[1]),
            "appends finish in order"
        );
        let elapsed_ns = completions.last().unwrap().finished_at.0;
        let mb_s = 1000.0 * BLOCK_BYTES as f64 * 1e3 / elapsed_ns as f64;
        assert!((mb_s - 409.6).abs() < 409.6 * 0.01, "{mb_s} MB/s");
    }
}
