use std::collections::BTreeMap;

use ferry_compile::config::LocalDetector;
use ferry_compile::nft::render;
use ferry_compile::trace::{trace, Packet};
use ferry_compile::{CompileConfig, Plan};
use ferry_model::fixtures::*;
use ferry_model::{IpFamily, NodeContext, NodeView, Protocol, TrafficPolicy};

use super::*;

pub(in crate::nft_table) fn setup() -> (Trace, Ruleset) {
    let state = seed_web_state(TrafficPolicy::Cluster);
    let view = NodeView::build(
        &state,
        &NodeContext {
            node_name: "k8s-node1".into(),
            family: IpFamily::V4,
        },
    );
    let cfg = CompileConfig {
        local_detector: LocalDetector::ClusterCidr(vec!["192.168.0.0/16".parse().expect("cidr")]),
        ..CompileConfig::default()
    };
    let plan = Plan::build(&view, &cfg);
    let ruleset = render(&plan);
    let packet = Packet {
        src: ip("10.1.1.100"),
        dst: ip("10.1.1.17"),
        port: 32223,
        protocol: Protocol::Tcp,
    };
    (trace(&view, &plan, &ruleset, packet), ruleset)
}

/// The live table as the kernel would hold `ruleset` (every element, every chain).
pub(in crate::nft_table) fn as_live(ruleset: &Ruleset) -> LiveTable {
    let mut live = LiveTable::default();
    live.chains.extend(ruleset.chain_names().map(str::to_owned));
    for (set, els) in ruleset.all_elements() {
        let m: &mut BTreeMap<String, Option<String>> =
            live.elements.entry(set.to_owned()).or_default();
        for e in els {
            m.insert(e.key.to_string(), e.value.as_ref().map(ToString::to_string));
        }
    }
    live
}

#[test]
fn a_kernel_holding_the_compiled_rules_agrees() {
    let (t, ruleset) = setup();
    let r = check(&t, &ruleset, Some(&as_live(&ruleset)));
    assert!(r.differences.is_empty(), "{:?}", r.differences);
    assert!(r.checked >= 3);
    assert_eq!(
        r.endpoints,
        vec!["192.168.169.166:56010", "192.168.169.168:56010"]
    );
}

#[test]
fn affinity_pins_the_kernel_wrote_are_not_differences() {
    let (t, ruleset) = setup();
    let mut live = as_live(&ruleset);
    live.elements
        .entry("nodeport-affinity".into())
        .or_default()
        .insert(
            "tcp . 32223 . 10.1.1.100".into(),
            Some("192.168.169.166 . 56010".into()),
        );
    let r = check(&t, &ruleset, Some(&live));
    assert!(r.differences.is_empty(), "{:?}", r.differences);
}

#[test]
fn a_stale_kernel_is_reported_with_its_own_endpoints() {
    let (t, ruleset) = setup();
    let mut live = as_live(&ruleset);
    let eps = live
        .elements
        .get_mut("nodeport-cluster-endpoints")
        .expect("map");
    eps.insert(
        "tcp . 32223 . 1".into(),
        Some("192.168.169.200 . 56010".into()),
    );
    eps.insert(
        "tcp . 32223 . 2".into(),
        Some("192.168.169.201 . 56010".into()),
    );
    let r = check(&t, &ruleset, Some(&live));
    assert_eq!(r.differences.len(), 2, "{:?}", r.differences);
    assert!(r.endpoints.contains(&"192.168.169.201:56010".to_owned()));
    let r = check(&t, &ruleset, None);
    assert!(!r.table_present);
}
