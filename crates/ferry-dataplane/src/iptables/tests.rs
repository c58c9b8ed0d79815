use std::collections::{BTreeMap, BTreeSet};

use ferry_compile::iptables::{Ruleset, ServiceRules, Table, CANARY};
use ferry_model::{IpFamily, ServiceName};

use super::cleanup::cleanup_with;
use super::*;
use crate::cleanup::{Cleanup, Scope};

/// Records what was sent; answers `-C`/`-S` from a set of present rules and chains.
#[derive(Default)]
struct Fake {
    restores: Vec<String>,
    commands: Vec<String>,
    present: BTreeSet<String>,
    save: String,
    /// Rules per `(table, chain)` as the restores left them.
    rules: BTreeMap<(String, String), usize>,
    /// What `-S` lists per `(table, chain)`.
    listed: BTreeMap<(String, String), Vec<String>>,
}

impl IptablesRunner for Fake {
    fn restore(&mut self, input: &str) -> Result<(), Error> {
        self.restores.push(input.to_owned());
        // Jumps inserted by the restore are there afterwards, keyed like `-C` questions.
        let mut table = "";
        for line in input.lines() {
            if let Some(t) = line.strip_prefix('*') {
                table = t;
            } else if let Some(rule) = line.strip_prefix("-I ") {
                self.present
                    .insert(format!("-t {table} {}", rule.replace('"', "")));
            } else if let Some(chain) = line.strip_prefix(':') {
                let chain = chain.split_whitespace().next().unwrap_or_default();
                self.rules.insert((table.to_owned(), chain.to_owned()), 0);
            } else if let Some(rule) = line.strip_prefix("-A ") {
                let chain = rule.split_whitespace().next().unwrap_or_default();
                *self
                    .rules
                    .entry((table.to_owned(), chain.to_owned()))
                    .or_default() += 1;
            }
        }
        Ok(())
    }

    fn iptables(&mut self, args: &[&str]) -> Result<bool, Error> {
        let line = args.join(" ");
        self.commands.push(line.clone());
        let key = line
            .replacen(" -C ", " ", 1)
            .replacen(" -D ", " ", 1)
            .replacen(" -S ", " ", 1);
        Ok(match args.get(2) {
            Some(&"-I") => {
                self.present.insert(line.replacen(" -I ", " ", 1));
                true
            }
            Some(&"-D") => self.present.remove(&key),
            _ => self.present.contains(&key),
        })
    }

    fn save(&mut self, _table: Option<Table>) -> Result<String, Error> {
        Ok(self.save.clone())
    }

    fn list_rules(&mut self, table: Table, chain: &str) -> Result<Vec<String>, Error> {
        let key = (table.as_str().to_owned(), chain.to_owned());
        Ok(self.listed.get(&key).cloned().unwrap_or_default())
    }

    fn rules_in(&mut self, table: Table, chain: &str) -> Result<Option<usize>, Error> {
        let key = (table.as_str().to_owned(), chain.to_owned());
        Ok(Some(self.rules.get(&key).copied().unwrap_or(0)))
    }
}

fn ruleset(services: &[(&str, &str)]) -> Ruleset {
    let mut rs = Ruleset {
        family: IpFamily::V4,
        nat: Vec::new(),
        filter: Vec::new(),
        nodeport_jumps: Vec::new(),
        external_first: Vec::new(),
        large_cluster: false,
        services: BTreeMap::new(),
    };
    for (name, chain) in services {
        rs.set_service(
            ServiceName::new("dev", *name),
            Some(ServiceRules {
                chains: vec![ferry_compile::iptables::Chain {
                    name: (*chain).to_owned(),
                    rules: vec!["-j RETURN".to_owned()],
                }],
                ..ServiceRules::default()
            }),
        );
    }
    rs
}

#[test]
fn the_first_full_sync_deletes_leftover_service_chains_and_inserts_each_jump_once() {
    let fake = Fake {
        save: "*nat\n:KUBE-SERVICES - [0:0]\n:KUBE-SEP-OLD - [0:0]\n:DOCKER - [0:0]\nCOMMIT\n"
            .into(),
        ..Fake::default()
    };
    let mut dp = IptablesDataplane::with_runner(fake);
    dp.apply_full(ruleset(&[("a", "KUBE-SVC-A")]))
        .expect("sync");
    let text = &dp.runner().restores[0];
    assert!(text.contains("-X KUBE-SEP-OLD"), "{text}");
    assert!(
        !text.contains("DOCKER"),
        "never touches chains that are not Ferry's: {text}"
    );
    let inserts = |text: &str| text.lines().filter(|l| l.starts_with("-I ")).count();
    assert_eq!(inserts(text), jump_rules().len(), "{text}");
    assert!(
        dp.runner().commands.iter().all(|c| c.contains(" -C ")),
        "jumps are only checked with the tool, inserted by the restore"
    );
    assert!(
        text.contains(
            "-I PREROUTING -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES\n"
        ),
        "{text}"
    );
    dp.apply_full(ruleset(&[("a", "KUBE-SVC-A")]))
        .expect("resync");
    assert_eq!(
        inserts(&dp.runner().restores[1]),
        0,
        "present jumps are not inserted again"
    );
}

