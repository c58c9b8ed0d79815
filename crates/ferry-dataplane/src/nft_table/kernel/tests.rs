use super::*;
use crate::nft_table::live::tests::{as_live, setup};

fn web() -> ServiceName {
    ServiceName::new("dev", "web")
}

#[test]
fn a_kernel_holding_the_compiled_rules_has_every_service_programmed() {
    let (_, ruleset) = setup();
    let report = compare(&ruleset, Some(&as_live(&ruleset)));
    assert!(report.present);
    assert_eq!(report.services.get(&web()), Some(&Vec::new()));
    assert!(report.stray.is_empty(), "{:?}", report.stray);
}

#[test]
fn a_missing_slot_an_extra_slot_and_a_changed_target_are_each_named() {
    let (_, ruleset) = setup();
    let mut live = as_live(&ruleset);
    let endpoints = live
        .elements
        .get_mut("cluster-endpoints")
        .expect("cluster-endpoints");
    endpoints.remove("10.96.198.86 . tcp . 8080 . 1");
    endpoints.insert(
        "10.96.198.86 . tcp . 8080 . 2".to_owned(),
        Some("192.168.169.170 . 56010".to_owned()),
    );
    endpoints.insert(
        "10.96.198.86 . tcp . 8080 . 0".to_owned(),
        Some("192.168.169.99 . 56010".to_owned()),
    );
    let report = compare(&ruleset, Some(&live));
    let diffs = &report.services[&web()];
    assert_eq!(
        diffs,
        &[
            "map cluster-endpoints element 10.96.198.86 . tcp . 8080 . 0: the kernel has \
             192.168.169.99 . 56010, Ferry would program 192.168.169.166 . 56010",
            "map cluster-endpoints lacks element 10.96.198.86 . tcp . 8080 . 1 : \
             192.168.169.168 . 56010",
            "map cluster-endpoints has element 10.96.198.86 . tcp . 8080 . 2 : \
             192.168.169.170 . 56010 that Ferry would not program",
        ]
    );
}

#[test]
fn a_missing_chain_and_elements_of_unknown_frontends_are_found() {
    let (_, ruleset) = setup();
    let mut live = as_live(&ruleset);
    let target = live.elements["service-ips"]["10.96.198.86 . tcp . 8080"]
        .clone()
        .expect("a goto");
    let chain = target.strip_prefix("goto ").expect("goto").to_owned();
    live.chains.remove(&chain);
    live.elements
        .entry("service-ips".to_owned())
        .or_default()
        .insert("10.96.0.99 . tcp . 80".to_owned(), Some(target.clone()));
    let report = compare(&ruleset, Some(&live));
    assert_eq!(
        report.services[&web()],
        [format!("chain {chain} is missing from the kernel")]
    );
    assert_eq!(
        report.stray,
        [format!(
            "map service-ips element 10.96.0.99 . tcp . 80 : {target}"
        )]
    );
}

#[test]
fn without_the_table_no_service_is_programmed() {
    let (_, ruleset) = setup();
    let report = compare(&ruleset, None);
    assert!(!report.present);
    assert_eq!(report.services.len(), 1);
    assert!(!report.services[&web()].is_empty());
}
