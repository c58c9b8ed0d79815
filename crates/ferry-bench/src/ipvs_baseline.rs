//! IPVS mode against upstream's tools: the same virtual servers (the final state's, rendered
//! for the bench node) loaded with `ipvsadm --restore` and by Ferry's own client (one batched
//! netlink exchange), the same sets with `ipset restore`, and the same one-endpoint changes
//! both ways — each on a fresh network namespace of its own, so the agent's namespace keeps
//! what the measured syncs installed.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{bail, ensure, Context as _};
use ferry_compile::ipvs::sets::{SetEntry, SetKind};
use ferry_compile::ipvs::{NodeRules, RealServer, ServiceIpvs, VirtualAddress};
use ferry_compile::NodeCompiler;
use ferry_dataplane::ipvs::{Change, IpvsClient};
use ferry_model::{ClusterState, Object};

use crate::compile::{compile_config, node_context};
use crate::measure::MeasureOptions;
use crate::stats::{f2, med, ms, Figure};

/// The figures of the comparison, measured on a thread in a fresh network namespace.
pub fn figures(
    opts: &MeasureOptions,
    state: &ClusterState,
    progress: &mut impl FnMut(&str),
) -> anyhow::Result<Vec<Figure>> {
    let (opts, state) = (opts.clone(), state.clone());
    let figures = std::thread::spawn(move || -> anyhow::Result<Vec<Figure>> {
        nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET).context("unshare")?;
        crate::netns::node_network()?;
        measure(&opts, &state)
    })
    .join()
    .map_err(|_| anyhow::anyhow!("the IPVS comparison thread panicked"))??;
    progress("IPVS comparison with ipvsadm --restore and ipset restore done");
    Ok(figures)
}

fn measure(opts: &MeasureOptions, state: &ClusterState) -> anyhow::Result<Vec<Figure>> {
    let ctx = node_context();
    let cfg = compile_config()?;
    let compiler = NodeCompiler::new(state, &ctx, &cfg);
    let rules = NodeRules::offline(&compiler);
    let ruleset = rules.full(state);
    let services = ruleset.virtual_services();

    let sets = ruleset.sets().to_string();
    let ipset_ms = timed_tool("ipset", &["restore"], &sets)?;
    let restore: String = services
        .iter()
        .flat_map(|(va, vs)| {
            std::iter::once(format!("-A {} -s {}\n", vs_arg(va), vs.server.scheduler))
                .chain(vs.real_servers.values().map(move |rs| add_real(va, rs)))
        })
        .collect();
    let ipvsadm_ms = timed_tool("ipvsadm", &["--restore"], &restore)?;
    run_tool("ipvsadm", &["--clear"], "")?;
    let mut client = IpvsClient::open()?;
    let mut changes = Vec::new();
    for (va, vs) in &services {
        changes.push(Change::AddService(*va, vs.server.clone()));
        changes.extend(vs.real_servers.values().map(|rs| Change::AddReal(*va, *rs)));
    }
    let t = Instant::now();
    let refused = client.apply(&changes)?;
    let batch_ms = ms(t.elapsed());
    ensure!(refused.is_empty(), "{} changes refused", refused.len());

    // One-endpoint changes: the real servers of the changed service's virtual servers.
    let mut next = state.clone();
    let mut ruleset = ruleset.clone();
    let (mut by_tool, mut by_client) = (Vec::new(), Vec::new());
    // Changes the measured syncs did not make (the state already holds theirs).
    for k in opts.changes..2 * opts.changes {
        let (_, slice) = opts.spec.changed_slice(k);
        let dirty = next.apply(Object::from(slice)).services;
        let compiler = NodeCompiler::new(&next, &ctx, &cfg);
        let rules = NodeRules::with_context(&compiler, rules.context().clone());
        let mut diff = Vec::new();
        let mut set_lines = String::new();
        for name in &dirty {
            let new = rules.service(&next, name).unwrap_or_default();
            let old = ruleset.services.get(name).cloned().unwrap_or_default();
            for (va, vs) in &new.virtual_services {
                let before = old.virtual_services.get(va).map(|o| &o.real_servers);
                diff.extend(real_server_diff(va, before, &vs.real_servers));
            }
            set_lines.push_str(&set_diff(&old, &new));
            ruleset.set_service(name.clone(), Some(new));
        }
        // The sets' part of the change (a hairpin entry when the endpoint is on this node).
        let sets_ms = if set_lines.is_empty() {
            0.0
        } else {
            timed_tool("ipset", &["restore", "-exist"], &set_lines)?
        };
        // Each change is applied twice (ipvsadm, then undone and redone by Ferry's client).
        let text: String = diff.iter().map(|(c, _)| c.clone()).collect();
        by_tool.push(timed_tool("ipvsadm", &["--restore"], &text)? + sets_ms);
        let undo: Vec<Change> = diff.iter().map(|(_, c)| undo(c)).collect();
        client.apply(&undo)?;
        let redo: Vec<Change> = diff.into_iter().map(|(_, c)| c).collect();
        let t = Instant::now();
        let refused = client.apply(&redo)?;
        by_client.push(ms(t.elapsed()));
        ensure!(refused.is_empty(), "change {k}: {} refused", refused.len());
    }
    Ok(vec![
        ("ipvs_virtual_servers", services.len().to_string()),
        ("ipset_restore_ms", f2(ipset_ms)),
        ("ipvsadm_restore_ms", f2(ipvsadm_ms)),
        ("ferry_batch_ms", f2(batch_ms)),
        ("ipvsadm_change_p50_ms", med(&by_tool)),
        ("ferry_change_p50_ms", med(&by_client)),
    ])
}

