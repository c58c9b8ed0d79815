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
use ferry_lab::{netns, Host, Lab, LabProcess};

use crate::assets::Assets;
use crate::pki::{kubeconfig, Pki};

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
    /// kubectl failed.
    #[error("kubectl {args}: {detail}")]
    Kubectl {
        /// Its arguments.
        args: String,
        /// Exit status and standard error.
        detail: String,
    },
}

type Result<T, E = ControlPlaneError> = std::result::Result<T, E>;

/// The running control plane. Dropping it stops its processes (the lab's teardown deletes its
/// namespace); [`ControlPlane::stop_kubelets`] also removes the stand-ins' Pods.
pub struct ControlPlane {
    dir: tempfile::TempDir,
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

impl ControlPlane {
    /// Adds the `control-plane` host to `lab` and starts etcd, kube-apiserver and
    /// kube-controller-manager on it; returns once the API server is ready and the namespaces
    /// the lab uses exist. Kubelets are started with [`ControlPlane::start_kubelets`].
    pub fn start(lab: &mut Lab, assets: Assets) -> Result<ControlPlane> {
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
        let dir = tempfile::Builder::new()
            .prefix("ferry-control-plane-")
            .tempdir()
            .map_err(|source| ControlPlaneError::Write {
                path: std::env::temp_dir(),
                source,
            })?;
        let pki = Pki::create(
            dir.path(),
            &[
                IpAddr::V4(IP),
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
        let apiserver = spawn(
            "kube-apiserver",
            &assets.kube_apiserver,
            apiserver_args(&pki),
        )?;
        let controller_manager = spawn(
            "kube-controller-manager",
            &assets.kube_controller_manager,
            controller_manager_args(&kcm),
        )?;
        let mut cp = ControlPlane {
            lab_prefix: lab.prefix().to_owned(),
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

    /// Creates `namespace` with its `default` ServiceAccount, unless they exist.
    pub fn ensure_namespace(&self, namespace: &str) -> Result<()> {
        let yaml = format!(
            "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {namespace}\n---\napiVersion: v1\n\
             kind: ServiceAccount\nmetadata:\n  name: default\n  namespace: {namespace}\n"
        );
        self.apply(&yaml).map(|_| ())
    }

    /// The API server's URL as the nodes reach it.
    pub fn url(&self) -> String {
        format!("https://{IP}:{PORT}")
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

    /// Writes a file into the control plane's folder; returns its path.
    pub fn write_file(&self, name: &str, text: &str) -> Result<PathBuf> {
        write(self.dir.path(), name, text)
    }

    /// Starts one kubelet stand-in per node of `lab` ([`crate::kubelet`]): each registers its
    /// Node and runs the Pods bound to it. `program` is the `ferry-lab-kubelet` binary, `echo`
    /// the pods' server and its arguments (any program taking `--name` and `--listen`).
    /// Returns once every Node is registered.
    pub fn start_kubelets(
        &mut self,
        lab: &Lab,
        program: &Path,
        echo: &[String],
        zones: &[(&str, &str)],
    ) -> Result<()> {
        let kubeconfig = write(
            self.dir.path(),
            "kubelet.kubeconfig",
            &kubeconfig(
                &self.url(),
                &self.pki.ca,
                "lab-admin",
                &[
                    ("client-certificate", self.pki.admin.0.display().to_string()),
                    ("client-key", self.pki.admin.1.display().to_string()),
                ],
            ),
        )?;
        for (i, node) in lab.nodes().iter().enumerate() {
            let zone = zones
                .iter()
                .find(|(n, _)| *n == node.name)
                .map(|(_, z)| (*z).to_owned());
            let mut args = vec![
                "--kubeconfig".to_owned(),
                kubeconfig.display().to_string(),
                "--node".into(),
                node.name.clone(),
                "--node-ip".into(),
                node.ip.to_string(),
                "--pod-cidr".into(),
                node.pod_cidr.to_string(),
                "--node-netns".into(),
                node.netns.clone(),
                "--pod-netns-prefix".into(),
                format!("{}-k{i}", self.lab_prefix),
            ];
            if let Some(zone) = zone {
                args.extend(["--zone".into(), zone]);
            }
            args.push("--".into());
            args.extend(echo.iter().cloned());
            let log = self.dir.path().join(format!("kubelet-{}.log", node.name));
            let p = LabProcess::spawn_sharing_mounts(
                &format!("kubelet {}", node.name),
                &node.netns,
                program,
                &args,
                &log,
            )
            .map_err(|e| ControlPlaneError::Lab {
                step: "starting a kubelet stand-in",
                source: e.into(),
            })?;
            self.kubelets.push((node.name.clone(), p));
        }
        let start = Instant::now();
        let limit = Duration::from_secs(30);
        loop {
            let names = self.kubectl(&["get", "nodes", "-o", "name"])?;
            if lab
                .nodes()
                .iter()
                .all(|n| names.contains(&format!("node/{}", n.name)))
            {
                return Ok(());
            }
            if start.elapsed() > limit {
                return Err(ControlPlaneError::NotReady {
                    component: "kubelet stand-ins",
                    waited: limit,
                    detail: format!("nodes registered: {names}"),
                    log: self.kubelet_logs(),
                });
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The stand-ins' logs, one after the other.
    pub fn kubelet_logs(&self) -> String {
        self.kubelets
            .iter()
            .map(|(n, p)| format!("--- kubelet {n}:\n{}", tail(&p.log(), 60)))
            .collect()
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

    /// Compacts etcd's history up to its current revision (etcd's JSON gateway, from inside the
    /// control plane's namespace), and returns that revision: a watch resuming from an older
    /// resourceVersion that the API server cannot serve from its cache gets `410 Gone`.
    pub fn compact_etcd(&self) -> Result<u64> {
        let post = |path: &str, body: &str| -> Result<String> {
            let out = netns::run(&mut netns::exec_command(
                &self.ns,
                "curl",
                [
                    "-sS",
                    "--max-time",
                    "10",
                    "-X",
                    "POST",
                    &format!("http://127.0.0.1:2379{path}"),
                    "-d",
                    body,
                ],
            ))
            .map_err(|e| ControlPlaneError::Kubectl {
                args: format!("(curl etcd {path})"),
                detail: e.to_string(),
            })?;
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        };
        // A put advances the revision past everything the API server wrote.
        post(
            "/v3/kv/put",
            r#"{"key":"ZmVycnktbGFiL2NvbXBhY3Q=","value":"MQ=="}"#,
        )?;
        let range = post("/v3/kv/range", r#"{"key":"ZmVycnktbGFiL2NvbXBhY3Q="}"#)?;
        let revision = serde_json::from_str::<serde_json::Value>(&range)
            .ok()
            .and_then(|v| {
                v.pointer("/header/revision")
                    .and_then(|r| r.as_str().and_then(|s| s.parse().ok()).or(r.as_u64()))
            })
            .ok_or_else(|| ControlPlaneError::Kubectl {
                args: "(curl etcd /v3/kv/range)".into(),
                detail: format!("no header.revision in {range}"),
            })?;
        post(
            "/v3/kv/compaction",
            &format!(r#"{{"revision":"{revision}","physical":true}}"#),
        )?;
        Ok(revision)
    }

    /// Stops the kubelet stand-ins and removes their Pods' namespaces (the lab's teardown does
    /// not know them).
    pub fn stop_kubelets(&mut self) {
        self.kubelets.clear();
        let prefix = format!("{}-k", self.lab_prefix);
        if let Ok(all) = netns::list() {
            let pods: Vec<String> = all.into_iter().filter(|n| n.starts_with(&prefix)).collect();
            if let Err(e) = netns::destroy(&pods) {
                eprintln!("ferry-kube-lab: removing the stand-ins' pods: {e}");
            }
        }
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

fn etcd_args(dir: &Path) -> Vec<String> {
    let local = "http://127.0.0.1:2379";
    [
        "--name=lab".to_owned(),
        format!("--data-dir={}", dir.join("etcd").display()),
        format!("--listen-client-urls={local}"),
        format!("--advertise-client-urls={local}"),
        "--listen-peer-urls=http://127.0.0.1:2380".into(),
        "--initial-advertise-peer-urls=http://127.0.0.1:2380".into(),
        "--initial-cluster=lab=http://127.0.0.1:2380".into(),
        // A test cluster: losing its data to a crash costs nothing, fsync costs seconds.
        "--unsafe-no-fsync".into(),
        "--log-level=warn".into(),
    ]
    .into()
}

fn apiserver_args(pki: &Pki) -> Vec<String> {
    let p = |p: &Path| p.display().to_string();
    vec![
        "--etcd-servers=http://127.0.0.1:2379".into(),
        format!("--advertise-address={IP}"),
        format!("--secure-port={PORT}"),
        format!("--tls-cert-file={}", p(&pki.apiserver.0)),
        format!("--tls-private-key-file={}", p(&pki.apiserver.1)),
        format!("--client-ca-file={}", p(&pki.ca)),
        format!("--service-account-key-file={}", p(&pki.service_account_pub)),
        format!(
            "--service-account-signing-key-file={}",
            p(&pki.service_account_key)
        ),
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local".into(),
        "--authorization-mode=RBAC".into(),
        format!("--service-cluster-ip-range={SERVICE_CIDR}"),
        "--service-node-port-range=30000-32767".into(),
        "--profiling=false".into(),
        "--v=1".into(),
    ]
}

fn controller_manager_args(kubeconfig: &Path) -> Vec<String> {
    vec![
        format!("--kubeconfig={}", kubeconfig.display()),
        "--controllers=endpointslice,endpointslicemirroring".into(),
        // Each controller acts as its own ServiceAccount with its bootstrap role, as kubeadm
        // runs it (the endpointslice-controller's role, not the controller manager's).
        "--use-service-account-credentials=true".into(),
        "--leader-elect=false".into(),
        "--secure-port=0".into(),
        "--v=1".into(),
    ]
}
