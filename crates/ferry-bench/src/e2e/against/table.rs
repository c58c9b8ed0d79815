//! One table per size, mode and minimum sync period: a row per measure, the columns Ferry,
//! kube-proxy, and their ratio (Ferry / kube-proxy: below 1, Ferry took less).

use std::fmt::Write as _;

use super::measure::Side;
use crate::stats::{median, percentile};

/// One figure.
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    /// A number, how it is written (`ms`, `s`, `MiB`, `µs`), and a note after it.
    Num(f64, &'static str, String),
    /// Text without a ratio (a count, a failure, "not exported").
    Text(String),
}

impl Cell {
    fn num(v: Option<f64>, unit: &'static str) -> Cell {
        v.map_or_else(
            || Cell::Text("-".into()),
            |v| Cell::Num(v, unit, String::new()),
        )
    }

    fn value(&self) -> Option<f64> {
        match self {
            Cell::Num(v, ..) => Some(*v),
            Cell::Text(_) => None,
        }
    }

    /// The cell as written in the table.
    pub fn render(&self) -> String {
        match self {
            Cell::Num(v, unit, note) => format!("{}{note}", number(*v, unit)),
            Cell::Text(t) => t.clone(),
        }
    }
}

/// `v` with a precision that suits its size, and its unit.
pub fn number(v: f64, unit: &str) -> String {
    let digits = if v >= 100.0 {
        0
    } else if v >= 10.0 {
        1
    } else {
        2
    };
    format!("{v:.digits$} {unit}")
}

/// Ferry / kube-proxy, written with three significant figures (`-` when either is missing
/// or kube-proxy's is 0).
pub fn ratio(ferry: Option<f64>, kube_proxy: Option<f64>) -> String {
    match (ferry, kube_proxy) {
        (Some(f), Some(k)) if k > 0.0 && f.is_finite() => {
            let r = f / k;
            if r >= 10.0 {
                format!("{r:.1}")
            } else if r >= 0.1 {
                format!("{r:.3}")
            } else {
                format!("{r:.4}")
            }
        }
        _ => "-".into(),
    }
}

/// The rows' names and how each is read from a side, in order.
fn cells(side: &Side, churn: &str) -> Vec<(String, Cell)> {
    let mean = |m: Option<(f64, f64)>| match m {
        Some((ms, n)) => Cell::Num(ms, "ms", format!(" (n={n:.0})")),
        None => Cell::Text("not exported".into()),
    };
    let lost = |n: usize| {
        if n > 0 {
            format!(", {n} never seen")
        } else {
            String::new()
        }
    };
    let with = |v: Option<f64>, unit: &'static str, note: String| match v {
        Some(v) => Cell::Num(v, unit, note),
        None => Cell::Text(format!("-{note}")),
    };
    let n = side.change_ms.len();
    let rows = vec![
        (
            "start → 7 ClusterIPs answered (first, last, 5 spread)".into(),
            match side.start_s {
                Some(s) => Cell::Num(s, "s", String::new()),
                None => Cell::Text(format!("{} of 7 never answered", side.unanswered)),
            },
        ),
        (
            "… CPU seconds until then (proxy and its children)".into(),
            Cell::num(side.start_cpu_s, "s"),
        ),
        (
            "one endpoint made ready → a new connection lands on it, p50".into(),
            with(median(&side.change_ms), "ms", format!(" (n={n}{})", lost(side.changes_lost))),
        ),
        (
            "… p99".into(),
            Cell::num(percentile(&side.change_ms, 99.0), "ms"),
        ),
        (
            "of which: the write → its event seen by a watch beside the proxy (the API's part), p50"
                .into(),
            with(
                median(&side.api_ms),
                "ms",
                format!(" (n={})", side.api_ms.len()),
            ),
        ),
        (
            format!("churn {churn}: CPU seconds (proxy and its children)"),
            with(side.churn_cpu_s, "s", format!(" in {:.0} s", side.churn_wall_s)),
        ),
        (
            format!("churn {churn}: a followed change lands, p50"),
            with(
                median(&side.churn_ms),
                "ms",
                format!(" (n={}{})", side.churn_ms.len(), lost(side.churn_lost)),
            ),
        ),
        (
            "… p99".into(),
            Cell::num(percentile(&side.churn_ms, 99.0), "ms"),
        ),
        (
            format!("churn {churn}: last changed Services programmed at its end"),
            Cell::Text(format!(
                "{} of {} (writes took {:.1} s)",
                side.checked - side.unprogrammed,
                side.checked,
                side.churn_write_s
            )),
        ),
        ("VmHWM at the end".into(), Cell::num(side.hwm_mib, "MiB")),
        (
            "new connection to the first ClusterIP, p50".into(),
            Cell::num(median(&side.connect_first_us), "µs"),
        ),
        (
            "new connection to the last ClusterIP, p50".into(),
            Cell::num(median(&side.connect_last_us), "µs"),
        ),
        (
            "sync_proxy_rules_duration_seconds, mean at start".into(),
            mean(side.sync_start),
        ),
        (
            "sync_proxy_rules_duration_seconds, mean over changes and churn".into(),
            mean(side.sync_changes),
        ),
        (
            "network_programming_duration_seconds, mean over changes and churn".into(),
            mean(side.programming),
        ),
    ];
    if !side.gave_up {
        return rows;
    }
    // Never answered: only the start, its CPU seconds and VmHWM were measured.
    rows.into_iter()
        .enumerate()
        .map(|(i, (name, cell))| match i {
            0 | 1 => (name, cell),
            _ if name == "VmHWM at the end" => (name, cell),
            _ => (name, Cell::Text("not measured (never answered)".into())),
        })
        .collect()
}

