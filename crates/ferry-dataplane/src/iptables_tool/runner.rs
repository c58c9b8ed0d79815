//! Running the iptables tools of one backend.

use std::collections::BTreeMap;
use std::io::{self, BufRead as _, BufReader, Write as _};
use std::process::{Child, Command, Stdio};

use ferry_compile::iptables::{ChainDigest, SavedDigests, Table};
use ferry_model::IpFamily;

use super::IptablesBackend;
use crate::Error;

/// Runs iptables commands. The real one is [`IptablesCli`]; tests substitute a recorder.
pub trait IptablesRunner: Send {
    /// `iptables-restore --noflush` with `input` (each table atomically).
    fn restore(&mut self, input: &str) -> Result<(), Error>;
    /// Runs `iptables-restore --noflush` on what `write` writes, handed to the tool as it is
    /// written (a full sync's text is not held whole). By default written into a buffer and
    /// given to [`IptablesRunner::restore`].
    fn restore_from(
        &mut self,
        write: &mut dyn FnMut(&mut dyn io::Write) -> io::Result<()>,
    ) -> Result<(), Error> {
        let mut buffer = Vec::new();
        write(&mut buffer).map_err(|source| Error::Spawn {
            program: "iptables-restore".into(),
            source,
        })?;
        self.restore(&String::from_utf8_lossy(&buffer))
    }
    /// Runs `iptables` with `args`: `Ok(true)` on success, `Ok(false)` when iptables says the
    /// rule or chain does not exist (exit status 1), an error otherwise.
    fn iptables(&mut self, args: &[&str]) -> Result<bool, Error>;
    /// Runs `iptables -C …` (`args` include `-C`): whether the rule is there. A rule whose
    /// target chain does not exist (exit status 2, "couldn't load target" or "chain does not
    /// exist") is not. By default, [`IptablesRunner::iptables`].
    fn check(&mut self, args: &[&str]) -> Result<bool, Error> {
        self.iptables(args)
    }
    /// `iptables-save` of one table, or of every table that exists (`None`; for the legacy
    /// backend this does not create tables).
    fn save(&mut self, table: Option<Table>) -> Result<String, Error>;
    /// The chains of every table that exists, by table (what `iptables-save` declares; the
    /// nft backend's built-in chains only where the kernel holds them). By default read from
    /// [`IptablesRunner::save`].
    fn saved_chains(&mut self) -> Result<BTreeMap<String, Vec<String>>, Error> {
        Ok(super::saved::tables(&self.save(None)?))
    }
    /// How many rules `table`'s `chain` holds (`iptables -t TABLE -S CHAIN`; 0 when there is
    /// no such chain), for the periodic check; `None` when the runner cannot tell.
    fn rules_in(&mut self, _table: Table, _chain: &str) -> Result<Option<usize>, Error> {
        Ok(None)
    }
    /// The rules of `table`'s `chain` as `iptables -S` prints them (`-A CHAIN …`, restore
    /// syntax); none when there is no such chain. By default, none: a runner that cannot list
    /// finds no jump to remove.
    fn list_rules(&mut self, _table: Table, _chain: &str) -> Result<Vec<String>, Error> {
        Ok(Vec::new())
    }
    /// The canonical digest of each chain of `table` ([`SavedDigests`]), for a first sync over
    /// chains an earlier run left. By default read from [`IptablesRunner::save`].
    fn saved_digests(
        &mut self,
        table: Table,
        family: IpFamily,
    ) -> Result<BTreeMap<String, Option<ChainDigest>>, Error> {
        let mut digests = SavedDigests::new(family);
        for line in self.save(Some(table))?.lines() {
            digests.line(line);
        }
        Ok(digests.finish())
    }
}

/// Runs the tools of one backend in the current network namespace.
#[derive(Debug, Clone)]
pub struct IptablesCli {
    backend: IptablesBackend,
    family: IpFamily,
}

impl IptablesCli {
    /// The IPv4 tools of `backend` (`iptables-nft`, …).
    pub fn new(backend: IptablesBackend) -> Self {
        Self::for_family(backend, IpFamily::V4)
    }

    /// The tools of `backend` for `family` (`ip6tables-legacy`, … for IPv6).
    pub fn for_family(backend: IptablesBackend, family: IpFamily) -> Self {
        Self { backend, family }
    }

    /// The backend.
    pub fn backend(&self) -> IptablesBackend {
        self.backend
    }

    /// Whether `table` holds `chain` (`iptables -t TABLE -S CHAIN`), without reading the rest of
    /// the ruleset: a few milliseconds where `iptables-save` of 110 000 chains takes seconds.
    /// A legacy table that does not exist is not created to find out.
    pub fn has_chain(&mut self, table: Table, chain: &str) -> Result<bool, Error> {
        if self.backend == IptablesBackend::Legacy && !self.legacy_table_exists(table) {
            return Ok(false);
        }
        self.run_absent_on(&["-t", table.as_str(), "-S", chain], &[1])
    }

