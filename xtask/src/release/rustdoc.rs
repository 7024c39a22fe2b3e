//! The rustdoc JSON of the published libraries, current and at the baseline, for
//! cargo-semver-checks.
//!
//! JSON output is unstable rustdoc: `RUSTC_BOOTSTRAP=1` is set for rustdoc alone (a
//! `RUSTDOC` wrapper), so the dependencies' build scripts that probe for a nightly
//! compiler see stable, and their artifacts in the shared target directory are reused.
//! The baseline's sources come from `git archive` of its commit; its crates carry the
//! baseline's version, so their artifacts never collide with the current ones.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::Baseline;
use crate::process::{cargo, run_checked, workspace_root};

/// Builds the current JSON; returns the directory of `<crate_name>.json` files.
pub(super) fn current(target: &Path, libraries: &[&String]) -> Result<PathBuf, String> {
    let out = target.join("semver-rustdoc/current");
    build(&mut cargo, target, libraries, &out)?;
    Ok(out)
}

/// Builds the baseline's JSON once per baseline commit (kept under the target
/// directory); returns its directory.
pub(super) fn baseline(
    target: &Path,
    baseline: &Baseline,
    libraries: &[&String],
) -> Result<PathBuf, String> {
    let out = target.join("semver-rustdoc").join(&baseline.commit);
    let done = out.join(".complete");
    if done.exists() {
        return Ok(out);
    }
    let sources = target.join("semver-rustdoc/sources").join(&baseline.commit);
    let _ = std::fs::remove_dir_all(&sources);
    std::fs::create_dir_all(&sources).map_err(|e| format!("{}: {e}", sources.display()))?;
    let archive = Command::new("git")
        .current_dir(workspace_root())
        .args(["archive", "--format=tar", &baseline.commit])
        .output()
        .map_err(|e| format!("could not run git archive: {e}"))?;
    if !archive.status.success() {
        return Err(format!(
            "git archive {} failed: {}",
            baseline.commit,
            String::from_utf8_lossy(&archive.stderr).trim()
        ));
    }
    let mut untar = Command::new("tar")
        .arg("-xf")
        .arg("-")
        .arg("-C")
        .arg(&sources)
        .stdin(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| format!("could not run tar: {e}"))?;
    if let Some(mut stdin) = untar.stdin.take() {
        std::io::Write::write_all(&mut stdin, &archive.stdout).map_err(|e| format!("tar: {e}"))?;
    }
    let status = untar.wait().map_err(|e| format!("tar: {e}"))?;
    if !status.success() {
        return Err(format!("unpacking the baseline's sources failed: {status}"));
    }
    let in_sources = || {
        let mut command = cargo();
        command.current_dir(&sources);
        command
    };
    build(&mut { in_sources }, target, libraries, &out)?;
    let _ = std::fs::remove_dir_all(&sources);
    std::fs::write(&done, "").map_err(|e| format!("{}: {e}", done.display()))?;
    Ok(out)
}

fn build(
    cargo: &mut dyn FnMut() -> Command,
    target: &Path,
    libraries: &[&String],
    out: &Path,
) -> Result<(), String> {
    std::fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    let wrapper = wrapper(target)?;
    for name in libraries {
        run_checked(
            cargo()
                .args(["rustdoc", "--quiet", "--lib", "--all-features", "-p", name])
                .args(["--", "-Z", "unstable-options", "--output-format", "json"])
                .env("CARGO_TARGET_DIR", target)
                .env("RUSTDOC", &wrapper),
        )?;
        let file = format!("{}.json", name.replace('-', "_"));
        std::fs::rename(target.join("doc").join(&file), out.join(&file))
            .map_err(|e| format!("moving {file} to {}: {e}", out.display()))?;
    }
    Ok(())
}

/// A `RUSTDOC` that is the toolchain's rustdoc with `RUSTC_BOOTSTRAP=1`.
fn wrapper(target: &Path) -> Result<PathBuf, String> {
    let sysroot = Command::new(std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into()))
        .args(["--print", "sysroot"])
        .output()
        .map_err(|e| format!("could not run rustc --print sysroot: {e}"))?;
    let rustdoc = Path::new(String::from_utf8_lossy(&sysroot.stdout).trim()).join("bin/rustdoc");
    let path = target.join("semver-rustdoc/rustdoc-json");
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\nRUSTC_BOOTSTRAP=1 exec '{}' \"$@\"\n",
            rustdoc.display()
        ),
    )
    .map_err(|e| format!("{}: {e}", path.display()))?;
    run_checked(Command::new("chmod").arg("+x").arg(&path))?;
    Ok(path)
}
