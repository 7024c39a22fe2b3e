//! `cargo xtask codegen [--check]`: regenerates the generated sources from their inputs.
//!
//! - `crates/kube-construct/src/registry/builtins.rs`, the table of Kubernetes
//!   built-in kinds, read from the sources of the k8s-openapi version in `Cargo.lock`.
//!   Every type under `api/`, `apiextensions_apiserver/` and `kube_aggregator/` with an
//!   `impl crate::Resource` and `ObjectMeta` metadata is listed; a type that exists
//!   only in some of the Kubernetes versions k8s-openapi supports is wrapped in
//!   k8s-openapi's `k8s_if_ge_1_N!` / `k8s_if_le_1_N!` / `k8s_if_1_N!` macros, so the
//!   crate builds whatever version the final binary selects.
//! - `crates/region-api/src/generated.rs`, progenitor's client of
//!   `crates/region-api/openapi/region.yaml`, written by region-api's generator
//!   (`crates/region-api/generator`, a workspace of its own with its own lock file),
//!   built here in the dev profile without debug info under
//!   `target/region-api-generator` (about a minute of CPU cold, nothing after).
//!
//! `--check` writes nothing and fails when a committed file differs from what would
//! be generated (`cargo xtask ci` runs it): a hand edit of a generated file, or an
//! input changed without regenerating, fails CI.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
};

use crate::process::{cargo, run_checked, workspace_root};

/// The generated file, relative to the workspace root.
const BUILTINS: &str = "crates/kube-construct/src/registry/builtins.rs";

/// region-api's generated client, its document and its generator's manifest, relative
/// to the workspace root (the document's path is written into the file's header).
const REGION_API: &str = "crates/region-api/src/generated.rs";
const REGION_API_DOCUMENT: &str = "crates/region-api/openapi/region.yaml";
const REGION_API_GENERATOR: &str = "crates/region-api/generator/Cargo.toml";

/// Entry point of the `codegen` task.
pub(crate) fn run(args: &[String]) -> Result<(), String> {
    let check = match args {
        [] => false,
        [flag] if flag == "--check" => true,
        _ => return Err("usage: cargo xtask codegen [--check]".into()),
    };
    let outputs = [
        (BUILTINS, rustfmt(&builtins(&k8s_openapi_src()?)?)?),
        (REGION_API, region_api()?),
    ];
    let mut stale = Vec::new();
    for (file, generated) in outputs {
        let path = workspace_root().join(file);
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        match settle(file, &committed, &generated, check) {
            Settled::UpToDate => eprintln!("xtask: {file} is up to date"),
            Settled::Stale(why) => stale.push(why),
            Settled::Write => {
                std::fs::write(&path, generated)
                    .map_err(|error| format!("cannot write {}: {error}", path.display()))?;
                eprintln!("xtask: regenerated {file}");
            }
        }
    }
    if stale.is_empty() {
        Ok(())
    } else {
        Err(stale.join("\n"))
    }
}

/// What to do with one generated file.
#[derive(Debug, PartialEq)]
enum Settled {
    UpToDate,
    /// `--check`, and the committed file differs: why, with the first line that does.
    Stale(String),
    /// Not `--check`, and the committed file differs: write the generated one.
    Write,
}

fn settle(file: &str, committed: &str, generated: &str, check: bool) -> Settled {
    if committed == generated {
        return Settled::UpToDate;
    }
    if !check {
        return Settled::Write;
    }
    let first = committed
        .lines()
        .zip(generated.lines())
        .position(|(a, b)| a != b)
        .unwrap_or_else(|| committed.lines().count().min(generated.lines().count()));
    Settled::Stale(format!(
        "{file} is stale (differs from what its generator writes from line {}): run \
         `cargo xtask codegen` and commit the result; generated files are not edited by hand",
        first + 1
    ))
}

/// region-api's client as its generator writes it from the committed document.
fn region_api() -> Result<String, String> {
    let root = workspace_root();
    let target = root.join("target/region-api-generator");
    run_checked(
        cargo()
            .args([
                "build",
                "--quiet",
                "--locked",
                "--manifest-path",
                REGION_API_GENERATOR,
            ])
            .env("CARGO_TARGET_DIR", &target)
            .env("CARGO_PROFILE_DEV_DEBUG", "0"),
    )?;
    let output = std::env::temp_dir().join(format!(
        "platform-client-region-api-{}.rs",
        std::process::id()
    ));
    let result = run_checked(
        std::process::Command::new(target.join("debug/region-api-generator"))
            .current_dir(&root)
            .arg(REGION_API_DOCUMENT)
            .arg(&output),
    )
    .and_then(|()| {
        std::fs::read_to_string(&output)
            .map_err(|error| format!("the generator's output {}: {error}", output.display()))
    });
    let _ = std::fs::remove_file(&output);
    result
}

