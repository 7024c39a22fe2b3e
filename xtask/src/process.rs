//! Running the commands xtask drives: the workspace root, cargo, and a command
//! that must succeed.

use std::process::Command;

/// The workspace root: xtask lives one level below it.
pub(crate) fn workspace_root() -> std::path::PathBuf {
    let manifest_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest_dir
        .parent()
        .map(std::path::Path::to_path_buf)
        .unwrap_or_else(|| manifest_dir.to_path_buf())
}

pub(crate) fn cargo() -> Command {
    let mut command = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    command.current_dir(workspace_root());
    command
}

/// Runs a command, failing with the command line when it does not succeed.
pub(crate) fn run_checked(command: &mut Command) -> Result<(), String> {
    let shown = format!("{command:?}");
    eprintln!("xtask: running {shown}");
    let status = command
        .status()
        .map_err(|error| format!("could not start {shown}: {error}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{shown} failed with {status}"))
    }
}
