//! A subset of fio's job files (device-models.md §3.2), compiled to a
//! [`Workload`].
//!
//! The file is fio's INI dialect: `[name]` starts a job, `[global]` sets
//! defaults for the jobs, `key=value` or a bare `key` sets an option, and
//! lines starting with `;` or `#` are comments. The lab runs one job (with
//! `numjobs` clones, each a worker); a file with several jobs is refused.
//!
//! Options understood: `rw`/`readwrite` (`read`, `write`, `randread`,
//! `randwrite`, `rw`/`readwrite`, `randrw`), `rwmixread`, `rwmixwrite`,
//! `percentage_random`, `bs`/`blocksize`, `bssplit` (`4k/60:64k/40`; a blank
//! share splits what is left evenly), `blockalign`/`ba` (default: the
//! smallest block size, as fio aligns random I/O to `bs`), `iodepth`,
//! `numjobs`, `size` (per job), `offset`, `offset_increment` (clone `n`
//! starts at `offset + n * offset_increment`; without it every clone starts
//! at `offset`, as fio's do on one file), `random_distribution` (`random`, `zipf:θ`),
//! `runtime`, `ramp_time`, `name`, and `rate_iops` with `rate_process=poisson`
//! (an offered load: each job's I/Os arrive at `rate_iops` a second as a
//! Poisson process, so the workload's is `rate_iops × numjobs`; fio's
//! default `linear` process and per-direction rates are refused). Options that change nothing in the lab are
//! accepted and ignored: `ioengine`, `direct=1`, `filename`, `time_based`
//! (the lab always runs for the runtime), `group_reporting`, `thread`,
//! `description`, `randrepeat`, `norandommap`, `invalidate`. Anything else,
//! and any value the lab cannot honour (per-direction `bs=4k,8k`, sizes in
//! percent, `pareto`, `normal` or `zoned` distributions, `direct=0`), is
//! refused by name rather than silently run differently.
//!
//! Sizes follow fio's default `kb_base=1024`: `4k` is 4096 bytes, `1m` is
//! 2^20. fio reads `KiB`-style suffixes in that mode as powers of 1000, a
//! trap the lab refuses rather than repeats. Times are seconds unless
//! suffixed `us`, `ms`, `s`, `m`, `h` or `d`.

use std::collections::BTreeMap;

use wafer_core::units::Duration;

use super::{AccessLine, Distribution, Prepare, Region, Timing, Workload, WorkloadError};

/// Options read and acted on.
const UNDERSTOOD: [&str; 21] = [
    "rw",
    "readwrite",
    "rwmixread",
    "rwmixwrite",
    "percentage_random",
    "bs",
    "blocksize",
    "bssplit",
    "blockalign",
    "ba",
    "iodepth",
    "numjobs",
    "size",
    "offset",
    "offset_increment",
    "random_distribution",
    "runtime",
    "ramp_time",
    "name",
    "rate_iops",
    "rate_process",
];

/// Options accepted and ignored: they change nothing the lab models.
const IGNORED: [&str; 10] = [
    "ioengine",
    "direct",
    "filename",
    "time_based",
    "group_reporting",
    "thread",
    "description",
    "randrepeat",
    "norandommap",
    "invalidate",
];

/// fio's default block size.
const BS_DEFAULT: u64 = 4096;

/// fio's default read share of a mixed workload.
const RWMIXREAD_DEFAULT: u32 = 50;

/// One fio job, its `[global]` options merged under its own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FioJob {
    /// The job's section name (or its `name=`).
    pub name: String,
    /// Every option, by name; a bare flag has an empty value.
    pub options: BTreeMap<String, String>,
}

