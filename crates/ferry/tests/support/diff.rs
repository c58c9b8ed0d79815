//! The differential test's generated Services, the connections made to them, and their
//! outcomes (`kube_proxy_diff.rs`).
//!
//! Every Service gets addresses from its index `i`: ClusterIP `10.96.100.<10+i>`, NodePort
//! `30100+i` (and `healthCheckNodePort` `31100+i` where there is one), load-balancer IPs `198.18.0.<10+i>` (routed to k8s-node2 by the clients) and
//! `198.18.2.<10+i>` (routed to k8s-master), external IP `198.18.1.<10+i>` (routed to
//! k8s-node1). The endpoints are the same few Pods for every Service, chosen by label.

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::io::ErrorKind;
use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

use ferry_lab::spec::{MASTER, NODE1, NODE2};
use ferry_lab::{CurlOptions, CurlResult, Host, Lab};

/// The probing Pod's name and address (a lab pod on k8s-master: a client in a Pod's network
/// namespace, with a Pod IP; not an endpoint of anything).
pub const PROBE_POD: (&str, &str) = ("probe", "192.168.235.250");
/// The second outside client (outside every `loadBalancerSourceRanges`).
pub const CLIENT2: (&str, &str) = ("client2", "10.1.1.101");
pub const MASTER_IP: &str = "10.1.1.12";
pub const NODE1_IP: &str = "10.1.1.17";
pub const NODE2_IP: &str = "10.1.1.9";

/// The endpoint Pods: (name, IP, node, app label, probe failing at first).
pub const PODS: [(&str, &str, &str, &str, bool); 5] = [
    ("web-a", "192.168.169.166", NODE2, "web", false),
    ("web-b", "192.168.169.168", NODE2, "web", false),
    ("web-c", "192.168.36.70", NODE1, "web", false),
    ("sick", "192.168.36.71", NODE1, "sick", true),
    ("term", "192.168.169.170", NODE2, "term", false),
];

/// Which Pods a Service selects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Eps {
    /// web-a, web-b (k8s-node2), web-c (k8s-node1): ready.
    Web,
    /// No Pod.
    None,
    /// `sick`, failing its probe: not ready.
    NotReady,
    /// `term`, deleted with a long grace period: serving and terminating.
    Terminating,
}

impl Eps {
    fn app(self) -> &'static str {
        match self {
            Eps::Web => "web",
            Eps::None => "nothing",
            Eps::NotReady => "sick",
            Eps::Terminating => "term",
        }
    }

    /// Every Pod name that could ever answer.
    fn servers(self) -> BTreeSet<&'static str> {
        PODS.iter()
            .filter(|p| p.3 == self.app())
            .map(|p| p.0)
            .collect()
    }
}

/// A Service's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    ClusterIp,
    NodePort,
    /// `type: LoadBalancer` with two ingress IPs in its status; `proxy`: `ipMode: Proxy`.
    LoadBalancer {
        proxy: bool,
    },
}

/// One generated Service.
#[derive(Debug, Clone)]
pub struct Shape {
    pub index: u8,
    pub name: String,
    pub kind: Kind,
    pub external_ips: bool,
    pub etp_local: bool,
    pub itp_local: bool,
    pub affinity: bool,
    pub source_ranges: bool,
    pub eps: Eps,
    pub udp: bool,
}

impl Shape {
    fn new(index: u8, name: &str, kind: Kind, eps: Eps) -> Shape {
        Shape {
            index,
            name: name.to_owned(),
            kind,
            external_ips: false,
            etp_local: false,
            itp_local: false,
            affinity: false,
            source_ranges: false,
            eps,
            udp: false,
        }
    }

