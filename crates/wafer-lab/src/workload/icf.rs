//! IOmeter's configuration files (`.icf`, device-models.md §3.1), read
//! for the one test the lab runs.
//!
//! An `.icf` file is a list of keys and values, one per line. Its first line
//! is `Version x.y.z` (IOmeter writes it again after the last section). A
//! line starting with `'` is a key or a comment; the line after a key (past
//! any further `'` comment lines, such as the column heads under `'Run
//! Time`) is its value, written after a tab; a few keys take every line up
//! to the next `'` line (an access specification's lines, a worker's
//! assigned specifications). Sections open with a banner key (`'TEST SETUP
//! ====`) or a key like `'Worker`, and close with `'END ...` or `'End ...`;
//! keys and end markers are matched without regard to case, and every line
//! is trimmed first, as IOmeter trims it.
//!
//! The lab takes from the test setup the Run Time (hours, minutes, seconds;
//! all zero means "until stopped", which the scenario must then bound), the
//! Ramp Up Time and the Test Type, which must be `NORMAL`: the cycling types
//! run a series of tests, the lab one. The results display is the GUI's and
//! is skipped. Every access specification is kept by name, its lines as
//! [`AccessLine`]s; lines that pace the worker (a `delay` other than 0 or a
//! `burst` other than 1) or expect a network reply are refused, as the lab's
//! workers are a closed loop of disk I/O. From the manager list it keeps
//! each worker's outstanding I/Os, Maximum Disk Size and Starting Disk Sector
//! (in 512-byte sectors, 0 meaning the whole disk) and assigned access
//! specifications; a network worker, or a worker with several targets (the
//! lab's array is one target), is refused. The scenario then asks which
//! specification runs ([`IcfFile::spec`]) and, for what it does not set
//! itself, what the workers agree on: one depth, one disk size, and starting
//! sectors that step evenly from one worker to the next (a worker offset
//! increment). Anything else in the file is refused by line rather than
//! silently run differently.

use wafer_core::units::Duration;

use super::AccessLine;
use super::iometer::SECTOR_BYTES;

/// The test types that cycle through several tests: IOmeter's `Test Type`
/// values besides `NORMAL`.
const CYCLING: [&str; 7] = [
    "CYCLE_TARGETS",
    "CYCLE_WORKERS",
    "INCREMENT_TARGETS_PARALLEL",
    "INCREMENT_TARGETS_SERIAL",
    "CYCLE_WORKERS_AND_TARGETS",
    "CYCLE_OUTSTANDING_IOS",
    "CYCLE_OUTSTANDING_IOS_AND_TARGETS",
];

/// The banners that open the file's top-level sections.
const SECTIONS: [&str; 4] = [
    "'test setup",
    "'results display",
    "'access specifications",
    "'manager list",
];

/// What the lab reads from an `.icf` file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IcfFile {
    /// The access specifications, in the file's order.
    pub specs: Vec<IcfSpec>,
    /// The Run Time; `None` if absent or zero (IOmeter then runs until
    /// stopped).
    pub run_time: Option<Duration>,
    /// The Ramp Up Time, if given.
    pub ramp_up: Option<Duration>,
    /// The disk workers of every manager, in order.
    pub workers: Vec<IcfWorker>,
}

/// One access specification.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IcfSpec {
    /// Its name.
    pub name: String,
    /// Its lines, `align_bytes` as written (0: sector alignment).
    pub lines: Vec<AccessLine>,
}

/// One disk worker's settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IcfWorker {
    /// Its name.
    pub name: String,
    /// Outstanding I/Os per target (IOmeter's default is 1).
    pub outstanding_ios: u32,
    /// Maximum Disk Size in sectors; 0: the whole disk.
    pub disk_sectors: u64,
    /// Starting Disk Sector.
    pub start_sector: u64,
    /// Its access specifications, by name, in the order IOmeter runs them.
    pub assigned: Vec<String>,
}

