//! One node's userspace-mode rules, compiled service by service from a [`NodeCompiler`],
//! with the proxy ports they redirect to.

use std::collections::BTreeSet;

use ferry_model::{ClusterState, ServiceName, ServicePortName};

use super::render::render_service;
use super::{proxied_protocol, render_base, PortInfo, ProxyPorts, RangeExhausted, Rules};
use crate::nft::{Ruleset, ServiceRules};
use crate::plan::ServicePlan;
use crate::NodeCompiler;

/// One service's part of the userspace mode: its plans (what the proxy serves), its
/// elements, and its lines of the proxy-port table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServicePorts {
    /// The service's port plans.
    pub plans: Vec<ServicePlan>,
    /// Its elements of the table.
    pub rules: ServiceRules,
    /// Its lines of the proxy-port table.
    pub ports: Vec<(ServicePortName, PortInfo)>,
}

/// A node's userspace-mode rules, whole or per service.
#[derive(Debug, Clone)]
pub struct NodeRules<'a> {
    compiler: &'a NodeCompiler,
}

impl<'a> NodeRules<'a> {
    /// The rules of the compiler's node.
    pub fn new(compiler: &'a NodeCompiler) -> Self {
        Self { compiler }
    }

    /// The table without any service: what an incremental sync requires to be unchanged.
    pub fn base(&self) -> Ruleset {
        render_base(self.compiler.base_plan())
    }

    /// One service's plans, with a proxy port assigned to each proxied port (kept when it had
    /// one); the ports left without one (the range is full). The service's ports that are
    /// gone are released. Empty plans when it has nothing to program on this node.
    pub fn assign(
        &self,
        state: &ClusterState,
        name: &ServiceName,
        ports: &mut ProxyPorts,
    ) -> (Vec<ServicePlan>, Vec<RangeExhausted>) {
        let plans = self.compiler.service_plans(state, name);
        let keep: BTreeSet<&ServicePortName> = plans.iter().map(|p| &p.name).collect();
        ports.retain(|n| &n.service != name || keep.contains(n));
        let exhausted = plans
            .iter()
            .filter(|p| proxied_protocol(p.name.protocol))
            .filter_map(|p| ports.assign(&p.name).err())
            .collect();
        (plans, exhausted)
    }

    /// Renders a service's plans with the ports assigned now.
    pub fn render(&self, plans: Vec<ServicePlan>, ports: &ProxyPorts) -> ServicePorts {
        let refs: Vec<&ServicePlan> = plans.iter().collect();
        let (rules, infos) = render_service(&refs, ports);
        ServicePorts {
            plans,
            rules,
            ports: infos,
        }
    }

    /// The whole node's rules, assigning proxy ports (and releasing those of service ports
    /// that are gone); the service ports left without one.
    pub fn full(
        &self,
        state: &ClusterState,
        ports: &mut ProxyPorts,
    ) -> (Rules, Vec<RangeExhausted>) {
        let names: BTreeSet<&ServiceName> = state.services().map(|s| &s.name).collect();
        ports.retain(|n| names.contains(&n.service));
        let mut rules = Rules {
            ruleset: self.base(),
            ports: Default::default(),
        };
        let mut exhausted = Vec::new();
        for name in names {
            let (plans, full) = self.assign(state, name, ports);
            exhausted.extend(full);
            if plans.is_empty() {
                continue;
            }
            let service = self.render(plans, ports);
            rules.ruleset.set_service(name.clone(), Some(service.rules));
            rules.ports.extend(service.ports);
        }
        (rules, exhausted)
    }
}
