//! IPVS mode against a real IPVS kernel: the tests in `guest` run inside the qemu guest of
//! `ferry-lab/vm/ipvs-vm` (Debian's stock kernel), each in a network namespace of its own; the
//! one test outside boots the guest once and runs them there. As root:
//! `cargo test -p ferry-dataplane --test ipvs_kernel -- --include-ignored --nocapture`.

#[allow(dead_code)] // only `in_new_netns` is used here
mod support;

#[test]
#[ignore = "needs root: qemu IPVS guest"]
fn ipvs_tests_pass_in_the_guest() {
    ferry_lab::vm::run_guest_tests("guest::");
}

mod guest {
    use std::collections::BTreeSet;
    use std::io::{Read, Write};
    use std::net::{SocketAddr, TcpListener, TcpStream};
    use std::process::Command;
    use std::time::Duration;

    use ferry_compile::ipvs::{
        self, ipvsadm_list, RealServer, RealServerLine, Scheduler, VirtualAddress, VirtualServer,
    };
    use ferry_compile::{CompileConfig, Plan};
    use ferry_dataplane::iptables::{IptablesBackend, IptablesCli};
    use ferry_dataplane::ipvs::{Change, IpvsApplier, IpvsClient, Links};
    use ferry_model::fixtures::{ip, mk_endpoint, mk_node, mk_service, mk_slice, with_node_port};
    use ferry_model::{
        ClusterState, IpFamily, NodeContext, NodeView, Object, Protocol, ServiceName, TrafficPolicy,
    };

    use crate::support::in_new_netns;

    /// Runs `f` in a fresh namespace of the guest; does nothing outside it.
    fn in_guest_netns(f: impl FnOnce() + Send + 'static) {
        if !ferry_lab::vm::in_guest() {
            eprintln!("skipped: runs inside the IPVS guest (ipvs_tests_pass_in_the_guest)");
            return;
        }
        in_new_netns(f);
    }

