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
use crate::lab::watch::Watch;
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
    let other = o.other_ferry.clone().unwrap_or_else(|| o.ferry.clone());
    let mut ferry = Some(stage.start(&o.ferry, mode, &[])?);
    if let Some(f) = ferry.as_mut() {
        f.wait_syncs(1, Duration::from_secs(600))?;
        settle(f);
    }
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
    let mut targets: Vec<Expect> = [0, n - 1, np_cluster]
        .iter()
        .map(|&i| stage.expect(i, None))
        .collect();
    targets.push(Expect {
        target: node_port(Extra::NodePortCluster, true),
        old: vec![],
        new: c.endpoints_of(np_cluster).to_vec(),
    });
    targets.push(Expect {
        target: node_port(Extra::NodePortLocal, true),
        old: vec![],
        new: local_eps,
    });
    let per_round = targets.len();
    let mut stream_targets = Vec::new();
    let per_kind = if o.quick { 2 } else { 10 };
    for _ in 0..per_kind {
        for i in [np_cluster, np_local, affinity] {
            stream_targets.push(SocketAddrV4::new(c.cluster_ip(i), STREAM_SERVICE_PORT));
        }
        stream_targets.push(node_port(Extra::NodePortCluster, false));
        stream_targets.push(node_port(Extra::NodePortLocal, false));
    }
    let affinity_target = SocketAddrV4::new(c.cluster_ip(affinity), PORT);
    let pinned = stage
        .net
        .client
        .block_on(async move { Ok(ask(affinity_target, PROBE_TIMEOUT).await?) })?;
    let streams = Streams::open(stage.net.client.name(), stream_targets.clone())?;
    let watch = Watch::start(stage.net.client.name(), targets, Duration::from_millis(20));
    let (mut pins_kept, mut pins_checked) = (0, 0);
    // While Ferry is up (from a start's settled sync to the next stop): in userspace mode only
    // these connections must not fail.
    let (mut up, mut since) = (Vec::new(), watch.now());
    for rep in 0..reps {
        for (what, binary) in [
            ("stop 3 s, start", &o.ferry),
            ("restart", &o.ferry),
            ("upgrade", &other),
        ] {
            up.push((since, watch.now()));
            if let Some(f) = ferry.take() {
                f.stop()?;
            }
            if what.starts_with("stop") {
                std::thread::sleep(Duration::from_secs(3));
            }
            let mut f: Ferry = stage.start(binary, mode, &[])?;
            f.wait_syncs(1, Duration::from_secs(600))?;
            settle(&mut f);
            since = watch.now();
            ferry = Some(f);
            let again = stage.net.client.block_on(async move {
                let mut all = Vec::new();
                for _ in 0..5 {
                    all.push(ask(affinity_target, PROBE_TIMEOUT).await.ok());
                }
                Ok(all)
            })?;
            pins_checked += 1;
            if again.iter().all(|a| *a == Some(pinned)) {
                pins_kept += 1;
            } else {
                row.note(&format!(
                    "rep {rep}, {what}: affinity pin {pinned} answered by {again:?}"
                ));
            }
        }
    }
    std::thread::sleep(Duration::from_secs(1));
    up.push((since, watch.now()));
    let timeline = watch.finish()?;
    let results = streams.finish()?;
    if let Some(f) = ferry.take() {
        f.stop()?;
    }
    let broken: Vec<String> = results
        .iter()
        .zip(&stream_targets)
        .filter_map(|(r, t)| r.as_ref().err().map(|e| format!("{t}: {e}")))
        .collect();
    let (made, failed) = timeline.connections(per_round);
    row.repetitions = reps * 3;
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
        usize::from(!broken.is_empty()) + usize::from(failed > 0) + (pins_checked - pins_kept)
    };
    if let Some(b) = broken.first() {
        row.note(&format!("first broken stream: {b}"));
    }
    row.figure = format!(
        "established broken: {} of {}; new connections failed: {failed} of {made}; affinity pins kept: {pins_kept} of {pins_checked}",
        broken.len(),
        results.len()
    );
    let upgrade = if o.other_ferry.is_some() {
        format!("upgrade to {}", other.display())
    } else {
        "upgrade to the same build (no --other-ferry)".to_owned()
    };
    row.note(&format!("{n} × 10 + 3 extra Services; {per_round} targets every 20 ms (ClusterIPs, NodePorts Cluster and Local); {upgrade}"));
    Ok(row)
}
