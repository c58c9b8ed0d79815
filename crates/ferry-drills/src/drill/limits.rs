//! Drill 6, kernel-side limits, as far as this kernel lets a network namespace provoke them:
//! - **missing tool**: Ferry restarted over its own rules with `nft` / `iptables-*` gone from
//!   PATH must say which tool (and package) is missing and leave the last good rules serving;
//!   a good Ferry started afterwards converges;
//! - **read-only /proc/sys** (a mount namespace): Ferry must still program its rules (it writes
//!   no sysctl in nftables and iptables modes; IPVS mode's sysctls need the qemu guest);
//! - **huge batch**: one first sync of many Services in nftables mode (one netlink batch with
//!   an ack per message): no `ENOBUFS`, every frontend programmed;
//! - **conntrack table full**: provoked only when `nf_conntrack_max` is writable in a network
//!   namespace; the row says when it is not.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::drill::{settle, Mode, Options, Stage};
use crate::lab::cluster::Cluster;
use crate::lab::probe::{served, Served};
use crate::lab::Ferry;
use crate::report::{secs, Row};

const DRILL: &str = "6. kernel-side limits";

/// Every variant: one row each.
pub fn run(o: &Options) -> Vec<Row> {
    let mut rows = Vec::new();
    for &mode in &o.modes {
        rows.push(or_failed(missing_tool(o, mode), "missing tool", mode));
    }
    rows.push(or_failed(
        read_only_sysctls(o),
        "read-only /proc/sys",
        Mode::Nftables,
    ));
    rows.push(or_failed(huge_batch(o), "huge batch", Mode::Nftables));
    rows.push(or_failed(
        conntrack_full(o),
        "conntrack table full",
        Mode::Nftables,
    ));
    rows
}

fn or_failed(r: anyhow::Result<Row>, variant: &str, mode: Mode) -> Row {
    r.unwrap_or_else(|e| {
        let mut row = Row::new(DRILL, &format!("{variant}, {}", mode.name()));
        row.rep(Some(format!("the drill failed: {e:#}")));
        row
    })
}

/// A shell script that runs `ferry` as `prefix` says (`exec` included), in `dir`.
fn wrapper(dir: &Path, name: &str, body: &str) -> anyhow::Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt as _;
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n"))?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
    Ok(path)
}

/// Probes a sample of Services: what each was served by.
fn probe(stage: &Stage, sample: &[usize], old: &[(usize, u32)]) -> anyhow::Result<Vec<Served>> {
    let expect: Vec<_> = sample
        .iter()
        .map(|&i| {
            let g = old.iter().find(|(j, _)| *j == i).map(|(_, g)| *g);
            stage.expect(i, g)
        })
        .collect();
    stage
        .net
        .client
        .block_on(async move { Ok(served(&expect, 3).await) })
}

