//! The table of service ports → listeners, updated in place by syncs.

use std::collections::BTreeMap;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, RwLock};
use std::time::Instant;

use ipnet::IpNet;
use tokio::runtime::Handle;
use tokio_util::sync::CancellationToken;

use ferry_model::{IpFamily, Protocol, ServiceName, ServicePortName};

use super::metrics::PortMetrics;
use super::route::{Listener, Sources};
use super::{sock, tcp, udp, ListenError, PortState, ProxiedPort, ProxyConfig, SyncReport};
use ferry_compile::userspace::proxied_protocol as proxied;

/// An open listener: where, and what stops it.
struct Open {
    addr: SocketAddr,
    stop: CancellationToken,
    /// The TCP listening socket, shut down synchronously on close so that its port can be
    /// bound again at once (its task drops it a moment later).
    tcp: Option<Arc<tokio::net::TcpListener>>,
}

impl Open {
    fn close(self) {
        self.stop.cancel();
        if let Some(l) = &self.tcp {
            let _ = socket2::SockRef::from(&**l).shutdown(std::net::Shutdown::Both);
        }
    }
}

/// One service port of one family.
struct Entry {
    state: Arc<PortState>,
    proxy: Option<Open>,
    localhost: Option<Open>,
}

/// The service ports of one family.
#[derive(Default)]
struct Family {
    sources: Arc<RwLock<Arc<Sources>>>,
    ports: BTreeMap<ServicePortName, Entry>,
}

/// The userspace proxy: every service port's listeners and connections, on the tokio runtime
/// it was given. Dropping it closes them all.
pub struct UserspaceProxy {
    handle: Handle,
    config: ProxyConfig,
    v4: Family,
    v6: Family,
}

impl UserspaceProxy {
    /// An engine with nothing to serve yet, running its listeners and connections on
    /// `handle`. Raises the open-files limit to its maximum: every proxied connection holds
    /// two sockets (upstream raised it to 64 000).
    pub fn new(config: ProxyConfig, handle: Handle) -> Self {
        raise_nofile_limit();
        Self {
            handle,
            config,
            v4: Family::default(),
            v6: Family::default(),
        }
    }

    fn family(&mut self, f: IpFamily) -> &mut Family {
        match f {
            IpFamily::V4 => &mut self.v4,
            IpFamily::V6 => &mut self.v6,
        }
    }

    /// Makes the family's table hold exactly `ports` (pod CIDRs: the local-traffic
    /// detector, for `Local` policies).
    pub fn sync_full(
        &mut self,
        family: IpFamily,
        pod_cidrs: &[IpNet],
        ports: Vec<ProxiedPort>,
    ) -> SyncReport {
        let keep: std::collections::BTreeSet<ServicePortName> =
            ports.iter().map(|p| p.plan.name.clone()).collect();
        self.sync(family, pod_cidrs, ports, |name| !keep.contains(name))
    }

    /// Makes the family's table hold exactly `ports` for `service` (none: it was removed),
    /// leaving the other services alone.
    pub fn sync_service(
        &mut self,
        family: IpFamily,
        pod_cidrs: &[IpNet],
        service: &ServiceName,
        ports: Vec<ProxiedPort>,
    ) -> SyncReport {
        let keep: Vec<ServicePortName> = ports.iter().map(|p| p.plan.name.clone()).collect();
        self.sync(family, pod_cidrs, ports, |name| {
            &name.service == service && !keep.contains(name)
        })
    }

    fn sync(
        &mut self,
        family: IpFamily,
        pod_cidrs: &[IpNet],
        ports: Vec<ProxiedPort>,
        remove: impl Fn(&ServicePortName) -> bool,
    ) -> SyncReport {
        // Removed first: a port (a localhost NodePort) may pass from one service to another.
        let mut report = self.remove(family, remove);
        let added = self.upsert(family, pod_cidrs, ports);
        report.add(added);
        report
    }

