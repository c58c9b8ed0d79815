//! What every drill shares: the options, the proxy modes, and a [`Stage`] (the lab, the
//! endpoints, the cluster's manifests, and how to start Ferry on it and read its status).

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use serde_json::Value;

use crate::lab::cluster::{Cluster, NODE, POD_RANGE};
use crate::lab::probe::Expect;
use crate::lab::{Endpoints, Ferry, Net};

pub mod bad_input;
pub mod fuzz;
pub mod hostile;
pub mod kill;
pub mod limits;
pub mod outage;
pub mod restart;
pub mod soak;
pub mod writers;

/// What to run.
#[derive(Debug, Clone)]
pub struct Options {
    /// The `ferry` binary under drill.
    pub ferry: PathBuf,
    /// A different build of `ferry`, for the upgrade drill (default: the same binary).
    pub other_ferry: Option<PathBuf>,
    /// CI's short mode: small N, few repetitions.
    pub quick: bool,
    /// N, overriding the drill's default.
    pub services: Option<usize>,
    /// Repetitions, overriding the drill's default.
    pub repetitions: Option<usize>,
    /// Seconds (outage, soak, fuzzing), overriding the drill's default.
    pub seconds: Option<u64>,
    /// The modes to drill.
    pub modes: Vec<Mode>,
    /// Where Ferry's logs go.
    pub logs: PathBuf,
    /// Random seed (printed, so a run can be repeated).
    pub seed: u64,
}

impl Options {
    /// `quick` in the short mode, `full` otherwise, unless `--services` says.
    pub fn services(&self, quick: usize, full: usize) -> usize {
        self.services
            .unwrap_or(if self.quick { quick } else { full })
    }

    /// Likewise for repetitions.
    pub fn repetitions(&self, quick: usize, full: usize) -> usize {
        self.repetitions
            .unwrap_or(if self.quick { quick } else { full })
    }

    /// The asked modes whose rules are Ferry's nftables table (nftables, userspace), or
    /// nftables mode when none is: for drills that do not depend on the mode, or that read
    /// that table.
    pub fn table_modes(&self) -> Vec<Mode> {
        let mut modes: Vec<Mode> = self
            .modes
            .iter()
            .copied()
            .filter(|m| matches!(m, Mode::Nftables | Mode::Userspace))
            .collect();
        if modes.is_empty() {
            modes.push(Mode::Nftables);
        }
        modes
    }

    /// Likewise for seconds.
    pub fn seconds(&self, quick: u64, full: u64) -> u64 {
        self.seconds
            .unwrap_or(if self.quick { quick } else { full })
    }
}

/// A proxy mode (and iptables backend) under drill.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// nftables mode.
    Nftables,
    /// iptables mode, nft backend.
    IptablesNft,
    /// iptables mode, legacy backend.
    IptablesLegacy,
    /// userspace mode: Ferry's process proxies every connection (its nftables table only
    /// redirects to Ferry's listeners), so nothing answers while Ferry is down.
    Userspace,
}

impl Mode {
    /// The modes drilled by default: the kernel dataplanes.
    pub const ALL: [Mode; 3] = [Mode::Nftables, Mode::IptablesNft, Mode::IptablesLegacy];

    /// Every mode `--modes` accepts (IPVS mode's kernel part runs only in a qemu guest).
    pub const KNOWN: [Mode; 4] = [
        Mode::Nftables,
        Mode::IptablesNft,
        Mode::IptablesLegacy,
        Mode::Userspace,
    ];

    /// `nftables`, `iptables-nft`, `iptables-legacy`, `userspace`.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Nftables => "nftables",
            Mode::IptablesNft => "iptables-nft",
            Mode::IptablesLegacy => "iptables-legacy",
            Mode::Userspace => "userspace",
        }
    }

    /// Parses [`Mode::name`].
    pub fn parse(s: &str) -> anyhow::Result<Mode> {
        Mode::KNOWN
            .into_iter()
            .find(|m| m.name() == s)
            .with_context(|| {
                format!("unknown mode {s:?} (nftables, iptables-nft, iptables-legacy, userspace)")
            })
    }

    /// Its `ferry run` flags.
    pub fn flags(self) -> Vec<String> {
        match self {
            Mode::Nftables => vec!["--proxy-mode=nftables".into()],
            Mode::IptablesNft => {
                vec![
                    "--proxy-mode=iptables".into(),
                    "--iptables-backend=nft".into(),
                ]
            }
            Mode::IptablesLegacy => {
                vec![
                    "--proxy-mode=iptables".into(),
                    "--iptables-backend=legacy".into(),
                ]
            }
            Mode::Userspace => vec!["--proxy-mode=userspace".into()],
        }
    }

    /// The iptables tool of its backend (`None` in nftables mode).
    pub fn iptables(self) -> Option<&'static str> {
        match self {
            Mode::Nftables | Mode::Userspace => None,
            Mode::IptablesNft => Some("iptables-nft"),
            Mode::IptablesLegacy => Some("iptables-legacy"),
        }
    }
}

/// One drill's lab: namespaces, endpoints, the cluster as manifests.
pub struct Stage {
    /// The namespaces.
    pub net: Net,
    _endpoints: Endpoints,
    _root: tempfile::TempDir,
    /// The manifest directory Ferry watches.
    pub dir: PathBuf,
    /// Where new manifest versions are staged before being renamed in.
    pub stage: PathBuf,
    /// Ferry's log.
    pub log: PathBuf,
    /// The cluster.
    pub cluster: Cluster,
}