/// Why a job file cannot run.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FioError {
    /// A line is neither a section, an option nor a comment.
    #[error("job file line {line}: cannot read `{text}`")]
    Syntax {
        /// Line number, from 1.
        line: usize,
        /// The line.
        text: String,
    },
    /// An option comes before any section.
    #[error("job file line {line}: option `{option}` outside any [section]")]
    Orphan {
        /// Line number, from 1.
        line: usize,
        /// The option.
        option: String,
    },
    /// The file has no job, or more than one.
    #[error("the lab runs exactly one fio job; the file has {found}")]
    JobCount {
        /// The job sections found.
        found: usize,
    },
    /// The option is one the lab does not implement.
    #[error("fio option `{option}` is not supported by the lab")]
    Unsupported {
        /// The option.
        option: String,
    },
    /// The option's value cannot be honoured.
    #[error("fio option `{option}={value}`: {reason}")]
    Value {
        /// The option.
        option: String,
        /// Its value.
        value: String,
        /// Why.
        reason: String,
    },
    /// A required option is missing.
    #[error("fio option `{option}` is required: {reason}")]
    Missing {
        /// The option.
        option: String,
        /// Why it is needed.
        reason: String,
    },
    /// The options make a workload that cannot run.
    #[error("fio job: {0}")]
    Workload(#[from] WorkloadError),
}

impl FioJob {
    /// Parses a job file with one job.
    pub fn parse(text: &str) -> Result<FioJob, FioError> {
        let sections = sections(text)?;
        let global = sections.iter().find(|(name, _)| name == "global");
        let jobs: Vec<&Section> = sections
            .iter()
            .filter(|(name, _)| name != "global")
            .collect();
        let [(name, own)] = jobs.as_slice() else {
            return Err(FioError::JobCount { found: jobs.len() });
        };
        let mut options = global
            .map(|(_, options)| options.clone())
            .unwrap_or_default();
        options.extend(own.iter().map(|(k, v)| (k.clone(), v.clone())));
        FioJob::from_options(name, options)
    }

    /// A job from options already split into names and values; aliases
    /// (`readwrite`, `blocksize`, `ba`) take their option's main name.
    pub fn from_options(name: &str, given: BTreeMap<String, String>) -> Result<FioJob, FioError> {
        let mut options = BTreeMap::new();
        for (option, value) in given {
            if !UNDERSTOOD.contains(&option.as_str()) && !IGNORED.contains(&option.as_str()) {
                return Err(FioError::Unsupported { option });
            }
            let main = canonical(&option);
            if let Some(earlier) = options.insert(main.to_string(), value.clone()) {
                let reason = format!("`{main}` is already set, to `{earlier}`");
                return Err(value_error(&option, &value, &reason));
            }
        }
        let name = options
            .get("name")
            .cloned()
            .unwrap_or_else(|| name.to_string());
        let job = FioJob { name, options };
        if let Some(direct) = job.options.get("direct").filter(|v| v.as_str() == "0") {
            return Err(value_error(
                "direct",
                direct,
                "the lab models no host page cache; use direct=1",
            ));
        }
        Ok(job)
    }

    /// The workload, timed by the job's `runtime` and `ramp_time`.
    pub fn workload(&self) -> Result<Workload, FioError> {
        let runtime = self.runtime()?.ok_or_else(|| FioError::Missing {
            option: "runtime".into(),
            reason: "the lab runs time-based".into(),
        })?;
        let timing = Timing {
            ramp: self.ramp_time()?.unwrap_or_default(),
            segment: runtime,
            segments: 1,
        };
        self.workload_timed(timing)
    }

    /// The job's `runtime`, if set.
    pub fn runtime(&self) -> Result<Option<Duration>, FioError> {
        self.time("runtime")
    }

    /// The job's `ramp_time`, if set.
    pub fn ramp_time(&self) -> Result<Option<Duration>, FioError> {
        self.time("ramp_time")
    }

