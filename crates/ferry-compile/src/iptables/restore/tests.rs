//! Restore inputs: exact sizes, `Display`, and the sectioned full sync.

use ferry_model::fixtures::*;
use ferry_model::{
    ClusterState, IpFamily, NodeContext, NodeView, Object, ServiceName, TrafficPolicy,
};

use super::{FullSync, Rerender, Restore, Transactions};
use crate::config::{CompileConfig, LocalDetector};
use crate::iptables::{render, NodeRules, Ruleset, ServiceRules};
use crate::plan::Plan;
use crate::NodeCompiler;

/// `services` services of three endpoints each, every third a NodePort service.
fn ruleset(services: usize) -> Ruleset {
    let (state, ctx, cfg) = cluster(services);
    render(&Plan::build(&NodeView::build(&state, &ctx), &cfg))
}

/// [`ruleset`]'s cluster, node and configuration.
fn cluster(services: usize) -> (ClusterState, NodeContext, CompileConfig) {
    let mut state = ClusterState::new();
    for i in 0..services {
        let name = format!("svc-{i}");
        let mut svc = mk_service("dev", &name, &format!("10.96.0.{}", i + 10), 80);
        if i % 3 == 0 {
            svc = with_node_port(svc, 30000 + i as u16, TrafficPolicy::Cluster);
        }
        state.apply(Object::from(svc));
        let eps = (0..3)
            .map(|j| mk_endpoint(&format!("10.64.{i}.{}", j + 2), "n1"))
            .collect();
        state.apply(Object::from(mk_slice("dev", &name, 8080, eps)));
    }
    state.apply(Object::from(mk_node("n1", "10.1.1.9", "10.64.0.0/16")));
    let cfg = CompileConfig {
        local_detector: LocalDetector::ClusterCidr(vec!["10.64.0.0/12".parse().expect("cidr")]),
        ..CompileConfig::default()
    };
    let ctx = NodeContext {
        node_name: "n1".into(),
        family: IpFamily::V4,
    };
    (state, ctx, cfg)
}

/// A re-renderer that must not be asked (the ruleset is not slim).
fn never(_: &ServiceName) -> Option<ServiceRules> {
    panic!("a ruleset that is not slim was rendered again")
}

fn sectioned(rs: &Ruleset, stale: &[String], per_section: usize) -> Restore {
    let o = FullSync {
        stale,
        transactions: Transactions::Nft {
            whole_up_to: 0,
            per_section,
        },
        ..FullSync::default()
    };
    Restore::full_with(rs, &o)
}

/// The `*table` … `COMMIT` sections of a restore input.
fn sections(text: &str) -> Vec<&str> {
    text.split_inclusive("COMMIT\n").collect()
}

#[test]
fn the_text_is_written_into_a_buffer_of_exactly_its_size() {
    let rs = ruleset(20);
    let stale = ["KUBE-SEP-GONE".to_owned()];
    let full = Restore::full(&rs, &stale);
    assert_eq!(full.text.capacity(), full.text.len());
    let sectioned = sectioned(&rs, &stale, 10);
    assert_eq!(sectioned.text.capacity(), sectioned.text.len());
}

#[test]
fn display_is_the_full_restore_without_stale_chains() {
    let rs = ruleset(5);
    assert_eq!(rs.to_string(), Restore::full(&rs, &[]).text);
}

#[test]
fn a_sectioned_full_sync_writes_the_same_lines_as_one_transaction() {
    let rs = ruleset(20);
    let stale = ["KUBE-SEP-GONE".to_owned()];
    let one = Restore::full(&rs, &stale);
    let many = sectioned(&rs, &stale, 10);
    let lines = |t: &str| {
        let mut l: Vec<String> = t
            .lines()
            .filter(|l| !l.starts_with('*') && *l != "COMMIT")
            .map(str::to_owned)
            .collect();
        l.sort();
        l
    };
    assert_eq!(lines(&many.text), lines(&one.text));
    assert_eq!(
        (many.chains_written, many.rules_written, many.chains_deleted),
        (one.chains_written, one.rules_written, one.chains_deleted)
    );
    assert!(sections(&many.text).len() > 4, "{}", many.text);
}

