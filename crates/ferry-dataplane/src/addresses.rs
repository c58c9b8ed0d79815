//! This node's addresses, read from its interfaces in the current network namespace: where
//! `ferry explain --live` learns the addresses NodePorts may answer on, and which sources are
//! the node itself (the kernel's `fib daddr type local` / `-m addrtype --dst-type LOCAL`).

use std::net::IpAddr;

use nix::ifaddrs::getifaddrs;

use crate::Error;

/// Every address on an interface of this network namespace (loopback included), sorted, each
/// once (`getifaddrs`, which asks the kernel over rtnetlink).
pub fn local_addresses() -> Result<Vec<IpAddr>, Error> {
    let mut out: Vec<IpAddr> = getifaddrs()
        .map_err(Error::Addresses)?
        .filter_map(|ifa| ifa.address)
        .filter_map(|sa| {
            sa.as_sockaddr_in()
                .map(|v4| IpAddr::V4(v4.ip()))
                .or_else(|| sa.as_sockaddr_in6().map(|v6| IpAddr::V6(v6.ip())))
        })
        .collect();
    out.sort();
    out.dedup();
    Ok(out)
}