    /// Adds or updates the family's service ports `ports`, removing none: their listeners are
    /// open (or opened) when this returns. The userspace mode calls it before its rules send
    /// traffic to new listeners.
    pub fn upsert(
        &mut self,
        family: IpFamily,
        pod_cidrs: &[IpNet],
        ports: Vec<ProxiedPort>,
    ) -> SyncReport {
        let _runtime = self.handle.enter();
        let mut report = SyncReport::default();
        let config = self.config.clone();
        let fam = self.family(family);
        let sources = Sources {
            node: sock::local_addresses()
                .into_iter()
                .filter(|ip| IpFamily::of(ip) == family)
                .collect(),
            pods: pod_cidrs.to_vec(),
        };
        *fam.sources.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(sources);
        for port in ports {
            let name = port.plan.name.clone();
            let entry = match fam.ports.remove(&name) {
                Some(e) => {
                    e.state.set_plan(port.plan.clone());
                    report.updated += 1;
                    e
                }
                None => {
                    report.added += 1;
                    new_entry(family, &config, &fam.sources, &port)
                }
            };
            let entry = reconcile(entry, &port, &config, &mut report);
            fam.ports.insert(name, entry);
        }
        report
    }

    /// Removes the family's service ports `remove` selects: their listeners and connections
    /// close. The userspace mode calls it once its rules no longer send traffic there.
    pub fn remove(
        &mut self,
        family: IpFamily,
        remove: impl Fn(&ServicePortName) -> bool,
    ) -> SyncReport {
        let mut report = SyncReport::default();
        let fam = self.family(family);
        let gone: Vec<ServicePortName> = fam.ports.keys().filter(|n| remove(n)).cloned().collect();
        for name in gone {
            if let Some(entry) = fam.ports.remove(&name) {
                report.listeners_closed += close(entry);
                report.removed += 1;
            }
        }
        report
    }

    /// The family's service ports.
    pub fn service_ports(&self, family: IpFamily) -> impl Iterator<Item = &ServicePortName> {
        match family {
            IpFamily::V4 => self.v4.ports.keys(),
            IpFamily::V6 => self.v6.ports.keys(),
        }
    }

    /// Every service port's counters.
    pub fn metrics(&self) -> Vec<PortMetrics> {
        let all = [(IpFamily::V4, &self.v4), (IpFamily::V6, &self.v6)];
        all.into_iter()
            .flat_map(|(f, fam)| {
                fam.ports
                    .iter()
                    .map(move |(n, e)| PortMetrics::of(n, f, &e.state.counters))
            })
            .collect()
    }

    /// Every open listener: service port and address.
    pub fn listeners(&self) -> Vec<(ServicePortName, SocketAddr)> {
        [&self.v4, &self.v6]
            .into_iter()
            .flat_map(|fam| fam.ports.iter())
            .flat_map(|(n, e)| {
                let addrs = e.proxy.iter().chain(&e.localhost).map(|o| o.addr);
                addrs.map(move |a| (n.clone(), a))
            })
            .collect()
    }
}

impl Drop for UserspaceProxy {
    fn drop(&mut self) {
        for fam in [&mut self.v4, &mut self.v6] {
            for (_, entry) in std::mem::take(&mut fam.ports) {
                close(entry);
            }
        }
    }
}

fn new_entry(
    family: IpFamily,
    config: &ProxyConfig,
    sources: &Arc<RwLock<Arc<Sources>>>,
    port: &ProxiedPort,
) -> Entry {
    let name = port.plan.name.clone();
    if !proxied(name.protocol) {
        tracing::warn!(service = %name, protocol = %name.protocol, "SCTP is not proxied in user space: refused");
    }
    Entry {
        state: Arc::new(PortState {
            name,
            family,
            plan: RwLock::new(Arc::new(port.plan.clone())),
            sources: sources.clone(),
            balancer: Default::default(),
            counters: Default::default(),
            closed: CancellationToken::new(),
            udp_idle: config.udp_idle_timeout,
            copy: config.copy,
        }),
        proxy: None,
        localhost: None,
    }
}

/// Closes a removed entry's listeners and connections; the number of listeners closed.
fn close(entry: Entry) -> usize {
    entry.state.closed.cancel();
    let n = usize::from(entry.proxy.is_some()) + usize::from(entry.localhost.is_some());
    entry
        .proxy
        .into_iter()
        .chain(entry.localhost)
        .for_each(Open::close);
    n
}

