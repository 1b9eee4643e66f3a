//! The Prometheus text exposition format (version 0.0.4), written.
//!
//! A scrape's body is a list of metric families. Each starts with
//! `# HELP name text` and `# TYPE name counter|gauge`, then its samples, one
//! a line: `name{label="value",...} number`. Help text escapes `\` and the
//! line feed; label values escape those and `"` as well. Numbers are
//! decimal floating point (Rust's `Display` for `f64`, which never uses an
//! exponent). A family's samples follow its TYPE line and no other family's
//! come between, which is what Prometheus's parser requires; the writer
//! leaves that order to its caller, who writes a family whole.

use std::fmt::Write;

/// A body being written.
#[derive(Debug, Default)]
pub(crate) struct Exposition {
    text: String,
}

impl Exposition {
    /// Starts a family of counters (monotonic; names end `_total`).
    pub(crate) fn counters(&mut self, name: &str, help: &str) {
        debug_assert!(name.ends_with("_total"), "counter {name}");
        self.family(name, "counter", help);
    }

    /// A family of one counter without labels.
    pub(crate) fn counter(&mut self, name: &str, help: &str, value: f64) {
        self.counters(name, help);
        self.sample(name, &[], value);
    }

    /// A family of one gauge without labels.
    pub(crate) fn gauge(&mut self, name: &str, help: &str, value: f64) {
        self.family(name, "gauge", help);
        self.sample(name, &[], value);
    }

    /// Starts a family of gauges, whose samples follow.
    pub(crate) fn family_gauge(&mut self, name: &str, help: &str) {
        self.family(name, "gauge", help);
    }

    /// A family of counters told apart by a `kind` label.
    pub(crate) fn by_kind(&mut self, name: &str, help: &str, kinds: &[(&str, u64)]) {
        self.counters(name, help);
        for (kind, value) in kinds {
            self.sample(name, &[("kind", kind)], *value as f64);
        }
    }

    /// One sample of the family started last.
    pub(crate) fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        self.text.push_str(name);
        if !labels.is_empty() {
            self.text.push('{');
            for (i, (label, value)) in labels.iter().enumerate() {
                let comma = if i == 0 { "" } else { "," };
                let _ = write!(self.text, "{comma}{label}=\"{}\"", escape(value, true));
            }
            self.text.push('}');
        }
        let _ = writeln!(self.text, " {value}");
    }

    /// The body.
    pub(crate) fn finish(self) -> String {
        self.text
    }

    fn family(&mut self, name: &str, kind: &str, help: &str) {
        let help = escape(help, false);
        let _ = writeln!(self.text, "# HELP {name} {help}\n# TYPE {name} {kind}");
    }
}

/// `text` with `\` and line feeds escaped, and `"` too in a label value.
fn escape(text: &str, label: bool) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' => escaped.push_str("\\\\"),
            '\n' => escaped.push_str("\\n"),
            '"' if label => escaped.push_str("\\\""),
            c => escaped.push(c),
        }
    }
    escaped
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_are_written_with_help_type_and_escaped_labels() {
        let mut out = Exposition::default();
        out.counters("x_total", "Help with a \\ and\na line feed.");
        out.sample("x_total", &[("a", "q\"b\\c\nd"), ("e", "f")], 2.5);
        out.gauge("y", "A \"quoted\" gauge.", 3.0);
        assert_eq!(
            out.finish(),
            "# HELP x_total Help with a \\\\ and\\na line feed.\n# TYPE x_total counter\n\
             x_total{a=\"q\\\"b\\\\c\\nd\",e=\"f\"} 2.5\n\
             # HELP y A \"quoted\" gauge.\n# TYPE y gauge\ny 3\n"
        );
    }
}
