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
        "192.168.169.166:5353".parse::<SocketAddr>().expect("addr")
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

/// The real kernel, in a network namespace of the test's own (root only; skipped otherwise).
mod kernel {
    use std::collections::BTreeSet;
    use std::fs::File;
    use std::process::Command;

    use ferry_compile::conntrack::Frontend;
    use nix::sched::{setns, CloneFlags};

    use super::*;

    /// A namespace deleted on drop, even when the test panics.
    struct Netns(String);

    impl Netns {
        fn new(tag: &str) -> Netns {
            assert!(
                nix::unistd::geteuid().is_root(),
                "needs root (network namespaces): run the ignored tests as root"
            );
            let name = format!("ferryct-{}-{tag}", std::process::id());
            run(&["ip", "netns", "add", &name]);
            Netns(name)
        }

        /// `conntrack <args>` in the namespace.
        fn conntrack(&self, args: &[&str]) -> String {
            let mut argv = vec!["ip", "netns", "exec", &self.0, "conntrack"];
            argv.extend(args);
            run(&argv)
        }

        /// Runs `f` on a thread inside the namespace.
        fn enter<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
            let file = File::open(format!("/run/netns/{}", self.0)).expect("netns file");
            std::thread::scope(|s| {
                s.spawn(move || {
                    setns(&file, CloneFlags::CLONE_NEWNET).expect("setns");
                    f()
                })
                .join()
                .expect("thread")
            })
        }
    }

    impl Drop for Netns {
        fn drop(&mut self) {
            let _ = Command::new("ip")
                .args(["netns", "delete", &self.0])
                .status();
        }
    }

    fn run(argv: &[&str]) -> String {
        let out = Command::new(argv[0])
            .args(&argv[1..])
            .output()
            .expect("run");
        assert!(
            out.status.success(),
            "{argv:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Inserts a flow `192.168.235.200:sport → dst:dport` answered by `reply_src:5353`.
    fn insert(ns: &Netns, proto: &str, dst: &str, dport: u16, reply_src: &str, sport: u16) {
        let (sport, dport) = (sport.to_string(), dport.to_string());
        let tcp_state: &[&str] = if proto == "tcp" {
            &["--state", "ESTABLISHED"]
        } else {
            &[]
        };
        let mut args = vec![
            "-I",
            "-p",
            proto,
            "-s",
            "192.168.235.200",
            "-d",
            dst,
            "--sport",
            &sport,
            "--dport",
            &dport,
            "-r",
            reply_src,
            "-q",
            "192.168.235.200",
            "--reply-port-src",
            "5353",
            "--reply-port-dst",
            &sport,
            "-t",
            "120",
            "-u",
            "SEEN_REPLY",
        ];
        args.extend(tcp_state);
        ns.conntrack(&args);
    }

    #[test]
    #[ignore = "needs root: network namespaces"]
    fn deletes_exactly_the_stale_udp_entries() {
        let ns = Netns::new("del");
        // Stale: DNATed to the removed endpoint, never DNATed, NodePort to the removed endpoint.
        insert(&ns, "udp", "10.96.0.10", 53, "10.0.1.1", 5001);
        insert(&ns, "udp", "10.96.0.10", 53, "10.96.0.10", 5002);
        insert(&ns, "udp", "10.1.1.9", 30053, "10.0.1.1", 5003);
        // Live or unrelated: the serving endpoint, TCP, another port.
        insert(&ns, "udp", "10.96.0.10", 53, "10.0.1.2", 5004);
        insert(&ns, "tcp", "10.96.0.10", 53, "10.0.1.1", 5005);
        insert(&ns, "udp", "10.96.0.10", 54, "10.0.1.1", 5006);
        let keep: BTreeSet<SocketAddr> = ["10.0.1.2:5353".parse().expect("addr")].into();
        let filters = [
            StaleFlowFilter {
                frontend: Frontend::Address("10.96.0.10:53".parse().expect("addr")),
                keep: keep.clone(),
            },
            StaleFlowFilter {
                frontend: Frontend::NodePort(30053),
                keep,
            },
        ];
        let report = ns
            .enter(|| delete_stale_udp(IpFamily::V4, &filters))
            .expect("cleanup");
        assert_eq!(
            (
                report.dumped,
                report.stale,
                report.deleted,
                report.already_gone
            ),
            (6, 3, 3, 0),
            "{report:?}"
        );
        let left = ns.conntrack(&["-L"]);
        let mut sports: Vec<&str> = left
            .lines()
            .filter_map(|l| l.split_whitespace().find_map(|w| w.strip_prefix("sport=")))
            .collect();
        sports.sort();
        assert_eq!(sports, ["5004", "5005", "5006"], "{left}");
    }

    #[test]
    #[ignore = "needs root: network namespaces"]
    fn deleting_an_entry_that_is_gone_is_enoent() {
        let ns = Netns::new("gone");
        let f = flow(dnated()).expect("flow");
        let result = ns.enter(|| {
            let mut ct = Ctnetlink::open().expect("socket");
            ct.delete(IpFamily::V4, &f)
        });
        assert_eq!(
            result.expect_err("no such entry").raw_os_error(),
            Some(ENOENT)
        );
    }
}
