//! `sessionAffinity: ClientIP` with real packets in the seed lab, in every proxy mode: a client
//! sticks to one pod (and a second client is pinned on its own), the pin survives full syncs
//! and a restart of Ferry, expires after `timeoutSeconds` without traffic, and follows the removal of its endpoint at
//! once. Each assertion is on the answers' server names and on the kernel's own affinity state
//! (nftables: Ferry's pin maps; iptables: `/proc/net/xt_recent/KUBE-SEP-…`), never on chance.
//! Needs root (skips otherwise).

#[path = "support/seed.rs"]
mod seed;
#[macro_use]
#[path = "support/modes.rs"]
mod modes;

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use ferry_lab::spec::{ClientSpec, MASTER, NODE1};
use ferry_lab::Host;
use serde_json::Value;

use seed::*;

const CLIENT_IP: &str = "10.1.1.100";
const CLIENT2: &str = "client2";
const CLIENT2_IP: &str = "10.1.1.101";
const NODE1_IP: &str = "10.1.1.17";

every_mode!(
    clients_stick_to_one_pod_each_across_full_syncs,
    a_pin_expires_after_the_timeout_without_traffic,
    removing_the_pinned_endpoint_moves_the_client_at_once
);

/// The seed lab with a second outside client and `timeoutSeconds` on the url-analysis service.
fn start(mode: Mode, timeout: u32, extra: &[&str]) -> SeedLab {
    let mut seed = SeedLab::start_with(mode, "Cluster", extra);
    seed.lab
        .add_client(&ClientSpec {
            name: CLIENT2.into(),
            ip: CLIENT2_IP.parse::<Ipv4Addr>().expect("ip"),
            pod_routes: false,
        })
        .expect("second client");
    seed.change(|m| m.affinity_timeout = Some(timeout));
    seed
}

/// The pod a request reached (its IP), checking that it is one of the seed's two.
fn reached(seed: &SeedLab, from: &Host, url: &str) -> String {
    let ip = seed.hello(from, url).server_ip;
    assert!(
        ip == POD_A.1 || ip == POD_B.1,
        "{ip} is not a url-analysis pod"
    );
    ip
}

/// `n` requests from one host; all must land on the same pod, which is returned.
fn sticks(seed: &SeedLab, from: &Host, url: &str, n: usize) -> String {
    let first = reached(seed, from, url);
    for i in 1..n {
        let pod = reached(seed, from, url);
        assert_eq!(pod, first, "{from:?} → {url}: request {i} left its pod");
    }
    first
}

fn other_pod(ip: &str) -> &'static str {
    if ip == POD_A.1 {
        POD_B.1
    } else {
        POD_A.1
    }
}

/// A client's affinity record on a node, as the kernel holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Record {
    /// The endpoint IP it pins the client to.
    endpoint: String,
    /// nftables: seconds until it expires. iptables: jiffies when last seen.
    clock: u64,
}

