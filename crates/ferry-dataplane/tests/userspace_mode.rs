//! The userspace mode through the mode table, as the agent runs it: its applier writes the
//! redirect rules and opens the listeners, in a network namespace of each test's own (node
//! address 10.1.1.9, service range routed out of it).

mod support;
#[path = "support/userspace.rs"]
mod us;

use std::net::SocketAddr;

use ferry_compile::mode::ProxyMode;
use ferry_compile::userspace::{PortRange, ProxyPorts};
use ferry_compile::{CompileConfig, NodeCompiler};
use ferry_dataplane::mode::{ModeOptions, NodeMode};
use ferry_dataplane::modes::entry;
use ferry_dataplane::userspace::ephemeral::ephemeral_ports;
use ferry_dataplane::Applier;
use ferry_model::{fixtures, ClusterState, IpFamily, NodeContext, Object, ObjectKey, ServiceName};

use us::{backend_of, request, Svc};

/// The node: its address on a veth, the service range routed out of it, `lo` up.
fn node() {
    us::ip(&["link", "set", "lo", "up"]);
    us::ip(&[
        "link", "add", "eth0", "type", "veth", "peer", "name", "peer0",
    ]);
    us::ip(&["addr", "add", "10.1.1.9/24", "dev", "eth0"]);
    us::ip(&["link", "set", "eth0", "up"]);
    us::ip(&["link", "set", "peer0", "up"]);
    us::ip(&["route", "add", "10.96.0.0/16", "dev", "eth0"]);
}

fn open(rt: &tokio::runtime::Runtime) -> Box<dyn NodeMode> {
    let options = ModeOptions {
        runtime: Some(rt.handle().clone()),
        ..ModeOptions::default()
    };
    (entry(ProxyMode::Userspace).open)(&options)
}

fn compiler(state: &ClusterState) -> NodeCompiler {
    compiler_in(state, PortRange::DEFAULT)
}

/// The node's compiler with proxy ports in `range` (`portRange`).
fn compiler_in(state: &ClusterState, range: PortRange) -> NodeCompiler {
    let ctx = NodeContext {
        node_name: us::NODE.into(),
        family: IpFamily::V4,
    };
    let config = CompileConfig {
        localhost_node_ports: true,
        proxy_port_range: range,
        ..CompileConfig::default()
    };
    NodeCompiler::new(state, &ctx, &config)
}

/// The proxy port the kernel's `portals` map sends the service's ClusterIP to.
fn redirected_port() -> Option<u16> {
    redirected_port_of("10.96.0.10")
}

