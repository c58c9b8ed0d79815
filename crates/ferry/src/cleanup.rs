//! `ferry cleanup [--dry-run] [--also-kube-proxy]` (and kube-proxy's `--cleanup`): every
//! mode's cleanup, from the mode table, then one line per object removed (or, dry, that would
//! be), or that there was nothing; what could not be looked at, and kube-proxy's objects left
//! in place, are said too.

use std::process::ExitCode;

use clap::Args;
use ferry_compile::mode::ProxyMode;
use ferry_dataplane::cleanup::{Cleanup, Scope};
use ferry_dataplane::modes::MODES;

/// `ferry cleanup` flags.
#[derive(Debug, Clone, Args)]
pub struct CleanupArgs {
    /// Only say what would be removed.
    #[arg(long)]
    pub dry_run: bool,
    /// Remove kube-proxy's rules too: the KUBE-* chains of the iptables and IPVS layouts that
    /// kube-proxy wrote last (Ferry's carry its marker in nat KUBE-POSTROUTING), kube-proxy's
    /// IPVS state (kube-ipvs0, ipsets, virtual servers) and its nftables tables (ip
    /// kube-proxy, ip6 kube-proxy). Without it they are named and left.
    #[arg(long)]
    pub also_kube_proxy: bool,
}

/// Runs every mode's cleanup in this network namespace and prints what it removed.
pub fn main(args: &CleanupArgs) -> ExitCode {
    let scope = Scope {
        dry_run: args.dry_run,
        kube_proxy: args.also_kube_proxy,
    };
    let results: Vec<(ProxyMode, Result<Cleanup, String>)> = MODES
        .iter()
        .map(|m| (m.mode, (m.cleanup)(scope).map_err(|e| e.with_causes())))
        .collect();
    let (out, err) = report(&results, args.dry_run);
    print!("{out}");
    eprint!("{err}");
    if err.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// What to print on stdout and on stderr.
pub fn report(results: &[(ProxyMode, Result<Cleanup, String>)], dry_run: bool) -> (String, String) {
    let verb = if dry_run { "would remove" } else { "removed" };
    let (mut out, mut err) = (String::new(), String::new());
    let mut found = false;
    for (mode, result) in results {
        match result {
            Ok(c) => {
                for object in &c.objects {
                    found = true;
                    out.push_str(&format!("{mode} mode: {verb} {object}\n"));
                }
                for object in &c.left {
                    found = true;
                    out.push_str(&format!("{mode} mode: left {object}\n"));
                }
                if !c.skipped.is_empty() {
                    out.push_str(&format!(
                        "{mode} mode: not looked at: {}\n",
                        c.skipped.join(", ")
                    ));
                }
            }
            Err(e) => err.push_str(&format!("ferry cleanup: {mode} mode: {e}\n")),
        }
    }
    if !found && err.is_empty() {
        let nothing = if dry_run {
            "nothing would be removed"
        } else {
            "nothing to remove"
        };
        out.push_str(&format!(
            "{nothing}: no rules of Ferry's in this network namespace\n"
        ));
    }
    (out, err)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cleaned(objects: &[&str], skipped: &[&str]) -> Cleanup {
        Cleanup {
            objects: objects.iter().map(|s| (*s).to_owned()).collect(),
            skipped: skipped.iter().map(|s| (*s).to_owned()).collect(),
            left: Vec::new(),
        }
    }

    #[test]
    fn kube_proxys_objects_left_are_named_and_are_not_nothing() {
        let mut left = Cleanup::default();
        left.left
            .push("iptables-nft: 5 KUBE-* chains of kube-proxy's iptables layout".to_owned());
        let (out, err) = report(&[(ProxyMode::Iptables, Ok(left))], false);
        assert_eq!(
            out,
            "iptables mode: left iptables-nft: 5 KUBE-* chains of kube-proxy's iptables layout\n"
        );
        assert!(err.is_empty());
    }

    #[test]
    fn says_what_it_removed_per_mode() {
        let results = [
            (
                ProxyMode::Nftables,
                Ok(cleaned(&["table ip ferry", "table ip6 ferry"], &[])),
            ),
            (
                ProxyMode::Iptables,
                Ok(cleaned(&[], &["iptables-legacy is not installed"])),
            ),
        ];
        let (out, err) = report(&results, false);
        assert_eq!(
            out,
            "nftables mode: removed table ip ferry\nnftables mode: removed table ip6 ferry\n\
             iptables mode: not looked at: iptables-legacy is not installed\n"
        );
        assert!(err.is_empty());
        let (out, _) = report(&results, true);
        assert!(
            out.starts_with("nftables mode: would remove table ip ferry\n"),
            "{out}"
        );
    }

    #[test]
    fn says_when_there_was_nothing_and_names_failures() {
        let empty = [
            (ProxyMode::Nftables, Ok(Cleanup::default())),
            (ProxyMode::Iptables, Ok(Cleanup::default())),
        ];
        assert_eq!(
            report(&empty, false).0,
            "nothing to remove: no rules of Ferry's in this network namespace\n"
        );
        assert_eq!(
            report(&empty, true).0,
            "nothing would be removed: no rules of Ferry's in this network namespace\n"
        );
        let failed = [(ProxyMode::Nftables, Err("nft failed".to_owned()))];
        let (out, err) = report(&failed, false);
        assert!(out.is_empty(), "{out}");
        assert_eq!(err, "ferry cleanup: nftables mode: nft failed\n");
    }
}
