use std::collections::BTreeMap;

use super::*;

fn ruleset() -> Ruleset {
    use ferry_model::fixtures::{mk_endpoint, mk_node, mk_service, mk_slice};
    use ferry_model::{ClusterState, IpFamily, NodeContext, NodeView, Object};
    let mut state = ClusterState::new();
    state.apply(Object::from(mk_service("dev", "web", "10.96.0.10", 80)));
    let eps = vec![mk_endpoint("10.0.0.5", "n1")];
    state.apply(Object::from(mk_slice("dev", "web", 8080, eps)));
    state.apply(Object::from(mk_node("n1", "10.1.1.9", "10.0.0.0/24")));
    let ctx = NodeContext {
        node_name: "n1".into(),
        family: IpFamily::V4,
    };
    let cfg = ferry_compile::CompileConfig::default();
    ferry_compile::nft::render(&ferry_compile::Plan::build(
        &NodeView::build(&state, &ctx),
        &cfg,
    ))
}

/// What the kernel holds right after `rs` was written: every chain, each with its rules.
fn kernel(rs: &Ruleset) -> (Vec<String>, BTreeMap<String, usize>) {
    let names = rs.chain_names().map(str::to_owned).collect();
    let counts = top_level(rs).map(|(c, n)| (c.to_owned(), n)).collect();
    (names, counts)
}

fn check<'a>(
    rs: &'a Ruleset,
    names: &[String],
    counts: &BTreeMap<String, usize>,
) -> Option<Damage<'a>> {
    first_damage(rs, names, |c| Ok(Some(counts.get(c).copied().unwrap_or(0))))
        .expect("no kernel error")
}

#[test]
fn what_was_written_is_intact() {
    let rs = ruleset();
    let (names, counts) = kernel(&rs);
    assert!(rs.dispatch_chains().next().is_some(), "a dispatch chain");
    assert!(counts.contains_key("services"), "{counts:?}");
    assert_eq!(check(&rs, &names, &counts), None);
}

#[test]
fn a_flushed_top_level_chain_is_named() {
    let rs = ruleset();
    let (names, mut counts) = kernel(&rs);
    let written = counts["services"];
    assert!(written > 0);
    counts.insert("services".to_owned(), 0);
    assert_eq!(
        check(&rs, &names, &counts),
        Some(Damage::Rules {
            chain: "services",
            written,
            found: 0
        })
    );
    let line = check(&rs, &names, &counts).expect("damage").to_string();
    assert_eq!(
        line,
        format!("chain services of table ferry holds 0 rules, {written} were written")
    );
}

#[test]
fn a_rule_added_by_someone_else_is_damage_too() {
    let rs = ruleset();
    let (names, mut counts) = kernel(&rs);
    let (chain, written) = top_level(&rs).next().expect("a base chain");
    counts.insert(chain.to_owned(), written + 1);
    assert!(matches!(
        check(&rs, &names, &counts),
        Some(Damage::Rules { chain: c, .. }) if c == chain
    ));
}

#[test]
fn a_missing_chain_is_found_before_any_rule_is_counted() {
    let rs = ruleset();
    let (mut names, _) = kernel(&rs);
    let dispatch = rs.dispatch_chains().next().expect("dispatch").name.clone();
    names.retain(|n| *n != dispatch);
    let mut counted = 0;
    let found = first_damage(&rs, &names, |_| {
        counted += 1;
        Ok(Some(0))
    })
    .expect("no kernel error");
    assert_eq!(found, Some(Damage::Gone(dispatch.as_str())));
    assert_eq!(counted, 0);
}

#[test]
fn dispatch_chains_are_not_counted_and_unknown_counts_pass() {
    let rs = ruleset();
    let (names, _) = kernel(&rs);
    let mut asked = Vec::new();
    let found = first_damage(&rs, &names, |c| {
        asked.push(c.to_owned());
        Ok(None)
    })
    .expect("no kernel error");
    assert_eq!(found, None);
    let dispatch: Vec<&str> = rs.dispatch_chains().map(|c| c.name.as_str()).collect();
    assert!(
        asked.iter().all(|c| !dispatch.contains(&c.as_str())),
        "{asked:?}"
    );
    assert_eq!(asked.len(), rs.base_chains.len() + rs.chains.len());
}
