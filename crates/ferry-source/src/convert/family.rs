//! `spec.ipFamilies` / `spec.ipFamilyPolicy` of a Service, checked against its ClusterIPs.
//!
//! kube-proxy programs a Service in each family it has a ClusterIP of (`spec.clusterIPs`), so
//! these two fields add nothing to the rules; but in standalone mode nothing defaults or
//! allocates, so Ferry checks them as the API server would, and rejects a Service whose
//! ClusterIPs contradict them (a `RequireDualStack` Service with one ClusterIP would
//! otherwise silently be single-stack).

use std::net::IpAddr;

use ferry_model::{IpFamily, ObjectRef};
use k8s_openapi::api::core::v1 as k8s;

use super::non_empty;
use crate::InvalidObject;

/// `spec.ipFamilyPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Policy {
    Single,
    PreferDual,
    RequireDual,
}

/// Checks `spec.ipFamilyPolicy` and `spec.ipFamilies` against the Service's ClusterIPs
/// (already parsed, `spec.clusterIPs` order):
/// - the policy is one of `SingleStack`, `PreferDualStack`, `RequireDualStack` (unset: any);
/// - `ipFamilies` holds at most two different families, `IPv4` or `IPv6`;
/// - `ipFamilies[i]` is the family of `clusterIPs[i]`;
/// - `SingleStack` has one ClusterIP and at most one family; `RequireDualStack` two ClusterIPs
///   (nothing allocates the second one in standalone mode); `PreferDualStack` one or two.
pub(super) fn check(
    spec: &k8s::ServiceSpec,
    cluster_ips: &[IpAddr],
    object: &ObjectRef,
) -> Result<(), InvalidObject> {
    let policy = match non_empty(spec.ip_family_policy.as_deref()) {
        None => None,
        Some("SingleStack") => Some(Policy::Single),
        Some("PreferDualStack") => Some(Policy::PreferDual),
        Some("RequireDualStack") => Some(Policy::RequireDual),
        Some(other) => {
            return Err(InvalidObject::new(
                object,
                "spec.ipFamilyPolicy",
                format!(
                    "unsupported value {other:?} (want SingleStack, PreferDualStack or \
                     RequireDualStack)"
                ),
            ))
        }
    };
    let raw = spec.ip_families.as_deref().unwrap_or_default();
    if raw.len() > 2 {
        return Err(InvalidObject::new(
            object,
            "spec.ipFamilies",
            format!("must hold at most two families, got {}", raw.len()),
        ));
    }
    let mut families = Vec::with_capacity(raw.len());
    for (i, f) in raw.iter().enumerate() {
        let field = format!("spec.ipFamilies[{i}]");
        let family = match f.as_str() {
            "IPv4" => IpFamily::V4,
            "IPv6" => IpFamily::V6,
            other => {
                return Err(InvalidObject::new(
                    object,
                    field,
                    format!("unsupported value {other:?} (want IPv4 or IPv6)"),
                ))
            }
        };
        if families.contains(&family) {
            return Err(InvalidObject::new(
                object,
                field,
                format!("duplicate family {f:?}"),
            ));
        }
        families.push(family);
    }
    for (i, (family, ip)) in families.iter().zip(cluster_ips).enumerate() {
        if IpFamily::of(ip) != *family {
            return Err(InvalidObject::new(
                object,
                format!("spec.ipFamilies[{i}]"),
                format!(
                    "must be the family of spec.clusterIPs[{i}] ({ip}, {}), got {}",
                    IpFamily::as_str(IpFamily::of(ip)),
                    IpFamily::as_str(*family)
                ),
            ));
        }
    }
    match policy {
        Some(Policy::Single) if cluster_ips.len() > 1 || families.len() > 1 => {
            Err(InvalidObject::new(
                object,
                "spec.ipFamilyPolicy",
                "SingleStack allows one ClusterIP and one family; use PreferDualStack or \
                 RequireDualStack for two",
            ))
        }
        Some(Policy::RequireDual) if cluster_ips.len() < 2 => Err(InvalidObject::new(
            object,
            "spec.clusterIPs",
            "RequireDualStack needs one ClusterIP per family: in standalone mode nothing \
             allocates the second one",
        )),
        _ => Ok(()),
    }
}
