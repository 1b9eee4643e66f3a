//! An SVG chart of a run: IOPS (top panel) and average latency in ms
//! (bottom panel) per measured segment, every array a coloured line with a
//! marker per segment, a shared x axis of segment numbers, and a legend;
//! or of a sweep: the same panels (MB/s of large I/Os on top if the points
//! measured Orion's streams) over the values of the sweep's first
//! parameter, a line per array and combination of the others; or of a
//! procedure: the same panels over its run steps, or, where every run step
//! sets Orion's `num_large`, over the stream counts, a line per array and
//! round (a round ends at a snapshot, or where a count comes again), so
//! E3's curves at each fullness lie side by side.
//!
//! Written by hand, with no drawing crate: axes with "nice" ticks (steps of
//! 1, 2 or 5 times a power of ten, starting from zero so that a flat line
//! looks flat and a fall looks its true size), grid lines, labels with their
//! units. Every number is printed with fixed precision, so the same report
//! gives the same bytes.

use std::fmt::Write;

use super::LabReport;
use crate::procedure::{ProcedureReport, RunFigures};
use crate::sweep::{PointFigures, SweepReport, describe};

const WIDTH: f64 = 860.0;
const HEIGHT: f64 = 660.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 200.0;
const TOP: f64 = 70.0;
const PANEL_HEIGHT: f64 = 230.0;
const PANEL_GAP: f64 = 60.0;
/// Line colours, one per array in order (Okabe-Ito, distinguishable with
/// colour-blindness); they repeat after eight arrays.
const COLOURS: [&str; 8] = [
    "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442", "#000000",
];

