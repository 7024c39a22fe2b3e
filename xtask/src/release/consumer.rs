//! Packages that stand alone: `cargo package` of every published crate, then a
//! consumer workspace outside this repository that depends on them by version through
//! the packed `.crate` files alone and builds every README's Rust examples (and the
//! packed `svc-tls-inspect` binary).
//!
//! The packages are made for the internal registry (`publish = ["platform"]`), with
//! the registry pointed at an empty local index under the target directory
//! ([`local_index`]): packaging needs no network, and each package names its siblings
//! as dependencies from that registry, never from crates.io. The consumer reaches the
//! packages through `[patch.platform]` entries pointing at the unpacked `.crate`
//! files, as a service reaches them through the registry. It runs outside the repository, so this
//! workspace's `.cargo/config.toml` (which picks a Kubernetes version for lone builds)
//! does not apply: the consumer picks its own, as README tells a binary to. It
//! shares this workspace's target directory and `Cargo.lock` versions, so only our
//! crates and what their features change are compiled again.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::Workspace;
use super::metadata::REGISTRY;
use crate::process::{cargo, run_checked, workspace_root};

/// The `package` step: `cargo package` of every published crate for the internal
/// registry (manifests, included files, the siblings named from the registry), a few
/// seconds; run on every change. Returns the target directory and the local index.
pub(super) fn pack(workspace: &Workspace) -> Result<(PathBuf, String), String> {
    let target = PathBuf::from(
        workspace.metadata["target_directory"]
            .as_str()
            .ok_or("cargo metadata: no target_directory")?,
    );
    let index = local_index(&target)?;
    let mut package = cargo();
    package
        .args(["package", "--no-verify", "--allow-dirty", "--config"])
        .arg(format!("registries.{REGISTRY}.index={index:?}"));
    for name in &workspace.published {
        package.args(["-p", name]);
    }
    run_checked(&mut package)?;
    Ok((target, index))
}

