//! One N, measured in the current process (which must already be inside its throw-away
//! network namespace: see [`crate::netns::ensure_inside`]).
//!
//! Results are reported through a callback as `key=value` figures, phase by phase, so that a
//! run stopped half-way still shows what it measured.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context as _};
use ferry_compile::nft::Transaction;
use ferry_dataplane::{NftDataplane, SyncKind};
use ferry_model::Object;

use crate::cluster::ClusterSpec;
use crate::compile::{
    build_state, compile, compile_agent, compile_config, full_resync, incremental_changes,
    node_context, CompileTimes, Incremental, RulesetSize,
};
use crate::stats::{median, ms, percentile};

/// What to measure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MeasureOptions {
    /// The cluster.
    pub spec: ClusterSpec,
    /// Incremental changes to time.
    pub changes: usize,
    /// Compile runs (the median is reported).
    pub compile_runs: usize,
    /// Where to write the final state's whole-table script (`full.nft`, what a sync without
    /// netlink loads), its skeleton (`skeleton.nft`) and the first change's delta
    /// (`delta.nft`), to replay them by hand (`nft -f`, `perf`); writing the delta adds its
    /// cost to the first change's time.
    pub dump_dir: Option<PathBuf>,
}

/// One reported figure.
pub type Figure = (&'static str, String);

fn f2(x: f64) -> String {
    format!("{x:.2}")
}

fn med(v: &[f64]) -> String {
    median(v).map_or_else(|| "-".to_owned(), f2)
}

/// Runs every phase; `report` receives each phase's figures as soon as they are known and
/// `progress` human-readable progress lines.
pub fn run(
    opts: &MeasureOptions,
    mut report: impl FnMut(&[Figure]),
    mut progress: impl FnMut(&str),
) -> anyhow::Result<()> {
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

    // From here until the staged compile runs at the end, the peak RSS is the agent's path:
    // the cluster state plus what its syncs hold (the generator's peak is forgotten).
    reset_peak_rss()?;

    // 1. The agent's whole-node compile (service by service).
    let t = Instant::now();
    let ruleset = compile_agent(&state, &ctx, &cfg);
    let agent_compile = t.elapsed();
    report(&[
        ("agent_compile_ms", f2(ms(agent_compile))),
        ("hwm_compile_mib", f2(memory_mib("VmHWM:")?)),
    ]);

    // 2. Full sync into the (fresh, empty) namespace.
    let mut dataplane = NftDataplane::new();
    let t = Instant::now();
    let full = dataplane.apply_full(ruleset).context("full sync")?;
    let full_time = t.elapsed();
    progress(&format!("full sync: {:.0} ms", ms(full_time)));
    report(&[
        ("full_sync_ms", f2(ms(full_time))),
        ("full_nft_ms", f2(ms(full.apply_time))),
        ("hwm_full_mib", f2(memory_mib("VmHWM:")?)),
    ]);

    // 3. Incremental syncs: one endpoint of one service changes, the agent's path.
    let (mut total, mut compile_part, mut delta_part, mut nft_part, mut bytes) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut via_netlink = 0usize;
    let mut escalated = 0usize;
    // Changes that needed a dispatch chain no service used before (a new endpoint count).
    let mut new_shape = Vec::new();
    for k in 0..opts.changes {
        let (_, slice) = spec.changed_slice(k);
        let t = Instant::now();
        let touched = state.apply(Object::EndpointSlice(slice));
        let dirty: BTreeSet<_> = touched.services;
        let changes = match incremental_changes(&state, &ctx, &cfg, dataplane.installed(), &dirty) {
            Incremental::Changes(c) => c,
            Incremental::NeedsFull => bail!("change {k}: the agent would need a full sync"),
        };
        let compiled = t.elapsed();
        if let (Some(dir), 0, Some(installed)) = (&opts.dump_dir, k, dataplane.installed()) {
            dump(
                dir,
                "delta.nft",
                &Transaction::delta(installed, &changes).text,
            )?;
        }
        let r = dataplane
            .apply_changes(changes)
            .with_context(|| format!("change {k}"))?;
        let elapsed = t.elapsed();
        ensure!(
            dirty.len() == 1,
            "change {k} touched {} services",
            dirty.len()
        );
        // A change that needs a dispatch chain nobody used yet (a new endpoint count) is a
        // full sync of the updated ruleset: counted, and in the figures.
        escalated += usize::from(r.kind == SyncKind::Full);
        if r.kind == SyncKind::Partial && r.chains_written > 0 {
            new_shape.push(ms(elapsed));
        }
        via_netlink += usize::from(r.netlink);
        total.push(ms(elapsed));
        compile_part.push(ms(compiled));
        nft_part.push(ms(r.apply_time));
        delta_part.push(ms(elapsed
            .saturating_sub(compiled)
            .saturating_sub(r.apply_time)));
        bytes.push(r.script_bytes as f64);
    }
    if !total.is_empty() {
        progress(&format!(
            "{} incremental syncs: median {} ms",
            total.len(),
            med(&total)
        ));
    }
    report(&[
        ("changes", total.len().to_string()),
        ("incr_p50_ms", med(&total)),
        (
            "incr_p90_ms",
            percentile(&total, 90.0).map_or_else(|| "-".to_owned(), f2),
        ),
        (
            "incr_max_ms",
            percentile(&total, 100.0).map_or_else(|| "-".to_owned(), f2),
        ),
        ("incr_compile_p50_ms", med(&compile_part)),
        ("incr_delta_p50_ms", med(&delta_part)),
        ("incr_nft_p50_ms", med(&nft_part)),
        ("incr_via_netlink", via_netlink.to_string()),
        ("incr_full", escalated.to_string()),
        ("incr_new_chain_n", new_shape.len().to_string()),
        (
            "incr_new_chain_max_ms",
            percentile(&new_shape, 100.0).map_or_else(|| "-".to_owned(), f2),
        ),
        (
            "incr_bytes_p50",
            median(&bytes).map_or_else(|| "-".to_owned(), |b| format!("{b:.0}")),
        ),
        ("hwm_incr_mib", f2(memory_mib("VmHWM:")?)),
    ]);

    // 4. Periodic resync over the existing rules: compile everything, flush and reload.
    let t = Instant::now();
    let desired = full_resync(&state, &ctx, &cfg, &mut dataplane);
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
                .map_or(0, |r| r.chain_names().count())
                .to_string(),
        ),
    ]);

    // 5. Memory, with everything built (state, installed ruleset).
    report(&[
        ("rss_mib", f2(memory_mib("VmHWM:")?)),
        ("rss_now_mib", f2(memory_mib("VmRSS:")?)),
    ]);
    // The nft tool's part of a full sync, onto the loaded table. Its own peak is read from
    // /proc while it runs: getrusage would report this process's peak instead (a child
    // spawned with vfork inherits its parent's high-water mark until exec).
    if let Some(installed) = dataplane.installed() {
        let skeleton = Transaction::skeleton(installed);
        let (time, peak) = nft_peak_rss(&skeleton.text)?;
        report(&[("nft_rss_mib", f2(peak)), ("nft_skeleton_ms", f2(ms(time)))]);
    }
    // 6. Staged compile runs (view, plan, render timed apart; these hold the whole node's
    // view, plan and ruleset at once, so they run after the memory figures), on the final
    // state.
    let mut times: Vec<CompileTimes> = Vec::new();
    let mut ruleset = None;
    for run in 0..opts.compile_runs.max(1) {
        drop(ruleset.take()); // free the previous run's output first
        let (rs, t) = compile(&state, &ctx, &cfg);
        progress(&format!("compile run {}: {:.1} ms", run + 1, ms(t.total())));
        times.push(t);
        ruleset = Some(rs);
    }
    let Some(ruleset) = ruleset else {
        bail!("no compile run")
    };
    let size = RulesetSize::of(&ruleset);
    if let Some(dir) = &opts.dump_dir {
        let full = Transaction::full(&ruleset, &[], true);
        dump(dir, "full.nft", &full.text)?;
        dump(dir, "skeleton.nft", &Transaction::skeleton(&ruleset).text)?;
    }
    let pick =
        |f: fn(&CompileTimes) -> Duration| times.iter().map(|t| ms(f(t))).collect::<Vec<_>>();
    report(&[
        ("compile_ms", med(&pick(CompileTimes::total))),
        ("view_ms", med(&pick(|t| t.view))),
        ("plan_ms", med(&pick(|t| t.plan))),
        ("render_ms", med(&pick(|t| t.render))),
        ("chains", size.chains.to_string()),
        ("service_chains", size.service_chains.to_string()),
        ("rules", size.rules.to_string()),
        ("sets", size.sets.to_string()),
        ("elements", size.elements.to_string()),
        ("script_bytes", size.script_bytes.to_string()),
    ]);
    // Keep the state alive until the memory was read, as the agent keeps it.
    drop(state);
    Ok(())
}

