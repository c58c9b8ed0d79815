//! `ferry explain`: where does this packet go on that node, and why?

use std::net::IpAddr;
use std::process::ExitCode;

use serde_json::{json, Value};

use ferry_compile::trace::{Frontend, Packet, Trace, Verdict};
use ferry_compile::NodeCompiler;
use ferry_dataplane::live::LiveReport;
use ferry_dataplane::modes::entry;
use ferry_model::{IpFamily, NodeContext, Protocol};

use crate::cli::{resolve, ExplainArgs, Output, EXIT_USAGE};
use crate::config::ConfigError;

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
    if args.run.manifests.is_none() {
        eprintln!("ferry: --manifests: required");
        return ExitCode::from(EXIT_USAGE);
    }
    let Some((config, manifests)) = resolve(&args.run, |w| eprintln!("warning: {w}")) else {
        return ExitCode::from(EXIT_USAGE);
    };
    let to = match parse_to(&args.to) {
        Ok(to) => to,
        Err(e) => {
            eprintln!("ferry: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let family = IpFamily::of(&to.0);
    if IpFamily::of(&args.from) != family {
        eprintln!(
            "ferry: --from: {} and --to {} are of different IP families; each family has its own \
             rules (ip ferry / ip6 ferry)",
            args.from, to.0
        );
        return ExitCode::from(EXIT_USAGE);
    }
    let state = crate::rules::load(&manifests.unwrap_or_default());
    let context = NodeContext {
        node_name: config.node_name.clone(),
        family,
    };
    let compiler = NodeCompiler::new(&state, &context, &config.compile_config(family));
    let mode = entry(config.mode);
    let packet = Packet {
        src: args.from,
        dst: to.0,
        port: to.1,
        protocol: to.2,
    };
    let trace = mode.renderer.trace(&compiler, &state, packet);
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
    ExitCode::SUCCESS
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

fn to_json(t: &Trace) -> Value {
    let key = t.objects_label;
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
        "steps": t.steps.iter().map(|s| json!({"what": s.what, "why": s.why, key: s.objects})).collect::<Vec<_>>(),
        "endpoints": t.candidates.iter().map(|c| json!({
            "address": c.addr.to_string(), "node": c.node, "used": c.excluded.is_none(), "excluded": c.excluded,
        })).collect::<Vec<_>>(),
        "masquerade": t.masquerade,
        "verdict": t.verdict_word(),
        "targets": targets,
    })
}
