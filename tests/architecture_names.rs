//! ARCHITECTURE.md names only what exists: every path it puts in
//! backticks is a file or directory of the repository, and every Rust
//! name it puts in backticks (`Engine::answer`, `land_and_settle`,
//! `ScriptedTree`) appears in the code (`src/`, the tests, benches, fuzz
//! targets, examples, scripts, or the vendored protocol crate, whose field
//! names the map quotes). A rename that forgets the map fails here, as
//! rust-analyzer's tidy tests fail a stale doc. Names of other projects
//! the map quotes for comparison are listed in `FOREIGN`. The last test
//! holds the guide's configuration page to the property table.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Names from other code bases that the map quotes (the Java client's),
/// not Courier's own.
const FOREIGN: &[&str] = &["partitionsToRewriteSequences"];

/// Where Courier's own names live.
const CODE: &[&str] = &[
    "src",
    "tests",
    "benches",
    "fuzz",
    "examples",
    "scripts",
    ".ci",
    "vendor/kafka-protocol/src",
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every file and directory under `dir`, relative to the root (directories
/// with a trailing `/`), leaving out build output and installed tools.
fn walk(dir: &Path, out: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let path = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        if matches!(name.as_str(), "target" | ".git" | ".tools" | "corpus") {
            continue;
        }
        let rel = path
            .strip_prefix(root())
            .expect("under the root")
            .to_string_lossy()
            .into_owned();
        if path.is_dir() {
            out.push(format!("{rel}/"));
            walk(&path, out);
        } else {
            out.push(rel);
        }
    }
}

/// The words (identifiers) of every source file under `CODE`.
fn code_words() -> BTreeSet<String> {
    let mut files = Vec::new();
    for dir in CODE {
        walk(&root().join(dir), &mut files);
    }
    let mut words = BTreeSet::new();
    // Not this file: the names it makes up (and `FOREIGN`) would count.
    let this = "tests/architecture_names.rs";
    for f in files.iter().filter(|f| {
        *f != this
            && [".rs", ".sh", ".toml", ".py"]
                .iter()
                .any(|ext| f.ends_with(ext))
    }) {
        let text = std::fs::read_to_string(root().join(f)).unwrap_or_default();
        for w in text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
            if !w.is_empty() {
                words.insert(w.to_string());
            }
        }
    }
    words
}

/// What ARCHITECTURE.md puts in backticks.
fn quoted() -> BTreeSet<String> {
    let map = std::fs::read_to_string(root().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    map.split('`')
        .skip(1)
        .step_by(2)
        .filter(|t| !t.contains('\n'))
        .map(str::to_string)
        .collect()
}

fn is_path(t: &str) -> bool {
    let name_chars = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || "_-./".contains(c))
    };
    name_chars(t)
        && ([".rs", ".toml", ".md", ".sh", ".txt"]
            .iter()
            .any(|ext| t.ends_with(ext))
            || (t.ends_with('/') && !t.starts_with('/')))
}

fn is_rust_name(t: &str) -> bool {
    let t = t.strip_suffix("()").unwrap_or(t);
    !t.is_empty()
        && t.split("::").all(|seg| {
            seg.chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && seg.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        })
}

#[test]
fn every_path_the_map_names_exists() {
    let mut files = Vec::new();
    walk(&root(), &mut files);
    let missing: Vec<String> = quoted()
        .into_iter()
        .filter(|t| is_path(t))
        .filter(|t| {
            !files
                .iter()
                .any(|f| f == t || f.ends_with(&format!("/{t}")))
        })
        .collect();
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md names paths that do not exist: {missing:?}"
    );
}

#[test]
fn every_rust_name_the_map_quotes_is_in_the_code() {
    let words = code_words();
    let missing: Vec<String> = quoted()
        .into_iter()
        .filter(|t| is_rust_name(t))
        .filter(|t| {
            let last = t
                .strip_suffix("()")
                .unwrap_or(t)
                .rsplit("::")
                .next()
                .unwrap_or_default();
            !words.contains(last) && !FOREIGN.contains(&last)
        })
        .collect();
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md quotes names the code does not have: {missing:?}"
    );
}

/// The checks above can fail: a made-up name and path are caught.
#[test]
fn the_checks_catch_a_stale_name() {
    let made_up = format!("Engine::{}_{}", "no_such", "method");
    assert!(is_rust_name(&made_up));
    assert!(!code_words().contains(made_up.rsplit("::").next().unwrap()));
    assert!(code_words().contains("land_and_settle"));
    assert!(is_path("src/actors/no_such_file.rs"));
    assert!(is_path("actors/scripted/"));
    assert!(!is_path("linger.ms"));
    assert!(!is_rust_name("linger.ms"));
    let mut files = Vec::new();
    walk(&root(), &mut files);
    assert!(files.iter().any(|f| f == "src/actors/scripted/broker.rs"));
    assert!(!files.iter().any(|f| f.ends_with("/no_such_file.rs")));
}

/// The guide's configuration page is the property table's: every name
/// `ProducerConfig::set` takes (`config::PROPERTIES`, from the one table
/// that also makes "did you mean") and every librdkafka alias
/// (`config::ALIASES`) is in docs/guide/configuration.md in backticks, so
/// a property added to the table without a word for users fails here.
#[test]
fn the_configuration_guide_names_every_property_and_alias() {
    let page = std::fs::read_to_string(root().join("docs/guide/configuration.md")).unwrap();
    let names = courier_kafka::config::PROPERTIES.iter().chain(
        courier_kafka::config::ALIASES
            .iter()
            .map(|(alias, _)| alias),
    );
    let missing: Vec<_> = names
        .filter(|name| !page.contains(&format!("`{name}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/guide/configuration.md does not name these settings: {missing:?}"
    );
}
