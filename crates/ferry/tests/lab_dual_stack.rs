//! Dual-stack with real packets: IPv6 Services (ClusterIP, NodePort with both policies, no
//! endpoints) and a dual-stack Service next to the seed's IPv4 ones, in every proxy mode.
//!
//! The seed lab gets an IPv6 LAN (`fd00:10:1::/64`), IPv6 pod prefixes per node
//! (`fd00:10:244:<n>::/64`) and IPv6 addresses for its pods ([`ferry_lab::Lab::enable_ipv6`]);
//! the pods' echo servers listen on `[::]`. The Nodes in the manifests get their IPv6
//! InternalIPs and pod CIDRs, and every Ferry runs with `--cluster-cidr` of both families.

#[macro_use]
#[path = "support/modes.rs"]
mod modes;
#[path = "support/seed.rs"]
mod seed;

use std::collections::BTreeSet;
use std::net::Ipv6Addr;

use ferry_lab::spec::{CLIENT, MASTER, NODE1, NODE2};
use ferry_lab::{CurlResult, Host, PodProgram};
use seed::{Hello, Mode, SeedLab, FERRY, MASTER_POD, NODES, POD_A, POD_B};

const V6_CLUSTER_IP: &str = "fd00:10:96::80";
const V6_NODE_PORT: u16 = 32280;
const V6_LOCAL_NODE_PORT: u16 = 32281;
const DUAL_V4: &str = "10.96.0.90";
const DUAL_V6: &str = "fd00:10:96::90";
const V6_EMPTY: &str = "fd00:10:96::50";
/// An IPv6 NodePort with `sessionAffinity: ClientIP`.
const V6_STICKY: &str = "fd00:10:96::82";
const V6_STICKY_NODE_PORT: u16 = 32282;
/// Both families' cluster CIDRs, as kube-proxy's comma-separated `--cluster-cidr`.
const CIDRS: &str = "192.168.0.0/16,fd00:10:244::/48";

/// IPv6 pod addresses: node2's pods in `fd00:10:244:3::/64`, the master's in `…:1::/64`.
const POD_A6: &str = "fd00:10:244:3::166";
const POD_B6: &str = "fd00:10:244:3::168";
const MASTER_POD6: &str = "fd00:10:244:1::200";

/// The Nodes with both families, as a dual-stack cluster's API server holds them.
fn nodes_yaml(lab: &ferry_lab::Lab) -> String {
    let mut out = String::new();
    for ((name, ip), cidr) in NODES.iter().zip([
        "192.168.235.192/26",
        "192.168.36.64/26",
        "192.168.169.128/26",
    ]) {
        let ip6 = lab.ipv6_of(name).expect("node IPv6");
        let cidr6 = lab.pod_prefix_v6(name).expect("node pod prefix");
        out.push_str(&format!(
            "---\napiVersion: v1\nkind: Node\nmetadata:\n  name: {name}\nspec:\n  podCIDR: {cidr}\n  podCIDRs: [\"{cidr}\", \"{cidr6}\"]\nstatus:\n  addresses:\n  - type: InternalIP\n    address: {ip}\n  - type: InternalIP\n    address: \"{ip6}\"\n"
        ));
    }
    out
}

fn service(name: &str, spec: &str) -> String {
    format!("---\napiVersion: v1\nkind: Service\nmetadata:\n  name: {name}\n  namespace: dev\nspec:\n{spec}  ports:\n  - name: http\n    port: 8080\n    targetPort: 56010\n")
}

fn slice(service: &str, family: &str, ips: &[&str]) -> String {
    let eps: String = ips
        .iter()
        .map(|ip| format!("- addresses: [\"{ip}\"]\n  nodeName: {NODE2}\n"))
        .collect();
    format!("---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: {service}-{}\n  namespace: dev\n  labels:\n    kubernetes.io/service-name: {service}\naddressType: {family}\nports:\n- name: http\n  port: 56010\n  protocol: TCP\nendpoints:\n{eps}", family.to_lowercase())
}

