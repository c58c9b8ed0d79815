//! Taking over a node that kube-proxy ran in IPVS mode: k8s-node1 is given the state upstream
//! leaves behind (kube-ipvs0 with a stale address, virtual servers of a Service that is gone
//! and a localhost NodePort of older versions, upstream's sets with a stale entry, its chains,
//! jumps and rules, and the chains of older kubelets), a client connection is opened through
//! it, and Ferry starts: the connection survives, what is still wanted is reused, the rest is
//! replaced or removed, and nothing is doubled.

use ferry_lab::spec::NODE1;
use ferry_lab::{http, Host};

use crate::seed::*;

/// What kube-proxy (IPVS mode, Cluster policy) leaves on k8s-node1 for the seed, plus a stale
/// Service (`kubernetes`, 10.96.0.1:443) and an older version's localhost NodePort.
const KUBE_PROXY_STATE: &str = r#"set -e
ip link add kube-ipvs0 type dummy
for a in 10.96.0.1 10.96.0.10 10.96.198.86; do ip addr add $a/32 dev kube-ipvs0; done
for vs in 10.96.0.1:443 10.96.198.86:8080 10.1.1.17:32223 127.0.0.1:32223; do ipvsadm -A -t $vs -s rr; done
ipvsadm -a -t 10.96.0.1:443 -r 10.1.1.12:6443 -m -w 1
for vs in 10.96.198.86:8080 10.1.1.17:32223 127.0.0.1:32223; do
  for rs in 192.168.169.166:56010 192.168.169.168:56010; do ipvsadm -a -t $vs -r $rs -m -w 1; done
done
ipset create KUBE-CLUSTER-IP hash:ip,port family inet hashsize 1024 maxelem 65536
ipset add KUBE-CLUSTER-IP 10.96.0.1,tcp:443
ipset add KUBE-CLUSTER-IP 10.96.198.86,tcp:8080
ipset create KUBE-NODE-PORT-TCP bitmap:port range 0-65535
ipset add KUBE-NODE-PORT-TCP 32223
ipset create KUBE-LOOP-BACK hash:ip,port,ip family inet hashsize 1024 maxelem 65536
iptables-restore --noflush <<EOF
*nat
:KUBE-SERVICES - [0:0]
:KUBE-POSTROUTING - [0:0]
:KUBE-NODE-PORT - [0:0]
:KUBE-LOAD-BALANCER - [0:0]
:KUBE-MARK-MASQ - [0:0]
:KUBE-FIREWALL - [0:0]
:KUBE-MARK-DROP - [0:0]
-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING
-A KUBE-SERVICES -s 127.0.0.0/8 -j RETURN
-A KUBE-SERVICES ! -s 192.168.0.0/16 -m comment --comment "Kubernetes service cluster ip + port for masquerade purpose" -m set --match-set KUBE-CLUSTER-IP dst,dst -j KUBE-MARK-MASQ
-A KUBE-SERVICES -m addrtype --dst-type LOCAL -j KUBE-NODE-PORT
-A KUBE-SERVICES -m set --match-set KUBE-CLUSTER-IP dst,dst -j ACCEPT
-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN
-A KUBE-POSTROUTING -j MARK --xor-mark 0x4000
-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully
-A KUBE-NODE-PORT -p tcp -m comment --comment "Kubernetes nodeport TCP port for masquerade purpose" -m set --match-set KUBE-NODE-PORT-TCP dst -j KUBE-MARK-MASQ
-A KUBE-LOAD-BALANCER -j KUBE-MARK-MASQ
-A KUBE-MARK-MASQ -j MARK --or-mark 0x4000
-A KUBE-FIREWALL -j KUBE-MARK-DROP
-A KUBE-MARK-DROP -j MARK --or-mark 0x8000
COMMIT
*filter
:KUBE-FORWARD - [0:0]
:KUBE-NODE-PORT - [0:0]
-A FORWARD -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD
-A INPUT -m comment --comment "kubernetes health check rules" -j KUBE-NODE-PORT
-A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x4000/0x4000 -j ACCEPT
-A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
COMMIT
EOF
"#;

