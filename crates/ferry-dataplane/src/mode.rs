//! What a proxy mode is made of: its line in the mode table ([`ModeEntry`]; the table is
//! `modes`), the run-time choices of the modes ([`ModeOptions`]), and the mode prepared on a
//! node ([`NodeMode`]).

use std::time::Duration;

use ipnet::IpNet;

use ferry_compile::mode::{ProxyMode, Renderer};
use ferry_compile::trace::Trace;
use ferry_compile::{NfacctCounters, NodeCompiler};
use ferry_model::{ClusterState, IpFamily};

use crate::cleanup::{Cleanup, Scope};
pub use crate::iptables_tool::IptablesBackend;
use crate::leftovers::Leftover;
use crate::live::{KernelReport, LiveReport};
use crate::nfacct::{Nfacct, NfacctError};
use crate::preflight::Requirements;
use crate::support::Unsupported;
use crate::{Applier, Error};

/// What a mode is made of.
pub struct ModeEntry {
    /// The mode.
    pub mode: ProxyMode,
    /// Its pure half: the text `ferry rules` prints, the objects `ferry explain` names. Using
    /// it never touches the kernel.
    pub renderer: &'static dyn Renderer,
    /// Prepares the mode on this node (e.g. finds the iptables backend to use): the kernel
    /// half, for `ferry run` and `ferry explain --live`.
    pub open: fn(&ModeOptions) -> Box<dyn NodeMode>,
    /// Removes everything the mode programs in this network namespace (both families), and
    /// kube-proxy's objects of the same kind when the scope says so (else they are in
    /// [`Cleanup::left`]), or with a dry scope only says what it would remove; nothing there
    /// is not an error, nor is a tool that is not installed (it is in [`Cleanup::skipped`]).
    pub cleanup: fn(Scope) -> Result<Cleanup, Error>,
    /// What kube-proxy left in this network namespace of this mode's kind (its nftables
    /// table, its iptables chains), found at start-up.
    pub leftovers: fn() -> Vec<Leftover>,
    /// The counter of failed syncs (upstream's name for this mode).
    pub sync_failures: FailureCounter,
    /// Whether the mode writes iptables chains (iptables and IPVS modes, which share chain
    /// names with each other and with kube-proxy's). The other modes' cleanups remove such
    /// chains, so under this mode they run between its syncs; under a mode that writes only
    /// its own nftables table they run beside them.
    pub writes_iptables: bool,
}

impl std::fmt::Debug for ModeEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModeEntry")
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

/// Run-time choices of the modes that have any.
#[derive(Debug, Clone)]
pub struct ModeOptions {
    /// iptables and IPVS modes: the backend to program, or `None` to use the one that already
    /// holds Kubernetes' rules (upstream's detection).
    pub iptables_backend: Option<IptablesBackend>,
    /// IPVS mode's settings that are not rendered (the scheduler is: it is in the compile
    /// configuration).
    pub ipvs: IpvsOptions,
    /// The tokio runtime the agent runs on: where Ferry's userspace proxy (the userspace
    /// mode, localhost NodePorts in the iptables and nftables modes) serves its listeners and
    /// connections. `None` outside the agent (`ferry explain --live`, benchmarks of the rules
    /// alone): the appliers then program the kernel only, and serve no connection.
    pub runtime: Option<tokio::runtime::Handle>,
    /// `udpIdleTimeout`: a proxied UDP association without a datagram either way for this
    /// long ends (upstream's default, 250 ms).
    pub udp_idle_timeout: Duration,
}

impl ModeOptions {
    /// The userspace proxy engine these options ask for (the userspace mode's, and the kernel
    /// modes' for localhost NodePorts).
    pub(crate) fn proxy_engine(&self) -> crate::proxy::Engine {
        crate::proxy::Engine::new(self.runtime.clone(), self.udp_idle_timeout)
    }
}

impl Default for ModeOptions {
    fn default() -> Self {
        Self {
            iptables_backend: None,
            ipvs: IpvsOptions::default(),
            runtime: None,
            udp_idle_timeout: Duration::from_millis(250),
        }
    }
}

