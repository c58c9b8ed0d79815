//! Ferry's scale benchmark.
//!
//! Generates clusters of N services × M endpoints ([`cluster`]) and, inside a throw-away network
//! namespace ([`netns`]), measures with any mode's applier from the mode table the full sync,
//! incremental syncs after one endpoint changes, the periodic resync and the memory used
//! ([`measure`]), then the size of what the mode renders ([`sizes`], [`compile`]); IPVS mode is
//! also compared with upstream's tools loading the same virtual servers ([`ipvs_baseline`]). The `ferry-bench` binary runs each N in its own process and prints the
//! figures ([`report`]).
//!
//! [`e2e`] is the end-to-end benchmark (`ferry-bench-e2e`): the real `ferry run` binary in
//! network namespaces, timed from a client's connections.
//!
//! Nothing here asserts on timings: the figures are printed, with the targets for reference.

pub mod cluster;
pub mod compile;
pub mod e2e;
pub mod ipvs_baseline;
pub mod measure;
pub mod netns;
pub mod report;
pub mod sizes;
pub mod stats;
