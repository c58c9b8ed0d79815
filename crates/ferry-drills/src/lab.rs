//! The drills' lab: a node between a client and its pods, in three network namespaces (the
//! approach of `ferry-bench-e2e`), the real `ferry run` on the node, and the generated cluster
//! it programs.
//!
//! ```text
//!  client 10.200.0.2 ──veth── 10.200.0.1 node 10.201.0.1 ──veth── 10.201.0.2 pods
//!   default via node          ferry runs here                 local 10.64.0.0/12 (AnyIP)
//! ```
//!
//! The pods namespace holds the whole pod range as one local route, so one listener answers
//! every endpoint address and says which address it was reached on. Nothing is added to the
//! namespace the drills start in: the veths are created inside the node namespace, and every
//! rule is written by the `ferry run` (or the drill's own `nft`/`iptables` commands) inside the
//! node namespace.

pub mod cluster;
pub mod echo;
pub mod ferry;
pub mod net;
pub mod probe;
pub mod streams;
pub mod watch;

pub use cluster::Cluster;
pub use echo::Endpoints;
pub use ferry::Ferry;
pub use net::Net;
