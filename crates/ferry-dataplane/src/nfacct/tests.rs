//! The messages byte for byte, and the client against the real kernel in a private network
//! namespace (the test thread `unshare`s one; its counters go with it).

use super::message::{answers, request, Answer, MSG_GET, MSG_NEW};
use super::*;

/// A netlink message: header (length, type, flags, seq, pid 0) and payload.
fn netlink(kind: u16, flags: u16, seq: u32, payload: &[u8]) -> Vec<u8> {
    let mut m = Vec::new();
    m.extend(((16 + payload.len()) as u32).to_ne_bytes());
    m.extend(kind.to_ne_bytes());
    m.extend(flags.to_ne_bytes());
    m.extend(seq.to_ne_bytes());
    m.extend(0u32.to_ne_bytes());
    m.extend(payload);
    m
}

/// An attribute, padded to 4 bytes.
fn attr(kind: u16, value: &[u8]) -> Vec<u8> {
    let mut a = Vec::new();
    a.extend(((4 + value.len()) as u16).to_ne_bytes());
    a.extend(kind.to_ne_bytes());
    a.extend(value);
    a.resize(a.len().next_multiple_of(4), 0);
    a
}

/// nfgenmsg (AF_UNSPEC, version 0, res_id 0), then `attrs`.
fn nfgen(attrs: &[Vec<u8>]) -> Vec<u8> {
    let mut p = vec![0, 0, 0, 0];
    attrs.iter().for_each(|a| p.extend(a));
    p
}

/// The kernel's message for one counter.
fn counter_message(seq: u32, name: &str, packets: u64, bytes: u64) -> Vec<u8> {
    let mut n = name.as_bytes().to_vec();
    n.push(0);
    let attrs = [
        attr(1, &n),
        attr(2, &packets.to_be_bytes()),
        attr(3, &bytes.to_be_bytes()),
        attr(4, &1u32.to_be_bytes()),
    ];
    netlink(0x0700, 0, seq, &nfgen(&attrs))
}

/// An `NLMSG_ERROR` message: `errno` 0 is an ack.
fn error_message(seq: u32, errno: i32) -> Vec<u8> {
    let mut p = (-errno).to_ne_bytes().to_vec();
    p.extend(netlink(0x0701, 5, seq, &[]));
    netlink(2, 0, seq, &p)
}

#[test]
fn a_create_names_the_counter_with_its_nul_and_asks_for_an_ack() {
    let got = request(7, MSG_NEW, 0x405, Some("abc"));
    let want = netlink(0x0700, 0x405, 7, &nfgen(&[attr(1, b"abc\0")]));
    assert_eq!(got, want);
}

#[test]
fn a_get_is_type_0x0701_and_a_dump_has_no_name() {
    let got = request(1, MSG_GET, 5, Some("ct_state_invalid_dropped_pkts"));
    let want = netlink(
        0x0701,
        5,
        1,
        &nfgen(&[attr(1, b"ct_state_invalid_dropped_pkts\0")]),
    );
    assert_eq!(got, want);
    assert_eq!(
        request(2, MSG_GET, 0x301, None),
        netlink(0x0701, 0x301, 2, &nfgen(&[]))
    );
}

#[test]
fn an_answer_gives_the_counter_then_the_ack_and_skips_other_requests() {
    let mut datagram = counter_message(3, "localhost_nps_accepted_pkts", 5, 300);
    datagram.extend(counter_message(2, "old", 1, 1));
    datagram.extend(error_message(3, 0));
    let counter = Counter {
        name: "localhost_nps_accepted_pkts".into(),
        packets: 5,
        bytes: 300,
    };
    assert_eq!(
        answers(&datagram, 3),
        vec![Answer::Counter(counter), Answer::Done(None)]
    );
    assert_eq!(
        answers(&error_message(4, 2), 4),
        vec![Answer::Done(Some(2))]
    );
}

#[test]
fn a_counter_without_its_counts_or_a_truncated_message_is_malformed() {
    let no_bytes = netlink(0x0700, 0, 1, &nfgen(&[attr(1, b"x\0"), attr(2, &[0; 8])]));
    assert_eq!(answers(&no_bytes, 1), vec![Answer::Malformed]);
    let whole = counter_message(1, "x", 1, 1);
    assert_eq!(
        answers(&whole[..whole.len() - 5], 1),
        vec![Answer::Malformed]
    );
}

#[test]
fn names_are_checked_before_anything_is_sent() {
    for bad in ["", "a\0b", &"n".repeat(NAME_MAX + 1)] {
        assert!(
            matches!(check_name(bad), Err(NfacctError::BadName(_))),
            "{bad:?}"
        );
    }
    assert!(check_name(&"n".repeat(NAME_MAX)).is_ok());
}

#[test]
#[ignore = "needs root: network namespaces"]
fn counters_are_created_read_listed_and_kept_by_ensure() {
    ferry_lab::netns::in_private_netns(|| {
        let mut acct = Nfacct::open().expect("socket");
        let missing = acct.get("ferry_test").expect_err("none yet");
        assert!(missing.is_not_found(), "{missing}");
        acct.ensure("ferry_test").expect("ensure");
        let created = acct.get("ferry_test").expect("get");
        assert_eq!((created.packets, created.bytes), (0, 0));
        let again = acct.add("ferry_test").expect_err("exists");
        assert!(!again.is_not_found());
        assert!(again
            .to_string()
            .contains("create nfacct counter \"ferry_test\""));
        acct.ensure("ferry_test").expect("ensure keeps it");
        acct.add("ferry_other").expect("add");
        let mut names: Vec<String> = acct
            .list()
            .expect("list")
            .into_iter()
            .map(|c| c.name)
            .collect();
        names.sort();
        assert_eq!(names, ["ferry_other", "ferry_test"]);
    });
}
