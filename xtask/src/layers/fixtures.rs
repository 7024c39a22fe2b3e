//! A made-up crate and its rules, shared by the lint's tests.

use super::report::{Report, What};

pub(super) const FIXTURE_RULES: &str = r#"
[[crate]]
src = "fixture/src"

[[crate.rule]]
from = "material"
forbid = ["identity", "spiffe"]
why = "material knows no source"

[[crate.rule]]
from = "identity::resolver"
forbid = ["identity::from_secret", "spiffe"]
why = "the resolver does not know its implementations"

[[crate.rule]]
from = "identity"
forbid = ["spiffe"]
"#;

/// Writes `files` (path under `fixture/src`, contents) into a fresh directory.
pub(super) fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (path, text) in files {
        let path = dir.path().join("fixture/src").join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    dir
}

/// (file, line, what) of each violation: the `crate::` path an import names, or
/// `impl Name` for an inherent impl of a type defined in another top-level module.
pub(super) fn found(report: &Report) -> Vec<(String, usize, String)> {
    report
        .violations
        .iter()
        .map(|v| {
            let what = match &v.what {
                What::Import { path, .. } => format!("crate::{}", path.join("::")),
                What::InherentImpl { name, .. } => format!("impl {name}"),
            };
            (v.file.display().to_string(), v.line, what)
        })
        .collect()
}

pub(super) const LIB: &str = "pub mod material;\npub mod identity;\npub mod spiffe;\n\
                   use spiffe::Root;\nuse material::Pem;\n";
