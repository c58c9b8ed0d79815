//! Drill 6's full conntrack table: a UDP Service's flows, the node namespace's table filled to
//! `nf_conntrack_max` for real, one endpoint removed: Ferry's cleanup must delete its flows
//! from a dump of the full table.

use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::time::Duration;

use super::DRILL;
use crate::drill::{settle, Mode, Options, Stage};
use crate::lab::cluster::{Cluster, Layout, NODE};
use crate::report::Row;

/// The drill's UDP Service: its ClusterIP (in the service range, outside the cluster's) and
/// port.
const UDP_IP: &str = "10.110.255.1";
const UDP_PORT: u16 = 53;
/// Flows the client opens through the UDP Service before the table fills.
const UDP_FLOWS: u16 = 200;

/// The UDP Service and its slice over `endpoints` (port 5353; nothing needs to answer: a
/// flow is made by the client's datagram).
fn udp_manifest(endpoints: &[Ipv4Addr]) -> String {
    let addresses: Vec<String> = endpoints
        .iter()
        .map(|a| {
            format!(
                "- addresses: [\"{a}\"]\n  conditions: {{ready: true}}\n  nodeName: {}\n",
                NODE
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
fn datagrams(target: SocketAddr, count: usize) -> usize {
    (0..count)
        .filter(|_| {
            UdpSocket::bind("0.0.0.0:0")
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
        let sockets: Vec<UdpSocket> = (0..8)
            .map(|_| UdpSocket::bind("127.0.0.1:0"))
            .collect::<Result<_, _>>()?;
        // 8 sockets × 127.0.0.1–4 × 65 535 ports: 2 million tuples, far above the table.
        let per = max / sockets.len() + 1;
        for (k, s) in sockets.iter().enumerate() {
            for n in 0..per {
                let ip = Ipv4Addr::new(127, 0, 0, 1 + (n / 65_535) as u8);
                let port = (n % 65_535) as u16 + 1;
                let _ = s.send_to(&[k as u8], (ip, port));
            }
        }
        Ok(())
    })?;
    netfilter(stage, "nf_conntrack_count")
}

/// Counts the node's UDP conntrack entries to the UDP Service answered by `endpoint`.
fn flows_to(stage: &Stage, endpoint: Ipv4Addr) -> anyhow::Result<usize> {
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

/// The conntrack variant's row.
pub(super) fn full_table(o: &Options) -> anyhow::Result<Row> {
    let mode = Mode::Nftables;
    let mut row = Row::new(DRILL, &format!("conntrack table full, {}", mode.name()));
    let stage = Stage::new(
        o,
        "limits-ct",
        Cluster::new(o.services(20, 200), 2, Layout::drill(false))?,
    )?;
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
    let target: SocketAddr = format!("{UDP_IP}:{UDP_PORT}").parse()?;
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
