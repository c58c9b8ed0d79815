use std::path::Path;
use std::time::Duration;

use super::file::UNKNOWN_FIELD;
use super::*;
use crate::cli::RunArgs;

const HEAD: &str = "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n";

fn parse(text: &str) -> Result<FileConfig, ConfigError> {
    FileConfig::parse("kube-proxy.yaml", text)
}

/// `ferry run --config FILE` with `text` as FILE (named kube-proxy.yaml) and `flags` set.
pub(crate) fn resolve_with(
    text: &str,
    flags: impl FnOnce(&mut RunArgs),
) -> Result<(Config, Vec<String>), ConfigError> {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("kube-proxy.yaml");
    std::fs::write(&path, text).expect("write");
    let mut args = RunArgs {
        config: Some(path),
        hostname_override: Some("n1".to_owned()),
        ..RunArgs::default()
    };
    flags(&mut args);
    args.resolve()
}

/// The health and metrics servers' addresses (`off` when disabled).
fn servers(c: &Config) -> [String; 2] {
    [c.healthz_bind_address, c.metrics_bind_address]
        .map(|a| a.map_or_else(|| "off".to_owned(), |a| a.to_string()))
}

fn resolve(text: &str) -> Result<(Config, Vec<String>), ConfigError> {
    resolve_with(text, |_| {})
}

/// The warnings but kube-proxy 1.37's about the mode itself (an empty mode, IPVS mode), which
/// config/release/tests.rs checks.
fn others(warnings: &[String]) -> Vec<&String> {
    warnings
        .iter()
        .filter(|w| {
            !w.starts_with("no proxy mode given") && !w.starts_with("IPVS mode is deprecated")
        })
        .collect()
}

/// `warnings` is kube-proxy 1.37's one warning about an empty mode.
fn only_the_empty_mode_warning(warnings: &[String]) {
    assert!(
        warnings.len() == 1 && warnings[0].starts_with("no proxy mode given"),
        "{warnings:?}"
    );
}

