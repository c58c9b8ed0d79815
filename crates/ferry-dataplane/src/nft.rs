//! nftables mode: Ferry's own table ([`crate::nft_table`]) and the userspace proxy for
//! localhost NodePorts ([`crate::proxy`]), composed; its line in the mode table. See
//! docs/src/modes/nft-layout.md.

use ferry_compile::mode::{NftRenderer, ProxyMode};
use ferry_compile::trace::Trace;
use ferry_compile::NodeCompiler;
use ferry_model::{ClusterState, IpFamily};

use crate::cleanup::{Cleanup, Scope};
use crate::live::{KernelReport, LiveReport};
use crate::mode::{FailureCounter, ModeEntry, NodeMode};
use crate::nft_table::{self, USERSPACE_LAYOUT_CHAIN};
use crate::preflight::Requirements;
use crate::proxy::{Engine, Stats, WithLocalhostNodePorts};
use crate::support::Unsupported;
use crate::{Applier, Error};

pub use crate::nft_table::{
    cleanup, leftovers, read_back, LiveTable, NftCli, NftDataplane, NftRunner,
};

/// nftables mode's line in the mode table.
pub(crate) const MODE: ModeEntry = ModeEntry {
    mode: ProxyMode::Nftables,
    renderer: &NftRenderer,
    open: |options| {
        Box::new(NftMode {
            localhost: options.proxy_engine(),
        })
    },
    // The userspace mode's table is Ferry's table too: a node switching modes loses it, a
    // userspace node starting up (which cleans up after the other modes) keeps it.
    cleanup: cleanup_mode,
    leftovers,
    sync_failures: FailureCounter::NftablesSync,
    writes_iptables: false,
};

/// nftables mode on this node, with the proxy of its localhost NodePorts.
struct NftMode {
    localhost: Engine,
}

impl NodeMode for NftMode {
    fn describe(&self) -> String {
        "nftables mode".to_owned()
    }

    fn supports(&self, family: IpFamily) -> Result<(), Unsupported> {
        nft_table::table_supported(family)
    }

    fn requirements(&self) -> Requirements {
        nft_table::table_requirements()
    }

    fn applier(&self, family: IpFamily) -> Box<dyn Applier> {
        let rules = NftDataplane::new();
        Box::new(WithLocalhostNodePorts::new(
            rules,
            self.localhost.clone(),
            family,
        ))
    }

    fn proxy_metrics(&self) -> Option<Stats> {
        Some(self.localhost.stats())
    }

    fn live(
        &self,
        trace: &Trace,
        compiler: &NodeCompiler,
        state: &ClusterState,
    ) -> Result<LiveReport, Error> {
        let table = read_back(compiler.family())?;
        let plan = compiler.plan(state);
        Ok(nft_table::live::check(
            trace,
            &ferry_compile::nft::render(&plan),
            table.as_ref(),
        ))
    }

    fn kernel(&self, compiler: &NodeCompiler, state: &ClusterState) -> Result<KernelReport, Error> {
        let table = read_back(compiler.family())?;
        let compiled = ferry_compile::nft::render(&compiler.plan(state));
        Ok(nft_table::kernel::compare(&compiled, table.as_ref()))
    }
}

/// nftables mode's line in the mode table: Ferry's tables except one the userspace mode
/// uses, and kube-proxy's nftables tables as `scope` says.
fn cleanup_mode(scope: Scope) -> Result<Cleanup, Error> {
    nft_table::with_kube_proxy(
        nft_table::cleanup_unless_chain(Some(USERSPACE_LAYOUT_CHAIN), scope.dry_run)?,
        scope,
    )
}
