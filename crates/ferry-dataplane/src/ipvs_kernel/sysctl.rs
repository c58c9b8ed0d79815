//! The sysctls upstream's IPVS proxier sets in the node's network namespace.

use std::path::Path;

/// `(path under /proc/sys, value, why)`: upstream's list (`NewProxier`). `conn_reuse_mode` is
/// left as it is, as upstream does on kernels from 5.9 on (the bug it worked around is fixed).
pub const SYSCTLS: [(&str, &str, &str); 4] = [
    (
        "net/ipv4/vs/conntrack",
        "1",
        "IPVS connections keep conntrack entries, so iptables' masquerade applies",
    ),
    (
        "net/ipv4/vs/expire_nodest_conn",
        "1",
        "connections to a deleted real server are dropped at their next packet",
    ),
    (
        "net/ipv4/vs/expire_quiescent_template",
        "1",
        "persistence templates of a real server at weight 0 expire",
    ),
    (
        "net/ipv4/ip_forward",
        "1",
        "forwarding to real servers on other nodes",
    ),
];

/// With `ipvs.strictARP`: answer ARP only for addresses of the interface asked (kube-ipvs0's
/// addresses are not announced on the node's network).
pub const STRICT_ARP: [(&str, &str, &str); 2] = [
    ("net/ipv4/conf/all/arp_ignore", "1", "strictARP"),
    ("net/ipv4/conf/all/arp_announce", "2", "strictARP"),
];

/// Sets each sysctl whose value differs; returns the ones changed (path, old, new).
pub fn ensure(list: &[(&str, &str, &str)]) -> std::io::Result<Vec<(String, String, String)>> {
    let mut changed = Vec::new();
    for (path, value, _) in list {
        let file = Path::new("/proc/sys").join(path);
        let old = std::fs::read_to_string(&file)?.trim().to_owned();
        if old != *value {
            std::fs::write(&file, value)?;
            changed.push(((*path).to_owned(), old, (*value).to_owned()));
        }
    }
    Ok(changed)
}
