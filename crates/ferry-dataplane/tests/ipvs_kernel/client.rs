//! Ferry's IPVS client and kube-ipvs0 against the real kernel, compared with `ipvsadm -Ln` and
//! `ip addr`.

use ferry_compile::ipvs::{ipvsadm_list, RealServer, RealServerLine, Scheduler, VirtualServer};
use ferry_dataplane::ipvs::{Change, IpvsClient, Links};
use ferry_model::fixtures::ip;
use ferry_model::{IpFamily, Protocol};

use crate::guest::{blocks, in_guest_netns, sh, va};

#[test]
#[ignore = "needs root: qemu IPVS guest"]
fn the_client_programs_what_ipvsadm_shows() {
    in_guest_netns(|| {
        // IPVS refuses (EINVAL) an IPv4 real server the node has no route to.
        sh(
            "ip link add pods type dummy && ip addr add 10.0.0.1/24 dev pods \
            && ip link set pods up",
        );
        let mut c = IpvsClient::open().expect("IPVS family");
        let web = va(Protocol::Tcp, "10.96.0.10:80");
        let dns = va(Protocol::Udp, "[fd00:96::10]:53");
        let sticky = VirtualServer::new(Scheduler::Mh, Some(10800), IpFamily::V6);
        let changes = vec![
            Change::AddService(web, VirtualServer::new(Scheduler::Rr, None, IpFamily::V4)),
            Change::AddReal(
                web,
                RealServer::endpoint("10.0.0.5:8080".parse().expect("address")),
            ),
            Change::AddReal(
                web,
                RealServer::endpoint("10.0.0.6:8080".parse().expect("address")),
            ),
            Change::AddService(dns, sticky.clone()),
            Change::AddReal(
                dns,
                RealServer::endpoint("[fd00::5]:53".parse().expect("address")),
            ),
        ];
        let refused = c.apply(&changes).expect("apply");
        assert!(refused.is_empty(), "{refused:?}");
        let table = c.table().expect("dump");
        assert_eq!(table.len(), 2);
        assert_eq!(table[&dns].0, sticky);
        assert_eq!(table[&web].1.len(), 2);
        let ours = ipvsadm_list(table.iter().map(|(a, (vs, reals))| {
            let lines = reals
                .iter()
                .map(|r| RealServerLine {
                    address: r.server.address,
                    forward: r.server.forward,
                    weight: r.server.weight,
                    active: r.active,
                    inactive: r.inactive,
                })
                .collect();
            (a, vs, lines)
        }));
        let theirs = sh("ipvsadm -Ln");
        println!("{theirs}");
        assert_eq!(theirs.lines().next(), ours.lines().next(), "header");
        assert_eq!(blocks(&theirs), blocks(&ours));
        // An existing service is refused, the rest of the batch still applies.
        let mut drained = RealServer::endpoint("10.0.0.6:8080".parse().expect("address"));
        drained.weight = 0;
        let refused = c
            .apply(&[
                Change::AddService(web, VirtualServer::new(Scheduler::Rr, None, IpFamily::V4)),
                Change::UpdateReal(web, drained),
                Change::DeleteService(dns),
            ])
            .expect("apply");
        assert_eq!(refused.len(), 1, "{refused:?}");
        let table = c.table().expect("dump");
        assert_eq!(table.len(), 1);
        assert!(table[&web].1.iter().any(|r| r.server == drained));
        c.set_timeouts(900, 120, 300).expect("set timeouts");
        assert_eq!(c.timeouts().expect("timeouts"), (900, 120, 300));
        assert_eq!(c.info().expect("info").0, 0x010201);
    });
}

#[test]
#[ignore = "needs root: qemu IPVS guest"]
fn kube_ipvs0_is_a_down_noarp_dummy_with_host_addresses() {
    in_guest_netns(|| {
        let mut links = Links::open().expect("rtnetlink");
        let (index, created) = links.ensure_dummy("kube-ipvs0").expect("dummy");
        assert!(created);
        assert_eq!(
            links.ensure_dummy("kube-ipvs0").expect("again"),
            (index, false)
        );
        for a in ["10.96.0.1", "10.96.0.10", "fd00:96::1", "10.96.0.1"] {
            links
                .add_address(index, a.parse().expect("address"))
                .expect("add");
        }
        links
            .delete_address(index, "10.96.0.10".parse().expect("address"))
            .expect("del");
        links
            .delete_address(index, "10.96.0.10".parse().expect("address"))
            .expect("del again");
        let shown = sh("ip addr show kube-ipvs0");
        println!("{shown}");
        assert!(shown.contains("<BROADCAST,NOARP>"), "{shown}");
        assert!(shown.contains("state DOWN"), "{shown}");
        assert!(shown.contains("inet 10.96.0.1/32 scope global kube-ipvs0"));
        assert!(shown.contains("inet6 fd00:96::1/128"));
        assert!(!shown.contains("10.96.0.10"));
        let mut addrs = links.addresses(index).expect("list");
        addrs.sort();
        assert_eq!(addrs, vec![ip("10.96.0.1"), ip("fd00:96::1")]);
        assert!(links.delete("kube-ipvs0").expect("delete"));
        assert_eq!(links.index_of("kube-ipvs0").expect("lookup"), None);
    });
}
