//! What a seed lab prints when a request fails: what the nodes' kernels hold, and the same
//! request a second later.

use std::time::Duration;

use ferry_lab::Host;

use super::{Mode, SeedLab, NODES};

impl SeedLab {
    /// The IPVS connection table and conntrack entries of the node a refused request came
    /// from (pods: their node).
    pub(super) fn first_refusal(&self, from: &Host) -> String {
        let node = match from {
            Host::Node(n) => n.clone(),
            Host::Pod(pod) => match self.lab.pod(pod) {
                Ok(info) => info.node.clone(),
                Err(_) => return String::new(),
            },
            Host::Client(_) => return String::new(),
        };
        [&["ipvsadm", "-Lnc"][..], &["conntrack", "-L"][..]]
            .iter()
            .map(|argv| self.dump(&node, argv))
            .collect()
    }

    /// What the kernel of every node holds for a failed request, and the same request tried
    /// again a second later: tells a missing rule from one that arrived late.
    pub(super) fn kernel_state(&self, from: &Host, url: &str) -> String {
        let dumps: &[&[&str]] = match self.mode {
            Mode::Ipvs => &[
                &["ip", "-br", "addr"],
                &["ipvsadm", "-Ln"],
                &["ipset", "list", "-t"],
            ],
            Mode::Nftables | Mode::Userspace => {
                &[&["ip", "-br", "addr"], &["nft", "list", "ruleset"]]
            }
            Mode::IptablesNft | Mode::IptablesLegacy => &[&["ip", "-br", "addr"]],
        };
        let mut out: String = NODES
            .iter()
            .flat_map(|(node, _)| dumps.iter().map(|argv| self.dump(node, argv)))
            .collect();
        std::thread::sleep(Duration::from_secs(1));
        out.push_str(&format!(
            "--- the same request a second later: {:?}\n",
            self.curl(from, url)
        ));
        out
    }

    /// `argv`'s output in `node`'s namespace (or why it failed), headed by node and command.
    fn dump(&self, node: &str, argv: &[&str]) -> String {
        let got = self.lab.exec(node, argv.iter().copied());
        format!(
            "--- {node}: {}:\n{}\n",
            argv.join(" "),
            got.unwrap_or_else(|e| e.to_string())
        )
    }
}