#[test]
fn a_first_sync_over_chains_an_earlier_run_left_rewrites_only_those_that_differ() {
    // As iptables-save prints what an earlier run wrote: A's chain as wanted (in the save's
    // spelling), B's with another rule, C's no longer wanted.
    let desired = || {
        let mut rs = ruleset(&[("a", "KUBE-SVC-A"), ("b", "KUBE-SVC-B")]);
        for svc in rs.services.values_mut() {
            svc.chains[0].rules = vec!["-m tcp -p tcp -d 10.96.0.1 --dport 80 -j RETURN".into()];
        }
        rs
    };
    let fake = Fake {
        save: "*nat\n:KUBE-SERVICES - [0:0]\n:KUBE-SVC-A - [0:0]\n:KUBE-SVC-B - [0:0]\n\
               :KUBE-SVC-C - [0:0]\n\
               -A KUBE-SVC-A -d 10.96.0.1/32 -p tcp -m tcp --dport 80 -j RETURN\n\
               -A KUBE-SVC-B -d 10.96.0.1/32 -p tcp -m tcp --dport 81 -j RETURN\n\
               -A KUBE-SVC-C -j RETURN\nCOMMIT\n"
            .into(),
        ..Fake::default()
    };
    let mut dp = IptablesDataplane::with_runner(fake);
    dp.apply_full(desired()).expect("sync");
    let text = &dp.runner().restores[0];
    assert!(!text.contains("KUBE-SVC-A"), "A is as wanted: {text}");
    assert!(
        text.contains(":KUBE-SVC-B - [0:0]\n") && text.contains("-A KUBE-SVC-B "),
        "{text}"
    );
    assert!(text.contains("-X KUBE-SVC-C"), "{text}");
    assert!(
        text.contains(":KUBE-SERVICES - [0:0]"),
        "top-level chains are written: {text}"
    );
    // Once this process has written its rules, a full sync writes every chain again.
    dp.apply_full(desired()).expect("resync");
    assert!(dp.runner().restores[1].contains("-A KUBE-SVC-A "));
}

/// A ruleset of ten services, one chain each.
fn ten_services() -> Ruleset {
    let services: Vec<(String, String)> = (0..10)
        .map(|i| (format!("s{i}"), format!("KUBE-SVC-{i}")))
        .collect();
    let refs: Vec<(&str, &str)> = services
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    ruleset(&refs)
}

#[test]
fn on_iptables_nft_a_full_sync_spreads_the_nat_chains_over_transactions() {
    let mut dp =
        IptablesDataplane::with_runner(Fake::default()).with_transactions(Transactions::Nft {
            whole_up_to: 0,
            per_section: 3,
        });
    dp.apply_full(ten_services()).expect("sync");
    let text = &dp.runner().restores[0];
    assert_eq!(dp.runner().restores.len(), 1, "one run of the tool");
    assert!(text.matches("*nat\n").count() >= 4, "{text}");
}

#[test]
fn on_iptables_nft_a_full_sync_of_a_small_ruleset_is_one_transaction() {
    // A process killed mid-sync must leave the old rules or the new ones, never some Services
    // of each (the kill drill found that with 100 × 10 split in 250-chain transactions).
    let mut dp =
        IptablesDataplane::with_runner(Fake::default()).with_transactions(Transactions::Nft {
            whole_up_to: super::NFT_ONE_TRANSACTION_UP_TO,
            per_section: 3,
        });
    dp.apply_full(ten_services()).expect("sync");
    let text = &dp.runner().restores[0];
    assert_eq!(text.matches("*nat\n").count(), 1, "{text}");
}

#[test]
fn the_periodic_check_finds_a_missing_canary_or_a_flushed_table() {
    let mut dp = IptablesDataplane::with_runner(Fake::default());
    assert!(
        dp.intact().expect("check"),
        "nothing installed: nothing to miss"
    );
    dp.apply_full(ruleset(&[])).expect("sync");
    assert!(!dp.intact().expect("check"), "the fake holds no canary");
    assert!(dp.installed().is_none(), "what was installed is forgotten");
    dp.runner.present.insert(format!("-t mangle {CANARY}"));
    dp.apply_full(ruleset(&[])).expect("sync");
    assert!(dp.intact().expect("check"), "canary and jumps are there");
    // `iptables -t nat -F` empties nat's chains, the canary stays.
    dp.runner
        .present
        .retain(|rule| !rule.starts_with("-t nat "));
    assert!(!dp.intact().expect("check"));
    assert!(dp.installed().is_none());
}

