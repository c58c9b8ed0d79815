//! # ferry-drills: Ferry under fault, with figures
//!
//! Each drill (issue 16) runs the real `ferry run` binary in throw-away network namespaces
//! ([`lab`]: a node between a client and its pods, the approach of `ferry-bench-e2e`) or
//! against the fake Kubernetes API server, does to it what a node's life does — `kill -9`
//! mid-sync, restarts and upgrades under traffic, API outages, other programs rewriting the
//! ruleset, hostile input, kernel limits, hours of churn — and prints one row ([`report`]):
//! the drill, its repetitions, the failures, the figure that matters. Nothing here asserts on
//! a timing; a failure is a broken promise (a Service unanswered, a mix of old and new rules,
//! a crash), named in the row's notes.
//!
//! The drills never touch the namespace they are started in: every rule is written inside the
//! node namespace, and dropping a drill's lab deletes its namespaces with what runs in them.

pub mod drill;
pub mod lab;
pub mod report;
