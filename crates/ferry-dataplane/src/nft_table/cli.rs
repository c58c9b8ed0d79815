//! Running the `nft` tool: scripts (`nft -f -`, atomic per run) and the JSON listing of a map.

use std::io::Write as _;
use std::process::{Command, Stdio};

use ferry_compile::family::nft_family;
use ferry_compile::nft::TABLE;
use ferry_model::IpFamily;

use crate::Error;

/// Runs nft scripts. The real one is [`NftCli`]; tests substitute a recorder.
pub trait NftRunner: Send {
    /// Applies one script atomically.
    fn run(&mut self, script: &str) -> Result<(), Error>;

    /// `nft -j list map <family> ferry <map>`: the map with the elements the kernel added
    /// (session affinity pins). A runner without a kernel has none.
    fn list_map(&mut self, _family: IpFamily, _map: &str) -> Result<String, Error> {
        Ok(String::new())
    }

    /// The names of the chains of `family`'s Ferry table (empty without the table), for the
    /// periodic check when no netlink socket is open; `None` when the runner cannot tell (a
    /// runner without a kernel).
    fn chains(&mut self, _family: IpFamily) -> Result<Option<Vec<String>>, Error> {
        Ok(None)
    }

    /// How many rules `chain` of `family`'s Ferry table holds, for the periodic check when no
    /// netlink socket is open; `None` when the runner cannot tell.
    fn rule_count(&mut self, _family: IpFamily, _chain: &str) -> Result<Option<usize>, Error> {
        Ok(None)
    }
}

/// Runs `nft -f -` (atomic per invocation).
#[derive(Debug, Clone)]
pub struct NftCli {
    program: String,
}

impl Default for NftCli {
    fn default() -> Self {
        Self {
            program: "nft".to_owned(),
        }
    }
}

impl NftRunner for NftCli {
    fn run(&mut self, script: &str) -> Result<(), Error> {
        let spawn_err = |source| Error::Spawn {
            program: self.program.clone(),
            source,
        };
        let mut child = Command::new(&self.program)
            .args(["-f", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(spawn_err)?;
        if let Some(mut stdin) = child.stdin.take() {
            stdin.write_all(script.as_bytes()).map_err(spawn_err)?;
        }
        let out = child.wait_with_output().map_err(spawn_err)?;
        if out.status.success() {
            Ok(())
        } else {
            Err(Error::Rejected {
                program: self.program.clone(),
                status: out.status.to_string(),
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            })
        }
    }

    fn list_map(&mut self, family: IpFamily, map: &str) -> Result<String, Error> {
        self.list(&["-j", "list", "map", nft_family(family), TABLE, map])
    }

    fn chains(&mut self, family: IpFamily) -> Result<Option<Vec<String>>, Error> {
        let json = self.list(&["-j", "list", "chains", nft_family(family)])?;
        let listing: serde_json::Value = serde_json::from_str(&json).unwrap_or_default();
        let items = listing["nftables"].as_array().map(Vec::as_slice);
        Ok(Some(
            items
                .unwrap_or_default()
                .iter()
                .filter(|i| i["chain"]["table"] == TABLE)
                .filter_map(|i| i["chain"]["name"].as_str().map(str::to_owned))
                .collect(),
        ))
    }

    fn rule_count(&mut self, family: IpFamily, chain: &str) -> Result<Option<usize>, Error> {
        let json = self.list(&["-j", "list", "chain", nft_family(family), TABLE, chain])?;
        let listing: serde_json::Value = serde_json::from_str(&json).unwrap_or_default();
        let items = listing["nftables"].as_array().map(Vec::as_slice);
        Ok(Some(
            items
                .unwrap_or_default()
                .iter()
                .filter(|i| i.get("rule").is_some())
                .count(),
        ))
    }
}

impl NftCli {
    /// Runs an `nft` listing and returns its stdout.
    pub(super) fn list(&self, args: &[&str]) -> Result<String, Error> {
        let out = Command::new(&self.program)
            .args(args)
            .output()
            .map_err(|source| Error::Spawn {
                program: self.program.clone(),
                source,
            })?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(Error::Rejected {
                program: self.program.clone(),
                status: out.status.to_string(),
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            })
        }
    }
}
