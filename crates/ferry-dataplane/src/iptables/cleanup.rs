//! `ferry cleanup` for iptables: removes Ferry's jumps and chains from both backends (or, dry,
//! names them), and finds kube-proxy's chains at start-up. Ferry's iptables mode uses
//! upstream's chain names, so kube-proxy's iptables-mode chains are the same objects; they are
//! told apart by Ferry's owner marker in nat `KUBE-POSTROUTING` ([`ferry_wrote`]), and
//! kube-proxy's go only when asked (`ferry cleanup --also-kube-proxy`, and an agent in another
//! mode after its first sync, as kube-proxy does when it starts).
//!
//! iptables and IPVS modes share some chain names (`KUBE-SERVICES`, `KUBE-POSTROUTING`, …, as
//! upstream's do): this cleanup acts only where iptables mode ran (its canary, or a chain only
//! it writes, is there: [`iptables_mode_ran`]), and leaves the shared chains to IPVS mode
//! where that ran too ([`shared`]), so neither mode's cleanup of the other (after the first
//! sync) deletes the running mode's chains.

use std::collections::BTreeMap;

use ferry_compile::iptables::{
    owner_marker_args, Table, BASE_CHAINS_FILTER, BASE_CHAINS_NAT, CANARY, KUBE_EXTERNAL_SERVICES,
    KUBE_NODEPORTS, KUBE_POSTROUTING, KUBE_SERVICES, SERVICE_CHAIN_PREFIXES,
};

use ferry_model::IpFamily;

use super::chains_in;
use super::cli::{IptablesCli, IptablesRunner};
use crate::cleanup::{not_installed, remove_chains, Cleanup, Scope};
use crate::leftovers::Leftover;
use crate::mode::IptablesBackend;
use crate::Error;

/// Chains of each table in an `iptables-save` output of several tables.
pub(crate) fn tables(save: &str) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut current = None;
    for line in save.lines() {
        declaration(line, &mut current, &mut out);
    }
    out
}

/// One line of `iptables-save`'s output: a table (`*nat`) becomes `current`, a chain
/// declaration of `current` is added to `out`; anything else is ignored.
pub(crate) fn declaration(
    line: &str,
    current: &mut Option<String>,
    out: &mut BTreeMap<String, Vec<String>>,
) {
    if let Some(t) = line.strip_prefix('*') {
        *current = Some(t.to_owned());
        out.entry(t.to_owned()).or_default();
    } else if let (Some(t), Some(chain)) = (&*current, chains_in(line).next()) {
        out.entry(t.clone()).or_default().push(chain.to_owned());
    }
}

/// Whether iptables mode (Ferry's or kube-proxy's) ran here, in the tables `existing` lists:
/// its canary, or a chain only it writes (`KUBE-SVC-…`, `KUBE-NODEPORTS`, …).
pub(crate) fn iptables_mode_ran(existing: &BTreeMap<String, Vec<String>>) -> bool {
    let only_iptables = |t: Table, c: &str| {
        c == CANARY
            || match t {
                Table::Nat => {
                    c == KUBE_NODEPORTS || SERVICE_CHAIN_PREFIXES.iter().any(|p| c.starts_with(p))
                }
                Table::Filter => c == KUBE_EXTERNAL_SERVICES || c == KUBE_SERVICES,
                Table::Mangle => false,
            }
    };
    [Table::Nat, Table::Filter, Table::Mangle]
        .into_iter()
        .any(|t| {
            existing
                .get(t.as_str())
                .is_some_and(|cs| cs.iter().any(|c| only_iptables(t, c)))
        })
}

/// The chains both iptables and IPVS modes write (same names, as upstream's): removed by a
/// mode's cleanup only where the other mode did not run.
pub(crate) fn shared(table: Table, chain: &str) -> bool {
    let ipvs = match table {
        Table::Nat => ferry_compile::ipvs::chains::NAT_CHAINS.as_slice(),
        Table::Filter => ferry_compile::ipvs::chains::FILTER_CHAINS.as_slice(),
        Table::Mangle => &[],
    };
    ours(table, chain) && ipvs.contains(&chain)
}

fn ours(table: Table, chain: &str) -> bool {
    chain == CANARY
        || match table {
            Table::Filter => BASE_CHAINS_FILTER.contains(&chain),
            Table::Nat => {
                BASE_CHAINS_NAT.contains(&chain)
                    || SERVICE_CHAIN_PREFIXES.iter().any(|p| chain.starts_with(p))
            }
            Table::Mangle => false,
        }
}

