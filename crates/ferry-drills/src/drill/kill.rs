//! Drill 1, kill -9 mid-sync: `ferry run` is killed at a random moment of its first sync on an
//! empty node, of a restart's full sync over older rules, or of a partial sync after a change.
//!
//! Each repetition replaces every endpoint of a few Services (a new generation), lets Ferry
//! start syncing, and kills it. Then, with nothing running, the client probes the changed
//! Services and a sample of the others: each must answer from its old or its new endpoints
//! (from nothing only on a node that had no rules yet, and then every Service alike), never
//! from a mix within one Service, never from nothing where it had rules, and a restart's full
//! sync must not leave some changed Services old and others new. Then Ferry is started again:
//! after its first sync `ferry status` must find the kernel equal to what it programs and the
//! changed Services must answer from their new endpoints. In userspace mode nothing answers
//! while Ferry is down (its process is the proxy): only the restart is judged.

use std::time::{Duration, Instant};

use crate::drill::{settle, Mode, Options, Stage};
use crate::lab::cluster::{Cluster, Layout};
use crate::lab::probe::{served, Expect, Served};
use crate::lab::Ferry;
use crate::report::{secs, Row};

/// Longest wait for a sync.
const SYNC_TIMEOUT: Duration = Duration::from_secs(1800);
/// Connections per probed Service.
const ASKS: usize = 4;

/// Where in Ferry's life the kill lands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// The first sync on a node without Ferry's rules.
    First,
    /// A restart's full sync over the rules of an earlier run.
    Restart,
    /// A partial sync of a running Ferry after a change.
    Partial,
}

/// Timings measured on a clean run, to aim the kills.
struct Aim {
    /// Start → the first `synced rules` line.
    first: Duration,
    /// How long the first sync took (Ferry's figure).
    first_sync: Duration,
    /// Manifest written → the partial sync's line.
    partial: Duration,
}

/// Runs the drill in `mode`.
pub fn run(o: &Options, mode: Mode) -> anyhow::Result<Row> {
    // iptables-nft 1.8.9 needs far more than 30 minutes for 10 000 × 10 (README): 1 000 there.
    let full_n = if mode == Mode::IptablesNft {
        1_000
    } else {
        10_000
    };
    let n = o.services(100, full_n);
    let reps = o.repetitions(3, 100);
    let cluster = Cluster::new(n, 10, Layout::drill(false))?;
    let mut stage = Stage::new(o, &format!("kill-{}", mode.name()), cluster)?;
    let mut row = Row::new("1. kill -9 mid-sync", mode.name());
    let mut rng = fastrand::Rng::with_seed(o.seed);
    let (ferry, aim) = calibrate(o, &mut stage, mode, &mut rng)?;
    let mut running = Some(ferry);
    let (mut unfinished, mut converge) = (0, Vec::new());
    for rep in 0..reps {
        let phase = [Phase::First, Phase::Restart, Phase::Partial][rep % 3];
        let outcome = repetition(o, &mut stage, mode, phase, &aim, &mut running, &mut rng)?;
        unfinished += usize::from(!outcome.sync_completed);
        converge.extend(outcome.converged_in);
        row.rep(
            outcome
                .broken
                .map(|b| format!("rep {rep} ({phase:?}): {b}")),
        );
    }
    if let Some(f) = running.take() {
        f.stop()?;
    }
    converge.sort();
    row.figure = format!("broken states: {}", row.failures);
    if mode == Mode::Userspace {
        row.note(
            "userspace: nothing answers while Ferry is down (it is the proxy), by design: only \
             the restart is judged",
        );
    }
    if !whole_full_sync(mode, n) {
        row.note(&format!(
            "above {} nat chains iptables-nft splits a full sync: each Service is judged whole, \
             not the ruleset",
            ferry_dataplane::iptables::NFT_ONE_TRANSACTION_UP_TO
        ));
    }
    row.note(&format!(
        "{n} × 10; kills before the sync's line: {unfinished}/{reps}; restart → converged: \
         median {}, max {}; aim: first sync line {}, first sync {}, change → partial line {}",
        converge
            .get(converge.len() / 2)
            .map_or("-".into(), |d| secs(d.as_secs_f64())),
        converge
            .last()
            .map_or("-".into(), |d| secs(d.as_secs_f64())),
        secs(aim.first.as_secs_f64()),
        secs(aim.first_sync.as_secs_f64()),
        secs(aim.partial.as_secs_f64()),
    ));
    Ok(row)
}

