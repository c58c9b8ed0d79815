//! IPVS-specific lab cases (`lab_ipvs.rs`, inside the IPVS guest): the scheduler, persistence,
//! graceful termination, kube-ipvs0's addresses, load-balancer and external IPs, and
//! `ferry explain --live` for every seed flow, each with real packets.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use ferry_lab::spec::{MASTER, NODE1, NODE2};
use ferry_lab::{http, CurlResult, Host};

use crate::flows::{Expect, From, EXTRA_MANIFESTS, FLOWS, SECONDARY};
use crate::lb::{self, Lb, CLIENT2, CLIENT2_IP, CLIENT_IP, NODE1_IP, NODE2_IP};
use crate::seed::*;

fn master_pod() -> Host {
    Host::pod(MASTER_POD.0)
}

fn ipvsadm(seed: &SeedLab, node: &str) -> String {
    seed.lab
        .exec(node, ["ipvsadm", "-Ln"])
        .expect("ipvsadm -Ln")
}

/// The real server lines of one virtual server (`TCP  10.96.198.86:8080 rr` …).
fn real_servers(list: &str, service: &str) -> Vec<String> {
    list.lines()
        .skip_while(|l| !l.starts_with(service))
        .skip(1)
        .take_while(|l| l.starts_with("  ->"))
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect()
}