fn missing_tool(o: &Options, mode: Mode) -> anyhow::Result<Row> {
    let n = o.services(20, 200);
    let mut stage = Stage::new(
        o,
        &format!("limits-{}", mode.name()),
        Cluster::new(n, 2, false)?,
    )?;
    let mut row = Row::new(DRILL, &format!("missing tool, {}", mode.name()));
    let mut ferry = stage.start(&o.ferry, mode, &[])?;
    ferry.wait_syncs(1, Duration::from_secs(600))?;
    settle(&mut ferry);
    ferry.stop()?;
    // A change the broken Ferry cannot program: the old rules must keep serving.
    let mut rng = fastrand::Rng::with_seed(o.seed);
    let sample = stage.cluster.sample(5, &mut rng);
    let changed = sample[0];
    let old = vec![(changed, stage.cluster.generation(changed))];
    stage.cluster.bump(changed);
    stage.write(changed)?;
    let tmp = tempfile::tempdir()?;
    let empty = tmp.path().join("empty-path");
    std::fs::create_dir_all(&empty)?;
    let binary = wrapper(
        tmp.path(),
        "ferry-without-tools",
        &format!("PATH={} exec {} \"$@\"", empty.display(), o.ferry.display()),
    )?;
    let mut broken = Ferry::start(
        &binary,
        stage.net.node.name(),
        &stage.flags(mode),
        &stage.log,
    )?;
    let end = Instant::now() + Duration::from_secs(10);
    while broken.is_running() && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(50));
    }
    let log = broken.log();
    let error = log
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|l| l["level"] == "ERROR")
        .map(|l| {
            l["fields"]["message"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        });
    let exited = !broken.is_running();
    drop(broken);
    let clear = error.as_deref().is_some_and(|e| e.contains("not on PATH"));
    row.rep((!(exited && clear)).then(|| format!("exited: {exited}, error: {error:?}")));
    // The changed Service answers from its old endpoints, the others from their only ones.
    let want = |i: usize| {
        if i == changed {
            Served::Old
        } else {
            Served::New
        }
    };
    let kept = probe(&stage, &sample, &old)?;
    let kept_ok = sample.iter().zip(&kept).all(|(&i, s)| *s == want(i));
    row.rep(
        (!kept_ok).then(|| format!("with the tool missing, the sample was served by {kept:?}")),
    );
    // The tool back: a good Ferry converges.
    let mut good = stage.start(&o.ferry, mode, &[])?;
    good.wait_syncs(1, Duration::from_secs(600))?;
    settle(&mut good);
    let after = probe(&stage, &sample, &[])?;
    let converged = after.iter().all(|s| *s == Served::New);
    row.rep((!converged).then(|| format!("after the restart, served by {after:?}")));
    good.stop()?;
    row.figure = format!(
        "rules kept: {}/{}; converged after: {}",
        sample
            .iter()
            .zip(&kept)
            .filter(|(&i, s)| **s == want(i))
            .count(),
        kept.len(),
        if converged { "yes" } else { "no" }
    );
    row.note(&format!(
        "Ferry exits (status non-zero, the supervisor restarts it): {}",
        error.unwrap_or_else(|| "no error logged".to_owned())
    ));
    Ok(row)
}

fn read_only_sysctls(o: &Options) -> anyhow::Result<Row> {
    let mode = Mode::Nftables;
    let n = o.services(20, 200);
    let stage = Stage::new(o, "limits-sysctl", Cluster::new(n, 2, false)?)?;
    let mut row = Row::new(DRILL, &format!("read-only /proc/sys, {}", mode.name()));
    let tmp = tempfile::tempdir()?;
    let binary = wrapper(
        tmp.path(),
        "ferry-ro-sysctl",
        &format!(
            "exec unshare --mount sh -c 'mount -o bind,ro /proc/sys /proc/sys && exec \"$0\" \"$@\"' {} \"$@\"",
            o.ferry.display()
        ),
    )?;
    let mut ferry = Ferry::start(
        &binary,
        stage.net.node.name(),
        &stage.flags(mode),
        &stage.log,
    )?;
    ferry.wait_syncs(1, Duration::from_secs(600))?;
    settle(&mut ferry);
    let differences = stage.differences(&o.ferry, n)?;
    let warnings = ferry
        .log()
        .lines()
        .filter(|l| l.contains("\"level\":\"WARN\"") || l.contains("\"level\":\"ERROR\""))
        .count();
    ferry.stop()?;
    row.rep(differences.map(|d| format!("rules not programmed: {d}")));
    row.figure = "rules programmed: yes".to_owned();
    if row.failures > 0 {
        row.figure = "rules programmed: no".to_owned();
    }
    row.note(&format!(
        "nftables and iptables modes write no sysctl ({warnings} warnings or errors logged); IPVS mode's sysctls are drilled only in the qemu guest"
    ));
    Ok(row)
}