/// A clean start and one change, timed.
fn calibrate(
    o: &Options,
    stage: &mut Stage,
    mode: Mode,
    rng: &mut fastrand::Rng,
) -> anyhow::Result<(Ferry, Aim)> {
    let started = Instant::now();
    let mut ferry = stage.start(&o.ferry, mode, &[])?;
    ferry.wait_syncs(1, SYNC_TIMEOUT)?;
    let first = started.elapsed();
    let first_sync = Duration::from_secs_f64(ferry.syncs()[0].duration_ms / 1e3);
    settle(&mut ferry);
    let before = ferry.syncs().len();
    let i = rng.usize(0..stage.cluster.services);
    stage.cluster.bump(i);
    let t = Instant::now();
    stage.write(i)?;
    ferry.wait_syncs(before + 1, SYNC_TIMEOUT)?;
    let partial = t.elapsed();
    Ok((
        ferry,
        Aim {
            first,
            first_sync,
            partial,
        },
    ))
}

/// What one repetition found.
struct Outcome {
    broken: Option<String>,
    sync_completed: bool,
    converged_in: Option<Duration>,
}

/// One kill: `phase` chooses what Ferry is doing when it dies (its first sync after a
/// cleanup, a restart's full sync over its own rules, or a partial sync of changed
/// Services); then the kernel is judged, Ferry restarted and its convergence checked.
fn repetition(
    o: &Options,
    stage: &mut Stage,
    mode: Mode,
    phase: Phase,
    aim: &Aim,
    running: &mut Option<Ferry>,
    rng: &mut fastrand::Rng,
) -> anyhow::Result<Outcome> {
    let n = stage.cluster.services;
    let (changed, expect) = change(stage, phase, rng);
    let (ferry, completed) = start_changes(o, stage, mode, phase, aim, running, &changed, rng)?;
    ferry.kill()?;
    // The kill leaves any tool Ferry had started (nft, iptables-restore) running: what it
    // does to the kernel is part of the kill's aftermath.
    wait_for_orphans(stage)?;
    // In userspace mode the proxy is Ferry's process: with it dead nothing answers, by design;
    // only the restart is judged.
    let broken = if mode == Mode::Userspace {
        None
    } else {
        let verdicts = stage
            .net
            .client
            .block_on(async { Ok(served(&expect, ASKS).await) })?;
        let whole = whole_full_sync(mode, n);
        judge(phase, &expect, &verdicts, changed.len(), whole)
    };
    let (again, converged_in, after_restart) = restart(o, stage, mode, &expect)?;
    *running = Some(again);
    Ok(Outcome {
        broken: broken.or(after_restart),
        sync_completed: completed,
        converged_in: Some(converged_in),
    })
}

/// Brings Ferry to the moment of the kill: for a first or restart phase a new Ferry started
/// `changed`'s new files in place, aimed at its first sync; for a partial phase the running
/// Ferry (settled), `changed` written, at a random moment of the partial sync that follows.
/// Returns Ferry and whether the sync aimed at had completed.
#[allow(clippy::too_many_arguments)]
fn start_changes(
    o: &Options,
    stage: &mut Stage,
    mode: Mode,
    phase: Phase,
    aim: &Aim,
    running: &mut Option<Ferry>,
    changed: &[usize],
    rng: &mut fastrand::Rng,
) -> anyhow::Result<(Ferry, bool)> {
    Ok(match phase {
        Phase::First | Phase::Restart => {
            if let Some(f) = running.take() {
                f.kill()?;
            }
            if phase == Phase::First {
                stage
                    .net
                    .node
                    .exec(&o.ferry.display().to_string(), ["cleanup"])?;
            }
            for &i in changed {
                stage.write(i)?;
            }
            let delay = aim_at(rng, aim.first, aim.first_sync);
            let ferry = stage.start(&o.ferry, mode, &[])?;
            std::thread::sleep(delay);
            let done = !ferry.syncs().is_empty();
            (ferry, done)
        }
        Phase::Partial => {
            let mut ferry = match running.take() {
                Some(f) => f,
                None => stage.start(&o.ferry, mode, &[])?,
            };
            ferry.wait_syncs(1, SYNC_TIMEOUT)?;
            settle(&mut ferry);
            let before = ferry.syncs().len();
            for &i in changed {
                stage.write(i)?;
            }
            let window = aim.partial.mul_f64(1.5);
            std::thread::sleep(window.mul_f64(rng.f64()));
            let done = ferry.syncs().len() > before;
            (ferry, done)
        }
    })
}