    pub fn cluster_ip(&self) -> String {
        format!("10.96.100.{}", 10 + u16::from(self.index))
    }
    pub fn node_port(&self) -> u16 {
        30100 + u16::from(self.index)
    }
    pub fn health_check_node_port(&self) -> u16 {
        31100 + u16::from(self.index)
    }
    /// The ingress routed to k8s-node2, and the one routed to k8s-master.
    pub fn lb_ips(&self) -> [String; 2] {
        let h = 10 + u16::from(self.index);
        [format!("198.18.0.{h}"), format!("198.18.2.{h}")]
    }
    pub fn external_ip(&self) -> String {
        format!("198.18.1.{}", 10 + u16::from(self.index))
    }
    fn has_node_port(&self) -> bool {
        self.kind != Kind::ClusterIp
    }
    fn proto(&self) -> &'static str {
        if self.udp {
            "UDP"
        } else {
            "TCP"
        }
    }

    /// The Service's manifest.
    pub fn manifest(&self) -> String {
        let kind = match self.kind {
            Kind::ClusterIp => "ClusterIP",
            Kind::NodePort => "NodePort",
            Kind::LoadBalancer { .. } => "LoadBalancer",
        };
        let mut spec = format!(
            "  type: {kind}\n  clusterIP: {}\n  selector:\n    app: {}\n",
            self.cluster_ip(),
            self.eps.app()
        );
        if self.has_node_port() || self.external_ips {
            let p = if self.etp_local { "Local" } else { "Cluster" };
            spec.push_str(&format!("  externalTrafficPolicy: {p}\n"));
        }
        if self.etp_local && matches!(self.kind, Kind::LoadBalancer { .. }) {
            // Given, not allocated: an allocated one could take a later Service's NodePort.
            spec.push_str(&format!(
                "  healthCheckNodePort: {}\n",
                self.health_check_node_port()
            ));
        }
        if self.itp_local {
            spec.push_str("  internalTrafficPolicy: Local\n");
        }
        if self.affinity {
            spec.push_str("  sessionAffinity: ClientIP\n");
        }
        if self.source_ranges {
            spec.push_str("  loadBalancerSourceRanges: [10.1.1.100/32]\n");
        }
        if self.external_ips {
            spec.push_str(&format!("  externalIPs: [{}]\n", self.external_ip()));
        }
        let node_port = if self.has_node_port() {
            format!("\n    nodePort: {}", self.node_port())
        } else {
            String::new()
        };
        spec.push_str(&format!(
            "  ports:\n  - name: p\n    protocol: {}\n    port: 80\n    targetPort: 56010{node_port}\n",
            self.proto()
        ));
        format!(
            "---\napiVersion: v1\nkind: Service\nmetadata:\n  name: {}\n  namespace: diff\n\
             spec:\n{spec}",
            self.name
        )
    }

    /// The status patch giving a LoadBalancer its ingress IPs (`None` for other types).
    pub fn status_patch(&self) -> Option<String> {
        let Kind::LoadBalancer { proxy } = self.kind else {
            return None;
        };
        let mode = if proxy { r#","ipMode":"Proxy""# } else { "" };
        let ingress: Vec<String> = self
            .lb_ips()
            .iter()
            .map(|ip| format!(r#"{{"ip":"{ip}"{mode}}}"#))
            .collect();
        Some(format!(
            r#"{{"status":{{"loadBalancer":{{"ingress":[{}]}}}}}}"#,
            ingress.join(",")
        ))
    }

    /// The connections made to this Service: (client, target).
    pub fn probes(&self) -> Vec<Probe> {
        let mut out = Vec::new();
        let mut add = |client: Host, addr: String, port: u16, what: &'static str| {
            out.push(Probe {
                service: self.name.clone(),
                what,
                client,
                addr,
                port,
                udp: self.udp,
                health: what == "healthCheckNodePort",
                affinity: self.affinity,
                servers: self.eps.servers(),
            });
        };
        let pod = Host::pod(PROBE_POD.0);
        let client = Host::default_client();
        let cip = self.cluster_ip();
        add(pod.clone(), cip.clone(), 80, "ClusterIP");
        add(Host::node(MASTER), cip.clone(), 80, "ClusterIP");
        add(Host::node(NODE2), cip.clone(), 80, "ClusterIP");
        add(client.clone(), cip, 80, "ClusterIP");
        if self.has_node_port() {
            let np = self.node_port();
            for ip in [MASTER_IP, NODE1_IP, NODE2_IP] {
                add(client.clone(), ip.into(), np, "NodePort");
            }
            add(Host::node(MASTER), MASTER_IP.into(), np, "NodePort");
            add(Host::node(MASTER), "127.0.0.1".into(), np, "NodePort");
            add(pod.clone(), NODE2_IP.into(), np, "NodePort");
        }
        if let Kind::LoadBalancer { .. } = self.kind {
            let [via_node2, via_master] = self.lb_ips();
            add(client.clone(), via_node2.clone(), 80, "LB IP");
            add(client.clone(), via_master, 80, "LB IP");
            add(pod.clone(), via_node2.clone(), 80, "LB IP");
            add(Host::node(NODE1), via_node2.clone(), 80, "LB IP");
            if self.etp_local {
                for ip in [MASTER_IP, NODE1_IP, NODE2_IP] {
                    let port = self.health_check_node_port();
                    add(client.clone(), ip.into(), port, "healthCheckNodePort");
                }
            }
            if self.source_ranges {
                add(Host::client(CLIENT2.0), via_node2, 80, "LB IP");
            }
        }
        if self.external_ips {
            add(client, self.external_ip(), 80, "external IP");
            add(Host::node(MASTER), self.external_ip(), 80, "external IP");
        }
        out
    }
}

/// The small set the default test runs: one Service per shape the proxies treat differently.
pub fn small_set() -> Vec<Shape> {
    use Eps::*;
    use Kind::*;
    let lb = LoadBalancer { proxy: false };
    let mut v = vec![
        Shape::new(0, "cip", ClusterIp, Web),
        Shape::new(1, "cip-affinity", ClusterIp, Web),
        Shape::new(2, "cip-itp-local", ClusterIp, Web),
        Shape::new(3, "np-cluster", NodePort, Web),
        Shape::new(4, "np-local", NodePort, Web),
        Shape::new(5, "lb-local", lb, Web),
        Shape::new(6, "lb-proxy", LoadBalancer { proxy: true }, Web),
        Shape::new(7, "lb-ranges", lb, Web),
        Shape::new(8, "ext-ips", ClusterIp, Web),
        Shape::new(9, "np-none", NodePort, None),
        Shape::new(10, "np-not-ready", NodePort, NotReady),
        Shape::new(11, "np-terminating", NodePort, Terminating),
        Shape::new(12, "cip-udp", ClusterIp, Web),
    ];
    v[1].affinity = true;
    v[2].itp_local = true;
    v[4].etp_local = true;
    v[5].etp_local = true;
    v[7].source_ranges = true;
    v[8].external_ips = true;
    v[12].udp = true;
    v
}

/// The whole generated set (`FERRY_DIFF_FULL=1`): every type (ClusterIP, NodePort,
/// LoadBalancer, LoadBalancer with `ipMode: Proxy`, ClusterIP with external IPs) × both
/// external policies × both internal policies × session affinity or none × the four endpoint
/// sets, then source ranges and UDP on a few.
pub fn full_set() -> Vec<Shape> {
    let kinds = [
        (Kind::ClusterIp, false, "c"),
        (Kind::NodePort, false, "n"),
        (Kind::LoadBalancer { proxy: false }, false, "l"),
        (Kind::LoadBalancer { proxy: true }, false, "p"),
        (Kind::ClusterIp, true, "x"),
    ];
    let eps = [
        (Eps::Web, "web"),
        (Eps::None, "none"),
        (Eps::NotReady, "sick"),
        (Eps::Terminating, "term"),
    ];
    let mut v = Vec::new();
    for (kind, ext, k) in kinds {
        for etp in [false, true] {
            if etp && kind == Kind::ClusterIp && !ext {
                continue;
            }
            for itp in [false, true] {
                for aff in [false, true] {
                    for (e, en) in eps {
                        let index = u8::try_from(v.len()).expect("fewer than 240 Services");
                        let name = format!(
                            "{k}-{}-{}-{}-{en}",
                            if etp { "el" } else { "ec" },
                            if itp { "il" } else { "ic" },
                            if aff { "aff" } else { "noaff" }
                        );
                        let mut s = Shape::new(index, &name, kind, e);
                        s.external_ips = ext;
                        s.etp_local = etp;
                        s.itp_local = itp;
                        s.affinity = aff;
                        v.push(s);
                    }
                }
            }
        }
    }
    let extra = [
        (Kind::LoadBalancer { proxy: false }, false, true, "l-ranges"),
        (
            Kind::LoadBalancer { proxy: false },
            true,
            true,
            "l-el-ranges",
        ),
        (Kind::NodePort, false, false, "n-udp"),
        (Kind::NodePort, true, false, "n-el-udp"),
    ];
    for (kind, etp, ranges, name) in extra {
        let index = u8::try_from(v.len()).expect("fewer than 240 Services");
        let mut s = Shape::new(index, name, kind, Eps::Web);
        s.etp_local = etp;
        s.source_ranges = ranges;
        s.udp = !ranges;
        v.push(s);
    }
    v
}

/// One connection: a client, a destination, and what could answer.
#[derive(Debug, Clone)]
pub struct Probe {
    pub service: String,
    pub what: &'static str,
    pub client: Host,
    pub addr: String,
    pub port: u16,
    pub udp: bool,
    /// A `healthCheckNodePort` request (one try: its status and JSON body), not the echo app.
    pub health: bool,
    pub affinity: bool,
    /// Every Pod that could answer (tries stop once all of them have).
    pub servers: BTreeSet<&'static str>,
}

impl Probe {
    /// How the probe is named in the tables: `<service>: <client> → <ClusterIP|…> addr:port/proto`.
    pub fn key(&self) -> String {
        format!(
            "{}: {} → {} {}:{}/{}",
            self.service,
            self.client,
            self.what,
            self.addr,
            self.port,
            if self.udp { "udp" } else { "tcp" }
        )
    }
}

/// What a connection came to.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Outcome {
    /// Answered; by which Pods (over every try; `one (sticky)` for session affinity when one
    /// Pod answered all), and the source addresses they saw.
    Answered {
        servers: BTreeSet<String>,
        sources: BTreeSet<String>,
    },
    Refused,
    TimedOut,
    /// Anything else (reset, unreachable, an HTTP error), with what was seen.
    Other(String),
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Answered { servers, sources } => write!(
                f,
                "answered by {{{}}} seeing {{{}}}",
                servers.iter().cloned().collect::<Vec<_>>().join(", "),
                sources.iter().cloned().collect::<Vec<_>>().join(", ")
            ),
            Outcome::Refused => f.write_str("refused"),
            Outcome::TimedOut => f.write_str("timed out"),
            Outcome::Other(s) => write!(f, "other: {s}"),
        }
    }
}

