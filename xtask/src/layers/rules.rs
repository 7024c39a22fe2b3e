//! `layers.toml`: read, and each module path checked.

use std::path::Path;

use serde::Deserialize;

use super::ModulePath;

/// `layers.toml` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RulesFile {
    #[serde(rename = "crate", default)]
    crates: Vec<CrateEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CrateEntry {
    src: String,
    #[serde(rename = "rule", default)]
    rules: Vec<RuleEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleEntry {
    from: String,
    forbid: Vec<String>,
    why: Option<String>,
}

/// The checked rules of one crate.
#[derive(Debug)]
pub(crate) struct CrateRules {
    /// The source folder, relative to the workspace root.
    pub(super) src: String,
    pub(super) rules: Vec<Rule>,
}

#[derive(Debug)]
pub(super) struct Rule {
    pub(super) from: ModulePath,
    pub(super) forbid: Vec<ModulePath>,
    pub(super) why: Option<String>,
}

/// Reads and checks the rules file.
pub(crate) fn load(path: &Path) -> Result<Vec<CrateRules>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|error| format!("cannot read {}: {error}", path.display()))?;
    parse(&text).map_err(|error| format!("{}: {error}", path.display()))
}

/// The rules in `text`, each module path checked.
pub(super) fn parse(text: &str) -> Result<Vec<CrateRules>, String> {
    let file: RulesFile = toml::from_str(text).map_err(|error| error.to_string())?;
    file.crates
        .into_iter()
        .map(|entry| {
            if entry.src.trim().is_empty() {
                return Err("a [[crate]] has an empty `src`".to_owned());
            }
            let rules = entry
                .rules
                .into_iter()
                .map(|rule| {
                    let context = || format!("{}: rule from `{}`", entry.src, rule.from);
                    let from = module_path(&rule.from)
                        .map_err(|error| format!("{}: `from`: {error}", context()))?;
                    if rule.forbid.is_empty() {
                        return Err(format!("{}: `forbid` is empty", context()));
                    }
                    let forbid = rule
                        .forbid
                        .iter()
                        .map(|text| {
                            let forbidden = module_path(text)
                                .map_err(|error| format!("{}: `forbid`: {error}", context()))?;
                            if from.starts_with(&forbidden) {
                                return Err(format!(
                                    "{}: forbids `{text}`, which contains `{}` itself",
                                    context(),
                                    rule.from
                                ));
                            }
                            Ok(forbidden)
                        })
                        .collect::<Result<_, String>>()?;
                    Ok(Rule {
                        from,
                        forbid,
                        why: rule.why,
                    })
                })
                .collect::<Result<_, String>>()?;
            Ok(CrateRules {
                src: entry.src,
                rules,
            })
        })
        .collect()
}

/// `identity::resolver` as its segments; a module path, not a `crate::` path.
fn module_path(text: &str) -> Result<ModulePath, String> {
    let segments: ModulePath = text.split("::").map(str::to_owned).collect();
    for segment in &segments {
        let mut chars = segment.chars();
        let identifier = chars.next().is_some_and(|c| c == '_' || c.is_alphabetic())
            && chars.all(|c| c == '_' || c.is_alphanumeric());
        if !identifier || matches!(segment.as_str(), "crate" | "self" | "super" | "_") {
            return Err(format!(
                "`{text}` is not a module path (write `a::b`, without `crate::`)"
            ));
        }
    }
    Ok(segments)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layers::RULES;
    use crate::layers::check::check;
    use crate::process::workspace_root;

    #[test]
    fn bad_rules_are_refused_with_the_reason() {
        let refuse = |text: &str| parse(text).unwrap_err();
        assert!(
            refuse("[[crate]]\nsrc = \"s\"\n[[crate.rule]]\nfrom = \"a\"\nforbids = [\"b\"]\n")
                .contains("forbids")
        );
        assert!(
            refuse(
                "[[crate]]\nsrc = \"s\"\n[[crate.rule]]\nfrom = \"crate::a\"\nforbid = [\"b\"]\n"
            )
            .contains("`crate::a` is not a module path")
        );
        assert!(
            refuse("[[crate]]\nsrc = \"s\"\n[[crate.rule]]\nfrom = \"a::b\"\nforbid = [\"a\"]\n")
                .contains("contains `a::b` itself")
        );
        assert!(
            refuse("[[crate]]\nsrc = \"s\"\n[[crate.rule]]\nfrom = \"a\"\nforbid = []\n")
                .contains("`forbid` is empty")
        );
        let dir = tempfile::tempdir().unwrap();
        let error = check(
            dir.path(),
            &parse("[[crate]]\nsrc = \"nowhere\"\n").unwrap(),
        )
        .unwrap_err();
        assert!(
            error.contains("`src = \"nowhere\"` is not a directory"),
            "{error}"
        );
    }

    #[test]
    fn the_workspace_rules_parse_and_name_existing_folders() {
        let root = workspace_root();
        let rules = load(&root.join(RULES)).unwrap();
        assert!(!rules.is_empty());
        for krate in &rules {
            assert!(
                root.join(&krate.src).is_dir(),
                "{} is not a folder",
                krate.src
            );
            assert!(!krate.rules.is_empty(), "{} has no rules", krate.src);
        }
        // And the whole workspace can be scanned (today's violations are not asserted).
        let report = check(&root, &rules).unwrap();
        assert!(report.files > 0);
    }
}