#[test]
fn the_periodic_check_finds_a_flushed_top_level_chain() {
    let mut dp = IptablesDataplane::with_runner(Fake::default());
    dp.runner.present.insert(format!("-t mangle {CANARY}"));
    let mut rs = ruleset(&[("a", "KUBE-SVC-A")]);
    if let Some(a) = rs.services.values_mut().next() {
        a.nat_services = vec!["-d 10.96.0.10/32 -j KUBE-SVC-A".to_owned()];
    }
    rs.nodeport_jumps = vec!["-j KUBE-NODEPORTS".to_owned()];
    dp.apply_full(rs).expect("sync");
    assert!(dp.intact().expect("check"), "as written");
    // `iptables -t nat -F KUBE-SERVICES`: the canary and the jumps stay.
    dp.runner
        .rules
        .insert(("nat".to_owned(), "KUBE-SERVICES".to_owned()), 0);
    assert!(!dp.intact().expect("check"));
    assert!(dp.installed().is_none(), "what was installed is forgotten");
}

#[test]
fn top_level_chains_are_compared_by_their_rule_count() {
    let written = [
        (Table::Filter, "KUBE-FORWARD", 3),
        (Table::Filter, "KUBE-PROXY-FIREWALL", 0),
        (Table::Nat, "KUBE-SERVICES", 2),
    ];
    let mut asked = Vec::new();
    let mut ask = |kernel: [usize; 2]| {
        crate::iptables_tool::saved::first_changed(&written, |t, c| {
            asked.push(format!("{} {c}", t.as_str()));
            Ok(Some(if c == "KUBE-FORWARD" {
                kernel[0]
            } else {
                kernel[1]
            }))
        })
        .expect("no kernel error")
    };
    assert_eq!(ask([3, 2]), None);
    assert_eq!(
        ask([3, 0]).as_deref(),
        Some("chain nat KUBE-SERVICES holds 0 rules, 2 were written")
    );
    assert_eq!(
        ask([4, 2]).as_deref(),
        Some("chain filter KUBE-FORWARD holds 4 rules, 3 were written")
    );
    assert!(
        !asked.iter().any(|a| a.contains("KUBE-PROXY-FIREWALL")),
        "a chain written empty costs no command: {asked:?}"
    );
    let unknown =
        crate::iptables_tool::saved::first_changed(&written, |_, _| Ok(None)).expect("no error");
    assert_eq!(unknown, None, "a runner that cannot tell finds nothing");
}

#[test]
fn an_iptables_listing_counts_its_rules() {
    let listing = "-N KUBE-SERVICES\n-A KUBE-SERVICES -d 10.96.0.10/32 -j KUBE-SVC-A\n\
                   -A KUBE-SERVICES -j KUBE-NODEPORTS\n";
    assert_eq!(crate::iptables_tool::count_rules(listing), 2);
    assert_eq!(crate::iptables_tool::count_rules("-N KUBE-SERVICES\n"), 0);
}

#[test]
fn a_partial_sync_runs_nothing_but_its_restore() {
    let mut dp = IptablesDataplane::with_runner(Fake::default());
    dp.apply_full(ruleset(&[("a", "KUBE-SVC-A")]))
        .expect("sync");
    dp.runner.commands.clear();
    let changed = ruleset(&[("a", "KUBE-SVC-A2")]).services;
    let changes = changed.into_iter().map(|(k, v)| (k, Some(v))).collect();
    dp.apply_changes(changes).expect("partial");
    assert_eq!(dp.runner().commands, Vec::<String>::new());
    assert_eq!(dp.runner().restores.len(), 2);
}

#[test]
fn a_partial_sync_of_an_unchanged_service_sends_nothing() {
    let mut dp = IptablesDataplane::with_runner(Fake::default());
    let rs = ruleset(&[("a", "KUBE-SVC-A")]);
    let same = rs
        .services
        .clone()
        .into_iter()
        .map(|(k, v)| (k, Some(v)))
        .collect();
    dp.apply_full(rs).expect("sync");
    let r = dp.apply_changes(same).expect("partial");
    assert_eq!(r.script_bytes, 0);
    assert_eq!(dp.runner().restores.len(), 1);
}

