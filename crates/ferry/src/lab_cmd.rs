//! `ferry lab up | curl | down`: a small cluster in network namespaces on this machine, built
//! by the same harness the end-to-end tests use (crates/ferry-lab), with one `ferry run` per
//! node and one echo pod per endpoint address.

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use clap::Subcommand;
use ipnet::Ipv4Net;

use ferry_lab::spec::CLIENT;
use ferry_lab::{ClientSpec, Lab, LabProcess, LabSpec, LabState, NodeSpec, PodProgram};
use ferry_model::{IpFamily, NodeAddressType, Object, Protocol};

mod control_plane;

/// `ferry lab` subcommands.
#[derive(Debug, Subcommand)]
pub enum LabCommand {
    /// Build the lab from the manifests' Nodes (or the example cluster's three nodes), start the
    /// pods and one Ferry per node. Needs root.
    Up {
        /// Manifests: Nodes, Services, EndpointSlices (examples/seed for the example cluster).
        #[arg(long, value_name = "PATH")]
        manifests: PathBuf,
        /// Passed to every node's `ferry run` (default: each node's pod CIDR, NodeCIDR mode).
        #[arg(long, value_name = "CIDRS")]
        cluster_cidr: Option<String>,
        /// Namespace-name prefix.
        #[arg(long, default_value = "ferrylab")]
        prefix: String,
        /// Where the lab's state file lives.
        #[arg(long, default_value = "/run/ferry-lab")]
        state_dir: PathBuf,
        /// Run a real control plane: etcd, kube-apiserver and kube-controller-manager's
        /// EndpointSlice controllers (built from source by lab/k8s/build, or found through
        /// KUBEBUILDER_ASSETS or the TEST_ASSET_ variables), and a kubelet stand-in per node that runs
        /// the Pods. The manifests (examples/seed-pods) are applied with kubectl, Nodes left to
        /// the stand-ins; each node's Ferry watches the API as deploy/'s ServiceAccount.
        #[arg(long)]
        control_plane: bool,
    },
    /// Run kubectl, as the administrator, against the control plane of `ferry lab up
    /// --control-plane` (inside its host's network namespace).
    Kubectl {
        /// Where the lab's state file lives.
        #[arg(long, default_value = "/run/ferry-lab")]
        state_dir: PathBuf,
        /// kubectl's arguments.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
        args: Vec<String>,
    },
    /// Run curl inside the lab, from the client, a node or a pod.
    Curl {
        /// `client`, a node name or a pod name.
        #[arg(long, value_name = "HOST")]
        from: String,
        /// The URL.
        url: String,
        /// Where the lab's state file lives.
        #[arg(long, default_value = "/run/ferry-lab")]
        state_dir: PathBuf,
    },
    /// Remove the lab: every process and namespace it created.
    Down {
        /// Where the lab's state file lives.
        #[arg(long, default_value = "/run/ferry-lab")]
        state_dir: PathBuf,
    },
}

fn state_file(dir: &Path) -> PathBuf {
    dir.join("lab.state")
}

