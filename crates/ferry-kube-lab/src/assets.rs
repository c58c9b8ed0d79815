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
    /// `TEST_ASSET_<NAME>` names something that is not a file.
    #[error("{var}={}: not a file", path.display())]
    NotAFile {
        /// The variable.
        var: &'static str,
        /// What it holds.
        path: PathBuf,
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
        let env = |var: &str| std::env::var_os(var).filter(|v| !v.is_empty());
        let mut found = locate(&env, cache_dir().as_deref())?;
        // kube-proxy is optional only when the rest came from the user.
        if (missing(&found).is_some() || found[4].is_none()) && go_available() {
            let dir = build()?;
            found = locate(&env, Some(&dir))?;
        }
        if let Some(missing) = missing(&found) {
            return Err(AssetsError::Unavailable { missing });
        }
        let [etcd, kube_apiserver, kube_controller_manager, kubectl, kube_proxy] = found;
        Ok(Assets {
            etcd: etcd.unwrap_or_default(),
            kube_apiserver: kube_apiserver.unwrap_or_default(),
            kube_controller_manager: kube_controller_manager.unwrap_or_default(),
            kubectl: kubectl.unwrap_or_default(),
            kube_proxy,
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

/// Where each binary of [`NAMES`] is: its `TEST_ASSET_<NAME>` variable, else
/// `KUBEBUILDER_ASSETS/<name>`, else `cache/<name>`; `None` where none has it. `env` reads a
/// variable (empty counts as unset).
fn locate(
    env: &dyn Fn(&str) -> Option<std::ffi::OsString>,
    cache: Option<&Path>,
) -> Result<[Option<PathBuf>; 5], AssetsError> {
    let mut found: [Option<PathBuf>; 5] = Default::default();
    for (slot, (name, var)) in found.iter_mut().zip(NAMES) {
        if let Some(path) = env(var).map(PathBuf::from) {
            if !path.is_file() {
                return Err(AssetsError::NotAFile { var, path });
            }
            *slot = Some(path);
            continue;
        }
        let folders = [
            env("KUBEBUILDER_ASSETS").map(PathBuf::from),
            cache.map(Path::to_path_buf),
        ];
        *slot = folders
            .into_iter()
            .flatten()
            .map(|dir| dir.join(name))
            .find(|p| p.is_file());
    }
    Ok(found)
}

/// The required binaries (all but kube-proxy) not in `found`, comma-separated.
fn missing(found: &[Option<PathBuf>; 5]) -> Option<String> {
    let missing: Vec<&str> = NAMES[..4]
        .iter()
        .zip(found)
        .filter(|(_, f)| f.is_none())
        .map(|((name, _), _)| *name)
        .collect();
    (!missing.is_empty()).then(|| missing.join(", "))
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

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::ffi::OsString;

    use super::*;

    fn folder(names: &[&str]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("tempdir");
        for name in names {
            std::fs::write(dir.path().join(name), "").expect("file");
        }
        dir
    }

    fn env(vars: &[(&str, &Path)]) -> impl Fn(&str) -> Option<OsString> {
        let vars: HashMap<String, OsString> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.as_os_str().to_owned()))
            .collect();
        move |k| vars.get(k).cloned()
    }

    #[test]
    fn a_test_asset_variable_wins_then_kubebuilder_assets_then_the_cache() {
        let all = [
            "etcd",
            "kube-apiserver",
            "kube-controller-manager",
            "kubectl",
            "kube-proxy",
        ];
        let cache = folder(&all);
        let kb = folder(&["etcd", "kubectl"]);
        let own = folder(&["my-etcd"]);
        let own_etcd = own.path().join("my-etcd");
        let vars = env(&[
            ("KUBEBUILDER_ASSETS", kb.path()),
            ("TEST_ASSET_ETCD", &own_etcd),
        ]);
        let found = locate(&vars, Some(cache.path())).expect("found");
        assert_eq!(found[0].as_deref(), Some(own_etcd.as_path()));
        assert_eq!(found[1], Some(cache.path().join("kube-apiserver")));
        assert_eq!(found[3], Some(kb.path().join("kubectl")));
        assert_eq!(found[4], Some(cache.path().join("kube-proxy")));
        assert_eq!(missing(&found), None);
    }

    #[test]
    fn kube_proxy_is_optional_and_the_others_are_named_when_missing() {
        let kb = folder(&["etcd", "kube-apiserver", "kubectl"]);
        let found = locate(&env(&[("KUBEBUILDER_ASSETS", kb.path())]), None).expect("found");
        assert_eq!(missing(&found).as_deref(), Some("kube-controller-manager"));
        let controller = folder(&["kcm"]);
        let kcm = controller.path().join("kcm");
        let vars = env(&[
            ("KUBEBUILDER_ASSETS", kb.path()),
            ("TEST_ASSET_KUBE_CONTROLLER_MANAGER", &kcm),
        ]);
        let found = locate(&vars, None).expect("found");
        assert_eq!(missing(&found), None);
        assert_eq!(found[4], None);
    }

    #[test]
    fn a_test_asset_variable_naming_no_file_is_an_error_naming_it() {
        let nowhere = Path::new("/nonexistent/etcd");
        let err = locate(&env(&[("TEST_ASSET_ETCD", nowhere)]), None).expect_err("not a file");
        assert_eq!(
            err.to_string(),
            "TEST_ASSET_ETCD=/nonexistent/etcd: not a file"
        );
    }
}
