//! iptables mode's entry in the mode table: the backend chosen for this node, what the mode
//! needs, its appliers (with the localhost NodePort proxy), and what `ferry status` and
//! `ferry explain --live` read back.

use ferry_compile::iptables::NodeRules;
use ferry_compile::mode::{IptablesRenderer, ProxyMode};
use ferry_compile::trace::Trace;
use ferry_compile::NodeCompiler;
use ferry_model::{ClusterState, IpFamily};

use super::{cleanup, detect_backend, kernel, leftovers, live, IptablesBackend, IptablesDataplane};
use crate::live::{KernelReport, LiveReport};
use crate::mode::{FailureCounter, ModeEntry, ModeOptions, NodeMode, PacketCounters};
use crate::preflight::{Capability, Requirements, Tool};
use crate::proxy::{Engine, Stats, WithLocalhostNodePorts};
use crate::support::{kernel_has, succeeds, Unsupported};
use crate::{Applier, Error};

/// iptables mode's line in the mode table.
pub(crate) const MODE: ModeEntry = ModeEntry {
    mode: ProxyMode::Iptables,
    renderer: &IptablesRenderer,
    open: |options: &ModeOptions| Box::new(IptablesMode::open(options)),
    cleanup,
    leftovers,
    sync_failures: FailureCounter::IptablesRestore,
    writes_iptables: true,
};

/// iptables mode on this node, with the backend it programs and the proxy of its localhost
/// NodePorts.
struct IptablesMode {
    backend: IptablesBackend,
    localhost: Engine,
}

impl IptablesMode {
    /// The backend forced by the options, or the one that already holds Kubernetes' rules.
    fn open(options: &ModeOptions) -> Self {
        Self {
            backend: options.iptables_backend.unwrap_or_else(detect_backend),
            localhost: options.proxy_engine(),
        }
    }
}

impl NodeMode for IptablesMode {
    fn describe(&self) -> String {
        format!("iptables mode, {} backend", self.backend.as_str())
    }

    /// Upstream: `utiliptables.Present()`.
    fn supports(&self, family: IpFamily) -> Result<(), Unsupported> {
        kernel_has(family)?;
        let program = self.backend.program_for(family, "");
        succeeds(&program, &["-w", "5", "-t", "nat", "-S", "POSTROUTING"])
    }

    /// The backend's tools (`iptables-nft`, `-save`, `-restore`), CAP_NET_ADMIN, and for the
    /// legacy backend CAP_NET_RAW (it talks to the kernel over a raw socket).
    fn requirements(&self) -> Requirements {
        let tools = ["", "-save", "-restore"]
            .into_iter()
            .map(|t| Tool::new(self.backend.program(t), "iptables"))
            .collect();
        let mut capabilities = vec![Capability::NetAdmin];
        if self.backend == IptablesBackend::Legacy {
            capabilities.push(Capability::NetRaw);
        }
        Requirements {
            tools,
            capabilities,
        }
    }

    fn applier(&self, family: IpFamily) -> Box<dyn Applier> {
        let rules = IptablesDataplane::for_family(self.backend, family);
        Box::new(WithLocalhostNodePorts::new(
            rules,
            self.localhost.clone(),
            family,
        ))
    }

    fn packet_counters(&self) -> PacketCounters {
        super::counters::create()
    }

    fn proxy_metrics(&self) -> Option<Stats> {
        Some(self.localhost.stats())
    }

    fn live(
        &self,
        trace: &Trace,
        compiler: &NodeCompiler,
        _state: &ClusterState,
    ) -> Result<LiveReport, Error> {
        let save = live::read_back(self.backend, compiler.family())?;
        Ok(live::check(trace, &save))
    }

    fn kernel(&self, compiler: &NodeCompiler, state: &ClusterState) -> Result<KernelReport, Error> {
        let save = live::read_back(self.backend, compiler.family())?;
        let compiled = NodeRules::new(compiler).full(state);
        Ok(kernel::compare(&compiled, &save))
    }
}
