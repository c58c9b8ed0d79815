//! The seed matrix (core issue §6): the same cases for every proxy mode.

use std::collections::BTreeSet;
use std::io::Write as _;

use ferry_lab::spec::{MASTER, NODE1, NODE2};
use ferry_lab::{http, CurlResult, Host};

use crate::seed::*;

#[path = "ipvs_seed.rs"]
mod ipvs_seed;

fn master_pod() -> Host {
    Host::pod(MASTER_POD.0)
}

/// Case 1: A pod on k8s-master → ClusterIP reaches both pods; ClientIp is the pod's own IP
/// (userspace mode: k8s-master's, whose proxy connects to the pods).
pub fn pod_to_cluster_ip_reaches_every_endpoint_without_snat(mode: Mode) {
    let seed = SeedLab::start(mode, "Cluster");
    let mut servers = BTreeSet::new();
    for _ in 0..mode.tries(30) {
        let h = seed.hello(&master_pod(), &cluster_url());
        let want = mode.peer(MASTER_POD.1, "10.1.1.12");
        assert_eq!(h.client_ip, want, "pod traffic keeps its source");
        servers.insert(h.server_ip);
    }
    assert_eq!(
        servers,
        BTreeSet::from([POD_A.1.to_owned(), POD_B.1.to_owned()])
    );
}

/// Case 2: The master host itself → ClusterIP works, masqueraded to a node address.
pub fn node_to_cluster_ip_works_and_is_masqueraded(mode: Mode) {
    let seed = SeedLab::start(mode, "Cluster");
    let h = seed.hello(&Host::node(MASTER), &cluster_url());
    assert_eq!(h.client_ip, "10.1.1.12");
}

/// Case 3: A pod reaching its own Service and landing on itself (hairpin) works, masqueraded
/// (userspace mode: every endpoint sees the node, itself or not).
pub fn hairpin_traffic_is_masqueraded(mode: Mode) {
    let seed = SeedLab::start(mode, "Cluster");
    let me = Host::pod(POD_A.0);
    let mut hit_self = 0;
    for _ in 0..mode.tries(30) {
        let h = seed.hello(&me, &cluster_url());
        if h.server_ip == POD_A.1 {
            hit_self += 1;
            assert_eq!(
                h.client_ip, "10.1.1.9",
                "hairpin is masqueraded to the node"
            );
        } else {
            let want = mode.peer(POD_A.1, "10.1.1.9");
            assert_eq!(h.client_ip, want, "pod → other pod keeps its source");
        }
    }
    assert!(hit_self > 0, "30 tries never landed on itself (p = 1e-9)");
}

/// Case 4: Client → every node's NodePort with Cluster policy works; SNAT to the receiving node.
pub fn cluster_policy_node_port_works_on_every_node_with_snat(setup: impl Into<Setup>) {
    let seed = SeedLab::start(setup, "Cluster");
    for (node, ip) in NODES {
        let h = seed.hello(&Host::default_client(), &node_port_url(ip));
        assert_eq!(
            h.client_ip, ip,
            "{node}: external traffic is masqueraded to the node"
        );
        assert!(h.server_ip == POD_A.1 || h.server_ip == POD_B.1);
    }
}

/// Case 5: Local policy: the node with pods keeps the client IP; a node without pods drops
/// (IPVS mode: its empty virtual server refuses, see [`Mode::no_local_endpoint`]). The
/// userspace mode restricts the endpoints the same way, but its proxy connects to them: they
/// see the node, not the client.
pub fn local_policy_keeps_client_ip_and_drops_where_no_local_endpoint(setup: impl Into<Setup>) {
    let setup = setup.into();
    let seed = SeedLab::start(setup, "Local");
    let h = seed.hello(&Host::default_client(), &node_port_url("10.1.1.9"));
    let want = setup.mode.peer("10.1.1.100", "10.1.1.9");
    assert_eq!(h.client_ip, want, "the real client IP");
    let r = seed.curl(&Host::default_client(), &node_port_url("10.1.1.17"));
    assert_eq!(
        r,
        setup.mode.no_local_endpoint(),
        "as in seed 004 (IPVS: refused)"
    );
}

/// Case 6: A pod on k8s-master → k8s-master's Local NodePort still works (short-circuit).
/// IPVS mode has no short-circuit (upstream's neither): the node's virtual server has only its
/// local endpoints, none here, so pods and the node itself are refused too.
pub fn local_policy_short_circuits_pod_traffic(mode: Mode) {
    let seed = SeedLab::start(mode, "Local");
    if mode == Mode::Ipvs {
        for from in [master_pod(), Host::node(MASTER)] {
            let r = seed.curl(&from, &node_port_url("10.1.1.12"));
            assert_eq!(
                r,
                CurlResult::Refused,
                "{from}: no short-circuit in IPVS mode"
            );
        }
        return;
    }
    let h = seed.hello(&master_pod(), &node_port_url("10.1.1.12"));
    assert_eq!(h.client_ip, mode.peer(MASTER_POD.1, "10.1.1.12"));
    let h = seed.hello(&Host::node(MASTER), &node_port_url("10.1.1.12"));
    assert_eq!(h.client_ip, "10.1.1.12", "node traffic is masqueraded");
}

