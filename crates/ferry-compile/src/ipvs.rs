//! IPVS mode: a [`Plan`](crate::Plan) rendered the way upstream kube-proxy's IPVS proxier
//! programs a node, as typed desired state.
//!
//! Per service port: one IPVS virtual server per ClusterIP, external IP, load-balancer IP and
//! (per node address) NodePort, with the plan's endpoint set as masquerading real servers of
//! weight 1, the configured scheduler, and ClientIP affinity as persistence; the ClusterIPs,
//! external and load-balancer IPs as /32 (/128) addresses on the `kube-ipvs0` dummy interface;
//! upstream's ipsets (`KUBE-CLUSTER-IP`, `KUBE-NODE-PORT-TCP`, …) with their entries; and the
//! fixed iptables chains that match those sets (`KUBE-SERVICES`, `KUBE-NODE-PORT`,
//! `KUBE-POSTROUTING`, …). Text renderers print each part as the tool that shows it would
//! (`ipvsadm -Ln`, `ipset save`, `iptables-restore` input). See docs/src/modes/ipvs-layout.md.

pub mod chains;
mod model;
mod node;
mod render;
mod ruleset;
pub mod sets;
mod text;

pub use model::{
    host_netmask, Forward, FrontendKind, RealServer, Scheduler, VirtualAddress, VirtualServer,
    VirtualService, FLAG_HASHED, FLAG_PERSISTENT, FLAG_SOURCE_HASH_PORT,
};
pub use node::NodeRules;
pub use render::{node_port_addresses, render, render_service, RenderContext};
pub use ruleset::{NodeSettings, Ruleset, ServiceIpvs};
pub use text::{ipvsadm_list, real_server_line, service_line, RealServerLine, IPVSADM_HEADER};

/// The dummy interface holding the service addresses, so the kernel takes them as local and
/// IPVS (which hooks local input) sees their traffic. Upstream's name.
pub const DUMMY_DEVICE: &str = "kube-ipvs0";

#[cfg(test)]
mod tests;