/// The IPv6 and dual-stack Services, with the seed's two pods as endpoints.
fn services_yaml() -> String {
    let pods4 = [POD_A.1, POD_B.1];
    let pods6 = [POD_A6, POD_B6];
    let node_port = |port: u16| {
        format!("  - name: http\n    port: 8080\n    targetPort: 56010\n    nodePort: {port}\n")
    };
    let mut out = String::new();
    // An IPv6-only NodePort, Cluster policy (its spec's ports replace the helper's).
    out.push_str(&format!(
        "---\napiVersion: v1\nkind: Service\nmetadata:\n  name: web6\n  namespace: dev\nspec:\n  type: NodePort\n  ipFamilyPolicy: SingleStack\n  ipFamilies: [IPv6]\n  clusterIP: \"{V6_CLUSTER_IP}\"\n  ports:\n{}",
        node_port(V6_NODE_PORT)
    ));
    out.push_str(&slice("web6", "IPv6", &pods6));
    out.push_str(&format!(
        "---\napiVersion: v1\nkind: Service\nmetadata:\n  name: web6-local\n  namespace: dev\nspec:\n  type: NodePort\n  externalTrafficPolicy: Local\n  ipFamilies: [IPv6]\n  clusterIP: \"fd00:10:96::81\"\n  ports:\n{}",
        node_port(V6_LOCAL_NODE_PORT)
    ));
    out.push_str(&slice("web6-local", "IPv6", &pods6));
    out.push_str(&service(
        "dual",
        &format!("  ipFamilyPolicy: RequireDualStack\n  ipFamilies: [IPv4, IPv6]\n  clusterIPs: [\"{DUAL_V4}\", \"{DUAL_V6}\"]\n"),
    ));
    out.push_str(&slice("dual", "IPv4", &pods4));
    out.push_str(&slice("dual", "IPv6", &pods6));
    out.push_str(&format!(
        "---\napiVersion: v1\nkind: Service\nmetadata:\n  name: sticky6\n  namespace: dev\nspec:\n  type: NodePort\n  ipFamilies: [IPv6]\n  clusterIP: \"{V6_STICKY}\"\n  sessionAffinity: ClientIP\n  sessionAffinityConfig:\n    clientIP:\n      timeoutSeconds: 600\n  ports:\n{}",
        node_port(V6_STICKY_NODE_PORT)
    ));
    out.push_str(&slice("sticky6", "IPv6", &pods6));
    out.push_str(&service(
        "empty6",
        &format!("  ipFamilies: [IPv6]\n  clusterIP: \"{V6_EMPTY}\"\n"),
    ));
    out
}

/// The seed lab with IPv6 everywhere, the manifests above, and every Ferry synced with them.
fn dual_stack_lab(mode: Mode) -> SeedLab {
    let mut seed = SeedLab::start_with(mode, "Cluster", &["--cluster-cidr", CIDRS]);
    seed.lab.enable_ipv6().expect("enable IPv6 in the lab");
    let program = PodProgram::ferry(FERRY);
    for ((pod, _), ip6) in [(POD_A, POD_A6), (POD_B, POD_B6), (MASTER_POD, MASTER_POD6)] {
        let ip6: Ipv6Addr = ip6.parse().expect("ip");
        seed.lab.add_pod_ipv6(pod, ip6).expect("pod IPv6");
        seed.lab
            .start_dual_stack_pod_server(pod, 56010, &program)
            .expect("dual-stack echo server");
    }
    let before: Vec<usize> = NODES.iter().map(|(n, _)| seed.syncs(n)).collect();
    let nodes = nodes_yaml(&seed.lab);
    seed.manifests.put("nodes.yaml", &nodes);
    seed.manifests.put("dual-stack.yaml", &services_yaml());
    // Two files: Ferry may sync each on its own.
    for ((node, _), n) in NODES.iter().zip(before) {
        seed.wait_settled(node, n + 1);
    }
    seed
}

