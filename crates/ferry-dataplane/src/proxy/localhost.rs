//! Localhost NodePorts in the kernel modes: after each sync of the mode's rules, the proxy's
//! listeners on `127.0.0.1:NODEPORT` / `[::1]:NODEPORT` follow the same plans
//! (`Plan::localhost_node_ports`). The kernel rules never translate loopback destinations
//! (that would need `route_localnet`, CVE-2020-8558), so a connection to a localhost NodePort
//! reaches the listener untouched, and the proxy connects to an endpoint itself.

use std::collections::BTreeSet;

use ferry_compile::NodeCompiler;
use ferry_model::{ClusterState, IpFamily, ServiceName};

use super::engine::Engine;
use super::{ProxiedPort, SyncReport as ProxyReport};
use crate::{Applier, Error, SyncReport};

/// A kernel mode's applier, and the localhost NodePorts of its family.
pub(crate) struct WithLocalhostNodePorts<A> {
    inner: A,
    engine: Engine,
    family: IpFamily,
    /// Services whose listener could not be opened: tried again at the next sync.
    failed: BTreeSet<ServiceName>,
}

impl<A: Applier> WithLocalhostNodePorts<A> {
    /// `inner`, with the localhost NodePorts of `family` served by `engine`.
    pub(crate) fn new(inner: A, engine: Engine, family: IpFamily) -> Self {
        Self {
            inner,
            engine,
            family,
            failed: BTreeSet::new(),
        }
    }

    /// One service's ports with a NodePort, to serve on loopback.
    fn ports(
        compiler: &NodeCompiler,
        state: &ClusterState,
        name: &ServiceName,
    ) -> Vec<ProxiedPort> {
        compiler
            .service_plans(state, name)
            .into_iter()
            .filter(|plan| plan.node_port.is_some())
            .map(|plan| ProxiedPort {
                plan,
                proxy_port: None,
                localhost_node_port: true,
            })
            .collect()
    }

    /// Every service with a NodePort (the others have nothing to serve on loopback).
    fn full(&mut self, compiler: &NodeCompiler, state: &ClusterState) {
        let plan = compiler.base_plan();
        if !plan.localhost_node_ports {
            if let Some(mut proxy) = self.engine.existing() {
                proxy.sync_full(self.family, &[], Vec::new());
            }
            return;
        }
        let Some(mut proxy) = self.engine.get() else {
            return;
        };
        let ports = state
            .services()
            .filter(|s| s.ports.iter().any(|p| p.node_port.is_some()))
            .flat_map(|s| Self::ports(compiler, state, &s.name))
            .collect();
        let report = proxy.sync_full(self.family, plan.local.cidrs(), ports);
        drop(proxy);
        self.failed.clear();
        self.note(report);
    }

    /// The `dirty` services, and those whose listener failed before.
    fn services(
        &mut self,
        compiler: &NodeCompiler,
        state: &ClusterState,
        dirty: &BTreeSet<ServiceName>,
    ) {
        let plan = compiler.base_plan();
        if !plan.localhost_node_ports {
            return;
        }
        let Some(mut proxy) = self.engine.get() else {
            return;
        };
        let names: BTreeSet<ServiceName> = dirty.union(&self.failed).cloned().collect();
        let mut report = ProxyReport::default();
        for name in &names {
            let ports = Self::ports(compiler, state, name);
            report.add(proxy.sync_service(self.family, plan.local.cidrs(), name, ports));
        }
        drop(proxy);
        self.failed.clear();
        self.note(report);
    }

    /// Logs the listeners that could not be opened (another program holds the port on
    /// loopback) and remembers their services.
    fn note(&mut self, report: ProxyReport) {
        for e in report.failed {
            tracing::warn!(
                service = %e.name,
                addr = %e.addr,
                error = %e.source,
                "localhost NodePort not served (tried again at the next sync)"
            );
            self.failed.insert(e.name.service.clone());
        }
    }
}

impl<A: Applier> Applier for WithLocalhostNodePorts<A> {
    fn needs_full(&mut self, compiler: &NodeCompiler) -> Result<bool, Error> {
        self.inner.needs_full(compiler)
    }

    fn intact(&mut self) -> Result<bool, Error> {
        self.inner.intact()
    }

    fn sync_full(
        &mut self,
        compiler: &NodeCompiler,
        state: &ClusterState,
    ) -> Result<SyncReport, Error> {
        let report = self.inner.sync_full(compiler, state)?;
        self.full(compiler, state);
        Ok(report)
    }

    fn sync_partial(
        &mut self,
        compiler: &NodeCompiler,
        state: &ClusterState,
        dirty: &BTreeSet<ServiceName>,
    ) -> Result<SyncReport, Error> {
        let report = self.inner.sync_partial(compiler, state, dirty)?;
        self.services(compiler, state, dirty);
        Ok(report)
    }
}
