//! The IPVS applier: makes the kernel hold the desired IPVS-mode state of one family, touching
//! only what differs.
//!
//! A full apply reads the kernel (IPVS table, kube-ipvs0's addresses, the ipsets) and diffs
//! everything, so whatever an earlier run (or kube-proxy) left is reused or replaced; an
//! incremental one diffs only the changed services' virtual servers against the kernel, and
//! the sets, addresses and chains against what this applier installed last. Removed real
//! servers are drained, as upstream's graceful termination manager does: TCP ones first get
//! weight 0 (no new connections) and are deleted once the kernel counts no connection to them
//! (checked at every apply and by [`IpvsApplier::drain`]); UDP and SCTP ones are deleted at
//! once (`expire_nodest_conn` ends their flows at the next packet).

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr};

use ipnet::IpNet;

use ferry_compile::ipvs::chains::{self, Chains};
use ferry_compile::ipvs::{
    RealServer, RenderContext, Ruleset, ServiceIpvs, VirtualAddress, VirtualService,
};
use ferry_model::{IpFamily, Protocol, ServiceName};

use super::node::{self, Dummy};
use super::set_counts::{SetCounts, SetDelta};
use crate::iptables_tool::{IptablesCli, IptablesRunner};
use crate::ipvs_kernel::ipset;
use crate::ipvs_kernel::IpvsError;
use crate::ipvs_kernel::LiveRealServer;
use crate::ipvs_kernel::{Change, IpvsClient};
use crate::mode::IpvsOptions;
use crate::Error;

/// What an apply did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IpvsReport {
    /// Changes sent to the IPVS table.
    pub ipvs_changes: usize,
    /// Real servers set to weight 0 to drain.
    pub drained: usize,
    /// Drained real servers deleted (no connection left).
    pub drained_deleted: usize,
    /// Lines of the `ipset restore` input (sets created, entries added or deleted).
    pub set_changes: usize,
    /// kube-ipvs0 addresses added and removed.
    pub addresses_changed: usize,
    /// Chains written (0 when the iptables rules did not change).
    pub chains_written: usize,
    /// Bytes handed to `ipset restore` and `iptables-restore`.
    pub script_bytes: usize,
}

/// Keeps one family's IPVS-mode state in the kernel of the calling thread's namespace.
pub struct IpvsApplier<R: IptablesRunner = IptablesCli> {
    pub(super) family: IpFamily,
    pub(super) iptables: R,
    pub(super) options: IpvsOptions,
    /// Real servers at weight 0 waiting for their connections to end.
    draining: BTreeSet<(VirtualAddress, SocketAddr)>,
    /// What the last successful apply installed.
    pub(super) installed: Option<Installed>,
    /// When a partial sync last looked for the canary chain.
    pub(super) canary_checked: Option<std::time::Instant>,
}

/// What the last successful apply installed.
pub(super) struct Installed {
    pub(super) ruleset: Ruleset,
    pub(super) sets: SetCounts,
    pub(super) chains: Chains,
    /// The node's addresses it was rendered for (`None`: given by the caller, unknown).
    pub(super) context: Option<RenderContext>,
}

impl<R: IptablesRunner> IpvsApplier<R> {
    /// An applier for `family` writing its chains with `iptables` (that family's tools).
    pub fn new(family: IpFamily, iptables: R, options: IpvsOptions) -> Self {
        Self {
            family,
            iptables,
            options,
            draining: BTreeSet::new(),
            installed: None,
            canary_checked: None,
        }
    }

    /// The real servers being drained.
    pub fn draining(&self) -> &BTreeSet<(VirtualAddress, SocketAddr)> {
        &self.draining
    }

    /// What the last successful apply installed.
    pub fn installed(&self) -> Option<&Ruleset> {
        self.installed.as_ref().map(|i| &i.ruleset)
    }