/// What a chart shows: two panels of lines over numbered points, as a run's
/// segments or a sweep's points.
struct Chart {
    title: String,
    /// The panels' titles, top then bottom.
    panels: [&'static str; 2],
    /// The x axis's label, and each point's tick label, from point 1.
    x_label: String,
    x_ticks: Vec<String>,
    series: Vec<Series>,
}

/// One line in both panels.
struct Series {
    /// Its name (the `data-array` attribute) and its legend entry.
    name: String,
    legend: String,
    /// (point, value) for the top and the bottom panel, points from 1.
    values: [Vec<(usize, f64)>; 2],
}

/// The chart of `report`.
pub fn render(report: &LabReport) -> String {
    let segments = report
        .arrays
        .iter()
        .map(|array| array.segments.len())
        .max()
        .unwrap_or(0)
        .max(1);
    let series = report
        .arrays
        .iter()
        .map(|array| {
            let each = |value: fn(&super::SegmentReport) -> f64| {
                (array.segments.iter())
                    .map(|segment| (segment.index as usize, value(segment)))
                    .collect()
            };
            Series {
                name: array.name.clone(),
                legend: format!("{} ({})", array.name, array.kind.as_str()),
                values: [each(|s| s.iops), each(|s| s.latency_ms_avg)],
            }
        })
        .collect();
    draw(&Chart {
        title: chart_title(report),
        panels: ["IOPS (I/Os per second)", "Average latency (ms)"],
        x_label: x_label(report),
        x_ticks: (1..=segments).map(|segment| segment.to_string()).collect(),
        series,
    })
}

/// The chart of a sweep: its first parameter along the x axis, a line per
/// array and combination of the other parameters; the top panel plots the
/// large I/Os' MB/s if the points measured Orion's streams, else IOPS.
pub fn render_sweep(sweep: &SweepReport) -> String {
    let Some((first, rest)) = sweep.parameters.split_first() else {
        return draw(&Chart {
            title: sweep.name.clone(),
            panels: ["IOPS (I/Os per second)", "Average latency (ms)"],
            x_label: String::new(),
            x_ticks: vec![String::new()],
            series: Vec::new(),
        });
    };
    let mut ticks: Vec<String> = Vec::new();
    let mut series: Vec<Series> = Vec::new();
    let large = sweep.has_large_streams();
    for point in &sweep.points {
        let (x_value, others) = point.values.split_first().expect("a value per parameter");
        if !ticks.contains(x_value) {
            ticks.push(x_value.clone());
        }
        let x = ticks.iter().position(|t| t == x_value).expect("just added") + 1;
        let context = describe(rest.iter().map(String::as_str), others);
        for figures in &point.arrays {
            let mut legend = figures.array.clone();
            if !context.is_empty() {
                legend = format!("{legend}, {context}");
            }
            let top = match large {
                true => figures.large_mbps.unwrap_or(0.0),
                false => figures.iops,
            };
            let at = match series.iter().position(|s| s.legend == legend) {
                Some(at) => at,
                None => {
                    series.push(Series {
                        name: figures.array.clone(),
                        legend: legend.clone(),
                        values: [Vec::new(), Vec::new()],
                    });
                    series.len() - 1
                }
            };
            series[at].values[0].push((x, top));
            series[at].values[1].push((x, figures.latency_ms_avg));
        }
    }
    draw(&Chart {
        title: format!("{} ({} points)", sweep.name, sweep.points.len()),
        panels: [
            match large {
                true => "Large-I/O MB/s (10^6 bytes per second)",
                false => "IOPS (I/Os per second)",
            },
            "Average latency (ms)",
        ],
        x_label: first.clone(),
        x_ticks: ticks,
        series,
    })
}

/// The chart of a procedure: large-I/O MB/s (if its runs measured
/// Orion's streams, else IOPS) and average latency per run step, a line
/// per array; where every step sets `num_large`, over the stream counts
/// instead, a line per array and round, labelled by the snapshots before
/// it and the volume's use at its start.
pub fn render_procedure(procedure: &ProcedureReport) -> String {
    let large = (procedure.runs.iter().flat_map(|run| &run.arrays))
        .any(|array| array.figures.large_mbps.is_some());
    let top = move |figures: &PointFigures| match large {
        true => figures.large_mbps.unwrap_or(0.0),
        false => figures.iops,
    };
    let by_streams = procedure.runs.iter().all(|run| run.num_large.is_some());
    let (x_label, x_ticks, series) = match by_streams {
        true => streams_series(procedure, &top),
        false => run_series(procedure, &top),
    };
    draw(&Chart {
        title: format!("{} ({} runs)", procedure.name, procedure.runs.len()),
        panels: [
            match large {
                true => "Large-I/O MB/s (10^6 bytes per second)",
                false => "IOPS (I/Os per second)",
            },
            "Average latency (ms)",
        ],
        x_label,
        x_ticks,
        series,
    })
}

/// A line per array over the run steps.
fn run_series(
    procedure: &ProcedureReport,
    top: &dyn Fn(&PointFigures) -> f64,
) -> (String, Vec<String>, Vec<Series>) {
    let mut series: Vec<Series> = Vec::new();
    for run in &procedure.runs {
        for (index, array) in run.arrays.iter().enumerate() {
            if series.len() == index {
                series.push(Series {
                    name: array.figures.array.clone(),
                    legend: array.figures.array.clone(),
                    values: [Vec::new(), Vec::new()],
                });
            }
            series[index].values[0].push((run.run, top(&array.figures)));
            series[index].values[1].push((run.run, array.figures.latency_ms_avg));
        }
    }
    let ticks = procedure
        .runs
        .iter()
        .map(|run| run.run.to_string())
        .collect();
    ("run step".into(), ticks, series)
}

/// A line per array and round over the stream counts.
fn streams_series(
    procedure: &ProcedureReport,
    top: &dyn Fn(&PointFigures) -> f64,
) -> (String, Vec<String>, Vec<Series>) {
    let mut counts: Vec<u32> = (procedure.runs.iter())
        .filter_map(|run| run.num_large)
        .collect();
    counts.sort_unstable();
    counts.dedup();
    let arrays = procedure.runs.first().map_or(0, |run| run.arrays.len());
    let mut series = Vec::new();
    for index in 0..arrays {
        let mut round: Option<(u64, Series)> = None;
        let mut rounds = 0;
        let mut streams_seen: Vec<u32> = Vec::new();
        for run in &procedure.runs {
            let array = &run.arrays[index];
            let count = run.num_large.expect("every step sets num_large");
            let new_round = match &round {
                Some((snapshots, _)) => {
                    *snapshots != array.snapshots_taken || streams_seen.contains(&count)
                }
                None => true,
            };
            if new_round {
                series.extend(round.take().map(|(_, line)| line));
                streams_seen.clear();
                rounds += 1;
                round = Some((array.snapshots_taken, round_series(array, rounds)));
            }
            streams_seen.push(count);
            let x = counts.binary_search(&count).expect("a count of the list") + 1;
            let (_, line) = round.as_mut().expect("a round is open");
            line.values[0].push((x, top(&array.figures)));
            line.values[1].push((x, array.figures.latency_ms_avg));
        }
        series.extend(round.map(|(_, line)| line));
    }
    let ticks = counts.iter().map(u32::to_string).collect();
    ("num_large (large streams or I/Os)".into(), ticks, series)
}

/// Round `number`'s line, named by its array and labelled by its number,
/// the snapshots before it and the volume's use when it started.
fn round_series(first: &RunFigures, number: usize) -> Series {
    let mut legend = format!(
        "{} #{number}: {} snaps",
        first.figures.array, first.snapshots_taken
    );
    if let Some(used) = first.volume_used_percent {
        write!(legend, ", {used:.1} %").expect("writing to a string");
    }
    Series {
        name: first.figures.array.clone(),
        legend,
        values: [Vec::new(), Vec::new()],
    }
}

/// The SVG text of `chart`.
fn draw(chart: &Chart) -> String {
    let mut svg = String::new();
    writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">"#
    )
    .expect("writing to a string");
    writeln!(
        svg,
        r#"<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>"#
    )
    .expect("writing");
    let title = escape(&chart.title);
    writeln!(
        svg,
        r#"<text x="{LEFT}" y="28" font-size="15" font-weight="bold">{title}</text>"#
    )
    .expect("writing to a string");
    for (panel, top) in [TOP, TOP + PANEL_HEIGHT + PANEL_GAP]
        .into_iter()
        .enumerate()
    {
        draw_panel(&mut svg, chart, panel, top);
    }
    draw_legend(&mut svg, chart);
    svg.push_str("</svg>\n");
    svg
}

