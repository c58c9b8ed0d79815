//! `ferry check`: validate a configuration and manifests before a rollout, for people and CI.
//!
//! Takes the same flags as `ferry run` and resolves them the same way (file, defaults, flags),
//! then reads `--manifests` once and reports everything it finds, per object, with file and
//! document position: conversion errors (all of them, not only the first), fields the kind does
//! not have (with the likely intended name), conflicts across Services, slice port names no
//! Service port has, a node name no Node has, empty inputs. Errors fail the check (exit 1);
//! warnings do not. `--output json` is for tools.

use std::collections::BTreeMap;
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use ferry_model::Object;
use ferry_source::pods::EndpointController;
use ferry_source::{InvalidObject, SourceEvent};
use serde_json::json;

use crate::cli::RunArgs;

mod across;
mod fields;
mod kube_proxy;
pub(crate) mod manifests;

/// `ferry check` flags.
#[derive(Debug, Clone, Args)]
pub struct CheckArgs {
    /// Output format.
    #[arg(long, value_enum, default_value_t = Output::Text)]
    pub output: Output,
    /// Everything `ferry run` takes.
    #[command(flatten)]
    pub run: RunArgs,
}

/// `--output`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// One line per finding, then a summary.
    Text,
    /// One JSON object: findings and summary.
    Json,
}

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    /// Fails the check.
    Error,
    /// Worth knowing; does not fail the check.
    Warning,
}

impl Severity {
    fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        }
    }
}

/// One thing found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// Error or warning.
    pub severity: Severity,
    /// The file (empty for the configuration as a whole).
    pub file: String,
    /// Where in the file (`document 2`), if known.
    pub position: String,
    /// `Kind namespace/name`, if about one object.
    pub object: String,
    /// The field, if about one.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: ", self.severity.as_str())?;
        for part in [&self.file, &self.position, &self.object, &self.field] {
            if !part.is_empty() {
                write!(f, "{part}: ")?;
            }
        }
        f.write_str(&self.message)
    }
}

impl Finding {
    /// An error about one object (its file, object and field, as the source names them).
    fn invalid(e: &InvalidObject) -> Self {
        Finding {
            severity: Severity::Error,
            file: e
                .file
                .as_ref()
                .map(|f| f.display().to_string())
                .unwrap_or_default(),
            position: String::new(),
            object: e.object.to_string(),
            field: e.field.clone(),
            message: e.reason.clone(),
        }
    }

    fn general(severity: Severity, message: impl Into<String>) -> Self {
        Finding {
            severity,
            file: String::new(),
            position: String::new(),
            object: String::new(),
            field: String::new(),
            message: message.into(),
        }
    }
}

/// The outcome of a check.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// Everything found, configuration first, then per file, document and object.
    pub findings: Vec<Finding>,
    /// `ok: …` lines and counts, for the summary.
    pub summary: Vec<String>,
    /// Counts of valid objects per kind.
    pub counts: BTreeMap<&'static str, usize>,
}

impl Report {
    /// Errors found (warnings not counted).
    pub fn errors(&self) -> usize {
        self.findings
            .iter()
            .filter(|f| f.severity == Severity::Error)
            .count()
    }
}

