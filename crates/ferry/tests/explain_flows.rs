//! `ferry explain` predicts every seed flow the lab runs with real packets (same list:
//! tests/support/flows.rs), per target where the outcome depends on it. No root needed.

use std::collections::BTreeSet;
use std::process::Command;

use serde_json::Value;

#[path = "support/flows.rs"]
mod flows;
#[path = "support/seed.rs"]
mod seed;

use flows::{Expect, Flow, Peer, EXTRA_MANIFESTS, FLOWS};

#[test]
fn explain_predicts_every_lab_flow() {
    for mode in ["nftables", "iptables", "ipvs", "userspace"] {
        predict(mode);
    }
}

fn predict(mode: &str) {
    for policy in ["Cluster", "Local"] {
        let manifests = seed::Manifests::new(policy);
        for (name, text) in EXTRA_MANIFESTS {
            manifests.put(name, text);
        }
        for f in FLOWS.iter().filter(|f| f.policy == policy) {
            let v = explain(&manifests, f, mode);
            let name = format!("{mode}: {}", f.name);
            let verdict = v["verdict"].as_str().unwrap_or_default();
            match f.expect_in(mode) {
                Expect::Dropped => assert_eq!(verdict, "dropped", "{name}: {v}"),
                Expect::Rejected => assert_eq!(verdict, "rejected", "{name}: {v}"),
                Expect::Untranslated => {
                    assert_eq!(verdict, "not-a-service", "{name}: {v}");
                    // It names the NodePort that does not answer there.
                    assert_eq!(v["service"]["name"], "url-analysis", "{name}: {v}");
                }
                Expect::Forwarded(peer) => {
                    assert_eq!(verdict, "forwarded", "{name}: {v}");
                    forwarded(f, peer, &v, &name, mode);
                }
            }
        }
    }
}

fn explain(manifests: &seed::Manifests, f: &Flow, mode: &str) -> Value {
    let dir = manifests.path().display().to_string();
    let mut cmd = Command::new(seed::FERRY);
    cmd.args(f.explain_args(mode, &dir));
    if let Some(ip) = f.node_address() {
        cmd.args(["--node-address", ip]);
    }
    let out = cmd.output().expect("run ferry explain");
    assert!(
        out.status.success(),
        "{}: {}",
        f.name,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("json")
}

/// The targets are the flow's servers, each masqueraded exactly when the endpoint sees the
/// node as its peer, and the summary agrees. The userspace mode's proxy (also serving
/// localhost NodePorts) says why: it connects from the node.
fn forwarded(f: &Flow, peer: Peer, v: &Value, name: &str, mode: &str) {
    let proxied = mode == "userspace" || f.dst.starts_with("127.");
    let targets: Vec<&Value> = v["targets"].as_array().into_iter().flatten().collect();
    let addresses: BTreeSet<&str> = targets
        .iter()
        .filter_map(|t| t["address"].as_str())
        .collect();
    let want: BTreeSet<String> = f.servers.iter().map(|s| format!("{s}:56010")).collect();
    let want: BTreeSet<&str> = want.iter().map(String::as_str).collect();
    assert_eq!(addresses, want, "{name}");
    for t in &targets {
        let is_sender = t["address"]
            .as_str()
            .is_some_and(|a| a.starts_with(&format!("{}:", f.src())));
        let masqueraded = match peer {
            Peer::Source => false,
            Peer::Node(_) => true,
            Peer::HairpinOr(_) => is_sender,
        };
        let word = if masqueraded { "yes" } else { "no" };
        assert_eq!(t["masquerade"], word, "{name}: {t}");
        let why = t["masqueradeWhy"].as_str().unwrap_or_default();
        if proxied {
            assert!(why.contains("proxied in user space"), "{name}: {t}");
        } else if is_sender {
            assert!(why.contains("hairpin"), "{name}: {t}");
        }
    }
    let every = targets.iter().all(|t| t["masquerade"] == "yes");
    let none = targets.iter().all(|t| t["masquerade"] == "no");
    let summary = match (every, none) {
        (true, _) => "yes",
        (_, true) => "no",
        _ => "some",
    };
    assert_eq!(v["masquerade"], summary, "{name}: {v}");
    if let Peer::HairpinOr(_) = peer {
        assert!(v.to_string().contains("hairpin"), "{name}: {v}");
        assert_eq!(v["masquerade"], "some", "{name}: several endpoints");
    }
}
