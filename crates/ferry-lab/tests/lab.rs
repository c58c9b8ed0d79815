//! End-to-end tests of the lab harness itself. They need root; otherwise they print a message
//! and pass.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use ferry_lab::spec::{MASTER, NODE1, NODE2};
use ferry_lab::{
    echo_body, http, running_as_root, ClientSpec, CurlOptions, CurlResult, Host, Lab, LabError,
    LabSpec, PodProgram,
};

const POD_A: &str = "url-analysis-deployment-547845566c-4rt9d";
const POD_B: &str = "url-analysis-deployment-547845566c-pftqj";
const POD_M: &str = "url-analysis-deployment-547845566c-hgnlm";
const IP_A: Ipv4Addr = Ipv4Addr::new(192, 168, 169, 166);
const IP_B: Ipv4Addr = Ipv4Addr::new(192, 168, 169, 168);
const IP_M: Ipv4Addr = Ipv4Addr::new(192, 168, 235, 200);
const PORT: u16 = 8080;

/// Lab tests are `#[ignore = "needs root: network namespaces"]`; run without root (with
/// `--include-ignored`) they fail here.
fn need_root() {
    assert!(
        running_as_root(),
        "ferry-lab tests need root to create network namespaces"
    );
}

fn echo() -> PodProgram {
    PodProgram::new(env!("CARGO_BIN_EXE_ferry-lab-echo"))
}

fn lab_namespaces(prefix: &str) -> Vec<String> {
    let start = format!("{prefix}-");
    ferry_lab::netns::list()
        .expect("list namespaces")
        .into_iter()
        .filter(|n| n.starts_with(&start))
        .collect()
}

fn hello(ip: Ipv4Addr) -> String {
    format!("http://{ip}:{PORT}/hello")
}

fn body(client: Ipv4Addr, name: &str, server: Ipv4Addr) -> CurlResult {
    CurlResult::Ok(echo_body(name, IpAddr::V4(client), IpAddr::V4(server)))
}

