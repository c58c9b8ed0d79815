//! One end-to-end run: fresh namespaces, `ferry run` started on the node with one source and
//! one proxy mode, then timed from the client's side: start → ClusterIPs answered, endpoint
//! changes → a new connection lands on the new endpoint, connection set-up times, memory.

use std::net::SocketAddrV4;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context as _;
use ferry_testkit::FakeApiServer;
use tokio::time::{sleep, Instant};

use super::cluster::{Cluster, NODE, POD_RANGE, PORT, TARGET_PORT};
use super::ferry::Ferry;
use super::net::Net;
use super::probe::{self, Expect};
use super::real_api::RealApi;

/// Where Ferry reads the cluster from.
pub enum Feed<'a> {
    /// A manifest directory (one file per Service), changed by renaming files staged in
    /// `stage` (same filesystem, outside the directory) into it.
    Manifests {
        /// The directory Ferry watches.
        dir: &'a Path,
        /// Where new versions are written first.
        stage: &'a Path,
    },
    /// The fake API server (started in the node namespace), changed by MODIFIED events.
    Api(&'a FakeApiServer),
    /// The real API server and EndpointSlice controller, changed by a Pod's readiness.
    Real(&'a RealApi),
}

/// What to run.
pub struct Setup<'a> {
    /// The `ferry` binary.
    pub ferry: &'a Path,
    /// Extra `ferry run` flags (proxy mode, minSyncPeriod).
    pub flags: Vec<String>,
    /// One-endpoint changes to time.
    pub changes: usize,
    /// Connection set-up times to take per target (0: none).
    pub connects: usize,
    /// Longest wait for the first answers, and for each change.
    pub timeout: Duration,
    /// Where Ferry's log goes.
    pub log: PathBuf,
    /// iptables mode: the backend, whose change floor is measured after Ferry stops.
    pub iptables_backend: Option<&'a str>,
}

/// What one run measured.
#[derive(Debug, Default, Clone)]
pub struct Measured {
    /// Process start → every probed ClusterIP answered by one of its endpoints.
    pub first_answers: Option<Duration>,
    /// Probed ClusterIPs that never answered.
    pub unanswered: usize,
    /// Answers from an address that was not an endpoint of the ClusterIP asked.
    pub wrong_answers: usize,
    /// Ferry's own figure for its first sync (log).
    pub first_sync_ms: Option<f64>,
    /// Change → a new connection lands on the new endpoint, per change (ms).
    pub change_ms: Vec<f64>,
    /// Changes never seen within the timeout.
    pub changes_lost: usize,
    /// Connection set-up times (µs): direct to an endpoint before Ferry started, then the
    /// first and the last ClusterIP, then direct again, with Ferry's rules in place, then
    /// direct once more after `ferry cleanup` removed them (the reference: the same
    /// namespaces in the same state, but for Ferry's rules), and last the first ClusterIP
    /// through a static DNAT and masquerade instead of Ferry's rules ([`static_nat`]).
    pub connect_us: Option<[Vec<f64>; 6]>,
    /// `VmHWM` of `ferry run` at the end.
    pub hwm_mib: f64,
    /// `VmRSS` of `ferry run` at the end.
    pub rss_mib: f64,
    /// Ferry's warnings and errors (the first few), when something was not answered.
    pub problems: Vec<String>,
    /// iptables mode: the floor for a change (see [`super::floor::change_floor`]).
    pub change_floor: Option<Duration>,
}

/// The ClusterIPs probed at start: first, last and 5 more spread over the cluster.
pub fn probed(cluster: &Cluster) -> Vec<Expect> {
    cluster
        .spread(7)
        .into_iter()
        .map(|i| Expect {
            target: SocketAddrV4::new(cluster.cluster_ip(i), PORT),
            old: Vec::new(),
            new: cluster.endpoints_of(i).to_vec(),
        })
        .collect()
}

