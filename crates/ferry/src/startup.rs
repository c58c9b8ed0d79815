//! kube-proxy's start-up steps around the proxy itself: the OOM score, and the one line that
//! says what starts (version, node, mode, source, periods).

use crate::config::{format_duration, Config};

/// Sets this process's OOM score adjustment (`oomScoreAdj`, kube-proxy's default -999, so the
/// kernel kills the proxy last). Best effort, as upstream: lowering it needs
/// CAP_SYS_RESOURCE, and a failure is only a debug line.
pub fn apply_oom_score_adj(value: Option<i32>) {
    let Some(value) = value else {
        return;
    };
    match std::fs::write("/proc/self/oom_score_adj", value.to_string()) {
        Ok(()) => tracing::debug!(oom_score_adj = value, "OOM score adjusted"),
        Err(e) => tracing::debug!(oom_score_adj = value, "cannot set the OOM score: {e}"),
    }
}

// `starting_message` and `log_start` replace the start-up line in run.rs once the mode seam
// (issue 11) lands; until then only the tests call them.
#[allow(dead_code)]
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
#[allow(dead_code)]
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

#[cfg(test)]
mod tests {
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
}
