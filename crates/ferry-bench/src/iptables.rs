//! One N in iptables mode, measured in the current process (inside its throw-away network
//! namespace), with the agent's path: the same compile step as nftables mode (node view →
//! plan), rendered with upstream kube-proxy's iptables layout and loaded with
//! `iptables-restore --noflush` of one backend.
//!
//! Reports the same figure keys as [`crate::measure`], so both modes print side by side.

use std::collections::BTreeSet;
use std::time::Instant;

use anyhow::{bail, ensure, Context as _};
use ferry_compile::iptables::{self, RenderContext, Restore, Ruleset};
use ferry_compile::{NodeCompiler, Plan, ServicePlan};
use ferry_dataplane::iptables::{Backend, IptablesDataplane};
use ferry_dataplane::SyncKind;
use ferry_model::{NodeView, Object};

use crate::compile::{build_state, compile_config, node_context};
use crate::measure::{memory_mib, Figure, MeasureOptions};
use crate::stats::{median, ms, percentile};

fn f2(x: f64) -> String {
    format!("{x:.2}")
}

fn med(v: &[f64]) -> String {
    median(v).map_or_else(|| "-".to_owned(), f2)
}

/// Runs every phase for `backend`; see [`crate::measure::run`].
pub fn run(
    opts: &MeasureOptions,
    backend: Backend,
    mut report: impl FnMut(&[Figure]),
    mut progress: impl FnMut(&str),
) -> anyhow::Result<()> {
    let spec = opts.spec;
    let ctx = node_context();
    let cfg = compile_config()?;
    let mut state = build_state(spec.objects());
    report(&[("rss_loaded_mib", f2(memory_mib("VmRSS:")?))]);

    // 1. Compile: node view → plan → iptables ruleset, median of a few runs.
    let (mut total, mut view_t, mut plan_t, mut render_t) = (vec![], vec![], vec![], vec![]);
    let mut ruleset: Option<Ruleset> = None;
    for _ in 0..opts.compile_runs.max(1) {
        drop(ruleset.take());
        let t = Instant::now();
        let view = NodeView::build(&state, &ctx);
        let v = t.elapsed();
        let plan = Plan::build(&view, &cfg);
        let p = t.elapsed() - v;
        let rs = iptables::render(&plan);
        let all = t.elapsed();
        total.push(ms(all));
        view_t.push(ms(v));
        plan_t.push(ms(p));
        render_t.push(ms(all - v - p));
        ruleset = Some(rs);
    }
    let Some(ruleset) = ruleset else {
        bail!("no compile run")
    };
    let chains = ruleset.nat_chain_names().len() + iptables::BASE_CHAINS_FILTER.len();
    let service_chains = ruleset.service_chain_names().count();
    report(&[
        ("n", spec.services.to_string()),
        ("m", spec.endpoints.to_string()),
        ("compile_ms", med(&total)),
        ("view_ms", med(&view_t)),
        ("plan_ms", med(&plan_t)),
        ("render_ms", med(&render_t)),
        ("chains", chains.to_string()),
        ("service_chains", service_chains.to_string()),
        ("rules", ruleset.rule_count().to_string()),
        ("elements", "0".to_owned()),
        (
            "script_bytes",
            Restore::full(&ruleset, &[]).text.len().to_string(),
        ),
        ("hwm_compile_mib", f2(memory_mib("VmHWM:")?)),
    ]);

    // 2. Full sync into the fresh namespace (restore + jump rules).
    let mut dataplane = IptablesDataplane::new(backend);
    let t = Instant::now();
    let full = dataplane.apply_full(ruleset).context("full sync")?;
    let full_time = t.elapsed();
    progress(&format!(
        "iptables-{} full sync: {:.0} ms",
        backend.as_str(),
        ms(full_time)
    ));
    report(&[
        ("full_sync_ms", f2(ms(full_time))),
        ("full_nft_ms", f2(ms(full.apply_time))),
        ("hwm_full_mib", f2(memory_mib("VmHWM:")?)),
    ]);

    // 3. Partial syncs after one endpoint change, the agent's path (canary check included).
    let (mut all, mut compile_part, mut check_part, mut tool_part, mut bytes) =
        (vec![], vec![], vec![], vec![], vec![]);
    for k in 0..opts.changes {
        let (_, slice) = spec.changed_slice(k);
        let t = Instant::now();
        let dirty: BTreeSet<_> = state.apply(Object::EndpointSlice(slice)).services;
        let compiler = NodeCompiler::new(&state, &ctx, &cfg);
        let base = iptables::render_base(compiler.base_plan());
        ensure!(
            dataplane.installed().is_some_and(|i| i.same_base(&base)),
            "change {k}: the node-wide rules changed"
        );
        let render_ctx = RenderContext {
            large_cluster: dataplane.installed().is_some_and(|i| i.large_cluster),
            ..RenderContext::of(compiler.base_plan())
        };
        let changes = dirty
            .iter()
            .map(|name| {
                let plans = compiler.service_plans(&state, name);
                let refs: Vec<&ServicePlan> = plans.iter().collect();
                let rules =
                    (!refs.is_empty()).then(|| iptables::render_service(&refs, &render_ctx));
                (name.clone(), rules)
            })
            .collect();
        let compiled = t.elapsed();
        let c = Instant::now();
        ensure!(
            !dataplane.needs_full().context("canary check")?,
            "change {k}: the canary is gone"
        );
        let checked = c.elapsed();
        let r = dataplane
            .apply_changes(changes)
            .with_context(|| format!("change {k}"))?;
        ensure!(
            r.kind == SyncKind::Partial && r.chains_written >= 1,
            "change {k} was not a partial sync: {r:?}"
        );
        all.push(ms(t.elapsed()));
        compile_part.push(ms(compiled));
        check_part.push(ms(checked));
        tool_part.push(ms(r.apply_time));
        bytes.push(r.script_bytes as f64);
    }
    progress(&format!(
        "{} partial syncs: median {} ms",
        all.len(),
        med(&all)
    ));
    let pct = |v: &[f64], p| percentile(v, p).map_or_else(|| "-".to_owned(), f2);
    report(&[
        ("changes", all.len().to_string()),
        ("incr_p50_ms", med(&all)),
        ("incr_p90_ms", pct(&all, 90.0)),
        ("incr_max_ms", pct(&all, 100.0)),
        ("incr_compile_p50_ms", med(&compile_part)),
        ("incr_delta_p50_ms", med(&check_part)),
        ("incr_nft_p50_ms", med(&tool_part)),
        (
            "incr_bytes_p50",
            median(&bytes).map_or_else(|| "-".to_owned(), |b| format!("{b:.0}")),
        ),
        ("hwm_incr_mib", f2(memory_mib("VmHWM:")?)),
    ]);

    // 4. Periodic full resync over the existing rules.
    let t = Instant::now();
    let desired = iptables::render(&NodeCompiler::new(&state, &ctx, &cfg).plan(&state));
    let compiled = t.elapsed();
    let resync = dataplane.apply_full(desired).context("resync")?;
    let resync_time = t.elapsed();
    progress(&format!("resync: {:.0} ms", ms(resync_time)));
    report(&[
        ("resync_ms", f2(ms(resync_time))),
        ("resync_compile_ms", f2(ms(compiled))),
        (
            "resync_apply_ms",
            f2(ms(resync_time.saturating_sub(compiled))),
        ),
        ("resync_nft_ms", f2(ms(resync.apply_time))),
        (
            "final_chains",
            dataplane
                .installed()
                .map_or(0, |r| r.nat_chain_names().len())
                .to_string(),
        ),
    ]);
    let children = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN)
        .context("getrusage")?;
    report(&[
        ("rss_mib", f2(memory_mib("VmHWM:")?)),
        ("rss_now_mib", f2(memory_mib("VmRSS:")?)),
        ("nft_rss_mib", f2(children.max_rss() as f64 / 1024.0)),
    ]);
    drop(state);
    Ok(())
}
