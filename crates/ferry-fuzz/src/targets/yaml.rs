//! The manifest source's YAML fast path against serde-saphyr: wherever the fast path answers,
//! serde-saphyr must give the same documents (the fast path only saves time; what a manifest
//! means is serde-saphyr's). Bytes that are not UTF-8 are read lossily.

use ferry_source::manifest::yaml;

use super::signature;

/// Reads `input` both ways and compares.
pub fn run(input: &[u8]) -> u64 {
    let text = String::from_utf8_lossy(input);
    let reference = yaml::reference(&text);
    let fast = yaml::fast(&text);
    if let Some(documents) = &fast {
        match &reference {
            Ok(expected) => assert!(
                documents == expected,
                "the fast path read {documents:?}, serde-saphyr {expected:?}"
            ),
            Err(e) => panic!("the fast path read {documents:?}, serde-saphyr refused: {e}"),
        }
    }
    signature((
        fast.is_some(),
        reference.map(|d| d.len()).map_err(|e| super::shape(&e)),
    ))
}
