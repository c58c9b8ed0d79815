//! `ferry status` from a running agent and `ferry cleanup`'s report, in a network namespace of
//! their own (never this machine's), in every mode: the seed's frontends with their backends,
//! programmed; a kernel changed behind Ferry's back differs; cleanup says what it removed, or
//! that there was nothing, and `--dry-run` removes nothing.

#[path = "support/node_ns.rs"]
mod node_ns;

use serde_json::Value;

use node_ns::{seed, wait_log, NodeNs};

const MODES: [(&str, &[&str]); 3] = [
    ("nftables", &[]),
    (
        "iptables",
        &["--proxy-mode", "iptables", "--iptables-backend", "nft"],
    ),
    ("userspace", &["--proxy-mode", "userspace"]),
];

fn status_json(ns: &NodeNs) -> Value {
    let (code, out, err) = ns.ferry(&["status", "--output", "json"]);
    assert_eq!(code, 0, "{err}");
    serde_json::from_str(&out).expect("json")
}

#[test]
#[ignore = "needs root: network namespaces"]
fn status_shows_every_frontend_its_backends_and_what_the_kernel_holds() {
    for (mode, flags) in MODES {
        let ns = NodeNs::new(&mode[..3]);
        let ferry = ns.spawn_ferry(&seed(), flags, None, &[]);
        wait_log(&ferry, "synced rules", 1);
        let (code, text, err) = ns.ferry(&["status"]);
        assert_eq!(code, 0, "{mode}: {err}");
        assert!(
            text.contains(&format!("on node k8s-node2: {mode} mode")),
            "{text}"
        );
        assert!(text.contains("IPv4: last sync "), "{text}");
        assert!(
            text.contains("10.96.198.86:8080/tcp  ClusterIP  dev/url-analysis:http  policy Cluster; forward to cluster endpoints; kernel: programmed"),
            "{mode}: {text}"
        );
        assert!(
            text.contains("=> 192.168.169.166:56010 ready, local (node k8s-node2)"),
            "{text}"
        );
        let v = status_json(&ns);
        let frontends = v["frontends"].as_array().expect("frontends");
        let kinds: Vec<&str> = frontends
            .iter()
            .filter_map(|f| f["kind"].as_str())
            .collect();
        assert!(
            kinds.contains(&"ClusterIP") && kinds.contains(&"NodePort"),
            "{v}"
        );
        assert!(
            frontends
                .iter()
                .all(|f| f["kernel"]["state"] == "programmed"),
            "{mode}: {v}"
        );
        assert_eq!(v["families"][0]["lastSync"]["kind"], "full", "{v}");

        break_the_kernel(&ns, mode);
        let v = status_json(&ns);
        let f = &v["frontends"][0];
        assert_eq!(f["kernel"]["state"], "differs", "{mode}: {v}");
        assert!(!f["kernel"]["differences"]
            .as_array()
            .expect("list")
            .is_empty());
    }
}

/// Removes one endpoint of dev/url-analysis behind Ferry's back.
fn break_the_kernel(ns: &NodeNs, mode: &str) {
    let nft_element = match mode {
        // The redirect of the ClusterIP to its proxy port.
        "userspace" => Some(("portals", "{ 10.96.198.86 . tcp . 8080 }")),
        "nftables" => Some(("cluster-endpoints", "{ 10.96.198.86 . tcp . 8080 . 1 }")),
        _ => None,
    };
    let out = if let Some((set, element)) = nft_element {
        ns.run("nft", &["delete", "element", "ip", "ferry", set, element])
    } else {
        let save = ns.run("iptables-nft-save", &["-t", "nat"]);
        let save = String::from_utf8_lossy(&save.stdout).into_owned();
        let sep = save
            .lines()
            .find_map(|l| l.strip_prefix(":KUBE-SEP-"))
            .and_then(|l| l.split_whitespace().next())
            .expect("an endpoint chain");
        ns.run(
            "iptables-nft",
            &["-t", "nat", "-F", &format!("KUBE-SEP-{sep}")],
        )
    };
    assert!(out.status.success(), "{out:?}");
}

#[test]
#[ignore = "needs root: network namespaces"]
fn cleanup_says_what_it_removed_or_that_there_was_nothing() {
    for (mode, flags) in MODES {
        let ns = NodeNs::new(&format!("c{}", &mode[..3]));
        let (code, out, _) = ns.ferry(&["cleanup"]);
        assert_eq!(code, 0);
        assert_eq!(
            out,
            "nothing to remove: no rules of Ferry's in this network namespace\n"
        );
        let mut ferry = ns.spawn_ferry(&seed(), flags, None, &[]);
        wait_log(&ferry, "synced rules", 1);
        ferry.stop().expect("stop");
        let (code, dry, err) = ns.ferry(&["cleanup", "--dry-run"]);
        assert_eq!(code, 0, "{err}");
        let expected = match mode {
            "nftables" => "nftables mode: would remove table ip ferry\n",
            // The userspace mode's table is left to its own cleanup by nftables mode's.
            "userspace" => "userspace mode: would remove table ip ferry\n",
            _ => "iptables mode: would remove Ferry's iptables-nft nat chains: ",
        };
        assert!(dry.contains(expected), "{mode}: {dry}");
        // Nothing was removed: the same again.
        assert_eq!(ns.ferry(&["cleanup", "--dry-run"]).1, dry);
        // kube-proxy's own flag, as a copied DaemonSet's command line has it.
        let (code, removed, err) = ns.ferry(&["--cleanup"]);
        assert_eq!(code, 0, "{err}");
        assert_eq!(removed, dry.replace("would remove", "removed"), "{mode}");
        let (_, after, _) = ns.ferry(&["cleanup"]);
        assert_eq!(
            after,
            "nothing to remove: no rules of Ferry's in this network namespace\n"
        );
    }
}
