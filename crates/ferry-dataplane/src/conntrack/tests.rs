use netlink_packet_core::{DefaultNla, DoneMessage, NLM_F_MULTIPART};
use netlink_packet_netfilter::conntrack::Protocol;

use super::*;

fn tuple(src: &str, dst: &str, sport: u16, dport: u16) -> Vec<Tuple> {
    vec![
        Tuple::Ip(vec![
            IPTuple::SourceAddress(src.parse().expect("ip")),
            IPTuple::DestinationAddress(dst.parse().expect("ip")),
        ]),
        Tuple::Proto(vec![
            ProtoTuple::Protocol(Protocol::Udp),
            ProtoTuple::SourcePort(sport),
            ProtoTuple::DestinationPort(dport),
        ]),
    ]
}

fn id(value: u32) -> ConntrackAttribute {
    ConntrackAttribute::Other(DefaultNla::new(CTA_ID, value.to_be_bytes().to_vec()))
}

/// A DNATed UDP flow as ctnetlink dumps it: client 192.168.235.200:5000 → ClusterIP
/// 10.96.0.10:53, answered by the endpoint 192.168.169.166:5353.
fn dnated() -> Vec<ConntrackAttribute> {
    vec![
        ConntrackAttribute::CtaTupleOrig(tuple("192.168.235.200", "10.96.0.10", 5000, 53)),
        ConntrackAttribute::CtaTupleReply(tuple("192.168.169.166", "192.168.235.200", 5353, 5000)),
        ConntrackAttribute::CtaTimeout(30),
        id(7),
    ]
}

fn datagram(messages: Vec<NetlinkMessage<NetfilterMessage>>) -> Vec<u8> {
    let mut out = Vec::new();
    for mut m in messages {
        m.finalize();
        let mut buf = vec![0; m.buffer_len()];
        m.serialize(&mut buf);
        out.extend(buf);
    }
    out
}

fn dump_message(seq: u32, attrs: Vec<ConntrackAttribute>) -> NetlinkMessage<NetfilterMessage> {
    let mut header = NetlinkHeader::default();
    header.sequence_number = seq;
    header.flags = NLM_F_MULTIPART;
    let nf = NetfilterMessage::new(
        NetfilterHeader::new(NetfilterProtoFamily::IPv4, 0, 0),
        ConntrackMessage::New(attrs),
    );
    NetlinkMessage::new(header, NetlinkPayload::from(nf))
}

#[test]
fn a_dumped_entry_gives_its_tuples_and_the_key_to_delete_it_by() {
    let f = flow(dnated()).expect("complete entry");
    assert_eq!(f.protocol, IPPROTO_UDP);
    assert_eq!(f.orig_src, "192.168.235.200:5000".parse().expect("addr"));
    assert_eq!(f.orig_dst, "10.96.0.10:53".parse().expect("addr"));
    assert_eq!(
        f.reply_src,
        "192.168.169.166".parse::<IpAddr>().expect("ip")
    );
    // Deleted by original tuple and id; the reply tuple and the timeout are not sent.
    assert_eq!(
        f.key,
        vec![
            ConntrackAttribute::CtaTupleOrig(tuple("192.168.235.200", "10.96.0.10", 5000, 53)),
            id(7),
        ]
    );
}

#[test]
fn an_entry_without_a_reply_tuple_is_not_a_flow() {
    let mut attrs = dnated();
    attrs.retain(|a| !matches!(a, ConntrackAttribute::CtaTupleReply(_)));
    assert_eq!(flow(attrs), None);
}

#[test]
fn a_datagram_splits_into_its_messages() {
    let mut done = NetlinkMessage::new(
        NetlinkHeader::default(),
        NetlinkPayload::<NetfilterMessage>::Done(DoneMessage::default()),
    );
    done.header.sequence_number = 3;
    let buf = datagram(vec![
        dump_message(3, dnated()),
        dump_message(3, dnated()),
        done,
    ]);
    let msgs: Vec<_> = messages(&buf).collect::<Result<_, _>>().expect("decodable");
    assert_eq!(msgs.len(), 3);
    assert!(matches!(msgs[2].payload, NetlinkPayload::Done(_)));
    match &msgs[0].payload {
        NetlinkPayload::InnerMessage(NetfilterMessage {
            inner: NetfilterMessageInner::Conntrack(ConntrackMessage::New(attrs)),
            ..
        }) => assert_eq!(flow(attrs.clone()), flow(dnated())),
        other => panic!("not a conntrack entry: {other:?}"),
    }
}

#[test]
fn a_truncated_datagram_is_reported_not_panicked_on() {
    let buf = datagram(vec![dump_message(1, dnated())]);
    let cut = &buf[..buf.len() - 6];
    assert!(messages(cut).any(|m| m.is_err()));
}

#[test]
fn no_filters_means_no_dump() {
    // Works without privileges: nothing is opened when there is nothing to delete.
    assert_eq!(
        delete_stale_udp(IpFamily::V4, &[]).expect("no-op"),
        CleanupReport::default()
    );
}
