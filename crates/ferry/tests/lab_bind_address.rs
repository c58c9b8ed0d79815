//! `--bind-address` as kube-proxy's node IP, with real packets: NodePorts answer on it, not on
//! the Node object's InternalIP, in nftables mode (whose NodePorts default to the node's
//! primary IP). Needs root.

#[path = "support/seed.rs"]
mod seed;

use ferry_lab::spec::NODE1;
use ferry_lab::{CurlResult, Host};
use seed::{Mode, SeedLab, NODE_PORT, POD_A, POD_B};

/// A second address of k8s-node1 on the LAN (its Node object says 10.1.1.17).
const BIND_IP: &str = "10.1.1.117";

fn url(ip: &str) -> String {
    format!("http://{ip}:{NODE_PORT}/hello")
}

#[test]
#[ignore = "needs root: network namespaces"]
fn node_ports_answer_on_the_bind_address_instead_of_the_nodes_internal_ip() {
    let bind = format!("--bind-address={BIND_IP}");
    let seed = SeedLab::start_with(Mode::Nftables, "Cluster", &[&bind]);
    seed.lab
        .exec(
            NODE1,
            ["ip", "addr", "add", &format!("{BIND_IP}/24"), "dev", "eth0"],
        )
        .expect("ip addr add");
    // The rules name the address, not the interface: no sync is needed for it to answer.
    let client = Host::default_client();
    for _ in 0..4 {
        let h = seed.hello(&client, &url(BIND_IP));
        assert!([POD_A.1, POD_B.1].contains(&h.server_ip.as_str()), "{h:?}");
    }
    // The Node object's InternalIP is no NodePort address any more: nothing listens there.
    assert_eq!(seed.curl(&client, &url("10.1.1.17")), CurlResult::Refused);
    drop(seed);

    // Without the flag, the InternalIP answers (and the other address would not).
    let seed = SeedLab::start(Mode::Nftables, "Cluster");
    let h = seed.hello(&client, &url("10.1.1.17"));
    assert!([POD_A.1, POD_B.1].contains(&h.server_ip.as_str()), "{h:?}");
}
