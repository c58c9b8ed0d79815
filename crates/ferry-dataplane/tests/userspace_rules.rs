//! The userspace mode end to end: the redirect rules of `ferry_compile::userspace` loaded with
//! `nft` in the node's network namespace, the engine serving the proxy ports, and a client
//! in a second namespace on a veth LAN (10.1.1.0/24: node .9, client .100).

mod support;
#[path = "support/userspace.rs"]
mod us;

use std::io::Write as _;
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::Duration;

use ferry_compile::nft;
use ferry_compile::userspace::{self, PortRange, ProxyPorts};
use ferry_dataplane::nft::NftDataplane;
use ferry_dataplane::userspace::{ProxyConfig, UserspaceProxy};
use ferry_model::{IpFamily, TrafficPolicy};
use tokio::net::{TcpStream, UdpSocket};

use us::{backend_of, request, Svc};

/// The client's named network namespace, deleted on drop.
struct ClientNs(String);

impl Drop for ClientNs {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

/// Called in the node's namespace: a LAN to a new client namespace, routes to the service
/// range on both sides.
fn lan(tag: &str) -> ClientNs {
    let ns = ClientNs(format!("ferry-us-{tag}-{}", std::process::id()));
    us::ip(&["netns", "add", &ns.0]);
    us::ip(&["link", "set", "lo", "up"]);
    us::ip(&[
        "link", "add", "eth0", "type", "veth", "peer", "name", "peer0",
    ]);
    us::ip(&["link", "set", "peer0", "netns", &ns.0]);
    us::ip(&["addr", "add", "10.1.1.9/24", "dev", "eth0"]);
    us::ip(&["link", "set", "eth0", "up"]);
    // Service addresses route to an uplink, as on a node (not back out of the LAN interface:
    // the kernel then sends an ICMP redirect first, and rate-limits the reject's ICMP error).
    us::ip(&["link", "add", "up0", "type", "veth", "peer", "name", "up1"]);
    us::ip(&["link", "set", "up0", "up"]);
    us::ip(&["link", "set", "up1", "up"]);
    us::ip(&["route", "add", "10.96.0.0/16", "dev", "up0"]);
    // A node forwards (what is not redirected to the proxy, the filter chains see there).
    let ok = Command::new("sysctl")
        .args(["-qw", "net.ipv4.ip_forward=1"])
        .status()
        .expect("sysctl");
    assert!(ok.success());
    let n = ns.0.as_str();
    us::ip(&["-n", n, "link", "set", "lo", "up"]);
    us::ip(&["-n", n, "addr", "add", "10.1.1.100/24", "dev", "peer0"]);
    us::ip(&["-n", n, "link", "set", "peer0", "up"]);
    us::ip(&["-n", n, "route", "add", "10.96.0.0/16", "via", "10.1.1.9"]);
    ns
}

/// Runs `f` on a thread in the client's namespace, with a runtime of its own.
fn from_client<T, Fut>(ns: &ClientNs, f: impl FnOnce() -> Fut + Send + 'static) -> T
where
    T: Send + 'static,
    Fut: std::future::Future<Output = T>,
{
    let path = format!("/run/netns/{}", ns.0);
    std::thread::spawn(move || {
        let file = std::fs::File::open(&path).expect("client netns");
        nix::sched::setns(file, nix::sched::CloneFlags::CLONE_NEWNET).expect("setns");
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(f())
    })
    .join()
    .expect("client thread")
}

/// The service's rules and its proxy port.
fn rules(svc: &Svc) -> (userspace::Rules, u16) {
    let plan = svc.plan();
    let mut ports = ProxyPorts::new(PortRange::DEFAULT);
    let name = plan.services.keys().next().expect("a port").clone();
    let port = ports.assign(&name).expect("proxy port");
    (userspace::render(&plan, &ports), port)
}

/// Loads the service's rules with `nft -f` and serves it; the proxy port.
fn serve(proxy: &mut UserspaceProxy, svc: &Svc) -> u16 {
    let (rules, port) = rules(svc);
    let mut nft = Command::new("nft")
        .args(["-f", "-"])
        .stdin(Stdio::piped())
        .spawn()
        .expect("nft");
    let script = nft::Transaction::full(&rules.ruleset, &[], true).text;
    nft.stdin
        .take()
        .expect("stdin")
        .write_all(script.as_bytes())
        .expect("write");
    assert!(nft.wait().expect("nft").success(), "{script}");
    proxy_on(proxy, svc, port);
    port
}

/// Serves the service on `port`.
fn proxy_on(proxy: &mut UserspaceProxy, svc: &Svc, port: u16) {
    let plan = svc.plan();
    let report = proxy.sync_full(
        IpFamily::V4,
        plan.local.cidrs(),
        svc.proxied(Some(port), false),
    );
    assert!(report.failed.is_empty(), "{:?}", report.failed);
}

fn run(
    tag: &'static str,
    test: impl FnOnce(ClientNs, UserspaceProxy, &tokio::runtime::Runtime) + Send + 'static,
) {
    support::in_new_netns(move || {
        let ns = lan(tag);
        let rt = us::runtime();
        let proxy = UserspaceProxy::new(ProxyConfig::default(), rt.handle().clone());
        test(ns, proxy, &rt);
    });
}

fn sa(s: &str) -> SocketAddr {
    s.parse().expect("address")
}

#[test]
#[ignore = "needs root: network namespaces"]
fn cluster_ip_and_node_port_reach_the_proxy_from_outside_and_from_the_node() {
    run("tcp", |ns, mut proxy, rt| {
        rt.block_on(us::tcp_backend("127.0.0.11:8080", "b1"));
        let svc = Svc {
            node_port: Some((30080, TrafficPolicy::Cluster)),
            ..Svc::tcp(&["127.0.0.11"])
        };
        let port = serve(&mut proxy, &svc);
        for dst in ["10.96.0.10:80", "10.1.1.9:30080"] {
            // Redirected in prerouting (upstream's KUBE-PORTALS-CONTAINER / NODEPORT-CONTAINER).
            let reply = from_client(&ns, move || request(sa(dst), None));
            assert_eq!(backend_of(&reply.expect(dst)), "b1", "client → {dst}");
            // DNATed to the node's address in output (KUBE-PORTALS-HOST / NODEPORT-HOST).
            let reply = rt.block_on(request(sa(dst), None));
            assert_eq!(backend_of(&reply.expect(dst)), "b1", "node → {dst}");
        }
        // The proxy port itself is no way in.
        let direct = format!("10.1.1.9:{port}");
        let connected = from_client(&ns, move || async move {
            let c = TcpStream::connect(direct);
            matches!(
                tokio::time::timeout(Duration::from_secs(1), c).await,
                Ok(Ok(_))
            )
        });
        assert!(!connected, "direct connection to the proxy port");
        assert_eq!(proxy.metrics()[0].connections, 4);
    });
}

/// Asks the UDP service's ClusterIP; the reply and where it came from.
async fn ask() -> (String, SocketAddr) {
    let s = UdpSocket::bind("0.0.0.0:0").await.expect("bind");
    s.send_to(b"ping", "10.96.0.10:53").await.expect("send");
    let mut buf = [0u8; 64];
    let got = tokio::time::timeout(Duration::from_secs(5), s.recv_from(&mut buf));
    let (n, from) = got.await.expect("reply").expect("recv");
    (String::from_utf8_lossy(&buf[..n]).into_owned(), from)
}

#[test]
#[ignore = "needs root: network namespaces"]
fn udp_replies_come_from_the_service_address() {
    run("udp", |ns, mut proxy, rt| {
        rt.block_on(us::udp_backend("127.0.0.11:8080", "u1"));
        serve(&mut proxy, &Svc::udp(&["127.0.0.11"]));
        let (reply, from) = from_client(&ns, ask);
        assert_eq!((reply.as_str(), from), ("u1:ping", sa("10.96.0.10:53")));
        let (reply, from) = rt.block_on(ask());
        assert_eq!((reply.as_str(), from), ("u1:ping", sa("10.96.0.10:53")));
    });
}

#[test]
#[ignore = "needs root: network namespaces"]
fn local_policy_without_local_endpoint_drops_outsiders_and_serves_the_node() {
    run("local", |ns, mut proxy, rt| {
        rt.block_on(us::tcp_backend("127.0.0.11:8080", "b1"));
        // The endpoint is on another node: none here.
        let svc = Svc {
            node_port: Some((30080, TrafficPolicy::Local)),
            ..Svc::tcp(&["127.0.0.11"])
        };
        serve(&mut proxy, &svc);
        let dropped = from_client(&ns, || async {
            let c = TcpStream::connect("10.1.1.9:30080");
            tokio::time::timeout(Duration::from_secs(1), c)
                .await
                .is_err()
        });
        assert!(dropped, "the client times out (dropped, not refused)");
        let reply = rt.block_on(request(sa("10.1.1.9:30080"), None));
        assert_eq!(backend_of(&reply.expect("node → NodePort")), "b1");
    });
}

#[test]
#[ignore = "needs root: network namespaces"]
fn the_nftables_applier_installs_the_userspace_table_over_netlink() {
    run("netlink", |ns, mut proxy, rt| {
        rt.block_on(us::tcp_backend("127.0.0.11:8080", "b1"));
        let svc = Svc::tcp(&["127.0.0.11"]);
        let (table, port) = rules(&svc);
        let mut dp = NftDataplane::new();
        let report = dp.apply_full(table.ruleset).expect("full sync");
        assert!(report.netlink, "elements went over netlink");
        let map = support::nft(&["list", "map", "ip", "ferry", "portals"]);
        assert!(
            map.contains(&format!(
                "10.96.0.10 . tcp . 80 comment \"dev/web:http\" : {port}"
            )),
            "{map}"
        );
        let plan = svc.plan();
        proxy.sync_full(
            IpFamily::V4,
            plan.local.cidrs(),
            svc.proxied(Some(port), false),
        );
        let reply = from_client(&ns, || request(sa("10.96.0.10:80"), None));
        assert_eq!(backend_of(&reply.expect("proxied")), "b1");

        // The service loses its endpoints: an element-only change, and the kernel refuses.
        let (gone, _) = rules(&Svc::tcp(&[]));
        let changes = gone
            .ruleset
            .services
            .clone()
            .into_iter()
            .map(|(n, r)| (n, Some(r)));
        dp.apply_changes(changes.collect())
            .expect("incremental sync");
        let map = support::nft(&["list", "map", "ip", "ferry", "portals"]);
        assert!(!map.contains("10.96.0.10"), "{map}");
        let refused = from_client(&ns, || request(sa("10.96.0.10:80"), None));
        let kind = refused.expect_err("rejected").kind();
        assert_eq!(kind, std::io::ErrorKind::ConnectionRefused);
    });
}
