//! Hostile manifests (drill 5): each is refused on its own, quickly and in bounded memory, and
//! the other files are read.

use super::{names, only_error, service_yaml, temp_dir, write, write_service};
use crate::manifest::load;

/// A Service whose annotations hold an alias bomb of `levels` levels of ten aliases each.
fn alias_bomb(levels: usize) -> String {
    let mut t = String::from(
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: bomb\n  namespace: dev\n  annotations:\n    \
         l0: &l0 [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n",
    );
    for level in 1..levels {
        let items = vec![format!("*l{}", level - 1); 10].join(",");
        t.push_str(&format!("    l{level}: &l{level} [{items}]\n"));
    }
    t.push_str("spec:\n  clusterIP: 10.96.0.99\n  ports:\n  - port: 80\n");
    t
}

#[test]
fn an_alias_bomb_is_refused_before_it_grows_and_the_other_files_are_read() {
    // 10^5 replayed nodes: within serde-saphyr's default budget (a million), so without
    // Ferry's alias budget the file was expanded (tens of MiB) before conversion failed.
    let dir = temp_dir();
    write_service(dir.path(), "a.yaml", "a", "10.96.0.10", 80);
    write(dir.path(), "bomb.yaml", &alias_bomb(5));
    let scan = load(dir.path());
    assert_eq!(names(&scan.objects), ["Service dev/a"]);
    let text = only_error(&scan.errors).to_string();
    assert!(text.contains("bomb.yaml: not valid YAML: "), "{text}");
    assert!(text.contains("budget breached"), "{text}");
}

#[test]
fn a_few_aliases_as_people_write_them_still_work() {
    let dir = temp_dir();
    let text = "apiVersion: v1\nkind: Service\nmetadata:\n  name: shared\n  namespace: dev\n  \
                labels: &labels {app: web, tier: front}\nspec:\n  clusterIP: 10.96.0.11\n  \
                selector: *labels\n  ports:\n  - port: 80\n";
    write(dir.path(), "a.yaml", text);
    let scan = load(dir.path());
    assert!(scan.errors.is_empty(), "{:?}", scan.errors);
    assert_eq!(names(&scan.objects), ["Service dev/shared"]);
}

#[test]
fn deep_nesting_and_invalid_utf8_are_refused_per_file() {
    let dir = temp_dir();
    write_service(dir.path(), "a.yaml", "a", "10.96.0.10", 80);
    let deep = format!(
        "{}  selector:\n    deep: {}{}\n",
        service_yaml("dev", "deep", "10.96.0.12", 80),
        "[".repeat(20_000),
        "]".repeat(20_000)
    );
    write(dir.path(), "deep.yaml", &deep);
    let mut utf8 = service_yaml("dev", "utf8", "10.96.0.13", 80).into_bytes();
    utf8.extend_from_slice(b"  selector:\n    app: \"\xff\xfe\"\n");
    std::fs::write(dir.path().join("utf8.yaml"), utf8).expect("write");
    let scan = load(dir.path());
    assert_eq!(names(&scan.objects), ["Service dev/a"]);
    assert_eq!(scan.errors.len(), 2, "{:?}", scan.errors);
}

#[test]
fn a_clusterip_written_twice_stays_with_the_first_service_and_the_second_is_named() {
    // Found by drill 5: both were programmed and which one answered was left to chance.
    let dir = temp_dir();
    write_service(dir.path(), "a.yaml", "a", "10.96.0.10", 80);
    write_service(dir.path(), "b.yaml", "b", "10.96.0.10", 81);
    write_service(dir.path(), "c.yaml", "c", "10.96.0.11", 80);
    let scan = load(dir.path());
    assert_eq!(names(&scan.objects), ["Service dev/a", "Service dev/c"]);
    let text = only_error(&scan.errors).to_string();
    assert!(text.contains("b.yaml"), "{text}");
    assert!(text.contains("Service dev/b"), "{text}");
    assert!(text.contains("spec.clusterIP"), "{text}");
    assert!(
        text.contains("10.96.0.10 is already Service dev/a's"),
        "{text}"
    );
}
