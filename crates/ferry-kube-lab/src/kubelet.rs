//! The kubelet stand-in: the one part of the control-plane lab that is not upstream's. No
//! container runtime runs here, so this plays kubelet's part for one lab node:
//!
//! - it registers the node as a Node object (its `InternalIP`, hostname and zone labels, its pod
//!   CIDR, a `Ready` condition);
//! - for each Pod bound to the node (`spec.nodeName`), it makes the Pod a network namespace with
//!   the Pod's IP (the `lab.ferry.dev/pod-ip` annotation, else the next free address of the
//!   node's pod CIDR), wired to the node as the lab's pods are, and runs the lab's echo server
//!   on each TCP `containerPort`;
//! - it runs the Pods' readiness probes from the node's network namespace with Ferry's own
//!   probe code (`ferry_source::probe`, as standalone mode does), and writes what a kubelet
//!   writes through the status subresource: `phase`, `podIP(s)`, `hostIP(s)`, the
//!   `ContainersReady` and `Ready` conditions and the container statuses;
//! - a Pod deleted gracefully stays (terminating, still serving) until its grace period ends;
//!   then its servers stop, its namespace goes, and the Pod object is deleted for good, as a
//!   kubelet finishes a deletion.
//!
//! The EndpointSlices are not its business: kube-controller-manager's EndpointSlice
//! controller writes them from the Pods, as in any cluster.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use futures::StreamExt as _;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{DeleteParams, Patch, PatchParams, Preconditions};
use kube::runtime::watcher;
use kube::runtime::WatchStreamExt as _;
use kube::{Api, Client, ResourceExt as _};
use serde_json::json;
use tokio::sync::mpsc;

mod options;

pub use options::{main, Options};

use ferry_source::pods::PodKey;
use ferry_source::probe::{NetworkCheck, ProbeBook, ProbeReport, Prober};

/// The annotation that asks for a Pod's IP (the example cluster's Pods have fixed addresses).
pub const POD_IP_ANNOTATION: &str = "lab.ferry.dev/pod-ip";
/// Who writes the Node and the Pods' status.
const MANAGER: &str = "ferry-lab-kubelet";

/// A Pod this node runs.
struct Running {
    uid: String,
    ip: Ipv4Addr,
    netns: String,
    servers: Vec<Child>,
    /// Per probed container: its verdict (`None` until the first threshold).
    verdicts: BTreeMap<String, Option<bool>>,
    containers: Vec<(String, String)>,
    /// Set once the Pod is being deleted: when its grace period ends.
    ends_at: Option<tokio::time::Instant>,
    last_status: Option<serde_json::Value>,
}

impl Running {
    fn ready(&self) -> bool {
        self.verdicts.values().all(|v| *v == Some(true))
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        for s in &mut self.servers {
            let _ = s.kill();
            let _ = s.wait();
        }
        if let Err(e) = ferry_lab::netns::destroy(std::slice::from_ref(&self.netns)) {
            tracing::warn!(netns = %self.netns, error = %e, "removing a Pod's namespace");
        }
    }
}

