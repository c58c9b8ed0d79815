//! Per-service figures operators watch, kept up to date by each successful sync: the
//! health-check NodePort and local ready endpoints of `externalTrafficPolicy: Local`
//! LoadBalancer Services, the service ports whose Local policy has no local endpoint, and the
//! external and load-balancer IPs a Service claims but another serves (logged when that
//! starts and when it ends).
//!
//! Computed from the node view ([`NodeView::build_service_ports`]) of the services a sync
//! touched, so an incremental sync costs only its changed services, as the rules do.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use ferry_model::{
    ClusterState, NodeContext, NodeView, ServiceName, ServicePortName, TrafficPolicy, Unserved,
};

/// A service's health-check NodePort and what it reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HealthCheck {
    /// `spec.healthCheckNodePort`.
    pub port: u16,
    /// Ready endpoints on this node, counted once per IP (upstream `LocalReadyEndpoints`:
    /// an endpoint serving two ports is one endpoint).
    pub local_endpoints: usize,
}

/// Service ports with a Local traffic policy and no local endpoint (upstream's
/// `sync_proxy_rules_no_local_endpoints_total`, by `traffic_policy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NoLocalEndpoints {
    /// `internalTrafficPolicy: Local` ports without a local endpoint.
    pub internal: usize,
    /// `externalTrafficPolicy: Local` externally reachable ports without a local endpoint.
    pub external: usize,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Entry {
    health_check: Option<HealthCheck>,
    no_local: NoLocalEndpoints,
    /// Destinations its ports claim but another Service serves.
    unserved: Vec<(ServicePortName, u16, Unserved)>,
}

/// The figures of every service, as of the last successful sync.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServiceStatus {
    entries: BTreeMap<ServiceName, Entry>,
}

impl ServiceStatus {
    /// Recomputes every service.
    pub fn rebuild(&mut self, state: &ClusterState, ctx: &NodeContext) {
        let mut old = std::mem::take(&mut self.entries);
        for svc in state.services() {
            let before = old.remove(&svc.name).unwrap_or_default();
            self.entries.insert(svc.name.clone(), before);
            self.recompute(state, ctx, &svc.name);
        }
    }

    /// Recomputes the named services (a service that is gone is dropped).
    pub fn update(
        &mut self,
        state: &ClusterState,
        ctx: &NodeContext,
        names: &BTreeSet<ServiceName>,
    ) {
        for name in names {
            self.recompute(state, ctx, name);
        }
    }

    fn recompute(&mut self, state: &ClusterState, ctx: &NodeContext, name: &ServiceName) {
        let entry = entry(state, ctx, name);
        if state.service(name).is_some() {
            let before = self.entries.get(name).map_or(&[][..], |e| &e.unserved);
            log_unserved(before, &entry.unserved);
        }
        if entry == Entry::default() {
            self.entries.remove(name);
        } else {
            self.entries.insert(name.clone(), entry);
        }
    }

    /// Services that need a health-check NodePort server on this node.
    pub fn health_checks(&self) -> BTreeMap<ServiceName, HealthCheck> {
        self.entries
            .iter()
            .filter_map(|(name, e)| e.health_check.map(|hc| (name.clone(), hc)))
            .collect()
    }

    /// Totals over all services.
    pub fn no_local_endpoints(&self) -> NoLocalEndpoints {
        self.entries
            .values()
            .fold(NoLocalEndpoints::default(), |acc, e| NoLocalEndpoints {
                internal: acc.internal + e.no_local.internal,
                external: acc.external + e.no_local.external,
            })
    }
}

/// Logs each destination a Service's port claims that another Service now serves (once, when
/// that starts), and when that ends (it serves it, or no longer claims it). Entries: the
/// port, its number, the destination.
fn log_unserved(
    before: &[(ServicePortName, u16, Unserved)],
    now: &[(ServicePortName, u16, Unserved)],
) {
    for (name, port, u) in now.iter().filter(|c| !before.contains(c)) {
        tracing::warn!(
            "{} ({port}/{}) of Service {name} is not programmed: {}",
            u.what(),
            name.protocol.as_str().to_uppercase(),
            u.why()
        );
    }
    let ended = |(name, port, u): &&(ServicePortName, u16, Unserved)| {
        !now.iter()
            .any(|(n, p, v)| n == name && p == port && v.ip == u.ip)
    };
    for (name, port, u) in before.iter().filter(ended) {
        tracing::info!(
            "{} ({port}/{}) of Service {name}: no longer held back by another Service",
            u.what(),
            name.protocol.as_str().to_uppercase()
        );
    }
}

