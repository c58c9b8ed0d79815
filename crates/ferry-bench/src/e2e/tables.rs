//! The table's lines for each part, with the goals.

use std::time::Duration;

use super::churn::Churned;
use super::floor::Printed;
use super::report::{ms, p50_p99, secs, Table};
use super::scenario::Measured;
use super::Options;
use crate::stats::{median, percentile};

/// The start-up line: every probed ClusterIP answered, or how many were not.
fn answered(m: &Measured) -> String {
    let sync = m
        .first_sync_ms
        .map(|s| format!(" (Ferry's first sync {})", ms(s)))
        .unwrap_or_default();
    let wrong = if m.wrong_answers > 0 {
        format!(", {} WRONG answers", m.wrong_answers)
    } else {
        String::new()
    };
    match m.first_answers {
        Some(d) => format!("{}{sync}{wrong}", secs(d.as_secs_f64())),
        None => format!("{} of 7 never answered{sync}{wrong}", m.unanswered),
    }
}

fn lost(m: &Measured) -> String {
    if m.changes_lost > 0 {
        format!(", {} never seen", m.changes_lost)
    } else {
        String::new()
    }
}

/// nftables mode (manifests or API).
pub fn nftables(t: &mut Table, run: &str, m: &Measured) {
    let met = m
        .first_answers
        .map(|d| d <= Duration::from_secs(1) && m.wrong_answers == 0);
    t.add(
        run,
        "start → first, last and 5 random ClusterIPs answered",
        "≤ 1 s",
        answered(m),
        met,
    );
    let (text, met) = p50_p99(&m.change_ms, (5.0, 20.0));
    t.add(
        run,
        "one endpoint replaced → a new connection lands on it, p50 / p99",
        "≤ 5 ms / ≤ 20 ms",
        format!("{text}{}", lost(m)),
        met.map(|ok| ok && m.changes_lost == 0),
    );
    t.add(
        run,
        "VmHWM of ferry run at the end",
        "≤ 64 MiB",
        format!("{:.1} MiB", m.hwm_mib),
        Some(m.hwm_mib <= 64.0),
    );
}

/// The EndpointSlice controller's part of a readiness flip (secondary: inside the figure
/// above, measured by a watch beside Ferry).
pub fn controller(t: &mut Table, run: &str, ms: &[f64]) {
    let (text, _) = p50_p99(ms, (5.0, 20.0));
    t.add(
        run,
        "of which: readiness flipped → the controller's slice update seen by a watch, p50 / p99",
        "-",
        text,
        None,
    );
}

/// Connection set-up times of one run. The reference is the straight connection measured
/// after `ferry cleanup`: the one measured before Ferry started ran in a younger lab (no
/// connection made yet) and varied more between runs than the effect measured. The first
/// ClusterIP through two static rules (DNAT, masquerade) shows the part of the difference
/// that is the kernel's connection tracking and NAT, which every kernel-mode proxy needs.
pub fn datapath(t: &mut Table, run: &str, m: &Measured) {
    let Some([before, first, last, with_rules, after, one_rule]) = &m.connect_us else {
        return;
    };
    let (Some(f), Some(l)) = (median(first), median(last)) else {
        return;
    };
    let Some(d) = median(after).or_else(|| median(before)) else {
        return;
    };
    let shown = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), |v| format!("{v:.0} µs"));
    t.add(
        run,
        "new TCP connection straight to an endpoint, p50: no rules (after cleanup; before start) / with rules",
        "(reference)",
        format!(
            "{d:.0} µs ({}) / {}",
            shown(median(before)),
            shown(median(with_rules))
        ),
        None,
    );
    let floor = median(one_rule);
    t.add(
        run,
        "new TCP connection to the first ClusterIP through a static DNAT and masquerade (no rules of Ferry), p50",
        "(kernel NAT floor)",
        floor.map_or_else(|| "-".to_owned(), |c| format!("{c:.0} µs (× {:.2})", c / d)),
        None,
    );
    for (which, v) in [("first", f), ("last", l)] {
        let over_ct = floor.map_or_else(String::new, |c| {
            format!("; × {:.2} of the static NAT", v / c)
        });
        t.add(
            run,
            &format!("new TCP connection to the {which} of N ClusterIPs, p50"),
            "≤ 1.10 × straight",
            format!("{v:.0} µs (× {:.2}{over_ct})", v / d),
            Some(v <= 1.10 * d),
        );
    }
}

