//! The socket against the real kernel's limits, in a private network namespace (the test
//! thread `unshare`s one; it disappears with the thread): a batch whose answers do not fit the
//! receive buffer (`ENOBUFS`, drill 6), and the answers such a batch leaves behind.

use ferry_compile::nft::{Delta, DispatchChain};
use ferry_model::IpFamily;
use nix::sys::socket::{setsockopt, sockopt};

use super::{NetlinkError, NetlinkSocket};
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