/// Why an `.icf` file cannot run.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum IcfError {
    /// The first line is not a version.
    #[error("line 1: expected `Version <number>`, found `{found}`")]
    Version {
        /// The line found.
        found: String,
    },
    /// A section is never closed.
    #[error("line {opened}: the {section} section has no `{end}` line")]
    MissingEnd {
        /// The section.
        section: &'static str,
        /// The line that should close it.
        end: &'static str,
        /// Where it opened.
        opened: usize,
    },
    /// A line that has no place where it stands.
    #[error("line {line}: `{text}` is not expected in {context}")]
    Unexpected {
        /// Line number, from 1.
        line: usize,
        /// The line.
        text: String,
        /// Where it stands.
        context: &'static str,
    },
    /// A key with no value line after it.
    #[error("line {line}: `{key}` has no value line")]
    MissingValue {
        /// Line of the key.
        line: usize,
        /// The key.
        key: String,
    },
    /// A number that does not read as one.
    #[error("line {line}: {field} `{text}` is not a whole number in range")]
    Number {
        /// Line number, from 1.
        line: usize,
        /// What the number is.
        field: &'static str,
        /// As written.
        text: String,
    },
    /// A percentage over 100.
    #[error("line {line}: {field} is {value}, over 100")]
    Percent {
        /// Line number, from 1.
        line: usize,
        /// Which percentage.
        field: &'static str,
        /// Its value.
        value: u64,
    },
    /// An access line with the wrong number of fields.
    #[error(
        "line {line}: an access line has 8 fields (size,% of size,% reads,% random,delay,burst,align,reply), this one {found}"
    )]
    Fields {
        /// Line number, from 1.
        line: usize,
        /// Fields found.
        found: usize,
    },
    /// A specification with no lines.
    #[error("line {line}: access specification `{name}` has no lines")]
    EmptySpec {
        /// Line of its name.
        line: usize,
        /// Its name.
        name: String,
    },
    /// Two specifications of one name.
    #[error("line {line}: access specification `{name}` is defined twice")]
    DuplicateSpec {
        /// Line of the second definition.
        line: usize,
        /// The name.
        name: String,
    },
    /// A specification whose shares do not make 100 %.
    #[error("access specification `{name}`: its lines' % of size add up to {total}, not 100")]
    Shares {
        /// The specification.
        name: String,
        /// Their sum.
        total: u64,
    },
    /// A paced line.
    #[error(
        "line {line}: delay {delay} ms, burst {burst}: the lab's workers issue with no pacing (delay 0, burst 1)"
    )]
    Paced {
        /// Line number, from 1.
        line: usize,
        /// Milliseconds before each burst.
        delay: u64,
        /// I/Os per burst.
        burst: u64,
    },
    /// A line expecting a network reply.
    #[error(
        "line {line}: reply {reply} bytes is for network workers; the lab runs disk workers (reply 0)"
    )]
    Reply {
        /// Line number, from 1.
        line: usize,
        /// The reply size.
        reply: u64,
    },
    /// A test type that cycles.
    #[error(
        "line {line}: test type `{value}` cycles through several tests; the lab runs one (NORMAL)"
    )]
    Cycling {
        /// Line number, from 1.
        line: usize,
        /// The test type.
        value: String,
    },
    /// A test type IOmeter does not have.
    #[error("line {line}: test type `{value}` is not one of IOmeter's")]
    TestType {
        /// Line number, from 1.
        line: usize,
        /// The value.
        value: String,
    },
    /// A worker or target over the network.
    #[error("line {line}: worker `{worker}` is of type `{kind}`; the lab runs disk workers")]
    Network {
        /// Line of the type.
        line: usize,
        /// The worker.
        worker: String,
        /// The type written.
        kind: String,
    },
    /// A worker with several targets.
    #[error(
        "worker `{worker}` has {count} targets; the lab's array is one target: give each worker one"
    )]
    Targets {
        /// The worker.
        worker: String,
        /// Its targets.
        count: usize,
    },
    /// The file defines no access specification.
    #[error("the file defines no access specification")]
    NoSpec,
    /// The specification asked for is not in the file.
    #[error("no access specification `{name}` in the file (it defines {choices})")]
    UnknownSpec {
        /// The name asked for.
        name: String,
        /// The names the file defines.
        choices: String,
    },
    /// The file leaves open which specification runs.
    #[error("which access specification? {choices}: name one with `icf_spec`")]
    Ambiguous {
        /// The candidates.
        choices: String,
    },
    /// The workers differ in a setting the lab applies to all of them.
    #[error(
        "the workers' {what} ({values}); the lab runs its workers alike: set `{key}` in the scenario"
    )]
    WorkersDiffer {
        /// The setting.
        what: &'static str,
        /// Each worker's.
        values: String,
        /// The scenario key that settles it.
        key: &'static str,
    },
}

