//! `ferry cleanup` for IPVS mode (and IPVS mode's leftovers once another mode has synced):
//! Ferry's (or kube-proxy's) virtual servers, the chains and their jumps, upstream's ipsets and
//! kube-ipvs0 — or, dry, what would go. Nothing happens where IPVS mode never ran.
//!
//! Which virtual servers are IPVS mode's is read from its own markers, never guessed: those
//! on a kube-ipvs0 address, those listed in `KUBE-CLUSTER-IP`, `KUBE-EXTERNAL-IP(-LOCAL)` and
//! `KUBE-LOAD-BALANCER`, and NodePorts (a port in `KUBE-NODE-PORT-*` on one of the node's
//! addresses). Other virtual servers (a load balancer someone runs by hand) stay. The chains
//! iptables mode writes too (`KUBE-SERVICES`, …) go only where iptables mode did not run
//! (see `iptables::cleanup`).

use std::collections::BTreeSet;
use std::net::IpAddr;

use ferry_compile::iptables::Table;
use ferry_compile::ipvs::chains::{FILTER_CHAINS, KUBE_IPVS_FILTER, KUBE_NODE_PORT, NAT_CHAINS};
use ferry_compile::ipvs::sets::{self, SetKind};
use ferry_compile::ipvs::{VirtualAddress, DUMMY_DEVICE};
use ferry_model::{IpFamily, Protocol};

use super::node;
use crate::cleanup::layouts::{ferry_wrote, iptables_mode_ran, ipvs_mode_ran, left_phrase, shared};
use crate::cleanup::{not_installed, remove_chains, some_of, Cleanup, Scope};
use crate::iptables_tool::{IptablesBackend, IptablesCli, IptablesRunner};
use crate::ipvs_kernel::ipset::{self, LiveSets};
use crate::ipvs_kernel::IpvsError;
use crate::ipvs_kernel::Links;
use crate::ipvs_kernel::{Change, IpvsClient};
use crate::leftovers::Leftover;
use crate::Error;

/// Names a cleanup line shows before `and N more`.
const SHOWN: usize = 6;

/// Whether one of the chains only IPVS mode writes is there, asked chain by chain: the other
/// modes' start-up and cleanup ask this of both backends and families, and reading the whole
/// ruleset (`iptables-save`) took 4 s at 10 000 × 10 in iptables mode (nft backend), which the
/// first change after start-up waited for.
fn ipvs_chains_present(cli: &mut IptablesCli) -> Result<bool, Error> {
    Ok(cli.has_chain(Table::Nat, KUBE_NODE_PORT)?
        || cli.has_chain(Table::Filter, KUBE_IPVS_FILTER)?)
}

/// Whose the IPVS state (virtual servers, sets, kube-ipvs0) is: Ferry's where Ferry's owner
/// marker is in the IPVS layout's chains of some family and backend; kube-proxy's otherwise
/// (also when no chain is left to tell: then Ferry cannot say it wrote them).
fn ferry_wrote_ipvs() -> Result<bool, Error> {
    for family in [IpFamily::V4, IpFamily::V6] {
        for backend in IptablesBackend::ALL {
            let mut cli = IptablesCli::for_family(backend, family);
            match ipvs_chains_present(&mut cli) {
                Ok(true) => {
                    if ferry_wrote(&mut cli)? {
                        return Ok(true);
                    }
                }
                Ok(false) => {}
                Err(e) if not_installed(&e) => {}
                Err(e) => return Err(e),
            }
        }
    }
    Ok(false)
}

