//! `deploy/`: every manifest parses as its Kubernetes type, RBAC is read-only, the DaemonSet
//! is kube-proxy-like, and the ConfigMap's KubeProxyConfiguration loads with Ferry's own
//! config loader (through `ferry rules --config`).

use std::path::{Path, PathBuf};
use std::process::Command;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{ConfigMap, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use serde::de::DeserializeOwned;

const FERRY: &str = env!("CARGO_BIN_EXE_ferry");

fn deploy() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy")
}

/// Parses `deploy/<file>` as `T`; panics naming the file and the problem.
fn load<T: DeserializeOwned>(file: &str) -> T {
    let path = deploy().join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{file}: {e}"));
    let value: serde_json::Value =
        serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{file}: not YAML: {e}"));
    serde_json::from_value(value).unwrap_or_else(|e| panic!("{file}: {e}"))
}

#[test]
fn every_manifest_in_deploy_parses_as_its_kind() {
    let mut files: Vec<String> = std::fs::read_dir(deploy())
        .expect("deploy/")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".yaml"))
        .collect();
    files.sort();
    assert_eq!(
        files,
        [
            "clusterrole.yaml",
            "clusterrolebinding.yaml",
            "configmap.yaml",
            "daemonset.yaml",
            "serviceaccount.yaml"
        ],
        "a new manifest needs a check here"
    );
    let _: ClusterRole = load("clusterrole.yaml");
    let _: ClusterRoleBinding = load("clusterrolebinding.yaml");
    let _: ConfigMap = load("configmap.yaml");
    let _: DaemonSet = load("daemonset.yaml");
    let _: ServiceAccount = load("serviceaccount.yaml");
}

#[test]
fn rbac_is_read_only_on_what_ferry_watches_and_bound_to_the_pods_account() {
    let role: ClusterRole = load("clusterrole.yaml");
    let mut granted = Vec::new();
    for rule in role.rules.unwrap_or_default() {
        for verb in &rule.verbs {
            assert!(
                ["get", "list", "watch"].contains(&verb.as_str()),
                "verb {verb:?} is not read-only"
            );
        }
        for group in rule.api_groups.unwrap_or_default() {
            for resource in rule.resources.clone().unwrap_or_default() {
                granted.push(format!("{group}/{resource}"));
            }
        }
    }
    granted.sort();
    assert_eq!(
        granted,
        [
            "/nodes",
            "/services",
            "discovery.k8s.io/endpointslices",
            "networking.k8s.io/servicecidrs"
        ]
    );

    let binding: ClusterRoleBinding = load("clusterrolebinding.yaml");
    let account: ServiceAccount = load("serviceaccount.yaml");
    let ds: DaemonSet = load("daemonset.yaml");
    assert_eq!(binding.role_ref.kind, "ClusterRole");
    assert_eq!(Some(binding.role_ref.name), role.metadata.name);
    let subject = &binding.subjects.expect("subjects")[0];
    assert_eq!(subject.kind, "ServiceAccount");
    assert_eq!(Some(subject.name.clone()), account.metadata.name);
    assert_eq!(subject.namespace, account.metadata.namespace);
    let pod = ds.spec.expect("spec").template.spec.expect("pod spec");
    assert_eq!(pod.service_account_name, account.metadata.name);
}

#[test]
fn the_daemonset_runs_like_kube_proxy_without_privileged_mode() {
    let ds: DaemonSet = load("daemonset.yaml");
    let pod = ds.spec.expect("spec").template.spec.expect("pod spec");
    assert_eq!(pod.host_network, Some(true));
    assert_eq!(
        pod.priority_class_name.as_deref(),
        Some("system-node-critical")
    );
    let tolerations = pod.tolerations.clone().unwrap_or_default();
    assert!(
        tolerations
            .iter()
            .any(|t| t.operator.as_deref() == Some("Exists") && t.key.is_none()),
        "tolerates every taint, like kube-proxy"
    );
    let container = &pod.containers[0];
    let security = container.security_context.clone().expect("securityContext");
    assert_ne!(security.privileged, Some(true));
    let caps = security.capabilities.expect("capabilities");
    assert_eq!(caps.drop.unwrap_or_default(), ["ALL"]);
    assert_eq!(
        caps.add.unwrap_or_default(),
        ["NET_ADMIN", "SYS_RESOURCE"],
        "the narrowest that works (SYS_RESOURCE: oomScoreAdj -999, as kube-proxy)"
    );
    for (probe, path) in [
        (container.liveness_probe.as_ref(), "/livez"),
        (container.readiness_probe.as_ref(), "/healthz"),
    ] {
        let get = probe
            .and_then(|p| p.http_get.as_ref())
            .expect("an HTTP probe");
        assert_eq!(get.path.as_deref(), Some(path));
        assert_eq!(
            get.port,
            k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(10256)
        );
    }
    let selector = pod.node_selector.clone().unwrap_or_default();
    assert_eq!(
        selector.get("proxy.ferry.dev/ferry").map(String::as_str),
        Some("true"),
        "node by node: docs/src/cluster/migrate.md"
    );
    let mounts: Vec<&str> = container
        .volume_mounts
        .iter()
        .flatten()
        .map(|m| m.mount_path.as_str())
        .collect();
    for path in ["/run/xtables.lock", "/lib/modules", "/var/lib/ferry"] {
        assert!(mounts.contains(&path), "{path} not mounted: {mounts:?}");
    }
    let host_paths: Vec<String> = pod
        .volumes
        .iter()
        .flatten()
        .filter_map(|v| v.host_path.as_ref().map(|h| h.path.clone()))
        .collect();
    assert_eq!(host_paths, ["/run/xtables.lock", "/lib/modules"]);
    let command = container.command.clone().unwrap_or_default().join(" ");
    assert!(
        command.contains("--config=/var/lib/ferry/config.conf"),
        "{command}"
    );
    assert!(
        !command.contains("--manifests") && !command.contains("--master"),
        "in-cluster: {command}"
    );
}

#[test]
fn the_configmaps_kube_proxy_configuration_loads_with_ferrys_config_loader() {
    let cm: ConfigMap = load("configmap.yaml");
    let config = cm
        .data
        .as_ref()
        .and_then(|d| d.get("config.conf"))
        .expect("data.config.conf");
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("config.conf");
    std::fs::write(&file, config).expect("write config");
    let seed = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/seed");
    let out = Command::new(FERRY)
        .args(["rules", "--hostname-override", "k8s-node2", "--manifests"])
        .arg(&seed)
        .arg("--config")
        .arg(&file)
        .output()
        .expect("run ferry rules");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // No cluster's pod network is shipped: the one warning says what an empty clusterCIDR
    // means, as kube-proxy behaves with it.
    let warnings: Vec<&str> = stderr.lines().filter(|l| l.contains("warning")).collect();
    assert_eq!(
        warnings,
        [
            "warning: clusterCIDR is empty: traffic from pods cannot be told apart, so ClusterIP \
          traffic from outside the cluster is not masqueraded"
        ],
        "every field is one Ferry uses: {stderr}"
    );
    assert!(config.contains("clusterCIDR: \"\"\n"), "{config}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("table ip ferry"));
}
