//! `ferry check`: validate a configuration and manifests before a rollout, for people and CI.
//!
//! Takes the same flags as `ferry run` and resolves them the same way (defaults, then the
//! `--config` file, then flags), then reads `--manifests` once. Prints every problem, one per
//! line (`error: …`, `warning: …`), then a summary; the caller exits 1 when there is an error,
//! 0 otherwise. Warnings (unknown or unused config fields) do not fail the check.
//!
//! The configuration stops at its first error, as `ferry run` would; manifests report every
//! bad object, each naming file, object and field.

use ferry_model::Object;
use ferry_source::pods::EndpointController;
use ferry_source::SourceEvent;

use crate::cli::RunArgs;

/// The outcome of a check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// Lines to print, in order.
    pub lines: Vec<String>,
    /// Errors found (warnings not counted).
    pub errors: usize,
}

/// Checks the configuration the flags describe and, if given, the manifests.
pub fn check(args: &RunArgs) -> Report {
    let mut lines = Vec::new();
    let mut errors = 0;
    match args.resolve() {
        Ok((config, warnings)) => {
            lines.extend(warnings.iter().map(|w| format!("warning: {w}")));
            let source = args
                .config
                .as_ref()
                .map_or("flags and defaults".to_owned(), |p| p.display().to_string());
            lines.push(format!(
                "ok: configuration ({source}): node {}, nftables mode",
                config.node_name
            ));
        }
        Err(e) => {
            errors += 1;
            lines.push(format!("error: {e}"));
        }
    }
    if let Some(path) = &args.manifests {
        let scan = ferry_source::manifest::load(path);
        // Across objects: the EndpointSlice controller of standalone mode names hand-written
        // slices of Services fed by Pods, and Pods on unknown Nodes.
        let derived = EndpointController::new().handle(SourceEvent::Resync(scan.objects.clone()));
        let problems = scan.errors.len() + derived.new_problems.len();
        errors += problems;
        lines.extend(scan.errors.iter().map(|e| format!("error: {e}")));
        lines.extend(derived.new_problems.iter().map(|e| format!("error: {e}")));
        let count = |f: fn(&Object) -> bool| scan.objects.iter().filter(|o| f(o)).count();
        let pods = match count(|o| matches!(o, Object::Pod(_))) {
            0 => String::new(),
            n => format!(", {n} Pods"),
        };
        lines.push(format!(
            "manifests {}: {} valid objects ({} Services, {} EndpointSlices, {} Nodes{pods}), {problems} problems",
            path.display(),
            scan.objects.len(),
            count(|o| matches!(o, Object::Service(_))),
            count(|o| matches!(o, Object::EndpointSlice(_))),
            count(|o| matches!(o, Object::Node(_))),
        ));
    }
    lines.push(if errors == 0 {
        "ferry check: ok".to_owned()
    } else {
        format!("ferry check: {errors} problem(s)")
    });
    Report { lines, errors }
}