    fn sh(cmd: &str) -> String {
        let out = Command::new("sh").args(["-c", cmd]).output().expect("sh");
        assert!(
            out.status.success(),
            "{cmd}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn va(proto: Protocol, addr: &str) -> VirtualAddress {
        let s: SocketAddr = addr.parse().expect("socket address");
        VirtualAddress {
            protocol: proto,
            ip: s.ip(),
            port: s.port(),
        }
    }

    /// `ipvsadm -Ln`'s blocks (a service line and its real server lines, sorted), trailing
    /// spaces trimmed, as a set: ipvsadm lists services in hash order and a service's real
    /// servers newest first.
    fn blocks(text: &str) -> BTreeSet<Vec<String>> {
        let mut out = BTreeSet::new();
        let mut cur: Vec<String> = Vec::new();
        for line in text.lines().skip(3) {
            if !line.starts_with("  ->") && !cur.is_empty() {
                cur[1..].sort();
                out.insert(std::mem::take(&mut cur));
            }
            cur.push(line.trim_end().to_owned());
        }
        if !cur.is_empty() {
            cur[1..].sort();
            out.insert(cur);
        }
        out
    }

    #[test]
    #[ignore = "needs root: qemu IPVS guest"]
    fn the_client_programs_what_ipvsadm_shows() {
        in_guest_netns(|| {
            // IPVS refuses (EINVAL) an IPv4 real server the node has no route to.
            sh(
                "ip link add pods type dummy && ip addr add 10.0.0.1/24 dev pods \
                && ip link set pods up",
            );
            let mut c = IpvsClient::open().expect("IPVS family");
            let web = va(Protocol::Tcp, "10.96.0.10:80");
            let dns = va(Protocol::Udp, "[fd00:96::10]:53");
            let sticky = VirtualServer::new(Scheduler::Mh, Some(10800), IpFamily::V6);
            let changes = vec![
                Change::AddService(web, VirtualServer::new(Scheduler::Rr, None, IpFamily::V4)),
                Change::AddReal(
                    web,
                    RealServer::endpoint("10.0.0.5:8080".parse().expect("address")),
                ),
                Change::AddReal(
                    web,
                    RealServer::endpoint("10.0.0.6:8080".parse().expect("address")),
                ),
                Change::AddService(dns, sticky.clone()),
                Change::AddReal(
                    dns,
                    RealServer::endpoint("[fd00::5]:53".parse().expect("address")),
                ),
            ];
            let refused = c.apply(&changes).expect("apply");
            assert!(refused.is_empty(), "{refused:?}");
            let table = c.table().expect("dump");
            assert_eq!(table.len(), 2);
            assert_eq!(table[&dns].0, sticky);
            assert_eq!(table[&web].1.len(), 2);
            let ours = ipvsadm_list(table.iter().map(|(a, (vs, reals))| {
                let lines = reals
                    .iter()
                    .map(|r| RealServerLine {
                        address: r.server.address,
                        forward: r.server.forward,
                        weight: r.server.weight,
                        active: r.active,
                        inactive: r.inactive,
                    })
                    .collect();
                (a, vs, lines)
            }));
            let theirs = sh("ipvsadm -Ln");
            println!("{theirs}");
            assert_eq!(theirs.lines().next(), ours.lines().next(), "header");
            assert_eq!(blocks(&theirs), blocks(&ours));
            // An existing service is refused, the rest of the batch still applies.
            let mut drained = RealServer::endpoint("10.0.0.6:8080".parse().expect("address"));
            drained.weight = 0;
            let refused = c
                .apply(&[
                    Change::AddService(web, VirtualServer::new(Scheduler::Rr, None, IpFamily::V4)),
                    Change::UpdateReal(web, drained),
                    Change::DeleteService(dns),
                ])
                .expect("apply");
            assert_eq!(refused.len(), 1, "{refused:?}");
            let table = c.table().expect("dump");
            assert_eq!(table.len(), 1);
            assert!(table[&web].1.iter().any(|r| r.server == drained));
            c.set_timeouts(900, 120, 300).expect("set timeouts");
            assert_eq!(c.timeouts().expect("timeouts"), (900, 120, 300));
            assert_eq!(c.info().expect("info").0, 0x010201);
        });
    }

    #[test]
    #[ignore = "needs root: qemu IPVS guest"]
    fn kube_ipvs0_is_a_down_noarp_dummy_with_host_addresses() {
        in_guest_netns(|| {
            let mut links = Links::open().expect("rtnetlink");
            let (index, created) = links.ensure_dummy("kube-ipvs0").expect("dummy");
            assert!(created);
            assert_eq!(
                links.ensure_dummy("kube-ipvs0").expect("again"),
                (index, false)
            );
            for a in ["10.96.0.1", "10.96.0.10", "fd00:96::1", "10.96.0.1"] {
                links
                    .add_address(index, a.parse().expect("address"))
                    .expect("add");
            }
            links
                .delete_address(index, "10.96.0.10".parse().expect("address"))
                .expect("del");
            links
                .delete_address(index, "10.96.0.10".parse().expect("address"))
                .expect("del again");
            let shown = sh("ip addr show kube-ipvs0");
            println!("{shown}");
            assert!(shown.contains("<BROADCAST,NOARP>"), "{shown}");
            assert!(shown.contains("state DOWN"), "{shown}");
            assert!(shown.contains("inet 10.96.0.1/32 scope global kube-ipvs0"));
            assert!(shown.contains("inet6 fd00:96::1/128"));
            assert!(!shown.contains("10.96.0.10"));
            let mut addrs = links.addresses(index).expect("list");
            addrs.sort();
            assert_eq!(addrs, vec![ip("10.96.0.1"), ip("fd00:96::1")]);
            assert!(links.delete("kube-ipvs0").expect("delete"));
            assert_eq!(links.index_of("kube-ipvs0").expect("lookup"), None);
        });
    }

    /// A node (this namespace) with two pods behind veths, each answering its name over TCP.
    struct Pods(Vec<String>);

    impl Drop for Pods {
        fn drop(&mut self) {
            for ns in &self.0 {
                let _ = Command::new("ip").args(["netns", "del", ns]).status();
            }
        }
    }

    fn pods(n: u8) -> Pods {
        let mut names = Vec::new();
        sh("ip link set lo up");
        for i in 1..=n {
            let ns = format!("ferry-ipvs-pod{i}-{}", std::process::id());
            sh(&format!(
                "ip netns add {ns} && ip link add vpod{i} type veth peer name eth0 netns {ns} \
                 && ip addr add 10.0.{i}.1/24 dev vpod{i} && ip link set vpod{i} up \
                 && ip -n {ns} link set lo up && ip -n {ns} addr add 10.0.{i}.5/24 dev eth0 \
                 && ip -n {ns} link set eth0 up && ip -n {ns} route add default via 10.0.{i}.1"
            ));
            let path = format!("/run/netns/{ns}");
            let name = format!("pod{i}");
            std::thread::spawn(move || {
                let f = std::fs::File::open(path).expect("netns file");
                nix::sched::setns(f, nix::sched::CloneFlags::CLONE_NEWNET).expect("setns");
                let l = TcpListener::bind("0.0.0.0:8080").expect("listen");
                for mut s in l.incoming().flatten() {
                    let name = name.clone();
                    std::thread::spawn(move || {
                        let _ = s.write_all(name.as_bytes());
                        // Keep the connection open until the client closes it.
                        let _ = s.read(&mut [0u8; 16]);
                    });
                }
            });
            names.push(ns);
        }
        std::thread::sleep(Duration::from_millis(200));
        Pods(names)
    }

    /// Connects and reads the pod's name (the connection stays open while the stream lives).
    fn ask(addr: &str) -> Result<(String, TcpStream), std::io::Error> {
        let mut s =
            TcpStream::connect_timeout(&addr.parse().expect("address"), Duration::from_secs(2))?;
        s.set_read_timeout(Some(Duration::from_secs(2)))?;
        let mut buf = [0u8; 16];
        let n = s.read(&mut buf)?;
        Ok((String::from_utf8_lossy(&buf[..n]).into_owned(), s))
    }

    fn ruleset(endpoints: &[&str], policy: TrafficPolicy) -> ipvs::Ruleset {
        let mut state = ClusterState::new();
        let svc = with_node_port(mk_service("dev", "web", "10.96.0.10", 80), 30080, policy);
        state.apply(Object::Service(svc));
        let eps = endpoints.iter().map(|e| mk_endpoint(e, "n2")).collect();
        state.apply(Object::EndpointSlice(mk_slice("dev", "web", 8080, eps)));
        state.apply(Object::Node(mk_node("n1", "10.1.1.17", "10.0.0.0/16")));
        let ctx = NodeContext {
            node_name: "n1".into(),
            family: IpFamily::V4,
        };
        let cfg = CompileConfig {
            local_detector: ferry_compile::config::LocalDetector::ClusterCidr(vec!["10.0.0.0/16"
                .parse()
                .expect("cidr")]),
            ..CompileConfig::default()
        };
        let plan = Plan::build(&NodeView::build(&state, &ctx), &cfg);
        let local = [ip("10.1.1.17")];
        let rctx = ipvs::RenderContext::new(&plan, &cfg, &local);
        ipvs::render(&plan, &cfg, &rctx)
    }

    fn changes(
        rs: &ipvs::Ruleset,
        names: &BTreeSet<ServiceName>,
    ) -> std::collections::BTreeMap<ServiceName, Option<ipvs::ServiceIpvs>> {
        names
            .iter()
            .map(|n| (n.clone(), rs.services.get(n).cloned()))
            .collect()
    }

    fn applier() -> IpvsApplier {
        IpvsApplier::new(
            IpFamily::V4,
            IptablesCli::new(IptablesBackend::Nft),
            Default::default(),
        )
    }

    #[test]
    #[ignore = "needs root: qemu IPVS guest"]
    fn the_applier_balances_real_connections_and_drains_removed_endpoints() {
        in_guest_netns(|| {
            let _pods = pods(2);
            // The node's address for NodePorts.
            sh(
                "ip link add eth0 type veth peer name lan0 && ip addr add 10.1.1.17/24 dev eth0 \
                && ip link set eth0 up && ip link set lan0 up",
            );
            let mut dp = applier();
            let desired = ruleset(&["10.0.1.5", "10.0.2.5"], TrafficPolicy::Cluster);
            let report = dp.apply_full(&desired).expect("full apply");
            println!("{report:?}\n{}", sh("ipvsadm -Ln"));
            assert_eq!(blocks(&sh("ipvsadm -Ln")), blocks(&desired.ipvsadm()));
            assert!(sh("ipset list KUBE-CLUSTER-IP").contains("10.96.0.10,tcp:80"));
            assert!(sh("ip addr show kube-ipvs0").contains("inet 10.96.0.10/32"));
            let mut seen = BTreeSet::new();
            let mut open = Vec::new();
            for _ in 0..4 {
                let (who, s) = ask("10.96.0.10:80").expect("through the ClusterIP");
                seen.insert(who);
                open.push(s);
            }
            assert_eq!(seen, BTreeSet::from(["pod1".into(), "pod2".into()]));
            let (who, _s) = ask("10.1.1.17:30080").expect("through the NodePort");
            assert!(who.starts_with("pod"));
            // pod2 leaves while connections to it are open: weight 0, kept until they end.
            let after = ruleset(&["10.0.1.5"], TrafficPolicy::Cluster);
            let changed = BTreeSet::from([ServiceName::new("dev", "web")]);
            let report = dp
                .apply_changes(changes(&after, &changed))
                .expect("incremental");
            println!("{report:?}\n{}", sh("ipvsadm -Ln"));
            assert!(report.drained >= 1, "{report:?}");
            let pod2 = sh("ipvsadm -Ln -t 10.96.0.10:80");
            let line: Vec<&str> = pod2
                .lines()
                .find(|l| l.contains("10.0.2.5:8080"))
                .expect("pod2 still listed while its connections are open")
                .split_whitespace()
                .collect();
            assert_eq!(line[2..4], ["Masq", "0"], "weight 0: {pod2}");
            for _ in 0..3 {
                assert_eq!(ask("10.96.0.10:80").expect("still served").0, "pod1");
            }
            // The service goes: its virtual servers, set entries and address go too.
            let empty = ipvs::Ruleset {
                services: Default::default(),
                ..after.clone()
            };
            drop(open);
            dp.apply_changes(changes(&empty, &changed)).expect("delete");
            assert_eq!(sh("ipvsadm -Ln | tail -n +4"), "");
            assert!(!sh("ip addr show kube-ipvs0").contains("10.96.0.10"));
            assert!(!sh("ipset list KUBE-CLUSTER-IP").contains("10.96.0.10"));
            assert!(dp.draining().is_empty());
        });
    }

    #[test]
    #[ignore = "needs root: qemu IPVS guest"]
    fn a_local_nodeport_without_local_endpoints_has_an_empty_virtual_server() {
        in_guest_netns(|| {
            let _pods = pods(1);
            sh(
                "ip link add eth0 type veth peer name lan0 && ip addr add 10.1.1.17/24 dev eth0 \
                && ip link set eth0 up && ip link set lan0 up",
            );
            let mut dp = applier();
            let desired = ruleset(&["10.0.1.5"], TrafficPolicy::Local);
            dp.apply_full(&desired).expect("full apply");
            let list = sh("ipvsadm -Ln");
            println!("{list}");
            // The NodePort's virtual server exists, with no real server.
            assert!(
                blocks(&list).contains(&vec!["TCP  10.1.1.17:30080 rr".to_owned()]),
                "{list}"
            );
            assert!(sh("ipset list KUBE-NODE-PORT-LOCAL-TCP").contains("\n30080"));
            let outcome = ask("10.1.1.17:30080").map(|(w, _)| w);
            println!("connecting to the empty NodePort virtual server: {outcome:?}");
            assert!(
                outcome.is_err(),
                "no real server, yet answered: {outcome:?}"
            );
        });
    }
}