/// The Markdown table of one comparison (a side that failed: its error in every row).
pub fn render(
    title: &str,
    churn: &str,
    ferry: &Result<Side, String>,
    kube_proxy: &Result<Side, String>,
) -> String {
    let rows = |side: &Result<Side, String>| match side {
        Ok(s) => cells(s, churn),
        Err(e) => cells(&Side::default(), churn)
            .into_iter()
            .map(|(name, _)| (name, Cell::Text(format!("failed: {e}"))))
            .collect(),
    };
    let (f, k) = (rows(ferry), rows(kube_proxy));
    let mut out = format!(
        "{title}\n\n| measure | Ferry | kube-proxy | Ferry / kube-proxy |\n|---|---|---|---|\n"
    );
    for ((name, fc), (_, kc)) in f.iter().zip(&k) {
        let _ = writeln!(
            out,
            "| {name} | {} | {} | {} |",
            fc.render(),
            kc.render(),
            ratio(fc.value(), kc.value())
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_are_ferry_over_kube_proxy() {
        assert_eq!(ratio(Some(1.0), Some(20.0)), "0.0500");
        assert_eq!(ratio(Some(3.0), Some(4.0)), "0.750");
        assert_eq!(ratio(Some(30.0), Some(2.0)), "15.0");
        assert_eq!(ratio(Some(1.0), Some(0.0)), "-");
        assert_eq!(ratio(None, Some(1.0)), "-");
    }

    #[test]
    fn numbers_keep_about_three_figures() {
        assert_eq!(number(1234.5, "ms"), "1234 ms");
        assert_eq!(number(12.345, "s"), "12.3 s");
        assert_eq!(number(1.2345, "MiB"), "1.23 MiB");
    }

    #[test]
    fn a_table_has_a_row_per_measure_and_a_failed_side_says_why() {
        let ferry = Side {
            start_s: Some(0.5),
            change_ms: vec![2.0, 4.0, 3.0],
            hwm_mib: Some(30.0),
            ..Side::default()
        };
        let text = render("## t", "100/s", &Ok(ferry), &Err("no kube-proxy".into()));
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "## t");
        assert_eq!(
            lines[2],
            "| measure | Ferry | kube-proxy | Ferry / kube-proxy |"
        );
        assert_eq!(lines.len(), 4 + 15);
        assert!(
            lines[4].contains("| 0.50 s | failed: no kube-proxy | - |"),
            "{}",
            lines[4]
        );
        assert!(lines[6].contains("3.00 ms (n=3)"), "{}", lines[6]);
        assert!(text.contains("| VmHWM at the end | 30.0 MiB |"));
        assert!(text.contains("not exported") || text.contains("failed"));
    }

    #[test]
    fn a_side_that_never_answered_shows_only_what_was_measured() {
        let ferry = Side {
            start_s: Some(0.5),
            start_cpu_s: Some(0.4),
            ..Side::default()
        };
        let kube_proxy = Side {
            unanswered: 7,
            start_cpu_s: Some(599.0),
            gave_up: true,
            hwm_mib: Some(300.0),
            ..Side::default()
        };
        let text = render("t", "100/s", &Ok(ferry), &Ok(kube_proxy));
        assert!(text.contains("| 7 of 7 never answered |"), "{text}");
        assert!(text.contains("| 0.40 s | 599 s | "), "{text}");
        assert!(
            text.contains("| VmHWM at the end | - | 300 MiB |"),
            "{text}"
        );
        let skipped = text.matches("not measured (never answered)").count();
        assert_eq!(skipped, 12, "{text}");
    }

    #[test]
    fn both_sides_give_a_ratio() {
        let side = |s: f64| Side {
            start_s: Some(s),
            ..Side::default()
        };
        let text = render("t", "100/s", &Ok(side(0.5)), &Ok(side(10.0)));
        assert!(text.contains("| 0.50 s | 10.0 s | 0.0500 |"), "{text}");
    }
}
