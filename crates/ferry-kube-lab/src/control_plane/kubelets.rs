//! The kubelet stand-ins ([`crate::kubelet`]), one per lab node, and their Pods' namespaces.

use std::time::{Duration, Instant};

use ferry_lab::{netns, Lab, LabProcess};

use super::{tail, ControlPlane, ControlPlaneError, Result};

impl ControlPlane {
    /// Starts one kubelet stand-in per node of `lab` ([`crate::kubelet`]): each registers its
    /// Node and runs the Pods bound to it. `kubelet` is the stand-in's command (`ferry-lab-kubelet`,
    /// or `ferry lab-kubelet`), `echo` the pods' server and its arguments (any program taking
    /// `--name` and `--listen`).
    /// Returns once every Node is registered.
    pub fn start_kubelets(
        &mut self,
        lab: &Lab,
        kubelet: &[String],
        echo: &[String],
        zones: &[(&str, &str)],
    ) -> Result<()> {
        let kubeconfig = self.remote_admin_kubeconfig()?;
        for (i, node) in lab.nodes().iter().enumerate() {
            let zone = zones
                .iter()
                .find(|(n, _)| *n == node.name)
                .map(|(_, z)| (*z).to_owned());
            let (program, leading) = kubelet
                .split_first()
                .ok_or(ControlPlaneError::EmptyKubeletCommand)?;
            let mut args = leading.to_vec();
            args.extend([
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
            ]);
            if let Some(zone) = zone {
                args.extend(["--zone".into(), zone]);
            }
            args.push("--".into());
            args.extend(echo.iter().cloned());
            let log = self.dir().join(format!("kubelet-{}.log", node.name));
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
