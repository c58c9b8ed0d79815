//! Extra Services for feature lab tests: written as their own manifest file next to the seed's,
//! applied with a wait for every node's next sync, and inspected in the nodes' conntrack tables.

#![allow(dead_code)]

use std::net::SocketAddr;

use super::seed::{SeedLab, NODES};

/// A Service (ClusterIP, or NodePort with `node_port`) with one port `proto` `port` → 56010,
/// and its EndpointSlice with `endpoints` (pod IPs on k8s-node2; `None`: no slice at all).
pub fn service(
    name: &str,
    cluster_ip: &str,
    proto: &str,
    port: u16,
    node_port: Option<u16>,
    endpoints: Option<&[&str]>,
) -> String {
    let (kind, np) = match node_port {
        Some(p) => ("NodePort", format!("\n    nodePort: {p}")),
        None => ("ClusterIP", String::new()),
    };
    let mut text = format!(
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: {name}\n  namespace: dev\nspec:\n  type: {kind}\n  clusterIP: {cluster_ip}\n  ports:\n  - name: p\n    protocol: {proto}\n    port: {port}\n    targetPort: 56010{np}\n"
    );
    if let Some(endpoints) = endpoints {
        let eps: String = endpoints
            .iter()
            .map(|ip| {
                format!("- addresses: [\"{ip}\"]\n  conditions:\n    ready: true\n  nodeName: k8s-node2\n")
            })
            .collect();
        let eps = if eps.is_empty() {
            "[]\n".to_owned()
        } else {
            format!("\n{eps}")
        };
        text.push_str(&format!(
            "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: {name}-x1\n  namespace: dev\n  labels:\n    kubernetes.io/service-name: {name}\naddressType: IPv4\nports:\n- name: p\n  port: 56010\n  protocol: {proto}\nendpoints: {eps}"
        ));
    }
    text
}

/// Writes one manifest file and waits until every node has synced once more (whatever runs
/// after a sync, such as the conntrack cleanup, is done before its "synced rules" line).
pub fn apply(seed: &mut SeedLab, file: &str, text: &str) {
    let before: Vec<usize> = NODES.iter().map(|(n, _)| seed.syncs(n)).collect();
    seed.manifests.put(file, text);
    for ((node, _), n) in NODES.iter().zip(before) {
        seed.wait_synced(node, n + 1);
    }
}

/// `conntrack -L` on a node for `proto` flows from `src` with reply source `reply_src`: the
/// entries' lines.
pub fn entries(
    seed: &SeedLab,
    node: &str,
    proto: &str,
    src: SocketAddr,
    reply_src: &str,
) -> Vec<String> {
    let (ip, port) = (src.ip().to_string(), src.port().to_string());
    let argv = [
        "conntrack",
        "-L",
        "-p",
        proto,
        "--orig-src",
        &ip,
        "--sport",
        &port,
        "--reply-src",
        reply_src,
    ];
    let out = seed.lab.exec(node, argv).expect("conntrack -L");
    out.lines().map(str::to_owned).collect()
}

/// A node's whole conntrack table, for failure messages.
pub fn table(seed: &SeedLab, node: &str) -> String {
    seed.lab.exec(node, ["conntrack", "-L"]).unwrap_or_default()
}
