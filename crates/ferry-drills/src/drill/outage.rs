//! Drill 3, API server outage and relist: Ferry watches the fake API server; the server goes
//! away for a minute while a client keeps connecting, and while it is away a tenth of the
//! Services are deleted, a tenth get new endpoints and a few are added; it comes back having
//! forgotten its history, so every watch gets `410 Gone` and relists. The rules must stay
//! untouched during the outage, the reconnects must back off (no tight loop, a bounded log),
//! and the relist must converge to exactly the new state. Figures: rules changed during the
//! outage (goal 0), seconds to converge after the return.
//!
//! Why the fake: its objects change while it is away, and it comes back without its history;
//! a real API server serves no changes while down (its restart with etcd compacted is tested
//! against the real one in `crates/ferry/tests/kube_real.rs`).

use std::net::TcpListener;
use std::time::{Duration, Instant};

use ferry_testkit::FakeApiServer;

use crate::drill::{settle, Mode, Options, Stage};
use crate::lab::cluster::{Cluster, Layout};
use crate::lab::probe::{served, Expect, Served};
use crate::lab::watch::Watch;
use crate::lab::Ferry;
use crate::report::{secs, Row};

/// Runs the drill in `mode`.
pub fn run(o: &Options, mode: Mode) -> anyhow::Result<Row> {
    let n = o.services(50, 1_000);
    let outage = Duration::from_secs(o.seconds(5, 60));
    let added = (n / 20).max(1);
    let (mut stage, server, ferry, later) = start(o, mode, n, added)?;
    let mut row = Row::new("3. API outage and relist", mode.name());
    let mut plan = Plan::pick(&stage, n, added, o.seed);
    let steady: Vec<Expect> = (0..n)
        .filter(|i| !plan.deleted.contains(i) && !plan.changed.contains(i))
        .take(3)
        .map(|i| stage.expect(i, None))
        .collect();
    let watch = Watch::start(stage.net.client.name(), steady, Duration::from_millis(50));
    let log_before = ferry.log().lines().count();
    let during = go_down(&mut stage, &server, &mut plan, &later, mode, outage)?;
    let log_lines = ferry.log().lines().count() - log_before;
    server.compact();
    server.set_down(false);
    let converged = converge(&stage, &plan)?;
    let outage_window = watch.finish()?.failed(Duration::ZERO, Duration::MAX);

    let why = verdict(o, &stage, &plan, &during, outage_window, converged)?;
    ferry.stop()?;
    row.rep((!why.is_empty()).then(|| why.join("; ")));
    row.figure = format!(
        "rules changed during the outage: {}; converged {} after the return",
        during.changed_rules,
        converged.map_or("never".to_owned(), |d| secs(d.as_secs_f64()))
    );
    row.note(&format!(
        "{n} × 10, {} s outage, {} deleted, {} changed, {added} added meanwhile; reconnect attempts: {} \
         ({} in the outage's last 30 s); log lines during the outage: {log_lines}",
        outage.as_secs(),
        plan.deleted.len(),
        plan.changed.len(),
        during.attempts,
        during
            .tail_rate
            .map_or("-".to_owned(), |r| r.to_string()),
    ));
    Ok(row)
}

/// The lab with `n` Services in the fake API server (and `added` more held back for the
/// outage, returned), Ferry started on it and through its first sync.
fn start(
    o: &Options,
    mode: Mode,
    n: usize,
    added: usize,
) -> anyhow::Result<(Stage, FakeApiServer, Ferry, Vec<serde_json::Value>)> {
    let cluster = Cluster::new(n + added, 10, Layout::drill(false))?;
    let stage = Stage::new(o, &format!("outage-{}", mode.name()), cluster)?;
    let listener =
        ferry_lab::netns::run_in(stage.net.node.name(), || TcpListener::bind("127.0.0.1:0"))??;
    let server = FakeApiServer::start(listener)?;
    let mut all = stage.cluster.objects();
    // The last `added` Services (and their slices) only appear during the outage.
    let later = all.split_off(all.len() - 2 * added);
    for object in all {
        server.apply(object);
    }
    let flags = stage.api_flags(mode, &server.url());
    let mut ferry = Ferry::start(&o.ferry, stage.net.node.name(), &flags, &stage.log)?;
    ferry.wait_syncs(1, Duration::from_secs(600))?;
    settle(&mut ferry);
    Ok((stage, server, ferry, later))
}

/// What went wrong, if anything: rules changed during the outage, connections to untouched
/// Services failed, no convergence, or a kernel state other than the new cluster's.
fn verdict(
    o: &Options,
    stage: &Stage,
    plan: &Plan,
    during: &During,
    outage_window: usize,
    converged: Option<Duration>,
) -> anyhow::Result<Vec<String>> {
    let mut why = Vec::new();
    if during.changed_rules > 0 {
        why.push(format!(
            "rules changed in {} of {} snapshots during the outage",
            during.changed_rules, during.snapshots
        ));
    }
    if outage_window > 0 {
        why.push(format!(
            "{outage_window} rounds of connections to untouched Services failed"
        ));
    }
    match converged {
        None => why.push("never converged within 120 s".to_owned()),
        Some(_) => {
            let left = plan.n + plan.added - plan.deleted.len();
            if let Some(d) = stage.differences(&o.ferry, left)? {
                why.push(format!("after the relist: {d}"));
            }
        }
    }
    Ok(why)
}

