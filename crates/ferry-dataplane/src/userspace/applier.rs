//! The userspace mode's applier, per IP family: the redirect rules in Ferry's table (through
//! nftables mode's applier: same transactions, same netlink batches) and the proxy's
//! listeners, in an order that never sends a connection to a port nobody listens on:
//! listeners open before the rules redirect to them, and close only after the rules that
//! redirected to them are gone. It owns the family's [`ProxyPorts`], restored at the first
//! sync from the table a previous Ferry left in the kernel.

use std::collections::{BTreeMap, BTreeSet};

use ferry_compile::userspace::{proxied_protocol, NodeRules, ProxyPorts, RangeExhausted};
use ferry_compile::{NodeCompiler, ServicePlan};
use ferry_model::{ClusterState, IpFamily, ServiceName, ServicePortName};

use super::restore;
use crate::nft_table::NftDataplane;
use crate::proxy::{Engine, ListenError, ProxiedPort};
use crate::{Applier, Error, SyncReport};

/// Attempts at opening a service port's listener on a free proxy port (each busy port is
/// marked unusable and the next one tried).
const LISTEN_ATTEMPTS: usize = 8;

/// Each service synced, with its port plans (empty: nothing to program, e.g. deleted).
type Services = Vec<(ServiceName, Vec<ServicePlan>)>;

/// The userspace mode's kernel half for one family.
pub(crate) struct UserspaceApplier {
    family: IpFamily,
    rules: NftDataplane,
    ports: Option<ProxyPorts>,
    /// The service ports left without a proxy port (rejected by the rules), as of the last
    /// sync of their service.
    without_port: BTreeSet<ServicePortName>,
    engine: Engine,
}

impl UserspaceApplier {
    /// An applier of `family` in the current network namespace, serving through `engine`.
    pub(crate) fn new(family: IpFamily, engine: Engine) -> Self {
        Self {
            family,
            rules: NftDataplane::new(),
            ports: None,
            without_port: BTreeSet::new(),
            engine,
        }
    }

    /// The family's proxy ports: at the first sync, those the kernel's table holds (a
    /// previous Ferry's), then new ones as service ports come.
    fn ports(&mut self, compiler: &NodeCompiler) -> &mut ProxyPorts {
        let family = self.family;
        self.ports.get_or_insert_with(|| {
            let mut ports = ProxyPorts::new(compiler.config().proxy_port_range);
            match restore::read(family) {
                Ok(found) => {
                    let kept = found.iter().filter(|(n, p)| ports.restore(n, *p)).count();
                    if kept > 0 {
                        tracing::info!(ip_family = family.as_str(), kept, "proxy ports read back from the kernel's table");
                    }
                }
                Err(e) => tracing::warn!(error = %e, "cannot read the proxy ports back: new ones are derived"),
            }
            ports
        })
    }

    /// Assigns proxy ports to the services' ports and opens their listeners.
    fn prepare(
        &mut self,
        compiler: &NodeCompiler,
        state: &ClusterState,
        names: impl IntoIterator<Item = ServiceName>,
    ) -> (Services, Vec<ProxiedPort>) {
        let rules = NodeRules::new(compiler);
        let ports = self.ports(compiler);
        let mut services = Vec::new();
        for name in names {
            let (plans, exhausted) = rules.assign(state, &name, ports);
            exhausted.iter().for_each(warn_exhausted);
            services.push((name, plans));
        }
        let retry = self.listen(compiler, &services);
        (services, retry)
    }

    /// Counts the service ports the synced services left without a proxy port (`full`: every
    /// service was synced) for the metric.
    fn count_without_port(&mut self, services: &Services, full: bool) {
        let synced: BTreeSet<&ServiceName> = services.iter().map(|(n, _)| n).collect();
        if full {
            self.without_port.clear();
        }
        self.without_port.retain(|n| !synced.contains(&n.service));
        let ports = self.ports.as_ref();
        let missing = services
            .iter()
            .flat_map(|(_, plans)| plans)
            .filter(|p| proxied_protocol(p.name.protocol))
            .filter(|p| ports.and_then(|ports| ports.get(&p.name)).is_none())
            .map(|p| p.name.clone());
        self.without_port.extend(missing);
        self.engine
            .set_without_proxy_port(self.family, self.without_port.len());
    }

    /// Opens (or updates) every service port's listeners. A proxy port another program holds
    /// is marked unusable and the next one tried; a proxy port that cannot be listened on
    /// otherwise is given up (the rules reject the service port until the next sync). Returns
    /// the ports whose localhost listener failed, to try again once removed services have
    /// closed theirs.
    fn listen(&mut self, compiler: &NodeCompiler, services: &Services) -> Vec<ProxiedPort> {
        let plan = compiler.base_plan();
        let (localhost, pod_cidrs) = (plan.localhost_node_ports, plan.local.cidrs().to_vec());
        let family = self.family;
        let engine = self.engine.clone();
        let Some(mut proxy) = engine.get() else {
            return Vec::new();
        };
        let ports = self.ports(compiler);
        let by_name: BTreeMap<&ServicePortName, &ServicePlan> = services
            .iter()
            .flat_map(|(_, plans)| plans.iter().map(|p| (&p.name, p)))
            .collect();
        let proxied = |name: &ServicePortName, ports: &ProxyPorts| ProxiedPort {
            plan: by_name[name].clone(),
            proxy_port: ports.get(name),
            localhost_node_port: localhost,
        };
        let mut todo: Vec<ProxiedPort> = by_name.keys().map(|n| proxied(n, ports)).collect();
        let mut retry = Vec::new();
        for _ in 0..LISTEN_ATTEMPTS {
            if todo.is_empty() {
                break;
            }
            let report = proxy.upsert(family, &pod_cidrs, std::mem::take(&mut todo));
            for e in report.failed {
                if e.addr.ip().is_loopback() {
                    retry.push(proxied(&e.name, ports));
                } else if give_up_or_move(ports, &e) {
                    todo.push(proxied(&e.name, ports));
                }
            }
        }
        retry
    }

