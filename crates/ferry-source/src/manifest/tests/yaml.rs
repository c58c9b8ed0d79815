//! The YAML fast path: where it answers it answers as serde-saphyr does; where it cannot be
//! sure it declines, and serde-saphyr answers.

use serde_json::json;

use crate::manifest::yaml::{fast, parse, reference, MAX_DEPTH};

/// `text` read both ways: the fast path must answer, and answer what serde-saphyr does.
fn agrees(text: &str) -> Vec<serde_json::Value> {
    let quick = fast(text).unwrap_or_else(|| panic!("the fast path declined:\n{text}"));
    let slow = reference(text).unwrap_or_else(|e| panic!("serde-saphyr refused: {e}\n{text}"));
    assert_eq!(quick, slow, "the two readings differ:\n{text}");
    quick
}

/// `text` is left to serde-saphyr.
fn declined(text: &str) {
    assert_eq!(fast(text), None, "the fast path answered:\n{text}");
}

#[test]
fn a_benchmark_manifest_is_read_by_the_fast_path_as_serde_saphyr_reads_it() {
    let docs = agrees(
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: svc-1\n  namespace: bench\n  labels:\n    app: svc-1\n\
         spec:\n  clusterIP: 10.96.0.11\n  clusterIPs:\n  - 10.96.0.11\n  ipFamilies: [IPv4]\n\
         ports:\n  - name: http\n    port: 80\n    protocol: TCP\n    targetPort: 8080\n---\n\
         apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: svc-1-x\n\
         addressType: IPv4\nendpoints:\n- addresses: [\"10.64.0.10\"]\n  conditions: {ready: true, serving: false}\n  nodeName: node-1\n",
    );
    assert_eq!(docs.len(), 2);
    assert_eq!(docs[0]["spec"]["clusterIP"], json!("10.96.0.11"));
    assert_eq!(docs[0]["ports"][0]["port"], json!(80));
    assert_eq!(
        docs[1]["endpoints"][0]["conditions"]["serving"],
        json!(false)
    );
}

#[test]
fn scalars_whose_meaning_is_plain_are_read_as_serde_saphyr_reads_them() {
    for scalar in [
        "word",
        "node-1",
        "IPv4",
        "TCP",
        "Cluster",
        "fd00::1",
        "a b c",
        "0",
        "7",
        "8080",
        "-1",
        "-42",
        "123456789012345678",
        "true",
        "false",
        "10.64.0.10",
        "1.2.3",
        "'80'",
        "\"true\"",
        "'null'",
        "\"\"",
        "\"tab\\there\"",
        "'it''s'",
        "yesterday",
        "nano",
        "info",
        "Node",
        "Offline",
        "y2k",
        "https://example.test/x",
        "key=value",
    ] {
        agrees(&format!("k: {scalar}\n"));
    }
    agrees("k: |\n  two\n  lines\nl: >\n  folded\n  text\n");
}

#[test]
fn scalars_in_doubt_are_left_to_serde_saphyr() {
    for scalar in [
        "",
        "~",
        "null",
        "Null",
        "yes",
        "No",
        "ON",
        "off",
        "y",
        "N",
        "True",
        "FALSE",
        "nan",
        ".nan",
        "inf",
        "-.inf",
        "Infinity",
        "1.5",
        "1e3",
        "-0",
        "0123",
        "0x1F",
        "0o17",
        "1_000",
        "+5",
        "1234567890123456789",
        "12:30:00",
        "2001:db8::1",
        "1.",
        ".1",
        "1..2",
    ] {
        let text = format!("k: {scalar}\n");
        declined(&text);
        // And what the loader gets is serde-saphyr's reading.
        assert_eq!(parse(&text), reference(&text), "{text}");
    }
}

#[test]
fn shapes_outside_the_plain_ones_are_left_to_serde_saphyr() {
    for text in [
        "a: &x 1\nb: *x\n",
        "base: &b {x: 1}\nderived:\n  <<: *b\n",
        "k: !!str 80\n",
        "k: 1\nk: 2\n",
        "? [a, b]\n: c\n",
        "80: port\n",
        "true: x\n",
        "- a\n- b\n",
        "just text\n",
        "---\n---\nk: v\n",
        "k: [unclosed\n",
        "k: v\n  bad: indent\n",
    ] {
        declined(text);
        assert_eq!(parse(text), reference(text), "{text}");
    }
}

#[test]
fn nesting_deeper_than_the_fast_paths_limit_is_left_to_serde_saphyr() {
    let nested = |depth: usize| format!("{}1{}\n", "{a: ".repeat(depth), "}".repeat(depth));
    agrees(&nested(MAX_DEPTH));
    declined(&nested(MAX_DEPTH + 1));
    // serde-saphyr's budget refuses what is deeper still, and that is the answer.
    let refused = parse(&nested(200)).expect_err("too deep");
    assert!(refused.starts_with("not valid YAML"), "{refused}");
}

#[test]
fn comments_empty_streams_and_document_markers_read_the_same() {
    agrees("# a comment\nk: v # trailing\n# another\n");
    agrees("--- \nk: v\n...\n---\nl: w\n");
    assert_eq!(agrees(""), Vec::<serde_json::Value>::new());
    assert_eq!(
        agrees("# only a comment\n"),
        Vec::<serde_json::Value>::new()
    );
}
