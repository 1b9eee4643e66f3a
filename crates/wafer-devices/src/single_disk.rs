//! The single-disk check: one drive, a closed loop, virtual time.
//!
//! A closed loop keeps a fixed number of requests outstanding: it submits
//! `queue_depth` at time 0 and a new one at the instant each finishes, with
//! no think time (DiskSim's synthetic generator with every request
//! time-critical, device-models.md §1.9). The loop is the smallest driver of
//! the [`Device`] interface, and the lab's event loop follows the same call
//! order.
//!
//! [`random_reads`] is the calibration check of a disk model: 4 KiB reads
//! uniform over the whole drive, at one queue depth, seeded. It reports IOPS
//! over the whole run (first submission to last completion), and mean and
//! 99th-percentile (nearest-rank) latency. The same seed gives the same
//! report.

use wafer_core::units::{Duration, Instant};
use wafer_rng::Rng;

use crate::{Completion, Device, DeviceRequest, Op};

/// Events a closed loop may take per completion before it is declared stuck:
/// a request costs a device at most a dispatch, a completion and a
/// write-back destage.
const EVENTS_PER_COMPLETION_MAX: u64 = 8;

/// Runs `device` with `queue_depth` requests outstanding until `count` have
/// finished; `next(id)` makes the request with that id. Returns the
/// completions in the order they finished.
///
/// # Panics
/// If `queue_depth` is zero, a request is refused, or the device stops making
/// progress.
pub fn run_closed_loop(
    device: &mut dyn Device,
    queue_depth: u32,
    count: u64,
    mut next: impl FnMut(u64) -> DeviceRequest,
) -> Vec<Completion> {
    assert!(
        queue_depth > 0,
        "a closed loop needs at least one request outstanding"
    );
    let mut submitted = 0u64;
    let mut submit = |device: &mut dyn Device, now: Instant, submitted: &mut u64| {
        let request = next(*submitted);
        device
            .submit(now, request)
            .unwrap_or_else(|error| panic!("closed loop: {error}"));
        *submitted += 1;
    };
    while submitted < count.min(u64::from(queue_depth)) {
        submit(device, Instant(0), &mut submitted);
    }
    let mut completions = Vec::with_capacity(count as usize);
    let mut finished = Vec::new();
    let events_max = (count + u64::from(queue_depth)) * EVENTS_PER_COMPLETION_MAX;
    for _ in 0..events_max {
        if completions.len() as u64 >= count {
            return completions;
        }
        let now = device
            .next_event()
            .expect("requests are outstanding, so the device has an event");
        device.advance(now, &mut finished);
        for completion in finished.drain(..) {
            completions.push(completion);
            if submitted < count {
                submit(device, now, &mut submitted);
            }
        }
    }
    panic!(
        "closed loop: {} of {count} requests finished after {events_max} events",
        completions.len()
    );
}

/// What [`random_reads`] measured.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RandomReadReport {
    /// Requests kept outstanding.
    pub queue_depth: u32,
    /// Requests completed.
    pub completions: u64,
    /// From the first submission to the last completion.
    pub elapsed: Duration,
    /// Completions per second of virtual time.
    pub iops: f64,
    /// Mean latency.
    pub mean_latency: Duration,
    /// 99th-percentile latency (nearest rank).
    pub p99_latency: Duration,
    /// Requests the drive's buffer served.
    pub cache_hits: u64,
}

/// Closed-loop random 4 KiB reads, uniform over the whole of `device`, at
/// `queue_depth`, until `count` complete; the addresses come from `seed`.
pub fn random_reads(
    device: &mut dyn Device,
    queue_depth: u32,
    count: u64,
    seed: u64,
) -> RandomReadReport {
    assert!(count > 0, "measure at least one request");
    let mut rng = Rng::seeded(seed);
    let capacity = device.capacity_blocks();
    let completions = run_closed_loop(device, queue_depth, count, |id| DeviceRequest {
        id,
        op: Op::Read,
        block: rng.below(capacity),
        blocks: 1,
    });
    summarize(queue_depth, &completions)
}

/// IOPS and latency figures of a closed-loop run started at time 0.
pub fn summarize(queue_depth: u32, completions: &[Completion]) -> RandomReadReport {
    let elapsed = completions
        .iter()
        .map(|c| c.finished_at)
        .max()
        .unwrap_or_default()
        - Instant(0);
    let mut latencies: Vec<u64> = completions.iter().map(|c| c.latency().0).collect();
    latencies.sort_unstable();
    let count = latencies.len() as u64;
    let nearest_rank = (count * 99).div_ceil(100).max(1) as usize;
    RandomReadReport {
        queue_depth,
        completions: count,
        elapsed,
        iops: count as f64 * 1e9 / elapsed.0.max(1) as f64,
        mean_latency: Duration(latencies.iter().sum::<u64>() / count.max(1)),
        p99_latency: Duration(latencies.get(nearest_rank - 1).copied().unwrap_or(0)),
        cache_hits: completions.iter().filter(|c| c.service.cache_hit).count() as u64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::Catalog;

    #[test]
    fn the_same_seed_gives_the_same_run() {
        let catalog = Catalog::builtin().unwrap();
        for name in ["fc15k-144g", "ssd-200g"] {
            let drive = catalog.get(name).unwrap();
            let run = |seed| {
                let mut device = drive.device();
                let mut rng = Rng::seeded(seed);
                let capacity = device.capacity_blocks();
                run_closed_loop(device.as_mut(), 8, 500, |id| DeviceRequest {
                    id,
                    op: if rng.chance(1, 3) {
                        Op::Write
                    } else {
                        Op::Read
                    },
                    block: rng.below(capacity - 16),
                    blocks: 1 + rng.below(16) as u32,
                })
            };
            assert_eq!(run(11), run(11), "{name}: same seed, same completions");
            assert_ne!(run(11), run(12), "{name}: another seed, another run");
            let mut device = drive.device();
            let report = random_reads(device.as_mut(), 4, 300, 5);
            let mut again = drive.device();
            assert_eq!(report, random_reads(again.as_mut(), 4, 300, 5));
        }
    }

    #[test]
    fn the_summary_uses_nearest_rank_percentiles() {
        let completion = |finished| Completion {
            id: 0,
            op: Op::Read,
            blocks: 1,
            submitted_at: Instant(0),
            finished_at: Instant(finished),
            service: Default::default(),
        };
        let completions: Vec<Completion> = (1..=200).map(|i| completion(i * 1_000_000)).collect();
        let report = summarize(1, &completions);
        assert_eq!(report.p99_latency, Duration(198_000_000));
        assert_eq!(report.mean_latency, Duration(100_500_000));
        assert!((report.iops - 1000.0).abs() < 1e-9);
    }
}
