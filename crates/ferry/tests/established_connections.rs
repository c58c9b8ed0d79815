//! A connection on the node's own address, open before Ferry's first rules, keeps working
//! after them; and one opened after them that no service rule DNATed keeps its source port.
//!
//! Before Ferry's first sync a fresh network namespace has no conntrack hooks, so conntrack
//! first sees such a connection mid-stream and takes the first packet it sees, in either
//! direction, for a new connection. When that endpoint is also a Service's (a host-network
//! endpoint: the `kubernetes` Service's API server on a control-plane node), nftables mode's
//! hairpin rule (`endpoint . endpoint`, source and destination the same address) once matched
//! it and masqueraded the server's reply from another source port: the client's kernel reset
//! it, the server saw the reset, and the client waited for data that never came (the watch
//! stall of the side-by-side benchmark). The rule now asks for DNATed connections only, as
//! upstream's rule in the endpoint's chain does.

#[path = "support/node_ns.rs"]
mod node_ns;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use node_ns::{wait_log, NodeNs, NODE};

const NODE_IP: &str = "10.1.1.9";
const PORT: u16 = 6443;

/// The node, and the `kubernetes` Service whose one endpoint is the node's own address (an
/// API server on the host network).
fn manifests(ns: &NodeNs) -> std::path::PathBuf {
    let dir = ns.dir.path().join("manifests");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let yaml = format!(
        "apiVersion: v1
kind: Node
metadata:
  name: {NODE}
status:
  addresses:
  - type: InternalIP
    address: {NODE_IP}
---
apiVersion: v1
kind: Service
metadata:
  name: kubernetes
  namespace: default
spec:
  clusterIP: 10.96.0.1
  ports:
  - name: https
    port: 443
    protocol: TCP
    targetPort: {PORT}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: kubernetes
  namespace: default
  labels:
    kubernetes.io/service-name: kubernetes
addressType: IPv4
ports:
- name: https
  port: {PORT}
  protocol: TCP
endpoints:
- addresses: [\"{NODE_IP}\"]
  nodeName: {NODE}
  conditions: {{ready: true}}
"
    );
    std::fs::write(dir.join("cluster.yaml"), yaml).expect("write manifests");
    dir
}

/// Sends `what` on `from` and reads it on `to` (at most 5 s).
/// (The writer runs on a thread of its own: `what` may be larger than the sockets' buffers.)
fn pass(from: &mut TcpStream, to: &mut TcpStream, what: &[u8]) -> Result<(), String> {
    to.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let mut got = vec![0; what.len()];
    let (wrote, read) = std::thread::scope(|s| {
        let writer = s.spawn(|| from.write_all(what));
        let read = to.read_exact(&mut got);
        (writer.join().expect("writer"), read)
    });
    wrote.map_err(|e| format!("write: {e}"))?;
    read.map_err(|e| format!("read: {e}"))?;
    if got != what {
        return Err(format!("read {got:?}, sent {what:?}"));
    }
    Ok(())
}

#[test]
#[ignore = "needs root: network namespaces"]
fn a_connection_to_a_host_network_endpoint_survives_the_first_sync_and_is_not_masqueraded() {
    let ns = NodeNs::new("estab");
    let dir = manifests(&ns);
    let (listener, mut client, mut server) = ferry_lab::netns::run_in(&ns.name, || {
        let listener = TcpListener::bind((NODE_IP, PORT)).expect("bind");
        let client = TcpStream::connect((NODE_IP, PORT)).expect("connect");
        let (server, _) = listener.accept().expect("accept");
        (listener, client, server)
    })
    .expect("enter the namespace");
    // A "list" of 4 MiB, so the connection has carried data (and grown its window) as an API
    // client's does before its watch.
    pass(&mut server, &mut client, &vec![b'l'; 4 << 20]).expect("before ferry");
    let tracked = ns.run("conntrack", &["-L", "-p", "tcp", "--orig-port-dst", "6443"]);
    assert!(
        !String::from_utf8_lossy(&tracked.stdout).contains("dport=6443"),
        "conntrack must not have seen the connection open: {tracked:?}"
    );

    let ferry = ns.spawn_ferry(&dir, &[], None, &[]);
    wait_log(&ferry, "synced rules", 1);

    // The server speaks first (a watch event), then the client.
    pass(&mut server, &mut client, b"event").unwrap_or_else(|e| {
        panic!(
            "server → client after the first sync: {e}\n{}",
            ns.run("nft", &["list", "table", "ip", "ferry"]).status
        )
    });
    pass(&mut client, &mut server, b"request").expect("client → server after the first sync");

    // A new connection to the node's own address that no service rule DNATed keeps its
    // source port (no hairpin masquerade).
    let (mut fresh, mut accepted, local, peer) = ferry_lab::netns::run_in(&ns.name, || {
        let fresh = TcpStream::connect((NODE_IP, PORT)).expect("connect");
        let (accepted, peer) = listener.accept().expect("accept");
        let local = fresh.local_addr().expect("local address");
        (fresh, accepted, local, peer)
    })
    .expect("enter the namespace");
    assert_eq!(
        peer, local,
        "the server sees the client's own address and port"
    );
    pass(&mut fresh, &mut accepted, b"hello").expect("a fresh connection");
    let log = ferry.log();
    assert!(log.contains("synced rules"), "{log}");
}
