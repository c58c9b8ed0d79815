//! What `ferry check` says about the mode that runs and about every behaviour that differs
//! from kube-proxy's with the same configuration (kube-proxy's behaviour being the reference a
//! drop-in replacement is judged by).

use ferry_model::IpFamily;

use crate::config::{Config, ProxyMode};

/// `iptables mode (mode "" in kube-proxy.yaml: kube-proxy's default, …)`.
pub fn mode_line(config: &Config) -> String {
    if config.mode_reason.is_empty() {
        return format!("{} mode", config.mode.as_str());
    }
    format!("{} mode ({})", config.mode.as_str(), config.mode_reason)
}

/// Each behaviour of Ferry, run with `config`, that differs from kube-proxy's with the same
/// file and flags: one sentence each.
pub fn differences(config: &Config) -> Vec<String> {
    let mut out = Vec::new();
    let localhost = config.localhost_node_ports(IpFamily::V4);
    match config.mode {
        ProxyMode::Iptables => {
            out.push(if localhost {
                "NodePorts on 127.0.0.1 and ::1 are served by Ferry's userspace proxy (the pod \
                 sees the node's address), never by setting route_localnet (CVE-2020-8558)"
                    .to_owned()
            } else {
                "NodePorts do not answer on 127.0.0.1 (iptables.localhostNodePorts is false)"
                    .to_owned()
            });
            out.push(
                "filter KUBE-NODEPORTS has no ACCEPT rules for health-check node ports yet"
                    .to_owned(),
            );
            out.push(
                "nat KUBE-POSTROUTING ends with Ferry's owner marker (a rule that never \
                 matches), which tells `ferry cleanup` Ferry's chains from kube-proxy's"
                    .to_owned(),
            );
        }
        ProxyMode::Nftables => {
            if config.mode_reason.starts_with("Ferry's default") {
                out.push(
                    "mode: kube-proxy without a configuration file runs iptables mode, where \
                     NodePorts answer on every local address and on 127.0.0.1; here they \
                     answer on nodePortAddresses (default: the node's primary IPs)"
                        .to_owned(),
                );
            }
            if localhost {
                out.push(
                    "NodePorts on 127.0.0.1 and ::1 answer (TCP and UDP), through Ferry's \
                     userspace proxy; kube-proxy's nftables mode answers them only with its \
                     alpha KubeProxyNFTablesLocalhostNodePorts gate, TCP only"
                        .to_owned(),
                );
            }
            out.push("the rules are in Ferry's own tables, ip ferry and ip6 ferry, not ip kube-proxy / ip6 kube-proxy".to_owned());
        }
        ProxyMode::Ipvs => out.push(
            "nat KUBE-POSTROUTING ends with Ferry's owner marker (a rule that never matches), \
             which tells `ferry cleanup` Ferry's chains from kube-proxy's"
                .to_owned(),
        ),
        ProxyMode::Userspace => out.push(
            "kube-proxy has had no userspace mode since 1.26: this is Ferry's own proxy process"
                .to_owned(),
        ),
    }
    out.push(
        "a conntrack setting the kernel refuses (nf_conntrack_max in a container's network \
         namespace, a read-only /proc/sys) is logged and the proxy runs; kube-proxy exits"
            .to_owned(),
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ferrys_own_default_mode_is_named_as_a_difference_from_kube_proxy() {
        let config = Config {
            mode_reason: "Ferry's default without --config".to_owned(),
            ..Config::default()
        };
        assert_eq!(
            mode_line(&config),
            "nftables mode (Ferry's default without --config)"
        );
        assert!(differences(&config)[0]
            .starts_with("mode: kube-proxy without a configuration file runs iptables mode"));
        let iptables = Config {
            mode: ProxyMode::Iptables,
            mode_reason: "mode \"\" in kube-proxy.yaml".to_owned(),
            ..Config::default()
        };
        let said = differences(&iptables);
        assert!(said.iter().all(|d| !d.starts_with("mode:")), "{said:?}");
        assert!(said.iter().any(|d| d.contains("owner marker")), "{said:?}");
    }
}
