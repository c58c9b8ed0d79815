use ferry_model::fixtures::{
    ip, mk_endpoint, mk_endpoint_with, mk_service, mk_slice, with_node_port,
};
use ferry_model::{
    ClusterState, IpFamily, NodeContext, NodeView, Object, Protocol, ServiceName, TrafficPolicy,
};

use super::*;

fn addr(s: &str) -> SocketAddr {
    s.parse().expect("socket address")
}

/// The endpoints' port (the slices' `port`).
const EP_PORT: u16 = 5353;

/// An endpoint: `ip`, port [`EP_PORT`].
fn ep(ip_: &str) -> SocketAddr {
    SocketAddr::new(ip(ip_), EP_PORT)
}

fn ips(list: &[&str]) -> BTreeSet<SocketAddr> {
    list.iter().map(|s| ep(s)).collect()
}

fn port_name(svc: &str) -> ServicePortName {
    ServicePortName {
        service: ServiceName::new("dev", svc),
        port: "dns".into(),
        protocol: Protocol::Udp,
    }
}

fn udp(frontends: &[Frontend], serving: &[&str]) -> UdpServicePort {
    UdpServicePort {
        frontends: frontends.to_vec(),
        serving: ips(serving),
    }
}

const CLUSTER_IP: &str = "10.96.0.10:53";

fn cluster() -> Frontend {
    Frontend::Address(addr(CLUSTER_IP))
}

fn ports(list: Vec<(&str, UdpServicePort)>) -> UdpServicePorts {
    list.into_iter().map(|(n, p)| (port_name(n), p)).collect()
}

fn filter(frontend: Frontend, keep: &[&str]) -> StaleFlowFilter {
    StaleFlowFilter {
        frontend,
        keep: ips(keep),
    }
}

#[test]
fn removed_endpoint_makes_flows_to_every_frontend_stale() {
    let fe = [
        cluster(),
        Frontend::Address(addr("203.0.113.7:53")),
        Frontend::NodePort(30053),
    ];
    let before = ports(vec![("dns", udp(&fe, &["10.0.1.1", "10.0.1.2"]))]);
    let after = ports(vec![("dns", udp(&fe, &["10.0.1.2"]))]);
    let got = stale_flows(&before, &after, false);
    let mut want: Vec<_> = fe.iter().map(|f| filter(*f, &["10.0.1.2"])).collect();
    want.sort();
    assert_eq!(got, want);
}

#[test]
fn service_dropping_to_zero_endpoints_makes_all_its_flows_stale() {
    let before = ports(vec![("dns", udp(&[cluster()], &["10.0.1.1"]))]);
    let after = ports(vec![("dns", udp(&[cluster()], &[]))]);
    assert_eq!(
        stale_flows(&before, &after, false),
        vec![filter(cluster(), &[])]
    );
}

#[test]
fn first_endpoint_after_none_makes_undnated_flows_stale() {
    let before = ports(vec![("dns", udp(&[cluster()], &[]))]);
    let after = ports(vec![("dns", udp(&[cluster()], &["10.0.1.1"]))]);
    assert_eq!(
        stale_flows(&before, &after, false),
        vec![filter(cluster(), &["10.0.1.1"])]
    );
}

#[test]
fn added_endpoint_next_to_existing_ones_leaves_flows_alone() {
    let before = ports(vec![("dns", udp(&[cluster()], &["10.0.1.1"]))]);
    let after = ports(vec![("dns", udp(&[cluster()], &["10.0.1.1", "10.0.1.2"]))]);
    assert_eq!(stale_flows(&before, &after, false), vec![]);
}

#[test]
fn unchanged_service_or_one_still_without_endpoints_needs_nothing() {
    let before = ports(vec![
        ("dns", udp(&[cluster()], &["10.0.1.1"])),
        (
            "empty",
            udp(&[Frontend::Address(addr("10.96.0.11:53"))], &[]),
        ),
    ]);
    assert_eq!(stale_flows(&before, &before.clone(), false), vec![]);
}

#[test]
fn deleted_service_and_removed_frontend_make_their_flows_stale() {
    let ext = Frontend::Address(addr("203.0.113.7:53"));
    let gone = Frontend::Address(addr("10.96.0.12:53"));
    let before = ports(vec![
        ("dns", udp(&[cluster(), ext], &["10.0.1.1"])),
        (
            "gone",
            udp(&[gone, Frontend::NodePort(30054)], &["10.0.1.9"]),
        ),
    ]);
    let after = ports(vec![("dns", udp(&[cluster()], &["10.0.1.1"]))]);
    // The deleted service's node port is no longer Ferry's: flows to that port are left alone.
    assert_eq!(
        stale_flows(&before, &after, false),
        vec![filter(gone, &[]), filter(ext, &[])]
    );
}

#[test]
fn a_node_port_without_serving_endpoints_is_never_checked() {
    let np = Frontend::NodePort(30053);
    let before = ports(vec![("dns", udp(&[cluster(), np], &["10.0.1.1"]))]);
    let after = ports(vec![("dns", udp(&[cluster(), np], &[]))]);
    // Its ClusterIP's flows go (matched by address), its node port's stay (matched by port
    // only, they could be any host's): upstream's rule since 1.37 (#139629).
    assert_eq!(
        stale_flows(&before, &after, false),
        vec![filter(cluster(), &[])]
    );
    assert_eq!(
        stale_flows(&after.clone(), &after, true),
        vec![filter(cluster(), &[])]
    );
    // With an endpoint again, it is checked.
    assert!(stale_flows(&after, &before, false).contains(&filter(np, &["10.0.1.1"])));
}

