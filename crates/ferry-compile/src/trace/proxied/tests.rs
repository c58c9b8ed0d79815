//! Connections Ferry's proxy serves, as `ferry explain` tells them: localhost NodePorts in
//! the kernel modes, every frontend in the userspace mode.

use ferry_model::fixtures::*;
use ferry_model::{ClusterState, IpFamily, NodeContext, NodeView, Object, Protocol, TrafficPolicy};

use crate::config::{CompileConfig, LocalDetector};
use crate::mode::{ProxyMode, Renderer, UserspaceRenderer};
use crate::trace::{
    trace_at, Masquerade, NodeAddresses, Packet, StepKind, Trace, Verdict, PROXIED,
};
use crate::{NodeCompiler, Plan};

fn config(localhost: bool) -> CompileConfig {
    CompileConfig {
        local_detector: LocalDetector::ClusterCidr(vec!["10.244.0.0/16".parse().expect("cidr")]),
        localhost_node_ports: localhost,
        ..CompileConfig::default()
    }
}

fn packet(src: &str, dst: &str, port: u16) -> Packet {
    Packet {
        src: ip(src),
        dst: ip(dst),
        port,
        protocol: Protocol::Tcp,
    }
}

/// nftables mode's trace on node-a.
fn kernel(state: &ClusterState, localhost: bool, p: Packet) -> Trace {
    let ctx = NodeContext {
        node_name: "node-a".into(),
        family: IpFamily::V4,
    };
    let view = NodeView::build(state, &ctx);
    let plan = Plan::build(&view, &config(localhost));
    trace_at(
        &view,
        &plan,
        &crate::nft::render(&plan),
        p,
        &NodeAddresses::default(),
    )
}

/// The userspace mode's trace on node-a.
fn userspace(state: &ClusterState, p: Packet) -> Trace {
    let ctx = NodeContext {
        node_name: "node-a".into(),
        family: IpFamily::V4,
    };
    let cfg = CompileConfig {
        localhost_node_ports: ProxyMode::Userspace.localhost_node_ports_default(),
        ..config(false)
    };
    let compiler = NodeCompiler::new(state, &ctx, &cfg);
    UserspaceRenderer.trace(&compiler, state, p, &NodeAddresses::default())
}

fn kinds(t: &Trace) -> Vec<StepKind> {
    t.steps.iter().map(|s| s.kind).collect()
}

fn targets(t: &Trace) -> Vec<String> {
    match &t.verdict {
        Verdict::Forwarded { targets } => targets.iter().map(|t| t.addr.to_string()).collect(),
        _ => Vec::new(),
    }
}

#[test]
fn a_served_localhost_node_port_goes_cluster_wide_whatever_the_policy() {
    let s = two_node_web_state(TrafficPolicy::Local, &["10.244.2.5", "10.244.2.6"]);
    for localhost in [false, true] {
        let t = kernel(&s, localhost, packet("10.1.1.17", "127.0.0.1", 30080));
        if !localhost {
            assert_eq!(t.verdict, Verdict::NotAService);
            continue;
        }
        assert_eq!(
            kinds(&t),
            [
                StepKind::LocalhostNodePort,
                StepKind::Proxied(crate::EndpointSet::Cluster)
            ]
        );
        assert_eq!(targets(&t), ["10.244.2.5:8080", "10.244.2.6:8080"]);
        assert_eq!(t.masquerade(), Some(Masquerade::Yes(vec![PROXIED])));
        let text = t.to_text();
        assert!(text.contains("served by Ferry's userspace proxy"), "{text}");
        assert!(
            text.contains("listener 127.0.0.1:30080/tcp (dev/web:http)"),
            "{text}"
        );
        // The same proxy in iptables mode: not the KUBE-EXTERNAL-SERVICES drop.
        let ipt = t.clone().for_iptables();
        assert_eq!(ipt.verdict, t.verdict);
        assert_eq!(ipt.steps[1].objects, t.steps[1].objects);
    }
}

#[test]
fn a_localhost_node_port_without_endpoints_has_no_listener() {
    let t = kernel(
        &two_node_web_state(TrafficPolicy::Cluster, &[]),
        true,
        packet("10.1.1.17", "127.0.0.1", 30080),
    );
    assert_eq!(t.verdict, Verdict::Rejected);
    assert!(t.steps[0].objects[0].ends_with(": closed"), "{:?}", t.steps);
    assert_eq!(t.for_iptables().verdict, Verdict::Rejected);
}

