//! What a run found: counts, notes and violations, each violation printed with its
//! file, line and the rule's `why`.

use std::fmt;
use std::path::PathBuf;

use super::ModulePath;

/// What one run found.
#[derive(Debug)]
pub(crate) struct Report {
    pub(crate) files: usize,
    pub(crate) rules: usize,
    pub(crate) violations: Vec<Violation>,
    /// Modules the rules name that no file defines (yet): their rules check nothing.
    pub(crate) notes: Vec<String>,
}

/// A file under a rule's `from` naming a path under one of its `forbid` modules.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Violation {
    /// The file, relative to the root the check ran from.
    pub(crate) file: PathBuf,
    pub(crate) line: usize,
    /// The module the path is written in.
    pub(crate) module: ModulePath,
    /// The path named, resolved to a `crate::` path.
    pub(crate) path: ModulePath,
    /// The rule's `why`, or which rule it is.
    pub(crate) why: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let module = if self.module.is_empty() {
            "crate".to_owned()
        } else {
            self.module.join("::")
        };
        write!(
            f,
            "{}:{}: module `{module}` imports `crate::{}` (forbidden: {})",
            self.file.display(),
            self.line,
            self.path.join("::"),
            self.why
        )
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