/// Runs the stand-in until the process is stopped.
pub async fn run(opts: Options) -> anyhow::Result<()> {
    let file = kube::config::Kubeconfig::read_from(&opts.kubeconfig)
        .with_context(|| format!("reading {}", opts.kubeconfig.display()))?;
    let config = kube::Config::from_custom_kubeconfig(file, &Default::default()).await?;
    let client = Client::try_from(config)?;
    register(&client, &opts).await?;
    let mut kubelet = Kubelet::new(client.clone(), opts);
    let pods: Api<Pod> = Api::all(client);
    let selector = format!("spec.nodeName={}", kubelet.opts.node);
    let mut events = watcher(pods, watcher::Config::default().fields(&selector))
        .default_backoff()
        .boxed();
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    let mut init: Option<BTreeSet<(String, String)>> = None;
    loop {
        tokio::select! {
            event = events.next() => match event {
                Some(Ok(watcher::Event::Init)) => init = Some(BTreeSet::new()),
                Some(Ok(watcher::Event::InitApply(pod))) => {
                    if let Some(seen) = &mut init {
                        seen.insert(key(&pod));
                    }
                    kubelet.apply(&pod).await;
                }
                Some(Ok(watcher::Event::InitDone)) => {
                    if let Some(seen) = init.take() {
                        kubelet.running.retain(|k, _| seen.contains(k));
                        kubelet.sync_probes();
                    }
                }
                Some(Ok(watcher::Event::Apply(pod))) => kubelet.apply(&pod).await,
                Some(Ok(watcher::Event::Delete(pod))) => {
                    kubelet.running.remove(&key(&pod));
                    kubelet.sync_probes();
                }
                Some(Err(e)) => tracing::warn!(error = %e, "watching Pods"),
                None => anyhow::bail!("the Pod watch ended"),
            },
            Some(report) = kubelet.reports.recv() => kubelet.probed(report).await,
            _ = tick.tick() => kubelet.finish_deletions().await,
        }
    }
}

/// Creates or updates the Node object and its status.
async fn register(client: &Client, opts: &Options) -> anyhow::Result<()> {
    let nodes: Api<Node> = Api::all(client.clone());
    let mut labels = json!({
        "kubernetes.io/hostname": opts.node,
        "kubernetes.io/os": "linux",
    });
    if let Some(zone) = &opts.zone {
        labels["topology.kubernetes.io/zone"] = json!(zone);
    }
    let node = json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": opts.node, "labels": labels},
        "spec": {"podCIDR": opts.pod_cidr.to_string(), "podCIDRs": [opts.pod_cidr.to_string()]},
    });
    let params = PatchParams::apply(MANAGER).force();
    nodes
        .patch(&opts.node, &params, &Patch::Apply(&node))
        .await
        .with_context(|| format!("registering Node {}", opts.node))?;
    let now = now();
    let status = json!({"status": {
        "addresses": [
            {"type": "InternalIP", "address": opts.node_ip.to_string()},
            {"type": "Hostname", "address": opts.node},
        ],
        "conditions": [{
            "type": "Ready", "status": "True", "reason": "KubeletReady",
            "message": "ferry-lab-kubelet (a stand-in) is posting ready status",
            "lastHeartbeatTime": now, "lastTransitionTime": now,
        }],
    }});
    nodes
        .patch_status(&opts.node, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .with_context(|| format!("writing Node {}'s status", opts.node))?;
    tracing::info!(node = %opts.node, "registered the Node");
    Ok(())
}

struct Kubelet {
    client: Client,
    opts: Options,
    running: BTreeMap<(String, String), Running>,
    pods: BTreeMap<(String, String), Arc<ferry_model::Pod>>,
    prober: Prober,
    book: ProbeBook,
    reports: mpsc::Receiver<ProbeReport>,
    next_netns: u32,
}

fn key(pod: &Pod) -> (String, String) {
    (pod.namespace().unwrap_or_default(), pod.name_any())
}

fn now() -> String {
    k8s_openapi::jiff::Timestamp::now().to_string()
}

impl Kubelet {
    fn new(client: Client, opts: Options) -> Kubelet {
        let (tx, reports) = mpsc::channel(1024);
        Kubelet {
            client,
            opts,
            running: BTreeMap::new(),
            pods: BTreeMap::new(),
            prober: Prober::new(Arc::new(NetworkCheck::default()), 64, tx),
            book: ProbeBook::default(),
            reports,
            next_netns: 0,
        }
    }

