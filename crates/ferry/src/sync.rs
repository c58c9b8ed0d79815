//! One node's syncs: cluster state → node view → plan → mode's rules → kernel, per IP family.
//!
//! [`Syncer`] owns the one cluster state (single owner, events applied in order). Like upstream
//! kube-proxy's meta-proxier, each IP family has its own [`FamilySync`]: its compile
//! configuration, its applier (`ip ferry` / `ip6 ferry`, or `iptables` / `ip6tables`), and what
//! changed since its last successful sync, so that it chooses between a full sync (start-up,
//! this node's Node changed, after a failure, the rules found gone or damaged, and at least
//! every [`FULL_SYNC_PERIOD`]) and an incremental one that recompiles and rewrites only the
//! changed services. As upstream kube-proxy, the periodic round (every `syncPeriod`) only
//! checks that the rules are still in the kernel ([`Applier::intact`]) and syncs what changed;
//! nothing else asks the kernel. IPv4 is the primary family: its changes
//! feed the pending-change metrics; health-check NodePorts count a service's local endpoints
//! in the family that has more of them (a dual-stack pod is one endpoint in each).
//!
//! It also keeps what operators watch: the pending Service and EndpointSlice changes (for
//! kube-proxy's `…_changes_pending` / `…_changes_total` metrics and the slices' trigger times),
//! and, after each successful sync, per-service health-check and no-local-endpoint figures
//! ([`status::ServiceStatus`]).

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use ferry_compile::{CompileConfig, NodeCompiler};
use ferry_dataplane::{Applier, Error, SyncKind, SyncReport};
use ferry_model::{ClusterState, IpFamily, Node, NodeContext, Object, ObjectKey, ServiceName};
use ferry_source::SourceEvent;

pub mod conntrack;
mod notes;
pub mod status;

use notes::{extend_sorted, Notes};

use status::{HealthCheck, ServiceStatus};

/// A family's rules are rewritten in full at least this often, even when nothing says they
/// must be (upstream's `FullSyncPeriod`).
pub const FULL_SYNC_PERIOD: Duration = Duration::from_secs(3600);

/// Changes received since the last successful sync, as upstream's change trackers count them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingChanges {
    /// Services whose Service object changed.
    pub services: BTreeSet<ServiceName>,
    /// Services whose EndpointSlices changed (upstream's endpoints change tracker is keyed by
    /// Service too). Names are shared, so 10 000 pending changes (the first list) cost a set
    /// node's share each, not two strings.
    pub endpoints: BTreeSet<ServiceName>,
    /// `endpoints.kubernetes.io/last-change-trigger-time` of every changed slice that has one
    /// (RFC 3339): the start of the network programming latency.
    pub trigger_times: Vec<String>,
    /// Service changes seen since start (`…_service_changes_total`).
    pub services_total: u64,
    /// EndpointSlice changes seen since start (`…_endpoint_changes_total`).
    pub slices_total: u64,
    /// Whether `services` and `endpoints` are kept: only the primary family's feed the
    /// metrics, the others count and keep trigger times only.
    names: bool,
}

impl Default for PendingChanges {
    fn default() -> Self {
        Self {
            services: BTreeSet::new(),
            endpoints: BTreeSet::new(),
            trigger_times: Vec::new(),
            services_total: 0,
            slices_total: 0,
            names: true,
        }
    }
}

impl PendingChanges {
    /// Records what a batch of events changed.
    fn record(&mut self, notes: &Notes) {
        if self.names {
            extend_sorted(&mut self.services, &notes.services);
            extend_sorted(&mut self.endpoints, &notes.endpoints);
        }
        self.services_total += notes.services_total;
        self.slices_total += notes.slices_total;
        self.trigger_times
            .extend(notes.trigger_times.iter().cloned());
    }

    fn clear(&mut self) {
        self.services.clear();
        self.endpoints.clear();
        self.trigger_times.clear();
    }
}

/// One IP family's syncs, over one applier.
pub struct FamilySync<A: Applier = Box<dyn Applier>> {
    context: NodeContext,
    config: CompileConfig,
    applier: A,
    dirty: BTreeSet<ServiceName>,
    full_pending: bool,
    /// When the last full sync succeeded.
    last_full: Option<Instant>,
    full_sync_period: Duration,
    changes: PendingChanges,
    status: ServiceStatus,
    stale_flows: conntrack::StaleFlows,
    /// Whether the mode leaves stale UDP conntrack entries to delete (see
    /// `NodeMode::udp_conntrack_cleanup`).
    udp_conntrack: bool,
    /// The kind of the last sync attempted (what a failure was).
    attempted: Option<SyncKind>,
}