    /// The workload with `timing` in place of the job's own.
    pub fn workload_timed(&self, timing: Timing) -> Result<Workload, FioError> {
        let (read_percent, random_percent) = self.direction()?;
        let sizes = self.sizes()?;
        let smallest = sizes
            .iter()
            .map(|&(size, _)| size)
            .min()
            .unwrap_or(BS_DEFAULT);
        let align_bytes = self.size_option("blockalign")?.unwrap_or(smallest);
        let lines = sizes
            .into_iter()
            .map(|(size_bytes, percent)| AccessLine {
                size_bytes,
                percent,
                read_percent,
                random_percent,
                align_bytes,
            })
            .collect();
        let workload = Workload {
            name: self.name.clone(),
            lines,
            workers: self.count("numjobs")?,
            outstanding_per_worker: self.count("iodepth")?,
            region: Region {
                offset_bytes: self.size_option("offset")?.unwrap_or(0),
                length_bytes: self.size_option("size")?,
                offset_increment_bytes: self.size_option("offset_increment")?.unwrap_or(0),
                lun_active_percent: None,
            },
            distribution: self.distribution()?,
            timing,
            prepare: Prepare::default(),
            offered_iops: self.offered_iops()?,
            large: None,
        };
        workload.check()?;
        Ok(workload)
    }

    /// The offered load of `rate_iops` (per job, as fio's is) with
    /// `rate_process=poisson`: every job's rate together.
    fn offered_iops(&self) -> Result<Option<u32>, FioError> {
        let process = self.options.get("rate_process").map(String::as_str);
        let Some(value) = self.options.get("rate_iops") else {
            return match process {
                Some(process) => Err(value_error(
                    "rate_process",
                    process,
                    "set without rate_iops",
                )),
                None => Ok(None),
            };
        };
        match process {
            Some("poisson") => {}
            Some(other) => {
                let reason =
                    "the lab's offered load arrives as a Poisson process: rate_process=poisson";
                return Err(value_error("rate_process", other, reason));
            }
            None => {
                return Err(FioError::Missing {
                    option: "rate_process".into(),
                    reason: "the lab's offered load arrives as a Poisson process (rate_process=poisson), not fio's default linear one".into(),
                });
            }
        }
        let per_job = value.parse::<u32>().ok().filter(|&iops| iops >= 1);
        let per_job = per_job.ok_or_else(|| {
            value_error(
                "rate_iops",
                value,
                "one whole number of I/Os a second, at least 1",
            )
        })?;
        let total = per_job.checked_mul(self.count("numjobs")?);
        total
            .map(Some)
            .ok_or_else(|| value_error("rate_iops", value, "times numjobs is too many"))
    }