impl Stage {
    /// Fresh namespaces named after `tag`, with `cluster` written as manifests.
    pub fn new(o: &Options, tag: &str, cluster: Cluster) -> anyhow::Result<Stage> {
        let net = crate::lab::create_net(tag)?;
        let endpoints = Endpoints::start(net.pods.name())?;
        let root = tempfile::Builder::new().prefix("ferry-drills-").tempdir()?;
        ferry_lab::interrupt::remove_on_signal(root.path());
        let dir = root.path().join("manifests");
        let stage = root.path().join("stage");
        std::fs::create_dir_all(&dir)?;
        std::fs::create_dir_all(&stage)?;
        cluster.write_all(&dir)?;
        Ok(Stage {
            net,
            _endpoints: endpoints,
            _root: root,
            dir,
            stage,
            log: o.logs.join(format!("{tag}.log")),
            cluster,
        })
    }

    /// The flags every run shares: this node, the pod range, the manifests, no coalescing
    /// delay.
    pub fn flags(&self, mode: Mode) -> Vec<String> {
        let mut f = vec![
            format!("--hostname-override={NODE}"),
            format!("--cluster-cidr={POD_RANGE}"),
            format!("--manifests={}", self.dir.display()),
            "--min-sync-period=0s".to_owned(),
        ];
        f.extend(mode.flags());
        f
    }

    /// [`Stage::flags`] for a run that reads the cluster from the API server at `master`
    /// instead of the manifests.
    pub fn api_flags(&self, mode: Mode, master: &str) -> Vec<String> {
        let mut f: Vec<String> = self
            .flags(mode)
            .into_iter()
            .filter(|f| !f.starts_with("--manifests"))
            .collect();
        f.push(format!("--master={master}"));
        f
    }

    /// Starts `binary` with [`Stage::flags`] and `extra`.
    pub fn start(&self, binary: &Path, mode: Mode, extra: &[&str]) -> anyhow::Result<Ferry> {
        let mut flags = self.flags(mode);
        flags.extend(extra.iter().map(|s| (*s).to_owned()));
        Ferry::start(binary, self.net.node.name(), &flags, &self.log)
    }

    /// Writes Service `i`'s current manifest into place.
    pub fn write(&self, i: usize) -> anyhow::Result<()> {
        self.cluster.write_one(&self.dir, &self.stage, i)
    }

    /// What to expect of Service `i`'s ClusterIP: its endpoints of generation `old`, and its
    /// current ones.
    pub fn expect(&self, i: usize, old: Option<u32>) -> Expect {
        let target =
            std::net::SocketAddrV4::new(self.cluster.cluster_ip(i), crate::lab::cluster::PORT);
        Expect {
            target,
            old: old
                .map(|g| self.cluster.endpoints_in(i, g))
                .unwrap_or_default(),
            new: self.cluster.endpoints_of(i).to_vec(),
        }
    }

    /// `ferry status --output json` of the Ferry running on the node.
    /// Asked up to three times: the agent answers between syncs, and under load a long one
    /// (a full sync of 10 000 Services in iptables-legacy) outlasts its 30 s answer timeout.
    pub fn status(&self, ferry: &Path) -> anyhow::Result<Value> {
        let ferry = ferry.display().to_string();
        let mut tries = 0;
        let out = loop {
            tries += 1;
            match self.net.node.exec(&ferry, ["status", "--output", "json"]) {
                Err(e) if tries < 3 && e.to_string().contains("answered 503") => continue,
                result => break result?,
            }
        };
        serde_json::from_str(&out).context("ferry status --output json")
    }

    /// `None` when `ferry status` says the kernel holds exactly what Ferry programs (every
    /// frontend `programmed`, the mode's objects present, nothing stray) and Ferry programs
    /// `frontends` frontends; else what differs.
    pub fn differences(&self, ferry: &Path, frontends: usize) -> anyhow::Result<Option<String>> {
        let status = self.status(ferry)?;
        let mut out = Vec::new();
        for f in status["families"].as_array().into_iter().flatten() {
            let k = &f["kernel"];
            if k["present"] != true {
                out.push(format!("{}: not present {}", f["family"], k["error"]));
            }
            if let Some(stray) = k["stray"].as_array().filter(|s| !s.is_empty()) {
                out.push(format!(
                    "{}: {} stray, first {}",
                    f["family"],
                    stray.len(),
                    stray[0]
                ));
            }
        }
        let want = frontends;
        let frontends = status["frontends"].as_array().cloned().unwrap_or_default();
        if frontends.len() != want {
            out.push(format!(
                "status shows {} frontends, want {want}",
                frontends.len()
            ));
        }
        let bad: Vec<&Value> = frontends
            .iter()
            .filter(|f| f["kernel"]["state"] != "programmed")
            .collect();
        if let Some(first) = bad.first() {
            out.push(format!(
                "{} of {} frontends not programmed, first {} {}",
                bad.len(),
                frontends.len(),
                first["service"],
                first["kernel"]
            ));
        }
        Ok((!out.is_empty()).then(|| out.join("; ")))
    }
}

/// Waits until `ferry` has gone 300 ms without a sync (at most 10 s): the syncs of its start-up
/// or of a change are over.
pub fn settle(ferry: &mut Ferry) {
    let end = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut seen = ferry.syncs().len();
    let mut quiet = std::time::Instant::now();
    while std::time::Instant::now() < end {
        std::thread::sleep(std::time::Duration::from_millis(50));
        let now = ferry.syncs().len();
        if now != seen {
            (seen, quiet) = (now, std::time::Instant::now());
        } else if quiet.elapsed() >= std::time::Duration::from_millis(300) {
            return;
        }
    }
}
