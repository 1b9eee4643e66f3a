//! Sweeps: one scenario file that stands for a matrix of runs.
//!
//! A `[sweep]` table names scenario keys by their dotted path and gives
//! each a list of values, e.g. `"workload.num_large" = [1, 2, 4]` or
//! `"array[0].cache_mib" = [64, 256]`. The sweep is the Cartesian product
//! of the lists, the keys taken in the order of their paths (a TOML table
//! keeps none of its own), the first varying slowest: each point is the scenario
//! with those keys set to the point's values, parsed and checked like any
//! scenario, so a value no scenario may hold is refused naming the point.
//! The points are independent runs (the lab is deterministic, so a point's
//! report depends only on its own scenario) and a driver may run them in
//! any order or at once; [`SweepReport`] then puts one figure per array
//! and point side by side, for one table and one chart of the whole sweep.
//! A point's figures are its measured segments together: IOPS and MB/s
//! averaged over the segments, mean latency weighted by each segment's
//! I/Os, the highest segment p99, and, with Orion's large streams, the
//! small I/Os' IOPS and the large I/Os' MB/s apart.

use std::fmt::Write;

use serde::Serialize;
use toml::{Table, Value};
use wafer_devices::params::Catalog;

use crate::report::{ArrayReport, LabReport};
use crate::scenario::{Files, Scenario, ScenarioError};

/// Most points a sweep may expand to: far more than any experiment's
/// matrix (E2's is 5 x 2, E3's 10 x 7), and a bound on a typo's cost.
pub const POINTS_MAX: usize = 1024;

/// A scenario file's sweep, expanded.
#[derive(Clone, Debug)]
pub struct Sweep {
    /// The swept keys, by dotted path, sorted.
    pub parameters: Vec<String>,
    /// Every point, the first parameter varying slowest.
    pub points: Vec<SweepPoint>,
}

/// One point of a sweep: its values and the scenario they make.
#[derive(Clone, Debug)]
pub struct SweepPoint {
    /// The value of each parameter, as TOML writes it.
    pub values: Vec<String>,
    /// The scenario with those values set.
    pub scenario: Scenario,
}

impl Sweep {
    /// Point `index`'s values, `path = value, ...`.
    pub fn label(&self, index: usize) -> String {
        let paths = self.parameters.iter().map(String::as_str);
        describe(paths, &self.points[index].values)
    }

    /// The sweep of scenario `text`, or `None` if it has no `[sweep]` table;
    /// a scenario that names a file (`job_file`, `icf_file`) is refused.
    pub fn parse(text: &str, catalog: &Catalog) -> Result<Option<Sweep>, ScenarioError> {
        Sweep::parse_with_files(text, catalog, &|_| {
            Err("this caller reads no files besides the scenario".into())
        })
    }

    /// [`Sweep::parse`], reading the files the scenario names through
    /// `files`, as [`Scenario::parse_with_files`] does.
    pub fn parse_with_files(
        text: &str,
        catalog: &Catalog,
        files: &Files<'_>,
    ) -> Result<Option<Sweep>, ScenarioError> {
        let mut table: Table =
            toml::from_str(text).map_err(|error| crate::scenario::syntax(text, &error))?;
        let Some(sweep) = table.remove("sweep") else {
            return Ok(None);
        };
        if table.contains_key("step") {
            return Err(ScenarioError::Invalid {
                field: "step".into(),
                reason: "a procedure's steps and a sweep's points do not go together: \
                         write a procedure per point"
                    .into(),
            });
        }
        let parameters = parameters(sweep)?;
        let mut points = Vec::new();
        for values in product(&parameters) {
            let mut point = table.clone();
            for ((path, _), value) in parameters.iter().zip(&values) {
                set(&mut point, path, value.clone())?;
            }
            let texts: Vec<String> = values.iter().map(value_text).collect();
            let paths = parameters.iter().map(|(path, _)| path.as_str());
            let described = describe(paths, &texts);
            let scenario = Scenario::from_table(&point, catalog, files).map_err(|error| {
                ScenarioError::Invalid {
                    field: "sweep".into(),
                    reason: format!("at {described}: {error}"),
                }
            })?;
            points.push(SweepPoint {
                values: texts,
                scenario,
            });
        }
        Ok(Some(Sweep {
            parameters: parameters.into_iter().map(|(path, _)| path).collect(),
            points,
        }))
    }
}

