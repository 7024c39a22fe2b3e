//! The check: every `.rs` file of a crate scanned, each path it writes resolved to a
//! `crate::` path and held against the rules of the module it is written in; and
//! each inherent impl held against where the crate defines its type.
//!
//! Where a type's methods live: no file writes an inherent impl (`impl Type { … }`,
//! `impl<T> a::Type<T> { … }`; trait impls, `impl Trait for Type`, are the seams and
//! are not checked) of a struct, enum or union defined in another top-level module
//! of the same crate (the first segment of a module path: `principal` for
//! `principal/ingress/mod.rs`, `receiving` for `receiving.rs`; `lib.rs` is the crate
//! root, one more top-level module). Files of one top-level module may split a
//! type's impls between them (`identity/from_secret.rs` adds a constructor to the
//! resolver of `identity/resolver.rs`). The type is found by name, the last segment
//! of the path the impl writes: a name the crate defines in more than one top-level
//! module (private `Shared` or `Settings` structs) is ambiguous and skipped, as is a
//! name it defines nowhere (a type alias, a renamed import, a macro's type: not
//! modelled). Every crate in the rules file is checked, whatever its rules.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::report::{Report, Violation, What};
use super::rules::{CrateRules, Rule};
use super::scan::{Named, scan, tokenize};
use super::strip::strip;
use super::{ModulePath, RULES};

/// Checks every crate in `rules`, their `src` folders taken relative to `root`.
pub(crate) fn check(root: &Path, rules: &[CrateRules]) -> Result<Report, String> {
    let mut report = Report {
        files: 0,
        rules: rules.iter().map(|krate| krate.rules.len()).sum(),
        inherent_impls: 0,
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
    let mut defined = Vec::new();
    let mut impls = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file)
            .map_err(|error| format!("cannot read {}: {error}", file.display()))?;
        let module = file_module(&src, file)?;
        let found = scan(&tokenize(&strip(&text)), &module);
        known.insert(module);
        known.extend(found.inline_modules);
        let shown = file.strip_prefix(root).unwrap_or(file).to_path_buf();
        defined.extend(found.defined);
        impls.extend(found.inherent_impls.into_iter().map(|i| (shown.clone(), i)));
        scanned.push((shown, found.written));
    }
    report.files += files.len();
    check_impls(&defined, impls, report);

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
    for (shown, written) in scanned {
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
                    what: What::Import {
                        module: path.module,
                        path: resolved,
                        why,
                    },
                });
            }
        }
    }
    Ok(())
}

/// The top-level module of a module path: its first segment, empty for the root.
fn top_level(module: &[String]) -> String {
    module.first().cloned().unwrap_or_default()
}

