//! The seed lab with a real control plane (`ferry-kube-lab`): etcd, kube-apiserver and the
//! EndpointSlice controllers built from source, a kubelet stand-in per node, and one
//! `ferry run` per node connecting to the API server as the DaemonSet's ServiceAccount with
//! exactly the rights `deploy/` gives it.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ferry_kube_lab::{Assets, ControlPlane};
use ferry_lab::{CurlResult, Host, Lab, LabProcess};

use crate::seed::{self, Hello, FERRY, NODES, ZONES};

/// The lab, its control plane and its Ferries (dropped in this order: Ferries, control plane
/// with its kubelet stand-ins and their Pods, lab).
pub struct RealCluster {
    pub ferries: Vec<(&'static str, LabProcess)>,
    pub cp: ControlPlane,
    pub lab: Lab,
    /// Files `<pod>` here make that pod's `/hello` (its readiness probe) fail.
    pub fail_dir: tempfile::TempDir,
    /// The ServiceAccount token Ferry reads (rewritten to rotate it).
    pub token_file: PathBuf,
    /// Ferry's kubeconfig (server 10.1.1.200:6443, `tokenFile` above).
    pub kubeconfig: PathBuf,
}

fn deploy(file: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../deploy")
        .join(file);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

impl RealCluster {
    /// Starts the control plane, the kubelets and `deploy/`'s RBAC; `None` (after printing
    /// why) where there are no Kubernetes binaries and no Go to build them.
    pub fn start(test: &str) -> Option<RealCluster> {
        let assets = Assets::for_test(test)?;
        let mut lab = seed::lab();
        let mut cp = ControlPlane::start(&mut lab, assets).expect("start the control plane");
        let fail_dir = tempfile::tempdir().expect("fail dir");
        let echo = vec![
            FERRY.to_owned(),
            "lab-pod".into(),
            "--fail-dir".into(),
            fail_dir.path().display().to_string(),
        ];
        cp.start_kubelets(&lab, &[FERRY.into(), "lab-kubelet".into()], &echo, &ZONES)
            .unwrap_or_else(|e| panic!("{e}\n{}", cp.logs()));
        for file in [
            "serviceaccount.yaml",
            "clusterrole.yaml",
            "clusterrolebinding.yaml",
        ] {
            cp.apply(&deploy(file)).expect(file);
        }
        let token = cp
            .token("kube-system", "ferry", 3600, None)
            .expect("a token for kube-system/ferry");
        let token_file = cp.write_file("ferry.token", &token).expect("token file");
        let kubeconfig = cp
            .token_kubeconfig("ferry", &token_file)
            .expect("ferry's kubeconfig");
        Some(RealCluster {
            ferries: Vec::new(),
            cp,
            lab,
            fail_dir,
            token_file,
            kubeconfig,
        })
    }

    /// Starts one `ferry run` per node (`--kubeconfig`, nftables mode unless `extra` says
    /// otherwise) and waits for each one's first sync.
    pub fn start_ferries(&mut self, extra: &[&str]) {
        for (node, _) in NODES {
            let mut args: Vec<String> = vec![
                "run".into(),
                "--kubeconfig".into(),
                self.kubeconfig.display().to_string(),
                "--hostname-override".into(),
                node.into(),
                "--cluster-cidr".into(),
                "192.168.0.0/16".into(),
                "--min-sync-period".into(),
                "100ms".into(),
            ];
            if !extra.contains(&"--proxy-mode") {
                args.extend(["--proxy-mode".into(), "nftables".into()]);
            }
            args.extend(extra.iter().map(|a| (*a).to_owned()));
            let p = self
                .lab
                .spawn_on_node(node, FERRY, &args)
                .expect("spawn ferry");
            self.ferries.push((node, p));
        }
        for (node, _) in NODES {
            self.wait_logged(node, "synced rules", 1);
        }
    }

    /// Starts one `ferry run` per node configured as the DaemonSet's pod is: `--config` with
    /// `deploy/configmap.yaml` (its `clusterCIDR` set to the lab's pod network),
    /// `--hostname-override`, and no kubeconfig, so Ferry uses its in-cluster configuration:
    /// `KUBERNETES_SERVICE_HOST`/`_PORT` and the token, CA and namespace files at
    /// `/var/run/secrets/kubernetes.io/serviceaccount`, mounted (a tmpfs over `/run`, in the
    /// private mount namespace `ip netns exec` gives each process) as the kubelet mounts them.
    /// The environment names the API server's own address, as the DaemonSet's comment tells a
    /// user to: the `kubernetes` Service's ClusterIP is only reachable once a proxy runs.
    pub fn start_ferries_in_cluster(&mut self) {
        for (node, _) in NODES {
            self.spawn_ferry_in_cluster(node);
        }
        for (node, _) in NODES {
            self.wait_logged(node, "synced rules", 1);
        }
    }

    /// Starts the DaemonSet's Ferry on one node (as [`RealCluster::start_ferries_in_cluster`]
    /// does on each), without waiting for its first sync.
    pub fn spawn_ferry_in_cluster(&mut self, node: &'static str) {
        let token = std::fs::read_to_string(&self.token_file).expect("token");
        let secrets = self.cp.dir().join("serviceaccount");
        std::fs::create_dir_all(&secrets).expect("serviceaccount dir");
        std::fs::write(secrets.join("token"), token).expect("token file");
        std::fs::copy(self.cp.ca(), secrets.join("ca.crt")).expect("ca.crt");
        std::fs::write(secrets.join("namespace"), "kube-system").expect("namespace file");
        let config =
            deploy("configmap.yaml").replace("clusterCIDR: \"\"", "clusterCIDR: 192.168.0.0/16");
        assert!(
            config.contains("192.168.0.0/16"),
            "configmap.yaml has clusterCIDR \"\""
        );
        let config = self
            .cp
            .write_file("ferry-configmap.yaml", &config)
            .expect("config file");
        let host = self.cp.url();
        let host = host
            .trim_start_matches("https://")
            .split(':')
            .next()
            .expect("host")
            .to_owned();
        let script = format!(
            "set -e; mount -t tmpfs ferry-pod-run /run; \
             mkdir -p /run/secrets/kubernetes.io/serviceaccount; \
             cp {secrets}/token {secrets}/ca.crt {secrets}/namespace \
             /run/secrets/kubernetes.io/serviceaccount/; \
             export KUBERNETES_SERVICE_HOST={host} KUBERNETES_SERVICE_PORT=6443; \
             exec {FERRY} run --config={config} --hostname-override={node}",
            secrets = secrets.display(),
            config = config.display(),
        );
        let p = self
            .lab
            .spawn_on_node(node, "sh", ["-c", &script])
            .expect("spawn ferry");
        self.ferries.push((node, p));
    }

    pub fn ferry(&self, node: &str) -> &LabProcess {
        &self
            .ferries
            .iter()
            .find(|(n, _)| *n == node)
            .expect("ferry on node")
            .1
    }

    /// Waits until `node`'s Ferry has logged `needle` at least `n` times.
    pub fn wait_logged(&self, node: &str, needle: &str, n: usize) {
        let deadline = Instant::now() + ferry_lab::scaled(Duration::from_secs(60));
        while self.ferry(node).log().matches(needle).count() < n {
            assert!(
                Instant::now() < deadline,
                "{node}: {needle:?} not logged {n} times within 60 s\n{}\n{}",
                self.logs(),
                self.cp.logs()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// `kubectl` as the administrator; panics with the control plane's logs on failure.
    pub fn kubectl(&self, args: &[&str]) -> String {
        self.cp
            .kubectl(args)
            .unwrap_or_else(|e| panic!("{e}\n{}", self.cp.logs()))
    }

    pub fn apply(&self, yaml: &str) {
        self.cp
            .apply(yaml)
            .unwrap_or_else(|e| panic!("{e}\n{}", self.cp.logs()));
    }

    /// The endpoints of a Service's EndpointSlices as the controller wrote them: (address,
    /// ready, serving, terminating), sorted.
    pub fn slice_endpoints(
        &self,
        namespace: &str,
        service: &str,
    ) -> Vec<(String, bool, bool, bool)> {
        let text = self.kubectl(&[
            "-n",
            namespace,
            "get",
            "endpointslices",
            "-l",
            &format!("kubernetes.io/service-name={service}"),
            "-o",
            "json",
        ]);
        let v: serde_json::Value = serde_json::from_str(&text).expect("json");
        let mut out = Vec::new();
        for slice in v["items"].as_array().into_iter().flatten() {
            for ep in slice["endpoints"].as_array().into_iter().flatten() {
                let c = &ep["conditions"];
                let flag = |k: &str| c[k].as_bool().unwrap_or(false);
                for a in ep["addresses"].as_array().into_iter().flatten() {
                    out.push((
                        a.as_str().unwrap_or("").to_owned(),
                        flag("ready"),
                        flag("serving"),
                        flag("terminating"),
                    ));
                }
            }
        }
        out.sort();
        out
    }

    /// Waits until `check` holds of the Service's endpoints.
    pub fn wait_endpoints(
        &self,
        namespace: &str,
        service: &str,
        what: &str,
        check: impl Fn(&[(String, bool, bool, bool)]) -> bool,
    ) {
        let deadline = Instant::now() + ferry_lab::scaled(Duration::from_secs(90));
        loop {
            let eps = self.slice_endpoints(namespace, service);
            if check(&eps) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{namespace}/{service}: never {what}; endpoints {eps:?}\n{}",
                self.cp.logs()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    pub fn curl(&self, from: &Host, url: &str) -> CurlResult {
        self.lab.curl(from, url).expect("run curl")
    }

    /// Waits until `from` → `url` gives `want` (Ferry's sync follows the API by a moment).
    pub fn wait_curl(
        &self,
        from: &Host,
        url: &str,
        want: impl Fn(&CurlResult) -> bool,
        what: &str,
    ) -> CurlResult {
        self.wait_curl_within(Duration::from_secs(30), from, url, want, what)
    }

    /// [`RealCluster::wait_curl`] with its own limit (scaled like every lab timeout).
    pub fn wait_curl_within(
        &self,
        limit: Duration,
        from: &Host,
        url: &str,
        want: impl Fn(&CurlResult) -> bool,
        what: &str,
    ) -> CurlResult {
        let deadline = Instant::now() + ferry_lab::scaled(limit);
        loop {
            let got = self.curl(from, url);
            if want(&got) {
                return got;
            }
            assert!(
                Instant::now() < deadline,
                "{from:?} → {url}: never {what}, last {got:?}\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Waits until ten connections in a row from `from` to `url` are answered by `server`
    /// (one answer alone may be the luck of a random pick from the old endpoints).
    pub fn wait_only_answered_by(&self, limit: Duration, from: &Host, url: &str, server: &str) {
        let deadline = Instant::now() + ferry_lab::scaled(limit);
        loop {
            let answers: Vec<CurlResult> = (0..10).map(|_| self.curl(from, url)).collect();
            let mark = format!("ServerIp : {server}");
            let only = answers
                .iter()
                .all(|r| matches!(r, CurlResult::Ok(b) if b.contains(&mark)));
            if only {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{from:?} → {url}: never answered by {server} alone, last {answers:?}\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

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

/// The example cluster's Service and its two Pods on k8s-node2 (`examples/seed-pods`, with
/// their addresses as annotations for the kubelet stand-in, and a quick readiness probe).
pub fn seed_objects(policy: &str) -> String {
    let mut text = format!(
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: dev\n---\n\
         apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: default\n  namespace: dev\n---\n\
         apiVersion: v1\nkind: Service\nmetadata:\n  name: url-analysis\n  namespace: dev\n\
         spec:\n  type: NodePort\n  selector:\n    app: url-analysis\n  clusterIP: {}\n  \
         externalTrafficPolicy: {policy}\n  ports:\n  - name: http\n    protocol: TCP\n    \
         port: 8080\n    targetPort: 56010\n    nodePort: {}\n",
        seed::CLUSTER_IP,
        seed::NODE_PORT
    );
    for (name, ip) in [seed::POD_A, seed::POD_B] {
        text.push_str(&pod_yaml("dev", name, ip, "k8s-node2", "url-analysis"));
    }
    text
}

/// A Pod for the kubelet stand-in: the echo server on 56010, probed on `/hello` every second.
pub fn pod_yaml(namespace: &str, name: &str, ip: &str, node: &str, app: &str) -> String {
    let annotation = if ip.is_empty() {
        String::new()
    } else {
        format!("  annotations:\n    lab.ferry.dev/pod-ip: \"{ip}\"\n")
    };
    format!(
        "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: {namespace}\n\
         {annotation}  labels:\n    app: {app}\nspec:\n  nodeName: {node}\n  \
         terminationGracePeriodSeconds: 600\n  containers:\n  - name: app\n    \
         image: registry.invalid/url-analysis:v1.0\n    ports:\n    - name: http\n      \
         containerPort: 56010\n    readinessProbe:\n      httpGet:\n        path: /hello\n        \
         port: 56010\n      periodSeconds: 1\n      failureThreshold: 1\n"
    )
}