    /// Whether the legacy `table` exists; listing it would create it.
    fn legacy_table_exists(&self, table: Table) -> bool {
        self.legacy_table_names()
            .is_some_and(|t| t.lines().any(|l| l.trim() == table.as_str()))
    }

    /// True for the legacy backend when this network namespace has no legacy table at all:
    /// saving every table would print nothing, and the tool run is saved (Ferry's start-up
    /// looks at both backends several times).
    fn no_legacy_tables(&self) -> bool {
        self.backend == IptablesBackend::Legacy
            && self
                .legacy_table_names()
                .is_some_and(|t| t.trim().is_empty())
    }

    /// The legacy tables of this network namespace (`ip_tables_names`, one per line). Read
    /// under `/proc/thread-self/net`: `/proc/net` is the process's, which is another network
    /// namespace on a thread that entered its own (the tests' namespaces).
    fn legacy_table_names(&self) -> Option<String> {
        let names = match self.family {
            IpFamily::V4 => "/proc/thread-self/net/ip_tables_names",
            IpFamily::V6 => "/proc/thread-self/net/ip6_tables_names",
        };
        std::fs::read_to_string(names).ok()
    }

    /// Starts `tool` of this backend and family with `args`, stdout and stderr piped.
    fn spawn(&self, tool: &str, args: &[&str], stdin: bool) -> Result<Child, Error> {
        let program = self.backend.program_for(self.family, tool);
        Command::new(&program)
            .args(args)
            .stdin(if stdin { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|source| Error::Spawn { program, source })
    }

    /// The error of a spawned `tool` that could not be fed or waited for.
    fn io_err(&self, tool: &str) -> impl Fn(std::io::Error) -> Error {
        let program = self.backend.program_for(self.family, tool);
        move |source| Error::Spawn {
            program: program.clone(),
            source,
        }
    }

    fn run(
        &self,
        tool: &str,
        args: &[&str],
        stdin: Option<&str>,
    ) -> Result<std::process::Output, Error> {
        let mut child = self.spawn(tool, args, stdin.is_some())?;
        if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
            pipe.write_all(text.as_bytes()).map_err(self.io_err(tool))?;
        }
        child.wait_with_output().map_err(self.io_err(tool))
    }

    /// Runs `iptables -w … args`: true on success, false on one of the `absent` exit codes.
    fn run_absent_on(&self, args: &[&str], absent: &[i32]) -> Result<bool, Error> {
        let mut all = vec!["-w", WAIT];
        all.extend_from_slice(args);
        let out = self.run("", &all, None)?;
        match out.status.code() {
            Some(0) => Ok(true),
            Some(code) if absent.contains(&code) => Ok(false),
            _ => Err(self.rejected("", &all, &out)),
        }
    }

    /// Runs `iptables-save args…` and hands each line of its output to `line` as it is read:
    /// the output of 110 000 chains (31 MiB) is never held.
    fn each_saved_line(&self, args: &[&str], mut line: impl FnMut(&[u8])) -> Result<(), Error> {
        let mut child = self.spawn("-save", args, false)?;
        let io_err = self.io_err("-save");
        if let Some(stdout) = child.stdout.take() {
            let mut reader = BufReader::new(stdout);
            let mut buf = Vec::new();
            loop {
                buf.clear();
                if reader.read_until(b'\n', &mut buf).map_err(&io_err)? == 0 {
                    break;
                }
                line(&buf);
            }
        }
        let done = child.wait_with_output().map_err(io_err)?;
        if done.status.success() {
            Ok(())
        } else {
            Err(self.rejected("-save", args, &done))
        }
    }

    fn rejected(&self, tool: &str, args: &[&str], out: &std::process::Output) -> Error {
        Error::Rejected {
            program: format!(
                "{} {}",
                self.backend.program_for(self.family, tool),
                args.join(" ")
            ),
            status: out.status.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        }
    }
}

/// How long the legacy tools wait for the xtables lock (seconds); the nft tools ignore it.
const WAIT: &str = "5";

impl IptablesRunner for IptablesCli {
    fn restore_from(
        &mut self,
        write: &mut dyn FnMut(&mut dyn io::Write) -> io::Result<()>,
    ) -> Result<(), Error> {
        let args = ["-w", WAIT, "--noflush"];
        let tool = "-restore";
        let mut child = self.spawn(tool, &args, true)?;
        let written = match child.stdin.take() {
            Some(pipe) => {
                let mut pipe = io::BufWriter::with_capacity(1 << 16, pipe);
                write(&mut pipe).and_then(|()| pipe.flush())
            }
            None => Ok(()),
        };
        let out = child.wait_with_output().map_err(self.io_err(tool))?;
        if !out.status.success() {
            // A tool that stopped reading (it refused a line) also breaks the pipe: its
            // status and stderr say why.
            return Err(self.rejected(tool, &args, &out));
        }
        // The input was cut short (a section without its COMMIT is not applied).
        written.map_err(self.io_err(tool))
    }

