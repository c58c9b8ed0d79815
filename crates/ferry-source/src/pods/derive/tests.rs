//! Table-driven tests of [`endpoint_slices`] against upstream's EndpointSlice controller rules.

use std::collections::BTreeMap;

use ferry_model::fixtures::{ip, mk_node, mk_pod, mk_service, with_selector};
use ferry_model::{
    Container, ContainerPort, EndpointSlice, Node, Pod, PodPhase, PortRef, Protocol, Service,
};

use super::*;

/// `dev/web`: ClusterIP 172.30.0.10, port `http` 80 → targetPort `http`, selector `app: web`.
fn web() -> Service {
    let mut svc = with_selector(mk_service("dev", "web", "172.30.0.10", 80), "web");
    svc.ports[0].target_port = PortRef::Name("http".into());
    svc
}

fn nodes() -> BTreeMap<String, Node> {
    let mut a = mk_node("node-a", "192.168.0.1", "10.0.1.0/24");
    a.labels
        .insert("topology.kubernetes.io/zone".into(), "zone-a".into());
    let b = mk_node("node-b", "192.168.0.2", "10.0.2.0/24");
    [a, b].into_iter().map(|n| (n.name.clone(), n)).collect()
}

fn pod(name: &str, ip: &str) -> Pod {
    mk_pod("dev", name, "web", ip, "node-a")
}

/// One line per slice: `family [ports] endpoints`, an endpoint as `ip:RST` (ready, serving,
/// terminating; `-` when false) `@node/zone`.
fn summary(slices: &[EndpointSlice]) -> Vec<String> {
    slices
        .iter()
        .map(|s| {
            let ports: Vec<String> = s
                .ports
                .iter()
                .map(|p| format!("{}/{}/{}", p.name, p.protocol, p.port))
                .collect();
            let eps: Vec<String> = s
                .endpoints
                .iter()
                .map(|e| {
                    let c = e.conditions;
                    let flag = |b: bool, f: char| if b { f } else { '-' };
                    format!(
                        "{}:{}{}{}@{}/{}",
                        e.address,
                        flag(c.ready, 'R'),
                        flag(c.serving, 'S'),
                        flag(c.terminating, 'T'),
                        e.node_name().unwrap_or(""),
                        e.zone().unwrap_or("")
                    )
                })
                .collect();
            format!("{:?} [{}] {}", s.family, ports.join(","), eps.join(" "))
        })
        .collect()
}

struct Case {
    name: &'static str,
    service: Service,
    pods: Vec<Pod>,
    want: Vec<&'static str>,
}

fn with(mut pod: Pod, f: impl FnOnce(&mut Pod)) -> Pod {
    f(&mut pod);
    pod
}

