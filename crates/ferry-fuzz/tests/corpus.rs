//! Replays the corpus in the repository through its in-process targets (a regression test:
//! every input that once crashed a target stays in its corpus), and checks the driver is
//! deterministic. `config` and `flags` run the `ferry` binary: their corpus is replayed by the
//! ferry package's `tests/fuzz_corpus.rs`.

use ferry_fuzz::targets::Run;
use ferry_fuzz::{corpus, mutate, TARGETS};

#[test]
fn every_corpus_file_runs_through_its_target_without_a_crash() {
    let mut replayed = 0;
    for target in TARGETS
        .iter()
        .filter(|t| matches!(t.run, Run::InProcess(_)))
    {
        let files = corpus(target.name).expect("the corpus directory");
        assert!(!files.is_empty(), "{} has no corpus", target.name);
        let _quiet = ferry_fuzz::targets::quiet_panics();
        for (path, bytes) in files {
            if let Err(crash) = target.exec(None, &bytes) {
                panic!("{} on {}: {crash}", target.name, path.display());
            }
            replayed += 1;
        }
    }
    assert!(replayed >= 20, "only {replayed} corpus files");
}

#[test]
fn every_target_has_a_corpus_directory() {
    for target in TARGETS {
        assert!(
            ferry_fuzz::corpus_dir(target.name).is_dir(),
            "corpus/{} is missing",
            target.name
        );
    }
}

#[test]
fn the_same_seed_gives_the_same_mutants() {
    let seed =
        b"apiVersion: v1\nkind: Service\nmetadata:\n  name: web\nspec:\n  ports:\n  - port: 80\n";
    let mutants = |s: u64| {
        let mut rng = fastrand::Rng::with_seed(s);
        (0..200)
            .map(|_| {
                let mut m = seed.to_vec();
                mutate::mutate(&mut rng, &mut m, b"kind: Pod\n");
                m
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(mutants(7), mutants(7));
    assert_ne!(mutants(7), mutants(8));
    assert!(mutants(7).iter().all(|m| m.len() <= mutate::MAX_LEN));
}
