//! Static figures of what a mode renders for the final state: the staged compile (view, plan
//! and render timed apart) and the size of the rules, plus what only that mode has (nftables:
//! the `nft` tool's peak memory and the script dumps).

use std::path::Path;
use std::time::Duration;

use anyhow::{bail, ensure, Context as _};
use ferry_compile::mode::ProxyMode;
use ferry_compile::nft::{NodeRules, Transaction};
use ferry_compile::{iptables, ipvs, CompileConfig, NodeCompiler, Plan};
use ferry_model::{ClusterState, NodeContext, NodeView, Object};

use crate::compile::{compile_config, node_context, CompileTimes, RulesetSize};
use crate::measure::MeasureOptions;
use crate::stats::{f2, med, ms, timed, Figure};

/// The static figures of `opts.mode` for `state`.
pub fn figures(
    opts: &MeasureOptions,
    state: &ClusterState,
    progress: &mut impl FnMut(&str),
) -> anyhow::Result<Vec<Figure>> {
    let ctx = node_context();
    let cfg = compile_config()?;
    match opts.mode {
        ProxyMode::Nftables => nftables(opts, state, &ctx, &cfg, progress),
        ProxyMode::Iptables => iptables(opts, state, &ctx, &cfg, progress),
        ProxyMode::Ipvs => ipvs(opts, state, &ctx, &cfg, progress),
        ProxyMode::Userspace => {
            bail!("the userspace mode has its own benchmark: ferry-bench-userspace --scale")
        }
    }
}

/// Compiles the whole node `runs` times, stage by stage, rendering with `render`: the last
/// output and each run's times.
fn staged<R>(
    state: &ClusterState,
    ctx: &NodeContext,
    cfg: &CompileConfig,
    runs: usize,
    render: impl Fn(&Plan) -> R,
    progress: &mut impl FnMut(&str),
) -> anyhow::Result<(R, Vec<Figure>)> {
    let mut times: Vec<CompileTimes> = Vec::new();
    let mut out = None;
    for run in 0..runs.max(1) {
        drop(out.take()); // free the previous run's output first
        let (view, view_t) = timed(|| NodeView::build(state, ctx));
        let (plan, plan_t) = timed(|| Plan::build(&view, cfg));
        drop(view);
        let (rendered, render_t) = timed(|| render(&plan));
        let t = CompileTimes {
            view: view_t,
            plan: plan_t,
            render: render_t,
        };
        progress(&format!("compile run {}: {:.1} ms", run + 1, ms(t.total())));
        times.push(t);
        out = Some(rendered);
    }
    let Some(out) = out else {
        bail!("no compile run")
    };
    let pick =
        |f: fn(&CompileTimes) -> Duration| times.iter().map(|t| ms(f(t))).collect::<Vec<_>>();
    Ok((
        out,
        vec![
            ("compile_ms", med(&pick(CompileTimes::total))),
            ("view_ms", med(&pick(|t| t.view))),
            ("plan_ms", med(&pick(|t| t.plan))),
            ("render_ms", med(&pick(|t| t.render))),
        ],
    ))
}

fn nftables(
    opts: &MeasureOptions,
    state: &ClusterState,
    ctx: &NodeContext,
    cfg: &CompileConfig,
    progress: &mut impl FnMut(&str),
) -> anyhow::Result<Vec<Figure>> {
    // The nft tool's part of a full sync, onto the loaded table. Its own peak is read from
    // /proc while it runs: getrusage would report this process's peak instead (a child
    // spawned with vfork inherits its parent's high-water mark until exec).
    let installed = NodeRules::new(&NodeCompiler::new(state, ctx, cfg)).full(state);
    let skeleton = Transaction::skeleton(&installed);
    drop(installed);
    let (time, peak) = nft_peak_rss(&skeleton.text)?;
    let mut figures = vec![("nft_rss_mib", f2(peak)), ("nft_skeleton_ms", f2(ms(time)))];
    let (ruleset, compile) = staged(
        state,
        ctx,
        cfg,
        opts.compile_runs,
        ferry_compile::nft::render,
        progress,
    )?;
    figures.extend(compile);
    let size = RulesetSize::of(&ruleset);
    figures.extend([
        ("chains", size.chains.to_string()),
        ("service_chains", size.service_chains.to_string()),
        ("rules", size.rules.to_string()),
        ("sets", size.sets.to_string()),
        ("elements", size.elements.to_string()),
        ("script_bytes", size.script_bytes.to_string()),
        ("final_chains", size.chains.to_string()),
    ]);
    if let Some(dir) = &opts.dump_dir {
        dump(
            dir,
            "full.nft",
            &Transaction::full(&ruleset, &[], true).text,
        )?;
        dump(dir, "skeleton.nft", &Transaction::skeleton(&ruleset).text)?;
        // The delta of the next one-endpoint change (compiled, not applied).
        let mut next = state.clone();
        let (_, slice) = opts.spec.changed_slice(opts.changes);
        let dirty = next.apply(Object::from(slice)).services;
        let compiler = NodeCompiler::new(&next, ctx, cfg);
        let rules = NodeRules::new(&compiler);
        let changes = dirty
            .iter()
            .map(|name| (name.clone(), rules.service(&next, name)))
            .collect();
        dump(
            dir,
            "delta.nft",
            &Transaction::delta(&ruleset, &changes).text,
        )?;
    }
    Ok(figures)
}

