//! iptables mode's nfacct counters with the real kernel, in network namespaces of the test's
//! own (both backends): the node's `ferry run` creates `ct_state_invalid_dropped_pkts` and
//! `localhost_nps_accepted_pkts`, names them in the invalid-packet drop and the localhost
//! NodePort count, and `/metrics` shows what they counted: connections to
//! `127.0.0.1:NODEPORT` made on the node, and TCP packets with SYN and FIN both set that a
//! client behind the node sends through it (conntrack marks them invalid; `KUBE-FORWARD`
//! drops them).

#[path = "support/node_ns.rs"]
mod node_ns;

use std::net::{Ipv4Addr, SocketAddrV4, TcpStream};
use std::process::Command;
use std::time::{Duration, Instant};

use ferry_lab::netns;
use node_ns::{seed, wait_log, NodeNs};

const INVALID: &str = "kubeproxy_iptables_ct_state_invalid_dropped_packets_total";
const LOCALHOST: &str = "kubeproxy_iptables_localhost_nodeports_accepted_packets_total";
/// The seed's NodePort (dev/url-analysis, with endpoints).
const NODE_PORT: u16 = 32223;
const CLIENT_IP: Ipv4Addr = Ipv4Addr::new(10, 1, 1, 50);
/// Beyond the node: routed out of a veth there that leads nowhere.
const BEYOND: Ipv4Addr = Ipv4Addr::new(10, 2, 0, 7);

fn ip(ns: &str, cmd: &str) {
    let out = Command::new("ip")
        .args(["-n", ns])
        .args(cmd.split(' '))
        .output()
        .expect("ip");
    assert!(out.status.success(), "ip -n {ns} {cmd}: {out:?}");
}

/// A client namespace on the node's veth peer, routed through the node (deleted on drop,
/// also after a panic).
struct Client(String);

impl Drop for Client {
    fn drop(&mut self) {
        let _ = netns::destroy(std::slice::from_ref(&self.0));
    }
}

fn client_behind(node: &NodeNs) -> Client {
    let client = Client(format!("{}c", node.name));
    netns::add(std::slice::from_ref(&client.0)).expect("ip netns add");
    ip(&node.name, &format!("link set v1 netns {}", client.0));
    for cmd in [
        "link set lo up",
        &format!("addr add {CLIENT_IP}/24 dev v1"),
        "link set v1 up",
        "route add default via 10.1.1.9",
    ] {
        ip(&client.0, cmd);
    }
    for cmd in [
        "link add d0 type veth peer name d1",
        "link set d0 up",
        "link set d1 up",
        "route add 10.2.0.0/24 dev d0",
    ] {
        ip(&node.name, cmd);
    }
    netns::sysctl(&node.name, &[("net.ipv4.ip_forward", "1")]).expect("ip_forward");
    client
}

/// A TCP header with SYN and FIN set (a combination conntrack marks invalid), checksummed.
fn syn_fin(src: Ipv4Addr, dst: Ipv4Addr, sport: u16, dport: u16) -> [u8; 20] {
    let mut h = [0u8; 20];
    h[0..2].copy_from_slice(&sport.to_be_bytes());
    h[2..4].copy_from_slice(&dport.to_be_bytes());
    h[4..8].copy_from_slice(&1u32.to_be_bytes());
    h[12] = 5 << 4;
    h[13] = 0x03;
    h[14..16].copy_from_slice(&1024u16.to_be_bytes());
    let mut pseudo = Vec::new();
    pseudo.extend(src.octets());
    pseudo.extend(dst.octets());
    pseudo.extend([0, 6, 0, 20]);
    pseudo.extend(h);
    let mut sum: u32 = pseudo
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    h[16..18].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    h
}

/// Sends `n` SYN+FIN packets from the client to [`BEYOND`], through the node.
fn send_invalid(client: &Client, n: u16) {
    use socket2::{Domain, Protocol, Socket, Type};
    netns::run_in(&client.0, || {
        let s = Socket::new(Domain::IPV4, Type::RAW, Some(Protocol::TCP)).expect("raw socket");
        let to = SocketAddrV4::new(BEYOND, 0).into();
        for i in 0..n {
            let packet = syn_fin(CLIENT_IP, BEYOND, 40000 + i, 80);
            s.send_to(&packet, &to).expect("send");
        }
    })
    .expect("in the client");
}

/// Opens and closes `n` connections to `127.0.0.1:NODE_PORT` on the node (a refused one
/// counts too: its SYN went through nat `OUTPUT`).
fn connect_localhost(node: &NodeNs, n: usize) {
    netns::run_in(&node.name, || {
        for _ in 0..n {
            let to = SocketAddrV4::new(Ipv4Addr::LOCALHOST, NODE_PORT).into();
            let _ = TcpStream::connect_timeout(&to, Duration::from_secs(5));
        }
    })
    .expect("in the node");
}

/// `series`' value on the node's `/metrics`, if it is there.
fn metric(node: &NodeNs, series: &str) -> Option<u64> {
    let out = node.run("curl", &["-s", "http://127.0.0.1:10249/metrics"]);
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

/// Waits (at most 30 s) until `series` reaches `want` (packets cross veth asynchronously),
/// then checks it is exactly that.
fn expect_metric(node: &NodeNs, series: &str, want: u64) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while metric(node, series).is_none_or(|v| v < want) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(metric(node, series), Some(want), "{series}");
}

fn counts_into_nfacct(backend: &str, tag: &str) {
    let node = NodeNs::new(tag);
    let client = client_behind(&node);
    let extra = ["--proxy-mode", "iptables", "--iptables-backend", backend];
    let ferry = node.spawn_ferry(&seed(), &extra, None, &[]);
    let log = wait_log(&ferry, "synced rules", 1);
    for warning in ["nfacct is not available", "do without those counters"] {
        assert!(!log.contains(warning), "{log}");
    }
    let save = |table: &str| {
        let out = node.run(&format!("iptables-{backend}-save"), &["-t", table]);
        // Spaces collapsed: iptables prints `--nfacct-name  NAME`.
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let filter = save("filter");
    assert!(
        filter.contains("-m nfacct --nfacct-name ct_state_invalid_dropped_pkts -j DROP"),
        "{filter}"
    );
    let nat = save("nat");
    let counted =
        format!("--dport {NODE_PORT} -m nfacct --nfacct-name localhost_nps_accepted_pkts");
    assert!(nat.contains(&counted), "{nat}");
    assert_eq!(metric(&node, INVALID), Some(0));
    assert_eq!(metric(&node, LOCALHOST), Some(0));
    connect_localhost(&node, 2);
    send_invalid(&client, 3);
    expect_metric(&node, LOCALHOST, 2);
    expect_metric(&node, INVALID, 3);
}

#[test]
#[ignore = "needs root: network namespaces"]
fn iptables_mode_counts_invalid_and_localhost_node_port_packets_nft_backend() {
    counts_into_nfacct("nft", "acctn");
}

#[test]
#[ignore = "needs root: network namespaces"]
fn iptables_mode_counts_invalid_and_localhost_node_port_packets_legacy_backend() {
    counts_into_nfacct("legacy", "acctl");
}