fn chart_title(report: &LabReport) -> String {
    let workload = report
        .arrays
        .first()
        .map(|array| array.workload.name.as_str());
    format!("{} (seed {})", workload.unwrap_or("no arrays"), report.seed)
}

/// Axes, ticks, grid and one line per series for panel `panel` (0 or 1),
/// whose top is at `top`.
fn draw_panel(svg: &mut String, chart: &Chart, panel: usize, top: f64) {
    let plot_width = WIDTH - LEFT - RIGHT;
    let bottom = top + PANEL_HEIGHT;
    let points = chart.x_ticks.len().max(1);
    let highest = (chart.series.iter())
        .flat_map(|series| series.values[panel].iter().map(|&(_, value)| value))
        .fold(0.0, f64::max);
    let (step, ticks) = nice_ticks(highest);
    let y_max = step * ticks as f64;
    let x = |point: f64| LEFT + (point - 0.5) / points as f64 * plot_width;
    let y = |value: f64| bottom - value / y_max * PANEL_HEIGHT;
    let title = escape(chart.panels[panel]);
    writeln!(
        svg,
        r#"<text x="{LEFT}" y="{:.1}" font-weight="bold">{title}</text>"#,
        top - 8.0
    )
    .expect("writing to a string");
    for tick in 0..=ticks {
        let value = step * tick as f64;
        let at = y(value);
        writeln!(
            svg,
            r##"<line x1="{LEFT}" y1="{at:.1}" x2="{:.1}" y2="{at:.1}" stroke="#dddddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            LEFT + plot_width,
            LEFT - 6.0,
            at + 4.0,
            tick_label(value, step)
        )
        .expect("writing to a string");
    }
    draw_x_axis(svg, bottom, chart, &x);
    writeln!(
        svg,
        r#"<path d="M{LEFT},{top:.1} V{bottom:.1} H{:.1}" fill="none" stroke="black"/>"#,
        LEFT + plot_width
    )
    .expect("writing to a string");
    for (index, series) in chart.series.iter().enumerate() {
        let points: Vec<(f64, f64)> = (series.values[panel].iter())
            .map(|&(point, value)| (x(point as f64), y(value)))
            .collect();
        draw_series(svg, &series.name, COLOURS[index % COLOURS.len()], &points);
    }
}

