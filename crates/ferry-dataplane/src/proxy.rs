//! The userspace proxy engine: listeners that forward service traffic in user space.
//!
//! Machinery, not a mode: it imports none. Used by the userspace proxy mode (every service port, behind the redirect rules of
//! `ferry_compile::userspace`) and by the kernel modes for localhost NodePorts
//! (`127.0.0.1:NODEPORT`, `[::1]:NODEPORT`, which the kernel cannot DNAT to a pod without
//! `route_localnet`). For each service port and IP family it holds up to two listeners — the
//! proxy port on the node's addresses, and the NodePort on loopback — and the state its
//! connections share: the port's [`ServicePlan`] (endpoint sets and policies), a round-robin
//! balancer with session-affinity pins, and counters.
//!
//! A sync updates this table in place: an endpoint change is seen by the next connection at
//! once and established connections keep running; a removed service port closes its
//! listeners and its connections. TCP is copied with `splice(2)` ([`splice`]), UDP relayed
//! per client association ([`udp`]); SCTP is refused with a log line. Endpoints see the
//! node, not the client, as the source of proxied connections (the proxy connects to them
//! itself): the seeds' `externalTrafficPolicy` source-IP questions only make sense in the
//! kernel modes.

mod engine;
pub mod ephemeral;
mod localhost;
mod metrics;
mod route;
mod sock;
mod splice;
mod table;
mod tcp;
mod udp;

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use ferry_compile::ServicePlan;
use ferry_model::{IpFamily, ServicePortName};

pub use engine::Stats;
pub use metrics::{names, PortMetrics};
pub use table::UserspaceProxy;

pub(crate) use engine::Engine;
pub(crate) use localhost::WithLocalhostNodePorts;

use metrics::Counters;
use route::{Balancer, Sources};

/// The engine's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyConfig {
    /// `udpIdleTimeout`: a UDP association without a datagram either way for this long ends
    /// (upstream's default: 250 ms).
    pub udp_idle_timeout: Duration,
    /// Address of the IPv4 proxy-port listeners (upstream's `bindAddress`; all addresses by
    /// default, the redirect rules choose what reaches them).
    pub listen_v4: Ipv4Addr,
    /// Address of the IPv6 proxy-port listeners.
    pub listen_v6: Ipv6Addr,
    /// How TCP bytes are copied.
    pub copy: CopyMode,
}

/// How the engine copies a TCP connection's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CopyMode {
    /// `splice(2)` through a pipe: the bytes stay in the kernel, no buffer per connection.
    #[default]
    Splice,
    /// Read into a buffer and write it out (tokio's `copy_bidirectional`, two 8 KiB buffers
    /// per connection): the plain way, kept to measure what splicing gains.
    Buffered,
}

impl Default for ProxyConfig {
    fn default() -> Self {
        Self {
            udp_idle_timeout: Duration::from_millis(250),
            listen_v4: Ipv4Addr::UNSPECIFIED,
            listen_v6: Ipv6Addr::UNSPECIFIED,
            copy: CopyMode::Splice,
        }
    }
}

/// One service port the engine serves, in one family.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxiedPort {
    /// What its traffic must do (endpoint sets, policies, affinity).
    pub plan: ServicePlan,
    /// The proxy port its redirected traffic arrives at (userspace mode); `None` for none.
    pub proxy_port: Option<u16>,
    /// Serve its NodePort on loopback (localhost NodePorts). The listener is open while the
    /// service has endpoints the node's own traffic may use, so a connection without one is
    /// refused by the kernel, as in the kernel modes.
    pub localhost_node_port: bool,
}

/// A listener that could not be opened; the rest of the sync went on, and the next sync tries
/// again.
#[derive(Debug, thiserror::Error)]
#[error("{name} ({protocol}): cannot listen on {addr}", protocol = name.protocol)]
pub struct ListenError {
    /// The service port.
    pub name: ServicePortName,
    /// The address.
    pub addr: SocketAddr,
    /// True when another socket holds the port (the proxy port should be marked unusable).
    pub in_use: bool,
    /// The cause.
    #[source]
    pub source: std::io::Error,
}

/// What a sync changed.
#[derive(Debug, Default)]
pub struct SyncReport {
    /// Service ports added.
    pub added: usize,
    /// Service ports updated in place.
    pub updated: usize,
    /// Service ports removed (listeners and connections closed).
    pub removed: usize,
    /// Listeners opened.
    pub listeners_opened: usize,
    /// Listeners closed.
    pub listeners_closed: usize,
    /// Listeners that could not be opened.
    pub failed: Vec<ListenError>,
}

impl SyncReport {
    /// Adds another report's figures to this one.
    pub fn add(&mut self, other: SyncReport) {
        self.added += other.added;
        self.updated += other.updated;
        self.removed += other.removed;
        self.listeners_opened += other.listeners_opened;
        self.listeners_closed += other.listeners_closed;
        self.failed.extend(other.failed);
    }
}

/// The state a service port's listeners and connections share.
pub(crate) struct PortState {
    pub(crate) name: ServicePortName,
    pub(crate) family: IpFamily,
    plan: RwLock<Arc<ServicePlan>>,
    sources: Arc<RwLock<Arc<Sources>>>,
    pub(crate) balancer: Balancer,
    pub(crate) counters: Counters,
    /// Cancelled when the service port is removed: every listener and connection ends.
    pub(crate) closed: CancellationToken,
    pub(crate) udp_idle: Duration,
    pub(crate) copy: CopyMode,
}

impl PortState {
    /// The current plan (a sync may replace it at any time; a connection reads it once per
    /// endpoint choice).
    pub(crate) fn plan(&self) -> Arc<ServicePlan> {
        self.plan
            .read()
            .map_or_else(|e| e.into_inner().clone(), |p| p.clone())
    }

    fn set_plan(&self, plan: ServicePlan) {
        let mut slot = self.plan.write().unwrap_or_else(|e| e.into_inner());
        *slot = Arc::new(plan);
    }

    /// The node's addresses and pod CIDRs, as of the last sync.
    pub(crate) fn sources(&self) -> Arc<Sources> {
        self.sources
            .read()
            .map_or_else(|e| e.into_inner().clone(), |s| s.clone())
    }
}

#[cfg(test)]
mod tests;