#[test]
fn each_section_declares_every_chain_it_fills_and_keeps_a_service_together() {
    let rs = ruleset(20);
    let many = sectioned(&rs, &[], 10);
    for section in sections(&many.text) {
        for rule in section.lines().filter(|l| l.starts_with("-A ")) {
            let chain = rule.split_whitespace().nth(1).unwrap_or_default();
            assert!(
                section.contains(&format!(":{chain} - [0:0]\n")),
                "{chain} filled without being declared in:\n{section}"
            );
        }
    }
    for service in rs.services.values() {
        let holding: Vec<&str> = sections(&many.text)
            .into_iter()
            .filter(|s| {
                service
                    .chains
                    .iter()
                    .any(|c| s.contains(&format!(":{} ", c.name)))
            })
            .collect();
        assert_eq!(holding.len(), 1, "a service's chains span sections");
    }
}

#[test]
fn a_sectioned_full_sync_creates_targets_before_the_chains_jumping_to_them() {
    let rs = ruleset(20);
    let many = sectioned(&rs, &["KUBE-SEP-GONE".to_owned()], 10);
    let all = sections(&many.text);
    let nat: Vec<&str> = all
        .iter()
        .copied()
        .filter(|s| s.starts_with("*nat"))
        .collect();
    assert!(nat[0].contains(":KUBE-MARK-MASQ - [0:0]"), "{}", nat[0]);
    let last = nat.last().copied().unwrap_or_default();
    assert!(last.contains(":KUBE-SERVICES - [0:0]") && last.contains(":KUBE-NODEPORTS - [0:0]"));
    assert!(last.contains("-X KUBE-SEP-GONE\nCOMMIT\n"), "{last}");
    assert!(all.last().is_some_and(|m| m.starts_with("*mangle")));
}

#[test]
fn sectioned_chains_are_declared_in_descending_name_order() {
    let rs = ruleset(20);
    let many = sectioned(&rs, &[], 10);
    for section in sections(&many.text)
        .into_iter()
        .filter(|s| s.contains(":KUBE-SEP-"))
    {
        let names: Vec<&str> = section
            .lines()
            .filter_map(|l| l.strip_prefix(':'))
            .filter_map(|l| l.split_whitespace().next())
            .collect();
        let mut sorted = names.clone();
        sorted.sort_by(|a, b| b.cmp(a));
        assert_eq!(names, sorted, "{section}");
    }
}

#[test]
fn one_descending_transaction_declares_every_nat_chain_in_descending_order() {
    let rs = ruleset(20);
    let o = FullSync {
        transactions: Transactions::Nft {
            whole_up_to: rs.nat_chain_count(),
            per_section: 3,
        },
        ..FullSync::default()
    };
    let one = Restore::full_with(&rs, &o);
    let nat: Vec<&str> = sections(&one.text)
        .into_iter()
        .filter(|s| s.starts_with("*nat"))
        .collect();
    assert_eq!(nat.len(), 1, "one nat transaction: {}", one.text);
    let names: Vec<&str> = nat[0]
        .lines()
        .filter_map(|l| l.strip_prefix(':'))
        .filter_map(|l| l.split_whitespace().next())
        // The canary is only declared (never filled), after the chains Ferry writes.
        .filter(|n| *n != "KUBE-PROXY-CANARY")
        .collect();
    let mut sorted = names.clone();
    sorted.sort_by(|a, b| b.cmp(a));
    assert_eq!(names, sorted);
    assert!(names.contains(&"KUBE-SERVICES") && names.iter().any(|n| n.starts_with("KUBE-SEP-")));
    // The same chains and rules as the plain one-transaction sync, in another order.
    let plain = Restore::full_with(&rs, &FullSync::default());
    let sorted_lines = |t: &str| {
        let mut l: Vec<String> = t.lines().map(str::to_owned).collect();
        l.sort();
        l
    };
    assert_eq!(sorted_lines(&one.text), sorted_lines(&plain.text));
}

#[test]
fn iptables_nft_splits_a_full_sync_only_above_its_whole_transaction_limit() {
    let rs = ruleset(20);
    let nat_transactions = |whole_up_to: usize| {
        let o = FullSync {
            transactions: Transactions::Nft {
                whole_up_to,
                per_section: 3,
            },
            ..FullSync::default()
        };
        Restore::full_with(&rs, &o).text.matches("*nat\n").count()
    };
    assert_eq!(nat_transactions(rs.nat_chain_count()), 1);
    assert!(nat_transactions(rs.nat_chain_count() - 1) > 1);
    let per_table = Restore::full_with(&rs, &FullSync::default());
    assert_eq!(per_table.text.matches("*nat\n").count(), 1);
}