    fn restore(&mut self, input: &str) -> Result<(), Error> {
        let args = ["-w", WAIT, "--noflush"];
        let out = self.run("-restore", &args, Some(input))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(self.rejected("-restore", &args, &out))
        }
    }

    fn iptables(&mut self, args: &[&str]) -> Result<bool, Error> {
        self.run_absent_on(args, &[1])
    }

    fn check(&mut self, args: &[&str]) -> Result<bool, Error> {
        self.run_absent_on(args, &[1, 2])
    }

    fn save(&mut self, table: Option<Table>) -> Result<String, Error> {
        if table.is_none() && self.no_legacy_tables() {
            // What iptables-legacy-save would print: it lists the tables of that file.
            return Ok(String::new());
        }
        let args: Vec<&str> = table.map(|t| vec!["-t", t.as_str()]).unwrap_or_default();
        let out = self.run("-save", &args, None)?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(self.rejected("-save", &args, &out))
        }
    }

    /// Reads `iptables-save`'s output line by line and keeps only the table and chain
    /// declarations: with 110 000 chains that output is 31 MiB, which the start-up look for
    /// leftovers and every mode's cleanup would otherwise hold (twice, while reading it).
    fn saved_chains(&mut self) -> Result<BTreeMap<String, Vec<String>>, Error> {
        if self.no_legacy_tables() {
            return Ok(BTreeMap::new());
        }
        if self.backend == IptablesBackend::Nft {
            if let Some(tables) = nft_chains(self.family) {
                return Ok(tables);
            }
        }
        let mut out = BTreeMap::new();
        let mut current: Option<String> = None;
        self.each_saved_line(&[], |line| {
            // Only `*table` and `:CHAIN POLICY [p:b]` lines matter; rules are skipped
            // without being decoded.
            if matches!(line.first(), Some(b'*' | b':')) {
                let text = String::from_utf8_lossy(line);
                super::saved::declaration(text.trim_end(), &mut current, &mut out);
            }
        })?;
        Ok(out)
    }

    /// Reads `iptables-save -t TABLE` line by line into the chains' digests: the text of
    /// 110 000 chains (31 MiB) is not held.
    fn saved_digests(
        &mut self,
        table: Table,
        family: IpFamily,
    ) -> Result<BTreeMap<String, Option<ChainDigest>>, Error> {
        let mut digests = SavedDigests::new(family);
        self.each_saved_line(&["-t", table.as_str()], |line| {
            digests.line(String::from_utf8_lossy(line).trim_end());
        })?;
        Ok(digests.finish())
    }

    fn list_rules(&mut self, table: Table, chain: &str) -> Result<Vec<String>, Error> {
        let args = ["-w", WAIT, "-t", table.as_str(), "-S", chain];
        let out = self.run("", &args, None)?;
        match out.status.code() {
            Some(0) => Ok(String::from_utf8_lossy(&out.stdout)
                .lines()
                .filter(|l| l.starts_with("-A "))
                .map(str::to_owned)
                .collect()),
            // No such chain (a table iptables-nft has not created).
            Some(1) => Ok(Vec::new()),
            _ => Err(self.rejected("", &args, &out)),
        }
    }

    fn rules_in(&mut self, table: Table, chain: &str) -> Result<Option<usize>, Error> {
        let args = ["-w", WAIT, "-t", table.as_str(), "-S", chain];
        let out = self.run("", &args, None)?;
        match out.status.code() {
            Some(0) => Ok(Some(count_rules(&String::from_utf8_lossy(&out.stdout)))),
            // No such chain.
            Some(1) => Ok(Some(0)),
            _ => Err(self.rejected("", &args, &out)),
        }
    }
}

/// The iptables tables (what `iptables-save` lists when they exist).
const TABLES: [&str; 5] = ["filter", "nat", "mangle", "raw", "security"];

/// The chains of iptables-nft's tables of `family`, by table, read over nfnetlink: what
/// `iptables-nft-save` declares, without the save. At kube-proxy's 3 000 Services × 10
/// endpoints (33 000 chains) `iptables-nft-save` took 8.2 s of CPU, printing every rule,
/// where the chain dump takes milliseconds. `None` when the socket cannot be used (the tool
/// is asked then).
fn nft_chains(family: IpFamily) -> Option<BTreeMap<String, Vec<String>>> {
    let mut socket = crate::netlink::NetlinkSocket::open()
        .map_err(|e| tracing::debug!("listing iptables-nft chains over netlink: {e}"))
        .ok()?;
    socket
        .chains_by_table(family, |t| TABLES.contains(&t))
        .map_err(|e| tracing::debug!("listing iptables-nft chains over netlink: {e}"))
        .ok()
}

/// The rules (`-A` lines) of an `iptables -S` listing.
pub(crate) fn count_rules(listing: &str) -> usize {
    listing.lines().filter(|l| l.starts_with("-A ")).count()
}
