//! `ferry explain`: where does this packet go on that node, and why?

use std::net::IpAddr;
use std::path::Path;
use std::process::ExitCode;

use serde_json::{json, Value};

use ferry_compile::nft::Ruleset;
use ferry_compile::trace::{trace, Backend, Frontend, Packet, Trace, Verdict};
use ferry_compile::Plan;
use ferry_model::{ClusterState, IpFamily, NodeContext, NodeView, Protocol};

use crate::config::{Config, ConfigError};

pub mod live;

/// `--output`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    /// For people.
    Text,
    /// For tools.
    Json,
    /// A Mermaid flowchart.
    Mermaid,
}

/// Parses `--to DST:PORT[/tcp|udp|sctp]`.
pub fn parse_to(s: &str) -> Result<(IpAddr, u16, Protocol), ConfigError> {
    let err = |m: &str| {
        ConfigError::new(
            "--to",
            format!("{s:?}: {m} (want ADDRESS:PORT[/tcp|udp|sctp])"),
        )
    };
    let (addr, proto) = match s.rsplit_once('/') {
        Some((a, p)) => (
            a,
            p.to_uppercase().parse::<Protocol>().map_err(|e| err(&e))?,
        ),
        None => (s, Protocol::Tcp),
    };
    let sock: std::net::SocketAddr = addr
        .parse()
        .or_else(|_| {
            addr.rsplit_once(':').ok_or(()).and_then(|(ip, port)| {
                Ok(std::net::SocketAddr::new(
                    ip.parse().map_err(|_| ())?,
                    port.parse().map_err(|_| ())?,
                ))
            })
        })
        .map_err(|_| err("not an address and port"))?;
    Ok((sock.ip(), sock.port(), proto))
}

/// Loads the manifests and traces the packet on `config.node_name`.
pub fn explain(
    config: &Config,
    manifests: &Path,
    from: IpAddr,
    to: (IpAddr, u16, Protocol),
) -> (Trace, Ruleset) {
    let scan = ferry_source::manifest::load(manifests);
    for e in &scan.errors {
        eprintln!("warning: {e}");
    }
    let mut state = ClusterState::new();
    for obj in scan.objects {
        state.apply(obj);
    }
    let family = IpFamily::of(&to.0);
    let context = NodeContext {
        node_name: config.node_name.clone(),
        family,
    };
    let view = NodeView::build(&state, &context);
    let plan = Plan::build(&view, &config.compile_config(family));
    let ruleset = ferry_compile::nft::render(&plan);
    let t = trace(
        &view,
        &plan,
        &ruleset,
        Packet {
            src: from,
            dst: to.0,
            port: to.1,
            protocol: to.2,
        },
    );
    (t, ruleset)
}

/// `ferry explain`: trace the packet, optionally compare with the kernel, print.
pub fn run(mut args: crate::cli::ExplainArgs) -> ExitCode {
    if let Some(node) = args.node.take() {
        args.run.hostname_override = Some(node);
    }
    if args.run.manifests.is_none() {
        eprintln!("ferry: --manifests: required");
        return ExitCode::from(crate::EXIT_USAGE);
    }
    let Some((config, manifests)) = crate::resolve(&args.run, |w| eprintln!("warning: {w}")) else {
        return ExitCode::from(crate::EXIT_USAGE);
    };
    let to = match parse_to(&args.to) {
        Ok(to) => to,
        Err(e) => {
            eprintln!("ferry: {e}");
            return ExitCode::from(crate::EXIT_USAGE);
        }
    };
    if IpFamily::of(&args.from) != IpFamily::of(&to.0) {
        eprintln!(
            "ferry: --from: {} and --to {} are of different IP families; each family has its own \
             rules (ip ferry / ip6 ferry)",
            args.from, to.0
        );
        return ExitCode::from(crate::EXIT_USAGE);
    }
    let manifests = manifests.unwrap_or_default();
    let (trace, ruleset) = explain(&config, &manifests, args.from, to);
    let backend = match config.mode {
        crate::config::ProxyMode::Nftables => ferry_compile::trace::Backend::Nft,
        crate::config::ProxyMode::Iptables => ferry_compile::trace::Backend::Iptables,
    };
    let trace = trace.for_backend(backend);
    let live = if !args.live {
        None
    } else if backend == ferry_compile::trace::Backend::Iptables {
        match ferry_dataplane::read_back_iptables_of(IpFamily::of(&to.0)) {
            Ok(save) => Some(live::check_iptables(&trace, &save)),
            Err(e) => {
                eprintln!("ferry explain --live: cannot read the kernel's rules: {e}");
                return ExitCode::FAILURE;
            }
        }
    } else {
        match ferry_dataplane::read_back(ferry_model::IpFamily::of(&to.0)) {
            Ok(table) => Some(live::check(&trace, &ruleset, table.as_ref())),
            Err(e) => {
                eprintln!("ferry explain --live: cannot read the kernel's rules: {e}");
                return ExitCode::FAILURE;
            }
        }
    };
    print!("{}", render(&trace, live.as_ref(), args.output, backend));
    ExitCode::SUCCESS
}

/// Renders a trace, with the live comparison when there is one.
pub fn render(
    t: &Trace,
    live: Option<&live::LiveReport>,
    output: Output,
    backend: Backend,
) -> String {
    match output {
        Output::Text => {
            let mut s = t.to_text_for(backend);
            if let Some(l) = live {
                s.push_str(&l.to_text());
            }
            s
        }
        Output::Mermaid => t.to_mermaid_for(backend),
        Output::Json => {
            let mut v = to_json(t, backend);
            if let (Some(l), Value::Object(map)) = (live, &mut v) {
                map.insert(
                    "live".into(),
                    json!({
                        "tablePresent": l.table_present,
                        "checked": l.checked,
                        "differences": l.differences,
                        "endpoints": l.endpoints,
                    }),
                );
            }
            let mut s = serde_json::to_string_pretty(&v).unwrap_or_default();
            s.push('\n');
            s
        }
    }
}

fn to_json(t: &Trace, backend: Backend) -> Value {
    let key = match backend {
        Backend::Nft => "nft",
        Backend::Iptables => "iptables",
    };
    let targets: Vec<String> = match &t.verdict {
        Verdict::Forwarded { targets } => targets.iter().map(ToString::to_string).collect(),
        _ => Vec::new(),
    };
    json!({
        "packet": {
            "from": t.packet.src.to_string(),
            "to": t.packet.dst.to_string(),
            "port": t.packet.port,
            "protocol": t.packet.protocol.as_str(),
        },
        "node": t.node,
        "origin": t.origin.to_string(),
        "service": t.service.as_ref().map(|s| json!({
            "namespace": &*s.service.namespace, "name": &*s.service.name, "port": s.port,
        })),
        "frontend": t.frontend.map(|f| match f {
            Frontend::ClusterIp => "ClusterIP",
            Frontend::NodePort => "NodePort",
            Frontend::ExternalIp => "ExternalIP",
            Frontend::LoadBalancerIp => "LoadBalancerIP",
        }),
        "steps": t.steps.iter().map(|s| json!({"what": s.what, "why": s.why, key: t.objects(s, backend)})).collect::<Vec<_>>(),
        "endpoints": t.candidates.iter().map(|c| json!({
            "address": c.addr.to_string(), "node": c.node, "used": c.excluded.is_none(), "excluded": c.excluded,
        })).collect::<Vec<_>>(),
        "masquerade": t.masquerade,
        "verdict": t.verdict_word(),
        "targets": targets,
    })
}
