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
#[path = "support/load_balancer.rs"]
mod lb;
#[path = "support/seed.rs"]
mod seed;

use ferry_lab::spec::{NODE1, NODE2};
use ferry_lab::{CurlResult, Host};

use lb::*;
use seed::{Mode, NODES};

fn load_balancer_ip_with_cluster_policy_is_masqueraded_and_node_ports_stay_off_it(mode: Mode) {
    let seed = start(mode, &LB);
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
    let seed = start(mode, &lb);
    let (c, ip) = client();
    assert_forwarded(&seed, (&c, ip), NODE2, LB_NODE2, 8080, CLIENT_IP);
    assert_timed_out(&seed, (&c, ip), NODE1, LB_NODE1, 8080, "dropped");
    // The node's own traffic: short-circuited to the cluster-wide endpoints (masqueraded) in
    // every mode; nftables mode checks `no-endpoint-services` on output after DNAT, as
    // upstream's kube-proxy does (kube_proxy_diff.rs found it).
    let n1 = (&Host::node(NODE1), NODE1_IP);
    assert_forwarded(&seed, n1, NODE1, LB_NODE1, 8080, NODE1_IP);
}

fn source_ranges_admit_only_the_listed_clients(mode: Mode) {
    let lb = Lb {
        source_ranges: &["10.1.1.100/32"],
        ..LB
    };
    let mut seed = start(mode, &lb);
    let ((c1, ip1), (c2, ip2)) = (client(), client2());
    assert_forwarded(&seed, (&c1, ip1), NODE2, LB_NODE2, 8080, NODE2_IP);
    assert_timed_out(&seed, (&c2, ip2), NODE2, LB_NODE2, 8080, "dropped");
    // The kernel holds the firewall objects `ferry explain` relies on.
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
        "--proxy-mode",
        mode.flag(),
    ];
    let out = seed.lab.exec(NODE2, argv).expect("ferry explain --live");
    assert!(out.contains("agrees with the compiled rules"), "{out}");
    let firewall = match mode {
        Mode::Nftables => "set firewall-allow element 203.0.113.10 . tcp . 8080 . 10.1.1.100",
        _ => "nat KUBE-SERVICES → KUBE-FW-",
    };
    assert!(out.contains(firewall), "{out}");
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
    let seed = start(mode, &lb);
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
    let mut seed = start(mode, &lb);
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

/// The kernel rules never open NodePorts on localhost; Ferry's userspace proxy serves them
/// where the mode's default says so (iptables mode), nftables mode leaves them closed.
fn node_ports_answer_on_localhost_only_through_the_proxy_and_route_localnet_stays_off(mode: Mode) {
    let seed = start(mode, &LB);
    let proxied = mode.iptables().is_some();
    for (node, node_ip) in NODES {
        for port in [seed::NODE_PORT, LB_NODE_PORT] {
            let v = explain(&seed, node, "127.0.0.1", "127.0.0.1", port);
            if proxied {
                let h = seed.hello(&Host::node(node), &url("127.0.0.1", port));
                assert!(SERVERS.contains(&h.server_ip.as_str()), "{h:?}");
                assert_eq!(h.client_ip, node_ip, "the proxy connects from the node");
                assert_eq!(v["verdict"], "forwarded", "{v}");
            } else {
                // Nothing listens on the node itself: refused at once, not DNATed.
                let got = seed.curl(&Host::node(node), &url("127.0.0.1", port));
                assert_eq!(got, CurlResult::Refused, "{node}: 127.0.0.1:{port}");
                assert_eq!(v["verdict"], "not-a-service", "{v}");
            }
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
    node_ports_answer_on_localhost_only_through_the_proxy_and_route_localnet_stays_off,
);
