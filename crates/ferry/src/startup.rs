//! kube-proxy's start-up steps around the proxy itself: the OOM score, the one line that says
//! what starts (version, node, mode, source, periods), the checks that the mode can run here
//! ([`preflight`]: one line naming the missing package or capability), and what kube-proxy
//! left in the kernel ([`log_leftovers`]: one line per finding, saying what Ferry does about
//! it). Everything mode-dependent comes from the mode table.

use ferry_dataplane::leftovers::Leftover;
use ferry_dataplane::mode::{ModeEntry, NodeMode};
use ferry_dataplane::modes::MODES;
use ferry_dataplane::preflight::{missing, Facts};
use ferry_model::IpFamily;

use crate::config::{format_duration, Config};

mod conntrack;
pub use conntrack::apply_conntrack;

/// Sets this process's OOM score adjustment (`oomScoreAdj`, kube-proxy's default -999, so the
/// kernel kills the proxy last). Best effort, as upstream: lowering it needs
/// CAP_SYS_RESOURCE; a failure is one warning (this runs once, at start-up) saying so.
pub fn apply_oom_score_adj(value: Option<i32>) {
    let Some(value) = value else {
        return;
    };
    match std::fs::write("/proc/self/oom_score_adj", value.to_string()) {
        Ok(()) => tracing::debug!(oom_score_adj = value, "OOM score adjusted"),
        Err(e) => tracing::warn!(oom_score_adj = value, "{}", oom_score_adj_failed(value, &e)),
    }
}

/// The warning when `oomScoreAdj` could not be written.
fn oom_score_adj_failed(value: i32, e: &std::io::Error) -> String {
    let hint = if e.kind() == std::io::ErrorKind::PermissionDenied {
        " (lowering it needs CAP_SYS_RESOURCE: securityContext.capabilities.add: \
         [SYS_RESOURCE])"
    } else {
        ""
    };
    format!(
        "cannot set oomScoreAdj {value} (/proc/self/oom_score_adj: {e}){hint}; under memory \
         pressure the kernel may kill Ferry before other processes"
    )
}

/// The start-up line's message: `ferry v0.1.0 starting (nftables mode, manifests examples/seed)`.
/// `source` names where Services come from (`manifests PATH`, `Kubernetes API`).
pub fn starting_message(config: &Config, source: &str) -> String {
    format!(
        "ferry v{} starting ({} mode, {source})",
        crate::version::VERSION,
        config.mode.as_str()
    )
}

/// Logs the start-up line, with the node and the sync periods as fields.
pub fn log_start(config: &Config, source: &str) {
    tracing::info!(
        node = %config.node_name,
        version = crate::version::VERSION,
        sync_period = %format_duration(config.sync_period),
        min_sync_period = %format_duration(config.min_sync_period),
        "{}",
        starting_message(config, source)
    );
}

/// Whether `mode` can run here: its tools on `PATH`, its capabilities, and the kernel's
/// support of IPv4 (the mode's own check). `Err` is the one line to stop with.
pub fn preflight(mode: &dyn NodeMode) -> Result<(), String> {
    let requirements = mode.requirements();
    let lacking = missing(&mode.describe(), &requirements, &Facts::read(&requirements));
    if !lacking.is_empty() {
        return Err(lacking.join("; "));
    }
    mode.supports(IpFamily::V4)
        .map_err(|why| format!("{} cannot program IPv4 here: {why}", mode.describe()))
}

/// One line per leftover of kube-proxy found in this network namespace, saying what Ferry,
/// running `running`, does about it: a warning when it is left to the operator.
pub fn log_leftovers(running: &ModeEntry) {
    for entry in &MODES {
        for l in (entry.leftovers)() {
            report(&l, entry, running);
        }
    }
}

fn report(l: &Leftover, found_by: &ModeEntry, running: &ModeEntry) {
    let line = leftover_line(l, Some(found_by), running);
    if l.shared || found_by.mode != running.mode {
        tracing::info!("{line}");
    } else {
        tracing::warn!("{line}");
    }
}

/// What Ferry does about `l`, found by `found_by`'s mode (`None`: by no mode), when running
/// `running`.
pub fn leftover_line(l: &Leftover, found_by: Option<&ModeEntry>, running: &ModeEntry) -> String {
    let what = &l.what;
    match found_by {
        Some(e) if l.shared && e.mode == running.mode => format!(
            "kube-proxy's leftovers: {what}: {} mode programs these chains (same names) and \
             takes them over at its first sync",
            e.mode
        ),
        Some(e) if e.mode != running.mode => format!(
            "kube-proxy's leftovers: {what}: removed after Ferry's first sync ({} mode's \
             cleanup, as kube-proxy removes the other modes' rules when it starts), so they \
             serve traffic until Ferry's rules do",
            e.mode
        ),
        _ => {
            format!(
            "kube-proxy's leftovers: {what}: Ferry leaves it alone, and until it is removed it \
             still acts on the same Services; remove it once Ferry has synced: {}",
            l.remove.as_deref().unwrap_or("see docs/src/cluster/migrate.md")
        )
        }
    }
}

#[cfg(test)]
mod tests {
    use ferry_compile::mode::ProxyMode;
    use ferry_dataplane::modes::entry;

    use super::*;

    #[test]
    fn the_start_line_names_version_mode_and_source() {
        let config = Config::default();
        let line = starting_message(&config, "Kubernetes API");
        assert_eq!(
            line,
            format!(
                "ferry v{} starting (nftables mode, Kubernetes API)",
                crate::version::VERSION
            )
        );
    }

    #[test]
    fn a_refused_oom_score_adj_names_the_capability() {
        let e = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        let line = oom_score_adj_failed(-999, &e);
        assert!(
            line.starts_with("cannot set oomScoreAdj -999 (/proc/self/oom_score_adj: ")
                && line
                    .contains("CAP_SYS_RESOURCE: securityContext.capabilities.add: [SYS_RESOURCE]"),
            "{line}"
        );
    }

    #[test]
    fn each_leftover_says_what_ferry_does_about_it_in_each_mode() {
        let chains = Leftover {
            what: "iptables-nft nat chain KUBE-SERVICES".to_owned(),
            shared: true,
            remove: None,
        };
        let (nft, ipt) = (entry(ProxyMode::Nftables), entry(ProxyMode::Iptables));
        let taken = leftover_line(&chains, Some(ipt), ipt);
        assert!(
            taken.contains("takes them over at its first sync"),
            "{taken}"
        );
        let removed = leftover_line(&chains, Some(ipt), nft);
        assert!(
            removed.contains(
                "removed after Ferry's first sync (iptables mode's cleanup, as kube-proxy"
            ),
            "{removed}"
        );
        let table = Leftover {
            what: "table ip kube-proxy (kube-proxy's nftables mode)".to_owned(),
            shared: false,
            remove: Some("nft delete table ip kube-proxy".to_owned()),
        };
        let line = leftover_line(&table, Some(nft), nft);
        assert!(
            line.contains("Ferry leaves it alone")
                && line.ends_with("once Ferry has synced: nft delete table ip kube-proxy"),
            "{line}"
        );
        let line = leftover_line(&table, Some(nft), ipt);
        assert!(
            line.contains("removed after Ferry's first sync (nftables mode's cleanup"),
            "{line}"
        );
    }
}