/// What the outage does to the cluster: Services deleted and Services given new endpoints
/// (with their generations before), all among those the server had before, and the Services
/// added meanwhile (the last `added`).
struct Plan {
    n: usize,
    added: usize,
    deleted: Vec<usize>,
    changed: Vec<usize>,
    olds: Vec<u32>,
}

impl Plan {
    /// A fifth of the `n` Services, half to delete, half to change.
    fn pick(stage: &Stage, n: usize, added: usize, seed: u64) -> Plan {
        let mut rng = fastrand::Rng::with_seed(seed);
        let mut picked = stage.cluster.sample(n / 5 + 3, &mut rng);
        // Only Services the server had before the outage (the sample holds the last one).
        picked.retain(|&i| i < n);
        let changed = picked.split_off(picked.len() / 2);
        Plan {
            n,
            added,
            deleted: picked,
            changed,
            olds: Vec::new(),
        }
    }
}

/// What was seen while the server was away.
struct During {
    /// Snapshots of the rules that differed from the rules before the outage.
    changed_rules: usize,
    snapshots: usize,
    /// Connections the server refused during the outage (Ferry's reconnects).
    attempts: u64,
    /// Of them, in the outage's last 30 s.
    tail_rate: Option<u64>,
}

/// Takes the server away for `outage`, makes `plan`'s changes (and adds `added`) meanwhile,
/// and snapshots the kernel's rules every 5 s.
fn go_down(
    stage: &mut Stage,
    server: &FakeApiServer,
    plan: &mut Plan,
    added: &[serde_json::Value],
    mode: Mode,
    outage: Duration,
) -> anyhow::Result<During> {
    let before = rules(stage, mode)?;
    let refused_before = server.refused();
    server.set_down(true);
    let down = Instant::now();
    for &i in &plan.deleted {
        let name = stage.cluster.name(i);
        let namespace = stage.cluster.namespace();
        server.delete("Service", namespace, &name);
        server.delete("EndpointSlice", namespace, &format!("{name}-x7k2q"));
    }
    plan.olds = plan
        .changed
        .iter()
        .map(|&i| stage.cluster.generation(i))
        .collect();
    for &i in &plan.changed {
        stage.cluster.bump(i);
        server.apply(stage.cluster.slice_object(i));
    }
    for object in added {
        server.apply(object.clone());
    }
    let mut during = During {
        changed_rules: 0,
        snapshots: 0,
        attempts: 0,
        tail_rate: None,
    };
    let mut refused_at = Vec::new();
    while down.elapsed() < outage {
        std::thread::sleep(Duration::from_secs(5).min(outage.saturating_sub(down.elapsed())));
        refused_at.push((down.elapsed(), server.refused()));
        during.snapshots += 1;
        if rules(stage, mode)? != before {
            during.changed_rules += 1;
        }
    }
    during.attempts = server.refused() - refused_before;
    during.tail_rate = tail_rate(&refused_at, Duration::from_secs(30));
    Ok(during)
}

/// Seconds from the server's return until the client sees `plan` done: deleted Services
/// answer nothing, changed ones answer from their new endpoints, added ones answer (at most
/// 120 s).
fn converge(stage: &Stage, plan: &Plan) -> anyhow::Result<Option<Duration>> {
    let back = Instant::now();
    let mut expect: Vec<Expect> = plan
        .deleted
        .iter()
        .map(|&i| Expect {
            new: Vec::new(),
            ..stage.expect(i, None)
        })
        .collect();
    expect.extend(plan.changed.iter().zip(&plan.olds).map(|(&i, &g)| Expect {
        old: Vec::new(),
        ..stage.expect(i, Some(g))
    }));
    expect.extend((plan.n..plan.n + plan.added).map(|i| stage.expect(i, None)));
    let gone = plan.deleted.len();
    let wanted = |v: &[Served]| {
        v[..gone].iter().all(|s| *s == Served::Nothing)
            && v[gone..].iter().all(|s| *s == Served::New)
    };
    while back.elapsed() < Duration::from_secs(120) {
        let v = stage
            .net
            .client
            .block_on(async { Ok(served(&expect, 2).await) })?;
        if wanted(&v) {
            return Ok(Some(back.elapsed()));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(None)
}

/// Refused connections in the last `span` of the outage (from samples of the running count).
fn tail_rate(samples: &[(Duration, u64)], span: Duration) -> Option<u64> {
    let (end, last) = *samples.last()?;
    let start = end.checked_sub(span)?;
    let (_, first) = samples.iter().rev().find(|(t, _)| *t <= start)?;
    Some(last - first)
}

/// Ferry's rules as the kernel holds them (counters left out).
fn rules(stage: &Stage, mode: Mode) -> anyhow::Result<String> {
    let node = &stage.net.node;
    let text = match mode.iptables() {
        None => node.exec("nft", ["list", "table", "ip", "ferry"])?,
        Some(ipt) => {
            let save = format!("{ipt}-save");
            let mut t = node.exec(&save, ["-t", "nat"])?;
            t.push_str(&node.exec(&save, ["-t", "filter"])?);
            t
        }
    };
    Ok(text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.split(" [").next().unwrap_or(l))
        .collect::<Vec<_>>()
        .join("\n"))
}