/// What `ferry explain` predicts on `node` for `from` → `to:port` (verdict word, masqueraded),
/// from the lab's own manifests and flags: it must agree with the real packets.
fn explain(seed: &SeedLab, node: &str, from: &str, to: &str, port: u16) -> (String, bool) {
    let dir = seed.manifests.path().display().to_string();
    let to = std::net::SocketAddr::new(to.parse().expect("ip"), port).to_string();
    let out = std::process::Command::new(FERRY)
        .args([
            "explain",
            "--manifests",
            &dir,
            "--node",
            node,
            "--from",
            from,
        ])
        .args(["--to", &to, "--cluster-cidr", CIDRS, "--output", "json"])
        .args(["--proxy-mode", seed.mode.flag()])
        .output()
        .expect("run ferry explain");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let verdict = v["verdict"].as_str().unwrap_or_default().to_owned();
    (verdict, v["masquerade"] == "yes")
}

fn url(ip: &str, port: u16) -> String {
    if ip.contains(':') {
        format!("http://[{ip}]:{port}/hello")
    } else {
        format!("http://{ip}:{port}/hello")
    }
}

/// Asks until both pods answered (at most 40 times); returns the answers.
fn until_both_pods(seed: &SeedLab, from: &Host, url: &str) -> Vec<Hello> {
    let mut seen = BTreeSet::new();
    let mut answers = Vec::new();
    for _ in 0..40 {
        let h = seed.hello(from, url);
        seen.insert(h.server_name.clone());
        answers.push(h);
        if seen.len() == 2 {
            break;
        }
    }
    assert_eq!(
        seen,
        BTreeSet::from([POD_A.0.to_owned(), POD_B.0.to_owned()]),
        "{url} from {from:?}: both pods must answer"
    );
    answers
}

fn ipv6_cluster_ip_from_a_pod_reaches_both_pods_with_the_pod_address(mode: Mode) {
    let seed = dual_stack_lab(mode);
    let from = Host::pod(MASTER_POD.0);
    for h in until_both_pods(&seed, &from, &url(V6_CLUSTER_IP, 8080)) {
        assert_eq!(h.client_ip, MASTER_POD6, "{h:?}");
        assert!([POD_A6, POD_B6].contains(&h.server_ip.as_str()), "{h:?}");
    }
    let predicted = explain(&seed, MASTER, MASTER_POD6, V6_CLUSTER_IP, 8080);
    assert_eq!(predicted, ("forwarded".to_owned(), false));
}

fn ipv6_node_port_masquerades_with_cluster_and_keeps_the_client_with_local(mode: Mode) {
    let seed = dual_stack_lab(mode);
    let client = Host::client(CLIENT);
    let client6 = seed.lab.ipv6_of(CLIENT).expect("client IPv6").to_string();
    // Cluster policy on a node without endpoints: SNAT to that node's IPv6 address.
    let master6 = seed.lab.ipv6_of(MASTER).expect("master IPv6").to_string();
    for h in until_both_pods(&seed, &client, &url(&master6, V6_NODE_PORT)) {
        assert_eq!(h.client_ip, master6, "{h:?}");
    }
    // Local policy on the node with the pods: the client's own address reaches the pod.
    let node2 = seed.lab.ipv6_of(NODE2).expect("node2 IPv6").to_string();
    for h in until_both_pods(&seed, &client, &url(&node2, V6_LOCAL_NODE_PORT)) {
        assert_eq!(h.client_ip, client6, "{h:?}");
    }
    let cluster = explain(&seed, MASTER, &client6, &master6, V6_NODE_PORT);
    assert_eq!(cluster, ("forwarded".to_owned(), true));
    let local = explain(&seed, NODE2, &client6, &node2, V6_LOCAL_NODE_PORT);
    assert_eq!(local, ("forwarded".to_owned(), false));
}

