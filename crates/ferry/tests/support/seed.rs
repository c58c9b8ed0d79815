//! The seed cluster (../shared/seeds/004) in network namespaces, with one `ferry run` per node.
//!
//! Shared by the lab tests of every proxy mode: the same cases, parameterised by [`Mode`].

#![allow(dead_code)]

use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use ferry_lab::spec::{ClientSpec, MASTER, NODE1, NODE2};
use ferry_lab::{CurlResult, Host, Lab, LabProcess, PodProgram};
use ferry_testkit::FakeApiServer;

pub const FERRY: &str = env!("CARGO_BIN_EXE_ferry");
pub const CLUSTER_IP: &str = "10.96.198.86";
pub const EMPTY_CLUSTER_IP: &str = "10.96.0.50";
pub const NODE_PORT: u16 = 32223;
pub const POD_A: (&str, &str) = (
    "url-analysis-deployment-547845566c-4rt9d",
    "192.168.169.166",
);
pub const POD_B: (&str, &str) = (
    "url-analysis-deployment-547845566c-64gq4",
    "192.168.169.168",
);
pub const MASTER_POD: (&str, &str) = ("client-7d9f8c6b5-x2x4q", "192.168.235.200");
pub const NODES: [(&str, &str); 3] = [
    (MASTER, "10.1.1.12"),
    (NODE1, "10.1.1.17"),
    (NODE2, "10.1.1.9"),
];
/// Each node's `topology.kubernetes.io/zone` label: three nodes, three zones (the topology
/// tests rely on it; the seed itself has no zones, and nothing else looks at them).
pub const ZONES: [(&str, &str); 3] = [(MASTER, "zone-a"), (NODE1, "zone-c"), (NODE2, "zone-b")];

/// The proxy mode under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Nftables,
    /// iptables mode on the nf_tables backend (`iptables-nft`).
    IptablesNft,
    /// iptables mode on the legacy backend (`iptables-legacy`).
    IptablesLegacy,
}

impl Mode {
    /// The `--proxy-mode` value.
    pub fn flag(self) -> &'static str {
        match self {
            Mode::Nftables => "nftables",
            Mode::IptablesNft | Mode::IptablesLegacy => "iptables",
        }
    }

    /// How the mode is shown in printed tables.
    pub fn label(self) -> &'static str {
        match self {
            Mode::Nftables => "nftables mode",
            Mode::IptablesNft => "iptables mode, nft backend",
            Mode::IptablesLegacy => "iptables mode, legacy backend",
        }
    }

    /// The `iptables` program of the backend, in iptables modes.
    pub fn iptables(self) -> Option<&'static str> {
        match self {
            Mode::Nftables => None,
            Mode::IptablesNft => Some("iptables-nft"),
            Mode::IptablesLegacy => Some("iptables-legacy"),
        }
    }

    /// Extra `ferry run` flags of the mode.
    pub fn args(self) -> Vec<String> {
        let backend = match self {
            Mode::Nftables => return Vec::new(),
            Mode::IptablesNft => "nft",
            Mode::IptablesLegacy => "legacy",
        };
        vec!["--iptables-backend".into(), backend.into()]
    }
}

/// Where the nodes' Ferries take the cluster from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// `--manifests DIR` (the manifests below).
    Manifests,
    /// `--master http://10.1.1.200:6443`: a fake API server in the lab, loaded with the same
    /// manifests.
    Api,
}

/// How a lab runs: the proxy mode and the source. A bare [`Mode`] means manifests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Setup {
    pub mode: Mode,
    pub source: Source,
}

impl From<Mode> for Setup {
    fn from(mode: Mode) -> Self {
        Setup {
            mode,
            source: Source::Manifests,
        }
    }
}

impl Mode {
    /// This mode, with the state from the fake API server.
    pub fn with_api(self) -> Setup {
        Setup {
            mode: self,
            source: Source::Api,
        }
    }
}

