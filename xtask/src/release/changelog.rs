//! The changelog rule: a published crate whose sources or manifest changed since the
//! baseline release has an entry under `## [Unreleased]` in its `CHANGELOG.md`.
//!
//! Changed files are a superset of a changed public API: an internal change needs a
//! line too (docs/versioning.md says so). Whether the entry describes the change is
//! for the reviewer.

use std::path::Path;
use std::process::Command;

use super::{Baseline, Workspace};
use crate::process::workspace_root;

pub(super) fn check(workspace: &Workspace, baseline: &Baseline) -> Result<(), String> {
    baseline.ensure_present()?;
    let mut missing = Vec::new();
    for name in &workspace.published {
        let dir = &workspace.crates[name].dir;
        if !changed_since(&baseline.commit, dir)? {
            continue;
        }
        let path = dir.join("CHANGELOG.md");
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("{}: {e} (every published crate has one)", path.display()))?;
        match unreleased_entries(&text) {
            Ok(0) => missing.push(format!(
                "{name}: changed since {} but {} has no entry under ## [Unreleased]",
                baseline.version,
                path.display()
            )),
            Ok(_) => {}
            Err(why) => missing.push(format!("{}: {why}", path.display())),
        }
    }
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "changelog check failed:\n  {}",
            missing.join("\n  ")
        ))
    }
}

/// Whether anything under `dir` but its CHANGELOG (committed or not) differs from
/// `commit`.
fn changed_since(commit: &str, dir: &Path) -> Result<bool, String> {
    let output = Command::new("git")
        .current_dir(workspace_root())
        .args(["diff", "--name-only", commit, "--"])
        .arg(dir)
        .output()
        .map_err(|e| format!("could not run git diff: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "git diff {commit} -- {} failed: {}",
            dir.display(),
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&output.stdout)
        .lines()
        .any(|file| !file.ends_with("CHANGELOG.md") && !file.ends_with("README.md")))
}

/// The number of entries (`- ` lines) under `## [Unreleased]`, up to the next `## `.
pub(crate) fn unreleased_entries(text: &str) -> Result<usize, String> {
    let mut lines = text.lines().skip_while(|l| l.trim() != "## [Unreleased]");
    if lines.next().is_none() {
        return Err("no \"## [Unreleased]\" heading (Keep a Changelog's shape)".to_owned());
    }
    Ok(lines
        .take_while(|l| !l.starts_with("## "))
        .filter(|l| l.trim_start().starts_with("- "))
        .count())
}

#[cfg(test)]
mod tests {
    use super::unreleased_entries;

    #[test]
    fn counts_entries_of_the_unreleased_section_only() {
        let text = "# Changelog\n\n## [Unreleased]\n\n### Removed\n- `a` (migration row \"a\")\n  more\n- `b`\n\n## [0.1.0] - 2026-12-04\n- old\n";
        assert_eq!(unreleased_entries(text), Ok(2));
        let empty = "# Changelog\n\n## [Unreleased]\n\n## [0.1.0] - 2026-12-04\n- old\n";
        assert_eq!(unreleased_entries(empty), Ok(0));
        assert!(unreleased_entries("# Changelog\n- x\n").is_err());
    }
}