/// Picks the Services to change (a tenth, at most 50) and bumps them, and 10 others left
/// alone; what each should answer with, changed ones first (old endpoints: `None` on the
/// first sync, where nothing was programmed before).
fn change(stage: &mut Stage, phase: Phase, rng: &mut fastrand::Rng) -> (Vec<usize>, Vec<Expect>) {
    let n = stage.cluster.services;
    let changed = stage.cluster.sample((n / 10).clamp(1, 50), rng);
    let mut others: Vec<usize> = stage.cluster.sample(changed.len() + 10, rng);
    others.retain(|i| !changed.contains(i));
    others.truncate(10);
    let had_rules = phase != Phase::First;
    let old = |stage: &Stage, i: usize| had_rules.then(|| stage.cluster.generation(i));
    let mut expect: Vec<Expect> = changed
        .iter()
        .map(|&i| stage.expect(i, old(stage, i)))
        .collect();
    for &i in &changed {
        stage.cluster.bump(i);
    }
    for (e, &i) in expect.iter_mut().zip(&changed) {
        e.new = stage.cluster.endpoints_of(i).to_vec();
    }
    expect.extend(others.iter().map(|&i| stage.expect(i, old(stage, i))));
    (changed, expect)
}

/// Starts Ferry again after a kill and waits for its first sync; then every expected
/// Service must answer from its new endpoints and the kernel must hold the whole cluster.
/// Returns the new Ferry, the time to its first sync, and what is wrong, if anything.
fn restart(
    o: &Options,
    stage: &Stage,
    mode: Mode,
    expect: &[Expect],
) -> anyhow::Result<(Ferry, Duration, Option<String>)> {
    let started = Instant::now();
    let mut again = stage.start(&o.ferry, mode, &[])?;
    again.wait_syncs(1, SYNC_TIMEOUT)?;
    let converged_in = started.elapsed();
    let after = stage
        .net
        .client
        .block_on(async { Ok(served(expect, ASKS).await) })?;
    let mut broken = after.iter().position(|v| *v != Served::New).map(|i| {
        format!(
            "after the restart's first sync {} is served by {:?}",
            expect[i].target, after[i]
        )
    });
    if broken.is_none() {
        if let Some(d) = stage.differences(&o.ferry, stage.cluster.all().len())? {
            broken = Some(format!("after the restart's first sync: {d}"));
        }
    }
    Ok((again, converged_in, broken))
}

/// A kill delay: half the time anywhere up to just after the first sync's line, half the time
/// within the sync itself (the line's time less the sync's own duration, up to the line).
fn aim_at(rng: &mut fastrand::Rng, line: Duration, sync: Duration) -> Duration {
    let slack = Duration::from_millis(20);
    if rng.bool() {
        (line + slack).mul_f64(rng.f64())
    } else {
        let from = line.saturating_sub(sync + slack);
        from + (line + slack - from).mul_f64(rng.f64())
    }
}

/// Whether Ferry promises a full sync in `mode` at `n` × 10 as one transaction: iptables-nft
/// splits larger rulesets (each Service then changes atomically, not the whole).
fn whole_full_sync(mode: Mode, n: usize) -> bool {
    // One service chain and ten endpoint chains per Service.
    mode != Mode::IptablesNft || n * 11 <= ferry_dataplane::iptables::NFT_ONE_TRANSACTION_UP_TO
}

/// What a kill may leave, and what it must not (`whole`: a restart's full sync is promised as
/// one transaction).
fn judge(
    phase: Phase,
    expect: &[Expect],
    verdicts: &[Served],
    changed: usize,
    whole: bool,
) -> Option<String> {
    let show = |i: usize| format!("{} served by {:?}", expect[i].target, verdicts[i]);
    if let Some(i) = verdicts
        .iter()
        .position(|v| matches!(v, Served::Mixed | Served::Wrong))
    {
        return Some(show(i));
    }
    match phase {
        Phase::First => {
            let nothing = verdicts.iter().filter(|v| **v == Served::Nothing).count();
            (nothing != 0 && nothing != verdicts.len()).then(|| {
                format!(
                    "half a table: {nothing} of {} probed Services unanswered, e.g. {}",
                    verdicts.len(),
                    show(
                        verdicts
                            .iter()
                            .position(|v| *v == Served::Nothing)
                            .unwrap_or(0)
                    )
                )
            })
        }
        Phase::Restart | Phase::Partial => {
            if let Some(i) = verdicts.iter().position(|v| *v == Served::Nothing) {
                return Some(format!("a Service that had rules lost them: {}", show(i)));
            }
            // A restart's first sync carries every change at once: all old or all new.
            let c = &verdicts[..changed];
            let new = c.iter().filter(|v| **v == Served::New).count();
            (phase == Phase::Restart && whole && new != 0 && new != c.len()).then(|| {
                format!(
                    "half a full sync: {new} of {} changed Services new",
                    c.len()
                )
            })
        }
    }
}

/// Waits until only the processes Ferry started are gone from the node namespace (at most a
/// minute).
fn wait_for_orphans(stage: &Stage) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !ferry_lab::netns::pids(stage.net.node.name())?.is_empty() {
        anyhow::ensure!(
            Instant::now() < deadline,
            "tools still running a minute after the kill"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(())
}
