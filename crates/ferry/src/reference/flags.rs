//! The command-line reference (`docs/src/reference/flags.md`): every subcommand and flag from
//! clap's definition of `ferry`, what Ferry does with each of kube-proxy's flags (asked of the
//! code that decides it), and the flags taken out before parsing.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use clap::{Arg, ArgAction, Command, CommandFactory as _, Parser as _};

use super::table::{code, Table};
use crate::cli::argv::IGNORED;
use crate::cli::{Cli, RunArgs};

/// The subcommands whose flags are `ferry run`'s (plus their own).
const TAKE_RUN_FLAGS: &[&str] = &["run", "rules", "check", "explain"];

/// The help heading of kube-proxy's other flags (`cli::kube_proxy`).
const KUBE_PROXY_HEADING: &str = "kube-proxy flags";

/// The page.
pub fn page() -> String {
    let cli = Cli::command();
    let run = cli.find_subcommand("run").expect("ferry run exists");
    let shared: BTreeSet<&str> = visible_args(run).map(|a| a.get_id().as_str()).collect();
    let mut out = super::generated_header("Command-line reference", "clap's definition of `ferry`");
    out.push_str(INTRO);
    let mut overview = Table::new(&["Command", "Does"]);
    for sub in visible_subcommands(&cli) {
        let name = format!("ferry {}", sub.get_name());
        overview.row(vec![format!("[`{name}`](#{})", anchor(&name)), about(sub)]);
    }
    out.push_str(&overview.render());
    for sub in visible_subcommands(&cli) {
        write_command(&mut out, &format!("ferry {}", sub.get_name()), sub, &shared);
    }
    write_shared(&mut out, run);
    write_gates(&mut out);
    write_ignored(&mut out);
    out
}

const INTRO: &str = "\
Every flag of kube-proxy is accepted under its upstream name and read as kube-proxy's flag \
library reads it: `--flag value` and `--flag=value`, booleans as `--flag` or \
`--flag=true|false` (Go's spellings: `1`, `t`, `True`, …), `-v 2`, `-v=2`, `--v=2`, and `_` \
for `-` in names (`--iptables_sync_period`). With no subcommand (`ferry --config=…`), or \
invoked as `kube-proxy`, Ferry runs `ferry run`: a kube-proxy DaemonSet's `command` works \
unchanged. A bad flag or value prints one message naming it and exits 64.

";

fn visible_subcommands(cmd: &Command) -> impl Iterator<Item = &Command> {
    cmd.get_subcommands().filter(|s| !s.is_hide_set())
}

fn visible_args(cmd: &Command) -> impl Iterator<Item = &Arg> {
    cmd.get_arguments()
        .filter(|a| !a.is_hide_set() && !matches!(a.get_id().as_str(), "help" | "version"))
}

/// mdBook's anchor of a heading: lower case, spaces to `-`, other punctuation dropped.
pub fn anchor(heading: &str) -> String {
    heading
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c.to_ascii_lowercase()),
            _ => None,
        })
        .collect()
}

fn about(cmd: &Command) -> String {
    cmd.get_long_about()
        .or(cmd.get_about())
        .map(|a| a.to_string())
        .unwrap_or_default()
}

fn help(arg: &Arg) -> String {
    arg.get_long_help()
        .or(arg.get_help())
        .map(|h| h.to_string())
        .unwrap_or_default()
}

fn write_command(out: &mut String, name: &str, cmd: &Command, shared: &BTreeSet<&str>) {
    let _ = writeln!(out, "## {name}\n\n{}\n", about(cmd));
    let takes_run_flags = TAKE_RUN_FLAGS.contains(&cmd.get_name()) && !name.contains(" lab ");
    let own: Vec<&Arg> = visible_args(cmd)
        .filter(|a| !takes_run_flags || !shared.contains(a.get_id().as_str()))
        .collect();
    let _ = writeln!(
        out,
        "```text\n{}\n```\n",
        usage(name, cmd, !own.is_empty() || takes_run_flags)
    );
    if takes_run_flags {
        let _ = writeln!(
            out,
            "Takes the [flags shared by run, rules, check and explain](#{}).\n",
            anchor(SHARED_HEADING)
        );
    }
    if !own.is_empty() {
        out.push_str(&flag_table(&own, help).render());
    }
    for sub in visible_subcommands(cmd) {
        write_command(out, &format!("{name} {}", sub.get_name()), sub, shared);
    }
}

