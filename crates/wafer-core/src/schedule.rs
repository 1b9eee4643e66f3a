//! Snapshot schedules (`snap sched VOL weekly nightly hourly[@hours]`).
//!
//! A schedule names how many snapshots of each kind a volume keeps, and at
//! which hours of the day the hourly ones fall. It is pure arithmetic on
//! engine time, read as nanoseconds since the Unix epoch in UTC: the server's
//! clock is Unix time, and the lab anchors its clock where a scenario says,
//! so both take their snapshots through this one function. A weekly
//! snapshot falls at the midnight that begins each Sunday, a nightly one at
//! every other midnight, an hourly one on each listed hour (every hour when
//! none is listed); where two kinds fall at once only the larger is taken,
//! as 7-Mode does.
//!
//! Each kind keeps its newest `N` as `kind.0` (the newest) to `kind.N-1`.
//! Taking one ([`Change::ScheduledSnapshot`](crate::nvlog::Change)) deletes
//! the oldest, renames the others one up and names the new one `kind.0`, all
//! in one logged change: a crash finds the rotation done or not begun.
//!
//! The engine does not watch the clock for schedules: a driver asks
//! [`Node::snapshots_due`](crate::node::Node::snapshots_due) for the
//! snapshots due since it last asked and submits them like any request.

use core::fmt;

use crate::units::Instant;

const NS_PER_HOUR: u64 = 3_600_000_000_000;
const HOURS_PER_DAY: u64 = 24;
/// Days from a Sunday to 1970-01-01, day 0 of Unix time (a Thursday): day
/// `d` is a Sunday when `(d + EPOCH_WEEKDAY) % 7 == 0` (the first: day 3,
/// 1970-01-04).
pub const EPOCH_WEEKDAY: u64 = 4;
const EVERY_HOUR: u32 = (1 << HOURS_PER_DAY) - 1;

/// A kind of scheduled snapshot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum SnapKind {
    /// At midnight starting each Sunday.
    Weekly,
    /// At every other midnight.
    Nightly,
    /// On the schedule's hours.
    Hourly,
}

impl SnapKind {
    /// Every kind, largest first (the order in which one displaces another).
    pub const ALL: [SnapKind; 3] = [SnapKind::Weekly, SnapKind::Nightly, SnapKind::Hourly];

    /// Its snapshots' names before the `.N`.
    pub fn prefix(self) -> &'static str {
        match self {
            SnapKind::Weekly => "weekly",
            SnapKind::Nightly => "nightly",
            SnapKind::Hourly => "hourly",
        }
    }

    /// The name of its `n`th newest snapshot.
    pub fn name(self, n: u8) -> String {
        format!("{}.{n}", self.prefix())
    }

    /// Its code in a log record.
    pub fn code(self) -> u8 {
        match self {
            SnapKind::Weekly => 0,
            SnapKind::Nightly => 1,
            SnapKind::Hourly => 2,
        }
    }

    /// The kind of log-record code `code`.
    pub fn from_code(code: u8) -> Option<SnapKind> {
        SnapKind::ALL.into_iter().find(|k| k.code() == code)
    }
}

/// How many snapshots of each kind a volume keeps, and the hours of the
/// hourly ones. All zero (the default, [`SnapSchedule::OFF`]) takes none.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SnapSchedule {
    /// Weekly snapshots kept.
    pub weekly: u8,
    /// Nightly snapshots kept.
    pub nightly: u8,
    /// Hourly snapshots kept.
    pub hourly: u8,
    /// The hours (UTC) hourly snapshots fall on: bit `h` for hour `h`.
    pub hours: u32,
}

/// Why a schedule's text or record is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    /// Not `weekly nightly hourly[@h,h,...]`.
    #[error("a schedule is `weekly nightly hourly[@hour,...]`: {0}")]
    Syntax(String),
    /// More snapshots kept than a volume may hold.
    #[error("a schedule keeps at most {max} snapshots in all, not {asked}")]
    TooMany {
        /// What the schedule keeps.
        asked: u32,
        /// The most a volume holds.
        max: u32,
    },
}

impl SnapSchedule {
    /// No scheduled snapshots.
    pub const OFF: SnapSchedule = SnapSchedule {
        weekly: 0,
        nightly: 0,
        hourly: 0,
        hours: EVERY_HOUR,
    };

    /// Parses `snap sched`'s three counts, the last optionally followed by
    /// `@` and a comma-separated list of hours (0 to 23).
    pub fn parse(weekly: &str, nightly: &str, hourly: &str) -> Result<SnapSchedule, ScheduleError> {
        let count = |what: &str, text: &str| {
            text.parse::<u8>()
                .map_err(|_| ScheduleError::Syntax(format!("{what} count {text:?}")))
        };
        let (hourly, hours) = match hourly.split_once('@') {
            Some((count, list)) => (count, parse_hours(list)?),
            None => (hourly, EVERY_HOUR),
        };
        let schedule = SnapSchedule {
            weekly: count("weekly", weekly)?,
            nightly: count("nightly", nightly)?,
            hourly: count("hourly", hourly)?,
            hours,
        };
        schedule.check()?;
        Ok(schedule)
    }