    /// The option `name` if it is set, and its value.
    fn option(&self, name: &str) -> Option<(&str, &str)> {
        self.options
            .get_key_value(name)
            .map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// (read %, random %) from `rw`, `rwmixread`/`rwmixwrite` and
    /// `percentage_random`.
    fn direction(&self) -> Result<(u32, u32), FioError> {
        let (option, rw) = self.option("rw").unwrap_or(("rw", "read"));
        let (random, mixed, reads) = match rw {
            "read" => (false, false, true),
            "write" => (false, false, false),
            "randread" => (true, false, true),
            "randwrite" => (true, false, false),
            "rw" | "readwrite" => (false, true, true),
            "randrw" => (true, true, true),
            _ => {
                let reason = "the lab runs read, write, randread, randwrite, rw/readwrite and randrw, without a `:` suffix";
                return Err(value_error(option, rw, reason));
            }
        };
        let read_percent = match (mixed, reads) {
            (true, _) => self.mix()?,
            (false, true) => 100,
            (false, false) => 0,
        };
        let random_percent = match random {
            true => self.percent("percentage_random")?.unwrap_or(100),
            false => 0,
        };
        Ok((read_percent, random_percent))
    }

    /// The read share of a mixed workload.
    fn mix(&self) -> Result<u32, FioError> {
        let read = self.percent("rwmixread")?;
        let write = self.percent("rwmixwrite")?;
        match (read, write) {
            (Some(read), Some(write)) if read + write != 100 => {
                let value = format!("{read}, rwmixwrite={write}");
                Err(value_error(
                    "rwmixread",
                    &value,
                    "the two must add up to 100",
                ))
            }
            (Some(read), _) => Ok(read),
            (None, Some(write)) => Ok(100 - write),
            (None, None) => Ok(RWMIXREAD_DEFAULT),
        }
    }

    /// (bytes, share) per block size, from `bssplit` or `bs`.
    fn sizes(&self) -> Result<Vec<(u64, u32)>, FioError> {
        if let Some(split) = self.options.get("bssplit") {
            return parse_bssplit(split);
        }
        let bs = self.size_option("bs")?.unwrap_or(BS_DEFAULT);
        Ok(vec![(bs, 100)])
    }

    fn size_option(&self, name: &str) -> Result<Option<u64>, FioError> {
        self.parsed(name, parse_size)
    }

    fn time(&self, option: &str) -> Result<Option<Duration>, FioError> {
        self.parsed(option, parse_time)
    }

    /// Option `name` through `parse`, if it is given.
    fn parsed<T>(
        &self,
        name: &str,
        parse: impl Fn(&str) -> Result<T, String>,
    ) -> Result<Option<T>, FioError> {
        let Some((option, value)) = self.option(name) else {
            return Ok(None);
        };
        parse(value)
            .map(Some)
            .map_err(|reason| value_error(option, value, &reason))
    }

    fn percent(&self, option: &str) -> Result<Option<u32>, FioError> {
        let Some(value) = self.options.get(option) else {
            return Ok(None);
        };
        match value.parse::<u32>() {
            Ok(percent) if percent <= 100 => Ok(Some(percent)),
            _ => Err(value_error(option, value, "a whole percentage, 0 to 100")),
        }
    }

    /// `numjobs` or `iodepth`: at least one, default one.
    fn count(&self, option: &str) -> Result<u32, FioError> {
        let Some(value) = self.options.get(option) else {
            return Ok(1);
        };
        match value.parse::<u32>() {
            Ok(count) if count >= 1 => Ok(count),
            _ => Err(value_error(option, value, "a whole number, at least 1")),
        }
    }

    fn distribution(&self) -> Result<Distribution, FioError> {
        let option = "random_distribution";
        let Some(value) = self.options.get(option) else {
            return Ok(Distribution::Uniform);
        };
        let (kind, parameter) = value.split_once(':').unwrap_or((value, ""));
        match kind {
            "random" if parameter.is_empty() => Ok(Distribution::Uniform),
            "zipf" => match parameter.parse::<f64>() {
                Ok(theta) if theta > 0.0 && theta.is_finite() => Ok(Distribution::Zipf { theta }),
                _ => Err(value_error(
                    option,
                    value,
                    "zipf:θ with θ a positive number, no center",
                )),
            },
            _ => Err(value_error(
                option,
                value,
                "the lab implements `random` and `zipf:θ` only",
            )),
        }
    }
}

/// The main name of an option that has aliases.
fn canonical(option: &str) -> &str {
    match option {
        "readwrite" => "rw",
        "blocksize" => "bs",
        "ba" => "blockalign",
        other => other,
    }
}

fn value_error(option: &str, value: &str, reason: &str) -> FioError {
    FioError::Value {
        option: option.to_string(),
        value: value.to_string(),
        reason: reason.to_string(),
    }
}

/// A section's name and its options.
type Section = (String, BTreeMap<String, String>);

/// The file's sections in order, each with its options.
fn sections(text: &str) -> Result<Vec<Section>, FioError> {
    let mut sections: Vec<Section> = Vec::new();
    for (index, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with(';') || line.starts_with('#') {
            continue;
        }
        if let Some(name) = line
            .strip_prefix('[')
            .and_then(|rest| rest.strip_suffix(']'))
        {
            sections.push((name.trim().to_string(), BTreeMap::new()));
            continue;
        }
        let (key, value) = line.split_once('=').unwrap_or((line, ""));
        let key = key.trim();
        if key.is_empty() || key.contains(char::is_whitespace) {
            return Err(FioError::Syntax {
                line: index + 1,
                text: raw.to_string(),
            });
        }
        let Some((_, options)) = sections.last_mut() else {
            return Err(FioError::Orphan {
                line: index + 1,
                option: key.to_string(),
            });
        };
        options.insert(canonical(key).to_string(), value.trim().to_string());
    }
    Ok(sections)
}

/// A fio size in bytes: digits, then optionally `k`, `m`, `g`, `t` or `p`
/// (any case, optionally followed by `b`) for powers of 1024.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let lower = text.trim().to_ascii_lowercase();
    if lower.ends_with('%') {
        return Err("sizes in percent of the device are not supported; give bytes".into());
    }
    if lower.contains(',') {
        return Err("per-direction values (read,write) are not supported".into());
    }
    if lower.contains('i') {
        return Err(
            "fio reads `KiB`-style suffixes as powers of 1000 by default; write 4k for 4096".into(),
        );
    }
    let digits_end = lower
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(lower.len());
    let (digits, suffix) = lower.split_at(digits_end);
    let number: u64 = digits
        .parse()
        .map_err(|_| format!("`{text}` is not a whole number of bytes with a k/m/g/t/p suffix"))?;
    let power = match suffix.trim_end_matches('b') {
        "" => 0,
        "k" => 1,
        "m" => 2,
        "g" => 3,
        "t" => 4,
        "p" => 5,
        _ => return Err(format!("unknown size suffix in `{text}`")),
    };
    number
        .checked_mul(1u64 << (10 * power))
        .ok_or_else(|| format!("`{text}` is too large"))
}

