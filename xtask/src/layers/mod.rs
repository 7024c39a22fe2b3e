//! `cargo xtask layers`: checks the intended layering of crates' modules against the
//! rules in `layers.toml` at the workspace root, so that the shape cannot drift
//! silently (`cargo xtask ci` runs it). In every crate the rules file lists, it also
//! checks where a type's methods live: no inherent impl of a struct, enum or union
//! defined in another top-level module (see `check.rs`).
//!
//! A rule names a module `from` (that module's file or folder and everything under
//! it, inline `mod x { … }` blocks included) and the modules it must not name. A file
//! names a module through a path in code:
//!
//! - `use` declarations, `pub use` and `pub(…) use` included, with grouped and nested
//!   trees (`use crate::{a::x, b::{self, y as z}}`);
//! - inline paths such as `crate::a::B::new()`;
//! - `self::` and `super::` paths (in `use` or inline), resolved against the module
//!   they are written in: `super::x` in `identity::resolver` is `identity::x`, and in
//!   that file's `mod tests { … }` it is `identity::resolver::x`;
//! - a path whose first segment is a child module of the module it is written in
//!   (`use material::Pem;` in `lib.rs`).
//!
//! Comments (doc comments and intra-doc links too), string literals (raw and byte
//! strings too) and character literals are blanked before scanning. Not modelled:
//! `#[path]` attributes, what a glob import or a re-export brings in (only the path
//! written is checked), and paths assembled by macros from fragments.
//!
//! The rules file:
//!
//! ```toml
//! [[crate]]
//! src = "crates/svc-tls/src"    # a crate's source folder, from the workspace root
//! [[crate.rule]]
//! from = "material"             # a module path: `material`, `identity::resolver`
//! forbid = ["identity", "spiffe"]
//! why = "material knows no source"   # optional; printed with a violation
//! ```
//!
//! The files: `rules.rs` reads `layers.toml`; `strip.rs` blanks comments and
//! literals; `scan.rs` tokenizes what is left and finds the paths written, the
//! inline modules, the types defined and the inherent impls; `check.rs` resolves
//! those paths per crate and holds them against the rules, and each inherent impl
//! against where its type is defined; `report.rs` is what a run found.

mod check;
mod report;
mod rules;
mod scan;
mod strip;

#[cfg(test)]
mod fixtures;

use crate::process::workspace_root;

use check::check;
use rules::load;

/// The rules file, relative to the workspace root.
const RULES: &str = "layers.toml";

/// Entry point of the `layers` task.
pub(crate) fn run(args: &[String]) -> Result<(), String> {
    if !args.is_empty() {
        return Err("usage: cargo xtask layers".into());
    }
    let root = workspace_root();
    let rules = load(&root.join(RULES))?;
    let report = check(&root, &rules)?;
    for note in &report.notes {
        eprintln!("xtask: layers: note: {note}");
    }
    for violation in &report.violations {
        println!("{violation}");
    }
    let count = report.violations.len();
    let impls = report
        .violations
        .iter()
        .filter(|violation| matches!(violation.what, report::What::InherentImpl { .. }))
        .count();
    let breakdown = if count == 0 {
        String::new()
    } else {
        format!(
            " ({} import{}, {impls} inherent impl{})",
            count - impls,
            plural(count - impls),
            plural(impls)
        )
    };
    let summary = format!(
        "layers: {} files scanned, {} rules, {} inherent impls checked, {count} violation{}{breakdown}",
        report.files,
        report.rules,
        report.inherent_impls,
        plural(count),
    );
    if report.violations.is_empty() {
        eprintln!("xtask: {summary}");
        Ok(())
    } else {
        Err(format!("{summary} (rules in {RULES})"))
    }
}

fn plural(count: usize) -> &'static str {
    if count == 1 { "" } else { "s" }
}

/// A module path inside a crate, without `crate::`; empty for the crate root.
type ModulePath = Vec<String>;
