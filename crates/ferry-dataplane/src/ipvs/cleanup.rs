//! `ferry cleanup` for IPVS mode (and IPVS mode's leftovers when another mode starts): Ferry's
//! (or kube-proxy's) virtual servers, the chains and their jumps, upstream's ipsets and
//! kube-ipvs0. Nothing happens where IPVS mode never ran.
//!
//! Which virtual servers are IPVS mode's is read from its own markers, never guessed: those
//! on a kube-ipvs0 address, those listed in `KUBE-CLUSTER-IP`, `KUBE-EXTERNAL-IP(-LOCAL)` and
//! `KUBE-LOAD-BALANCER`, and NodePorts (a port in `KUBE-NODE-PORT-*` on one of the node's
//! addresses). Other virtual servers (a load balancer someone runs by hand) stay.

use std::collections::BTreeSet;
use std::net::IpAddr;

use ferry_compile::iptables::Table;
use ferry_compile::ipvs::chains::{
    jump_rules, FILTER_CHAINS, KUBE_IPVS_FILTER, KUBE_NODE_PORT, NAT_CHAINS,
};
use ferry_compile::ipvs::sets::{self, SetKind};
use ferry_compile::ipvs::{VirtualAddress, DUMMY_DEVICE};
use ferry_model::{IpFamily, Protocol};

use super::client::{Change, IpvsClient};
use super::ipset::{self, LiveSets};
use super::link::Links;
use super::{node, IpvsError};
use crate::iptables::{remove_chains, save_tables, IptablesCli, IptablesRunner};
use crate::mode::IptablesBackend;
use crate::Error;

/// Removes IPVS mode's objects from the current network namespace (both families, both
/// iptables backends). Tools or kernel parts that are missing are skipped.
pub fn cleanup() -> Result<(), Error> {
    let sets = ipset::read_if_present()?.unwrap_or_default();
    let link_err = |source| IpvsError::Link {
        what: format!("read {DUMMY_DEVICE}"),
        source,
    };
    let mut links = Links::open().map_err(link_err)?;
    let dummy = links.index_of(DUMMY_DEVICE).map_err(link_err)?;
    let bound = match dummy {
        Some(index) => links.addresses(index).map_err(link_err)?,
        None => Vec::new(),
    };
    if dummy.is_some() || !sets.is_empty() {
        // First, while the markers that identify them are still there.
        match IpvsClient::open() {
            Ok(mut client) => delete_virtual_servers(&mut client, &bound, &sets)?,
            Err(IpvsError::NoIpvs(_)) => {}
            Err(e) => return Err(e.into()),
        }
    }
    remove_ipvs_chains()?;
    // After the rules that match them: a set in use cannot be destroyed.
    ipset::destroy_all(&sets)?;
    if dummy.is_some() {
        links.delete(DUMMY_DEVICE).map_err(link_err)?;
        tracing::info!("deleted {DUMMY_DEVICE}");
    }
    Ok(())
}

/// The jumps and chains of IPVS mode, in each family and backend where IPVS mode ran (its
/// nat `KUBE-NODE-PORT` or filter `KUBE-IPVS-FILTER` is there).
fn remove_ipvs_chains() -> Result<(), Error> {
    for family in [IpFamily::V4, IpFamily::V6] {
        for backend in IptablesBackend::ALL {
            let mut cli = IptablesCli::for_family(backend, family);
            let save = match cli.save(None) {
                Err(Error::Spawn { .. }) => continue,
                other => other?,
            };
            let existing = save_tables(&save);
            let has = |table: Table, chain: &str| {
                existing
                    .get(table.as_str())
                    .is_some_and(|cs| cs.iter().any(|c| c == chain))
            };
            if !has(Table::Nat, KUBE_NODE_PORT) && !has(Table::Filter, KUBE_IPVS_FILTER) {
                continue;
            }
            remove_chains(
                &mut cli,
                &existing,
                &jump_rules(),
                |table, chain| match table {
                    Table::Nat => NAT_CHAINS.contains(&chain),
                    Table::Filter => FILTER_CHAINS.contains(&chain),
                    Table::Mangle => false,
                },
            )?;
        }
    }
    Ok(())
}

fn delete_virtual_servers(
    client: &mut IpvsClient,
    bound: &[IpAddr],
    sets: &LiveSets,
) -> Result<(), Error> {
    let local = node::local_addresses()?;
    let marked = Markers::read(sets);
    let changes: Vec<Change> = client
        .services()?
        .into_iter()
        .map(|(va, _)| va)
        .filter(|va| {
            bound.contains(&va.ip) || marked.vips.contains(va) || {
                local.contains(&va.ip) && marked.node_ports.contains(&(va.protocol, va.port))
            }
        })
        .map(Change::DeleteService)
        .collect();
    let refused = client.apply(&changes)?;
    if !refused.is_empty() {
        return Err(IpvsError::Refused(refused).into());
    }
    if !changes.is_empty() {
        tracing::info!("deleted {} IPVS virtual servers", changes.len());
    }
    Ok(())
}

/// What upstream's sets say is a service frontend.
#[derive(Default)]
struct Markers {
    vips: BTreeSet<VirtualAddress>,
    node_ports: BTreeSet<(Protocol, u16)>,
}

impl Markers {
    fn read(live: &LiveSets) -> Self {
        let mut m = Markers::default();
        let entries = |kind: SetKind| {
            [IpFamily::V4, IpFamily::V6]
                .into_iter()
                .filter_map(move |f| live.get(&kind.name_in(f)))
                .flatten()
        };
        for kind in [
            sets::CLUSTER_IP,
            sets::EXTERNAL_IP,
            sets::EXTERNAL_IP_LOCAL,
            sets::LOAD_BALANCER,
            sets::NODE_PORT_SCTP,
        ] {
            m.vips.extend(entries(kind).filter_map(|e| ip_port(e)));
        }
        for (kind, protocol) in [
            (sets::NODE_PORT_TCP, Protocol::Tcp),
            (sets::NODE_PORT_UDP, Protocol::Udp),
        ] {
            m.node_ports
                .extend(entries(kind).filter_map(|e| e.parse().ok().map(|port| (protocol, port))));
        }
        m
    }
}

/// `10.96.0.1,tcp:443` (a `hash:ip,port` entry).
fn ip_port(entry: &str) -> Option<VirtualAddress> {
    let (ip, rest) = entry.split_once(',')?;
    let (proto, port) = rest.split_once(':')?;
    Some(VirtualAddress {
        protocol: proto.to_uppercase().parse().ok()?,
        ip: ip.parse().ok()?,
        port: port.parse().ok()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_entries_name_the_frontends() {
        let mut live = LiveSets::new();
        live.entry("KUBE-CLUSTER-IP".into())
            .or_default()
            .insert("10.96.0.1,tcp:443".into());
        live.entry("KUBE-6-LOAD-BALANCER".into())
            .or_default()
            .insert("fd00::7,udp:53".into());
        live.entry("KUBE-NODE-PORT-TCP".into())
            .or_default()
            .insert("32223".into());
        let m = Markers::read(&live);
        let va = |p, ip: &str, port| VirtualAddress {
            protocol: p,
            ip: ip.parse().expect("ip"),
            port,
        };
        assert_eq!(
            m.vips,
            BTreeSet::from([
                va(Protocol::Tcp, "10.96.0.1", 443),
                va(Protocol::Udp, "fd00::7", 53)
            ])
        );
        assert_eq!(m.node_ports, BTreeSet::from([(Protocol::Tcp, 32223)]));
    }
}
