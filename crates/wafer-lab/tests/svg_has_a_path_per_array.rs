//! The SVG chart draws every array in both panels and names it in the
//! legend.

use wafer_lab::report::svg;

mod common;

#[test]
fn the_chart_has_a_line_per_array_per_panel() {
    let report = common::small_run(2);
    let chart = svg::render(&report);
    assert!(chart.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
    assert!(chart.trim_end().ends_with("</svg>"));
    for name in ["plain", "cached"] {
        let lines = chart
            .matches(&format!("class=\"series\" data-array=\"{name}\""))
            .count();
        assert_eq!(lines, 2, "{name}: one line in each panel");
        assert!(
            chart.contains(&format!(">{name} (in-place)</text>")),
            "{name} in the legend"
        );
    }
    assert!(chart.contains("IOPS") && chart.contains("latency (ms)"));
    assert_eq!(
        chart.matches("<circle").count(),
        2 * 2 * 3,
        "a marker per segment"
    );
}