/// Removes IPVS mode's objects from the current network namespace (both families, both
/// iptables backends), or with a dry `scope` names them: Ferry's, and kube-proxy's when
/// `scope` says so (else they are named in [`Cleanup::left`]). Tools or kernel parts that are
/// missing are skipped (and said so).
pub fn cleanup(scope: Scope) -> Result<Cleanup, Error> {
    let dry_run = scope.dry_run;
    let mut out = Cleanup::default();
    let sets = match ipset::read_if_present()? {
        Some(sets) => sets,
        None => {
            out.skipped.push("ipset is not installed".to_owned());
            LiveSets::new()
        }
    };
    let link_err = |error| IpvsError::Link {
        what: format!("read {DUMMY_DEVICE}"),
        error,
    };
    let mut links = Links::open().map_err(link_err)?;
    let dummy = links.index_of(DUMMY_DEVICE).map_err(link_err)?;
    let bound = match dummy {
        Some(index) => links.addresses(index).map_err(link_err)?,
        None => Vec::new(),
    };
    // Nothing of the IPVS state to remove (the chains' owner is asked per backend below), or
    // Ferry's marker in the layout's chains.
    let whose = if (dummy.is_none() && sets.is_empty()) || ferry_wrote_ipvs()? {
        "Ferry's"
    } else if scope.kube_proxy {
        "kube-proxy's"
    } else {
        out.left.push(format!(
            "{DUMMY_DEVICE}, {} KUBE-* ipsets and the IPVS virtual servers they mark, of \
             kube-proxy's IPVS mode (no Ferry marker in nat KUBE-POSTROUTING: kube-proxy wrote \
             them last); `ferry cleanup --also-kube-proxy` removes them",
            sets.len()
        ));
        remove_ipvs_chains(scope, &mut out)?;
        return Ok(out);
    };
    if dummy.is_some() || !sets.is_empty() {
        // First, while the markers that identify them are still there.
        match IpvsClient::open() {
            Ok(mut client) => {
                let vs = delete_virtual_servers(&mut client, &bound, &sets, dry_run)?;
                if !vs.is_empty() {
                    out.objects.push(format!(
                        "{whose} IPVS virtual servers: {}",
                        some_of(&vs, SHOWN)
                    ));
                }
            }
            Err(IpvsError::NoIpvs(_)) => out.skipped.push("the kernel has no IPVS".to_owned()),
            Err(e) => return Err(e.into()),
        }
    }
    remove_ipvs_chains(scope, &mut out)?;
    // After the rules that match them: a set in use cannot be destroyed.
    if !sets.is_empty() {
        let names: Vec<String> = sets.keys().cloned().collect();
        out.objects
            .push(format!("{whose} ipsets: {}", some_of(&names, SHOWN)));
        if !dry_run {
            ipset::destroy_all(&sets)?;
        }
    }
    if dummy.is_some() {
        out.objects.push(format!("{whose} link {DUMMY_DEVICE}"));
        if !dry_run {
            links.delete(DUMMY_DEVICE).map_err(link_err)?;
        }
    }
    Ok(out)
}

/// kube-proxy's IPVS mode's objects (or an earlier IPVS-mode run's): kube-ipvs0, upstream's
/// sets, the IPVS layout's chains. IPVS mode takes them over; any other mode's start removes
/// them after its first sync.
pub fn leftovers() -> Vec<Leftover> {
    let dummy = nix::net::if_::if_nametoindex(DUMMY_DEVICE).is_ok();
    let sets = ipset::read_if_present().ok().flatten().unwrap_or_default();
    let chains = [IpFamily::V4, IpFamily::V6].into_iter().any(|family| {
        IptablesBackend::ALL.into_iter().any(|backend| {
            let mut cli = IptablesCli::for_family(backend, family);
            ipvs_chains_present(&mut cli).unwrap_or(false)
        })
    });
    let mut what = Vec::new();
    if dummy {
        what.push(format!("link {DUMMY_DEVICE} and its IPVS virtual servers"));
    }
    if !sets.is_empty() {
        what.push(format!("{} KUBE-* ipsets", sets.len()));
    }
    if chains {
        what.push("the IPVS layout's KUBE-* chains".to_owned());
    }
    if what.is_empty() {
        return Vec::new();
    }
    vec![Leftover {
        what: format!("{} (kube-proxy's IPVS mode)", what.join(", ")),
        shared: true,
        remove: None,
    }]
}

