//! The named drives of `drives.toml`: parsed, checked, and built into models.
//!
//! `drives.toml` is embedded in the binary and parsed when the lab starts.
//! Each drive is a table `[hdd.NAME]`, `[ssd.NAME]` or `[nvram.NAME]`, and
//! every number in it carries its source in a comment: a datasheet or paper
//! named in `docs/research/device-models.md`, or `[INF]` with the reasoning. The parameters
//! describe a drive, never a scenario: no experiment may tune them.
//!
//! A file that does not parse, or a drive whose numbers cannot describe a
//! drive (a negative rate, an average seek outside what Lee's curve can fit),
//! is refused with a [`ParamError`] naming the drive and the field.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::Device;
use crate::hdd::geometry::blocks_per_track;
use crate::hdd::{Hdd, HddModel, HddOptions};
use crate::nvram::{Nvram, NvramModel};
use crate::ssd::{Ssd, SsdModel};

/// The drive file built into the lab.
pub const DRIVES_TOML: &str = include_str!("../drives.toml");

/// A datasheet's three seek times for one operation, without controller
/// overhead.
#[derive(Clone, Copy, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeekSpec {
    /// Single-track (one-cylinder) seek.
    pub track_ms: f64,
    /// Average seek over random cylinder pairs.
    pub average_ms: f64,
    /// Full-stroke seek.
    pub full_ms: f64,
}

/// A hard disk's datasheet.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HddSpec {
    /// What the drive is modelled on.
    pub model: String,
    /// Formatted capacity in SI gigabytes.
    pub capacity_gb: f64,
    /// Spindle speed.
    pub rpm: u32,
    /// Recording surfaces (heads).
    pub surfaces: u32,
    /// Recording zones, outer to inner.
    pub zones: u32,
    /// User-data media rate at the outer edge, SI MB/s.
    pub media_rate_outer_mb_s: f64,
    /// User-data media rate at the inner edge, SI MB/s.
    pub media_rate_inner_mb_s: f64,
    /// Read seek times.
    pub seek_read: SeekSpec,
    /// Write seek times (including the write settle).
    pub seek_write: SeekSpec,
    /// Switching heads within a cylinder, for a read.
    pub head_switch_ms: f64,
    /// Controller time per command.
    pub command_overhead_ms: f64,
    /// Interface rate, SI MB/s.
    pub interface_mb_s: f64,
    /// Commands the drive reorders among.
    pub queue_depth_max: u32,
    /// Buffer segments.
    pub cache_segments: u32,
    /// Size of one buffer segment.
    pub cache_segment_kib: u32,
    /// How far the drive reads ahead of a read.
    pub read_ahead_kib: u32,
}

/// An SSD's datasheet and flash parameters.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SsdSpec {
    /// What the drive is modelled on.
    pub model: String,
    /// User capacity in SI gigabytes.
    pub capacity_gb: f64,
    /// Host interface rate, SI MB/s.
    pub interface_mb_s: f64,
    /// Rated random 4 KiB read IOPS at high queue depth.
    pub rated_read_iops: f64,
    /// Rated random 4 KiB write IOPS at high queue depth.
    pub rated_write_iops: f64,
    /// Flash channels.
    pub channels: u32,
    /// Dies on each channel.
    pub dies_per_channel: u32,
    /// Planes per die (multi-plane operations).
    pub planes_per_die: u32,
    /// Flash page size.
    pub page_kib: u32,
    /// Pages per erase block.
    pub pages_per_block: u32,
    /// Page read time (tR).
    pub read_us: f64,
    /// Page program time (tPROG).
    pub program_us: f64,
    /// Block erase time (tBERS).
    pub erase_ms: f64,
    /// Channel rate in mega-transfers per second, one byte wide.
    pub channel_mt_s: f64,
    /// Steady-state write amplification under random writes.
    pub write_amplification: f64,
    /// Power-safe write buffer.
    pub write_buffer_kib: u32,
}

