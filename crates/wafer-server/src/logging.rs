//! The server's log: `tracing` events on standard error, one line each,
//! stamped with UTC time to the millisecond and filtered by level.
//!
//! The server logs what an administrator needs to follow it (start, mount,
//! degraded disks, connections, refused clients, admin changes, RAID group
//! state changes, reconstructions and scrubs as they start and end, the
//! aggregate going offline, shutdown); per-request errors go back to the
//! client and into the counters instead, so a misbehaving client cannot
//! flood the log. The exception is a read that RAID could not bring back,
//! which is data lost: the first hundred are named, the rest counted.
//!
//! Levels: `error` for what loses data or service (a failed aggregate, an
//! unrecoverable read, a write the host refused), `warn` for what the
//! administrator should act on while service goes on (a failed disk, a
//! refused client, open permissions), `info` for the rest. `RUST_LOG`
//! filters them with `tracing-subscriber`'s `EnvFilter` directives (`warn`,
//! `info,wafer_server::admission=warn`, ...); unset, it is `info`. Each line
//! names its module (the event's target), which is what a directive matches.
//! [`LogFormat::Json`] writes one JSON object per line instead of text.
//!
//! The engine crates log nothing: they are sans-I/O, and the server logs
//! what they report.

use std::fmt;

use tracing_subscriber::EnvFilter;
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::FormatTime;

use crate::clock::unix_now_ns;

/// How log lines are written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LogFormat {
    /// `2026-05-01T12:34:56.789Z  INFO wafer_server::server: created ...`
    #[default]
    Text,
    /// `{"timestamp":"…","level":"INFO","message":"…","target":"…"}`
    Json,
}

/// Why the log could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum LoggingError {
    /// `RUST_LOG` holds a directive `EnvFilter` cannot parse.
    #[error("RUST_LOG: {0}")]
    Filter(#[from] tracing_subscriber::filter::FromEnvError),
    /// A global subscriber was already installed.
    #[error("the log was already set up: {0}")]
    Installed(String),
}

/// Installs the process's log: events at the levels `RUST_LOG` lets
/// through (`info` and above when it is unset or empty), to standard error,
/// as `format` says.
pub fn init(format: LogFormat) -> Result<(), LoggingError> {
    let filter = EnvFilter::builder()
        .with_default_directive(LevelFilter::INFO.into())
        .from_env()?;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_timer(UtcMillis);
    let installed = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
    installed.map_err(|error| LoggingError::Installed(error.to_string()))
}

/// The timestamp of each line: UTC, to the millisecond.
struct UtcMillis;

impl FormatTime for UtcMillis {
    fn format_time(&self, w: &mut Writer<'_>) -> fmt::Result {
        w.write_str(&utc_timestamp(unix_now_ns()))
    }
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ` for nanoseconds since the Unix epoch.
fn utc_timestamp(unix_ns: u64) -> String {
    let millis = unix_ns / 1_000_000;
    let seconds = millis / 1000;
    let (year, month, day) = civil_from_days(seconds / 86_400);
    let second_of_day = seconds % 86_400;
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        second_of_day / 3600,
        second_of_day / 60 % 60,
        second_of_day % 60,
        millis % 1000
    )
}

/// The proleptic Gregorian date of a day counted from 1970-01-01 (Howard
/// Hinnant's `civil_from_days`, restricted to days after the epoch).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let shifted = days + 719_468; // days since 0000-03-01
    let era = shifted / 146_097;
    let day_of_era = shifted % 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153; // 0 = March
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    };
    let year = era * 400 + year_of_era + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_match_known_dates() {
        assert_eq!(utc_timestamp(0), "1970-01-01T00:00:00.000Z");
        // 2000-02-29 12:34:56.789 UTC, a leap day in a century leap year.
        assert_eq!(
            utc_timestamp(951_827_696_789_000_000),
            "2000-02-29T12:34:56.789Z"
        );
        // 2024-12-31 23:59:59 UTC.
        assert_eq!(
            utc_timestamp(1_735_689_599_000_000_000),
            "2024-12-31T23:59:59.000Z"
        );
    }
}
