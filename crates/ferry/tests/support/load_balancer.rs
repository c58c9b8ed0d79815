//! The LoadBalancer lab of `lab_load_balancer.rs`: a second client, routes to load-balancer
//! and external IPs inside the clients' namespaces, the Service, and checks that compare real
//! packets with `ferry explain`.

#![allow(dead_code)]

use std::net::Ipv4Addr;
use std::process::Command;

use ferry_lab::{ClientSpec, CurlResult, Host};
use serde_json::Value;

use crate::seed::{self, Hello, Mode, SeedLab, NODES, POD_A, POD_B};

pub const CLIENT_IP: &str = "10.1.1.100";
pub const CLIENT2: &str = "client2";
pub const CLIENT2_IP: &str = "10.1.1.101";
pub const NODE1_IP: &str = "10.1.1.17";
pub const NODE2_IP: &str = "10.1.1.9";
pub const LB_CLUSTER_IP: &str = "10.96.198.90";
pub const LB_NODE_PORT: u16 = 32230;
/// Load-balancer IP routed to k8s-node2 (both pods are there).
pub const LB_NODE2: &str = "203.0.113.10";
/// Load-balancer IP routed to k8s-node1 (no pod there).
pub const LB_NODE1: &str = "203.0.113.11";
/// An `ipMode: Proxy` ingress routed to k8s-node2: left to the load balancer.
pub const LB_PROXY: &str = "203.0.113.12";
/// External IPs routed to k8s-node2 and k8s-node1.
pub const EXT_NODE2: &str = "203.0.113.20";
pub const EXT_NODE1: &str = "203.0.113.21";
pub const ROUTES: [(&str, &str); 5] = [
    (LB_NODE2, NODE2_IP),
    (LB_NODE1, NODE1_IP),
    (LB_PROXY, NODE2_IP),
    (EXT_NODE2, NODE2_IP),
    (EXT_NODE1, NODE1_IP),
];
pub const SERVERS: [&str; 2] = [POD_A.1, POD_B.1];

/// The LoadBalancer Service `dev/url-analysis-lb` (port 8080 → the url-analysis pods).
#[derive(Clone)]
pub struct Lb {
    pub policy: &'static str,
    pub node_port: bool,
    pub source_ranges: &'static [&'static str],
    pub ingress: bool,
    pub external_ips: bool,
}

pub const LB: Lb = Lb {
    policy: "Cluster",
    node_port: true,
    source_ranges: &[],
    ingress: true,
    external_ips: false,
};

impl Lb {
    pub fn manifest(&self) -> String {
        let mut spec = format!(
            "  type: LoadBalancer\n  clusterIP: {LB_CLUSTER_IP}\n  externalTrafficPolicy: {}\n",
            self.policy
        );
        if !self.node_port {
            spec.push_str("  allocateLoadBalancerNodePorts: false\n");
        }
        if !self.source_ranges.is_empty() {
            spec.push_str(&format!(
                "  loadBalancerSourceRanges: [{}]\n",
                self.source_ranges.join(", ")
            ));
        }
        if self.external_ips {
            spec.push_str(&format!("  externalIPs: [{EXT_NODE2}, {EXT_NODE1}]\n"));
        }
        let node_port = if self.node_port {
            format!(", nodePort: {LB_NODE_PORT}")
        } else {
            String::new()
        };
        spec.push_str(&format!(
            "  ports: [{{name: http, protocol: TCP, port: 8080, targetPort: 56010{node_port}}}]\n"
        ));
        let status = if self.ingress {
            format!(
                "status:\n  loadBalancer:\n    ingress:\n    - {{ip: {LB_NODE2}}}\n    - {{ip: {LB_NODE1}, ipMode: VIP}}\n    - {{ip: {LB_PROXY}, ipMode: Proxy}}\n"
            )
        } else {
            String::new()
        };
        let eps: String = SERVERS
            .iter()
            .map(|ip| {
                format!("- {{addresses: [\"{ip}\"], conditions: {{ready: true}}, nodeName: k8s-node2}}\n")
            })
            .collect();
        format!(
            "apiVersion: v1\nkind: Service\nmetadata: {{name: url-analysis-lb, namespace: dev}}\nspec:\n{spec}{status}---\n\
apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: url-analysis-lb-abcde\n  namespace: dev\n  labels: {{kubernetes.io/service-name: url-analysis-lb}}\naddressType: IPv4\nports: [{{name: http, port: 56010, protocol: TCP}}]\nendpoints:\n{eps}"
        )
    }
}

