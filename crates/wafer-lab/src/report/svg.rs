//! An SVG chart of a run: IOPS (top panel) and average latency in ms
//! (bottom panel) per measured segment, every array a coloured line with a
//! marker per segment, a shared x axis of segment numbers, and a legend.
//!
//! Written by hand, with no drawing crate: axes with "nice" ticks (steps of
//! 1, 2 or 5 times a power of ten, starting from zero so that a flat line
//! looks flat and a fall looks its true size), grid lines, labels with their
//! units. Every number is printed with fixed precision, so the same report
//! gives the same bytes.

use std::fmt::Write;

use super::LabReport;

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

/// One panel: which figure it plots and how it is labelled.
struct Panel {
    title: &'static str,
    top: f64,
    value: fn(&super::SegmentReport) -> f64,
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
    let title = escape(&chart_title(report));
    writeln!(
        svg,
        r#"<text x="{LEFT}" y="28" font-size="15" font-weight="bold">{title}</text>"#
    )
    .expect("writing to a string");
    let panels = [
        Panel {
            title: "IOPS (I/Os per second)",
            top: TOP,
            value: |segment| segment.iops,
        },
        Panel {
            title: "Average latency (ms)",
            top: TOP + PANEL_HEIGHT + PANEL_GAP,
            value: |segment| segment.latency_ms_avg,
        },
    ];
    for panel in &panels {
        draw_panel(&mut svg, report, panel, segments);
    }
    draw_legend(&mut svg, report);
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

/// Axes, ticks, grid and one line per array for one panel.
fn draw_panel(svg: &mut String, report: &LabReport, panel: &Panel, segments: usize) {
    let plot_width = WIDTH - LEFT - RIGHT;
    let bottom = panel.top + PANEL_HEIGHT;
    let highest = report
        .arrays
        .iter()
        .flat_map(|array| array.segments.iter().map(panel.value))
        .fold(0.0, f64::max);
    let (step, ticks) = nice_ticks(highest);
    let y_max = step * ticks as f64;
    let x = |segment: f64| LEFT + (segment - 0.5) / segments as f64 * plot_width;
    let y = |value: f64| bottom - value / y_max * PANEL_HEIGHT;
    let title = panel.title;
    writeln!(
        svg,
        r#"<text x="{LEFT}" y="{:.1}" font-weight="bold">{title}</text>"#,
        panel.top - 8.0
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
    draw_x_axis(svg, bottom, segments, &x, &x_label(report));
    writeln!(
        svg,
        r#"<path d="M{LEFT},{:.1} V{bottom:.1} H{:.1}" fill="none" stroke="black"/>"#,
        panel.top,
        LEFT + plot_width
    )
    .expect("writing to a string");
    for (index, array) in report.arrays.iter().enumerate() {
        let points: Vec<(f64, f64)> = array
            .segments
            .iter()
            .map(|segment| (x(f64::from(segment.index)), y((panel.value)(segment))))
            .collect();
        draw_series(svg, &array.name, COLOURS[index % COLOURS.len()], &points);
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

/// Segment numbers under the plot, at most about fifteen of them, and the
/// axis's `label`.
fn draw_x_axis(
    svg: &mut String,
    bottom: f64,
    segments: usize,
    x: &dyn Fn(f64) -> f64,
    label: &str,
) {
    let every = segments.div_ceil(15);
    for segment in (1..=segments).filter(|s| (s - 1) % every == 0) {
        let at = x(segment as f64);
        writeln!(
            svg,
            r#"<line x1="{at:.1}" y1="{bottom:.1}" x2="{at:.1}" y2="{:.1}" stroke="black"/><text x="{at:.1}" y="{:.1}" text-anchor="middle">{segment}</text>"#,
            bottom + 5.0,
            bottom + 18.0
        )
        .expect("writing to a string");
    }
    writeln!(
        svg,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{label}</text>"#,
        LEFT + (WIDTH - LEFT - RIGHT) / 2.0,
        bottom + 34.0
    )
    .expect("writing to a string");
}

/// One array's line and markers.
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

fn draw_legend(svg: &mut String, report: &LabReport) {
    let left = WIDTH - RIGHT + 20.0;
    for (index, array) in report.arrays.iter().enumerate() {
        let y = TOP + 10.0 + 20.0 * index as f64;
        let colour = COLOURS[index % COLOURS.len()];
        writeln!(
            svg,
            r#"<line x1="{left:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="{colour}" stroke-width="3"/><text x="{:.1}" y="{:.1}">{} ({})</text>"#,
            left + 24.0,
            left + 30.0,
            y + 4.0,
            escape(&array.name),
            array.kind.as_str()
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
