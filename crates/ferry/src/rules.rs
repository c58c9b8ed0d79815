//! `ferry rules`: what `ferry run` would program on a node, as the mode's renderer writes it.
//! Never touches the kernel: no root, no netlink.

use std::fmt;
use std::path::Path;
use std::process::ExitCode;

use ferry_compile::NodeCompiler;
use ferry_dataplane::modes::entry;
use ferry_model::{ClusterState, IpFamily, NodeContext};
use ferry_source::pods::{EndpointController, ReadinessUpdate};
use ferry_source::SourceEvent;

use crate::cli::{resolve, RunArgs, EXIT_USAGE};
use crate::config::Config;

/// `ferry rules`: loads the manifests and prints the node's rules, written to stdout as they
/// are produced (at 10 000 Services the text is tens of MiB). A closed pipe (`| head`) ends it
/// quietly, with a failure status.
pub fn main(args: &RunArgs) -> ExitCode {
    let Some((config, manifests)) = resolve(args, |w| eprintln!("warning: {w}")) else {
        return ExitCode::from(EXIT_USAGE);
    };
    let state = match load_from(&config, manifests.as_deref()) {
        Ok(state) => state,
        Err(code) => return code,
    };
    let nodes = state.nodes().map(|n| n.name.as_str());
    if let Some(w) = crate::check::unknown_node_warning(&config.node_name, nodes) {
        eprintln!("warning: {w}");
    }
    let mut out = Stdout::new();
    let written = write(&config, &state, &mut out)
        .map_err(|_| out.error.take())
        .and_then(|()| out.flush().map_err(Some));
    match written {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            if let Some(e) = e.filter(|e| e.kind() != std::io::ErrorKind::BrokenPipe) {
                eprintln!("ferry rules: cannot write the rules: {e}");
            }
            ExitCode::FAILURE
        }
    }
}

/// The cluster state of `manifests`, or without them of the Kubernetes API (as the agent reads
/// it); the exit code when the API cannot be read (64: a configuration error, as `ferry run`).
pub fn load_from(config: &Config, manifests: Option<&Path>) -> Result<ClusterState, ExitCode> {
    match manifests {
        Some(path) => Ok(load(path)),
        None => match crate::api_read::read(config) {
            Ok(objects) => Ok(state_of(vec![SourceEvent::Resync(objects)])),
            Err(e) => {
                eprintln!("ferry: {e}");
                Err(ExitCode::from(EXIT_USAGE))
            }
        },
    }
}

/// The cluster state the manifests describe, read once; a warning on stderr for each bad
/// object (which is left out). Pods become EndpointSlices as in `ferry run`, without running
/// their readiness probes: a Pod with a probe counts as its status says until one ran.
pub fn load(manifests: &Path) -> ClusterState {
    load_judged(manifests, &[]).0
}

/// Like [`load`], with readiness probes' `verdicts` (an agent's, for `ferry explain --live`)
/// judging the Pods as that agent does; also returns the controller, which knows the Pods.
pub fn load_judged(
    manifests: &Path,
    verdicts: &[ReadinessUpdate],
) -> (ClusterState, EndpointController) {
    let scan = ferry_source::manifest::load(manifests);
    for e in &scan.errors {
        eprintln!("warning: {e}");
    }
    let mut controller = EndpointController::new();
    let mut events = controller.handle(SourceEvent::Resync(scan.objects)).events;
    events.extend(controller.readiness_all(verdicts).events);
    for e in controller.problems() {
        eprintln!("warning: {e}");
    }
    (state_of(events), controller)
}

/// The state after `events`, from empty.
pub(crate) fn state_of(events: Vec<SourceEvent>) -> ClusterState {
    let mut state = ClusterState::new();
    for event in events {
        take(&mut state, event);
    }
    state
}

/// Applies one event of the Pod stage to `state` (which starts empty: a Resync only adds).
fn take(state: &mut ClusterState, event: SourceEvent) {
    match event {
        SourceEvent::Apply(obj) => drop(state.apply(obj)),
        SourceEvent::Delete(key) => drop(state.delete(&key)),
        SourceEvent::Resync(objects) => {
            for obj in objects {
                state.apply(obj);
            }
        }
        SourceEvent::Batch(events) => {
            for event in events {
                take(state, event);
            }
        }
    }
}

/// The node's rules: the primary family's, then each other family's when it has a service to
/// program (a cluster without IPv6 services prints only IPv4), under the renderer's header.
#[cfg(test)]
pub fn render(config: &Config, state: &ClusterState) -> String {
    let mut out = String::new();
    // Writing into a String cannot fail.
    let _ = write(config, state, &mut out);
    out
}

/// [`render`], written into `out` as it is produced (`ferry rules` writes to stdout).
pub fn write(config: &Config, state: &ClusterState, out: &mut dyn fmt::Write) -> fmt::Result {
    let renderer = entry(config.mode).renderer;
    for (i, family) in [IpFamily::V4, IpFamily::V6].into_iter().enumerate() {
        let context = NodeContext {
            node_name: config.node_name.clone(),
            family,
        };
        let compiler = NodeCompiler::new(state, &context, &config.compile_config(family));
        if i > 0 {
            if compiler.plan(state).services.is_empty() {
                continue;
            }
            if let Some(header) = renderer.family_header(family) {
                out.write_str(&header)?;
            }
        }
        renderer.write(&compiler, state, out)?;
    }
    Ok(())
}

/// Standard output as a [`fmt::Write`], buffered; keeps the first error (a closed pipe).
pub struct Stdout {
    out: std::io::BufWriter<std::io::Stdout>,
    /// Why a write failed.
    pub error: Option<std::io::Error>,
}

impl Default for Stdout {
    fn default() -> Self {
        Self::new()
    }
}

impl Stdout {
    /// Buffered standard output.
    pub fn new() -> Self {
        Self {
            out: std::io::BufWriter::with_capacity(1 << 16, std::io::stdout()),
            error: None,
        }
    }

    /// Writes out what is buffered.
    pub fn flush(&mut self) -> std::io::Result<()> {
        std::io::Write::flush(&mut self.out)
    }
}

impl fmt::Write for Stdout {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        std::io::Write::write_all(&mut self.out, s.as_bytes()).map_err(|e| {
            self.error.get_or_insert(e);
            fmt::Error
        })
    }
}

#[cfg(test)]
mod tests {
    use ferry_model::Object;

    use super::*;
    use crate::config::ProxyMode;
    use crate::sync::tests::families::objects;

    fn state(objects: Vec<Object>) -> ClusterState {
        let mut state = ClusterState::new();
        for obj in objects {
            state.apply(obj);
        }
        state
    }

    fn config(mode: ProxyMode) -> Config {
        Config {
            node_name: "node-a".into(),
            mode,
            ..Config::default()
        }
    }

    #[test]
    fn rules_show_the_ipv6_table_only_with_ipv6_services() {
        let nft = config(ProxyMode::Nftables);
        let text = render(&nft, &state(objects(false)));
        assert!(!text.contains("table ip6 ferry"), "{text}");
        let text = render(&nft, &state(objects(true)));
        assert!(text.starts_with("table ip ferry {"), "{text}");
        assert!(text.contains("table ip6 ferry {"), "{text}");
    }

    #[test]
    fn iptables_rules_name_the_tool_of_each_further_family() {
        let text = render(&config(ProxyMode::Iptables), &state(objects(true)));
        assert!(text.starts_with("*"), "{text}");
        assert!(
            text.contains("# IPv6 rules: ip6tables-restore --noflush input\n"),
            "{text}"
        );
    }
}
