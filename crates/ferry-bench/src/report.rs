//! Figures travel from the measuring child to the parent as `RESULT key=value …` lines; the
//! parent prints them as tables, one `BENCH …` line per N, and the targets.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::stats::Figure;

/// Prefix of the lines a measuring child prints on stdout.
pub const RESULT_PREFIX: &str = "RESULT ";

/// Figures of one N, by key.
pub type Figures = BTreeMap<String, String>;

/// A `RESULT` line.
pub fn result_line(figures: &[Figure]) -> String {
    let mut line = RESULT_PREFIX.trim_end().to_owned();
    for (k, v) in figures {
        let _ = write!(line, " {k}={v}");
    }
    line
}

/// Parses a `RESULT` line into `figures`; other lines are ignored (returns false).
pub fn parse_result_line(line: &str, figures: &mut Figures) -> bool {
    let Some(rest) = line.strip_prefix(RESULT_PREFIX) else {
        return false;
    };
    for pair in rest.split_whitespace() {
        if let Some((k, v)) = pair.split_once('=') {
            figures.insert(k.to_owned(), v.to_owned());
        }
    }
    true
}

/// How one N went.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// Services.
    pub n: usize,
    /// Endpoints per service.
    pub m: usize,
    /// Proxy mode: `nftables`, `iptables-nft` or `iptables-legacy`.
    pub mode: String,
    /// What was measured (possibly partial).
    pub figures: Figures,
    /// `None` when the run completed and was verified; otherwise what went wrong.
    pub failure: Option<String>,
    /// What the verification of the namespaces found.
    pub verification: Option<String>,
}

impl Outcome {
    fn get(&self, key: &str) -> &str {
        self.figures.get(key).map_or("-", String::as_str)
    }

    fn num(&self, key: &str) -> Option<f64> {
        self.figures.get(key).and_then(|v| v.parse().ok())
    }

    /// The machine-readable line.
    pub fn bench_line(&self) -> String {
        let mut line = format!("BENCH mode={} n={} m={}", self.mode, self.n, self.m);
        for key in [
            "compile_ms",
            "full_sync_ms",
            "incr_p50_ms",
            "incr_p90_ms",
            "resync_ms",
            "check_ms",
            "rss_mib",
            "rules",
            "elements",
            "chains",
            "script_bytes",
            "nft_rss_mib",
        ] {
            let _ = write!(line, " {key}={}", self.get(key));
        }
        let status = if self.failure.is_some() {
            "failed"
        } else {
            "ok"
        };
        let _ = write!(line, " status={status}");
        line
    }
}

