//! Which of the two `KUBE-*` layouts ran here, and whose they are: iptables mode and IPVS mode
//! write chains of the same names (as upstream's do), so each mode's cleanup asks this before
//! it removes a shared chain. Knows both layouts' chain names (from `ferry-compile`), and
//! neither mode's code.
//!
//! A chain name of each layout tells it apart; Ferry's owner marker in nat `KUBE-POSTROUTING`
//! tells Ferry's chains from kube-proxy's.

use std::collections::BTreeMap;

use ferry_compile::iptables::{
    owner_marker_args, Table, BASE_CHAINS_FILTER, BASE_CHAINS_NAT, CANARY, KUBE_EXTERNAL_SERVICES,
    KUBE_NODEPORTS, KUBE_POSTROUTING, KUBE_SERVICES, SERVICE_CHAIN_PREFIXES,
};
use ferry_compile::ipvs::chains::{KUBE_IPVS_FILTER, KUBE_NODE_PORT};

use crate::iptables_tool::IptablesRunner;
use crate::Error;

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

pub(crate) fn ours(table: Table, chain: &str) -> bool {
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

/// Whether IPVS mode (Ferry's or kube-proxy's) ran here, in the tables `existing` lists: a
/// chain only it writes (nat `KUBE-NODE-PORT`, filter `KUBE-IPVS-FILTER`).
pub(crate) fn ipvs_mode_ran(existing: &BTreeMap<String, Vec<String>>) -> bool {
    let has = |table: Table, chain: &str| {
        existing
            .get(table.as_str())
            .is_some_and(|cs| cs.iter().any(|c| c == chain))
    };
    has(Table::Nat, KUBE_NODE_PORT) || has(Table::Filter, KUBE_IPVS_FILTER)
}
