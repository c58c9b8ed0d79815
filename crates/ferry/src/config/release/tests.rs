use ferry_model::IpFamily;

use super::*;
use crate::cli::RunArgs;
use crate::config::Config;

const HEAD: &str = "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n\
                    clusterCIDR: 10.244.0.0/16\n";

/// `ferry run --config kube-proxy.yaml` (holding `body` after the head) with `flags` set.
fn resolve(
    body: &str,
    flags: impl FnOnce(&mut RunArgs),
) -> Result<(Config, Vec<String>), ConfigError> {
    crate::config::tests::resolve_with(&format!("{HEAD}{body}"), flags)
}

fn ok(body: &str) -> (Config, Vec<String>) {
    resolve(body, |_| {}).expect("valid")
}

#[test]
fn an_empty_mode_runs_iptables_mode_with_kube_proxys_warning() {
    let (c, warnings) = ok("mode: \"\"\n");
    assert_eq!(c.mode, ProxyMode::Iptables);
    // The file's path in place of its name.
    let want = defaulted_mode_warning("FILE");
    let (before, after) = want.split_once("FILE").expect("names the file");
    assert!(
        warnings.len() == 1
            && warnings[0].starts_with(before)
            && warnings[0].ends_with(&format!("kube-proxy.yaml{after}")),
        "{warnings:?}"
    );
    assert!(warnings[0].contains("mode: iptables") && warnings[0].contains("1.40"));
    // A mode said, in the file or by flag, is no default: no warning.
    assert_eq!(ok("mode: iptables\n").1, Vec::<String>::new());
    let (c, warnings) =
        resolve("mode: \"\"\n", |a| a.proxy_mode = Some("nftables".into())).expect("valid");
    assert_eq!(c.mode, ProxyMode::Nftables);
    assert!(
        warnings.iter().all(|w| !w.contains("no proxy mode")),
        "{warnings:?}"
    );
}

#[test]
fn ipvs_mode_logs_kube_proxys_deprecation_and_the_ipvs_gate_off_refuses_it() {
    let (c, warnings) = ok("mode: ipvs\n");
    assert_eq!(c.mode, ProxyMode::Ipvs);
    assert_eq!(warnings, [mode_warning(ProxyMode::Ipvs).expect("ipvs")]);
    assert!(warnings[0].contains("1.40") && warnings[0].contains("1.43"));
    assert_eq!(mode_warning(ProxyMode::Nftables), None);

    // The gate on (its default) changes nothing and is no "not used" field.
    let (_, warnings) = ok("mode: ipvs\nfeatureGates:\n  KubeProxyIPVS: true\n");
    assert_eq!(warnings.len(), 1, "{warnings:?}");

    let err = ok_err("mode: ipvs\nfeatureGates:\n  KubeProxyIPVS: false\n");
    assert!(
        err.contains("kube-proxy.yaml: mode: ipvs mode needs the KubeProxyIPVS feature gate"),
        "{err}"
    );
    // The flag the same, and the gate off leaves the other modes alone.
    let err = resolve("", |a| {
        a.proxy_mode = Some("ipvs".into());
        a.kube_proxy.feature_gates = Some("KubeProxyIPVS=false".into());
    })
    .expect_err("refused")
    .to_string();
    assert!(err.contains("KubeProxyIPVS"), "{err}");
    let (c, _) = ok("mode: nftables\nfeatureGates:\n  KubeProxyIPVS: false\n");
    assert_eq!(c.mode, ProxyMode::Nftables);
}

fn ok_err(body: &str) -> String {
    resolve(body, |_| {}).expect_err("refused").to_string()
}

#[test]
fn the_nftables_localhost_gate_off_turns_localhost_node_ports_off() {
    let listed = "mode: nftables\nnodePortAddresses: [primary, localhost]\n";
    // Ferry's default, and the gate on: answered, as kube-proxy with the gate on.
    for gates in [
        "",
        "featureGates:\n  KubeProxyNFTablesLocalhostNodePorts: true\n",
    ] {
        let (c, warnings) = ok(&format!("{listed}{gates}"));
        assert!(c.localhost_node_ports(IpFamily::V4), "{gates}");
        assert_eq!(warnings, Vec::<String>::new(), "{gates}");
    }
    // The gate off, as kube-proxy's default: not answered, and the warning names the gate.
    let (c, warnings) = ok(&format!(
        "{listed}featureGates:\n  KubeProxyNFTablesLocalhostNodePorts: false\n"
    ));
    assert!(!c.localhost_node_ports(IpFamily::V4));
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains(GATE_NFT_LOCALHOST), "{warnings:?}");
    // Ferry's own field, when said, wins over the gate.
    let (c, _) = ok(&format!(
        "{listed}nftables:\n  localhostNodePorts: true\n\
         featureGates:\n  KubeProxyNFTablesLocalhostNodePorts: false\n"
    ));
    assert!(c.localhost_node_ports(IpFamily::V4));
}

#[test]
fn only_gates_ferry_does_not_act_on_are_named_not_used() {
    let (_, warnings) = ok("mode: nftables\nfeatureGates:\n  KubeProxyIPVS: true\n  Foo: true\n");
    assert!(
        warnings.len() == 1
            && warnings[0]
                .ends_with("kube-proxy.yaml: featureGates (Foo): set, but not used by Ferry"),
        "{warnings:?}"
    );
    let gates = |g: &str| {
        resolve("mode: nftables\n", |a| {
            a.kube_proxy.feature_gates = Some(g.into())
        })
        .expect("valid")
        .1
    };
    assert_eq!(
        gates("KubeProxyIPVS=true, KubeProxyNFTablesLocalhostNodePorts=true"),
        Vec::<String>::new()
    );
    let warnings = gates("KubeProxyIPVS=true,Foo=false");
    assert!(
        warnings.len() == 1 && warnings[0].contains("--feature-gates"),
        "{warnings:?}"
    );
}