/// The proxy port the kernel's `portals` map sends `cluster_ip`:80/tcp to.
fn redirected_port_of(cluster_ip: &str) -> Option<u16> {
    let map = support::nft(&["list", "map", "ip", "ferry", "portals"]);
    let (_, after) = map.split_once(&format!("{cluster_ip} . tcp . 80"))?;
    let (_, value) = after.split_once(": ")?;
    let digits: String = value.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// Whether a TCP socket listens on `port` (`ss`: a direct connection to a proxy port is
/// dropped by the rules).
fn listening(port: u16) -> bool {
    let out = std::process::Command::new("ss")
        .args(["-Hltn", &format!("sport = :{port}")])
        .output()
        .expect("ss");
    !String::from_utf8_lossy(&out.stdout).trim().is_empty()
}

fn run(test: impl FnOnce(&tokio::runtime::Runtime) + Send + 'static) {
    support::in_new_netns(move || {
        node();
        let rt = us::runtime();
        rt.block_on(us::tcp_backend("127.0.0.11:8080", "b1"));
        test(&rt);
    });
}

fn sa(s: &str) -> SocketAddr {
    s.parse().expect("address")
}

#[test]
#[ignore = "needs root: network namespaces"]
fn a_busy_proxy_port_moves_and_a_new_process_keeps_the_port_it_moved_to() {
    run(|rt| {
        let svc = Svc::tcp(&["127.0.0.11"]);
        let state = svc.state();
        let name = svc.service_plan().name;
        let preferred = ProxyPorts::new(PortRange::DEFAULT).preferred(&name);
        // Another program holds the service port's preferred proxy port.
        let blocker = std::net::TcpListener::bind(("0.0.0.0", preferred)).expect("blocker");
        let mode = open(rt);
        let mut applier = mode.applier(IpFamily::V4);
        applier.sync_full(&compiler(&state), &state).expect("sync");
        let moved = redirected_port().expect("redirected");
        assert_ne!(moved, preferred, "the busy port is not used");
        let reply = rt.block_on(request(sa("10.96.0.10:80"), None));
        assert_eq!(backend_of(&reply.expect("proxied")), "b1");
        // Ferry stops (its rules stay), the other program goes; a new Ferry listens where
        // the rules still point, not on the port it would derive.
        drop(applier);
        drop(mode);
        drop(blocker);
        let mode = open(rt);
        let mut applier = mode.applier(IpFamily::V4);
        applier.sync_full(&compiler(&state), &state).expect("sync");
        assert_eq!(redirected_port(), Some(moved));
        let reply = rt.block_on(request(sa("10.96.0.10:80"), None));
        assert_eq!(backend_of(&reply.expect("proxied again")), "b1");
        let metrics = mode.proxy_metrics().expect("the mode's proxy").snapshot();
        assert_eq!(metrics.len(), 1, "{metrics:?}");
        assert_eq!(metrics[0].connections, 1);
    });
}

#[test]
#[ignore = "needs root: network namespaces"]
fn a_deleted_service_loses_its_redirect_and_its_listener() {
    run(|rt| {
        let svc = Svc::tcp(&["127.0.0.11"]);
        let state = svc.state();
        let mode = open(rt);
        let mut applier = mode.applier(IpFamily::V4);
        applier.sync_full(&compiler(&state), &state).expect("sync");
        let port = redirected_port().expect("redirected");
        assert!(listening(port), "listening on {port}");
        let reply = rt.block_on(request(sa("10.96.0.10:80"), None));
        assert_eq!(backend_of(&reply.expect("proxied")), "b1");

        let mut gone = state.clone();
        let name = svc.service_plan().name.service;
        gone.delete(&ferry_model::ObjectKey::Service(name.clone()));
        let dirty = [name].into_iter().collect();
        applier
            .sync_partial(&compiler(&gone), &gone, &dirty)
            .expect("partial sync");
        assert_eq!(redirected_port(), None);
        assert!(!listening(port), "{port} closed");
        assert!(mode.proxy_metrics().expect("proxy").snapshot().is_empty());
    });
}

/// The drills' collision: the node's own connections hold ephemeral ports, and a listener
/// cannot open on one of them. The default proxy ports are chosen clear of the namespace's
/// `ip_local_port_range` (here narrowed to 50 ports of the old default, 40000-49999, and
/// every one of them taken), so the service is served.
#[test]
#[ignore = "needs root: network namespaces"]
fn the_default_proxy_ports_stay_clear_of_the_ports_outgoing_connections_hold() {
    run(|rt| {
        std::fs::write("/proc/sys/net/ipv4/ip_local_port_range", "40000 40049").expect("sysctl");
        let ephemeral = ephemeral_ports().expect("ip_local_port_range");
        assert_eq!((ephemeral.first, ephemeral.last), (40000, 40049));
        let server = std::net::TcpListener::bind("127.0.0.1:9000").expect("server");
        let clients: Vec<std::net::TcpStream> = (0..50)
            .map(|_| std::net::TcpStream::connect("127.0.0.1:9000").expect("connect"))
            .collect();
        for c in &clients {
            assert!(ephemeral.contains(c.local_addr().expect("addr").port()));
        }
        let held = std::net::TcpListener::bind("0.0.0.0:40000").map(|_| ());
        assert_eq!(
            held.map_err(|e| e.kind()),
            Err(std::io::ErrorKind::AddrInUse)
        );

        let range = PortRange::clear_of(ephemeral);
        assert!(!range.overlaps(ephemeral), "{range}");
        let state = Svc::tcp(&["127.0.0.11"]).state();
        let mode = open(rt);
        let mut applier = mode.applier(IpFamily::V4);
        applier
            .sync_full(&compiler_in(&state, range), &state)
            .expect("sync");
        let port = redirected_port().expect("redirected");
        assert!(range.contains(port), "{port} in {range}");
        assert!(listening(port), "listening on {port}");
        let reply = rt.block_on(request(sa("10.96.0.10:80"), None));
        assert_eq!(backend_of(&reply.expect("proxied")), "b1");
        drop((clients, server));
    });
}

/// `portRange` of one port, two services: the one left without a port is rejected (and
/// counted), the other is served; once a port is free again, the next full sync serves it.
#[test]
#[ignore = "needs root: network namespaces"]
fn a_full_port_range_rejects_the_service_port_left_over_and_serves_the_others() {
    run(|rt| {
        let range = PortRange::parse("20000-20000").expect("range");
        let web = Svc::tcp(&["127.0.0.11"]);
        let mut state = web.state();
        state.apply(Object::from(fixtures::mk_service(
            "dev",
            "api",
            "10.96.0.11",
            80,
        )));
        let ep = fixtures::mk_endpoint("127.0.0.11", "node-b");
        state.apply(Object::from(fixtures::mk_slice(
            "dev",
            "api",
            8080,
            vec![ep],
        )));
        let mode = open(rt);
        let mut applier = mode.applier(IpFamily::V4);
        applier
            .sync_full(&compiler_in(&state, range), &state)
            .expect("a full range is no failed sync");
        // dev/api comes first in name order and gets the one port.
        assert_eq!(redirected_port_of("10.96.0.11"), Some(20000));
        assert_eq!(redirected_port(), None);
        let reply = rt.block_on(request(sa("10.96.0.11:80"), None));
        assert_eq!(backend_of(&reply.expect("api proxied")), "b1");
        assert!(rt.block_on(request(sa("10.96.0.10:80"), None)).is_err());
        let stats = mode.proxy_metrics().expect("the mode's proxy");
        assert_eq!(stats.without_proxy_port(), [(IpFamily::V4, 1)]);

        // dev/api goes. Its port is not given in the sync that closes its listener (web's
        // listener would find it busy, and the port would be marked unusable for good), but
        // in the next one.
        state.delete(&ObjectKey::Service(ServiceName::new("dev", "api")));
        for _ in 0..2 {
            applier
                .sync_full(&compiler_in(&state, range), &state)
                .expect("sync");
        }
        assert_eq!(redirected_port_of("10.96.0.11"), None);
        assert_eq!(redirected_port(), Some(20000));
        let reply = rt.block_on(request(sa("10.96.0.10:80"), None));
        assert_eq!(backend_of(&reply.expect("web proxied")), "b1");
        assert_eq!(stats.without_proxy_port(), [(IpFamily::V4, 0)]);
    });
}
