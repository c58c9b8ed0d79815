//! Session affinity pins against the real kernel, in a private network namespace (the test
//! thread `unshare`s one; it disappears with the thread), in both families: the affinity
//! dispatch and pin-recording rules Ferry writes over netlink list back as rendered, full syncs
//! and restarts keep the pins (the netlink batch does not flush the dynamic maps), and pins to
//! an endpoint that went away (or of a service that lost its affinity) are deleted. Skipped
//! unless root.

mod support;
use support::{in_new_netns, nft};

use std::collections::BTreeMap;

use ferry_compile::nft::{render, Ruleset};
use ferry_compile::{CompileConfig, Plan};
use ferry_dataplane::nft::NftDataplane;
use ferry_dataplane::SyncKind;
use ferry_model::fixtures::{mk_endpoint, mk_node, mk_service, mk_slice, with_node_port};
use ferry_model::{
    ClusterState, IpFamily, NodeContext, NodeView, Object, ServiceName, SessionAffinity,
    TrafficPolicy,
};

/// Addresses of one family: the ClusterIP, endpoints `.5`–`.7`, clients `.100`–`.102`.
struct Net {
    family: IpFamily,
    ip: &'static str,
    cluster_ip: &'static str,
    ep: fn(u8) -> String,
    client: fn(u8) -> String,
}

const V4: Net = Net {
    family: IpFamily::V4,
    ip: "ip",
    cluster_ip: "10.96.0.10",
    ep: |n| format!("10.0.0.{n}"),
    client: |n| format!("10.1.1.{n}"),
};

const V6: Net = Net {
    family: IpFamily::V6,
    ip: "ip6",
    cluster_ip: "fd00:96::10",
    ep: |n| format!("fd00:10::{n}"),
    client: |n| format!("fd00:1::{n}"),
};

fn ruleset(net: &Net, endpoints: &[u8], affinity: bool) -> Ruleset {
    let mut state = ClusterState::new();
    let mut svc = with_node_port(
        mk_service("dev", "web", net.cluster_ip, 80),
        30080,
        TrafficPolicy::Cluster,
    );
    if affinity {
        svc.session_affinity = SessionAffinity::ClientIp {
            timeout_seconds: 600,
        };
    }
    state.apply(Object::from(svc));
    let eps = endpoints
        .iter()
        .map(|n| mk_endpoint(&(net.ep)(*n), "n1"))
        .collect();
    let mut slice = mk_slice("dev", "web", 8080, eps);
    slice.family = net.family;
    state.apply(Object::from(slice));
    let (node_ip, pod_cidr) = match net.family {
        IpFamily::V4 => ("10.1.1.9", "10.0.0.0/24"),
        IpFamily::V6 => ("fd00:1::9", "fd00:10::/64"),
    };
    state.apply(Object::from(mk_node("n1", node_ip, pod_cidr)));
    let ctx = NodeContext {
        node_name: "n1".into(),
        family: net.family,
    };
    let cfg = CompileConfig {
        family: net.family,
        ..CompileConfig::default()
    };
    render(&Plan::build(&NodeView::build(&state, &ctx), &cfg))
}

/// What the kernel would record for two clients of the ClusterIP and one of the node port.
fn pin_clients(net: &Net) {
    let (ip, vip, ep, c) = (net.ip, net.cluster_ip, net.ep, net.client);
    nft(&[&format!(
        "add element {ip} ferry affinity {{ {vip} . tcp . 80 . {} timeout 600s : {} . 8080, {vip} . tcp . 80 . {} timeout 600s : {} . 8080 }}",
        c(100),
        ep(5),
        c(101),
        ep(6)
    )]);
    nft(&[&format!(
        "add element {ip} ferry nodeport-affinity {{ tcp . 30080 . {} timeout 600s : {} . 8080 }}",
        c(102),
        ep(6)
    )]);
}

fn pins(net: &Net) -> String {
    nft(&["list", "map", net.ip, "ferry", "affinity"])
        + &nft(&["list", "map", net.ip, "ferry", "nodeport-affinity"])
}

/// The rules of `chain` in a table listing (or rendering), trimmed.
fn chain_rules(text: &str, chain: &str) -> Vec<String> {
    let head = format!("\tchain {chain} {{");
    text.lines()
        .skip_while(|l| *l != head)
        .skip(1)
        .take_while(|l| *l != "\t}")
        .map(|l| l.trim().to_owned())
        .collect()
}

