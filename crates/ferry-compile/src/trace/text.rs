//! Renderings of a [`Trace`]: text for people, Mermaid for a picture.

use std::fmt::Write as _;

use super::{Frontend, Masquerade, StepKind, Trace, Verdict};

impl Trace {
    /// A one-word verdict: `forwarded`, `dropped`, `rejected`, `not-a-service`.
    pub fn verdict_word(&self) -> &'static str {
        match self.verdict {
            Verdict::Forwarded { .. } => "forwarded",
            Verdict::Dropped => "dropped",
            Verdict::Rejected => "rejected",
            Verdict::NotAService => "not-a-service",
        }
    }

    /// Not translated, and addressed to the node itself.
    fn delivered_locally(&self) -> bool {
        self.steps
            .iter()
            .any(|s| s.kind == StepKind::DeliveredLocally)
    }

    /// The explanation for people, naming the mode's objects.
    pub fn to_text(&self) -> String {
        let label = self.objects_label;
        let p = &self.packet;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{} → {}/{} on node {}",
            p.src,
            std::net::SocketAddr::new(p.dst, p.port),
            p.protocol,
            self.node
        );
        let _ = writeln!(out, "from: {}", self.origin);
        for (i, s) in self.steps.iter().enumerate() {
            let _ = writeln!(out, "{}. {}", i + 1, s.what);
            let _ = writeln!(out, "   why: {}", s.why);
            for o in &s.objects {
                let _ = writeln!(out, "   {label}: {o}");
            }
        }
        if !self.candidates.is_empty() {
            out.push_str("endpoints:\n");
            for c in &self.candidates {
                let node = c.node.as_deref().unwrap_or("?");
                let target = c
                    .target
                    .as_ref()
                    .map(|t| format!(" ({t})"))
                    .unwrap_or_default();
                match &c.excluded {
                    None => {
                        let _ = writeln!(out, "   + {} on {node}{target}", c.addr);
                    }
                    Some(why) => {
                        let _ = writeln!(out, "   - {} on {node}{target}: {why}", c.addr);
                    }
                }
                if let Some(note) = &c.note {
                    let _ = writeln!(out, "     {note}");
                }
            }
        }
        if let Some(masq) = self.masquerade_text() {
            let _ = writeln!(out, "masquerade: {masq}");
        }
        // Each target says whether it is masqueraded when that depends on the target.
        let mixed = matches!(self.masquerade(), Some(Masquerade::Some(_)));
        let verdict = match &self.verdict {
            Verdict::Forwarded { targets } => {
                let t: Vec<String> = targets
                    .iter()
                    .map(|t| match (mixed, &t.masquerade) {
                        (true, Some(_)) => format!("{} (masqueraded)", t.addr),
                        (true, None) => format!("{} (not masqueraded)", t.addr),
                        (false, _) => t.addr.to_string(),
                    })
                    .collect();
                format!("FORWARDED to one of {}", t.join(", "))
            }
            Verdict::Dropped => "DROPPED (the client times out)".to_owned(),
            Verdict::Rejected => "REJECTED (connection refused)".to_owned(),
            Verdict::NotAService => "NOT A SERVICE (left alone)".to_owned(),
        };
        let _ = writeln!(out, "verdict: {verdict}");
        out
    }

    /// A Mermaid flowchart: client → node → chain → endpoints (or the drop / reject), naming
    /// the mode's objects.
    pub fn to_mermaid(&self) -> String {
        let p = &self.packet;
        let mut out = String::from("flowchart LR\n");
        let _ = writeln!(out, "  src[\"{} ({})\"]", p.src, self.origin);
        let entry = match self.frontend {
            Some(Frontend::NodePort) => format!("{}:{} NodePort", p.dst, p.port),
            Some(Frontend::ExternalIp) => format!("{}:{} external IP", p.dst, p.port),
            Some(Frontend::LoadBalancerIp) => format!("{}:{} load-balancer IP", p.dst, p.port),
            Some(Frontend::ClusterIp) => format!("{}:{} ClusterIP", p.dst, p.port),
            None => format!("{}:{}", p.dst, p.port),
        };
        let _ = writeln!(out, "  node[\"{}<br/>{entry}\"]", self.node);
        out.push_str("  src --> node\n");
        let mut last = "node".to_owned();
        let mut previous: Option<&String> = None;
        for (i, s) in self.steps.iter().enumerate() {
            let id = format!("s{i}");
            // Consecutive steps often start in the same chain (a dispatch chain marks for
            // masquerade, then DNATs): name the first object this step adds, so no box repeats.
            let label = s
                .objects
                .iter()
                .find(|o| Some(*o) != previous)
                .or(s.objects.first());
            previous = label;
            let label = label.cloned().unwrap_or_else(|| s.what.clone());
            let _ = writeln!(out, "  {id}[\"{}\"]", label.replace('"', "'"));
            let _ = writeln!(out, "  {last} --> {id}");
            last = id;
        }
        let proxied = self
            .steps
            .iter()
            .any(|s| matches!(s.kind, StepKind::Proxied(_)));
        match &self.verdict {
            Verdict::Forwarded { targets } => {
                for (i, t) in targets.iter().enumerate() {
                    let via = match t.masquerade {
                        _ if proxied => "proxied",
                        Some(_) => "DNAT + SNAT",
                        None => "DNAT",
                    };
                    let node = self
                        .candidates
                        .iter()
                        .find(|c| c.addr == t.addr)
                        .and_then(|c| c.node.clone())
                        .unwrap_or_default();
                    let _ = writeln!(out, "  ep{i}[\"{}<br/>{node}\"]", t.addr);
                    let _ = writeln!(out, "  {last} -->|{via}| ep{i}");
                }
            }
            Verdict::Dropped => {
                let _ = writeln!(out, "  drop((dropped))\n  {last} --> drop");
            }
            Verdict::Rejected => {
                let _ = writeln!(out, "  reject((connection refused))\n  {last} --> reject");
            }
            Verdict::NotAService if self.delivered_locally() => {
                let _ = writeln!(out, "  local((delivered to the node))\n  {last} --> local");
            }
            Verdict::NotAService => {
                let _ = writeln!(out, "  route((routed normally))\n  {last} --> route");
            }
        }
        out
    }
}
