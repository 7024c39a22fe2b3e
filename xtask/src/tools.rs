//! Cargo subcommands the checks need, installed at a pinned version when missing
//! (as `.ci/run` installs cargo-deny): the newest releases may need a newer Rust than
//! this project's machines have.

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
    run_checked(Command::new(&cargo).args(["install", "--locked", &format!("{package}@{version}")]))
}
