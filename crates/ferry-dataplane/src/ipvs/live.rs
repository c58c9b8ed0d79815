//! IPVS mode's `explain --live`: the kernel's virtual server for the traced destination, its
//! real servers, kube-ipvs0's address and the ipset entries the explanation names, compared
//! with what the cluster state compiles to on this node.

use std::collections::BTreeMap;

use ferry_compile::ipvs::{
    service_line, NodeRules, VirtualAddress, VirtualServer, VirtualService, DUMMY_DEVICE,
};
use ferry_compile::trace::Trace;
use ferry_compile::NodeCompiler;
use ferry_model::ClusterState;

use super::node;
use crate::ipvs_kernel::IpvsClient;
use crate::ipvs_kernel::Links;
use crate::ipvs_kernel::LiveRealServer;
use crate::ipvs_kernel::{ipset, IpvsError};
use crate::live::{KernelReport, LiveReport};
use crate::Error;

/// Reads the kernel and compares it with what `compiler` renders for `state`.
pub fn check(
    trace: &Trace,
    compiler: &NodeCompiler,
    state: &ClusterState,
) -> Result<LiveReport, Error> {
    let p = trace.packet;
    let va = VirtualAddress {
        protocol: p.protocol,
        ip: p.dst,
        port: p.port,
    };
    let local = node::local_addresses()?;
    let desired = NodeRules::new(compiler, &local).full(state);
    let mut client = IpvsClient::open()?;
    let have = client.services()?;
    let bound = dummy_addresses()?;
    if have.is_empty() && bound.is_none() {
        return Ok(LiveReport::absent(
            "IPVS mode (no virtual server, no kube-ipvs0)",
        ));
    }
    let mut report = LiveReport {
        table_present: true,
        checked: 0,
        differences: Vec::new(),
        endpoints: Vec::new(),
    };
    let want = desired.virtual_services();
    let want = want.get(&va);
    let live = have.iter().find(|(a, _)| *a == va).map(|(_, s)| s);
    // The virtual server (or its absence, where none is wanted) is checked either way.
    report.checked += 1;
    match (want, live) {
        (None, None) => {}
        (Some(w), None) => report.differences.push(format!(
            "virtual server {} is missing from the kernel's IPVS table",
            service_line(&va, &w.server)
        )),
        (None, Some(vs)) => report.differences.push(format!(
            "the kernel has virtual server {}, which Ferry would not program here",
            service_line(&va, vs)
        )),
        (Some(w), Some(vs)) => {
            let reals = client.real_servers(&va)?;
            report.checked += w.real_servers.len();
            report.differences.extend(compare(&va, w, vs, &reals));
            report.endpoints = reals
                .iter()
                .filter(|l| l.server.weight > 0)
                .map(|l| l.server.address.to_string())
                .collect();
        }
    }
    if desired.bind_addresses().contains(&p.dst) {
        report.checked += 1;
        if !bound.as_ref().is_some_and(|b| b.contains(&p.dst)) {
            report
                .differences
                .push(format!("{} is not an address of {DUMMY_DEVICE}", p.dst));
        }
    }
    check_sets(trace, &mut report)?;
    Ok(report)
}

/// Where the kernel's virtual server `va` (settings `vs`, real servers `reals`) differs from
/// the wanted one. Draining real servers (weight 0) are not differences.
fn compare(
    va: &VirtualAddress,
    want: &VirtualService,
    vs: &VirtualServer,
    reals: &[LiveRealServer],
) -> Vec<String> {
    let mut out = Vec::new();
    if *vs != want.server {
        out.push(format!(
            "the kernel's virtual server is {}, Ferry programs {}",
            service_line(va, vs),
            service_line(va, &want.server)
        ));
    }
    for rs in want.real_servers.values() {
        match reals.iter().find(|l| l.server.address == rs.address) {
            None => out.push(format!("real server {} is missing from {va}", rs.address)),
            Some(l) if l.server != *rs => out.push(format!(
                "real server {} of {va} has weight {} in the kernel, Ferry programs {}",
                rs.address, l.server.weight, rs.weight
            )),
            Some(_) => {}
        }
    }
    for l in reals
        .iter()
        .filter(|l| !want.real_servers.contains_key(&l.server.address) && l.server.weight != 0)
    {
        out.push(format!(
            "the kernel's {va} has real server {}, which Ferry would not program",
            l.server.address
        ));
    }
    out
}

/// `ferry status`: every service's virtual servers and kube-ipvs0 addresses in the kernel,
/// compared with what `state` compiles to; virtual servers of the family no service wants are
/// stray.
pub fn kernel(compiler: &NodeCompiler, state: &ClusterState) -> Result<KernelReport, Error> {
    let local = node::local_addresses()?;
    let desired = NodeRules::new(compiler, &local).full(state);
    let mut client = IpvsClient::open()?;
    let table = client.table()?;
    let bound = dummy_addresses()?;
    let family = compiler.family();
    if bound.is_none() && !table.keys().any(|va| va.family() == family) {
        return Ok(KernelReport::absent(
            desired.services.keys().cloned(),
            "IPVS mode (no virtual server, no kube-ipvs0)",
        ));
    }
    let bound = bound.unwrap_or_default();
    let mut services = BTreeMap::new();
    for (name, svc) in &desired.services {
        let mut diffs = Vec::new();
        for (va, want) in &svc.virtual_services {
            match table.get(va) {
                None => diffs.push(format!("virtual server {va} is missing")),
                Some((vs, reals)) => diffs.extend(compare(va, want, vs, reals)),
            }
        }
        for ip in svc.bind.iter().filter(|ip| !bound.contains(ip)) {
            diffs.push(format!("{ip} is not an address of {DUMMY_DEVICE}"));
        }
        services.insert(name.clone(), diffs);
    }
    let wanted = desired.virtual_services();
    let stray = table
        .iter()
        .filter(|(va, _)| va.family() == family && !wanted.contains_key(va))
        .map(|(va, (vs, _))| format!("virtual server {}", service_line(va, vs)))
        .collect();
    Ok(KernelReport {
        present: true,
        services,
        stray,
    })
}

/// kube-ipvs0's addresses, `None` when it does not exist.
fn dummy_addresses() -> Result<Option<Vec<std::net::IpAddr>>, IpvsError> {
    let err = |error| IpvsError::Link {
        what: format!("read {DUMMY_DEVICE}"),
        error,
    };
    let mut links = Links::open().map_err(err)?;
    match links.index_of(DUMMY_DEVICE).map_err(err)? {
        Some(index) => Ok(Some(links.addresses(index).map_err(err)?)),
        None => Ok(None),
    }
}

/// Every `ipset NAME: ENTRY` the explanation names must be in the kernel's set.
fn check_sets(trace: &Trace, report: &mut LiveReport) -> Result<(), Error> {
    let named: Vec<(&str, &str)> = trace
        .steps
        .iter()
        .flat_map(|s| &s.objects)
        .filter_map(|o| o.strip_prefix("ipset "))
        .filter_map(|o| o.split_once(": "))
        .filter(|(_, entry)| !entry.starts_with('('))
        .collect();
    if named.is_empty() {
        return Ok(());
    }
    let sets = ipset::read()?;
    for (set, entry) in named {
        report.checked += 1;
        if !sets.get(set).is_some_and(|s| s.contains(entry)) {
            report
                .differences
                .push(format!("ipset {set} has no entry {entry}"));
        }
    }
    Ok(())
}
