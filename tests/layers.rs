//! The layer rule, as a test: every file in `src/` imports only from its
//! own layer or the layers below it, and no files import each other in a
//! circle. `LAYERS` is the executable form of the layer list in
//! ARCHITECTURE.md ("Layers"); change both together.
//!
//! An import is any path into the crate, in a `use` or in code:
//! `crate::…`, `super::…`, `self::…`, or a child module's name. Comments
//! and string literals are ignored. Paths are resolved to the file that
//! defines the module they name (the longest prefix that is a file), so a
//! re-export through a folder's `mod.rs` counts as an import of that
//! `mod.rs`, which is what the compiler sees too.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Bottom first. A file belongs to the first entry one of whose prefixes
/// its path (relative to `src/`) starts with.
const LAYERS: &[(&str, &[&str])] = &[
    ("protocol", &["protocol/"]),
    (
        "foundation",
        &[
            "sync.rs",
            "clock.rs",
            "record.rs",
            "kafka_error.rs",
            "report.rs",
            "config.rs",
            "config/",
            "metadata.rs",
            "metric_handles.rs",
            "stats.rs",
            "idempotence.rs",
            "transaction.rs",
            "transaction/",
            "partitioner.rs",
            "interceptor.rs",
        ],
    ),
    (
        "io",
        &[
            "resolve.rs",
            "connection.rs",
            "admin/",
            "security.rs",
            "security/",
        ],
    ),
    ("delivery", &["delivery/"]),
    ("batching", &["batching/"]),
    ("engine", &["engine/"]),
    ("actors", &["actors/"]),
    ("face", &["producer/", "bench_internals.rs"]),
    ("typed", &["typed/"]),
    ("retry", &["retry/"]),
    ("testing", &["testing.rs"]),
    ("errors", &["error.rs"]),
    ("root", &["lib.rs", "guide.rs", "bin/"]),
];

#[test]
fn src_imports_point_down_and_never_in_a_circle() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = BTreeMap::new();
    read_tree(&root, &root, &mut files);
    assert!(files.len() > 30, "read only {} files", files.len());
    let problems = check(&files);
    assert!(
        problems.is_empty(),
        "layer rule broken (see ARCHITECTURE.md, Layers):\n{}",
        problems.join("\n")
    );
}

/// The checker itself must catch what it is for: an upward import, a
/// circle inside one layer, and a file no layer names.
#[test]
fn the_checker_catches_upward_imports_circles_and_unknown_files() {
    let tree = |list: &[(&str, &str)]| -> BTreeMap<String, String> {
        list.iter()
            .map(|(p, s)| (p.to_string(), s.to_string()))
            .collect()
    };
    let upward = tree(&[
        ("lib.rs", "mod record; mod engine;"),
        ("record.rs", "use crate::engine::Engine;"),
        ("engine/mod.rs", "pub struct Engine;"),
    ]);
    let p = check(&upward);
    assert!(
        p.iter()
            .any(|l| l.contains("src/record.rs") && l.contains("src/engine/mod.rs")),
        "{p:?}"
    );

    let circle = tree(&[
        ("lib.rs", "mod delivery;"),
        ("delivery/mod.rs", "mod a; mod b;"),
        ("delivery/a.rs", "use super::b::B; pub struct A;"),
        (
            "delivery/b.rs",
            "pub struct B { a: crate::delivery::a::A }\n// use crate::engine::X; (a comment)",
        ),
    ]);
    let p = check(&circle);
    assert!(
        p.iter()
            .any(|l| l.contains("circle") && l.contains("src/delivery/a.rs")),
        "{p:?}"
    );
    assert!(!p.iter().any(|l| l.contains("engine")), "{p:?}");

    let unknown = tree(&[("lib.rs", "mod utils;"), ("utils.rs", "")]);
    let p = check(&unknown);
    assert!(p.iter().any(|l| l.contains("src/utils.rs")), "{p:?}");

    // A child module named in a `use`, and `super` inside an inline test
    // module (which is the file itself, not its parent).
    let fine = tree(&[
        ("lib.rs", "mod producer; mod engine;"),
        (
            "producer/mod.rs",
            "mod handle;\npub use handle::Producer;\n#[cfg(test)]\nmod tests { use super::*; }",
        ),
        (
            "producer/handle.rs",
            "use crate::engine::Engine; pub struct Producer;",
        ),
        (
            "engine/mod.rs",
            "pub struct Engine; #[cfg(test)] mod tests { use super::*; }",
        ),
    ]);
    assert_eq!(check(&fine), Vec::<String>::new());
}

fn read_tree(root: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
    for entry in std::fs::read_dir(dir).expect("read src/") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            read_tree(root, &path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let rel = path
                .strip_prefix(root)
                .expect("under src/")
                .to_string_lossy()
                .replace('\\', "/");
            out.insert(rel, std::fs::read_to_string(&path).expect("read file"));
        }
    }
}

fn layer_of(file: &str) -> Option<usize> {
    LAYERS
        .iter()
        .position(|(_, prefixes)| prefixes.iter().any(|p| file.starts_with(p)))
}

