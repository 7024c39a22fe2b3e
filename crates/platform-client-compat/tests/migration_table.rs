//! The migration table is complete, checked against the Go package itself: the
//! exported surface of `pkg/client` (the three generations services run, and the
//! `pkg/errors` values its functions return) is data in
//! `docs/go-pkg-client-surface.tsv`, recorded from the Go source with the repository,
//! path and commit read. `docs/migration.md` and this crate's map must each have a
//! row for every identifier in it, and may name no Go identifier that is not in it.
//! Each generation's `pkg/client/http.go` is pinned here by its exported names, so a
//! row dropped from the surface file fails too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};

const SURFACE: &str = include_str!("../../../docs/go-pkg-client-surface.tsv");
const MIGRATION_MD: &str = include_str!("../../../docs/migration.md");
const CRATE_MAP: &str = include_str!("../src/lib.rs");

const COLUMNS: [&str; 7] = [
    "identifier",
    "kind",
    "generation",
    "repository",
    "path",
    "commit",
    "signature",
];
const GENERATIONS: [&str; 3] = ["timer-24h", "spiffe", "per-handshake"];
const KINDS: [&str; 6] = ["type", "field", "func", "method", "const", "var"];

/// The exported names of each generation's `pkg/client/http.go`, as read (the surface
/// file's header says where). Methods are `Type.Method`.
const RECORDED_FILES: [(&str, &str, &[&str]); 3] = [
    (
        "timer-24h",
        "pkg/client/http.go",
        &[
            "HTTPOptions",
            "NewHTTPOptions",
            "HTTPOptions.Host",
            "HTTPOptions.AddFlags",
            "HTTPOptions.ApplyTLSConfig",
            "HTTPClientOptions",
            "HTTPClientOptions.AddFlags",
            "HTTPClientOptions.SetNow",
            "HTTPClientOptions.ApplyTLSClientConfig",
            "HTTPClientOptions.EncodeAndSign",
            "VerifyAndDecode",
            "TLSClientConfig",
        ],
    ),
    (
        "spiffe",
        "pkg/client/http.go",
        &[
            "CertificateSourceSecret",
            "CertificateSourceSPIFFE",
            "HTTPOptions",
            "NewHTTPOptions",
            "HTTPOptions.Host",
            "HTTPOptions.AddFlags",
            "HTTPOptions.ApplyTLSConfig",
            "HTTPClientOptions",
            "HTTPClientOptions.AddFlags",
            "HTTPClientOptions.SetNow",
            "HTTPClientOptions.ApplyTLSClientConfig",
            "HTTPClientOptions.InitSPIFFE",
            "HTTPClientOptions.EncodeAndSign",
            "NewSPIFFESources",
            "VerifyAndDecode",
            "TLSClientConfig",
        ],
    ),
    (
        "per-handshake",
        "pkg/client/http.go",
        &[
            "HTTPOptions",
            "NewHTTPOptions",
            "HTTPOptions.Host",
            "HTTPOptions.AddFlags",
            "HTTPOptions.ApplyTLSConfig",
            "HTTPClientOptions",
            "NewHTTPClientOptions",
            "HTTPClientOptions.AddFlags",
            "HTTPClientOptions.ApplyTLSClientConfig",
            "HTTPClientOptions.EncodeAndSign",
            "VerifyAndDecode",
            "TLSClientConfig",
        ],
    ),
];

/// The header of the table of Go exports in both documents.
const EXPORTS_HEADER: &str = "| Go `pkg/client` | here | differs, and why |";
/// The header of the table of names a reader may meet that no Go generation exports.
const NOT_EXPORTED_HEADER: &str = "| named, not exported by Go | here | what to use |";

/// One row of the surface file.
#[derive(Debug)]
struct Entry {
    identifier: String,
    kind: String,
    generation: String,
    path: String,
}