/// The x axis's label: segments and, if every array's are alike, their
/// length.
fn x_label(report: &LabReport) -> String {
    let mut lengths = report
        .arrays
        .iter()
        .map(|array| array.workload.timing.segment.0);
    let Some(first) = lengths
        .next()
        .filter(|&first| lengths.all(|length| length == first))
    else {
        return "segment".to_string();
    };
    match first {
        ns if ns % 60_000_000_000 == 0 => format!("segment ({} min each)", ns / 60_000_000_000),
        ns if ns % 1_000_000_000 == 0 => format!("segment ({} s each)", ns / 1_000_000_000),
        ns => format!("segment ({:.3} s each)", ns as f64 / 1e9),
    }
}

/// The points' tick labels under the plot, at most about fifteen of them,
/// and the axis's label.
fn draw_x_axis(svg: &mut String, bottom: f64, chart: &Chart, x: &dyn Fn(f64) -> f64) {
    let every = chart.x_ticks.len().div_ceil(15).max(1);
    for (index, tick) in chart.x_ticks.iter().enumerate().step_by(every) {
        let at = x((index + 1) as f64);
        writeln!(
            svg,
            r#"<line x1="{at:.1}" y1="{bottom:.1}" x2="{at:.1}" y2="{:.1}" stroke="black"/><text x="{at:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            bottom + 5.0,
            bottom + 18.0,
            escape(tick)
        )
        .expect("writing to a string");
    }
    writeln!(
        svg,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
        LEFT + (WIDTH - LEFT - RIGHT) / 2.0,
        bottom + 34.0,
        escape(&chart.x_label)
    )
    .expect("writing to a string");
}

/// One series' line and markers.
fn draw_series(svg: &mut String, name: &str, colour: &str, points: &[(f64, f64)]) {
    let Some(&(x0, y0)) = points.first() else {
        return;
    };
    let mut d = format!("M{x0:.1},{y0:.1}");
    for &(x, y) in &points[1..] {
        write!(d, " L{x:.1},{y:.1}").expect("writing to a string");
    }
    let name = escape(name);
    writeln!(
        svg,
        r#"<path class="series" data-array="{name}" d="{d}" fill="none" stroke="{colour}" stroke-width="2"/>"#
    )
    .expect("writing to a string");
    for &(x, y) in points {
        writeln!(
            svg,
            r#"<circle cx="{x:.1}" cy="{y:.1}" r="3" fill="{colour}"/>"#
        )
        .expect("writing to a string");
    }
}

fn draw_legend(svg: &mut String, chart: &Chart) {
    let left = WIDTH - RIGHT + 20.0;
    for (index, series) in chart.series.iter().enumerate() {
        let y = TOP + 10.0 + 20.0 * index as f64;
        let colour = COLOURS[index % COLOURS.len()];
        writeln!(
            svg,
            r#"<line x1="{left:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="{colour}" stroke-width="3"/><text x="{:.1}" y="{:.1}">{}</text>"#,
            left + 24.0,
            left + 30.0,
            y + 4.0,
            escape(&series.legend)
        )
        .expect("writing to a string");
    }
}

/// A step of 1, 2 or 5 × 10^k and a tick count (at most 8) that reach at
/// least `highest`.
fn nice_ticks(highest: f64) -> (f64, u32) {
    if highest <= 0.0 || !highest.is_finite() {
        return (1.0, 1);
    }
    let raw = highest / 5.0;
    let magnitude = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|factor| factor * magnitude)
        .find(|&step| highest / step <= 8.0)
        .unwrap_or(10.0 * magnitude);
    (step, (highest / step).ceil().max(1.0) as u32)
}

/// A tick's label, with as many decimals as the step needs.
fn tick_label(value: f64, step: f64) -> String {
    let decimals = if step >= 1.0 {
        0
    } else {
        (-step.log10().floor()) as usize
    };
    format!("{value:.decimals$}")
}

