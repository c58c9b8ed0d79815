//! IPVS mode on a node: what it needs from the kernel and the tools, its appliers, and its
//! reading of the kernel for `ferry explain --live`.

use ferry_compile::trace::Trace;
use ferry_compile::NodeCompiler;
use ferry_model::{ClusterState, IpFamily};

use super::applier::IpvsApplier;
use super::live;
use crate::iptables_tool::{detect_backend, IptablesCli};
use crate::ipvs_kernel::IpvsClient;
use crate::live::{KernelReport, LiveReport};
use crate::mode::{IptablesBackend, IpvsOptions, ModeOptions, NodeMode};
use crate::preflight::{Capability, Requirements, Tool};
use crate::support::{kernel_has, succeeds, Unsupported};
use crate::{Applier, Error};

/// IPVS mode on this node: the iptables backend its chains go to, and its options.
pub(super) struct IpvsMode {
    backend: IptablesBackend,
    options: IpvsOptions,
}

impl IpvsMode {
    /// The backend forced by the options, or the one that already holds Kubernetes' rules.
    pub(super) fn open(options: &ModeOptions) -> Self {
        Self {
            backend: options.iptables_backend.unwrap_or_else(detect_backend),
            options: options.ipvs.clone(),
        }
    }
}

impl NodeMode for IpvsMode {
    fn describe(&self) -> String {
        format!("IPVS mode, iptables {} backend", self.backend.as_str())
    }

    /// Upstream's `CanUseIPVSProxier` and the iptables check: the kernel answers the IPVS
    /// generic netlink family, and `ipset` and the family's iptables run.
    fn supports(&self, family: IpFamily) -> Result<(), Unsupported> {
        kernel_has(family)?;
        IpvsClient::open().map_err(|e| {
            Unsupported(format!(
                "{e} (load the ip_vs module, or use --proxy-mode nftables)"
            ))
        })?;
        succeeds("ipset", &["version"])?;
        let program = self.backend.program_for(family, "");
        succeeds(&program, &["-w", "5", "-t", "nat", "-S", "POSTROUTING"])
    }

    /// `ipset` and the backend's iptables tools (IPVS itself is programmed over netlink),
    /// CAP_NET_ADMIN, and CAP_NET_RAW for the legacy backend.
    fn requirements(&self) -> Requirements {
        let mut tools = vec![Tool::new("ipset", "ipset")];
        tools.extend(
            ["", "-save", "-restore"]
                .into_iter()
                .map(|t| Tool::new(self.backend.program(t), "iptables")),
        );
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
        Box::new(IpvsApplier::new(
            family,
            IptablesCli::for_family(self.backend, family),
            self.options.clone(),
        ))
    }

    fn live(
        &self,
        trace: &Trace,
        compiler: &NodeCompiler,
        state: &ClusterState,
    ) -> Result<LiveReport, Error> {
        live::check(trace, compiler, state)
    }

    fn kernel(&self, compiler: &NodeCompiler, state: &ClusterState) -> Result<KernelReport, Error> {
        live::kernel(compiler, state)
    }
}
