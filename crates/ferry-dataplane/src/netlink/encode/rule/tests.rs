//! Rules byte for byte against what nft 1.0.6 sends for the same text (`nft --debug=mnl -f`),
//! compared from the first attribute on (the message header's flags and sequence numbers
//! differ; nft sends no acks).

use ipnet::IpNet;

use super::super::{NFT_MSG_NEWSET, NFT_MSG_NEWSETELEM};
use super::*;

pub(super) fn rule(matches: Vec<RuleMatch>, action: RuleAction) -> DispatchRule {
    DispatchRule {
        family: IpFamily::V4,
        matches,
        action,
    }
}

pub(super) fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

/// The messages of a batch between BATCH_BEGIN and BATCH_END: (type, attributes).
pub(super) fn messages(b: Batch) -> Vec<(u16, Vec<u8>)> {
    let (bytes, _, _) = b.finish();
    let mut out = Vec::new();
    let mut rest = &bytes[..];
    while !rest.is_empty() {
        let len = u32::from_ne_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
        let kind = u16::from_ne_bytes([rest[4], rest[5]]);
        out.push((kind, rest[20..len].to_vec()));
        rest = &rest[len..];
    }
    out[1..out.len() - 1].to_vec()
}

pub(super) fn one_rule(r: &DispatchRule, first_set_id: u32) -> Vec<(u16, Vec<u8>)> {
    one_rule_in(IpFamily::V4, r, first_set_id)
}

/// The messages `add_rule` writes for `r` in the table of `family`.
pub(super) fn one_rule_in(
    family: IpFamily,
    r: &DispatchRule,
    first_set_id: u32,
) -> Vec<(u16, Vec<u8>)> {
    let mut b = Batch::new(1, family, "ferry");
    b.next_set_id = first_set_id;
    b.add_rule("d1", r);
    messages(b)
}

