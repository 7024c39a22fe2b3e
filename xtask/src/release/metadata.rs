//! The workspace as `cargo metadata` tells it: its version, its declared minimum Rust
//! version and the crates it publishes (`publish = ["platform"]`, the internal
//! registry, and no other: docs/versioning.md).

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::Value;

use crate::process::cargo;

/// The internal registry (`.cargo/config.toml`), the only one a crate may be published to.
pub(crate) const REGISTRY: &str = "platform";

pub(crate) struct Workspace {
    /// The published crates' one version.
    pub(crate) version: String,
    pub(crate) rust_version: String,
    /// Published crates, by name, in the workspace's member order.
    pub(crate) published: Vec<String>,
    /// Each published crate's directory and optional features.
    pub(crate) crates: BTreeMap<String, Crate>,
    /// The whole `cargo metadata` (with dependencies), for the MSRV check.
    pub(crate) metadata: Value,
}

pub(crate) struct Crate {
    pub(crate) dir: PathBuf,
    pub(crate) features: Vec<String>,
    pub(crate) is_library: bool,
    pub(crate) has_binary: bool,
}

impl Workspace {
    pub(crate) fn read() -> Result<Self, String> {
        let output = cargo()
            .args(["metadata", "--format-version", "1", "--locked"])
            .output()
            .map_err(|e| format!("could not run cargo metadata: {e}"))?;
        if !output.status.success() {
            return Err(format!(
                "cargo metadata failed: {}",
                String::from_utf8_lossy(&output.stderr)
            ));
        }
        let metadata: Value = serde_json::from_slice(&output.stdout)
            .map_err(|e| format!("cargo metadata printed no JSON: {e}"))?;
        let members: Vec<&str> = metadata["workspace_members"]
            .as_array()
            .ok_or("cargo metadata: no workspace_members")?
            .iter()
            .filter_map(Value::as_str)
            .collect();
        let mut published = Vec::new();
        let mut crates = BTreeMap::new();
        let mut versions = Vec::new();
        let mut rust_version = None;
        for package in metadata["packages"]
            .as_array()
            .ok_or("cargo metadata: no packages")?
        {
            let id = package["id"].as_str().unwrap_or_default();
            if !members.contains(&id) {
                continue;
            }
            let name = str_of(package, "name")?;
            if !publishes_internally(&name, &package["publish"])? {
                continue;
            }
            versions.push((name.clone(), str_of(package, "version")?));
            rust_version = package["rust_version"]
                .as_str()
                .map(str::to_owned)
                .or(rust_version);
            let manifest = PathBuf::from(str_of(package, "manifest_path")?);
            let dir = manifest
                .parent()
                .map(PathBuf::from)
                .ok_or("a manifest with no directory")?;
            let features = package["features"]
                .as_object()
                .map(|f| f.keys().filter(|k| *k != "default").cloned().collect())
                .unwrap_or_default();
            let has_kind = |kind: &str| {
                package["targets"].as_array().is_some_and(|targets| {
                    targets.iter().any(|t| {
                        t["kind"]
                            .as_array()
                            .is_some_and(|k| k.iter().any(|k| k == kind))
                    })
                })
            };
            let (is_library, has_binary) = (has_kind("lib"), has_kind("bin"));
            published.push(name.clone());
            crates.insert(
                name,
                Crate {
                    dir,
                    features,
                    is_library,
                    has_binary,
                },
            );
        }
        let version = match versions.as_slice() {
            [] => return Err("no published crate in the workspace".to_owned()),
            [(_, first), rest @ ..] => {
                if let Some((name, other)) = rest.iter().find(|(_, v)| v != first) {
                    return Err(format!(
                        "published crates move together (docs/versioning.md): {name} is {other}, \
                         the others {first}"
                    ));
                }
                first.clone()
            }
        };
        Ok(Self {
            version,
            rust_version: rust_version.ok_or("the published crates declare no rust-version")?,
            published,
            crates,
            metadata,
        })
    }
}

/// Whether a member with this `publish` field is one of the published crates: `[]`
/// (`publish = false`) is not, `["platform"]` is, and anything else (unset, which
/// is "any registry", crates.io among them, or another registry) is refused.
fn publishes_internally(name: &str, publish: &Value) -> Result<bool, String> {
    let registries: Option<Vec<&str>> = publish
        .as_array()
        .map(|list| list.iter().filter_map(Value::as_str).collect());
    match registries.as_deref() {
        Some([]) => Ok(false),
        Some([only]) if *only == REGISTRY => Ok(true),
        _ => Err(format!(
            "{name} is publishable to {}: internal crates say `publish = [\"{REGISTRY}\"]` \
             or `publish = false` (docs/versioning.md, \"What is published\")",
            match registries {
                None => "any registry, crates.io among them".to_owned(),
                Some(list) => format!("{list:?}"),
            }
        )),
    }
}

fn str_of(value: &Value, key: &str) -> Result<String, String> {
    value[key]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| format!("cargo metadata: a package without {key}"))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::publishes_internally;

    #[test]
    fn only_the_internal_registry_or_none() {
        assert_eq!(publishes_internally("a", &json!([])), Ok(false));
        assert_eq!(publishes_internally("a", &json!(["platform"])), Ok(true));
        for publishable in [
            json!(null),
            json!(["crates-io"]),
            json!(["platform", "crates-io"]),
        ] {
            let refused = publishes_internally("a", &publishable).unwrap_err();
            assert!(refused.contains("a is publishable to"), "{refused}");
        }
    }
}