/// Every broken rule, one line each, naming the two files.
fn check(files: &BTreeMap<String, String>) -> Vec<String> {
    let modules: BTreeMap<Vec<String>, String> = files
        .keys()
        .filter(|f| !f.starts_with("bin/"))
        .map(|f| (module_path(f), f.clone()))
        .collect();
    let mut problems = Vec::new();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (file, text) in files {
        let layer = layer_of(file);
        if layer.is_none() {
            problems.push(format!(
                "src/{file} is in no layer: add it to LAYERS in tests/layers.rs and to ARCHITECTURE.md"
            ));
        }
        // The binary is another crate: it sees only the public API.
        if file.starts_with("bin/") {
            continue;
        }
        for target in imports(&module_path(file), text, &modules) {
            if &target == file {
                continue;
            }
            let to = layer_of(&target).unwrap_or(usize::MAX);
            if let Some(layer) = layer.filter(|l| to > *l && file != "lib.rs") {
                problems.push(format!(
                    "src/{file} (layer {}) imports src/{target} (layer {}, above it)",
                    LAYERS[layer].0,
                    LAYERS.get(to).map_or("none", |l| l.0)
                ));
            }
            edges.entry(file.clone()).or_default().insert(target);
        }
    }
    for (a, b) in circle_edges(&edges) {
        problems.push(format!(
            "import circle: src/{a} imports src/{b}, which leads back to src/{a}"
        ));
    }
    problems
}

/// `engine/mod.rs` → `["engine"]`, `delivery/owed.rs` → `["delivery", "owed"]`.
fn module_path(file: &str) -> Vec<String> {
    let no_ext = file.trim_end_matches(".rs");
    let mut parts: Vec<String> = no_ext.split('/').map(str::to_string).collect();
    if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
        parts.pop();
    }
    parts
}