    /// A Pod was added or changed.
    async fn apply(&mut self, pod: &Pod) {
        let k = key(pod);
        let uid = pod.uid().unwrap_or_default();
        if self.running.get(&k).is_some_and(|r| r.uid != uid) {
            // Deleted and created again under the same name while the watch was away.
            self.running.remove(&k);
        }
        if !self.running.contains_key(&k) {
            if pod.metadata.deletion_timestamp.is_some() {
                return;
            }
            match self.start(pod) {
                Ok(r) => {
                    tracing::info!(pod = %format!("{}/{}", k.0, k.1), ip = %r.ip, "started the Pod");
                    self.running.insert(k.clone(), r);
                    self.sync_probes();
                }
                Err(e) => {
                    tracing::warn!(pod = %format!("{}/{}", k.0, k.1), error = format!("{e:#}"), "cannot start the Pod");
                    return;
                }
            }
        }
        let grace = pod.metadata.deletion_grace_period_seconds;
        if let (Some(r), Some(grace)) = (self.running.get_mut(&k), grace) {
            if r.ends_at.is_none() {
                let grace = u64::try_from(grace).unwrap_or(0);
                tracing::info!(pod = %format!("{}/{}", k.0, k.1), grace, "the Pod is terminating");
                r.ends_at = Some(tokio::time::Instant::now() + Duration::from_secs(grace));
            }
        }
        self.write_status(&k).await;
    }

    /// Wires the Pod and starts its servers.
    fn start(&mut self, pod: &Pod) -> anyhow::Result<Running> {
        let ip = self.address(pod)?;
        let netns = format!("{}-{}", self.opts.pod_netns_prefix, self.next_netns);
        self.next_netns += 1;
        let veth = ferry_lab::pod::host_veth_name(&format!("{}/{}", key(pod).0, pod.name_any()));
        ferry_lab::lab::wire_pod(&netns, &self.opts.node_netns, &veth, ip)
            .with_context(|| format!("wiring {ip} in {netns}"))?;
        let mut running = Running {
            uid: pod.uid().unwrap_or_default(),
            ip,
            netns: netns.clone(),
            servers: Vec::new(),
            verdicts: BTreeMap::new(),
            containers: Vec::new(),
            ends_at: None,
            last_status: None,
        };
        let spec = pod.spec.as_ref().context("no spec")?;
        for c in &spec.containers {
            running
                .containers
                .push((c.name.clone(), c.image.clone().unwrap_or_default()));
            if c.readiness_probe.is_some() {
                running.verdicts.insert(c.name.clone(), None);
            }
            for port in c.ports.iter().flatten() {
                let udp = port.protocol.as_deref() == Some("UDP");
                let (program, args) = self.opts.echo.split_first().context("no echo program")?;
                let mut cmd = Command::new("ip");
                cmd.args(["netns", "exec", &netns, program])
                    .args(args)
                    .args(["--name", &pod.name_any(), "--listen"])
                    .arg(format!("{ip}:{}", port.container_port))
                    .stdin(Stdio::null());
                if udp {
                    cmd.arg("--udp");
                }
                running
                    .servers
                    .push(cmd.spawn().with_context(|| format!("starting {program}"))?);
            }
        }
        let mut with_ip = pod.clone();
        let status = with_ip.status.get_or_insert_with(Default::default);
        status.pod_ip = Some(ip.to_string());
        status.pod_ips = Some(vec![k8s_openapi::api::core::v1::PodIP {
            ip: ip.to_string(),
        }]);
        status.phase = Some("Running".into());
        match ferry_source::convert::pod(&with_ip) {
            Ok(p) => {
                self.pods.insert(key(pod), Arc::new(p));
            }
            Err(e) => tracing::warn!(error = %e, "the Pod's probes cannot run"),
        }
        Ok(running)
    }

    /// The Pod's IP: the annotation's, else the first free one of the pod CIDR.
    fn address(&self, pod: &Pod) -> anyhow::Result<Ipv4Addr> {
        if let Some(ip) = pod.annotations().get(POD_IP_ANNOTATION) {
            return ip.parse().with_context(|| {
                format!("annotation {POD_IP_ANNOTATION}: {ip:?} is not an IPv4 address")
            });
        }
        let used: BTreeSet<Ipv4Addr> = self.running.values().map(|r| r.ip).collect();
        self.opts
            .pod_cidr
            .hosts()
            .skip(1)
            .find(|ip| !used.contains(ip))
            .with_context(|| format!("pod CIDR {} is full", self.opts.pod_cidr))
    }