/// The fake API server's host on the lab's LAN (a machine outside the cluster, as a
/// control-plane load balancer would be).
pub const APISERVER: &str = "apiserver";
pub const APISERVER_IP: Ipv4Addr = Ipv4Addr::new(10, 1, 1, 200);
pub const APISERVER_PORT: u16 = 6443;

/// Starts the fake API server inside the lab: its listening socket is created in the
/// `apiserver` host's namespace (a socket stays in the namespace it was made in), and served
/// from a thread of this process. Nothing is added to the root namespace.
fn start_apiserver(lab: &mut Lab) -> FakeApiServer {
    lab.add_client(&ClientSpec {
        name: APISERVER.into(),
        ip: APISERVER_IP,
        pod_routes: false,
    })
    .expect("apiserver host");
    let ns = lab
        .netns_of(&Host::client(APISERVER))
        .expect("apiserver netns")
        .to_owned();
    let listener = ferry_lab::netns::run_in(&ns, || {
        std::net::TcpListener::bind((APISERVER_IP, APISERVER_PORT))
    })
    .expect("enter the apiserver namespace")
    .expect("listen in the lab");
    FakeApiServer::start(listener).expect("start the fake apiserver")
}

/// Every object in the manifest directory, as JSON (what the API server would store).
fn manifest_objects(dir: &std::path::Path) -> Vec<serde_json::Value> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("read manifests")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    files
        .iter()
        .flat_map(|f| {
            let text = std::fs::read_to_string(f).expect("read manifest");
            serde_saphyr::from_multiple::<serde_json::Value>(&text).expect("manifest YAML")
        })
        .filter(|v| !v.is_null())
        .collect()
}

/// The objects of one manifest file's text, as JSON.
fn objects_of(text: &str) -> Vec<serde_json::Value> {
    serde_saphyr::from_multiple::<serde_json::Value>(text)
        .expect("manifest YAML")
        .into_iter()
        .filter(|v| !v.is_null())
        .collect()
}

/// Returns None (and says why) when the lab cannot run here.
pub fn lab_or_skip() -> Option<Lab> {
    if !ferry_lab::running_as_root() {
        eprintln!("skipping: the lab needs root (CI runs as root)");
        return None;
    }
    Some(Lab::seed004().expect("build the seed lab"))
}

/// The manifests every node reads.
pub struct Manifests {
    pub dir: tempfile::TempDir,
    pub policy: &'static str,
    /// (ip, ready) of the url-analysis endpoints, all on k8s-node2.
    pub endpoints: Vec<(&'static str, bool)>,
    pub with_slice: bool,
    /// `sessionAffinity: ClientIP` with this `timeoutSeconds` (None: no affinity).
    pub affinity_timeout: Option<u32>,
}

impl Manifests {
    pub fn new(policy: &'static str) -> Self {
        let m = Self {
            dir: tempfile::tempdir().expect("tempdir"),
            policy,
            endpoints: vec![(POD_A.1, true), (POD_B.1, true)],
            with_slice: true,
            affinity_timeout: None,
        };
        m.write_static();
        m.write();
        m
    }

    pub fn path(&self) -> PathBuf {
        self.dir.path().to_path_buf()
    }

    fn write_static(&self) {
        let mut nodes = String::new();
        for (((name, ip), cidr), (_, zone)) in NODES
            .iter()
            .zip([
                "192.168.235.192/26",
                "192.168.36.64/26",
                "192.168.169.128/26",
            ])
            .zip(ZONES)
        {
            nodes.push_str(&format!(
                "---\napiVersion: v1\nkind: Node\nmetadata:\n  name: {name}\n  labels:\n    kubernetes.io/hostname: {name}\n    topology.kubernetes.io/zone: {zone}\nspec:\n  podCIDR: {cidr}\n  podCIDRs: [{cidr}]\nstatus:\n  addresses:\n  - type: InternalIP\n    address: {ip}\n  - type: Hostname\n    address: {name}\n"
            ));
        }
        std::fs::write(self.dir.path().join("nodes.yaml"), nodes).expect("write nodes");
        let empty = format!(
            "apiVersion: v1\nkind: Service\nmetadata:\n  name: no-endpoints\n  namespace: dev\nspec:\n  clusterIP: {EMPTY_CLUSTER_IP}\n  ports:\n  - name: http\n    port: 80\n    targetPort: 8080\n"
        );
        std::fs::write(self.dir.path().join("empty-service.yaml"), empty).expect("write service");
    }