#[test]
#[ignore = "needs root: network namespaces"]
fn seed_lab_end_to_end() {
    need_root();
    let t0 = Instant::now();
    let mut lab = Lab::seed004().expect("build lab");
    let built = t0.elapsed();
    let t1 = Instant::now();
    lab.add_echo_pod(NODE2, POD_A, IP_A, PORT, &echo())
        .expect("pod A");
    lab.add_echo_pod(NODE2, POD_B, IP_B, PORT, &echo())
        .expect("pod B");
    lab.add_echo_pod(MASTER, POD_M, IP_M, PORT, &echo())
        .expect("pod M");
    let pods = t1.elapsed();
    let prefix = lab.prefix().to_string();
    assert_eq!(lab_namespaces(&prefix).len(), 1 + 3 + 1 + 3);

    let client = Host::default_client();
    let node2_ip = Ipv4Addr::new(10, 1, 1, 9);
    let client_ip = Ipv4Addr::new(10, 1, 1, 100);
    let checks: Vec<(Host, String, CurlResult)> = vec![
        // Client -> pod IP directly (routed via k8s-node2): no NAT anywhere.
        (client.clone(), hello(IP_A), body(client_ip, POD_A, IP_A)),
        (client.clone(), hello(IP_B), body(client_ip, POD_B, IP_B)),
        // Pod on master -> pod on node2, across the LAN.
        (Host::pod(POD_M), hello(IP_A), body(IP_M, POD_A, IP_A)),
        // Pod on node2 -> pod on master.
        (Host::pod(POD_B), hello(IP_M), body(IP_B, POD_M, IP_M)),
        // Pod -> neighbour pod on the same node (via the node, no bridge).
        (Host::pod(POD_A), hello(IP_B), body(IP_A, POD_B, IP_B)),
        // A pod reaches itself.
        (Host::pod(POD_A), hello(IP_A), body(IP_A, POD_A, IP_A)),
        // Node -> its own pod: source is the node's eth0 address.
        (Host::node(NODE2), hello(IP_A), body(node2_ip, POD_A, IP_A)),
        // Another node -> a pod on master: routed via k8s-master.
        (
            Host::node(NODE1),
            hello(IP_M),
            body(Ipv4Addr::new(10, 1, 1, 17), POD_M, IP_M),
        ),
        // Wrong path -> 404.
        (
            client.clone(),
            format!("http://{IP_A}:{PORT}/nope"),
            CurlResult::Http {
                status: 404,
                body: "not found\n".into(),
            },
        ),
        // Nobody listens -> refused.
        (
            client.clone(),
            format!("http://{IP_A}:9999/hello"),
            CurlResult::Refused,
        ),
        (
            Host::node(MASTER),
            format!("http://{node2_ip}:32223/hello"),
            CurlResult::Refused,
        ),
    ];
    for (from, url, want) in &checks {
        let got = lab.curl(from, url).expect("run curl");
        assert_eq!(&got, want, "curl {url} from {from}\n{}", lab.debug_dump());
    }

    // The dead-end gateway is a blackhole: connections time out (also for the service range,
    // which nodes route to it).
    let fast = CurlOptions {
        connect_timeout: Duration::from_millis(700),
        max_time: Duration::from_secs(2),
        ..CurlOptions::default()
    };
    let blackholed = [
        (client.clone(), "http://10.1.1.1:80/"),
        (Host::node(MASTER), "http://10.96.240.122:8080/hello"),
        (Host::pod(POD_M), "http://10.96.240.122:8080/hello"),
    ];
    std::thread::scope(|s| {
        let (lab, fast) = (&lab, &fast);
        let runs: Vec<_> = blackholed
            .iter()
            .map(|(from, url)| s.spawn(move || (from, url, lab.curl_with(from, url, fast))))
            .collect();
        for r in runs {
            let (from, url, got) = r.join().expect("curl thread");
            assert_eq!(
                got.expect("run curl"),
                CurlResult::TimedOut,
                "curl {url} from {from}"
            );
        }
    });

    // A second client, added later.
    let c2 = Ipv4Addr::new(10, 1, 1, 101);
    lab.add_client(&ClientSpec {
        name: "client2".into(),
        ip: c2,
        pod_routes: true,
    })
    .expect("add client2");
    let got = lab
        .curl(&Host::client("client2"), &hello(IP_M))
        .expect("curl");
    assert_eq!(got, body(c2, POD_M, IP_M));

    // A long-lived connection serves several requests.
    let mut s = lab
        .connect(&client, SocketAddr::from((IP_B, PORT)))
        .expect("connect");
    let local = s.local_addr().expect("local addr");
    assert_eq!(local.ip(), IpAddr::V4(client_ip));
    for _ in 0..2 {
        let r = http::get(&mut s, "/hello").expect("keep-alive GET");
        assert_eq!(r.status, 200);
        assert_eq!(r.body, echo_body(POD_B, local.ip(), IpAddr::V4(IP_B)));
    }

    // Inspecting a node.
    let fwd = lab
        .exec(NODE2, ["sysctl", "-n", "net.ipv4.ip_forward"])
        .expect("exec");
    assert_eq!(fwd.trim(), "1");
    let routes = lab.exec(NODE2, ["ip", "route"]).expect("exec");
    let pod = lab.pod(POD_A).expect("pod").clone();
    assert!(
        routes.contains(&format!("{IP_A} dev {}", pod.host_veth)),
        "{routes}"
    );
    let err = lab.exec(NODE2, ["false"]).expect_err("false fails");
    assert!(
        err.to_string().contains(&pod.netns[..prefix.len()]),
        "{err}"
    );
    assert!(matches!(
        lab.curl(&Host::node("k8s-node9"), "http://x/"),
        Err(LabError::UnknownHost { .. })
    ));

    // Pod servers can be stopped and restarted.
    let srv = lab.pod_server(POD_A, PORT).expect("server A");
    srv.stop().expect("stop");
    assert_eq!(
        lab.curl(&client, &hello(IP_A)).expect("curl"),
        CurlResult::Refused
    );
    lab.restart_pod_server(POD_A, PORT).expect("restart");
    assert_eq!(
        lab.curl(&client, &hello(IP_A)).expect("curl"),
        body(client_ip, POD_A, IP_A)
    );
    let log = lab.pod_server(POD_A, PORT).expect("server A").log();
    assert_eq!(log.matches("listening on tcp").count(), 2, "{log}");

    drop(s);
    let t2 = Instant::now();
    lab.teardown().expect("teardown");
    let down = t2.elapsed();
    assert!(lab_namespaces(&prefix).is_empty());
    eprintln!("timing: lab built in {built:?}, 3 echo pods in {pods:?}, teardown in {down:?}");
}

