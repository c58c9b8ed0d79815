//! `kubernetes_build_info`, the gauge every Kubernetes component exports (component-base's
//! version metric), always 1, its labels describing the build: here Ferry's version.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::version::{git_commit, platform, VERSION};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabels {
    build_date: String,
    compiler: String,
    git_commit: String,
    git_tree_state: String,
    git_version: String,
    go_version: String,
    major: String,
    minor: String,
    platform: String,
}

/// Registers `kubernetes_build_info` with its one series set to 1.
pub fn register(registry: &mut Registry) {
    let family = Family::<BuildLabels, Gauge>::default();
    let mut parts = VERSION.split('.');
    let labels = BuildLabels {
        build_date: String::new(),
        compiler: "rustc".to_owned(),
        git_commit: git_commit().to_owned(),
        git_tree_state: String::new(),
        git_version: format!("v{VERSION}"),
        go_version: String::new(),
        major: parts.next().unwrap_or_default().to_owned(),
        minor: parts.next().unwrap_or_default().to_owned(),
        platform: platform(),
    };
    family.get_or_create(&labels).set(1);
    registry.register(
        "kubernetes_build_info",
        "A metric with a constant '1' value labeled by major, minor, git version, git commit, git tree state, build date, Go version, and compiler from which Kubernetes was built, and platform on which it is running.",
        family,
    );
}