    /// Closes what the synced services no longer have, releases their proxy ports, and tries
    /// again the localhost listeners that failed while those were open.
    /// `full`: every service port not synced now is gone too.
    fn close(
        &mut self,
        services: &Services,
        retry: Vec<ProxiedPort>,
        full: bool,
        compiler: &NodeCompiler,
    ) {
        let synced: BTreeSet<&ServiceName> = services.iter().map(|(n, _)| n).collect();
        let wanted: BTreeSet<&ServicePortName> = services
            .iter()
            .flat_map(|(_, plans)| plans.iter().map(|p| &p.name))
            .collect();
        let gone =
            |n: &ServicePortName| (full || synced.contains(&n.service)) && !wanted.contains(n);
        if let Some(ports) = self.ports.as_mut() {
            ports.retain(|n| !gone(n));
        }
        let proxy = self.engine.existing();
        if let Some(mut proxy) = proxy {
            proxy.remove(self.family, gone);
        }
        // The released ports' listeners are closed now: the ports can be given again.
        if let Some(ports) = self.ports.as_mut() {
            ports.closed();
        }
        let Some(mut proxy) = self.engine.existing() else {
            return;
        };
        if retry.is_empty() {
            return;
        }
        let pod_cidrs = compiler.base_plan().local.cidrs();
        for e in proxy.upsert(self.family, pod_cidrs, retry).failed {
            warn_listen(&e);
        }
    }
}

/// A proxy-port listener failed: a busy port moves the service port to the next free one
/// (true: try again); any other failure gives the port up until the next sync.
fn give_up_or_move(ports: &mut ProxyPorts, e: &ListenError) -> bool {
    if e.in_use && ports.get(&e.name) == Some(e.addr.port()) {
        ports.mark_unusable(e.addr.port());
        tracing::info!(service = %e.name, port = e.addr.port(), "proxy port held by another program: taking the next one");
        match ports.assign(&e.name) {
            Ok(_) => return true,
            Err(full) => warn_exhausted(&full),
        }
        return false;
    }
    warn_listen(e);
    ports.release(&e.name);
    false
}

fn warn_listen(e: &ListenError) {
    tracing::warn!(
        service = %e.name,
        addr = %e.addr,
        error = %e.source,
        "cannot listen: the service port is not proxied (tried again at the next sync)"
    );
}

fn warn_exhausted(e: &RangeExhausted) {
    tracing::warn!("{e}: its frontends are rejected");
}

impl Applier for UserspaceApplier {
    /// Nothing installed yet, the node-level rules changed, or the table is gone: an
    /// endpoint change writes nothing to the kernel in this mode (the proxy picks endpoints),
    /// so a deleted table would otherwise wait for the periodic resync.
    fn needs_full(&mut self, compiler: &NodeCompiler) -> Result<bool, Error> {
        let base = NodeRules::new(compiler).base();
        if !self.rules.installed().is_some_and(|i| i.same_base(&base)) {
            return Ok(true);
        }
        self.rules.table_gone()
    }

    /// The redirect table's check (see [`NftDataplane`]'s): its chains are there and its
    /// top-level chains hold their rules.
    fn intact(&mut self) -> Result<bool, Error> {
        self.rules.intact()
    }

    fn sync_full(
        &mut self,
        compiler: &NodeCompiler,
        state: &ClusterState,
    ) -> Result<SyncReport, Error> {
        self.rules.forget_installed();
        let names: BTreeSet<ServiceName> = state.services().map(|s| s.name.clone()).collect();
        // Ports of services that are gone: their listeners close after the new rules are in.
        let gone: Vec<ServiceName> = self
            .engine
            .existing()
            .map(|p| {
                p.service_ports(self.family)
                    .map(|n| n.service.clone())
                    .collect()
            })
            .unwrap_or_default();
        let all = names.iter().cloned().chain(gone).collect::<BTreeSet<_>>();
        let (services, retry) = self.prepare(compiler, state, all);
        let rules = NodeRules::new(compiler);
        let mut ruleset = rules.base();
        let ports = self.ports(compiler);
        for (name, plans) in services.iter().filter(|(_, p)| !p.is_empty()) {
            let service = rules.render(plans.clone(), ports);
            ruleset.set_service(name.clone(), Some(service.rules));
        }
        let report = self.rules.apply_full(ruleset)?;
        self.count_without_port(&services, true);
        self.close(&services, retry, true, compiler);
        Ok(report)
    }

    fn sync_partial(
        &mut self,
        compiler: &NodeCompiler,
        state: &ClusterState,
        dirty: &BTreeSet<ServiceName>,
    ) -> Result<SyncReport, Error> {
        let (services, retry) = self.prepare(compiler, state, dirty.iter().cloned());
        let rules = NodeRules::new(compiler);
        let ports = self.ports(compiler);
        let changes = services
            .iter()
            .map(|(name, plans)| {
                let service = (!plans.is_empty()).then(|| rules.render(plans.clone(), ports).rules);
                (name.clone(), service)
            })
            .collect();
        let report = self.rules.apply_changes(changes)?;
        self.count_without_port(&services, false);
        self.close(&services, retry, false, compiler);
        Ok(report)
    }
}
