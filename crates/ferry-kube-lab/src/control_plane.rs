//! A real control plane on a host of the lab: etcd, kube-apiserver and kube-controller-manager
//! (the EndpointSlice controllers only), each a [`LabProcess`] in the `control-plane` host's
//! network namespace (10.1.1.200, on the lab's LAN, with routes to every pod CIDR), and one
//! kubelet stand-in per node ([`crate::kubelet`]).
//!
//! The API server listens on 10.1.1.200:6443 with its own serving certificate, authenticates
//! client certificates and ServiceAccount tokens, authorizes with RBAC, and allocates
//! ClusterIPs from [`SERVICE_CIDR`]. etcd listens on the control plane's loopback only.
//! Nothing runs in, or is added to, the root namespace: `kubectl` runs inside the control
//! plane's namespace ([`ControlPlane::kubectl`]).

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ferry_lab::spec::ClientSpec;
use ferry_lab::{Host, Lab, LabProcess};

use crate::assets::Assets;
use crate::pki::{kubeconfig, Pki};

mod args;
mod error;
mod etcd;
mod kubectl;
mod kubelets;

use args::{apiserver_args, controller_manager_args, etcd_args};
pub use error::ControlPlaneError;

/// The control plane's host on the lab's LAN.
pub const HOST: &str = "control-plane";
/// Its address.
pub const IP: Ipv4Addr = Ipv4Addr::new(10, 1, 1, 200);
/// The API server's port.
pub const PORT: u16 = 6443;
/// The Service CIDR the API server allocates ClusterIPs from (kubeadm's default; the
/// example cluster's ClusterIP 10.96.198.86 lies in it).
pub const SERVICE_CIDR: &str = "10.96.0.0/12";
/// The `kubernetes` Service's ClusterIP (the first address of [`SERVICE_CIDR`]).
pub const KUBERNETES_SERVICE_IP: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 1);

type Result<T, E = ControlPlaneError> = std::result::Result<T, E>;

/// The running control plane. Dropping it stops its processes (the lab's teardown deletes its
/// namespace); [`ControlPlane::stop_kubelets`] also removes the stand-ins' Pods.
pub struct ControlPlane {
    ip: Ipv4Addr,
    dir: Folder,
    ns: String,
    lab_prefix: String,
    assets: Assets,
    pki: Pki,
    admin: PathBuf,
    etcd: LabProcess,
    apiserver: LabProcess,
    controller_manager: LabProcess,
    kubelets: Vec<(String, LabProcess)>,
}

/// Extra command-line arguments for the components (a benchmark raises the controller
/// manager's API rate limits, which are set for a real cluster's shared API server).
#[derive(Debug, Clone, Default)]
pub struct Tuning {
    /// Appended to kube-apiserver's.
    pub apiserver: Vec<String>,
    /// Appended to kube-controller-manager's.
    pub controller_manager: Vec<String>,
}

/// Where the control plane runs: a network namespace, the address it advertises, the prefix
/// of its lab (the kubelet stand-ins name their Pods' namespaces after it).
struct Place {
    ns: String,
    ip: Ipv4Addr,
    lab_prefix: String,
}

/// Where the control plane's files live: a temporary folder (removed with it), or one the
/// caller keeps ([`ControlPlane::start_in`], for `ferry lab`).
enum Folder {
    Temporary(tempfile::TempDir),
    Kept(PathBuf),
}

impl Folder {
    /// A new temporary folder, removed with the control plane.
    fn temporary() -> Result<Folder> {
        tempfile::Builder::new()
            .prefix("ferry-control-plane-")
            .tempdir()
            .map(Folder::Temporary)
            .map_err(|source| ControlPlaneError::Write {
                path: std::env::temp_dir(),
                source,
            })
    }

    fn path(&self) -> &Path {
        match self {
            Folder::Temporary(t) => t.path(),
            Folder::Kept(p) => p,
        }
    }
}

impl ControlPlane {
    /// Adds the `control-plane` host to `lab` and starts etcd, kube-apiserver and
    /// kube-controller-manager on it; returns once the API server is ready and the namespaces
    /// the lab uses exist. Kubelets are started with [`ControlPlane::start_kubelets`].
    pub fn start(lab: &mut Lab, assets: Assets) -> Result<ControlPlane> {
        Self::start_with(lab, assets, Folder::temporary()?)
    }