/// `ferry explain [FLAGS]`, `ferry lab curl [FLAGS] <URL>`, `ferry lab <up|curl|down>`.
fn usage(name: &str, cmd: &Command, flags: bool) -> String {
    let mut line = name.to_owned();
    let subs: Vec<&str> = visible_subcommands(cmd).map(Command::get_name).collect();
    if !subs.is_empty() {
        line.push_str(&format!(" <{}>", subs.join("|")));
    }
    if flags {
        line.push_str(" [FLAGS]");
    }
    for arg in visible_args(cmd).filter(|a| a.is_positional()) {
        line.push_str(&format!(" <{}>", value_names(arg).unwrap_or_default()));
    }
    line
}

const SHARED_HEADING: &str = "Flags of run, rules, check and explain";

fn write_shared(out: &mut String, run: &Command) {
    let _ = writeln!(out, "## {SHARED_HEADING}\n");
    out.push_str(
        "A flag that sets a `KubeProxyConfiguration` field has that field's default (see the \
         [configuration reference](configuration.md)). Given next to `--config`, these flags \
         override the file (kube-proxy ignores most of them there; Ferry names each such flag \
         in a warning).\n\n",
    );
    let (kube_proxy, ferry): (Vec<&Arg>, Vec<&Arg>) = visible_args(run)
        .filter(|a| !a.is_positional())
        .partition(|a| a.get_help_heading() == Some(KUBE_PROXY_HEADING));
    out.push_str(&flag_table(&ferry, help).render());
    let _ = writeln!(out, "### kube-proxy's other flags\n");
    out.push_str(
        "Each writes its field of the `KubeProxyConfiguration`, so `/configz` and \
         `--write-config-to` show it. **Not acted on** means: accepted and recorded, and named \
         in one warning at start (`accepted for kube-proxy compatibility, not used by \
         Ferry: …`).\n\n",
    );
    out.push_str(&flag_table(&kube_proxy, kube_proxy_does).render());
}

/// What Ferry does with one of kube-proxy's other flags: its help, or, when the code names the
/// flag among those it does not act on, that.
fn kube_proxy_does(arg: &Arg) -> String {
    let text = help(arg);
    let text = text.strip_prefix("(recorded) ").unwrap_or(&text);
    if acted_on(arg) {
        text.to_owned()
    } else {
        format!("**Not acted on.** {text}")
    }
}

/// Whether Ferry acts on the flag: parses `ferry run --flag=1` (a value every flag's parser
/// takes; for `--feature-gates` a gate Ferry acts on) and asks
/// [`crate::cli::kube_proxy::KubeProxyFlags::not_used`].
fn acted_on(arg: &Arg) -> bool {
    let long = arg.get_long().expect("kube-proxy's flags are long flags");
    let value = match long {
        "feature-gates" => "KubeProxyIPVS=true",
        _ => "1",
    };
    let cli = crate::cli::Cli::try_parse_from(["ferry", "run", &format!("--{long}={value}")])
        .unwrap_or_else(|e| panic!("--{long}=1 does not parse: {e}"));
    let args: RunArgs = match cli.command {
        crate::cli::Command::Run(args) => args,
        other => panic!("not ferry run: {other:?}"),
    };
    !args
        .kube_proxy
        .not_used()
        .contains(&format!("--{long}").as_str())
}

