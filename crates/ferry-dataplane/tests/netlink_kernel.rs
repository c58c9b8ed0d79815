//! The netlink element path against the real kernel, in a private network namespace (the test
//! thread `unshare`s one; it disappears with the thread). Skipped unless root.

use std::collections::BTreeMap;
use std::process::Command;

use ferry_compile::nft::{render, Ruleset};
use ferry_compile::{CompileConfig, Plan};
use ferry_dataplane::{NftDataplane, SyncKind};
use ferry_model::fixtures::{mk_endpoint, mk_node, mk_service, mk_slice, with_node_port};
use ferry_model::{
    ClusterState, IpFamily, NodeContext, NodeView, Object, ServiceName, TrafficPolicy,
};

fn ruleset(endpoints: &[&str]) -> Ruleset {
    let mut state = ClusterState::new();
    for (name, ip, np) in [("web", "10.96.0.10", 30080), ("api", "10.96.0.11", 30081)] {
        let svc = with_node_port(mk_service("dev", name, ip, 80), np, TrafficPolicy::Cluster);
        state.apply(Object::Service(svc));
        let eps = endpoints.iter().map(|a| mk_endpoint(a, "n1")).collect();
        state.apply(Object::EndpointSlice(mk_slice("dev", name, 8080, eps)));
    }
    state.apply(Object::Node(mk_node("n1", "10.1.1.9", "10.0.0.0/24")));
    let ctx = NodeContext {
        node_name: "n1".into(),
        family: IpFamily::V4,
    };
    render(&Plan::build(
        &NodeView::build(&state, &ctx),
        &CompileConfig::default(),
    ))
}

fn list() -> String {
    let out = Command::new("nft")
        .args(["list", "table", "ip", "ferry"])
        .output()
        .expect("nft");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn endpoint_changes_go_over_netlink_and_nft_lists_them() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    std::thread::spawn(|| {
        nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET).expect("unshare");
        let mut dp = NftDataplane::new();
        dp.apply_full(ruleset(&["10.0.0.5", "10.0.0.6"]))
            .expect("full");
        assert!(list().contains("10.96.0.10 . tcp . 80 . 1 : 10.0.0.6 . 8080"));

        // Replace an endpoint of dev/web: element-only, over netlink.
        let after = ruleset(&["10.0.0.5", "10.0.0.7"]);
        let web = ServiceName::new("dev", "web");
        let changes = BTreeMap::from([(web.clone(), after.services.get(&web).cloned())]);
        let r = dp.apply_changes(changes).expect("incremental");
        assert!(r.netlink && r.kind == SyncKind::Partial, "{r:?}");
        let listed = list();
        assert!(
            listed.contains("10.96.0.10 . tcp . 80 . 1 : 10.0.0.7 . 8080"),
            "{listed}"
        );
        assert!(
            listed.contains("tcp . 30080 . 1 : 10.0.0.7 . 8080"),
            "{listed}"
        );
        assert!(listed.contains("10.0.0.7 . 10.0.0.7"), "hairpin: {listed}");
        assert!(
            listed.contains("10.96.0.11 . tcp . 80 . 1 : 10.0.0.6 . 8080"),
            "dev/api untouched: {listed}"
        );

        // dev/api drops to one endpoint: its dispatch element moves to a new chain (full).
        let one = ruleset(&["10.0.0.5"]);
        let api = ServiceName::new("dev", "api");
        let changes = BTreeMap::from([(api.clone(), one.services.get(&api).cloned())]);
        let r = dp.apply_changes(changes).expect("count change");
        assert_eq!(r.kind, SyncKind::Full);
        let listed = list();
        assert!(
            listed
                .contains("10.96.0.11 . tcp . 80 comment \"dev/api:http\" : goto cluster-ip-cluster-1-no-masquerade"),
            "{listed}"
        );

        // dev/web follows to one endpoint: the chain exists, so netlink again, with the
        // verdict element and its comment.
        let changes = BTreeMap::from([(web.clone(), one.services.get(&web).cloned())]);
        let r = dp.apply_changes(changes).expect("count change");
        assert!(r.netlink, "{r:?}");
        let listed = list();
        assert!(
            listed
                .contains("10.96.0.10 . tcp . 80 comment \"dev/web:http\" : goto cluster-ip-cluster-1-no-masquerade"),
            "{listed}"
        );
        // cluster-ip-cluster-2 lost its last user; it stays (unreachable) until the next
        // full sync rather than costing one now.
        assert!(!listed.contains("goto cluster-ip-cluster-2"), "{listed}");
    })
    .join()
    .expect("test thread");
}
