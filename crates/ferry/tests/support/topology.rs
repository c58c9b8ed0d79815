//! Manifests for the endpoint-selection lab tests (`lab_topology.rs`): a Service and its
//! EndpointSlice with conditions, zones and hints, written as one file.

use crate::seed::ZONES;

/// One endpoint of a test slice.
#[derive(Clone, Copy)]
pub struct Ep {
    ip: &'static str,
    node: &'static str,
    /// `ready`, `serving`, `terminating`.
    conditions: (bool, bool, bool),
    zones: &'static [&'static str],
    nodes: &'static [&'static str],
}

pub const fn ep(pod: (&'static str, &'static str), node: &'static str) -> Ep {
    Ep {
        ip: pod.1,
        node,
        conditions: (true, true, false),
        zones: &[],
        nodes: &[],
    }
}

impl Ep {
    pub const fn zones(mut self, zones: &'static [&'static str]) -> Ep {
        self.zones = zones;
        self
    }
    pub const fn nodes(mut self, nodes: &'static [&'static str]) -> Ep {
        self.nodes = nodes;
        self
    }
    /// A pod that has started but is not ready yet.
    pub const fn starting(mut self) -> Ep {
        self.conditions = (false, false, false);
        self
    }
    /// A pod being deleted that still serves (its preStop hook / grace period).
    pub const fn terminating(mut self) -> Ep {
        self.conditions = (false, true, true);
        self
    }
}

fn names(list: &[&str]) -> String {
    let entries: Vec<String> = list.iter().map(|n| format!("{{name: {n}}}")).collect();
    format!("[{}]", entries.join(", "))
}

/// A Service `dev/<name>` (port 8080 → 56010, `spec_extra` added to its spec) and its
/// EndpointSlice, as one manifest file: one atomic change. With `node_port` it is a NodePort
/// Service.
pub fn service(
    name: &str,
    cluster_ip: &str,
    spec_extra: &str,
    node_port: Option<u16>,
    eps: &[Ep],
) -> String {
    let mut endpoints = String::new();
    for e in eps {
        let (ready, serving, terminating) = e.conditions;
        let zone = ZONES
            .iter()
            .find(|(n, _)| *n == e.node)
            .map(|(_, z)| *z)
            .expect("lab node");
        endpoints.push_str(&format!(
            "- addresses: [\"{}\"]\n  nodeName: {}\n  zone: {zone}\n  conditions: {{ready: {ready}, serving: {serving}, terminating: {terminating}}}\n",
            e.ip, e.node
        ));
        if !e.zones.is_empty() || !e.nodes.is_empty() {
            endpoints.push_str("  hints:\n");
            if !e.zones.is_empty() {
                endpoints.push_str(&format!("    forZones: {}\n", names(e.zones)));
            }
            if !e.nodes.is_empty() {
                endpoints.push_str(&format!("    forNodes: {}\n", names(e.nodes)));
            }
        }
    }
    let (spec_type, node_port) = match node_port {
        Some(p) => (
            "  type: NodePort\n".to_owned(),
            format!("    nodePort: {p}\n"),
        ),
        None => (String::new(), String::new()),
    };
    format!(
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: {name}\n  namespace: dev\nspec:\n  clusterIP: {cluster_ip}\n{spec_type}{spec_extra}  ports:\n  - name: http\n    port: 8080\n    targetPort: 56010\n{node_port}---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: {name}-abcde\n  namespace: dev\n  labels:\n    kubernetes.io/service-name: {name}\naddressType: IPv4\nports:\n- name: http\n  port: 56010\n  protocol: TCP\nendpoints:\n{endpoints}"
    )
}