/// The KUBE-* layout's chains, with kube-proxy's jumps (not the text Ferry writes: a
/// `--ctstate NEW` more), and with Ferry's owner marker when `ferrys`.
fn with_kube_chains(ferrys: bool) -> Fake {
    let listed = |table: &str, chain: &str, rules: &[&str]| {
        (
            (table.to_owned(), chain.to_owned()),
            rules.iter().map(|r| (*r).to_owned()).collect::<Vec<_>>(),
        )
    };
    let mut present = BTreeSet::new();
    if ferrys {
        present.insert(format!(
            "-t nat KUBE-POSTROUTING {}",
            ferry_compile::iptables::owner_marker_args().join(" ")
        ));
    }
    Fake {
        save: "*filter\n:INPUT ACCEPT [0:0]\n:KUBE-FORWARD - [0:0]\n:MINE - [0:0]\nCOMMIT\n\
               *nat\n:KUBE-SERVICES - [0:0]\n:KUBE-SVC-X - [0:0]\n:KUBE-PROXY-CANARY - [0:0]\nCOMMIT\n"
            .into(),
        present,
        listed: [
            listed(
                "nat",
                "PREROUTING",
                &["-A PREROUTING -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES"],
            ),
            listed(
                "filter",
                "FORWARD",
                &[
                    "-A FORWARD -j MINE",
                    "-A FORWARD -m conntrack --ctstate NEW -m comment --comment \"kubernetes forwarding rules\" -j KUBE-FORWARD",
                ],
            ),
        ]
        .into_iter()
        .collect(),
        ..Fake::default()
    }
}

const FERRYS: Scope = Scope {
    dry_run: false,
    kube_proxy: false,
};

#[test]
fn cleanup_removes_the_listed_jumps_and_ferrys_chains_in_one_restore_and_says_which() {
    let mut fake = with_kube_chains(true);
    let removed = cleanup_with(&mut fake, "iptables-nft", FERRYS).expect("cleanup");
    assert_eq!(fake.restores.len(), 1);
    let text = &fake.restores[0];
    for c in [
        "KUBE-FORWARD",
        "KUBE-SERVICES",
        "KUBE-SVC-X",
        "KUBE-PROXY-CANARY",
    ] {
        assert!(text.contains(&format!("-X {c}\n")), "{c}: {text}");
    }
    assert!(
        text.contains("-D FORWARD -m conntrack --ctstate NEW -m comment --comment \"kubernetes forwarding rules\" -j KUBE-FORWARD\n")
            && text.contains("-D PREROUTING -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES\n"),
        "{text}"
    );
    assert!(!text.contains("MINE") && !text.contains("mangle"), "{text}");
    assert_eq!(
        removed.objects,
        [
            "Ferry's iptables-nft jumps: filter FORWARD → KUBE-FORWARD, nat PREROUTING → KUBE-SERVICES",
            "Ferry's iptables-nft filter chains: KUBE-FORWARD",
            "Ferry's iptables-nft nat chains: KUBE-SERVICES, KUBE-PROXY-CANARY, 1 per-service chain (KUBE-SVC-X, …)",
        ]
    );
    assert!(removed.left.is_empty(), "{removed:?}");
}

#[test]
fn kube_proxys_chains_are_left_unless_asked_for() {
    let mut fake = with_kube_chains(false);
    let found = cleanup_with(&mut fake, "iptables-nft", FERRYS).expect("cleanup");
    assert!(fake.restores.is_empty(), "{:?}", fake.restores);
    assert!(found.objects.is_empty(), "{found:?}");
    assert_eq!(found.left.len(), 1);
    assert!(
        found.left[0].starts_with("iptables-nft: 4 KUBE-* chains of kube-proxy's iptables layout (no Ferry marker in nat KUBE-POSTROUTING")
            && found.left[0].ends_with("`ferry cleanup --also-kube-proxy` removes them"),
        "{}",
        found.left[0]
    );
    let also = Scope {
        dry_run: false,
        kube_proxy: true,
    };
    let removed = cleanup_with(&mut fake, "iptables-nft", also).expect("cleanup");
    assert_eq!(fake.restores.len(), 1);
    assert!(fake.restores[0].contains("-X KUBE-SERVICES\n"));
    assert!(
        removed.objects[0].starts_with("kube-proxy's iptables-nft jumps: "),
        "{removed:?}"
    );
}

#[test]
fn a_dry_cleanup_names_the_same_objects_and_changes_nothing() {
    let mut fake = with_kube_chains(true);
    let dry = Scope {
        dry_run: true,
        kube_proxy: false,
    };
    let would = cleanup_with(&mut fake, "iptables-nft", dry).expect("dry cleanup");
    assert!(fake.restores.is_empty(), "{:?}", fake.restores);
    assert!(
        fake.commands.iter().all(|c| !c.contains(" -D ")),
        "{:?}",
        fake.commands
    );
    let mut fake = with_kube_chains(true);
    assert_eq!(
        would,
        cleanup_with(&mut fake, "iptables-nft", FERRYS).expect("cleanup")
    );
    let mut empty = Fake::default();
    assert_eq!(
        cleanup_with(&mut empty, "iptables-nft", FERRYS).expect("cleanup"),
        Cleanup::default()
    );
}