fn cases() -> Vec<Case> {
    let publish = {
        let mut s = web();
        s.publish_not_ready_addresses = true;
        s
    };
    let numeric = {
        let mut s = web();
        s.ports[0].target_port = PortRef::Number(9000);
        s
    };
    let dual = {
        let mut s = web();
        s.cluster_ips.push(ip("fd00:30::10"));
        s
    };
    let not_ready = |p: Pod| with(p, |p| p.ready = false);
    let terminating = |p: Pod| {
        with(p, |p| {
            p.deletion_timestamp = Some("2024-05-01T10:00:00Z".into())
        })
    };
    vec![
        Case {
            name: "a ready pod is ready and serving, with its node and the node's zone",
            service: web(),
            pods: vec![pod("a", "10.0.1.1")],
            want: vec!["V4 [http/tcp/8080] 10.0.1.1:RS-@node-a/zone-a"],
        },
        Case {
            name: "a pod that is not ready is neither ready nor serving",
            service: web(),
            pods: vec![not_ready(pod("a", "10.0.1.1"))],
            want: vec!["V4 [http/tcp/8080] 10.0.1.1:---@node-a/zone-a"],
        },
        Case {
            name: "a terminating ready pod is serving and terminating, not ready",
            service: web(),
            pods: vec![terminating(pod("a", "10.0.1.1"))],
            want: vec!["V4 [http/tcp/8080] 10.0.1.1:-ST@node-a/zone-a"],
        },
        Case {
            name: "publishNotReadyAddresses makes every endpoint ready, terminating or not ready",
            service: publish.clone(),
            pods: vec![
                terminating(pod("a", "10.0.1.1")),
                not_ready(pod("b", "10.0.1.2")),
            ],
            want: vec!["V4 [http/tcp/8080] 10.0.1.1:RST@node-a/zone-a 10.0.1.2:R--@node-a/zone-a"],
        },
        Case {
            name:
                "terminal pods and pods without an IP are left out; none left gives a placeholder",
            service: web(),
            pods: vec![
                with(pod("a", "10.0.1.1"), |p| p.phase = PodPhase::Succeeded),
                with(pod("b", "10.0.1.2"), |p| p.phase = PodPhase::Failed),
                with(pod("c", "10.0.1.3"), |p| p.ips.clear()),
            ],
            want: vec!["V4 [] "],
        },
        Case {
            name: "a named targetPort is resolved per pod: different numbers, different slices",
            service: web(),
            pods: vec![
                pod("a", "10.0.1.1"),
                with(pod("b", "10.0.1.2"), |p| {
                    p.containers[0].ports[0].port = 9090
                }),
            ],
            want: vec![
                "V4 [http/tcp/8080] 10.0.1.1:RS-@node-a/zone-a",
                "V4 [http/tcp/9090] 10.0.1.2:RS-@node-a/zone-a",
            ],
        },
        Case {
            name: "a pod without the named port (or with it on another protocol) gets no port",
            service: web(),
            pods: vec![
                with(pod("a", "10.0.1.1"), |p| {
                    p.containers[0].ports[0].name = "web".into()
                }),
                with(pod("b", "10.0.1.2"), |p| {
                    p.containers[0].ports[0].protocol = Protocol::Udp
                }),
                pod("c", "10.0.1.3"),
            ],
            want: vec![
                "V4 [] 10.0.1.1:RS-@node-a/zone-a 10.0.1.2:RS-@node-a/zone-a",
                "V4 [http/tcp/8080] 10.0.1.3:RS-@node-a/zone-a",
            ],
        },
        Case {
            name: "a numeric targetPort is used as it is, whatever the containers declare",
            service: numeric,
            pods: vec![pod("a", "10.0.1.1")],
            want: vec!["V4 [http/tcp/9000] 10.0.1.1:RS-@node-a/zone-a"],
        },
        Case {
            name: "a sidecar's named port counts, after the regular containers'",
            service: web(),
            pods: vec![with(pod("a", "10.0.1.1"), |p| {
                p.containers[0].ports.clear();
                p.containers.push(Container {
                    name: "proxy".into(),
                    sidecar: true,
                    ports: vec![ContainerPort {
                        name: "http".into(),
                        port: 15001,
                        protocol: Protocol::Tcp,
                    }],
                    readiness_probe: None,
                    ready: Some(true),
                    started_at: None,
                });
            })],
            want: vec!["V4 [http/tcp/15001] 10.0.1.1:RS-@node-a/zone-a"],
        },
        Case {
            name: "a dual-stack service gets a slice per family; single-stack pods only their own",
            service: dual,
            pods: vec![
                with(pod("a", "10.0.1.1"), |p| p.ips.push(ip("fd00:1::1"))),
                pod("b", "10.0.1.2"),
            ],
            want: vec![
                "V4 [http/tcp/8080] 10.0.1.1:RS-@node-a/zone-a 10.0.1.2:RS-@node-a/zone-a",
                "V6 [http/tcp/8080] fd00:1::1:RS-@node-a/zone-a",
            ],
        },
        Case {
            name: "an IPv4 service ignores the IPv6 address of a dual-stack pod",
            service: web(),
            pods: vec![with(pod("a", "fd00:1::1"), |p| p.ips.push(ip("10.0.1.1")))],
            want: vec!["V4 [http/tcp/8080] 10.0.1.1:RS-@node-a/zone-a"],
        },
        Case {
            name: "a pod on an unknown node is skipped, on a node without zone has no zone",
            service: web(),
            pods: vec![
                with(pod("a", "10.0.1.1"), |p| {
                    p.node_name = Some("node-z".into())
                }),
                with(pod("b", "10.0.1.2"), |p| p.node_name = None),
                with(pod("c", "10.0.2.3"), |p| {
                    p.node_name = Some("node-b".into())
                }),
            ],
            want: vec!["V4 [http/tcp/8080] 10.0.2.3:RS-@node-b/"],
        },
        Case {
            name: "with publishNotReadyAddresses a pod on an unknown node is kept",
            service: publish,
            pods: vec![with(pod("a", "10.0.1.1"), |p| {
                p.node_name = Some("node-z".into())
            })],
            want: vec!["V4 [http/tcp/8080] 10.0.1.1:RS-@node-z/"],
        },
    ]
}