/// IPVS mode's node settings (`ipvs.*` of `KubeProxyConfiguration`, `--ipvs-*` flags).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IpvsOptions {
    /// `ipvs.tcpTimeout`: idle timeout of established IPVS TCP connections; zero leaves the
    /// kernel's value.
    pub tcp_timeout: Duration,
    /// `ipvs.tcpFinTimeout`: timeout of IPVS TCP connections after a FIN; zero leaves it.
    pub tcp_fin_timeout: Duration,
    /// `ipvs.udpTimeout`: timeout of IPVS UDP flows; zero leaves it.
    pub udp_timeout: Duration,
    /// `ipvs.strictARP`: answer ARP only for addresses of the interface asked
    /// (`arp_ignore=1`, `arp_announce=2`), so kube-ipvs0's addresses are not announced.
    pub strict_arp: bool,
    /// `ipvs.excludeCIDRs`: virtual servers in these ranges belong to someone else and are
    /// never deleted.
    pub exclude_cidrs: Vec<IpNet>,
}

/// The counter a mode's failed syncs go to, as upstream names them (`kubeproxy_` +).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FailureCounter {
    /// `sync_proxy_rules_nftables_sync_failures_total`.
    NftablesSync,
    /// `sync_proxy_rules_iptables_restore_failures_total`.
    IptablesRestore,
}

impl FailureCounter {
    /// Every counter, for registration.
    pub const ALL: [FailureCounter; 2] = [
        FailureCounter::NftablesSync,
        FailureCounter::IptablesRestore,
    ];

    /// The metric's name (without `kubeproxy_` and `_total`) and help.
    pub fn metric(self) -> (&'static str, &'static str) {
        match self {
            FailureCounter::NftablesSync => (
                "sync_proxy_rules_nftables_sync_failures",
                "Cumulative proxy nftables sync failures",
            ),
            FailureCounter::IptablesRestore => (
                "sync_proxy_rules_iptables_restore_failures",
                "Cumulative proxy iptables restore failures",
            ),
        }
    }
}

/// A metric read from an nfacct counter at each scrape (its packets; a counter, no labels).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CounterMetric {
    /// The metric's name, `_total` included.
    pub metric: &'static str,
    /// Its help text.
    pub help: &'static str,
    /// The nfacct counter it reads.
    pub nfacct: &'static str,
}

impl CounterMetric {
    /// The counter's packets now, in the calling thread's network namespace.
    pub fn read(&self) -> Result<u64, NfacctError> {
        Ok(Nfacct::open()?.get(self.nfacct)?.packets)
    }
}

/// The kernel counters a mode created at start ([`NodeMode::packet_counters`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PacketCounters {
    /// Which of them the rules may name.
    pub rules: NfacctCounters,
    /// The metrics read from them.
    pub metrics: Vec<CounterMetric>,
}

/// A mode prepared on this node: its appliers and its reading of the kernel.
pub trait NodeMode: Send + Sync {
    /// One line for the start-up log (`iptables mode, nft backend`).
    fn describe(&self) -> String;

    /// Whether this mode can program `family` here (kernel support and the mode's tool),
    /// upstream's `platformCheckSupported`.
    fn supports(&self, family: IpFamily) -> Result<(), Unsupported>;

    /// What the mode needs on this node (its tools, its capabilities), checked at start-up.
    fn requirements(&self) -> Requirements;

    /// A fresh applier of `family`'s rules, in the current network namespace.
    fn applier(&self, family: IpFamily) -> Box<dyn Applier>;

    /// Whether a sync's removed UDP endpoints leave conntrack entries to delete (see
    /// `conntrack`): true when the mode DNATs UDP flows to endpoints. The userspace mode
    /// translates every flow to its own proxy port, so none ever points at an endpoint.
    fn udp_conntrack_cleanup(&self) -> bool {
        true
    }

    /// The per-service-port counters of Ferry's userspace proxy (`ferry_userspace_*`), when
    /// this mode runs it (the userspace mode; localhost NodePorts): read at each scrape.
    fn proxy_metrics(&self) -> Option<crate::proxy::Stats> {
        None
    }

    /// Creates, in the current network namespace, the kernel counters this mode's rules count
    /// into (iptables mode: upstream's nfacct counters), once at start; says which exist (for
    /// the rules) and the metrics read from them at each scrape. Default: none.
    fn packet_counters(&self) -> PacketCounters {
        PacketCounters::default()
    }

    /// `ferry explain --live`: what the kernel holds for the traced destination (the trace
    /// comes from this mode's renderer, for the compiler's family), compared with what the
    /// state compiles to.
    fn live(
        &self,
        trace: &Trace,
        compiler: &NodeCompiler,
        state: &ClusterState,
    ) -> Result<LiveReport, Error>;

    /// `ferry status`: what the kernel holds for every service of the compiler's family,
    /// compared with what the state compiles to.
    fn kernel(&self, compiler: &NodeCompiler, state: &ClusterState) -> Result<KernelReport, Error>;
}