/// `ferry run` flags every run shares: this node, the pod range, the source.
pub fn base_flags(feed: &Feed<'_>) -> Vec<String> {
    let mut flags = vec![
        format!("--hostname-override={NODE}"),
        format!("--cluster-cidr={POD_RANGE}"),
    ];
    match feed {
        Feed::Manifests { dir, .. } => flags.push(format!("--manifests={}", dir.display())),
        Feed::Api(server) => flags.push(format!("--master={}", server.url())),
        Feed::Real(api) => flags.push(format!("--kubeconfig={}", api.kubeconfig.display())),
    }
    flags
}

/// Runs one scenario in `net` (whose endpoint server must be running). Must be called on a
/// thread inside the client namespace, in a tokio runtime.
pub async fn run(
    net: &Net,
    cluster: &mut Cluster,
    feed: &Feed<'_>,
    setup: &Setup<'_>,
) -> anyhow::Result<Measured> {
    net.ensure_in_client()?;
    let mut m = Measured::default();
    let (first, last) = (0, cluster.services - 1);
    let before = if setup.connects > 0 {
        probe::connect_times(&[direct(cluster, first)], setup.connects).await
    } else {
        vec![Vec::new()]
    };

    let mut flags = base_flags(feed);
    flags.extend(setup.flags.iter().cloned());
    let start = Instant::now();
    let mut ferry = Ferry::start(setup.ferry, net.node.name(), &flags, &setup.log)?;
    let targets = probed(cluster);
    // A Ferry that exits (a bad flag, a missing tool) ends the wait at once.
    let exited = async {
        while ferry.is_running() {
            sleep(Duration::from_millis(100)).await;
        }
    };
    let answered = tokio::select! {
        a = probe::first_answers(&targets, start, start + setup.timeout) => Some(a),
        () = exited => None,
    };
    let Some((answers, wrong)) = answered else {
        anyhow::bail!("ferry exited: {:?}", ferry.problems(5));
    };
    m.wrong_answers = wrong;
    m.unanswered = answers.iter().filter(|a| a.is_none()).count();
    if m.unanswered == 0 {
        m.first_answers = answers.into_iter().flatten().max();
    } else {
        m.problems = ferry.problems(5);
        anyhow::ensure!(ferry.is_running(), "ferry exited: {:?}", m.problems);
    }
    settle(&ferry).await;
    m.first_sync_ms = ferry.syncs().first().map(|s| s.duration_ms);

    for k in 0..setup.changes {
        let service = cluster.changed_service(k);
        match change_once(cluster, feed, service, setup.timeout).await? {
            Some(ms) => m.change_ms.push(ms),
            None => m.changes_lost += 1,
        }
        // Let the sync that carried the change finish before the next one starts.
        sleep(Duration::from_millis(20)).await;
    }

    if setup.connects > 0 {
        let targets = [
            SocketAddrV4::new(cluster.cluster_ip(first), PORT),
            SocketAddrV4::new(cluster.cluster_ip(last), PORT),
            direct(cluster, first),
        ];
        let [a, b, c]: [Vec<Duration>; 3] = probe::connect_times(&targets, setup.connects)
            .await
            .try_into()
            .map_err(|_| anyhow::anyhow!("three targets"))?;
        let us = |v: &[Duration]| v.iter().map(|d| d.as_secs_f64() * 1e6).collect();
        let after = Vec::new();
        m.connect_us = Some([us(&before[0]), us(&a), us(&b), us(&c), after.clone(), after]);
    }
    m.hwm_mib = ferry.memory_mib("VmHWM:")?;
    m.rss_mib = ferry.memory_mib("VmRSS:")?;
    ferry.stop()?;
    // Ferry's rules stay in the kernel: time the tool on them.
    if let Some(backend) = setup.iptables_backend {
        m.change_floor = Some(super::floor::change_floor(net.node.name(), backend)?);
    }
    if let Some(times) = m.connect_us.as_mut() {
        let binary = setup.ferry.to_string_lossy();
        net.node.exec(&binary, ["cleanup"])?;
        let us = |v: &[Duration]| v.iter().map(|d| d.as_secs_f64() * 1e6).collect();
        let after = probe::connect_times(&[direct(cluster, first)], setup.connects).await;
        times[4] = us(&after[0]);
        // The floor of any kernel NAT: the same ClusterIP through two static rules.
        let vip = SocketAddrV4::new(cluster.cluster_ip(first), PORT);
        net.node
            .exec("nft", [static_nat(vip, direct(cluster, first))])?;
        let floor = probe::connect_times(&[vip], setup.connects).await;
        net.node.exec("nft", ["delete table ip ferry-bench-nat"])?;
        times[5] = us(&floor[0]);
    }
    Ok(m)
}

