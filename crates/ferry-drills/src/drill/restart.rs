//! Drill 2, restart and upgrade under traffic: long-lived TCP streams and a steady stream of
//! new connections through ClusterIPs and NodePorts (both external policies) while Ferry is
//! stopped for a while, restarted, and replaced by a different build (`--other-ferry`).
//! Figures: established connections broken (goal 0), new connections failed (goal 0), session
//! affinity pins kept. In userspace mode Ferry's process is the proxy: a stop breaks its
//! connections and refuses new ones until the restart, by design; there only new connections
//! failing while Ferry is up count.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::Duration;

use crate::drill::{settle, Mode, Options, Stage};
use crate::lab::cluster::{Cluster, Extra, Layout, PORT, STREAM_SERVICE_PORT};
use crate::lab::net::NODE_IP;
use crate::lab::probe::{ask, Expect, PROBE_TIMEOUT};
use crate::lab::streams::Streams;
use crate::lab::watch::{Timeline, Watch};
use crate::lab::Ferry;
use crate::report::Row;

/// Runs the drill in `mode`.
pub fn run(o: &Options, mode: Mode) -> anyhow::Result<Row> {
    let n = o.services(20, 1_000);
    let reps = o.repetitions(1, 5);
    let stage = Stage::new(
        o,
        &format!("restart-{}", mode.name()),
        Cluster::new(n, 10, Layout::drill(true))?,
    )?;
    let mut row = Row::new("2. restart and upgrade under traffic", mode.name());
    let mut ferry = stage.start(&o.ferry, mode, &[])?;
    ferry.wait_syncs(1, Duration::from_secs(600))?;
    settle(&mut ferry);
    let targets = Targets::new(&stage, n, o.quick)?;
    let per_round = targets.probes.len();
    let streams = Streams::open(stage.net.client.name(), targets.streams.clone())?;
    let watch = Watch::start(
        stage.net.client.name(),
        targets.probes.clone(),
        Duration::from_millis(20),
    );
    let cycles = Cycles::run(o, &stage, mode, reps, ferry, &watch, targets.affinity)?;
    std::thread::sleep(Duration::from_secs(1));
    let mut up = cycles.up;
    up.push((cycles.since, watch.now()));
    let timeline = watch.finish()?;
    let results = streams.finish()?;
    let pins = (cycles.pins_kept, cycles.pins_checked);
    cycles.ferry.stop()?;
    for note in &cycles.notes {
        row.note(note);
    }
    row.repetitions = reps * 3;
    score(&mut row, mode, pins, &timeline, &up, per_round);
    let broken: Vec<String> = results
        .iter()
        .zip(&targets.streams)
        .filter_map(|(r, t)| r.as_ref().err().map(|e| format!("{t}: {e}")))
        .collect();
    if mode != Mode::Userspace && !broken.is_empty() {
        row.failures += 1;
    }
    if let Some(b) = broken.first() {
        row.note(&format!("first broken stream: {b}"));
    }
    let (made, failed) = timeline.connections(per_round);
    row.figure = format!(
        "established broken: {} of {}; new connections failed: {failed} of {made}; affinity pins kept: {} of {}",
        broken.len(),
        results.len(),
        pins.0,
        pins.1,
    );
    let upgrade = match &o.other_ferry {
        Some(other) => format!("upgrade to {}", other.display()),
        None => "upgrade to the same build (no --other-ferry)".to_owned(),
    };
    row.note(&format!("{n} × 10 + 3 extra Services; {per_round} targets every 20 ms (ClusterIPs, NodePorts Cluster and Local); {upgrade}"));
    Ok(row)
}

/// Counts the failures of the new connections and the affinity pins (`pins`: kept, checked;
/// `up`: the windows while Ferry was up; in userspace mode only connections failing in them
/// count).
fn score(
    row: &mut Row,
    mode: Mode,
    (pins_kept, pins_checked): (usize, usize),
    timeline: &Timeline,
    up: &[(Duration, Duration)],
    per_round: usize,
) {
    let (_, failed) = timeline.connections(per_round);
    let failed_up: usize = up.iter().map(|&(a, b)| timeline.failed(a, b)).sum();
    row.failures = if mode == Mode::Userspace {
        row.note(&format!(
            "userspace: proxied connections and affinity pins live in Ferry's process, so a stop \
             breaks them and refuses new connections until the restart, by design (not counted; \
             a restarted round-robin starts at the same endpoint, so a pin may look kept); \
             rounds failed while Ferry was up: {failed_up}"
        ));
        usize::from(failed_up > 0)
    } else {
        usize::from(failed > 0) + (pins_checked - pins_kept)
    };
}

