//! The real control plane fed directly: etcd and kube-apiserver (`ferry-kube-lab`) in the
//! node namespace, the cluster's Nodes, Services (no selectors) and EndpointSlices written by
//! the benchmark ([`super::objects`]). Every change is one slice write: the API event both
//! proxies see, with no controller in between (the EndpointSlice controller took ~114 ms of a
//! 120 ms readiness flip when it was in the path).
//!
//! Each Service a timed change touches has a spare endpoint, not ready; change `k` writes its
//! `conditions.ready: true`. Before each proxy starts, [`DirectApi::reset`] writes back every
//! slice changed since (spares not ready, no trigger-time annotation), so each proxy starts
//! from the same kind of cluster and sees the same changes.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context as _;
use futures::{stream, StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};
use serde_json::Value;

use super::objects::{now_rfc3339, service, slice, slice_name};
use crate::e2e::cluster::Cluster;
use crate::e2e::net::{Net, NODE_IP};
use crate::e2e::real_api::create_nodes;
use ferry_kube_lab::{kube_proxy, Assets, ControlPlane, Tuning};

/// Requests in flight while the cluster is created or reset.
const IN_FLIGHT: usize = 48;
/// Where the spares' addresses start (inside the pods namespace's range, clear of the
/// endpoints' and of `Cluster::change`'s).
const FIRST_SPARE: u32 = u32::from_be_bytes([10, 78, 0, 0]);
/// Every spare's address is in here.
pub const SPARES: ipnet::Ipv4Net = ipnet::Ipv4Net::new_assert(Ipv4Addr::new(10, 78, 0, 0), 16);

/// The control plane and the state of what the benchmark wrote.
pub struct DirectApi {
    /// Kept running for the whole size.
    pub control_plane: ControlPlane,
    /// kube-proxy's kubeconfig (its ServiceAccount's token), which both proxies use.
    pub kubeconfig: PathBuf,
    admin: PathBuf,
    namespace: String,
    /// Per timed change: the Service whose spare it flips.
    order: Vec<usize>,
    /// Per Service with a spare: its address and whether it is ready now.
    spares: BTreeMap<usize, (Ipv4Addr, bool)>,
    /// Services whose slice was written since the last reset.
    dirty: BTreeSet<usize>,
}

impl DirectApi {
    /// Starts the control plane in `net`'s node namespace and writes `cluster` (with one spare
    /// per timed change of `changes`).
    pub fn start(
        net: &Net,
        cluster: &Cluster,
        changes: usize,
        progress: &(dyn Fn(&str) + Sync),
    ) -> anyhow::Result<DirectApi> {
        let assets = Assets::find().context("finding the Kubernetes binaries")?;
        let ip: Ipv4Addr = NODE_IP.parse()?;
        let tuning = Tuning {
            apiserver: vec![
                "--max-requests-inflight=1000".into(),
                "--max-mutating-requests-inflight=500".into(),
            ],
            controller_manager: Vec::new(),
        };
        let started = Instant::now();
        let cp = ControlPlane::start_on(net.node.name(), ip, assets, &tuning)
            .context("starting the control plane")?;
        progress(&format!(
            "control plane up in {:.1} s",
            started.elapsed().as_secs_f64()
        ));
        let kubeconfig = kube_proxy::account(&cp, 24 * 3600)?;
        cp.ensure_namespace(cluster.namespace())?;
        let admin = cp.remote_admin_kubeconfig()?;
        let mut order = Vec::new();
        let mut spares = BTreeMap::new();
        for k in 0..changes {
            let service = cluster.changed_service(k);
            if let std::collections::btree_map::Entry::Vacant(e) = spares.entry(service) {
                e.insert((Ipv4Addr::from(FIRST_SPARE + k as u32), false));
                order.push(service);
            }
        }
        let api = DirectApi {
            control_plane: cp,
            kubeconfig,
            admin,
            namespace: cluster.namespace().to_owned(),
            order,
            spares,
            dirty: BTreeSet::new(),
        };
        let created = Instant::now();
        ferry_lab::netns::run_in(net.node.name(), || {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()?
                .block_on(api.populate(cluster))
        })??;
        progress(&format!(
            "{} Services and their slices ({} endpoints each) written in {:.1} s",
            cluster.services,
            cluster.endpoints,
            created.elapsed().as_secs_f64()
        ));
        Ok(api)
    }