/// The `consumer` step: the packages again, then the consumer workspace built from
/// them alone (every README example and the packed binary); run at a release: on a
/// cold machine it compiles every dependency once more, ten minutes.
pub(super) fn check(workspace: &Workspace) -> Result<(), String> {
    let (target, index) = pack(workspace)?;
    let dir = std::env::temp_dir().join(format!("platform-client-consumer-{}", std::process::id()));
    let result = build_consumer(workspace, &target, &dir, &index);
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// An empty git index of the internal registry under the target directory, made once
/// (its `file://` URL): `cargo package` resolves the packages' dependencies on each
/// other there (finding them in the packages it is making) instead of the
/// placeholder URL of `.cargo/config.toml`, which no machine here reaches.
fn local_index(target: &Path) -> Result<String, String> {
    let dir = target.join(format!("{REGISTRY}-index"));
    let url = format!("file://{}", dir.display());
    if dir.join(".git").is_dir() && dir.join("config.json").is_file() {
        return Ok(url);
    }
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    std::fs::write(
        dir.join("config.json"),
        format!("{{\"dl\": \"{url}/dl\", \"api\": null}}\n"),
    )
    .map_err(|e| format!("{}: {e}", dir.display()))?;
    let git = || {
        let mut command = Command::new("git");
        command.current_dir(&dir).args([
            "-c",
            "user.name=xtask",
            "-c",
            "user.email=xtask@localhost",
        ]);
        command
    };
    run_checked(git().args(["init", "--quiet"]))?;
    run_checked(git().args(["add", "config.json"]))?;
    run_checked(git().args(["commit", "--quiet", "-m", "an empty index"]))?;
    Ok(url)
}

fn build_consumer(
    workspace: &Workspace,
    target: &Path,
    dir: &Path,
    index: &str,
) -> Result<(), String> {
    let packages = dir.join("packages");
    std::fs::create_dir_all(&packages).map_err(|e| format!("{}: {e}", packages.display()))?;
    for name in &workspace.published {
        let file = target
            .join("package")
            .join(format!("{name}-{}.crate", workspace.version));
        run_checked(
            Command::new("tar")
                .arg("-xzf")
                .arg(&file)
                .arg("-C")
                .arg(&packages),
        )?;
    }
    let examples = write_examples(workspace, dir)?;
    std::fs::write(dir.join("Cargo.toml"), manifest(workspace))
        .map_err(|e| format!("consumer Cargo.toml: {e}"))?;
    // The registry as a service configures it, pointed at the same local index.
    std::fs::create_dir_all(dir.join(".cargo")).map_err(|e| format!("consumer .cargo: {e}"))?;
    std::fs::write(
        dir.join(".cargo/config.toml"),
        format!("[registries.{REGISTRY}]\nindex = {index:?}\n"),
    )
    .map_err(|e| format!("consumer .cargo/config.toml: {e}"))?;
    std::fs::create_dir_all(dir.join("src")).map_err(|e| format!("consumer src: {e}"))?;
    std::fs::write(
        dir.join("src/lib.rs"),
        "//! Builds the packed crates' README examples.\n",
    )
    .map_err(|e| format!("consumer lib.rs: {e}"))?;
    std::fs::copy(workspace_root().join("Cargo.lock"), dir.join("Cargo.lock"))
        .map_err(|e| format!("consumer Cargo.lock: {e}"))?;

    let consumer_cargo = || {
        let mut command = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
        command
            .current_dir(dir)
            .env("CARGO_TARGET_DIR", target)
            .env_remove("K8S_OPENAPI_ENABLED_VERSION");
        command
    };
    run_checked(consumer_cargo().args(["build", "--workspace", "--examples", "--bins"]))?;
    eprintln!(
        "xtask: the consumer built {examples} README examples and svc-tls-inspect from the packed crates"
    );
    no_path_into_repository(&mut consumer_cargo())
}

/// The consumer's manifest: our crates by exact version from the internal registry, patched to the unpacked
/// packages; the Kubernetes version picked as README says; our build profile, so the
/// shared target directory's dependencies are reused.
fn manifest(workspace: &Workspace) -> String {
    let version = &workspace.version;
    let mut text = String::from(
        "[package]\nname = \"platform-client-consumer\"\nversion = \"0.0.0\"\nedition = \"2024\"\npublish = false\n\n[dependencies]\n",
    );
    for name in workspace
        .published
        .iter()
        .filter(|n| workspace.crates[*n].is_library)
    {
        let _ = writeln!(
            text,
            "{name} = {{ version = \"={version}\", registry = \"{REGISTRY}\" }}"
        );
    }
    text.push_str(concat!(
        "k8s-openapi = { version = \"0.29\", features = [\"v1_37\"] }\n",
        "kube = { version = \"5\", default-features = false, features = [\"client\", \"rustls-tls\", \"aws-lc-rs\"] }\n",
        "tokio = { version = \"1\", features = [\"macros\", \"rt-multi-thread\"] }\n",
        "clap = { version = \"4\", features = [\"derive\", \"env\"] }\n\n",
        "[workspace]\nmembers = [\".\"",
    ));
    for name in workspace
        .published
        .iter()
        .filter(|n| workspace.crates[*n].has_binary)
    {
        let _ = write!(text, ", \"packages/{name}-{version}\"");
    }
    let _ = write!(text, "]\n\n[patch.{REGISTRY}]\n");
    for name in &workspace.published {
        let _ = writeln!(text, "{name} = {{ path = \"packages/{name}-{version}\" }}");
    }
    text.push_str(concat!(
        "\n[profile.dev]\ndebug = \"line-tables-only\"\n\n",
        "[profile.dev.package.\"*\"]\nopt-level = 1\ndebug = false\n",
    ));
    text
}

/// Every ```rust block of the published crates' READMEs and the workspace's README
/// as `examples/<crate>_<n>.rs`: each is a whole program.
fn write_examples(workspace: &Workspace, dir: &Path) -> Result<usize, String> {
    let out = dir.join("examples");
    std::fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    let mut readmes: Vec<(String, PathBuf)> = workspace
        .published
        .iter()
        .map(|n| {
            (
                n.replace('-', "_"),
                workspace.crates[n].dir.join("README.md"),
            )
        })
        .collect();
    readmes.push(("workspace".to_owned(), workspace_root().join("README.md")));
    let mut count = 0;
    for (stem, path) in readmes {
        let text =
            std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        for (n, block) in rust_blocks(&text).into_iter().enumerate() {
            let file = out.join(format!("{stem}_{n}.rs"));
            std::fs::write(&file, block).map_err(|e| format!("{}: {e}", file.display()))?;
            count += 1;
        }
    }
    Ok(count)
}

/// The bodies of the fenced blocks whose info string starts with `rust`, but for
/// `ignore` ones.
fn rust_blocks(markdown: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in markdown.lines() {
        let fence = line.trim_start().starts_with("```");
        match current.as_mut() {
            None if fence => {
                let info = line.trim_start().trim_start_matches('`');
                if info.starts_with("rust") && !info.contains("ignore") {
                    current = Some(String::new());
                }
            }
            Some(_) if fence => blocks.extend(current.take()),
            Some(body) => {
                body.push_str(line);
                body.push('\n');
            }
            None => {}
        }
    }
    blocks
}

/// Every package of the consumer's build comes from a registry or the unpacked
/// packages: none from this repository.
fn no_path_into_repository(command: &mut Command) -> Result<(), String> {
    let output = command
        .args(["metadata", "--format-version", "1"])
        .output()
        .map_err(|e| format!("cargo metadata in the consumer: {e}"))?;
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout)
        .map_err(|e| format!("cargo metadata in the consumer printed no JSON: {e}"))?;
    let root = workspace_root();
    let inside: Vec<String> = metadata["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["manifest_path"].as_str())
        .filter(|path| Path::new(path).starts_with(&root))
        .map(str::to_owned)
        .collect();
    if inside.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "the consumer reached into this repository: {}",
            inside.join(", ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::rust_blocks;

    #[test]
    fn takes_rust_blocks_but_ignored_ones() {
        let text =
            "x\n```toml\na = 1\n```\n```rust,no_run\nfn main() {}\n```\n```rust,ignore\nno\n```\n";
        assert_eq!(rust_blocks(text), vec!["fn main() {}\n".to_owned()]);
    }
}
