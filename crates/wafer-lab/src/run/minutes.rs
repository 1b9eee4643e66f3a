//! Per-minute figures of a run, and when latency first reaches a threshold.
//!
//! A long run's segments hide what happens inside them: E4 reports IOPS,
//! MB/s and latency for every minute of a 12-hour run, and the time at
//! which latency first falls to about 3 ms as a cache warms. The meter here
//! cuts the run from its start (ramp-up included: a warm-up is what it is
//! for) into minutes of virtual time and counts, per minute, the host I/Os
//! that complete in it (`start ≤ finished < end`), their bytes and a latency
//! histogram; the last minute may be shorter, ending with the run. A
//! threshold, if given, is reached from above in the first minute whose
//! mean latency is at or below it, and from below in the first whose mean
//! is over it (a minute with no completion reaches neither).

use wafer_core::units::{Duration, Instant};

use crate::histogram::Histogram;
use crate::report::{LatencyThreshold, MinuteEnd, MinuteReport};

/// A minute of virtual time.
pub const MINUTE: Duration = Duration::from_secs(60);

/// Counts per minute, the current one open.
pub struct MinuteMeter {
    end: Instant,
    threshold: Option<Duration>,
    ios: u64,
    bytes: u64,
    latency: Histogram,
    minutes: Vec<MinuteReport>,
}

impl MinuteMeter {
    /// Per-minute counts of a run that ends at `end`, watching for mean
    /// latency at or below `threshold`.
    pub fn new(end: Instant, threshold: Option<Duration>) -> MinuteMeter {
        MinuteMeter {
            end,
            threshold,
            ios: 0,
            bytes: 0,
            latency: Histogram::default(),
            minutes: Vec::new(),
        }
    }

    /// When the open minute started.
    fn start(&self) -> Instant {
        Instant(MINUTE.0 * self.minutes.len() as u64)
    }

    /// When the open minute ends: a minute on, or the end of the run.
    fn minute_end(&self) -> Instant {
        (self.start() + MINUTE).min(self.end)
    }

    /// A host I/O of `bytes` that took `latency` finished at `finished`
    /// (before the end of the run).
    pub fn record(&mut self, finished: Instant, bytes: u64, latency: Duration) {
        while finished >= self.minute_end() {
            self.close();
        }
        self.ios += 1;
        self.bytes += bytes;
        self.latency.record(latency.0);
    }

    /// Reports the open minute and opens the next.
    fn close(&mut self) {
        let (start, end) = (self.start(), self.minute_end());
        let seconds = (end - start).0 as f64 / 1e9;
        let latency = std::mem::take(&mut self.latency);
        self.minutes.push(MinuteReport {
            minute: self.minutes.len() as u32 + 1,
            end_s: end.0 as f64 / 1e9,
            ios: self.ios,
            iops: self.ios as f64 / seconds,
            mbps: self.bytes as f64 / 1e6 / seconds,
            latency_ms_avg: latency.mean() / 1e6,
            latency_ms_p99: latency.percentile(99.0) as f64 / 1e6,
        });
        self.ios = 0;
        self.bytes = 0;
    }

    /// Every minute of the run, and the threshold's outcome.
    pub fn finish(mut self) -> (Vec<MinuteReport>, Option<LatencyThreshold>) {
        while self.start() < self.end {
            self.close();
        }
        let threshold = self.threshold.map(|threshold| {
            let threshold_ms = threshold.0 as f64 / 1e6;
            LatencyThreshold {
                threshold_ms,
                first_at_or_below: first_where(&self.minutes, |ms| ms <= threshold_ms),
                first_above: first_where(&self.minutes, |ms| ms > threshold_ms),
            }
        });
        (self.minutes, threshold)
    }
}

/// The first minute with I/O whose mean latency (ms) satisfies `holds`.
fn first_where(minutes: &[MinuteReport], holds: impl Fn(f64) -> bool) -> Option<MinuteEnd> {
    (minutes.iter())
        .find(|minute| minute.ios > 0 && holds(minute.latency_ms_avg))
        .map(|minute| MinuteEnd {
            minute: minute.minute,
            end_s: minute.end_s,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration(1_000_000);

    #[test]
    fn completions_count_in_their_minute_and_the_last_is_short() {
        // 150 s: minutes ending at 60, 120 and 150 s.
        let mut meter = MinuteMeter::new(Instant(150 * 1_000_000_000), Some(Duration(3 * MS.0)));
        let second = |s: u64| Instant(s * 1_000_000_000);
        meter.record(second(10), 4096, Duration(8 * MS.0));
        meter.record(second(59), 4096, Duration(4 * MS.0));
        meter.record(second(130), 8192, Duration(2 * MS.0));
        let (minutes, threshold) = meter.finish();
        let summary: Vec<(u32, f64, u64, f64)> = (minutes.iter())
            .map(|m| (m.minute, m.end_s, m.ios, m.latency_ms_avg))
            .collect();
        assert_eq!(
            summary,
            [(1, 60.0, 2, 6.0), (2, 120.0, 0, 0.0), (3, 150.0, 1, 2.0)]
        );
        assert_eq!(minutes[2].iops, 1.0 / 30.0);
        assert_eq!(minutes[2].mbps, 8192.0 / 1e6 / 30.0);
        // The first minute, at 6 ms, is above 3 ms; the empty second reaches
        // nothing; the third, at 2 ms, is at or below.
        let threshold = threshold.unwrap();
        let end = |minute, end_s| Some(MinuteEnd { minute, end_s });
        assert_eq!(threshold.first_above, end(1, 60.0));
        assert_eq!(threshold.first_at_or_below, end(3, 150.0));
    }

    #[test]
    fn a_threshold_never_reached_says_so() {
        let mut meter = MinuteMeter::new(Instant(60 * 1_000_000_000), Some(MS));
        meter.record(Instant(5), 512, Duration(2 * MS.0));
        let (_, threshold) = meter.finish();
        assert_eq!(threshold.unwrap().first_at_or_below, None);
    }
}
