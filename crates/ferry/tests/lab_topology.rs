//! Endpoint selection with real packets, in every proxy mode (issue 5): topology hints
//! (`PreferClose` zone hints, `PreferSameNode` node hints), the serving-and-terminating
//! fallback during a rolling update, and `internalTrafficPolicy: Local`. Needs root (skips
//! otherwise).
//!
//! The lab's nodes carry zone labels (`seed::ZONES`: k8s-master zone-a, k8s-node1 zone-c,
//! k8s-node2 zone-b). Endpoints are the seed's echo pods: `POD_A`, `POD_B` on k8s-node2 and
//! `MASTER_POD` on k8s-master. "Only X" is asserted over 20 requests (a wrong rule would send
//! each one elsewhere with probability ≥ 1/2); "every endpoint" waits for each to answer,
//! within 60 requests (a correct rule misses one with probability 2^-59).

#[macro_use]
#[path = "support/modes.rs"]
mod modes;
#[path = "support/seed.rs"]
mod seed;
#[path = "support/topology.rs"]
mod topology;

use std::collections::BTreeSet;
use std::net::Ipv4Addr;

use ferry_lab::spec::{MASTER, NODE1, NODE2};
use ferry_lab::{CurlResult, Host};

use seed::*;
use topology::{ep, service, Ep};

/// A pod on k8s-master (zone-a) that only sends: a client that is no endpoint.
const ZONE_A_CLIENT: (&str, &str) = ("zone-a-client", "192.168.235.201");

fn url(cluster_ip: &str) -> String {
    format!("http://{cluster_ip}:8080/hello")
}

/// The endpoints that answered 20 requests from `from`.
fn answered(seed: &SeedLab, from: &Host, url: &str) -> BTreeSet<String> {
    (0..20).map(|_| seed.hello(from, url).server_ip).collect()
}

/// Asserts that every request from `from` reached `only`.
fn assert_only(seed: &SeedLab, from: &Host, url: &str, only: &str, why: &str) {
    assert_eq!(
        answered(seed, from, url),
        BTreeSet::from([only.to_owned()]),
        "{from} → {url}: {why}"
    );
}

/// Asserts that requests from `from` reach every one of `all` (and nothing else).
fn assert_every(seed: &SeedLab, from: &Host, url: &str, all: &[&str], why: &str) {
    let want: BTreeSet<String> = all.iter().map(|s| (*s).to_owned()).collect();
    let mut seen = BTreeSet::new();
    for _ in 0..60 {
        seen.insert(seed.hello(from, url).server_ip);
        if seen == want {
            return;
        }
        assert!(
            seen.is_subset(&want),
            "{from} → {url}: reached {seen:?}; {why}"
        );
    }
    panic!("{from} → {url}: only {seen:?} answered 60 requests; {why}");
}

/// What `ferry explain` predicts for the same manifests: the verdict line.
fn explain_verdict(seed: &SeedLab, node: &str, from: &str, to: &str) -> String {
    let out = std::process::Command::new(FERRY)
        .args(["explain", "--manifests"])
        .arg(seed.manifests.path())
        .args(["--node", node, "--from", from, "--to", to])
        .args([
            "--cluster-cidr",
            "192.168.0.0/16",
            "--proxy-mode",
            seed.mode.flag(),
        ])
        .output()
        .expect("run ferry explain");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.lines()
        .find_map(|l| l.strip_prefix("verdict: "))
        .unwrap_or_else(|| {
            panic!(
                "no verdict in:\n{text}{}",
                String::from_utf8_lossy(&out.stderr)
            )
        })
        .to_owned()
}

fn start(setup: impl Into<Setup>) -> SeedLab {
    let mut seed = SeedLab::start(setup, "Cluster");
    seed.lab
        .add_pod(
            MASTER,
            ZONE_A_CLIENT.0,
            ZONE_A_CLIENT.1.parse::<Ipv4Addr>().expect("ip"),
        )
        .expect("client pod on k8s-master");
    seed
}

const ZONAL_IP: &str = "10.96.0.60";

/// (1) Zone hints (`PreferClose`): clients reach only their zone's endpoint; a zone no
/// endpoint is hinted for, or one endpoint without a hint, means every endpoint. Node hints
/// (`PreferSameNode`) keep traffic on the client's node where an endpoint is hinted for it.
fn prefer_close_keeps_traffic_in_the_zone(setup: impl Into<Setup>) {
    let mut seed = start(setup);
    let zone_a = Host::pod(ZONE_A_CLIENT.0);
    let zone_b = Host::pod(POD_B.0);
    let zone_c = Host::node(NODE1);
    let u = url(ZONAL_IP);
    let hinted = [
        ep(MASTER_POD, MASTER).zones(&["zone-a"]),
        ep(POD_A, NODE2).zones(&["zone-b"]),
    ];
    let close = "  trafficDistribution: PreferClose\n";
    seed.apply(
        "zonal.yaml",
        &service("zonal", ZONAL_IP, close, None, &hinted),
    );
    assert_only(&seed, &zone_a, &u, MASTER_POD.1, "zone-a's hint");
    assert_only(&seed, &zone_b, &u, POD_A.1, "zone-b's hint");
    let to = format!("{ZONAL_IP}:8080");
    assert_eq!(
        explain_verdict(&seed, MASTER, ZONE_A_CLIENT.1, &to),
        format!("FORWARDED to one of {}:56010", MASTER_POD.1),
        "ferry explain predicts what the packets did"
    );
    assert_eq!(
        explain_verdict(&seed, NODE2, POD_B.1, &to),
        format!("FORWARDED to one of {}:56010", POD_A.1)
    );
    assert_every(
        &seed,
        &zone_c,
        &u,
        &[MASTER_POD.1, POD_A.1],
        "no endpoint is hinted for zone-c",
    );

    let one_without = [hinted[0], ep(POD_A, NODE2)];
    seed.apply(
        "zonal.yaml",
        &service("zonal", ZONAL_IP, close, None, &one_without),
    );
    assert_every(
        &seed,
        &zone_a,
        &u,
        &[MASTER_POD.1, POD_A.1],
        "one endpoint has no hint, so hints are ignored",
    );

    // PreferSameNode, as the controller writes it: node hints plus zone hints. The zone hints
    // here name both zones, so only the node hints can narrow anything.
    let same_node = [
        ep(MASTER_POD, MASTER)
            .zones(&["zone-a", "zone-b"])
            .nodes(&[MASTER]),
        ep(POD_A, NODE2)
            .zones(&["zone-a", "zone-b"])
            .nodes(&[NODE2]),
    ];
    let spec = "  trafficDistribution: PreferSameNode\n";
    seed.apply(
        "zonal.yaml",
        &service("zonal", ZONAL_IP, spec, None, &same_node),
    );
    assert_only(
        &seed,
        &zone_b,
        &u,
        POD_A.1,
        "the endpoint hinted for k8s-node2",
    );
    assert_only(
        &seed,
        &zone_a,
        &u,
        MASTER_POD.1,
        "the endpoint hinted for k8s-master",
    );
    assert_every(
        &seed,
        &zone_c,
        &u,
        &[MASTER_POD.1, POD_A.1],
        "no node or zone hint for k8s-node1 / zone-c",
    );
}

