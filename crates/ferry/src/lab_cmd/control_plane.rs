//! `ferry lab up --control-plane`: the lab with a real control plane (`ferry-kube-lab`): etcd,
//! kube-apiserver and the EndpointSlice controllers on a `control-plane` host, a kubelet
//! stand-in per node (`ferry lab-kubelet`), the manifests applied with kubectl, and each node's
//! Ferry watching the API as `deploy/`'s ServiceAccount, with exactly its rights.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use ferry_kube_lab::kubelet::POD_IP_ANNOTATION;
use ferry_kube_lab::{Assets, ControlPlane};
use ferry_lab::Lab;
use ferry_model::Object;
use serde_json::{json, Value};

/// `deploy/`'s ServiceAccount and RBAC, as the user applies them.
const RBAC: [(&str, &str); 3] = [
    (
        "serviceaccount.yaml",
        include_str!("../../../../deploy/serviceaccount.yaml"),
    ),
    (
        "clusterrole.yaml",
        include_str!("../../../../deploy/clusterrole.yaml"),
    ),
    (
        "clusterrolebinding.yaml",
        include_str!("../../../../deploy/clusterrolebinding.yaml"),
    ),
];

/// The folder of the control plane's files under the lab's state folder.
pub fn folder(state_dir: &Path) -> PathBuf {
    state_dir.join("control-plane")
}

/// The running control plane and the kubeconfig each node's Ferry reads.
pub struct Started {
    pub control_plane: ControlPlane,
    pub kubeconfig: PathBuf,
}

/// Starts the control plane on `lab`, the kubelet stand-ins, `deploy/`'s RBAC and a token for
/// Ferry, and applies what the manifests hold.
pub fn start(
    lab: &mut Lab,
    exe: &Path,
    manifests: &Path,
    objects: &[Object],
    state_dir: &Path,
) -> anyhow::Result<Started> {
    let assets = Assets::find().context("finding the Kubernetes binaries")?;
    let mut cp = ControlPlane::start_in(lab, assets, &folder(state_dir))
        .context("starting the control plane")?;
    let zones: Vec<(String, String)> = objects
        .iter()
        .filter_map(|o| match o {
            Object::Node(n) => Some((
                n.name.clone(),
                n.labels.get("topology.kubernetes.io/zone")?.clone(),
            )),
            _ => None,
        })
        .collect();
    let zones: Vec<(&str, &str)> = zones
        .iter()
        .map(|(n, z)| (n.as_str(), z.as_str()))
        .collect();
    let exe = exe.display().to_string();
    cp.start_kubelets(
        lab,
        &[exe.clone(), "lab-kubelet".into()],
        &[exe, "lab-pod".into()],
        &zones,
    )
    .context("starting the kubelet stand-ins")?;
    for (file, yaml) in RBAC {
        cp.apply(yaml)
            .with_context(|| format!("applying deploy/{file}"))?;
    }
    let token = cp
        .token("kube-system", "ferry", 24 * 3600, None)
        .context("a token for kube-system/ferry")?;
    let token_file = cp.write_file("ferry.token", &token)?;
    let kubeconfig = cp.token_kubeconfig("ferry", &token_file)?;
    let (namespaces, documents) = documents(manifests)?;
    for namespace in &namespaces {
        cp.ensure_namespace(namespace)
            .with_context(|| format!("namespace {namespace}"))?;
    }
    if !documents.is_empty() {
        let list = json!({"apiVersion": "v1", "kind": "List", "items": documents});
        cp.apply(&list.to_string())
            .context("applying the manifests")?;
    }
    Ok(Started {
        control_plane: cp,
        kubeconfig,
    })
}