fn table(out: &mut String, header: &[&str], rows: &[Vec<String>]) {
    let widths: Vec<usize> = (0..header.len())
        .map(|i| {
            rows.iter()
                .map(|r| r[i].len())
                .chain([header[i].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |out: &mut String, cells: &[&str]| {
        let parts: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:>w$}"))
            .collect();
        let _ = writeln!(out, "  {}", parts.join("  "));
    };
    line(out, header);
    for r in rows {
        let cells: Vec<&str> = r.iter().map(String::as_str).collect();
        line(out, &cells);
    }
}

fn kib(bytes: Option<f64>) -> String {
    bytes.map_or_else(|| "-".to_owned(), |b| format!("{:.0}", b / 1024.0))
}

/// Renders everything: tables, `BENCH` lines, targets.
pub fn render(outcomes: &[Outcome], header: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{header}\n");
    let main: Vec<Vec<String>> = outcomes
        .iter()
        .map(|o| {
            let mut row = vec![o.mode.clone(), o.n.to_string(), o.m.to_string()];
            row.extend(["compile_ms", "chains", "rules", "elements"].map(|k| o.get(k).to_owned()));
            row.push(kib(o.num("script_bytes")));
            row.extend(
                [
                    "full_sync_ms",
                    "incr_p50_ms",
                    "incr_p90_ms",
                    "resync_ms",
                    "check_ms",
                    "rss_mib",
                ]
                .map(|k| o.get(k).to_owned()),
            );
            row
        })
        .collect();
    table(
        &mut out,
        &[
            "mode",
            "N",
            "M",
            "compile ms",
            "chains",
            "rules",
            "elements",
            "script KiB",
            "full sync ms",
            "incr p50 ms",
            "incr p90 ms",
            "resync ms",
            "check ms",
            "peak RSS MiB",
        ],
        &main,
    );
    let _ = writeln!(out, "\n  Breakdown (ms unless noted):");
    let detail: Vec<Vec<String>> = outcomes
        .iter()
        .map(|o| {
            let mut row = vec![o.mode.clone(), o.n.to_string()];
            row.extend(
                [
                    "view_ms",
                    "plan_ms",
                    "render_ms",
                    "full_nft_ms",
                    "incr_compile_p50_ms",
                    "incr_nft_p50_ms",
                    "incr_via_netlink",
                    "incr_full",
                    "incr_new_chain_n",
                    "incr_new_chain_max_ms",
                    "incr_bytes_p50",
                    "incr_max_ms",
                    "resync_compile_ms",
                    "resync_nft_ms",
                    "nft_rss_mib",
                    "rss_start_mib",
                    "rss_loaded_mib",
                    "hwm_generated_mib",
                    "agent_compile_ms",
                    "hwm_compile_mib",
                    "hwm_full_mib",
                    "hwm_incr_mib",
                ]
                .map(|k| o.get(k).to_owned()),
            );
            row
        })
        .collect();
    table(
        &mut out,
        &[
            "mode",
            "N",
            "view",
            "plan",
            "render",
            "full: apply",
            "incr: compile",
            "incr: apply",
            "incr via netlink",
            "incr → full",
            "incr new chain",
            "new chain ms",
            "incr bytes",
            "incr max",
            "resync: compile",
            "resync: nft",
            "nft peak RSS MiB",
            "RSS start",
            "RSS loaded",
            "HWM generator",
            "agent compile",
            "HWM compiled",
            "HWM full",
            "HWM incr",
        ],
        &detail,
    );
    let _ = writeln!(
        out,
        "\n  Every mode is measured along the agent's path, with the mode table's applier: full sync / resync = \
         Applier::sync_full (NodeCompiler + the mode's\n  render + the kernel transaction); incr = state.apply(slice) + \
         Applier::needs_full + Applier::sync_partial of the changed service.\n  'apply' columns = time \
         inside the kernel transaction (nftables: the nft tool + the netlink batch; iptables: \
         iptables-restore and the\n  jump rules); 'compile' = the rest (view, plan, render, delta); 'check' = Applier::intact, the periodic round's \
         check that the rules are still in the kernel (median of 5); agent compile = full sync - full: apply.\n  compile/view/plan/render = the staged \
         compile of the final state (median; NodeView::build + Plan::build + the mode's render), run \
         last.\n  'incr new chain' = nftables changes that created a dispatch chain in their batch (a new \
         endpoint count), 'new chain ms' = the slowest of them;\n  'incr -> full' = changes the applier \
         could only make as a full sync. chains (iptables) = nat + filter chains.\n  peak RSS = VmHWM of the \
         measuring process (one process per N) after the syncs, reset after the generator: the agent's path \
         (state +\n  syncs); HWM generator = the peak before that reset; nft peak RSS (nftables) = the nft \
         tool's VmHWM polled while it applies the skeleton\n  to the loaded table (iptables: largest child, \
         getrusage); RSS start = VmRSS before the cluster is generated (binary, libraries);\n  RSS loaded = \
         VmRSS with the state loaded; HWM full/incr = VmHWM after the full sync, the incremental syncs (MiB)."
    );
    ipvs_comparison(&mut out, outcomes);
    for o in outcomes {
        if let Some(v) = &o.verification {
            let _ = writeln!(out, "  {} N={}: {v}", o.mode, o.n);
        }
        if let Some(f) = &o.failure {
            let _ = writeln!(out, "  {} N={}: FAILED: {f}", o.mode, o.n);
        }
    }
    out.push('\n');
    for o in outcomes {
        let _ = writeln!(out, "{}", o.bench_line());
    }
    out.push('\n');
    out.push_str(&targets(outcomes));
    out
}

fn verdict(value: Option<f64>, limit: f64) -> &'static str {
    match value {
        Some(v) if v <= limit => "met",
        Some(_) => "NOT MET",
        None => "not measured",
    }
}

fn show(value: Option<f64>, unit: &str) -> String {
    value.map_or_else(|| "-".to_owned(), |v| format!("{v:.2} {unit}"))
}

/// IPVS mode next to upstream's tools loading the same virtual servers and sets (only when an
/// IPVS run measured it).
fn ipvs_comparison(out: &mut String, outcomes: &[Outcome]) {
    let rows: Vec<Vec<String>> = outcomes
        .iter()
        .filter(|o| o.figures.contains_key("ipvsadm_restore_ms"))
        .map(|o| {
            let mut row = vec![o.n.to_string(), o.m.to_string()];
            row.extend(
                [
                    "ipvs_virtual_servers",
                    "real_servers",
                    "full_sync_ms",
                    "ferry_batch_ms",
                    "ipvsadm_restore_ms",
                    "ipset_restore_ms",
                    "incr_p50_ms",
                    "ferry_change_p50_ms",
                    "ipvsadm_change_p50_ms",
                ]
                .map(|k| o.get(k).to_owned()),
            );
            row
        })
        .collect();
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\n  IPVS mode against upstream's tools, same virtual servers (ms; each tool run includes its process start):"
    );
    table(
        out,
        &[
            "N",
            "M",
            "virtual servers",
            "real servers",
            "Ferry full sync",
            "Ferry IPVS batch",
            "ipvsadm --restore",
            "ipset restore",
            "Ferry incr p50",
            "Ferry change p50",
            "ipvsadm+ipset change p50",
        ],
        &rows,
    );
    let _ = writeln!(
        out,
        "  Ferry full sync = the agent's whole first sync (compile, sets, chains, kube-ipvs0, IPVS); Ferry IPVS batch = the same\n  \
         virtual and real servers through Ferry's client alone; ipvsadm --restore / ipset restore = upstream's tools loading them.\n  \
         Ferry incr = the agent's one-endpoint sync; Ferry change = only that change's real servers through Ferry's client;\n  \
         ipvsadm+ipset change = the same real servers with ipvsadm --restore, plus ipset restore of the change's entries when it has any."
    );
}

/// The reference targets, judged on the N = 10 000 run.
pub fn targets(outcomes: &[Outcome]) -> String {
    let mut out = String::from("Targets (reference, judged at N=10000, nftables mode):\n");
    let Some(o) = outcomes
        .iter()
        .find(|o| o.n == 10_000 && o.mode == "nftables")
    else {
        for t in [
            "full sync of 10000 x 10 <= 1 s",
            "one-endpoint change at 10000 services <= 5 ms",
            "RSS <= 64 MiB",
        ] {
            let _ = writeln!(
                out,
                "  {t}: not evaluated (N=10000 was not part of this run)"
            );
        }
        return out;
    };
    let note = if o.m == 10 {
        String::new()
    } else {
        format!(" (measured with M={})", o.m)
    };
    let full = o.num("full_sync_ms");
    let _ = writeln!(
        out,
        "  full sync of 10000 x 10 <= 1 s{note}: compile and apply {} -> {}",
        show(full, "ms"),
        verdict(full, 1000.0),
    );
    let p50 = o.num("incr_p50_ms");
    let p90 = o.num("incr_p90_ms");
    let _ = writeln!(
        out,
        "  one-endpoint change at 10000 services <= 5 ms{note}: p50 {} -> {}; p90 {} -> {}",
        show(p50, "ms"),
        verdict(p50, 5.0),
        show(p90, "ms"),
        verdict(p90, 5.0)
    );
    let rss = o.num("rss_mib");
    let _ = writeln!(
        out,
        "  RSS <= 64 MiB{note}: peak {} -> {}",
        show(rss, "MiB"),
        verdict(rss, 64.0)
    );
    out
}