/// Every client's records on `node`: nftables pins of the node port (`nodeport-affinity`) and
/// ClusterIP (`affinity`) maps, or iptables `recent` lists of the `KUBE-SEP-` chains.
fn records(seed: &SeedLab, node: &str) -> BTreeMap<String, Vec<Record>> {
    let mut out: BTreeMap<String, Vec<Record>> = BTreeMap::new();
    match seed.mode.iptables() {
        None => {
            for map in ["nodeport-affinity", "affinity"] {
                let json = seed
                    .lab
                    .exec(node, ["nft", "-j", "list", "map", "ip", "ferry", map])
                    .expect("nft list map");
                let doc: Value = serde_json::from_str(&json).expect("nft json");
                let objects = doc["nftables"].as_array().cloned().unwrap_or_default();
                for elem in objects.iter().filter_map(|o| o["map"]["elem"].as_array()) {
                    for pair in elem {
                        let key = pair[0]["elem"]["val"]["concat"].as_array().expect("key");
                        let client = key.last().and_then(Value::as_str).expect("client");
                        out.entry(client.to_owned()).or_default().push(Record {
                            endpoint: pair[1]["concat"][0].as_str().expect("ip").to_owned(),
                            clock: pair[0]["elem"]["expires"].as_u64().unwrap_or(0),
                        });
                    }
                }
            }
        }
        Some(iptables) => {
            // KUBE-SEP- chain → endpoint IP, from the DNAT rules.
            let save = seed
                .lab
                .exec(
                    node,
                    [format!("{iptables}-save"), "-t".into(), "nat".into()],
                )
                .expect("iptables-save");
            let endpoints: BTreeMap<&str, &str> = save
                .lines()
                .filter_map(|l| {
                    let chain = l.strip_prefix("-A ")?.split(' ').next()?;
                    let to = l.split("--to-destination ").nth(1)?;
                    Some((chain, to.split(':').next()?))
                })
                .collect();
            let lists = seed
                .lab
                .exec(
                    node,
                    ["sh", "-c", "grep -H . /proc/net/xt_recent/* || true"],
                )
                .expect("read xt_recent");
            for line in lists.lines() {
                // /proc/net/xt_recent/KUBE-SEP-X:src=10.1.1.100 ttl: 63 last_seen: 4297… …
                let Some((path, entry)) = line.split_once(":src=") else {
                    continue;
                };
                let chain = path.rsplit('/').next().expect("list name");
                let client = entry.split(' ').next().expect("src");
                let last_seen = entry
                    .split("last_seen: ")
                    .nth(1)
                    .and_then(|s| s.split(' ').next())
                    .and_then(|s| s.parse().ok())
                    .expect("last_seen");
                let endpoint = endpoints.get(chain).copied().unwrap_or("(gone)");
                out.entry(client.to_owned()).or_default().push(Record {
                    endpoint: endpoint.to_owned(),
                    clock: last_seen,
                });
            }
        }
    }
    out
}

/// The one record of `client` on `node` (panics when there is none or several).
fn record(seed: &SeedLab, node: &str, client: &str) -> Record {
    let all = records(seed, node);
    match all.get(client).map(Vec::as_slice) {
        Some([one]) => one.clone(),
        other => panic!("{node}: want one affinity record of {client}, got {other:?}"),
    }
}

/// The kernel's clock (jiffies) and its rate (`CONFIG_HZ`): xt_recent keeps entries after they
/// expire (until reaped), so iptables expiry is read against the kernel's own clock.
fn jiffies() -> u64 {
    let timers = std::fs::read_to_string("/proc/timer_list").expect("/proc/timer_list");
    timers
        .lines()
        .find_map(|l| l.strip_prefix("jiffies: "))
        .and_then(|j| j.trim().parse().ok())
        .expect("jiffies in /proc/timer_list")
}

fn hz() -> u64 {
    let out = std::process::Command::new("sh")
        .args(["-c", "zcat /proc/config.gz | grep '^CONFIG_HZ='"])
        .output()
        .expect("zcat");
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .strip_prefix("CONFIG_HZ=")
        .and_then(|h| h.parse().ok())
        .expect("CONFIG_HZ in /proc/config.gz")
}

