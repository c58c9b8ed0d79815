//! ServiceCIDRs with real packets, nftables mode (upstream's `cluster-ips-check`): a new
//! connection to an address inside a service CIDR that no Service holds is dropped on the
//! node, instead of being routed off it; an address outside the range, and the ClusterIPs,
//! are not affected; removing the ServiceCIDR lets the traffic through again. Needs root.
//!
//! To tell "dropped" from "routed on" (both time out in the seed lab, whose default route is a
//! dead end), the node k8s-master routes the two test addresses to the lab's client, which
//! holds them and answers on them: a routed connection is answered there.

#[path = "support/seed.rs"]
mod seed;

use ferry_lab::spec::MASTER;
use ferry_lab::{CurlResult, Host, LabProcess};
use seed::{cluster_url, Mode, SeedLab, FERRY, MASTER_POD};

/// Inside the seed's service range (10.96.0.0/12), held by no Service.
const UNALLOCATED: &str = "10.96.0.99";
/// Just past the range (10.96.0.0 – 10.111.255.255).
const OUTSIDE: &str = "10.112.0.99";
/// The lab's client (10.1.1.100), standing in for whatever is beyond the node.
const CLIENT_IP: &str = "10.1.1.100";

const SERVICE_CIDR: &str = "apiVersion: networking.k8s.io/v1
kind: ServiceCIDR
metadata:
  name: kubernetes
spec:
  cidrs: [\"10.96.0.0/12\"]
";

fn url(ip: &str) -> String {
    format!("http://{ip}:8080/hello")
}

/// k8s-master routes `ip` to the client, which answers on it (the process serves until
/// dropped; the addresses and routes go with the lab's namespaces).
fn route_beyond_the_node(seed: &SeedLab, ip: &str) -> LabProcess {
    let client = Host::default_client();
    let out = seed
        .lab
        .exec_in(
            &client,
            ["ip", "addr", "add", &format!("{ip}/32"), "dev", "lo"],
        )
        .expect("ip addr add");
    assert!(out.status.success(), "{out:?}");
    seed.lab
        .exec(
            MASTER,
            ["ip", "route", "add", &format!("{ip}/32"), "via", CLIENT_IP],
        )
        .expect("ip route add");
    let listen = format!("{ip}:8080");
    seed.lab
        .spawn_in(
            &client,
            FERRY,
            ["lab-pod", "--name", "beyond", "--listen", &listen],
        )
        .expect("serve on the client")
}

/// Curls `ip` from `from` until the answer comes from the client (the server may still be
/// starting).
fn wait_routed(seed: &SeedLab, from: &Host, ip: &str) {
    let deadline =
        std::time::Instant::now() + ferry_lab::scaled(std::time::Duration::from_secs(20));
    loop {
        match seed.curl(from, &url(ip)) {
            CurlResult::Ok(body) if body.contains("beyond") => return,
            other => assert!(
                std::time::Instant::now() < deadline,
                "{from} → {ip}: not routed to the client: {other:?}"
            ),
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

#[test]
#[ignore = "needs root: network namespaces"]
fn an_unallocated_address_of_a_service_cidr_is_dropped_in_nftables_mode() {
    let mut seed = SeedLab::start(Mode::Nftables, "Cluster");
    let _servers = [
        route_beyond_the_node(&seed, UNALLOCATED),
        route_beyond_the_node(&seed, OUTSIDE),
    ];
    let pod = Host::pod(MASTER_POD.0);
    let node = Host::node(MASTER);
    // No ServiceCIDR known yet: both are routed off the node, as before ServiceCIDRs.
    wait_routed(&seed, &pod, UNALLOCATED);
    wait_routed(&seed, &pod, OUTSIDE);

    let before = seed.full_syncs(MASTER);
    seed.manifests.put("service-cidr.yaml", SERVICE_CIDR);
    seed.wait_full_synced(MASTER, before + 1);
    let chain = seed
        .lab
        .exec(
            MASTER,
            ["nft", "list", "chain", "ip", "ferry", "cluster-ips-check"],
        )
        .expect("nft list chain");
    assert!(
        chain.contains("10.96.0.0/12") && chain.contains("drop"),
        "{chain}"
    );

    for from in [&pod, &node] {
        assert_eq!(
            seed.curl(from, &url(UNALLOCATED)),
            CurlResult::TimedOut,
            "{from} → {UNALLOCATED}: dropped on the node"
        );
        wait_routed(&seed, from, OUTSIDE);
    }
    let h = seed.hello(&pod, &cluster_url());
    assert!(
        !h.server_ip.is_empty(),
        "the ClusterIP still answers: {h:?}"
    );

    // The ServiceCIDR is deleted: the drop goes with it.
    let before = seed.full_syncs(MASTER);
    std::fs::remove_file(seed.manifests.path().join("service-cidr.yaml")).expect("rm");
    seed.wait_full_synced(MASTER, before + 1);
    wait_routed(&seed, &pod, UNALLOCATED);
}