    fn sync_probes(&mut self) {
        self.pods.retain(|k, _| self.running.contains_key(k));
        let keys: BTreeMap<PodKey, Arc<ferry_model::Pod>> = self
            .pods
            .iter()
            .map(|((ns, name), p)| (PodKey::new(ns.as_str(), name.as_str()), p.clone()))
            .collect();
        self.prober.sync(keys.iter(), &mut self.book);
    }

    /// A probe ran.
    async fn probed(&mut self, report: ProbeReport) {
        let k = (
            report.pod.namespace.to_string(),
            report.pod.name.to_string(),
        );
        let Some(r) = self.running.get_mut(&k) else {
            return;
        };
        let Some(verdict) = r.verdicts.get_mut(&*report.container) else {
            return;
        };
        if *verdict != report.verdict && report.verdict.is_some() {
            tracing::info!(pod = %format!("{}/{}", k.0, k.1), container = %report.container, ready = ?report.verdict, outcome = ?report.outcome, "readiness changed");
            *verdict = report.verdict;
            self.write_status(&k).await;
        }
    }

    /// Writes the Pod's status as a kubelet would, when it differs from the last written.
    async fn write_status(&mut self, k: &(String, String)) {
        let Some(r) = self.running.get_mut(k) else {
            return;
        };
        let ready = r.ready();
        let flag = |b: bool| if b { "True" } else { "False" };
        let statuses: Vec<_> = r
            .containers
            .iter()
            .map(|(name, image)| {
                let ready = r.verdicts.get(name).is_none_or(|v| *v == Some(true));
                json!({"name": name, "image": image, "imageID": "", "ready": ready,
                       "started": true, "restartCount": 0,
                       "state": {"running": {}}})
            })
            .collect();
        let status = json!({"status": {
            "phase": "Running",
            "podIP": r.ip.to_string(), "podIPs": [{"ip": r.ip.to_string()}],
            "hostIP": self.opts.node_ip.to_string(), "hostIPs": [{"ip": self.opts.node_ip.to_string()}],
            "conditions": [
                {"type": "PodScheduled", "status": "True"},
                {"type": "Initialized", "status": "True"},
                {"type": "ContainersReady", "status": flag(ready)},
                {"type": "Ready", "status": flag(ready)},
            ],
            "containerStatuses": statuses,
        }});
        if r.last_status.as_ref() == Some(&status) {
            return;
        }
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &k.0);
        match pods
            .patch_status(&k.1, &PatchParams::default(), &Patch::Merge(&status))
            .await
        {
            Ok(_) => r.last_status = Some(status),
            Err(e) => {
                tracing::warn!(pod = %format!("{}/{}", k.0, k.1), error = %e, "writing the Pod's status")
            }
        }
    }

    /// Ends the Pods whose grace period is over: servers stopped, namespace removed, the Pod
    /// deleted for good (grace 0, only this incarnation of it).
    async fn finish_deletions(&mut self) {
        let now = tokio::time::Instant::now();
        let due: Vec<(String, String)> = self
            .running
            .iter()
            .filter(|(_, r)| r.ends_at.is_some_and(|t| t <= now))
            .map(|(k, _)| k.clone())
            .collect();
        for k in due {
            let Some(r) = self.running.remove(&k) else {
                continue;
            };
            let uid = r.uid.clone();
            drop(r);
            self.sync_probes();
            let pods: Api<Pod> = Api::namespaced(self.client.clone(), &k.0);
            let params = DeleteParams {
                grace_period_seconds: Some(0),
                preconditions: Some(Preconditions {
                    uid: Some(uid),
                    resource_version: None,
                }),
                ..DeleteParams::default()
            };
            match pods.delete(&k.1, &params).await {
                Ok(_) => {
                    tracing::info!(pod = %format!("{}/{}", k.0, k.1), "the Pod has terminated")
                }
                Err(e) => {
                    tracing::warn!(pod = %format!("{}/{}", k.0, k.1), error = %e, "deleting the Pod")
                }
            }
        }
    }
}
