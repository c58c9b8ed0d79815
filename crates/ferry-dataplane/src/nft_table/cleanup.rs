//! The cleanup of Ferry's tables (`ip ferry` and `ip6 ferry`), and the kube-proxy tables it
//! finds at start-up (`ip kube-proxy`, `ip6 kube-proxy`: kube-proxy's nftables mode).

use ferry_compile::nft::TABLE;
use ferry_model::IpFamily;

use super::cli::{NftCli, NftRunner};
use crate::cleanup::{not_installed, Cleanup, Scope};
use crate::leftovers::Leftover;
use crate::netlink::NetlinkSocket;
use crate::Error;

/// The families Ferry's table exists in.
const FAMILIES: [&str; 2] = ["ip", "ip6"];
/// kube-proxy's nftables mode's table.
const KUBE_PROXY_TABLE: &str = "kube-proxy";

/// The tables of this network namespace, as (family, name): one netlink table dump, or `nft
/// list tables` where no netlink socket opens. Not `nft` first: it reads every table whole
/// before it prints their names (3.7 s with Ferry's table at 10 000 × 10), and this runs at
/// every start-up.
fn tables() -> Result<Vec<(String, String)>, Error> {
    if let Some(tables) = NetlinkSocket::open().ok().and_then(|mut s| s.tables().ok()) {
        return Ok(tables);
    }
    Ok(parse_tables(&NftCli::default().list(&["list", "tables"])?))
}

fn parse_tables(listing: &str) -> Vec<(String, String)> {
    listing
        .lines()
        .filter_map(|l| l.trim().strip_prefix("table "))
        .filter_map(|t| t.split_once(' '))
        .map(|(family, name)| (family.to_owned(), name.trim().to_owned()))
        .collect()
}

/// Ferry's tables among `tables`.
fn ours(tables: &[(String, String)]) -> Vec<String> {
    tables
        .iter()
        .filter(|(family, name)| name == TABLE && FAMILIES.contains(&family.as_str()))
        .map(|(family, name)| format!("table {family} {name}"))
        .collect()
}

/// Removes Ferry's tables (both families) from the current network namespace, and with
/// `scope.kube_proxy` kube-proxy's nftables tables, or with `scope.dry_run` names them.
/// Without the `nft` tool there is nothing it can look at.
pub fn cleanup(scope: Scope) -> Result<Cleanup, Error> {
    with_kube_proxy(cleanup_unless_chain(None, scope.dry_run)?, scope)
}

/// `ours` (what a cleanup of Ferry's tables found) and kube-proxy's nftables tables: removed
/// (or, dry, named) with `scope.kube_proxy`, else named in [`Cleanup::left`].
pub(crate) fn with_kube_proxy(mut ours: Cleanup, scope: Scope) -> Result<Cleanup, Error> {
    if !ours.skipped.is_empty() {
        // nft is not installed: nothing to look at.
        return Ok(ours);
    }
    let theirs: Vec<String> = tables()?
        .into_iter()
        .filter(|(family, name)| name == KUBE_PROXY_TABLE && FAMILIES.contains(&family.as_str()))
        .map(|(family, name)| format!("table {family} {name}"))
        .collect();
    if theirs.is_empty() {
        return Ok(ours);
    }
    if !scope.kube_proxy {
        ours.left.push(format!(
            "kube-proxy's nftables mode's {}; `ferry cleanup --also-kube-proxy` removes them",
            theirs.join(", ")
        ));
        return Ok(ours);
    }
    if !scope.dry_run {
        let script: String = theirs.iter().map(|t| format!("delete {t}\n")).collect();
        NftCli::default().run(&script)?;
    }
    ours.objects
        .extend(theirs.iter().map(|t| format!("kube-proxy's {t}")));
    Ok(ours)
}