/// Reports each inherent impl (with its file) written in another top-level module
/// than the one defining its type among `defined` (the crate's structs, enums and
/// unions); a name defined in several top-level modules, or in none, is skipped.
fn check_impls(defined: &[Named], impls: Vec<(PathBuf, Named)>, report: &mut Report) {
    // Each name, and the top-level modules that define a type of that name.
    let mut homes: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    for named in defined {
        homes
            .entry(&named.name)
            .or_default()
            .insert(top_level(&named.module));
    }
    for (file, imp) in impls {
        let Some(home) = homes.get(imp.name.as_str()) else {
            continue;
        };
        let mut places = home.iter();
        let (Some(defined_in), None) = (places.next(), places.next()) else {
            // Ambiguous: which of them the impl is of is not read.
            continue;
        };
        report.inherent_impls += 1;
        let module = top_level(&imp.module);
        if module != *defined_in {
            report.violations.push(Violation {
                file,
                line: imp.line,
                what: What::InherentImpl {
                    module,
                    name: imp.name,
                    defined_in: defined_in.clone(),
                },
            });
        }
    }
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

    /// A fixture crate with a type in each of `principal` and `identity`, the files
    /// given added.
    fn impl_tree(files: &[(&str, &str)]) -> tempfile::TempDir {
        let mut all = vec![
            (
                "lib.rs",
                "pub mod principal;\npub mod identity;\npub mod receiving;\n\
                 pub struct Root;\n",
            ),
            (
                "principal/ingress.rs",
                "pub struct IngressVerifier<T> { t: T }\n\
                 impl<T> IngressVerifier<T> { pub fn new(t: T) -> Self { Self { t } } }\n\
                 pub(crate) enum Kind { A }\nunion Bits { a: u8 }\n",
            ),
            (
                "identity/resolver.rs",
                "pub struct IdentityResolver;\nimpl IdentityResolver { fn get(&self) {} }\n",
            ),
        ];
        all.extend_from_slice(files);
        tree(&all)
    }

    #[test]
    fn an_inherent_impl_across_top_level_modules_is_reported_at_its_line() {
        let dir = impl_tree(&[
            (
                "receiving.rs",
                "use crate::principal::ingress::IngressVerifier;\n\
                 \n\
                 impl<T: Clone> IngressVerifier<T> {\n    pub async fn watching(&self) {}\n}\n",
            ),
            (
                "identity/from_secret.rs",
                "#[cfg(test)]\nimpl crate::principal::ingress::Kind { fn a() {} }\n\
                 mod tests {\n    impl super::super::Root where Self: Sized {}\n}\n\
                 const _: () = {\n    impl crate::principal::ingress::r#Bits {}\n};\n",
            ),
            (
                "lib.rs",
                "pub mod principal;\nimpl IdentityResolver {}\npub struct Root;\n",
            ),
        ]);
        let report = check(dir.path(), &parse(FIXTURE_RULES).unwrap()).unwrap();
        let f = "fixture/src/identity/from_secret.rs";
        let expected = [
            (f, 2, "Kind"),
            (f, 4, "Root"),
            (f, 7, "Bits"),
            ("fixture/src/lib.rs", 2, "IdentityResolver"),
            ("fixture/src/receiving.rs", 3, "IngressVerifier"),
        ]
        .map(|(file, line, name)| (file.to_owned(), line, format!("impl {name}")));
        assert_eq!(found(&report), expected);
        assert_eq!(report.inherent_impls, 7);
        let shown: Vec<String> = report.violations.iter().map(ToString::to_string).collect();
        assert_eq!(
            shown[4],
            "fixture/src/receiving.rs:3: `receiving` writes an inherent impl of \
             `IngressVerifier`, defined in `principal` (an impl belongs to the type's own \
             module: give the methods to a free function or a seam)"
        );
        assert_eq!(
            shown[1],
            "fixture/src/identity/from_secret.rs:4: `identity` writes an inherent impl of \
             `Root`, defined in `crate` (an impl belongs to the type's own module: give the \
             methods to a free function or a seam)"
        );
        assert_eq!(
            shown[3],
            "fixture/src/lib.rs:2: `crate` writes an inherent impl of `IdentityResolver`, \
             defined in `identity` (an impl belongs to the type's own module: give the methods \
             to a free function or a seam)"
        );
    }

    /// Trait impls are not checked, even of a trait named as a struct elsewhere.
    #[test]
    fn trait_impls_and_impl_trait_types_are_allowed() {
        let dir = impl_tree(&[
            ("identity/source.rs", "pub trait Kind {}\n"),
            (
                "receiving.rs",
                "use crate::principal::ingress::{IngressVerifier, Kind};\n\
             impl<T> Clone for IngressVerifier<T> { fn clone(&self) -> Self { todo!() } }\n\
             impl<T, F: for<'a> Fn(&'a T) -> Vec<T>> crate::Seam<F> for IngressVerifier<T> {}\n\
             impl From<fn() -> Kind> for Kind where Kind: Sized {}\n\
             unsafe impl Send for crate::identity::resolver::IdentityResolver {}\n\
             impl !Sync for Kind {}\n\
             impl<T> crate::identity::source::Kind for IngressVerifier<T> {}\n\
             fn f(x: impl Into<Kind>) -> impl Iterator<Item = Kind> { std::iter::once(x.into()) }\n\
             struct Local;\nimpl Local { fn g(&self) -> Box<dyn Fn() -> Kind> { todo!() } }\n\
             fn h() { let _ = set.union(&other); }\n",
            ),
        ]);
        let report = check(dir.path(), &parse(FIXTURE_RULES).unwrap()).unwrap();
        assert_eq!(found(&report), []);
        assert_eq!(report.inherent_impls, 3);
    }

    #[test]
    fn impls_split_within_one_top_level_module_are_allowed() {
        let dir = impl_tree(&[
            (
                "identity/from_secret.rs",
                "use super::resolver::IdentityResolver;\n\
                 impl IdentityResolver { pub fn builder() {} }\n",
            ),
            (
                "identity/mod.rs",
                "pub mod resolver;\nimpl resolver::IdentityResolver { fn more(&self) {} }\n",
            ),
            (
                "principal/mod.rs",
                "pub mod ingress;\nmod inner { impl<T> super::ingress::IngressVerifier<T> {} }\n",
            ),
        ]);
        let report = check(dir.path(), &parse(FIXTURE_RULES).unwrap()).unwrap();
        assert_eq!(found(&report), []);
        assert_eq!(report.inherent_impls, 5);
    }

    /// A name the crate defines in more than one top-level module is not checked;
    /// one defined twice in a single top-level module still is.
    #[test]
    fn names_defined_in_several_top_level_modules_are_skipped() {
        let dir = impl_tree(&[
            ("principal/shared.rs", "struct Shared;\nstruct Settings;\n"),
            ("identity/shared.rs", "pub(crate) struct Shared;\n"),
            ("identity/more.rs", "enum Settings { A }\n"),
            ("identity/other.rs", "struct Settings;\nimpl Shared {}\n"),
            ("receiving.rs", "impl Shared {}\nimpl Settings {}\n"),
        ]);
        let report = check(dir.path(), &parse(FIXTURE_RULES).unwrap()).unwrap();
        assert_eq!(found(&report), []);

        let dir = impl_tree(&[
            ("identity/shared.rs", "pub(crate) struct Shared;\n"),
            ("identity/more.rs", "mod tests { struct Shared; }\n"),
            ("receiving.rs", "impl Shared {}\n"),
        ]);
        let report = check(dir.path(), &parse(FIXTURE_RULES).unwrap()).unwrap();
        assert_eq!(
            found(&report),
            [(
                "fixture/src/receiving.rs".to_owned(),
                1,
                "impl Shared".to_owned()
            )]
        );
    }

    /// A copy of svc-tls's sources in a fresh directory, and its rules.
    fn svc_tls_copy() -> (tempfile::TempDir, Vec<CrateRules>) {
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
        (copy, rules)
    }

    /// The impls issue 31 moved out, written back into a copy of svc-tls, are each
    /// reported (and the copy as it is has none).
    #[test]
    fn svc_tls_impls_of_a_lower_modules_types_are_reported() {
        let (copy, rules) = svc_tls_copy();
        let fed = [
            (
                "metrics/install.rs",
                "impl crate::watch::WatchedObjects {}",
                "WatchedObjects",
            ),
            (
                "receiving/builder.rs",
                "impl IngressVerifier {\n    pub async fn watching() {}\n}",
                "IngressVerifier",
            ),
        ];
        let mut expected = Vec::new();
        for (file, code, name) in fed {
            let path = copy.path().join("crates/svc-tls/src").join(file);
            let mut text = std::fs::read_to_string(&path).unwrap();
            assert!(text.ends_with('\n'));
            // After a blank line.
            let line = text.lines().count() + 2;
            text.push_str(&format!("\n{code}\n"));
            std::fs::write(&path, text).unwrap();
            expected.push((
                format!("crates/svc-tls/src/{file}"),
                line,
                format!("impl {name}"),
            ));
        }
        let report = check(copy.path(), &rules).unwrap();
        assert_eq!(found(&report), expected);
    }

    /// svc-tls's own rules catch an import of the metrics (or of wiring, which
    /// reaches them) from any module below them: a copy of the crate with one such
    /// line added to each lower neighbour reports each, and the copy as it is none.
    #[test]
    fn svc_tls_rules_catch_metrics_named_below_wiring() {
        let (copy, rules) = svc_tls_copy();
        assert_eq!(check(copy.path(), &rules).unwrap().violations, Vec::new());

        let fed = [
            ("identity/resolver.rs", "use crate::metrics::Metrics;"),
            ("trust/verifier.rs", "use crate::metrics::SourceRecorder;"),
            (
                "last_good/slot.rs",
                "fn f() { let _ = crate::metrics::register; }",
            ),
            ("material/limits.rs", "use crate::wiring as _;"),
            ("spiffe/streams.rs", "use crate::metrics::Metrics;"),
            ("watch/builder.rs", "use crate::metrics::Metrics;"),
            ("principal/payload.rs", "use crate::metrics::Metrics;"),
            ("metrics/install.rs", "use crate::wiring as _;"),
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
