//! The CPU list parser, and the settings against the real kernel in a private network
//! namespace (the test thread `unshare`s one; it disappears with the thread, and with it every
//! per-namespace value written here).

use super::*;
use ferry_lab::netns::{in_private_netns, nft};

#[test]
fn cpu_lists_count_ranges_and_single_cpus() {
    assert_eq!(count_cpu_list("0"), Some(1));
    assert_eq!(count_cpu_list("0-1"), Some(2));
    assert_eq!(count_cpu_list("0-3,8,10-11"), Some(7));
    assert_eq!(count_cpu_list("3-1"), None);
    assert_eq!(count_cpu_list("x"), None);
    assert_eq!(count_cpu_list(""), None);
}

fn value(name: &str) -> u64 {
    read(&netfilter(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// Loads nf_conntrack (its sysctls appear with it) with a rule that uses conntrack.
fn load_conntrack() {
    nft(&["add", "table", "ip", "t"]);
    nft(&["add chain ip t c { type filter hook output priority 0; }"]);
    nft(&["add rule ip t c ct state new accept"]);
}

#[test]
#[ignore = "needs root: network namespaces"]
fn timeouts_and_liberal_tcp_are_set_in_the_namespace_and_a_read_only_max_is_reported() {
    in_private_netns(|| {
        load_conntrack();
        let established = value("nf_conntrack_tcp_timeout_established");
        let wanted = if established == 7200 { 7300 } else { 7200 };
        let settings = ConntrackSettings {
            // A network namespace other than the first has a read-only nf_conntrack_max.
            max: Some(u64::MAX / 8),
            tcp_established_timeout: Some(wanted),
            tcp_close_wait_timeout: Some(1800),
            tcp_be_liberal: true,
            udp_timeout: Some(45),
            udp_stream_timeout: Some(150),
        };
        let applied = apply(&settings);
        let names: Vec<&str> = applied.iter().map(|a| a.name).collect();
        // No hash size: nf_conntrack_max did not hold the value.
        assert_eq!(
            names,
            [
                "nf_conntrack_max",
                "nf_conntrack_tcp_timeout_established",
                "nf_conntrack_tcp_timeout_close_wait",
                "nf_conntrack_tcp_be_liberal",
                "nf_conntrack_udp_timeout",
                "nf_conntrack_udp_timeout_stream"
            ]
        );
        assert!(applied[0].result.is_err(), "{:?}", applied[0]);
        for a in &applied[1..] {
            assert!(a.result.is_ok(), "{a:?}");
        }
        assert_eq!(
            applied[1].result.as_ref().ok(),
            Some(&Change::Set { from: established })
        );
        assert_eq!(value("nf_conntrack_tcp_timeout_established"), wanted);
        assert_eq!(value("nf_conntrack_tcp_timeout_close_wait"), 1800);
        assert_eq!(value("nf_conntrack_udp_timeout"), 45);
        assert_eq!(value("nf_conntrack_udp_timeout_stream"), 150);
        assert!(tcp_be_liberal());

        // Again: nothing to write.
        let again = apply(&ConntrackSettings {
            max: None,
            ..settings
        });
        assert!(
            again
                .iter()
                .all(|a| matches!(a.result, Ok(Change::Unchanged))),
            "{again:?}"
        );
    });
}

#[test]
#[ignore = "needs root: network namespaces"]
fn a_max_below_the_kernels_is_kept_and_the_hash_size_left_alone() {
    in_private_netns(|| {
        load_conntrack();
        let max = value("nf_conntrack_max");
        let applied = apply(&ConntrackSettings {
            max: Some(1),
            ..ConntrackSettings::default()
        });
        assert_eq!(applied.len(), 2, "{applied:?}");
        assert_eq!(
            applied[0].result.as_ref().ok(),
            Some(&Change::AlreadyHigher { current: max })
        );
        // A quarter of 1 is 0: whatever the machine's hash size, it is at least that.
        assert!(
            matches!(applied[1].result, Ok(Change::AlreadyHigher { .. })),
            "{applied:?}"
        );
    });
}