fn entry(state: &ClusterState, ctx: &NodeContext, name: &ServiceName) -> Entry {
    let Some(svc) = state.service(name) else {
        return Entry::default();
    };
    let ports = NodeView::build_service_ports(state, ctx, name);
    let mut out = Entry::default();
    for view in &ports {
        let unserved = (view.unserved.iter()).map(|u| (view.name.clone(), view.port, u.clone()));
        out.unserved.extend(unserved);
        if view.internal_policy == TrafficPolicy::Local && view.internal_endpoints().is_empty() {
            out.no_local.internal += 1;
        }
        if view.externally_accessible()
            && view.external_policy == TrafficPolicy::Local
            && view.external_endpoints().is_empty()
        {
            out.no_local.external += 1;
        }
    }
    let needs_health_check = svc.needs_health_check();
    if let (true, Some(port), false) = (
        needs_health_check,
        svc.health_check_node_port,
        ports.is_empty(),
    ) {
        // Ready only: a node left with only terminating endpoints must fail the check, so
        // load balancers stop sending new connections there (KEP-1669).
        let local: BTreeSet<IpAddr> = ports
            .iter()
            .flat_map(|p| &p.endpoints)
            .filter(|e| e.is_local && e.conditions.ready)
            .map(|e| e.addr.ip())
            .collect();
        out.health_check = Some(HealthCheck {
            port,
            local_endpoints: local.len(),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use ferry_model::fixtures::*;
    use ferry_model::{IpFamily, Object, Service, ServiceType};

    use super::*;

    fn ctx(node: &str) -> NodeContext {
        NodeContext {
            node_name: node.into(),
            family: IpFamily::V4,
        }
    }

    fn lb_local(hc_port: Option<u16>) -> Service {
        let mut svc = with_node_port(
            mk_service("dev", "web", "10.96.0.10", 80),
            32000,
            TrafficPolicy::Local,
        );
        svc.service_type = ServiceType::LoadBalancer;
        svc.health_check_node_port = hc_port;
        svc
    }

    fn state(svc: Service) -> ClusterState {
        let mut state = ClusterState::new();
        state.apply(Object::from(svc));
        state.apply(Object::from(mk_slice(
            "dev",
            "web",
            8080,
            vec![
                mk_endpoint("10.0.0.1", "node-a"),
                mk_endpoint("10.0.0.2", "node-a"),
                mk_endpoint_with("10.0.0.3", "node-a", false, true, true),
                mk_endpoint("10.0.0.4", "node-b"),
            ],
        )));
        state
    }

    #[test]
    fn local_load_balancer_counts_this_nodes_ready_endpoints() {
        let state = state(lb_local(Some(30123)));
        let mut status = ServiceStatus::default();
        status.rebuild(&state, &ctx("node-a"));
        let hc = status.health_checks();
        let want = HealthCheck {
            port: 30123,
            local_endpoints: 2,
        };
        assert_eq!(hc.get(&ServiceName::new("dev", "web")), Some(&want));
        status.rebuild(&state, &ctx("node-c"));
        assert_eq!(
            status.health_checks()[&ServiceName::new("dev", "web")].local_endpoints,
            0
        );
        assert_eq!(status.no_local_endpoints().external, 1);
    }

    #[test]
    fn only_local_load_balancers_with_a_port_get_a_health_check() {
        let mut cluster = lb_local(Some(30123));
        cluster.external_traffic_policy = TrafficPolicy::Cluster;
        let mut node_port = lb_local(Some(30123));
        node_port.service_type = ServiceType::NodePort;
        for svc in [cluster, node_port, lb_local(None)] {
            let mut status = ServiceStatus::default();
            status.rebuild(&state(svc.clone()), &ctx("node-a"));
            assert!(status.health_checks().is_empty(), "{svc:?}");
        }
    }

    #[test]
    fn an_update_drops_a_deleted_service() {
        let mut state = state(lb_local(Some(30123)));
        let mut status = ServiceStatus::default();
        status.rebuild(&state, &ctx("node-a"));
        let name = ServiceName::new("dev", "web");
        state.delete(&ferry_model::ObjectKey::Service(name.clone()));
        status.update(&state, &ctx("node-a"), &BTreeSet::from([name]));
        assert!(status.health_checks().is_empty());
        assert_eq!(status.no_local_endpoints(), NoLocalEndpoints::default());
    }

    #[test]
    fn internal_local_without_local_endpoints_is_counted() {
        let mut svc = mk_service("dev", "web", "10.96.0.10", 80);
        svc.internal_traffic_policy = TrafficPolicy::Local;
        let state = state(svc);
        let mut status = ServiceStatus::default();
        status.rebuild(&state, &ctx("node-c"));
        assert_eq!(
            status.no_local_endpoints(),
            NoLocalEndpoints {
                internal: 1,
                external: 0
            }
        );
        status.rebuild(&state, &ctx("node-a"));
        assert_eq!(status.no_local_endpoints(), NoLocalEndpoints::default());
    }

    /// What `f` logs (the message lines, without time and level colours).
    fn logged(f: impl FnOnce()) -> String {
        use std::sync::{Arc, Mutex};
        #[derive(Clone)]
        struct Buffer(Arc<Mutex<Vec<u8>>>);
        impl std::io::Write for Buffer {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                self.0.lock().expect("buffer").extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let buffer = Buffer(Arc::default());
        let writer = buffer.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .without_time()
            .with_target(false)
            .finish();
        tracing::subscriber::with_default(subscriber, f);
        let bytes = buffer.0.lock().expect("buffer").clone();
        String::from_utf8(bytes).expect("utf-8")
    }

    #[test]
    fn an_external_ip_another_service_serves_is_logged_when_that_starts_and_ends() {
        let external = |name: &str, cluster_ip: &str| {
            let mut svc = mk_service("dev", name, cluster_ip, 80);
            svc.external_ips = vec![ip("192.0.2.1")];
            Object::from(svc)
        };
        let mut state = ClusterState::new();
        state.apply(external("a", "10.96.0.10"));
        state.apply(external("b", "10.96.0.11"));
        let mut status = ServiceStatus::default();
        let log = logged(|| status.rebuild(&state, &ctx("node-a")));
        assert_eq!(
            log,
            " WARN external IP 192.0.2.1 (80/TCP) of Service dev/b:http is not programmed: \
             Service dev/a claims it too and serves it (the first by name)\n"
        );
        // Once: the next sync says nothing.
        assert_eq!(logged(|| status.rebuild(&state, &ctx("node-a"))), "");
        let touched = state.delete(&ferry_model::ObjectKey::Service(ServiceName::new(
            "dev", "a",
        )));
        let log = logged(|| status.update(&state, &ctx("node-a"), &touched.services));
        assert_eq!(
            log,
            " INFO external IP 192.0.2.1 (80/TCP) of Service dev/b:http: no longer held back by \
             another Service\n"
        );
    }
}
