//! The benchmark's lab: three network namespaces and the cluster the node serves.
//!
//! ```text
//! client 10.1.1.100 ──veth── 10.1.1.9 node 10.2.0.1 ──veth── 10.2.0.2 server ("pod")
//! ```
//!
//! The client reaches three ClusterIPs through the node, each with one endpoint on the
//! server: `bulk` (10.96.0.10:80 → :8080, a sink), `rr` (10.96.0.11:80 → :8081, one byte
//! each way, then the server closes) and `idle` (10.96.0.12:80 → :8082, one byte each way,
//! then the connection stays open).

use std::io::Write as _;
use std::process::{Command, Stdio};

use anyhow::{ensure, Context as _};

use ferry_bench::netns::{self, Netns, PREFIX};
use ferry_compile::config::LocalDetector;
use ferry_compile::userspace::{self, PortRange, ProxyPorts};
use ferry_compile::{nft, CompileConfig, Plan};
use ferry_model::fixtures::{mk_endpoint, mk_node, mk_service, mk_slice};
use ferry_model::{ClusterState, IpFamily, NodeContext, NodeView, Object};

/// The services: name, ClusterIP, server port.
pub const SERVICES: [(&str, &str, u16); 3] = [
    ("bulk", "10.96.0.10", 8080),
    ("rr", "10.96.0.11", 8081),
    ("idle", "10.96.0.12", 8082),
];
/// The server's address.
pub const SERVER: &str = "10.2.0.2";

/// The namespaces of one run, deleted when dropped.
pub struct Lab {
    pub client: Netns,
    pub node: Netns,
    pub server: Netns,
}

fn ip(ns: &Netns, args: &str) -> anyhow::Result<()> {
    let args: Vec<&str> = args.split_whitespace().collect();
    netns::run(Command::new("ip").args(["-n", ns.name()]).args(&args)).map(|_| ())
}

fn sysctl(ns: &Netns, setting: &str) -> anyhow::Result<()> {
    netns::run(&mut ns.command("sysctl", ["-q", "-w", setting])).map(|_| ())
}

impl Lab {
    /// Builds the namespaces, links, addresses and routes.
    pub fn build() -> anyhow::Result<Lab> {
        let pid = std::process::id();
        let ns = |role: &str| Netns::create(&format!("{PREFIX}{pid}-us-{role}"));
        let lab = Lab {
            client: ns("client")?,
            node: ns("node")?,
            server: ns("server")?,
        };
        let (c, n, s) = (&lab.client, &lab.node, &lab.server);
        for ns in [c, n, s] {
            ip(ns, "link set lo up")?;
        }
        ip(
            n,
            &format!("link add c0 type veth peer name eth0 netns {}", c.name()),
        )?;
        ip(
            n,
            &format!("link add s0 type veth peer name eth0 netns {}", s.name()),
        )?;
        ip(n, "addr add 10.1.1.9/24 dev c0")?;
        ip(n, "addr add 10.2.0.1/24 dev s0")?;
        ip(n, "link set c0 up")?;
        ip(n, "link set s0 up")?;
        ip(c, "addr add 10.1.1.100/24 dev eth0")?;
        ip(c, "link set eth0 up")?;
        ip(c, "route add 10.96.0.0/16 via 10.1.1.9")?;
        ip(s, "addr add 10.2.0.2/24 dev eth0")?;
        ip(s, "link set eth0 up")?;
        ip(s, "route add default via 10.2.0.1")?;
        sysctl(n, "net.ipv4.ip_forward=1")?;
        // Tens of thousands of short connections: every port, and TIME_WAIT reuse.
        for ns in [c, n, s] {
            sysctl(ns, "net.ipv4.ip_local_port_range=1024 65535")?;
            sysctl(ns, "net.ipv4.tcp_tw_reuse=1")?;
            sysctl(ns, "net.core.somaxconn=4096")?;
        }
        // The server closes the short connections first, so their TIME_WAIT would pile up
        // there (tens of thousands per run), and the kernel path's masquerade picks random
        // source ports that end up colliding with them: SYNs to a TIME_WAIT 4-tuple stall,
        // and the later runs of the kernel path measure that, not NAT. The server keeps no
        // TIME_WAIT, for both paths alike.
        sysctl(s, "net.ipv4.tcp_max_tw_buckets=0")?;
        Ok(lab)
    }
}

/// The cluster: node `node-a` (10.1.1.9, pods 10.2.0.0/24), the three services, their
/// endpoint on `node-b` (the server namespace plays a pod of another node).
pub fn plan() -> Plan {
    let mut state = ClusterState::new();
    for (name, cluster_ip, port) in SERVICES {
        state.apply(Object::from(mk_service("bench", name, cluster_ip, 80)));
        let ep = mk_endpoint(SERVER, "node-b");
        state.apply(Object::from(mk_slice("bench", name, port, vec![ep])));
    }
    state.apply(Object::from(mk_node("node-a", "10.1.1.9", "10.2.0.0/24")));
    let cfg = CompileConfig {
        local_detector: LocalDetector::ClusterCidr(vec!["10.2.0.0/16".parse().expect("cidr")]),
        ..CompileConfig::default()
    };
    let ctx = NodeContext {
        node_name: "node-a".into(),
        family: IpFamily::V4,
    };
    Plan::build(&NodeView::build(&state, &ctx), &cfg)
}

/// The proxy ports of the plan's service ports (the default range, in name order).
pub fn proxy_ports(plan: &Plan) -> ProxyPorts {
    let mut ports = ProxyPorts::new(PortRange::DEFAULT);
    for name in plan.services.keys() {
        ports.assign(name).expect("a free proxy port");
    }
    ports
}

/// Loads an `nft -f` script in `ns`.
fn nft(ns: &Netns, script: &str) -> anyhow::Result<()> {
    let mut child = ns
        .command("nft", ["-f", "-"])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("run nft")?;
    child
        .stdin
        .take()
        .context("nft stdin")?
        .write_all(script.as_bytes())?;
    let out = child.wait_with_output()?;
    ensure!(
        out.status.success(),
        "nft -f: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

/// Kernel NAT: Ferry's nftables-mode table (DNAT to the endpoint, masquerade).
pub fn load_kernel_nat(node: &Netns, plan: &Plan) -> anyhow::Result<()> {
    let table = nft::render(plan).to_string();
    nft(
        node,
        &format!("add table ip ferry\ndelete table ip ferry\n{table}"),
    )
}

/// The userspace mode's table (redirects to the proxy ports), replacing the kernel NAT one.
pub fn load_userspace(node: &Netns, plan: &Plan) -> anyhow::Result<()> {
    let rules = userspace::render(plan, &proxy_ports(plan));
    nft(
        node,
        &nft::Transaction::full(&rules.ruleset, &[], true).text,
    )
}
