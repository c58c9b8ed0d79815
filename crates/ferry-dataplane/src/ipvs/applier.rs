//! The IPVS applier: makes the kernel hold the desired IPVS-mode state, touching only what
//! differs.
//!
//! A full apply reads the kernel (IPVS table, kube-ipvs0's addresses, the ipsets) and diffs
//! everything; an incremental one diffs only the changed services' virtual servers against
//! the kernel and the sets and addresses against what this applier installed last. Removed
//! real servers are drained, as upstream's graceful termination manager does: first weight 0
//! (no new connections), deleted once the kernel counts no connection to them (checked at
//! every apply and by [`IpvsApplier::drain`]).

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr};

use ferry_compile::iptables::{JumpRule, Table as IptTable};
use ferry_compile::ipvs::chains::{self, Chains};
use ferry_compile::ipvs::sets::IpSets;
use ferry_compile::ipvs::{RealServer, Ruleset, ServiceIpvs, VirtualAddress, DUMMY_DEVICE};
use ferry_model::{IpFamily, ServiceName};

use super::client::{Change, IpvsClient};
use super::genl::LiveRealServer;
use super::link::Links;
use super::{ipset, sysctl, IpvsError};
use crate::iptables::{IptablesCli, IptablesRunner};

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
    /// Whether the iptables chains were rewritten.
    pub chains_written: bool,
}

/// Keeps one family's IPVS-mode state in the kernel of the calling thread's namespace.
pub struct IpvsApplier<R: IptablesRunner = IptablesCli> {
    family: IpFamily,
    iptables: R,
    /// Real servers at weight 0 waiting for their connections to end.
    draining: BTreeSet<(VirtualAddress, SocketAddr)>,
    /// What the last successful apply installed.
    installed: Option<Installed>,
}

struct Installed {
    ruleset: Ruleset,
    sets: IpSets,
    chains: Chains,
}

impl<R: IptablesRunner> IpvsApplier<R> {
    /// An applier for `family` writing its chains with `iptables`.
    pub fn new(family: IpFamily, iptables: R) -> Self {
        Self {
            family,
            iptables,
            draining: BTreeSet::new(),
            installed: None,
        }
    }

    /// True until a full apply succeeded, or when the node-level settings changed.
    pub fn needs_full(&self, desired: &Ruleset) -> bool {
        self.installed
            .as_ref()
            .is_none_or(|i| !i.ruleset.same_base(desired))
    }

    /// The real servers being drained.
    pub fn draining(&self) -> &BTreeSet<(VirtualAddress, SocketAddr)> {
        &self.draining
    }

    /// Makes the kernel hold `desired`, reading everything back first.
    pub fn apply_full(&mut self, desired: &Ruleset) -> Result<IpvsReport, IpvsError> {
        self.installed = None;
        let mut report = IpvsReport::default();
        sysctls()?;
        let mut links = Links::open().map_err(link_err("open rtnetlink"))?;
        let (index, _) = links
            .ensure_dummy(DUMMY_DEVICE)
            .map_err(link_err("create kube-ipvs0"))?;
        let bound: BTreeSet<IpAddr> = links
            .addresses(index)
            .map_err(link_err("list kube-ipvs0's addresses"))?
            .into_iter()
            .filter(|ip| IpFamily::of(ip) == self.family)
            .collect();
        let want = desired.bind_addresses();
        report.addresses_changed += add_addresses(&mut links, index, want.difference(&bound))?;
        let sets = desired.sets();
        let (input, n) = ipset::restore_input(&sets, &ipset::read()?);
        ipset::restore(&input)?;
        report.set_changes = n;
        let chains = chains::render(desired);
        self.write_chains(&chains)?;
        report.chains_written = true;
        let mut client = IpvsClient::open()?;
        let table = client.table()?;
        let mut changes = Vec::new();
        let desired_vs = desired.virtual_services();
        for (va, (vs, reals)) in &table {
            if va.family() != self.family {
                continue;
            }
            if desired_vs.contains_key(va) {
                if *vs != desired_vs[va].server {
                    changes.push(Change::UpdateService(*va, desired_vs[va].server.clone()));
                }
                let want = &desired_vs[va].real_servers;
                self.diff_reals(va, want, reals, &mut changes, &mut report);
            } else {
                changes.push(Change::DeleteService(*va));
            }
        }
        for (va, svc) in &desired_vs {
            if !table.contains_key(va) {
                push_new_service(va, svc, &mut changes);
            }
        }
        self.send(&mut client, &changes, &mut report)?;
        report.addresses_changed += del_addresses(&mut links, index, bound.difference(&want))?;
        self.installed = Some(Installed {
            ruleset: desired.clone(),
            sets,
            chains,
        });
        report.drained_deleted += self.drain()?;
        Ok(report)
    }

