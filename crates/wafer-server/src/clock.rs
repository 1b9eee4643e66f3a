//! Time for the engine and for log lines.
//!
//! The engine wants an [`Instant`] in nanoseconds that never goes backwards;
//! snapshot creation times and log lines want the wall clock. A [`Clock`]
//! reads the wall clock once, at start, and the monotonic clock ever after:
//! `now` is the Unix time at start plus the monotonic time elapsed since. So
//! engine time is monotonic within a run (a wall-clock step cannot fire or
//! starve the CP timer) and close to Unix time across runs (a snapshot's
//! creation time still means something after a restart).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use wafer_core::units::Instant;

/// The server's one source of time.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Clock {
    unix_ns_at_start: u64,
    started: std::time::Instant,
}

impl Clock {
    /// A clock anchored at the wall-clock time now.
    pub(crate) fn start() -> Clock {
        Clock {
            unix_ns_at_start: unix_now_ns(),
            started: std::time::Instant::now(),
        }
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
        let clock = Clock::start();
        let first = clock.now();
        std::thread::sleep(Duration::from_millis(2));
        let second = clock.now();
        assert!(second.0 >= first.0 + 2_000_000, "{first:?} then {second:?}");
        // Within a minute of the wall clock: the anchor is Unix time.
        assert!(unix_now_ns().abs_diff(second.0) < 60_000_000_000);
    }

    #[test]
    fn time_until_a_past_instant_is_zero() {
        let clock = Clock::start();
        assert_eq!(clock.until(Instant(0)), Duration::ZERO);
        let later = Instant(clock.now().0 + 5_000_000_000);
        assert!(clock.until(later) > Duration::from_secs(4));
    }
}
