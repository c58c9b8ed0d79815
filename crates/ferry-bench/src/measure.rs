//! One N of one mode, measured in the current process (which must already be inside its
//! throw-away network namespace: see [`crate::netns::ensure_inside`]), along the agent's own
//! path: the mode table's applier fed by a [`NodeCompiler`], as `ferry run` syncs a family.
//! The same code measures every mode; the static figures of what each mode renders are
//! measured afterwards on the final state (`sizes`).
//!
//! Results are reported through a callback as `key=value` figures, phase by phase, so that a
//! run stopped half-way still shows what it measured.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, ensure, Context as _};
use ferry_compile::mode::ProxyMode;
use ferry_compile::NodeCompiler;
use ferry_dataplane::mode::ModeOptions;
use ferry_dataplane::modes::entry;
use ferry_dataplane::{Applier, SyncKind};
use ferry_model::{ClusterState, IpFamily, Object};

use crate::cluster::ClusterSpec;
use crate::compile::{build_state, compile_config, node_context};
use crate::stats::{f2, med, median, ms, pct, Figure};

/// What to measure.
#[derive(Debug, Clone)]
pub struct MeasureOptions {
    /// The cluster.
    pub spec: ClusterSpec,
    /// The proxy mode.
    pub mode: ProxyMode,
    /// Its run-time choices (the iptables backend).
    pub mode_options: ModeOptions,
    /// Incremental changes to time.
    pub changes: usize,
    /// Compile runs (the median is reported).
    pub compile_runs: usize,
    /// nftables: where to write the final state's whole-table script (`full.nft`, what a sync
    /// without netlink loads), its skeleton (`skeleton.nft`) and the first change's delta
    /// (`delta.nft`), to replay them by hand (`nft -f`, `perf`).
    pub dump_dir: Option<PathBuf>,
}

/// Runs every phase; `report` receives each phase's figures as soon as they are known and
/// `progress` human-readable progress lines. Returns the final state.
pub fn run(
    opts: &MeasureOptions,
    mut report: impl FnMut(&[Figure]),
    mut progress: impl FnMut(&str),
) -> anyhow::Result<ClusterState> {
    let spec = opts.spec;
    let ctx = node_context();
    let cfg = compile_config()?;

    // The process before any object exists (binary, libraries, runtime).
    let rss_start = memory_mib("VmRSS:")?;
    // Generate the cluster and load it into the state (what the sources' first resync does).
    let t = Instant::now();
    let objects = spec.objects();
    let gen = t.elapsed();
    let t = Instant::now();
    let mut state = build_state(objects);
    let load = t.elapsed();
    progress(&format!("generated and loaded in {:.0} ms", ms(gen + load)));
    report(&[
        ("n", spec.services.to_string()),
        ("m", spec.endpoints.to_string()),
        ("gen_ms", f2(ms(gen))),
        ("load_ms", f2(ms(load))),
        ("rss_start_mib", f2(rss_start)),
        ("rss_loaded_mib", f2(memory_mib("VmRSS:")?)),
        ("hwm_generated_mib", f2(memory_mib("VmHWM:")?)),
    ]);

    // From here until the static figures at the end, the peak RSS is the agent's path: the
    // cluster state plus what its syncs hold (the generator's peak is forgotten).
    reset_peak_rss()?;
    let mode = (entry(opts.mode).open)(&opts.mode_options);
    progress(&mode.describe());
    let mut applier = mode.applier(IpFamily::V4);

    // 1. Full sync into the (fresh, empty) namespace: compile and apply, as the agent's first
    // sync does.
    let t = Instant::now();
    let full = applier
        .sync_full(&NodeCompiler::new(&state, &ctx, &cfg), &state)
        .context("full sync")?;
    let full_time = t.elapsed();
    progress(&format!("full sync: {:.0} ms", ms(full_time)));
    report(&[
        ("full_sync_ms", f2(ms(full_time))),
        (
            "agent_compile_ms",
            f2(ms(full_time.saturating_sub(full.apply_time))),
        ),
        ("full_nft_ms", f2(ms(full.apply_time))),
        ("hwm_full_mib", f2(memory_mib("VmHWM:")?)),
    ]);

    // 2. Incremental syncs: one endpoint of one service changes.
    report(&incremental(
        opts,
        &mut state,
        applier.as_mut(),
        &mut progress,
    )?);

    // 3. Periodic full resync over the existing rules.
    let t = Instant::now();
    let resync = applier
        .sync_full(&NodeCompiler::new(&state, &ctx, &cfg), &state)
        .context("resync")?;
    let resync_time = t.elapsed();
    progress(&format!("resync: {:.0} ms", ms(resync_time)));
    report(&[
        ("resync_ms", f2(ms(resync_time))),
        (
            "resync_compile_ms",
            f2(ms(resync_time.saturating_sub(resync.apply_time))),
        ),
        ("resync_nft_ms", f2(ms(resync.apply_time))),
    ]);

    // 4. The periodic round's check that the rules are still in the kernel.
    let mut checks = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        ensure!(applier.intact().context("check")?, "rules found missing");
        checks.push(ms(t.elapsed()));
    }
    let check = median(&checks).unwrap_or_default();
    progress(&format!("check: {check:.1} ms"));
    report(&[("check_ms", f2(check))]);

    // 5. Memory, with everything built (state, installed rules).
    report(&[
        ("rss_mib", f2(memory_mib("VmHWM:")?)),
        ("rss_now_mib", f2(memory_mib("VmRSS:")?)),
    ]);
    // The state stays alive until the memory was read, as the agent keeps it; the caller
    // measures the static figures on it.
    Ok(state)
}