/// The surface file's rows, checked for shape.
fn surface(text: &str) -> Vec<Entry> {
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.starts_with('#') && !l.trim().is_empty());
    let (_, header) = lines.next().expect("a header line");
    assert_eq!(header.split('\t').collect::<Vec<_>>(), COLUMNS, "header");
    let mut seen = BTreeSet::new();
    lines
        .map(|(n, line)| {
            let line_no = n + 1;
            let fields: Vec<&str> = line.split('\t').collect();
            assert_eq!(
                fields.len(),
                COLUMNS.len(),
                "line {line_no}: {} fields, want {}: {line:?}",
                fields.len(),
                COLUMNS.len()
            );
            for (column, value) in COLUMNS.iter().zip(&fields) {
                assert!(!value.trim().is_empty(), "line {line_no}: empty {column}");
            }
            let [
                identifier,
                kind,
                generation,
                repository,
                path,
                commit,
                _signature,
            ] = fields[..]
            else {
                unreachable!("length checked above")
            };
            assert!(KINDS.contains(&kind), "line {line_no}: kind {kind:?}");
            assert!(
                GENERATIONS.contains(&generation),
                "line {line_no}: generation {generation:?}"
            );
            assert!(
                repository.split('/').count() == 2,
                "line {line_no}: repository {repository:?} is not owner/name"
            );
            assert!(
                path.starts_with("pkg/client/") || path.starts_with("pkg/errors/"),
                "line {line_no}: path {path:?}"
            );
            assert!(
                path.ends_with(".go"),
                "line {line_no}: path {path:?} is not Go source"
            );
            // A full hash, or where the code index stores a copy it names no commit for.
            let full_hash = commit.len() == 40 && commit.bytes().all(|b| b.is_ascii_hexdigit());
            let index_copy = commit
                .strip_prefix("index:")
                .is_some_and(|id| !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()));
            assert!(
                full_hash || index_copy,
                "line {line_no}: commit {commit:?} is neither a full hash nor index:<file id>"
            );
            // Exported: the name (after any `Type.` or `errors.`) starts upper case.
            let last = identifier.rsplit('.').next().unwrap_or(identifier);
            assert!(
                last.starts_with(|c: char| c.is_ascii_uppercase()),
                "line {line_no}: {identifier:?} is not an exported name"
            );
            assert_eq!(
                identifier.contains('.'),
                matches!(kind, "method" | "field") || identifier.starts_with("errors."),
                "line {line_no}: {identifier:?} (a {kind}) is not qualified as its kind is"
            );
            assert!(
                seen.insert((identifier.to_owned(), generation.to_owned())),
                "line {line_no}: {identifier} listed twice for {generation}"
            );
            Entry {
                identifier: identifier.to_owned(),
                kind: kind.to_owned(),
                generation: generation.to_owned(),
                path: path.to_owned(),
            }
        })
        .collect()
}

/// Each identifier of the surface, with the generations that have it.
fn identifiers(surface_text: &str) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for entry in surface(surface_text) {
        out.entry(entry.identifier)
            .or_default()
            .insert(entry.generation);
    }
    out
}

/// The rows of the table under `header`, with `strip` removed from each line.
fn rows(text: &str, strip: &str, header: &str) -> Vec<String> {
    let lines: Vec<String> = text
        .lines()
        .map(|l| l.strip_prefix(strip).unwrap_or(l).to_owned())
        .collect();
    let start = lines
        .iter()
        .position(|l| l.starts_with(header))
        .unwrap_or_else(|| panic!("no table headed {header}"));
    lines[start + 2..]
        .iter()
        .take_while(|l| l.starts_with('|'))
        .cloned()
        .collect()
}

/// The first cell of a row, as the Go names it lists (`A` / `B`, `A, B`, `A(args)`).
fn go_names(row: &str) -> Vec<String> {
    let cell = row.split('|').nth(1).unwrap_or_default();
    cell.split('`')
        .skip(1)
        .step_by(2)
        .map(|name| name.split('(').next().unwrap_or(name).to_owned())
        .collect()
}

/// Asserts that a row has three non-empty cells.
fn three_cells(what: &str, name: &str, row: &str) {
    let cells: Vec<&str> = row.split('|').map(str::trim).collect();
    // | go | rust | differs |
    assert_eq!(cells.len(), 5, "{what}: `{name}`: {row}");
    assert!(!cells[2].is_empty(), "{what}: `{name}` names no Rust item");
    assert!(!cells[3].is_empty(), "{what}: `{name}`: third cell empty");
}

fn check(what: &str, text: &str, strip: &str) {
    check_against(SURFACE, what, text, strip);
}

