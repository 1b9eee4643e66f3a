//! The age of the buffer cache's oldest block: `sysstat`'s Cache age.
//!
//! The engine reads no clock, so its buffer cache ages blocks by a use clock
//! (a tick per use) and can tell the tick of its oldest block's last use, not
//! when that was. The engine thread puts times to ticks: at the end of a step,
//! at most once every [`SAMPLE_EVERY_NS`], it notes each aggregate's use
//! clock with the time. A use counted by a sample happened no later than that
//! sample, and after the one before, so the oldest block's age is at least
//! the time since the first sample whose clock has reached its tick: exact to
//! within one sample period while the filer is busy (and after a quiet spell,
//! the first step's uses are sampled at its end). Samples older than
//! [`KEPT_NS`] are dropped but one, so an age past an hour still reads past an
//! hour (ONTAP prints `>60`). A few hundred samples per aggregate at most.

use std::collections::{BTreeMap, VecDeque};

use wafer_core::units::AggrId;

/// How often the use clocks are sampled, at most.
const SAMPLE_EVERY_NS: u64 = 10_000_000_000;
/// How long samples are kept: over an hour, ONTAP's largest Cache age.
const KEPT_NS: u64 = 61 * 60_000_000_000;

/// One aggregate's use clock at one time.
#[derive(Clone, Copy, Debug)]
struct Sample {
    uses: u64,
    at_ns: u64,
}

/// Each aggregate's samples, oldest first.
#[derive(Debug, Default)]
pub(super) struct CacheAges {
    samples: BTreeMap<AggrId, VecDeque<Sample>>,
    last_at_ns: Option<u64>,
}

impl CacheAges {
    /// Notes each aggregate's use clock (`uses`) at `now_ns`, unless the last
    /// sample is recent.
    pub(super) fn sample(&mut self, now_ns: u64, uses: impl Iterator<Item = (AggrId, u64)>) {
        if self
            .last_at_ns
            .is_some_and(|last| now_ns.saturating_sub(last) < SAMPLE_EVERY_NS)
        {
            return;
        }
        self.last_at_ns = Some(now_ns);
        for (aggr, uses) in uses {
            let samples = self.samples.entry(aggr).or_default();
            samples.push_back(Sample {
                uses,
                at_ns: now_ns,
            });
            let expired = |s: &Sample| now_ns.saturating_sub(s.at_ns) > KEPT_NS;
            while samples.len() > 1 && samples.get(1).is_some_and(expired) {
                samples.pop_front();
            }
        }
    }

    /// How long ago, at `now_ns`, aggregate `aggr`'s oldest cached block was
    /// last used at least, given its tick: none before any sample counts it
    /// (it was used since the last sample).
    pub(super) fn age_ns(&self, aggr: AggrId, oldest_use: u64, now_ns: u64) -> Option<u64> {
        let samples = self.samples.get(&aggr)?;
        let counted = samples.iter().find(|s| s.uses >= oldest_use)?;
        Some(now_ns.saturating_sub(counted.at_ns))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINUTE: u64 = 60_000_000_000;

    #[test]
    fn a_blocks_age_runs_from_the_first_sample_that_counted_its_use() {
        let aggr = AggrId(0);
        let mut ages = CacheAges::default();
        ages.sample(0, [(aggr, 10)].into_iter());
        ages.sample(MINUTE, [(aggr, 50)].into_iter());
        ages.sample(MINUTE + 1, [(aggr, 60)].into_iter()); // too soon: ignored
        ages.sample(2 * MINUTE, [(aggr, 90)].into_iter());
        let now = 5 * MINUTE;
        assert_eq!(ages.age_ns(aggr, 5, now), Some(5 * MINUTE));
        assert_eq!(ages.age_ns(aggr, 40, now), Some(4 * MINUTE));
        assert_eq!(ages.age_ns(aggr, 60, now), Some(3 * MINUTE));
        assert_eq!(
            ages.age_ns(aggr, 91, now),
            None,
            "used since the last sample"
        );
        assert_eq!(ages.age_ns(AggrId(1), 1, now), None);
    }

    #[test]
    fn samples_past_an_hour_go_but_one_so_old_blocks_stay_old() {
        let aggr = AggrId(0);
        let mut ages = CacheAges::default();
        for minute in 0..=120 {
            ages.sample(minute * MINUTE, [(aggr, minute)].into_iter());
        }
        let kept = &ages.samples[&aggr];
        assert!(kept.len() <= 63, "{} samples kept", kept.len());
        let now = 120 * MINUTE;
        let age = ages.age_ns(aggr, 0, now).expect("counted");
        assert!(age > 60 * MINUTE, "{age}");
    }
}
