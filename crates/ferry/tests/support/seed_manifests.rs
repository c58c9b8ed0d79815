//! The manifests every node of the seed lab reads, and the objects they hold (what the fake
//! API server is given in the `Source::Api` setups).

use std::path::PathBuf;

use super::{CLUSTER_IP, EMPTY_CLUSTER_IP, NODES, NODE_PORT, POD_A, POD_B, ZONES};

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

/// Every object in the manifest directory, as JSON (what the API server would store).
pub fn manifest_objects(dir: &std::path::Path) -> Vec<serde_json::Value> {
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
pub fn objects_of(text: &str) -> Vec<serde_json::Value> {
    serde_saphyr::from_multiple::<serde_json::Value>(text)
        .expect("manifest YAML")
        .into_iter()
        .filter(|v| !v.is_null())
        .collect()
}
