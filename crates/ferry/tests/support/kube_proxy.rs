//! Upstream kube-proxy in the lab: the binary built from source at the pinned release
//! (`lab/k8s/`, `Assets::kube_proxy`), run on a lab node's network namespace as a kubeadm
//! cluster runs it: `kube-proxy --config=<file> --hostname-override=<node>`, the file a
//! `KubeProxyConfiguration` as kubeadm's `kube-proxy` ConfigMap holds it, and a kubeconfig with
//! the token of ServiceAccount `kube-system/kube-proxy`, bound to ClusterRole
//! `system:node-proxier` (kubeadm's `kubeadm:node-proxier` binding).
//!
//! One setting differs from kubeadm's, because a network namespace cannot take it (kind
//! changes it too): `conntrack.maxPerCore: 0`. With kubeadm's default (32768 per core)
//! kube-proxy raises `net.netfilter.nf_conntrack_max` where it is lower (read-only outside the
//! initial namespace: kube-proxy exits) and then the module's `hashsize`, a setting of the
//! whole machine that a lab must not change. Nothing else is changed: `metricsBindAddress` and
//! `healthzBindAddress` keep their defaults (each namespace has its own loopback and ports).

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use ferry_kube_lab::ControlPlane;
use ferry_lab::{netns, Lab, LabProcess};

/// The settings this lab changes from kubeadm's, and why (listed in the docs page of
/// differences, `docs/src/architecture/kube-proxy-diff.md`).
pub const CHANGED_SETTINGS: [(&str, &str); 1] = [(
    "conntrack.maxPerCore: 0",
    "a network namespace has no nf_conntrack_max to raise (kind sets the same)",
)];

/// kube-proxy's RBAC as kubeadm creates it: its ServiceAccount and the binding to the
/// bootstrap ClusterRole `system:node-proxier` (which the API server creates itself).
pub const RBAC: &str = "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: kube-proxy\n  \
    namespace: kube-system\n---\napiVersion: rbac.authorization.k8s.io/v1\n\
    kind: ClusterRoleBinding\nmetadata:\n  name: kubeadm:node-proxier\nroleRef:\n  \
    apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: system:node-proxier\n\
    subjects:\n- kind: ServiceAccount\n  name: kube-proxy\n  namespace: kube-system\n";

/// kubeadm's `KubeProxyConfiguration` (its ConfigMap's `config.conf`, v1alpha1), with the
/// mode, the cluster CIDR (kubeadm's `podSubnet`), the kubeconfig, and [`CHANGED_SETTINGS`].
pub fn config(mode: &str, cluster_cidr: &str, kubeconfig: &Path) -> String {
    format!(
        "apiVersion: kubeproxy.config.k8s.io/v1alpha1\n\
         kind: KubeProxyConfiguration\n\
         bindAddress: 0.0.0.0\n\
         bindAddressHardFail: false\n\
         clientConnection:\n  acceptContentTypes: \"\"\n  burst: 0\n  contentType: \"\"\n  \
         kubeconfig: {kubeconfig}\n  qps: 0\n\
         clusterCIDR: {cluster_cidr}\n\
         configSyncPeriod: 0s\n\
         conntrack:\n  maxPerCore: 0\n  min: null\n  tcpCloseWaitTimeout: null\n  \
         tcpEstablishedTimeout: null\n\
         detectLocalMode: \"\"\n\
         enableProfiling: false\n\
         healthzBindAddress: \"\"\n\
         hostnameOverride: \"\"\n\
         iptables:\n  masqueradeAll: false\n  masqueradeBit: null\n  minSyncPeriod: 0s\n  \
         syncPeriod: 0s\n\
         metricsBindAddress: \"\"\n\
         mode: {mode}\n\
         nftables:\n  masqueradeAll: false\n  masqueradeBit: null\n  minSyncPeriod: 0s\n  \
         syncPeriod: 0s\n\
         nodePortAddresses: null\n\
         oomScoreAdj: null\n\
         portRange: \"\"\n\
         showHiddenMetricsForAlphaFeatures: false\n",
        kubeconfig = kubeconfig.display(),
    )
}

/// kube-proxy's files: its configuration per mode and its kubeconfig.
pub struct KubeProxySetup {
    pub program: PathBuf,
    pub config: PathBuf,
}

/// Creates kube-proxy's account, token and kubeconfig, and writes its configuration for
/// `mode` (`nftables` or `iptables`) into the control plane's folder.
pub fn setup(cp: &ControlPlane, program: &Path, mode: &str) -> KubeProxySetup {
    cp.apply(RBAC)
        .expect("kube-proxy's ServiceAccount and binding");
    let token = cp
        .token("kube-system", "kube-proxy", 3600, None)
        .expect("a token for kube-system/kube-proxy");
    let token_file = cp
        .write_file("kube-proxy.token", &token)
        .expect("kube-proxy's token file");
    let kubeconfig = cp
        .token_kubeconfig("kube-proxy", &token_file)
        .expect("kube-proxy's kubeconfig");
    let config = cp
        .write_file(
            &format!("kube-proxy-{mode}.conf"),
            &config(mode, "192.168.0.0/16", &kubeconfig),
        )
        .expect("kube-proxy's configuration");
    KubeProxySetup {
        program: program.to_path_buf(),
        config,
    }
}

impl KubeProxySetup {
    /// Starts kube-proxy on `node` as kubeadm's DaemonSet does.
    pub fn start(&self, lab: &Lab, node: &str) -> LabProcess {
        lab.spawn_on_node(
            node,
            &self.program,
            [
                format!("--config={}", self.config.display()),
                format!("--hostname-override={node}"),
            ],
        )
        .unwrap_or_else(|e| panic!("start kube-proxy on {node}: {e}"))
    }

    /// `kube-proxy --cleanup` on `node` (removes its rules of every mode), then empties the
    /// node's conntrack table, so the next proxy starts on a node as a fresh one would be.
    pub fn cleanup(&self, lab: &Lab, node: &str) {
        let ns = lab.node(node).expect("node").netns.clone();
        let out = netns::run_unchecked(&mut netns::exec_command(
            &ns,
            &self.program,
            ["--cleanup", "--v=0"],
        ))
        .expect("run kube-proxy --cleanup");
        assert!(
            out.status.success(),
            "kube-proxy --cleanup on {node}: {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        flush_conntrack(lab, node);
    }
}

/// Empties a node's conntrack table (its own namespace's), so connections made under one
/// proxy do not carry their NAT into the next one's table.
pub fn flush_conntrack(lab: &Lab, node: &str) {
    let ns = lab.node(node).expect("node").netns.clone();
    let out = netns::run_unchecked(&mut netns::exec_command(&ns, "conntrack", ["-F"]))
        .expect("run conntrack -F");
    assert!(
        out.status.success(),
        "conntrack -F on {node}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