/// A fio time: digits, then optionally `us`, `ms`, `s`, `m`, `h` or `d`
/// (seconds when bare).
pub fn parse_time(text: &str) -> Result<Duration, String> {
    let lower = text.trim().to_ascii_lowercase();
    let digits_end = lower
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(lower.len());
    let (digits, suffix) = lower.split_at(digits_end);
    let number: u64 = digits
        .parse()
        .map_err(|_| format!("`{text}` is not a whole number with a time suffix"))?;
    let ns_per_unit: u64 = match suffix {
        "us" => 1_000,
        "ms" => 1_000_000,
        "" | "s" => 1_000_000_000,
        "m" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        "d" => 86_400_000_000_000,
        _ => return Err(format!("unknown time suffix in `{text}`")),
    };
    number
        .checked_mul(ns_per_unit)
        .map(Duration)
        .ok_or_else(|| format!("`{text}` is too long"))
}

/// `bssplit`: `size/share` entries joined by `:`; blank shares split what
/// the others leave, evenly (the first ones take any remainder).
fn parse_bssplit(text: &str) -> Result<Vec<(u64, u32)>, FioError> {
    let error = |reason: String| value_error("bssplit", text, &reason);
    if text.contains(',') {
        return Err(error(
            "per-direction splits (with `,`) are not supported".into(),
        ));
    }
    let mut entries: Vec<(u64, Option<u32>)> = Vec::new();
    for entry in text.split(':') {
        let (size, share) = entry.split_once('/').unwrap_or((entry, ""));
        let size = parse_size(size).map_err(&error)?;
        let share = match share.trim() {
            "" => None,
            share => Some(
                share
                    .parse::<u32>()
                    .map_err(|_| error(format!("share `{share}` is not a percentage")))?,
            ),
        };
        entries.push((size, share));
    }
    let given: u32 = entries.iter().filter_map(|&(_, share)| share).sum();
    let blanks = entries.iter().filter(|(_, share)| share.is_none()).count() as u32;
    if given > 100 || (blanks == 0 && given != 100) {
        return Err(error(format!("the shares add up to {given}%, not 100%")));
    }
    let left = 100 - given;
    let mut blank_index = 0;
    Ok(entries
        .into_iter()
        .map(|(size, share)| match share {
            Some(share) => (size, share),
            None => {
                let extra = u32::from(blank_index < left % blanks);
                blank_index += 1;
                (size, left / blanks + extra)
            }
        })
        .collect())
}

#[cfg(test)]
mod tests;
