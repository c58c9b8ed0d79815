//! nftables mode's `explain --live`: the traced destination's elements and chains in the
//! kernel's table, compared with the compiled ones.

use ferry_compile::nft::{Ruleset, Value, Verdict};
use ferry_compile::trace::{Frontend, Trace};

use super::LiveTable;
use crate::live::LiveReport;

/// The element key of the traced frontend (`10.96.0.1 . tcp . 80` or `tcp . 32223`).
fn frontend_key(t: &Trace) -> String {
    let p = &t.packet;
    match t.frontend {
        Some(Frontend::NodePort) => format!("{} . {}", p.protocol, p.port),
        _ => format!("{} . {} . {}", p.dst, p.protocol, p.port),
    }
}

/// Compares the compiled objects of the traced destination with the live table.
pub(crate) fn check(t: &Trace, compiled: &Ruleset, live: Option<&LiveTable>) -> LiveReport {
    let Some(live) = live else {
        return LiveReport::absent("Ferry's table");
    };
    let key = frontend_key(t);
    let slot_prefix = format!("{key} . ");
    let mine = |k: &str| k == key || k.starts_with(&slot_prefix);
    let by_node_port = t.frontend == Some(Frontend::NodePort);
    // Session affinity pins are written by the kernel, not by Ferry: never a difference.
    let relevant = |set: &str| {
        set.contains("nodeport") == by_node_port
            && !matches!(set, "nodeport-ips" | "affinity" | "nodeport-affinity")
    };
    let mut report = LiveReport {
        table_present: true,
        checked: 0,
        differences: Vec::new(),
        endpoints: Vec::new(),
    };
    let compiled_elements = t
        .service
        .as_ref()
        .and_then(|s| compiled.services.get(&s.service))
        .into_iter()
        .flat_map(|r| r.all())
        .collect::<Vec<_>>();
    // The compiled elements for this destination: are they in the kernel, with the same value?
    for e in compiled_elements
        .iter()
        .filter(|e| relevant(e.set) && mine(&e.key.to_string()))
    {
        report.checked += 1;
        let want = e.value.as_ref().map(ToString::to_string);
        match live
            .elements
            .get(e.set)
            .and_then(|m| m.get(&e.key.to_string()))
        {
            None => report.differences.push(format!(
                "map {} lacks element {} (Ferry would program it)",
                e.set, e.key
            )),
            Some(have) if *have != want => report.differences.push(format!(
                "map {} element {}: the kernel has {}, Ferry would program {}",
                e.set,
                e.key,
                have.as_deref().unwrap_or("-"),
                want.as_deref().unwrap_or("-")
            )),
            Some(_) => {}
        }
        if let Some(Value::Verdict(Verdict::Goto(chain))) = &e.value {
            report.checked += 1;
            if !live.chains.contains(chain) {
                report
                    .differences
                    .push(format!("chain {chain} is missing from the kernel"));
            }
        }
    }
    // Kernel elements for this destination that Ferry would not program, and the endpoints
    // the kernel's maps hold for it.
    for (set, elements) in live.elements.iter().filter(|(s, _)| relevant(s)) {
        for (k, v) in elements.iter().filter(|(k, _)| mine(k)) {
            let known = compiled_elements
                .iter()
                .any(|e| e.set == set.as_str() && e.key.to_string() == *k);
            if !known {
                let value = v.as_deref().map(|v| format!(" : {v}")).unwrap_or_default();
                report.differences.push(format!(
                    "map {set} has element {k}{value} that Ferry would not program"
                ));
            }
            if let (true, Some(v)) = (set.ends_with("-endpoints"), v) {
                let ep = v.replacen(" . ", ":", 1);
                if !report.endpoints.contains(&ep) {
                    report.endpoints.push(ep);
                }
            }
        }
    }
    report
}

#[cfg(test)]
pub(super) mod tests;