fn data(file: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(file);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn kubeadms_configmap_loads_as_is_with_upstreams_defaults() {
    let (c, warnings) = resolve(&data("kubeadm-kube-proxy-configmap.yaml")).expect("loads");
    // kube-proxy 1.37 warns about the empty mode too (kubeadm 1.37 writes `mode: iptables`).
    only_the_empty_mode_warning(&warnings);
    assert_eq!(servers(&c), ["0.0.0.0:10256", "127.0.0.1:10249"]);
    assert_eq!(c.sync_period, Duration::from_secs(30));
    assert_eq!(c.min_sync_period, Duration::from_secs(1));
    assert_eq!(c.masquerade_bit, 14);
    // kubeadm's `mode: ""`: iptables mode, as kube-proxy runs it.
    assert_eq!(c.mode, ProxyMode::Iptables);
    assert!(
        c.mode_reason.contains("kube-proxy's default"),
        "{}",
        c.mode_reason
    );
    assert_eq!(
        c.cluster_cidrs,
        vec!["10.244.0.0/16".parse::<IpNet>().expect("net")]
    );
    assert!(c.node_port_addresses.is_default());
    assert_eq!(
        c.kubeconfig.as_deref(),
        Some(Path::new("/var/lib/kube-proxy/kubeconfig.conf"))
    );
    assert_eq!(c.kube_proxy.oom_score_adj, Some(-999));
    assert_eq!(c.kube_proxy.conntrack.max_per_core, Some(32768));
}

#[test]
fn an_older_kubeadm_config_with_removed_fields_loads_without_warnings() {
    let (c, warnings) = resolve(&data("kubeadm-1.25-kube-proxy-config.conf")).expect("loads");
    only_the_empty_mode_warning(&warnings);
    assert_eq!(c.sync_period, Duration::from_secs(30));
}

#[test]
fn a_configmap_without_config_conf_names_its_keys() {
    let err = parse("apiVersion: v1\nkind: ConfigMap\ndata:\n  other: x\n").expect_err("no config");
    assert_eq!(err.place, "kube-proxy.yaml: data");
    assert!(
        err.message.contains("config.conf") && err.message.contains("other"),
        "{err}"
    );
}

#[test]
fn the_wrong_kind_or_version_is_named_plainly() {
    for (text, place, got) in [
        (
            "apiVersion: apps/v1\nkind: Deployment\n",
            "kind",
            "got \"Deployment\"",
        ),
        ("apiVersion: v1\n", "kind", "got nothing"),
        (
            "kind: KubeProxyConfiguration\napiVersion: 7\n",
            "apiVersion",
            "got 7",
        ),
    ] {
        let err = parse(text).expect_err(text);
        assert_eq!(err.place, format!("kube-proxy.yaml: {place}"), "{err}");
        assert!(err.message.contains(got), "{err}");
        assert!(
            !err.to_string().contains("Some("),
            "no Rust debug text: {err}"
        );
    }
}

#[test]
fn reads_the_supported_fields() {
    let (c, warnings) = resolve(&format!(
        "{HEAD}hostnameOverride: k8s-node1\nmode: nftables\nclusterCIDR: 192.168.0.0/16\n\
         detectLocalMode: NodeCIDR\nnodePortAddresses: [10.1.1.0/24]\n\
         nftables:\n  masqueradeAll: true\n  masqueradeBit: 13\n  syncPeriod: 1m\n  minSyncPeriod: 500ms\n"
    ))
    .expect("valid");
    assert_eq!(c.node_name, "n1", "the flag wins over hostnameOverride");
    assert_eq!(c.mode, ProxyMode::Nftables);
    assert_eq!(c.detect_local_mode, DetectLocalMode::NodeCidr);
    assert_eq!(c.node_port_addresses.cidrs.len(), 1);
    assert!(c.masquerade_all);
    assert_eq!(c.masquerade_bit, 13);
    assert_eq!(c.sync_period, Duration::from_secs(60));
    assert_eq!(c.min_sync_period, Duration::from_millis(500));
    assert!(warnings.is_empty(), "{warnings:?}");
}

#[test]
fn iptables_mode_takes_its_bit_and_periods_from_the_iptables_section() {
    let (c, _) = resolve(&format!(
        "{HEAD}mode: iptables\niptables:\n  masqueradeBit: 12\n  syncPeriod: 10s\n\
         nftables:\n  masqueradeBit: 13\n  syncPeriod: 1m\n"
    ))
    .expect("valid");
    assert_eq!(c.mode, ProxyMode::Iptables);
    assert_eq!(c.masquerade_bit, 12);
    assert_eq!(c.sync_period, Duration::from_secs(10));
}

#[test]
fn an_empty_mode_reads_the_iptables_section_as_kube_proxy_does() {
    let (c, _) = resolve(&format!(
        "{HEAD}mode: \"\"\niptables:\n  masqueradeAll: true\n  syncPeriod: 10s\n  minSyncPeriod: 2s\n"
    ))
    .expect("valid");
    assert_eq!(c.mode, ProxyMode::Iptables);
    assert!(c.masquerade_all);
    assert_eq!(c.sync_period, Duration::from_secs(10));
    assert_eq!(c.min_sync_period, Duration::from_secs(2));
}

#[test]
fn unknown_fields_are_reported_with_path_and_likely_name() {
    let f = parse(&format!(
        "{HEAD}clusterCidr: 10.0.0.0/8\niptables:\n  masqueradeBits: 3\nbanana: 1\n"
    ))
    .expect("valid");
    assert_eq!(
        f.warnings,
        [
            format!("kube-proxy.yaml: banana: {UNKNOWN_FIELD} of KubeProxyConfiguration, ignored"),
            format!(
                "kube-proxy.yaml: clusterCidr: {UNKNOWN_FIELD} of KubeProxyConfiguration, ignored \
                 (did you mean \"clusterCIDR\"?)"
            ),
            format!(
                "kube-proxy.yaml: iptables.masqueradeBits: {UNKNOWN_FIELD} of \
                 KubeProxyConfiguration, ignored (did you mean \"masqueradeBit\"?)"
            ),
        ]
    );
}

#[test]
fn fields_kube_proxy_has_but_ferry_does_not_use_are_named_when_set() {
    let (_, warnings) = resolve(&format!(
        "{HEAD}enableProfiling: true\nconntrack:\n  maxPerCore: 0\nfeatureGates:\n  Foo: true\n"
    ))
    .expect("valid");
    assert!(
        !warnings.iter().any(|w| w.contains("conntrack")),
        "conntrack is acted on: {warnings:?}"
    );
    for field in ["enableProfiling", "featureGates (Foo)"] {
        assert!(
            warnings
                .iter()
                .any(|w| w.contains(&format!("kube-proxy.yaml: {field}: set, but not used"))),
            "{field}: {warnings:?}"
        );
    }
}

#[test]
fn v1alpha2_fields_are_read_and_named_in_a_v1alpha1_file() {
    let (c, warnings) = resolve(&format!(
        "{HEAD}syncPeriod: 20s\nminSyncPeriod: 2s\ndetectLocal:\n  clusterCIDRs: [10.0.0.0/8]\n"
    ))
    .expect("valid");
    assert_eq!(c.sync_period, Duration::from_secs(20));
    assert_eq!(c.min_sync_period, Duration::from_secs(2));
    assert_eq!(c.cluster_cidrs.len(), 1);
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("syncPeriod: a v1alpha2 field")),
        "{warnings:?}"
    );
    let (c, warnings) = resolve(
        "apiVersion: kubeproxy.config.k8s.io/v1alpha2\nkind: KubeProxyConfiguration\n\
         detectLocal:\n  clusterCIDRs: [10.0.0.0/8]\nsyncPeriod: 20s\nlinux:\n  masqueradeAll: true\nhealthzBindAddresses: [0.0.0.0/0]\n\
         healthzBindPort: 10300\nmetricsBindPort: 10301\n",
    )
    .expect("valid v1alpha2");
    only_the_empty_mode_warning(&warnings);
    assert_eq!(c.sync_period, Duration::from_secs(20));
    assert!(c.masquerade_all);
    assert_eq!(servers(&c), ["0.0.0.0:10300", "127.0.0.1:10301"]);
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
            "iptables:\n  masqueradeAll: maybe\n",
            "iptables.masqueradeAll",
        ),
        (
            "mode: nftables\nnftables:\n  masqueradeBit: 32\n",
            "nftables.masqueradeBit",
        ),
        (
            "mode: nftables\nnftables:\n  syncPeriod: soon\n",
            "nftables.syncPeriod",
        ),
        (
            "mode: nftables\nnftables:\n  minSyncPeriod: 5m\n",
            "nftables.minSyncPeriod",
        ),
        ("iptables:\n  minSyncPeriod: 5\n", "iptables.minSyncPeriod"),
        (
            "clientConnection:\n  kubeconfig: [7]\n",
            "clientConnection.kubeconfig",
        ),
        ("metricsBindAddress: nowhere\n", "metricsBindAddress"),
    ];
    for (body, field) in cases {
        let err = resolve(&format!("{HEAD}{body}")).expect_err(body);
        assert!(
            err.place.ends_with(&format!("kube-proxy.yaml: {field}")),
            "{body:?}: {err}"
        );
    }
}