/// `ferry rules --proxy-mode iptables`.
pub fn printed(t: &mut Table, p: &Printed) {
    t.add(
        "iptables, ferry rules",
        "print the iptables-restore input: time, peak RSS",
        "-",
        format!(
            "{} , {:.1} MiB ({:.1} MiB of text)",
            secs(p.took.as_secs_f64()),
            p.peak_mib,
            p.text.len() as f64 / 1048576.0
        ),
        None,
    );
}

/// iptables mode on one backend, against its plain restore.
pub fn iptables(t: &mut Table, backend: &str, m: &Measured, plain: Duration) {
    let run = format!("iptables-{backend}, manifests");
    let floor = plain.as_secs_f64();
    t.add(
        &run,
        "plain iptables-restore of ferry rules' output (floor)",
        "-",
        secs(floor),
        None,
    );
    let limit = 1.2 * floor;
    let full = m.first_sync_ms.map(|s| s / 1e3);
    t.add(
        &run,
        "Ferry's first full sync (its log)",
        &format!("≤ 1.2 × floor = {}", secs(limit)),
        full.map_or_else(
            || "-".to_owned(),
            |f| format!("{} (× {:.2})", secs(f), f / floor),
        ),
        full.map(|f| f <= limit),
    );
    t.add(
        &run,
        "start → first, last and 5 random ClusterIPs answered",
        &format!("≤ 1.2 × floor = {}", secs(limit)),
        answered(m),
        m.first_answers.map(|d| d.as_secs_f64() <= limit),
    );
    let (goal, limit_ms) = match backend {
        "nft" => ("≤ 50 ms".to_owned(), 50.0),
        _ => (format!("≤ 1.2 × floor = {}", ms(limit * 1e3)), limit * 1e3),
    };
    if let Some(floor) = m.change_floor {
        t.add(
            &run,
            "a --noflush restore adding one chain to Ferry's rules (floor for a change)",
            "-",
            ms(floor.as_secs_f64() * 1e3),
            None,
        );
    }
    let p50 = median(&m.change_ms);
    let p99 = percentile(&m.change_ms, 99.0);
    t.add(
        &run,
        "one endpoint replaced → a new connection lands on it, p50 (p99)",
        &goal,
        match (p50, p99) {
            (Some(a), Some(b)) => {
                format!("{} ({}) (n={}){}", ms(a), ms(b), m.change_ms.len(), lost(m))
            }
            _ => format!("-{}", lost(m)),
        },
        p50.map(|a| a <= limit_ms && m.changes_lost == 0),
    );
    t.add(
        &run,
        "VmHWM of ferry run at the end",
        "≤ 128 MiB",
        format!("{:.1} MiB", m.hwm_mib),
        Some(m.hwm_mib <= 128.0),
    );
}

/// Sustained churn.
pub fn churn(t: &mut Table, o: &Options, c: &Churned) {
    let run = format!(
        "churn, nftables, manifests, {}/s for {} s",
        o.churn_rate,
        o.churn_duration.as_secs()
    );
    let checked = c.changes.min(o.services);
    t.add(
        &run,
        "every change programmed (each changed Service's newest endpoint answers)",
        "all",
        format!(
            "{} of {checked} (writing took {})",
            checked - c.unprogrammed,
            secs(c.write_secs)
        ),
        Some(c.unprogrammed == 0),
    );
    let p99 = percentile(&c.latency_ms, 99.0);
    t.add(
        &run,
        "change → a new connection lands on the new endpoint, p99 (p50)",
        "≤ 1.2 s",
        match (p99, median(&c.latency_ms)) {
            (Some(p99), Some(p50)) => format!(
                "{} ({}) (n={}, {} lost)",
                ms(p99),
                ms(p50),
                c.latency_ms.len(),
                c.lost
            ),
            _ => "-".to_owned(),
        },
        p99.map(|p| p <= 1200.0 && c.lost == 0),
    );
    let (first, last) = (c.rss_mib.first().copied(), c.rss_mib.last().copied());
    let max = c.rss_mib.iter().copied().fold(f64::NAN, f64::max);
    if let (Some(a), Some(b)) = (first, last) {
        t.add(
            &run,
            "VmRSS of ferry run: churn start → end (max)",
            "flat",
            format!(
                "{a:.1} → {b:.1} MiB (max {max:.1}, VmHWM {:.1}; every 10 s: {})",
                c.hwm_mib,
                c.rss_mib
                    .iter()
                    .step_by(10)
                    .map(|m| format!("{m:.1}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            ),
            Some(b <= a * 1.05 + 1.0),
        );
    }
}
