//! cargo-semver-checks of every published library against the baseline release: a
//! breaking change without the version bump it needs fails. Before trusting it, the
//! step checks itself on a fixture: a deliberate breaking change (a new parameter)
//! must fail at a patch bump and pass at a minor bump with its changelog entry.
//!
//! cargo-semver-checks builds each crate in a workspace of its own when asked to
//! (every dependency compiled again per crate and per side: fourteen builds of kube
//! here), so it is given the rustdoc JSON instead, built by [`rustdoc`] in two builds
//! that share the target directory.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::changelog::unreleased_entries;
use super::rustdoc;
use super::{Baseline, Workspace};
use crate::process::{cargo, run_checked};

const SEMVER_CHECKS: (&str, &str) = ("cargo-semver-checks", "0.51.0");

pub(super) fn check(workspace: &Workspace, baseline: &Baseline) -> Result<(), String> {
    crate::tools::ensure(SEMVER_CHECKS.0, SEMVER_CHECKS.1, "semver-checks")?;
    self_test()?;
    baseline.ensure_present()?;
    let target = PathBuf::from(
        workspace.metadata["target_directory"]
            .as_str()
            .ok_or("cargo metadata: no target_directory")?,
    );
    let libraries: Vec<&String> = workspace
        .published
        .iter()
        .filter(|n| workspace.crates[*n].is_library)
        .collect();
    let baseline_docs = rustdoc::baseline(&target, baseline, &libraries)?;
    let current_docs = rustdoc::current(&target, &libraries)?;
    let mut failed = Vec::new();
    for name in &libraries {
        let file = format!("{}.json", name.replace('-', "_"));
        let mut command = cargo();
        command
            .args(["semver-checks", "check-release", "--baseline-rustdoc"])
            .arg(baseline_docs.join(&file))
            .arg("--current-rustdoc")
            .arg(current_docs.join(&file));
        if let Err(e) = run_checked(&mut command) {
            failed.push(format!("{name}: {e}"));
        }
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{}\na breaking change since {} needs the version bump it names and a changelog \
             entry with its migration row (docs/versioning.md)",
            failed.join("\n"),
            baseline.version
        ))
    }
}

/// The check's own proof, on a crate of one function.
fn self_test() -> Result<(), String> {
    let dir = std::env::temp_dir().join(format!(
        "platform-client-semver-fixture-{}",
        std::process::id()
    ));
    let result = (|| {
        write_fixture(
            &dir.join("baseline"),
            "0.1.0",
            "pub fn greet(name: &str) -> String { format!(\"hello {name}\") }\n",
            "",
        )?;
        let breaking = "pub fn greet(name: &str, loud: bool) -> String {\n    let s = format!(\"hello {name}\");\n    if loud { s.to_uppercase() } else { s }\n}\n";
        let entry = "### Changed\n- `greet` takes `loud` (migration row \"greet\").\n";

        write_fixture(&dir.join("patch"), "0.1.1", breaking, "")?;
        let patch = fixture_verdict(&dir, "patch")?;
        write_fixture(&dir.join("minor"), "0.2.0", breaking, entry)?;
        let minor = fixture_verdict(&dir, "minor")?;
        match (patch, minor) {
            (
                Verdict {
                    semver_ok: false,
                    entries: 0,
                },
                Verdict {
                    semver_ok: true,
                    entries: 1,
                },
            ) => {
                eprintln!(
                    "xtask: semver self-test: the breaking fixture fails at 0.1.1 with no \
                     changelog entry and passes at 0.2.0 with one"
                );
                Ok(())
            }
            other => Err(format!(
                "the semver check's self-test went wrong (patch, minor): {other:?}; \
                 expected the breaking fixture refused at 0.1.1 and accepted at 0.2.0"
            )),
        }
    })();
    let _ = std::fs::remove_dir_all(&dir);
    result
}

#[derive(Debug)]
struct Verdict {
    semver_ok: bool,
    entries: usize,
}

fn fixture_verdict(dir: &Path, variant: &str) -> Result<Verdict, String> {
    let crate_dir = dir.join(variant);
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .current_dir(&crate_dir)
        .env("CARGO_TARGET_DIR", dir.join("target"))
        .args(["semver-checks", "check-release", "--baseline-root"])
        .arg(dir.join("baseline"))
        .status()
        .map_err(|e| format!("could not run cargo semver-checks: {e}"))?;
    let changelog = std::fs::read_to_string(crate_dir.join("CHANGELOG.md"))
        .map_err(|e| format!("fixture changelog: {e}"))?;
    Ok(Verdict {
        semver_ok: status.success(),
        entries: unreleased_entries(&changelog)?,
    })
}

fn write_fixture(dir: &Path, version: &str, lib: &str, entry: &str) -> Result<(), String> {
    let io = |e: std::io::Error| format!("{}: {e}", dir.display());
    std::fs::create_dir_all(dir.join("src")).map_err(io)?;
    std::fs::write(
        dir.join("Cargo.toml"),
        format!(
            "[package]\nname = \"semver-fixture\"\nversion = \"{version}\"\nedition = \"2024\"\n\
             description = \"fixture\"\nlicense = \"Apache-2.0\"\n\n[workspace]\n"
        ),
    )
    .map_err(io)?;
    std::fs::write(
        dir.join("src/lib.rs"),
        format!("//! fixture\n\n/// Greets.\n{lib}"),
    )
    .map_err(io)?;
    std::fs::write(
        dir.join("CHANGELOG.md"),
        format!("# Changelog\n\n## [Unreleased]\n\n{entry}\n## [0.1.0] - 2026-12-04\n- first\n"),
    )
    .map_err(io)?;
    Ok(())
}
