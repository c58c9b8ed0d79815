//! upstream's nfacct counters in the rules: named only when they exist, and only on the rules
//! that count into them.

use ferry_model::fixtures::*;
use ferry_model::{ClusterState, IpFamily, NodeContext, NodeView, Object, TrafficPolicy};

use super::*;
use crate::config::{CompileConfig, NfacctCounters};
use crate::plan::Plan;

fn state(endpoints: &[&str]) -> ClusterState {
    let mut state = ClusterState::new();
    let svc = mk_service("dev", "url-analysis", "10.96.198.86", 8080);
    let svc = with_node_port(svc, 32223, TrafficPolicy::Cluster);
    state.apply(Object::from(svc));
    let eps = endpoints
        .iter()
        .map(|a| mk_endpoint(a, "k8s-node2"))
        .collect();
    state.apply(Object::from(mk_slice("dev", "url-analysis", 56010, eps)));
    state.apply(Object::from(mk_node(
        "k8s-node2",
        "10.1.1.9",
        "192.168.169.128/26",
    )));
    state
}

fn rules(state: &ClusterState, cfg: &CompileConfig) -> Ruleset {
    let ctx = NodeContext {
        node_name: "k8s-node2".into(),
        family: IpFamily::V4,
    };
    render(&Plan::build(&NodeView::build(state, &ctx), cfg))
}

fn config(nfacct: NfacctCounters, localhost: bool, liberal: bool) -> CompileConfig {
    CompileConfig {
        nfacct,
        localhost_node_ports: localhost,
        conntrack_tcp_be_liberal: liberal,
        ..CompileConfig::default()
    }
}

fn forward(r: &Ruleset) -> &[String] {
    &r.filter
        .iter()
        .find(|c| c.name == KUBE_FORWARD)
        .expect("KUBE-FORWARD")
        .rules
}

fn localhost_counts(r: &Ruleset) -> Vec<&String> {
    r.services
        .values()
        .flat_map(|s| &s.nat_services)
        .filter(|rule| rule.contains(LOCALHOST_NODE_PORTS_COUNTER))
        .collect()
}

#[test]
fn the_invalid_drop_counts_into_its_counter_when_it_exists() {
    let s = state(&["192.168.169.130"]);
    let counted = rules(&s, &config(NfacctCounters::ALL, true, false));
    assert_eq!(
        forward(&counted)[0],
        "-m conntrack --ctstate INVALID -m nfacct --nfacct-name ct_state_invalid_dropped_pkts -j DROP"
    );
    let plain = rules(&s, &config(NfacctCounters::default(), true, false));
    assert_eq!(forward(&plain)[0], "-m conntrack --ctstate INVALID -j DROP");
    let liberal = rules(&s, &config(NfacctCounters::ALL, true, true));
    assert!(
        forward(&liberal).iter().all(|r| !r.contains("INVALID")),
        "{liberal:?}"
    );
}

#[test]
fn each_localhost_node_port_with_endpoints_is_counted_without_a_target() {
    let s = state(&["192.168.169.130"]);
    let counted = rules(&s, &config(NfacctCounters::ALL, true, false));
    assert_eq!(
        localhost_counts(&counted),
        [
            "-m comment --comment \"dev/url-analysis:http localhost NodePort\" -m tcp -p tcp \
          -d 127.0.0.0/8 --dport 32223 -m nfacct --nfacct-name localhost_nps_accepted_pkts"
        ]
    );
    // No counter, no localhost NodePorts, or no endpoints (upstream's `hasEndpoints`): no rule.
    let without = [
        rules(&s, &config(NfacctCounters::default(), true, false)),
        rules(&s, &config(NfacctCounters::ALL, false, false)),
        rules(&state(&[]), &config(NfacctCounters::ALL, true, false)),
    ];
    for r in &without {
        assert!(localhost_counts(r).is_empty(), "{r:?}");
    }
}
