//! Upstream kube-proxy in the lab, as kubeadm runs it: a thin user of
//! `ferry_kube_lab::kube_proxy` (the one copy of the configuration, RBAC, token and
//! `--cleanup`, shared with `ferry-bench-e2e --against kube-proxy`), whose failures panic as a
//! test's should. The cluster CIDR is kubeadm's `podSubnet` of the lab, the minimum sync
//! period kubeadm's default.

#![allow(dead_code)]

use std::path::Path;

use ferry_kube_lab::kube_proxy::{self, MinSync};
use ferry_kube_lab::ControlPlane;
use ferry_lab::{Lab, LabProcess};

/// The settings this lab changes from kubeadm's (the differential test checks its list).
#[allow(unused_imports)]
pub use ferry_kube_lab::kube_proxy::CHANGED_SETTINGS;

/// The lab's cluster CIDR.
const CLUSTER_CIDR: &str = "192.168.0.0/16";

/// kubeadm's `KubeProxyConfiguration` for `mode` (see `ferry_kube_lab::kube_proxy::config`).
pub fn config(mode: &str, cluster_cidr: &str, kubeconfig: &Path) -> String {
    kube_proxy::config(mode, cluster_cidr, kubeconfig, MinSync::Default)
}

/// kube-proxy's files: its configuration per mode and its kubeconfig.
pub struct KubeProxySetup(kube_proxy::KubeProxySetup);

/// Creates kube-proxy's account, token and kubeconfig, and writes its configuration for
/// `mode` (`nftables` or `iptables`) into the control plane's folder.
pub fn setup(cp: &ControlPlane, program: &Path, mode: &str) -> KubeProxySetup {
    KubeProxySetup(
        kube_proxy::setup(cp, program, mode, CLUSTER_CIDR, MinSync::Default)
            .unwrap_or_else(|e| panic!("kube-proxy's setup: {e:#}")),
    )
}

impl KubeProxySetup {
    /// Its `KubeProxyConfiguration` file (what kubeadm's ConfigMap holds as `config.conf`).
    pub fn config_file(&self) -> &Path {
        &self.0.config
    }

    /// Starts kube-proxy on `node` as kubeadm's DaemonSet does.
    pub fn start(&self, lab: &Lab, node: &str) -> LabProcess {
        self.0.start(lab, node).unwrap_or_else(|e| panic!("{e:#}"))
    }

    /// `kube-proxy --cleanup` on `node`, then its conntrack table emptied.
    pub fn cleanup(&self, lab: &Lab, node: &str) {
        self.0
            .cleanup(lab, node)
            .unwrap_or_else(|e| panic!("on {node}: {e:#}"));
    }
}

/// Empties a node's conntrack table (its own namespace's).
pub fn flush_conntrack(lab: &Lab, node: &str) {
    let ns = lab.node(node).expect("node").netns.clone();
    kube_proxy::flush_conntrack_in(&ns).unwrap_or_else(|e| panic!("on {node}: {e:#}"));
}
