//! iptables mode's `explain --live`: the chains the explanation names, in `iptables-save`.

use std::process::Command;

use ferry_compile::trace::Trace;
use ferry_model::IpFamily;

use super::IptablesBackend;
use crate::live::LiveReport;
use crate::Error;

/// `iptables-save` of the nat and filter tables of `backend`'s `family` tools.
pub fn read_back(backend: IptablesBackend, family: IpFamily) -> Result<String, Error> {
    let program = backend.program_for(family, "-save");
    let mut text = String::new();
    for table in ["nat", "filter"] {
        let out = Command::new(&program)
            .args(["-t", table])
            .output()
            .map_err(|source| Error::Spawn {
                program: program.clone(),
                source,
            })?;
        if !out.status.success() {
            return Err(Error::Rejected {
                program: program.clone(),
                status: out.status.to_string(),
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            });
        }
        text.push_str(&String::from_utf8_lossy(&out.stdout));
    }
    Ok(text)
}

/// Every chain the explanation (of iptables mode, see [`Trace::for_iptables`]) names must exist
/// in `iptables-save` output, and the endpoint chains' DNAT targets are the endpoints the
/// kernel holds.
pub fn check(t: &Trace, save: &str) -> LiveReport {
    let mut report = LiveReport {
        table_present: true,
        checked: 0,
        differences: Vec::new(),
        endpoints: Vec::new(),
    };
    let mut chains: Vec<String> = Vec::new();
    for step in &t.steps {
        for obj in &step.objects {
            for word in obj.split(|c: char| c.is_whitespace() || c == '(' || c == ')') {
                if word.starts_with("KUBE-") && !chains.iter().any(|c| c == word) {
                    chains.push(word.to_owned());
                }
            }
        }
    }
    for chain in &chains {
        report.checked += 1;
        if !save.lines().any(|l| l.starts_with(&format!(":{chain} "))) {
            report
                .differences
                .push(format!("chain {chain} is missing from the kernel"));
        }
        if chain.starts_with("KUBE-SEP-") {
            let rule = format!("-A {chain} ");
            for line in save.lines().filter(|l| l.starts_with(&rule)) {
                if let Some(dest) = line.split("--to-destination ").nth(1) {
                    let ep = dest
                        .split_whitespace()
                        .next()
                        .unwrap_or_default()
                        .to_owned();
                    if !report.endpoints.contains(&ep) {
                        report.endpoints.push(ep);
                    }
                }
            }
        }
    }
    report
}
