//! `snap sched` in the lab: the schedule a run's wafer arrays follow, and
//! where in the week the run's clock starts.
//!
//! The engine reads its time as UTC nanoseconds since the Unix epoch
//! (`wafer_core::schedule`; 1970-01-01 was a Thursday), and a wafer array's
//! engine clock is lab time plus the length of its preparation. Which
//! snapshot falls when, and how names rotate, is the engine's alone: the
//! array asks `Node::next_snapshot_due` when to wake and submits what
//! `Node::snapshots_due` returns, as the server does. The lab adds only the
//! clock's anchor: a run that names a weekday and time of day for its time
//! zero ([`WeekTime`]) has its engine idle from the end of the preparation
//! to the next such instant, so the hours the run crosses are the
//! scenario's, however long the preparation took.

use core::fmt;

use serde::Serialize;
use wafer_core::schedule::{EPOCH_WEEKDAY, SnapSchedule};
use wafer_core::units::Instant;

const NS_PER_SECOND: u64 = 1_000_000_000;
const SECONDS_PER_DAY: u64 = 24 * 3600;
const NS_PER_WEEK: u64 = 7 * SECONDS_PER_DAY * NS_PER_SECOND;
const WEEKDAYS: [&str; 7] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];

/// The schedule a run's wafer arrays follow, on every volume, and where its
/// clock starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SnapSched {
    /// `snap sched`'s counts and hours.
    pub schedule: SnapSchedule,
    /// The weekday and time (UTC) of lab time zero; `None`: wherever the
    /// engine's clock stands when the preparation ends.
    pub clock_start: Option<WeekTime>,
}

/// A weekday and a time of day (UTC): nanoseconds since Sunday 00:00.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct WeekTime(u64);

impl WeekTime {
    /// Parses `Sun 07:59:50` (or `Sun 07:59`): a weekday's English
    /// three-letter name, any case, and a 24-hour time of day.
    pub fn parse(text: &str) -> Result<WeekTime, String> {
        let bad = || format!("{text:?} is not a weekday and a time, e.g. \"Sun 07:59:50\"");
        let (day, time) = text.trim().split_once(' ').ok_or_else(bad)?;
        let day = WEEKDAYS
            .iter()
            .position(|name| name.eq_ignore_ascii_case(day))
            .ok_or_else(bad)?;
        let parts: Vec<&str> = time.trim().split(':').collect();
        let limits: &[u64] = match parts.len() {
            2 => &[24, 60],
            3 => &[24, 60, 60],
            _ => return Err(bad()),
        };
        let mut seconds = day as u64 * SECONDS_PER_DAY;
        for ((part, &limit), unit) in parts.iter().zip(limits).zip([3600, 60, 1]) {
            let value = (part.len() == 2)
                .then(|| part.parse::<u64>().ok())
                .flatten()
                .filter(|value| *value < limit)
                .ok_or_else(bad)?;
            seconds += value * unit;
        }
        Ok(WeekTime(seconds * NS_PER_SECOND))
    }

    /// Where in its week engine time `at` falls.
    pub fn of(at: Instant) -> WeekTime {
        WeekTime((at.0 + EPOCH_WEEKDAY * SECONDS_PER_DAY * NS_PER_SECOND) % NS_PER_WEEK)
    }

    /// The first engine instant at or after `at` that falls at this time of
    /// the week.
    pub fn next_at_or_after(self, at: Instant) -> Instant {
        let ahead = (self.0 + NS_PER_WEEK - WeekTime::of(at).0) % NS_PER_WEEK;
        Instant(at.0 + ahead)
    }
}

/// `Sun 07:59:50`: to the second, as `clock_start` is written.
impl fmt::Display for WeekTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let seconds = self.0 / NS_PER_SECOND;
        let (day, second_of_day) = (seconds / SECONDS_PER_DAY, seconds % SECONDS_PER_DAY);
        write!(
            f,
            "{} {:02}:{:02}:{:02}",
            WEEKDAYS[day as usize],
            second_of_day / 3600,
            second_of_day / 60 % 60,
            second_of_day % 60
        )
    }
}

/// Parses `0 2 6@8,12,16,20`: `snap sched`'s three counts as the command
/// takes them.
pub fn parse_schedule(text: &str) -> Result<SnapSchedule, String> {
    match text.split_whitespace().collect::<Vec<_>>()[..] {
        [weekly, nightly, hourly] => {
            SnapSchedule::parse(weekly, nightly, hourly).map_err(|error| error.to_string())
        }
        _ => Err(format!(
            "{text:?} is not three counts, weekly nightly hourly[@hour,...], e.g. \"0 2 6@8,12,16,20\""
        )),
    }
}

/// A snapshot a volume holds at the end of a run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct HeldSnapshot {
    /// The volume's name.
    pub volume: String,
    /// The snapshot's name (`hourly.0`, ...).
    pub name: String,
    /// When it was asked for, engine time (UTC nanoseconds since the epoch).
    pub engine_ns: u64,
    /// The same instant, nanoseconds of lab time (before the run: negative).
    pub lab_ns: i64,
}

impl HeldSnapshot {
    /// `vol0  Sun 00:00:00  lab 3610.000 s  weekly.0`.
    pub fn render(&self) -> String {
        format!(
            "{}  {}  lab {:.3} s  {}",
            self.volume,
            WeekTime::of(Instant(self.engine_ns)),
            self.lab_ns as f64 / 1e9,
            self.name
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: u64 = 3600 * NS_PER_SECOND;

    #[test]
    fn week_times_parse_and_print_as_written() {
        for text in ["Sun 07:59:50", "Sat 23:59:58", "Thu 00:00:00"] {
            assert_eq!(WeekTime::parse(text).unwrap().to_string(), text);
        }
        assert_eq!(
            WeekTime::parse("mon 08:30").unwrap().to_string(),
            "Mon 08:30:00"
        );
        for bad in [
            "Sun",
            "Sunday 08:00",
            "Sun 24:00",
            "Sun 8:00",
            "Sun 08:60",
            "Sun 08:00:00:00",
        ] {
            assert!(WeekTime::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_epoch_is_a_thursday_midnight() {
        assert_eq!(WeekTime::of(Instant(0)).to_string(), "Thu 00:00:00");
        // Day 3 is the first Sunday.
        assert_eq!(
            WeekTime::of(Instant(3 * 24 * HOUR)).to_string(),
            "Sun 00:00:00"
        );
    }

    #[test]
    fn the_next_instant_of_a_week_time_is_at_or_after() {
        let sunday_eight = WeekTime::parse("Sun 08:00:00").unwrap();
        let at = sunday_eight.next_at_or_after(Instant(5));
        assert_eq!(at, Instant((3 * 24 + 8) * HOUR));
        assert_eq!(sunday_eight.next_at_or_after(at), at, "at itself");
        let week_later = sunday_eight.next_at_or_after(Instant(at.0 + 1));
        assert_eq!(week_later, Instant(at.0 + NS_PER_WEEK));
    }

    #[test]
    fn a_schedule_is_three_counts() {
        let schedule = parse_schedule("0 2 6@8,12,16,20").unwrap();
        assert_eq!(schedule.to_string(), "0 2 6@8,12,16,20");
        assert!(parse_schedule("0 2").unwrap_err().contains("three counts"));
        assert!(
            parse_schedule("0 2 x")
                .unwrap_err()
                .contains("hourly count")
        );
    }
}
