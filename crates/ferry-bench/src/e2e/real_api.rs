//! The real API server as Ferry's source: etcd, kube-apiserver and kube-controller-manager's
//! EndpointSlice controllers (`ferry-kube-lab`, the binaries `lab/k8s/build` makes) started
//! in the benchmark's node namespace, as on a control-plane node. The cluster is created
//! through the API as a user's workloads would be: Nodes, the N Services (with selectors), and
//! N × M Pods bound to nodes, whose status this benchmark writes in the kubelet's place
//! (Running, the endpoint's address, `Ready`): the real controller then writes the
//! EndpointSlices. Ferry reads them as `deploy/`'s ServiceAccount.
//!
//! A change is one Pod's readiness flipped: each Service a change will touch has one spare Pod,
//! created not ready at an address of its own; the change writes its `Ready` condition (one
//! status update, as a kubelet's probe result), and is timed until a new connection to the
//! Service lands on it: the controller's slice update, Ferry's watch and sync, the kernel.

use std::collections::{HashMap, HashSet};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use futures::{stream, StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::core::v1::{Node, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::watcher;
use kube::{Api, Client, Config};
use serde_json::json;

use super::cluster::Cluster;
use super::net::{Net, NODE_IP};
use ferry_kube_lab::{Assets, ControlPlane, Tuning};
use objects::{pod, pod_status, service};

mod objects;

/// Requests in flight while the cluster is created.
const IN_FLIGHT: usize = 48;
/// Where the spare Pods' addresses start (inside the pods namespace's range, clear of the
/// endpoints' and of `Cluster::change`'s).
const FIRST_SPARE: u32 = u32::from_be_bytes([10, 78, 0, 0]);

/// The control plane, Ferry's kubeconfig, and the spare Pods.
pub struct RealApi {
    /// Kept running for the scenario.
    pub control_plane: ControlPlane,
    /// Ferry's kubeconfig (its ServiceAccount's token; server at the node's address).
    pub kubeconfig: PathBuf,
    /// The administrator's kubeconfig at the node's address (reachable from the client).
    admin: PathBuf,
    namespace: String,
    /// Per change number: (Service index, spare Pod name, its address).
    spares: Vec<(usize, String, Ipv4Addr)>,
    /// The client the changes are made with (made, and its connection opened, before the
    /// first change is timed; used from the scenario's runtime only).
    changer: std::sync::OnceLock<Client>,
    /// When each flip was sent, and when a watch of the slices first saw its spare ready.
    seen: Arc<Mutex<Seen>>,
}

/// Flip and publication times of the spare Pods, by address.
#[derive(Default)]
struct Seen {
    flipped: HashMap<Ipv4Addr, tokio::time::Instant>,
    published: HashMap<Ipv4Addr, tokio::time::Instant>,
}

impl RealApi {
    /// Starts the control plane in `net`'s node namespace, creates `cluster` through it (and
    /// one spare Pod per change of `changes`), and waits until the controller has published
    /// every endpoint.
    pub fn start(
        net: &Net,
        cluster: &Cluster,
        changes: usize,
        progress: &(dyn Fn(&str) + Sync),
    ) -> anyhow::Result<RealApi> {
        let assets = Assets::find().context("finding the Kubernetes binaries")?;
        let ip: Ipv4Addr = NODE_IP.parse()?;
        let tuning = Tuning {
            // Upstream's defaults suit a server shared by a whole cluster; this one only
            // creates the benchmark's objects.
            apiserver: vec![
                "--max-requests-inflight=1000".into(),
                "--max-mutating-requests-inflight=500".into(),
            ],
            controller_manager: vec![
                "--kube-api-qps=1000".into(),
                "--kube-api-burst=2000".into(),
                "--concurrent-service-endpoint-syncs=10".into(),
            ],
        };
        let started = Instant::now();
        let cp = ControlPlane::start_on(net.node.name(), ip, assets, &tuning)
            .context("starting the control plane")?;
        progress(&format!(
            "control plane up in {:.1} s",
            started.elapsed().as_secs_f64()
        ));
        let deploy = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy");
        for file in [
            "serviceaccount.yaml",
            "clusterrole.yaml",
            "clusterrolebinding.yaml",
        ] {
            let text = std::fs::read_to_string(deploy.join(file))
                .with_context(|| format!("reading deploy/{file}"))?;
            cp.apply(&text)
                .with_context(|| format!("applying deploy/{file}"))?;
        }
        cp.ensure_namespace(cluster.namespace())?;
        let token = cp.token("kube-system", "ferry", 24 * 3600, None)?;
        let token_file = cp.write_file("ferry.token", &token)?;
        let kubeconfig = cp.token_kubeconfig("ferry", &token_file)?;
        let admin = cp.remote_admin_kubeconfig()?;
        let spares = (0..changes)
            .map(|k| {
                let service = cluster.changed_service(k);
                let name = format!("{}-spare-{k}", cluster.name(service));
                (service, name, Ipv4Addr::from(FIRST_SPARE + k as u32))
            })
            .collect();
        let api = RealApi {
            control_plane: cp,
            kubeconfig,
            admin,
            namespace: cluster.namespace().to_owned(),
            spares,
            changer: std::sync::OnceLock::new(),
            seen: Arc::default(),
        };
        let created = Instant::now();
        ferry_lab::netns::run_in(net.node.name(), || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()?;
            rt.block_on(api.populate(cluster, progress))
        })??;
        progress(&format!(
            "{} Services × {} Pods created, every endpoint published, in {:.1} s",
            cluster.services,
            cluster.endpoints,
            created.elapsed().as_secs_f64()
        ));
        Ok(api)
    }

    /// A client as the administrator.
    pub async fn client(&self) -> anyhow::Result<Client> {
        let file = Kubeconfig::read_from(&self.admin)?;
        let config = Config::from_custom_kubeconfig(file, &KubeConfigOptions::default()).await?;
        Ok(Client::try_from(config)?)
    }

    /// Change number `k`: its spare Pod's readiness flipped to ready. Returns the Service and
    /// the spare's address; `t` is taken just before the request is sent (on a connection
    /// opened before).
    pub async fn flip(&self, k: usize) -> anyhow::Result<(usize, Ipv4Addr, tokio::time::Instant)> {
        let (service, name, ip) = self
            .spares
            .get(k)
            .cloned()
            .with_context(|| format!("no spare Pod for change {k}"))?;
        let client = match self.changer.get() {
            Some(c) => c.clone(),
            None => {
                let c = self.client().await?;
                // Opens the connection (TLS included) outside the timed request.
                c.apiserver_version().await?;
                self.watch_slices(c.clone());
                self.changer.get_or_init(|| c).clone()
            }
        };
        let pods: Api<Pod> = Api::namespaced(client, &self.namespace);
        let status = pod_status(ip, true);
        let t = tokio::time::Instant::now();
        pods.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
            .await
            .with_context(|| format!("Pod {name}: status"))?;
        lock(&self.seen).flipped.insert(ip, t);
        Ok((service, ip, t))
    }

    /// Per flip whose spare a watch saw published: flip → the controller's slice update seen
    /// by that watch (ms). The controller's part of a change, measured beside Ferry.
    pub fn controller_ms(&self) -> Vec<f64> {
        let seen = lock(&self.seen);
        seen.flipped
            .iter()
            .filter_map(|(ip, t)| {
                let p = seen.published.get(ip)?;
                Some(p.saturating_duration_since(*t).as_secs_f64() * 1e3)
            })
            .collect()
    }

    /// Watches the slices in the scenario's runtime, noting when each spare first shows ready.
    fn watch_slices(&self, client: Client) {
        let spares: HashSet<Ipv4Addr> = self.spares.iter().map(|s| s.2).collect();
        let seen = Arc::clone(&self.seen);
        let slices: Api<EndpointSlice> = Api::namespaced(client, &self.namespace);
        tokio::spawn(async move {
            let mut events = std::pin::pin!(watcher(slices, watcher::Config::default()));
            while let Some(event) = events.next().await {
                let now = tokio::time::Instant::now();
                let (Ok(watcher::Event::Apply(slice)) | Ok(watcher::Event::InitApply(slice))) =
                    event
                else {
                    continue;
                };
                for e in &slice.endpoints {
                    if e.conditions.as_ref().and_then(|c| c.ready) != Some(true) {
                        continue;
                    }
                    for a in &e.addresses {
                        if let Ok(ip) = a.parse::<Ipv4Addr>() {
                            if spares.contains(&ip) {
                                lock(&seen).published.entry(ip).or_insert(now);
                            }
                        }
                    }
                }
            }
        });
    }

    async fn populate(
        &self,
        cluster: &Cluster,
        progress: &(dyn Fn(&str) + Sync),
    ) -> anyhow::Result<()> {
        let client = self.client().await?;
        create_nodes(&client, cluster).await?;
        let services: Api<Service> = Api::namespaced(client.clone(), &self.namespace);
        stream::iter(0..cluster.services)
            .map(|i| {
                let services = services.clone();
                let object = service(cluster, i);
                async move {
                    services
                        .create(&PostParams::default(), &serde_json::from_value(object)?)
                        .await
                        .with_context(|| format!("Service {}", cluster.name(i)))
                }
            })
            .buffer_unordered(IN_FLIGHT)
            .try_for_each(|_| async { Ok(()) })
            .await?;
        progress(&format!("{} Services created", cluster.services));
        let pods: Api<Pod> = Api::namespaced(client.clone(), &self.namespace);
        let mut wanted: Vec<(String, usize, String, Ipv4Addr, bool)> = Vec::new();
        for i in 0..cluster.services {
            for (j, ip) in cluster.endpoints_of(i).iter().enumerate() {
                let name = format!("{}-{j}", cluster.name(i));
                wanted.push((name, i, cluster.node_of(i, j), *ip, true));
            }
        }
        for (service, name, ip) in &self.spares {
            wanted.push((
                name.clone(),
                *service,
                cluster.node_of(*service, 0),
                *ip,
                false,
            ));
        }
        let total = wanted.len();
        stream::iter(wanted)
            .map(|(name, i, node, ip, ready)| {
                let pods = pods.clone();
                let object = pod(&name, &cluster.name(i), &node);
                async move {
                    pods.create(&PostParams::default(), &serde_json::from_value(object)?)
                        .await
                        .with_context(|| format!("Pod {name}"))?;
                    pods.patch_status(
                        &name,
                        &PatchParams::default(),
                        &Patch::Merge(pod_status(ip, ready)),
                    )
                    .await
                    .with_context(|| format!("Pod {name}: status"))?;
                    anyhow::Ok(())
                }
            })
            .buffer_unordered(IN_FLIGHT)
            .try_for_each(|()| async { Ok(()) })
            .await?;
        progress(&format!("{total} Pods created and reported running"));
        self.wait_published(&client, cluster, progress).await
    }

    /// Waits until the controller's slices hold every ready endpoint.
    async fn wait_published(
        &self,
        client: &Client,
        cluster: &Cluster,
        progress: &(dyn Fn(&str) + Sync),
    ) -> anyhow::Result<()> {
        let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), &self.namespace);
        let want = cluster.services * cluster.endpoints;
        let deadline = Instant::now() + Duration::from_secs(1800);
        loop {
            let mut ready = 0;
            let mut params = ListParams::default().limit(500);
            loop {
                let page = slices.list(&params).await?;
                ready += page
                    .items
                    .iter()
                    .flat_map(|s| &s.endpoints)
                    .filter(|e| e.conditions.as_ref().and_then(|c| c.ready) == Some(true))
                    .count();
                match page.metadata.continue_.filter(|c| !c.is_empty()) {
                    Some(next) => params = params.continue_token(&next),
                    None => break,
                }
            }
            if ready >= want {
                return Ok(());
            }
            anyhow::ensure!(
                Instant::now() < deadline,
                "only {ready} of {want} endpoints published after 30 minutes"
            );
            progress(&format!("{ready} of {want} endpoints published"));
            tokio::time::sleep(Duration::from_secs(3)).await;
        }
    }
}

fn lock(seen: &Mutex<Seen>) -> std::sync::MutexGuard<'_, Seen> {
    seen.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
/// Creates the cluster's Nodes through the API, with their status (as kubelets would).
pub(super) async fn create_nodes(client: &Client, cluster: &Cluster) -> anyhow::Result<()> {
    let nodes: Api<Node> = Api::all(client.clone());
    for node in cluster.node_objects() {
        let name = node["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let spec = json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": { "name": name, "labels": node["metadata"]["labels"].clone() },
            "spec": node["spec"].clone(),
        });
        nodes
            .create(&PostParams::default(), &serde_json::from_value(spec)?)
            .await
            .with_context(|| format!("Node {name}"))?;
        nodes
            .patch_status(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({ "status": node["status"].clone() })),
            )
            .await
            .with_context(|| format!("Node {name}: status"))?;
    }
    Ok(())
}