/// Case 7: A Service with no endpoints: connection refused at once.
pub fn service_without_endpoints_refuses_connections(mode: Mode) {
    let seed = SeedLab::start(mode, "Cluster");
    let url = format!("http://{EMPTY_CLUSTER_IP}:80/hello");
    assert_eq!(seed.curl(&master_pod(), &url), CurlResult::Refused);
    assert_eq!(seed.curl(&Host::node(NODE1), &url), CurlResult::Refused);
}

/// Case 8: Readiness: a not-ready endpoint gets no traffic; back to ready restores it; deleting
/// the slice leaves no endpoints (refused).
pub fn readiness_changes_take_effect_without_restart(mode: Mode) {
    let mut seed = SeedLab::start(mode, "Cluster");
    seed.change(|m| m.endpoints[1].1 = false);
    for _ in 0..mode.tries(15) {
        assert_eq!(seed.hello(&master_pod(), &cluster_url()).server_ip, POD_A.1);
    }
    seed.change(|m| m.endpoints[1].1 = true);
    let servers: BTreeSet<String> = (0..mode.tries(30))
        .map(|_| seed.hello(&master_pod(), &cluster_url()).server_ip)
        .collect();
    assert_eq!(servers.len(), 2, "both endpoints serve again");
    seed.change(|m| m.with_slice = false);
    assert_eq!(
        seed.curl(&master_pod(), &cluster_url()),
        CurlResult::Refused
    );
}

/// Case 9: Restarting Ferry on k8s-node2 keeps an established connection alive. In the
/// userspace mode the connection lives in Ferry's proxy and ends with it (as upstream's
/// userspace proxier's did); the rules stay, and the restarted proxy listens on the same
/// proxy port (read back from them), so new connections work again.
pub fn restarting_ferry_keeps_established_connections(mode: Mode) {
    if mode == Mode::Userspace {
        return restarting_the_proxy_ends_its_connections_and_serves_new_ones();
    }
    let mut seed = SeedLab::start(mode, "Cluster");
    let addr = format!("10.1.1.9:{NODE_PORT}").parse().expect("addr");
    let mut conn = seed
        .lab
        .connect(&Host::default_client(), addr)
        .expect("connect");
    let first = http::get(&mut conn, "/hello").expect("first request");
    assert_eq!(first.status, 200);
    let ferry = seed.ferry(NODE2);
    ferry.stop().expect("stop ferry");
    ferry.restart().expect("restart ferry");
    seed.wait_synced(NODE2, 1);
    let second = http::get(&mut conn, "/hello").expect("same connection after restart");
    assert_eq!(second.status, 200);
    assert_eq!(
        Hello::parse(&first.body).server_ip,
        Hello::parse(&second.body).server_ip
    );
    let _ = conn.flush();
}

/// Case 9 in the userspace mode.
fn restarting_the_proxy_ends_its_connections_and_serves_new_ones() {
    let mut seed = SeedLab::start(Mode::Userspace, "Cluster");
    let addr = format!("10.1.1.9:{NODE_PORT}").parse().expect("addr");
    let mut conn = seed
        .lab
        .connect(&Host::default_client(), addr)
        .expect("connect");
    let first = http::get(&mut conn, "/hello").expect("first request");
    assert_eq!(first.status, 200);
    let before = seed.syncs(NODE2);
    let ferry = seed.ferry(NODE2);
    ferry.stop().expect("stop ferry");
    ferry.restart().expect("restart ferry");
    seed.wait_synced(NODE2, before + 1);
    assert!(
        http::get(&mut conn, "/hello").is_err(),
        "the proxied connection ended with the proxy"
    );
    seed.hello(&Host::default_client(), &node_port_url("10.1.1.9"));
    let set = seed.lab.exec(
        NODE2,
        ["nft", "-j", "list", "set", "ip", "ferry", "proxy-ports"],
    );
    let log = seed.ferry(NODE2).log();
    assert!(
        log.contains("proxy ports read back from the kernel"),
        "{set:?}\n{log}"
    );
}

/// The seed's curl table (seed 004), printed for the README walkthrough
/// (`cargo test -p ferry --test lab_nftables seed_curl_table -- --nocapture`).
pub fn seed_curl_table(mode: Mode) {
    for policy in ["Local", "Cluster"] {
        let seed = SeedLab::start(mode, policy);
        println!(
            "\nexternalTrafficPolicy: {policy} ({}), from the client 10.1.1.100:",
            mode.label()
        );
        for (node, ip) in NODES {
            let url = node_port_url(ip);
            let shown = match seed.curl(&Host::default_client(), &url) {
                CurlResult::Ok(body) => body.trim().to_owned(),
                CurlResult::TimedOut => {
                    format!("curl: (28) Connection to {ip} port {NODE_PORT} timed out")
                }
                CurlResult::Refused => format!(
                    "curl: (7) Failed to connect to {ip} port {NODE_PORT}: Connection refused"
                ),
                other => format!("{other:?}"),
            };
            println!("  [{node}] curl {ip}:{NODE_PORT}/hello\n    {shown}");
            let local_without_pods = policy == "Local" && node != NODE2;
            assert_eq!(
                !local_without_pods,
                shown.starts_with("ClientIp"),
                "{node}: {shown}"
            );
        }
    }
}