/// Runs a `ferry lab` subcommand.
pub fn run(cmd: LabCommand) -> ExitCode {
    let result = match cmd {
        LabCommand::Up {
            manifests,
            cluster_cidr,
            prefix,
            state_dir,
            control_plane,
        } => up(
            &manifests,
            cluster_cidr.as_deref(),
            &prefix,
            &state_dir,
            control_plane,
        ),
        LabCommand::Kubectl { state_dir, args } => return kubectl(&state_dir, &args),
        LabCommand::Curl {
            from,
            url,
            state_dir,
        } => return curl(&from, &url, &state_dir),
        LabCommand::Down { state_dir } => down(&state_dir),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("ferry lab: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// The lab's nodes from the manifests' Node objects (IPv4 InternalIP + pod CIDR).
fn node_specs(objects: &[Object]) -> Vec<NodeSpec> {
    objects
        .iter()
        .filter_map(|o| match o {
            Object::Node(n) => {
                let ip = n.addresses.iter().find_map(|a| match (a.kind, a.address) {
                    (NodeAddressType::InternalIp, IpAddr::V4(v4)) => Some(v4),
                    _ => None,
                })?;
                let pod_cidr = n.pod_cidrs.iter().find_map(|c| match c {
                    ipnet::IpNet::V4(v4) => Some(*v4),
                    ipnet::IpNet::V6(_) => None,
                })?;
                Some(NodeSpec {
                    name: n.name.clone(),
                    ip,
                    pod_cidr,
                })
            }
            _ => None,
        })
        .collect()
}

/// (pod name, node, ip, port) for every IPv4 endpoint on a lab node, first TCP port.
fn pods(objects: &[Object], nodes: &[NodeSpec]) -> Vec<(String, String, Ipv4Addr, u16)> {
    let mut out: Vec<(String, String, Ipv4Addr, u16)> = Vec::new();
    for o in objects {
        let Object::EndpointSlice(s) = o else {
            continue;
        };
        if s.family != IpFamily::V4 {
            continue;
        }
        let port = s
            .ports
            .iter()
            .find(|p| p.protocol == Protocol::Tcp)
            .map_or(80, |p| p.port);
        for ep in &s.endpoints {
            let (IpAddr::V4(ip), Some(node)) = (ep.address, ep.node_name()) else {
                continue;
            };
            if !nodes.iter().any(|n| n.name == node) || out.iter().any(|p| p.2 == ip) {
                continue;
            }
            let o = ip.octets();
            out.push((
                format!("{}-{}-{}", s.service.name, o[2], o[3]),
                node.to_string(),
                ip,
                port,
            ));
        }
    }
    out
}

fn spec(prefix: &str, mut nodes: Vec<NodeSpec>) -> anyhow::Result<LabSpec> {
    let mut spec = LabSpec::seed004();
    if nodes.is_empty() {
        nodes = spec.nodes.clone();
    }
    let first = nodes[0].ip.octets();
    spec.lan = Ipv4Net::new(Ipv4Addr::new(first[0], first[1], first[2], 0), 24)?;
    spec.gateway = Ipv4Addr::new(first[0], first[1], first[2], 1);
    spec.clients = vec![ClientSpec {
        name: CLIENT.to_owned(),
        ip: Ipv4Addr::new(first[0], first[1], first[2], 100),
        pod_routes: true,
    }];
    spec.nodes = nodes;
    spec.prefix = Some(prefix.to_owned());
    Ok(spec)
}

fn up(
    manifests: &Path,
    cluster_cidr: Option<&str>,
    prefix: &str,
    state_dir: &Path,
    with_control_plane: bool,
) -> anyhow::Result<ExitCode> {
    let state_path = state_file(state_dir);
    if state_path.exists() {
        bail!(
            "a lab is already up ({}); run `ferry lab down` first",
            state_path.display()
        );
    }
    // Ctrl-C while building: stop at the next step and remove what exists (the `Lab` and its
    // processes are torn down when dropped).
    let interrupted = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, Arc::clone(&interrupted)).context("signal handler")?;
    }
    let check = || {
        if interrupted.load(Ordering::SeqCst) {
            bail!("interrupted; the lab was removed");
        }
        Ok(())
    };
    let manifests = manifests
        .canonicalize()
        .with_context(|| format!("{}", manifests.display()))?;
    let scan = ferry_source::manifest::load(&manifests);
    for e in &scan.errors {
        eprintln!("warning: {e}");
    }
    let spec = spec(prefix, node_specs(&scan.objects))?;
    let exe = std::env::current_exe().context("locating the ferry binary")?;
    let mut lab = Lab::build(&spec).context("building the lab")?;
    check()?;
    let mut started = None;
    let source = if with_control_plane {
        let s = control_plane::start(&mut lab, &exe, &manifests, &scan.objects, state_dir)?;
        let source = [
            "--kubeconfig".to_owned(),
            s.kubeconfig.display().to_string(),
        ];
        started = Some(s);
        source
    } else {
        let program = PodProgram::ferry(&exe);
        for (name, node, ip, port) in pods(&scan.objects, &spec.nodes) {
            lab.add_echo_pod(&node, &name, ip, port, &program)
                .with_context(|| format!("pod {name} on {node}"))?;
            check()?;
        }
        ["--manifests".to_owned(), manifests.display().to_string()]
    };
    check()?;
    let mut ferries: Vec<(String, LabProcess)> = Vec::new();
    for node in &spec.nodes {
        let mut args = vec!["run".to_owned()];
        args.extend(source.iter().cloned());
        args.extend([
            "--hostname-override".to_owned(),
            node.name.clone(),
            "--min-sync-period".to_owned(),
            "100ms".to_owned(),
        ]);
        match cluster_cidr {
            Some(c) => args.extend(["--cluster-cidr".to_owned(), c.to_owned()]),
            None => args.extend(["--detect-local-mode".to_owned(), "NodeCIDR".to_owned()]),
        }
        let p = lab
            .spawn_on_node(&node.name, &exe, &args)
            .context("starting ferry")?;
        ferries.push((node.name.clone(), p));
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    for (node, p) in &ferries {
        while !p.log().contains("synced rules") {
            check()?;
            if Instant::now() > deadline {
                bail!("ferry on {node} did not sync within 20 s:\n{}", p.log());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    check()?;
    let state = lab.state();
    state.save(&state_path).context("saving the lab state")?;
    for (_, p) in ferries {
        p.detach();
    }
    lab.persist();
    print_summary(&state, &state_path);
    if let Some(s) = started {
        let url = s.control_plane.url();
        let dir = s.control_plane.detach();
        println!("  control plane: {url} (files: {})", dir.display());
        println!("     ferry lab kubectl get endpointslices -A");
    }
    Ok(ExitCode::SUCCESS)
}

fn print_summary(state: &LabState, path: &Path) {
    println!("lab {} is up (state: {})", state.prefix, path.display());
    for ((kind, name), ns) in &state.hosts {
        println!("  {kind:<6} {name:<40} netns {ns}");
    }
    if let Some(dir) = &state.dir {
        println!("  logs: {}", dir.display());
    }
    println!("try: ferry lab curl --from client http://<node ip>:<node port>/hello");
    println!("     ip netns exec <node netns> nft list table ip ferry");
    println!("stop: ferry lab down");
}

fn curl(from: &str, url: &str, state_dir: &Path) -> ExitCode {
    let state = match LabState::load(&state_file(state_dir)) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("ferry lab curl: no lab is up ({e})");
            return ExitCode::FAILURE;
        }
    };
    let Some(ns) = state.netns_of(from) else {
        let hosts: Vec<&str> = state.hosts.keys().map(|(_, n)| n.as_str()).collect();
        eprintln!(
            "ferry lab curl: no host {from:?} in the lab (hosts: {})",
            hosts.join(", ")
        );
        return ExitCode::from(64);
    };
    let status = Command::new("ip")
        .args([
            "netns",
            "exec",
            ns,
            "curl",
            "-sS",
            "--connect-timeout",
            "3",
            "--max-time",
            "5",
            url,
        ])
        .status();
    match status.map(|s| s.code()) {
        Ok(Some(0)) => ExitCode::SUCCESS,
        Ok(Some(code)) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        Ok(None) | Err(_) => ExitCode::FAILURE,
    }
}

fn kubectl(state_dir: &Path, args: &[String]) -> ExitCode {
    match control_plane::kubectl(state_dir, args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("ferry lab kubectl: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn down(state_dir: &Path) -> anyhow::Result<ExitCode> {
    let path = state_file(state_dir);
    let state = match LabState::load(&path) {
        Ok(s) => s,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            println!("no lab is up");
            return Ok(ExitCode::SUCCESS);
        }
        Err(e) => return Err(e).context("reading the lab state"),
    };
    let removed = Lab::cleanup_stale(&state.prefix).context("removing the lab")?;
    if let Some(dir) = &state.dir {
        let _ = std::fs::remove_dir_all(dir);
    }
    let control_plane = control_plane::folder(state_dir);
    if control_plane.exists() {
        std::fs::remove_dir_all(&control_plane)
            .with_context(|| format!("removing {}", control_plane.display()))?;
    }
    std::fs::remove_file(&path).context("removing the state file")?;
    println!(
        "lab {} removed ({} namespaces)",
        state.prefix,
        removed.len()
    );
    Ok(ExitCode::SUCCESS)
}
