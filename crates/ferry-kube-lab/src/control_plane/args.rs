//! The command lines of etcd, kube-apiserver and kube-controller-manager.

use std::path::Path;

use std::net::Ipv4Addr;

use super::{PORT, SERVICE_CIDR};
use crate::pki::Pki;

pub(super) fn etcd_args(dir: &Path) -> Vec<String> {
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

pub(super) fn apiserver_args(pki: &Pki, ip: Ipv4Addr) -> Vec<String> {
    let p = |p: &Path| p.display().to_string();
    vec![
        "--etcd-servers=http://127.0.0.1:2379".into(),
        format!("--advertise-address={ip}"),
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
        // As kubeadm's: kube-proxy's DaemonSet (and many CNIs') runs privileged containers.
        "--allow-privileged=true".into(),
        format!("--service-cluster-ip-range={SERVICE_CIDR}"),
        "--service-node-port-range=30000-32767".into(),
        "--profiling=false".into(),
        "--v=1".into(),
    ]
}

pub(super) fn controller_manager_args(kubeconfig: &Path) -> Vec<String> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_controller_manager_runs_only_the_endpoint_controllers_as_kubeadm_would() {
        let args = controller_manager_args(Path::new("/x/kcm.kubeconfig"));
        assert!(args.contains(&"--controllers=endpointslice,endpointslicemirroring".to_owned()));
        assert!(args.contains(&"--use-service-account-credentials=true".to_owned()));
        assert!(args.contains(&"--leader-elect=false".to_owned()));
        assert!(args.contains(&"--kubeconfig=/x/kcm.kubeconfig".to_owned()));
    }

    #[test]
    fn etcd_listens_on_the_control_planes_loopback_only() {
        let args = etcd_args(Path::new("/d"));
        let listen: Vec<&String> = args.iter().filter(|a| a.starts_with("--listen-")).collect();
        assert_eq!(listen.len(), 2, "{args:?}");
        assert!(
            listen.iter().all(|a| a.contains("//127.0.0.1:")),
            "{listen:?}"
        );
        assert!(args.contains(&"--data-dir=/d/etcd".to_owned()));
    }
}
