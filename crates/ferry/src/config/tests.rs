use std::time::Duration;

use super::file::UNKNOWN_FIELD;
use super::*;

fn parse(text: &str) -> Result<FileConfig, ConfigError> {
    FileConfig::parse("kube-proxy.yaml", text)
}

const HEAD: &str = "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n";

#[test]
fn reads_the_supported_fields() {
    let f = parse(&format!(
        "{HEAD}hostnameOverride: k8s-node1\nmode: nftables\nclusterCIDR: 192.168.0.0/16\n\
         detectLocalMode: NodeCIDR\nnodePortAddresses: [10.1.1.0/24]\nmasqueradeAll: true\n\
         nftables:\n  masqueradeBit: 13\n  syncPeriod: 1m\n  minSyncPeriod: 500ms\n"
    ))
    .expect("valid");
    assert_eq!(f.hostname_override.as_deref(), Some("k8s-node1"));
    assert_eq!(f.mode, Some(ProxyMode::Nftables));
    assert_eq!(
        f.cluster_cidrs,
        Some(vec!["192.168.0.0/16".parse().expect("net")])
    );
    assert_eq!(f.detect_local_mode, Some(DetectLocalMode::NodeCidr));
    assert_eq!(f.node_port_addresses.map(|n| n.cidrs.len()), Some(1));
    assert_eq!(f.masquerade_all, Some(true));
    assert_eq!(f.masquerade_bit, Some(13));
    assert_eq!(f.sync_period, Some(Duration::from_secs(60)));
    assert_eq!(f.min_sync_period, Some(Duration::from_millis(500)));
    assert!(f.warnings.is_empty(), "{:?}", f.warnings);
}

#[test]
fn iptables_mode_takes_its_bit_and_periods_from_the_iptables_section() {
    let f = parse(&format!(
        "{HEAD}mode: iptables\niptables:\n  masqueradeBit: 12\n  syncPeriod: 10s\n\
         nftables:\n  masqueradeBit: 13\n  syncPeriod: 1m\n"
    ))
    .expect("valid");
    assert_eq!(f.mode, Some(ProxyMode::Iptables));
    assert_eq!(f.masquerade_bit, Some(12));
    assert_eq!(f.sync_period, Some(Duration::from_secs(10)));
}

#[test]
fn unknown_fields_are_reported_not_dropped() {
    let f = parse(&format!(
        "{HEAD}clusterCidr: 10.0.0.0/8\nbindAddress: 0.0.0.0\n"
    ))
    .expect("valid");
    assert!(
        f.warnings
            .iter()
            .any(|w| w.contains("clusterCidr") && w.contains(UNKNOWN_FIELD)),
        "{:?}",
        f.warnings
    );
    assert!(
        f.warnings
            .iter()
            .any(|w| w.contains("bindAddress") && w.contains("not used")),
        "{:?}",
        f.warnings
    );
}

#[test]
fn each_bad_value_names_its_field() {
    let cases = [
        ("mode: ipvs-turbo\n", "mode"),
        ("clusterCIDR: 192.168.0.0/33\n", "clusterCIDR"),
        ("detectLocalMode: Nope\n", "detectLocalMode"),
        (
            "nodePortAddresses: [primary, nonsense]\n",
            "nodePortAddresses[1]",
        ),
        (
            "nodePortAddresses: [127.0.0.0/8, 10.0.0.0/33]\n",
            "nodePortAddresses[1]",
        ),
        ("portRange: 50000-40000\n", "portRange"),
        ("udpIdleTimeout: soon\n", "udpIdleTimeout"),
        (
            "iptables:\n  localhostNodePorts: yes please\n",
            "iptables.localhostNodePorts",
        ),
        ("masqueradeAll: maybe\n", "masqueradeAll"),
        ("nftables:\n  masqueradeBit: 32\n", "nftables.masqueradeBit"),
        ("iptables:\n  masqueradeBit: -1\n", "iptables.masqueradeBit"),
        ("nftables:\n  syncPeriod: soon\n", "nftables.syncPeriod"),
        ("minSyncPeriod: 5\n", "minSyncPeriod"),
    ];
    for (body, field) in cases {
        let err = parse(&format!("{HEAD}{body}")).expect_err(body);
        assert!(err.to_string().contains(field), "{body:?}: {err}");
        assert!(err.to_string().starts_with("kube-proxy.yaml"), "{err}");
    }
}

#[test]
fn the_wrong_kind_is_rejected() {
    let err = parse("apiVersion: v1\nkind: ConfigMap\n").expect_err("not a KubeProxyConfiguration");
    assert!(err.to_string().contains("kind"), "{err}");
}

#[test]
fn node_port_addresses_accept_primary_but_not_mixed_with_cidrs() {
    assert!(
        parse_node_port_addresses("--nodeport-addresses", ["primary"])
            .expect("ok")
            .primary
    );
    let err = parse_node_port_addresses("--nodeport-addresses", ["primary", "10.0.0.0/8"])
        .expect_err("mixed");
    assert!(err.to_string().starts_with("--nodeport-addresses"), "{err}");
}

#[test]
fn cluster_cidr_flag_takes_a_comma_separated_list() {
    let nets = parse_cidrs("--cluster-cidr", "10.0.0.0/8, fd00::/48").expect("ok");
    assert_eq!(nets.len(), 2);
    let err = parse_cidrs("--cluster-cidr", "10.0.0.1").expect_err("bare IP");
    assert!(err.to_string().contains("--cluster-cidr"), "{err}");
}

