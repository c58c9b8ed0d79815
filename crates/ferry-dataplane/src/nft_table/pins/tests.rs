use super::*;

const AFFINITY: &str = r#"{"nftables": [{"metainfo": {"version": "1.0.6"}}, {"map": {"family": "ip", "name": "affinity", "table": "ferry", "type": ["ipv4_addr", "inet_proto", "inet_service", "ipv4_addr"], "map": "ipv4_addr . inet_service", "flags": ["timeout"], "elem": [
  [{"elem": {"val": {"concat": ["10.96.0.10", "tcp", 80, "10.1.1.100"]}, "timeout": 10800, "expires": 10790}}, {"concat": ["10.0.0.5", 8080]}],
  [{"elem": {"val": {"concat": ["10.96.0.10", "tcp", 80, "10.1.1.101"]}, "timeout": 10800, "expires": 9}}, {"concat": ["10.0.0.6", 8080]}]
]}}]}"#;

const NODEPORT: &str = r#"{"nftables": [{"map": {"name": "nodeport-affinity", "elem": [
  [{"elem": {"val": {"concat": ["udp", 30053, "203.0.113.9"]}, "timeout": 5, "expires": 4}}, {"concat": ["10.0.0.5", 53]}]
]}}]}"#;

fn ip(s: &str) -> IpAddr {
    s.parse().expect("ip")
}

fn ep(s: &str) -> SocketAddr {
    s.parse().expect("endpoint")
}

#[test]
fn pins_are_read_from_nft_json() {
    let pins = parse("affinity", AFFINITY);
    assert_eq!(pins.len(), 2);
    assert_eq!(
        pins[0],
        Pin {
            map: "affinity",
            key: Key::FrontendClient(ip("10.96.0.10"), Protocol::Tcp, 80, ip("10.1.1.100")),
            endpoint: ep("10.0.0.5:8080"),
        }
    );
    let np = parse("nodeport-affinity", NODEPORT);
    assert_eq!(
        np[0].key,
        Key::NodePortClient(Protocol::Udp, 30053, ip("203.0.113.9"))
    );
    assert!(parse(
        "affinity",
        r#"{"nftables": [{"map": {"name": "affinity"}}]}"#
    )
    .is_empty());
    assert!(parse("affinity", "not json").is_empty());
}

#[test]
fn only_pins_without_their_record_element_are_stale() {
    let valid = HashSet::from([Key::FrontendEndpoint(
        ip("10.96.0.10"),
        Protocol::Tcp,
        80,
        ep("10.0.0.5:8080"),
    )]);
    let stale = stale(parse("affinity", AFFINITY), &valid);
    assert_eq!(stale.len(), 1, "{stale:?}");
    assert_eq!(stale[0].endpoint, ep("10.0.0.6:8080"));
    let np = super::stale(parse("nodeport-affinity", NODEPORT), &valid);
    assert_eq!(np.len(), 1, "no record element for the node port: {np:?}");
}

#[test]
fn deleting_a_pin_cannot_fail_on_one_that_expired() {
    let pins = parse("nodeport-affinity", NODEPORT);
    assert_eq!(
        delete_script(IpFamily::V4, &pins),
        "add element ip ferry nodeport-affinity { udp . 30053 . 203.0.113.9 : 10.0.0.5 . 53 }\n\
         delete element ip ferry nodeport-affinity { udp . 30053 . 203.0.113.9 }\n"
    );
}

/// Counts the pin-map listings (each sweep reads both maps).
#[derive(Default)]
struct Counting {
    listings: usize,
}

impl NftRunner for Counting {
    fn run(&mut self, _script: &str) -> Result<(), crate::Error> {
        Ok(())
    }
    fn list_map(&mut self, _family: IpFamily, _map: &str) -> Result<String, crate::Error> {
        self.listings += 1;
        Ok(String::new())
    }
}

fn affinity_ruleset(endpoints: &[&str]) -> Ruleset {
    use ferry_model::fixtures::{mk_endpoint, mk_node, mk_service, mk_slice, with_node_port};
    use ferry_model::{ClusterState, NodeContext, NodeView, Object, TrafficPolicy};
    let mut state = ClusterState::new();
    let mut svc = with_node_port(
        mk_service("dev", "web", "10.96.0.10", 80),
        30080,
        TrafficPolicy::Cluster,
    );
    svc.session_affinity = ferry_model::SessionAffinity::ClientIp {
        timeout_seconds: 600,
    };
    state.apply(Object::from(svc));
    let eps = endpoints.iter().map(|a| mk_endpoint(a, "n1")).collect();
    state.apply(Object::from(mk_slice("dev", "web", 8080, eps)));
    state.apply(Object::from(mk_node("n1", "10.1.1.9", "10.0.0.0/24")));
    let ctx = NodeContext {
        node_name: "n1".into(),
        family: IpFamily::V4,
    };
    let cfg = ferry_compile::CompileConfig::default();
    ferry_compile::nft::render(&ferry_compile::Plan::build(
        &NodeView::build(&state, &ctx),
        &cfg,
    ))
}

#[test]
fn a_resync_reads_pins_back_only_when_a_record_element_goes() {
    let mut dp = crate::nft_table::NftDataplane::with_runner(Counting::default());
    let listings = |dp: &crate::nft_table::NftDataplane<Counting>| dp.runner().listings;
    // Start-up: the table may hold pins of an earlier run; swept before and after.
    dp.apply_full(affinity_ruleset(&["10.0.0.5", "10.0.0.6"]))
        .expect("first");
    assert_eq!(listings(&dp), 4);
    // A periodic resync (the ruleset forgotten before compiling) of the same endpoints.
    dp.forget_installed();
    dp.apply_full(affinity_ruleset(&["10.0.0.5", "10.0.0.6"]))
        .expect("resync");
    assert_eq!(listings(&dp), 4, "nothing can have gone stale");
    // An endpoint went between two resyncs.
    dp.forget_installed();
    dp.apply_full(affinity_ruleset(&["10.0.0.5"]))
        .expect("resync without .6");
    assert_eq!(listings(&dp), 8);
}
