//! The periodic check ([`Applier::intact`]) against the real kernel, for every mode and
//! backend: it finds Ferry's rules gone after what operators and firewalls do to a node
//! (`nft flush ruleset`, the table deleted, `iptables -t nat -F`, a firewall reload flushing
//! and deleting every table's chains), and finds nothing missing otherwise. Each case runs in
//! a private network namespace. Skipped unless root.

mod support;
use support::{in_new_netns, nft};

use std::collections::BTreeSet;
use std::process::Command;

use ferry_compile::mode::ProxyMode;
use ferry_compile::{CompileConfig, NodeCompiler};
use ferry_dataplane::cleanup::Scope;
use ferry_dataplane::mode::{IptablesBackend, ModeOptions};
use ferry_dataplane::modes::entry;
use ferry_dataplane::{Applier, SyncKind, SyncReport};
use ferry_model::fixtures::{mk_endpoint, mk_node, mk_service, mk_slice};
use ferry_model::{ClusterState, IpFamily, NodeContext, Object, ServiceName};

/// One Service with one endpoint (`endpoint`).
fn state(endpoint: &str) -> ClusterState {
    let mut state = ClusterState::new();
    state.apply(Object::from(mk_service("dev", "web", "10.96.0.10", 80)));
    let slice = mk_slice("dev", "web", 8080, vec![mk_endpoint(endpoint, "n1")]);
    state.apply(Object::from(slice));
    state.apply(Object::from(mk_node("n1", "10.1.1.9", "10.0.0.0/24")));
    state
}

/// Syncs `state` (fully or for its one service) with `applier`.
fn sync(applier: &mut dyn Applier, state: &ClusterState, full: bool) -> SyncReport {
    let context = NodeContext {
        node_name: "n1".into(),
        family: IpFamily::V4,
    };
    let config = CompileConfig::default();
    let compiler = NodeCompiler::new(state, &context, &config);
    let dirty = BTreeSet::from([ServiceName::new("dev", "web")]);
    match full {
        true => applier.sync_full(&compiler, state),
        false => applier.sync_partial(&compiler, state, &dirty),
    }
    .expect("sync")
}

/// One Service with one endpoint, synced fully by `mode`'s applier in this namespace.
fn synced(mode: ProxyMode, backend: Option<IptablesBackend>) -> Box<dyn Applier> {
    let options = ModeOptions {
        iptables_backend: backend,
        ..ModeOptions::default()
    };
    let mut applier = (entry(mode).open)(&options).applier(IpFamily::V4);
    sync(applier.as_mut(), &state("10.0.0.5"), true);
    assert!(applier.intact().expect("check"), "{mode:?}: just written");
    applier
}