/// A section being read: its name, closing line and first line.
#[derive(Clone, Copy)]
struct Section {
    name: &'static str,
    end: &'static str,
    opened: usize,
}

impl Section {
    /// The error for `key` at `line`, a line this section has no use for:
    /// an end marker other than its own, or the next section's banner,
    /// means its own end is missing.
    fn stray(&self, line: usize, key: &str) -> IcfError {
        match starts_with(key, "'end") || SECTIONS.iter().any(|banner| starts_with(key, banner)) {
            true => IcfError::MissingEnd {
                section: self.name,
                end: self.end,
                opened: self.opened,
            },
            false => IcfError::Unexpected {
                line,
                text: key.to_string(),
                context: self.name,
            },
        }
    }
}

/// The file's lines, trimmed, and a position in them.
struct Lines<'a> {
    lines: Vec<&'a str>,
    at: usize,
}

impl<'a> Lines<'a> {
    fn peek(&self) -> Option<&'a str> {
        self.lines.get(self.at).copied()
    }

    /// The next line and its number (from 1).
    fn take(&mut self) -> Option<(usize, &'a str)> {
        let line = self.peek()?;
        self.at += 1;
        Some((self.at, line))
    }

    fn skip_blank(&mut self) {
        while self.peek() == Some("") {
            self.at += 1;
        }
    }

    /// The next key of `section`, blank lines skipped; `None` at its end
    /// line. A value line here, or the end of the text, is an error.
    fn key(&mut self, section: Section) -> Result<Option<(usize, &'a str)>, IcfError> {
        self.skip_blank();
        let Some((line, text)) = self.take() else {
            return Err(IcfError::MissingEnd {
                section: section.name,
                end: section.end,
                opened: section.opened,
            });
        };
        if text.eq_ignore_ascii_case(section.end) {
            return Ok(None);
        }
        if !text.starts_with('\'') {
            return Err(IcfError::Unexpected {
                line,
                text: text.to_string(),
                context: section.name,
            });
        }
        Ok(Some((line, text)))
    }

    /// The value of the key at `line`: the first line after it that is no
    /// comment. An end marker or the end of the text first means it has
    /// none.
    fn value(&mut self, line: usize, key: &str) -> Result<(usize, &'a str), IcfError> {
        let missing = || IcfError::MissingValue {
            line,
            key: key.to_string(),
        };
        while let Some(next) = self.peek().filter(|next| next.starts_with('\'')) {
            if starts_with(next, "'end") {
                return Err(missing());
            }
            self.at += 1;
        }
        self.take().ok_or_else(missing)
    }

    /// Every value line up to the next key, blank lines skipped.
    fn values(&mut self) -> Vec<(usize, &'a str)> {
        let mut values = Vec::new();
        while let Some(next) = self.peek().filter(|next| !next.starts_with('\'')) {
            self.at += 1;
            if !next.is_empty() {
                values.push((self.at, next));
            }
        }
        values
    }

    /// Reads `section` to its end line, handing every other key to `each`.
    fn section(
        &mut self,
        section: Section,
        mut each: impl FnMut(&mut Self, usize, &'a str) -> Result<(), IcfError>,
    ) -> Result<(), IcfError> {
        while let Some((line, key)) = self.key(section)? {
            if SECTIONS.iter().any(|banner| starts_with(key, banner)) {
                return Err(section.stray(line, key));
            }
            each(self, line, key)?;
        }
        Ok(())
    }
}

/// Whether `text` starts with `prefix`, ignoring ASCII case.
fn starts_with(text: &str, prefix: &str) -> bool {
    text.get(..prefix.len())
        .is_some_and(|head| head.eq_ignore_ascii_case(prefix))
}

