//! The check: every `.rs` file of a crate scanned, each path it writes resolved to a
//! `crate::` path and held against the rules of the module it is written in.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::report::{Report, Violation};
use super::rules::{CrateRules, Rule};
use super::scan::{scan, tokenize};
use super::strip::strip;
use super::{ModulePath, RULES};

/// Checks every crate in `rules`, their `src` folders taken relative to `root`.
pub(crate) fn check(root: &Path, rules: &[CrateRules]) -> Result<Report, String> {
    let mut report = Report {
        files: 0,
        rules: rules.iter().map(|krate| krate.rules.len()).sum(),
        violations: Vec::new(),
        notes: Vec::new(),
    };
    for krate in rules {
        check_crate(root, krate, &mut report)?;
    }
    report.violations.sort();
    report.violations.dedup();
    Ok(report)
}

fn check_crate(root: &Path, krate: &CrateRules, report: &mut Report) -> Result<(), String> {
    let src = root.join(&krate.src);
    if !src.is_dir() {
        return Err(format!(
            "{RULES}: `src = \"{}\"` is not a directory under {}",
            krate.src,
            root.display()
        ));
    }
    let mut files = Vec::new();
    rust_files(&src, &mut files)?;
    files.sort();

    // Every module first (files and inline blocks): a path may start with a child.
    let mut known: BTreeSet<ModulePath> = BTreeSet::new();
    let mut scanned = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file)
            .map_err(|error| format!("cannot read {}: {error}", file.display()))?;
        let module = file_module(&src, file)?;
        let (written, inline) = scan(&tokenize(&strip(&text)), &module);
        known.insert(module);
        known.extend(inline);
        scanned.push((file, written));
    }
    report.files += files.len();

    let named = krate
        .rules
        .iter()
        .flat_map(|rule| std::iter::once(&rule.from).chain(&rule.forbid));
    let mut missing: Vec<String> = Vec::new();
    for module in named {
        let shown = module.join("::");
        if !known.iter().any(|known| known.starts_with(module)) && !missing.contains(&shown) {
            missing.push(shown);
        }
    }
    if !missing.is_empty() {
        report.notes.push(format!(
            "{}: no module yet for {}",
            krate.src,
            missing
                .iter()
                .map(|name| format!("`{name}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }

    // The most specific rule speaks for a path that several rules forbid.
    let mut rules: Vec<&Rule> = krate.rules.iter().collect();
    rules.sort_by_key(|rule| std::cmp::Reverse(rule.from.len()));
    for (file, written) in scanned {
        let shown = file.strip_prefix(root).unwrap_or(file).to_path_buf();
        for path in written {
            let Some(resolved) = resolve(&path.segments, &path.module, &known) else {
                continue;
            };
            let hit = rules.iter().find_map(|rule| {
                if !path.module.starts_with(&rule.from) {
                    return None;
                }
                let forbidden = rule
                    .forbid
                    .iter()
                    .find(|forbidden| resolved.starts_with(forbidden))?;
                Some(rule.why.clone().unwrap_or_else(|| {
                    format!(
                        "`{}` may not name `{}`",
                        rule.from.join("::"),
                        forbidden.join("::")
                    )
                }))
            });
            if let Some(why) = hit {
                report.violations.push(Violation {
                    file: shown.clone(),
                    line: path.line,
                    module: path.module,
                    path: resolved,
                    why,
                });
            }
        }
    }
    Ok(())
}

/// The `.rs` files under `dir`, at any depth.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), String> {
    let entries = std::fs::read_dir(dir)
        .map_err(|error| format!("cannot list {}: {error}", dir.display()))?;
    for entry in entries {
        let path = entry
            .map_err(|error| format!("cannot list {}: {error}", dir.display()))?
            .path();
        if path.is_dir() {
            rust_files(&path, out)?;
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            out.push(path);
        }
    }
    Ok(())
}

/// The module a file defines: `src/identity/resolver.rs` is `identity::resolver`,
/// `src/identity/mod.rs` is `identity`, `src/lib.rs` and `src/main.rs` the root.
fn file_module(src: &Path, file: &Path) -> Result<ModulePath, String> {
    let relative = file
        .strip_prefix(src)
        .map_err(|_| format!("{} is not under {}", file.display(), src.display()))?;
    let mut segments = relative
        .with_extension("")
        .components()
        .map(|component| {
            component
                .as_os_str()
                .to_str()
                .map(str::to_owned)
                .ok_or_else(|| format!("{}: the path is not UTF-8", file.display()))
        })
        .collect::<Result<ModulePath, String>>()?;
    match segments.last().map(String::as_str) {
        Some("mod") => {
            segments.pop();
        }
        Some("lib" | "main") if segments.len() == 1 => segments.clear(),
        _ => {}
    }
    Ok(segments)
}

/// `segments`, written in `module`, as a path from the crate root; `None` when it
/// does not lead into this crate (another crate, `Self::`, a local name).
fn resolve(
    segments: &[String],
    module: &[String],
    known: &BTreeSet<ModulePath>,
) -> Option<ModulePath> {
    let (first, rest) = segments.split_first()?;
    let (mut resolved, mut rest): (ModulePath, &[String]) = match first.as_str() {
        "crate" => (Vec::new(), rest),
        "self" => (module.to_vec(), rest),
        "super" => (module.to_vec(), segments),
        _ => {
            let mut child = module.to_vec();
            child.push(first.clone());
            if !known.contains(&child) {
                return None;
            }
            (module.to_vec(), segments)
        }
    };
    while let Some((segment, tail)) = rest.split_first() {
        if segment != "super" {
            break;
        }
        resolved.pop()?;
        rest = tail;
    }
    for segment in rest {
        match segment.as_str() {
            "self" => {}
            "super" | "crate" | "::" => return None,
            _ => resolved.push(segment.clone()),
        }
    }
    Some(resolved)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::layers::fixtures::{FIXTURE_RULES, LIB, found, tree};
    use crate::layers::rules::parse;

    #[test]
    fn every_form_of_forbidden_path_is_reported_at_its_line() {
        let dir = tree(&[
            ("lib.rs", LIB),
            (
                "material/mod.rs",
                r##"//! Material; see [`crate::spiffe::Svid`].
use crate::spiffe::SpiffeError;
pub use crate::identity::Identity;
pub(crate) use crate::{
    der::Der,
    spiffe::{self, stream::Stream as S},
};
const QUOTE: char = '"';
const RAW: &str = r#"a "quoted" word"#;
impl<'a> Der<'a> {
    fn f(&self) -> usize { crate::identity::resolver::count() }
}
pub mod der;
#[cfg(test)]
mod tests {
    use super::super::spiffe::Fake;
}
"##,
            ),
            ("material/der.rs", "use super::super::{spiffe as s};\n"),
            (
                "identity/resolver.rs",
                "use super::Seam;\n\
                 use super::from_secret::SecretIdentity;\n\
                 fn f() { let _ = self::helper(); }\n\
                 mod tests {\n    use super::super::from_secret::Fixture;\n    use super::*;\n}\n\
                 fn g() -> crate::spiffe::Source { todo!() }\n",
            ),
            (
                "identity/mod.rs",
                "pub mod resolver;\npub mod from_secret;\n",
            ),
            ("identity/from_secret.rs", "use crate::material::Pem;\n"),
            ("spiffe/mod.rs", "use crate::identity::Identity;\n"),
        ]);
        let rules = parse(FIXTURE_RULES).unwrap();
        let report = check(dir.path(), &rules).unwrap();
        let m = "fixture/src/material/mod.rs";
        let r = "fixture/src/identity/resolver.rs";
        let expected = [
            (
                "fixture/src/identity/resolver.rs",
                2,
                "identity::from_secret::SecretIdentity",
            ),
            (r, 5, "identity::from_secret::Fixture"),
            (r, 8, "spiffe::Source"),
            ("fixture/src/material/der.rs", 1, "spiffe"),
            (m, 2, "spiffe::SpiffeError"),
            (m, 3, "identity::Identity"),
            (m, 6, "spiffe"),
            (m, 6, "spiffe::stream::Stream"),
            (m, 11, "identity::resolver::count"),
            (m, 16, "spiffe::Fake"),
        ]
        .map(|(file, line, path)| (file.to_owned(), line, format!("crate::{path}")));
        assert_eq!(found(&report), expected);
        assert_eq!(report.files, 7);
        assert_eq!(report.rules, 3);
        assert!(report.notes.is_empty(), "{:?}", report.notes);

        let shown: Vec<String> = report.violations.iter().map(ToString::to_string).collect();
        assert_eq!(
            shown[0],
            "fixture/src/identity/resolver.rs:2: module `identity::resolver` imports \
             `crate::identity::from_secret::SecretIdentity` (forbidden: the resolver does not \
             know its implementations)"
        );
        assert_eq!(
            shown[1],
            "fixture/src/identity/resolver.rs:5: module `identity::resolver::tests` imports \
             `crate::identity::from_secret::Fixture` (forbidden: the resolver does not know its \
             implementations)"
        );
    }

    #[test]
    fn notes_name_modules_no_file_defines() {
        let dir = tree(&[("lib.rs", LIB), ("material.rs", "")]);
        let report = check(dir.path(), &parse(FIXTURE_RULES).unwrap()).unwrap();
        assert_eq!(
            report.notes,
            [
                "fixture/src: no module yet for `identity`, `spiffe`, `identity::resolver`, \
                 `identity::from_secret`"
            ]
        );
    }

    #[test]
    fn modules_of_files() {
        let src = Path::new("/x/src");
        let module = |file: &str| file_module(src, &src.join(file)).unwrap().join("::");
        assert_eq!(module("lib.rs"), "");
        assert_eq!(module("main.rs"), "");
        assert_eq!(module("identity/mod.rs"), "identity");
        assert_eq!(module("identity/resolver.rs"), "identity::resolver");
        assert_eq!(module("identity/lib.rs"), "identity::lib");
    }

    /// svc-tls's own rules catch an import of the metrics (or of wiring, which
    /// reaches them) from any module below them: a copy of the crate with one such
    /// line added to each lower neighbour reports each, and the copy as it is none.
    #[test]
    fn svc_tls_rules_catch_metrics_named_below_wiring() {
        let root = crate::process::workspace_root();
        let rules: Vec<CrateRules> = crate::layers::rules::load(&root.join(RULES))
            .unwrap()
            .into_iter()
            .filter(|krate| krate.src == "crates/svc-tls/src")
            .collect();
        assert_eq!(rules.len(), 1);
        let copy = tempfile::tempdir().unwrap();
        let src = root.join("crates/svc-tls/src");
        let mut files = Vec::new();
        rust_files(&src, &mut files).unwrap();
        for file in &files {
            let to = copy
                .path()
                .join("crates/svc-tls/src")
                .join(file.strip_prefix(&src).unwrap());
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            std::fs::copy(file, &to).unwrap();
        }
        assert_eq!(check(copy.path(), &rules).unwrap().violations, Vec::new());

        let fed = [
            ("identity/resolver.rs", "use crate::metrics::Metrics;"),
            ("trust/verifier.rs", "use crate::metrics::SourceRecorder;"),
            (
                "last_good/mod.rs",
                "fn f() { let _ = crate::metrics::register; }",
            ),
            ("material/mod.rs", "use crate::wiring as _;"),
            ("spiffe/mod.rs", "use crate::metrics::Metrics;"),
            ("watch/mod.rs", "use crate::metrics::Metrics;"),
            ("principal/mod.rs", "use crate::metrics::Metrics;"),
            ("metrics/mod.rs", "use crate::wiring as _;"),
        ];
        for (file, line) in fed {
            let path = copy.path().join("crates/svc-tls/src").join(file);
            let mut text = std::fs::read_to_string(&path).unwrap();
            text.push_str(&format!("\n{line}\n"));
            std::fs::write(&path, text).unwrap();
        }
        let report = check(copy.path(), &rules).unwrap();
        let mut caught: Vec<String> = report
            .violations
            .iter()
            .map(|v| v.file.display().to_string())
            .collect();
        caught.dedup();
        let mut expected: Vec<String> = fed
            .iter()
            .map(|(file, _)| format!("crates/svc-tls/src/{file}"))
            .collect();
        expected.sort();
        caught.sort();
        assert_eq!(caught, expected);
    }
}
