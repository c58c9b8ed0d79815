//! The control plane and the kubelet stand-in on their own, without Ferry: Nodes registered
//! as a kubelet registers them, a Pod run and reported ready, and the real EndpointSlice
//! controller publishing it; a graceful delete leaves it terminating (no kubelet finishes it).
//!
//! Needs root (network namespaces) and the Kubernetes binaries (see `ferry_kube_lab::assets`);
//! without them it prints `skipped: <test>: <reason>` and passes. Building this test also makes
//! `cargo test --workspace` build the `ferry-lab-kubelet` binary the other crates' tests use.

use std::time::{Duration, Instant};

use ferry_kube_lab::{Assets, ControlPlane};
use ferry_lab::Lab;

fn wait_for(what: &str, cp: &ControlPlane, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + ferry_lab::scaled(Duration::from_secs(60));
    while !check() {
        assert!(Instant::now() < deadline, "never {what}\n{}", cp.logs());
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
#[ignore = "needs root: network namespaces"]
fn nodes_pods_and_endpoint_slices_as_a_cluster_has_them() {
    let test = "nodes_pods_and_endpoint_slices_as_a_cluster_has_them";
    let Some(assets) = Assets::for_test(test) else {
        return;
    };
    assert!(
        ferry_lab::running_as_root(),
        "run the ignored tests as root"
    );
    let mut lab = Lab::seed004().expect("the seed lab");
    let mut cp = ControlPlane::start(&mut lab, assets).expect("start the control plane");
    let kubelet = [env!("CARGO_BIN_EXE_ferry-lab-kubelet").to_owned()];
    // Any program serves as the Pod's process; a sleeping shell ignores --name and --listen.
    let echo = ["sh", "-c", "exec sleep 100000", "sh"].map(str::to_owned);
    cp.start_kubelets(&lab, &kubelet, &echo, &[("k8s-node2", "zone-b")])
        .unwrap_or_else(|e| panic!("{e}\n{}", cp.logs()));

    let node: serde_json::Value = serde_json::from_str(
        &cp.kubectl(&["get", "node", "k8s-node2", "-o", "json"])
            .expect("get node"),
    )
    .expect("json");
    let addresses = node["status"]["addresses"].to_string();
    assert!(
        addresses.contains("10.1.1.9") && addresses.contains("InternalIP"),
        "{addresses}"
    );
    assert_eq!(
        node["metadata"]["labels"]["topology.kubernetes.io/zone"], "zone-b",
        "{node}"
    );

    cp.ensure_namespace("dev").expect("namespace dev");
    cp.apply(
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\n  namespace: dev\nspec:\n  \
         selector:\n    app: web\n  ports:\n  - port: 80\n    targetPort: 8080\n---\n\
         apiVersion: v1\nkind: Pod\nmetadata:\n  name: web-0\n  namespace: dev\n  labels:\n    \
         app: web\nspec:\n  nodeName: k8s-node2\n  terminationGracePeriodSeconds: 600\n  \
         containers:\n  - name: web\n    image: registry.invalid/web\n    ports:\n    \
         - containerPort: 8080\n",
    )
    .expect("apply");
    let slice = || {
        cp.kubectl(&[
            "-n",
            "dev",
            "get",
            "endpointslices",
            "-l",
            "kubernetes.io/service-name=web",
            "-o",
            "jsonpath={.items[*].endpoints[*].addresses[0]} {.items[*].endpoints[*].conditions}",
        ])
        .unwrap_or_default()
    };
    wait_for("a ready endpoint in node2's pod CIDR", &cp, || {
        let s = slice();
        s.starts_with("192.168.169.") && s.contains(r#""ready":true"#)
    });
    let pod_ip = cp
        .kubectl(&[
            "-n",
            "dev",
            "get",
            "pod",
            "web-0",
            "-o",
            "jsonpath={.status.podIP}",
        ])
        .expect("pod ip");
    assert!(slice().starts_with(&pod_ip), "{} vs {pod_ip}", slice());

    cp.kubectl(&["-n", "dev", "delete", "pod", "web-0", "--wait=false"])
        .expect("graceful delete");
    wait_for("the endpoint terminating", &cp, || {
        let s = slice();
        s.contains(r#""terminating":true"#) && s.contains(r#""ready":false"#)
    });
}