fn number(line: usize, field: &'static str, text: &str) -> Result<u64, IcfError> {
    text.trim().parse().map_err(|_| IcfError::Number {
        line,
        field,
        text: text.trim().to_string(),
    })
}

fn percent(line: usize, field: &'static str, text: &str) -> Result<u32, IcfError> {
    match number(line, field, text)? {
        value @ 0..=100 => Ok(value as u32),
        value => Err(IcfError::Percent { line, field, value }),
    }
}

/// A count of sectors whose bytes fit in 64 bits.
fn sectors(line: usize, field: &'static str, text: &str) -> Result<u64, IcfError> {
    let sectors = number(line, field, text)?;
    match sectors.checked_mul(SECTOR_BYTES) {
        Some(_) => Ok(sectors),
        None => Err(IcfError::Number {
            line,
            field,
            text: text.trim().to_string(),
        }),
    }
}

fn count(line: usize, field: &'static str, text: &str) -> Result<u32, IcfError> {
    u32::try_from(number(line, field, text)?).map_err(|_| IcfError::Number {
        line,
        field,
        text: text.trim().to_string(),
    })
}

impl IcfFile {
    /// Reads an `.icf` file.
    pub fn parse(text: &str) -> Result<IcfFile, IcfError> {
        let mut lines = Lines {
            lines: text.lines().map(str::trim).collect(),
            at: 0,
        };
        lines.skip_blank();
        let first = lines.take().map_or("", |(_, line)| line);
        let version = starts_with(first, "version")
            && first["version".len()..]
                .trim_start()
                .starts_with(|c: char| c.is_ascii_digit());
        if !version {
            return Err(IcfError::Version {
                found: first.to_string(),
            });
        }
        let mut file = IcfFile {
            specs: Vec::new(),
            run_time: None,
            ramp_up: None,
            workers: Vec::new(),
        };
        lines.skip_blank();
        while let Some((line, text)) = lines.take() {
            if starts_with(text, SECTIONS[0]) {
                file.test_setup(&mut lines, line)?;
            } else if starts_with(text, SECTIONS[1]) {
                let section = Section {
                    name: "results display",
                    end: "'END results display",
                    opened: line,
                };
                lines.section(section, |lines, line, key| match starts_with(key, "'end") {
                    true => Err(section.stray(line, key)),
                    false => lines.value(line, key).map(drop),
                })?;
            } else if starts_with(text, SECTIONS[2]) {
                file.access_specs(&mut lines, line)?;
            } else if starts_with(text, SECTIONS[3]) {
                file.manager_list(&mut lines, line)?;
            } else if !starts_with(text, "version") {
                return Err(IcfError::Unexpected {
                    line,
                    text: text.to_string(),
                    context: "the file outside its sections",
                });
            }
            lines.skip_blank();
        }
        Ok(file)
    }

    fn test_setup(&mut self, lines: &mut Lines, opened: usize) -> Result<(), IcfError> {
        let section = Section {
            name: "test setup",
            end: "'END test setup",
            opened,
        };
        lines.section(section, |lines, line, key| {
            if starts_with(key, "'end") {
                return Err(section.stray(line, key));
            }
            let (at, value) = lines.value(line, key)?;
            if key.eq_ignore_ascii_case("'Run Time") {
                let parts: Vec<&str> = value.split_whitespace().collect();
                let [hours, minutes, seconds] = parts[..] else {
                    return Err(IcfError::Number {
                        line: at,
                        field: "Run Time (hours minutes seconds)",
                        text: value.to_string(),
                    });
                };
                let whole = |field, text| number(at, field, text);
                let (hours, minutes, seconds) = (
                    whole("Run Time hours", hours)?,
                    whole("Run Time minutes", minutes)?,
                    whole("Run Time seconds", seconds)?,
                );
                let seconds = (hours.checked_mul(3600))
                    .and_then(|h| h.checked_add(minutes.checked_mul(60)?))
                    .and_then(|hm| hm.checked_add(seconds))
                    .ok_or_else(|| IcfError::Number {
                        line: at,
                        field: "Run Time (hours minutes seconds)",
                        text: value.to_string(),
                    })?;
                self.run_time = (seconds > 0).then(|| Duration::from_secs(seconds));
            } else if starts_with(key, "'Ramp Up Time") {
                self.ramp_up = Some(Duration::from_secs(number(at, "Ramp Up Time", value)?));
            } else if key.eq_ignore_ascii_case("'Test Type") {
                if CYCLING.iter().any(|kind| value.eq_ignore_ascii_case(kind)) {
                    return Err(IcfError::Cycling {
                        line: at,
                        value: value.to_string(),
                    });
                }
                if !value.eq_ignore_ascii_case("NORMAL") {
                    return Err(IcfError::TestType {
                        line: at,
                        value: value.to_string(),
                    });
                }
            }
            // The rest (description, default workers to spawn, results
            // recorded, cycling steps) changes nothing in a NORMAL test
            // of the workers the manager list names.
            Ok(())
        })
    }