/// The most tries a probe makes: with 3 possible Pods picked at random, all are seen within
/// 30 tries but with probability 3·(2/3)^30 ≈ 2·10⁻⁵.
const TRIES: usize = 30;

/// One try's result: (server name, source seen) or the failure.
fn try_once(lab: &Lab, p: &Probe) -> Result<(String, String), Outcome> {
    if p.udp {
        return udp_once(lab, p);
    }
    if p.health {
        return health_once(lab, p);
    }
    let url = format!("http://{}:{}/hello", p.addr, p.port);
    let opts = CurlOptions {
        connect_timeout: ferry_lab::scaled(Duration::from_millis(1500)),
        max_time: ferry_lab::scaled(Duration::from_secs(3)),
        extra_args: Vec::new(),
    };
    match lab.curl_with(&p.client, &url, &opts).expect("run curl") {
        CurlResult::Ok(body) => {
            let h = crate::seed::Hello::parse(&body);
            Ok((h.server_name, h.client_ip))
        }
        CurlResult::Refused => Err(Outcome::Refused),
        CurlResult::TimedOut => Err(Outcome::TimedOut),
        other => Err(Outcome::Other(format!("{other:?}"))),
    }
}

/// A health check as a load balancer makes it: the status and what the JSON body says, as
/// (`HTTP <status>`, `localEndpoints <n>, serviceProxyHealthy <b>`).
fn health_once(lab: &Lab, p: &Probe) -> Result<(String, String), Outcome> {
    let url = format!("http://{}:{}/", p.addr, p.port);
    let (status, body) = match lab.curl(&p.client, &url).expect("run curl") {
        CurlResult::Ok(body) => (200, body),
        CurlResult::Http { status, body } => (status, body),
        CurlResult::Refused => return Err(Outcome::Refused),
        CurlResult::TimedOut => return Err(Outcome::TimedOut),
        other => return Err(Outcome::Other(format!("{other:?}"))),
    };
    let json: serde_json::Value = serde_json::from_str(&body)
        .map_err(|e| Outcome::Other(format!("HTTP {status}, not JSON ({e}): {body:?}")))?;
    Ok((
        format!("HTTP {status}"),
        format!(
            "localEndpoints {}, serviceProxyHealthy {}",
            json["localEndpoints"], json["serviceProxyHealthy"]
        ),
    ))
}

