//! The command line as kube-proxy's flag library (pflag, with Kubernetes' word-separator
//! normalisation) reads it, turned into what clap parses: `--flag_name` is `--flag-name`, a
//! copied DaemonSet's `kube-proxy --config=…` (no subcommand) is `ferry run --config=…`, and
//! flags kube-proxy has removed or only has on Windows, or that only steer klog, are taken out
//! and named in one warning instead of failing the start.

use std::ffi::OsString;

/// Flags kube-proxy accepted once (or accepts on Windows, or through klog) that mean nothing to
/// Ferry: the name, and whether it is a boolean (takes no separate value).
pub const IGNORED: &[(&str, bool)] = &[
    // Removed from kube-proxy, still in old DaemonSets.
    ("cleanup-iptables", true),
    ("cleanup-ipvs", true),
    ("resource-container", false),
    ("conntrack-max", false),
    // Cloud-provider and credential flags that leaked into every component until 1.2x.
    ("azure-container-registry-config", false),
    ("boot-id-file", false),
    ("cloud-provider-gce-l7lb-src-cidrs", false),
    ("cloud-provider-gce-lb-src-cidrs", false),
    // Windows only.
    ("windows-service", true),
    ("source-vip", false),
    ("network-name", false),
    ("enable-dsr", true),
    ("root-hnsendpoint-name", false),
    ("forward-healthcheck-vip", true),
    // klog's flags, removed from Kubernetes components in 1.26.
    ("logtostderr", true),
    ("alsologtostderr", true),
    ("log-dir", false),
    ("log-file", false),
    ("log-file-max-size", false),
    ("skip-headers", true),
    ("skip-log-headers", true),
    ("stderrthreshold", false),
    ("one-output", true),
    ("add-dir-header", true),
    ("log-backtrace-at", false),
];

/// Subcommands, and the flags that are handled before one is needed.
const SUBCOMMANDS: &[&str] = &[
    "run", "rules", "check", "explain", "cleanup", "lab", "lab-pod", "version", "status", "help",
];

/// The command line, rewritten for clap, and the ignored flags it held (`--name`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Normalized {
    /// Arguments for clap (the program name first).
    pub args: Vec<OsString>,
    /// Ignored flags, as given.
    pub ignored: Vec<String>,
}

/// Normalises `args` (the program name first). Invoked as `kube-proxy` (a symlink in the image)
/// or with a flag where the subcommand would be, the subcommand is `run`.
pub fn normalize(args: impl IntoIterator<Item = OsString>) -> Normalized {
    let mut args = args.into_iter();
    let program = args.next().unwrap_or_else(|| OsString::from("ferry"));
    let rest: Vec<OsString> = args.collect();
    let as_kube_proxy = std::path::Path::new(&program)
        .file_name()
        .is_some_and(|n| n == "kube-proxy");
    let first = rest.first().and_then(|a| a.to_str()).unwrap_or("");
    // kube-proxy's `--version` (`=true`, `=raw`) prints the version and exits, wherever it
    // is among the flags; `--version=false` is no flag at all.
    let version_flag = |a: &OsString| {
        a.to_str().is_some_and(|t| {
            matches!(t, "--version" | "-version")
                || t.strip_prefix("--version=").is_some_and(|v| v != "false")
        })
    };
    if as_kube_proxy && !SUBCOMMANDS.contains(&first) && rest.iter().any(version_flag) {
        return Normalized {
            args: vec![program, OsString::from("version")],
            ignored: Vec::new(),
        };
    }
    let rest: Vec<OsString> = rest
        .into_iter()
        .filter(|a| a.to_str() != Some("--version=false"))
        .collect();
    let first = rest.first().and_then(|a| a.to_str()).unwrap_or("");
    let implicit_run = as_kube_proxy
        || (first.starts_with('-')
            && !matches!(
                first,
                "-h" | "--help" | "-V" | "--version" | "--version=raw"
            ));
    let mut out = vec![program];
    if implicit_run && !SUBCOMMANDS.contains(&first) {
        out.push(OsString::from("run"));
    }
    let mut ignored = Vec::new();
    let mut iter = rest.into_iter().peekable();
    while let Some(arg) = iter.next() {
        let Some(text) = arg.to_str() else {
            out.push(arg);
            continue;
        };
        if text == "--" {
            out.push(arg);
            out.extend(iter.by_ref());
            break;
        }
        let Some(flag) = text.strip_prefix("--") else {
            out.push(arg);
            continue;
        };
        let (name, value) = match flag.split_once('=') {
            Some((n, v)) => (n.replace('_', "-"), Some(v)),
            None => (flag.replace('_', "-"), None),
        };
        if let Some((_, is_bool)) = IGNORED.iter().find(|(n, _)| *n == name) {
            ignored.push(format!("--{name}"));
            if value.is_none() && !is_bool {
                iter.next();
            }
            continue;
        }
        out.push(OsString::from(match value {
            Some(v) => format!("--{name}={v}"),
            None => format!("--{name}"),
        }));
    }
    Normalized { args: out, ignored }
}