/// Ferry's tables that do not hold `keep_with`, read with one netlink chain dump per family
/// (a table without chains is taken as absent: Ferry's always has some). Not `nft list
/// tables` or `nft list chain`: `nft` reads the whole table (every rule, set and element)
/// for either, ~2-3 s at 10 000 services, and the other mode's cleanup runs in the agent
/// right after the first sync, so every change queued meanwhile waited for it. `None` when
/// there is no netlink socket.
fn ours_without_chain(keep_with: &str) -> Option<Vec<String>> {
    let mut sock = NetlinkSocket::open().ok()?;
    let mut objects = Vec::new();
    for (family, name) in [(IpFamily::V4, "ip"), (IpFamily::V6, "ip6")] {
        let chains = sock.chains(family).ok()?;
        if !chains.is_empty() && !chains.iter().any(|c| c == keep_with) {
            objects.push(format!("table {name} {TABLE}"));
        }
    }
    Some(objects)
}

/// Whether Ferry's table of `family` holds `chain`.
fn holds_chain(family: &str, chain: &str) -> bool {
    NftCli::default()
        .list(&["list", "chain", family, TABLE, chain])
        .is_ok()
}

/// [`cleanup`], leaving a table that holds `keep_with` (when given): the table of the other
/// mode that uses Ferry's table (nftables or userspace), which the cleanup of one mode at the
/// other's start-up must leave alone. `ferry cleanup` runs both, so both layouts go.
pub(crate) fn cleanup_unless_chain(
    keep_with: Option<&str>,
    dry_run: bool,
) -> Result<Cleanup, Error> {
    let netlink = keep_with.and_then(ours_without_chain);
    let tables = match netlink {
        Some(_) => Ok(Vec::new()),
        None => tables(),
    };
    let tables = match tables {
        Err(e) if not_installed(&e) => {
            return Ok(Cleanup {
                objects: Vec::new(),
                skipped: vec!["nft is not installed".to_owned()],
                left: Vec::new(),
            })
        }
        other => other?,
    };
    let mut objects = ours(&tables);
    if let Some(found) = netlink {
        objects = found;
    } else if let Some(chain) = keep_with {
        objects.retain(|t| {
            let family = t.split(' ').nth(1).unwrap_or_default();
            !holds_chain(family, chain)
        });
    }
    if !dry_run && !objects.is_empty() {
        let script: String = objects.iter().map(|t| format!("delete {t}\n")).collect();
        match NftCli::default().run(&script) {
            Err(e) if not_installed(&e) => {
                return Ok(Cleanup {
                    objects: Vec::new(),
                    skipped: vec!["nft is not installed".to_owned()],
                    left: Vec::new(),
                })
            }
            other => other?,
        };
    }
    Ok(Cleanup {
        objects,
        ..Cleanup::default()
    })
}

/// kube-proxy's nftables tables in this network namespace. Ferry never removes them: they are
/// kube-proxy's, and its cleanup (`kube-proxy --cleanup`) or `nft delete table` does.
pub fn leftovers() -> Vec<Leftover> {
    kube_proxy_tables(&tables().unwrap_or_default())
}

fn kube_proxy_tables(tables: &[(String, String)]) -> Vec<Leftover> {
    tables
        .iter()
        .filter(|(_, name)| name == KUBE_PROXY_TABLE)
        .map(|(family, name)| Leftover {
            what: format!("table {family} {name} (kube-proxy's nftables mode)"),
            shared: false,
            remove: Some(format!("nft delete table {family} {name}")),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const LISTING: &str =
        "table ip ferry\ntable ip6 ferry\ntable ip kube-proxy\ntable inet filter\ntable ip6 kube-proxy\n";

    #[test]
    fn finds_ferrys_tables_and_kube_proxys() {
        let tables = parse_tables(LISTING);
        assert_eq!(ours(&tables), ["table ip ferry", "table ip6 ferry"]);
        let left = kube_proxy_tables(&tables);
        assert_eq!(
            left.iter().map(|l| l.what.as_str()).collect::<Vec<_>>(),
            [
                "table ip kube-proxy (kube-proxy's nftables mode)",
                "table ip6 kube-proxy (kube-proxy's nftables mode)"
            ]
        );
        assert_eq!(
            left[1].remove.as_deref(),
            Some("nft delete table ip6 kube-proxy")
        );
        assert!(ours(&parse_tables("table inet ferry\n")).is_empty());
    }
}