fn dual_stack_service_answers_on_both_cluster_ips(mode: Mode) {
    let seed = dual_stack_lab(mode);
    let from = Host::pod(MASTER_POD.0);
    for h in until_both_pods(&seed, &from, &url(DUAL_V4, 8080)) {
        assert_eq!(h.client_ip, MASTER_POD.1, "{h:?}");
    }
    for h in until_both_pods(&seed, &from, &url(DUAL_V6, 8080)) {
        assert_eq!(h.client_ip, MASTER_POD6, "{h:?}");
    }
    // The seed's IPv4-only Service is untouched by the IPv6 rules.
    let h = seed.hello(&from, &seed::cluster_url());
    assert_eq!(h.client_ip, MASTER_POD.1, "{h:?}");
}

fn ipv6_service_without_endpoints_is_refused_at_once(mode: Mode) {
    let seed = dual_stack_lab(mode);
    for from in [Host::pod(MASTER_POD.0), Host::node(NODE1)] {
        let got = seed.curl(&from, &url(V6_EMPTY, 8080));
        assert_eq!(got, CurlResult::Refused, "{from:?}\n{}", seed.logs());
    }
    let predicted = explain(&seed, MASTER, MASTER_POD6, V6_EMPTY, 8080);
    assert_eq!(predicted.0, "rejected");
}

fn node_port_answers_on_ipv6_loopback_only_through_the_proxy(mode: Mode) {
    let seed = dual_stack_lab(mode);
    let node2 = Host::node(NODE2);
    // The same NodePort answers on the node's own address …
    let own = seed.lab.ipv6_of(NODE2).expect("node2 IPv6").to_string();
    assert!(seed.curl(&node2, &url(&own, V6_NODE_PORT)).is_ok());
    // … and on ::1 never by the kernel rules: Ferry's userspace proxy listens there in
    // iptables mode (its default), nothing does in nftables mode (the kernel refuses).
    let got = seed.curl(&node2, &url("::1", V6_NODE_PORT));
    let predicted = explain(&seed, NODE2, "::1", "::1", V6_NODE_PORT);
    if mode.iptables().is_some() {
        assert!(got.is_ok(), "{got:?}\n{}", seed.logs());
        assert_eq!(predicted.0, "forwarded");
    } else {
        assert_eq!(got, CurlResult::Refused, "{}", seed.logs());
        assert_eq!(predicted.0, "not-a-service");
    }
}

fn ipv6_endpoint_changes_take_effect_without_a_restart(mode: Mode) {
    let mut seed = dual_stack_lab(mode);
    let from = Host::pod(MASTER_POD.0);
    until_both_pods(&seed, &from, &url(V6_CLUSTER_IP, 8080));
    // POD_B's IPv6 endpoint of web6 goes away: only POD_A answers on the IPv6 ClusterIP,
    // while the dual-stack Service keeps both pods in both families.
    let before: Vec<usize> = NODES.iter().map(|(n, _)| seed.syncs(n)).collect();
    let edited = services_yaml().replacen(
        &slice("web6", "IPv6", &[POD_A6, POD_B6]),
        &slice("web6", "IPv6", &[POD_A6]),
        1,
    );
    assert_ne!(edited, services_yaml());
    seed.manifests.put("dual-stack.yaml", &edited);
    for ((node, _), n) in NODES.iter().zip(before) {
        seed.wait_synced(node, n + 1);
    }
    for _ in 0..10 {
        let h = seed.hello(&from, &url(V6_CLUSTER_IP, 8080));
        assert_eq!(h.server_ip, POD_A6, "{h:?}");
    }
    until_both_pods(&seed, &from, &url(DUAL_V6, 8080));
}

/// `n` requests; all must reach the same pod, whose IPv6 address is returned.
fn sticks(seed: &SeedLab, from: &Host, url: &str, n: usize) -> String {
    let first = seed.hello(from, url).server_ip;
    assert!(first == POD_A6 || first == POD_B6, "{first}");
    for i in 1..n {
        let h = seed.hello(from, url);
        assert_eq!(
            h.server_ip, first,
            "{from:?} → {url}: request {i} left its pod"
        );
    }
    first
}

