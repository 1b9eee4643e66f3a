//! An offered load (an open loop, Poisson arrivals at a target rate): at a
//! rate far under what the array answers, every arrival is served at the
//! rate offered and waits for nothing but its disk, so its latency is the
//! service time a lone I/O gets; at a rate over it, the array answers all
//! it can, the rest wait at the host, and the wait grows segment after
//! segment.

use wafer_core::units::Duration;
use wafer_devices::params::Catalog;
use wafer_lab::inplace::{LunPlacement, METALUN_MULTIPLIER_DEFAULT};
use wafer_lab::report::ArrayReport;
use wafer_lab::workload::{AccessLine, Distribution, Prepare, Region, Timing};
use wafer_lab::{Array, InPlaceArray, InPlaceSpec, RunOptions, Workload, run};

/// Four 20-second segments of 4 KiB random reads over 10 GiB, one worker
/// with up to 64 in flight; `offered_iops` as given.
fn workload(offered_iops: Option<u32>, outstanding: u32) -> Workload {
    Workload {
        name: "random 4 KiB reads".into(),
        lines: vec![AccessLine {
            size_bytes: 4096,
            percent: 100,
            read_percent: 100,
            random_percent: 100,
            align_bytes: 4096,
        }],
        workers: 1,
        outstanding_per_worker: outstanding,
        region: Region {
            length_bytes: Some(10 << 30),
            ..Region::default()
        },
        distribution: Distribution::Uniform,
        timing: Timing {
            ramp: Duration(0),
            segment: Duration::from_secs(20),
            segments: 4,
        },
        prepare: Prepare::default(),
        offered_iops,
        large: None,
    }
}

/// Five 15K drives in RAID-5, no cache.
fn measure(workload: &Workload) -> ArrayReport {
    let spec = InPlaceSpec {
        name: "raid5".into(),
        drive: "fc15k-144g".into(),
        disks: 5,
        raid_groups: 1,
        stripe_unit_bytes: 64 << 10,
        stripe_width: None,
        luns: vec![10 << 30],
        placement: LunPlacement::Striped {
            multiplier: METALUN_MULTIPLIER_DEFAULT,
        },
        cache: None,
        controller: None,
        snapshots: None,
    };
    let catalog = Catalog::builtin().expect("drives.toml");
    let array: Box<dyn Array> = Box::new(InPlaceArray::new(&spec, &catalog).expect("builds"));
    let options = RunOptions {
        seed: 5,
        sysstat_interval: Duration::from_secs(10),
        snapshot_every: None,
        snap_sched: None,
        per_minute: None,
    };
    let mut report = run(&mut [array], workload, &options, &mut |_| {}).expect("runs");
    report.arrays.remove(0)
}

fn mean(values: impl Iterator<Item = f64>) -> f64 {
    let values: Vec<f64> = values.collect();
    values.iter().sum::<f64>() / values.len() as f64
}

#[test]
fn at_a_low_offered_rate_the_array_keeps_up_at_its_service_time() {
    // One I/O at a time, back to back: the service time of a lone read.
    let closed = measure(&workload(None, 1));
    let service_ms = mean(closed.segments.iter().map(|s| s.latency_ms_avg));
    let capacity = mean(closed.segments.iter().map(|s| s.iops));
    // 20 a second, about a tenth of what one I/O at a time gets: the five
    // disks are each busy about 2 % of the time, so arrivals rarely queue.
    let open = measure(&workload(Some(20), 64));
    for segment in &open.segments {
        let offered = segment
            .offered_iops
            .expect("an open loop reports what it offered");
        // 400 arrivals a segment: a Poisson count's standard deviation is
        // 20, 5 % of it.
        assert!((offered / 20.0 - 1.0).abs() < 0.2, "{segment:?}");
        assert!((segment.iops / offered - 1.0).abs() < 0.05, "{segment:?}");
    }
    let achieved = mean(open.segments.iter().map(|s| s.iops));
    assert!((achieved / 20.0 - 1.0).abs() < 0.05, "achieved {achieved}");
    let latency_ms = mean(open.segments.iter().map(|s| s.latency_ms_avg));
    assert!(
        (latency_ms / service_ms - 1.0).abs() < 0.15,
        "{latency_ms:.3} ms against a lone read's {service_ms:.3} ms ({capacity:.0} IOPS at depth 1)"
    );
}

#[test]
fn over_the_arrays_rate_the_queue_and_the_latency_grow() {
    // What the array answers with 64 in flight: the most an open loop
    // limited to 64 gets.
    let closed = measure(&workload(None, 64));
    let capacity = mean(closed.segments.iter().map(|s| s.iops));
    let offered_rate = (2.0 * capacity) as u32;
    let open = measure(&workload(Some(offered_rate), 64));
    let latencies: Vec<f64> = open.segments.iter().map(|s| s.latency_ms_avg).collect();
    for segment in &open.segments {
        let offered = segment.offered_iops.unwrap();
        assert!(
            (offered / f64::from(offered_rate) - 1.0).abs() < 0.05,
            "{segment:?}"
        );
        assert!(segment.iops < 0.6 * offered, "{segment:?}");
        assert!(
            (segment.iops / capacity - 1.0).abs() < 0.05,
            "{segment:?} vs {capacity}"
        );
    }
    // Half of the arrivals wait, so the queue (and each arrival's wait)
    // grows by about `capacity` I/Os a second: the mean latency of each
    // segment is well above the one before.
    for pair in latencies.windows(2) {
        assert!(pair[1] > 1.3 * pair[0], "{latencies:?}");
    }
    let closed_latency = mean(closed.segments.iter().map(|s| s.latency_ms_avg));
    assert!(
        latencies[0] > 10.0 * closed_latency,
        "{latencies:?} vs {closed_latency}"
    );
}
