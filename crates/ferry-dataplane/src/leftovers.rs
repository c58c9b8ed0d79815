//! kube-proxy's leftovers: what kube-proxy (or another proxy mode) left in this network
//! namespace, found at start-up so Ferry can say what it does about each. Every mode's line in
//! the mode table finds those of its own kind (kube-proxy's nftables table, its iptables
//! chains, its IPVS mode's kube-ipvs0, virtual servers, sets and chains).

/// Something kube-proxy left in this network namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leftover {
    /// What it is (`table ip kube-proxy (kube-proxy's nftables mode)`).
    pub what: String,
    /// The mode that found it programs objects of the same names (iptables mode's `KUBE-*`
    /// chains): running, that mode rewrites them at its first sync; its cleanup removes them.
    pub shared: bool,
    /// How to remove it by hand, when no mode's cleanup does.
    pub remove: Option<String>,
}
