//! Ferry's version, as `ferry version`, the start-up line and `kubernetes_build_info` show it.

/// Ferry's version (the crate's).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The Kubernetes minor version whose API types (k8s-openapi's feature) and kube-proxy
/// behaviour Ferry follows.
pub const KUBERNETES: &str = "v1.33";

/// The git commit Ferry was built from, when the build passed it (`FERRY_GIT_COMMIT`).
pub fn git_commit() -> &'static str {
    option_env!("FERRY_GIT_COMMIT").unwrap_or("")
}

/// `os/arch`, as Kubernetes' `platform` label spells it (`linux/amd64`).
pub fn platform() -> String {
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "powerpc64" => "ppc64le",
        other => other,
    };
    format!("{}/{arch}", std::env::consts::OS)
}

/// The version line: `ferry v0.1.0 (kube-proxy v1.33 compatible, linux/amd64)`.
pub fn line() -> String {
    let commit = match git_commit() {
        "" => String::new(),
        c => format!(", commit {c}"),
    };
    format!(
        "ferry v{VERSION} (kube-proxy {KUBERNETES} compatible, {}{commit})",
        platform()
    )
}
