//! Upstream kube-proxy in the lab: the binary built from source at the pinned release
//! (`lab/k8s/`, `Assets::kube_proxy`), run on a node's network namespace as a kubeadm cluster
//! runs it: `kube-proxy --config=<file> --hostname-override=<node>`, the file a
//! `KubeProxyConfiguration` as kubeadm's `kube-proxy` ConfigMap holds it, and a kubeconfig with
//! the token of ServiceAccount `kube-system/kube-proxy`, bound to ClusterRole
//! `system:node-proxier` (kubeadm's `kubeadm:node-proxier` binding). The differential test
//! (`crates/ferry/tests/kube_proxy_diff.rs`) and `ferry-bench-e2e --against kube-proxy` share
//! this one copy.
//!
//! One setting differs from kubeadm's, because a network namespace cannot take it (kind
//! changes it too): `conntrack.maxPerCore: 0`. With kubeadm's default (32768 per core)
//! kube-proxy raises `net.netfilter.nf_conntrack_max` where it is lower (read-only outside the
//! initial namespace: kube-proxy exits) and then the module's `hashsize`, a setting of the
//! whole machine that a lab must not change. Nothing else is changed: `metricsBindAddress` and
//! `healthzBindAddress` keep their defaults (`127.0.0.1:10249` and `0.0.0.0:10256`; each
//! namespace has its own loopback and ports), so `/metrics` answers on the node's loopback.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use ferry_lab::{netns, Lab, LabProcess};

use crate::ControlPlane;

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

/// Where kube-proxy serves `/metrics` in its node's namespace (its default
/// `metricsBindAddress`, which the configuration leaves empty as kubeadm's does).
pub const METRICS: &str = "127.0.0.1:10249";

/// The minimum sync period (`iptables.minSyncPeriod`, `nftables.minSyncPeriod`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MinSync {
    /// kubeadm's: `0s` in the file, which kube-proxy's defaulting turns into 1 s.
    Default,
    /// No minimum: `1ns` in the file. At the pinned release, kube-proxy's v1alpha1 defaulting
    /// (`pkg/proxy/apis/config/v1alpha1/defaults.go`) replaces a `minSyncPeriod` of exactly
    /// 0 by 1 s, so a file cannot say 0; validation only asks for ≥ 0 and ≤ `syncPeriod`, and
    /// the proxiers hand the value as is to the `BoundedFrequencyRunner` as its `minInterval`:
    /// 1 ns between two syncs is no minimum at all. Ferry reads the same file the same way.
    Zero,
}

impl MinSync {
    /// The value written into the file.
    pub fn file_value(self) -> &'static str {
        match self {
            MinSync::Default => "0s",
            MinSync::Zero => "1ns",
        }
    }

    /// The name used on command lines and in reports: `default` or `zero`.
    pub fn name(self) -> &'static str {
        match self {
            MinSync::Default => "default",
            MinSync::Zero => "zero",
        }
    }
}

/// kubeadm's `KubeProxyConfiguration` (its ConfigMap's `config.conf`, v1alpha1), with the
/// mode, the cluster CIDR (kubeadm's `podSubnet`), the kubeconfig, the minimum sync period,
/// and [`CHANGED_SETTINGS`].
pub fn config(mode: &str, cluster_cidr: &str, kubeconfig: &Path, min_sync: MinSync) -> String {
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
         iptables:\n  masqueradeAll: false\n  masqueradeBit: null\n  minSyncPeriod: {min}\n  \
         syncPeriod: 0s\n\
         metricsBindAddress: \"\"\n\
         mode: {mode}\n\
         nftables:\n  masqueradeAll: false\n  masqueradeBit: null\n  minSyncPeriod: {min}\n  \
         syncPeriod: 0s\n\
         nodePortAddresses: null\n\
         oomScoreAdj: null\n\
         portRange: \"\"\n\
         showHiddenMetricsForAlphaFeatures: false\n",
        kubeconfig = kubeconfig.display(),
        min = min_sync.file_value(),
    )
}

/// kube-proxy's program and files.
#[derive(Debug, Clone)]
pub struct KubeProxySetup {
    /// The kube-proxy binary.
    pub program: PathBuf,
    /// Its kubeconfig (the ServiceAccount's token).
    pub kubeconfig: PathBuf,
    /// Its `KubeProxyConfiguration`.
    pub config: PathBuf,
}

/// Creates kube-proxy's account, token (valid `token_secs`) and kubeconfig in `cp`.
pub fn account(cp: &ControlPlane, token_secs: u64) -> anyhow::Result<PathBuf> {
    cp.apply(RBAC)
        .context("kube-proxy's ServiceAccount and binding")?;
    let token = cp
        .token("kube-system", "kube-proxy", token_secs, None)
        .context("a token for kube-system/kube-proxy")?;
    let token_file = cp
        .write_file("kube-proxy.token", &token)
        .context("kube-proxy's token file")?;
    cp.token_kubeconfig("kube-proxy", &token_file)
        .context("kube-proxy's kubeconfig")
}