    /// Refuses a schedule keeping more than a volume's snapshots, or one
    /// with no hour to take its hourly snapshots at.
    pub fn check(&self) -> Result<(), ScheduleError> {
        let max = crate::format::MAX_SNAPSHOTS as u32;
        let asked = u32::from(self.weekly) + u32::from(self.nightly) + u32::from(self.hourly);
        if asked > max {
            return Err(ScheduleError::TooMany { asked, max });
        }
        if self.hours == 0 || self.hours & !EVERY_HOUR != 0 {
            return Err(ScheduleError::Syntax(format!("hours {:#x}", self.hours)));
        }
        Ok(())
    }

    /// How many snapshots of `kind` it keeps.
    pub fn keep(&self, kind: SnapKind) -> u8 {
        match kind {
            SnapKind::Weekly => self.weekly,
            SnapKind::Nightly => self.nightly,
            SnapKind::Hourly => self.hourly,
        }
    }

    /// Whether it takes any snapshot at all.
    pub fn is_off(&self) -> bool {
        SnapKind::ALL.iter().all(|&k| self.keep(k) == 0)
    }

    /// The kind of snapshot due at the hour starting at `hour` (an instant
    /// on the hour), if any: the largest kind that falls there.
    fn kind_at_hour(&self, hour: u64) -> Option<SnapKind> {
        let hour_of_day = hour % HOURS_PER_DAY;
        let day = hour / HOURS_PER_DAY;
        let midnight = hour_of_day == 0;
        let sunday = (day + EPOCH_WEEKDAY) % 7 == 0;
        let falls = |kind| match kind {
            SnapKind::Weekly => midnight && sunday,
            SnapKind::Nightly => midnight,
            SnapKind::Hourly => self.hours & (1 << hour_of_day) != 0,
        };
        SnapKind::ALL
            .into_iter()
            .find(|&kind| falls(kind) && self.keep(kind) > 0)
    }

    /// The snapshot due at the hours in `(after, until]`, if any: one a
    /// call, the largest kind that falls there. A volume takes one snapshot
    /// at a time, and a driver that slept through several hours takes the
    /// largest it missed, not a backlog.
    pub fn due(&self, after: Instant, until: Instant) -> Option<SnapKind> {
        if self.is_off() || until <= after {
            return None;
        }
        let first = after.0 / NS_PER_HOUR + 1;
        let last = until.0 / NS_PER_HOUR;
        // A week of hours holds every kind's every slot.
        let hours = first.max(last.saturating_sub(7 * HOURS_PER_DAY))..=last;
        hours.filter_map(|h| self.kind_at_hour(h)).min()
    }

    /// The first hour after `after` at which a snapshot of it falls, if any
    /// ever does: when a driver that sleeps between events must wake.
    pub fn next_due(&self, after: Instant) -> Option<Instant> {
        if self.is_off() {
            return None;
        }
        let first = after.0 / NS_PER_HOUR + 1;
        (first..first + 7 * HOURS_PER_DAY)
            .find(|&h| self.kind_at_hour(h).is_some())
            .map(|h| Instant(h * NS_PER_HOUR))
    }

    /// Its bytes in a volume record.
    pub fn encode(&self) -> [u8; 8] {
        let mut out = [0u8; 8];
        out[0] = self.weekly;
        out[1] = self.nightly;
        out[2] = self.hourly;
        out[4..8].copy_from_slice(&self.hours.to_le_bytes());
        out
    }

    /// The schedule of a volume record's bytes; all zero (an image from
    /// before schedules) reads as [`SnapSchedule::OFF`].
    pub fn decode(bytes: &[u8; 8]) -> Result<SnapSchedule, ScheduleError> {
        if bytes == &[0; 8] {
            return Ok(SnapSchedule::OFF);
        }
        let mut hours = [0u8; 4];
        hours.copy_from_slice(&bytes[4..8]);
        let schedule = SnapSchedule {
            weekly: bytes[0],
            nightly: bytes[1],
            hourly: bytes[2],
            hours: u32::from_le_bytes(hours),
        };
        schedule.check()?;
        Ok(schedule)
    }
}

impl Default for SnapSchedule {
    fn default() -> SnapSchedule {
        SnapSchedule::OFF
    }
}

/// `0 2 6@8,12,16,20`, as `snap sched` prints it: the hours only when they
/// are not every hour.
impl fmt::Display for SnapSchedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} {}", self.weekly, self.nightly, self.hourly)?;
        if self.hours != EVERY_HOUR {
            let hours: Vec<String> = (0..HOURS_PER_DAY as u32)
                .filter(|h| self.hours & (1 << h) != 0)
                .map(|h| h.to_string())
                .collect();
            write!(f, "@{}", hours.join(","))?;
        }
        Ok(())
    }
}

/// The first hour boundary after `after`: no schedule's snapshot falls
/// between two boundaries, so a driver that looks at every boundary (and
/// only then) misses none.
pub fn next_hour(after: Instant) -> Instant {
    Instant((after.0 / NS_PER_HOUR + 1) * NS_PER_HOUR)
}

