//! Finding the Kubernetes binaries: envtest's convention first, then the build cache, then a
//! build from source.
//!
//! For each binary, in order:
//! 1. `TEST_ASSET_<NAME>` (`TEST_ASSET_ETCD`, `TEST_ASSET_KUBE_APISERVER`, `TEST_ASSET_KUBECTL`,
//!    `TEST_ASSET_KUBE_CONTROLLER_MANAGER`, `TEST_ASSET_KUBE_PROXY`): the file itself;
//! 2. `KUBEBUILDER_ASSETS`: a folder holding it under its own name;
//! 3. the cache folder `lab/k8s/build` writes (`~/.cache/ferry/k8s/<release>/`);
//! 4. `lab/k8s/build`, when `go` is on the PATH: builds what is missing into that folder (a cold
//!    build takes tens of minutes on 2 cores; one build at a time, the others wait for it).
//!
//! Where none of them gives every binary, [`Assets::find`] says why, and the tests that need a
//! control plane report themselves skipped with that reason.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The binaries a control-plane lab runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assets {
    /// etcd.
    pub etcd: PathBuf,
    /// kube-apiserver.
    pub kube_apiserver: PathBuf,
    /// kube-controller-manager.
    pub kube_controller_manager: PathBuf,
    /// kubectl.
    pub kubectl: PathBuf,
    /// kube-proxy, where available (the side-by-side tests need it; the control plane does not).
    pub kube_proxy: Option<PathBuf>,
}

/// The binaries, by file name and envtest variable.
const NAMES: [(&str, &str); 5] = [
    ("etcd", "TEST_ASSET_ETCD"),
    ("kube-apiserver", "TEST_ASSET_KUBE_APISERVER"),
    (
        "kube-controller-manager",
        "TEST_ASSET_KUBE_CONTROLLER_MANAGER",
    ),
    ("kubectl", "TEST_ASSET_KUBECTL"),
    ("kube-proxy", "TEST_ASSET_KUBE_PROXY"),
];

/// Why there are no binaries (the tests print it as their reason to skip).
#[derive(Debug, thiserror::Error)]
pub enum AssetsError {
    /// Neither given nor buildable.
    #[error(
        "no {missing}: set KUBEBUILDER_ASSETS (a folder with etcd, kube-apiserver, kubectl and \
         kube-controller-manager) or TEST_ASSET_<NAME>, or install Go to build them from source \
         (lab/k8s/build)"
    )]
    Unavailable {
        /// The binaries not found, comma-separated.
        missing: String,
    },
    /// `lab/k8s/build` failed.
    #[error("lab/k8s/build failed ({status}); its output:\n{output}")]
    Build {
        /// Its exit status.
        status: String,
        /// What it printed.
        output: String,
    },
}

impl Assets {
    /// Finds every binary, building the missing ones from source when Go is there.
    pub fn find() -> Result<Assets, AssetsError> {
        let given = |name: &str, var: &str| -> Option<PathBuf> {
            if let Some(p) = std::env::var_os(var).filter(|v| !v.is_empty()) {
                return Some(PathBuf::from(p));
            }
            let dir = std::env::var_os("KUBEBUILDER_ASSETS").filter(|v| !v.is_empty())?;
            let p = Path::new(&dir).join(name);
            p.is_file().then_some(p)
        };
        let cache = cache_dir();
        let lookup = |cache: &Option<PathBuf>| -> Vec<Option<PathBuf>> {
            NAMES
                .iter()
                .map(|(name, var)| {
                    given(name, var).or_else(|| {
                        let p = cache.as_ref()?.join(name);
                        p.is_file().then_some(p)
                    })
                })
                .collect()
        };
        let mut found = lookup(&cache);
        // kube-proxy is optional only when the rest came from the user.
        let needed = |found: &[Option<PathBuf>]| found[..4].iter().any(Option::is_none);
        if needed(&found) || (found[4].is_none() && go_available()) {
            if go_available() {
                let dir = build()?;
                found = lookup(&Some(dir));
            }
            if needed(&found) {
                let missing: Vec<&str> = NAMES
                    .iter()
                    .zip(&found)
                    .filter(|(_, f)| f.is_none())
                    .map(|((name, _), _)| *name)
                    .collect();
                return Err(AssetsError::Unavailable {
                    missing: missing.join(", "),
                });
            }
        }
        let mut it = found.into_iter();
        let mut next = || it.next().flatten();
        Ok(Assets {
            etcd: next().unwrap_or_default(),
            kube_apiserver: next().unwrap_or_default(),
            kube_controller_manager: next().unwrap_or_default(),
            kubectl: next().unwrap_or_default(),
            kube_proxy: next(),
        })
    }

    /// [`Assets::find`] for a test: `None`, after printing `skipped: <reason>`, where there are
    /// no binaries; a failed build panics (it is a broken set-up, not a missing one).
    pub fn for_test(test: &str) -> Option<Assets> {
        match Assets::find() {
            Ok(a) => Some(a),
            Err(e @ AssetsError::Unavailable { .. }) => {
                eprintln!("skipped: {test}: {e}");
                println!("skipped: {test}: {e}");
                None
            }
            Err(e) => panic!("{test}: {e}"),
        }
    }
}

/// The folder holding the pinned go.mod and the build script.
pub fn build_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../lab/k8s")
}

/// True when `go` runs.
fn go_available() -> bool {
    Command::new("go")
        .arg("version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The cache folder of the pinned release (`lab/k8s/build --dir`), if the script runs.
fn cache_dir() -> Option<PathBuf> {
    let out = Command::new(build_dir().join("build"))
        .arg("--dir")
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
}

/// Runs `lab/k8s/build`: the folder it printed.
fn build() -> Result<PathBuf, AssetsError> {
    let out = Command::new(build_dir().join("build"))
        .output()
        .map_err(|e| AssetsError::Build {
            status: "not started".into(),
            output: e.to_string(),
        })?;
    if !out.status.success() {
        return Err(AssetsError::Build {
            status: out.status.to_string(),
            output: format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        });
    }
    let text = String::from_utf8_lossy(&out.stdout);
    Ok(PathBuf::from(text.lines().last().unwrap_or("").trim()))
}
