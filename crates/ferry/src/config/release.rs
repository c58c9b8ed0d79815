//! What kube-proxy 1.37 says and refuses about the proxy mode and the two feature gates of its
//! 1.37 mode changes (cmd/kube-proxy/app/server_linux.go, pkg/features/kube_features.go,
//! pkg/proxy/apis/config/validation): the warnings a user moving from kube-proxy sees again in
//! Ferry's log and in `ferry check`, and the gates Ferry acts on. docs/src/architecture/
//! kube-proxy-1-37.md lists every 1.34–1.37 change and what Ferry does about it.

use super::kube_proxy::KubeProxyConfiguration;
use super::{ConfigError, ProxyMode};

/// KEP-5495: IPVS mode may be used (GA, default true; deprecated in 1.37). With it false,
/// kube-proxy refuses `mode: ipvs`.
pub const GATE_IPVS: &str = super::gates::IPVS;
/// KEP-6032 (alpha in 1.37, default false): nftables mode answers NodePorts on loopback when
/// `nodePortAddresses` lists a loopback range.
pub const GATE_NFT_LOCALHOST: &str = super::gates::NFT_LOCALHOST;

/// Upstream's mode validation with `KubeProxyIPVS` false: IPVS is no valid mode. `place` names
/// the field (`kube-proxy.yaml: mode`, or `mode`).
pub fn check_mode(
    mode: ProxyMode,
    kp: &KubeProxyConfiguration,
    place: &str,
) -> Result<(), ConfigError> {
    if mode == ProxyMode::Ipvs && kp.feature_gates.get(GATE_IPVS) == Some(&false) {
        return Err(ConfigError::new(
            place,
            format!(
                "ipvs mode needs the {GATE_IPVS} feature gate, which featureGates turns off \
                 (kube-proxy refuses it too): use nftables or iptables"
            ),
        ));
    }
    Ok(())
}

/// `nftables.localhostNodePorts` as the configuration says it, or, unsaid, as the
/// `KubeProxyNFTablesLocalhostNodePorts` gate does: off turns localhost NodePorts off, as in
/// kube-proxy (whose nftables mode then never answers them); on leaves Ferry's default (answered
/// when `nodePortAddresses` lists loopback, the gate's rule upstream).
pub fn nftables_localhost_node_ports(kp: &KubeProxyConfiguration) -> Option<bool> {
    let gate_off = kp.feature_gates.get(GATE_NFT_LOCALHOST) == Some(&false);
    kp.nftables
        .localhost_node_ports
        .or(gate_off.then_some(false))
}

/// kube-proxy 1.37's start-up warning when no mode was given: `origin` names the file whose
/// `mode` is empty.
pub fn defaulted_mode_warning(origin: &str) -> String {
    format!(
        "no proxy mode given (mode \"\" in {origin}): running iptables mode, as kube-proxy \
         does; kube-proxy's default becomes nftables in Kubernetes 1.40: to keep iptables mode, say `mode: iptables` in the file or --proxy-mode iptables"
    )
}

/// kube-proxy's start-up warning in IPVS mode (deprecated since 1.35, KEP-5495).
pub fn mode_warning(mode: ProxyMode) -> Option<String> {
    (mode == ProxyMode::Ipvs).then(|| {
        "IPVS mode is deprecated: kube-proxy's ipvs proxier is to be disabled by default in \
         Kubernetes 1.40 and removed in 1.43 (KEP-5495); migrate to nftables mode"
            .to_owned()
    })
}

#[cfg(test)]
mod tests;