fn case(net: &Net) {
    let mut dp = NftDataplane::new();
    let desired = ruleset(net, &[5, 6], true);
    let rendered = desired.to_string();
    let r = dp.apply_full(desired).expect("first full sync");
    assert!(r.netlink, "{r:?}");
    // The affinity dispatch chains and the pin-recording chain, written over netlink, list
    // back exactly as rendered (the fixed `affinity-record` chain is nft's own).
    let listed = nft(&["list", "table", net.ip, "ferry"]);
    for chain in [
        "cluster-ip-cluster-2-no-masquerade-affinity",
        "nodeport-cluster-2-affinity",
        "affinity-ip-600",
        "affinity-nodeport-600",
        "affinity-record",
    ] {
        let want = chain_rules(&rendered, chain);
        assert!(!want.is_empty(), "{chain} rendered: {rendered}");
        assert_eq!(chain_rules(&listed, chain), want, "{chain}: {listed}");
    }
    pin_clients(net);
    let clients = [(net.client)(100), (net.client)(101), (net.client)(102)];

    // A periodic full sync: the netlink batch flushes every map but the pins.
    let r = dp
        .apply_full(ruleset(net, &[5, 6], true))
        .expect("full resync");
    assert!(r.netlink && r.kind == SyncKind::Full, "{r:?}");
    let listed = pins(net);
    for client in &clients {
        assert!(listed.contains(client), "{client} lost its pin: {listed}");
    }

    // Ferry restarts: the new process syncs the table it finds in place, pins kept.
    dp = NftDataplane::new();
    dp.apply_full(ruleset(net, &[5, 6], true))
        .expect("full sync after a restart");
    let listed = pins(net);
    for client in &clients {
        assert!(listed.contains(client), "{client} lost its pin: {listed}");
    }

    // .6 is replaced (same count: element-only, over netlink): its pins go, the pin to .5
    // stays.
    let after = ruleset(net, &[5, 7], true);
    let web = ServiceName::new("dev", "web");
    let changes = BTreeMap::from([(web.clone(), after.services.get(&web).cloned())]);
    let r = dp.apply_changes(changes).expect("endpoint change");
    assert!(r.netlink && r.kind == SyncKind::Partial, "{r:?}");
    let listed = pins(net);
    assert!(listed.contains(&clients[0]), "{listed}");
    assert!(!listed.contains(&clients[1]), "{listed}");
    assert!(!listed.contains(&clients[2]), "{listed}");

    // A full sync sweeps stale pins too: pin a client to .7, then fully sync without .7.
    nft(&[&format!(
        "add element {} ferry affinity {{ {} . tcp . 80 . {} timeout 600s : {} . 8080 }}",
        net.ip,
        net.cluster_ip,
        clients[1],
        (net.ep)(7)
    )]);
    dp.apply_full(ruleset(net, &[5, 6], true))
        .expect("full sync without .7");
    let listed = pins(net);
    assert!(listed.contains(&clients[0]), "{listed}");
    assert!(!listed.contains(&clients[1]), "{listed}");

    // The service drops affinity: its pins go too.
    let plain = ruleset(net, &[5, 6], false);
    let changes = BTreeMap::from([(web.clone(), plain.services.get(&web).cloned())]);
    dp.apply_changes(changes).expect("affinity off");
    let listed = pins(net);
    assert!(!listed.contains(&clients[0]), "{listed}");
}

#[test]
#[ignore = "needs root: network namespaces"]
fn ipv4_pins_survive_full_syncs_and_go_with_their_endpoint() {
    in_new_netns(|| case(&V4));
}

#[test]
#[ignore = "needs root: network namespaces"]
fn ipv6_pins_survive_full_syncs_and_go_with_their_endpoint() {
    in_new_netns(|| case(&V6));
}

/// A table whose declarations conflict with Ferry's is recreated; in IPv6 with session
/// affinity nft 1.0.6 cannot write the pin-recording rule itself, so the table is deleted and
/// written again by the usual skeleton and netlink batch.
#[test]
#[ignore = "needs root: network namespaces"]
fn an_ipv6_table_with_conflicting_declarations_is_recreated_with_its_affinity_rules() {
    in_new_netns(|| {
        nft(&["add table ip6 ferry; add set ip6 ferry cluster-ips { type inet_service; }"]);
        let mut dp = NftDataplane::new();
        let desired = ruleset(&V6, &[5, 6], true);
        let rendered = desired.to_string();
        let r = dp.apply_full(desired).expect("full");
        assert!(r.netlink, "{r:?}");
        let listed = nft(&["list", "table", "ip6", "ferry"]);
        assert!(listed.contains("type ipv6_addr\n"), "{listed}");
        for chain in [
            "affinity-ip-600",
            "cluster-ip-cluster-2-no-masquerade-affinity",
        ] {
            let want = chain_rules(&rendered, chain);
            assert_eq!(chain_rules(&listed, chain), want, "{chain}: {listed}");
        }
    });
}