/// The swept keys and their values, checked: at least one key, each a
/// non-empty list, at most [`POINTS_MAX`] points in all.
fn parameters(sweep: Value) -> Result<Vec<(String, Vec<Value>)>, ScenarioError> {
    let invalid = |reason: String| ScenarioError::Invalid {
        field: "sweep".into(),
        reason,
    };
    let Value::Table(sweep) = sweep else {
        return Err(invalid("expected a table of keys and value lists".into()));
    };
    if sweep.is_empty() {
        return Err(invalid("a sweep names at least one key".into()));
    }
    let mut points: usize = 1;
    let mut parameters = Vec::new();
    for (path, values) in sweep {
        let Value::Array(values) = values else {
            return Err(invalid(format!("`{path}`: expected a list of values")));
        };
        if values.is_empty() {
            return Err(invalid(format!("`{path}`: an empty list")));
        }
        if values
            .iter()
            .any(|value| value.is_table() || value.is_array())
        {
            return Err(invalid(format!(
                "`{path}`: each value is a number, a string or a boolean"
            )));
        }
        points = points.saturating_mul(values.len());
        parameters.push((path, values));
    }
    if points > POINTS_MAX {
        return Err(invalid(format!(
            "{points} points; a sweep expands to at most {POINTS_MAX}"
        )));
    }
    Ok(parameters)
}

/// A swept value as a scenario writes it: strings quoted.
fn value_text(value: &Value) -> String {
    match value {
        Value::String(text) => format!("{text:?}"),
        Value::Integer(number) => number.to_string(),
        Value::Float(number) => number.to_string(),
        Value::Boolean(flag) => flag.to_string(),
        other => format!("{other:?}"),
    }
}

/// Every combination of the parameters' values, the first varying slowest.
fn product(parameters: &[(String, Vec<Value>)]) -> Vec<Vec<Value>> {
    parameters
        .iter()
        .fold(vec![Vec::new()], |combinations, (_, values)| {
            combinations
                .iter()
                .flat_map(|prefix| {
                    values.iter().map(move |value| {
                        let mut combination = prefix.clone();
                        combination.push(value.clone());
                        combination
                    })
                })
                .collect()
        })
}

/// `path = value, ...` for parameters and their values (as a point holds
/// them), for messages, titles and legends.
pub fn describe<'a>(paths: impl IntoIterator<Item = &'a str>, values: &[String]) -> String {
    let pairs: Vec<String> = (paths.into_iter().zip(values))
        .map(|(path, value)| format!("{path} = {value}"))
        .collect();
    pairs.join(", ")
}

/// Sets `path` (tables by name, `array[N]` for the N-th of a list of
/// tables, then the key) in `table` to `value`. Every table on the way
/// must exist: a sweep varies a scenario, it does not build one.
fn set(table: &mut Table, path: &str, value: Value) -> Result<(), ScenarioError> {
    let unknown = || ScenarioError::Invalid {
        field: "sweep".into(),
        reason: format!("`{path}`: no such table in the scenario"),
    };
    let mut parts: Vec<&str> = path.split('.').collect();
    let key = parts
        .pop()
        .filter(|key| !key.is_empty())
        .ok_or_else(unknown)?;
    let mut here = table;
    for part in parts {
        here = match part.split_once('[') {
            None => here.get_mut(part).and_then(Value::as_table_mut),
            Some((name, index)) => {
                let index: usize =
                    (index.strip_suffix(']').and_then(|i| i.parse().ok())).ok_or_else(unknown)?;
                (here.get_mut(name).and_then(Value::as_array_mut))
                    .and_then(|list| list.get_mut(index))
                    .and_then(Value::as_table_mut)
            }
        }
        .ok_or_else(unknown)?;
    }
    here.insert(key.to_string(), value);
    Ok(())
}

/// The figures of a whole sweep: per point, per array.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SweepReport {
    /// The scenario's name.
    pub name: String,
    /// The swept keys.
    pub parameters: Vec<String>,
    /// Every point, in the sweep's order.
    pub points: Vec<PointReport>,
}

/// One point of a sweep.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PointReport {
    /// The value of each parameter.
    pub values: Vec<String>,
    /// Every array's figures, in the scenario's order.
    pub arrays: Vec<PointFigures>,
}

/// One array's figures at one point: its measured segments together.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PointFigures {
    /// The array.
    pub array: String,
    /// I/Os per second, averaged over the segments.
    pub iops: f64,
    /// 10^6 bytes per second, averaged over the segments.
    pub mbps: f64,
    /// Mean latency of every measured I/O, milliseconds.
    pub latency_ms_avg: f64,
    /// The highest segment 99th-percentile latency, milliseconds.
    pub latency_ms_p99: f64,
    /// With large streams: the small I/Os' IOPS.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub small_iops: Option<f64>,
    /// With large streams: their MB/s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub large_mbps: Option<f64>,
}