/// Creates kube-proxy's account (see [`account`]) and writes its configuration for `mode`
/// (`nftables` or `iptables`) and `min_sync` into the control plane's folder.
pub fn setup(
    cp: &ControlPlane,
    program: &Path,
    mode: &str,
    cluster_cidr: &str,
    min_sync: MinSync,
) -> anyhow::Result<KubeProxySetup> {
    let kubeconfig = account(cp, 24 * 3600)?;
    KubeProxySetup::write(cp, program, &kubeconfig, mode, cluster_cidr, min_sync)
}

impl KubeProxySetup {
    /// Writes the configuration for `mode` and `min_sync` (kubeconfig made by [`account`]).
    pub fn write(
        cp: &ControlPlane,
        program: &Path,
        kubeconfig: &Path,
        mode: &str,
        cluster_cidr: &str,
        min_sync: MinSync,
    ) -> anyhow::Result<KubeProxySetup> {
        let text = config(mode, cluster_cidr, kubeconfig, min_sync);
        let name = format!("kube-proxy-{mode}-{}.conf", min_sync.name());
        let config = cp
            .write_file(&name, &text)
            .context("kube-proxy's configuration")?;
        Ok(KubeProxySetup {
            program: program.to_path_buf(),
            kubeconfig: kubeconfig.to_path_buf(),
            config,
        })
    }

    /// kube-proxy's arguments on `node`, as kubeadm's DaemonSet gives them.
    pub fn args(&self, node: &str) -> Vec<String> {
        vec![
            format!("--config={}", self.config.display()),
            format!("--hostname-override={node}"),
        ]
    }

    /// Starts kube-proxy on the lab's `node`.
    pub fn start(&self, lab: &Lab, node: &str) -> anyhow::Result<LabProcess> {
        lab.spawn_on_node(node, &self.program, self.args(node))
            .with_context(|| format!("start kube-proxy on {node}"))
    }

    /// Starts kube-proxy as `node` in namespace `ns`, its output appended to `log`.
    pub fn start_in(&self, ns: &str, node: &str, log: &Path) -> anyhow::Result<LabProcess> {
        LabProcess::spawn("kube-proxy", ns, &self.program, self.args(node), log)
            .with_context(|| format!("start kube-proxy in {ns}"))
    }

    /// `kube-proxy --cleanup` in namespace `ns` (removes its rules of every mode), then empties
    /// the namespace's conntrack table, so the next proxy starts as on a fresh node.
    pub fn cleanup_in(&self, ns: &str) -> anyhow::Result<()> {
        let out = netns::run_unchecked(&mut netns::exec_command(
            ns,
            &self.program,
            ["--cleanup", "--v=0"],
        ))
        .context("run kube-proxy --cleanup")?;
        anyhow::ensure!(
            out.status.success(),
            "kube-proxy --cleanup in {ns}: {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        flush_conntrack_in(ns)
    }

    /// [`KubeProxySetup::cleanup_in`] on the lab's `node`.
    pub fn cleanup(&self, lab: &Lab, node: &str) -> anyhow::Result<()> {
        let ns = lab.node(node).context("no such node")?.netns.clone();
        self.cleanup_in(&ns)
    }
}

/// Empties namespace `ns`'s conntrack table, so connections made under one proxy do not carry
/// their NAT into the next one's table.
pub fn flush_conntrack_in(ns: &str) -> anyhow::Result<()> {
    let out = netns::run_unchecked(&mut netns::exec_command(ns, "conntrack", ["-F"]))
        .context("run conntrack -F")?;
    anyhow::ensure!(
        out.status.success(),
        "conntrack -F in {ns}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_configuration_is_kubeadms_with_max_per_core_zero() {
        let text = config(
            "nftables",
            "10.64.0.0/12",
            Path::new("/k"),
            MinSync::Default,
        );
        for line in [
            "kind: KubeProxyConfiguration",
            "mode: nftables",
            "clusterCIDR: 10.64.0.0/12",
            "  kubeconfig: /k",
            "  maxPerCore: 0",
            "  minSyncPeriod: 0s",
            "metricsBindAddress: \"\"",
        ] {
            assert!(text.lines().any(|l| l == line), "no {line:?} in\n{text}");
        }
    }

    #[test]
    fn zero_is_written_as_one_nanosecond_in_both_modes() {
        let text = config("iptables", "10.64.0.0/12", Path::new("/k"), MinSync::Zero);
        let mins: Vec<&str> = text
            .lines()
            .filter(|l| l.trim_start().starts_with("minSyncPeriod:"))
            .collect();
        assert_eq!(mins, ["  minSyncPeriod: 1ns", "  minSyncPeriod: 1ns"]);
        assert_eq!(MinSync::Zero.name(), "zero");
    }
}
