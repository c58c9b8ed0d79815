//! LoadBalancer Services, loadBalancerSourceRanges and external IPs with real packets, in every
//! proxy mode (issue 5). Needs root (skips otherwise).
//!
//! A router in front of the cluster is simulated inside the lab: both clients (10.1.1.100 and
//! 10.1.1.101) route the load-balancer and external IPs (203.0.113.0/24, upstream's "external"
//! test range) to a node, as a VIP-preserving load balancer would deliver them. Nothing is
//! added to the root namespace. Every packet check is also asked of `ferry explain`, which must
//! predict the same outcome.

#[macro_use]
#[path = "support/modes.rs"]
mod modes;
#[path = "support/seed.rs"]
mod seed;

use std::net::Ipv4Addr;
use std::process::Command;

use ferry_lab::spec::{NODE1, NODE2};
use ferry_lab::{ClientSpec, CurlResult, Host};
use serde_json::Value;

use seed::{Hello, Mode, SeedLab, NODES, POD_A, POD_B};

const CLIENT_IP: &str = "10.1.1.100";
const CLIENT2: &str = "client2";
const CLIENT2_IP: &str = "10.1.1.101";
const NODE1_IP: &str = "10.1.1.17";
const NODE2_IP: &str = "10.1.1.9";
const LB_CLUSTER_IP: &str = "10.96.198.90";
const LB_NODE_PORT: u16 = 32230;
/// Load-balancer IP routed to k8s-node2 (both pods are there).
const LB_NODE2: &str = "203.0.113.10";
/// Load-balancer IP routed to k8s-node1 (no pod there).
const LB_NODE1: &str = "203.0.113.11";
/// An `ipMode: Proxy` ingress routed to k8s-node2: left to the load balancer.
const LB_PROXY: &str = "203.0.113.12";
/// External IPs routed to k8s-node2 and k8s-node1.
const EXT_NODE2: &str = "203.0.113.20";
const EXT_NODE1: &str = "203.0.113.21";
const ROUTES: [(&str, &str); 5] = [
    (LB_NODE2, NODE2_IP),
    (LB_NODE1, NODE1_IP),
    (LB_PROXY, NODE2_IP),
    (EXT_NODE2, NODE2_IP),
    (EXT_NODE1, NODE1_IP),
];
const SERVERS: [&str; 2] = [POD_A.1, POD_B.1];

/// The LoadBalancer Service `dev/url-analysis-lb` (port 8080 → the url-analysis pods).
#[derive(Clone)]
struct Lb {
    policy: &'static str,
    node_port: bool,
    source_ranges: &'static [&'static str],
    ingress: bool,
    external_ips: bool,
}

const LB: Lb = Lb {
    policy: "Cluster",
    node_port: true,
    source_ranges: &[],
    ingress: true,
    external_ips: false,
};

