use super::*;

/// `ferry rules` for one Service with two endpoints, and `nft list table ip ferry` after
/// `ferry run` programmed the same manifests (nft 1.0.6).
const RENDERED: &str = include_str!("rendered.nft");
const KERNEL: &str = include_str!("kernel.nft");

#[test]
fn the_kernel_listing_equals_the_rendering_once_normalised() {
    let (rendered, kernel) = (Ruleset::parse(RENDERED), Ruleset::parse(KERNEL));
    assert_eq!(rendered.differences(&kernel, 10), (vec![], 0));
    assert_eq!(
        rendered.elements["map cluster-endpoints"],
        [
            "10.96.0.10 . tcp . 80 . 0 : 10.64.0.1 . 8080",
            "10.96.0.10 . tcp . 80 . 1 : 10.64.0.2 . 8080"
        ]
    );
    assert_eq!(
        rendered.elements["map service-ips"],
        ["10.96.0.10 . tcp . 80 : goto cluster-ip-cluster-2"]
    );
    assert_eq!(rendered.elements["set nodeport-ips"], ["10.200.0.1"]);
    assert_eq!(
        rendered.chains["masquerading"][1],
        "meta mark & 16384 == 0 return"
    );
    assert!(!rendered.elements.contains_key("map affinity"));
}

#[test]
fn a_changed_endpoint_is_a_difference() {
    let rendered = Ruleset::parse(RENDERED);
    let changed = Ruleset::parse(&KERNEL.replace("10.64.0.2 . 8080", "10.72.0.0 . 8080"));
    let (lines, count) = rendered.differences(&changed, 10);
    assert_eq!(count, 2);
    assert_eq!(lines.len(), 1);
    assert!(lines[0].starts_with("map cluster-endpoints: 1 only here"));
}

#[test]
fn a_missing_chain_and_a_changed_rule_are_differences() {
    let rendered = Ruleset::parse(RENDERED);
    let kernel = KERNEL
        .replace("chain reject-chain {\n\t\treject\n\t}", "")
        .replace("masquerade fully-random", "masquerade");
    let (lines, count) = rendered.differences(&Ruleset::parse(&kernel), 10);
    assert_eq!(count, 2, "{lines:?}");
}

#[test]
fn how_nft_lists_a_dnat_and_a_set_of_one_is_the_same_rule() {
    assert_eq!(
        normalise("ip saddr { 10.64.0.0/12 } meta l4proto { tcp, udp } dnat ip to 10.200.0.1:80"),
        normalise("ip saddr 10.64.0.0/12 meta l4proto { tcp, udp } dnat to 10.200.0.1:80")
    );
}
