//! The end-to-end table: each figure next to its goal.

use std::fmt::Write as _;

use crate::stats::{median, percentile};

/// One line of the table.
#[derive(Debug, Clone)]
pub struct Row {
    /// What was run (source and mode).
    pub run: String,
    /// What was measured.
    pub measure: String,
    /// The goal, as text.
    pub goal: String,
    /// The figure, as text (`-` when not measured, or why not).
    pub measured: String,
    /// Whether the goal is met, when it can be told.
    pub met: Option<bool>,
}

/// The whole table.
#[derive(Debug, Clone, Default)]
pub struct Table {
    /// Its lines, in order.
    pub rows: Vec<Row>,
}

impl Table {
    /// Adds a line.
    pub fn add(
        &mut self,
        run: &str,
        measure: &str,
        goal: &str,
        measured: impl Into<String>,
        met: Option<bool>,
    ) {
        self.rows.push(Row {
            run: run.to_owned(),
            measure: measure.to_owned(),
            goal: goal.to_owned(),
            measured: measured.into(),
            met,
        });
    }

    /// A Markdown table (readable as plain text too).
    pub fn render(&self) -> String {
        let mut out = String::from(
            "| run | measure (end to end) | goal | measured | met |\n|---|---|---|---|---|\n",
        );
        for r in &self.rows {
            let met = match r.met {
                Some(true) => "yes",
                Some(false) => "NO",
                None => "",
            };
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {met} |",
                r.run, r.measure, r.goal, r.measured
            );
        }
        out
    }
}

/// Milliseconds with a precision that suits their size.
pub fn ms(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.0} ms")
    } else if x >= 10.0 {
        format!("{x:.1} ms")
    } else {
        format!("{x:.2} ms")
    }
}

/// `p50 / p99 ms (n)` of `values`, with whether both are within `goals`.
pub fn p50_p99(values: &[f64], goals: (f64, f64)) -> (String, Option<bool>) {
    match (median(values), percentile(values, 99.0)) {
        (Some(p50), Some(p99)) => (
            format!("{} / {} (n={})", ms(p50), ms(p99), values.len()),
            Some(p50 <= goals.0 && p99 <= goals.1),
        ),
        _ => ("-".to_owned(), None),
    }
}

/// Seconds.
pub fn secs(x: f64) -> String {
    format!("{x:.2} s")
}
