//! Docs name what exists (issue 44): every Rust path of ours in backticks in
//! docs/*.md and the READMEs (`svc_tls::…`, `kube_construct::…`, `provision_scope::…`,
//! `cluster_id::…`, `watch_ready::…`, `platform_client_compat::…`) names modules and a
//! type that the crates declare public, and no backticked name is a type our crates
//! once exported and no longer do (the "from" column of docs/migration.md's tables,
//! which is exempt itself). The public names are read from the crates' sources: every
//! `pub` item and every name a `pub use` brings in; segments after the first type
//! (methods, variants, fields) are not checked.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

const CRATES: [(&str, &str); 6] = [
    ("svc_tls", "svc-tls"),
    ("kube_construct", "kube-construct"),
    ("provision_scope", "provision-scope"),
    ("cluster_id", "cluster-id"),
    ("watch_ready", "watch-ready"),
    ("platform_client_compat", "platform-client-compat"),
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Every name the crates declare `pub` (items, modules), bring in with `pub use`, or
/// export as a macro (`#[macro_export]`).
fn public_names() -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for (_, dir) in CRATES {
        let mut files = Vec::new();
        rust_files(&root().join("crates").join(dir).join("src"), &mut files);
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            let mut exported_macro = false;
            for line in text.lines().map(str::trim_start) {
                // `#[macro_export] macro_rules! name`: public at the crate's root.
                if line.starts_with("#[macro_export]") {
                    exported_macro = true;
                    continue;
                }
                if let Some(rest) = line.strip_prefix("macro_rules!")
                    && std::mem::take(&mut exported_macro)
                    && let Some(name) = rest
                        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                        .find(|w| !w.is_empty())
                {
                    names.insert(name.to_owned());
                }
                if !line.starts_with("#[") && !line.starts_with("///") {
                    exported_macro = false;
                }
                if let Some(rest) = line.strip_prefix("pub ") {
                    let mut words = rest.split(|c: char| !(c.is_alphanumeric() || c == '_'));
                    let mut kind = words.next().unwrap_or("");
                    if kind == "async" || kind == "unsafe" {
                        kind = words.next().unwrap_or("");
                    }
                    if kind == "use" {
                        // Every identifier of the use tree: the last segments are
                        // what it brings in (`as` renames included); the others
                        // are modules, which are names too.
                        let mut tree = rest.to_owned();
                        if !tree.contains(';') {
                            // A multi-line use: take the lines up to the `;`.
                            let start = text.find(line).unwrap_or(0);
                            let end = text[start..].find(';').map_or(text.len(), |e| start + e);
                            tree = text[start..end].to_owned();
                        }
                        for word in tree.split(|c: char| !(c.is_alphanumeric() || c == '_')) {
                            if !word.is_empty() {
                                names.insert(word.to_owned());
                            }
                        }
                    } else if matches!(
                        kind,
                        "struct" | "enum" | "trait" | "type" | "fn" | "const" | "static" | "mod"
                    ) && let Some(name) = words.find(|w| !w.is_empty())
                    {
                        names.insert(name.to_owned());
                    }
                }
            }
        }
    }
    names
}

/// Words that mark a name as history where it stands right before it ("formerly
/// `X`", "was `X`", "between issues"): such a span is not checked.
const HISTORY: [&str; 4] = ["formerly", "former", "was", "between"];

/// The backticked spans of `text`, with the line they start on; a span right after a
/// [`HISTORY`] word is left out.
fn spans(text: &str) -> Vec<(usize, String)> {
    let tail = |text: &str| -> String {
        let chars: Vec<char> = text.chars().collect();
        chars[chars.len().saturating_sub(16)..].iter().collect()
    };
    let mut out = Vec::new();
    // The end of the previous line counts as "right before" a span opening a line.
    let mut carried = String::new();
    for (number, line) in text.lines().enumerate() {
        let mut parts = line.split('`');
        let mut before = format!("{carried} {}", parts.next().unwrap_or(""));
        while let Some(inside) = parts.next() {
            if !HISTORY.iter().any(|word| tail(&before).contains(word)) {
                out.push((number + 1, inside.to_owned()));
            }
            before = parts.next().unwrap_or("").to_owned();
        }
        carried = tail(&before);
    }
    out
}

