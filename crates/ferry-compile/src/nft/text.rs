//! The ruleset as one `table { … }` block, in the layout `nft list table` prints.
//!
//! This is what `ferry rules` prints and what golden files hold: readable, loadable with
//! `nft -f`, checkable with `nft -c -f`.

use std::fmt::{self, Write as _};

use super::model::Ruleset;
use super::script::TABLE;

fn chain_block<R: fmt::Display>(out: &mut String, name: &str, rules: &[R], header: Option<String>) {
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
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let family = crate::family::nft_family(self.family);
        let mut out = String::new();
        let _ = writeln!(out, "table {family} {TABLE} {{");
        out.push_str("\tcomment \"rules for Ferry\"\n");
        let elements = self.all_elements();
        for s in &self.sets {
            let _ = writeln!(out, "\t{} {} {{", s.kind(), s.name);
            let _ = writeln!(out, "\t\t{}", s.decl);
            if s.interval {
                out.push_str("\t\tflags interval\n");
            }
            if s.dynamic {
                out.push_str("\t\tflags dynamic,timeout\n\t\tsize 1048576\n");
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
        for c in self.dispatch_chains() {
            chain_block(&mut out, &c.name, &c.rules, None);
        }
        out.push_str("}\n");
        f.write_str(&out)
    }
}
