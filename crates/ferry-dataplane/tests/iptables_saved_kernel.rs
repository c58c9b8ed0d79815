//! iptables mode's rules as the kernel gives them back: every rule of every golden iptables
//! ruleset, restored with each backend and read back with its `iptables-save`, has the same
//! canonical form as the rule Ferry wrote (`ferry_compile::iptables::canonical`). A restart
//! trusts the chains whose saved rules compare equal and rewrites only the others, so this is
//! what keeps it from leaving a wrong chain in place. Each case runs in a private network
//! namespace. Skipped unless root.

mod support;
use support::in_new_netns;

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};

use ferry_compile::iptables::{canonical, CT_STATE_INVALID_COUNTER, LOCALHOST_NODE_PORTS_COUNTER};
use ferry_model::IpFamily;

/// `-A` rules by table and chain, in order.
type Rules = BTreeMap<(String, String), Vec<String>>;

fn parse(text: &str) -> Rules {
    let mut rules = Rules::new();
    let mut table = String::new();
    for line in text.lines() {
        if let Some(t) = line.strip_prefix('*') {
            table = t.trim().to_owned();
        } else if let Some(rest) = line.strip_prefix("-A ") {
            let (chain, rule) = rest.split_once(' ').unwrap_or((rest, ""));
            rules
                .entry((table.clone(), chain.to_owned()))
                .or_default()
                .push(rule.to_owned());
        }
    }
    rules
}

fn run(program: &str, input: Option<&str>) -> String {
    let mut child = Command::new(program)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect(program);
    let stdin = child.stdin.take().expect("stdin");
    if let Some(input) = input {
        let mut stdin = stdin;
        stdin.write_all(input.as_bytes()).expect("write");
    } else {
        drop(stdin);
    }
    let out = child.wait_with_output().expect(program);
    assert!(
        out.status.success(),
        "{program}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
#[ignore = "needs root: network namespaces"]
fn every_golden_rule_reads_back_with_its_canonical_form_on_both_backends() {
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("../ferry-compile/tests/golden");
    let mut files: Vec<_> = std::fs::read_dir(&golden)
        .expect("golden")
        .flat_map(|d| std::fs::read_dir(d.expect("dir").path()).expect("dir"))
        .map(|f| f.expect("file").path())
        .filter(|p| {
            p.extension()
                .is_some_and(|e| e == "iptables" || e == "ip6tables")
        })
        .collect();
    files.sort();
    assert!(files.len() >= 10, "{files:?}");
    let mut compared = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).expect("read");
        let (family, tool) = if file.extension().is_some_and(|e| e == "ip6tables") {
            (IpFamily::V6, "ip6tables")
        } else {
            (IpFamily::V4, "iptables")
        };
        let written = parse(&text);
        for backend in ["nft", "legacy"] {
            let (out, input) = (
                std::sync::Arc::new(std::sync::Mutex::new(String::new())),
                text.clone(),
            );
            let into = out.clone();
            in_new_netns(move || {
                // The nfacct counters the rules count into, as `ferry run` creates them.
                let mut nfacct = ferry_dataplane::nfacct::Nfacct::open().expect("nfacct");
                for name in [CT_STATE_INVALID_COUNTER, LOCALHOST_NODE_PORTS_COUNTER] {
                    nfacct.ensure(name).expect("nfacct counter");
                }
                run(&format!("{tool}-{backend}-restore"), Some(&input));
                *into.lock().expect("lock") = run(&format!("{tool}-{backend}-save"), None);
            });
            let saved = parse(&out.lock().expect("lock"));
            for (chain, rules) in &written {
                let back = saved.get(chain).map_or(&[][..], Vec::as_slice);
                assert_eq!(rules.len(), back.len(), "{file:?} {backend} {chain:?}");
                for (rule, back) in rules.iter().zip(back) {
                    let ours = canonical(rule, family);
                    assert!(ours.is_some(), "{file:?}: no canonical form: {rule}");
                    assert_eq!(
                        ours,
                        canonical(back, family),
                        "{file:?} {backend} {chain:?}\nwritten: {rule}\nsaved:   {back}"
                    );
                    compared += 1;
                }
            }
        }
    }
    assert!(compared > 1000, "{compared} rules compared");
}
