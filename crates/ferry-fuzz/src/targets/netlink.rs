//! The nfnetlink encoder's round trip: a delta built from the input (chains to add and delete,
//! elements of every key kind with verdicts, endpoints, ports and comments) is encoded with
//! `ferry_dataplane::encode_delta`, decoded with netlink-packet-core's message and attribute
//! buffers, and compared with what was encoded: every length consistent, the batch framed,
//! each chain and element where it belongs, with its key, verdict and comment.

use std::borrow::Cow;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use ferry_compile::nft::{Delta, DispatchChain, Element, Key, Value, Verdict};
use ferry_model::{IpFamily, Protocol};

use super::signature;

mod decode;

use decode::{decode, Decoded, Elem};

/// Sets the elements go to (the encoder writes any name; these are Ferry's).
const SETS: [&str; 4] = [
    "service-ips",
    "service-nodeports",
    "cluster-ips",
    "firewall-allow",
];

/// Reads the input as a stream of choices; zeros once it runs out.
struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn u8(&mut self) -> u8 {
        let (first, rest) = self.0.split_first().unwrap_or((&0, &[]));
        self.0 = rest;
        *first
    }
    fn u16(&mut self) -> u16 {
        u16::from_be_bytes([self.u8(), self.u8()])
    }
    fn u32(&mut self) -> u32 {
        u32::from_be_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }
    fn ip(&mut self, family: IpFamily) -> IpAddr {
        match family {
            IpFamily::V4 => Ipv4Addr::from(self.u32()).into(),
            IpFamily::V6 => Ipv6Addr::from(std::array::from_fn::<u8, 16, _>(|_| self.u8())).into(),
        }
    }
    fn protocol(&mut self) -> Protocol {
        [Protocol::Tcp, Protocol::Udp, Protocol::Sctp][usize::from(self.u8() % 3)]
    }
    /// A chain name as the compiler writes them (`[a-z0-9-]`, at most 255 bytes: the kernel's
    /// limit, which compiled names stay far below).
    fn name(&mut self) -> String {
        let len = usize::from(self.u8());
        (0..len.min(255))
            .map(|_| b"abcdefghijklmnopqrstuvwxyz0123456789-"[usize::from(self.u8() % 37)] as char)
            .collect()
    }
    /// A comment of any bytes that are UTF-8 (up to 300: longer ones are refused).
    fn comment(&mut self) -> Option<String> {
        let len = usize::from(self.u16() % 301);
        self.u8().is_multiple_of(2).then(|| {
            let bytes: Vec<u8> = (0..len).map(|_| self.u8()).collect();
            String::from_utf8_lossy(&bytes).into_owned()
        })
    }
}

/// Encodes a delta built from `input`, decodes it, compares.
pub fn run(input: &[u8]) -> u64 {
    let mut b = Bytes(input);
    let family = if b.u8().is_multiple_of(2) {
        IpFamily::V4
    } else {
        IpFamily::V6
    };
    let chains: Vec<DispatchChain> = (0..b.u8() % 4)
        .map(|_| DispatchChain {
            name: b.name(),
            rules: Vec::new(),
        })
        .collect();
    let deleted: Vec<String> = (0..b.u8() % 4).map(|_| b.name()).collect();
    let mut delta = Delta {
        add_chains: chains.iter().collect(),
        delete_chains: deleted.iter().map(String::as_str).collect(),
        ..Delta::default()
    };
    let count = usize::from(b.u16() % 2048);
    for _ in 0..count {
        let add = b.u8().is_multiple_of(2);
        let set = SETS[usize::from(b.u8() % 4)];
        let e = element(&mut b, family, set);
        let to = if add {
            &mut delta.add
        } else {
            &mut delta.delete
        };
        to.entry(set).or_default().push(Cow::Owned(e));
    }
    let bytes = match ferry_dataplane::encode_delta(b.u32(), family, &delta) {
        Ok(bytes) => bytes,
        Err(e) => return signature(e.to_string()),
    };
    let decoded = decode(&bytes).unwrap_or_else(|e| panic!("the batch does not decode: {e}"));
    compare(&delta, &decoded);
    signature((decoded.messages, count.min(64)))
}

fn element(b: &mut Bytes<'_>, family: IpFamily, set: &'static str) -> Element {
    let ip = b.ip(family);
    let port = b.u16();
    let key = match b.u8() % 8 {
        0 => Key::Addr(ip),
        1 => Key::Frontend(ip, b.protocol(), port),
        2 => Key::NodePort(b.protocol(), port),
        3 => Key::FrontendSlot(ip, b.protocol(), port, b.u32()),
        4 => Key::NodePortSlot(b.protocol(), port, b.u32()),
        5 => Key::AddrPair(ip, b.ip(family)),
        6 => Key::FrontendEndpoint(
            ip,
            b.protocol(),
            port,
            SocketAddr::new(b.ip(family), b.u16()),
        ),
        _ => Key::FrontendClient(ip, b.protocol(), port, b.ip(family)),
    };
    let value = match b.u8() % 5 {
        0 => None,
        1 => Some(Value::Verdict(Verdict::Drop)),
        2 => Some(Value::Verdict(Verdict::Goto(b.name()))),
        3 => Some(Value::Endpoint(SocketAddr::new(b.ip(family), b.u16()))),
        _ => Some(Value::Port(b.u16())),
    };
    Element {
        set,
        key,
        value,
        comment: b.comment(),
    }
}

/// Panics where the decoded batch differs from the delta.
fn compare(delta: &Delta<'_>, got: &Decoded) {
    let added: Vec<&str> = delta.add_chains.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(got.new_chains, added, "chains created");
    assert_eq!(got.deleted_chains, delta.delete_chains, "chains deleted");
    for (add, sets) in [(true, &delta.add), (false, &delta.delete)] {
        for (set, els) in sets {
            let decoded = got.elements.get(&(add, (*set).to_owned()));
            let decoded = decoded.map_or(&[][..], Vec::as_slice);
            assert_eq!(decoded.len(), els.len(), "elements of {set} (add: {add})");
            for (want, got) in els.iter().zip(decoded) {
                compare_element(want, got, add);
            }
        }
    }
}

fn compare_element(want: &Element, got: &Elem, add: bool) {
    if let Key::Frontend(ip, proto, port) = &want.key {
        let mut key = octets(ip);
        key.extend_from_slice(&[protocol_number(*proto), 0, 0, 0]);
        key.extend_from_slice(&port.to_be_bytes());
        key.extend_from_slice(&[0, 0]);
        assert_eq!(got.key, key, "key of {:?}", want.key);
    }
    let goto = match &want.value {
        Some(Value::Verdict(Verdict::Goto(chain))) if add => Some(chain.as_str()),
        _ => None,
    };
    assert_eq!(got.goto.as_deref(), goto, "verdict of {:?}", want.key);
    // A deletion names the key only.
    let comment = want.comment.as_ref().filter(|_| add).map(|c| {
        let mut udata = vec![0, u8::try_from(c.len() + 1).unwrap_or(0)];
        udata.extend_from_slice(c.as_bytes());
        udata.push(0);
        udata
    });
    assert_eq!(got.comment, comment, "comment of {:?}", want.key);
}

fn octets(ip: &IpAddr) -> Vec<u8> {
    match ip {
        IpAddr::V4(a) => a.octets().to_vec(),
        IpAddr::V6(a) => a.octets().to_vec(),
    }
}

/// The IP protocol number the key holds.
fn protocol_number(p: Protocol) -> u8 {
    match p {
        Protocol::Tcp => 6,
        Protocol::Udp => 17,
        Protocol::Sctp => 132,
    }
}
