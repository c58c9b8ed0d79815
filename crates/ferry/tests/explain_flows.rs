//! `ferry explain` predicts every seed flow the lab runs with real packets (same list:
//! tests/support/flows.rs). No root needed.

use std::collections::BTreeSet;
use std::process::Command;

#[path = "support/flows.rs"]
mod flows;
#[path = "support/seed.rs"]
mod seed;

use flows::{Expect, Peer, FLOWS, SERVERS};

#[test]
fn explain_predicts_every_lab_flow() {
    for mode in ["nftables", "iptables", "ipvs"] {
        predict(mode);
    }
}

fn predict(mode: &str) {
    for policy in ["Cluster", "Local"] {
        let manifests = seed::Manifests::new(if policy == "Local" {
            "Local"
        } else {
            "Cluster"
        });
        for f in FLOWS.iter().filter(|f| f.policy == policy) {
            let dir = manifests.path().display().to_string();
            let out = Command::new(seed::FERRY)
                .args(f.explain_args(mode, &dir))
                .output()
                .expect("run ferry explain");
            assert!(
                out.status.success(),
                "{}: {}",
                f.name,
                String::from_utf8_lossy(&out.stderr)
            );
            let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
            let verdict = v["verdict"].as_str().unwrap_or_default();
            let masq = !v["masquerade"].is_null();
            match f.expect_in(mode) {
                Expect::Dropped => assert_eq!(verdict, "dropped", "{}: {v}", f.name),
                Expect::Rejected => assert_eq!(verdict, "rejected", "{}: {v}", f.name),
                Expect::Forwarded(peer) => {
                    assert_eq!(verdict, "forwarded", "{}: {v}", f.name);
                    let targets: BTreeSet<String> = v["targets"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|t| t.as_str().map(str::to_owned))
                        .collect();
                    let want: BTreeSet<String> =
                        SERVERS.iter().map(|s| format!("{s}:56010")).collect();
                    assert_eq!(targets, want, "{}", f.name);
                    match peer {
                        Peer::Source => assert!(!masq, "{}: {v}", f.name),
                        Peer::Node(_) => assert!(masq, "{}: {v}", f.name),
                        Peer::HairpinOr(_) => {
                            assert!(!masq, "{}: {v}", f.name);
                            assert!(v.to_string().contains("hairpin"), "{}: {v}", f.name);
                        }
                    }
                }
            }
        }
    }
}