/// Runs `program args` in the current namespace (panics when it fails).
fn run(program: &str, args: &[&str]) {
    let out = Command::new(program).args(args).output().expect(program);
    assert!(
        out.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
#[ignore = "needs root: network namespaces"]
fn nftables_finds_its_table_gone_after_a_ruleset_flush_or_a_deletion() {
    for damage in [["flush", "ruleset"], ["delete", "table"]] {
        in_new_netns(move || {
            let mut applier = synced(ProxyMode::Nftables, None);
            match damage {
                ["delete", _] => nft(&["delete", "table", "ip", "ferry"]),
                _ => nft(&damage),
            };
            assert!(!applier.intact().expect("check"), "after {damage:?}");
            assert!(
                applier.intact().expect("check"),
                "forgotten: nothing to miss"
            );
        });
    }
}

#[test]
#[ignore = "needs root: network namespaces"]
fn iptables_finds_a_flushed_nat_table_and_a_firewall_reload_on_both_backends() {
    for backend in [IptablesBackend::Nft, IptablesBackend::Legacy] {
        let tool = match backend {
            IptablesBackend::Nft => "iptables-nft",
            IptablesBackend::Legacy => "iptables-legacy",
        };
        in_new_netns(move || {
            let mut applier = synced(ProxyMode::Iptables, Some(backend));
            run(tool, &["-t", "nat", "-F"]);
            assert!(!applier.intact().expect("check"), "{tool}: nat flushed");
        });
        in_new_netns(move || {
            let mut applier = synced(ProxyMode::Iptables, Some(backend));
            // What a firewall's reload does to the iptables tables.
            for table in ["filter", "nat", "mangle"] {
                run(tool, &["-t", table, "-F"]);
                run(tool, &["-t", table, "-X"]);
            }
            assert!(!applier.intact().expect("check"), "{tool}: reloaded");
        });
    }
    in_new_netns(|| {
        let mut applier = synced(ProxyMode::Iptables, Some(IptablesBackend::Nft));
        nft(&["flush", "ruleset"]);
        assert!(
            !applier.intact().expect("check"),
            "iptables-nft: nft flush ruleset"
        );
    });
}

#[test]
#[ignore = "needs root: network namespaces"]
fn nftables_finds_a_flushed_top_level_chain() {
    for chain in ["services", "nat-prerouting"] {
        in_new_netns(move || {
            let mut applier = synced(ProxyMode::Nftables, None);
            nft(&["flush", "chain", "ip", "ferry", chain]);
            assert!(!applier.intact().expect("check"), "after flushing {chain}");
        });
    }
}

#[test]
#[ignore = "needs root: network namespaces"]
fn iptables_finds_a_flushed_top_level_chain_on_both_backends() {
    for backend in [IptablesBackend::Nft, IptablesBackend::Legacy] {
        let tool = match backend {
            IptablesBackend::Nft => "iptables-nft",
            IptablesBackend::Legacy => "iptables-legacy",
        };
        for (table, chain) in [("nat", "KUBE-SERVICES"), ("filter", "KUBE-FORWARD")] {
            in_new_netns(move || {
                let mut applier = synced(ProxyMode::Iptables, Some(backend));
                run(tool, &["-t", table, "-F", chain]);
                assert!(
                    !applier.intact().expect("check"),
                    "{tool}: {table} {chain} flushed"
                );
            });
        }
    }
}

#[test]
#[ignore = "needs root: network namespaces"]
fn iptables_repairs_a_firewall_reload_at_the_next_change_on_both_backends() {
    for (backend, tool) in [
        (IptablesBackend::Nft, "iptables-nft"),
        (IptablesBackend::Legacy, "iptables-legacy"),
    ] {
        in_new_netns(move || {
            let mut applier = synced(ProxyMode::Iptables, Some(backend));
            for table in ["filter", "nat", "mangle"] {
                run(tool, &["-t", table, "-F"]);
                run(tool, &["-t", table, "-X"]);
            }
            // The change's restore fails (its chains jump to chains that are gone); the
            // canary check finds why, and the sync is full instead of failed.
            let report = sync(applier.as_mut(), &state("10.0.0.6"), false);
            assert_eq!(report.kind, SyncKind::Full, "{tool}");
            assert!(applier.intact().expect("check"), "{tool}: repaired");
        });
    }
}

/// Every mode and backend this machine runs (IPVS only runs in the qemu guest).
const MODES: [(ProxyMode, Option<IptablesBackend>); 4] = [
    (ProxyMode::Nftables, None),
    (ProxyMode::Iptables, Some(IptablesBackend::Nft)),
    (ProxyMode::Iptables, Some(IptablesBackend::Legacy)),
    (ProxyMode::Userspace, None),
];

/// A periodic check that found damage right after a sync would make every periodic round a
/// full sync (seconds at 10 000 services): the check must find the rules just written intact,
/// after a full sync, after a change, and when asked again.
#[test]
#[ignore = "needs root: network namespaces"]
fn every_mode_finds_its_rules_intact_right_after_a_full_sync_and_after_a_change() {
    for (mode, backend) in MODES {
        in_new_netns(move || {
            let mut applier = synced(mode, backend);
            assert!(applier.intact().expect("check"), "{mode:?}: asked again");
            let report = sync(applier.as_mut(), &state("10.0.0.6"), false);
            assert_eq!(report.kind, SyncKind::Partial, "{mode:?} {backend:?}");
            assert!(applier.intact().expect("check"), "{mode:?}: after a change");
            assert!(applier.intact().expect("check"), "{mode:?}: asked again");
        });
    }
}

/// Right after its first sync the agent removes what the other modes left; nftables and
/// userspace modes share Ferry's table, so each one's cleanup must leave the other's table
/// (told apart by a chain only one of them writes, looked up with a netlink chain dump).
#[test]
#[ignore = "needs root: network namespaces"]
fn the_other_modes_cleanup_leaves_the_running_modes_table_intact() {
    let pairs = [
        (ProxyMode::Nftables, ProxyMode::Userspace),
        (ProxyMode::Userspace, ProxyMode::Nftables),
    ];
    for (running, other) in pairs {
        in_new_netns(move || {
            let mut applier = synced(running, None);
            let done = (entry(other).cleanup)(Scope::default()).expect("cleanup");
            assert!(
                done.objects.is_empty(),
                "{other:?} removed {:?}",
                done.objects
            );
            assert!(applier.intact().expect("check"), "{running:?}");
        });
        // A mode's own cleanup (`ferry cleanup`) still finds its table without the other's
        // chain and removes it.
        in_new_netns(move || {
            let _applier = synced(running, None);
            let done = (entry(running).cleanup)(Scope::default()).expect("cleanup");
            assert_eq!(done.objects, ["table ip ferry"], "{running:?}");
        });
    }
}

/// At start-up nftables mode names kube-proxy's nftables tables, read with one netlink table
/// dump (every family); Ferry's own table and other people's tables are not leftovers.
#[test]
#[ignore = "needs root: network namespaces"]
fn kube_proxys_tables_are_found_among_every_familys_tables() {
    in_new_netns(|| {
        let _applier = synced(ProxyMode::Nftables, None);
        for (family, name) in [
            ("ip", "kube-proxy"),
            ("ip6", "kube-proxy"),
            ("inet", "filter"),
        ] {
            nft(&["add", "table", family, name]);
        }
        let found: Vec<String> = (entry(ProxyMode::Nftables).leftovers)()
            .into_iter()
            .map(|l| l.what)
            .collect();
        assert_eq!(
            found,
            [
                "table ip kube-proxy (kube-proxy's nftables mode)",
                "table ip6 kube-proxy (kube-proxy's nftables mode)"
            ]
        );
        let done = (entry(ProxyMode::Nftables).cleanup)(Scope::default()).expect("cleanup");
        assert_eq!(done.objects, ["table ip ferry"]);
        assert_eq!(
            done.left,
            [
                "kube-proxy's nftables mode's table ip kube-proxy, table ip6 kube-proxy; \
              `ferry cleanup --also-kube-proxy` removes them"
            ]
        );
        let also = Scope {
            dry_run: false,
            kube_proxy: true,
        };
        let done = (entry(ProxyMode::Nftables).cleanup)(also).expect("cleanup");
        assert_eq!(
            done.objects,
            [
                "kube-proxy's table ip kube-proxy",
                "kube-proxy's table ip6 kube-proxy"
            ]
        );
        let tables = nft(&["list", "tables"]);
        assert!(
            !tables.contains("kube-proxy") && tables.contains("table inet filter"),
            "{tables}"
        );
    });
}