#[test]
#[ignore = "needs root: network namespaces"]
fn drop_cleans_up_even_on_panic() {
    need_root();
    let mut spec = LabSpec::seed004();
    spec.clients.clear();
    let (tx, rx) = std::sync::mpsc::channel();
    let res = std::panic::catch_unwind(move || {
        let mut lab = Lab::build(&spec).expect("build lab");
        lab.add_echo_pod(NODE1, "p1", Ipv4Addr::new(192, 168, 36, 70), PORT, &echo())
            .expect("pod");
        let agent = lab.spawn_on_node(NODE1, "sleep", ["1000"]).expect("spawn");
        // A process the lab does not track: found by scanning the namespace.
        let stray = lab
            .spawn_on_node(MASTER, "sleep", ["1000"])
            .expect("spawn")
            .detach()
            .expect("pid");
        let _keep = agent;
        tx.send((lab.prefix().to_string(), stray)).expect("send");
        panic!("test panics with the lab alive");
    });
    assert!(res.is_err());
    let (prefix, stray) = rx.recv().expect("prefix");
    assert!(
        lab_namespaces(&prefix).is_empty(),
        "{:?}",
        lab_namespaces(&prefix)
    );
    // The stray `sleep` was SIGKILLed; it is our (unreaped) child, so reap it.
    let status =
        nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(stray as i32), None).expect("waitpid");
    assert!(
        matches!(
            status,
            nix::sys::wait::WaitStatus::Signaled(_, nix::sys::signal::Signal::SIGKILL, _)
        ),
        "{status:?}"
    );
}

#[test]
#[ignore = "needs root: network namespaces"]
fn failed_build_removes_what_it_created() {
    need_root();
    let prefix = format!("fb{}", std::process::id());
    let mut spec = LabSpec::seed004();
    spec.prefix = Some(prefix.clone());
    spec.gateway = Ipv4Addr::new(10, 9, 9, 9); // not on the LAN: `route add default` fails
    let err = Lab::build(&spec).expect_err("build must fail");
    let msg = err.to_string();
    assert!(msg.contains("route add default via 10.9.9.9"), "{msg}");
    assert!(msg.contains(&format!("{prefix}-n")), "{msg}");
    assert!(
        lab_namespaces(&prefix).is_empty(),
        "{:?}",
        lab_namespaces(&prefix)
    );
}

#[test]
#[ignore = "needs root: network namespaces"]
fn processes_log_restart_and_pod_errors() {
    need_root();
    let mut spec = LabSpec::seed004();
    spec.nodes.truncate(1);
    let mut lab = Lab::build(&spec).expect("build lab");
    let mut p = lab
        .spawn_on_node(
            MASTER,
            "sh",
            ["-c", "ip -br addr show eth0; echo ready; exec sleep 1000"],
        )
        .expect("spawn");
    let wait_for = |p: &ferry_lab::LabProcess, n: usize| {
        let deadline = Instant::now() + Duration::from_secs(10);
        while p.log().lines().filter(|l| *l == "ready").count() < n {
            assert!(Instant::now() < deadline, "log: {}", p.log());
            std::thread::sleep(Duration::from_millis(10));
        }
    };
    wait_for(&p, 1);
    assert!(p.log().contains("10.1.1.12/24"), "{}", p.log());
    assert!(p.is_running());
    p.restart().expect("restart");
    wait_for(&p, 2);
    assert_eq!(p.log().matches("=== ferry-lab: starting").count(), 2);
    let status = p.stop().expect("stop").expect("was running");
    assert!(!status.success());
    assert!(!p.is_running());

    // A pod server that exits at once is reported with its log.
    lab.add_pod(MASTER, "bad", Ipv4Addr::new(192, 168, 235, 201))
        .expect("pod");
    let err = lab
        .start_pod_server(
            "bad",
            PORT,
            &PodProgram::new("sh").arg("-c").arg("echo boom; exit 3"),
        )
        .expect_err("must fail");
    assert!(matches!(err, LabError::ServerNotReady { .. }), "{err}");
    assert!(err.to_string().contains("boom"), "{err}");
    // Bad pod IPs are refused before touching the kernel.
    assert!(matches!(
        lab.add_pod(MASTER, "out", Ipv4Addr::new(192, 168, 36, 70)),
        Err(LabError::BadPodIp { .. })
    ));
    lab.remove_pod("bad").expect("remove pod");
    assert!(lab.pod("bad").is_err());
    // Name and IP are free again at once.
    lab.add_echo_pod(
        MASTER,
        "bad",
        Ipv4Addr::new(192, 168, 235, 201),
        PORT,
        &echo(),
    )
    .expect("re-add pod");
    let got = lab
        .curl(&Host::node(MASTER), "http://192.168.235.201:8080/hello")
        .expect("curl");
    assert_eq!(
        got,
        body(
            Ipv4Addr::new(10, 1, 1, 12),
            "bad",
            Ipv4Addr::new(192, 168, 235, 201)
        )
    );

    // The lab's own sockets: a UDP echo bound in a pod from a thread of this process.
    lab.add_pod(MASTER, "udp", Ipv4Addr::new(192, 168, 235, 202))
        .expect("pod");
    let sock = lab
        .run_in(&Host::pod("udp"), || {
            std::net::UdpSocket::bind((Ipv4Addr::new(192, 168, 235, 202), 0))
        })
        .expect("setns")
        .expect("bind");
    assert_eq!(
        sock.local_addr().expect("addr").ip(),
        IpAddr::V4(Ipv4Addr::new(192, 168, 235, 202))
    );
    drop(sock);
    let prefix = lab.prefix().to_string();
    drop(lab);
    assert!(lab_namespaces(&prefix).is_empty());
}