/// Times `opts.changes` one-endpoint changes, each a partial sync of the changed service.
fn incremental(
    opts: &MeasureOptions,
    state: &mut ClusterState,
    applier: &mut dyn Applier,
    progress: &mut impl FnMut(&str),
) -> anyhow::Result<Vec<Figure>> {
    let spec = opts.spec;
    let ctx = node_context();
    let cfg = compile_config()?;
    let (mut total, mut compile_part, mut apply_part, mut bytes) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut via_netlink = 0usize;
    let mut escalated = 0usize;
    // Changes that needed a dispatch chain no service used before (a new endpoint count).
    let mut new_shape = Vec::new();
    for k in 0..opts.changes {
        let (_, slice) = spec.changed_slice(k);
        let t = Instant::now();
        let dirty: BTreeSet<_> = state.apply(Object::from(slice)).services;
        let compiler = NodeCompiler::new(state, &ctx, &cfg);
        if applier.needs_full(&compiler).context("checking the base")? {
            bail!("change {k}: the agent would need a full sync");
        }
        let r = applier
            .sync_partial(&compiler, state, &dirty)
            .with_context(|| format!("change {k}"))?;
        let elapsed = t.elapsed();
        ensure!(
            dirty.len() == 1,
            "change {k} touched {} services",
            dirty.len()
        );
        // A change the applier could only make as a full sync (nftables without netlink and a
        // new dispatch chain; iptables crossing the large-cluster threshold) is counted.
        escalated += usize::from(r.kind == SyncKind::Full);
        if r.kind == SyncKind::Partial && r.chains_written > 0 && opts.mode == ProxyMode::Nftables {
            new_shape.push(ms(elapsed));
        }
        via_netlink += usize::from(r.netlink);
        total.push(ms(elapsed));
        compile_part.push(ms(elapsed.saturating_sub(r.apply_time)));
        apply_part.push(ms(r.apply_time));
        bytes.push(r.script_bytes as f64);
    }
    if !total.is_empty() {
        progress(&format!(
            "{} incremental syncs: median {} ms",
            total.len(),
            med(&total)
        ));
    }
    Ok(vec![
        ("changes", total.len().to_string()),
        ("incr_p50_ms", med(&total)),
        ("incr_p90_ms", pct(&total, 90.0)),
        ("incr_max_ms", pct(&total, 100.0)),
        ("incr_compile_p50_ms", med(&compile_part)),
        ("incr_nft_p50_ms", med(&apply_part)),
        ("incr_via_netlink", via_netlink.to_string()),
        ("incr_full", escalated.to_string()),
        ("incr_new_chain_n", new_shape.len().to_string()),
        ("incr_new_chain_max_ms", pct(&new_shape, 100.0)),
        (
            "incr_bytes_p50",
            median(&bytes).map_or_else(|| "-".to_owned(), |b| format!("{b:.0}")),
        ),
        ("hwm_incr_mib", f2(memory_mib("VmHWM:")?)),
    ])
}

/// Resets this process's peak RSS (`VmHWM`) to its current RSS.
fn reset_peak_rss() -> anyhow::Result<()> {
    std::fs::write("/proc/self/clear_refs", "5").context("resetting VmHWM (/proc/self/clear_refs)")
}

/// A `/proc/self/status` memory figure (`VmHWM:`, `VmRSS:`), in MiB.
pub fn memory_mib(key: &str) -> anyhow::Result<f64> {
    let status =
        std::fs::read_to_string("/proc/self/status").context("reading /proc/self/status")?;
    let line = status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .with_context(|| format!("no {key} in /proc/self/status"))?;
    let kib: f64 = line
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .with_context(|| format!("bad {key} {line:?}"))?;
    Ok(kib / 1024.0)
}
