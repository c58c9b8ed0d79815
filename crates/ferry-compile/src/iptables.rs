//! The iptables backend: a [`Plan`](crate::Plan) rendered with upstream kube-proxy's iptables
//! layout and chain names, as `iptables-restore --noflush` input.
//!
//! Layout (see docs/src/modes/iptables-layout.md): the same top-level chains as upstream
//! (`KUBE-SERVICES`, `KUBE-NODEPORTS`, `KUBE-POSTROUTING`, `KUBE-MARK-MASQ` in nat;
//! `KUBE-SERVICES`, `KUBE-EXTERNAL-SERVICES`, `KUBE-NODEPORTS`, `KUBE-FORWARD`,
//! `KUBE-PROXY-FIREWALL` in filter), and per service port `KUBE-SVC-`/`KUBE-SVL-`/`KUBE-EXT-`
//! chains plus a `KUBE-SEP-` chain per endpoint, named by the same hashes, so every article and
//! tool that explains kube-proxy's iptables mode reads Ferry's rules too. The jumps from the
//! built-in chains are not part of a restore (that would mean owning PREROUTING, INPUT, …); the
//! dataplane ensures them one by one ([`jump_rules`]).

mod affinity;
pub(crate) mod base;
mod canonical;
mod load_balancer;
mod model;
pub(crate) mod names;
mod nfacct_text;
mod node;
mod port;
mod render;
mod restore;

pub use canonical::{canonical, canonical_digest, SavedDigests};
pub use model::{Chain, ChainDigest, JumpRule, Ruleset, ServiceRules, Table};
pub use names::{
    endpoint_chain, owner_marker_args, port_proto_hash, service_chain, CANARY,
    CT_STATE_INVALID_COUNTER, EXTERNAL_PREFIX, FIREWALL_PREFIX, KUBE_EXTERNAL_SERVICES,
    KUBE_FORWARD, KUBE_MARK_MASQ, KUBE_NODEPORTS, KUBE_POSTROUTING, KUBE_PROXY_FIREWALL,
    KUBE_SERVICES, LOCALHOST_NODE_PORTS_COUNTER, LOCAL_PREFIX, NON_POD_MASQ, OWNER_COMMENT,
    SEP_PREFIX, SERVICE_CHAIN_PREFIXES, SVC_PREFIX,
};
pub use nfacct_text::without_nfacct;
pub use node::NodeRules;
pub use render::{
    jump_rules, render, render_base, render_service, render_slim, RenderContext,
    LARGE_CLUSTER_ENDPOINTS,
};
pub use restore::{FullSync, Rerender, Restore, Transactions, BASE_CHAINS_FILTER, BASE_CHAINS_NAT};

#[cfg(test)]
mod counter_tests;
#[cfg(test)]
mod tests;
