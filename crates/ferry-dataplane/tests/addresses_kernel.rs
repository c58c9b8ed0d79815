//! The node's addresses as `ferry explain --live` reads them: every address of every
//! interface, secondary ones included, in a private network namespace.

// Only its namespace helper: `nft` is for the nftables tests.
#[allow(dead_code)]
mod support;
use support::in_new_netns;

use std::net::IpAddr;
use std::process::Command;

use ferry_dataplane::addresses::local_addresses;

fn ip(args: &str) {
    let out = Command::new("ip")
        .args(args.split(' '))
        .output()
        .expect("run ip");
    assert!(
        out.status.success(),
        "ip {args}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
#[ignore = "needs root: network namespaces"]
fn every_interface_address_is_read_secondary_ones_included() {
    in_new_netns(|| {
        ip("link set lo up");
        ip("link add eth0 type veth peer name eth1");
        ip("addr add 10.1.1.9/24 dev eth0");
        ip("addr add 10.1.1.19/24 dev eth0");
        ip("addr add 10.7.0.1/32 dev lo");
        ip("link set eth0 up");
        let got = local_addresses().expect("read the addresses");
        for want in ["127.0.0.1", "10.1.1.9", "10.1.1.19", "10.7.0.1"] {
            let want: IpAddr = want.parse().expect("ip");
            assert!(got.contains(&want), "{want} in {got:?}");
        }
        assert!(!got.contains(&"10.1.1.20".parse::<IpAddr>().expect("ip")));
        let mut sorted = got.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(got, sorted, "sorted, each once");
    });
}