/// The jumps and chains of IPVS mode, in each family and backend where IPVS mode ran: where
/// Ferry wrote them, or kube-proxy did and `scope` includes kube-proxy's.
fn remove_ipvs_chains(scope: Scope, out: &mut Cleanup) -> Result<(), Error> {
    for family in [IpFamily::V4, IpFamily::V6] {
        for backend in IptablesBackend::ALL {
            let tool = backend.program_for(family, "");
            let mut cli = IptablesCli::for_family(backend, family);
            match ipvs_chains_present(&mut cli) {
                Err(e) if not_installed(&e) => {
                    out.skipped.push(format!("{tool} is not installed"));
                    continue;
                }
                Ok(false) => continue,
                other => other?,
            };
            let existing = cli.saved_chains()?;
            if !ipvs_mode_ran(&existing) {
                continue;
            }
            let whose = if ferry_wrote(&mut cli)? {
                "Ferry's"
            } else if scope.kube_proxy {
                "kube-proxy's"
            } else {
                let count = existing
                    .iter()
                    .filter(|(t, _)| *t == "nat" || *t == "filter")
                    .flat_map(|(_, cs)| cs)
                    .filter(|c| {
                        NAT_CHAINS.contains(&c.as_str()) || FILTER_CHAINS.contains(&c.as_str())
                    })
                    .count();
                out.left.push(left_phrase(&tool, "IPVS", count));
                continue;
            };
            let keep_shared = iptables_mode_ran(&existing);
            let chains_of = |table: Table| -> Vec<String> {
                let list = match table {
                    Table::Nat => NAT_CHAINS.as_slice(),
                    Table::Filter => FILTER_CHAINS.as_slice(),
                    Table::Mangle => &[],
                };
                existing
                    .get(table.as_str())
                    .into_iter()
                    .flatten()
                    .filter(|c| list.contains(&c.as_str()))
                    .filter(|c| !(keep_shared && shared(table, c)))
                    .cloned()
                    .collect()
            };
            out.objects.extend(remove_chains(
                &mut cli,
                &tool,
                whose,
                &chains_of,
                scope.dry_run,
            )?);
        }
    }
    Ok(())
}

/// Deletes (or, dry, finds) the virtual servers IPVS mode's markers name; returns them.
fn delete_virtual_servers(
    client: &mut IpvsClient,
    bound: &[IpAddr],
    sets: &LiveSets,
    dry_run: bool,
) -> Result<Vec<String>, Error> {
    let local = node::local_addresses()?;
    let marked = Markers::read(sets);
    let ours: Vec<VirtualAddress> = client
        .services()?
        .into_iter()
        .map(|(va, _)| va)
        .filter(|va| {
            bound.contains(&va.ip)
                || marked.vips.contains(va)
                || (local.contains(&va.ip) && marked.node_ports.contains(&(va.protocol, va.port)))
        })
        .collect();
    if !dry_run {
        let changes: Vec<Change> = ours.iter().copied().map(Change::DeleteService).collect();
        let refused = client.apply(&changes)?;
        if !refused.is_empty() {
            return Err(IpvsError::Refused(refused).into());
        }
    }
    Ok(ours.iter().map(ToString::to_string).collect())
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
    use std::collections::BTreeMap;

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

    #[test]
    fn the_shared_chains_stay_where_iptables_mode_ran_too() {
        let tables = |nat: &[&str]| {
            BTreeMap::from([(
                "nat".to_owned(),
                nat.iter().map(|c| (*c).to_owned()).collect::<Vec<_>>(),
            )])
        };
        let ipvs_only = tables(&["KUBE-SERVICES", "KUBE-NODE-PORT", "KUBE-MARK-MASQ"]);
        assert!(ipvs_mode_ran(&ipvs_only) && !iptables_mode_ran(&ipvs_only));
        let both = tables(&["KUBE-SERVICES", "KUBE-NODE-PORT", "KUBE-SVC-ABC"]);
        assert!(ipvs_mode_ran(&both) && iptables_mode_ran(&both));
        assert!(shared(Table::Nat, "KUBE-SERVICES") && !shared(Table::Nat, "KUBE-NODE-PORT"));
        assert!(
            !shared(Table::Filter, "KUBE-SERVICES"),
            "IPVS mode has no filter KUBE-SERVICES"
        );
    }
}