#[test]
fn node_port_addresses_take_cidrs_and_keywords_alone_or_mixed() {
    let npa = parse_node_port_addresses("--nodeport-addresses", ["primary", "10.0.0.0/8"])
        .expect("mixed is fine, as upstream");
    assert!(npa.primary && npa.cidrs.len() == 1);
    let npa = parse_node_port_addresses("--nodeport-addresses", ["all"]).expect("all");
    assert!(npa.all);
    let npa = parse_node_port_addresses("x", ["localhost", "10.0.0.0/8"]).expect("localhost");
    assert_eq!(loopback_node_port_addresses(&npa).len(), 2);
    assert_eq!(npa.cidrs.len(), 3);
    let err = parse_node_port_addresses("--nodeport-addresses", ["nonsense"]).expect_err("bad");
    assert!(
        err.to_string().starts_with("--nodeport-addresses[0]"),
        "{err}"
    );
}

#[test]
fn a_loopback_node_port_range_asks_for_localhost_node_ports_unless_the_mode_says_no() {
    let head = format!("{HEAD}mode: nftables\nclusterCIDR: 10.244.0.0/16\n");
    let (c, warnings) = resolve(&format!("{head}nodePortAddresses: [127.0.0.0/8]\n")).expect("ok");
    assert_eq!(c.node_port_addresses.cidrs.len(), 1);
    assert!(c.compile_config(IpFamily::V4).localhost_node_ports);
    assert!(warnings.is_empty(), "{warnings:?}");
    let (c, warnings) = resolve(&format!(
        "{head}nodePortAddresses: [127.0.0.0/8]\nnftables:\n  localhostNodePorts: false\n"
    ))
    .expect("ok");
    assert!(!c.compile_config(IpFamily::V4).localhost_node_ports);
    assert!(
        warnings.iter().any(|w| w.contains("127.0.0.0/8 kept")
            && w.contains(
                "nftables.localhostNodePorts (or the KubeProxyNFTablesLocalhostNodePorts \
                           feature gate) is false"
            )),
        "{warnings:?}"
    );
}

