//! Service health-check NodePorts: one HTTP server per `externalTrafficPolicy: Local`
//! LoadBalancer Service with a `healthCheckNodePort`, as upstream kube-proxy runs them
//! (pkg/proxy/healthcheck/service_health.go).
//!
//! Cloud load balancers probe this port on every node, so that a Local service only gets
//! traffic on nodes that have an endpoint for it. Any path, any method: 200 when this node has
//! at least one ready local endpoint and the proxy is healthy, 503 otherwise; upstream's
//! headers and JSON body (indented with tabs, shown here with spaces):
//!
//! ```text
//! {
//!     "service": {
//!         "namespace": "dev",
//!         "name": "web"
//!     },
//!     "localEndpoints": 2,
//!     "serviceProxyHealthy": true
//! }
//! ```
//!
//! Servers are opened and closed after each successful sync, as services come and go, on all
//! addresses (`0.0.0.0`). A port that cannot be bound is logged and tried again at the next
//! sync; the other services are not affected.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use axum::Router;

use ferry_model::ServiceName;

use crate::health::ProxyHealth;
use crate::serve::json_response;
use crate::serve::Server;
use crate::sync::status::HealthCheck;

#[derive(Debug)]
struct Instance {
    port: u16,
    local_endpoints: Arc<AtomicUsize>,
    server: Server,
}

/// The open health-check servers of this node.
#[derive(Debug)]
pub struct ServiceHealthServers {
    health: ProxyHealth,
    listen: IpAddr,
    services: BTreeMap<ServiceName, Instance>,
}

impl ServiceHealthServers {
    /// No server open yet; they will listen on every address of the node.
    pub fn new(health: ProxyHealth) -> Self {
        Self::listening_on(health, IpAddr::V4(Ipv4Addr::UNSPECIFIED))
    }

    /// No server open yet; they will listen on `listen` (tests use 127.0.0.1).
    pub fn listening_on(health: ProxyHealth, listen: IpAddr) -> Self {
        Self {
            health,
            listen,
            services: BTreeMap::new(),
        }
    }

    /// Makes the open servers match `wanted`: closes those no longer wanted (or whose port
    /// changed), opens the new ones, and updates every count of local endpoints.
    pub async fn sync(&mut self, wanted: &BTreeMap<ServiceName, HealthCheck>) {
        let stale: Vec<ServiceName> = self
            .services
            .iter()
            .filter(|(name, i)| wanted.get(*name).is_none_or(|w| w.port != i.port))
            .map(|(name, _)| name.clone())
            .collect();
        for name in stale {
            if let Some(instance) = self.services.remove(&name) {
                tracing::info!(service = %name, port = instance.port, "closing health check");
                instance.server.stop().await;
            }
        }
        for (name, hc) in wanted {
            if let Some(instance) = self.services.get(name) {
                instance
                    .local_endpoints
                    .store(hc.local_endpoints, Ordering::Relaxed);
                continue;
            }
            let local_endpoints = Arc::new(AtomicUsize::new(hc.local_endpoints));
            let router = handler(name.clone(), local_endpoints.clone(), self.health.clone());
            let addr = SocketAddr::new(self.listen, hc.port);
            match Server::start("health-check", addr, router).await {
                Ok(server) => {
                    tracing::info!(service = %name, port = hc.port, "opened health check");
                    self.services.insert(
                        name.clone(),
                        Instance {
                            port: hc.port,
                            local_endpoints,
                            server,
                        },
                    );
                }
                Err(e) => tracing::error!(
                    service = %name,
                    port = hc.port,
                    "cannot open the health check, retrying at the next sync: {e}"
                ),
            }
        }
    }

    /// The open servers: service → bound address.
    pub fn open(&self) -> BTreeMap<ServiceName, SocketAddr> {
        self.services
            .iter()
            .map(|(name, i)| (name.clone(), i.server.local_addr()))
            .collect()
    }

    /// Closes every server.
    pub async fn close_all(&mut self) {
        for (_, instance) in std::mem::take(&mut self.services) {
            instance.server.stop().await;
        }
    }
}

/// Upstream's body, byte for byte (Go's `%q` of a Kubernetes name needs no escaping).
pub fn body(name: &ServiceName, local_endpoints: usize, proxy_healthy: bool) -> String {
    format!(
        "{{\n\t\"service\": {{\n\t\t\"namespace\": \"{}\",\n\t\t\"name\": \"{}\"\n\t}},\n\t\"localEndpoints\": {local_endpoints},\n\t\"serviceProxyHealthy\": {proxy_healthy}\n}}",
        name.namespace, name.name
    )
}

fn handler(name: ServiceName, local_endpoints: Arc<AtomicUsize>, health: ProxyHealth) -> Router {
    Router::new().fallback(move || {
        let count = local_endpoints.load(Ordering::Relaxed);
        let healthy = health.is_healthy();
        let status = if count > 0 && healthy { 200 } else { 503 };
        let body = body(&name, count, healthy);
        async move { json_response(status, body) }
    })
}

#[cfg(test)]
mod tests;
