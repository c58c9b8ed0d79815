//! The control plane's errors.

use std::path::PathBuf;
use std::time::Duration;

/// Errors of the control plane, each naming the step.
#[derive(Debug, thiserror::Error)]
pub enum ControlPlaneError {
    /// A lab operation failed.
    #[error("{step}: {source}")]
    Lab {
        /// What was being done.
        step: &'static str,
        /// The lab's error.
        source: ferry_lab::LabError,
    },
    /// A file of the control plane could not be made.
    #[error(transparent)]
    Pki(#[from] crate::pki::PkiError),
    /// A file could not be written.
    #[error("writing {}: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// A component did not come up.
    #[error("{component} not ready within {waited:?}: {detail}\n--- its log ---\n{log}")]
    NotReady {
        /// etcd, kube-apiserver, …
        component: &'static str,
        /// How long it was waited for.
        waited: Duration,
        /// The last check's answer.
        detail: String,
        /// The component's log (its end).
        log: String,
    },
    /// [`ControlPlane::start_kubelets`] was given no command.
    #[error("the kubelet stand-in's command is empty")]
    EmptyKubeletCommand,
    /// kubectl failed.
    #[error("kubectl {args}: {detail}")]
    Kubectl {
        /// Its arguments.
        args: String,
        /// Exit status and standard error.
        detail: String,
    },
}