/// The listeners a service port should have: its proxy port, and its NodePort on loopback.
fn wanted(port: &ProxiedPort, config: &ProxyConfig, family: IpFamily) -> [Option<SocketAddr>; 2] {
    let plan = &port.plan;
    if !proxied(plan.name.protocol) {
        return [None, None];
    }
    let (any, lo): (IpAddr, IpAddr) = match family {
        IpFamily::V4 => (config.listen_v4.into(), Ipv4Addr::LOCALHOST.into()),
        IpFamily::V6 => (config.listen_v6.into(), Ipv6Addr::LOCALHOST.into()),
    };
    let proxy = port.proxy_port.map(|p| SocketAddr::new(any, p));
    let serves_node = plan.external.is_some() && !plan.cluster_endpoints.is_empty();
    let localhost = plan
        .node_port
        .filter(|_| port.localhost_node_port && serves_node)
        .map(|np| SocketAddr::new(lo, np));
    [proxy, localhost]
}

fn reconcile(
    mut entry: Entry,
    port: &ProxiedPort,
    config: &ProxyConfig,
    report: &mut SyncReport,
) -> Entry {
    entry
        .state
        .balancer
        .forget_stale(&port.plan, Instant::now());
    let [proxy, localhost] = wanted(port, config, entry.state.family);
    let slots = [
        (&mut entry.proxy, proxy, Listener::Proxy),
        (&mut entry.localhost, localhost, Listener::Localhost),
    ];
    for (slot, want, kind) in slots {
        if slot.as_ref().map(|o| o.addr) == want {
            continue;
        }
        if let Some(old) = slot.take() {
            old.close();
            report.listeners_closed += 1;
        }
        let Some(addr) = want else { continue };
        match open(&entry.state, addr, kind) {
            Ok(o) => {
                *slot = Some(o);
                report.listeners_opened += 1;
            }
            Err(source) => report.failed.push(ListenError {
                name: entry.state.name.clone(),
                addr,
                in_use: source.kind() == io::ErrorKind::AddrInUse,
                source,
            }),
        }
    }
    entry
}

/// Binds a listener and starts serving it (within the runtime context).
fn open(state: &Arc<PortState>, addr: SocketAddr, kind: Listener) -> io::Result<Open> {
    let stop = state.closed.child_token();
    let mut tcp_listener = None;
    match state.name.protocol {
        Protocol::Tcp => {
            let l = Arc::new(tokio::net::TcpListener::from_std(sock::tcp_listener(
                addr,
            )?)?);
            tcp_listener = Some(l.clone());
            tokio::spawn(tcp::serve(l, state.clone(), kind, stop.clone()));
        }
        Protocol::Udp => {
            let s = tokio::net::UdpSocket::from_std(sock::udp_listener(addr)?)?;
            tokio::spawn(udp::serve(s, state.clone(), kind, stop.clone()));
        }
        Protocol::Sctp => return Err(io::ErrorKind::Unsupported.into()),
    }
    tracing::debug!(service = %state.name, %addr, "listening");
    Ok(Open {
        addr,
        stop,
        tcp: tcp_listener,
    })
}

/// Raises the open-files limit: both limits to 2^20 when allowed (root), else the soft
/// limit to the hard one.
fn raise_nofile_limit() {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        return;
    };
    // 2^20, systemd's default hard limit, when the kernel allows that many.
    let nr_open = std::fs::read_to_string("/proc/sys/fs/nr_open")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .unwrap_or(hard);
    let max = nr_open.min(1 << 20).max(hard);
    if setrlimit(Resource::RLIMIT_NOFILE, max, max).is_err() && soft < hard {
        let _ = setrlimit(Resource::RLIMIT_NOFILE, hard, hard);
    }
    let now = getrlimit(Resource::RLIMIT_NOFILE).map_or(soft, |(s, _)| s);
    if now < 65_536 {
        tracing::warn!(
            limit = now,
            connections = now / 2,
            "open-files limit is low (raising it needs CAP_SYS_RESOURCE): the userspace proxy holds two sockets per connection"
        );
    }
}