fn udp_once(lab: &Lab, p: &Probe) -> Result<(String, String), Outcome> {
    let addr: SocketAddr = format!("{}:{}", p.addr, p.port).parse().expect("address");
    let answer = lab
        .run_in(&p.client, move || -> std::io::Result<String> {
            let sock = UdpSocket::bind("0.0.0.0:0")?;
            sock.connect(addr)?;
            sock.set_read_timeout(Some(ferry_lab::scaled(Duration::from_millis(1500))))?;
            sock.send(b"hello")?;
            let mut buf = [0u8; 512];
            let n = sock.recv(&mut buf)?;
            Ok(String::from_utf8_lossy(&buf[..n]).into_owned())
        })
        .expect("run in the client's namespace");
    match answer {
        Ok(body) => {
            let h = crate::seed::Hello::parse(&body);
            Ok((h.server_name, h.client_ip))
        }
        Err(e) if e.kind() == ErrorKind::ConnectionRefused => Err(Outcome::Refused),
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
            Err(Outcome::TimedOut)
        }
        Err(e) => Err(Outcome::Other(e.to_string())),
    }
}

/// Makes one probe's connections. A first try that fails is followed by 7 more at once (a
/// failure may be one Pod of several: a remote endpoint reached without masquerade, whose
/// reply takes another path); if they all fail alike, that is the outcome. Otherwise tries go
/// on until every possible Pod answered without a failure, or [`TRIES`] were made; failures
/// among answers are listed with the Pods, in parentheses.
pub fn run_probe(lab: &Lab, p: &Probe) -> Outcome {
    if p.health {
        return match try_once(lab, p) {
            Ok((status, body)) => Outcome::Answered {
                servers: BTreeSet::from([status]),
                sources: BTreeSet::from([body]),
            },
            Err(failure) => failure,
        };
    }
    let mut results = vec![try_once(lab, p)];
    if p.affinity {
        return sticky(lab, p, results.remove(0));
    }
    if results[0].is_err() {
        let more: Vec<_> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..7).map(|_| s.spawn(|| try_once(lab, p))).collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("a try's thread"))
                .collect()
        });
        results.extend(more);
        let failures: BTreeSet<Outcome> = results.iter().filter_map(|r| r.clone().err()).collect();
        if failures.len() == 1 && results.iter().all(Result::is_err) {
            return failures.into_iter().next().expect("one failure");
        }
    }
    let mut seen = Seen::default();
    let mut made = results.len();
    for r in results {
        seen.record(r);
    }
    while made < TRIES {
        let complete = seen.servers.len() == p.servers.len()
            && seen.servers.iter().all(|s| p.servers.contains(s.as_str()));
        if complete && !seen.failed {
            break;
        }
        made += 1;
        seen.record(try_once(lab, p));
    }
    let Seen {
        servers, sources, ..
    } = seen;
    Outcome::Answered { servers, sources }
}