/// `8,12,16,20` as a set of hours.
fn parse_hours(list: &str) -> Result<u32, ScheduleError> {
    let mut hours = 0u32;
    for item in list.split(',') {
        let hour = item
            .trim()
            .parse::<u32>()
            .ok()
            .filter(|h| u64::from(*h) < HOURS_PER_DAY)
            .ok_or_else(|| ScheduleError::Syntax(format!("hour {item:?} (0 to 23)")))?;
        hours |= 1 << hour;
    }
    Ok(hours)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Engine time at `day` days after 1970-01-01 (a Thursday), `hour`:`minute`.
    fn at(day: u64, hour: u64, minute: u64) -> Instant {
        Instant((day * 24 + hour) * NS_PER_HOUR + minute * 60_000_000_000)
    }

    const POCVOL: &str = "0 2 6@8,12,16,20";

    fn pocvol() -> SnapSchedule {
        SnapSchedule::parse("0", "2", "6@8,12,16,20").expect("valid")
    }

    #[test]
    fn the_text_round_trips_as_wafl_md_prints_it() {
        assert_eq!(pocvol().to_string(), POCVOL);
        let every_hour = SnapSchedule::parse("1", "2", "3").expect("valid");
        assert_eq!(every_hour.to_string(), "1 2 3");
        assert_eq!(every_hour.hours, EVERY_HOUR);
        let decoded = SnapSchedule::decode(&pocvol().encode()).expect("valid");
        assert_eq!(decoded, pocvol());
        assert_eq!(SnapSchedule::decode(&[0; 8]), Ok(SnapSchedule::OFF));
    }

    #[test]
    fn bad_text_is_refused_with_what_is_wrong() {
        let refused = |w, n, h| SnapSchedule::parse(w, n, h).unwrap_err().to_string();
        assert!(refused("x", "0", "0").contains("weekly count"));
        assert!(refused("0", "0", "4@24").contains("hour \"24\""));
        assert!(refused("0", "0", "4@").contains("hour \"\""));
        assert!(refused("100", "100", "100").contains("at most 255"));
        assert!(SnapSchedule::decode(&[1, 0, 0, 0, 0, 0, 0, 0]).is_err());
    }

    #[test]
    fn hourly_snapshots_fall_on_the_listed_hours_only() {
        let s = pocvol();
        assert_eq!(s.due(at(1, 7, 59), at(1, 8, 0)), Some(SnapKind::Hourly));
        assert_eq!(s.due(at(1, 8, 0), at(1, 8, 59)), None, "once per hour");
        assert_eq!(
            s.due(at(1, 8, 30), at(1, 11, 30)),
            None,
            "9, 10, 11 unlisted"
        );
        assert_eq!(s.next_due(at(1, 8, 0)), Some(at(1, 12, 0)));
        assert_eq!(next_hour(at(1, 8, 0)), at(1, 9, 0));
        assert_eq!(next_hour(at(1, 8, 59)), at(1, 9, 0));
    }

    #[test]
    fn midnight_takes_the_largest_kind_kept() {
        // Day 3 after a Thursday is a Sunday.
        let weekly = SnapSchedule::parse("1", "2", "3").expect("valid");
        assert_eq!(
            weekly.due(at(2, 23, 59), at(3, 0, 0)),
            Some(SnapKind::Weekly)
        );
        assert_eq!(
            weekly.due(at(3, 23, 59), at(4, 0, 0)),
            Some(SnapKind::Nightly)
        );
        assert_eq!(
            weekly.due(at(4, 0, 59), at(4, 1, 0)),
            Some(SnapKind::Hourly)
        );
        let no_weekly = SnapSchedule::parse("0", "2", "3").expect("valid");
        assert_eq!(
            no_weekly.due(at(2, 23, 59), at(3, 0, 0)),
            Some(SnapKind::Nightly)
        );
        let hourly_only = SnapSchedule::parse("0", "0", "3").expect("valid");
        assert_eq!(
            hourly_only.due(at(2, 23, 59), at(3, 0, 0)),
            Some(SnapKind::Hourly)
        );
    }

    #[test]
    fn a_long_sleep_takes_the_largest_kind_it_missed_once() {
        let s = SnapSchedule::parse("1", "2", "3").expect("valid");
        assert_eq!(s.due(at(0, 0, 30), at(40, 0, 30)), Some(SnapKind::Weekly));
        assert_eq!(s.due(at(0, 0, 30), at(2, 0, 30)), Some(SnapKind::Nightly));
        assert_eq!(SnapSchedule::OFF.due(at(0, 0, 0), at(40, 0, 0)), None);
        assert_eq!(SnapSchedule::OFF.next_due(at(0, 0, 0)), None);
    }

    #[test]
    fn kinds_survive_their_record_codes() {
        for kind in SnapKind::ALL {
            assert_eq!(SnapKind::from_code(kind.code()), Some(kind));
        }
        assert_eq!(SnapKind::from_code(3), None);
        assert_eq!(SnapKind::Hourly.name(0), "hourly.0");
    }
}
