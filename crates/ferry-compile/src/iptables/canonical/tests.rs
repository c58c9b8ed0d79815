use ferry_model::IpFamily::{V4, V6};

use super::{canonical, canonical_digest, SavedDigests};

/// Ferry's text and iptables-save's text of the same rule.
fn same(ferry: &str, saved: &str) {
    let (a, b) = (canonical(ferry, V4), canonical(saved, V4));
    assert!(a.is_some(), "no canonical form: {ferry}");
    assert_eq!(a, b, "\n{ferry}\n{saved}");
}

fn differ(a: &str, b: &str) {
    let (ca, cb) = (canonical(a, V4), canonical(b, V4));
    assert!(ca.is_some() && cb.is_some(), "{a} / {b}");
    assert_ne!(ca, cb, "\n{a}\n{b}");
}

#[test]
fn a_rule_and_its_saved_form_are_the_same() {
    // Copied from `iptables-nft-save` of Ferry's restore (10 000 × 10, December 2026).
    same(
        r#"-m comment --comment "default/svc-0:http cluster IP" -m tcp -p tcp -d 10.96.0.10 --dport 80 ! -s 10.64.0.0/12 -j KUBE-MARK-MASQ"#,
        r#"! -s 10.64.0.0/12 -d 10.96.0.10/32 -p tcp -m comment --comment "default/svc-0:http cluster IP" -m tcp --dport 80 -j KUBE-MARK-MASQ"#,
    );
    same(
        "-m statistic --mode random --probability 0.1000000000 -j KUBE-SEP-CWX5JNSFAT4HVG7Q",
        "-m statistic --mode random --probability 0.10000000009 -j KUBE-SEP-CWX5JNSFAT4HVG7Q",
    );
    same(
        "-m tcp -p tcp -j DNAT --to-destination 10.64.0.9:8080",
        "-p tcp -m tcp -j DNAT --to-destination 10.64.0.9:8080",
    );
    same(
        "-s 10.64.0.9 -j KUBE-MARK-MASQ",
        "-s 10.64.0.9/32 -j KUBE-MARK-MASQ",
    );
    same(
        "-j MARK --or-mark 0x4000",
        "-j MARK --set-xmark 0x4000/0x4000",
    );
    same(
        "-j MARK --xor-mark 0x4000",
        "-j MARK --set-xmark 0x4000/0x0",
    );
    same(
        "-m mark ! --mark 0x4000/0x4000 -j RETURN",
        "-m mark ! --mark 0x4000/0x4000 -j RETURN",
    );
    same("-j REJECT", "-j REJECT --reject-with icmp-port-unreachable");
    same(
        "-m recent --name KUBE-SEP-X --rcheck --seconds 10800 --reap -j KUBE-SEP-X",
        "-m recent --rcheck --seconds 10800 --reap --name KUBE-SEP-X --mask 255.255.255.255 --rsource -j KUBE-SEP-X",
    );
    same(
        "-m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT",
        "-m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT",
    );
    same(
        "-m comment --comment default/a -j KUBE-SVC-X",
        r#"-m comment --comment "default/a" -j KUBE-SVC-X"#,
    );
}

#[test]
fn what_differs_in_meaning_differs_in_form() {
    differ(
        "! -s 10.0.0.1 -d 10.0.0.2 -j DROP",
        "-s 10.0.0.1 ! -d 10.0.0.2 -j DROP",
    );
    differ("-s 10.0.0.1 -j DROP", "-s 10.0.0.0/24 -j DROP");
    differ(
        "-p tcp -m tcp --dport 80 -j DROP",
        "-p tcp -m tcp --dport 81 -j DROP",
    );
    differ(
        "-p tcp -m tcp --dport 80 -j DROP",
        "-p tcp -m tcp --sport 80 -j DROP",
    );
    differ(
        "-m statistic --mode random --probability 0.5 -j KUBE-SEP-A",
        "-m statistic --mode random --probability 0.50001 -j KUBE-SEP-A",
    );
    differ("-j KUBE-SEP-A", "-j KUBE-SEP-B");
    differ("-j MARK --or-mark 0x4000", "-j MARK --xor-mark 0x4000");
    differ(
        "-p tcp -m tcp -j DNAT --to-destination 10.64.0.9:8080",
        "-p tcp -m tcp -j DNAT --to-destination 10.64.0.9:8081",
    );
    differ(
        r#"-m comment --comment "a b" -j ACCEPT"#,
        r#"-m comment --comment "a  b" -j ACCEPT"#,
    );
    differ("-j REJECT", "-j REJECT --reject-with tcp-reset");
    // A side effect keeps the order of matches: here the pin is set only for TCP port 80.
    differ(
        "-p tcp -m tcp --dport 80 -m recent --name X --set -j KUBE-SEP-X",
        "-p tcp -m recent --name X --set -m tcp --dport 80 -j KUBE-SEP-X",
    );
}

