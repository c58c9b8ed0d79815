//! `ferry explain`: where does this packet go on that node, and why?

use std::net::IpAddr;
use std::process::ExitCode;

use serde_json::{json, Value};

use ferry_compile::trace::{Candidate, Frontend, NodeAddresses, Packet, Trace, Verdict};
use ferry_compile::NodeCompiler;
use ferry_dataplane::addresses::local_addresses;
use ferry_dataplane::live::LiveReport;
use ferry_dataplane::modes::entry;
use ferry_model::{ClusterState, IpFamily, NodeContext, Protocol};

use crate::cli::{resolve, ExplainArgs, Output, EXIT_USAGE};
use crate::config::ConfigError;

mod probes;

use probes::Probes;

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

/// `ferry explain`: trace the packet with the mode's renderer, optionally compare with the
/// kernel (`--live`: the mode's reading of it), print.
pub fn run(mut args: ExplainArgs) -> ExitCode {
    if let Some(node) = args.node.take() {
        args.run.hostname_override = Some(node);
    }
    if args.live && !args.node_addresses.is_empty() {
        eprintln!(
            "ferry: --node-address: not with --live (the node's interfaces give its addresses)"
        );
        return ExitCode::from(EXIT_USAGE);
    }
    let Some((config, manifests)) = resolve(&args.run, |w| eprintln!("warning: {w}")) else {
        return ExitCode::from(EXIT_USAGE);
    };
    let packet = match packet(&args) {
        Ok(packet) => packet,
        Err(e) => {
            eprintln!("ferry: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    // With --live, the running agent's readiness probes judge the Pods, as they do its rules.
    let probes = if args.live {
        Probes::ask_agent(&config)
    } else {
        Probes::Offline
    };
    if let Probes::Unavailable(why) = &probes {
        eprintln!(
            "ferry explain --live: no readiness probe results: {why}; Pods with a probe are \
             judged by their status"
        );
    }
    let (state, pods) = match &manifests {
        Some(path) => crate::rules::load_judged(path, probes.verdicts()),
        None => match crate::rules::load_from(&config, None) {
            Ok(state) => (state, ferry_source::pods::EndpointController::new()),
            Err(code) => return code,
        },
    };
    if let Err(e) = known_node(&state, &config.node_name) {
        eprintln!("ferry: {e}");
        return ExitCode::from(EXIT_USAGE);
    }
    let addresses = match node_addresses(&args) {
        Ok(addresses) => addresses,
        Err(e) => {
            eprintln!("ferry explain --live: {e}");
            return ExitCode::FAILURE;
        }
    };
    let family = IpFamily::of(&packet.dst);
    let context = NodeContext {
        node_name: config.node_name.clone(),
        family,
    };
    let compiler = NodeCompiler::new(&state, &context, &config.compile_config(family));
    let mode = entry(config.mode);
    let mut trace = mode.renderer.trace(&compiler, &state, packet, &addresses);
    probes::annotate(&mut trace, &pods, &probes);
    let live = if args.live {
        match (mode.open)(&config.mode_options()).live(&trace, &compiler, &state) {
            Ok(report) => Some(report),
            Err(e) => {
                eprintln!("ferry explain --live: cannot read the kernel's rules: {e}");
                return ExitCode::FAILURE;
            }
        }
    } else {
        None
    };
    print!("{}", render(&trace, live.as_ref(), args.output));
    if trace.verdict == Verdict::NotAService && matches!(args.output, Output::Text) {
        for hint in manifests.iter().flat_map(|m| skipped_documents(m)) {
            println!("hint: {hint}");
        }
    }
    ExitCode::SUCCESS
}

/// The documents of `path` that were likely meant as objects Ferry reads but are skipped (a
/// Service of `apiVersion: v2`, `kind: Servce`): why a destination may not be a service.
fn skipped_documents(path: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    let _ = ferry_source::manifest::for_each_document(path, |doc| {
        let (api_version, kind) = doc.type_meta();
        if let Some((field, why)) = crate::check::manifests::skipped_why(api_version, kind) {
            out.push(format!(
                "{}: {}: {}: {field}: {why}",
                doc.file.display(),
                doc.position,
                crate::check::manifests::object_name(&doc)
            ));
        }
    });
    out
}

/// The packet of `--from` and `--to`, both of one IP family.
fn packet(args: &ExplainArgs) -> Result<Packet, ConfigError> {
    let (dst, port, protocol) = parse_to(&args.to)?;
    if IpFamily::of(&args.from) != IpFamily::of(&dst) {
        return Err(ConfigError::new(
            "--from",
            format!(
                "{} and --to {dst} are of different IP families; each family has its own rules \
                 (ip ferry / ip6 ferry)",
                args.from
            ),
        ));
    }
    Ok(Packet {
        src: args.from,
        dst,
        port,
        protocol,
    })
}

/// The node's addresses: from its interfaces with `--live`, otherwise its Node object's and
/// `--node-address`.
fn node_addresses(args: &ExplainArgs) -> Result<NodeAddresses, ferry_dataplane::Error> {
    if args.live {
        return local_addresses().map(NodeAddresses::Live);
    }
    Ok(NodeAddresses::Declared(args.node_addresses.clone()))
}

/// The node must be one the manifests define: its Node object says where NodePorts answer and
/// which sources are the node itself, so a misspelt name would explain a node with no address.
fn known_node(state: &ClusterState, name: &str) -> Result<(), ConfigError> {
    match crate::check::unknown_node(name, state.nodes().map(|n| n.name.as_str())) {
        Some(why) => Err(ConfigError::new("--node", why)),
        None => Ok(()),
    }
}

/// Renders a trace, with the live comparison when there is one.
pub fn render(t: &Trace, live: Option<&LiveReport>, output: Output) -> String {
    match output {
        Output::Text => {
            let mut s = t.to_text();
            if let Some(l) = live {
                s.push_str(&l.to_text());
            }
            s
        }
        Output::Mermaid => t.to_mermaid(),
        Output::Json => {
            let mut v = to_json(t);
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

/// One endpoint; `targetRef` and `note` only when known.
fn candidate_json(c: &Candidate) -> Value {
    let mut v = json!({
        "address": c.addr.to_string(), "node": c.node, "used": c.excluded.is_none(), "excluded": c.excluded,
    });
    if let Value::Object(map) = &mut v {
        if let Some(t) = &c.target {
            map.insert("targetRef".into(), t.to_string().into());
        }
        if let Some(note) = &c.note {
            map.insert("note".into(), note.clone().into());
        }
    }
    v
}

fn to_json(t: &Trace) -> Value {
    let key = t.objects_label;
    let targets: Vec<Value> = match &t.verdict {
        Verdict::Forwarded { targets } => targets
            .iter()
            .map(|t| {
                json!({
                    "address": t.addr.to_string(),
                    "masquerade": if t.masquerade.is_some() { "yes" } else { "no" },
                    "masqueradeWhy": t.masquerade,
                })
            })
            .collect(),
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
        "steps": t.steps.iter().map(|s| json!({"what": s.what, "why": s.why, key: s.objects})).collect::<Vec<_>>(),
        "endpoints": t.candidates.iter().map(candidate_json).collect::<Vec<_>>(),
        "masquerade": t.masquerade().map(|m| m.word()),
        "verdict": t.verdict_word(),
        "targets": targets,
    })
}