/// The `ipset restore` lines that turn one service's entries into another's.
fn set_diff(old: &ServiceIpvs, new: &ServiceIpvs) -> String {
    let family = ferry_model::IpFamily::V4;
    let line = |verb: &str, (kind, entry): &(SetKind, SetEntry)| {
        format!("{verb} {} {entry}\n", kind.name_in(family))
    };
    let mut text = String::new();
    for e in old.entries.iter().filter(|e| !new.entries.contains(e)) {
        text.push_str(&line("del", e));
    }
    for e in new.entries.iter().filter(|e| !old.entries.contains(e)) {
        text.push_str(&line("add", e));
    }
    text
}

/// The `ipvsadm --restore` lines and Ferry's change of one virtual server's real servers.
fn real_server_diff(
    va: &VirtualAddress,
    before: Option<&BTreeMap<SocketAddr, RealServer>>,
    after: &BTreeMap<SocketAddr, RealServer>,
) -> Vec<(String, Change)> {
    let empty = BTreeMap::new();
    let before = before.unwrap_or(&empty);
    let mut out = Vec::new();
    for addr in before.keys().filter(|a| !after.contains_key(a)) {
        let line = format!("-d {} -r {addr}\n", vs_arg(va));
        out.push((line, Change::DeleteReal(*va, *addr)));
    }
    for rs in after.values().filter(|r| !before.contains_key(&r.address)) {
        out.push((add_real(va, rs), Change::AddReal(*va, *rs)));
    }
    out
}

fn undo(c: &Change) -> Change {
    match c {
        Change::AddReal(va, rs) => Change::DeleteReal(*va, rs.address),
        Change::DeleteReal(va, addr) => Change::AddReal(*va, RealServer::endpoint(*addr)),
        other => other.clone(),
    }
}

/// `-t 10.96.0.10:80` (`-u`, `--sctp-service` for the other protocols).
fn vs_arg(va: &VirtualAddress) -> String {
    let flag = match va.protocol {
        ferry_model::Protocol::Tcp => "-t",
        ferry_model::Protocol::Udp => "-u",
        ferry_model::Protocol::Sctp => "--sctp-service",
    };
    format!("{flag} {}", va.socket())
}

fn add_real(va: &VirtualAddress, rs: &RealServer) -> String {
    format!("-a {} -r {} -m -w {}\n", vs_arg(va), rs.address, rs.weight)
}

fn run_tool(program: &str, args: &[&str], input: &str) -> anyhow::Result<()> {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting {program}"))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(input.as_bytes()).context("writing input")?;
    }
    let out = child.wait_with_output().context("waiting")?;
    if !out.status.success() {
        bail!(
            "{program} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// Runs the tool with `input` on stdin; its wall time in ms (process start included, as the
/// agent would pay it).
fn timed_tool(program: &str, args: &[&str], input: &str) -> anyhow::Result<f64> {
    let t = Instant::now();
    run_tool(program, args, input)?;
    Ok(ms(t.elapsed()))
}
