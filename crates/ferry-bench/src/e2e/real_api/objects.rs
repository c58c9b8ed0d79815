//! The objects the benchmark writes through the API: Services, Pods, and the status a kubelet
//! would report for them.

use std::net::Ipv4Addr;

use serde_json::{json, Value};

use crate::e2e::cluster::{Cluster, PORT, TARGET_PORT};

/// Service `i` as a user writes it: a selector, its ClusterIP, port 80 → 8080.
pub(super) fn service(cluster: &Cluster, i: usize) -> Value {
    let name = cluster.name(i);
    json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": { "name": name, "namespace": cluster.namespace() },
        "spec": {
            "clusterIP": cluster.cluster_ip(i).to_string(),
            "selector": { "app": name },
            "ports": [{ "name": "http", "protocol": "TCP", "port": PORT, "targetPort": TARGET_PORT }],
        },
    })
}

/// A Pod of Service `app` bound to `node`.
pub(super) fn pod(name: &str, app: &str, node: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": { "name": name, "labels": { "app": app } },
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 0,
            "containers": [{
                "name": "app",
                "image": "registry.invalid/bench:v1",
                "ports": [{ "name": "http", "containerPort": TARGET_PORT }],
            }],
        },
    })
}

/// The status a kubelet writes for a running Pod at `ip`, ready or not.
pub(super) fn pod_status(ip: Ipv4Addr, ready: bool) -> Value {
    let ready = if ready { "True" } else { "False" };
    json!({
        "status": {
            "phase": "Running",
            "podIP": ip.to_string(),
            "podIPs": [{ "ip": ip.to_string() }],
            "conditions": [
                { "type": "Ready", "status": ready },
                { "type": "ContainersReady", "status": ready },
            ],
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::e2e::cluster::Layout;

    #[test]
    fn a_service_selects_its_pods_and_keeps_its_cluster_ip() {
        let cluster = Cluster::new(3, 2, Layout::BENCH).expect("cluster");
        let s = service(&cluster, 2);
        let p = pod("svc-00002-0", "svc-00002", "node-1");
        assert_eq!(s["spec"]["selector"]["app"], p["metadata"]["labels"]["app"]);
        assert_eq!(s["spec"]["clusterIP"], cluster.cluster_ip(2).to_string());
        assert_eq!(p["spec"]["nodeName"], "node-1");
    }

    #[test]
    fn a_pods_status_is_what_a_kubelet_reports() {
        let st = pod_status(Ipv4Addr::new(10, 78, 0, 1), false);
        assert_eq!(st["status"]["podIP"], "10.78.0.1");
        assert_eq!(st["status"]["conditions"][0]["status"], "False");
        assert_eq!(
            pod_status(Ipv4Addr::new(10, 78, 0, 1), true)["status"]["conditions"][0]["status"],
            "True"
        );
    }
}
