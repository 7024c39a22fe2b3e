//! Each published crate built as a user builds it (its own feature set, not the
//! workspace's unified one): with no optional feature, with each on its own, and with
//! all. The tests build the workspace with every feature some test turns on, so a
//! crate that compiles only with `metrics` would pass them. Clippy with `-D warnings`,
//! as for the workspace: an item used only under a feature is dead code without it.

use super::Workspace;
use crate::process::{cargo, run_checked};

pub(super) fn check(workspace: &Workspace) -> Result<(), String> {
    for name in &workspace.published {
        let krate = &workspace.crates[name];
        let target = if krate.is_library { "--lib" } else { "--bins" };
        let mut sets: Vec<Vec<String>> = vec![Vec::new()];
        sets.extend(krate.features.iter().map(|f| vec![f.clone()]));
        if krate.features.len() > 1 {
            sets.push(krate.features.clone());
        }
        for features in sets {
            let mut command = cargo();
            command.args([
                "clippy",
                "--quiet",
                "-p",
                name,
                target,
                "--no-default-features",
            ]);
            if !features.is_empty() {
                command.args(["--features", &features.join(",")]);
            }
            command.args(["--", "-D", "warnings"]);
            run_checked(&mut command).map_err(|e| {
                format!(
                    "{name} with features [{}] does not build warning-free: {e}",
                    features.join(", ")
                )
            })?;
        }
    }
    Ok(())
}
