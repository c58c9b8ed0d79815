//! The socket against the real kernel's limits, in a private network namespace (the test
//! thread `unshare`s one; it disappears with the thread): a batch whose answers do not fit the
//! receive buffer (`ENOBUFS`, drill 6), and the answers such a batch leaves behind.

use ferry_compile::nft::{Delta, DispatchChain};
use ferry_model::IpFamily;
use nix::sys::socket::{setsockopt, sockopt};

use super::{NetlinkError, NetlinkSocket, NODE_LEVEL_SETS};
use crate::nft_table::{NftCli, NftRunner as _};
use ferry_lab::netns::{in_private_netns as in_new_netns, nft};

/// `n` empty chains named `c0`, `c1`, …: each asks for two answers (create, flush).
fn chains(n: usize) -> Vec<DispatchChain> {
    (0..n)
        .map(|i| DispatchChain {
            name: format!("c{i}"),
            rules: Vec::new(),
        })
        .collect()
}

/// The socket with the smallest receive buffer the kernel allows.
fn starved() -> NetlinkSocket {
    let s = NetlinkSocket::open().expect("socket");
    setsockopt(&s.fd, sockopt::RcvBufForce, &0).expect("SO_RCVBUFFORCE");
    s
}

#[test]
#[ignore = "needs root: network namespaces"]
fn a_batch_with_more_answers_than_the_first_receive_buffer_holds_is_applied() {
    // 40 000 answers: the first buffer (8 MiB, doubled by the kernel) held between 16 000 and
    // 32 000 before the socket grew it for a batch's answers.
    in_new_netns(|| {
        nft(&["add", "table", "ip", "ferry"]);
        let mut s = NetlinkSocket::open().expect("socket");
        let chains = chains(20_000);
        let delta = Delta {
            add_chains: chains.iter().collect(),
            ..Delta::default()
        };
        s.apply(IpFamily::V4, &delta).expect("the batch");
        assert_eq!(s.chains(IpFamily::V4).expect("chains").len(), 20_000);
    });
}

#[test]
#[ignore = "needs root: network namespaces"]
fn answers_lost_to_enobufs_are_never_taken_for_the_next_batchs() {
    in_new_netns(|| {
        nft(&["add", "table", "ip", "ferry"]);
        let mut s = starved();
        // Pretend the buffer is large: the batch's answers overflow it for real.
        s.rcvbuf = usize::MAX;
        let chains = chains(2_000);
        let delta = Delta {
            add_chains: chains.iter().collect(),
            ..Delta::default()
        };
        let first = s.apply(IpFamily::V4, &delta);
        assert!(
            matches!(first, Err(NetlinkError::Socket(nix::errno::Errno::ENOBUFS))),
            "{first:?}"
        );
        // What the overflowing batch's answers left queued must not answer this one: deleting
        // a chain that does not exist is refused.
        let delete = Delta {
            delete_chains: vec!["no-such-chain"],
            ..Delta::default()
        };
        let second = s.apply(IpFamily::V4, &delete);
        assert!(
            matches!(
                second,
                Err(NetlinkError::Rejected(nix::errno::Errno::ENOENT))
            ),
            "{second:?}"
        );
        // And the socket still reads dumps.
        assert_eq!(s.chains(IpFamily::V4).expect("chains").len(), 2_000);
    });
}

/// `services` ClusterIP Services of `endpoints` endpoints each, compiled for node `n1`.
fn large_ruleset(services: usize, endpoints: usize) -> ferry_compile::nft::Ruleset {
    use ferry_model::fixtures::{mk_endpoint, mk_node, mk_service, mk_slice};
    use ferry_model::{ClusterState, NodeContext, NodeView, Object};
    let mut state = ClusterState::new();
    for i in 0..services {
        let (hi, lo) = (i / 250, i % 250);
        let name = format!("s{i}");
        let ip = format!("10.96.{hi}.{}", lo + 1);
        state.apply(Object::from(mk_service("dev", &name, &ip, 80)));
        let eps = (0..endpoints)
            .map(|e| mk_endpoint(&format!("10.{}.{hi}.{}", 64 + e, lo + 1), "n1"))
            .collect();
        state.apply(Object::from(mk_slice("dev", &name, 8080, eps)));
    }
    state.apply(Object::from(mk_node("n1", "10.1.1.9", "10.64.0.0/12")));
    let ctx = NodeContext {
        node_name: "n1".into(),
        family: IpFamily::V4,
    };
    let plan = ferry_compile::Plan::build(
        &NodeView::build(&state, &ctx),
        &ferry_compile::CompileConfig::default(),
    );
    ferry_compile::nft::render(&plan)
}

#[test]
#[ignore = "needs root: network namespaces"]
fn a_new_tables_first_sync_goes_in_several_transactions_and_leaves_what_one_batch_does() {
    in_new_netns(|| {
        // More than FRESH_BATCH_BYTES of netlink messages: two transactions or more.
        let desired = large_ruleset(2_000, 10);
        let skeleton = ferry_compile::nft::Transaction::skeleton(&desired).text;
        NftCli::default().run(&skeleton).expect("the skeleton");

        let mut s = NetlinkSocket::open().expect("socket");
        let existing = s.chains(IpFamily::V4).expect("chains");
        let before = s.generation().expect("generation");
        let written = s.apply_full(&desired, &existing, true).expect("fresh sync");
        let fresh = s.generation().expect("generation").wrapping_sub(before);
        let listed = nft(&["list", "table", "ip", "ferry"]);
        assert!(fresh >= 2, "{fresh} transactions");
        let bulk = desired
            .sets
            .iter()
            .filter(|s| !NODE_LEVEL_SETS.contains(&s.name) && !s.dynamic);
        let elements: usize = bulk.map(|s| desired.set_elements(s.name).count()).sum();
        assert_eq!(written, elements);
        assert_eq!(
            listed.matches("10.96.7.250 . tcp . 80 . ").count(),
            10,
            "the last Service's endpoints are in: {listed}"
        );

        // The same sync over the table it left: one transaction, the same table.
        let existing = s.chains(IpFamily::V4).expect("chains");
        let before = s.generation().expect("generation");
        s.apply_full(&desired, &existing, false).expect("resync");
        let resync = s.generation().expect("generation").wrapping_sub(before);
        assert_eq!(resync, 1);
        assert_eq!(nft(&["list", "table", "ip", "ferry"]), listed);
    });
}

#[test]
#[ignore = "needs root: network namespaces"]
fn ferrys_chains_are_listed_alone_and_not_at_all_without_its_table() {
    in_new_netns(|| {
        // Another table's chains (iptables-nft's are such): the kernel's chain dump lists
        // every table's.
        nft(&["add", "table", "ip", "nat"]);
        for i in 0..50 {
            nft(&["add", "chain", "ip", "nat", &format!("KUBE-SEP-{i}")]);
        }
        nft(&["add", "table", "ip6", "ferry"]);
        nft(&["add", "chain", "ip6", "ferry", "services"]);
        let mut s = NetlinkSocket::open().expect("socket");
        assert_eq!(
            s.chains(IpFamily::V4).expect("chains"),
            Vec::<String>::new()
        );
        assert_eq!(
            s.chains(IpFamily::V6).expect("chains"),
            vec!["services".to_owned()]
        );
        nft(&["add", "table", "ip", "ferry"]);
        nft(&["add", "chain", "ip", "ferry", "services"]);
        assert_eq!(
            s.chains(IpFamily::V4).expect("chains"),
            vec!["services".to_owned()]
        );
    });
}