    /// Timed changes available.
    pub fn changes(&self) -> usize {
        self.order.len()
    }

    /// A client as the administrator (at the node's address: reachable from the client).
    pub async fn client(&self) -> anyhow::Result<Client> {
        let file = Kubeconfig::read_from(&self.admin)?;
        let config = Config::from_custom_kubeconfig(file, &KubeConfigOptions::default()).await?;
        Ok(Client::try_from(config)?)
    }

    /// The slices' API.
    pub fn slices(&self, client: Client) -> Api<EndpointSlice> {
        Api::namespaced(client, &self.namespace)
    }

    /// Service `i`'s slice as it is now, as a merge patch (`trigger`: stamp it with the
    /// last-change-trigger-time annotation; else remove that annotation). Marks it changed.
    pub fn patch_of(&mut self, cluster: &Cluster, i: usize, trigger: bool) -> (String, Value) {
        self.dirty.insert(i);
        let stamp = trigger.then(now_rfc3339);
        let mut object = slice(cluster, i, self.spares.get(&i).copied(), stamp.as_deref());
        if !trigger {
            object["metadata"]["annotations"] = Value::Null;
        }
        (slice_name(cluster, i), object)
    }

    /// Timed change `k`: the spare of its Service made ready. Returns the Service, the spare's
    /// address and when the write was sent (on `slices`' connection, opened before).
    pub async fn flip(
        &mut self,
        slices: &Api<EndpointSlice>,
        cluster: &Cluster,
        k: usize,
    ) -> anyhow::Result<(usize, Ipv4Addr, tokio::time::Instant)> {
        let service = *self.order.get(k).context("no spare for this change")?;
        let address = {
            let spare = self.spares.get_mut(&service).context("no spare")?;
            spare.1 = true;
            spare.0
        };
        let (name, patch) = self.patch_of(cluster, service, true);
        let t = tokio::time::Instant::now();
        slices
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .with_context(|| format!("slice {name}"))?;
        Ok((service, address, t))
    }

    /// Writes back every slice changed since the last reset: spares not ready, no annotation.
    pub async fn reset(&mut self, cluster: &Cluster) -> anyhow::Result<usize> {
        for spare in self.spares.values_mut() {
            spare.1 = false;
        }
        let services: Vec<usize> = std::mem::take(&mut self.dirty)
            .into_iter()
            .chain(self.order.iter().copied())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let patches: Vec<(String, Value)> = services
            .iter()
            .map(|i| self.patch_of(cluster, *i, false))
            .collect();
        self.dirty.clear();
        let slices = self.slices(self.client().await?);
        let count = patches.len();
        stream::iter(patches)
            .map(|(name, patch)| {
                let slices = slices.clone();
                async move {
                    slices
                        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                        .await
                        .with_context(|| format!("slice {name}"))
                }
            })
            .buffer_unordered(IN_FLIGHT)
            .try_for_each(|_| async { Ok(()) })
            .await?;
        Ok(count)
    }

    async fn populate(&self, cluster: &Cluster) -> anyhow::Result<()> {
        let client = self.client().await?;
        create_nodes(&client, cluster).await?;
        let services: Api<Service> = Api::namespaced(client.clone(), &self.namespace);
        let slices = self.slices(client);
        stream::iter(0..cluster.services)
            .map(|i| {
                let (services, slices) = (services.clone(), slices.clone());
                let spare = self.spares.get(&i).copied();
                async move {
                    services
                        .create(
                            &PostParams::default(),
                            &serde_json::from_value(service(cluster, i))?,
                        )
                        .await
                        .with_context(|| format!("Service {}", cluster.name(i)))?;
                    slices
                        .create(
                            &PostParams::default(),
                            &serde_json::from_value(slice(cluster, i, spare, None))?,
                        )
                        .await
                        .with_context(|| format!("slice of {}", cluster.name(i)))?;
                    anyhow::Ok(())
                }
            })
            .buffer_unordered(IN_FLIGHT)
            .try_for_each(|()| async { Ok(()) })
            .await
    }
}