/// The paths of our crates in `span`: `svc_tls::a::B` → `["svc_tls", "a", "B"]`,
/// a `{..}` group giving one path per name.
fn our_paths(span: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for (krate, _) in CRATES {
        let mut rest = span;
        while let Some(at) = rest.find(&format!("{krate}::")) {
            let before = rest[..at].chars().last();
            let tail = &rest[at..];
            rest = &rest[at + krate.len()..];
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                continue;
            }
            let path: String = tail
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            let segments: Vec<String> = path
                .split("::")
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect();
            let after = &tail[path.len()..];
            if path.ends_with("::") && after.starts_with('{') {
                let group: String = after[1..].chars().take_while(|c| *c != '}').collect();
                for name in group.split(',').map(str::trim) {
                    let name: String = name
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    if !name.is_empty() {
                        let mut one = segments.clone();
                        one.push(name);
                        out.push(one);
                    }
                }
            } else {
                out.push(segments);
            }
        }
    }
    out
}

/// The segments of `path` that must be public names: the crate's modules and the
/// first type (CamelCase) after them; nothing after the type.
fn checked_segments(path: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for segment in &path[1..] {
        out.push(segment.clone());
        if segment.chars().next().is_some_and(char::is_uppercase) {
            break;
        }
    }
    out
}

fn doc_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    for dir in ["crates", "examples"] {
        for entry in std::fs::read_dir(root().join(dir)).unwrap() {
            let readme = entry.unwrap().path().join("README.md");
            if readme.exists() {
                files.push(readme);
            }
        }
    }
    files.push(root().join("README.md"));
    files.sort();
    files
}

/// `text` without the first cell of each table row when `file` is the migration
/// guide (the names a row migrates *from*).
fn checked_text(file: &Path, text: &str) -> String {
    let migration = file.ends_with("docs/migration.md");
    text.lines()
        .map(|line| {
            if migration && line.starts_with('|') {
                let mut cells = line.splitn(3, '|');
                cells.next();
                cells.next();
                format!("| {}", cells.next().unwrap_or(""))
            } else {
                line.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// CamelCase names in the "from" column of docs/migration.md that no crate exports now.
fn former_names(public: &BTreeSet<String>) -> BTreeSet<String> {
    let text = std::fs::read_to_string(root().join("docs/migration.md")).unwrap();
    let mut former = BTreeSet::new();
    for line in text.lines().filter(|l| l.starts_with('|')) {
        let first = line.split('|').nth(1).unwrap_or("");
        for (_, span) in spans(first) {
            for path in our_paths(&span) {
                for segment in checked_segments(&path) {
                    if segment.chars().next().is_some_and(char::is_uppercase)
                        && !public.contains(&segment)
                    {
                        former.insert(segment);
                    }
                }
            }
        }
    }
    former
}

#[test]
fn every_path_the_docs_name_is_public_and_no_former_name_is_used() {
    let public = public_names();
    assert!(public.contains("PeerTls") && public.contains("TrustSettings"));
    let former = former_names(&public);
    let mut missing = Vec::new();
    for file in doc_files() {
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        let shown = file
            .strip_prefix(root())
            .unwrap_or(&file)
            .display()
            .to_string();
        for (line, span) in spans(&checked_text(&file, &text)) {
            for path in our_paths(&span) {
                for segment in checked_segments(&path) {
                    if !public.contains(&segment) {
                        missing.push(format!("{shown}:{line}: `{}`", path.join("::")));
                        break;
                    }
                }
            }
            let words = span.split(|c: char| !(c.is_alphanumeric() || c == '_'));
            for word in words {
                if former.contains(word) {
                    missing.push(format!(
                        "{shown}:{line}: `{span}` names the former `{word}`"
                    ));
                }
            }
        }
    }
    assert!(
        missing.is_empty(),
        "{} stale:\n{}",
        missing.len(),
        missing.join("\n")
    );
}

#[test]
fn the_path_reader_finds_groups_and_stops_at_the_type() {
    assert_eq!(
        our_paths("svc_tls::watch::{WatchedObjects, SharedSecret}"),
        [
            vec!["svc_tls", "watch", "WatchedObjects"],
            vec!["svc_tls", "watch", "SharedSecret"]
        ]
    );
    let path = &our_paths("svc_tls::trust::TrustReloadError::ConfigMap(..)")[0];
    assert_eq!(checked_segments(path), ["trust", "TrustReloadError"]);
    assert!(our_paths("not_svc_tls::X").is_empty());
}