/// With session affinity the first connection picks an endpoint at random and the others
/// follow it: 8 tries that all come to the same (the same Pod, or the same failure: a sticky
/// pick of an endpoint whose reply takes another path) are `one (sticky)`, whichever it was,
/// since which one is chance; anything else is listed as it came.
fn sticky(lab: &Lab, p: &Probe, first: Result<(String, String), Outcome>) -> Outcome {
    let mut seen = Seen::default();
    seen.record(first);
    for _ in 1..8 {
        seen.record(try_once(lab, p));
    }
    if seen.servers.len() == 1 {
        return Outcome::Answered {
            servers: BTreeSet::from(["one (sticky)".to_owned()]),
            sources: BTreeSet::new(),
        };
    }
    Outcome::Answered {
        servers: seen.servers,
        sources: seen.sources,
    }
}

/// What a probe's tries have shown so far.
#[derive(Default)]
struct Seen {
    servers: BTreeSet<String>,
    sources: BTreeSet<String>,
    failed: bool,
}

impl Seen {
    fn record(&mut self, r: Result<(String, String), Outcome>) {
        match r {
            Ok((server, source)) => {
                self.servers.insert(server);
                self.sources.insert(source);
            }
            Err(failure) => {
                self.failed = true;
                self.servers.insert(format!("({failure})"));
            }
        }
    }
}