fn iptables(
    opts: &MeasureOptions,
    state: &ClusterState,
    ctx: &NodeContext,
    cfg: &CompileConfig,
    progress: &mut impl FnMut(&str),
) -> anyhow::Result<Vec<Figure>> {
    let (ruleset, mut figures) = staged(
        state,
        ctx,
        cfg,
        opts.compile_runs,
        iptables::render,
        progress,
    )?;
    let children = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN)
        .context("getrusage")?;
    let chains = ruleset.nat_chain_names().len() + iptables::BASE_CHAINS_FILTER.len();
    figures.extend([
        ("chains", chains.to_string()),
        (
            "service_chains",
            ruleset.service_chain_names().count().to_string(),
        ),
        ("rules", ruleset.rule_count().to_string()),
        ("elements", "0".to_owned()),
        (
            "script_bytes",
            iptables::Restore::full(&ruleset, &[])
                .text
                .len()
                .to_string(),
        ),
        ("final_chains", ruleset.nat_chain_names().len().to_string()),
        ("nft_rss_mib", f2(children.max_rss() as f64 / 1024.0)),
    ]);
    Ok(figures)
}

fn ipvs(
    opts: &MeasureOptions,
    state: &ClusterState,
    ctx: &NodeContext,
    cfg: &CompileConfig,
    progress: &mut impl FnMut(&str),
) -> anyhow::Result<Vec<Figure>> {
    let render = |plan: &Plan| {
        let rctx = ipvs::RenderContext::new(plan, cfg, &plan.node_ips);
        ipvs::render(plan, cfg, &rctx)
    };
    let (ruleset, mut figures) = staged(state, ctx, cfg, opts.compile_runs, render, progress)?;
    let sets = ruleset.sets();
    let chains = ipvs::chains::render(&ruleset);
    let restore = chains.restore().text;
    figures.extend([
        (
            "chains",
            (chains.nat.len() + chains.filter.len()).to_string(),
        ),
        ("service_chains", "0".to_owned()),
        (
            "rules",
            restore
                .lines()
                .filter(|l| l.starts_with("-A "))
                .count()
                .to_string(),
        ),
        ("sets", sets.entries.len().to_string()),
        (
            "elements",
            sets.entries
                .values()
                .map(|e| e.len())
                .sum::<usize>()
                .to_string(),
        ),
        (
            "virtual_servers",
            ruleset.virtual_services().len().to_string(),
        ),
        ("real_servers", ruleset.real_server_count().to_string()),
        (
            "script_bytes",
            (sets.to_string().len() + restore.len()).to_string(),
        ),
        // What the run's verification counts: the nat chains.
        ("final_chains", chains.nat.len().to_string()),
    ]);
    Ok(figures)
}

/// Runs `nft -f -` on `script`, polling its `VmHWM` until it exits: (time, peak MiB).
fn nft_peak_rss(script: &str) -> anyhow::Result<(Duration, f64)> {
    use std::io::Write as _;
    let t = std::time::Instant::now();
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

fn dump(dir: &Path, name: &str, text: &str) -> anyhow::Result<()> {
    let path = dir.join(name);
    std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))
}
