//! IPVS mode's kernel half: the applier ([`IpvsApplier`]) that keeps IPVS's virtual servers,
//! the `kube-ipvs0` dummy interface, upstream's ipsets and sysctls ([`crate::ipvs_kernel`]) and
//! IPVS mode's iptables chains ([`crate::iptables_tool`]) equal to the compiler's desired state;
//! its line in the mode table, its cleanup and its `explain --live` reading. See
//! docs/src/modes/ipvs-layout.md.
//!
//! Everything works in the network namespace of the calling thread (IPVS tables, links,
//! ipsets and iptables are all per namespace).

mod applier;
mod cleanup;
mod jumps;
mod live;
mod mode;
mod node;
mod set_counts;
mod sync;

use ferry_compile::mode::{IpvsRenderer, ProxyMode};

use crate::mode::{FailureCounter, ModeEntry, ModeOptions};

pub use crate::ipvs_kernel::{
    ipset, sysctl, Change, IpvsClient, IpvsError, Links, LiveRealServer, Refused, Table,
};
pub use applier::{IpvsApplier, IpvsReport};
pub use cleanup::{cleanup, leftovers};
pub use node::local_addresses;

/// IPVS mode's line in the mode table. Failed syncs count as upstream counts them in IPVS
/// mode: as `iptables-restore` failures.
pub(crate) const MODE: ModeEntry = ModeEntry {
    mode: ProxyMode::Ipvs,
    renderer: &IpvsRenderer,
    open: |options: &ModeOptions| Box::new(mode::IpvsMode::open(options)),
    cleanup,
    leftovers,
    sync_failures: FailureCounter::IptablesRestore,
    writes_iptables: true,
};
