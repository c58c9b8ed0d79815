//! `conntrack.*` applied at start-up (kube-proxy's `platformSetup`), its outcome logged and
//! recorded for `ferry status`.

use crate::config::Config;

/// Applies `conntrack.*` as kube-proxy does at start-up (`ferry_dataplane::sysctls`), logs each
/// setting (info when written, a warning naming the file, the value and the field when it could
/// not be), and records in `config` what was done (`ferry status`) and whether the kernel's
/// `nf_conntrack_tcp_be_liberal` is on (iptables mode's invalid-packet rule follows it).
pub fn apply_conntrack(config: &mut Config) {
    use ferry_dataplane::sysctls;
    let cpus = sysctls::online_cpus();
    let settings = crate::config::conntrack::settings(&config.kube_proxy.conntrack, cpus);
    let applied = sysctls::apply(&settings);
    config.conntrack_applied = applied.iter().map(conntrack_line).collect();
    for a in &applied {
        match &a.result {
            Ok(sysctls::Change::Set { .. }) => tracing::info!("conntrack: {}", conntrack_line(a)),
            Ok(_) => tracing::debug!("conntrack: {}", conntrack_line(a)),
            Err(_) => tracing::warn!("conntrack: {}", conntrack_line(a)),
        }
    }
    config.conntrack_tcp_be_liberal = sysctls::tcp_be_liberal();
    if config.conntrack_tcp_be_liberal && config.mode == crate::config::ProxyMode::Iptables {
        tracing::info!(
            "nf_conntrack_tcp_be_liberal is on: no rule drops packets conntrack marks invalid"
        );
    }
}

/// One setting's outcome, for the log and `ferry status`:
/// `net.netfilter.nf_conntrack_tcp_timeout_established = 86400 (was 432000; conntrack.tcpEstablishedTimeout)`.
pub fn conntrack_line(a: &ferry_dataplane::sysctls::Applied) -> String {
    use ferry_dataplane::sysctls::Change;
    let (name, field, value) = (setting_name(a.name), a.field, a.value);
    match &a.result {
        Ok(Change::Set { from }) => format!("{name} = {value} (was {from}; {field})"),
        Ok(Change::Unchanged) => format!("{name} = {value} (already; {field})"),
        Ok(Change::AlreadyHigher { current }) => {
            format!("{name} = {current} (kept: at least the {value} {field} asks for)")
        }
        Err(e) => {
            let hint = if field == "conntrack.maxPerCore" {
                "; `conntrack.maxPerCore: 0` (`--conntrack-max-per-core=0`) leaves it to the node"
            } else {
                "; a zero value leaves the kernel's"
            };
            format!("cannot set {name} to {value} ({field}): {e}{hint}")
        }
    }
}

/// The setting's name as `sysctl` spells it, or the module parameter's path.
fn setting_name(file: &str) -> String {
    if file == "hashsize" {
        "nf_conntrack hashsize (/sys/module/nf_conntrack/parameters/hashsize)".to_owned()
    } else {
        format!("net.netfilter.{file}")
    }
}
