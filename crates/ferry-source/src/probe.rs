//! Readiness probes, as kubelet runs them (standalone mode): the only part of this crate that
//! talks to Pods.
//!
//! It lives in the source crate, not in the binary, because its results are input: a probe's
//! verdict changes the EndpointSlices the source reports ([`crate::pods`]), as kubelet's
//! verdicts change the slices the API reports in a cluster; and `ferry-bench` measures it from
//! here. It does network I/O (HTTP(S), TCP and gRPC to the Pods, from this node), so it is kept
//! out of the pure crates.
//!
//! - [`Target`]: a probe resolved against its Pod (host, named ports);
//! - [`check`]: running one probe ([`NetworkCheck`]), kubelet's success rules;
//! - [`threshold`]: results → verdict (`successThreshold`, `failureThreshold`);
//! - [`Prober`]: the schedule (period, initial delay, timeout, jitter, bounded concurrency);
//! - [`book`]: the results as data for `ferry status`, `ferry explain` and metrics.

pub mod book;
pub mod check;
mod http;
mod prober;
mod target;
pub mod threshold;
mod tls;

pub use book::{ProbeBook, ProbeReport, ProbeStatus, PROBE_RESULTS_METRIC};
pub use check::{Check, CheckFuture, NetworkCheck};
pub use prober::{Prober, DEFAULT_MAX_CONCURRENT};
pub use target::Target;
pub use threshold::Outcome;

#[cfg(test)]
mod tests;
