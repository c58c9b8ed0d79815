//! The scale lab of Ferry's end-to-end benchmark (`ferry-bench-e2e`) and reliability drills
//! (`ferry-drills`): a node between a client and its pods, in three network namespaces, the
//! real `ferry run` on the node, and a generated cluster of N Services × M endpoints for it to
//! program (feature `scale`).
//!
//! ```text
//!  client 10.200.0.2 ──veth── 10.200.0.1 node 10.201.0.1 ──veth── 10.201.0.2 pods
//!   default via node          ferry runs here                 local 10.64.0.0/12 (AnyIP)
//!                             10.64.0.0/12 via pods
//!                             unreachable 10.96.0.0/12
//! ```
//!
//! The pods namespace holds the whole pod range as one local route, so one listener answers
//! every endpoint address ([`echo`]) and says which address it was reached on ([`probe`]).
//! Nothing is added to the namespace the caller runs in: the veths are created inside the node
//! namespace, and every rule is written by the `ferry run` ([`ferry`]) inside it.
//!
//! These are measurement tools rather than a library API: errors are `anyhow` chains for the
//! reports that print them.

pub mod cluster;
pub mod echo;
pub mod ferry;
pub mod net;
pub mod probe;

pub use cluster::{Cluster, Layout};
pub use echo::Endpoints;
pub use ferry::Ferry;
pub use net::{Net, Netns};