    /// [`ControlPlane::start`] with its files (certificates, kubeconfigs, etcd's data, logs) in
    /// `dir`, created if missing and left in place: for a lab that outlives this process
    /// (`ferry lab up`, then [`ControlPlane::detach`]).
    pub fn start_in(lab: &mut Lab, assets: Assets, dir: &Path) -> Result<ControlPlane> {
        std::fs::create_dir_all(dir).map_err(|source| ControlPlaneError::Write {
            path: dir.to_path_buf(),
            source,
        })?;
        Self::start_with(lab, assets, Folder::Kept(dir.to_path_buf()))
    }

    fn start_with(lab: &mut Lab, assets: Assets, dir: Folder) -> Result<ControlPlane> {
        lab.add_client(&ClientSpec {
            name: HOST.into(),
            ip: IP,
            pod_routes: true,
        })
        .map_err(|source| ControlPlaneError::Lab {
            step: "adding the control-plane host",
            source,
        })?;
        let ns = lab
            .netns_of(&Host::client(HOST))
            .map_err(|source| ControlPlaneError::Lab {
                step: "finding the control-plane host",
                source,
            })?
            .to_owned();
        let place = Place {
            ns,
            ip: IP,
            lab_prefix: lab.prefix().to_owned(),
        };
        Self::launch(place, assets, dir, &Tuning::default())
    }

    /// A control plane in an existing network namespace `ns` (not a lab's: the benchmark's
    /// node), the API server advertising `ip` (an address of `ns`) and listening on every
    /// address of `ns`, port [`PORT`]; its files in a temporary folder. No kubelet stand-ins
    /// (they need a lab).
    pub fn start_on(
        ns: &str,
        ip: Ipv4Addr,
        assets: Assets,
        tuning: &Tuning,
    ) -> Result<ControlPlane> {
        let place = Place {
            ns: ns.to_owned(),
            ip,
            lab_prefix: String::new(),
        };
        Self::launch(place, assets, Folder::temporary()?, tuning)
    }

    fn launch(place: Place, assets: Assets, dir: Folder, tuning: &Tuning) -> Result<ControlPlane> {
        let Place { ns, ip, lab_prefix } = place;
        let pki = Pki::create(
            dir.path(),
            &[
                IpAddr::V4(ip),
                IpAddr::V4(Ipv4Addr::LOCALHOST),
                IpAddr::V4(KUBERNETES_SERVICE_IP),
            ],
            &[
                "localhost",
                "kubernetes",
                "kubernetes.default",
                "kubernetes.default.svc",
                "kubernetes.default.svc.cluster.local",
            ],
        )?;
        let local = format!("https://127.0.0.1:{PORT}");
        let admin = write(
            dir.path(),
            "admin.kubeconfig",
            &kubeconfig(
                &local,
                &pki.ca,
                "lab-admin",
                &[
                    ("client-certificate", pki.admin.0.display().to_string()),
                    ("client-key", pki.admin.1.display().to_string()),
                ],
            ),
        )?;
        let kcm = write(
            dir.path(),
            "controller-manager.kubeconfig",
            &kubeconfig(
                &local,
                &pki.ca,
                "system:kube-controller-manager",
                &[
                    (
                        "client-certificate",
                        pki.controller_manager.0.display().to_string(),
                    ),
                    ("client-key", pki.controller_manager.1.display().to_string()),
                ],
            ),
        )?;
        let spawn = |name: &str, program: &Path, args: Vec<String>| {
            LabProcess::spawn(
                name,
                &ns,
                program,
                args,
                &dir.path().join(format!("{name}.log")),
            )
            .map_err(|e| ControlPlaneError::Lab {
                step: "starting a control-plane process",
                source: e.into(),
            })
        };
        let etcd = spawn("etcd", &assets.etcd, etcd_args(dir.path()))?;
        let mut args = apiserver_args(&pki, ip);
        args.extend(tuning.apiserver.iter().cloned());
        let apiserver = spawn("kube-apiserver", &assets.kube_apiserver, args)?;
        let mut args = controller_manager_args(&kcm);
        args.extend(tuning.controller_manager.iter().cloned());
        let controller_manager = spawn(
            "kube-controller-manager",
            &assets.kube_controller_manager,
            args,
        )?;
        let mut cp = ControlPlane {
            ip,
            lab_prefix,
            dir,
            ns,
            assets,
            pki,
            admin,
            etcd,
            apiserver,
            controller_manager,
            kubelets: Vec::new(),
        };
        cp.wait_ready(Duration::from_secs(90))?;
        Ok(cp)
    }

