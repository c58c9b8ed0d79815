//! `networking.k8s.io/v1 ServiceCIDR` → [`ferry_model::ServiceCidr`].

use ferry_model::{IpFamily, ObjectRef, ServiceCidr};
use k8s_openapi::api::networking::v1 as k8s;

use super::{cidr, non_empty, UNNAMED};
use crate::InvalidObject;

/// Converts a ServiceCIDR, checking `spec.cidrs` as the API server does
/// (`validateServiceCIDRSpec`): one or two CIDRs, the two of different families. A CIDR with
/// host bits set (`10.96.0.1/12`) is rejected too: the API server only takes ranges written
/// as their network address, and a range Ferry would read otherwise than it is written should
/// not silently drop traffic.
pub fn service_cidr(object: &k8s::ServiceCIDR) -> Result<ServiceCidr, InvalidObject> {
    let Some(name) = non_empty(object.metadata.name.as_deref()) else {
        let object = ObjectRef::new("ServiceCIDR", "", UNNAMED);
        return Err(InvalidObject::new(&object, "metadata.name", "must be set"));
    };
    let object_ref = ObjectRef::new("ServiceCIDR", "", name);
    let written = object
        .spec
        .as_ref()
        .and_then(|s| s.cidrs.as_deref())
        .unwrap_or_default();
    if written.is_empty() {
        return Err(InvalidObject::new(
            &object_ref,
            "spec.cidrs",
            "at least one CIDR required",
        ));
    }
    if written.len() > 2 {
        return Err(InvalidObject::new(
            &object_ref,
            "spec.cidrs",
            format!(
                "may only hold up to 2 values (one of each IP family), got {}",
                written.len()
            ),
        ));
    }
    let mut cidrs = Vec::with_capacity(written.len());
    for (i, value) in written.iter().enumerate() {
        let field = format!("spec.cidrs[{i}]");
        let net = cidr(value, &object_ref, &field)?;
        if net.to_string() != value.trim() {
            return Err(InvalidObject::new(
                &object_ref,
                field,
                format!("must be a network address (host bits unset, e.g. {net}), got {value:?}"),
            ));
        }
        if cidrs
            .iter()
            .any(|c: &ipnet::IpNet| IpFamily::of(&c.addr()) == IpFamily::of(&net.addr()))
        {
            return Err(InvalidObject::new(
                &object_ref,
                field,
                format!(
                    "may specify no more than one CIDR for each IP family (e.g. 10.96.0.0/12 \
                     and 2001:db8::/108), got a second {} one: {value:?}",
                    IpFamily::of(&net.addr()).as_str()
                ),
            ));
        }
        cidrs.push(net);
    }
    Ok(ServiceCidr {
        name: name.to_owned(),
        cidrs,
    })
}
