//! The node-level parts of IPVS mode: the sysctls and connection timeouts upstream sets (each
//! change logged), the `kube-ipvs0` dummy link with its addresses, and the node's own
//! addresses (where NodePorts get virtual servers).

use std::net::IpAddr;
use std::time::Duration;

use ferry_compile::ipvs::DUMMY_DEVICE;

use crate::ipvs_kernel::IpvsClient;
use crate::ipvs_kernel::Links;
use crate::ipvs_kernel::{sysctl, IpvsError};
use crate::mode::IpvsOptions;

/// Sets upstream's sysctls (and strictARP's, when asked) and the connection timeouts that are
/// configured; logs every value it changes. Loads IPVS first (its sysctls exist only then).
pub fn prepare(options: &IpvsOptions) -> Result<(), IpvsError> {
    let mut client = IpvsClient::open()?;
    let mut list = sysctl::SYSCTLS.to_vec();
    if options.strict_arp {
        list.extend(sysctl::STRICT_ARP);
    }
    for (path, old, new) in sysctl::ensure(&list).map_err(IpvsError::Sysctl)? {
        tracing::info!(sysctl = %path, %old, %new, "set sysctl for IPVS mode");
    }
    let want = [
        options.tcp_timeout,
        options.tcp_fin_timeout,
        options.udp_timeout,
    ];
    if want.iter().all(Duration::is_zero) {
        return Ok(());
    }
    let have = client.timeouts()?;
    let secs = |d: Duration, old: u32| match d.as_secs() {
        0 => old,
        s => u32::try_from(s).unwrap_or(u32::MAX),
    };
    let new = (
        secs(want[0], have.0),
        secs(want[1], have.1),
        secs(want[2], have.2),
    );
    if new != have {
        client.set_timeouts(new.0, new.1, new.2)?;
        tracing::info!(
            tcp = new.0,
            tcp_fin = new.1,
            udp = new.2,
            "set IPVS connection timeouts (seconds; were {} {} {})",
            have.0,
            have.1,
            have.2
        );
    }
    Ok(())
}

fn link_err(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> IpvsError {
    let what = what.into();
    move |error| IpvsError::Link { what, error }
}

/// Every address of the node's interfaces but kube-ipvs0's, every family.
pub fn local_addresses() -> Result<Vec<IpAddr>, IpvsError> {
    let mut links = Links::open().map_err(link_err("open rtnetlink"))?;
    let dummy = links
        .index_of(DUMMY_DEVICE)
        .map_err(link_err("look up kube-ipvs0"))?;
    links
        .addresses_except(dummy)
        .map_err(link_err("list the node's addresses"))
}

/// kube-ipvs0, created when missing (a dummy link, left down: it only makes the kernel take
/// its addresses as local).
pub struct Dummy {
    links: Links,
    index: u32,
}

impl Dummy {
    /// Opens kube-ipvs0, creating it when missing.
    pub fn ensure() -> Result<Self, IpvsError> {
        let mut links = Links::open().map_err(link_err("open rtnetlink"))?;
        let (index, created) = links
            .ensure_dummy(DUMMY_DEVICE)
            .map_err(link_err("create kube-ipvs0"))?;
        if created {
            tracing::info!("created {DUMMY_DEVICE}");
        }
        Ok(Self { links, index })
    }

    /// Its addresses (every family).
    pub fn addresses(&mut self) -> Result<Vec<IpAddr>, IpvsError> {
        self.links
            .addresses(self.index)
            .map_err(link_err("list kube-ipvs0's addresses"))
    }

    /// Adds each address as /32 (/128); returns how many.
    pub fn add<'a>(&mut self, ips: impl Iterator<Item = &'a IpAddr>) -> Result<usize, IpvsError> {
        let mut n = 0;
        for ip in ips {
            self.links
                .add_address(self.index, *ip)
                .map_err(link_err(format!("add {ip} to {DUMMY_DEVICE}")))?;
            n += 1;
        }
        Ok(n)
    }

    /// Removes each address; returns how many.
    pub fn delete<'a>(
        &mut self,
        ips: impl Iterator<Item = &'a IpAddr>,
    ) -> Result<usize, IpvsError> {
        let mut n = 0;
        for ip in ips {
            self.links
                .delete_address(self.index, *ip)
                .map_err(link_err(format!("remove {ip} from {DUMMY_DEVICE}")))?;
            n += 1;
        }
        Ok(n)
    }
}