    /// Applies the changes of the services in `changed` (their state in `desired`, the whole
    /// new state). Requires a previous full apply with the same base ([`Self::needs_full`]).
    pub fn apply_changes(
        &mut self,
        desired: &Ruleset,
        changed: &BTreeSet<ServiceName>,
    ) -> Result<IpvsReport, IpvsError> {
        let Some(installed) = self.installed.take() else {
            return self.apply_full(desired);
        };
        let mut report = IpvsReport::default();
        let mut links = Links::open().map_err(link_err("open rtnetlink"))?;
        let (index, _) = links
            .ensure_dummy(DUMMY_DEVICE)
            .map_err(link_err("create kube-ipvs0"))?;
        let had = installed.ruleset.bind_addresses();
        let want = desired.bind_addresses();
        report.addresses_changed += add_addresses(&mut links, index, want.difference(&had))?;
        let sets = desired.sets();
        let live = installed_as_live(&installed.sets);
        let (input, n) = ipset::restore_input(&sets, &live);
        ipset::restore(&input)?;
        report.set_changes = n;
        let chains = chains::render(desired);
        if chains != installed.chains {
            self.write_chains(&chains)?;
            report.chains_written = true;
        }
        let mut client = IpvsClient::open()?;
        let empty = ServiceIpvs::default();
        let mut changes = Vec::new();
        for name in changed {
            let old = installed.ruleset.services.get(name).unwrap_or(&empty);
            let new = desired.services.get(name).unwrap_or(&empty);
            self.diff_service(&mut client, old, new, desired, &mut changes, &mut report)?;
        }
        self.send(&mut client, &changes, &mut report)?;
        report.addresses_changed += del_addresses(&mut links, index, had.difference(&want))?;
        self.installed = Some(Installed {
            ruleset: desired.clone(),
            sets,
            chains,
        });
        report.drained_deleted += self.drain()?;
        Ok(report)
    }

    /// Deletes drained real servers that have no connection left; returns how many.
    pub fn drain(&mut self) -> Result<usize, IpvsError> {
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
                    Some(l) if idle(l) => changes.push(Change::DeleteReal(va, addr)),
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

    fn write_chains(&mut self, chains: &Chains) -> Result<(), IpvsError> {
        self.iptables.restore(&chains.restore().text)?;
        for jump in chains::jump_rules() {
            ensure_jump(&mut self.iptables, &jump)?;
        }
        Ok(())
    }

    /// Diffs one service's virtual servers (old and new) against the kernel.
    fn diff_service(
        &mut self,
        client: &mut IpvsClient,
        old: &ServiceIpvs,
        new: &ServiceIpvs,
        desired: &Ruleset,
        changes: &mut Vec<Change>,
        report: &mut IpvsReport,
    ) -> Result<(), IpvsError> {
        let all = desired.virtual_services();
        for va in old.virtual_services.keys() {
            if !all.contains_key(va) {
                changes.push(Change::DeleteService(*va));
                self.draining.retain(|(v, _)| v != va);
            }
        }
        for (va, svc) in &new.virtual_services {
            if !old.virtual_services.contains_key(va) {
                push_new_service(va, svc, changes);
                continue;
            }
            if old.virtual_services[va].server != svc.server {
                changes.push(Change::UpdateService(*va, svc.server.clone()));
            }
            let live = client.real_servers(va)?;
            self.diff_reals(va, &svc.real_servers, &live, changes, report);
        }
        Ok(())
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
            if idle(l) {
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

    fn send(
        &mut self,
        client: &mut IpvsClient,
        changes: &[Change],
        report: &mut IpvsReport,
    ) -> Result<(), IpvsError> {
        report.ipvs_changes += changes.len();
        let refused = client.apply(changes)?;
        if refused.is_empty() {
            Ok(())
        } else {
            Err(IpvsError::Refused(refused))
        }
    }
}

fn idle(l: &LiveRealServer) -> bool {
    l.active == 0 && l.inactive == 0
}

fn push_new_service(
    va: &VirtualAddress,
    svc: &ferry_compile::ipvs::VirtualService,
    changes: &mut Vec<Change>,
) {
    changes.push(Change::AddService(*va, svc.server.clone()));
    for rs in svc.real_servers.values() {
        changes.push(Change::AddReal(*va, *rs));
    }
}

/// What this applier installed, in the shape `ipset save` is read into.
fn installed_as_live(sets: &IpSets) -> ipset::LiveSets {
    sets.iter()
        .map(|(kind, entries)| {
            (
                kind.name_in(sets.family),
                entries.iter().map(ToString::to_string).collect(),
            )
        })
        .collect()
}

fn sysctls() -> Result<(), IpvsError> {
    for (path, old, new) in sysctl::ensure(&sysctl::SYSCTLS).map_err(IpvsError::Sysctl)? {
        tracing::info!(sysctl = %path, %old, %new, "set sysctl for IPVS mode");
    }
    Ok(())
}

fn link_err(what: &'static str) -> impl Fn(std::io::Error) -> IpvsError {
    move |source| IpvsError::Link {
        what: what.to_owned(),
        source,
    }
}

fn add_addresses<'a>(
    links: &mut Links,
    index: u32,
    ips: impl Iterator<Item = &'a IpAddr>,
) -> Result<usize, IpvsError> {
    let mut n = 0;
    for ip in ips {
        links
            .add_address(index, *ip)
            .map_err(|source| IpvsError::Link {
                what: format!("add {ip} to {DUMMY_DEVICE}"),
                source,
            })?;
        n += 1;
    }
    Ok(n)
}

fn del_addresses<'a>(
    links: &mut Links,
    index: u32,
    ips: impl Iterator<Item = &'a IpAddr>,
) -> Result<usize, IpvsError> {
    let mut n = 0;
    for ip in ips {
        links
            .delete_address(index, *ip)
            .map_err(|source| IpvsError::Link {
                what: format!("remove {ip} from {DUMMY_DEVICE}"),
                source,
            })?;
        n += 1;
    }
    Ok(n)
}

/// Inserts a jump at the top of its built-in chain unless it is there (`-C`, then `-I`).
fn ensure_jump(runner: &mut impl IptablesRunner, jump: &JumpRule) -> Result<(), IpvsError> {
    let table: IptTable = jump.table;
    let mut args = vec!["-t", table.as_str(), "-C", jump.chain];
    args.extend(jump.args.iter().map(String::as_str));
    if !runner.iptables(&args)? {
        args[2] = "-I";
        runner.iptables(&args)?;
    }
    Ok(())
}