#[test]
fn iptables_mode_answers_node_ports_on_every_local_address_by_default() {
    let (c, _) = resolve(&format!("{HEAD}mode: iptables\n")).expect("ok");
    assert!(
        c.compile_config(ferry_model::IpFamily::V4)
            .node_port_addresses
            .all
    );
    let (c, _) = resolve(&format!("{HEAD}mode: nftables\n")).expect("ok");
    assert!(c
        .compile_config(ferry_model::IpFamily::V4)
        .node_port_addresses
        .is_default());
    let (c, _) = resolve(&format!(
        "{HEAD}mode: iptables\nnodePortAddresses: [primary]\n"
    ))
    .expect("ok");
    assert!(
        c.compile_config(ferry_model::IpFamily::V4)
            .node_port_addresses
            .primary
    );
}

#[test]
fn cluster_cidr_flag_takes_a_comma_separated_list() {
    let nets = parse_cidrs("--cluster-cidr", "10.0.0.0/8, fd00::/48").expect("ok");
    assert_eq!(nets.len(), 2);
    let err = parse_cidrs("--cluster-cidr", "10.0.0.1").expect_err("bare IP");
    assert!(err.to_string().contains("--cluster-cidr"), "{err}");
}

#[test]
fn bind_addresses_default_when_empty_take_a_default_port_and_port_zero_disables() {
    let (c, _) = resolve(&format!(
        "{HEAD}healthzBindAddress: 10.1.1.9\nmetricsBindAddress: \"0.0.0.0:0\"\n"
    ))
    .expect("valid");
    assert_eq!(
        c.healthz_bind_address,
        Some("10.1.1.9:10256".parse().expect("addr"))
    );
    assert_eq!(c.metrics_bind_address, None);
    assert_eq!(
        parse_bind_address("--x", "[::]:10256", 1),
        Ok(Some("[::]:10256".parse().expect("addr")))
    );
    assert_eq!(parse_bind_address("--x", "", 1), Ok(None));
    let err = parse_bind_address("--healthz-bind-address", "localhost:10256", 1).expect_err("name");
    assert_eq!(err.place, "--healthz-bind-address");
}

#[test]
fn default_servers_are_upstreams() {
    let (c, _) = resolve(HEAD).expect("valid");
    assert_eq!(servers(&c), ["0.0.0.0:10256", "127.0.0.1:10249"]);
    let (c, _) = resolve(&format!("{HEAD}bindAddress: \"::\"\n")).expect("valid");
    assert_eq!(servers(&c), ["[::]:10256", "[::1]:10249"]);
}

#[test]
fn client_connection_kubeconfig_and_rate_are_read_and_content_types_reported() {
    let (c, warnings) = resolve(&format!(
        "{HEAD}clusterCIDR: 10.0.0.0/8\nclientConnection:\n  kubeconfig: /var/lib/kube-proxy/kubeconfig.conf\n  qps: 50\n  burst: 100\n"
    ))
    .expect("valid");
    assert_eq!(
        c.kubeconfig.as_deref(),
        Some(Path::new("/var/lib/kube-proxy/kubeconfig.conf"))
    );
    // qps and burst act: no warning.
    assert_eq!(others(&warnings), Vec::<&String>::new());
    assert_eq!(c.api_rate(), ferry_source::kube::ApiRate::new(50.0, 100));
    let (_, warnings) = resolve(&format!(
        "{HEAD}clusterCIDR: 10.0.0.0/8\nclientConnection:\n  contentType: application/json\n"
    ))
    .expect("valid");
    let warnings = others(&warnings);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("clientConnection (content types)"),
        "{warnings:?}"
    );
    let err = resolve(&format!("{HEAD}clientConnection:\n  burst: -1\n")).expect_err("negative");
    assert!(err.place.ends_with("clientConnection.burst"), "{err:?}");
}

