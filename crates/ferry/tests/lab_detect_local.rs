//! The interface local-traffic detectors with real packets, in nftables and iptables mode
//! (both backends): `detectLocalMode: InterfaceNamePrefix` with the lab pods' host-side
//! interfaces (`cali…`, as Calico names them) and `BridgeInterface` with a name no interface
//! has. The seed cluster with the Local policy: both endpoints on k8s-node2, none on
//! k8s-master, where the client pod `MASTER_POD` runs.
//!
//! With the prefix, a packet that came in on a `cali*` interface is pod traffic: the pod's own
//! address reaches the endpoint (no masquerade), and the pod reaches k8s-master's Local
//! NodePort cluster-wide (upstream's short-circuit), while the node itself is masqueraded and an
//! outside client is dropped there. With a bridge no packet comes in on, the same pod is
//! outside traffic: masqueraded to the ClusterIP, dropped at the Local NodePort.

#[macro_use]
#[path = "support/modes.rs"]
mod modes;
#[path = "support/seed.rs"]
mod seed;

use ferry_lab::spec::MASTER;
use ferry_lab::{CurlResult, Host};

use seed::*;

const MASTER_IP: &str = "10.1.1.12";

fn prefix_detector(mode: Mode) {
    let extra = [
        "--detect-local-mode",
        "InterfaceNamePrefix",
        "--pod-interface-name-prefix",
        "cali",
    ];
    let seed = SeedLab::start_with(mode, "Local", &extra);
    let pod = Host::pod(MASTER_POD.0);
    let h = seed.hello(&pod, &cluster_url());
    assert_eq!(
        h.client_ip, MASTER_POD.1,
        "pod → ClusterIP keeps the pod's address"
    );
    let h = seed.hello(&Host::node(MASTER), &cluster_url());
    assert_eq!(h.client_ip, MASTER_IP, "node → ClusterIP is masqueraded");
    let h = seed.hello(&pod, &node_port_url(MASTER_IP));
    assert!(
        h.server_ip == POD_A.1 || h.server_ip == POD_B.1,
        "a pod reaches a Local NodePort without local endpoint cluster-wide: {h:?}"
    );
    let outside = seed.curl(&Host::default_client(), &node_port_url(MASTER_IP));
    assert_eq!(
        outside,
        CurlResult::TimedOut,
        "outside traffic to a Local NodePort without local endpoint is dropped"
    );
}

fn bridge_no_packet_comes_in_on(mode: Mode) {
    let extra = [
        "--detect-local-mode",
        "BridgeInterface",
        "--pod-bridge-interface",
        "cbr9",
    ];
    let seed = SeedLab::start_with(mode, "Local", &extra);
    let pod = Host::pod(MASTER_POD.0);
    let h = seed.hello(&pod, &cluster_url());
    assert_eq!(
        h.client_ip, MASTER_IP,
        "not pod traffic: masqueraded to the node"
    );
    let got = seed.curl(&pod, &node_port_url(MASTER_IP));
    assert_eq!(got, CurlResult::TimedOut, "no short-circuit: dropped");
}

every_mode!(prefix_detector, bridge_no_packet_comes_in_on);
