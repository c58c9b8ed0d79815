//! Replays `ferry-fuzz`'s corpus for the targets that run this binary (`ferry check --config
//! FILE`, `ferry check FLAGS…`): none may make it panic, die of a signal or hang (a
//! regression test for every input that once did).

use std::path::Path;

#[test]
fn the_config_and_flags_corpus_never_crashes_ferry_check() {
    let ferry = Path::new(env!("CARGO_BIN_EXE_ferry"));
    let mut replayed = 0;
    for name in ["config", "flags"] {
        let target = ferry_fuzz::targets::by_name(name).expect("the target");
        for (path, bytes) in ferry_fuzz::corpus(name).expect("the corpus") {
            if let Err(crash) = target.exec(Some(ferry), &bytes) {
                panic!("{name} on {}: {crash}", path.display());
            }
            replayed += 1;
        }
    }
    assert!(replayed >= 8, "only {replayed} corpus files");
}
