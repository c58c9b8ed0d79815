//! Session affinity (`sessionAffinity: ClientIP`) in upstream's iptables layout: `recent` lists
//! named after the endpoint chains.

use std::fmt::Write as _;
use std::net::SocketAddr;

use ferry_model::ServicePortName;

use super::names::endpoint_chain;
use crate::plan::ServicePlan;

/// Before the random choice, one rule per endpoint sends a client seen by that endpoint's
/// `recent` list within `timeout` seconds back to it (`--reap` drops older entries).
pub(super) fn checks(
    name: &ServicePortName,
    endpoints: &[SocketAddr],
    timeout: u32,
    large: bool,
) -> Vec<String> {
    endpoints
        .iter()
        .map(|ep| {
            let sep = endpoint_chain(name, ep);
            let mut rule = String::new();
            if !large {
                let _ = write!(rule, "-m comment --comment \"{name} -> {ep}\" ");
            }
            let _ = write!(
                rule,
                "-m recent --name {sep} --rcheck --seconds {timeout} --reap -j {sep}"
            );
            rule
        })
        .collect()
}

/// The match the DNAT rule of endpoint chain `chain` carries with session affinity: it records
/// the client in the chain's list (empty without affinity).
pub(super) fn record(sp: &ServicePlan, chain: &str) -> String {
    if sp.affinity.is_some() {
        format!("-m recent --name {chain} --set ")
    } else {
        String::new()
    }
}