impl<A: Applier> FamilySync<A> {
    /// A family that has not synced yet.
    pub fn new(context: NodeContext, config: CompileConfig, applier: A) -> Self {
        Self {
            context,
            config,
            applier,
            dirty: BTreeSet::new(),
            full_pending: true,
            last_full: None,
            full_sync_period: FULL_SYNC_PERIOD,
            changes: PendingChanges::default(),
            status: ServiceStatus::default(),
            stale_flows: conntrack::StaleFlows::default(),
            udp_conntrack: true,
            attempted: None,
        }
    }

    /// The kind of the last sync attempted, whether it succeeded or not.
    pub fn attempted(&self) -> Option<SyncKind> {
        self.attempted
    }

    /// Rewrites everything at least every `period` instead of [`FULL_SYNC_PERIOD`].
    #[cfg(test)]
    pub fn with_full_sync_period(mut self, period: Duration) -> Self {
        self.full_sync_period = period;
        self
    }

    /// Whether this family's syncs look for stale UDP conntrack entries (the mode says: the
    /// userspace mode never DNATs a flow to an endpoint).
    pub fn with_udp_conntrack_cleanup(mut self, on: bool) -> Self {
        self.udp_conntrack = on;
        self
    }

    /// The IP family.
    pub fn family(&self) -> IpFamily {
        self.context.family
    }

    /// Changes received since this family's last successful sync.
    pub fn pending_changes(&self) -> &PendingChanges {
        &self.changes
    }

    /// Health-check and no-local-endpoint figures as of the last successful sync.
    pub fn status(&self) -> &ServiceStatus {
        &self.status
    }

    /// The UDP conntrack flows the last successful syncs made stale, as filters for
    /// [`conntrack::clean`] (taken: each is returned once).
    pub fn take_stale_flows(&mut self) -> Vec<ferry_compile::conntrack::StaleFlowFilter> {
        self.stale_flows.take()
    }

    /// The last conntrack cleanup failed: the next sync checks every UDP frontend.
    pub fn conntrack_failed(&mut self) {
        self.stale_flows.failed();
    }

    /// Records what a batch of events touched; true when it needs a sync of this family.
    fn note(&mut self, notes: &Notes) -> bool {
        self.changes.record(notes);
        if notes.nodes.contains(&self.context.node_name) {
            self.full_pending = true;
        }
        extend_sorted(&mut self.dirty, &notes.dirty);
        // A ServiceCIDR change dirties no Service: the sync it asks for finds the node-level
        // rules changed (nftables mode's `cluster-ips-check`) and is full; a mode without
        // service-CIDR rules finds nothing to do.
        !notes.dirty.is_empty() || self.full_pending || notes.service_cidrs
    }

    /// Syncs this family's rules with `state`: the changed services, or everything when a
    /// full sync is due. `periodic` (the round every `syncPeriod`) also checks that the rules
    /// are still in the kernel, and makes the sync full when they are not or when the last
    /// full sync is older than the full sync period. On failure nothing is forgotten: the next
    /// sync carries the same changes.
    pub fn sync(&mut self, state: &ClusterState, periodic: bool) -> Result<SyncReport, Error> {
        let compiler = NodeCompiler::new(state, &self.context, &self.config);
        let mut full = self.full_pending || self.applier.needs_full(&compiler)?;
        if periodic && !full {
            let stale = self
                .last_full
                .is_none_or(|t| t.elapsed() >= self.full_sync_period);
            full = stale || !self.applier.intact()?;
        }
        self.attempted = Some(if full {
            SyncKind::Full
        } else {
            SyncKind::Partial
        });
        let report = if full {
            self.applier.sync_full(&compiler, state)?
        } else {
            self.applier.sync_partial(&compiler, state, &self.dirty)?
        };
        if full {
            self.status.rebuild(state, &self.context);
        } else {
            self.status.update(state, &self.context, &self.dirty);
        }
        if self.udp_conntrack {
            self.stale_flows
                .synced(state, &self.context, full, &self.dirty);
        }
        self.changes.clear();
        self.dirty.clear();
        self.full_pending = false;
        if full {
            self.last_full = Some(Instant::now());
        }
        Ok(report)
    }
}

/// The sync engine of one node: the cluster state and one [`FamilySync`] per IP family.
pub struct Syncer<A: Applier = Box<dyn Applier>> {
    state: ClusterState,
    node_name: String,
    families: Vec<FamilySync<A>>,
}

impl<A: Applier> Syncer<A> {
    /// The syncer of `families` (primary first). Panics on an empty list (there is always
    /// IPv4).
    pub fn new(mut families: Vec<FamilySync<A>>) -> Self {
        for f in families.iter_mut().skip(1) {
            f.changes.names = false;
        }
        let node_name = families
            .first()
            .map(|f| f.context.node_name.clone())
            .expect("at least one IP family");
        Self {
            state: ClusterState::new(),
            node_name,
            families,
        }
    }