    /// Makes the kernel hold `desired`, reading everything back first. On failure the next
    /// apply is a full one again.
    pub fn apply_full(&mut self, desired: &Ruleset) -> Result<IpvsReport, Error> {
        self.installed = None;
        let mut report = IpvsReport::default();
        node::prepare(&self.options)?;
        let mut dummy = Dummy::ensure()?;
        let bound: BTreeSet<IpAddr> = dummy
            .addresses()?
            .into_iter()
            .filter(|ip| IpFamily::of(ip) == self.family)
            .collect();
        let want = desired.bind_addresses();
        report.addresses_changed += dummy.add(want.difference(&bound))?;
        let sets = SetCounts::of(desired);
        let (input, n) = ipset::restore_input(sets.sets(), &ipset::read()?);
        ipset::restore(&input)?;
        report.set_changes = n;
        report.script_bytes += input.len();
        let chains = chains::render_with(desired, sets.sets());
        report.script_bytes += self.write_chains(&chains)?;
        report.chains_written = chains.nat.len() + chains.filter.len();
        let mut client = IpvsClient::open()?;
        let table = client.table()?;
        let mut changes = Vec::new();
        let desired_vs = desired.virtual_services();
        for (va, (vs, reals)) in &table {
            if va.family() != self.family || self.excluded(va) {
                continue;
            }
            match desired_vs.get(va) {
                Some(want) => {
                    if vs != &want.server {
                        changes.push(Change::UpdateService(*va, want.server.clone()));
                    }
                    self.diff_reals(va, &want.real_servers, reals, &mut changes, &mut report);
                }
                // Upstream's cleanLegacyService: the node's IPVS table is IPVS mode's.
                None => changes.push(Change::DeleteService(*va)),
            }
        }
        for (va, svc) in &desired_vs {
            if !table.contains_key(va) {
                push_new_service(va, svc, &mut changes);
            }
        }
        self.draining.retain(|(va, _)| desired_vs.contains_key(va));
        send(&mut client, &changes, &mut report)?;
        report.addresses_changed += dummy.delete(bound.difference(&want))?;
        self.installed = Some(Installed {
            ruleset: desired.clone(),
            sets,
            chains,
            context: None,
        });
        report.drained_deleted += self.drain()?;
        Ok(report)
    }

    /// Replaces the given services' state (`None`: deleted). Requires a previous full apply
    /// ([`Error::NoBaseline`] otherwise); on failure the next apply must be a full one.
    pub fn apply_changes(
        &mut self,
        changes: BTreeMap<ServiceName, Option<ServiceIpvs>>,
    ) -> Result<IpvsReport, Error> {
        let Some(mut inst) = self.installed.take() else {
            return Err(Error::NoBaseline);
        };
        let mut report = IpvsReport::default();
        let mut previous = BTreeMap::new();
        for (name, svc) in changes {
            let old = inst.ruleset.services.get(&name).cloned();
            if old != svc {
                inst.ruleset.set_service(name.clone(), svc);
                previous.insert(name, old);
            }
        }
        if !previous.is_empty() {
            self.apply_services(&mut inst, &previous, &mut report)?;
        }
        self.installed = Some(inst);
        report.drained_deleted += self.drain()?;
        Ok(report)
    }

    fn apply_services(
        &mut self,
        inst: &mut Installed,
        previous: &BTreeMap<ServiceName, Option<ServiceIpvs>>,
        report: &mut IpvsReport,
    ) -> Result<(), Error> {
        let empty = ServiceIpvs::default();
        let mut delta = SetDelta::default();
        for (name, old) in previous {
            let new = inst.ruleset.services.get(name).unwrap_or(&empty);
            inst.sets
                .replace(old.as_ref().unwrap_or(&empty), new, &mut delta);
        }
        let mut dummy = Dummy::ensure()?;
        report.addresses_changed += dummy.add(delta.bind.iter())?;
        let input = delta.restore_input(self.family);
        ipset::restore(&input)?;
        report.set_changes = delta.add.len() + delta.del.len();
        report.script_bytes += input.len();
        let chains = chains::render_with(&inst.ruleset, inst.sets.sets());
        if chains != inst.chains {
            report.script_bytes += self.write_chains(&chains)?;
            report.chains_written = chains.nat.len() + chains.filter.len();
        }
        let mut client = IpvsClient::open()?;
        let all = inst.ruleset.virtual_services();
        let mut changes = Vec::new();
        for (name, old) in previous {
            let old = old.as_ref().unwrap_or(&empty);
            let new = inst.ruleset.services.get(name).unwrap_or(&empty);
            for va in old.virtual_services.keys() {
                if !all.contains_key(va) {
                    changes.push(Change::DeleteService(*va));
                    self.draining.retain(|(v, _)| v != va);
                }
            }
            for (va, svc) in &new.virtual_services {
                match old.virtual_services.get(va) {
                    None => push_new_service(va, svc, &mut changes),
                    Some(before) => {
                        if before.server != svc.server {
                            changes.push(Change::UpdateService(*va, svc.server.clone()));
                        }
                        let live = client.real_servers(va)?;
                        self.diff_reals(va, &svc.real_servers, &live, &mut changes, report);
                    }
                }
            }
        }
        send(&mut client, &changes, report)?;
        report.addresses_changed += dummy.delete(delta.unbind.iter())?;
        inst.chains = chains;
        Ok(())
    }

