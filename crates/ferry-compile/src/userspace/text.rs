//! The userspace table as text: the `table { … }` block `ferry rules` prints and golden files
//! hold, the `nft -f` scripts that install it (whole, or element changes only), and the
//! proxy-port table.

use std::collections::BTreeSet;
use std::fmt::{self, Write as _};

use ferry_model::IpFamily;

use super::{Element, Proxied, Ruleset, Value};
use crate::nft::TABLE;

fn family(f: IpFamily) -> &'static str {
    match f {
        IpFamily::V4 => "ip",
        IpFamily::V6 => "ip6",
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Port(p) => write!(f, "{p}"),
            Value::Verdict(v) => v.fmt(f),
        }
    }
}

impl fmt::Display for Element {
    /// As nft writes it inside `elements = { … }`: key, comment, value.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.key)?;
        if let Some(c) = &self.comment {
            write!(f, " comment \"{c}\"")?;
        }
        if let Some(v) = &self.value {
            write!(f, " : {v}")?;
        }
        Ok(())
    }
}

fn chain_block(out: &mut String, name: &str, rules: &[String], header: Option<String>) {
    let _ = writeln!(out, "\tchain {name} {{");
    if let Some(h) = header {
        let _ = writeln!(out, "\t\t{h}");
    }
    for r in rules {
        let _ = writeln!(out, "\t\t{r}");
    }
    out.push_str("\t}\n");
}

impl fmt::Display for Ruleset {
    /// One `table { … }` block in the layout `nft list table` prints, loadable with `nft -f`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = String::new();
        let _ = writeln!(out, "table {} {TABLE} {{", family(self.family));
        out.push_str("\tcomment \"rules for Ferry (userspace proxy mode)\"\n");
        let elements = self.all_elements();
        for s in &self.sets {
            let _ = writeln!(out, "\t{} {} {{", s.kind(), s.name);
            let _ = writeln!(out, "\t\t{}", s.decl);
            if s.interval {
                out.push_str("\t\tflags interval\n");
            }
            let _ = writeln!(out, "\t\tcomment \"{}\"", s.comment);
            if let Some(els) = elements.get(s.name) {
                out.push_str("\t\telements = {");
                for (i, e) in els.iter().enumerate() {
                    let sep = if i == 0 { " " } else { ",\n\t\t\t     " };
                    let _ = write!(out, "{sep}{e}");
                }
                out.push_str(" }\n");
            }
            out.push_str("\t}\n");
        }
        for b in &self.base_chains {
            let header = format!(
                "type {} hook {} priority {}; policy accept;",
                b.kind, b.hook, b.priority
            );
            chain_block(&mut out, &b.chain.name, &b.chain.rules, Some(header));
        }
        for c in &self.chains {
            chain_block(&mut out, &c.name, &c.rules, None);
        }
        out.push_str("}\n");
        f.write_str(&out)
    }
}

/// The `nft -f` script that replaces whatever Ferry's table of the family holds (nftables
/// mode's, or an older userspace one) with `ruleset`, atomically.
pub fn script_full(ruleset: &Ruleset) -> String {
    let table = format!("{} {TABLE}", family(ruleset.family));
    format!("add table {table}\ndelete table {table}\n{ruleset}")
}

/// The `nft -f` script that moves the kernel from `old` to `new` by element changes only, or
/// `None` when more than elements changed (a [`script_full`] is needed). `Some("")` when
/// nothing changed.
pub fn delta(old: &Ruleset, new: &Ruleset) -> Option<String> {
    if !old.same_base(new) {
        return None;
    }
    let set = |r: &Ruleset| -> BTreeSet<Element> {
        r.all_elements().into_values().flatten().cloned().collect()
    };
    let (before, after) = (set(old), set(new));
    let table = format!("{} {TABLE}", family(new.family));
    let mut out = String::new();
    // Deletions first: a frontend whose value changes (another proxy port, or from a redirect
    // to a verdict) is deleted, then added with its new value, in the same transaction.
    for e in before.difference(&after) {
        let _ = writeln!(out, "delete element {table} {} {{ {} }}", e.set, e.key);
    }
    for e in after.difference(&before) {
        let _ = writeln!(out, "add element {table} {} {{ {e} }}", e.set);
    }
    Some(out)
}

/// The proxy-port table `ferry rules` prints after the rules: which listener serves which
/// service port, and its frontends.
pub fn port_table(ruleset: &Ruleset) -> String {
    let mut out = format!(
        "# proxy ports ({}): listener <- service port <- frontends\n",
        family(ruleset.family)
    );
    for (name, rules) in &ruleset.ports {
        let listener = match rules.proxied {
            Proxied::Port(p) => format!("{p}"),
            Proxied::Sctp => "-".to_owned(),
            Proxied::NoPort => "none".to_owned(),
        };
        let _ = write!(
            out,
            "# {listener:>5}/{} <- {name} <- {}",
            name.protocol,
            rules.frontends.join(", ")
        );
        out.push_str(match rules.proxied {
            Proxied::Port(_) => "\n",
            Proxied::Sctp => "   (SCTP is not proxied in user space: rejected)\n",
            Proxied::NoPort => "   (no free proxy port in the range: rejected)\n",
        });
    }
    out
}