#[test]
fn slices_follow_upstreams_rules() {
    for case in cases() {
        let (slices, _) = endpoint_slices(&case.service, &case.pods, &nodes(), |p| p.ready);
        assert_eq!(summary(&slices), case.want, "{}", case.name);
        for s in &slices {
            assert_eq!(s.service, case.service.name, "{}", case.name);
            assert_eq!(&*s.namespace, "dev", "{}", case.name);
        }
    }
}

#[test]
fn pods_on_unknown_nodes_are_reported() {
    let pods = [with(pod("a", "10.0.1.1"), |p| {
        p.node_name = Some("node-z".into())
    })];
    let (_, skipped) = endpoint_slices(&web(), &pods, &nodes(), |p| p.ready);
    assert_eq!(skipped.len(), 1);
    assert_eq!(skipped[0].1, Skipped::UnknownNode(Some("node-z".into())));
}

#[test]
fn names_are_stable_and_slices_hold_at_most_100_endpoints() {
    let pods: Vec<Pod> = (0..150)
        .map(|i| {
            pod(
                &format!("p{i}"),
                &format!("10.0.{}.{}", i / 200 + 1, i % 200 + 1),
            )
        })
        .collect();
    let (slices, _) = endpoint_slices(&web(), pods.iter().rev(), &nodes(), |p| p.ready);
    let sizes: Vec<(String, usize)> = slices
        .iter()
        .map(|s| (s.name.to_string(), s.endpoints.len()))
        .collect();
    let base = format!("web-ipv4-{:08x}", port_list_hash(&slices[0].ports));
    assert_eq!(sizes, [(base.clone(), 100), (format!("{base}-1"), 50)]);
    // Sorted by address, whatever order the pods came in.
    assert_eq!(slices[0].endpoints[0].address, ip("10.0.1.1"));
    let (again, _) = endpoint_slices(&web(), &pods, &nodes(), |p| p.ready);
    assert_eq!(again, slices);
    let (empty, _) = endpoint_slices(&web(), [], &nodes(), |p| p.ready);
    assert_eq!(&*empty[0].name, "web-ipv4");
}

#[test]
fn endpoints_name_their_pod_and_its_hostname_only_for_the_service_of_its_subdomain() {
    let named = |subdomain: &str| {
        with(pod("web-0", "10.0.1.1"), |p| {
            p.hostname = Some("web-0".into());
            p.subdomain = Some(subdomain.into());
        })
    };
    for (subdomain, hostname) in [("web", Some("web-0")), ("other", None)] {
        let pods = [named(subdomain)];
        let (slices, _) = endpoint_slices(&web(), &pods, &nodes(), |p| p.ready);
        let ep = &slices[0].endpoints[0];
        let target = ep.target.as_ref().expect("a target");
        assert_eq!(
            target.hostname.as_deref(),
            hostname,
            "subdomain {subdomain}"
        );
        let pod = ep.target_ref().expect("a targetRef");
        assert_eq!(pod.to_string(), "Pod dev/web-0");
        // The Pod's own strings, not copies.
        assert!(std::sync::Arc::ptr_eq(&pod.name, &pods[0].name));
    }
}