#[test]
fn new_service_with_endpoints_cleans_flows_that_predate_its_rules() {
    let after = ports(vec![
        ("dns", udp(&[cluster()], &["10.0.1.1"])),
        (
            "empty",
            udp(&[Frontend::Address(addr("10.96.0.11:53"))], &[]),
        ),
    ]);
    assert_eq!(
        stale_flows(&UdpServicePorts::new(), &after, false),
        vec![filter(cluster(), &["10.0.1.1"])]
    );
}

#[test]
fn reconcile_checks_every_frontend() {
    let empty = Frontend::Address(addr("10.96.0.11:53"));
    let current = ports(vec![
        ("dns", udp(&[cluster()], &["10.0.1.1"])),
        ("empty", udp(&[empty], &[])),
    ]);
    assert_eq!(
        stale_flows(&current.clone(), &current, true),
        vec![filter(cluster(), &["10.0.1.1"]), filter(empty, &[])]
    );
}

#[test]
fn filter_matches_by_destination_and_reply_source() {
    let f = filter(cluster(), &["10.0.1.2"]);
    assert!(
        f.matches(addr(CLUSTER_IP), ep("10.0.1.1")),
        "DNATed to a removed endpoint"
    );
    assert!(
        f.matches(addr(CLUSTER_IP), ep("10.96.0.10")),
        "never DNATed"
    );
    assert!(
        !f.matches(addr(CLUSTER_IP), ep("10.0.1.2")),
        "a serving endpoint"
    );
    assert!(
        !f.matches(addr("10.96.0.10:54"), ep("10.0.1.1")),
        "another port"
    );
    // The endpoint's address, another port (its targetPort changed): stale, as upstream.
    let moved = SocketAddr::new(ip("10.0.1.2"), EP_PORT + 1);
    assert!(
        f.matches(addr(CLUSTER_IP), moved),
        "a serving endpoint's old port"
    );
    let np = filter(Frontend::NodePort(30053), &[]);
    assert!(np.matches(addr("10.1.1.9:30053"), ep("10.0.1.1")));
    assert!(!np.matches(addr("10.1.1.9:30054"), ep("10.0.1.1")));
}

#[test]
fn the_index_answers_like_the_filters() {
    let filters = vec![
        filter(cluster(), &["10.0.1.2"]),
        filter(Frontend::Address(addr("10.96.0.11:53")), &[]),
        filter(Frontend::NodePort(30053), &["10.0.1.2", "10.0.1.3"]),
    ];
    let index = StaleFlowIndex::new(&filters);
    let dsts = [
        "10.96.0.10:53",
        "10.96.0.11:53",
        "10.96.0.10:54",
        "10.1.1.9:30053",
        "10.1.1.9:53",
    ];
    let replies = ["10.0.1.1", "10.0.1.2", "10.0.1.3", "10.96.0.10"];
    for dst in dsts {
        for reply in replies {
            let (dst, reply) = (addr(dst), ep(reply));
            let want = filters.iter().any(|f| f.matches(dst, reply));
            assert_eq!(index.is_stale(dst, reply), want, "{dst} reply from {reply}");
        }
    }
    assert!(index.is_stale(addr("10.96.0.10:53"), ep("10.0.1.1")));
    assert!(!StaleFlowIndex::new(&[]).is_stale(addr("10.96.0.10:53"), ep("10.0.1.1")));
}

#[test]
fn udp_ports_come_from_the_node_view_with_serving_endpoints() {
    let mut svc = with_node_port(
        mk_service("dev", "dns", "10.96.0.10", 53),
        30053,
        TrafficPolicy::Local,
    );
    svc.ports[0].protocol = Protocol::Udp;
    svc.external_ips = vec![ip("203.0.113.7")];
    svc.load_balancer_ips = vec![ip("203.0.113.8")];
    let mut tcp = mk_service("dev", "web", "10.96.0.20", 80);
    tcp.ports[0].name = "http".into();
    let mut slice = mk_slice(
        "dev",
        "dns",
        5353,
        vec![
            mk_endpoint("10.0.1.1", "node-a"),
            mk_endpoint_with("10.0.1.2", "node-b", false, true, true),
            mk_endpoint_with("10.0.1.3", "node-b", false, false, false),
        ],
    );
    slice.ports[0].protocol = Protocol::Udp;
    let mut state = ClusterState::new();
    for obj in [Object::from(svc), Object::from(tcp), Object::from(slice)] {
        state.apply(obj);
    }
    let ctx = NodeContext {
        node_name: "node-a".into(),
        family: IpFamily::V4,
    };
    let view = NodeView::build(&state, &ctx);
    let got = udp_service_ports(view.services.values());
    let name = ServicePortName {
        service: ServiceName::new("dev", "dns"),
        port: "http".into(),
        protocol: Protocol::Udp,
    };
    assert_eq!(
        got.keys().collect::<Vec<_>>(),
        vec![&name],
        "only the UDP port"
    );
    let mut frontends = vec![
        Frontend::Address(addr("10.96.0.10:53")),
        Frontend::Address(addr("203.0.113.7:53")),
        Frontend::Address(addr("203.0.113.8:53")),
        Frontend::NodePort(30053),
    ];
    frontends.sort();
    assert_eq!(
        got[&name],
        UdpServicePort {
            frontends,
            // Ready, and serving while terminating (even on another node with a Local
            // policy); not the endpoint that is neither.
            serving: ips(&["10.0.1.1", "10.0.1.2"]),
        }
    );
}
