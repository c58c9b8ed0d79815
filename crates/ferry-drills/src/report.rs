//! The drills' table: one row per drill (and mode), with the figure that matters.

use std::fmt::Write as _;

/// One drill's result.
#[derive(Debug, Clone)]
pub struct Row {
    /// The drill (`kill -9 mid-sync`).
    pub drill: String,
    /// The mode or variant it ran in (`nftables`, `iptables-legacy`, …).
    pub mode: String,
    /// Repetitions run.
    pub repetitions: usize,
    /// Repetitions that broke a promise.
    pub failures: usize,
    /// The figure that matters, with its name (`broken states: 0`).
    pub figure: String,
    /// What went wrong, or other figures.
    pub notes: String,
}

impl Row {
    /// A row.
    pub fn new(drill: &str, mode: &str) -> Row {
        Row {
            drill: drill.to_owned(),
            mode: mode.to_owned(),
            repetitions: 0,
            failures: 0,
            figure: String::new(),
            notes: String::new(),
        }
    }

    /// Counts a repetition; a failure adds `why` to the notes (the first few only).
    pub fn rep(&mut self, failed: Option<String>) {
        self.repetitions += 1;
        if let Some(why) = failed {
            self.failures += 1;
            if self.failures <= 3 {
                self.note(&why);
            }
        }
    }

    /// Adds a note.
    pub fn note(&mut self, text: &str) {
        if !self.notes.is_empty() {
            self.notes.push_str("; ");
        }
        self.notes.push_str(text);
    }
}

/// The header of the table.
pub fn header() -> String {
    "| drill | mode | repetitions | failures | figure | notes |\n|---|---|---|---|---|---|"
        .to_owned()
}

/// One row of the table (Markdown, readable as plain text).
pub fn render(r: &Row) -> String {
    let mut s = String::new();
    let notes = r.notes.replace('|', "/").replace('\n', " ");
    let _ = write!(
        s,
        "| {} | {} | {} | {} | {} | {} |",
        r.drill, r.mode, r.repetitions, r.failures, r.figure, notes
    );
    s
}

/// Seconds, with a precision that suits their size.
pub fn secs(x: f64) -> String {
    if x >= 10.0 {
        format!("{x:.0} s")
    } else {
        format!("{x:.2} s")
    }
}