/// The `src` directory of the k8s-openapi package the workspace resolves.
fn k8s_openapi_src() -> Result<PathBuf, String> {
    let output = cargo()
        .args(["metadata", "--format-version", "1", "--locked"])
        .output()
        .map_err(|error| format!("cannot run cargo metadata: {error}"))?;
    if !output.status.success() {
        return Err(format!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout)
        .map_err(|error| format!("cargo metadata printed invalid JSON: {error}"))?;
    metadata["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|package| package["name"] == "k8s-openapi")
        .and_then(|package| package["manifest_path"].as_str())
        .and_then(|manifest| Path::new(manifest).parent())
        .map(|dir| dir.join("src"))
        .ok_or_else(|| "k8s-openapi is not in the workspace's dependencies".into())
}

/// `source` as `cargo fmt` would leave it, so that the committed file is both the
/// generator's output and formatted.
fn rustfmt(source: &str) -> Result<String, String> {
    use std::io::Write;
    use std::process::{Command, Stdio};

    let mut child = Command::new("rustfmt")
        .args(["--edition", "2024", "--emit", "stdout"])
        .current_dir(workspace_root())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|error| format!("cannot run rustfmt: {error}"))?;
    child
        .stdin
        .take()
        .ok_or("rustfmt has no stdin")?
        .write_all(source.as_bytes())
        .map_err(|error| format!("cannot write to rustfmt: {error}"))?;
    let output = child
        .wait_with_output()
        .map_err(|error| format!("rustfmt failed: {error}"))?;
    if !output.status.success() {
        return Err(format!(
            "rustfmt failed: {}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    String::from_utf8(output.stdout).map_err(|error| format!("rustfmt printed non-UTF-8: {error}"))
}

/// What the table needs to know about one resource type.
struct Kind {
    api_version: String,
    scope: String,
    listable: bool,
    minors: BTreeSet<u32>,
}

/// The generated `builtins.rs`, from the k8s-openapi sources in `src`.
fn builtins(src: &Path) -> Result<String, String> {
    let mut versions: Vec<(u32, PathBuf)> = read_dir(src)?
        .into_iter()
        .filter_map(|path| {
            let name = path.file_name()?.to_str()?;
            let minor = name.strip_prefix("v1_")?.parse().ok()?;
            Some((minor, path))
        })
        .collect();
    versions.sort();
    let (Some(&(oldest, _)), Some(&(newest, _))) = (versions.first(), versions.last()) else {
        return Err(format!("no v1_N directories in {}", src.display()));
    };

    // (module path, type name) -> kind; the lowest version seen describes it.
    let mut kinds: BTreeMap<(String, String), Kind> = BTreeMap::new();
    for (minor, base) in &versions {
        for file in rust_files(base)? {
            let Ok(relative) = file.parent().unwrap_or(base).strip_prefix(base) else {
                continue;
            };
            let relative = relative.to_string_lossy().replace('\\', "/");
            // As the generator always has: every directory whose path starts with "api"
            // (api/, apiextensions_apiserver/, apimachinery/), and kube_aggregator/.
            if !(relative.starts_with("api") || relative.starts_with("kube_aggregator")) {
                continue;
            }
            let text = std::fs::read_to_string(&file)
                .map_err(|error| format!("cannot read {}: {error}", file.display()))?;
            let Some(name) = resource_impl(&text) else {
                continue;
            };
            if !text.contains("type Ty = crate::apimachinery::pkg::apis::meta::v1::ObjectMeta;") {
                continue;
            }
            let api_version = between(&text, "const API_VERSION: &'static str = \"", "\"")
                .ok_or_else(|| format!("{}: no API_VERSION", file.display()))?;
            let scope = between(&text, "type Scope = crate::", ";")
                .ok_or_else(|| format!("{}: no Scope", file.display()))?;
            let module = format!("k8s_openapi::{}", relative.replace('/', "::"));
            let listable = text.contains(&format!("impl crate::ListableResource for {name}"));
            kinds
                .entry((module, name.to_owned()))
                .or_insert_with(|| Kind {
                    api_version: api_version.to_owned(),
                    scope: scope.to_owned(),
                    listable,
                    minors: BTreeSet::new(),
                })
                .minors
                .insert(*minor);
        }
    }

    let mut ordered: Vec<_> = kinds.iter().collect();
    ordered.sort_by_key(|((module, name), kind)| {
        let group = kind
            .api_version
            .split_once('/')
            .map_or("", |(group, _)| group);
        (
            !group.is_empty(),
            group,
            kind.api_version.as_str(),
            name,
            module,
        )
    });

    let mut out = String::from(
        "// @generated by `cargo xtask codegen` from the k8s-openapi sources; do not edit by hand.
//! The Kubernetes built-in kinds, in registration order: core `v1` first, then the
//! groups alphabetically. Kinds that exist only in some Kubernetes versions are gated
//! with k8s-openapi's version macros.

use super::{Registry, RegistryError};

/// Registers every built-in kind (and its list, where the kind is listable).
pub(super) fn add(r: &mut Registry) -> Result<(), RegistryError> {
",
    );
    for ((module, name), kind) in ordered {
        let method = if kind.listable {
            "register_with_list"
        } else {
            "register"
        };
        let mut statement = format!("r.{method}::<{module}::{name}>()?;");
        let (Some(&low), Some(&high)) = (kind.minors.first(), kind.minors.last()) else {
            continue;
        };
        if kind.minors.len() != (high - low + 1) as usize {
            return Err(format!(
                "{module}::{name} exists in non-contiguous versions {:?}",
                kind.minors
            ));
        }
        if low == high && low > oldest && high < newest {
            statement = format!("k8s_openapi::k8s_if_1_{low}! {{ {statement} }}");
        } else {
            if low > oldest {
                statement = format!("k8s_openapi::k8s_if_ge_1_{low}! {{ {statement} }}");
            }
            if high < newest {
                statement = format!("k8s_openapi::k8s_if_le_1_{high}! {{ {statement} }}");
            }
        }
        out.push_str(&format!(
            "    // {} {name} ({})\n    {statement}\n",
            kind.api_version, kind.scope
        ));
    }
    out.push_str("    Ok(())\n}\n");
    Ok(out)
}

/// The type named by the first `impl crate::Resource for <Type> {` in `text`.
fn resource_impl(text: &str) -> Option<&str> {
    const PREFIX: &str = "impl crate::Resource for ";
    text.match_indices(PREFIX).find_map(|(at, _)| {
        let rest = &text[at + PREFIX.len()..];
        let end = rest
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        (end > 0 && rest[end..].starts_with(" {")).then(|| &rest[..end])
    })
}

/// The text between the first `start` and the next `end` after it.
fn between<'a>(text: &'a str, start: &str, end: &str) -> Option<&'a str> {
    let from = text.find(start)? + start.len();
    let to = text[from..].find(end)?;
    Some(&text[from..from + to])
}

fn read_dir(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let entries = std::fs::read_dir(dir)
        .map_err(|error| format!("cannot read {}: {error}", dir.display()))?;
    entries
        .map(|entry| {
            entry
                .map(|entry| entry.path())
                .map_err(|error| format!("cannot read {}: {error}", dir.display()))
        })
        .collect()
}

/// Every `.rs` file under `dir` except `mod.rs`.
fn rust_files(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for path in read_dir(&dir)? {
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|ext| ext == "rs")
                && path.file_name().is_some_and(|name| name != "mod.rs")
            {
                files.push(path);
            }
        }
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::{Settled, settle};

    const GENERATED: &str =
        "// Generated: do not edit\npub struct Region {\n    pub name: String,\n}\n";

    #[test]
    fn a_hand_edit_fails_the_check() {
        let edited = GENERATED.replace("pub name: String", "pub name: String, // mine");
        let Settled::Stale(why) = settle("generated.rs", &edited, GENERATED, true) else {
            panic!("a hand edit passed the check");
        };
        assert!(why.contains("generated.rs is stale"), "{why}");
        assert!(why.contains("from line 3"), "{why}");
        // A line added at the end is a difference too.
        let longer = format!("{GENERATED}// more\n");
        assert!(matches!(
            settle("g.rs", &longer, GENERATED, true),
            Settled::Stale(_)
        ));
    }

    #[test]
    fn the_generated_output_passes_and_is_written_without_check() {
        assert_eq!(
            settle("g.rs", GENERATED, GENERATED, true),
            Settled::UpToDate
        );
        assert_eq!(settle("g.rs", "old", GENERATED, false), Settled::Write);
    }
}
