//! The seed lab with every node's Ferry taking its state from the fake Kubernetes API server
//! (`--master`) instead of manifests. Needs root (skips otherwise).
//!
//! Why the fake: the outage below changes an object *while the server is away* and counts the
//! requests it refused; a real API server serves no changes while it is down, and keeps no
//! such count. The cases a real one can do run against one in `kube_real.rs` (the seed
//! table, an API server restart with etcd compacted, a revoked token).

#[allow(
    dead_code,
    reason = "the ownership cases run in the per-mode lab files"
)]
#[path = "support/ownership.rs"]
mod ownership;
#[path = "support/seed.rs"]
mod seed;

use std::time::{Duration, Instant};

use ferry_lab::spec::NODE2;
use ferry_lab::{CurlResult, Host};
use seed::{Mode, SeedLab};

/// The API server goes away: traffic keeps flowing on the rules in the kernel. Meanwhile the
/// EndpointSlice is deleted and the history compacted, so the watches get `410 Gone` when the
/// server is back, relist, and every node converges: the Service now refuses connections.
#[test]
#[ignore = "needs root: network namespaces"]
fn an_api_outage_keeps_the_rules_and_a_relist_converges() {
    let mut seed = SeedLab::start(Mode::Nftables.with_api(), "Cluster");
    let node_port = seed::node_port_url("10.1.1.9");
    seed.hello(&Host::default_client(), &node_port);
    let api = seed.api.as_ref().expect("api");
    api.set_down(true);
    // Every node's three watches have failed at least once: each Ferry has seen the outage.
    let deadline = Instant::now() + Duration::from_secs(30);
    while api.refused() < 9 {
        assert!(Instant::now() < deadline, "the Ferries never retried");
        std::thread::sleep(Duration::from_millis(50));
    }
    let during = seed.hello(&Host::default_client(), &node_port);
    assert!(
        during.server_ip == seed::POD_A.1 || during.server_ip == seed::POD_B.1,
        "the rules stay during the outage: {during:?}"
    );
    let before: Vec<usize> = seed::NODES.iter().map(|(n, _)| seed.syncs(n)).collect();
    let api = seed.api.as_ref().expect("api");
    assert!(api.delete("EndpointSlice", "dev", "url-analysis-7x2kq"));
    api.compact();
    api.set_down(false);
    for ((node, _), n) in seed::NODES.iter().zip(before) {
        seed.wait_synced(node, n + 1);
    }
    assert_eq!(
        seed.curl(&Host::node(NODE2), &seed::cluster_url()),
        CurlResult::Refused,
        "after the relist the Service has no endpoints\n{}",
        seed.logs()
    );
    assert!(
        seed.ferry(NODE2)
            .log()
            .contains("relisted the Kubernetes API"),
        "{}",
        seed.logs()
    );
}
