//! Upstream kube-proxy's chain names.

use std::net::SocketAddr;

use data_encoding::BASE32;
use sha2::{Digest, Sha256};

use ferry_model::ServicePortName;

/// Entry point for service traffic (nat: DNAT dispatch; filter: REJECT/DROP for services
/// without endpoints).
pub const KUBE_SERVICES: &str = "KUBE-SERVICES";
/// filter: external destinations (NodePorts, external IPs) without usable endpoints.
pub const KUBE_EXTERNAL_SERVICES: &str = "KUBE-EXTERNAL-SERVICES";
/// nat: NodePort dispatch (the last rule of nat `KUBE-SERVICES` jumps here); filter: health
/// check node ports.
pub const KUBE_NODEPORTS: &str = "KUBE-NODEPORTS";
/// nat: masquerades marked packets.
pub const KUBE_POSTROUTING: &str = "KUBE-POSTROUTING";
/// nat: marks a packet for masquerading.
pub const KUBE_MARK_MASQ: &str = "KUBE-MARK-MASQ";
/// filter: accepts forwarded service traffic (marked, or of an established connection).
pub const KUBE_FORWARD: &str = "KUBE-FORWARD";
/// filter: drops load-balancer IP traffic that a `KUBE-FW-` chain did not accept (it was not
/// DNATed, so it still carries the load-balancer IP).
pub const KUBE_PROXY_FIREWALL: &str = "KUBE-PROXY-FIREWALL";
/// The canary chain in mangle, nat and filter: its disappearance means someone flushed the
/// tables, and the next sync must be a full one.
pub const CANARY: &str = "KUBE-PROXY-CANARY";
/// nat, Ferry's own: "mark for masquerade unless the source is a pod", used only when the
/// local-traffic detector has several CIDRs (iptables cannot negate a list of sources).
pub const NON_POD_MASQ: &str = "KUBE-FERRY-NON-POD-MASQ";
/// upstream's nfacct counter of the packets `KUBE-FORWARD` drops because conntrack marks them
/// invalid (`kubeproxy_iptables_ct_state_invalid_dropped_packets_total`).
pub const CT_STATE_INVALID_COUNTER: &str = "ct_state_invalid_dropped_pkts";
/// upstream's nfacct counter of the packets to localhost NodePorts
/// (`kubeproxy_iptables_localhost_nodeports_accepted_packets_total`): the first of each
/// connection, counted in nat as upstream's rule counts them.
pub const LOCALHOST_NODE_PORTS_COUNTER: &str = "localhost_nps_accepted_pkts";
/// The comment of the rule Ferry appends to nat `KUBE-POSTROUTING` (iptables and IPVS modes):
/// the one difference between Ferry's `KUBE-*` chains and kube-proxy's. kube-proxy rewrites
/// `KUBE-POSTROUTING` whole at every sync, so the rule is there exactly when Ferry, not
/// kube-proxy, wrote the layout last: `ferry cleanup` removes the chains only then (or when
/// asked to remove kube-proxy's too).
pub const OWNER_COMMENT: &str = "written by Ferry; kube-proxy removes this rule when it syncs";

/// The owner marker rule ([`OWNER_COMMENT`]), as `iptables` arguments after the chain. It
/// comes after the `MASQUERADE` (which every packet reaching it takes), so it never matches.
pub fn owner_marker_args() -> [&'static str; 6] {
    ["-m", "comment", "--comment", OWNER_COMMENT, "-j", "RETURN"]
}

/// Cluster-policy endpoint dispatch of a service port.
pub const SVC_PREFIX: &str = "KUBE-SVC-";
/// Local-policy endpoint dispatch of a service port.
pub const LOCAL_PREFIX: &str = "KUBE-SVL-";
/// External-traffic chain of a service port (NodePort, external and load-balancer IPs).
pub const EXTERNAL_PREFIX: &str = "KUBE-EXT-";
/// Load-balancer source-range firewall of a service port (nat: allowed sources go on to
/// `KUBE-EXT-`).
pub const FIREWALL_PREFIX: &str = "KUBE-FW-";
/// One endpoint of a service port.
pub const SEP_PREFIX: &str = "KUBE-SEP-";
/// Every per-service chain prefix: chains with these names belong to the proxy.
pub const SERVICE_CHAIN_PREFIXES: [&str; 5] = [
    SVC_PREFIX,
    LOCAL_PREFIX,
    EXTERNAL_PREFIX,
    FIREWALL_PREFIX,
    SEP_PREFIX,
];

fn hash16(input: &str) -> String {
    let digest = Sha256::digest(input.as_bytes());
    let mut encoded = BASE32.encode(&digest);
    encoded.truncate(16);
    encoded
}

/// Upstream's `portProtoHash`: the first 16 characters of the base32 (RFC 4648, upper case)
/// SHA-256 of `namespace/name:port` followed by the lower-case protocol. Chain names must stay
/// within iptables' 28 characters.
pub fn port_proto_hash(name: &ServicePortName) -> String {
    hash16(&format!("{name}{}", name.protocol.as_str()))
}

/// `prefix` + the service port's hash (`KUBE-SVC-…`, `KUBE-SVL-…`, `KUBE-EXT-…`, `KUBE-FW-…`).
pub fn service_chain(prefix: &str, name: &ServicePortName) -> String {
    format!("{prefix}{}", port_proto_hash(name))
}

/// `KUBE-SEP-` + the hash of `namespace/name:port`, the protocol and the endpoint `IP:port`.
pub fn endpoint_chain(name: &ServicePortName, endpoint: &SocketAddr) -> String {
    let proto = name.protocol.as_str();
    format!(
        "{SEP_PREFIX}{}",
        hash16(&format!("{name}{proto}{endpoint}"))
    )
}
