//! kubectl and the API calls the lab makes with it: apply, tokens, namespaces.

use std::path::{Path, PathBuf};

use ferry_lab::netns;

use super::{write, ControlPlane, ControlPlaneError, Result};
use crate::pki::kubeconfig;

impl ControlPlane {
    /// Creates `namespace` with its `default` ServiceAccount, unless they exist.
    pub fn ensure_namespace(&self, namespace: &str) -> Result<()> {
        let yaml = format!(
            "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {namespace}\n---\napiVersion: v1\n\
             kind: ServiceAccount\nmetadata:\n  name: default\n  namespace: {namespace}\n"
        );
        self.apply(&yaml).map(|_| ())
    }

    /// Runs kubectl as the administrator inside the control plane's namespace; its standard
    /// output, or an error with its standard error.
    pub fn kubectl(&self, args: &[&str]) -> Result<String> {
        self.kubectl_as(&self.admin, args)
    }

    /// Runs kubectl with another kubeconfig (one whose server is reachable from the control
    /// plane's namespace).
    pub fn kubectl_as(&self, kubeconfig: &Path, args: &[&str]) -> Result<String> {
        let mut full: Vec<String> = vec!["--kubeconfig".into(), kubeconfig.display().to_string()];
        full.extend(args.iter().map(|a| (*a).to_owned()));
        let out = netns::run_unchecked(&mut netns::exec_command(
            &self.ns,
            &self.assets.kubectl,
            &full,
        ))
        .map_err(|e| ControlPlaneError::Kubectl {
            args: args.join(" "),
            detail: e.to_string(),
        })?;
        if !out.status.success() {
            return Err(ControlPlaneError::Kubectl {
                args: args.join(" "),
                detail: format!(
                    "{}: {}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr).trim()
                ),
            });
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// `kubectl apply -f` of a YAML text (written to a file of the control plane's folder).
    pub fn apply(&self, yaml: &str) -> Result<String> {
        let file = self.scratch_file("apply", yaml)?;
        self.kubectl(&["apply", "--server-side", "--force-conflicts", "-f", &file])
    }

    /// `kubectl create -f` of a YAML text.
    pub fn create(&self, yaml: &str) -> Result<String> {
        let file = self.scratch_file("create", yaml)?;
        self.kubectl(&["create", "-f", &file])
    }

    fn scratch_file(&self, what: &str, text: &str) -> Result<String> {
        let file = tempfile::Builder::new()
            .prefix(what)
            .suffix(".yaml")
            .tempfile_in(self.dir.path())
            .map_err(|source| ControlPlaneError::Write {
                path: self.dir.path().to_path_buf(),
                source,
            })?;
        let (_, path) = file.keep().map_err(|e| ControlPlaneError::Write {
            path: e.file.path().to_path_buf(),
            source: e.error,
        })?;
        std::fs::write(&path, text).map_err(|source| ControlPlaneError::Write {
            path: path.clone(),
            source,
        })?;
        Ok(path.display().to_string())
    }

    /// A token for ServiceAccount `namespace/name` (the TokenRequest API, as kubelet asks for
    /// a Pod's token), valid for `seconds`; bound to Secret `bound_secret` if given, so deleting
    /// that Secret revokes it.
    pub fn token(
        &self,
        namespace: &str,
        name: &str,
        seconds: u64,
        bound_secret: Option<&str>,
    ) -> Result<String> {
        let duration = format!("--duration={seconds}s");
        let mut args = vec!["-n", namespace, "create", "token", name, &duration];
        let bound;
        if let Some(secret) = bound_secret {
            bound = format!("--bound-object-name={secret}");
            args.extend(["--bound-object-kind=Secret", &bound]);
        }
        Ok(self.kubectl(&args)?.trim().to_owned())
    }

    /// Writes a kubeconfig for the nodes (server [`ControlPlane::url`]) authenticating with the
    /// token in `token_file` (read again as it changes, as a projected token is); returns it.
    pub fn token_kubeconfig(&self, name: &str, token_file: &Path) -> Result<PathBuf> {
        write(
            self.dir.path(),
            &format!("{name}.kubeconfig"),
            &kubeconfig(
                &self.url(),
                &self.pki.ca,
                name,
                &[("tokenFile", token_file.display().to_string())],
            ),
        )
    }

    /// Writes a kubeconfig for the administrator at [`ControlPlane::url`] (reachable from the
    /// other namespaces, unlike [`ControlPlane::admin_kubeconfig`]'s loopback); returns it.
    pub fn remote_admin_kubeconfig(&self) -> Result<PathBuf> {
        write(
            self.dir(),
            "admin-remote.kubeconfig",
            &kubeconfig(
                &self.url(),
                &self.pki.ca,
                "lab-admin",
                &[
                    ("client-certificate", self.pki.admin.0.display().to_string()),
                    ("client-key", self.pki.admin.1.display().to_string()),
                ],
            ),
        )
    }

    /// Writes a file into the control plane's folder; returns its path.
    pub fn write_file(&self, name: &str, text: &str) -> Result<PathBuf> {
        write(self.dir.path(), name, text)
    }
}