impl PointFigures {
    /// The headings of [`PointFigures::cells`].
    pub(crate) fn headings(large: bool) -> Vec<String> {
        let mut headings = ["IOPS", "MB/s", "avg ms", "p99 ms"]
            .map(String::from)
            .to_vec();
        if large {
            headings.extend(["small IOPS", "large MB/s"].map(String::from));
        }
        headings
    }

    /// The figures as a table's cells; with `large`, the two classes' too.
    pub(crate) fn cells(&self, large: bool) -> Vec<String> {
        let mut cells = vec![
            format!("{:.1}", self.iops),
            format!("{:.2}", self.mbps),
            format!("{:.3}", self.latency_ms_avg),
            format!("{:.3}", self.latency_ms_p99),
        ];
        if large {
            cells.push(format!("{:.1}", self.small_iops.unwrap_or(0.0)));
            cells.push(format!("{:.2}", self.large_mbps.unwrap_or(0.0)));
        }
        cells
    }
}

/// `rows` (the first the headings) as lines of right-aligned columns,
/// appended to `text`.
pub(crate) fn write_aligned(text: &mut String, rows: &[Vec<String>]) {
    let widths: Vec<usize> = (0..rows[0].len())
        .map(|column| rows.iter().map(|row| row[column].len()).max().unwrap_or(0))
        .collect();
    for row in rows {
        let cells: Vec<String> = (row.iter().zip(&widths))
            .map(|(cell, &width)| format!("{cell:>width$}"))
            .collect();
        writeln!(text, "  {}", cells.join("  ")).expect("writing to a string");
    }
}

impl SweepReport {
    /// The report of `sweep` whose points ran to `reports`, in point order.
    pub fn new(name: &str, sweep: &Sweep, reports: &[LabReport]) -> SweepReport {
        assert_eq!(sweep.points.len(), reports.len(), "a report per point");
        let points = (sweep.points.iter().zip(reports))
            .map(|(point, report)| PointReport {
                values: point.values.clone(),
                arrays: report.arrays.iter().map(figures).collect(),
            })
            .collect();
        SweepReport {
            name: name.to_string(),
            parameters: sweep.parameters.clone(),
            points,
        }
    }

    /// Whether the points measured large streams apart.
    pub fn has_large_streams(&self) -> bool {
        (self.points.iter().flat_map(|p| &p.arrays)).any(|a| a.large_mbps.is_some())
    }

    /// The report as indented JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a sweep report serializes") + "\n"
    }

    /// A table: a row per point and array.
    pub fn render(&self) -> String {
        let large = self.has_large_streams();
        let mut header: Vec<String> = self.parameters.clone();
        header.push("array".into());
        header.extend(PointFigures::headings(large));
        let mut rows = vec![header];
        for point in &self.points {
            for array in &point.arrays {
                let mut row = point.values.clone();
                row.push(array.array.clone());
                row.extend(array.cells(large));
                rows.push(row);
            }
        }
        let mut text = format!("{}: {} points\n", self.name, self.points.len());
        write_aligned(&mut text, &rows);
        text.push_str(
            "  (MB/s in 10^6 bytes per second; segments averaged, p99 the highest segment's)\n",
        );
        text
    }
}

/// An array's figures over its measured segments.
pub(crate) fn figures(array: &ArrayReport) -> PointFigures {
    let segments = &array.segments;
    let count = segments.len().max(1) as f64;
    let mean = |value: fn(&crate::report::SegmentReport) -> f64| {
        segments.iter().map(value).sum::<f64>() / count
    };
    let ios: u64 = segments.iter().map(|s| s.ios).sum();
    let latency = segments
        .iter()
        .map(|s| s.latency_ms_avg * s.ios as f64)
        .sum::<f64>()
        / ios.max(1) as f64;
    let classes = segments.iter().all(|s| s.large.is_some());
    PointFigures {
        array: array.name.clone(),
        iops: mean(|s| s.iops),
        mbps: mean(|s| s.mbps),
        latency_ms_avg: latency,
        latency_ms_p99: segments
            .iter()
            .map(|s| s.latency_ms_p99)
            .fold(0.0, f64::max),
        small_iops: classes.then(|| mean(|s| s.small.as_ref().map_or(0.0, |c| c.iops))),
        large_mbps: classes.then(|| mean(|s| s.large.as_ref().map_or(0.0, |c| c.mbps))),
    }
}

#[cfg(test)]
mod tests;
