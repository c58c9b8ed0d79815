use std::collections::{BTreeMap, BTreeSet};

use ferry_compile::iptables::{Ruleset, ServiceRules, Table};
use ferry_model::{IpFamily, ServiceName};

use super::cleanup::cleanup_with;
use super::*;

/// Records what was sent; answers `-C`/`-S` from a set of present rules and chains.
#[derive(Default)]
struct Fake {
    restores: Vec<String>,
    commands: Vec<String>,
    present: BTreeSet<String>,
    save: String,
}

impl IptablesRunner for Fake {
    fn restore(&mut self, input: &str) -> Result<(), Error> {
        self.restores.push(input.to_owned());
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
    let inserts = dp
        .runner()
        .commands
        .iter()
        .filter(|c| c.contains(" -I "))
        .count();
    assert_eq!(inserts, jump_rules().len());
    dp.apply_full(ruleset(&[("a", "KUBE-SVC-A")]))
        .expect("resync");
    let inserts = dp
        .runner()
        .commands
        .iter()
        .filter(|c| c.contains(" -I "))
        .count();
    assert_eq!(
        inserts,
        jump_rules().len(),
        "present jumps are not inserted again"
    );
}

#[test]
fn a_missing_canary_means_a_full_sync() {
    let mut dp = IptablesDataplane::with_runner(Fake::default());
    assert!(dp.installed().is_none(), "nothing installed yet");
    dp.apply_full(ruleset(&[])).expect("sync");
    assert!(dp.canary_gone().expect("check"), "the fake holds no canary");
    assert!(dp.installed().is_none(), "what was installed is forgotten");
    for table in ["mangle", "filter"] {
        dp.runner.present.insert(format!("-t {table} {CANARY}"));
    }
    dp.apply_full(ruleset(&[])).expect("sync");
    assert!(!dp.canary_gone().expect("check"));
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

fn with_kube_chains() -> Fake {
    Fake {
        save: "*filter\n:INPUT ACCEPT [0:0]\n:KUBE-FORWARD - [0:0]\n:MINE - [0:0]\nCOMMIT\n\
               *nat\n:KUBE-SERVICES - [0:0]\n:KUBE-SVC-X - [0:0]\n:KUBE-PROXY-CANARY - [0:0]\nCOMMIT\n"
            .into(),
        present: ["-t nat PREROUTING -m comment --comment kubernetes service portals -j KUBE-SERVICES".to_owned()]
            .into_iter()
            .collect(),
        ..Fake::default()
    }
}

#[test]
fn cleanup_removes_jumps_then_only_ferrys_chains_and_says_which() {
    let mut fake = with_kube_chains();
    let removed = cleanup_with(&mut fake, "iptables-nft", false).expect("cleanup");
    let text = &fake.restores[0];
    for c in [
        "KUBE-FORWARD",
        "KUBE-SERVICES",
        "KUBE-SVC-X",
        "KUBE-PROXY-CANARY",
    ] {
        assert!(text.contains(&format!("-X {c}\n")), "{c}: {text}");
    }
    assert!(!text.contains("MINE") && !text.contains("mangle"), "{text}");
    assert!(fake
        .commands
        .iter()
        .any(|c| c.starts_with("-t nat -D PREROUTING")));
    assert_eq!(
        removed,
        [
            "iptables-nft jumps: nat PREROUTING → KUBE-SERVICES",
            "iptables-nft filter chains: KUBE-FORWARD",
            "iptables-nft nat chains: KUBE-SERVICES, KUBE-SVC-X, KUBE-PROXY-CANARY",
        ]
    );
}

#[test]
fn a_dry_cleanup_names_the_same_objects_and_changes_nothing() {
    let mut fake = with_kube_chains();
    let would = cleanup_with(&mut fake, "iptables-nft", true).expect("dry cleanup");
    assert!(fake.restores.is_empty(), "{:?}", fake.restores);
    assert!(
        fake.commands.iter().all(|c| !c.contains(" -D ")),
        "{:?}",
        fake.commands
    );
    let mut fake = with_kube_chains();
    assert_eq!(
        would,
        cleanup_with(&mut fake, "iptables-nft", false).expect("cleanup")
    );
    let mut empty = Fake::default();
    assert!(cleanup_with(&mut empty, "iptables-nft", false)
        .expect("cleanup")
        .is_empty());
}