    /// Rewrites the Service and the EndpointSlice (atomically: write then rename).
    pub fn write(&self) {
        let mut svc = format!(
            "apiVersion: v1\nkind: Service\nmetadata:\n  name: url-analysis\n  namespace: dev\nspec:\n  type: NodePort\n  clusterIP: {CLUSTER_IP}\n  externalTrafficPolicy: {}\n  selector:\n    app: url-analysis\n  ports:\n  - name: http\n    protocol: TCP\n    port: 8080\n    targetPort: 56010\n    nodePort: {NODE_PORT}\n",
            self.policy
        );
        if let Some(t) = self.affinity_timeout {
            svc.push_str(&format!(
                "  sessionAffinity: ClientIP\n  sessionAffinityConfig:\n    clientIP:\n      timeoutSeconds: {t}\n"
            ));
        }
        self.put("service.yaml", &svc);
        if self.with_slice {
            let mut eps = String::new();
            for (ip, ready) in &self.endpoints {
                eps.push_str(&format!(
                    "- addresses: [\"{ip}\"]\n  conditions:\n    ready: {ready}\n  nodeName: k8s-node2\n"
                ));
            }
            let slice = format!(
                "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: url-analysis-7x2kq\n  namespace: dev\n  labels:\n    kubernetes.io/service-name: url-analysis\naddressType: IPv4\nports:\n- name: http\n  port: 56010\n  protocol: TCP\nendpoints:\n{eps}"
            );
            self.put("endpointslice.yaml", &slice);
        } else {
            let _ = std::fs::remove_file(self.dir.path().join("endpointslice.yaml"));
        }
    }

    /// Replaces one manifest file with arbitrary text (e.g. an invalid edit).
    pub fn put(&self, name: &str, text: &str) {
        let tmp = self.dir.path().join(format!(".{name}.tmp"));
        std::fs::write(&tmp, text).expect("write manifest");
        std::fs::rename(&tmp, self.dir.path().join(name)).expect("rename manifest");
    }
}

/// The lab with pods and one Ferry per node.
pub struct SeedLab {
    pub lab: Lab,
    pub manifests: Manifests,
    pub mode: Mode,
    /// Extra `ferry run` flags every node gets.
    pub extra_args: Vec<String>,
    pub ferries: Vec<(&'static str, LabProcess)>,
    /// The fake API server, with [`Source::Api`]; dropped after the lab's processes.
    pub api: Option<FakeApiServer>,
}

impl SeedLab {
    pub fn start(setup: impl Into<Setup>, policy: &'static str) -> Option<SeedLab> {
        Self::start_with(setup, policy, &[])
    }

    /// Like [`start`](Self::start), with extra `ferry run` flags (e.g. a short sync period).
    pub fn start_with(
        setup: impl Into<Setup>,
        policy: &'static str,
        extra: &[&str],
    ) -> Option<SeedLab> {
        let Setup { mode, source } = setup.into();
        let mut lab = lab_or_skip()?;
        let api = (source == Source::Api).then(|| start_apiserver(&mut lab));
        let program = PodProgram::ferry(FERRY);
        for (name, ip) in [POD_A, POD_B] {
            lab.add_echo_pod(
                NODE2,
                name,
                ip.parse::<Ipv4Addr>().expect("ip"),
                56010,
                &program,
            )
            .expect("pod on node2");
        }
        lab.add_echo_pod(
            MASTER,
            MASTER_POD.0,
            MASTER_POD.1.parse().expect("ip"),
            56010,
            &program,
        )
        .expect("pod on master");
        let manifests = Manifests::new(policy);
        if let Some(api) = &api {
            api.replace_all(manifest_objects(&manifests.path()));
        }
        let mut seed = SeedLab {
            lab,
            manifests,
            mode,
            extra_args: extra.iter().map(|a| (*a).to_owned()).collect(),
            ferries: Vec::new(),
            api,
        };
        for (node, _) in NODES {
            let p = seed.spawn_ferry(node);
            seed.ferries.push((node, p));
        }
        for (node, _) in NODES {
            seed.wait_synced(node, 1);
        }
        Some(seed)
    }