impl Lb {
    fn manifest(&self) -> String {
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
fn start(mode: Mode, lb: &Lb) -> Option<SeedLab> {
    let mut seed = SeedLab::start(mode, "Cluster")?;
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
    Some(seed)
}

/// Writes the Service and waits until every node has synced it.
fn set(seed: &mut SeedLab, lb: &Lb) {
    let before: Vec<usize> = NODES.iter().map(|(n, _)| seed.syncs(n)).collect();
    seed.manifests.put("lb.yaml", &lb.manifest());
    for ((node, _), n) in NODES.iter().zip(before) {
        seed.wait_synced(node, n + 1);
    }
}

fn url(ip: &str, port: u16) -> String {
    format!("http://{ip}:{port}/hello")
}

/// `ferry explain` for the packet, as JSON, with the lab's settings and the mode's backend.
fn explain(seed: &SeedLab, node: &str, from: &str, ip: &str, port: u16) -> Value {
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
fn assert_forwarded(
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
    assert_eq!(!v["masquerade"].is_null(), masquerade, "{v}");
}

/// The packet from `from` times out; `ferry explain` on `node` says `verdict`.
fn assert_timed_out(
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

fn client() -> (Host, &'static str) {
    (Host::default_client(), CLIENT_IP)
}

fn client2() -> (Host, &'static str) {
    (Host::client(CLIENT2), CLIENT2_IP)
}

fn load_balancer_ip_with_cluster_policy_is_masqueraded_and_node_ports_stay_off_it(mode: Mode) {
    let Some(seed) = start(mode, &LB) else { return };
    let (c, ip) = client();
    assert_forwarded(&seed, (&c, ip), NODE2, LB_NODE2, 8080, NODE2_IP);
    assert_forwarded(&seed, (&c, ip), NODE1, LB_NODE1, 8080, NODE1_IP);
    // ipMode: Proxy is the load balancer's job: Ferry leaves the packet alone (here it is
    // routed on to the LAN's dead end).
    assert_timed_out(&seed, (&c, ip), NODE2, LB_PROXY, 8080, "not-a-service");
    // The NodePort answers on the node's address, never on the load-balancer IP.
    assert_forwarded(&seed, (&c, ip), NODE2, NODE2_IP, LB_NODE_PORT, NODE2_IP);
    assert_timed_out(
        &seed,
        (&c, ip),
        NODE2,
        LB_NODE2,
        LB_NODE_PORT,
        "not-a-service",
    );
}

fn load_balancer_ip_with_local_policy_keeps_the_client_ip_and_drops_without_local_endpoint(
    mode: Mode,
) {
    let lb = Lb {
        policy: "Local",
        ..LB
    };
    let Some(seed) = start(mode, &lb) else { return };
    let (c, ip) = client();
    assert_forwarded(&seed, (&c, ip), NODE2, LB_NODE2, 8080, CLIENT_IP);
    assert_timed_out(&seed, (&c, ip), NODE1, LB_NODE1, 8080, "dropped");
    // The node's own traffic: short-circuited to the cluster-wide endpoints (masqueraded) in
    // iptables mode; dropped in nftables mode, whose filter-output checks `no-endpoint-services`
    // before DNAT (upstream's nftables layout).
    let n1 = (&Host::node(NODE1), NODE1_IP);
    match mode {
        Mode::Nftables => assert_timed_out(&seed, n1, NODE1, LB_NODE1, 8080, "dropped"),
        _ => assert_forwarded(&seed, n1, NODE1, LB_NODE1, 8080, NODE1_IP),
    }
}

fn source_ranges_admit_only_the_listed_clients(mode: Mode) {
    let lb = Lb {
        source_ranges: &["10.1.1.100/32"],
        ..LB
    };
    let Some(mut seed) = start(mode, &lb) else {
        return;
    };
    let ((c1, ip1), (c2, ip2)) = (client(), client2());
    assert_forwarded(&seed, (&c1, ip1), NODE2, LB_NODE2, 8080, NODE2_IP);
    assert_timed_out(&seed, (&c2, ip2), NODE2, LB_NODE2, 8080, "dropped");
    if mode == Mode::Nftables {
        // The kernel holds the firewall elements `ferry explain` relies on.
        let dir = seed.manifests.path().display().to_string();
        let to = format!("{LB_NODE2}:8080");
        let argv = [
            seed::FERRY,
            "explain",
            "--live",
            "--manifests",
            &dir,
            "--node",
            NODE2,
            "--from",
            CLIENT_IP,
            "--to",
            &to,
            "--cluster-cidr",
            "192.168.0.0/16",
        ];
        let out = seed.lab.exec(NODE2, argv).expect("ferry explain --live");
        assert!(out.contains("agrees with the compiled rules"), "{out}");
        assert!(
            out.contains("set firewall-allow element 203.0.113.10 . tcp . 8080 . 10.1.1.100"),
            "{out}"
        );
    }
    // NodePorts are not subject to loadBalancerSourceRanges (as upstream).
    assert_forwarded(&seed, (&c2, ip2), NODE2, NODE2_IP, LB_NODE_PORT, NODE2_IP);

    // A change of ranges takes effect at the next sync.
    let swapped = Lb {
        source_ranges: &["10.1.1.101/32"],
        ..LB
    };
    set(&mut seed, &swapped);
    assert_forwarded(&seed, (&c2, ip2), NODE2, LB_NODE2, 8080, NODE2_IP);
    assert_timed_out(&seed, (&c1, ip1), NODE2, LB_NODE2, 8080, "dropped");
}

fn allocate_load_balancer_node_ports_false_serves_the_load_balancer_ip_only(mode: Mode) {
    let lb = Lb {
        node_port: false,
        ..LB
    };
    let Some(seed) = start(mode, &lb) else { return };
    let (c, ip) = client();
    assert_forwarded(&seed, (&c, ip), NODE2, LB_NODE2, 8080, NODE2_IP);
    // No NodePort rule for the service, on any node.
    for (node, _) in NODES {
        let rules = match mode.iptables() {
            None => seed.lab.exec(
                node,
                ["nft", "list", "map", "ip", "ferry", "service-nodeports"],
            ),
            Some(prog) => seed
                .lab
                .exec(node, [format!("{prog}-save"), "-t".into(), "nat".into()]),
        }
        .expect("list the node's rules");
        let mine: Vec<&str> = rules
            .lines()
            .filter(|l| l.contains("dev/url-analysis-lb") && !l.contains("loadbalancer IP"))
            .filter(|l| l.contains("KUBE-NODEPORTS") || mode == Mode::Nftables)
            .collect();
        assert!(mine.is_empty(), "{node}: {mine:?}\n{rules}");
    }
}

fn external_ips_follow_the_external_traffic_policy(mode: Mode) {
    let lb = Lb {
        ingress: false,
        external_ips: true,
        ..LB
    };
    let Some(mut seed) = start(mode, &lb) else {
        return;
    };
    let (c, ip) = client();
    assert_forwarded(&seed, (&c, ip), NODE1, EXT_NODE1, 8080, NODE1_IP);
    assert_forwarded(&seed, (&c, ip), NODE2, EXT_NODE2, 8080, NODE2_IP);
    set(
        &mut seed,
        &Lb {
            policy: "Local",
            ..lb
        },
    );
    assert_forwarded(&seed, (&c, ip), NODE2, EXT_NODE2, 8080, CLIENT_IP);
    assert_timed_out(&seed, (&c, ip), NODE1, EXT_NODE1, 8080, "dropped");
}

fn node_ports_never_answer_on_localhost_and_route_localnet_stays_off(mode: Mode) {
    let Some(seed) = start(mode, &LB) else { return };
    for (node, node_ip) in NODES {
        for port in [seed::NODE_PORT, LB_NODE_PORT] {
            // Nothing listens on the node itself: refused at once, not DNATed.
            let got = seed.curl(&Host::node(node), &url("127.0.0.1", port));
            assert_eq!(got, CurlResult::Refused, "{node}: 127.0.0.1:{port}");
            let v = explain(&seed, node, "127.0.0.1", "127.0.0.1", port);
            assert_eq!(v["verdict"], "not-a-service", "{v}");
            // The same NodePort works on the node's address, from the node.
            let h = seed.hello(&Host::node(node), &url(node_ip, port));
            assert!(SERVERS.contains(&h.server_ip.as_str()), "{h:?}");
        }
        for dev in ["all", "default", "lo", "eth0"] {
            let key = format!("net.ipv4.conf.{dev}.route_localnet");
            let v = seed.lab.exec(node, ["sysctl", "-n", &key]).expect("sysctl");
            assert_eq!(v.trim(), "0", "{node}: {key}");
        }
    }
}

every_mode!(
    load_balancer_ip_with_cluster_policy_is_masqueraded_and_node_ports_stay_off_it,
    load_balancer_ip_with_local_policy_keeps_the_client_ip_and_drops_without_local_endpoint,
    source_ranges_admit_only_the_listed_clients,
    allocate_load_balancer_node_ports_false_serves_the_load_balancer_ip_only,
    external_ips_follow_the_external_traffic_policy,
    node_ports_never_answer_on_localhost_and_route_localnet_stays_off,
);