#[test]
fn reads_the_userspace_proxy_fields() {
    let (c, warnings) = resolve(&format!(
        "{HEAD}clusterCIDR: 10.244.0.0/16\nmode: userspace\nportRange: 20000+99\nudpIdleTimeout: 1s\niptables:\n  \
         localhostNodePorts: false\nnftables:\n  localhostNodePorts: true\n"
    ))
    .expect("valid");
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(c.mode, ProxyMode::Userspace);
    assert_eq!(
        (c.proxy_port_range.first, c.proxy_port_range.last),
        (20000, 20099)
    );
    assert_eq!(c.udp_idle_timeout, Duration::from_secs(1));
    assert_eq!(c.mode_options().udp_idle_timeout, Duration::from_secs(1));
    assert_eq!(
        c.localhost_node_ports,
        LocalhostNodePorts {
            iptables: Some(false),
            nftables: Some(true),
        }
    );
    // Unset: upstream's default (250ms), and the whole port range.
    let (c, _) = resolve(HEAD).expect("valid");
    assert_eq!(c.udp_idle_timeout, Duration::from_millis(250));
    assert_eq!(
        c.proxy_port_range,
        ferry_compile::userspace::PortRange::DEFAULT
    );
    for (body, field) in [
        ("portRange: 50000-40000\n", "portRange"),
        ("udpIdleTimeout: soon\n", "udpIdleTimeout"),
    ] {
        let err = resolve(&format!("{HEAD}{body}")).expect_err(body);
        assert!(err.place.ends_with(field), "{body:?}: {err}");
    }
    // portRange means nothing outside the userspace mode.
    let (_, warnings) = resolve(&format!("{HEAD}portRange: 20000+99\n")).expect("valid");
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("portRange: set, but not used")),
        "{warnings:?}"
    );
}

#[test]
fn the_default_proxy_ports_stay_clear_of_the_ephemeral_ports() {
    use ferry_compile::userspace::PortRange;
    // Read at start in userspace mode (this process's network namespace).
    let (c, _) = resolve(&format!("{HEAD}mode: userspace\n")).expect("valid");
    let ephemeral = ferry_dataplane::userspace::ephemeral::ephemeral_ports().expect("sysctl");
    assert_eq!(c.ephemeral_ports, Some(ephemeral));
    assert_eq!(c.proxy_port_range, PortRange::clear_of(ephemeral));
    // A range set over them is kept, with a warning naming both.
    let (mut c, _) =
        resolve(&format!("{HEAD}mode: userspace\nportRange: 40000-49999\n")).expect("valid");
    c.ephemeral_ports = Some(PortRange::LINUX_EPHEMERAL);
    let warnings = c.warnings();
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("portRange: 40000-49999 (set) overlaps")
                && w.contains("ip_local_port_range 32768-60999")),
        "{warnings:?}"
    );
    // The default clear of them: no warning.
    c.proxy_port_range = PortRange::clear_of(PortRange::LINUX_EPHEMERAL);
    assert!(!c.warnings().iter().any(|w| w.contains("portRange")));
}