/// Checks a document's tables against a surface file's text.
fn check_against(surface_text: &str, what: &str, text: &str, strip: &str) {
    let surface = identifiers(surface_text);
    let exports = rows(text, strip, EXPORTS_HEADER);
    let mut missing = Vec::new();
    for identifier in surface.keys() {
        match exports
            .iter()
            .find(|row| go_names(row).iter().any(|n| n == identifier))
        {
            Some(row) => three_cells(what, identifier, row),
            None => missing.push(identifier.as_str()),
        }
    }
    assert!(
        missing.is_empty(),
        "{what}: no row for {missing:?} (docs/go-pkg-client-surface.tsv)"
    );
    // No row names an identifier the Go package does not export.
    for row in &exports {
        let names = go_names(row);
        assert!(
            !names.is_empty(),
            "{what}: a row names no Go identifier: {row}"
        );
        for name in names {
            assert!(
                surface.contains_key(&name),
                "{what}: `{name}` is not in docs/go-pkg-client-surface.tsv: {row}"
            );
        }
    }
    // Names a reader may meet (design notes) that no generation exports are kept
    // apart, and must stay so: if Go starts exporting one, its row moves up.
    for row in rows(text, strip, NOT_EXPORTED_HEADER) {
        for name in go_names(&row) {
            three_cells(what, &name, &row);
            assert!(
                !surface.contains_key(&name),
                "{what}: `{name}` is a Go export now: move its row to the table of exports"
            );
        }
    }
}

/// Each recorded Go file's exported names are exactly the surface file's rows for its
/// generation and path, in both directions.
fn check_recorded_files(surface_text: &str) {
    let entries = surface(surface_text);
    for (generation, path, names) in RECORDED_FILES {
        let recorded: BTreeSet<&str> = entries
            .iter()
            .filter(|e| e.generation == generation && e.path == path)
            .map(|e| e.identifier.as_str())
            .collect();
        let exported: BTreeSet<&str> = names.iter().copied().collect();
        let missing: Vec<&&str> = exported.difference(&recorded).collect();
        assert!(
            missing.is_empty(),
            "{generation} {path}: exported {missing:?} missing from the surface file"
        );
        let extra: Vec<&&str> = recorded.difference(&exported).collect();
        assert!(
            extra.is_empty(),
            "{generation} {path}: {extra:?} in the surface file, not exported by that file"
        );
    }
}

#[test]
fn the_surface_file_covers_three_generations_and_the_errors() {
    let entries = surface(SURFACE);
    let ids = identifiers(SURFACE);
    for generation in GENERATIONS {
        assert!(
            entries.iter().any(|e| e.generation == generation),
            "no {generation} entries"
        );
    }
    for kind in KINDS {
        assert!(entries.iter().any(|e| e.kind == kind), "no {kind} entries");
    }
    let only_newest: Vec<&str> = ids
        .iter()
        .filter(|(_, gens)| gens.len() == 1 && gens.contains("spiffe"))
        .map(|(id, _)| id.as_str())
        .collect();
    assert!(
        only_newest.contains(&"HTTPClientOptions.InitSPIFFE"),
        "{only_newest:?}"
    );
    assert!(ids.keys().any(|id| id.starts_with("errors.")));
    // The prefixed constructor is a Go export of the per-handshake generation only.
    assert_eq!(
        ids.get("NewHTTPClientOptions"),
        Some(&BTreeSet::from(["per-handshake".to_owned()]))
    );
}

#[test]
fn each_recorded_go_file_is_in_the_surface_file() {
    check_recorded_files(SURFACE);
}