#[test]
fn the_userspace_mode_redirects_to_the_proxy_port_and_the_endpoint_sees_the_node() {
    let s = two_node_web_state(TrafficPolicy::Cluster, &["10.244.2.5", "10.244.2.6"]);
    let t = userspace(&s, packet("10.244.1.9", "10.96.0.10", 80));
    assert_eq!(t.objects_label, "userspace");
    assert_eq!(
        kinds(&t),
        [
            StepKind::Dispatch,
            StepKind::Proxied(crate::EndpointSet::Cluster)
        ]
    );
    let text = t.to_text();
    assert!(text.contains("chain portals-container"), "{text}");
    let web = ferry_model::ServicePortName {
        service: ferry_model::ServiceName::new("dev", "web"),
        port: "http".into(),
        protocol: Protocol::Tcp,
    };
    let port =
        crate::userspace::ProxyPorts::new(crate::userspace::PortRange::DEFAULT).preferred(&web);
    assert!(
        text.contains(&format!(
            "map portals element 10.96.0.10 . tcp . 80 : {port}"
        )),
        "{text}"
    );
    assert!(
        text.contains("proxied in user space by Ferry to any ready endpoint"),
        "{text}"
    );
    assert!(text.contains("round-robin"), "{text}");
    // A pod's ClusterIP traffic is not masqueraded in the kernel modes; the proxy's is.
    assert_eq!(t.masquerade(), Some(Masquerade::Yes(vec![PROXIED])));
    assert_eq!(
        kernel(&s, false, t.packet).masquerade(),
        Some(Masquerade::No)
    );
    // The node's own traffic takes the output chain.
    let t = userspace(&s, packet("10.1.1.17", "10.1.1.17", 30080));
    assert!(
        t.to_text().contains("chain nodeports-host"),
        "{}",
        t.to_text()
    );
}

#[test]
fn the_userspace_mode_short_circuits_the_node_and_keeps_the_kernel_modes_drops() {
    let s = two_node_web_state(TrafficPolicy::Local, &["10.244.2.5"]);
    let outside = userspace(&s, packet("10.1.1.100", "10.1.1.17", 30080));
    assert_eq!(outside.verdict, Verdict::Dropped);
    assert!(outside
        .to_text()
        .contains("map no-endpoint-nodeports element tcp . 30080 : drop"));
    let node = userspace(&s, packet("10.1.1.17", "10.1.1.17", 30080));
    assert_eq!(targets(&node), ["10.244.2.5:8080"]);
    let text = node.to_text();
    assert!(
        text.contains("map nodeports-local-sources element tcp . 30080"),
        "{text}"
    );
    assert!(!text.contains("SNAT"), "{text}");
    // Localhost, in this mode too.
    let lo = userspace(&s, packet("10.1.1.17", "127.0.0.1", 30080));
    assert_eq!(lo.steps[0].kind, StepKind::LocalhostNodePort);
}

#[test]
fn sctp_is_rejected_by_the_userspace_mode() {
    let mut s = two_node_web_state(TrafficPolicy::Cluster, &["10.244.2.5"]);
    let mut svc = mk_service("dev", "assoc", "10.96.0.7", 9000);
    svc.ports[0].protocol = Protocol::Sctp;
    s.apply(Object::from(svc));
    let mut slice = mk_slice(
        "dev",
        "assoc",
        9000,
        vec![mk_endpoint("10.244.2.5", "node-b")],
    );
    slice.ports[0].protocol = Protocol::Sctp;
    s.apply(Object::from(slice));
    let p = Packet {
        protocol: Protocol::Sctp,
        ..packet("10.244.1.9", "10.96.0.7", 9000)
    };
    assert!(matches!(
        kernel(&s, false, p).verdict,
        Verdict::Forwarded { .. }
    ));
    let t = userspace(&s, p);
    assert_eq!(t.verdict, Verdict::Rejected);
    assert!(
        t.to_text().contains("SCTP is not proxied in user space"),
        "{}",
        t.to_text()
    );
}