    fn spawn_ferry(&self, node: &'static str) -> LabProcess {
        let source = match &self.api {
            None => [
                "--manifests".into(),
                self.manifests.path().display().to_string(),
            ],
            Some(_) => [
                "--master".into(),
                format!("http://{APISERVER_IP}:{APISERVER_PORT}"),
            ],
        };
        let mut args: Vec<String> = vec![
            "run".into(),
            source[0].clone(),
            source[1].clone(),
            "--hostname-override".into(),
            node.into(),
            "--proxy-mode".into(),
            self.mode.flag().into(),
        ];
        // The seed's cluster CIDR, unless the extra flags give their own (dual-stack labs).
        if !self.extra_args.iter().any(|a| a == "--cluster-cidr") {
            args.extend(["--cluster-cidr".into(), "192.168.0.0/16".into()]);
        }
        args.extend(["--min-sync-period".into(), "100ms".into()]);
        args.extend(self.mode.args());
        args.extend(self.extra_args.iter().cloned());
        self.lab
            .spawn_on_node(node, FERRY, &args)
            .expect("spawn ferry")
    }

    pub fn ferry(&mut self, node: &str) -> &mut LabProcess {
        &mut self
            .ferries
            .iter_mut()
            .find(|(n, _)| *n == node)
            .expect("ferry on node")
            .1
    }

    /// Number of successful syncs a node's Ferry has logged.
    pub fn syncs(&mut self, node: &str) -> usize {
        self.ferry(node).log().matches("synced rules").count()
    }

    /// Number of successful full syncs a node's Ferry has logged.
    pub fn full_syncs(&mut self, node: &str) -> usize {
        self.ferry(node)
            .log()
            .lines()
            .filter(|l| l.contains("synced rules") && l.contains("kind=Full"))
            .count()
    }

