//! Drill 3, API server outage and relist: Ferry watches the fake API server; the server goes
//! away for a minute while a client keeps connecting, and while it is away a tenth of the
//! Services are deleted, a tenth get new endpoints and a few are added; it comes back having
//! forgotten its history, so every watch gets `410 Gone` and relists. The rules must stay
//! untouched during the outage, the reconnects must back off (no tight loop, a bounded log),
//! and the relist must converge to exactly the new state. Figures: rules changed during the
//! outage (goal 0), seconds to converge after the return.

use std::net::TcpListener;
use std::time::{Duration, Instant};

use ferry_testkit::FakeApiServer;

use crate::drill::{settle, Mode, Options, Stage};
use crate::lab::cluster::{Cluster, Layout};
use crate::lab::probe::{served, Expect, Served};
use crate::lab::watch::Watch;
use crate::report::{secs, Row};

/// Runs the drill in `mode`.
pub fn run(o: &Options, mode: Mode) -> anyhow::Result<Row> {
    let n = o.services(50, 1_000);
    let outage = Duration::from_secs(o.seconds(5, 60));
    let added = (n / 20).max(1);
    let cluster = Cluster::new(n + added, 10, Layout::drill(false))?;
    let mut stage = Stage::new(o, &format!("outage-{}", mode.name()), cluster)?;
    let mut row = Row::new("3. API outage and relist", mode.name());
    let listener =
        ferry_lab::netns::run_in(stage.net.node.name(), || TcpListener::bind("127.0.0.1:0"))??;
    let server = FakeApiServer::start(listener)?;
    let all = stage.cluster.objects();
    // The last `added` Services (and their slices) only appear during the outage.
    let initial = all.len() - 2 * added;
    for object in &all[..initial] {
        server.apply(object.clone());
    }
    let flags = stage.api_flags(mode, &server.url());
    let mut ferry = crate::lab::Ferry::start(&o.ferry, stage.net.node.name(), &flags, &stage.log)?;
    ferry.wait_syncs(1, Duration::from_secs(600))?;
    settle(&mut ferry);

    let mut rng = fastrand::Rng::with_seed(o.seed);
    let mut picked = stage.cluster.sample(n / 5 + 3, &mut rng);
    // Only Services the server had before the outage (the sample holds the last one).
    picked.retain(|&i| i < n);
    let (deleted, changed): (Vec<usize>, Vec<usize>) = {
        let half = picked.len() / 2;
        (picked[..half].to_vec(), picked[half..].to_vec())
    };
    let steady: Vec<Expect> = (0..n)
        .filter(|i| !picked.contains(i))
        .take(3)
        .map(|i| stage.expect(i, None))
        .collect();
    let watch = Watch::start(stage.net.client.name(), steady, Duration::from_millis(50));
    let before = rules(&stage, mode)?;
    let log_before = ferry.log().lines().count();
    let refused_before = server.refused();

    server.set_down(true);
    let down = Instant::now();
    for &i in &deleted {
        let name = stage.cluster.name(i);
        server.delete("Service", stage.cluster.namespace(), &name);
        server.delete(
            "EndpointSlice",
            stage.cluster.namespace(),
            &format!("{name}-x7k2q"),
        );
    }
    let olds: Vec<u32> = changed
        .iter()
        .map(|&i| stage.cluster.generation(i))
        .collect();
    for &i in &changed {
        stage.cluster.bump(i);
        server.apply(stage.cluster.slice_object(i));
    }
    for object in &all[initial..] {
        server.apply(object.clone());
    }
    let mut changed_rules = 0;
    let mut snapshots = 0;
    let mut refused_at = Vec::new();
    while down.elapsed() < outage {
        std::thread::sleep(Duration::from_secs(5).min(outage.saturating_sub(down.elapsed())));
        refused_at.push((down.elapsed(), server.refused()));
        snapshots += 1;
        if rules(&stage, mode)? != before {
            changed_rules += 1;
        }
    }
    let attempts = server.refused() - refused_before;
    let log_lines = ferry.log().lines().count() - log_before;
    let tail_rate = tail_rate(&refused_at, Duration::from_secs(30));
    server.compact();
    server.set_down(false);
    let back = Instant::now();

    let mut expect: Vec<Expect> = deleted
        .iter()
        .map(|&i| Expect {
            new: Vec::new(),
            ..stage.expect(i, None)
        })
        .collect();
    expect.extend(changed.iter().zip(&olds).map(|(&i, &g)| Expect {
        old: Vec::new(),
        ..stage.expect(i, Some(g))
    }));
    expect.extend((n..n + added).map(|i| stage.expect(i, None)));
    let wanted = |v: &[Served]| {
        v[..deleted.len()].iter().all(|s| *s == Served::Nothing)
            && v[deleted.len()..].iter().all(|s| *s == Served::New)
    };
    let mut converged = None;
    while back.elapsed() < Duration::from_secs(120) {
        let v = stage
            .net
            .client
            .block_on(async { Ok(served(&expect, 2).await) })?;
        if wanted(&v) {
            converged = Some(back.elapsed());
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let timeline = watch.finish()?;
    let outage_window = timeline.failed(Duration::ZERO, Duration::MAX);

    let mut why = Vec::new();
    if changed_rules > 0 {
        why.push(format!(
            "rules changed in {changed_rules} of {snapshots} snapshots during the outage"
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
            if let Some(d) = stage.differences(&o.ferry, n + added - deleted.len())? {
                why.push(format!("after the relist: {d}"));
            }
        }
    }
    ferry.stop()?;
    row.rep((!why.is_empty()).then(|| why.join("; ")));
    row.figure = format!(
        "rules changed during the outage: {changed_rules}; converged {} after the return",
        converged.map_or("never".to_owned(), |d| secs(d.as_secs_f64()))
    );
    row.note(&format!(
        "{n} × 10, {} s outage, {} deleted, {} changed, {added} added meanwhile; reconnect attempts: {attempts} \
         ({} in the outage's last 30 s); log lines during the outage: {log_lines}",
        outage.as_secs(),
        deleted.len(),
        changed.len(),
        tail_rate.map_or("-".to_owned(), |r| r.to_string()),
    ));
    Ok(row)
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
