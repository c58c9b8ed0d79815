//! The YAML manifest files, as `kubectl get -o yaml` writes the objects (trimmed of status
//! fields Ferry ignores): what a user of the manifests source has on disk.

use std::fmt::Write as _;

use super::{node_cidr, node_ip, Cluster, NODES, PORT, TARGET_PORT};

/// Service `i` and its EndpointSlice, two documents.
pub fn manifest(c: &Cluster, i: usize) -> String {
    let name = c.name(i);
    let ns = c.namespace();
    let ip = c.cluster_ip(i);
    let mut y = format!(
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: {name}\n  namespace: {ns}\n  \
         labels:\n    app: {name}\nspec:\n  type: ClusterIP\n  clusterIP: {ip}\n  clusterIPs:\n  \
         - {ip}\n  ipFamilies:\n  - IPv4\n  ipFamilyPolicy: SingleStack\n  \
         internalTrafficPolicy: Cluster\n  sessionAffinity: None\n  selector:\n    app: {name}\n  \
         ports:\n  - name: http\n    port: {PORT}\n    protocol: TCP\n    targetPort: {TARGET_PORT}\n\
         ---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: {name}-x7k2q\n  \
         namespace: {ns}\n  labels:\n    kubernetes.io/service-name: {name}\n    \
         endpointslice.kubernetes.io/managed-by: endpointslice-controller.k8s.io\n\
         addressType: IPv4\nports:\n- name: http\n  port: {TARGET_PORT}\n  protocol: TCP\nendpoints:\n"
    );
    for (j, address) in c.endpoints_of(i).iter().enumerate() {
        let _ = write!(
            y,
            "- addresses:\n  - {address}\n  conditions:\n    ready: true\n    serving: true\n    \
             terminating: false\n  nodeName: {}\n",
            c.node_of(i, j)
        );
    }
    y
}

/// The Node objects.
pub fn nodes() -> String {
    (0..NODES)
        .map(|n| {
            format!(
                "apiVersion: v1\nkind: Node\nmetadata:\n  name: node-{n}\nspec:\n  podCIDR: {}\n\
                 status:\n  addresses:\n  - type: InternalIP\n    address: {}\n",
                node_cidr(n),
                node_ip(n)
            )
        })
        .collect::<Vec<_>>()
        .join("---\n")
}