/// An NVRAM card's parameters.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NvramSpec {
    /// What the card is modelled on.
    pub model: String,
    /// Capacity.
    pub capacity_mib: u32,
    /// Fixed latency per append.
    pub latency_us: f64,
    /// Transfer bandwidth, SI MB/s.
    pub bandwidth_mb_s: f64,
}

/// The file's shape: one table per kind of device, one entry per drive.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DriveFile {
    #[serde(default)]
    hdd: BTreeMap<String, HddSpec>,
    #[serde(default)]
    ssd: BTreeMap<String, SsdSpec>,
    #[serde(default)]
    nvram: BTreeMap<String, NvramSpec>,
}

/// Why a drive file was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ParamError {
    /// The file is not valid TOML, or has a table the lab does not know,
    /// outside any drive.
    #[error("drive file line {line}: {message}")]
    Syntax {
        /// Line of the error, from 1.
        line: usize,
        /// The parser's message.
        message: String,
    },
    /// A drive's field is missing, unknown, or of the wrong type.
    #[error("drive `{drive}`, field `{field}` (line {line}): {message}")]
    Field {
        /// The drive's name.
        drive: String,
        /// The field, as written in the file.
        field: String,
        /// Line of the error, from 1.
        line: usize,
        /// The parser's message.
        message: String,
    },
    /// A drive's field has a value no drive can have.
    #[error("drive `{drive}`, field `{field}`: {reason}")]
    Invalid {
        /// The drive's name.
        drive: String,
        /// The field.
        field: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Two drives share a name.
    #[error("drive `{drive}` is defined more than once")]
    Duplicate {
        /// The name.
        drive: String,
    },
}

/// A drive of the catalog, built into its model.
#[derive(Clone, Debug, PartialEq)]
pub enum Drive {
    /// A hard disk.
    Hdd(HddModel),
    /// A flash SSD.
    Ssd(SsdModel),
    /// An NVRAM card.
    Nvram(NvramModel),
}

impl Drive {
    /// The drive's name.
    pub fn name(&self) -> &str {
        match self {
            Drive::Hdd(model) => model.name(),
            Drive::Ssd(model) => model.name(),
            Drive::Nvram(model) => model.name(),
        }
    }

    /// A new device of this type, idle at time 0, in its default configuration
    /// (for a disk: SPTF, write-back off).
    pub fn device(&self) -> Box<dyn Device> {
        match self {
            Drive::Hdd(model) => Box::new(Hdd::new(model.clone(), HddOptions::default())),
            Drive::Ssd(model) => Box::new(Ssd::new(model.clone())),
            Drive::Nvram(model) => Box::new(Nvram::new(model.clone())),
        }
    }
}

/// The named drives.
#[derive(Clone, Debug, PartialEq)]
pub struct Catalog {
    drives: BTreeMap<String, Drive>,
}

impl Catalog {
    /// The drives of the built-in `drives.toml`.
    pub fn builtin() -> Result<Catalog, ParamError> {
        Catalog::parse(DRIVES_TOML)
    }

    /// Parses and checks a drive file.
    pub fn parse(text: &str) -> Result<Catalog, ParamError> {
        let file: DriveFile = toml::from_str(text).map_err(|error| locate(text, &error))?;
        let mut drives = BTreeMap::new();
        let mut add = |name: &String, drive: Drive| match drives.insert(name.clone(), drive) {
            None => Ok(()),
            Some(_) => Err(ParamError::Duplicate {
                drive: name.clone(),
            }),
        };
        for (name, spec) in &file.hdd {
            check_hdd(&Checker { drive: name }, spec)?;
            add(name, Drive::Hdd(HddModel::new(name, spec)))?;
        }
        for (name, spec) in &file.ssd {
            check_ssd(&Checker { drive: name }, spec)?;
            add(name, Drive::Ssd(SsdModel::new(name, spec)))?;
        }
        for (name, spec) in &file.nvram {
            check_nvram(&Checker { drive: name }, spec)?;
            add(name, Drive::Nvram(NvramModel::new(name, spec)))?;
        }
        Ok(Catalog { drives })
    }

