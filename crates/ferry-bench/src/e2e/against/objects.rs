//! The objects `--against kube-proxy` writes: Services without selectors and their
//! EndpointSlices, written by the benchmark itself (labelled as its own with
//! `endpointslice.kubernetes.io/managed-by`, so the EndpointSlice controller leaves them
//! alone), each endpoint change one slice write, the API event both proxies see.

use std::net::Ipv4Addr;

use serde_json::{json, Value};

use crate::e2e::cluster::{Cluster, PORT, TARGET_PORT};

/// The `managed-by` value of the benchmark's slices.
pub const MANAGED_BY: &str = "ferry-bench-e2e.ferry.dev";

/// Service `i` without a selector: its ClusterIP, port 80 → 8080.
pub fn service(cluster: &Cluster, i: usize) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": { "name": cluster.name(i), "namespace": cluster.namespace() },
        "spec": {
            "clusterIP": cluster.cluster_ip(i).to_string(),
            "ports": [{ "name": "http", "protocol": "TCP", "port": PORT, "targetPort": TARGET_PORT }],
        },
    })
}

/// The name of Service `i`'s slice.
pub fn slice_name(cluster: &Cluster, i: usize) -> String {
    format!("{}-bench", cluster.name(i))
}

/// Service `i`'s slice: its current endpoints (ready), then its spare (`address`, ready or
/// not) if it has one; `trigger` is the `endpoints.kubernetes.io/last-change-trigger-time`
/// annotation (RFC 3339), from which both proxies compute their network programming latency.
pub fn slice(
    cluster: &Cluster,
    i: usize,
    spare: Option<(Ipv4Addr, bool)>,
    trigger: Option<&str>,
) -> Value {
    let mut endpoints: Vec<Value> = cluster
        .endpoints_of(i)
        .iter()
        .enumerate()
        .map(|(j, a)| endpoint(*a, true, &cluster.node_of(i, j)))
        .collect();
    if let Some((address, ready)) = spare {
        endpoints.push(endpoint(address, ready, &cluster.node_of(i, 0)));
    }
    let mut metadata = json!({
        "name": slice_name(cluster, i),
        "namespace": cluster.namespace(),
        "labels": {
            "kubernetes.io/service-name": cluster.name(i),
            "endpointslice.kubernetes.io/managed-by": MANAGED_BY,
        },
    });
    if let Some(t) = trigger {
        metadata["annotations"] = json!({ "endpoints.kubernetes.io/last-change-trigger-time": t });
    }
    json!({
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": metadata,
        "addressType": "IPv4",
        "ports": [{ "name": "http", "protocol": "TCP", "port": TARGET_PORT }],
        "endpoints": endpoints,
    })
}

fn endpoint(address: Ipv4Addr, ready: bool, node: &str) -> Value {
    json!({
        "addresses": [address.to_string()],
        "conditions": { "ready": ready, "serving": ready, "terminating": false },
        "nodeName": node,
    })
}

/// Now as RFC 3339 with nanoseconds, UTC (what kube-proxy parses the annotation with).
pub fn now_rfc3339() -> String {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    rfc3339(d.as_secs(), d.subsec_nanos())
}

/// `secs` since the epoch (UTC) and `nanos`, as `YYYY-MM-DDTHH:MM:SS.NNNNNNNNNZ`.
pub fn rfc3339(secs: u64, nanos: u32) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Howard Hinnant's days-to-civil.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{nanos:09}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::e2e::cluster::Layout;

    #[test]
    fn a_service_has_no_selector_and_its_slice_is_the_benchs_own() {
        let cluster = Cluster::new(3, 2, Layout::BENCH).expect("cluster");
        let s = service(&cluster, 1);
        assert!(s["spec"].get("selector").is_none());
        let spare = Ipv4Addr::new(10, 78, 0, 1);
        let sl = slice(&cluster, 1, Some((spare, false)), Some("t"));
        let labels = &sl["metadata"]["labels"];
        assert_eq!(labels["kubernetes.io/service-name"], cluster.name(1));
        assert_eq!(labels["endpointslice.kubernetes.io/managed-by"], MANAGED_BY);
        let eps = sl["endpoints"].as_array().expect("endpoints");
        assert_eq!(eps.len(), 3);
        assert_eq!(eps[2]["addresses"][0], "10.78.0.1");
        assert_eq!(eps[2]["conditions"]["ready"], false);
        assert_eq!(
            sl["metadata"]["annotations"]["endpoints.kubernetes.io/last-change-trigger-time"],
            "t"
        );
        assert!(slice(&cluster, 0, None, None)["metadata"]
            .get("annotations")
            .is_none());
    }

    #[test]
    fn times_are_written_as_rfc3339_with_nanoseconds() {
        assert_eq!(rfc3339(0, 0), "1970-01-01T00:00:00.000000000Z");
        // 2026-12-05T16:27:00Z
        assert_eq!(rfc3339(1_796_488_020, 5), "2026-12-05T16:27:00.000000005Z");
        assert_eq!(rfc3339(951_782_400, 0), "2000-02-29T00:00:00.000000000Z");
    }
}
