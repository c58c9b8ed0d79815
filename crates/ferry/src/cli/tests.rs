use std::ffi::OsString;
use std::time::Duration;

use clap::Parser;

use super::{argv, Cli, Command, RunArgs};
use crate::config::{Config, ProxyMode};

fn parse(args: &[&str]) -> Result<RunArgs, clap::Error> {
    let n = argv::normalize(args.iter().map(OsString::from));
    let mut cli = Cli::try_parse_from(&n.args)?;
    let run = cli.command.run_args_mut().expect("takes run flags").clone();
    Ok(RunArgs {
        ignored_flags: n.ignored,
        ..run
    })
}

fn resolve(args: &[&str]) -> (Config, Vec<String>) {
    let mut all = vec!["ferry", "run", "--hostname-override=n1"];
    all.extend_from_slice(args);
    parse(&all)
        .unwrap_or_else(|e| panic!("{args:?}: {e}"))
        .resolve()
        .unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

/// Every flag of kube-proxy on Linux (cmd/kube-proxy/app/options.go, component-base's logging
/// flags), each with a value of its type, in the spellings kube-proxy's flag library accepts.
const EVERY_KUBE_PROXY_FLAG: &[&str] = &[
    "--bind-address=0.0.0.0",
    "--bind-address-hard-fail=false",
    "--cleanup=false",
    "--cluster-cidr=10.244.0.0/16",
    "--config-sync-period=15m0s",
    "--conntrack-max-per-core",
    "32768",
    "--conntrack-min=131072",
    "--conntrack-tcp-be-liberal=false",
    "--conntrack-tcp-timeout-close-wait=1h0m0s",
    "--conntrack-tcp-timeout-established=24h0m0s",
    "--conntrack-udp-timeout=0s",
    "--conntrack-udp-timeout-stream=0s",
    "--detect-local-mode=ClusterCIDR",
    "--feature-gates=AllAlpha=false",
    "--healthz-bind-address=0.0.0.0:10256",
    "--healthz-port=10256",
    "--init-only=false",
    "--iptables-localhost-nodeports=true",
    "--iptables-masquerade-bit=14",
    "--iptables-min-sync-period=1s",
    "--iptables-sync-period=30s",
    "--ipvs-exclude-cidrs=10.0.0.0/8",
    "--ipvs-min-sync-period=0s",
    "--ipvs-scheduler=rr",
    "--ipvs-strict-arp=false",
    "--ipvs-sync-period=30s",
    "--ipvs-tcp-timeout=0s",
    "--ipvs-tcpfin-timeout=0s",
    "--ipvs-udp-timeout=0s",
    "--kube-api-burst=10",
    "--kube-api-content-type=application/vnd.kubernetes.protobuf",
    "--kube-api-qps=5",
    "--log-flush-frequency=5s",
    "--log-json-info-buffer-size=0",
    "--log-json-split-stream=false",
    "--log-text-info-buffer-size=0",
    "--log-text-split-stream=false",
    "--logging-format=text",
    "--masquerade-all=false",
    "--metrics-bind-address=127.0.0.1:10249",
    "--metrics-port=10249",
    "--nodeport-addresses=primary",
    "--oom-score-adj",
    "-999",
    "--pod-bridge-interface=cni0",
    "--pod-interface-name-prefix=veth",
    "--profiling=false",
    "--proxy-mode=iptables",
    "--show-hidden-metrics-for-version=1.32",
    "--v=2",
    "--vmodule=proxier=4",
    "--write-config-to=",
];

#[test]
fn every_kube_proxy_flag_is_accepted_and_the_unused_ones_named_once() {
    let (config, warnings) = resolve(EVERY_KUBE_PROXY_FLAG);
    assert_eq!(config.mode, ProxyMode::Iptables);
    assert_eq!(config.kube_proxy.oom_score_adj, Some(-999));
    assert_eq!(config.kube_proxy.ipvs.scheduler, "rr");
    let unused: Vec<&String> = warnings
        .iter()
        .filter(|w| w.starts_with("accepted for kube-proxy compatibility"))
        .collect();
    assert_eq!(unused.len(), 1, "{warnings:?}");
    for flag in ["--profiling", "--feature-gates", "--vmodule"] {
        assert!(unused[0].contains(flag), "{flag}: {}", unused[0]);
    }
    for acted_on in [
        "--proxy-mode",
        "--conntrack-min",
        "--conntrack-max-per-core",
        "--bind-address",
        "--kube-api-qps",
        "--kube-api-burst",
        "--log-text-split-stream",
        "--log-json-split-stream",
    ] {
        assert!(!unused[0].contains(acted_on), "{acted_on}: {}", unused[0]);
    }
}

#[test]
fn removed_windows_and_klog_flags_are_named_in_the_same_warning() {
    let (_, warnings) = resolve(&[
        "--logtostderr",
        "--log-dir",
        "/tmp",
        "--resource-container=/kube-proxy",
        "--source-vip=1.2.3.4",
    ]);
    let w = warnings
        .iter()
        .find(|w| w.starts_with("accepted for kube-proxy compatibility"))
        .expect("one warning");
    for flag in [
        "--logtostderr",
        "--log-dir",
        "--resource-container",
        "--source-vip",
    ] {
        assert!(w.contains(flag), "{flag}: {w}");
    }
}

#[test]
fn booleans_take_go_values_only_with_an_equals_sign() {
    assert!(resolve(&["--masquerade-all=true"]).0.masquerade_all);
    assert!(resolve(&["--masquerade-all"]).0.masquerade_all);
    assert!(resolve(&["--masquerade-all=T"]).0.masquerade_all);
    assert!(!resolve(&["--masquerade-all=false"]).0.masquerade_all);
    // kube-proxy takes `true` here as an argument, and fails: so does Ferry.
    assert!(parse(&["ferry", "run", "--masquerade-all", "true"]).is_err());
    assert!(parse(&["ferry", "run", "--masquerade-all=maybe"]).is_err());
}

#[test]
fn verbosity_is_read_in_every_spelling() {
    for args in [
        &["--v=4"][..],
        &["--v", "4"],
        &["-v", "4"],
        &["-v=4"],
        &["-v4"],
    ] {
        assert_eq!(resolve(args).0.verbosity, 4, "{args:?}");
    }
}

#[test]
fn iptables_sync_flags_set_the_periods_of_the_running_mode() {
    let (c, _) = resolve(&[
        "--iptables-sync-period",
        "10s",
        "--iptables-min-sync-period=0",
    ]);
    assert_eq!(c.mode, ProxyMode::Nftables);
    assert_eq!(c.sync_period, Duration::from_secs(10));
    assert_eq!(
        c.min_sync_period,
        Duration::ZERO,
        "0 from a flag means: sync at once"
    );
    let (c, _) = resolve(&["--ipvs-sync-period", "10s"]);
    assert_eq!(c.sync_period, Duration::from_secs(30), "IPVS mode only");
}

#[test]
fn deprecated_ports_move_or_disable_the_servers() {
    let (c, _) = resolve(&["--healthz-port=0", "--metrics-port", "10300"]);
    assert_eq!(c.healthz_bind_address, None);
    assert_eq!(
        c.metrics_bind_address,
        Some("127.0.0.1:10300".parse().expect("addr"))
    );
    let (c, _) = resolve(&["--metrics-bind-address=0.0.0.0", "--healthz-bind-address="]);
    assert_eq!(
        c.metrics_bind_address,
        Some("0.0.0.0:10249".parse().expect("addr"))
    );
    assert_eq!(c.healthz_bind_address, None);
}

#[test]
fn the_iptables_masquerade_bit_is_iptables_modes_as_upstream() {
    let (c, w) = resolve(&["--iptables-masquerade-bit=12"]);
    assert_eq!(c.masquerade_bit, 14);
    assert!(
        w.iter()
            .any(|w| w.contains("--iptables-masquerade-bit (iptables and IPVS modes only)")),
        "{w:?}"
    );
    let (c, _) = resolve(&["--iptables-masquerade-bit=12", "--proxy-mode=iptables"]);
    assert_eq!(c.masquerade_bit, 12);
    let (c, w) = resolve(&["--iptables-masquerade-bit=12", "--proxy-mode=ipvs"]);
    assert_eq!(c.masquerade_bit, 12);
    assert!(
        !w.iter().any(|w| w.contains("--iptables-masquerade-bit")),
        "{w:?}"
    );
    assert_eq!(resolve(&["--masquerade-bit=12"]).0.masquerade_bit, 12);
}

#[test]
fn kube_proxy_style_command_lines_without_a_subcommand_are_run() {
    let n = argv::normalize(["ferry", "--cleanup", "--v=2"].iter().map(OsString::from));
    let cli = Cli::try_parse_from(&n.args).expect("parses");
    let Command::Run(args) = cli.command else {
        panic!("not run");
    };
    assert_eq!(args.kube_proxy.cleanup, Some(true));
}

#[test]
fn kube_proxys_version_flag_prints_the_version_through_the_kube_proxy_name() {
    for flags in [
        &["--version"][..],
        &["--v=2", "--version=raw"],
        &["--config=/x", "--version=true"],
    ] {
        let args = std::iter::once("/usr/local/bin/kube-proxy").chain(flags.iter().copied());
        let n = argv::normalize(args.map(OsString::from));
        let cli = Cli::try_parse_from(&n.args).expect("parses");
        assert!(matches!(cli.command, Command::Version), "{flags:?}");
    }
    let n = argv::normalize(
        ["kube-proxy", "--version=false", "--v=2"]
            .iter()
            .map(OsString::from),
    );
    let cli = Cli::try_parse_from(&n.args).expect("parses");
    assert!(matches!(cli.command, Command::Run(_)));
}

#[test]
fn flags_next_to_a_config_file_override_it_and_are_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("c.yaml");
    std::fs::write(
        &path,
        "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: iptables\nclusterCIDR: 10.0.0.0/8\n",
    )
    .expect("write");
    let config = format!("--config={}", path.display());
    let (c, w) = resolve(&[&config, "--proxy-mode=nftables"]);
    assert_eq!(c.mode, ProxyMode::Nftables);
    assert!(
        w.iter().any(
            |w| w.contains("kube-proxy ignores these flags when --config is given")
                && w.contains("--proxy-mode")
        ),
        "{w:?}"
    );
    // --hostname-override is applied over a file by kube-proxy too: no warning for it.
    assert!(
        !w.iter().any(|w| w.contains("--hostname-override")),
        "{w:?}"
    );
}

