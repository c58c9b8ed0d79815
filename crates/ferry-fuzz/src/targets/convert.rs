//! k8s-openapi objects → ferry-model objects: the input is JSON, deserialized as each kind
//! Ferry reads (Service, EndpointSlice, Endpoints, Node, Pod) and converted when it fits.

use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::discovery::v1 as discovery;
use serde_json::Value;

use ferry_source::convert;

use super::{shape, signature};

/// Converts `input` as every kind it deserializes as.
pub fn run(input: &[u8]) -> u64 {
    let Ok(value) = serde_json::from_slice::<Value>(input) else {
        return 0;
    };
    let outcome = |r: Result<usize, ferry_source::InvalidObject>| match r {
        Ok(n) => format!("ok {n}"),
        Err(e) => shape(&e.to_string()),
    };
    let mut sig = Vec::new();
    if let Ok(s) = serde_json::from_value::<core::Service>(value.clone()) {
        sig.push(outcome(
            convert::service(&s).map(|s| usize::from(s.is_some())),
        ));
    }
    if let Ok(s) = serde_json::from_value::<discovery::EndpointSlice>(value.clone()) {
        sig.push(outcome(
            convert::endpoint_slice(&s).map(|s| usize::from(s.is_some())),
        ));
    }
    if let Ok(e) = serde_json::from_value::<core::Endpoints>(value.clone()) {
        sig.push(outcome(convert::endpoints(&e).map(|s| s.len())));
    }
    if let Ok(n) = serde_json::from_value::<core::Node>(value.clone()) {
        sig.push(outcome(convert::node(&n).map(|_| 1)));
    }
    if let Ok(p) = serde_json::from_value::<core::Pod>(value) {
        sig.push(outcome(convert::pod(&p).map(|_| 1)));
    }
    signature(sig)
}