/// The endpoint the kernel pinned `client` to on `node`: nftables, from the `ip6 ferry` pin
/// map `map`; iptables, from the `ip6tables` `recent` list holding the client (one per
/// `KUBE-SEP-` chain, whose DNAT names the endpoint).
fn pinned_to(seed: &SeedLab, node: &str, map: &str, client: &str) -> Option<String> {
    match seed.mode.iptables() {
        None => {
            let listed = seed
                .lab
                .exec(node, ["nft", "list", "map", "ip6", "ferry", map])
                .expect("nft list map");
            // `… . fd00:10:1::5 timeout 10m expires 9m59s : fd00:10:244:3::166 . 56010`
            let line = listed
                .lines()
                .find(|l| l.contains(&format!(" . {client} timeout")))?;
            let value = line.rsplit(" : ").next()?;
            Some(value.split(' ').next()?.to_owned())
        }
        Some(iptables) => {
            let lists = seed
                .lab
                .exec(
                    node,
                    ["sh", "-c", "grep -H . /proc/net/xt_recent/* || true"],
                )
                .expect("read xt_recent");
            // xt_recent prints IPv6 sources in full (`fd00:0010:0001:0000:…`): compare addresses.
            let client: std::net::IpAddr = client.parse().expect("client address");
            let chain = lists.lines().find_map(|l| {
                let (path, entry) = l.split_once(":src=")?;
                let src: std::net::IpAddr = entry.split(' ').next()?.parse().ok()?;
                (src == client).then(|| path.rsplit('/').next())?
            })?;
            let save = seed
                .lab
                .exec(
                    node,
                    [
                        format!("{}-save", iptables.replacen("iptables", "ip6tables", 1)),
                        "-t".into(),
                        "nat".into(),
                    ],
                )
                .expect("ip6tables-save");
            let dnat = save.lines().find(|l| {
                l.starts_with(&format!("-A {chain} ")) && l.contains("--to-destination")
            })?;
            let to = dnat.split("--to-destination [").nth(1)?;
            Some(to.split(']').next()?.to_owned())
        }
    }
}

/// IPv6 session affinity: an outside client (through the NodePort) and a pod (through the
/// ClusterIP) each keep reaching one pod, and the kernel's own affinity state on the node that
/// DNATed them names that pod for that client.
fn ipv6_session_affinity_pins_each_client_to_one_pod(mode: Mode) {
    let seed = dual_stack_lab(mode);
    let client = Host::client(CLIENT);
    let client6 = seed.lab.ipv6_of(CLIENT).expect("client IPv6").to_string();
    let node1 = seed.lab.ipv6_of(NODE1).expect("node1 IPv6").to_string();
    let pod = sticks(&seed, &client, &url(&node1, V6_STICKY_NODE_PORT), 12);
    let pinned = pinned_to(&seed, NODE1, "nodeport-affinity", &client6);
    assert_eq!(pinned.as_deref(), Some(pod.as_str()), "{}", seed.logs());
    let from = Host::pod(MASTER_POD.0);
    let pod = sticks(&seed, &from, &url(V6_STICKY, 8080), 12);
    let pinned = pinned_to(&seed, MASTER, "affinity", MASTER_POD6);
    assert_eq!(pinned.as_deref(), Some(pod.as_str()), "{}", seed.logs());
}

every_mode!(
    ipv6_session_affinity_pins_each_client_to_one_pod,
    ipv6_endpoint_changes_take_effect_without_a_restart,
    ipv6_cluster_ip_from_a_pod_reaches_both_pods_with_the_pod_address,
    ipv6_node_port_masquerades_with_cluster_and_keeps_the_client_with_local,
    dual_stack_service_answers_on_both_cluster_ips,
    ipv6_service_without_endpoints_is_refused_at_once,
    node_port_answers_on_ipv6_loopback_only_through_the_proxy,
);