    fn access_specs(&mut self, lines: &mut Lines, opened: usize) -> Result<(), IcfError> {
        let section = Section {
            name: "access specifications",
            end: "'END access specifications",
            opened,
        };
        lines.section(section, |lines, line, key| {
            if !starts_with(key, "'Access specification name") {
                return Err(section.stray(line, key));
            }
            let (at, value) = lines.value(line, key)?;
            // The name is everything before the last comma, the default
            // assignment (NONE, ALL, DISK or NET) after it.
            let name = value
                .rsplit_once(',')
                .map_or(value, |(name, _)| name)
                .trim();
            if self.specs.iter().any(|spec| spec.name == name) {
                return Err(IcfError::DuplicateSpec {
                    line: at,
                    name: name.to_string(),
                });
            }
            let mut spec = IcfSpec {
                name: name.to_string(),
                lines: Vec::new(),
            };
            lines.skip_blank();
            if lines
                .peek()
                .is_some_and(|next| starts_with(next, "'size,% of size"))
            {
                lines.take();
                for (line, text) in lines.values() {
                    spec.lines.push(access_line(line, text)?);
                }
            }
            if spec.lines.is_empty() {
                return Err(IcfError::EmptySpec {
                    line: at,
                    name: spec.name,
                });
            }
            let total: u64 = spec.lines.iter().map(|l| u64::from(l.percent)).sum();
            if total != 100 {
                return Err(IcfError::Shares {
                    name: spec.name,
                    total,
                });
            }
            self.specs.push(spec);
            Ok(())
        })
    }

    fn manager_list(&mut self, lines: &mut Lines, opened: usize) -> Result<(), IcfError> {
        let section = Section {
            name: "manager list",
            end: "'END manager list",
            opened,
        };
        lines.section(section, |lines, line, key| {
            if key.eq_ignore_ascii_case("'End manager") {
                return Ok(());
            }
            let (_, value) = lines.value(line, key)?;
            if key.eq_ignore_ascii_case("'Worker") {
                self.workers.push(worker(lines, line, value)?);
            } else if !starts_with(key, "'Manager ID")
                && !key.eq_ignore_ascii_case("'Manager network address")
            {
                return Err(section.stray(line, key));
            }
            Ok(())
        })
    }

    /// The specification to run: `wanted`, or else the one the workers are
    /// assigned, or else the file's only one.
    pub fn spec(&self, wanted: Option<&str>) -> Result<&IcfSpec, IcfError> {
        let find = |name: &str| {
            (self.specs.iter().find(|spec| spec.name == name)).ok_or_else(|| {
                IcfError::UnknownSpec {
                    name: name.to_string(),
                    choices: quoted(self.specs.iter().map(|spec| spec.name.as_str())),
                }
            })
        };
        if let Some(name) = wanted {
            return find(name);
        }
        let mut assigned: Vec<&str> = Vec::new();
        for name in self.workers.iter().flat_map(|w| &w.assigned) {
            if !assigned.contains(&name.as_str()) {
                assigned.push(name);
            }
        }
        match (&assigned[..], &self.specs[..]) {
            ([name], _) => find(name),
            ([], []) => Err(IcfError::NoSpec),
            ([], [only]) => Ok(only),
            ([], specs) => Err(IcfError::Ambiguous {
                choices: format!(
                    "the file defines {} and assigns none",
                    quoted(specs.iter().map(|spec| spec.name.as_str()))
                ),
            }),
            (names, _) => Err(IcfError::Ambiguous {
                choices: format!("the workers are assigned {}", quoted(names.iter().copied())),
            }),
        }
    }