fn count(text: &str, line: &str) -> usize {
    text.lines().filter(|l| *l == line).count()
}

pub fn taking_over_from_kube_proxy_in_ipvs_mode() {
    let mut seed = SeedLab::start(Mode::Ipvs, "Cluster");
    seed.ferry(NODE1).stop().expect("stop ferry");
    seed.lab
        .exec(NODE1, [FERRY, "cleanup"])
        .expect("ferry cleanup");
    seed.lab
        .exec(NODE1, ["sh", "-c", KUBE_PROXY_STATE])
        .expect("kube-proxy's state");
    // A client connection through kube-proxy's NodePort virtual server.
    let addr = "10.1.1.17:32223".parse().expect("addr");
    let mut conn = seed
        .lab
        .connect(&Host::default_client(), addr)
        .expect("connect through kube-proxy's rules");
    let first = http::get(&mut conn, "/hello").expect("first request");
    let server = Hello::parse(&first.body).server_ip;

    // The log is appended to: wait for the new process's first sync.
    let before = seed.syncs(NODE1);
    seed.ferry(NODE1).restart().expect("start ferry");
    seed.wait_synced(NODE1, before + 1);
    let again = http::get(&mut conn, "/hello").expect("the connection survives the takeover");
    assert_eq!(Hello::parse(&again.body).server_ip, server);

    let list = seed.lab.exec(NODE1, ["ipvsadm", "-Ln"]).expect("ipvsadm");
    for gone in ["10.96.0.1:443", "127.0.0.1:32223"] {
        assert!(!list.contains(gone), "{gone} is removed:\n{list}");
    }
    for kept in [
        format!("TCP  {CLUSTER_IP}:8080 rr"),
        "TCP  10.1.1.17:32223 rr".to_owned(),
        format!("TCP  {EMPTY_CLUSTER_IP}:80 rr"),
    ] {
        assert!(list.contains(&kept), "{kept}:\n{list}");
    }
    let link = seed
        .lab
        .exec(NODE1, ["ip", "addr", "show", "kube-ipvs0"])
        .expect("ip");
    assert!(
        !link.contains("10.96.0.1/32") && !link.contains("10.96.0.10/32"),
        "{link}"
    );
    assert!(link.contains(&format!("inet {CLUSTER_IP}/32")), "{link}");
    let set = seed
        .lab
        .exec(NODE1, ["ipset", "list", "KUBE-CLUSTER-IP"])
        .expect("ipset");
    assert!(!set.contains("10.96.0.1,tcp:443"), "{set}");
    assert!(set.contains(&format!("{EMPTY_CLUSTER_IP},tcp:80")), "{set}");

    let nat = seed
        .lab
        .exec(NODE1, ["iptables-save", "-t", "nat"])
        .expect("save");
    for jump in [
        "-A PREROUTING -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES",
        "-A OUTPUT -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES",
        "-A POSTROUTING -m comment --comment \"kubernetes postrouting rules\" -j KUBE-POSTROUTING",
    ] {
        assert_eq!(count(&nat, jump), 1, "{jump}:\n{nat}");
    }
    assert!(
        !nat.contains("-A KUBE-SERVICES -s 127.0.0.0/8 -j RETURN"),
        "{nat}"
    );
    // Not Ferry's (older kubelets made them): left as they are.
    assert!(
        nat.contains("-A KUBE-MARK-DROP -j MARK --set-xmark 0x8000/0x8000"),
        "{nat}"
    );
    let filter = seed
        .lab
        .exec(NODE1, ["iptables-save", "-t", "filter"])
        .expect("save");
    let fwd = "-A FORWARD -m comment --comment \"kubernetes forwarding rules\" -j KUBE-FORWARD";
    assert_eq!(count(&filter, fwd), 1, "{filter}");
    let h = seed.hello(&Host::default_client(), &node_port_url("10.1.1.17"));
    assert_eq!(
        h.client_ip, "10.1.1.17",
        "new connections are masqueraded by Ferry's rules"
    );
    println!("taken over from kube-proxy:\n{list}\n{nat}");
}