pub(super) const NEWRULE: u16 = (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_NEWRULE;
pub(super) const NEWSET: u16 = (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_NEWSET;
pub(super) const NEWSETELEM: u16 = (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_NEWSETELEM;

#[test]
fn a_byte_aligned_prefix_compares_its_bytes() {
    // ip saddr != 192.168.0.0/16 jump mark-for-masquerade
    let r = rule(
        vec![RuleMatch::Saddr {
            negate: true,
            nets: vec!["192.168.0.0/16".parse().expect("net")],
        }],
        RuleAction::Jump("mark-for-masquerade"),
    );
    let want = "0a00010066657272790000000700020064310000ac000480340001800c0001007061796c6f6164002400028008000100000000010800020000000001080003000000000c08000400000000022c00018008000100636d700020000280080001000000000108000200000000010c00038006000100c0a80000480001800e000100696d6d656469617465000000340002800800010000000000280002802400028008000100fffffffd180002006d61726b2d666f722d6d61737175657261646500";
    assert_eq!(one_rule(&r, 1), vec![(NEWRULE, hex(want))]);
}

#[test]
fn other_prefixes_are_masked() {
    // ip saddr 10.240.0.0/12 jump mark-for-masquerade
    let r = rule(
        vec![RuleMatch::Saddr {
            negate: false,
            nets: vec!["10.240.0.0/12".parse().expect("net")],
        }],
        RuleAction::Jump("mark-for-masquerade"),
    );
    let want = "0a00010066657272790000000700020064310000f0000480340001800c0001007061796c6f6164002400028008000100000000010800020000000001080003000000000c0800040000000004440001800c0001006269747769736500340002800800010000000001080002000000000108000300000000040c00048008000100fff000000c00058008000100000000002c00018008000100636d700020000280080001000000000108000200000000000c000380080001000af00000480001800e000100696d6d656469617465000000340002800800010000000000280002802400028008000100fffffffd180002006d61726b2d666f722d6d61737175657261646500";
    assert_eq!(one_rule(&r, 1), vec![(NEWRULE, hex(want))]);
}

#[test]
fn fib_saddr_type_local() {
    let r = rule(
        vec![RuleMatch::SaddrLocal],
        RuleAction::Jump("mark-for-masquerade"),
    );
    let want = "0a00010066657272790000000700020064310000a00004802800018008000100666962001c0002800800030000000001080002000000000308000100000000012c00018008000100636d700020000280080001000000000108000200000000000c0003800800010002000000480001800e000100696d6d656469617465000000340002800800010000000000280002802400028008000100fffffffd180002006d61726b2d666f722d6d61737175657261646500";
    assert_eq!(one_rule(&r, 1), vec![(NEWRULE, hex(want))]);
}

#[test]
fn several_prefixes_are_an_anonymous_interval_set() {
    // ip saddr != { 10.0.0.0/8, 192.168.0.0/16 } jump mark-for-masquerade
    let r = rule(
        vec![RuleMatch::Saddr {
            negate: true,
            nets: vec![
                "192.168.0.0/16".parse().expect("net"),
                "10.0.0.0/8".parse().expect("net"),
            ],
        }],
        RuleAction::Jump("mark-for-masquerade"),
    );
    let set = "0a00010066657272790000000c0002005f5f73657425640008000300000000070800040000000007080005000000000408000a00000000010c000980080001000000000526000d000004020000000204010000000314000407000000010c00040c00000001040b0000000000";
    let elements = "0a00010066657272790000000c0002005f5f73657425640008000400000000016c0003801800018008000300000000010c0001800800010000000000100002800c000180080001000a0000001800038008000300000000010c000180080001000b000000100004800c00018008000100c0a800001800058008000300000000010c00018008000100c0a90000";
    let rule = "0a00010066657272790000000700020064310000b8000480340001800c0001007061796c6f6164002400028008000100000000010800020000000001080003000000000c0800040000000004380001800b0001006c6f6f6b757000002800028008000200000000010c0001005f5f73657425640008000400000000010800050000000001480001800e000100696d6d656469617465000000340002800800010000000000280002802400028008000100fffffffd180002006d61726b2d666f722d6d61737175657261646500";
    assert_eq!(
        one_rule(&r, 1),
        vec![
            (NEWSET, hex(set)),
            (NEWSETELEM, hex(elements)),
            (NEWRULE, hex(rule))
        ]
    );
}

#[test]
fn dnat_through_an_endpoint_map() {
    // meta l4proto { tcp, udp, sctp } dnat ip to ip daddr . meta l4proto . th dport
    //   . numgen random mod 2 map @cluster-endpoints   (nft's anonymous set had id 2)
    let r = rule(
        vec![],
        RuleAction::Dnat {
            key: DnatKey::ServiceIp,
            slots: 2,
            map: "cluster-endpoints",
        },
    );
    let set = "0a00010066657272790000000c0002005f5f7365742564000800030000000003080004000000000c080005000000000108000a00000000020c00098008000100000000031a000d00000401000000030e00040900000001060004100000000000";
    let elements = "0a00010066657272790000000c0002005f5f736574256400080004000000000234000380100001800c0001800500010006000000100002800c0001800500010011000000100003800c0001800500010084000000";
    // nft also named the map by its id (it created it in the same batch); that attribute is
    // left out here, where the map already exists.
    let rule = "0a000100666572727900000007000200643100008401048024000180090001006d657461000000001400028008000200000000100800010000000001300001800b0001006c6f6f6b757000002000028008000200000000010c0001005f5f7365742564000800040000000002340001800c0001007061796c6f61640024000280080001000000000108000200000000010800030000000010080004000000000424000180090001006d657461000000001400028008000200000000100800010000000009340001800c0001007061796c6f61640024000280080001000000000a080002000000000208000300000000020800040000000002340001800b0001006e756d67656e000024000280080001000000000b0800020000000002080003000000000108000400000000003c0001800b0001006c6f6f6b757000002c0002800800020000000001080003000000000116000100636c75737465722d656e64706f696e747300000030000180080001006e617400240002800800010000000001080002000000000208000300000000010800050000000009";
    assert_eq!(
        one_rule(&r, 2),
        vec![
            (NEWSET, hex(set)),
            (NEWSETELEM, hex(elements)),
            (NEWRULE, hex(rule))
        ]
    );
}

#[test]
fn node_port_dnat_keys_start_with_the_protocol() {
    let r = rule(
        vec![],
        RuleAction::Dnat {
            key: DnatKey::NodePort,
            slots: 3,
            map: "nodeport-cluster-endpoints",
        },
    );
    let mut b = Batch::new(1, IpFamily::V4, "ferry");
    let lowered = b.lower(&r);
    assert_eq!(
        lowered.exprs[2..],
        [
            Expr::Meta {
                key: META_L4PROTO,
                dreg: 1
            },
            Expr::Payload {
                base: TRANSPORT_HEADER,
                offset: 2,
                len: 2,
                dreg: 9
            },
            Expr::Numgen {
                dreg: 10,
                modulus: 3
            },
            Expr::Lookup {
                sreg: 1,
                set: "nodeport-cluster-endpoints",
                set_id: None,
                dreg: Some(1),
                invert: false
            },
            Expr::Dnat {
                family: 2,
                addr: 1,
                proto: 9
            },
        ]
    );
}

#[test]
fn interval_elements_merge_and_end_at_the_top() {
    let nets: Vec<IpNet> = ["10.0.0.0/8", "10.1.0.0/16", "255.0.0.0/8"]
        .iter()
        .map(|n| n.parse().expect("net"))
        .collect();
    let got = interval_elements(&nets, 4);
    assert_eq!(
        got,
        vec![
            (vec![0, 0, 0, 0], true),
            (vec![10, 0, 0, 0], false),
            (vec![11, 0, 0, 0], true),
            (vec![255, 0, 0, 0], false),
        ]
    );
}

#[test]
fn a_zero_prefix_masks_the_whole_address() {
    // ip saddr != 0.0.0.0/0 jump mark-for-masquerade: no whole byte to compare, so nft masks
    // all four to zero (a zero-length compare is rejected by the kernel).
    let r = rule(
        vec![RuleMatch::Saddr {
            negate: true,
            nets: vec!["0.0.0.0/0".parse().expect("net")],
        }],
        RuleAction::Jump("mark-for-masquerade"),
    );
    let want = "0a00010066657272790000000700020064310000f0000480340001800c0001007061796c6f6164002400028008000100000000010800020000000001080003000000000c0800040000000004440001800c0001006269747769736500340002800800010000000001080002000000000108000300000000040c00048008000100000000000c00058008000100000000002c00018008000100636d700020000280080001000000000108000200000000010c0003800800010000000000480001800e000100696d6d656469617465000000340002800800010000000000280002802400028008000100fffffffd180002006d61726b2d666f722d6d61737175657261646500";
    assert_eq!(one_rule(&r, 1), vec![(NEWRULE, hex(want))]);
}

#[test]
fn an_interval_to_the_top_is_marked_open() {
    // ip saddr { 10.0.0.0/8, 255.0.0.0/8 } jump mark-for-masquerade (nft's set had id 6)
    let r = rule(
        vec![RuleMatch::Saddr {
            negate: false,
            nets: vec![
                "10.0.0.0/8".parse().expect("net"),
                "255.0.0.0/8".parse().expect("net"),
            ],
        }],
        RuleAction::Jump("mark-for-masquerade"),
    );
    let set = "0a00010066657272790000000c0002005f5f73657425640008000300000000070800040000000007080005000000000408000a00000000060c000980080001000000000526000d000004020000000204010000000314000407000000010c00040c00000001040b0000000000";
    let elements = "0a00010066657272790000000c0002005f5f7365742564000800040000000006600003801800018008000300000000010c0001800800010000000000100002800c000180080001000a0000001800038008000300000000010c000180080001000b0000001c0004800c00018008000100ff0000000a0006000104010000000000";
    let rule = "0a00010066657272790000000700020064310000b0000480340001800c0001007061796c6f6164002400028008000100000000010800020000000001080003000000000c0800040000000004300001800b0001006c6f6f6b757000002000028008000200000000010c0001005f5f7365742564000800040000000006480001800e000100696d6d656469617465000000340002800800010000000000280002802400028008000100fffffffd180002006d61726b2d666f722d6d61737175657261646500";
    assert_eq!(
        one_rule(&r, 6),
        vec![
            (NEWSET, hex(set)),
            (NEWSETELEM, hex(elements)),
            (NEWRULE, hex(rule))
        ]
    );
}

/// `iifname` matches (the interface local-traffic detectors), as nft 1.0.6 sends them.
#[test]
fn an_input_interface_is_compared_by_name_or_by_prefix() {
    let cases = [
        // iifname "cbr0" jump mark-for-masquerade
        ("cbr0", false, false, "0a00010066657272790000000700020064310000a800048024000180090001006d6574610000000014000280080002000000000608000100000000013800018008000100636d70002c00028008000100000000010800020000000000180003801400010063627230000000000000000000000000480001800e000100696d6d656469617465000000340002800800010000000000280002802400028008000100fffffffd180002006d61726b2d666f722d6d61737175657261646500"),
        // iifname != "cbr0" jump mark-for-masquerade
        ("cbr0", false, true, "0a00010066657272790000000700020064310000a800048024000180090001006d6574610000000014000280080002000000000608000100000000013800018008000100636d70002c00028008000100000000010800020000000001180003801400010063627230000000000000000000000000480001800e000100696d6d656469617465000000340002800800010000000000280002802400028008000100fffffffd180002006d61726b2d666f722d6d61737175657261646500"),
        // iifname "veth*" jump mark-for-masquerade
        ("veth", true, false, "0a000100666572727900000007000200643100009c00048024000180090001006d6574610000000014000280080002000000000608000100000000012c00018008000100636d700020000280080001000000000108000200000000000c0003800800010076657468480001800e000100696d6d656469617465000000340002800800010000000000280002802400028008000100fffffffd180002006d61726b2d666f722d6d61737175657261646500"),
        // iifname != "lxc*" jump mark-for-masquerade (a prefix not a multiple of 4 bytes)
        ("lxc", true, true, "0a000100666572727900000007000200643100009c00048024000180090001006d6574610000000014000280080002000000000608000100000000012c00018008000100636d700020000280080001000000000108000200000000010c000380070001006c786300480001800e000100696d6d656469617465000000340002800800010000000000280002802400028008000100fffffffd180002006d61726b2d666f722d6d61737175657261646500"),
    ];
    for (name, prefix, negate, want) in cases {
        let r = rule(
            vec![RuleMatch::Iifname {
                negate,
                name: name.to_owned(),
                prefix,
            }],
            RuleAction::Jump("mark-for-masquerade"),
        );
        assert_eq!(one_rule(&r, 1), vec![(NEWRULE, hex(want))], "{r}");
    }
}
