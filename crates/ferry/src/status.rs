//! `ferry status`: what a running agent programs, as `cilium-dbg service list` shows it. Every
//! frontend (ClusterIP, NodePort, external IP, load-balancer IP) → its backends with their
//! state (ready, serving, terminating, local) and whether they are used, the policies in
//! force, each IP family's last sync (time, full or partial, failures), and what the kernel
//! holds for each service (programmed, or where it differs: the mode's reading of the kernel).
//!
//! The agent answers `GET /status` on its metrics address with [`Status`] as JSON (built by
//! [`collect`] in the agent's task, which owns the state); `ferry status` fetches it
//! ([`client`]) and prints it as text ([`text`]) or as the JSON itself. In standalone mode each
//! endpoint also shows its Pod's readiness probes ([`probes`]), which `ferry explain --live`
//! reads back.

use serde::{Deserialize, Serialize};

mod build;
pub mod client;
pub mod history;
pub mod probes;
pub mod text;

pub use build::{collect, Inputs};
pub use history::History;

/// Everything `ferry status` shows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    /// Ferry's version.
    pub version: String,
    /// This node's name.
    pub node: String,
    /// The mode as prepared on this node (`iptables mode, nft backend`).
    pub mode: String,
    /// Where Services come from.
    pub source: SourceStatus,
    /// Each IP family's syncs and kernel state.
    pub families: Vec<FamilyStatus>,
    /// What start-up did with each conntrack setting (`conntrack.*`), one line each.
    #[serde(default)]
    pub conntrack: Vec<String>,
    /// Every frontend, by service port.
    pub frontends: Vec<Frontend>,
}

/// Where Services come from, and whether it is readable.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SourceStatus {
    /// `manifests PATH` or `Kubernetes API`.
    pub description: String,
    /// What is wrong with it now, if anything (`the path is missing: the last good objects
    /// are kept`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

/// One IP family's syncs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FamilyStatus {
    /// `IPv4` or `IPv6`.
    pub family: String,
    /// The last successful sync.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_sync: Option<SyncRecord>,
    /// The time of the last successful full sync (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_full_sync: Option<String>,
    /// Failed syncs since the last successful one.
    pub failures: u32,
    /// Why the last sync failed, while it keeps failing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// The kernel: the mode's objects are there, and what it holds of services Ferry would not
    /// program.
    pub kernel: KernelSummary,
}

/// One successful sync.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SyncRecord {
    /// When it ended (RFC 3339).
    pub time: String,
    /// `full` or `partial`.
    pub kind: String,
    /// How long it took, in milliseconds.
    pub duration_ms: f64,
}

/// What the mode read of the kernel, for a family.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KernelSummary {
    /// The mode's objects (Ferry's table, its chains) are in this network namespace.
    pub present: bool,
    /// Why the kernel could not be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Objects of services Ferry would not program.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stray: Vec<String>,
}

/// One frontend: an address (or a node port) and protocol through which a service port is
/// reached.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Frontend {
    /// `ClusterIP`, `NodePort`, `ExternalIP` or `LoadBalancerIP`.
    pub kind: String,
    /// `10.96.0.10:80`, `[fd00::10]:80`, or `*:32223` for a node port.
    pub address: String,
    /// `tcp`, `udp` or `sctp`.
    pub protocol: String,
    /// `namespace/name`.
    pub service: String,
    /// The port's name (empty for a single unnamed port).
    pub port: String,
    /// The policies in force for this frontend.
    pub policy: Policy,
    /// What a new connection gets: `forward` (to `endpointSet`), `drop` or `reject`.
    pub dispatch: String,
    /// The set new connections are balanced over: `cluster` or `local`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint_set: Option<String>,
    /// Every endpoint of the service port, used or not.
    pub backends: Vec<Backend>,
    /// What the kernel holds for the frontend's service.
    pub kernel: KernelState,
}

/// The policies in force for a frontend.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Policy {
    /// The traffic policy it follows: `internalTrafficPolicy` for the ClusterIP,
    /// `externalTrafficPolicy` for the others (`Cluster` or `Local`).
    pub traffic_policy: String,
    /// `sessionAffinity: ClientIP` timeout, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity_seconds: Option<u32>,
    /// How topology hints shape the cluster-wide set on this node.
    pub topology: String,
    /// Where a node port answers (`every local address but loopback`, `10.1.1.9/32`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answers_on: Option<String>,
    /// `loadBalancerSourceRanges` (load-balancer IPs only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub source_ranges: Vec<String>,
}

/// One endpoint of a frontend's service port. Per-endpoint facts go here (a readiness probe's
/// state, for instance): new fields are optional, so older clients read newer agents.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Backend {
    /// `address:port`.
    pub address: String,
    /// The node it runs on (`nodeName`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// Its zone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    /// `conditions.ready`.
    pub ready: bool,
    /// `conditions.serving`.
    pub serving: bool,
    /// `conditions.terminating`.
    pub terminating: bool,
    /// On this node.
    pub local: bool,
    /// New connections to this frontend may go to it.
    pub used: bool,
    /// Why not, when not used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub excluded: Option<String>,
    /// The Pod behind it (`namespace/name`, its `targetRef`), when the slice names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<String>,
    /// Its Pod's readiness probes, as Ferry runs them (standalone mode), by container.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub probes: Vec<ContainerProbe>,
}

/// One container's readiness probe, as Ferry runs it (standalone mode).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerProbe {
    /// The container's name.
    pub container: String,
    /// `ready`, `not ready` (the probe's verdict), `pending` (no verdict yet: the Pod's status
    /// decides meanwhile) or `not run` (`exec`, or a probe that cannot be resolved: the Pod's
    /// status decides).
    pub state: String,
    /// What is probed (`GET http://10.0.1.1:8080/hello`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// The last run's result: `success`, `failure` or `error`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_result: Option<String>,
    /// What the last run found, when it did not succeed
    /// (`HTTP probe failed with statuscode: 503`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_message: Option<String>,
    /// When the last run ended (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_time: Option<String>,
    /// Equal results in a row, the last one included.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub in_a_row: u32,
    /// When the current run of failures started (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failing_since: Option<String>,
    /// Why the probe holds the endpoint back (`not ready: readiness probe failing since …`),
    /// or why it is not run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// What the kernel holds for a service.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KernelState {
    /// `programmed` (as Ferry would program it), `differs`, or `unknown` (the kernel could not
    /// be read).
    pub state: String,
    /// Where it differs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub differences: Vec<String>,
}

#[cfg(test)]
mod tests;