const ROLLING_IP: &str = "10.96.0.61";
const ROLLING_NODE_PORT: u16 = 30061;

/// (2) A rolling update: the old pod (on k8s-node2) terminates while the new one (on
/// k8s-master) is not ready yet, so the terminating pod keeps serving; once the new pod is
/// ready only it gets new connections. The same fallback works per set: the Local NodePort of
/// k8s-node2 keeps using its own terminating pod even after the new pod elsewhere is ready.
fn terminating_endpoints_serve_during_a_rolling_update(mode: Mode) {
    let mut seed = start(mode);
    let client = Host::node(NODE1);
    let outside = Host::default_client();
    let u = url(ROLLING_IP);
    let node2_port = format!("http://10.1.1.9:{ROLLING_NODE_PORT}/hello");
    let spec = "  externalTrafficPolicy: Local\n";
    let write = |seed: &mut SeedLab, eps: &[Ep]| {
        let text = service("rolling", ROLLING_IP, spec, Some(ROLLING_NODE_PORT), eps);
        seed.apply("rolling.yaml", &text);
    };
    let old = ep(POD_A, NODE2);
    let new = ep(MASTER_POD, MASTER);

    write(&mut seed, &[old, new.starting()]);
    assert_only(
        &seed,
        &client,
        &u,
        POD_A.1,
        "the old pod is the only ready one",
    );

    write(&mut seed, &[old.terminating(), new.starting()]);
    assert_only(
        &seed,
        &client,
        &u,
        POD_A.1,
        "no ready endpoint: the serving terminating pod is the fallback",
    );
    assert_only(
        &seed,
        &outside,
        &node2_port,
        POD_A.1,
        "Local policy: k8s-node2's own terminating pod",
    );

    write(&mut seed, &[old.terminating(), new]);
    assert_only(
        &seed,
        &client,
        &u,
        MASTER_POD.1,
        "the new pod is ready: no fallback",
    );
    assert_only(
        &seed,
        &outside,
        &node2_port,
        POD_A.1,
        "Local policy: k8s-node2 has no ready pod of its own, so still its terminating one",
    );

    write(&mut seed, &[new]);
    assert_only(&seed, &client, &u, MASTER_POD.1, "the old pod is gone");
    assert_eq!(
        seed.curl(&outside, &node2_port),
        CurlResult::TimedOut,
        "Local policy without any endpoint on k8s-node2: dropped"
    );
}

const NODE_LOCAL_IP: &str = "10.96.0.62";

/// (3) `internalTrafficPolicy: Local`: ClusterIP traffic from a node without a local endpoint
/// is dropped (the client times out); from a node with one it reaches only that one.
fn internal_traffic_policy_local_keeps_cluster_ip_traffic_on_the_node(mode: Mode) {
    let mut seed = start(mode);
    let u = url(NODE_LOCAL_IP);
    let spec = "  internalTrafficPolicy: Local\n";
    let eps = [ep(POD_A, NODE2), ep(MASTER_POD, MASTER)];
    seed.apply(
        "node-local.yaml",
        &service("node-local", NODE_LOCAL_IP, spec, None, &eps),
    );
    assert_eq!(
        seed.curl(&Host::node(NODE1), &u),
        CurlResult::TimedOut,
        "k8s-node1 has no endpoint of its own"
    );
    assert_only(
        &seed,
        &Host::pod(POD_B.0),
        &u,
        POD_A.1,
        "k8s-node2's endpoint",
    );
    assert_only(
        &seed,
        &Host::pod(ZONE_A_CLIENT.0),
        &u,
        MASTER_POD.1,
        "k8s-master's endpoint",
    );
    assert_only(
        &seed,
        &Host::node(MASTER),
        &u,
        MASTER_POD.1,
        "the node itself is also internal traffic",
    );
}

/// The hints and the zone labels also arrive through the Kubernetes API source.
#[test]
#[ignore = "needs root: network namespaces"]
fn prefer_close_from_the_kube_api() {
    prefer_close_keeps_traffic_in_the_zone(Mode::Nftables.with_api());
}

every_mode!(
    prefer_close_keeps_traffic_in_the_zone,
    terminating_endpoints_serve_during_a_rolling_update,
    internal_traffic_policy_local_keeps_cluster_ip_traffic_on_the_node,
);