/// `ferry lab kubectl ARGS`: kubectl as the administrator, in the control plane's namespace;
/// kubectl's exit code.
pub fn kubectl(state_dir: &Path, args: &[String]) -> anyhow::Result<std::process::ExitCode> {
    let state = ferry_lab::LabState::load(&super::state_file(state_dir))
        .context("no lab is up (ferry lab up --control-plane)")?;
    let ns = state
        .netns_of(ferry_kube_lab::control_plane::HOST)
        .context("the lab has no control plane (ferry lab up --control-plane)")?;
    let admin = folder(state_dir).join("admin.kubeconfig");
    let assets = Assets::find().context("finding kubectl")?;
    let status = std::process::Command::new("ip")
        .args(["netns", "exec", ns])
        .arg(&assets.kubectl)
        .arg("--kubeconfig")
        .arg(&admin)
        .args(args)
        .status()
        .context("running kubectl")?;
    Ok(match status.code() {
        Some(0) => std::process::ExitCode::SUCCESS,
        Some(c) => std::process::ExitCode::from(u8::try_from(c).unwrap_or(1)),
        None => std::process::ExitCode::FAILURE,
    })
}

/// Every document of the manifests as the lab applies it, and the namespaces they name.
fn documents(manifests: &Path) -> anyhow::Result<(BTreeSet<String>, Vec<Value>)> {
    let mut files = Vec::new();
    collect_files(manifests, &mut files)?;
    files.sort();
    let mut namespaces = BTreeSet::new();
    let mut out = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file)
            .with_context(|| format!("reading {}", file.display()))?;
        let docs = ferry_source::manifest::yaml::parse(&text)
            .map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
        for doc in docs {
            if let Some(doc) = for_the_api(doc) {
                if let Some(ns) = doc.pointer("/metadata/namespace").and_then(Value::as_str) {
                    namespaces.insert(ns.to_owned());
                }
                out.push(doc);
            }
        }
    }
    Ok((namespaces, out))
}

fn collect_files(path: &Path, out: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    if path.is_file() {
        out.push(path.to_path_buf());
        return Ok(());
    }
    for entry in std::fs::read_dir(path).with_context(|| format!("reading {}", path.display()))? {
        let p = entry?.path();
        if p.is_dir() {
            collect_files(&p, out)?;
        } else if p
            .extension()
            .is_some_and(|e| e == "yaml" || e == "yml" || e == "json")
        {
            out.push(p);
        }
    }
    Ok(())
}

/// A manifest document as the lab applies it: Nodes are left out (each kubelet stand-in
/// registers its own), a Pod's `status.podIP` becomes the stand-in's address annotation
/// (the API server resets a new Pod's status), every other status is dropped.
fn for_the_api(mut doc: Value) -> Option<Value> {
    let kind = doc
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    if kind == "Node" || kind.is_empty() {
        return None;
    }
    let status = doc.as_object_mut()?.remove("status");
    if kind == "Pod" {
        if let Some(ip) = status
            .as_ref()
            .and_then(|s| s.get("podIP"))
            .and_then(Value::as_str)
        {
            let metadata = doc.as_object_mut()?.entry("metadata").or_insert(json!({}));
            let annotations = metadata
                .as_object_mut()?
                .entry("annotations")
                .or_insert(json!({}));
            annotations
                .as_object_mut()?
                .insert(POD_IP_ANNOTATION.to_owned(), json!(ip));
        }
    }
    Some(doc)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pods_ip_becomes_the_stand_ins_annotation_and_status_goes() {
        let pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "a", "namespace": "dev"},
            "spec": {"nodeName": "k8s-node2"},
            "status": {"phase": "Running", "podIP": "192.168.169.166"}
        });
        let got = for_the_api(pod).expect("kept");
        assert_eq!(
            got["metadata"]["annotations"][POD_IP_ANNOTATION],
            "192.168.169.166"
        );
        assert!(got.get("status").is_none(), "{got}");
    }

    #[test]
    fn nodes_are_left_to_the_stand_ins_and_services_go_as_they_are() {
        let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}});
        assert_eq!(for_the_api(node), None);
        let svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
                         "spec": {"ports": [{"port": 80}]}});
        assert_eq!(for_the_api(svc.clone()), Some(svc));
    }

    #[test]
    fn the_seed_pods_example_gives_a_service_and_two_pods_in_dev() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/seed-pods");
        let (namespaces, docs) = documents(&dir).expect("read");
        assert_eq!(namespaces, BTreeSet::from(["dev".to_owned()]));
        let kinds: Vec<&str> = docs.iter().filter_map(|d| d["kind"].as_str()).collect();
        assert_eq!(kinds, ["Pod", "Pod", "Service"]);
    }
}