    /// The drive called `name`.
    pub fn get(&self, name: &str) -> Option<&Drive> {
        self.drives.get(name)
    }

    /// Every drive, by name.
    pub fn drives(&self) -> impl Iterator<Item = &Drive> {
        self.drives.values()
    }
}

/// Turns a parser error into a [`ParamError`] that names the drive and field,
/// found from where in the text the error is.
fn locate(text: &str, error: &toml::de::Error) -> ParamError {
    let message = error.message().to_string();
    let at = error.span().map_or(0, |span| span.start).min(text.len());
    let line = text[..at].matches('\n').count() + 1;
    let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let line_end = text[at..].find('\n').map_or(text.len(), |i| at + i);
    let drive = drive_above(&text[..line_end]);
    let field = field_of(text[line_start..line_end].trim(), &message);
    match (drive, field) {
        (Some(drive), Some(field)) => ParamError::Field {
            drive: drive.to_string(),
            field,
            line,
            message,
        },
        _ => ParamError::Syntax { line, message },
    }
}

/// The drive of the last table header in `text`: `NAME` of `[kind.NAME]`.
fn drive_above(text: &str) -> Option<&str> {
    let header = text
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| l.starts_with('['))?;
    let table = header.trim_start_matches('[').split(']').next()?;
    table.split('.').nth(1)
}

/// The field an error is about: the key of its line, or the one its message
/// names (a missing field is reported at its table's header).
fn field_of(line: &str, message: &str) -> Option<String> {
    match line.split_once('=') {
        Some((key, _)) if !line.starts_with('[') => Some(key.trim().to_string()),
        _ => message.split('`').nth(1).map(str::to_string),
    }
}

/// Value checks for one drive, each naming the field it refuses.
struct Checker<'a> {
    drive: &'a str,
}

impl Checker<'_> {
    fn require(
        &self,
        holds: bool,
        field: &str,
        reason: impl FnOnce() -> String,
    ) -> Result<(), ParamError> {
        match holds {
            true => Ok(()),
            false => Err(ParamError::Invalid {
                drive: self.drive.to_string(),
                field: field.to_string(),
                reason: reason(),
            }),
        }
    }

    fn positive(&self, field: &str, value: f64) -> Result<(), ParamError> {
        self.require(value.is_finite() && value > 0.0, field, || {
            format!("{value} is not a positive number")
        })
    }

    fn at_least(&self, field: &str, value: u32, least: u32) -> Result<(), ParamError> {
        self.require(value >= least, field, || {
            format!("{value} is less than {least}")
        })
    }

    /// Lee's curve rises monotonically from the track to the full-stroke time
    /// only if the average lies where its square-root term is non-negative,
    /// `average ≥ (2·track + full)/3`, and its slope at full stroke is too,
    /// `2·track − 7.5·average + 5.5·full ≥ 0`.
    fn seek(&self, field: &str, seek: &SeekSpec) -> Result<(), ParamError> {
        let (track, average, full) = (seek.track_ms, seek.average_ms, seek.full_ms);
        self.positive(&format!("{field}.track_ms"), track)?;
        let average_field = format!("{field}.average_ms");
        self.require(track < average && average < full, &average_field, || {
            format!("need track {track} < average {average} < full {full} ms")
        })?;
        self.require(3.0 * average >= 2.0 * track + full, &average_field, || {
            format!("{average} ms is below (2·track + full)/3: Lee's curve would dip")
        })?;
        let slope_at_full_stroke = 2.0 * track - 7.5 * average + 5.5 * full;
        self.require(slope_at_full_stroke >= 0.0, &average_field, || {
            format!(
                "{average} ms is too close to the full stroke's {full} ms: Lee's curve would fall"
            )
        })
    }
}