/// Polls `done` every 200 ms until it holds (or panics after `limit`).
fn wait_until(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !done() {
        assert!(Instant::now() < deadline, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn clients_stick_to_one_pod_each_across_full_syncs(mode: Mode) {
    let mut seed = start(mode, 600, &["--sync-period", "2s"]);
    let client = Host::default_client();
    let client2 = Host::client(CLIENT2);
    let url = node_port_url(NODE1_IP);
    let pod1 = sticks(&seed, &client, &url, 12);
    let pod2 = sticks(&seed, &client2, &url, 12);
    // Each client is pinned on its own: one record each, to the pod it saw.
    assert_eq!(record(&seed, NODE1, CLIENT_IP).endpoint, pod1);
    assert_eq!(record(&seed, NODE1, CLIENT2_IP).endpoint, pod2);
    // ClusterIP traffic from a pod on another node is pinned too.
    let pod = Host::pod(MASTER_POD.0);
    let pinned = sticks(&seed, &pod, &cluster_url(), 8);
    assert_eq!(record(&seed, MASTER, MASTER_POD.1).endpoint, pinned);

    // `ferry explain --live` on the node agrees with the kernel: pins are not differences.
    let dir = seed.manifests.path().display().to_string();
    let mut args = vec![
        FERRY.to_owned(),
        "explain".into(),
        "--live".into(),
        "--manifests".into(),
        dir,
        "--node".into(),
        NODE1.into(),
        "--from".into(),
        CLIENT_IP.into(),
        "--to".into(),
        format!("{NODE1_IP}:{NODE_PORT}"),
        "--cluster-cidr".into(),
        "192.168.0.0/16".into(),
        "--proxy-mode".into(),
        mode.flag().into(),
    ];
    args.extend(mode.args());
    let out = seed.lab.exec(NODE1, &args).expect("ferry explain --live");
    assert!(out.contains("session affinity"), "{out}");
    assert!(out.contains("agrees with the compiled rules"), "{out}");

    // Full syncs keep the pins (two, so that the second replaces rules the first wrote).
    seed.force_full_sync(NODE1);
    seed.force_full_sync(NODE1);
    assert_eq!(record(&seed, NODE1, CLIENT_IP).endpoint, pod1);
    assert_eq!(record(&seed, NODE1, CLIENT2_IP).endpoint, pod2);
    assert_eq!(sticks(&seed, &client, &url, 6), pod1);
    assert_eq!(sticks(&seed, &client2, &url, 6), pod2);

    // So does a restart of Ferry (it rebuilds the rules it finds). The log is appended to:
    // wait for the new process's first full sync.
    let full = seed.full_syncs(NODE1);
    let ferry = seed.ferry(NODE1);
    ferry.stop().expect("stop ferry");
    ferry.restart().expect("restart ferry");
    seed.wait_full_synced(NODE1, full + 1);
    assert_eq!(record(&seed, NODE1, CLIENT_IP).endpoint, pod1);
    assert_eq!(sticks(&seed, &client, &url, 6), pod1);
    assert_eq!(sticks(&seed, &client2, &url, 6), pod2);
}

fn a_pin_expires_after_the_timeout_without_traffic(mode: Mode) {
    const TIMEOUT: u32 = 5;
    let seed = start(mode, TIMEOUT, &[]);
    let client = Host::default_client();
    let url = node_port_url(NODE1_IP);
    let pod = reached(&seed, &client, &url);
    let pin = record(&seed, NODE1, CLIENT_IP);
    assert_eq!(pin.endpoint, pod);

    // No traffic for longer than the timeout: the kernel drops the pin (nftables: the element
    // times out; iptables: the entry is older than `--seconds`, so `--rcheck` no longer matches).
    let limit = Duration::from_secs(u64::from(TIMEOUT) + 20);
    match mode.iptables() {
        None => wait_until("the pin expires", limit, || {
            !records(&seed, NODE1).contains_key(CLIENT_IP)
        }),
        Some(_) => {
            let span = u64::from(TIMEOUT) * hz();
            wait_until("the recent entry expires", limit, || {
                jiffies() > pin.clock + span
            });
            let now = record(&seed, NODE1, CLIENT_IP);
            assert_eq!(now, pin, "nothing refreshed the entry meanwhile");
        }
    }

    // The next connection is balanced afresh and pinned anew.
    let pod = reached(&seed, &client, &url);
    let fresh = record(&seed, NODE1, CLIENT_IP);
    assert_eq!(fresh.endpoint, pod);
    match mode.iptables() {
        // A new element with the whole timeout ahead of it.
        None => assert!(
            fresh.clock > 0 && fresh.clock <= u64::from(TIMEOUT),
            "{fresh:?}"
        ),
        Some(_) => assert!(fresh.clock > pin.clock, "{fresh:?} after {pin:?}"),
    }
}

fn removing_the_pinned_endpoint_moves_the_client_at_once(mode: Mode) {
    let mut seed = start(mode, 600, &[]);
    let client = Host::default_client();
    let url = node_port_url(NODE1_IP);
    let pinned = sticks(&seed, &client, &url, 6);
    let other = other_pod(&pinned);

    // The pinned pod leaves the EndpointSlice but keeps running (and answering): a stale pin
    // would still reach it.
    seed.change(|m| m.endpoints.retain(|(ip, _)| *ip == other));
    assert_eq!(sticks(&seed, &client, &url, 6), other);
    assert_eq!(record(&seed, NODE1, CLIENT_IP).endpoint, other);

    // It comes back: the client stays with the pod it is pinned to now.
    seed.change(|m| m.endpoints = vec![(POD_A.1, true), (POD_B.1, true)]);
    assert_eq!(sticks(&seed, &client, &url, 6), other);
}
