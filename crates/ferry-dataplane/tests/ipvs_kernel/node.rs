//! IPVS mode's node settings and ownership: the connection timeouts and sysctls it sets
//! (strictARP included), `ipvs.excludeCIDRs`, and `cleanup` removing exactly IPVS mode's
//! objects.

use ferry_compile::config::LocalDetector;
use ferry_compile::mode::ProxyMode;
use ferry_compile::{CompileConfig, NodeCompiler};
use ferry_dataplane::cleanup::Scope;
use ferry_dataplane::mode::{IptablesBackend, IpvsOptions, ModeOptions};
use ferry_dataplane::modes::entry;
use ferry_model::fixtures::{mk_endpoint, mk_node, mk_service, mk_slice, with_node_port};
use ferry_model::{ClusterState, IpFamily, NodeContext, Object, TrafficPolicy};

use crate::guest::{in_guest_netns, sh};

fn state() -> ClusterState {
    let mut state = ClusterState::new();
    let svc = with_node_port(
        mk_service("dev", "web", "10.96.0.10", 80),
        30080,
        TrafficPolicy::Cluster,
    );
    state.apply(Object::from(svc));
    let eps = vec![mk_endpoint("10.0.1.5", "n2")];
    state.apply(Object::from(mk_slice("dev", "web", 8080, eps)));
    state.apply(Object::from(mk_node("n1", "10.1.1.17", "10.0.0.0/16")));
    state
}

/// A full IPVS-mode sync of `state()` through the mode table, with `ipvs` options.
fn sync(ipvs: IpvsOptions) {
    sh(
        "ip link set lo up && ip link add eth0 type dummy && ip addr add 10.1.1.17/24 dev eth0 \
        && ip link set eth0 up && ip route add 10.0.0.0/16 dev eth0",
    );
    let options = ModeOptions {
        iptables_backend: Some(IptablesBackend::Nft),
        ipvs,
        ..ModeOptions::default()
    };
    let mode = (entry(ProxyMode::Ipvs).open)(&options);
    mode.supports(IpFamily::V4).expect("IPVS works here");
    let s = state();
    let ctx = NodeContext {
        node_name: "n1".into(),
        family: IpFamily::V4,
    };
    let cfg = CompileConfig {
        local_detector: LocalDetector::ClusterCidr(vec!["10.0.0.0/16".parse().expect("cidr")]),
        ..CompileConfig::default()
    };
    mode.applier(IpFamily::V4)
        .sync_full(&NodeCompiler::new(&s, &ctx, &cfg), &s)
        .expect("full sync");
}

fn sysctl(key: &str) -> String {
    sh(&format!("cat /proc/sys/{key}")).trim().to_owned()
}

#[test]
#[ignore = "needs root: qemu IPVS guest"]
fn timeouts_strict_arp_and_upstreams_sysctls_are_set() {
    in_guest_netns(|| {
        let secs = std::time::Duration::from_secs;
        sync(IpvsOptions {
            tcp_timeout: secs(900),
            tcp_fin_timeout: secs(30),
            udp_timeout: secs(10),
            strict_arp: true,
            exclude_cidrs: Vec::new(),
        });
        let timeouts = sh("ipvsadm -L --timeout");
        assert_eq!(timeouts.trim(), "Timeout (tcp tcpfin udp): 900 30 10");
        for (key, want) in [
            ("net/ipv4/vs/conntrack", "1"),
            ("net/ipv4/vs/expire_nodest_conn", "1"),
            ("net/ipv4/vs/expire_quiescent_template", "1"),
            ("net/ipv4/ip_forward", "1"),
            ("net/ipv4/conf/all/arp_ignore", "1"),
            ("net/ipv4/conf/all/arp_announce", "2"),
        ] {
            assert_eq!(sysctl(key), want, "{key}");
        }
    });
}

#[test]
#[ignore = "needs root: qemu IPVS guest"]
fn without_options_the_kernels_timeouts_and_arp_stay() {
    in_guest_netns(|| {
        let before = sh("ipvsadm -L --timeout");
        sync(IpvsOptions::default());
        assert_eq!(sh("ipvsadm -L --timeout"), before);
        assert_eq!(sysctl("net/ipv4/conf/all/arp_ignore"), "0");
        assert_eq!(sysctl("net/ipv4/vs/conntrack"), "1");
    });
}

#[test]
#[ignore = "needs root: qemu IPVS guest"]
fn virtual_servers_in_exclude_cidrs_are_kept_and_others_replaced() {
    in_guest_netns(|| {
        sh("ipvsadm -A -t 10.200.0.1:80 -s rr && ipvsadm -A -t 10.96.5.5:80 -s rr");
        sync(IpvsOptions {
            exclude_cidrs: vec!["10.200.0.0/16".parse().expect("cidr")],
            ..IpvsOptions::default()
        });
        let list = sh("ipvsadm -Ln");
        assert!(
            list.contains("TCP  10.200.0.1:80 rr"),
            "excluded, kept: {list}"
        );
        assert!(
            !list.contains("10.96.5.5"),
            "not excluded, not wanted: deleted: {list}"
        );
        assert!(list.contains("TCP  10.96.0.10:80 rr"), "{list}");
    });
}

#[test]
#[ignore = "needs root: qemu IPVS guest"]
fn cleanup_removes_ipvs_modes_objects_and_nothing_else() {
    in_guest_netns(|| {
        let cleanup = entry(ProxyMode::Ipvs).cleanup;
        let nothing = cleanup(Scope::default()).expect("nothing to clean is fine");
        assert!(nothing.objects.is_empty(), "{nothing:?}");
        sync(IpvsOptions {
            exclude_cidrs: vec!["10.200.0.0/16".parse().expect("cidr")],
            ..IpvsOptions::default()
        });
        sh(
            "ipvsadm -A -t 10.200.0.1:80 -s rr && ipset create OTHER hash:ip \
            && iptables-nft -t nat -N OTHER && iptables-nft -t nat -A PREROUTING -j OTHER",
        );
        assert!(sh("ip -br link").contains("kube-ipvs0"));
        // A dry run names IPVS mode's objects and removes none.
        let dry = cleanup(Scope {
            dry_run: true,
            kube_proxy: false,
        })
        .expect("dry run")
        .objects
        .join("\n");
        for what in [
            "Ferry's IPVS virtual servers: ",
            "Ferry's ipsets: KUBE-",
            "Ferry's link kube-ipvs0",
        ] {
            assert!(dry.contains(what), "{what}: {dry}");
        }
        assert!(sh("ip -br link").contains("kube-ipvs0"));
        let done = cleanup(Scope::default())
            .expect("cleanup")
            .objects
            .join("\n");
        assert_eq!(done, dry);
        let list = sh("ipvsadm -Ln");
        println!("{list}");
        assert!(list.contains("TCP  10.200.0.1:80 rr"), "{list}");
        assert!(
            !list.contains("10.96.0.10") && !list.contains("30080"),
            "{list}"
        );
        assert!(!sh("ip -br link").contains("kube-ipvs0"));
        assert_eq!(sh("ipset list -n").trim(), "OTHER");
        let nat = sh("iptables-nft-save -t nat");
        assert!(!nat.contains("KUBE-"), "{nat}");
        assert!(nat.contains("-A PREROUTING -j OTHER"), "{nat}");
        assert!(!sh("iptables-nft-save -t filter").contains("KUBE-"));
        let again = cleanup(Scope::default()).expect("a second cleanup");
        assert!(again.objects.is_empty(), "{again:?}");
    });
}