    /// Waits until `/readyz` answers `ok` (the API server's own readiness: etcd reachable,
    /// bootstrap RBAC and priority levels in place).
    pub fn wait_ready(&mut self, limit: Duration) -> Result<()> {
        let start = Instant::now();
        loop {
            for (component, p) in [
                ("etcd", &mut self.etcd),
                ("kube-apiserver", &mut self.apiserver),
            ] {
                if !p.is_running() {
                    return Err(ControlPlaneError::NotReady {
                        component,
                        waited: start.elapsed(),
                        detail: "it exited".into(),
                        log: tail(&p.log(), 40),
                    });
                }
            }
            let detail = match self.kubectl(&["get", "--raw", "/readyz"]) {
                Ok(text) if text.trim() == "ok" => break,
                Ok(text) => text,
                Err(e) => e.to_string(),
            };
            if start.elapsed() > limit {
                return Err(ControlPlaneError::NotReady {
                    component: "kube-apiserver",
                    waited: limit,
                    detail,
                    log: tail(&self.apiserver.log(), 40),
                });
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        // The controllers' own identities are created on demand; default ServiceAccounts are
        // the serviceaccount controller's work, which this lab does not run: Pods of the
        // namespaces below need one (the ServiceAccount admission plugin asks for it).
        for namespace in ["default", "kube-system"] {
            self.ensure_namespace(namespace)?;
        }
        Ok(())
    }

    /// The API server's URL as the nodes reach it.
    pub fn url(&self) -> String {
        format!("https://{}:{PORT}", self.ip)
    }

    /// The cluster CA's certificate.
    pub fn ca(&self) -> &Path {
        &self.pki.ca
    }

    /// The administrator's kubeconfig (server `https://127.0.0.1:6443`: for use inside the
    /// control plane's namespace, as [`ControlPlane::kubectl`] does).
    pub fn admin_kubeconfig(&self) -> &Path {
        &self.admin
    }

    /// Leaves the control plane running after this value is gone (its processes detached, its
    /// folder kept, the kubelet stand-ins' Pods left): `ferry lab up` hands it to `ferry lab
    /// down`, which removes the lab's namespaces (and with them every process in them).
    pub fn detach(self) -> PathBuf {
        // Never dropped: its Drop would remove the Pods, and etcd's, kube-apiserver's and
        // kube-controller-manager's would stop them. What stays allocated (paths and names) is
        // a few hundred bytes, once per `ferry lab up`.
        let mut this = std::mem::ManuallyDrop::new(self);
        for (_, p) in std::mem::take(&mut this.kubelets) {
            p.detach();
        }
        match std::mem::replace(&mut this.dir, Folder::Kept(PathBuf::new())) {
            Folder::Temporary(t) => t.keep(),
            Folder::Kept(p) => p,
        }
    }

    /// The folder holding the control plane's files (certificates, kubeconfigs, logs).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The control plane host's network namespace.
    pub fn netns(&self) -> &str {
        &self.ns
    }

    /// The binaries it runs.
    pub fn assets(&self) -> &Assets {
        &self.assets
    }

    /// Every component's log end, for a failing test's message.
    pub fn logs(&self) -> String {
        format!(
            "--- etcd:\n{}\n--- kube-apiserver:\n{}\n--- kube-controller-manager:\n{}\n{}",
            tail(&self.etcd.log(), 20),
            tail(&self.apiserver.log(), 30),
            tail(&self.controller_manager.log(), 30),
            self.kubelet_logs()
        )
    }

    /// Stops kube-apiserver (SIGTERM, as a restart of its static Pod would).
    pub fn stop_apiserver(&mut self) -> Result<()> {
        self.apiserver.stop().map_err(|e| ControlPlaneError::Lab {
            step: "stopping kube-apiserver",
            source: e.into(),
        })?;
        Ok(())
    }

    /// Starts kube-apiserver again and waits until it is ready.
    pub fn start_apiserver(&mut self) -> Result<()> {
        self.apiserver
            .restart()
            .map_err(|e| ControlPlaneError::Lab {
                step: "starting kube-apiserver",
                source: e.into(),
            })?;
        self.wait_ready(Duration::from_secs(90))
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        self.stop_kubelets();
    }
}

fn write(dir: &Path, name: &str, text: &str) -> Result<PathBuf> {
    let path = dir.join(name);
    std::fs::write(&path, text).map_err(|source| ControlPlaneError::Write {
        path: path.clone(),
        source,
    })?;
    Ok(path)
}

/// The last `n` lines of a log.
fn tail(log: &str, n: usize) -> String {
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}