fn check_hdd(check: &Checker, spec: &HddSpec) -> Result<(), ParamError> {
    check.positive("capacity_gb", spec.capacity_gb)?;
    check.at_least("rpm", spec.rpm, 1)?;
    check.at_least("surfaces", spec.surfaces, 1)?;
    check.at_least("zones", spec.zones, 1)?;
    check.positive("media_rate_outer_mb_s", spec.media_rate_outer_mb_s)?;
    check.positive("media_rate_inner_mb_s", spec.media_rate_inner_mb_s)?;
    let inner = blocks_per_track(spec.media_rate_inner_mb_s, spec.rpm);
    check.require(inner >= 2, "media_rate_inner_mb_s", || {
        format!(
            "{} MB/s holds under two 4 KiB blocks per track",
            spec.media_rate_inner_mb_s
        )
    })?;
    check.require(
        spec.media_rate_inner_mb_s <= spec.media_rate_outer_mb_s,
        "media_rate_inner_mb_s",
        || "the inner zone cannot be faster than the outer".to_string(),
    )?;
    check.seek("seek_read", &spec.seek_read)?;
    check.seek("seek_write", &spec.seek_write)?;
    check.positive("head_switch_ms", spec.head_switch_ms)?;
    check.positive("command_overhead_ms", spec.command_overhead_ms)?;
    check.positive("interface_mb_s", spec.interface_mb_s)?;
    check.require(
        spec.interface_mb_s >= spec.media_rate_outer_mb_s,
        "interface_mb_s",
        || {
            "the model overlaps media and interface transfers, so the interface must be the faster"
                .to_string()
        },
    )?;
    check.at_least("queue_depth_max", spec.queue_depth_max, 1)?;
    check.at_least("cache_segments", spec.cache_segments, 2)?;
    check.at_least("cache_segment_kib", spec.cache_segment_kib, 4)?;
    check.require(
        spec.read_ahead_kib <= spec.cache_segment_kib,
        "read_ahead_kib",
        || "reading ahead further than a segment holds".to_string(),
    )
}

fn check_ssd(check: &Checker, spec: &SsdSpec) -> Result<(), ParamError> {
    check.positive("capacity_gb", spec.capacity_gb)?;
    check.positive("interface_mb_s", spec.interface_mb_s)?;
    check.positive("rated_read_iops", spec.rated_read_iops)?;
    check.positive("rated_write_iops", spec.rated_write_iops)?;
    check.at_least("channels", spec.channels, 1)?;
    check.at_least("dies_per_channel", spec.dies_per_channel, 1)?;
    check.at_least("planes_per_die", spec.planes_per_die, 1)?;
    check.at_least("page_kib", spec.page_kib, 4)?;
    check.require(spec.page_kib % 4 == 0, "page_kib", || {
        "a page must hold whole 4 KiB blocks".to_string()
    })?;
    check.at_least("pages_per_block", spec.pages_per_block, 1)?;
    check.positive("read_us", spec.read_us)?;
    check.positive("program_us", spec.program_us)?;
    check.positive("erase_ms", spec.erase_ms)?;
    check.positive("channel_mt_s", spec.channel_mt_s)?;
    check.require(
        spec.write_amplification >= 1.0,
        "write_amplification",
        || {
            format!(
                "{} is below 1: every host write is programmed at least once",
                spec.write_amplification
            )
        },
    )?;
    check.at_least("write_buffer_kib", spec.write_buffer_kib, 4)
}

