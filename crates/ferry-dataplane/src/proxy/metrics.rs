//! Per-service-port counters of the proxy, as plain data the binary registers.

use std::sync::atomic::{AtomicU64, Ordering};

use ferry_model::{IpFamily, ServicePortName};

/// Metric names (OpenMetrics), labelled with the service port (`namespace`, `service`,
/// `port`, `protocol`) and `ip_family`, unless said otherwise.
pub mod names {
    /// Gauge: proxied TCP connections and UDP associations open now.
    pub const ACTIVE: &str = "ferry_userspace_active_connections";
    /// Counter: TCP connections and UDP associations proxied to an endpoint.
    pub const CONNECTIONS: &str = "ferry_userspace_connections_total";
    /// Counter, label `direction` (`to_endpoint`, `to_client`): bytes copied.
    pub const BYTES: &str = "ferry_userspace_bytes_total";
    /// Counter: connections or datagrams that could not be proxied (no usable endpoint, every
    /// dial attempt failed, a copy failed midway).
    pub const ERRORS: &str = "ferry_userspace_connection_errors_total";
    /// Counter: failed dial attempts to an endpoint (each one retried on the next endpoint).
    pub const DIAL_FAILURES: &str = "ferry_userspace_endpoint_dial_failures_total";
    /// Gauge, label `ip_family` only: service ports of the userspace mode left without a
    /// proxy port by the last sync (`portRange` full, or the port could not be listened on);
    /// their frontends are rejected, each is named in a warning.
    pub const WITHOUT_PROXY_PORT: &str = "ferry_userspace_service_ports_without_proxy_port";
}

/// The live counters of one service port in one family.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) active: AtomicU64,
    pub(crate) connections: AtomicU64,
    pub(crate) to_endpoint: AtomicU64,
    pub(crate) to_client: AtomicU64,
    pub(crate) errors: AtomicU64,
    pub(crate) dial_failures: AtomicU64,
}

impl Counters {
    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// Counts a connection (or association) as open until the guard is dropped.
    pub(crate) fn open(&self) -> ActiveGuard<'_> {
        Self::add(&self.connections, 1);
        Self::add(&self.active, 1);
        ActiveGuard(&self.active)
    }

    fn read(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }
}

/// Decrements the active gauge when the connection ends, however it ends.
pub(crate) struct ActiveGuard<'a>(&'a AtomicU64);

impl Drop for ActiveGuard<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A snapshot of one service port's counters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortMetrics {
    /// The service port.
    pub name: ServicePortName,
    /// The family of its listeners.
    pub family: IpFamily,
    /// [`names::ACTIVE`].
    pub active: u64,
    /// [`names::CONNECTIONS`].
    pub connections: u64,
    /// [`names::BYTES`] `direction="to_endpoint"`.
    pub bytes_to_endpoint: u64,
    /// [`names::BYTES`] `direction="to_client"`.
    pub bytes_to_client: u64,
    /// [`names::ERRORS`].
    pub errors: u64,
    /// [`names::DIAL_FAILURES`].
    pub dial_failures: u64,
}

impl PortMetrics {
    pub(crate) fn of(name: &ServicePortName, family: IpFamily, c: &Counters) -> Self {
        Self {
            name: name.clone(),
            family,
            active: Counters::read(&c.active),
            connections: Counters::read(&c.connections),
            bytes_to_endpoint: Counters::read(&c.to_endpoint),
            bytes_to_client: Counters::read(&c.to_client),
            errors: Counters::read(&c.errors),
            dial_failures: Counters::read(&c.dial_failures),
        }
    }
}