/// The files `text` (the file of module `me`) imports.
fn imports(me: &[String], text: &str, modules: &BTreeMap<Vec<String>, String>) -> BTreeSet<String> {
    let code = strip_comments_and_strings(text);
    let tokens = tokenize(&code);
    let mut found = BTreeSet::new();
    // Inline modules open at a brace depth; `super` inside one is relative
    // to it.
    let mut inline: Vec<(usize, String)> = Vec::new();
    // Child modules in files of their own (`mod name;`), which a path may
    // name without `self::`.
    let children: BTreeSet<String> = tokens
        .windows(3)
        .filter(|w| w[0] == "mod" && w[2] == ";")
        .map(|w| w[1].clone())
        .collect();
    let mut depth = 0usize;
    let mut i = 0;
    let current = |inline: &Vec<(usize, String)>| -> Vec<String> {
        me.iter()
            .cloned()
            .chain(inline.iter().map(|(_, m)| m.clone()))
            .collect()
    };
    while i < tokens.len() {
        let t = tokens[i].as_str();
        match t {
            "{" => depth += 1,
            "}" => {
                depth = depth.saturating_sub(1);
                if inline.last().is_some_and(|(d, _)| *d == depth) {
                    inline.pop();
                }
            }
            "mod" if i + 2 < tokens.len() => {
                let name = tokens[i + 1].clone();
                if tokens[i + 2] == "{" {
                    inline.push((depth, name));
                    depth += 1;
                    i += 3;
                    continue;
                }
            }
            "use" => {
                let end = tokens[i..]
                    .iter()
                    .position(|t| t == ";")
                    .map_or(tokens.len(), |p| i + p);
                for path in expand_use(&tokens[i + 1..end]) {
                    if let Some(f) = resolve(&current(&inline), &path, &children, modules) {
                        found.insert(f);
                    }
                }
                i = end + 1;
                continue;
            }
            "crate" | "super" | "self" if tokens.get(i + 1).is_some_and(|n| n == "::") => {
                let path = read_path(&tokens, i);
                if let Some(f) = resolve(&current(&inline), &path, &children, modules) {
                    found.insert(f);
                }
                i += path.len() * 2 - 1;
                continue;
            }
            name if children.contains(name)
                && tokens.get(i + 1).is_some_and(|n| n == "::")
                && (i == 0 || tokens[i - 1] != "::") =>
            {
                let path = read_path(&tokens, i);
                if let Some(f) = resolve(&current(&inline), &path, &children, modules) {
                    found.insert(f);
                }
                i += path.len() * 2 - 1;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    found
}

/// `a :: b :: c` starting at `tokens[i]`.
fn read_path(tokens: &[String], mut i: usize) -> Vec<String> {
    let mut path = vec![tokens[i].clone()];
    while tokens.get(i + 1).is_some_and(|t| t == "::")
        && tokens.get(i + 2).is_some_and(|t| is_ident(t))
    {
        path.push(tokens[i + 2].clone());
        i += 2;
    }
    path
}

fn is_ident(t: &str) -> bool {
    t.chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
}

/// A use tree's tokens → every full path it names (`a::{b, c::d}` →
/// `a::b`, `a::c::d`; `self` in a group is the group's prefix).
fn expand_use(tokens: &[String]) -> Vec<Vec<String>> {
    fn walk(tokens: &[String], i: &mut usize, prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
        let mut path = prefix;
        while *i < tokens.len() {
            let t = tokens[*i].as_str();
            match t {
                "{" => {
                    *i += 1;
                    loop {
                        walk(tokens, i, path.clone(), out);
                        match tokens.get(*i).map(String::as_str) {
                            Some(",") => *i += 1,
                            Some("}") => {
                                *i += 1;
                                return;
                            }
                            _ => return,
                        }
                        if tokens.get(*i).is_some_and(|t| t == "}") {
                            *i += 1;
                            return;
                        }
                    }
                }
                "," | "}" => break,
                "::" => *i += 1,
                "as" => *i += 2,
                "*" => *i += 1,
                "self" if !path.is_empty() => *i += 1,
                _ => {
                    path.push(t.to_string());
                    *i += 1;
                }
            }
        }
        if !path.is_empty() {
            out.push(path);
        }
    }
    let mut out = Vec::new();
    let mut i = 0;
    // `pub(crate) use` leaves nothing before the tree here; skip a leading `::`.
    walk(tokens, &mut i, Vec::new(), &mut out);
    out
}

/// The file a path from module `me` lands in, if it is in this crate.
fn resolve(
    me: &[String],
    path: &[String],
    children: &BTreeSet<String>,
    modules: &BTreeMap<Vec<String>, String>,
) -> Option<String> {
    let mut abs: Vec<String>;
    let mut rest = path;
    match path.first().map(String::as_str) {
        Some("crate") => {
            abs = Vec::new();
            rest = &path[1..];
        }
        Some("super") | Some("self") => {
            abs = me.to_vec();
            while let Some(first) = rest.first() {
                match first.as_str() {
                    "super" => {
                        abs.pop();
                    }
                    "self" => {}
                    _ => break,
                }
                rest = &rest[1..];
            }
        }
        Some(first) if children.contains(first) => abs = me.to_vec(),
        _ => return None,
    }
    abs.extend(rest.iter().cloned());
    // The longest prefix that is a file's module.
    (0..=abs.len())
        .rev()
        .find_map(|n| modules.get(&abs[..n]).cloned())
}

/// Rust source with comments replaced by spaces and string and char
/// literals by empty ones, so neither is read as code.
fn strip_comments_and_strings(s: &str) -> String {
    let b: Vec<char> = s.chars().collect();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < b.len() && b[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == '/' && b.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if b[i] == '*' && b.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
        } else if c == 'r' && (next == Some('"') || next == Some('#')) && !prev_is_ident(&b, i) {
            // Raw string: r"..." or r#"..."#.
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            j += 1;
            loop {
                if j >= b.len() {
                    break;
                }
                if b[j] == '"' && (0..hashes).all(|k| b.get(j + 1 + k) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            out.push_str("\"\"");
            i = j;
        } else if c == '"' {
            i += 1;
            while i < b.len() && b[i] != '"' {
                if b[i] == '\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
        } else if c == '\'' {
            // A char literal ('x', '\n', '\u{..}'), or a lifetime ('a).
            let close = if next == Some('\\') {
                b[i + 2..]
                    .iter()
                    .position(|&x| x == '\'')
                    .map(|p| i + 2 + p)
            } else if b.get(i + 2) == Some(&'\'') {
                Some(i + 2)
            } else {
                None
            };
            match close {
                Some(end) => {
                    out.push_str("' '");
                    i = end + 1;
                }
                None => {
                    out.push(c);
                    i += 1;
                }
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

fn prev_is_ident(b: &[char], i: usize) -> bool {
    i > 0 && (b[i - 1].is_alphanumeric() || b[i - 1] == '_')
}

/// Identifiers, `::`, and single punctuation characters.
fn tokenize(s: &str) -> Vec<String> {
    let b: Vec<char> = s.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_whitespace() {
            i += 1;
        } else if c.is_alphanumeric() || c == '_' {
            let start = i;
            while i < b.len() && (b[i].is_alphanumeric() || b[i] == '_') {
                i += 1;
            }
            out.push(b[start..i].iter().collect());
        } else if c == ':' && b.get(i + 1) == Some(&':') {
            out.push("::".into());
            i += 2;
        } else {
            out.push(c.to_string());
            i += 1;
        }
    }
    out
}

/// For each import circle, one edge on it (found by depth-first search:
/// an edge back to a file still on the stack closes a circle).
fn circle_edges(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<(String, String)> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Open,
        Done,
    }
    fn visit(
        n: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        marks: &mut BTreeMap<String, Mark>,
        out: &mut Vec<(String, String)>,
    ) {
        marks.insert(n.to_string(), Mark::Open);
        for m in edges.get(n).into_iter().flatten() {
            match marks.get(m.as_str()) {
                Some(Mark::Open) => out.push((n.to_string(), m.clone())),
                Some(Mark::Done) => {}
                None => visit(m, edges, marks, out),
            }
        }
        marks.insert(n.to_string(), Mark::Done);
    }
    let mut marks = BTreeMap::new();
    let mut out = Vec::new();
    for n in edges.keys() {
        if !marks.contains_key(n.as_str()) {
            visit(n, edges, &mut marks, &mut out);
        }
    }
    out
}