    /// The number of disk workers, if the file names any.
    pub fn disk_workers(&self) -> Option<u32> {
        u32::try_from(self.workers.len()).ok().filter(|&n| n > 0)
    }

    /// The workers' outstanding I/Os, if the file names workers.
    pub fn outstanding_ios(&self) -> Result<Option<u32>, IcfError> {
        let depth = self.agreed("outstanding I/Os differ", "outstanding_ios", |worker| {
            u64::from(worker.outstanding_ios)
        })?;
        Ok(depth.map(|depth| depth as u32))
    }

    /// The test file's length in bytes: `None` for the whole disk (a
    /// Maximum Disk Size of 0, or no workers).
    pub fn test_file_bytes(&self) -> Result<Option<u64>, IcfError> {
        let sectors = self.agreed("Maximum Disk Sizes differ", "test_file_<unit>", |worker| {
            worker.disk_sectors
        })?;
        Ok(sectors
            .filter(|&sectors| sectors > 0)
            .map(|sectors| sectors * SECTOR_BYTES))
    }

    /// The first worker's Starting Disk Sector and the step from one
    /// worker's to the next, both in bytes; (0, 0) with no workers.
    pub fn starts_bytes(&self) -> Result<(u64, u64), IcfError> {
        let starts: Vec<u64> = self.workers.iter().map(|w| w.start_sector).collect();
        let (first, step) = match starts[..] {
            [] => (0, 0),
            [first] => (first, 0),
            [first, second, ..] => (first, second.wrapping_sub(first)),
        };
        let even = (starts.iter().enumerate()).all(|(i, &start)| {
            Some(start)
                == step
                    .checked_mul(i as u64)
                    .and_then(|s| s.checked_add(first))
        });
        if !even {
            return Err(IcfError::WorkersDiffer {
                what: "Starting Disk Sectors do not step evenly from one to the next",
                values: list(&starts),
                key: "test_file_offset_<unit>` and `worker_offset_increment_<unit>",
            });
        }
        Ok((first * SECTOR_BYTES, step * SECTOR_BYTES))
    }

    /// The one value every worker has for a setting, if there are workers.
    fn agreed(
        &self,
        what: &'static str,
        key: &'static str,
        value: impl Fn(&IcfWorker) -> u64,
    ) -> Result<Option<u64>, IcfError> {
        let values: Vec<u64> = self.workers.iter().map(value).collect();
        match values.split_first() {
            None => Ok(None),
            Some((&first, rest)) if rest.iter().all(|&v| v == first) => Ok(Some(first)),
            Some(_) => Err(IcfError::WorkersDiffer {
                what,
                values: list(&values),
                key,
            }),
        }
    }
}

fn quoted<'a>(names: impl Iterator<Item = &'a str>) -> String {
    let names: Vec<String> = names.map(|name| format!("`{name}`")).collect();
    match names.is_empty() {
        true => "none".into(),
        false => names.join(", "),
    }
}

fn list(values: &[u64]) -> String {
    let values: Vec<String> = values.iter().map(u64::to_string).collect();
    values.join(", ")
}

/// One `size,% of size,% reads,% random,delay,burst,align,reply` line.
fn access_line(line: usize, text: &str) -> Result<AccessLine, IcfError> {
    let parts: Vec<&str> = text.split(',').collect();
    let [size, share, reads, random, delay, burst, align, reply] = parts[..] else {
        return Err(IcfError::Fields {
            line,
            found: parts.len(),
        });
    };
    let access = AccessLine {
        size_bytes: number(line, "size", size)?,
        percent: percent(line, "% of size", share)?,
        read_percent: percent(line, "% reads", reads)?,
        random_percent: percent(line, "% random", random)?,
        align_bytes: number(line, "align", align)?,
    };
    let (delay, burst) = (number(line, "delay", delay)?, number(line, "burst", burst)?);
    if (delay, burst) != (0, 1) {
        return Err(IcfError::Paced { line, delay, burst });
    }
    match number(line, "reply", reply)? {
        0 => Ok(access),
        reply => Err(IcfError::Reply { line, reply }),
    }
}