/// Whether Ferry wrote the `KUBE-*` layout here last: its owner marker is in nat
/// `KUBE-POSTROUTING` (which kube-proxy rewrites whole at every sync, iptables or IPVS mode).
pub(crate) fn ferry_wrote(runner: &mut impl IptablesRunner) -> Result<bool, Error> {
    let mut args = vec!["-t", Table::Nat.as_str(), "-C", KUBE_POSTROUTING];
    args.extend(owner_marker_args());
    runner.check(&args)
}

/// The phrase for layout chains left because they are kube-proxy's.
pub(crate) fn left_phrase(tool: &str, layout: &str, chains: usize) -> String {
    format!(
        "{tool}: {chains} KUBE-* chain{} of kube-proxy's {layout} layout (no Ferry marker in nat \
         {KUBE_POSTROUTING}: kube-proxy wrote them last); `ferry cleanup --also-kube-proxy` \
         removes them",
        if chains == 1 { "" } else { "s" }
    )
}

/// Removes the iptables layout's chains through one runner (whose tools `tool` names,
/// `iptables-nft`): the jumps from built-in chains and every chain in one restore; with
/// `dry_run`, only finds them. Only Ferry's ([`ferry_wrote`]) unless `scope` says kube-proxy's
/// too; kube-proxy's are otherwise named in [`Cleanup::left`]. Tables that do not exist are
/// not created.
pub fn cleanup_with(
    runner: &mut impl IptablesRunner,
    tool: &str,
    scope: Scope,
) -> Result<Cleanup, Error> {
    let existing = runner.saved_chains()?;
    if !iptables_mode_ran(&existing) {
        return Ok(Cleanup::default());
    }
    let keep_shared = crate::ipvs::ipvs_mode_ran(&existing);
    let chains_of = |t: Table| -> Vec<String> {
        existing
            .get(t.as_str())
            .map(|cs| {
                cs.iter()
                    .filter(|c| ours(t, c) && !(keep_shared && shared(t, c)))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut out = Cleanup::default();
    let whose = if ferry_wrote(runner)? {
        "Ferry's"
    } else if scope.kube_proxy {
        "kube-proxy's"
    } else {
        let count = [Table::Filter, Table::Nat, Table::Mangle]
            .into_iter()
            .map(|t| chains_of(t).len())
            .sum();
        out.left.push(left_phrase(tool, "iptables", count));
        return Ok(out);
    };
    out.objects = remove_chains(runner, tool, whose, &chains_of, scope.dry_run)?;
    Ok(out)
}

/// The tools of both backends, both families, with their names (`ip6tables-legacy`).
fn every_cli() -> impl Iterator<Item = (IptablesCli, String)> {
    [IpFamily::V4, IpFamily::V6].into_iter().flat_map(|family| {
        IptablesBackend::ALL.into_iter().map(move |backend| {
            (
                IptablesCli::for_family(backend, family),
                backend.program_for(family, ""),
            )
        })
    })
}

/// Removes the iptables layout's iptables and ip6tables chains and jumps from both backends
/// in the current network namespace (or, dry, names them): Ferry's, and kube-proxy's when
/// `scope` says so. A tool that is not installed is skipped.
pub fn cleanup(scope: Scope) -> Result<Cleanup, Error> {
    let mut out = Cleanup::default();
    for (mut cli, tool) in every_cli() {
        match cleanup_with(&mut cli, &tool, scope) {
            Err(e) if not_installed(&e) => out.skipped.push(format!("{tool} is not installed")),
            other => out.extend(other?),
        }
    }
    Ok(out)
}

/// kube-proxy's iptables-mode chains in either backend. They have the names of iptables mode's
/// own chains.
pub fn leftovers() -> Vec<Leftover> {
    every_cli()
        .filter_map(|(mut cli, tool)| {
            // Only where iptables mode ran: kube-proxy's IPVS mode's chains (same names) are
            // IPVS mode's leftovers.
            let found = iptables_mode_ran(&cli.saved_chains().ok()?);
            found.then(|| Leftover {
                what: format!(
                    "{tool} nat chain {KUBE_SERVICES} and the KUBE-* chains of kube-proxy's \
                     iptables layout"
                ),
                shared: true,
                remove: None,
            })
        })
        .collect()
}
