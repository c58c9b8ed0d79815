//! ServiceCIDRs from a real API server (the release pinned in `lab/k8s/`): the `kubernetes`
//! ServiceCIDR it makes from `--service-cluster-ip-range`, and one added with kubectl, reach
//! nftables mode's `cluster-ips-check` through Ferry's watch (as `deploy/`'s ServiceAccount),
//! and new connections to unallocated addresses inside them are dropped on the node instead
//! of being routed off it.
//!
//! Needs root and the Kubernetes binaries, as `kube_real.rs` (without them it prints
//! `skipped: …` and passes).

#[path = "support/real_cluster.rs"]
mod real_cluster;
#[path = "support/seed.rs"]
mod seed;

use std::time::{Duration, Instant};

use ferry_lab::spec::MASTER;
use ferry_lab::{CurlResult, Host, LabProcess};
use real_cluster::{seed_objects, RealCluster};
use seed::{cluster_url, FERRY, POD_A, POD_B};

/// Inside the API server's range (10.96.0.0/12), held by no Service.
const UNALLOCATED: &str = "10.96.0.99";
/// Outside it, until a second ServiceCIDR (10.120.0.0/16, not adjacent: nft would print the
/// two merged into one range) is created.
const LATER: &str = "10.120.0.99";
const CLIENT_IP: &str = "10.1.1.100";

fn url(ip: &str) -> String {
    format!("http://{ip}:8080/hello")
}

/// k8s-master routes `ip` to the lab's client, which answers on it.
fn route_beyond_the_node(rc: &RealCluster, ip: &str) -> LabProcess {
    let client = Host::default_client();
    let out = rc
        .lab
        .exec_in(
            &client,
            ["ip", "addr", "add", &format!("{ip}/32"), "dev", "lo"],
        )
        .expect("ip addr add");
    assert!(out.status.success(), "{out:?}");
    rc.lab
        .exec(
            MASTER,
            ["ip", "route", "add", &format!("{ip}/32"), "via", CLIENT_IP],
        )
        .expect("ip route add");
    let listen = format!("{ip}:8080");
    rc.lab
        .spawn_in(
            &client,
            FERRY,
            ["lab-pod", "--name", "beyond", "--listen", &listen],
        )
        .expect("serve on the client")
}

/// Waits until k8s-master's `cluster-ips-check` chain holds `text`.
fn wait_chain(rc: &RealCluster, text: &str) {
    let deadline = Instant::now() + ferry_lab::scaled(Duration::from_secs(30));
    loop {
        let chain = rc
            .lab
            .exec(
                MASTER,
                ["nft", "list", "chain", "ip", "ferry", "cluster-ips-check"],
            )
            .unwrap_or_default();
        if chain.contains(text) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "cluster-ips-check never held {text:?}:\n{chain}\n{}",
            rc.ferry(MASTER).log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
#[ignore = "needs root: network namespaces"]
fn service_cidrs_from_the_real_api_server_drop_unallocated_addresses() {
    let test = "service_cidrs_from_the_real_api_server_drop_unallocated_addresses";
    let Some(mut rc) = RealCluster::start(test) else {
        return;
    };
    rc.apply(&seed_objects("Cluster"));
    rc.wait_endpoints("dev", "url-analysis", "two ready endpoints", |eps| {
        eps.len() == 2 && eps.iter().all(|e| e.1)
    });
    let cidrs = rc.kubectl(&[
        "get",
        "servicecidr",
        "kubernetes",
        "-o",
        "jsonpath={.spec.cidrs}",
    ]);
    assert!(
        cidrs.contains("10.96.0.0/12"),
        "the API server's default: {cidrs}"
    );
    let _servers = [
        route_beyond_the_node(&rc, UNALLOCATED),
        route_beyond_the_node(&rc, LATER),
    ];
    rc.start_ferries(&[]);
    // nft prints a one-element set without braces.
    wait_chain(&rc, "ip daddr 10.96.0.0/12 drop");

    // The node's own traffic (the output hook; the lab test covers pods' forwarded traffic).
    let node = Host::node(MASTER);
    assert_eq!(
        rc.curl(&node, &url(UNALLOCATED)),
        CurlResult::TimedOut,
        "dropped on the node"
    );
    rc.wait_curl(
        &node,
        &url(LATER),
        |r| matches!(r, CurlResult::Ok(b) if b.contains("beyond")),
        "routed off the node (outside every ServiceCIDR)",
    );
    let h = rc.hello(&node, &cluster_url());
    assert!([POD_A.1, POD_B.1].contains(&h.server_ip.as_str()), "{h:?}");

    // A second range, created with kubectl: the watch brings it to the kernel.
    rc.apply(
        "apiVersion: networking.k8s.io/v1\nkind: ServiceCIDR\nmetadata:\n  name: more\n\
         spec:\n  cidrs: [\"10.120.0.0/16\"]\n",
    );
    wait_chain(&rc, "10.120.0.0/16");
    assert_eq!(rc.curl(&node, &url(LATER)), CurlResult::TimedOut);
}