/// Polls `check` (every 100 ms, up to `secs` [scaled](ferry_lab::scaled)) until it is true.
fn wait_for(secs: u64, what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + ferry_lab::scaled(Duration::from_secs(secs));
    while !check() {
        assert!(Instant::now() < deadline, "not within {secs} s: {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `--ipvs-scheduler sh`: the virtual servers use source hashing, so one client always lands
/// on the same pod; the default `rr` spreads (case 1 of the matrix).
pub fn the_scheduler_is_the_configured_one() {
    let seed = SeedLab::start_with(Mode::Ipvs, "Cluster", &["--ipvs-scheduler", "sh"]);
    let list = ipvsadm(&seed, MASTER);
    assert!(
        list.contains(&format!("TCP  {CLUSTER_IP}:8080 sh")),
        "{list}"
    );
    assert!(list.contains("TCP  10.1.1.12:32223 sh"), "{list}");
    let servers: BTreeSet<String> = (0..10)
        .map(|_| seed.hello(&master_pod(), &cluster_url()).server_ip)
        .collect();
    assert_eq!(servers.len(), 1, "source hashing: {servers:?}");
}

/// `sessionAffinity: ClientIP` is IPVS persistence with the service's timeout: each client
/// keeps its pod.
pub fn session_affinity_is_persistence() {
    let mut seed = SeedLab::start(Mode::Ipvs, "Cluster");
    seed.change(|m| m.affinity_timeout = Some(60));
    let list = ipvsadm(&seed, MASTER);
    assert!(
        list.contains(&format!("TCP  {CLUSTER_IP}:8080 rr persistent 60")),
        "{list}"
    );
    for from in [master_pod(), Host::node(MASTER)] {
        let servers: BTreeSet<String> = (0..8)
            .map(|_| seed.hello(&from, &cluster_url()).server_ip)
            .collect();
        assert_eq!(servers.len(), 1, "{from}: {servers:?}");
    }
}

/// A removed endpoint with an open connection gets weight 0: the connection keeps working,
/// new ones go elsewhere; once its connections are gone, a later sync deletes it.
pub fn graceful_termination_drains_a_removed_endpoint() {
    let mut seed = SeedLab::start_with(Mode::Ipvs, "Cluster", &["--sync-period", "2s"]);
    let addr = format!("{CLUSTER_IP}:8080").parse().expect("addr");
    // Connect until the connection lands on pod B, which is then removed.
    let mut conn = loop {
        let mut c = seed.lab.connect(&master_pod(), addr).expect("connect");
        let r = http::get(&mut c, "/hello").expect("first request");
        if Hello::parse(&r.body).server_ip == POD_B.1 {
            break c;
        }
    };
    seed.change(|m| m.endpoints.retain(|(ip, _)| *ip != POD_B.1));
    let service = format!("TCP  {CLUSTER_IP}:8080 rr");
    let drained = format!("-> {}:56010 Masq 0 1 0", POD_B.1);
    // (The sync `change` waited for may have been a periodic one.)
    wait_for(20, "weight 0, one active connection", || {
        real_servers(&ipvsadm(&seed, MASTER), &service).contains(&drained)
    });
    let again = http::get(&mut conn, "/hello").expect("the open connection still works");
    assert_eq!(Hello::parse(&again.body).server_ip, POD_B.1);
    for _ in 0..6 {
        assert_eq!(seed.hello(&master_pod(), &cluster_url()).server_ip, POD_A.1);
    }
    // Abort the connection (RST): IPVS keeps a closed entry 10 s, then the drained real
    // server has no connection left and the next sync deletes it.
    let abort = nix::libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    nix::sys::socket::setsockopt(&conn, nix::sys::socket::sockopt::Linger, &abort)
        .expect("SO_LINGER 0");
    drop(conn);
    wait_for(40, "the drained real server is deleted", || {
        !ipvsadm(&seed, MASTER).contains(&format!("{}:56010", POD_B.1))
    });
}

/// kube-ipvs0 holds a service's ClusterIP and external IPs while it exists, on every node,
/// with their virtual servers and set entries; all go with the service.
pub fn kube_ipvs0_addresses_follow_the_services() {
    let mut seed = SeedLab::start(Mode::Ipvs, "Cluster");
    let svc = "apiVersion: v1\nkind: Service\nmetadata: {name: extra, namespace: dev}\nspec:\n  clusterIP: 10.96.7.7\n  externalIPs: [203.0.113.30]\n  ports: [{name: http, protocol: TCP, port: 80, targetPort: 56010}]\n---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: extra-abcde\n  namespace: dev\n  labels: {kubernetes.io/service-name: extra}\naddressType: IPv4\nports: [{name: http, port: 56010, protocol: TCP}]\nendpoints:\n- {addresses: [\"192.168.169.166\"], conditions: {ready: true}, nodeName: k8s-node2}\n";
    seed.apply("extra.yaml", svc);
    for (node, _) in NODES {
        let link = seed
            .lab
            .exec(node, ["ip", "addr", "show", "kube-ipvs0"])
            .expect("ip");
        for ip in ["10.96.7.7", "203.0.113.30"] {
            assert!(
                link.contains(&format!("inet {ip}/32 scope global kube-ipvs0")),
                "{node}: {link}"
            );
        }
        let list = ipvsadm(&seed, node);
        assert!(
            list.contains("TCP  10.96.7.7:80 rr") && list.contains("TCP  203.0.113.30:80 rr"),
            "{list}"
        );
        let set = seed
            .lab
            .exec(node, ["ipset", "list", "KUBE-EXTERNAL-IP"])
            .expect("ipset");
        assert!(set.contains("203.0.113.30,tcp:80"), "{set}");
    }
    let h = seed.hello(&master_pod(), "http://10.96.7.7:80/hello");
    assert_eq!(h.server_ip, POD_A.1);
    seed.apply("extra.yaml", "");
    for (node, _) in NODES {
        let link = seed
            .lab
            .exec(node, ["ip", "addr", "show", "kube-ipvs0"])
            .expect("ip");
        assert!(
            !link.contains("10.96.7.7") && !link.contains("203.0.113.30"),
            "{node}: {link}"
        );
        assert!(!ipvsadm(&seed, node).contains("10.96.7.7"), "{node}");
        let sets = seed.lab.exec(node, ["ipset", "save"]).expect("ipset");
        assert!(
            !sets.contains("10.96.7.7") && !sets.contains("203.0.113.30"),
            "{node}: {sets}"
        );
    }
}

/// Load-balancer and external IPs: Cluster policy masquerades to the node that received the
/// packet; Local keeps the client's address where the pods are and is refused elsewhere (the
/// node's virtual server has no real server); `ferry explain` agrees each time.
pub fn load_balancer_and_external_ips_follow_the_external_policy() {
    let both = Lb {
        external_ips: true,
        ..lb::LB
    };
    let mut seed = lb::start(Mode::Ipvs, &both);
    let c = (&Host::default_client(), CLIENT_IP);
    for (node, ip, lbip, ext) in [
        (NODE2, NODE2_IP, lb::LB_NODE2, lb::EXT_NODE2),
        (NODE1, NODE1_IP, lb::LB_NODE1, lb::EXT_NODE1),
    ] {
        lb::assert_forwarded(&seed, c, node, lbip, 8080, ip);
        lb::assert_forwarded(&seed, c, node, ext, 8080, ip);
    }
    lb::set(
        &mut seed,
        &Lb {
            policy: "Local",
            ..both
        },
    );
    // (`set` waits for a sync of each node, which may have been a periodic one.)
    for (node, _) in NODES {
        wait_for(20, "the Local policy is in the sets", || {
            let set = seed
                .lab
                .exec(node, ["ipset", "list", "KUBE-LOAD-BALANCER-LOCAL"]);
            set.is_ok_and(|s| s.contains("203.0.113.10,tcp:8080"))
        });
    }
    lb::assert_forwarded(&seed, c, NODE2, lb::LB_NODE2, 8080, CLIENT_IP);
    lb::assert_forwarded(&seed, c, NODE2, lb::EXT_NODE2, 8080, CLIENT_IP);
    for ip in [lb::LB_NODE1, lb::EXT_NODE1] {
        assert_eq!(
            seed.curl(c.0, &lb::url(ip, 8080)),
            CurlResult::Refused,
            "{ip}"
        );
        let v = lb::explain(&seed, NODE1, CLIENT_IP, ip, 8080);
        assert_eq!(v["verdict"], "rejected", "{v}");
    }
}

/// `loadBalancerSourceRanges`: the listed client gets through, the other is dropped in filter
/// `KUBE-SOURCE-RANGES-FIREWALL` (it times out); explain agrees.
pub fn source_ranges_admit_only_the_listed_clients() {
    let lb = Lb {
        source_ranges: &["10.1.1.100/32"],
        ..lb::LB
    };
    let seed = lb::start(Mode::Ipvs, &lb);
    let c1 = (&Host::default_client(), CLIENT_IP);
    let c2 = Host::client(CLIENT2);
    lb::assert_forwarded(&seed, c1, NODE2, lb::LB_NODE2, 8080, NODE2_IP);
    lb::assert_timed_out(
        &seed,
        (&c2, CLIENT2_IP),
        NODE2,
        lb::LB_NODE2,
        8080,
        "dropped",
    );
    let set = seed
        .lab
        .exec(NODE2, ["ipset", "list", "KUBE-LOAD-BALANCER-SOURCE-CIDR"])
        .expect("ipset");
    assert!(set.contains("203.0.113.10,tcp:8080,10.1.1.100"), "{set}");
}

fn host(from: crate::flows::From) -> Host {
    match from {
        From::Client => Host::default_client(),
        From::Node(n) => Host::node(n),
        From::Pod(name, _, _) => Host::pod(name),
    }
}

/// Every seed flow with real packets, and `ferry explain --proxy-mode ipvs --live` inside the
/// node predicting it and finding the kernel as Ferry compiled it.
pub fn flows_behave_as_explained(policy: &'static str) {
    let mut seed = SeedLab::start(Mode::Ipvs, policy);
    // The addresses first: IPVS mode reads the node's addresses at each sync (a NodePort
    // virtual server per address), and applying the extra Service syncs every node.
    for (node, ip) in SECONDARY {
        let ip = ip.parse().expect("address");
        seed.lab
            .add_node_address(node, ip)
            .expect("secondary address");
    }
    for (name, text) in EXTRA_MANIFESTS {
        seed.apply(name, text);
    }
    let dir = seed.manifests.path().display().to_string();
    for f in FLOWS.iter().filter(|f| f.policy == policy) {
        let from = host(f.from);
        let expect = f.expect_in("ipvs");
        let got = match expect {
            Expect::Dropped | Expect::Rejected | Expect::Untranslated => seed.curl(&from, &f.url()),
            Expect::Forwarded(peer) => {
                for _ in 0..4 {
                    let h = seed.hello(&from, &f.url());
                    assert!(
                        f.servers.contains(&h.server_ip.as_str()),
                        "{}: {h:?}",
                        f.name
                    );
                    let want = f.peer_seen(peer, &h.server_ip);
                    assert_eq!(h.client_ip, want, "{}: {h:?}", f.name);
                }
                CurlResult::Ok(String::new())
            }
        };
        let (verdict, curl) = match expect {
            Expect::Dropped => ("dropped", Some(CurlResult::TimedOut)),
            Expect::Rejected => ("rejected", Some(CurlResult::Refused)),
            // Nothing listens on the node's port: the node itself refuses.
            Expect::Untranslated => ("not-a-service", Some(CurlResult::Refused)),
            Expect::Forwarded(_) => ("forwarded", None),
        };
        if let Some(want) = curl {
            assert_eq!(got, want, "{}", f.name);
        }
        let mut argv = vec![FERRY.to_owned()];
        argv.extend(f.explain_args("ipvs", &dir));
        argv.push("--live".to_owned());
        let out = seed.lab.exec(f.node, argv).expect("ferry explain --live");
        let v: serde_json::Value = serde_json::from_str(&out).expect("json");
        assert_eq!(v["verdict"], verdict, "{}: {v}", f.name);
        assert_eq!(
            v["live"]["differences"],
            serde_json::json!([]),
            "{}: {v}",
            f.name
        );
        assert!(v["live"]["checked"].as_u64() > Some(0), "{}: {v}", f.name);
    }
}
