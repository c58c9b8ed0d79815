//! Pods of a lab: adding and removing them, and the servers running in them.

use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use super::{Lab, LabError, PodServer};
use crate::netns;
use crate::pod::{PodInfo, PodProgram};
use crate::process::LabProcess;

impl Lab {
    /// Adds a pod on `node` with IP `ip` (which must lie in the node's pod CIDR). No process
    /// runs in it yet: see [`Lab::start_pod_server`].
    pub fn add_pod(&mut self, node: &str, name: &str, ip: Ipv4Addr) -> Result<&PodInfo, LabError> {
        self.check_new_name(name)?;
        let node = self.node(node)?.clone();
        let bad = |problem: String| LabError::BadPodIp {
            pod: name.to_string(),
            ip,
            problem,
        };
        if !node.pod_cidr.contains(&ip) {
            return Err(bad(format!(
                "is outside node {}'s pod CIDR {}",
                node.name, node.pod_cidr
            )));
        }
        if let Some(p) = self.pods.iter().find(|p| p.ip == ip) {
            return Err(bad(format!("is already used by pod {}", p.name)));
        }
        self.create_pod(&node, name, ip)?;
        self.pod(name)
    }

    /// Removes a pod: stops its servers, deletes its veth pair (and so the node's route to it)
    /// and its namespace. The pod's name and IP can be reused at once.
    pub fn remove_pod(&mut self, name: &str) -> Result<(), LabError> {
        let pod = self.pod(name)?.clone();
        let node_ns = self.node(&pod.node)?.netns.clone();
        self.servers.retain(|s| s.pod != name);
        // Deleting the veth explicitly is synchronous; the namespace's own cleanup is not.
        let mut del = netns::IpBatch::new(Some(&node_ns));
        del.line(format!("link del {}", pod.host_veth));
        del.run()?;
        netns::destroy(std::slice::from_ref(&pod.netns))?;
        self.namespaces.retain(|n| *n != pod.netns);
        self.pods.retain(|p| p.name != name);
        Ok(())
    }

    /// Starts `program` in pod `pod`, listening on `<podIP>:port`, and (unless
    /// [`PodProgram::no_wait`]) waits until the port accepts connections. The lab owns the
    /// process: see [`Lab::pod_server`].
    pub fn start_pod_server(
        &mut self,
        pod: &str,
        port: u16,
        program: &PodProgram,
    ) -> Result<(), LabError> {
        let info = self.pod(pod)?.clone();
        let listen = SocketAddr::from((info.ip, port));
        let log = self.dir().join(format!("{pod}-{port}.log"));
        let process = LabProcess::spawn(
            &format!("{pod}:{port}"),
            &info.netns,
            program.program(),
            program.args_for(pod, listen),
            &log,
        )?;
        self.servers.retain(|s| !(s.pod == pod && s.port == port));
        self.servers.push(PodServer {
            pod: pod.to_string(),
            port,
            process,
            wait_tcp: program.waits_for_tcp(),
        });
        if program.waits_for_tcp() {
            self.wait_listening(pod, port, crate::scaled(Duration::from_secs(10)))?;
        }
        Ok(())
    }

    /// [`Lab::add_pod`] then [`Lab::start_pod_server`].
    pub fn add_echo_pod(
        &mut self,
        node: &str,
        name: &str,
        ip: Ipv4Addr,
        port: u16,
        program: &PodProgram,
    ) -> Result<(), LabError> {
        self.add_pod(node, name, ip)?;
        self.start_pod_server(name, port, program)
    }

    /// Restarts the server of `pod` on `port` and (unless its program was
    /// [`PodProgram::no_wait`]) waits until it accepts connections again.
    pub fn restart_pod_server(&mut self, pod: &str, port: u16) -> Result<(), LabError> {
        let server = self
            .servers
            .iter_mut()
            .find(|s| s.pod == pod && s.port == port)
            .ok_or_else(|| LabError::UnknownHost {
                prefix: self.prefix.clone(),
                kind: "pod server",
                name: format!("{pod}:{port}"),
            })?;
        server.process.restart()?;
        if server.wait_tcp {
            self.wait_listening(pod, port, crate::scaled(Duration::from_secs(10)))?;
        }
        Ok(())
    }

    /// The server process of `pod` on `port` (to stop, restart or read its log).
    pub fn pod_server(&mut self, pod: &str, port: u16) -> Option<&mut LabProcess> {
        self.servers
            .iter_mut()
            .find(|s| s.pod == pod && s.port == port)
            .map(|s| &mut s.process)
    }

    /// Waits until `<podIP>:port` accepts a TCP connection from inside the pod, or the server
    /// exits, or `timeout` passes.
    pub(super) fn wait_listening(
        &mut self,
        pod: &str,
        port: u16,
        timeout: Duration,
    ) -> Result<(), LabError> {
        let info = self.pod(pod)?.clone();
        let addr = SocketAddr::from((info.ip, port));
        let deadline = Instant::now() + timeout;
        loop {
            let not_ready = |detail: String, log: String| LabError::ServerNotReady {
                pod: pod.to_string(),
                addr,
                detail,
                log,
            };
            let Some(proc) = self.pod_server(pod, port) else {
                return Err(not_ready("no server process".into(), String::new()));
            };
            if let Some(status) = proc.try_wait()? {
                return Err(not_ready(format!("exited with {status}"), proc.log()));
            }
            let probe = netns::run_in(&info.netns, || {
                TcpStream::connect_timeout(&addr, Duration::from_millis(200))
            })?;
            match probe {
                Ok(_) => return Ok(()),
                Err(e) if Instant::now() >= deadline => {
                    let log = self
                        .pod_server(pod, port)
                        .map(|p| p.log())
                        .unwrap_or_default();
                    return Err(not_ready(format!("gave up after {timeout:?}: {e}"), log));
                }
                Err(_) => std::thread::sleep(Duration::from_millis(10)),
            }
        }
    }
}