#[test]
fn the_userspace_proxy_flags_override_the_file() {
    let (c, _) = resolve_with(HEAD, |a| {
        a.kube_proxy.proxy_port_range = Some("30000-30010".to_owned());
        a.kube_proxy.udp_timeout = Some("2s".to_owned());
        a.kube_proxy.nftables_localhost_nodeports = Some(true);
    })
    .expect("valid");
    assert_eq!(
        (c.proxy_port_range.first, c.proxy_port_range.last),
        (30000, 30010)
    );
    assert_eq!(c.udp_idle_timeout, Duration::from_secs(2));
    assert!(c.compile_config(IpFamily::V4).localhost_node_ports);
    let err =
        resolve_with(HEAD, |a| a.kube_proxy.udp_timeout = Some("x".to_owned())).expect_err("bad");
    assert_eq!(err.place, "--udp-timeout");
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

#[test]
fn ipvs_mode_never_serves_localhost_node_ports_and_says_so_when_asked() {
    let unset = LocalhostNodePorts::default();
    let on = LocalhostNodePorts {
        iptables: Some(true),
        nftables: Some(true),
    };
    for (lnp, npa) in [
        (unset, &[][..]),
        (on, &["all"][..]),
        (on, &["127.0.0.0/8"][..]),
    ] {
        assert!(
            !localhost(ProxyMode::Ipvs, lnp, npa, IpFamily::V4),
            "{npa:?}"
        );
    }
    let head = format!("{HEAD}clusterCIDR: 10.244.0.0/16\nmode: ipvs\n");
    // iptables.localhostNodePorts defaults to true in every mode: no warning for it.
    let (c, warnings) = resolve(&head).expect("valid");
    assert!(!c.compile_config(IpFamily::V4).localhost_node_ports);
    assert!(others(&warnings).is_empty(), "{warnings:?}");
    let (_, warnings) = resolve(&format!(
        "{head}nodePortAddresses: [127.0.0.0/8]\nudpIdleTimeout: 1s\nnftables:\n  \
         localhostNodePorts: true\n"
    ))
    .expect("valid");
    for want in [
        "IPVS mode never serves them",
        "nftables.localhostNodePorts: true, but IPVS mode never serves",
        "udpIdleTimeout: set, but not used",
    ] {
        assert!(
            warnings.iter().any(|w| w.contains(want)),
            "{want}: {warnings:?}"
        );
    }
}

#[test]
fn interface_detectors_take_their_interface_and_name_a_missing_one() {
    let (c, _) = resolve(&format!(
        "{HEAD}mode: nftables\ndetectLocalMode: BridgeInterface\ndetectLocal:\n  bridgeInterface: cbr0\n"
    ))
    .expect("valid");
    assert_eq!(
        c.detect_local_mode,
        DetectLocalMode::BridgeInterface("cbr0".into())
    );
    assert_eq!(
        c.compile_config(IpFamily::V4).local_detector,
        ferry_compile::config::LocalDetector::BridgeInterface("cbr0".into())
    );
    let (c, _) = resolve_with(
        &format!("{HEAD}mode: iptables\ndetectLocalMode: InterfaceNamePrefix\n"),
        |a| a.kube_proxy.pod_interface_name_prefix = Some("veth".into()),
    )
    .expect("valid: the flag gives the prefix");
    assert_eq!(
        c.detect_local_mode,
        DetectLocalMode::InterfaceNamePrefix("veth".into())
    );

    let e =
        resolve(&format!("{HEAD}detectLocalMode: InterfaceNamePrefix\n")).expect_err("no prefix");
    assert!(
        e.place
            .ends_with("kube-proxy.yaml: detectLocal.interfaceNamePrefix"),
        "{e}"
    );
    assert!(e.message.contains("must not be empty"), "{e}");
    let e = resolve(&format!(
        "{HEAD}detectLocalMode: BridgeInterface\ndetectLocal:\n  bridgeInterface: a-much-too-long-name\n"
    ))
    .expect_err("too long");
    assert!(e.message.contains("is not an interface name"), "{e}");
    let e = resolve(&format!(
        "{HEAD}mode: userspace\ndetectLocalMode: BridgeInterface\ndetectLocal:\n  bridgeInterface: cbr0\n"
    ))
    .expect_err("userspace mode");
    assert!(e.place.ends_with("kube-proxy.yaml: detectLocalMode"), "{e}");
    let e = resolve(&format!("{HEAD}detectLocalMode: Bridge\n")).expect_err("unknown");
    assert!(
        e.message
            .contains("want ClusterCIDR, NodeCIDR, BridgeInterface or InterfaceNamePrefix"),
        "{e}"
    );
}
