//! Pods: what a lab pod is ([`PodInfo`]) and which program serves in it ([`PodProgram`]).
//!
//! A pod is a namespace with `eth0` = `<podIP>/32` and `default dev eth0`, wired calico-style
//! to its node: the node side of the veth (`cali…`) has proxy ARP on and the node routes
//! `<podIP>/32` to it. No bridge is involved, so a pod reaching itself through a Service needs
//! no hairpin setting, and a node masquerading pod traffic picks its `eth0` address.

use std::ffi::{OsStr, OsString};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;

/// A pod of the lab.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodInfo {
    /// Pod name (`url-analysis-deployment-547845566c-4rt9d`); hosts are looked up by it.
    pub name: String,
    /// Kubernetes name of the node it runs on.
    pub node: String,
    /// The pod IP (from the node's pod CIDR).
    pub ip: Ipv4Addr,
    /// Its namespace.
    pub netns: String,
    /// Name of the node-side veth (`cali` + 11 hex digits of a hash of the pod name).
    pub host_veth: String,
}

/// The command line of a pod's server: `<program> <args…> --name <pod> --listen <ip:port>`.
///
/// * [`PodProgram::ferry`] runs `ferry lab-pod`, which calls [`crate::serve_echo`];
/// * `PodProgram::new(env!("CARGO_BIN_EXE_ferry-lab-echo"))` runs this crate's own
///   `ferry-lab-echo` binary, which does the same (for tests that do not have the ferry
///   binary);
/// * any program that accepts `--name` and `--listen` works.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodProgram {
    program: OsString,
    args: Vec<OsString>,
    wait_tcp: bool,
}

impl PodProgram {
    /// Runs `program` with `--name … --listen …`.
    pub fn new(program: impl AsRef<OsStr>) -> Self {
        PodProgram {
            program: program.as_ref().to_os_string(),
            args: Vec::new(),
            wait_tcp: true,
        }
    }

    /// Runs `<ferry_binary> lab-pod --name … --listen …`.
    pub fn ferry(ferry_binary: impl AsRef<Path>) -> Self {
        Self::new(ferry_binary.as_ref()).arg("lab-pod")
    }

    /// Adds an argument placed before `--name` (e.g. a subcommand, or `--udp`).
    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Self {
        self.args.push(arg.as_ref().to_os_string());
        self
    }

    /// Do not wait for the port to accept TCP connections after starting (for UDP servers).
    pub fn no_wait(mut self) -> Self {
        self.wait_tcp = false;
        self
    }

    /// Whether the lab waits until `listen` accepts TCP connections.
    pub fn waits_for_tcp(&self) -> bool {
        self.wait_tcp
    }

    /// The program.
    pub fn program(&self) -> &OsStr {
        &self.program
    }

    /// The full argument list for a pod `name` listening on `listen`.
    pub fn args_for(&self, name: &str, listen: SocketAddr) -> Vec<OsString> {
        let mut v = self.args.clone();
        v.push("--name".into());
        v.push(name.into());
        v.push("--listen".into());
        v.push(listen.to_string().into());
        v
    }
}

/// Calico-style host-side veth name: `cali` + 11 hex digits of a 64-bit FNV-1a hash of the pod
/// name (15 characters, the kernel's limit).
pub fn host_veth_name(pod: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in pod.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("cali{:011x}", h & ((1 << 44) - 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn veth_names_fit_and_differ() {
        let a = host_veth_name("url-analysis-deployment-547845566c-4rt9d");
        let b = host_veth_name("url-analysis-deployment-547845566c-4rt9e");
        assert_eq!(a.len(), 15);
        assert!(a.starts_with("cali"));
        assert_ne!(a, b);
    }

    #[test]
    fn args_end_with_name_and_listen() {
        let p = PodProgram::ferry("/bin/ferry");
        let args = p.args_for("p", "1.2.3.4:80".parse().expect("addr"));
        let args: Vec<_> = args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(args, ["lab-pod", "--name", "p", "--listen", "1.2.3.4:80"]);
        assert_eq!(p.program(), "/bin/ferry");
    }
}
