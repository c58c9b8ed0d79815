//! Live traffic through a node while its proxy is replaced: a new TCP connection every few
//! milliseconds to each target, and long-lived keep-alive connections asking again every
//! 50 ms. Every attempt is counted under the step the test is in when it starts; every failure
//! is kept with its step, target and error, so a report says which step lost what.
//!
//! A long-lived connection is broken when a request on it fails or is answered by another
//! server than its first answer (its NAT lost: the next packet went through a new DNAT). It is
//! then opened again, and that opening is not counted as a new connection.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::fmt;
use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ferry_lab::{http, netns};

/// Where connections go and from where.
#[derive(Debug, Clone)]
pub struct Target {
    /// Shown in the report (e.g. `pod → ClusterIP`).
    pub name: String,
    /// The network namespace the client runs in.
    pub netns: String,
    pub addr: SocketAddr,
}

/// New connections or long-lived ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    New,
    LongLived,
}

/// Attempts and failures of one (step, target, kind).
#[derive(Debug, Default, Clone)]
pub struct Tally {
    pub attempts: u64,
    pub failures: Vec<String>,
}

type Key = (usize, String, Kind);

#[derive(Default)]
struct Shared {
    steps: Vec<String>,
    tallies: BTreeMap<Key, Tally>,
}

impl Shared {
    fn record(&mut self, step: usize, target: &str, kind: Kind, failure: Option<String>) {
        let t = self
            .tallies
            .entry((step, target.to_owned(), kind))
            .or_default();
        t.attempts += 1;
        t.failures.extend(failure);
    }
}

/// The running traffic; [`Traffic::stop`] ends it and gives the report (dropping it stops the
/// threads too).
pub struct Traffic {
    stop: Arc<AtomicBool>,
    shared: Arc<Mutex<Shared>>,
    started: Instant,
    threads: Vec<JoinHandle<()>>,
}

impl Traffic {
    /// Starts, per target, one thread making a new connection every `every` and `long_lived`
    /// long-lived connections. The first step is `first_step`.
    pub fn start(targets: &[Target], every: Duration, long_lived: usize, first_step: &str) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let shared = Arc::new(Mutex::new(Shared {
            steps: vec![first_step.to_owned()],
            ..Shared::default()
        }));
        let started = Instant::now();
        let mut threads = Vec::new();
        for t in targets {
            let (t2, stop2, shared2) = (t.clone(), stop.clone(), shared.clone());
            threads.push(std::thread::spawn(move || {
                in_netns(&t2.netns.clone(), move || {
                    new_connections(&t2, every, &stop2, &shared2, started)
                })
            }));
            for _ in 0..long_lived {
                let (t2, stop2, shared2) = (t.clone(), stop.clone(), shared.clone());
                threads.push(std::thread::spawn(move || {
                    in_netns(&t2.netns.clone(), move || {
                        long_lived_connection(&t2, &stop2, &shared2, started)
                    })
                }));
            }
        }
        Traffic {
            stop,
            shared,
            started,
            threads,
        }
    }

    /// From now on attempts count under `name`.
    pub fn step(&self, name: &str) {
        println!("{:>7.1?}  step: {name}", self.started.elapsed());
        lock(&self.shared).steps.push(name.to_owned());
    }

    /// Stops every thread (after its attempt in flight) and reports.
    pub fn stop(mut self) -> Report {
        self.halt();
        let shared = lock(&self.shared);
        Report {
            steps: shared.steps.clone(),
            tallies: shared.tallies.clone(),
        }
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for Traffic {
    fn drop(&mut self) {
        self.halt();
    }
}

fn lock(shared: &Mutex<Shared>) -> std::sync::MutexGuard<'_, Shared> {
    shared.lock().unwrap_or_else(|e| e.into_inner())
}

fn in_netns(ns: &str, f: impl FnOnce() + Send) {
    netns::run_in(ns, f).unwrap_or_else(|e| panic!("traffic in {ns}: {e}"));
}

fn current_step(shared: &Mutex<Shared>) -> usize {
    lock(shared).steps.len() - 1
}

const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
const IO_TIMEOUT: Duration = Duration::from_secs(2);
const LONG_LIVED_EVERY: Duration = Duration::from_millis(50);

fn new_connections(
    t: &Target,
    every: Duration,
    stop: &AtomicBool,
    shared: &Mutex<Shared>,
    started: Instant,
) {
    while !stop.load(Ordering::SeqCst) {
        let step = current_step(shared);
        let at = started.elapsed();
        let failure = request(t.addr)
            .err()
            .map(|e| format!("{at:.2?} new connection to {}: {e}", t.addr));
        lock(shared).record(step, &t.name, Kind::New, failure);
        std::thread::sleep(every);
    }
}