/// `NewHTTPClientOptions` is a Go export, mapped in both documents to our prefixed
/// identity options, and no longer listed among the names Go does not export.
#[test]
fn new_http_client_options_maps_to_the_prefixed_identity() {
    for (what, text, strip) in [
        ("docs/migration.md", MIGRATION_MD, ""),
        ("src/lib.rs", CRATE_MAP, "//! "),
    ] {
        let row = rows(text, strip, EXPORTS_HEADER)
            .into_iter()
            .find(|row| go_names(row).iter().any(|n| n == "NewHTTPClientOptions"))
            .unwrap_or_else(|| panic!("{what}: no export row for NewHTTPClientOptions"));
        let rust = row.split('|').nth(2).unwrap_or_default();
        assert!(
            rust.contains("ClientIdentityOptions::new") && rust.contains("Some("),
            "{what}: NewHTTPClientOptions is not mapped to the prefixed options: {row}"
        );
        assert!(
            !rows(text, strip, NOT_EXPORTED_HEADER)
                .iter()
                .any(|row| go_names(row).iter().any(|n| n == "NewHTTPClientOptions")),
            "{what}: NewHTTPClientOptions is still listed as not exported"
        );
    }
}

#[test]
fn docs_migration_md_names_every_go_identifier() {
    check("docs/migration.md", MIGRATION_MD, "");
}

#[test]
fn the_crate_map_names_every_go_identifier() {
    check("src/lib.rs", CRATE_MAP, "//! ");
}

/// The checks can fail: a table without a row, or with a name Go does not export.
#[test]
#[should_panic(expected = "no row for")]
fn a_missing_row_fails() {
    let without: String = MIGRATION_MD
        .lines()
        .filter(|l| !l.starts_with("| `VerifyAndDecode`"))
        .map(|l| format!("{l}\n"))
        .collect();
    check("docs/migration.md without VerifyAndDecode", &without, "");
}

#[test]
#[should_panic(expected = "is not in docs/go-pkg-client-surface.tsv")]
fn a_row_for_a_name_go_does_not_export_fails() {
    let with = MIGRATION_MD.replacen(
        "| `VerifyAndDecode`",
        "| `VerifyAndDecode` / `NewContextWithProvisionerClient`",
        1,
    );
    check("docs/migration.md with an invented name", &with, "");
}

/// The surface file with `line` removed.
fn surface_without(line_start: &str) -> String {
    let mut removed = 0;
    let out: String = SURFACE
        .lines()
        .filter(|l| {
            let hit = l.starts_with(line_start);
            removed += usize::from(hit);
            !hit
        })
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(removed, 1, "the control must remove exactly one row");
    out
}

#[test]
#[should_panic(expected = "missing from the surface file")]
fn a_surface_file_without_a_per_handshake_export_fails() {
    check_recorded_files(&surface_without(
        "NewHTTPClientOptions\tfunc\tper-handshake\t",
    ));
}

#[test]
#[should_panic(expected = "not exported by that file")]
fn a_surface_row_the_recorded_file_does_not_export_fails() {
    let with = format!(
        "{SURFACE}HTTPClientOptions.SetNow\tmethod\tper-handshake\tnscaledev/uni-core\tpkg/client/http.go\tindex:71118504104\tinvented\n"
    );
    check_recorded_files(&with);
}

#[test]
#[should_panic(expected = "no row for")]
fn a_map_without_new_http_client_options_fails() {
    let without: String = CRATE_MAP
        .lines()
        .filter(|l| !l.starts_with("//! | `NewHTTPClientOptions"))
        .map(|l| format!("{l}\n"))
        .collect();
    check("src/lib.rs without NewHTTPClientOptions", &without, "//! ");
}

#[test]
#[should_panic(expected = "is not in docs/go-pkg-client-surface.tsv")]
fn a_map_row_for_a_name_dropped_from_the_surface_fails() {
    // The other direction: the surface loses the only generation that exports it.
    let surface = surface_without("NewHTTPClientOptions\tfunc\tper-handshake\t");
    check_against(&surface, "docs/migration.md", MIGRATION_MD, "");
}

#[test]
#[should_panic(expected = "is a Go export now")]
fn new_http_client_options_listed_as_not_exported_fails() {
    let row = "| `NewHTTPClientOptions(service)` | `svc_tls::options::ClientIdentityOptions::new` | ours |";
    let with = MIGRATION_MD.replacen(
        "| named, not exported by Go | here | what to use |\n|---|---|---|\n",
        &format!("| named, not exported by Go | here | what to use |\n|---|---|---|\n{row}\n"),
        1,
    );
    assert_ne!(with, MIGRATION_MD, "the control must insert the row");
    check(
        "docs/migration.md listing NewHTTPClientOptions as not exported",
        &with,
        "",
    );
}