/// Parses a boolean as Go's `strconv.ParseBool` (what kube-proxy's `--flag=value` takes).
pub fn parse_go_bool(s: &str) -> Result<bool, String> {
    match s {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Ok(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Ok(false),
        other => Err(format!("{other:?} is not a boolean (true or false)")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn norm(args: &[&str]) -> Normalized {
        normalize(args.iter().map(OsString::from))
    }

    fn strs(n: &Normalized) -> Vec<&str> {
        n.args.iter().map(|a| a.to_str().expect("utf-8")).collect()
    }

    #[test]
    fn a_copied_daemonsets_args_run_the_proxy() {
        let n = norm(&[
            "ferry",
            "--config=/var/lib/kube-proxy/config.conf",
            "--hostname-override=n1",
        ]);
        assert_eq!(
            strs(&n),
            [
                "ferry",
                "run",
                "--config=/var/lib/kube-proxy/config.conf",
                "--hostname-override=n1"
            ]
        );
        let n = norm(&["/usr/local/bin/kube-proxy", "--v=2"]);
        assert_eq!(strs(&n), ["/usr/local/bin/kube-proxy", "run", "--v=2"]);
        assert_eq!(
            strs(&norm(&["ferry", "check", "--v=2"])),
            ["ferry", "check", "--v=2"]
        );
        assert_eq!(strs(&norm(&["ferry", "--help"])), ["ferry", "--help"]);
    }

    #[test]
    fn underscores_in_flag_names_are_dashes_values_untouched() {
        let n = norm(&[
            "ferry",
            "run",
            "--iptables_sync_period=10s",
            "--hostname_override",
            "a_b",
        ]);
        assert_eq!(
            strs(&n),
            [
                "ferry",
                "run",
                "--iptables-sync-period=10s",
                "--hostname-override",
                "a_b"
            ]
        );
    }

    #[test]
    fn removed_windows_and_klog_flags_are_taken_out_with_their_values() {
        let n = norm(&[
            "ferry",
            "run",
            "--logtostderr",
            "--log-dir",
            "/var/log",
            "--resource-container=/kube-proxy",
            "--alsologtostderr=true",
            "--v=2",
        ]);
        assert_eq!(strs(&n), ["ferry", "run", "--v=2"]);
        assert_eq!(
            n.ignored,
            [
                "--logtostderr",
                "--log-dir",
                "--resource-container",
                "--alsologtostderr"
            ]
        );
    }

    #[test]
    fn booleans_are_gos() {
        assert_eq!(parse_go_bool("True"), Ok(true));
        assert_eq!(parse_go_bool("0"), Ok(false));
        assert!(parse_go_bool("yes").is_err());
    }
}