/// What the client connects to: new connections every round (`probes`: the first and the
/// last ClusterIP, the Cluster-policy Service's ClusterIP, both NodePorts), long-lived streams
/// (the extra Services' ClusterIPs and NodePorts), and the affinity Service's ClusterIP.
struct Targets {
    probes: Vec<Expect>,
    streams: Vec<SocketAddrV4>,
    affinity: SocketAddrV4,
}

impl Targets {
    fn new(stage: &Stage, n: usize, quick: bool) -> anyhow::Result<Targets> {
        let c = &stage.cluster;
        let node_ip: Ipv4Addr = NODE_IP.parse()?;
        let (np_cluster, np_local, affinity) = (
            c.extra(Extra::NodePortCluster),
            c.extra(Extra::NodePortLocal),
            c.extra(Extra::Affinity),
        );
        let local_eps: Vec<Ipv4Addr> = c
            .endpoints_of(np_local)
            .iter()
            .enumerate()
            .filter(|(j, _)| c.node_of(np_local, *j) == crate::lab::cluster::NODE)
            .map(|(_, a)| *a)
            .collect();
        let node_port = |extra: Extra, http: bool| {
            let (h, s) = extra.node_ports().unwrap_or_default();
            SocketAddrV4::new(node_ip, if http { h } else { s })
        };
        let mut probes: Vec<Expect> = [0, n - 1, np_cluster]
            .iter()
            .map(|&i| stage.expect(i, None))
            .collect();
        probes.push(Expect {
            target: node_port(Extra::NodePortCluster, true),
            old: vec![],
            new: c.endpoints_of(np_cluster).to_vec(),
        });
        probes.push(Expect {
            target: node_port(Extra::NodePortLocal, true),
            old: vec![],
            new: local_eps,
        });
        let mut streams = Vec::new();
        for _ in 0..if quick { 2 } else { 10 } {
            for i in [np_cluster, np_local, affinity] {
                streams.push(SocketAddrV4::new(c.cluster_ip(i), STREAM_SERVICE_PORT));
            }
            streams.push(node_port(Extra::NodePortCluster, false));
            streams.push(node_port(Extra::NodePortLocal, false));
        }
        Ok(Targets {
            probes,
            streams,
            affinity: SocketAddrV4::new(c.cluster_ip(affinity), PORT),
        })
    }
}

/// The stops, restarts and upgrades, and what they showed.
struct Cycles {
    /// The Ferry running at the end.
    ferry: Ferry,
    /// The windows (watch times) while Ferry was up, but the last; that one began at `since`.
    up: Vec<(Duration, Duration)>,
    since: Duration,
    pins_kept: usize,
    pins_checked: usize,
    notes: Vec<String>,
}

impl Cycles {
    /// `reps` times: stop Ferry for 3 s and start it, restart it, replace it by the other
    /// build; after each, ask the affinity Service (at `affinity`) 5 times: the endpoint
    /// that answered before the first stop must answer.
    fn run(
        o: &Options,
        stage: &Stage,
        mode: Mode,
        reps: usize,
        ferry: Ferry,
        watch: &Watch,
        affinity: SocketAddrV4,
    ) -> anyhow::Result<Cycles> {
        let other = o.other_ferry.as_ref().unwrap_or(&o.ferry);
        let pinned = stage
            .net
            .client
            .block_on(async move { Ok(ask(affinity, PROBE_TIMEOUT).await?) })?;
        let mut cycles = Cycles {
            ferry,
            up: Vec::new(),
            // While Ferry is up (from a start's settled sync to the next stop): in userspace
            // mode only these connections must not fail.
            since: watch.now(),
            pins_kept: 0,
            pins_checked: 0,
            notes: Vec::new(),
        };
        for rep in 0..reps {
            for (what, binary) in [
                ("stop 3 s, start", &o.ferry),
                ("restart", &o.ferry),
                ("upgrade", other),
            ] {
                cycles.up.push((cycles.since, watch.now()));
                cycles.ferry.stop()?;
                if what.starts_with("stop") {
                    std::thread::sleep(Duration::from_secs(3));
                }
                cycles.ferry = stage.start(binary, mode, &[])?;
                cycles.ferry.wait_syncs(1, Duration::from_secs(600))?;
                settle(&mut cycles.ferry);
                cycles.since = watch.now();
                let again = stage.net.client.block_on(async move {
                    let mut all = Vec::new();
                    for _ in 0..5 {
                        all.push(ask(affinity, PROBE_TIMEOUT).await.ok());
                    }
                    Ok(all)
                })?;
                cycles.pins_checked += 1;
                if again.iter().all(|a| *a == Some(pinned)) {
                    cycles.pins_kept += 1;
                } else {
                    cycles.notes.push(format!(
                        "rep {rep}, {what}: affinity pin {pinned} answered by {again:?}"
                    ));
                }
            }
        }
        Ok(cycles)
    }
}