/// The seeds' commands (seeds 000 and 002) show what those documents show: prints them after
/// one request through node2's NodePort (`cargo test -p ferry --test lab_iptables_nft
/// seed_commands_show_the_seeds_chains -- --nocapture`). nftables mode: the table instead.
pub fn seed_commands_show_the_seeds_chains(mode: Mode) {
    if mode == Mode::Ipvs {
        return ipvs_seed::seed_commands_show_the_seeds_lines();
    }
    let seed = SeedLab::start(mode, "Cluster");
    seed.hello(&Host::default_client(), &node_port_url("10.1.1.9"));
    let Some(ipt) = mode.iptables() else {
        let table = seed
            .lab
            .exec(NODE2, ["nft", "list", "table", "ip", "ferry"])
            .expect("nft");
        let chain = match mode {
            Mode::Userspace => "chain portals-container {",
            _ => "chain services {",
        };
        assert!(table.contains(chain), "{table}");
        return;
    };
    let mut shown = String::new();
    let mut list = |args: &[&str]| -> String {
        let mut argv = vec![ipt];
        argv.extend_from_slice(args);
        let out = seed.lab.exec(NODE2, &argv).expect("iptables -L");
        shown.push_str(&format!("# {} {}\n{out}\n", "iptables", args.join(" ")));
        out
    };
    let services = list(&["-t", "nat", "-vnL", "KUBE-SERVICES"]);
    let last = services.lines().last().unwrap_or_default();
    assert!(
        last.contains("KUBE-NODEPORTS") && last.contains("ADDRTYPE match dst-type LOCAL"),
        "KUBE-NODEPORTS is the last rule:\n{services}"
    );
    let svc = services
        .split_whitespace()
        .find(|w| w.starts_with("KUBE-SVC-"))
        .expect("a KUBE-SVC- chain")
        .to_owned();
    let nodeports = list(&["-t", "nat", "-vnL", "KUBE-NODEPORTS"]);
    assert!(
        nodeports.contains("KUBE-EXT-") && nodeports.contains("dpt:32223"),
        "{nodeports}"
    );
    let svc_rules = list(&["-t", "nat", "-vnL", &svc]);
    assert!(
        svc_rules.contains("statistic mode random probability 0.50000000000"),
        "{svc_rules}"
    );
    let sep = svc_rules
        .split_whitespace()
        .find(|w| w.starts_with("KUBE-SEP-"))
        .expect("a KUBE-SEP- chain")
        .to_owned();
    let sep_rules = list(&["-t", "nat", "-vnL", &sep]);
    assert!(
        sep_rules.contains("KUBE-MARK-MASQ") && sep_rules.contains("DNAT"),
        "{sep_rules}"
    );
    let mark = list(&["-t", "nat", "-vnL", "KUBE-MARK-MASQ"]);
    assert!(mark.contains("MARK or 0x4000"), "{mark}");
    let post = list(&["-t", "nat", "-vnL", "KUBE-POSTROUTING"]);
    assert!(
        post.contains("MASQUERADE") && post.contains("random-fully"),
        "{post}"
    );
    let forward = list(&["-vnL", "KUBE-FORWARD"]);
    assert!(forward.contains("mark match 0x4000/0x4000"), "{forward}");
    println!("\n{}, on k8s-node2:\n{shown}", mode.label());
}

/// Bad input: an invalid edit of the Service is reported (file, object, field) and the last good
/// rules stay in the kernel; fixing it is picked up again.
pub fn an_invalid_edit_keeps_the_last_good_rules(mode: Mode) {
    let mut seed = SeedLab::start(mode, "Cluster");
    let broken = format!(
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: url-analysis\n  namespace: dev\nspec:\n  type: NodePort\n  clusterIP: {CLUSTER_IP}\n  ports:\n  - name: http\n    port: 8080\n    nodePort: 99999\n"
    );
    seed.manifests.put("service.yaml", &broken);
    seed.wait_logged("Service dev/url-analysis: spec.ports[0].nodePort");
    for (_, ip) in NODES {
        seed.hello(&Host::default_client(), &node_port_url(ip));
    }
    seed.hello(&master_pod(), &cluster_url());
    seed.change(|m| m.policy = "Local");
    assert_eq!(
        seed.curl(&Host::default_client(), &node_port_url("10.1.1.17")),
        mode.no_local_endpoint()
    );
}

#[allow(unused_imports, reason = "lab_kube runs only some cases")]
pub use crate::ownership::*;
