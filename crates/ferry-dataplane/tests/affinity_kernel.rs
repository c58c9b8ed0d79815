//! Session affinity pins against the real kernel, in a private network namespace (the test
//! thread `unshare`s one; it disappears with the thread): full syncs keep them, and pins to an
//! endpoint that went away (or of a service that lost its affinity) are deleted. Skipped unless
//! root.

use std::collections::BTreeMap;
use std::process::Command;

use ferry_compile::nft::{render, Ruleset};
use ferry_compile::{CompileConfig, Plan};
use ferry_dataplane::{NftDataplane, SyncKind};
use ferry_model::fixtures::{mk_endpoint, mk_node, mk_service, mk_slice, with_node_port};
use ferry_model::{
    ClusterState, IpFamily, NodeContext, NodeView, Object, ServiceName, SessionAffinity,
    TrafficPolicy,
};

fn ruleset(endpoints: &[&str], affinity: bool) -> Ruleset {
    let mut state = ClusterState::new();
    let mut svc = with_node_port(
        mk_service("dev", "web", "10.96.0.10", 80),
        30080,
        TrafficPolicy::Cluster,
    );
    if affinity {
        svc.session_affinity = SessionAffinity::ClientIp {
            timeout_seconds: 600,
        };
    }
    state.apply(Object::Service(svc));
    let eps = endpoints.iter().map(|a| mk_endpoint(a, "n1")).collect();
    state.apply(Object::EndpointSlice(mk_slice("dev", "web", 8080, eps)));
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

fn nft(args: &[&str]) -> String {
    let out = Command::new("nft").args(args).output().expect("nft");
    assert!(
        out.status.success(),
        "nft {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// What the kernel recorded for two clients of the ClusterIP and one of the node port.
fn pin_clients() {
    nft(&[
        "add element ip ferry affinity { 10.96.0.10 . tcp . 80 . 10.1.1.100 timeout 600s : 10.0.0.5 . 8080, 10.96.0.10 . tcp . 80 . 10.1.1.101 timeout 600s : 10.0.0.6 . 8080 }",
    ]);
    nft(&[
        "add element ip ferry nodeport-affinity { tcp . 30080 . 10.1.1.102 timeout 600s : 10.0.0.6 . 8080 }",
    ]);
}

fn pins() -> String {
    nft(&["list", "map", "ip", "ferry", "affinity"])
        + &nft(&["list", "map", "ip", "ferry", "nodeport-affinity"])
}

#[test]
fn pins_survive_full_syncs_and_go_with_their_endpoint() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    std::thread::spawn(|| {
        nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET).expect("unshare");
        let mut dp = NftDataplane::new();
        dp.apply_full(ruleset(&["10.0.0.5", "10.0.0.6"], true))
            .expect("first full sync");
        pin_clients();

        // A periodic full sync rebuilds the table in place: every pin stays.
        dp.apply_full(ruleset(&["10.0.0.5", "10.0.0.6"], true))
            .expect("full resync");
        let listed = pins();
        for client in ["10.1.1.100", "10.1.1.101", "10.1.1.102"] {
            assert!(listed.contains(client), "{client} lost its pin: {listed}");
        }

        // Ferry restarts: the new process rebuilds the table it finds in place, pins kept.
        dp = NftDataplane::new();
        dp.apply_full(ruleset(&["10.0.0.5", "10.0.0.6"], true))
            .expect("full sync after a restart");
        let listed = pins();
        for client in ["10.1.1.100", "10.1.1.101", "10.1.1.102"] {
            assert!(listed.contains(client), "{client} lost its pin: {listed}");
        }

        // 10.0.0.6 is replaced (same count: element-only, over netlink): its pins go, the
        // pin to 10.0.0.5 stays.
        let after = ruleset(&["10.0.0.5", "10.0.0.7"], true);
        let web = ServiceName::new("dev", "web");
        let changes = BTreeMap::from([(web.clone(), after.services.get(&web).cloned())]);
        let r = dp.apply_changes(changes).expect("endpoint change");
        assert!(r.netlink && r.kind == SyncKind::Partial, "{r:?}");
        let listed = pins();
        assert!(listed.contains("10.1.1.100"), "{listed}");
        assert!(!listed.contains("10.1.1.101"), "{listed}");
        assert!(!listed.contains("10.1.1.102"), "{listed}");

        // The service drops affinity: its pins go too.
        let plain = ruleset(&["10.0.0.5", "10.0.0.7"], false);
        let changes = BTreeMap::from([(web.clone(), plain.services.get(&web).cloned())]);
        dp.apply_changes(changes).expect("affinity off");
        let listed = pins();
        assert!(!listed.contains("10.1.1.100"), "{listed}");
    })
    .join()
    .expect("test thread");
}
