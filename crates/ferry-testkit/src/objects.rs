//! Kubernetes objects as the JSON `kubectl get -o json` shows, from a few parameters.
//!
//! Addresses follow the seed cluster: nodes 10.1.1.0/24, pods 192.168.0.0/16, services
//! 10.96.0.0/16. The server fills in `resourceVersion` and `uid`.

use serde_json::{json, Value};

/// A ClusterIP Service `namespace/name` with one TCP port `http` (`port` → `target_port`).
pub fn service(
    namespace: &str,
    name: &str,
    cluster_ip: &str,
    port: u16,
    target_port: u16,
) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": { "name": name, "namespace": namespace },
        "spec": {
            "type": "ClusterIP",
            "clusterIP": cluster_ip,
            "clusterIPs": [cluster_ip],
            "ipFamilies": ["IPv4"],
            "ipFamilyPolicy": "SingleStack",
            "internalTrafficPolicy": "Cluster",
            "sessionAffinity": "None",
            "selector": { "app": name },
            "ports": [{ "name": "http", "protocol": "TCP", "port": port, "targetPort": target_port }],
        },
        "status": { "loadBalancer": {} },
    })
}

/// Makes `service` a NodePort Service on `node_port` with `externalTrafficPolicy` `policy`.
pub fn with_node_port(mut service: Value, node_port: u16, policy: &str) -> Value {
    service["spec"]["type"] = json!("NodePort");
    service["spec"]["externalTrafficPolicy"] = json!(policy);
    if let Some(ports) = service["spec"]["ports"].as_array_mut() {
        for p in ports {
            p["nodePort"] = json!(node_port);
        }
    }
    service
}

/// An endpoint of a slice: `(address, ready, node name)`.
pub type EndpointSpec<'a> = (&'a str, bool, &'a str);

/// An IPv4 EndpointSlice `namespace/name` of Service `service`, port `http` `port`.
pub fn endpoint_slice(
    namespace: &str,
    name: &str,
    service: &str,
    port: u16,
    endpoints: &[EndpointSpec<'_>],
) -> Value {
    let endpoints: Vec<Value> = endpoints
        .iter()
        .map(|(address, ready, node)| {
            json!({
                "addresses": [address],
                "conditions": { "ready": ready, "serving": ready, "terminating": false },
                "nodeName": node,
            })
        })
        .collect();
    json!({
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {
                "kubernetes.io/service-name": service,
                "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io",
            },
        },
        "addressType": "IPv4",
        "ports": [{ "name": "http", "protocol": "TCP", "port": port }],
        "endpoints": endpoints,
    })
}

/// A Node with one `InternalIP` and one pod CIDR.
pub fn node(name: &str, internal_ip: &str, pod_cidr: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
            },
        },
        "spec": { "podCIDR": pod_cidr, "podCIDRs": [pod_cidr] },
        "status": {
            "addresses": [
                { "type": "InternalIP", "address": internal_ip },
                { "type": "Hostname", "address": name },
            ],
        },
    })
}

/// A ServiceCIDR (`networking.k8s.io/v1`, cluster-scoped) with `spec.cidrs`.
pub fn service_cidr(name: &str, cidrs: &[&str]) -> Value {
    json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "ServiceCIDR",
        "metadata": { "name": name },
        "spec": { "cidrs": cidrs },
    })
}