/// The feature gates kube-proxy 1.37 consults, from [`crate::config::gates::GATES`].
fn write_gates(out: &mut String) {
    use crate::config::gates::{Handling, GATES};
    let _ = writeln!(out, "### Feature gates\n");
    out.push_str(
        "The gates kube-proxy 1.37 consults (`--feature-gates`, `featureGates`). A locked gate \
         set against its lock is refused at start, in kube-proxy's words; a gate not listed is \
         recorded and named in the warning.\n\n",
    );
    let mut table = Table::new(&["Gate", "Default", "Does"]);
    for gate in GATES {
        let default = if gate.locked {
            format!("{} (locked)", gate.default)
        } else {
            gate.default.to_string()
        };
        let does = match gate.handling {
            Handling::Acts(what) => format!("As in kube-proxy: {what}"),
            Handling::Recorded(why) => format!("**Not acted on.** {why}"),
        };
        table.row(vec![code(gate.name), code(&default), does]);
    }
    out.push_str(&table.render());
}

fn write_ignored(out: &mut String) {
    let _ = writeln!(out, "### Flags taken out before parsing\n");
    out.push_str(
        "Flags kube-proxy has removed, has only on Windows, or that only steered klog: taken \
         out of the command line (with their value) and named in the same single warning, so a \
         copied DaemonSet never crash-loops on them.\n\n",
    );
    let mut table = Table::new(&["Flag", "Takes a value"]);
    for (name, is_bool) in IGNORED {
        let value = if *is_bool { "no (boolean)" } else { "yes" };
        table.row(vec![code(&format!("--{name}")), value.to_owned()]);
    }
    out.push_str(&table.render());
}

/// A table of flags; the Default column only when a flag has a default (most take theirs from
/// the configuration's field: see the configuration reference).
fn flag_table(args: &[&Arg], does: impl Fn(&Arg) -> String) -> Table {
    let with_default = args.iter().any(|a| !a.get_default_values().is_empty());
    let mut table = if with_default {
        Table::new(&["Flag", "Value", "Default", "Does"])
    } else {
        Table::new(&["Flag", "Value", "Does"])
    };
    for arg in args {
        let mut row = vec![flag_name(arg), value(arg)];
        if with_default {
            row.push(default(arg));
        }
        row.push(does(arg));
        table.row(row);
    }
    table
}

fn flag_name(arg: &Arg) -> String {
    match (arg.get_short(), arg.get_long()) {
        (Some(s), Some(l)) => format!("`-{s}`, `--{l}`"),
        (Some(s), None) => code(&format!("-{s}")),
        (None, Some(l)) => code(&format!("--{l}")),
        (None, None) => code(&format!("<{}>", value_names(arg).unwrap_or_default())),
    }
}

fn value_names(arg: &Arg) -> Option<String> {
    arg.get_value_names()
        .map(|v| v.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(" "))
        .or_else(|| Some(arg.get_id().as_str().to_uppercase()))
}

/// The value a flag takes: its possible values, `[=BOOL]` for kube-proxy's optional booleans,
/// nothing for a switch.
fn value(arg: &Arg) -> String {
    if matches!(arg.get_action(), ArgAction::SetTrue | ArgAction::SetFalse) {
        return String::new();
    }
    let possible: Vec<String> = arg
        .get_possible_values()
        .iter()
        .filter(|p| !p.is_hide_set())
        .map(|p| p.get_name().to_owned())
        .collect();
    let name = if possible.is_empty() {
        value_names(arg).unwrap_or_default()
    } else {
        possible.join("|")
    };
    let optional = arg.get_num_args().is_some_and(|n| n.min_values() == 0);
    if optional {
        code(&format!("[={name}]"))
    } else {
        code(&name)
    }
}

fn default(arg: &Arg) -> String {
    let values: Vec<String> = arg
        .get_default_values()
        .iter()
        .map(|v| v.to_string_lossy().into_owned())
        .collect();
    if values.is_empty() {
        String::new()
    } else {
        code(&values.join(","))
    }
}
