//! The declared `rust-version`, checked without the older toolchain (only one can be
//! had on this project's machines): no dependency a user builds (normal and build
//! dependencies of the published crates, as `Cargo.lock` resolves them) declares a
//! higher one. Clippy's `incompatible_msrv` (run with `-D warnings`) covers the
//! standard library; docs/versioning.md says what neither covers.

use std::collections::{BTreeSet, HashMap, VecDeque};

use serde_json::Value;

use super::Workspace;

pub(super) fn check(workspace: &Workspace) -> Result<(), String> {
    let ours = parse(&workspace.rust_version)
        .ok_or_else(|| format!("rust-version {:?} is not a version", workspace.rust_version))?;
    let packages: HashMap<&str, &Value> = workspace.metadata["packages"]
        .as_array()
        .ok_or("cargo metadata: no packages")?
        .iter()
        .filter_map(|p| Some((p["id"].as_str()?, p)))
        .collect();
    let nodes: HashMap<&str, &Value> = workspace.metadata["resolve"]["nodes"]
        .as_array()
        .ok_or("cargo metadata: no resolve graph")?
        .iter()
        .filter_map(|n| Some((n["id"].as_str()?, n)))
        .collect();
    let mut queue: VecDeque<&str> = packages
        .iter()
        .filter(|(_, p)| {
            p["name"]
                .as_str()
                .is_some_and(|n| workspace.published.iter().any(|ours| ours == n))
                && p["source"].is_null()
        })
        .map(|(id, _)| *id)
        .collect();
    let mut seen: BTreeSet<&str> = queue.iter().copied().collect();
    let mut higher = Vec::new();
    let mut checked = 0usize;
    while let Some(id) = queue.pop_front() {
        checked += 1;
        if let Some(declared) = packages.get(id).and_then(|p| p["rust_version"].as_str())
            && parse(declared).is_some_and(|v| v > ours)
        {
            higher.push(format!("{id}: rust-version {declared}"));
        }
        let Some(node) = nodes.get(id) else { continue };
        for dep in node["deps"].as_array().into_iter().flatten() {
            let used_by_users = dep["dep_kinds"].as_array().is_some_and(|kinds| {
                kinds
                    .iter()
                    .any(|k| k["kind"].is_null() || k["kind"] == "build")
            });
            if let Some(dep_id) = dep["pkg"].as_str()
                && used_by_users
                && seen.insert(dep_id)
            {
                queue.push_back(dep_id);
            }
        }
    }
    eprintln!(
        "xtask: {checked} packages a user builds declare rust-version <= {}",
        workspace.rust_version
    );
    if higher.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "the workspace declares rust-version {} but these need more:\n  {}",
            workspace.rust_version,
            higher.join("\n  ")
        ))
    }
}

/// "1.89" or "1.89.0" as (major, minor, patch).
fn parse(version: &str) -> Option<(u64, u64, u64)> {
    let mut parts = version.split('.').map(str::parse::<u64>);
    let major = parts.next()?.ok()?;
    let minor = parts.next().unwrap_or(Ok(0)).ok()?;
    let patch = parts.next().unwrap_or(Ok(0)).ok()?;
    Some((major, minor, patch))
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn versions_compare_numerically() {
        assert!(parse("1.100").unwrap() > parse("1.89.0").unwrap());
        assert_eq!(parse("1.89"), Some((1, 89, 0)));
        assert_eq!(parse("x"), None);
    }
}