    /// Waits until a node's Ferry has logged at least `n` full syncs.
    pub fn wait_full_synced(&mut self, node: &str, n: usize) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.full_syncs(node) < n {
            if Instant::now() > deadline {
                panic!(
                    "{node}: no full sync #{n} within 20 s; log:\n{}",
                    self.ferry(node).log()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits until a node's Ferry has logged at least `n` syncs.
    pub fn wait_synced(&mut self, node: &str, n: usize) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.syncs(node) < n {
            if Instant::now() > deadline {
                panic!(
                    "{node}: no sync #{n} within 20 s; log:\n{}",
                    self.ferry(node).log()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Rewrites the manifests and waits until every node has synced the change.
    pub fn change(&mut self, edit: impl FnOnce(&mut Manifests)) {
        let before: Vec<usize> = NODES.iter().map(|(n, _)| self.syncs(n)).collect();
        edit(&mut self.manifests);
        self.manifests.write();
        if let Some(api) = &self.api {
            api.replace_all(manifest_objects(&self.manifests.path()));
        }
        for ((node, _), n) in NODES.iter().zip(before) {
            self.wait_synced(node, n + 1);
        }
    }

    /// Number of syncs a node's Ferry has logged that rewrote at least one service (so not a
    /// periodic resync with nothing pending).
    pub fn service_syncs(&mut self, node: &str) -> usize {
        self.ferry(node)
            .log()
            .lines()
            .filter(|l| l.contains("synced rules") && !l.contains("services_changed=0"))
            .count()
    }

    /// Writes one extra manifest file (e.g. a Service and its EndpointSlice) and waits until
    /// every node has synced all of it. The manifest source delivers a file as one atomic
    /// change; the API delivers one object at a time, so with [`Source::Api`] each changed
    /// object is stored on its own, in file order, and synced before the next.
    pub fn apply(&mut self, name: &str, text: &str) {
        let path = self.manifests.dir.path().join(name);
        let old = std::fs::read_to_string(&path)
            .map(|t| objects_of(&t))
            .unwrap_or_default();
        let Some(api) = self.api.take() else {
            let before = self.service_sync_counts();
            self.manifests.put(name, text);
            self.wait_service_synced(name, before);
            return;
        };
        self.manifests.put(name, text);
        let new = objects_of(text);
        for object in new.iter().filter(|o| !old.contains(o)) {
            let before = self.service_sync_counts();
            api.apply(object.clone());
            self.wait_service_synced(name, before);
        }
        let key = |o: &serde_json::Value| {
            let s = |f: &str| {
                o.pointer(f)
                    .and_then(|v| v.as_str())
                    .unwrap_or("")
                    .to_owned()
            };
            (s("/kind"), s("/metadata/namespace"), s("/metadata/name"))
        };
        for gone in old.iter().filter(|o| !new.iter().any(|n| key(n) == key(o))) {
            let before = self.service_sync_counts();
            let (kind, namespace, object_name) = key(gone);
            api.delete(&kind, &namespace, &object_name);
            self.wait_service_synced(name, before);
        }
        self.api = Some(api);
    }

    fn service_sync_counts(&mut self) -> Vec<usize> {
        NODES.iter().map(|(n, _)| self.service_syncs(n)).collect()
    }

    fn wait_service_synced(&mut self, name: &str, before: Vec<usize>) {
        for ((node, _), n) in NODES.iter().zip(before) {
            let deadline = Instant::now() + Duration::from_secs(20);
            while self.service_syncs(node) <= n {
                assert!(
                    Instant::now() < deadline,
                    "{node}: no service sync after writing {name} within 20 s; log:\n{}",
                    self.ferry(node).log()
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }

    /// Waits until every node's Ferry has logged `needle` (e.g. a rejected field).
    pub fn wait_logged(&mut self, needle: &str) {
        for (node, _) in NODES {
            let deadline = Instant::now() + Duration::from_secs(20);
            while !self.ferry(node).log().contains(needle) {
                assert!(
                    Instant::now() < deadline,
                    "{node} never logged {needle:?}:\n{}",
                    self.ferry(node).log()
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }

    pub fn curl(&self, from: &Host, url: &str) -> CurlResult {
        self.lab.curl(from, url).expect("run curl")
    }

    /// A successful answer's fields (ClientIp, ServerName, ServerIp), or a panic with context.
    pub fn hello(&self, from: &Host, url: &str) -> Hello {
        match self.curl(from, url) {
            CurlResult::Ok(body) => Hello::parse(&body),
            other => panic!("{from:?} → {url}: {other:?}\n{}", self.logs()),
        }
    }

    pub fn logs(&self) -> String {
        self.ferries
            .iter()
            .map(|(n, p)| format!("--- ferry on {n}:\n{}", p.log()))
            .collect()
    }
}

/// The url-analysis app's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hello {
    pub client_ip: String,
    pub server_name: String,
    pub server_ip: String,
}

impl Hello {
    pub fn parse(body: &str) -> Hello {
        let field = |name: &str| {
            body.split(',')
                .find_map(|part| part.trim().strip_prefix(name))
                .map(|v| v.trim_start_matches(" : ").trim().to_owned())
                .unwrap_or_else(|| panic!("no {name} in {body:?}"))
        };
        Hello {
            client_ip: field("ClientIp"),
            server_name: field("ServerName"),
            server_ip: field("ServerIp"),
        }
    }
}

pub fn cluster_url() -> String {
    format!("http://{CLUSTER_IP}:8080/hello")
}

pub fn node_port_url(node_ip: &str) -> String {
    format!("http://{node_ip}:{NODE_PORT}/hello")
}