fn check_nvram(check: &Checker, spec: &NvramSpec) -> Result<(), ParamError> {
    check.at_least("capacity_mib", spec.capacity_mib, 1)?;
    check.positive("latency_us", spec.latency_us)?;
    check.positive("bandwidth_mb_s", spec.bandwidth_mb_s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_drive_parses_and_builds() {
        let catalog = Catalog::builtin().expect("drives.toml parses");
        for name in [
            "fc15k-144g",
            "sas10k-450g",
            "sata7k-1t",
            "sata7k-3t",
            "ssd-200g",
        ] {
            let drive = catalog
                .get(name)
                .unwrap_or_else(|| panic!("{name} is in drives.toml"));
            assert_eq!(drive.name(), name);
            assert!(drive.device().capacity_blocks() > 0);
        }
        assert!(catalog.drives().any(|d| matches!(d, Drive::Nvram(_))));
    }

    /// A one-drive file with `rpm` replaced by `line`.
    fn with_rpm_line(line: &str) -> String {
        let hdd = DRIVES_TOML
            .split("\n[")
            .find(|t| t.starts_with("hdd.fc15k-144g]"))
            .unwrap();
        let table = format!("[{hdd}");
        let rpm = table.lines().find(|l| l.starts_with("rpm")).unwrap();
        table.replace(rpm, line)
    }

    #[test]
    fn the_negative_control_names_the_drive_and_field() {
        assert!(
            Catalog::parse(&with_rpm_line("rpm = 15000")).is_ok(),
            "the control itself parses"
        );
        match Catalog::parse(&with_rpm_line("rpm = \"fast\"")) {
            Err(ParamError::Field { drive, field, .. }) => {
                assert_eq!((drive.as_str(), field.as_str()), ("fc15k-144g", "rpm"));
            }
            other => panic!("a string rpm was not refused by field: {other:?}"),
        }
        match Catalog::parse(&with_rpm_line("")) {
            Err(ParamError::Field { drive, field, .. }) => {
                assert_eq!((drive.as_str(), field.as_str()), ("fc15k-144g", "rpm"));
            }
            other => panic!("a missing rpm was not refused by field: {other:?}"),
        }
        match Catalog::parse(&with_rpm_line("rpm = 15000\nrmp = 1")) {
            Err(ParamError::Field { field, .. }) => assert_eq!(field, "rmp"),
            other => panic!("an unknown field was not refused: {other:?}"),
        }
    }

    #[test]
    fn impossible_values_are_refused_by_field() {
        let table = with_rpm_line("rpm = 15000");
        let average = table
            .lines()
            .find(|l| l.starts_with("seek_read.average_ms"))
            .unwrap();
        let dipping = table.replace(average, "seek_read.average_ms = 0.1");
        match Catalog::parse(&dipping) {
            Err(ParamError::Invalid { drive, field, .. }) => {
                assert_eq!(
                    (drive.as_str(), field.as_str()),
                    ("fc15k-144g", "seek_read.average_ms")
                );
            }
            other => panic!("an average below the track seek was accepted: {other:?}"),
        }
        let outer = table
            .lines()
            .find(|l| l.starts_with("media_rate_outer_mb_s"))
            .unwrap();
        let negative = table.replace(outer, "media_rate_outer_mb_s = -125");
        assert!(matches!(
            Catalog::parse(&negative),
            Err(ParamError::Invalid { field, .. }) if field == "media_rate_outer_mb_s"
        ));
        let twice = format!("{table}\n[ssd.fc15k-144g]\n{}", ssd_table_body());
        assert_eq!(
            Catalog::parse(&twice),
            Err(ParamError::Duplicate {
                drive: "fc15k-144g".into()
            })
        );
    }

    fn ssd_table_body() -> String {
        let ssd = DRIVES_TOML
            .split("\n[")
            .find(|t| t.starts_with("ssd.ssd-200g]"))
            .unwrap();
        ssd.split_once('\n').unwrap().1.to_string()
    }

    #[test]
    fn bad_toml_outside_a_drive_is_a_syntax_error() {
        assert!(matches!(
            Catalog::parse("= 3"),
            Err(ParamError::Syntax { line: 1, .. })
        ));
    }
}
