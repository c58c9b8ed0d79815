//! Helpers of the userspace proxy tests: a service built from the model and planned for a
//! node, echo backends, and clients, all on real sockets in the test's network namespace.

#![allow(dead_code)]

use std::net::{IpAddr, SocketAddr};
use std::process::Command;
use std::time::Duration;

use ferry_compile::{CompileConfig, Plan, ServicePlan};
use ferry_dataplane::userspace::ProxiedPort;
use ferry_model::fixtures::*;
use ferry_model::{ClusterState, IpFamily, NodeContext, NodeView, Object, Protocol};
use ferry_model::{SessionAffinity, TrafficPolicy};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, UdpSocket};

/// The node the tests plan for, and its address.
pub const NODE: &str = "node-a";
pub const NODE_IP: &str = "10.1.1.9";

/// Brings `lo` up (a new network namespace has it down) and runs `cmd` lines with `ip`.
pub fn ip(args: &[&str]) {
    let ok = Command::new("ip").args(args).status().expect("ip");
    assert!(ok.success(), "ip {args:?}");
}

/// A multi-threaded runtime of two workers, like the agent's on a 2-core node.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

/// A service `dev/web` (port `http`) with `endpoints` (addresses, all on `port` 8080).
#[derive(Clone)]
pub struct Svc {
    pub cluster_ip: &'static str,
    pub port: u16,
    pub protocol: Protocol,
    pub node_port: Option<(u16, TrafficPolicy)>,
    pub endpoints: Vec<(&'static str, &'static str)>,
    pub affinity: Option<u32>,
    pub family: IpFamily,
}

impl Svc {
    pub fn tcp(endpoints: &[&'static str]) -> Svc {
        Svc {
            cluster_ip: "10.96.0.10",
            port: 80,
            protocol: Protocol::Tcp,
            node_port: None,
            endpoints: endpoints.iter().map(|e| (*e, "node-b")).collect(),
            affinity: None,
            family: IpFamily::V4,
        }
    }

    /// The same service in IPv6 (ClusterIP fd00:10:96::10).
    pub fn v6(self) -> Svc {
        Svc {
            cluster_ip: "fd00:10:96::10",
            family: IpFamily::V6,
            ..self
        }
    }

    pub fn udp(endpoints: &[&'static str]) -> Svc {
        Svc {
            port: 53,
            protocol: Protocol::Udp,
            ..Svc::tcp(endpoints)
        }
    }

    pub fn state(&self) -> ClusterState {
        let mut state = ClusterState::new();
        let mut svc = mk_service("dev", "web", self.cluster_ip, self.port);
        if let Some((np, policy)) = self.node_port {
            svc = with_node_port(svc, np, policy);
        }
        svc.ports[0].protocol = self.protocol;
        if let Some(timeout_seconds) = self.affinity {
            svc.session_affinity = SessionAffinity::ClientIp { timeout_seconds };
        }
        state.apply(Object::from(svc));
        let eps = self
            .endpoints
            .iter()
            .map(|(a, n)| mk_endpoint(a, n))
            .collect();
        let mut slice = mk_slice("dev", "web", 8080, eps);
        slice.ports[0].protocol = self.protocol;
        slice.family = self.family;
        state.apply(Object::from(slice));
        let mut node = mk_node(NODE, NODE_IP, "10.244.1.0/24");
        node.addresses.push(ferry_model::NodeAddress {
            kind: ferry_model::NodeAddressType::InternalIp,
            address: "fd00:10:1::9".parse().expect("ip"),
        });
        state.apply(Object::from(node));
        state
    }

    /// The node's plan (pod CIDRs: the cluster CIDR 10.244.0.0/16).
    pub fn plan(&self) -> Plan {
        let cfg = CompileConfig {
            family: self.family,
            local_detector: ferry_compile::config::LocalDetector::ClusterCidr(vec![
                "10.244.0.0/16".parse().expect("cidr"),
                "fd00:10:244::/48".parse().expect("cidr"),
            ]),
            ..CompileConfig::default()
        };
        let ctx = NodeContext {
            node_name: NODE.into(),
            family: self.family,
        };
        Plan::build(&NodeView::build(&self.state(), &ctx), &cfg)
    }

    pub fn service_plan(&self) -> ServicePlan {
        self.plan()
            .services
            .into_values()
            .next()
            .expect("one service port")
    }

    /// The service port served on `proxy_port`.
    pub fn proxied(&self, proxy_port: Option<u16>, localhost: bool) -> Vec<ProxiedPort> {
        vec![ProxiedPort {
            plan: self.service_plan(),
            proxy_port,
            localhost_node_port: localhost,
        }]
    }
}

/// A TCP backend: greets with its name, echoes what it reads until end-of-file, then writes
/// `bye` and closes. Runs until the runtime ends.
pub async fn tcp_backend(addr: &str, name: &'static str) {
    let listener = TcpListener::bind(addr).await.expect("backend listens");
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let _ = s.write_all(format!("{name}\n").as_bytes()).await;
                let mut buf = vec![0; 65536];
                loop {
                    match s.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            if s.write_all(&buf[..n]).await.is_err() {
                                return;
                            }
                        }
                    }
                }
                let _ = s.write_all(b"bye\n").await;
            });
        }
    });
}

/// A UDP backend: answers each datagram with `name:payload`.
pub async fn udp_backend(addr: &str, name: &'static str) {
    let sock = UdpSocket::bind(addr).await.expect("backend binds");
    tokio::spawn(async move {
        let mut buf = vec![0; 65536];
        loop {
            let Ok((n, from)) = sock.recv_from(&mut buf).await else {
                return;
            };
            let mut reply = format!("{name}:").into_bytes();
            reply.extend_from_slice(&buf[..n]);
            let _ = sock.send_to(&reply, from).await;
        }
    });
}

/// Connects to `to` (from `from` when given), sends `hello`, half-closes, and returns
/// everything the other side wrote until it closed: `NAME\nhello bye\n` from a backend.
pub async fn request(to: SocketAddr, from: Option<IpAddr>) -> std::io::Result<String> {
    let sock = if to.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    if let Some(ip) = from {
        sock.bind(SocketAddr::new(ip, 0))?;
    }
    let mut s = tokio::time::timeout(Duration::from_secs(5), sock.connect(to)).await??;
    s.write_all(b"hello ").await?;
    s.shutdown().await?;
    let mut out = String::new();
    tokio::time::timeout(Duration::from_secs(5), s.read_to_string(&mut out)).await??;
    Ok(out)
}

/// The backend that answered a [`request`].
pub fn backend_of(reply: &str) -> &str {
    reply.lines().next().unwrap_or("")
}

/// Polls `f` every 20 ms for up to 5 s; true once it holds.
pub async fn eventually(mut f: impl FnMut() -> bool) -> bool {
    for _ in 0..250 {
        if f() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}
