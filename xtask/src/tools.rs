//! Cargo subcommands the checks need, installed at a pinned version when missing
//! (as `.ci/run` installs cargo-deny): the newest releases may need a newer Rust than
//! this project's machines have.
//!
//! They are built without their release profile's link-time optimisation:
//! cargo-semver-checks and cargo-release (like cargo-deny, which `.ci/run` installs
//! the same way) ask for LTO with one codegen unit, which on a 2-core machine makes
//! their first install the longest step of a cold CI run, for tools whose own speed
//! does not matter here.

use std::process::Command;

use crate::process::run_checked;

/// Makes sure `cargo <subcommand>` runs, installing `package@version` if not.
pub(crate) fn ensure(package: &str, version: &str, subcommand: &str) -> Result<(), String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let present = Command::new(&cargo)
        .args([subcommand, "--version"])
        .output()
        .is_ok_and(|o| o.status.success());
    if present {
        return Ok(());
    }
    eprintln!("xtask: installing {package} {version} (cargo {subcommand} is missing)");
    run_checked(
        Command::new(&cargo)
            .args(["install", "--locked", &format!("{package}@{version}")])
            .envs(QUICK_INSTALL),
    )
}

/// The profile overrides a tool's install is built with (what `.ci/run` sets for
/// cargo-deny too): no LTO, the default codegen units.
const QUICK_INSTALL: [(&str, &str); 2] = [
    ("CARGO_PROFILE_RELEASE_LTO", "off"),
    ("CARGO_PROFILE_RELEASE_CODEGEN_UNITS", "16"),
];
