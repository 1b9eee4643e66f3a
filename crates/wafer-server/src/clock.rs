//! Time for the engine and for log lines.
//!
//! The engine wants an [`Instant`] in nanoseconds that never goes backwards;
//! snapshot creation times and log lines want the wall clock. A [`Clock`]
//! reads the wall clock once, at start, and the monotonic clock ever after:
//! `now` is the Unix time at start plus the monotonic time elapsed since. So
//! engine time is monotonic within a run (a wall-clock step cannot fire or
//! starve the CP timer) and close to Unix time across runs (a snapshot's
//! creation time still means something after a restart).
//!
//! `WAFER_CLOCK_START` (Unix seconds) anchors the clock there instead of at
//! the wall clock: `snap sched` takes its snapshots on the hour, and a test
//! or a demonstration starts a server a few seconds before one rather than
//! wait for it.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use wafer_core::units::Instant;

use crate::error::ServeError;

/// The server's one source of time.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Clock {
    unix_ns_at_start: u64,
    started: std::time::Instant,
}

/// The environment variable that anchors the clock at a Unix time of its
/// own (whole seconds), for tests and demonstrations of `snap sched`.
pub(crate) const CLOCK_START_ENV: &str = "WAFER_CLOCK_START";

impl Clock {
    /// A clock anchored at the wall-clock time now, or at the Unix time
    /// [`CLOCK_START_ENV`] names.
    pub(crate) fn start() -> Result<Clock, ServeError> {
        let unix_ns_at_start = match std::env::var(CLOCK_START_ENV) {
            Ok(seconds) => anchor_ns(&seconds)?,
            Err(_) => unix_now_ns(),
        };
        Ok(Clock {
            unix_ns_at_start,
            started: std::time::Instant::now(),
        })
    }

    /// Engine time now.
    pub(crate) fn now(&self) -> Instant {
        Instant(self.unix_ns_at_start + self.elapsed_ns())
    }

    /// Nanoseconds since the clock started.
    pub(crate) fn elapsed_ns(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// How long from now until engine time `at` (zero if it has passed).
    pub(crate) fn until(&self, at: Instant) -> Duration {
        Duration::from_nanos(at.0.saturating_sub(self.now().0))
    }
}

/// The anchor `seconds` (a [`CLOCK_START_ENV`] value) names, in nanoseconds.
fn anchor_ns(seconds: &str) -> Result<u64, ServeError> {
    seconds
        .trim()
        .parse::<u64>()
        .ok()
        .and_then(|s| s.checked_mul(1_000_000_000))
        .ok_or_else(|| {
            ServeError::Clock(format!(
                "{CLOCK_START_ENV}={seconds:?} is not a Unix time in seconds"
            ))
        })
}

/// Nanoseconds since the Unix epoch by the wall clock (0 if it is set before 1970).
pub(crate) fn unix_now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_nanos()).unwrap_or(u64::MAX)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_time_moves_forward_from_unix_time() {
        let clock = Clock::start().expect("no anchor in the test's environment");
        let first = clock.now();
        std::thread::sleep(Duration::from_millis(2));
        let second = clock.now();
        assert!(second.0 >= first.0 + 2_000_000, "{first:?} then {second:?}");
        // Within a minute of the wall clock: the anchor is Unix time.
        assert!(unix_now_ns().abs_diff(second.0) < 60_000_000_000);
    }

    #[test]
    fn an_anchor_is_whole_unix_seconds_and_anything_else_is_refused() {
        assert_eq!(
            anchor_ns("1764460798").ok(),
            Some(1_764_460_798_000_000_000)
        );
        for bad in ["", "soon", "-5", "1.5", "99999999999999999999"] {
            let refused = anchor_ns(bad).expect_err(bad).to_string();
            assert!(refused.contains(CLOCK_START_ENV), "{refused}");
        }
    }

    #[test]
    fn time_until_a_past_instant_is_zero() {
        let clock = Clock::start().expect("no anchor in the test's environment");
        assert_eq!(clock.until(Instant(0)), Duration::ZERO);
        let later = Instant(clock.now().0 + 5_000_000_000);
        assert!(clock.until(later) > Duration::from_secs(4));
    }
}