    /// Deletes drained real servers that have no connection left; returns how many.
    pub fn drain(&mut self) -> Result<usize, Error> {
        if self.draining.is_empty() {
            return Ok(0);
        }
        let mut by_service: BTreeMap<VirtualAddress, Vec<SocketAddr>> = BTreeMap::new();
        for (va, addr) in &self.draining {
            by_service.entry(*va).or_default().push(*addr);
        }
        let mut client = IpvsClient::open()?;
        let mut changes = Vec::new();
        for (va, addrs) in by_service {
            let reals = client.real_servers(&va).unwrap_or_default();
            for addr in addrs {
                match reals.iter().find(|r| r.server.address == addr) {
                    // Gone already (its virtual server was deleted, or someone else did it).
                    None => {
                        self.draining.remove(&(va, addr));
                    }
                    Some(l) if idle(&va, l) => changes.push(Change::DeleteReal(va, addr)),
                    Some(_) => {}
                }
            }
        }
        let refused = client.apply(&changes)?;
        let mut deleted = 0;
        for c in &changes {
            if let Change::DeleteReal(va, addr) = c {
                if !refused.iter().any(|r| r.change == *c) {
                    self.draining.remove(&(*va, *addr));
                    deleted += 1;
                }
            }
        }
        Ok(deleted)
    }

    /// `ipvs.excludeCIDRs`: someone else's virtual server, never deleted.
    fn excluded(&self, va: &VirtualAddress) -> bool {
        self.options
            .exclude_cidrs
            .iter()
            .any(|net: &IpNet| net.contains(&va.ip))
    }

    /// Writes the chains and the jumps into them that are missing (see [`super::jumps`]);
    /// returns the bytes restored.
    fn write_chains(&mut self, chains: &Chains) -> Result<usize, Error> {
        let saved = self.iptables.save(None)?;
        let (mut insert, check) = super::jumps::missing(&saved, chains::jump_rules());
        for jump in check {
            let mut args = vec!["-t", jump.table.as_str(), "-C", jump.chain];
            args.extend(jump.args.iter().map(String::as_str));
            if !self.iptables.iptables(&args)? {
                insert.push(jump);
            }
        }
        let text = super::jumps::with_jumps(&chains.restore().text, &insert);
        self.iptables.restore(&text)?;
        Ok(text.len())
    }

    /// Real server changes of one virtual server: add and update what is desired, drain what
    /// is not (weight 0, then delete once idle).
    fn diff_reals(
        &mut self,
        va: &VirtualAddress,
        want: &BTreeMap<SocketAddr, RealServer>,
        live: &[LiveRealServer],
        changes: &mut Vec<Change>,
        report: &mut IpvsReport,
    ) {
        for (addr, rs) in want {
            self.draining.remove(&(*va, *addr));
            match live.iter().find(|l| l.server.address == *addr) {
                None => changes.push(Change::AddReal(*va, *rs)),
                Some(l) if l.server != *rs => changes.push(Change::UpdateReal(*va, *rs)),
                Some(_) => {}
            }
        }
        for l in live
            .iter()
            .filter(|l| !want.contains_key(&l.server.address))
        {
            let key = (*va, l.server.address);
            if idle(va, l) {
                changes.push(Change::DeleteReal(*va, l.server.address));
                if self.draining.remove(&key) {
                    report.drained_deleted += 1;
                }
            } else if l.server.weight != 0 || !self.draining.contains(&key) {
                let mut rs = l.server;
                rs.weight = 0;
                changes.push(Change::UpdateReal(*va, rs));
                self.draining.insert(key);
                report.drained += 1;
            }
        }
    }
}

/// A real server that may be deleted now: no connection left, or a protocol without graceful
/// termination (upstream's `IsRsGracefulTerminationNeeded`: UDP and SCTP flows are ended at
/// their next packet by `expire_nodest_conn`).
fn idle(va: &VirtualAddress, l: &LiveRealServer) -> bool {
    va.protocol != Protocol::Tcp || (l.active == 0 && l.inactive == 0)
}

fn send(client: &mut IpvsClient, changes: &[Change], report: &mut IpvsReport) -> Result<(), Error> {
    report.ipvs_changes += changes.len();
    let refused = client.apply(changes)?;
    if refused.is_empty() {
        Ok(())
    } else {
        Err(IpvsError::Refused(refused).into())
    }
}

fn push_new_service(va: &VirtualAddress, svc: &VirtualService, changes: &mut Vec<Change>) {
    changes.push(Change::AddService(*va, svc.server.clone()));
    for rs in svc.real_servers.values() {
        changes.push(Change::AddReal(*va, *rs));
    }
}
