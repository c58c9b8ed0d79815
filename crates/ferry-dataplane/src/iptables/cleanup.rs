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

use ferry_compile::iptables::{Table, KUBE_SERVICES};

use ferry_model::IpFamily;

use crate::cleanup::layouts::{
    ferry_wrote, iptables_mode_ran, ipvs_mode_ran, left_phrase, ours, shared,
};
use crate::cleanup::{not_installed, remove_chains, Cleanup, Scope};
use crate::iptables_tool::{IptablesBackend, IptablesCli, IptablesRunner};
use crate::leftovers::Leftover;
use crate::Error;

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
    let keep_shared = ipvs_mode_ran(&existing);
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
