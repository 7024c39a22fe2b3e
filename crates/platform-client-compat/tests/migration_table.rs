//! The migration table is complete: `docs/migration.md` and this crate's map name
//! every exported symbol of the Go package `pkg/client` (the generation deployed
//! now), each in a row of its own table that names a Rust item or says why not.
#![allow(clippy::unwrap_used, clippy::expect_used)]

/// Every exported symbol of `pkg/client`: `client.go`, `context.go`, `http.go`,
/// `spiffe.go`, `credential.go`. Methods as `Type.Method`, fields as `Type.Field`.
const GO_EXPORTS: &[&str] = &[
    // client.go
    "SchemeAdder",
    "NewScheme",
    "New",
    // context.go
    "ClusterContext",
    "ClusterContext.Client",
    "ClusterContext.ID",
    "ClusterContext.Host",
    "ClusterContext.Port",
    "NewContextWithProvisionerClient",
    "ProvisionerClientFromContext",
    "NewContextWithCluster",
    "ClusterFromContext",
    "NewContextWithNamespace",
    "NamespaceFromContext",
    // http.go
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
    // spiffe.go
    "Sources",
    "SPIFFECredential",
    // credential.go
    "ErrClientCredential",
];

/// The rows of the table headed `| Go `pkg/client` | here | differs, and why |`.
fn rows(text: &str, strip: &str) -> Vec<String> {
    let lines: Vec<String> = text
        .lines()
        .map(|l| l.strip_prefix(strip).unwrap_or(l).to_owned())
        .collect();
    let start = lines
        .iter()
        .position(|l| l.starts_with("| Go `pkg/client` | here | differs, and why |"))
        .expect("the table header");
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

fn check(what: &str, text: &str, strip: &str) {
    let rows = rows(text, strip);
    for symbol in GO_EXPORTS {
        let row = rows
            .iter()
            .find(|row| go_names(row).iter().any(|n| n == symbol))
            .unwrap_or_else(|| panic!("{what}: no row for `{symbol}`"));
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        // | go | rust | differs |
        assert_eq!(cells.len(), 5, "{what}: `{symbol}`: {row}");
        assert!(
            !cells[2].is_empty(),
            "{what}: `{symbol}` names no Rust item"
        );
        assert!(
            !cells[3].is_empty(),
            "{what}: `{symbol}` says nothing on differences"
        );
    }
    // No row names a symbol the package does not export.
    for row in &rows {
        for name in go_names(row) {
            assert!(
                GO_EXPORTS.contains(&name.as_str()),
                "{what}: unknown `{name}`"
            );
        }
    }
}

#[test]
fn docs_migration_md_names_every_go_symbol() {
    check(
        "docs/migration.md",
        include_str!("../../../docs/migration.md"),
        "",
    );
}

#[test]
fn the_crate_map_names_every_go_symbol() {
    check("src/lib.rs", include_str!("../src/lib.rs"), "//! ");
}
