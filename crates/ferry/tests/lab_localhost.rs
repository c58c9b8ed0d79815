//! Localhost NodePorts in the kernel modes, with real packets: `127.0.0.1:NODEPORT` served by
//! Ferry's userspace proxy (never with `route_localnet`), on by default in iptables mode,
//! opt-in in nftables mode (`nftables.localhostNodePorts`, `--nftables-localhost-nodeports`).
//! Needs root.

#[path = "support/seed.rs"]
mod seed;

use ferry_lab::spec::NODE1;
use ferry_lab::{CurlResult, Host};
use seed::{Mode, SeedLab, NODE_PORT, POD_A, POD_B};

fn localhost_url() -> String {
    format!("http://127.0.0.1:{NODE_PORT}/hello")
}

/// k8s-node1 (no endpoint of its own) reaches its Local NodePort on localhost: the node's own
/// traffic goes to the endpoints cluster-wide, which see the node's address; no
/// `route_localnet`. Without endpoints the listener closes: refused at once.
fn served(mut seed: SeedLab) {
    let node = Host::node(NODE1);
    for _ in 0..6 {
        let h = seed.hello(&node, &localhost_url());
        assert!([POD_A.1, POD_B.1].contains(&h.server_ip.as_str()), "{h:?}");
        assert_eq!(h.client_ip, "10.1.1.17", "the proxy connects from the node");
    }
    let localnet = seed
        .lab
        .exec(NODE1, ["sysctl", "-n", "net.ipv4.conf.all.route_localnet"])
        .expect("sysctl");
    assert_eq!(localnet.trim(), "0", "route_localnet is never set");
    seed.change(|m| m.with_slice = false);
    assert_eq!(seed.curl(&node, &localhost_url()), CurlResult::Refused);
}

#[test]
#[ignore = "needs root: network namespaces"]
fn iptables_mode_serves_localhost_node_ports_by_default_nft_backend() {
    served(SeedLab::start(Mode::IptablesNft, "Local"));
}

#[test]
#[ignore = "needs root: network namespaces"]
fn iptables_mode_serves_localhost_node_ports_by_default_legacy_backend() {
    served(SeedLab::start(Mode::IptablesLegacy, "Local"));
}

#[test]
#[ignore = "needs root: network namespaces"]
fn nftables_mode_serves_localhost_node_ports_when_asked() {
    let seed = SeedLab::start(Mode::Nftables, "Local");
    let refused = seed.curl(&Host::node(NODE1), &localhost_url());
    assert_eq!(refused, CurlResult::Refused, "off by default");
    drop(seed);
    let flag = ["--nftables-localhost-nodeports=true"];
    served(SeedLab::start_with(Mode::Nftables, "Local", &flag));
}

#[test]
#[ignore = "needs root: network namespaces"]
fn iptables_mode_can_turn_localhost_node_ports_off() {
    let flag = ["--iptables-localhost-nodeports=false"];
    let seed = SeedLab::start_with(Mode::IptablesNft, "Local", &flag);
    // The KUBE-EXTERNAL-SERVICES drop of a NodePort without local endpoints applies to
    // loopback too (upstream's rule matches every local address): the client times out.
    let r = seed.curl(&Host::node(NODE1), &localhost_url());
    assert_eq!(r, CurlResult::TimedOut);
}