/// Resets this process's peak RSS (`VmHWM`) to its current RSS.
fn reset_peak_rss() -> anyhow::Result<()> {
    std::fs::write("/proc/self/clear_refs", "5").context("resetting VmHWM (/proc/self/clear_refs)")
}

/// Runs `nft -f -` on `script`, polling its `VmHWM` until it exits: (time, peak MiB).
fn nft_peak_rss(script: &str) -> anyhow::Result<(Duration, f64)> {
    use std::io::Write as _;
    let t = Instant::now();
    let mut child = std::process::Command::new("nft")
        .args(["-f", "-"])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .context("starting nft")?;
    let status_path = format!("/proc/{}/status", child.id());
    let mut peak_kib = 0f64;
    let poll = |peak: &mut f64| {
        let status = std::fs::read_to_string(&status_path).unwrap_or_default();
        // Before exec the child still shows this process's memory: only read nft's.
        if status
            .lines()
            .any(|l| l.starts_with("Name:") && l.contains("nft"))
        {
            if let Some(kib) = status
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            {
                *peak = peak.max(kib);
            }
        }
    };
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(script.as_bytes())
            .context("writing to nft")?;
    }
    loop {
        poll(&mut peak_kib);
        if let Some(status) = child.try_wait().context("waiting for nft")? {
            ensure!(status.success(), "nft -f - (skeleton) failed: {status}");
            break;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    Ok((t.elapsed(), peak_kib / 1024.0))
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

fn dump(dir: &Path, name: &str, text: &str) -> anyhow::Result<()> {
    let path = dir.join(name);
    std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))
}