/// Escapes text for XML.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::procedure::RunSummary;

    /// A procedure of one array whose run `i` measured `mbps[i]` large
    /// MB/s at `streams[i]`, after `snaps[i]` snapshots.
    fn procedure(streams: &[Option<u32>], snaps: &[u64], mbps: &[f64]) -> ProcedureReport {
        let runs = (0..mbps.len())
            .map(|index| RunSummary {
                run: index + 1,
                label: String::new(),
                num_large: streams[index],
                arrays: vec![RunFigures {
                    start_s: index as f64,
                    volume_used_percent: Some(40.0 + index as f64),
                    volume: None,
                    snapshots_taken: snaps[index],
                    snapshots_refused: 0,
                    snapshots_held: None,
                    figures: PointFigures {
                        array: "node".into(),
                        iops: 1.0,
                        mbps: mbps[index],
                        latency_ms_avg: 2.0,
                        latency_ms_p99: 3.0,
                        small_iops: Some(1.0),
                        large_mbps: Some(mbps[index]),
                    },
                }],
            })
            .collect();
        ProcedureReport {
            name: "p".into(),
            runs,
        }
    }

    /// The `d` attribute of every series path, in order.
    fn paths(svg: &str) -> Vec<&str> {
        (svg.split("class=\"series\"").skip(1))
            .map(|rest| {
                rest.split(" d=\"")
                    .nth(1)
                    .unwrap()
                    .split('"')
                    .next()
                    .unwrap()
            })
            .collect()
    }

    #[test]
    fn a_procedure_that_walks_stream_counts_draws_a_line_per_round() {
        let streams = [Some(1), Some(2), Some(1), Some(2), Some(1), Some(2)];
        let report = procedure(&streams, &[0, 0, 0, 0, 1, 1], &[9.0; 6]);
        let chart = render_procedure(&report);
        // Three rounds (a count coming again, then a snapshot), two panels.
        assert_eq!(paths(&chart).len(), 6, "{chart}");
        assert!(
            chart.contains(">node #1: 0 snaps, 40.0 %</text>"),
            "{chart}"
        );
        assert!(
            chart.contains(">node #2: 0 snaps, 42.0 %</text>"),
            "{chart}"
        );
        assert!(
            chart.contains(">node #3: 1 snaps, 44.0 %</text>"),
            "{chart}"
        );
        assert!(chart.contains(">Large-I/O MB/s (10^6 bytes per second)</text>"));
        let first = paths(&chart)[0];
        assert_eq!(first.matches(" L").count(), 1, "two points: {first}");
    }

    #[test]
    fn a_procedure_without_stream_counts_draws_a_line_per_array_over_its_runs() {
        let report = procedure(&[None, None, None], &[0, 1, 2], &[5.0, 4.0, 3.0]);
        let chart = render_procedure(&report);
        let paths = paths(&chart);
        assert_eq!(paths.len(), 2, "one array, two panels");
        assert_eq!(
            paths[0].matches(" L").count(),
            2,
            "three runs: {}",
            paths[0]
        );
        assert!(chart.contains(">run step</text>"));
        let heights: Vec<f64> = (paths[0].split([' ', ',']))
            .skip(1)
            .step_by(2)
            .map(|y| y.parse().unwrap())
            .collect();
        assert!(
            heights.windows(2).all(|pair| pair[0] < pair[1]),
            "falling MB/s is drawn lower each run: {heights:?}"
        );
    }

    #[test]
    fn ticks_are_nice_and_cover_the_data() {
        assert_eq!(nice_ticks(5913.0), (1000.0, 6));
        assert_eq!(nice_ticks(43.5), (10.0, 5));
        assert_eq!(nice_ticks(0.7), (0.1, 7));
        assert_eq!(nice_ticks(0.0), (1.0, 1));
        assert_eq!(tick_label(0.30000000000000004, 0.1), "0.3");
        assert_eq!(escape("a<b & \"c\""), "a&lt;b &amp; &quot;c&quot;");
    }
}