#[test]
#[ignore = "needs root: network namespaces"]
fn cleanup_stale_removes_leftovers() {
    need_root();
    let prefix = format!("st{}", std::process::id());
    let names = vec![format!("{prefix}-lan"), format!("{prefix}-n0")];
    ferry_lab::netns::add(&names).expect("add");
    let mut removed = Lab::cleanup_stale(&prefix).expect("cleanup");
    removed.sort();
    assert_eq!(removed, names);
    assert!(lab_namespaces(&prefix).is_empty());
    // Orphans: an automatic prefix whose pid does not exist (pid_max is at most 2^22).
    let orphan = vec!["fy99999999x0-lan".to_string()];
    ferry_lab::netns::add(&orphan).expect("add");
    let removed = Lab::cleanup_orphans().expect("cleanup");
    assert!(removed.contains(&orphan[0]), "{removed:?}");
    assert!(lab_namespaces("fy99999999x0").is_empty());
}

/// The topology is fit for a proxy: hand-written nft DNAT + masquerade on k8s-node2 gives
/// the seed's behaviour (hairpin through the Service, SNAT to the node's eth0 address).
#[test]
#[ignore = "needs root: network namespaces"]
fn hand_written_dnat_hairpin_works() {
    need_root();
    let mut lab = Lab::seed004().expect("build lab");
    lab.add_echo_pod(NODE2, POD_A, IP_A, PORT, &echo())
        .expect("pod A");
    let rules = format!(
        "table ip labtest {{
  chain svc {{ ip daddr 10.96.240.122 tcp dport 8080 meta mark set 0x4000 dnat to {IP_A}:{PORT}; }}
  chain pre {{ type nat hook prerouting priority -100; jump svc; }}
  chain out {{ type nat hook output priority -100; jump svc; }}
  chain post {{ type nat hook postrouting priority 100; meta mark 0x4000 masquerade; }}
}}
"
    );
    let file = lab.dir().join("rules.nft");
    std::fs::write(&file, rules).expect("write rules");
    lab.exec(NODE2, ["nft", "-f", file.to_str().expect("utf-8 path")])
        .expect("load rules");
    let url = "http://10.96.240.122:8080/hello";
    let node2 = Ipv4Addr::new(10, 1, 1, 9);
    // Hairpin: the pod reaches itself through the Service; masquerade picks node2's eth0.
    let got = lab.curl(&Host::pod(POD_A), url).expect("curl");
    assert_eq!(got, body(node2, POD_A, IP_A), "{}", lab.debug_dump());
    // Node -> ClusterIP (needs the default route to the dead-end gateway).
    let got = lab.curl(&Host::node(NODE2), url).expect("curl");
    assert_eq!(got, body(node2, POD_A, IP_A));
    // Other nodes have no rules: the ClusterIP is a blackhole there.
    let fast = CurlOptions {
        connect_timeout: Duration::from_millis(500),
        ..CurlOptions::default()
    };
    let got = lab
        .curl_with(&Host::node(MASTER), url, &fast)
        .expect("curl");
    assert_eq!(got, CurlResult::TimedOut);
    let ruleset = lab.exec(NODE2, ["nft", "list", "ruleset"]).expect("list");
    assert!(ruleset.contains("table ip labtest"), "{ruleset}");
    assert!(!lab
        .exec(MASTER, ["nft", "list", "ruleset"])
        .expect("list")
        .contains("labtest"));
}
