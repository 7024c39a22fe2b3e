//! `cargo xtask release-check`: what a release of the published crates must pass
//! (docs/versioning.md, "The checks").
//!
//! In order, cheapest first: the changelog entries, the declared minimum Rust
//! version, the docs (warnings as errors), the packages, each optional feature on its
//! own, a consumer workspace built from the packages alone, cargo-semver-checks
//! (after checking itself on a fixture), and cargo-release's dry run.
//!
//! CI runs four on every change ([`EVERY_CHANGE`], from `cargo xtask ci`): the
//! changelog, the MSRV, the docs and the packages. SemVer and the dry run need a
//! version bump to mean something; the features step builds each crate's dependency
//! graph under each of its feature sets (fifteen minutes of a cold CI run) and the
//! consumer build every dependency once more (ten). All four run when a release is
//! made (docs/decisions/release-checks-at-release.md).

mod changelog;
mod consumer;
mod features;
mod metadata;
mod msrv;
mod rustdoc;
mod semver;

use crate::process::{cargo, run_checked, workspace_root};

pub(crate) use metadata::Workspace;

const USAGE: &str = "usage: cargo xtask release-check [--only <step>[,<step>...]]

  steps: changelog, msrv, doc, package, features, consumer, semver, release";

const STEPS: [&str; 8] = [
    "changelog",
    "msrv",
    "doc",
    "package",
    "features",
    "consumer",
    "semver",
    "release",
];

/// The steps `cargo xtask ci` runs on every change: all but the feature sets, the
/// consumer build, cargo-semver-checks and cargo-release's dry run (the last two
/// compare against the last release and only mean something once `main`'s version
/// has been bumped for the next one; the first two are a cold run's longest builds).
pub(crate) const EVERY_CHANGE: [&str; 4] = ["changelog", "msrv", "doc", "package"];

/// The checks of every change (`cargo xtask ci`): [`EVERY_CHANGE`].
pub(crate) fn every_change() -> Result<(), String> {
    run(&["--only".to_owned(), EVERY_CHANGE.join(",")])
}

pub(crate) fn run(args: &[String]) -> Result<(), String> {
    let only = match args {
        [] => STEPS.to_vec(),
        [flag, list] if flag == "--only" => {
            let steps: Vec<&str> = list.split(',').map(str::trim).collect();
            if let Some(unknown) = steps.iter().find(|s| !STEPS.contains(s)) {
                return Err(format!("unknown step {unknown:?}\n{USAGE}"));
            }
            STEPS
                .iter()
                .copied()
                .filter(|s| steps.contains(s))
                .collect()
        }
        _ => return Err(USAGE.to_owned()),
    };
    let workspace = Workspace::read()?;
    let baseline = Baseline::read()?;
    eprintln!(
        "xtask: release-check of {} published crates at {} against the baseline {} ({})",
        workspace.published.len(),
        workspace.version,
        baseline.version,
        baseline.short()
    );
    for step in only {
        eprintln!("xtask: release-check step {step}");
        match step {
            "changelog" => changelog::check(&workspace, &baseline)?,
            "msrv" => msrv::check(&workspace)?,
            "doc" => doc(&workspace)?,
            "features" => features::check(&workspace)?,
            "package" => consumer::pack(&workspace).map(drop)?,
            "consumer" => consumer::check(&workspace)?,
            "semver" => semver::check(&workspace, &baseline)?,
            "release" => release_dry_run()?,
            _ => unreachable!("steps are checked above"),
        }
    }
    eprintln!("xtask: release-check passed");
    Ok(())
}

/// The last release: `release/baseline` holds "<version> <commit>".
pub(crate) struct Baseline {
    pub(crate) version: String,
    pub(crate) commit: String,
}

impl Baseline {
    fn read() -> Result<Self, String> {
        let path = workspace_root().join("release/baseline");
        let text = std::fs::read_to_string(&path).map_err(|e| {
            format!(
                "{}: {e} (docs/versioning.md, \"The baseline\")",
                path.display()
            )
        })?;
        let mut words = text.split_whitespace();
        match (words.next(), words.next(), words.next()) {
            (Some(version), Some(commit), None)
                if commit.len() == 40 && commit.bytes().all(|b| b.is_ascii_hexdigit()) =>
            {
                Ok(Self {
                    version: version.to_owned(),
                    commit: commit.to_owned(),
                })
            }
            _ => Err(format!(
                "{}: expected \"<version> <40-hex commit>\", found {:?}",
                path.display(),
                text.trim()
            )),
        }
    }

    fn short(&self) -> &str {
        &self.commit[..10]
    }

    /// The baseline commit must be in this clone's history (a shallow clone lacks it).
    pub(crate) fn ensure_present(&self) -> Result<(), String> {
        let present = std::process::Command::new("git")
            .current_dir(workspace_root())
            .args(["cat-file", "-e", &format!("{}^{{commit}}", self.commit)])
            .status()
            .map_err(|e| format!("could not run git: {e}"))?
            .success();
        if present {
            Ok(())
        } else {
            Err(format!(
                "the baseline commit {} (release/baseline) is not in this clone: \
                 a shallow clone? run `git fetch --unshallow`",
                self.commit
            ))
        }
    }
}

/// `cargo doc --no-deps` of the published crates, all features, warnings (broken
/// intra-doc links among them) as errors.
fn doc(workspace: &Workspace) -> Result<(), String> {
    let mut command = cargo();
    command.args(["doc", "--no-deps", "--all-features"]);
    for name in &workspace.published {
        command.args(["-p", name]);
    }
    run_checked(command.env("RUSTDOCFLAGS", "-D warnings"))
}

/// cargo-release's dry run (`release.toml`): what a release of the current version
/// would change, commit and tag. Never publishes, pushes or writes.
fn release_dry_run() -> Result<(), String> {
    crate::tools::ensure("cargo-release", "1.1.6", "release")?;
    run_checked(cargo().args([
        "release",
        "--workspace",
        "--no-publish",
        "--no-push",
        "--no-confirm",
        "--allow-branch",
        "*",
    ]))
}

#[cfg(test)]
mod tests {
    use super::{EVERY_CHANGE, STEPS};

    #[test]
    fn every_change_is_every_step_but_features_consumer_semver_and_the_dry_run() {
        let skipped: Vec<&str> = STEPS
            .iter()
            .copied()
            .filter(|s| !EVERY_CHANGE.contains(s))
            .collect();
        assert_eq!(skipped, ["features", "consumer", "semver", "release"]);
        assert!(EVERY_CHANGE.iter().all(|s| STEPS.contains(s)));
    }
}