#[test]
fn an_option_not_known_here_has_no_form() {
    for rule in [
        "-m set --match-set KUBE-CLUSTER-IP dst,dst -j ACCEPT",
        "-m tcp --tcp-flags SYN,ACK SYN -j DROP",
        "-j LOG --log-prefix x",
        "-j KUBE-SEP-A --unknown",
        "-s 10.0.0.1 -j DROP !",
        r#"-m comment --comment "unclosed -j ACCEPT"#,
        "-s fd00::1 -j DROP",
        "-p tcp --dport 80 -j DROP",
    ] {
        assert_eq!(canonical(rule, V4), None, "{rule}");
    }
    assert!(canonical("-s fd00::1 -j DROP", V6).is_some());
}

#[test]
fn ipv6_rules_compare_by_address_not_spelling() {
    let (a, b) = (
        canonical(
            "-s fd00:0:0::1 -p tcp -m tcp -j DNAT --to-destination [fd00::9]:8080",
            V6,
        ),
        canonical(
            "-s fd00::1/128 -p tcp -m tcp -j DNAT --to-destination [fd00::9]:8080",
            V6,
        ),
    );
    assert!(a.is_some());
    assert_eq!(a, b);
    assert_eq!(
        canonical("-j REJECT", V6),
        canonical("-j REJECT --reject-with icmp6-port-unreachable", V6)
    );
}

#[test]
fn a_chain_digest_needs_every_rule_and_their_order() {
    let a = [
        "-s 10.0.0.1 -j KUBE-MARK-MASQ",
        "-j DNAT --to-destination 10.0.0.1:80",
    ];
    let b = [
        "-j DNAT --to-destination 10.0.0.1:80",
        "-s 10.0.0.1 -j KUBE-MARK-MASQ",
    ];
    let saved = [
        "-s 10.0.0.1/32 -j KUBE-MARK-MASQ",
        "-j DNAT --to-destination 10.0.0.1:80",
    ];
    assert_eq!(canonical_digest(a, V4), canonical_digest(saved, V4));
    assert_ne!(canonical_digest(a, V4), canonical_digest(b, V4));
    assert_ne!(
        canonical_digest(a, V4),
        canonical_digest(a[..1].iter().copied(), V4)
    );
    assert_eq!(canonical_digest(["-j LOG --log-prefix x"], V4), None);
}

#[test]
fn saved_chains_get_the_digest_of_their_rules_as_written() {
    let mut saved = SavedDigests::new(V4);
    for line in [
        "*nat",
        ":KUBE-SEP-A - [0:0]",
        ":KUBE-SEP-B - [0:0]",
        ":KUBE-EMPTY - [0:0]",
        "-A KUBE-SEP-A -s 10.0.0.1/32 -j KUBE-MARK-MASQ",
        "-A KUBE-SEP-B -m set --match-set X dst -j ACCEPT",
        "-A KUBE-SEP-A -p tcp -m tcp -j DNAT --to-destination 10.0.0.1:80",
        "COMMIT",
    ] {
        saved.line(line);
    }
    let digests = saved.finish();
    let written = [
        "-s 10.0.0.1 -j KUBE-MARK-MASQ",
        "-m tcp -p tcp -j DNAT --to-destination 10.0.0.1:80",
    ];
    assert_eq!(digests["KUBE-SEP-A"], canonical_digest(written, V4));
    assert_eq!(digests["KUBE-SEP-B"], None);
    assert_eq!(digests["KUBE-EMPTY"], canonical_digest([], V4));
    assert_eq!(digests.len(), 3);
}
