//! `ServiceCidr`: one `networking.k8s.io/v1` ServiceCIDR, a range the API server allocates
//! ClusterIPs from (KEP-1880, GA in Kubernetes 1.33).
//!
//! kube-proxy's nftables mode drops new connections to an address inside a service CIDR that
//! no Service holds, instead of letting them be routed off the node (upstream's
//! `cluster-ips-check` chain); the other modes do nothing with them.

use std::collections::BTreeMap;

use ipnet::IpNet;

use crate::IpFamily;

/// A ServiceCIDR object: its name and `spec.cidrs` (one, or one of each family).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ServiceCidr {
    /// `metadata.name` (ServiceCIDRs are cluster-scoped; the API server's default one is
    /// `kubernetes`, made from `--service-cluster-ip-range`).
    pub name: String,
    /// `spec.cidrs`, as given (network addresses, at most one per family).
    pub cidrs: Vec<IpNet>,
}

impl ServiceCidr {
    /// The CIDR of `family`, if the object has one.
    pub fn cidr(&self, family: IpFamily) -> Option<IpNet> {
        self.cidrs
            .iter()
            .copied()
            .find(|n| IpFamily::of(&n.addr()) == family)
    }
}

/// The service CIDRs of `family` among `objects`, sorted, each with the names of the
/// ServiceCIDRs that list it (two objects may list the same range while one replaces the
/// other).
pub fn of_family<'a>(
    objects: impl IntoIterator<Item = &'a ServiceCidr>,
    family: IpFamily,
) -> BTreeMap<IpNet, Vec<String>> {
    let mut by_cidr: BTreeMap<IpNet, Vec<String>> = BTreeMap::new();
    for object in objects {
        if let Some(cidr) = object.cidr(family) {
            by_cidr.entry(cidr).or_default().push(object.name.clone());
        }
    }
    by_cidr
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mk(name: &str, cidrs: &[&str]) -> ServiceCidr {
        ServiceCidr {
            name: name.into(),
            cidrs: cidrs.iter().map(|c| c.parse().expect("cidr")).collect(),
        }
    }

    #[test]
    fn each_family_gets_its_own_cidrs_with_the_objects_listing_them() {
        let objects = [
            mk("kubernetes", &["172.30.0.0/16", "fd00:30::/112"]),
            mk("extra", &["172.31.0.0/24"]),
            mk("replacement", &["172.30.0.0/16"]),
        ];
        let v4 = of_family(&objects, IpFamily::V4);
        let want: Vec<(IpNet, Vec<String>)> = vec![
            (
                "172.30.0.0/16".parse().expect("cidr"),
                vec!["kubernetes".into(), "replacement".into()],
            ),
            ("172.31.0.0/24".parse().expect("cidr"), vec!["extra".into()]),
        ];
        assert_eq!(v4.into_iter().collect::<Vec<_>>(), want);
        let v6 = of_family(&objects, IpFamily::V6);
        assert_eq!(
            v6.keys().map(ToString::to_string).collect::<Vec<_>>(),
            ["fd00:30::/112"]
        );
    }
}
