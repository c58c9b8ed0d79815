use std::net::{IpAddr, SocketAddr};

use netlink_packet_core::Emitable;

use super::*;
use ferry_compile::ipvs::Scheduler;

/// Emits `attr` and parses it back as a received top-level attribute would be.
fn received(cmd: u8, attr: Attr) -> IpvsMessage {
    let attrs = vec![attr];
    let mut buf = vec![0; attrs.as_slice().buffer_len()];
    attrs.as_slice().emit(&mut buf);
    IpvsMessage {
        cmd,
        attrs: raw_attrs(&buf).expect("attributes parse"),
    }
}

#[test]
fn a_virtual_server_survives_encoding_and_decoding() {
    for ip in ["10.96.0.10", "fd00:96::10"] {
        let ip: IpAddr = ip.parse().expect("ip");
        let va = VirtualAddress {
            protocol: Protocol::Udp,
            ip,
            port: 53,
        };
        let vs = VirtualServer::new(Scheduler::Mh, Some(10800), IpFamily::of(&ip));
        let msg = received(cmd::NEW_SERVICE, service_full(&va, &vs));
        assert_eq!(decode_service(&msg), Some((va, vs)));
    }
}

#[test]
fn a_real_server_survives_encoding_and_decoding() {
    let addr: SocketAddr = "[fd00:10:244::5]:8080".parse().expect("addr");
    let rs = RealServer::endpoint(addr);
    let live = decode_dest(&received(cmd::NEW_DEST, dest_full(&rs)), IpFamily::V6);
    assert_eq!(live.map(|l| l.server), Some(rs));
}

#[test]
fn the_kernels_hashed_flag_is_not_part_of_a_virtual_server() {
    let va = VirtualAddress {
        protocol: Protocol::Tcp,
        ip: "10.96.0.1".parse().expect("ip"),
        port: 443,
    };
    let mut vs = VirtualServer::new(Scheduler::Rr, None, IpFamily::V4);
    let want = vs.clone();
    vs.flags |= FLAG_HASHED;
    let msg = received(cmd::NEW_SERVICE, service_full(&va, &vs));
    assert_eq!(decode_service(&msg).map(|(_, v)| v), Some(want));
}

#[test]
fn ports_are_sent_in_network_byte_order() {
    let attr = Attr::Be16(4, 8080);
    let mut buf = vec![0; attr.buffer_len()];
    attr.emit(&mut buf);
    assert_eq!(&buf[4..6], &[0x1f, 0x90]);
}