    /// Applies one source event to the cluster state. Returns true when it changed something
    /// a family needs to sync (or a family's full sync is still due). A
    /// [`SourceEvent::Batch`] is applied whole: nothing syncs between its events, and the
    /// caller schedules one sync after it.
    pub fn handle(&mut self, event: SourceEvent) -> bool {
        match event {
            SourceEvent::Apply(obj) => self.apply(obj),
            SourceEvent::Delete(key) => self.delete(&key),
            SourceEvent::Resync(objects) => self.resync(objects),
            // Every event, even after one that changed something.
            SourceEvent::Batch(events) => events.into_iter().fold(false, |c, e| self.handle(e) | c),
        }
    }

    fn apply(&mut self, obj: Object) -> bool {
        let mut notes = Notes::default();
        self.store(obj, &mut notes);
        self.note(notes)
    }

    fn delete(&mut self, key: &ObjectKey) -> bool {
        let mut notes = Notes::default();
        notes.add(key, self.state.delete(key), None);
        self.note(notes)
    }

    fn resync(&mut self, objects: Vec<Object>) -> bool {
        let mut notes = Notes::default();
        let stored = self.state.keys();
        // The first resync finds the state empty: no set of every key to build (at 20 000
        // objects, 1.1 MB of keys and as much again to sort them, on the thread that then
        // compiles and syncs).
        if !stored.is_empty() {
            let keep: BTreeSet<_> = objects.iter().map(Object::key).collect();
            for key in stored.iter().filter(|k| !keep.contains(*k)) {
                notes.add(key, self.state.delete(key), None);
            }
        }
        for obj in objects {
            self.store(obj, &mut notes);
        }
        let changed = self.note(notes);
        self.state.repack();
        changed
    }

    /// Stores one object in the state, noting what it touched.
    fn store(&mut self, obj: Object, notes: &mut Notes) {
        let key = obj.key();
        let trigger_time = match &obj {
            Object::EndpointSlice(slice) => slice.trigger_time.clone(),
            _ => None,
        };
        notes.add(&key, self.state.apply(obj), trigger_time);
    }

    /// Hands what a batch touched to every family; true when one needs a sync.
    fn note(&mut self, mut notes: Notes) -> bool {
        notes.finish();
        if notes.service_cidrs {
            // `kubernetes=10.96.0.0/12,fd00:10:96::/112 extra=10.100.0.0/16`
            let cidrs: Vec<String> = (self.state.service_cidrs())
                .map(|c| {
                    let nets: Vec<String> = c.cidrs.iter().map(ToString::to_string).collect();
                    format!("{}={}", c.name, nets.join(","))
                })
                .collect();
            tracing::info!(service_cidrs = %cidrs.join(" "), "service CIDRs changed");
        }
        let mut changed = false;
        for f in &mut self.families {
            changed |= f.note(&notes);
        }
        changed
    }

    /// Services changed since the last successful sync, in any family.
    pub fn pending_services(&self) -> usize {
        self.families
            .iter()
            .map(|f| f.dirty.len())
            .max()
            .unwrap_or(0)
    }

    /// The primary family's syncs.
    pub fn primary(&self) -> &FamilySync<A> {
        &self.families[0]
    }

    /// The families, primary first.
    pub fn families(&self) -> impl Iterator<Item = IpFamily> + '_ {
        self.families.iter().map(FamilySync::family)
    }

    /// The cluster state.
    pub fn state(&self) -> &ClusterState {
        &self.state
    }

    /// The state and every family's syncs, to sync them one by one.
    pub fn split(&mut self) -> (&ClusterState, &mut [FamilySync<A>]) {
        (&self.state, &mut self.families)
    }

    /// This node's Node object, when the sources delivered one.
    pub fn this_node(&self) -> Option<&Node> {
        self.state.node(&self.node_name)
    }

    /// Health-check NodePort servers wanted by any family, with the larger local endpoint
    /// count.
    pub fn health_checks(&self) -> BTreeMap<ServiceName, HealthCheck> {
        let mut all: BTreeMap<ServiceName, HealthCheck> = BTreeMap::new();
        for f in &self.families {
            for (name, hc) in f.status.health_checks() {
                all.entry(name)
                    .and_modify(|have| {
                        have.local_endpoints = have.local_endpoints.max(hc.local_endpoints)
                    })
                    .or_insert(hc);
            }
        }
        all
    }
}

#[cfg(test)]
pub(crate) mod tests;