/// The seed lab with a second client, the routes to 203.0.113.0/24 and the Service `lb`.
pub fn start(mode: Mode, lb: &Lb) -> SeedLab {
    let mut seed = SeedLab::start(mode, "Cluster");
    let client2 = ClientSpec {
        name: CLIENT2.into(),
        ip: CLIENT2_IP.parse().expect("ip"),
        pod_routes: false,
    };
    seed.lab.add_client(&client2).expect("second client");
    for client in [Host::default_client(), Host::client(CLIENT2)] {
        for (dst, via) in ROUTES {
            let dst = format!("{dst}/32").parse().expect("net");
            let via: Ipv4Addr = via.parse().expect("ip");
            seed.lab.add_route(&client, dst, via).expect("route");
        }
    }
    set(&mut seed, lb);
    seed
}

/// Writes the Service and waits until every node has synced it.
pub fn set(seed: &mut SeedLab, lb: &Lb) {
    let before: Vec<usize> = NODES.iter().map(|(n, _)| seed.syncs(n)).collect();
    seed.manifests.put("lb.yaml", &lb.manifest());
    for ((node, _), n) in NODES.iter().zip(before) {
        seed.wait_synced(node, n + 1);
    }
}

pub fn url(ip: &str, port: u16) -> String {
    format!("http://{ip}:{port}/hello")
}

/// `ferry explain` for the packet, as JSON, with the lab's settings and the mode's backend.
pub fn explain(seed: &SeedLab, node: &str, from: &str, ip: &str, port: u16) -> Value {
    let out = Command::new(seed::FERRY)
        .args(["explain", "--manifests"])
        .arg(seed.manifests.path())
        .args([
            "--node",
            node,
            "--from",
            from,
            "--to",
            &format!("{ip}:{port}"),
        ])
        .args(["--cluster-cidr", "192.168.0.0/16", "--output", "json"])
        .args(["--proxy-mode", seed.mode.flag()])
        .output()
        .expect("run ferry explain");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("explain json")
}

/// The packet from `from` reaches a pod, which sees `peer` as the client; `ferry explain` on
/// `node` agrees (forwarded, masqueraded exactly when `peer` is not the source, or the sender
/// is a node).
pub fn assert_forwarded(
    seed: &SeedLab,
    from: (&Host, &str),
    node: &str,
    ip: &str,
    port: u16,
    peer: &str,
) {
    for _ in 0..4 {
        let h: Hello = seed.hello(from.0, &url(ip, port));
        assert!(
            SERVERS.contains(&h.server_ip.as_str()),
            "{ip}:{port}: {h:?}"
        );
        assert_eq!(h.client_ip, peer, "{from:?} → {ip}:{port}: {h:?}");
    }
    let v = explain(seed, node, from.1, ip, port);
    assert_eq!(v["verdict"], "forwarded", "{v}");
    // The node's own traffic is masqueraded to the node's address, i.e. kept as it was.
    let masquerade = peer != from.1 || matches!(from.0, Host::Node(_));
    assert_eq!(v["masquerade"] == "yes", masquerade, "{v}");
}

/// The packet from `from` times out; `ferry explain` on `node` says `verdict`.
pub fn assert_timed_out(
    seed: &SeedLab,
    from: (&Host, &str),
    node: &str,
    ip: &str,
    port: u16,
    verdict: &str,
) {
    let got = seed.curl(from.0, &url(ip, port));
    assert_eq!(
        got,
        CurlResult::TimedOut,
        "{from:?} → {ip}:{port}\n{}",
        seed.logs()
    );
    let v = explain(seed, node, from.1, ip, port);
    assert_eq!(v["verdict"], verdict, "{v}");
}

pub fn client() -> (Host, &'static str) {
    (Host::default_client(), CLIENT_IP)
}

pub fn client2() -> (Host, &'static str) {
    (Host::client(CLIENT2), CLIENT2_IP)
}
