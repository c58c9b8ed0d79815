use super::*;
use crate::netlink::encode::elements::key_end_bytes;
use ferry_compile::nft::{Element, Key, Value};
use ferry_model::Protocol;

#[test]
fn slot_keys_pad_every_field_to_a_register() {
    let key = Key::FrontendSlot("10.96.0.1".parse().expect("ip"), Protocol::Tcp, 80, 3);
    let mut want = vec![10, 96, 0, 1, 6, 0, 0, 0, 0, 80, 0, 0];
    want.extend_from_slice(&3u32.to_ne_bytes());
    assert_eq!(key_bytes(&key), Ok(want));
    let np = Key::NodePortSlot(Protocol::Sctp, 30868, 0);
    let mut want = vec![132, 0, 0, 0, 0x78, 0x94, 0, 0];
    want.extend_from_slice(&0u32.to_ne_bytes());
    assert_eq!(key_bytes(&np), Ok(want));
    assert!(key_bytes(&Key::Net("10.0.0.0/8".parse().expect("net"))).is_err());
}

#[test]
fn firewall_ranges_are_a_key_and_a_key_end() {
    let key = Key::FrontendSource(
        "203.0.113.10".parse().expect("ip"),
        Protocol::Tcp,
        443,
        "10.1.1.96/28".parse().expect("net"),
    );
    let head = [203, 0, 113, 10, 6, 0, 0, 0, 1, 187, 0, 0];
    let mut start = head.to_vec();
    start.extend_from_slice(&[10, 1, 1, 96]);
    let mut end = head.to_vec();
    end.extend_from_slice(&[10, 1, 1, 111]);
    assert_eq!(key_bytes(&key), Ok(start));
    assert_eq!(key_end_bytes(&key), Some(end));
    let single = Key::FrontendSource(
        "203.0.113.10".parse().expect("ip"),
        Protocol::Udp,
        53,
        "10.1.1.100/32".parse().expect("net"),
    );
    assert_eq!(
        key_bytes(&single).map(|k| k[12..].to_vec()),
        Ok(vec![10, 1, 1, 100])
    );
    assert_eq!(
        key_end_bytes(&single).map(|k| k[12..].to_vec()),
        Some(vec![10, 1, 1, 100])
    );
    let plain = Key::Frontend("203.0.113.10".parse().expect("ip"), Protocol::Tcp, 443);
    assert_eq!(key_end_bytes(&plain), None);
}

#[test]
fn affinity_keys_match_the_registers_nft_loads() {
    // `ct original ip daddr . meta l4proto . ct original proto-dst . ip daddr . th dport`
    let ep = "10.0.1.5:8080".parse().expect("endpoint");
    let key = Key::FrontendEndpoint("10.96.0.1".parse().expect("ip"), Protocol::Tcp, 80, ep);
    let want = vec![
        10, 96, 0, 1, 6, 0, 0, 0, 0, 80, 0, 0, 10, 0, 1, 5, 0x1f, 0x90, 0, 0,
    ];
    assert_eq!(key_bytes(&key), Ok(want));
    let np = Key::NodePortClient(Protocol::Udp, 30053, "203.0.113.9".parse().expect("ip"));
    let want = vec![17, 0, 0, 0, 0x75, 0x65, 0, 0, 203, 0, 113, 9];
    assert_eq!(key_bytes(&np), Ok(want));
}

fn lengths_and_kinds(bytes: &[u8]) -> Vec<(usize, u16)> {
    let mut out = Vec::new();
    let mut rest = bytes;
    while !rest.is_empty() {
        let len = u32::from_ne_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
        out.push((len, u16::from_ne_bytes([rest[4], rest[5]])));
        rest = &rest[len..];
    }
    out
}

#[test]
fn a_batch_is_framed_and_counts_its_acks() {
    let ep = Element::new(
        "cluster-endpoints",
        Key::FrontendSlot("10.96.0.1".parse().expect("ip"), Protocol::Tcp, 80, 0),
        Some(Value::Endpoint("10.0.0.1:8080".parse().expect("ep"))),
    );
    let mut b = Batch::new(7, IpFamily::V4, "ferry");
    b.elements(false, "cluster-endpoints", [&ep])
        .expect("encodable");
    b.elements(true, "cluster-endpoints", [&ep])
        .expect("encodable");
    let (bytes, acks, next) = b.finish();
    assert_eq!(acks, 2);
    assert_eq!(next, 11, "begin, two messages, end");
    let msgs = lengths_and_kinds(&bytes);
    assert!(msgs.iter().all(|(len, _)| len % 4 == 0));
    let kinds: Vec<u16> = msgs.iter().map(|(_, k)| *k).collect();
    assert_eq!(kinds, vec![0x10, 0x0a0e, 0x0a0c, 0x11]);
}

#[test]
fn many_elements_are_split_below_the_attribute_limit() {
    let els: Vec<Element> = (0..5000u32)
        .map(|i| {
            Element::new(
                "cluster-endpoints",
                Key::FrontendSlot("10.96.0.1".parse().expect("ip"), Protocol::Tcp, 80, i),
                Some(Value::Endpoint("10.0.0.1:8080".parse().expect("ep"))),
            )
        })
        .collect();
    let refs: Vec<&Element> = els.iter().collect();
    let mut b = Batch::new(1, IpFamily::V4, "ferry");
    b.elements(true, "cluster-endpoints", refs)
        .expect("encodable");
    let (bytes, acks, _) = b.finish();
    assert!(acks > 1, "split into several messages");
    assert!(lengths_and_kinds(&bytes)
        .iter()
        .all(|(len, _)| *len < 65536));
}

#[test]
fn errors_reads_acks_and_failures() {
    let mut buf = Vec::new();
    for (seq, code) in [(7u32, 0i32), (8, -2)] {
        buf.extend_from_slice(&36u32.to_ne_bytes());
        buf.extend_from_slice(&NLMSG_ERROR.to_ne_bytes());
        buf.extend_from_slice(&[0; 2]);
        buf.extend_from_slice(&seq.to_ne_bytes());
        buf.extend_from_slice(&[0; 4]);
        buf.extend_from_slice(&code.to_ne_bytes());
        buf.extend_from_slice(&[0; 16]);
    }
    assert_eq!(errors(&buf).expect("well formed"), vec![(7, 0), (8, -2)]);
    assert_eq!(first_seq(&buf), Some(7));
    assert_eq!(first_seq(&buf[..4]), None);
}