#[test]
fn a_full_sync_written_as_it_goes_is_the_same_text_with_the_same_counts() {
    let rs = ruleset(20);
    for transactions in every_cut(&rs) {
        let o = FullSync {
            transactions,
            ..FullSync::default()
        };
        let held = Restore::full_with(&rs, &o);
        let mut streamed = String::new();
        let mut again = never;
        let counted =
            Restore::write_full_with(&rs, &o, &mut streamed, &mut Rerender::new(&mut again))
                .expect("write");
        assert_eq!(streamed, held.text, "{transactions:?}");
        assert_eq!(counts(&counted), counts(&held));
        assert!(counted.text.is_empty());
    }
}

/// Every way a full sync of `rs` is cut: one transaction per table, the whole nat table in
/// one (descending), and sections of three chains.
fn every_cut(rs: &Ruleset) -> [Transactions; 3] {
    [
        Transactions::PerTable,
        Transactions::Nft {
            whole_up_to: rs.nat_chain_count(),
            per_section: 3,
        },
        Transactions::Nft {
            whole_up_to: 0,
            per_section: 3,
        },
    ]
}

fn counts(r: &Restore) -> (usize, usize, usize) {
    (r.chains_written, r.rules_written, r.chains_deleted)
}

#[test]
fn a_slim_full_sync_renders_each_service_again_into_the_same_text() {
    let (state, ctx, cfg) = cluster(20);
    let compiler = NodeCompiler::new(&state, &ctx, &cfg);
    let rules = NodeRules::new(&compiler);
    let full = rules.full(&state);
    let slim = rules.full_slim(&state);
    assert!(slim.services.values().all(|s| s.is_slim()));
    assert!(slim
        .services
        .values()
        .all(|s| s.chains.iter().all(|c| c.rules.is_empty())));
    assert_eq!(slim.rule_count(), full.rule_count());
    for transactions in every_cut(&full) {
        let o = FullSync {
            transactions,
            ..FullSync::default()
        };
        let held = Restore::full_with(&full, &o);
        let mut rendered = 0;
        let mut again = |name: &ServiceName| {
            rendered += 1;
            rules.service(&state, name, slim.large_cluster)
        };
        let mut streamed = String::new();
        let counted =
            Restore::write_full_with(&slim, &o, &mut streamed, &mut Rerender::new(&mut again))
                .expect("write");
        assert_eq!(streamed, held.text, "{transactions:?}");
        assert_eq!(counts(&counted), counts(&held));
        // Each service's chains are written together: rendered once each.
        assert_eq!(rendered, slim.services.len(), "{transactions:?}");
    }
}

#[test]
fn a_service_rendered_again_differently_stops_the_write_and_says_which() {
    let (state, ctx, cfg) = cluster(3);
    let compiler = NodeCompiler::new(&state, &ctx, &cfg);
    let rules = NodeRules::new(&compiler);
    let slim = rules.full_slim(&state);
    let mut again = |name: &ServiceName| {
        let mut r = rules.service(&state, name, false)?;
        r.chains[0].rules.push("-j RETURN".into());
        Some(r)
    };
    let mut rerender = Rerender::new(&mut again);
    let mut out = String::new();
    let written = Restore::write_full_with(&slim, &FullSync::default(), &mut out, &mut rerender);
    assert!(written.is_err());
    let why = rerender.mismatch.expect("the reason");
    assert!(why.contains("dev/svc-0"), "{why}");
}

#[test]
fn a_partial_sync_over_slim_rules_rewrites_only_changed_chains() {
    let rs = ruleset(4);
    let name = rs.services.keys().next().expect("a service").clone();
    let mut old = rs.services[&name].clone();
    old.slim();
    // Unchanged: nothing to write.
    let previous = std::collections::BTreeMap::from([(name.clone(), Some(old.clone()))]);
    assert_eq!(Restore::partial(&rs, &previous).chains_written, 0);
    // One chain changed: that chain only.
    let mut changed = rs.clone();
    let rules = changed.services.get_mut(&name).expect("service");
    rules.chains[0].rules.push("-j RETURN".into());
    let chain = rules.chains[0].name.clone();
    let restore = Restore::partial(&changed, &previous);
    assert_eq!(restore.chains_written, 1, "{}", restore.text);
    assert!(restore.text.contains(&format!("-A {chain} -j RETURN")));
}
