//! Running things inside a lab: processes, commands, curl, TCP connections, Rust closures.

use std::ffi::OsStr;
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::Output;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::{Host, Lab, LabError};
use crate::http::{self, CurlOptions, CurlResult};
use crate::netns;
use crate::process::LabProcess;

/// Read and write timeout set on streams returned by [`Lab::connect`] ([`crate::scaled`]).
pub const STREAM_TIMEOUT: Duration = Duration::from_secs(5);

impl Lab {
    /// Starts `ip netns exec <node ns> <program> <args…>` on a node (by Kubernetes name), e.g.
    /// a Ferry agent. Output goes to a log file in [`Lab::dir`]; the process is stopped when
    /// the returned value is dropped (and killed at the latest when the lab is dropped).
    pub fn spawn_on_node<I, S>(
        &self,
        node: &str,
        program: impl AsRef<OsStr>,
        args: I,
    ) -> Result<LabProcess, LabError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.spawn_in(&Host::node(node), program, args)
    }

    /// Like [`Lab::spawn_on_node`], on any host.
    pub fn spawn_in<I, S>(
        &self,
        host: &Host,
        program: impl AsRef<OsStr>,
        args: I,
    ) -> Result<LabProcess, LabError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let ns = self.netns_of(host)?;
        let (Host::Node(name) | Host::Pod(name) | Host::Client(name)) = host;
        let base = Path::new(program.as_ref())
            .file_name()
            .map_or_else(|| "proc".into(), |b| b.to_string_lossy().into_owned());
        let n = self.next_log.fetch_add(1, Ordering::Relaxed);
        let log = self.dir().join(format!("{name}-{base}-{n}.log"));
        Ok(LabProcess::spawn(
            &format!("{base} on {host}"),
            ns,
            program,
            args,
            &log,
        )?)
    }

    /// Runs a command on a node (by Kubernetes name) and returns its stdout; a non-zero exit
    /// is an error carrying the command (with the namespace) and stderr.
    /// Example: `lab.exec("k8s-master", ["nft", "list", "ruleset"])`.
    pub fn exec<I, S>(&self, node: &str, argv: I) -> Result<String, LabError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let ns = self.netns_of(&Host::node(node))?;
        let (program, args) = split_argv(argv);
        let out = netns::run(&mut netns::exec_command(ns, program, args))?;
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Runs a command on any host and returns its raw output, whatever the exit status.
    pub fn exec_in<I, S>(&self, host: &Host, argv: I) -> Result<Output, LabError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let ns = self.netns_of(host)?;
        let (program, args) = split_argv(argv);
        Ok(netns::run_unchecked(&mut netns::exec_command(
            ns, program, args,
        ))?)
    }

    /// `curl` from a host with default options (2 s connect timeout, 5 s in all).
    pub fn curl(&self, from: &Host, url: &str) -> Result<CurlResult, LabError> {
        self.curl_with(from, url, &CurlOptions::default())
    }

    /// `curl` from a host with the given options.
    pub fn curl_with(
        &self,
        from: &Host,
        url: &str,
        opts: &CurlOptions,
    ) -> Result<CurlResult, LabError> {
        let ns = self.netns_of(from)?;
        let out = netns::run_unchecked(&mut http::curl_command(ns, url, opts))?;
        Ok(http::classify(&out))
    }

    /// Opens a TCP connection from inside a host's namespace (2 s connect timeout). The
    /// socket stays in that namespace, so the stream can be used from any thread for as long
    /// as needed. Read and write timeouts are set to [`STREAM_TIMEOUT`].
    pub fn connect(&self, from: &Host, addr: SocketAddr) -> Result<TcpStream, LabError> {
        self.connect_timeout(from, addr, crate::scaled(Duration::from_secs(2)))
    }

    /// [`Lab::connect`] with a given connect timeout.
    pub fn connect_timeout(
        &self,
        from: &Host,
        addr: SocketAddr,
        timeout: Duration,
    ) -> Result<TcpStream, LabError> {
        let ns = self.netns_of(from)?;
        let err = |source| LabError::Connect {
            host: from.to_string(),
            ns: ns.to_string(),
            addr,
            source,
        };
        let stream =
            netns::run_in(ns, || TcpStream::connect_timeout(&addr, timeout))?.map_err(err)?;
        stream
            .set_read_timeout(Some(crate::scaled(STREAM_TIMEOUT)))
            .and_then(|()| stream.set_write_timeout(Some(crate::scaled(STREAM_TIMEOUT))))
            .map_err(err)?;
        Ok(stream)
    }

    /// Runs `f` on a thread inside a host's namespace and returns its result (e.g. to bind a
    /// UDP socket there: sockets stay in the namespace they were created in).
    pub fn run_in<F, R>(&self, host: &Host, f: F) -> Result<R, LabError>
    where
        F: FnOnce() -> R + Send,
        R: Send,
    {
        Ok(netns::run_in(self.netns_of(host)?, f)?)
    }

    /// Addresses, routes and neighbours of every namespace of the lab, for failure messages.
    pub fn debug_dump(&self) -> String {
        let mut s = String::new();
        for ns in &self.namespaces {
            s.push_str(&format!("=== {ns}\n"));
            for args in [&["-br", "addr"][..], &["route"], &["neigh"]] {
                let mut cmd = std::process::Command::new("ip");
                cmd.args(["-n", ns]).args(args);
                match netns::run_unchecked(&mut cmd) {
                    Ok(o) => {
                        s.push_str(&String::from_utf8_lossy(&o.stdout));
                        s.push_str(&String::from_utf8_lossy(&o.stderr));
                    }
                    Err(e) => s.push_str(&format!("{e}\n")),
                }
            }
        }
        s
    }
}

fn split_argv<I, S>(argv: I) -> (std::ffi::OsString, Vec<std::ffi::OsString>)
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut it = argv.into_iter().map(|a| a.as_ref().to_os_string());
    let program = it.next().unwrap_or_default();
    (program, it.collect())
}