#[test]
fn bind_addresses_are_read_and_empty_or_port_zero_disables() {
    let f = parse(&format!(
        "{HEAD}healthzBindAddress: 10.1.1.9:10256\nmetricsBindAddress: \"\"\n"
    ))
    .expect("valid");
    assert_eq!(
        f.healthz_bind_address,
        Some(Some("10.1.1.9:10256".parse().expect("addr")))
    );
    assert_eq!(f.metrics_bind_address, Some(None));
    assert!(f.warnings.is_empty(), "{:?}", f.warnings);
    assert_eq!(parse_bind_address("--x", "0.0.0.0:0"), Ok(None));
    assert_eq!(
        parse_bind_address("--x", "[::]:10256"),
        Ok(Some("[::]:10256".parse().expect("addr")))
    );
}

#[test]
fn a_bad_bind_address_names_file_and_field() {
    let err = parse(&format!("{HEAD}metricsBindAddress: 127.0.0.1\n")).expect_err("no port");
    assert_eq!(err.place, "kube-proxy.yaml: metricsBindAddress");
    let err = parse_bind_address("--healthz-bind-address", "localhost:10256").expect_err("name");
    assert_eq!(err.place, "--healthz-bind-address");
}

#[test]
fn default_servers_are_upstreams() {
    let c = Config::default();
    assert_eq!(
        c.healthz_bind_address,
        Some("0.0.0.0:10256".parse().expect("addr"))
    );
    assert_eq!(
        c.metrics_bind_address,
        Some("127.0.0.1:10249".parse().expect("addr"))
    );
}

#[test]
fn client_connection_kubeconfig_is_read_and_its_other_fields_reported() {
    let f = parse(&format!(
        "{HEAD}clientConnection:\n  kubeconfig: /var/lib/kube-proxy/kubeconfig.conf\n  qps: 5\n"
    ))
    .expect("valid");
    assert_eq!(
        f.kubeconfig.as_deref(),
        Some(std::path::Path::new("/var/lib/kube-proxy/kubeconfig.conf"))
    );
    assert_eq!(f.warnings.len(), 1, "{:?}", f.warnings);
    assert!(
        f.warnings[0].contains("clientConnection.qps"),
        "{:?}",
        f.warnings
    );
    let e = parse(&format!("{HEAD}clientConnection:\n  kubeconfig: 7\n")).expect_err("bad");
    assert!(e.place.ends_with("clientConnection.kubeconfig"), "{e}");
}

#[test]
fn reads_the_userspace_proxy_fields() {
    let f = parse(&format!(
        "{HEAD}portRange: 20000+99\nudpIdleTimeout: 1s\niptables:\n  localhostNodePorts: false\n\
         nftables:\n  localhostNodePorts: true\n"
    ))
    .expect("valid");
    assert!(f.warnings.is_empty(), "{:?}", f.warnings);
    let range = f.proxy_port_range.expect("portRange");
    assert_eq!((range.first, range.last), (20000, 20099));
    assert_eq!(f.udp_idle_timeout, Some(Duration::from_secs(1)));
    assert_eq!(
        f.localhost_node_ports,
        LocalhostNodePorts {
            iptables: Some(false),
            nftables: Some(true),
        }
    );
}

/// Whether `mode` serves localhost NodePorts of `family` with `lnp` and nodePortAddresses `npa`.
fn localhost(mode: ProxyMode, lnp: LocalhostNodePorts, npa: &[&str], family: IpFamily) -> bool {
    let cfg = Config {
        mode,
        localhost_node_ports: lnp,
        node_port_addresses: parse_node_port_addresses("test", npa.iter().copied()).expect("npa"),
        ..Config::default()
    };
    cfg.compile_config(family).localhost_node_ports
}

#[test]
fn localhost_node_ports_are_on_in_iptables_and_userspace_modes_and_opt_in_in_nftables_mode() {
    let unset = LocalhostNodePorts::default();
    let v4 = IpFamily::V4;
    assert!(localhost(ProxyMode::Iptables, unset, &[], v4));
    assert!(localhost(ProxyMode::Userspace, unset, &[], v4));
    assert!(!localhost(ProxyMode::Nftables, unset, &[], v4));
    let nft_on = LocalhostNodePorts {
        nftables: Some(true),
        ..unset
    };
    assert!(localhost(ProxyMode::Nftables, nft_on, &[], v4));
    // The other section's setting is not the mode's.
    assert!(!localhost(
        ProxyMode::Iptables,
        LocalhostNodePorts {
            iptables: Some(false),
            ..nft_on
        },
        &[],
        v4
    ));
    // nodePortAddresses listing loopback asks for them, unless the section says no.
    assert!(localhost(ProxyMode::Nftables, unset, &["127.0.0.0/8"], v4));
    assert!(!localhost(
        ProxyMode::Nftables,
        unset,
        &["127.0.0.0/8"],
        IpFamily::V6
    ));
    assert!(localhost(
        ProxyMode::Nftables,
        unset,
        &["::1/128"],
        IpFamily::V6
    ));
    let off = LocalhostNodePorts {
        nftables: Some(false),
        ..unset
    };
    assert!(!localhost(ProxyMode::Nftables, off, &["127.0.0.0/8"], v4));
}
