//! What a probe checks: its action resolved against the Pod (host, named ports).

use std::fmt;
use std::net::IpAddr;

use ferry_model::{Container, HttpScheme, Pod, PortRef, Probe, ProbeHandler};

/// A probe's action, ready to run: host and port resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// `httpGet`.
    Http {
        /// `scheme`.
        scheme: HttpScheme,
        /// `host`, or the Pod's IP.
        host: Box<str>,
        /// The port (a named port resolved in the container).
        port: u16,
        /// `path`, starting with `/`.
        path: Box<str>,
        /// `httpHeaders`.
        headers: Vec<(Box<str>, Box<str>)>,
    },
    /// `tcpSocket`.
    Tcp {
        /// `host`, or the Pod's IP.
        host: Box<str>,
        /// The port.
        port: u16,
    },
    /// `grpc`.
    Grpc {
        /// The Pod's IP.
        host: Box<str>,
        /// `port`.
        port: u16,
        /// `service`.
        service: Box<str>,
    },
}

impl Target {
    /// Resolves a container's probe against its Pod, as kubelet does: the host defaults to the
    /// Pod's (first) IP, a named port is looked up among the container's own ports. `Err` says
    /// why the probe cannot run (each run then reports it as an error).
    pub fn resolve(pod: &Pod, container: &Container, probe: &Probe) -> Result<Target, String> {
        let pod_ip = || -> Result<Box<str>, String> {
            pod.ips
                .first()
                .map(|ip: &IpAddr| ip.to_string().into())
                .ok_or_else(|| "the Pod has no IP (status.podIP)".to_owned())
        };
        let host = |h: &Option<Box<str>>| h.clone().map_or_else(pod_ip, Ok);
        let port = |p: &PortRef| match p {
            PortRef::Number(n) => Ok(*n),
            PortRef::Name(name) => container.named_port(name).ok_or_else(|| {
                format!(
                    "container {} has no port named {name:?} for its readiness probe",
                    container.name
                )
            }),
        };
        Ok(match &probe.handler {
            ProbeHandler::HttpGet(h) => Target::Http {
                scheme: h.scheme,
                host: host(&h.host)?,
                port: port(&h.port)?,
                path: h.path.clone(),
                headers: h.headers.clone(),
            },
            ProbeHandler::TcpSocket { host: h, port: p } => Target::Tcp {
                host: host(h)?,
                port: port(p)?,
            },
            ProbeHandler::Grpc { port, service } => Target::Grpc {
                host: pod_ip()?,
                port: *port,
                service: service.clone(),
            },
            ProbeHandler::Exec => {
                return Err("exec probes are not supported in standalone mode".to_owned())
            }
        })
    }

    /// `host:port` (`[v6]:port` for an IPv6 host).
    pub fn authority(&self) -> String {
        let (host, port) = match self {
            Target::Http { host, port, .. }
            | Target::Tcp { host, port }
            | Target::Grpc { host, port, .. } => (host, *port),
        };
        match host.parse::<IpAddr>() {
            Ok(IpAddr::V6(v6)) => format!("[{v6}]:{port}"),
            _ => format!("{host}:{port}"),
        }
    }
}

impl fmt::Display for Target {
    /// `GET http://10.0.1.1:8080/hello`, `TCP 10.0.1.1:5432`, `gRPC 10.0.1.1:9090 service "x"`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Http { scheme, path, .. } => {
                let scheme = match scheme {
                    HttpScheme::Http => "http",
                    HttpScheme::Https => "https",
                };
                write!(f, "GET {scheme}://{}{path}", self.authority())
            }
            Target::Tcp { .. } => write!(f, "TCP {}", self.authority()),
            Target::Grpc { service, .. } => {
                write!(f, "gRPC {} service {service:?}", self.authority())
            }
        }
    }
}
