//! # ferry-kube-lab: a real Kubernetes control plane in Ferry's lab
//!
//! Ferry's cluster mode tested against the real thing: etcd, kube-apiserver and
//! kube-controller-manager, built from source at one pinned release (`lab/k8s/`), run on a
//! host of the network-namespace lab ([`ferry_lab`]), with Ferry's nodes connecting over the
//! lab's LAN as they would to a real cluster.
//!
//! - [`assets`]: where the binaries come from (envtest's `KUBEBUILDER_ASSETS` /
//!   `TEST_ASSET_<NAME>`, the build cache, or a build from source);
//! - [`pki`]: the cluster's certificates and keys, and kubeconfigs;
//! - [`control_plane`]: the processes, `kubectl`, tokens, and the faults tests inject
//!   (an API server restart, an etcd compaction);
//! - [`kube_proxy`]: upstream kube-proxy as kubeadm runs it (configuration, RBAC, token,
//!   `--cleanup`), shared by the differential test and the side-by-side benchmark;
//! - [`kubelet`]: the kubelet stand-in (binary `ferry-lab-kubelet`), the only part that is
//!   not upstream's: it registers Nodes and runs the lab's Pods, their probes and status.
//!
//! A dev crate: tests and benchmarks use it; the `ferry` agent does not link it.

pub mod assets;
pub mod control_plane;
pub mod kube_proxy;
pub mod kubelet;
pub mod pki;

pub use assets::{Assets, AssetsError};
pub use control_plane::{ControlPlane, ControlPlaneError, Tuning};
