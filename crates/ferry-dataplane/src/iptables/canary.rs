//! iptables mode's periodic check (upstream kube-proxy's canary, made to notice flushed
//! chains too): what is missing of Ferry's rules, found with a few cheap commands.

use ferry_compile::iptables::{jump_rules, Table, CANARY};

use super::{jump_args, IptablesDataplane, IptablesRunner};
use crate::iptables_tool::saved::first_changed;
use crate::Error;

impl<R: IptablesRunner> IptablesDataplane<R> {
    /// What is missing of Ferry's rules: mangle's canary chain (upstream's signal: a firewall
    /// reload deletes every table's chains, and `nft flush ruleset` the nft backend's tables),
    /// the first jump from a built-in chain in filter and in nat (`iptables -t nat -F` keeps
    /// the chains, the canary among them, but empties them), then the rules of each top-level
    /// chain that should hold some (`iptables -t nat -F KUBE-SERVICES` empties one chain):
    /// one `-S CHAIN` each, its rules counted. Each nat command makes iptables-legacy read the
    /// whole nat table (see docs/src/modes/iptables-layout.md for its cost): made once per sync period,
    /// not on every sync.
    pub(super) fn damage(&mut self) -> Result<Option<String>, Error> {
        if !self.runner.iptables(&["-t", "mangle", "-S", CANARY])? {
            return Ok(Some(format!("canary chain {CANARY} is gone from mangle")));
        }
        let jumps = jump_rules();
        for table in [Table::Filter, Table::Nat] {
            let Some(jump) = jumps.iter().find(|j| j.table == table) else {
                continue;
            };
            if !self.runner.check(&jump_args(jump, "-C"))? {
                return Ok(Some(format!(
                    "the jump from {} {} into Ferry's chains is gone",
                    table.as_str(),
                    jump.chain
                )));
            }
        }
        let Some(installed) = &self.installed else {
            return Ok(None);
        };
        let runner = &mut self.runner;
        first_changed(&installed.top_level_rules(), |table, chain| {
            runner.rules_in(table, chain)
        })
    }
}
