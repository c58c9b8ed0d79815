//! Dual-stack: one sync path per IP family, side by side on one node.
//!
//! Like upstream kube-proxy's meta-proxier, each family has its own [`Syncer`] (its own
//! node view, plan and dataplane: `ip ferry` / `ip6 ferry`, or `iptables` / `ip6tables`), fed
//! the same source events. IPv4 is the primary family: its syncer answers for the node's
//! eligibility and the pending-change metrics; health-check NodePorts count a service's local
//! endpoints in the family that has more of them (a dual-stack pod is one endpoint in each).

use std::collections::BTreeMap;

use ferry_dataplane::iptables::Backend;
use ferry_dataplane::support::{iptables_supports, nft_supports};
use ferry_model::{IpFamily, ServiceName};
use ferry_source::SourceEvent;

use crate::config::{Config, ProxyMode};
use crate::sync::status::HealthCheck;
use crate::sync::{Dataplane, Syncer};

/// The families this node programs: IPv4, and IPv6 when the kernel and the mode's tool
/// support it (upstream's `platformCheckSupported`; one info line either way).
pub fn supported(config: &Config, backend: Backend) -> Vec<IpFamily> {
    let v6 = match config.mode {
        ProxyMode::Nftables => nft_supports(IpFamily::V6),
        ProxyMode::Iptables => iptables_supports(backend, IpFamily::V6),
    };
    match v6 {
        Ok(()) => {
            tracing::info!("running in dual-stack mode (IPv4 and IPv6)");
            vec![IpFamily::V4, IpFamily::V6]
        }
        Err(why) => {
            tracing::info!("running in single-stack mode (IPv4): IPv6 is skipped: {why}");
            vec![IpFamily::V4]
        }
    }
}

/// `IPv4` / `IPv6`, as Kubernetes spells the families.
pub fn name(family: IpFamily) -> &'static str {
    match family {
        IpFamily::V4 => "IPv4",
        IpFamily::V6 => "IPv6",
    }
}

/// One syncer per family; the first is the primary (IPv4).
pub struct FamilySyncers<D: Dataplane = Box<dyn Dataplane>> {
    syncers: Vec<Syncer<D>>,
}

impl<D: Dataplane> FamilySyncers<D> {
    /// The syncers, primary first. Panics on an empty list (there is always IPv4).
    pub fn new(syncers: Vec<Syncer<D>>) -> Self {
        assert!(!syncers.is_empty(), "at least one IP family");
        Self { syncers }
    }

    /// Applies one source event to every family's state; true when any needs a sync.
    pub fn handle(&mut self, event: SourceEvent) -> bool {
        let (last, rest) = self.syncers.split_last_mut().expect("one family");
        let mut changed = false;
        for s in rest {
            changed |= s.handle(event.clone());
        }
        changed | last.handle(event)
    }

    /// The primary family's syncer.
    pub fn primary(&self) -> &Syncer<D> {
        &self.syncers[0]
    }

    /// The families, primary first.
    pub fn families(&self) -> impl Iterator<Item = IpFamily> + '_ {
        self.syncers.iter().map(Syncer::family)
    }

    /// Every family's syncer.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut Syncer<D>> {
        self.syncers.iter_mut()
    }

    /// Services changed since the last successful sync, in any family.
    pub fn pending_services(&self) -> usize {
        self.syncers
            .iter()
            .map(Syncer::pending_services)
            .max()
            .unwrap_or(0)
    }

    /// Health-check NodePort servers wanted by any family, with the larger local endpoint
    /// count.
    pub fn health_checks(&self) -> BTreeMap<ServiceName, HealthCheck> {
        let mut all: BTreeMap<ServiceName, HealthCheck> = BTreeMap::new();
        for s in &self.syncers {
            for (name, hc) in s.status().health_checks() {
                all.entry(name)
                    .and_modify(|have| {
                        have.local_endpoints = have.local_endpoints.max(hc.local_endpoints)
                    })
                    .or_insert(hc);
            }
        }
        all
    }

    /// What `ferry rules` prints: the primary family's rules, then each other family's when
    /// it has a service to program (a cluster without IPv6 services prints only IPv4, as
    /// before). nft tables follow each other (one `nft -f` input); iptables inputs are
    /// separated by a comment naming the tool.
    pub fn desired(&self, mode: ProxyMode) -> String {
        let mut out = self.syncers[0].desired();
        for s in &self.syncers[1..] {
            if !s.has_services() {
                continue;
            }
            if mode == ProxyMode::Iptables {
                out.push_str(&format!(
                    "# {} rules: ip6tables-restore --noflush input\n",
                    name(s.family())
                ));
            }
            out.push_str(&s.desired());
        }
        out
    }
}

#[cfg(test)]
mod tests;