/// A table that translates `vip` to `endpoint` as Ferry does for the bench's client (outside
/// the cluster CIDR): one DNAT rule and one masquerade rule, nothing else. What the kernel's
/// connection tracking and NAT cost a new connection, without Ferry's rules.
fn static_nat(vip: SocketAddrV4, endpoint: SocketAddrV4) -> String {
    let t = "ip ferry-bench-nat";
    format!(
        "add table {t}; \
         add chain {t} prerouting {{ type nat hook prerouting priority -100; }}; \
         add chain {t} postrouting {{ type nat hook postrouting priority 100; }}; \
         add rule {t} prerouting ip daddr {} tcp dport {} dnat to {endpoint}; \
         add rule {t} postrouting ip daddr {} tcp dport {} masquerade fully-random",
        vip.ip(),
        vip.port(),
        endpoint.ip(),
        endpoint.port()
    )
}

/// Straight to Service `i`'s first endpoint.
fn direct(cluster: &Cluster, i: usize) -> SocketAddrV4 {
    SocketAddrV4::new(cluster.endpoints_of(i)[0], TARGET_PORT)
}

/// Waits until Ferry has gone 300 ms without a sync (at most 10 s): the start-up syncs of
/// every IP family are over.
async fn settle(ferry: &Ferry) {
    let end = Instant::now() + Duration::from_secs(10);
    let mut seen = ferry.syncs().len();
    let mut quiet_since = Instant::now();
    while Instant::now() < end {
        sleep(Duration::from_millis(50)).await;
        let now = ferry.syncs().len();
        if now != seen {
            seen = now;
            quiet_since = Instant::now();
        } else if seen > 0 && quiet_since.elapsed() >= Duration::from_millis(300) {
            return;
        }
    }
}

/// Replaces one endpoint of `service` through `feed`; the time until a new connection to its
/// ClusterIP lands on the new endpoint (ms), or `None` within `timeout`.
pub async fn change_once(
    cluster: &mut Cluster,
    feed: &Feed<'_>,
    service: usize,
    timeout: Duration,
) -> anyhow::Result<Option<f64>> {
    let k = cluster.changes() as usize;
    let mut change = cluster.change(service);
    let t = match feed {
        Feed::Manifests { dir, stage } => {
            let name = cluster.file_name(service);
            let staged = stage.join(&name);
            std::fs::write(&staged, cluster.manifest(service))
                .with_context(|| format!("writing {}", staged.display()))?;
            let t = Instant::now();
            std::fs::rename(&staged, dir.join(&name)).context("renaming into place")?;
            t
        }
        Feed::Api(server) => {
            let slice = cluster.slice_object(service);
            let t = Instant::now();
            server.apply(slice);
            t
        }
        Feed::Real(api) => {
            // Change `k` flips the spare Pod of Service `service`: the traffic must reach it.
            let (flipped, address, t) = api.flip(k).await?;
            anyhow::ensure!(
                flipped == service,
                "change {k}: spare of {flipped}, not {service}"
            );
            change.address = address;
            t
        }
    };
    let target = SocketAddrV4::new(cluster.cluster_ip(service), PORT);
    let landed = probe::until_lands(target, change.address, 4, t + timeout).await;
    Ok(landed.map(|at| (at - t).as_secs_f64() * 1e3))
}
