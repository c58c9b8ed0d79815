//! kube-proxy's leftovers: what kube-proxy (or another proxy mode) left in this network
//! namespace, found at start-up so Ferry can say what it does about each. Every mode's line in
//! the mode table finds those of its own kind (kube-proxy's nftables table, its iptables
//! chains); [`ipvs`] finds what no Ferry mode programs yet (kube-proxy's IPVS mode).

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

/// kube-proxy's IPVS mode's `kube-ipvs0` dummy link (its virtual servers are in IPVS, which no
/// Ferry mode touches yet).
pub fn ipvs() -> Option<Leftover> {
    // An ioctl on a socket of this network namespace (sysfs may show another one's links).
    nix::net::if_::if_nametoindex("kube-ipvs0")
        .is_ok()
        .then(|| Leftover {
            what: "link kube-ipvs0 and IPVS virtual servers (kube-proxy's IPVS mode): IPVS \
                   sees packets before Ferry's rules"
                .to_owned(),
            shared: false,
            remove: Some(
                "kube-proxy --cleanup, or ipvsadm -C and ip link del kube-ipvs0".to_owned(),
            ),
        })
}
