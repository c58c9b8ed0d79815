//! External and load-balancer IPs a service port claims but another Service serves (see
//! [`ClusterState::frontend_holder`]): left out of the view's addresses, and kept beside them
//! so that logs and explanations can say who serves them instead.

use std::net::IpAddr;

use crate::{ClusterState, IpFamily, Service, ServiceName, ServicePort};

use super::of_family;

/// An external or load-balancer IP a service port claims but another Service serves: one
/// destination leads to one Service (see [`ClusterState::frontend_holder`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unserved {
    /// The address.
    pub ip: IpAddr,
    /// A load-balancer IP (else an external IP).
    pub load_balancer: bool,
    /// The Service that serves it.
    pub holder: ServiceName,
    /// It is `holder`'s ClusterIP (else `holder` claims it too and comes first by name).
    pub holder_cluster_ip: bool,
}

impl Unserved {
    /// "external IP 192.0.2.1" or "load-balancer IP …".
    pub fn what(&self) -> String {
        let kind = if self.load_balancer {
            "load-balancer"
        } else {
            "external"
        };
        format!("{kind} IP {}", self.ip)
    }

    /// Why `holder` serves it, for a log line or an explanation.
    pub fn why(&self) -> String {
        if self.holder_cluster_ip {
            format!(
                "it is Service {}'s ClusterIP, which keeps its destination",
                self.holder
            )
        } else {
            format!(
                "Service {} claims it too and serves it (the first by name)",
                self.holder
            )
        }
    }
}

/// The addresses of `ips` (load-balancer IPs when `load_balancer`) of `family` that `svc`
/// serves with `port`; those another Service serves go to `unserved` (see
/// [`ClusterState::frontend_holder`]).
pub(super) fn served(
    state: &ClusterState,
    svc: &Service,
    port: &ServicePort,
    (ips, load_balancer): (&[IpAddr], bool),
    family: IpFamily,
    unserved: &mut Vec<Unserved>,
) -> Vec<IpAddr> {
    let mut ips = of_family(ips, family);
    ips.retain(
        |ip| match state.frontend_holder(&svc.name, *ip, port.protocol, port.port) {
            None => true,
            Some((holder, holder_cluster_ip)) => {
                unserved.push(Unserved {
                    ip: *ip,
                    load_balancer,
                    holder: holder.clone(),
                    holder_cluster_ip,
                });
                false
            }
        },
    );
    ips
}
