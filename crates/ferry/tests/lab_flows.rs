//! Every seed flow (tests/support/flows.rs) with real packets, in every proxy mode, with the
//! flows' extra Service and the nodes' secondary addresses; `ferry explain` predicts the same
//! list (explain_flows.rs). Needs root.

#[path = "support/flows.rs"]
mod flows;
#[path = "support/seed.rs"]
mod seed;

use ferry_lab::{CurlResult, Host};
use flows::{Expect, From, EXTRA_MANIFESTS, FLOWS, SECONDARY};
use seed::{Hello, Mode, SeedLab};

fn host(from: From) -> Host {
    match from {
        From::Client => Host::default_client(),
        From::Node(n) => Host::node(n),
        From::Pod(name, _, _) => Host::pod(name),
    }
}

fn run(mode: Mode, policy: &'static str) {
    let mut seed = SeedLab::start(mode, policy);
    for (name, text) in EXTRA_MANIFESTS {
        seed.apply(name, text);
    }
    for (node, ip) in SECONDARY {
        let ip = ip.parse().expect("address");
        seed.lab
            .add_node_address(node, ip)
            .expect("secondary address");
    }
    for f in FLOWS.iter().filter(|f| f.policy == policy) {
        let from = host(f.from);
        match f.expect_in(mode.flag()) {
            Expect::Dropped => assert_eq!(
                seed.curl(&from, &f.url()),
                CurlResult::TimedOut,
                "{}",
                f.name
            ),
            // Nothing listens on the node's port: the node itself refuses.
            Expect::Rejected | Expect::Untranslated => assert_eq!(
                seed.curl(&from, &f.url()),
                CurlResult::Refused,
                "{}",
                f.name
            ),
            Expect::Forwarded(peer) => {
                for _ in 0..8 {
                    let h: Hello = seed.hello(&from, &f.url());
                    assert!(
                        f.servers.contains(&h.server_ip.as_str()),
                        "{}: {h:?}",
                        f.name
                    );
                    let want = f.peer_seen(peer, &h.server_ip);
                    assert_eq!(h.client_ip, want, "{}: {h:?}", f.name);
                }
            }
        }
    }
}

macro_rules! modes {
    ($($name:ident: $mode:expr, $policy:expr;)*) => {
        $( #[test] #[ignore = "needs root: network namespaces"] fn $name() { run($mode, $policy) } )*
    };
}

modes! {
    nftables_cluster_policy_flows_behave_as_explained: Mode::Nftables, "Cluster";
    nftables_local_policy_flows_behave_as_explained: Mode::Nftables, "Local";
    iptables_nft_cluster_policy_flows_behave_as_explained: Mode::IptablesNft, "Cluster";
    iptables_nft_local_policy_flows_behave_as_explained: Mode::IptablesNft, "Local";
    iptables_legacy_cluster_policy_flows_behave_as_explained: Mode::IptablesLegacy, "Cluster";
    iptables_legacy_local_policy_flows_behave_as_explained: Mode::IptablesLegacy, "Local";
    userspace_cluster_policy_flows_behave_as_explained: Mode::Userspace, "Cluster";
    userspace_local_policy_flows_behave_as_explained: Mode::Userspace, "Local";
}

/// `ferry explain --live` inside a node reads the kernel's table: it agrees with what Ferry
/// compiled, and reports a difference made by hand. It takes the node's addresses from its
/// interfaces: a secondary one is the node's, outside nodePortAddresses' default.
#[test]
#[ignore = "needs root: network namespaces"]
fn explain_live_reads_the_kernel_and_reports_differences() {
    let seed = SeedLab::start(Mode::Nftables, "Cluster");
    let dir = seed.manifests.path().display().to_string();
    let explain_to = |to: &str| {
        seed.lab
            .exec(
                "k8s-node1",
                [
                    seed::FERRY,
                    "explain",
                    "--live",
                    "--manifests",
                    &dir,
                    "--node",
                    "k8s-node1",
                    "--from",
                    "10.1.1.100",
                    "--to",
                    to,
                    "--cluster-cidr",
                    "192.168.0.0/16",
                ],
            )
            .expect("ferry explain --live")
    };
    let explain = || explain_to("10.1.1.17:32223");
    seed.lab
        .add_node_address("k8s-node1", "10.1.1.27".parse().expect("ip"))
        .expect("secondary address");
    let out = explain_to("10.1.1.27:32223");
    assert!(
        out.contains("10.1.1.27 is an address of this node, but NodePort 32223/tcp"),
        "{out}"
    );
    let out = explain_to("10.1.1.29:32223");
    assert!(
        out.contains("this node's: 10.1.1.17, 10.1.1.27 (its interfaces)"),
        "{out}"
    );
    let out = explain();
    assert!(out.contains("agrees with the compiled rules"), "{out}");
    assert!(
        out.contains("192.168.169.166:56010, 192.168.169.168:56010"),
        "{out}"
    );
    seed.lab
        .exec(
            "k8s-node1",
            [
                "nft",
                "delete element ip ferry nodeport-cluster-endpoints { tcp . 32223 . 1 }",
            ],
        )
        .expect("delete an element by hand");
    let out = explain();
    assert!(
        out.contains("DIFFERS: map nodeport-cluster-endpoints lacks element tcp . 32223 . 1"),
        "{out}"
    );
}