/// [`request`] from a thread in `ns`.
pub fn one_request(ns: &str, addr: SocketAddr) -> Result<String, String> {
    netns::run_in(ns, || request(addr)).map_err(|e| e.to_string())?
}

/// Connects, asks `/hello` with `Connection: close`, and returns the answering server's name.
fn request(addr: SocketAddr) -> Result<String, String> {
    let mut s = connect(addr)?;
    s.write_all(b"GET /hello HTTP/1.1\r\nHost: ferry\r\nConnection: close\r\n\r\n")
        .map_err(|e| format!("write: {e}"))?;
    let mut text = String::new();
    s.read_to_string(&mut text)
        .map_err(|e| format!("read: {e}"))?;
    if !text.starts_with("HTTP/1.1 200") {
        return Err(format!("answered {:?}", text.lines().next().unwrap_or("")));
    }
    server_name(&text).ok_or_else(|| format!("no ServerName in {text:?}"))
}

fn connect(addr: SocketAddr) -> Result<TcpStream, String> {
    let s =
        TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT).map_err(|e| format!("connect: {e}"))?;
    s.set_read_timeout(Some(IO_TIMEOUT))
        .and_then(|()| s.set_write_timeout(Some(IO_TIMEOUT)))
        .map_err(|e| format!("timeouts: {e}"))?;
    Ok(s)
}

fn server_name(body: &str) -> Option<String> {
    let rest = body.split("ServerName : ").nth(1)?;
    Some(rest.split(',').next()?.trim().to_owned())
}

fn long_lived_connection(t: &Target, stop: &AtomicBool, shared: &Mutex<Shared>, started: Instant) {
    let name = format!("{} (long-lived)", t.name);
    let mut conn: Option<(TcpStream, String)> = None;
    while !stop.load(Ordering::SeqCst) {
        let step = current_step(shared);
        let at = started.elapsed();
        // `None`: a connection opened (its first request is its opening, not counted).
        let outcome: Option<Result<(), String>> = match conn.take() {
            None => match open(t.addr) {
                Ok(c) => {
                    conn = Some(c);
                    None
                }
                Err(e) => Some(Err(format!("{at:.2?} opening to {}: {e}", t.addr))),
            },
            Some((mut s, first)) => Some(match http::get(&mut s, "/hello") {
                Ok(r) if r.status == 200 && server_name(&r.body).as_deref() == Some(&first) => {
                    conn = Some((s, first));
                    Ok(())
                }
                Ok(r) => Err(format!(
                    "{at:.2?} long-lived connection to {} (first answered by {first}): {} {:?}",
                    t.addr,
                    r.status,
                    r.body.trim()
                )),
                Err(e) => Err(format!(
                    "{at:.2?} long-lived connection to {} (answered by {first}): {e}",
                    t.addr
                )),
            }),
        };
        if let Some(r) = outcome {
            lock(shared).record(step, &name, Kind::LongLived, r.err());
        }
        std::thread::sleep(LONG_LIVED_EVERY);
    }
}

/// Opens a keep-alive connection and learns which server it reached.
fn open(addr: SocketAddr) -> Result<(TcpStream, String), String> {
    let mut s = connect(addr)?;
    let r = http::get(&mut s, "/hello").map_err(|e| format!("first request: {e}"))?;
    let first = server_name(&r.body).ok_or_else(|| format!("no ServerName in {:?}", r.body))?;
    Ok((s, first))
}

/// What the traffic saw, per step.
pub struct Report {
    pub steps: Vec<String>,
    pub tallies: BTreeMap<Key, Tally>,
}

impl Report {
    /// Every failure, in step order.
    pub fn failures(&self) -> Vec<String> {
        self.tallies
            .iter()
            .flat_map(|((step, _, _), t)| {
                t.failures
                    .iter()
                    .map(move |f| format!("{}: {f}", self.steps[*step]))
            })
            .collect()
    }

    /// Attempts over every step, of `kind`.
    pub fn attempts(&self, kind: Kind) -> u64 {
        self.tallies
            .iter()
            .filter(|((_, _, k), _)| *k == kind)
            .map(|(_, t)| t.attempts)
            .sum()
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "| step | traffic | attempts | failed |")?;
        writeln!(f, "|---|---|---:|---:|")?;
        for ((step, target, _), t) in &self.tallies {
            writeln!(
                f,
                "| {} | {target} | {} | {} |",
                self.steps[*step],
                t.attempts,
                t.failures.len()
            )?;
        }
        Ok(())
    }
}