#[test]
fn bad_kube_proxy_flag_values_name_the_flag() {
    for (args, flag) in [
        (&["--oom-score-adj=5000"][..], "--oom-score-adj"),
        (&["--iptables-sync-period=soon"], "--iptables-sync-period"),
        (&["--feature-gates=Foo"], "--feature-gates"),
        (&["--bind-address=nowhere"], "--bind-address"),
        (&["--hostname-override= "], "--hostname-override"),
        (
            &["--feature-gates=MultiCIDRServiceAllocator=false"],
            "--feature-gates",
        ),
        (
            &["--log-text-split-stream"],
            "logging.options.text.splitStream",
        ),
    ] {
        let mut all = vec!["ferry", "run"];
        all.extend_from_slice(args);
        let err = parse(&all)
            .expect("parses")
            .resolve()
            .expect_err("bad value");
        assert_eq!(err.place, flag, "{err}");
    }
}

#[test]
fn kube_proxys_node_ip_rate_gate_and_log_flags_reach_what_uses_them() {
    let (c, warnings) = resolve(&[
        "--bind-address=10.1.1.250",
        "--kube-api-qps=20",
        "--kube-api-burst=40",
        "--feature-gates=AllowServiceExternalIPs=false,LoggingAlphaOptions=true",
        "--log-text-split-stream",
        "--bind-address-hard-fail",
    ]);
    assert!(
        warnings.iter().all(|w| !w.starts_with("accepted for")),
        "{warnings:?}"
    );
    let cc = c.compile_config(ferry_model::IpFamily::V4);
    assert_eq!(cc.node_ip, Some("10.1.1.250".parse().expect("ip")));
    assert!(!cc.external_ips);
    assert_eq!(c.api_rate(), ferry_source::kube::ApiRate::new(20.0, 40));
    assert!(c.log_split_stream());
    assert!(c.kube_proxy.bind_address_hard_fail);
    // The defaults: the Node's IP, external IPs, kube-proxy's 5 / 10, one stream.
    let (c, _) = resolve(&[]);
    let cc = c.compile_config(ferry_model::IpFamily::V4);
    assert_eq!((cc.node_ip, cc.external_ips), (None, true));
    assert_eq!(c.api_rate(), ferry_source::kube::ApiRate::new(5.0, 10));
    assert!(!c.log_split_stream());
    // A gate locked to its value is accepted; one Ferry does not act on is named.
    let (_, warnings) =
        resolve(&["--feature-gates=MultiCIDRServiceAllocator=true,NFTablesNetlink=false"]);
    let unused: Vec<&String> = warnings
        .iter()
        .filter(|w| w.starts_with("accepted for"))
        .collect();
    assert!(
        unused.len() == 1 && unused[0].contains("--feature-gates"),
        "{warnings:?}"
    );
}
