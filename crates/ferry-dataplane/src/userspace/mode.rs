//! The userspace mode's line in the mode table, and the mode on a node: one proxy engine
//! shared by the families' appliers and read by the metrics server.

use ferry_compile::mode::{ProxyMode, UserspaceRenderer};
use ferry_compile::trace::Trace;
use ferry_compile::userspace::{NodeRules, ProxyPorts};
use ferry_compile::NodeCompiler;
use ferry_model::{ClusterState, IpFamily};

use super::applier::UserspaceApplier;
use super::restore;
use crate::live::{KernelReport, LiveReport};
use crate::mode::{FailureCounter, ModeEntry, ModeOptions, NodeMode};
use crate::nft_table::{self, NFTABLES_LAYOUT_CHAIN};
use crate::preflight::Requirements;
use crate::proxy::{Engine, Stats};
use crate::support::Unsupported;
use crate::{Applier, Error};

/// The userspace mode's line in the mode table. Its rules are Ferry's nftables table, so it
/// shares nftables mode's failure counter (upstream's userspace proxier had none).
pub(crate) const MODE: ModeEntry = ModeEntry {
    mode: ProxyMode::Userspace,
    renderer: &UserspaceRenderer,
    open: |options: &ModeOptions| Box::new(UserspaceMode::open(options)),
    // Ferry's table, unless it is nftables mode's (see nftables mode's line). The proxy's
    // listeners are the process's own: they end with it.
    cleanup: |scope| nft_table::cleanup_unless_chain(Some(NFTABLES_LAYOUT_CHAIN), scope.dry_run),
    // kube-proxy's leftovers are the kernel modes' to find (their tables and chains).
    leftovers: Vec::new,
    sync_failures: FailureCounter::NftablesSync,
    writes_iptables: false,
};

/// The userspace mode on this node.
struct UserspaceMode {
    engine: Engine,
}

impl UserspaceMode {
    fn open(options: &ModeOptions) -> Self {
        Self {
            engine: options.proxy_engine(),
        }
    }
}

impl NodeMode for UserspaceMode {
    fn describe(&self) -> String {
        match self.engine.serves() {
            true => "userspace mode".to_owned(),
            false => "userspace mode (rules only: no runtime to serve connections)".to_owned(),
        }
    }

    /// nftables mode's check: the redirect rules are in Ferry's nftables table.
    fn supports(&self, family: IpFamily) -> Result<(), Unsupported> {
        nft_table::table_supported(family)
    }

    /// nftables mode's (the redirect table). The proxy itself listens on unprivileged ports
    /// (proxy ports, NodePorts on loopback) and needs no capability.
    fn requirements(&self) -> Requirements {
        nft_table::table_requirements()
    }

    fn applier(&self, family: IpFamily) -> Box<dyn Applier> {
        Box::new(UserspaceApplier::new(family, self.engine.clone()))
    }

    fn udp_conntrack_cleanup(&self) -> bool {
        false
    }

    fn proxy_metrics(&self) -> Option<Stats> {
        Some(self.engine.stats())
    }

    /// The kernel's table against the rules compiled with the proxy ports it holds.
    fn live(
        &self,
        trace: &Trace,
        compiler: &NodeCompiler,
        state: &ClusterState,
    ) -> Result<LiveReport, Error> {
        let table = nft_table::read_back(compiler.family())?;
        let ruleset = compiled_with_held_ports(compiler, state)?;
        Ok(nft_table::live::check(trace, &ruleset, table.as_ref()))
    }

    /// `ferry status`: each service's redirect elements (portals, NodePorts, proxy ports) in
    /// the kernel's table against the ones compiled with the proxy ports it holds.
    fn kernel(&self, compiler: &NodeCompiler, state: &ClusterState) -> Result<KernelReport, Error> {
        let table = nft_table::read_back(compiler.family())?;
        let ruleset = compiled_with_held_ports(compiler, state)?;
        Ok(nft_table::kernel::compare(&ruleset, table.as_ref()))
    }
}

/// The redirect rules `state` compiles to, each service port on the proxy port the kernel's
/// table gives it (a port it does not hold is assigned as a starting agent would).
fn compiled_with_held_ports(
    compiler: &NodeCompiler,
    state: &ClusterState,
) -> Result<ferry_compile::nft::Ruleset, Error> {
    let mut ports = ProxyPorts::new(compiler.config().proxy_port_range);
    for (name, port) in restore::read(compiler.family())? {
        ports.restore(&name, port);
    }
    Ok(NodeRules::new(compiler).full(state, &mut ports).0.ruleset)
}
