//! `ferry status` for people: a header (node, mode, source, each family's syncs and kernel),
//! then one block per frontend: the frontend line, then its backends (`=>` marks those new
//! connections may go to), each followed by its Pod's readiness probes, if Ferry runs any.

use std::fmt::Write as _;

use super::{Backend, FamilyStatus, Frontend, Status};

/// The whole status as text.
pub fn render(s: &Status) -> String {
    let mut out = format!(
        "ferry v{} on node {}: {}; source {}\n",
        s.version, s.node, s.mode, s.source.description
    );
    if let Some(p) = &s.source.problem {
        let _ = writeln!(out, "source: {p}");
    }
    for f in &s.families {
        family(&mut out, f);
    }
    for line in &s.conntrack {
        let _ = writeln!(out, "conntrack: {line}");
    }
    if s.frontends.is_empty() {
        out.push_str("\nno Service to program\n");
        return out;
    }
    let width = |f: fn(&Frontend) -> String| s.frontends.iter().map(|x| f(x).len()).max();
    let widths = [
        width(|f| format!("{}/{}", f.address, f.protocol)).unwrap_or(0),
        width(|f| f.kind.clone()).unwrap_or(0),
        width(name).unwrap_or(0),
    ];
    out.push('\n');
    for f in &s.frontends {
        frontend(&mut out, f, widths);
    }
    out
}

fn family(out: &mut String, f: &FamilyStatus) {
    let sync = match &f.last_sync {
        Some(r) => format!("last sync {} ({}, {:.1} ms)", r.time, r.kind, r.duration_ms),
        None => "no successful sync yet".to_owned(),
    };
    let full = f
        .last_full_sync
        .as_ref()
        .map(|t| format!(", last full sync {t}"))
        .unwrap_or_default();
    let kernel = match (&f.kernel.error, f.kernel.present) {
        (Some(e), _) => format!("cannot be read: {e}"),
        (None, true) => "the mode's rules are there".to_owned(),
        (None, false) => "the mode's rules are not there".to_owned(),
    };
    let _ = writeln!(out, "{}: {sync}{full}; kernel: {kernel}", f.family);
    if f.failures > 0 {
        let _ = writeln!(
            out,
            "{}: {} failed syncs since (the last good rules stay): {}",
            f.family,
            f.failures,
            f.last_error.as_deref().unwrap_or("")
        );
    }
    for s in &f.kernel.stray {
        let _ = writeln!(
            out,
            "{}: the kernel holds {s}, of a service Ferry would not program",
            f.family
        );
    }
}

fn name(f: &Frontend) -> String {
    format!("{}:{}", f.service, f.port)
}

fn frontend(out: &mut String, f: &Frontend, [w0, w1, w2]: [usize; 3]) {
    let mut policy = format!("policy {}", f.policy.traffic_policy);
    if let Some(t) = f.policy.affinity_seconds {
        let _ = write!(policy, ", affinity {t}s");
    }
    let dispatch = match &f.endpoint_set {
        Some(set) => format!("{} to {set} endpoints", f.dispatch),
        None => f.dispatch.clone(),
    };
    let _ = writeln!(
        out,
        "{:w0$}  {:w1$}  {:w2$}  {policy}; {dispatch}; kernel: {}",
        format!("{}/{}", f.address, f.protocol),
        f.kind,
        name(f),
        f.kernel.state
    );
    for d in &f.kernel.differences {
        let _ = writeln!(out, "    kernel differs: {d}");
    }
    if let Some(a) = &f.policy.answers_on {
        let _ = writeln!(out, "    answers on {a}");
    }
    if !f.policy.source_ranges.is_empty() {
        let _ = writeln!(out, "    only from {}", f.policy.source_ranges.join(", "));
    }
    if f.policy.topology != "no topology hints used" {
        let _ = writeln!(out, "    {}", f.policy.topology);
    }
    if f.backends.is_empty() {
        out.push_str("    no endpoints\n");
    }
    for b in &f.backends {
        backend(out, b);
    }
}

fn backend(out: &mut String, b: &Backend) {
    let mut state: Vec<&str> = Vec::new();
    if b.ready {
        state.push("ready");
    } else if b.serving {
        state.push("serving");
    } else {
        state.push("not ready");
    }
    if b.terminating {
        state.push("terminating");
    }
    if b.local {
        state.push("local");
    }
    let mut line = format!(
        "    {} {:21} {}",
        if b.used { "=>" } else { "  " },
        b.address,
        state.join(", ")
    );
    let whereabouts: Vec<String> = [
        b.node.as_ref().map(|n| format!("node {n}")),
        b.pod.as_ref().map(|p| format!("Pod {p}")),
    ]
    .into_iter()
    .flatten()
    .collect();
    if !whereabouts.is_empty() {
        let _ = write!(line, " ({})", whereabouts.join(", "));
    }
    if let Some(why) = &b.excluded {
        let _ = write!(line, ": not used: {why}");
    }
    out.push_str(line.trim_end());
    out.push('\n');
    for p in &b.probes {
        let _ = writeln!(out, "          {}", p.describe());
    }
}