/// `ferry check`: prints the report; exit 0 (valid) or 1.
pub fn main(args: &CheckArgs) -> ExitCode {
    let report = check(&args.run);
    match args.output {
        Output::Text => {
            for f in &report.findings {
                println!("{f}");
            }
            for line in &report.summary {
                println!("{line}");
            }
            println!(
                "{}",
                match report.errors() {
                    0 => "ferry check: ok".to_owned(),
                    n => format!("ferry check: {n} problem(s)"),
                }
            );
        }
        Output::Json => println!("{}", to_json(&report)),
    }
    if report.errors() == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn to_json(report: &Report) -> serde_json::Value {
    let findings: Vec<_> = report
        .findings
        .iter()
        .map(|f| {
            json!({"severity": f.severity.as_str(), "file": f.file, "position": f.position,
                   "object": f.object, "field": f.field, "message": f.message})
        })
        .collect();
    json!({
        "ok": report.errors() == 0,
        "errors": report.errors(),
        "warnings": report.findings.len() - report.errors(),
        "summary": report.summary,
        "objects": report.counts,
        "findings": findings,
    })
}

/// Checks the configuration the flags describe and, if given, the manifests.
pub fn check(args: &RunArgs) -> Report {
    let mut report = Report::default();
    let node = match args.resolve() {
        Ok((config, warnings)) => {
            report.findings.extend(
                warnings
                    .into_iter()
                    .map(|w| Finding::general(Severity::Warning, w)),
            );
            let source = args
                .config
                .as_ref()
                .map_or("flags and defaults".to_owned(), |p| p.display().to_string());
            report.summary.push(format!(
                "ok: configuration ({source}): node {}, {}",
                config.node_name,
                kube_proxy::mode_line(&config)
            ));
            for d in kube_proxy::differences(&config) {
                report.summary.push(format!(
                    "differs from kube-proxy with the same configuration: {d}"
                ));
            }
            Some(config.node_name)
        }
        Err(e) => {
            report
                .findings
                .push(Finding::general(Severity::Error, e.to_string()));
            None
        }
    };
    if let Some(path) = &args.manifests {
        check_manifests(path, node.as_deref(), &mut report);
    }
    report
}

/// What one pass over the manifests keeps.
#[derive(Default)]
struct Read {
    /// Files that could not be listed, read or parsed.
    file_errors: Vec<ferry_source::InvalidObject>,
    /// What [`manifests::check_document`] found, document by document.
    per_document: Vec<Finding>,
    across: across::Across,
    objects: Vec<Object>,
    any_document: bool,
}

/// Reads and checks the manifests one document at a time: only the converted objects and what
/// the checks across objects need are kept, never the parsed documents of the whole directory.
fn read_manifests(path: &std::path::Path) -> Read {
    let mut trees = BTreeMap::new();
    let mut read = Read::default();
    read.file_errors = ferry_source::manifest::for_each_document(path, |doc| {
        read.any_document = true;
        let checked = manifests::check_document(&doc, &mut trees, &mut read.per_document);
        read.across.note(&doc, &checked);
        read.objects.extend(checked.objects);
    });
    read
}

fn check_manifests(path: &std::path::Path, node: Option<&str>, report: &mut Report) {
    let before = report.findings.len();
    let Read {
        file_errors,
        mut per_document,
        across,
        objects,
        any_document,
    } = read_manifests(path);
    report
        .findings
        .extend(file_errors.iter().map(Finding::invalid));
    report.findings.append(&mut per_document);
    across.check(&mut report.findings);
    for obj in &objects {
        let kind = match obj {
            Object::Service(_) => "Services",
            Object::EndpointSlice(_) => "EndpointSlices",
            Object::Node(_) => "Nodes",
            Object::Pod(_) => "Pods",
            Object::ServiceCidr(_) => "ServiceCIDRs",
        };
        *report.counts.entry(kind).or_default() += 1;
    }
    let valid = objects.len();
    let nodes: Vec<String> = objects
        .iter()
        .filter_map(|o| match o {
            Object::Node(n) => Some(n.name.to_string()),
            _ => None,
        })
        .collect();
    // Across objects: the EndpointSlice controller of standalone mode names hand-written
    // slices of Services fed by Pods, and Pods on unknown Nodes.
    let derived = EndpointController::new().handle(SourceEvent::Resync(objects));
    report
        .findings
        .extend(derived.new_problems.iter().map(Finding::invalid));
    if !any_document && file_errors.is_empty() {
        report.findings.push(Finding {
            severity: Severity::Warning,
            file: path.display().to_string(),
            position: String::new(),
            object: String::new(),
            field: String::new(),
            message: "no manifests here: `ferry run` would program no Service".to_owned(),
        });
    } else if !report.counts.contains_key("Services") {
        report.findings.push(Finding::general(
            Severity::Warning,
            format!("{}: no valid Service", path.display()),
        ));
    }
    let nodes = nodes.iter().map(String::as_str);
    if let Some(w) = node.and_then(|n| unknown_node_warning(n, nodes)) {
        report.findings.push(Finding::general(Severity::Warning, w));
    }
    let errors = report.findings[before..]
        .iter()
        .filter(|f| f.severity == Severity::Error)
        .count();
    let line = summary(path, valid, &report.counts, errors);
    report.summary.push(line);
}

/// `manifests DIR: N valid objects (… Services, … EndpointSlices, … Nodes), M problems`.
fn summary(
    path: &std::path::Path,
    valid: usize,
    counts: &BTreeMap<&'static str, usize>,
    errors: usize,
) -> String {
    let count = |k: &str| counts.get(k).copied().unwrap_or(0);
    let pods = match count("Pods") {
        0 => String::new(),
        n => format!(", {n} Pods"),
    };
    let cidrs = match count("ServiceCIDRs") {
        0 => String::new(),
        n => format!(", {n} ServiceCIDRs"),
    };
    format!(
        "manifests {}: {} valid objects ({} Services, {} EndpointSlices, {} Nodes{pods}{cidrs}), \
         {} problems",
        path.display(),
        valid,
        count("Services"),
        count("EndpointSlices"),
        count("Nodes"),
        errors
    )
}

/// Why `node` is not a node of the manifests, when it is not: `no Node named "k8s-nod2" in the
/// manifests; they define k8s-node1, k8s-node2 (did you mean "k8s-node2"?)`. Without its Node,
/// Ferry knows neither the node's addresses (where NodePorts answer), its pod CIDR nor its zone.
/// `ferry explain` refuses such a node; `ferry check` and `ferry rules` warn when the manifests
/// define Nodes (see [`unknown_node_warning`]).
pub fn unknown_node<'a>(node: &str, names: impl IntoIterator<Item = &'a str>) -> Option<String> {
    let names: Vec<&str> = names.into_iter().collect();
    if names.contains(&node) {
        return None;
    }
    if names.is_empty() {
        return Some(format!(
            "no Node named {node:?} in the manifests; they define no Node"
        ));
    }
    let hint = crate::suggest::closest(node, names.iter().copied())
        .map(|s| format!(" (did you mean {s:?}?)"))
        .unwrap_or_default();
    Some(format!(
        "no Node named {node:?} in the manifests; they define {}{hint}",
        names.join(", ")
    ))
}

/// [`unknown_node`] as the warning of `ferry check` and `ferry rules`: only when the manifests
/// define Nodes (manifests of Services alone are common), with what the node then lacks.
pub fn unknown_node_warning<'a>(
    node: &str,
    names: impl IntoIterator<Item = &'a str>,
) -> Option<String> {
    let names: Vec<&str> = names.into_iter().collect();
    if names.is_empty() {
        return None;
    }
    unknown_node(node, names)
        .map(|why| format!("{why}: this node's addresses, pod CIDR and zone are unknown"))
}

#[cfg(test)]
mod tests;