fn huge_batch(o: &Options) -> anyhow::Result<Row> {
    let mode = Mode::Nftables;
    let n = o.services(2_000, 20_000);
    let stage = Stage::new(o, "limits-batch", Cluster::new(n, 2, false)?)?;
    let mut row = Row::new(
        DRILL,
        &format!("huge batch ({n} Services), {}", mode.name()),
    );
    let mut ferry = stage.start(&o.ferry, mode, &[])?;
    let took = ferry.wait_syncs(1, Duration::from_secs(900))?;
    settle(&mut ferry);
    let log = ferry.log();
    let enobufs = log.contains("ENOBUFS") || log.contains("No buffer space");
    let differences = stage.differences(&o.ferry, n)?;
    let syncs = ferry.syncs();
    ferry.stop()?;
    row.rep(enobufs.then(|| "ENOBUFS in the log".to_owned()));
    row.rep(differences.map(|d| format!("not all programmed: {d}")));
    row.figure = format!("first sync after {}", secs(took.as_secs_f64()));
    row.note(&format!(
        "ENOBUFS: {}; syncs: {}",
        if enobufs { "yes" } else { "no" },
        syncs.len()
    ));
    Ok(row)
}

/// The drill's UDP Service: its ClusterIP (in the service range, outside the cluster's) and
/// port.
const UDP_IP: &str = "10.110.255.1";
const UDP_PORT: u16 = 53;
/// Flows the client opens through the UDP Service before the table fills.
const UDP_FLOWS: u16 = 200;

/// The UDP Service and its slice over `endpoints` (port 5353; nothing needs to answer: a
/// flow is made by the client's datagram).
fn udp_manifest(endpoints: &[std::net::Ipv4Addr]) -> String {
    let addresses: Vec<String> = endpoints
        .iter()
        .map(|a| {
            format!(
                "- addresses: [\"{a}\"]\n  conditions: {{ready: true}}\n  nodeName: {}\n",
                crate::lab::cluster::NODE
            )
        })
        .collect();
    format!(
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: limits-udp\n  namespace: limits\nspec:\n  \
         clusterIP: {UDP_IP}\n  ports:\n  - name: dns\n    port: {UDP_PORT}\n    targetPort: 5353\n    protocol: UDP\n\
         ---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: limits-udp-1\n  \
         namespace: limits\n  labels:\n    kubernetes.io/service-name: limits-udp\naddressType: IPv4\n\
         ports:\n- name: dns\n  port: 5353\n  protocol: UDP\nendpoints:\n{}",
        addresses.concat()
    )
}

/// Sends one datagram from each of `count` sockets to `target` (in the calling namespace).
fn datagrams(target: std::net::SocketAddr, count: usize) -> usize {
    (0..count)
        .filter(|_| {
            std::net::UdpSocket::bind("0.0.0.0:0")
                .and_then(|s| s.send_to(b"x", target))
                .is_ok()
        })
        .count()
}

/// A figure of `/proc/sys/net/netfilter/` in the node namespace.
fn netfilter(stage: &Stage, name: &str) -> anyhow::Result<usize> {
    let text = stage
        .net
        .node
        .exec("cat", [format!("/proc/sys/net/netfilter/{name}")])?;
    Ok(text.trim().parse()?)
}

/// Fills the node's conntrack table: datagrams to closed loopback ports (each a new UDP flow)
/// until the table holds `nf_conntrack_max` entries. Returns the count reached.
fn fill_conntrack(stage: &Stage) -> anyhow::Result<usize> {
    let max = netfilter(stage, "nf_conntrack_max")?;
    stage.net.node.exec("ip", ["link", "set", "lo", "up"])?;
    stage.net.node.block_on(async move {
        let sockets: Vec<std::net::UdpSocket> = (0..8)
            .map(|_| std::net::UdpSocket::bind("127.0.0.1:0"))
            .collect::<Result<_, _>>()?;
        // 8 sockets × 127.0.0.1–4 × 65 535 ports: 2 million tuples, far above the table.
        let per = max / sockets.len() + 1;
        for (k, s) in sockets.iter().enumerate() {
            for n in 0..per {
                let ip = std::net::Ipv4Addr::new(127, 0, 0, 1 + (n / 65_535) as u8);
                let port = (n % 65_535) as u16 + 1;
                let _ = s.send_to(&[k as u8], (ip, port));
            }
        }
        Ok(())
    })?;
    netfilter(stage, "nf_conntrack_count")
}