/// A `'Worker` section, from the line after its name to `'End worker`.
fn worker(lines: &mut Lines, opened: usize, name: &str) -> Result<IcfWorker, IcfError> {
    let mut worker = IcfWorker {
        name: name.to_string(),
        outstanding_ios: 1,
        disk_sectors: 0,
        start_sector: 0,
        assigned: Vec::new(),
    };
    let section = Section {
        name: "worker",
        end: "'End worker",
        opened,
    };
    let mut targets = 0;
    lines.section(section, |lines, line, key| {
        if key.eq_ignore_ascii_case("'Worker type") {
            let (at, kind) = lines.value(line, key)?;
            if !kind.eq_ignore_ascii_case("DISK") {
                return Err(IcfError::Network {
                    line: at,
                    worker: worker.name.clone(),
                    kind: kind.to_string(),
                });
            }
        } else if key.eq_ignore_ascii_case("'Default target settings for worker") {
            target_settings(lines, line, &mut worker)?;
        } else if key.eq_ignore_ascii_case("'Assigned access specs") {
            let values = lines.values();
            worker.assigned = values.iter().map(|(_, name)| name.to_string()).collect();
            match lines.take() {
                Some((_, end)) if end.eq_ignore_ascii_case("'End assigned access specs") => {}
                _ => {
                    return Err(IcfError::MissingEnd {
                        section: "assigned access specs",
                        end: "'End assigned access specs",
                        opened: line,
                    });
                }
            }
        } else if key.eq_ignore_ascii_case("'Target assignments") {
            targets += target_assignments(lines, line, &worker.name)?;
        } else {
            return Err(section.stray(line, key));
        }
        Ok(())
    })?;
    if targets > 1 {
        return Err(IcfError::Targets {
            worker: worker.name,
            count: targets,
        });
    }
    Ok(worker)
}

/// `'Default target settings for worker` to its end line.
fn target_settings(
    lines: &mut Lines,
    opened: usize,
    worker: &mut IcfWorker,
) -> Result<(), IcfError> {
    let section = Section {
        name: "default target settings",
        end: "'End default target settings for worker",
        opened,
    };
    lines.section(section, |lines, line, key| {
        let (at, value) = lines.value(line, key)?;
        let fields: Vec<&str> = value.split(',').collect();
        if starts_with(key, "'Number of outstanding IOs") {
            worker.outstanding_ios = count(at, "Number of outstanding IOs", fields[0])?;
        } else if starts_with(key, "'Disk maximum size,starting sector") {
            let [size, start, ..] = fields[..] else {
                return Err(IcfError::MissingValue {
                    line: at,
                    key: "starting sector".into(),
                });
            };
            worker.disk_sectors = sectors(at, "Disk maximum size", size)?;
            worker.start_sector = sectors(at, "starting sector", start)?;
        } else {
            return Err(section.stray(line, key));
        }
        Ok(())
    })
}

/// `'Target assignments` to its end line: the number of disk targets.
fn target_assignments(lines: &mut Lines, opened: usize, worker: &str) -> Result<usize, IcfError> {
    let section = Section {
        name: "target assignments",
        end: "'End target assignments",
        opened,
    };
    let mut targets = 0;
    lines.section(section, |lines, line, key| {
        if !key.eq_ignore_ascii_case("'Target") {
            return Err(section.stray(line, key));
        }
        lines.value(line, key)?;
        targets += 1;
        let target = Section {
            name: "target",
            end: "'End target",
            opened: line,
        };
        lines.section(target, |lines, line, key| {
            let (at, value) = lines.value(line, key)?;
            if key.eq_ignore_ascii_case("'Target type") {
                if !value.eq_ignore_ascii_case("DISK") {
                    return Err(IcfError::Network {
                        line: at,
                        worker: worker.to_string(),
                        kind: value.to_string(),
                    });
                }
            } else if !starts_with(key, "'Target manager ID") {
                return Err(target.stray(line, key));
            }
            Ok(())
        })
    })?;
    Ok(targets)
}

#[cfg(test)]
mod tests;
