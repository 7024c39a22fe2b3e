//! What a run found: counts, notes and violations, each violation printed with its
//! file, line, what it is and why it is one.

use std::fmt;
use std::path::PathBuf;

use super::ModulePath;

/// What one run found.
#[derive(Debug)]
pub(crate) struct Report {
    pub(crate) files: usize,
    pub(crate) rules: usize,
    /// Inherent impls whose type the crate defines in one top-level module only:
    /// those the impl check held against where the type is defined.
    pub(crate) inherent_impls: usize,
    pub(crate) violations: Vec<Violation>,
    /// Modules the rules name that no file defines (yet): their rules check nothing.
    pub(crate) notes: Vec<String>,
}

/// A violation at a line of a file.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Violation {
    /// The file, relative to the root the check ran from.
    pub(crate) file: PathBuf,
    pub(crate) line: usize,
    pub(crate) what: What,
}

/// What a violation is.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum What {
    /// A file under a rule's `from` naming a path under one of its `forbid` modules.
    Import {
        /// The module the path is written in.
        module: ModulePath,
        /// The path named, resolved to a `crate::` path.
        path: ModulePath,
        /// The rule's `why`, or which rule it is.
        why: String,
    },
    /// An inherent impl of a type defined in another top-level module.
    InherentImpl {
        /// The top-level module the impl is written in (empty: the crate root).
        module: String,
        /// The type's name.
        name: String,
        /// The top-level module the type is defined in (empty: the crate root).
        defined_in: String,
    },
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shown = |module: &str| {
            if module.is_empty() {
                "crate".to_owned()
            } else {
                module.to_owned()
            }
        };
        write!(f, "{}:{}: ", self.file.display(), self.line)?;
        match &self.what {
            What::Import { module, path, why } => write!(
                f,
                "module `{}` imports `crate::{}` (forbidden: {why})",
                shown(&module.join("::")),
                path.join("::"),
            ),
            What::InherentImpl {
                module,
                name,
                defined_in,
            } => write!(
                f,
                "`{}` writes an inherent impl of `{name}`, defined in `{}` (an impl belongs \
                 to the type's own module: give the methods to a free function or a seam)",
                shown(module),
                shown(defined_in),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::layers::check::check;
    use crate::layers::fixtures::{FIXTURE_RULES, LIB, tree};
    use crate::layers::rules::parse;

    #[test]
    fn a_rule_without_why_names_itself() {
        let dir = tree(&[
            ("lib.rs", LIB),
            ("identity/mod.rs", "use crate::spiffe::X;\n"),
        ]);
        let report = check(dir.path(), &parse(FIXTURE_RULES).unwrap()).unwrap();
        assert_eq!(
            report.violations[0].to_string(),
            "fixture/src/identity/mod.rs:1: module `identity` imports `crate::spiffe::X` \
             (forbidden: `identity` may not name `spiffe`)"
        );
    }
}