/// Counts the node's UDP conntrack entries to the UDP Service answered by `endpoint`.
fn flows_to(stage: &Stage, endpoint: std::net::Ipv4Addr) -> anyhow::Result<usize> {
    let ep = endpoint.to_string();
    let (_, out, _) = stage.net.node.exec_status(
        "conntrack",
        [
            "-L",
            "-p",
            "udp",
            "--orig-dst",
            UDP_IP,
            "--reply-src",
            ep.as_str(),
        ],
    )?;
    Ok(out.lines().filter(|l| l.contains("udp")).count())
}

fn conntrack_full(o: &Options) -> anyhow::Result<Row> {
    let mode = Mode::Nftables;
    let mut row = Row::new(DRILL, &format!("conntrack table full, {}", mode.name()));
    let stage = Stage::new(o, "limits-ct", Cluster::new(o.services(20, 200), 2, false)?)?;
    let endpoints = stage.cluster.endpoints_of(0);
    let (keep, drop) = (endpoints[0], endpoints[1]);
    std::fs::write(
        stage.dir.join("limits-udp.yaml"),
        udp_manifest(&[keep, drop]),
    )?;
    // The filler's flows must outlive the drill (30 s by default for a one-way UDP flow).
    stage.net.node.exec(
        "sh",
        [
            "-c",
            "echo 300 > /proc/sys/net/netfilter/nf_conntrack_udp_timeout",
        ],
    )?;
    let mut ferry = stage.start(&o.ferry, mode, &[])?;
    ferry.wait_syncs(1, Duration::from_secs(600))?;
    settle(&mut ferry);
    let target: std::net::SocketAddr = format!("{UDP_IP}:{UDP_PORT}").parse()?;
    stage
        .net
        .client
        .block_on(async move { Ok(datagrams(target, usize::from(UDP_FLOWS))) })?;
    let before = flows_to(&stage, drop)?;
    let max = netfilter(&stage, "nf_conntrack_max")?;
    let full = fill_conntrack(&stage)?;
    // Full: the kernel refuses new flows (an entry or two may time out or be early-dropped
    // meanwhile).
    row.rep((full + max / 1000 < max).then(|| format!("the table did not fill: {full} of {max}")));
    // The endpoint goes: its flows are stale, and must be deleted while the table is full.
    let syncs = ferry.syncs().len();
    std::fs::write(stage.stage.join("limits-udp.yaml"), udp_manifest(&[keep]))?;
    std::fs::rename(
        stage.stage.join("limits-udp.yaml"),
        stage.dir.join("limits-udp.yaml"),
    )?;
    ferry.wait_syncs(syncs + 1, Duration::from_secs(60))?;
    settle(&mut ferry);
    let left = flows_to(&stage, drop)?;
    let cleaned: Vec<serde_json::Value> = ferry.lines("cleaned UDP conntrack entries");
    let failed: Vec<String> = ferry
        .log()
        .lines()
        .filter(|l| l.contains("UDP conntrack cleanup failed"))
        .map(str::to_owned)
        .collect();
    ferry.stop()?;
    row.rep((before == 0).then(|| "no flow reached the removed endpoint".to_owned()));
    row.rep((left > 0).then(|| format!("{left} stale flows left to the removed endpoint")));
    row.figure = format!("stale flows left: {left} of {before}");
    let c = cleaned.last().map(|l| &l["fields"]);
    row.note(&format!(
        "table {full}/{max} entries; cleanup: dumped {}, deleted {}, {} ms; cleanup failures logged: {}",
        c.map_or("-".to_owned(), |c| c["entries"].to_string()),
        c.map_or("-".to_owned(), |c| c["deleted"].to_string()),
        c.and_then(|c| c["duration_ms"].as_f64()).map_or("-".to_owned(), |d| format!("{d:.0}")),
        failed.len()
    ));
    Ok(row)
}
