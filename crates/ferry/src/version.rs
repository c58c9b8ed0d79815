//! Ferry's version, as `ferry version`, the start-up line and `kubernetes_build_info` show it.

/// Ferry's version (the crate's).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The kube-proxy release whose behaviour Ferry follows; docs/src/architecture/kube-proxy-1-37.md
/// lists each change of 1.34–1.37 and what Ferry does about it. The API types are k8s-openapi's
/// `v1_33` (its readers skip fields they do not know and read a missing EndpointSlice
/// `endpoints`, optional since 1.36, as none).
pub const KUBERNETES: &str = "v1.37";

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

/// The version line: `ferry v0.1.0 (kube-proxy v1.37 compatible, linux/amd64)`.
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

#[cfg(test)]
mod tests {
    #[test]
    fn the_version_line_names_kube_proxy_1_37() {
        assert!(
            super::line().contains("(kube-proxy v1.37 compatible, "),
            "{}",
            super::line()
        );
    }
}