/// Runs every probe, a few at a time (most of a probe's time is a timeout's wait); the table
/// by probe key.
pub fn run_all(lab: &Lab, probes: &[Probe]) -> BTreeMap<String, Outcome> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results = std::sync::Mutex::new(BTreeMap::new());
    std::thread::scope(|s| {
        for _ in 0..8 {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(p) = probes.get(i) else { break };
                let outcome = run_probe(lab, p);
                results
                    .lock()
                    .expect("results lock")
                    .insert(p.key(), outcome);
            });
        }
    });
    results.into_inner().expect("results lock")
}

/// The keys whose outcomes differ, with both outcomes.
pub fn differences(
    kube_proxy: &BTreeMap<String, Outcome>,
    ferry: &BTreeMap<String, Outcome>,
) -> BTreeMap<String, (Outcome, Outcome)> {
    kube_proxy
        .iter()
        .filter_map(|(k, a)| {
            let b = ferry.get(k)?;
            (a != b).then(|| (k.clone(), (a.clone(), b.clone())))
        })
        .collect()
}

/// A table for the test's output.
pub fn render(table: &BTreeMap<String, Outcome>) -> String {
    table.iter().map(|(k, o)| format!("  {k}: {o}\n")).collect()
}

/// The Service changes of the second round, the same rule for any set: a ClusterIP Service
/// (index divisible by 3, no external IPs) becomes a NodePort; a Service with an external
/// policy (index ≡ 1 mod 3) flips it. In the small set: `cip` and `cip-udp` become NodePorts,
/// `np-local` goes Cluster, `lb-ranges` and `np-not-ready` go Local.
pub fn change(shapes: &mut [Shape]) {
    for s in shapes {
        if s.index % 3 == 0 && s.kind == Kind::ClusterIp && !s.external_ips {
            s.kind = Kind::NodePort;
        } else if s.index % 3 == 1 && (s.has_node_port() || s.external_ips) {
            s.etp_local = !s.etp_local;
        }
    }
}
